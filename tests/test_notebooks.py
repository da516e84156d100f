"""Every module's release as nbgrader runs it in the student's kernel.

For each module in source/ this builds a scratch course (config + source), runs
`nbgrader generate_assignment`, then nbgrader's Validator (the Validate button): the
release notebook, as handed out, fails every test cell with the teaching "not
implemented yet" and no kernel crash. (The source notebook with every allowed answer,
test cells included, runs in tests/test_course_runs.py.) Also: sources
carry no outputs, the scaffold pairs solutions with tests, release/ is current.

Every variant and mutant, judged both in the kernel and by the trusted grader, is in
tests/test_exercises.py; the real pipeline (sandbox, judge, gradebook) is in
test_pipeline.py, test_corpus.py and test_new_exercise.py.
"""
from __future__ import annotations

import importlib
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.course import generate_release, make_scratch_course
from grader.tools.submission import grade_cell_points, solution_ids
from tests.conftest import REPO, modules

pytestmark = pytest.mark.notebook

MODULES = modules()
# One xdist group per module: its expensive steps share a worker (`make test` runs
# two workers), and different modules grade in parallel.
PARAMS = [pytest.param(m, marks=pytest.mark.xdist_group(m)) for m in MODULES]


def load_variants(module: str) -> dict:
    return importlib.import_module(f"tests.variants.{module}").VARIANTS


def notebook_path(module: str, folder: str = "source") -> Path:
    paths = sorted((REPO / folder / module).glob("*.ipynb"))
    assert len(paths) == 1, f"expected one notebook in {folder}/{module}, found {paths}"
    return paths[0]


@pytest.mark.parametrize("module", MODULES)
def test_source_notebook_has_no_outputs(module):
    nb = nbformat.read(notebook_path(module), as_version=4)
    dirty = [c.get("id") for c in nb.cells
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"source/{module} has outputs or execution counts in cells {dirty}: clear them"


@pytest.mark.parametrize("module", MODULES)
def test_scaffold(module):
    """Every solution cell has exactly one test cell `test_<id>`, and variants cover all."""
    nb = nbformat.read(notebook_path(module), as_version=4)
    sols = solution_ids(nb)
    tests = grade_cell_points(nb)
    assert len(sols) >= 5, f"{module}: only {len(sols)} graded exercises"
    assert sorted(tests) == sorted(f"test_{s}" for s in sols), (
        f"{module}: test cells {sorted(tests)} do not pair with solution cells {sols}")
    first = nb.cells[0] if nb.cells[0].cell_type == "code" else nb.cells[1]
    assert "course.setup()" in first.source and first.metadata["nbgrader"]["locked"], (
        f"{module}: the first code cell must be the locked `course.setup()` cell")
    variants = load_variants(module)
    assert sorted(variants) == sorted(sols), (
        f"tests/variants/{module}.py keys {sorted(variants)} != solution cells {sorted(sols)}")
    for gid, v in variants.items():
        assert len(v["correct"]) >= 2 and len(v["wrong"]) >= 2, f"{gid}: need 2 correct + 2 wrong"


@pytest.fixture(scope="module")
def validated(request, tmp_path_factory, course_kernel_env):
    """nbgrader's Validator (the Validate button) on the source and the release notebook."""
    from nbgrader.validator import Validator

    module = request.param
    # The committed release, copied (a run writes beside its notebook): it is what
    # `make release` generates (test_release_matches_make_release), so generating it
    # again here (6 s per module) would only repeat that test.
    folder = tmp_path_factory.mktemp(module) / module
    shutil.copytree(REPO / "release" / module, folder)
    name = notebook_path(module).name
    # One run: `nbgrader validate --invert` reports from the same execution what plain
    # validate does (the cells that passed), so every cell failing here is both. Its
    # kernel inherits this process's environment: the session's compilation cache.
    with pytest.MonkeyPatch.context() as env:
        for key, value in course_kernel_env.items():
            env.setenv(key, value)
        release = Validator().validate(str(folder / name))
    return {"module": module, "release": release,
            "tests": len(grade_cell_points(nbformat.read(notebook_path(module), as_version=4)))}


@pytest.mark.parametrize("validated", PARAMS, indirect=True)
def test_release_fails_every_graded_cell_and_teaches(validated):
    """The blank notebook: every graded cell fails (so `validate --invert` passes none),
    with the "not implemented yet" message, without a kernel crash or library frames."""
    failed = validated["release"].get("failed", [])
    assert len(failed) == validated["tests"], (
        f"validate reported {len(failed)} failing cells, expected {validated['tests']}")
    errors = [f["error"] for f in failed]
    assert all("is not implemented yet" in e for e in errors), errors[:2]
    assert not any("DeadKernelError" in e or "CellTimeoutError" in e for e in errors)
    assert not any(re.search(r"autograder/[\w/]*\.py", e) for e in errors), errors[:1]


def test_release_matches_make_release():
    """release/ is exactly what `make release` generates (CI fails on a stale copy)."""
    from grader.course import diff_trees

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        course = make_scratch_course(tmp, MODULES)
        problems = []
        for module in MODULES:
            problems += diff_trees(generate_release(course, module), REPO / "release" / module)
    assert not problems, "\n".join(problems) + "\nrun `make release` and commit release/"
