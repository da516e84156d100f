"""Shared fixtures: the repo, its modules, and scratch nbgrader courses."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests.variants` and the course packages, from any cwd

# nbgrader subprocesses run `alembic`: keep this interpreter's bin/ on PATH.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The course's default (course.setup()): 8 simulated CPU devices, fixed before any
# test imports JAX, so sharding tests run in-process whatever the test order.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")


def modules() -> list[str]:
    return sorted(p.name for p in (REPO / "source").glob("[0-9][0-9]_*") if p.is_dir())


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
