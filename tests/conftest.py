"""Shared fixtures: the repo, its modules, and scratch nbgrader courses."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests.variants` and the course packages, from any cwd

from grader.sandbox.bwrap import GRADING_XLA_FLAGS  # noqa: E402 - imports no JAX

# nbgrader subprocesses run `alembic`: keep this interpreter's bin/ on PATH.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The course's default (course.setup()): 8 simulated CPU devices, fixed before any
# test imports JAX, so sharding tests run in-process whatever the test order.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
# The tests' own JAX compiles as the grading sandboxes do (XLA:CPU's backend at -O0,
# grader/sandbox/bwrap.py's GRADING_XLA_FLAGS: the same HLO, fusions and buffers that
# the checks read, compiled sooner): the checks' unit tests compile thousands of small
# programs (the liveness probes' instrumented copies most). Measured on the 2-core VM,
# the tests outside `notebook` and `browser`, two workers: 280 s -> 236 s (CPU 517 ->
# 420 s). The kernels that run the course's own notebooks keep XLA's default, as
# students' do (course_kernel_env); a user's own XLA_FLAGS are left as they are.
_USER_XLA_FLAGS = os.environ.get("XLA_FLAGS", "")
os.environ.setdefault("XLA_FLAGS", GRADING_XLA_FLAGS)


def modules() -> list[str]:
    return sorted(p.name for p in (REPO / "source").glob("[0-9][0-9]_*") if p.is_dir())


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def course_kernel_env(tmp_path_factory) -> dict[str, str]:
    """What to add to the environment of a kernel that runs the course's own notebooks
    (solutions, variants, blank releases; never a submission): JAX's persistent
    compilation cache in one folder for the whole session, shared by the xdist workers.
    Every run of a module compiles the same lessons; with the cache the first run
    compiles them and the others load them (08_autodiff's variant run: 27.8 s cold,
    15.2 s after the solution run). The in-process JAX of the tests does not use it.
    XLA's flags are the user's, not the tests' -O0: the course runs as students run it."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base temp is a folder of the session's; without it the
    # parent is pytest's folder of every session, which nothing cleans.
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "course-jax-cache"
    cache.mkdir(exist_ok=True)
    from grader.sandbox.bwrap import compilation_cache_env

    return {**compilation_cache_env(cache), "XLA_FLAGS": _USER_XLA_FLAGS}


# ---------------------------------------------------------------- system packages
# A fresh clone needs only python3.12 and make. Tests that need a system package
# skip with one line naming it ("needs PACKAGE: what to do"), and the run ends with
# how many were skipped for each (CI installs them all and runs everything).
SYSTEM_PACKAGES = {"bubblewrap": "the grading sandbox", "postgresql": "a PostgreSQL gradebook",
                   "chromium": "the browser tests", "npm": "the JupyterHub test (make hub's proxy)"}


def missing_sandbox() -> str | None:
    """The skip reason of a test that needs a working bubblewrap; None when it works."""
    from grader.sandbox import bwrap

    path, problem = bwrap.probe()
    return None if path else f"needs bubblewrap: {problem}"


def _skipped_for_packages(reports) -> dict[str, int]:
    counts = dict.fromkeys(SYSTEM_PACKAGES, 0)
    for report in reports:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        for package in SYSTEM_PACKAGES:
            if f"needs {package}:" in reason:
                counts[package] += 1
    return {p: n for p, n in counts.items() if n}


def pytest_terminal_summary(terminalreporter):
    counts = _skipped_for_packages(terminalreporter.stats.get("skipped", []))
    if counts:
        total = sum(counts.values())
        each = ", ".join(f"{p} ({SYSTEM_PACKAGES[p]}): {n}" for p, n in counts.items())
        terminalreporter.write_line(
            f"{total} test(s) skipped for missing system packages: {each}. "
            f"Install them to run everything: apt-get install {' '.join(counts)}")
        if os.environ.get("CI") == "true":
            terminalreporter.write_line("CI=true: .ci/run installs them, so this run fails.")


def pytest_sessionfinish(session, exitstatus):
    """On CI (CI=true), which installs them all, a test skipped for one fails the run:
    a green CI must not hide a missing install step."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get("CI") != "true" or reporter is None or hasattr(session.config, "workerinput"):
        return
    if _skipped_for_packages(reporter.stats.get("skipped", [])):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ---------------------------------------------------------------- xdist groups
# The expensive module fixtures (a module's variants and mutants, the corpus, the hub)
# are built once per xdist group. pytest-xdist 3.8 passes the group to its scheduler
# by rewriting the node id's ``_nodeid``; pytest 9.2 keeps node ids elsewhere, so the
# groups are lost without a word and each worker builds the same fixtures again
# (pytest-dev/pytest-xdist#1386). Refuse that pair rather than run twice the work.
def pytest_configure(config):
    if getattr(config.option, "dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    import inspect
    from importlib.metadata import version

    from _pytest import nodes

    xdist = tuple(int(p) for p in version("pytest-xdist").split(".")[:2])
    if xdist <= (3, 8) and "_nodeid" not in inspect.getsource(nodes.Node.nodeid.fget):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist {version('pytest-xdist')} ignores "
            "xdist_group under --dist loadgroup (pytest-dev/pytest-xdist#1386): install the "
            "versions in requirements.txt (make venv), or run with -n0")
