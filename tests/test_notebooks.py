"""Every module through plain nbgrader (the student's kernel path): source, release.

For each module in source/ this builds a scratch course (config + source), runs
`nbgrader generate_assignment`, then grades in ONE plain `nbgrader autograde` run (the
checks run in the notebook's own kernel, as in a student's JupyterLab):

- `solution`: the instructor's solutions          -> full marks on every test cell;
- `blank`: the release notebook as handed out      -> zero, and no kernel crash;
- `wrong00`: wrong variant 0 in every other exercise -> exactly those exercises score 0.

Every variant and mutant, judged both in the kernel and by the trusted grader, is in
tests/test_exercises.py.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import nbformat
import pytest

from grader.course import generate_release, make_scratch_course, run_nbgrader
from grader.tools.submission import build_submission, solution_ids, grade_cell_points, write_notebook
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
def graded(request, tmp_path_factory):
    """Grades every built submission of one module; returns scores per student."""
    module = request.param
    course = make_scratch_course(tmp_path_factory.mktemp(module), [module])
    generate_release(course, module)
    release_nb = nbformat.read(course / "release" / module / notebook_path(module).name,
                               as_version=4)
    source_nb = nbformat.read(notebook_path(module), as_version=4)
    sols = solution_ids(source_nb)
    points = grade_cell_points(source_nb)
    variants = load_variants(module)
    name = notebook_path(module).name
    expected: dict[str, dict[str, float]] = {}
    full = {t: p for t, p in points.items()}

    def add(student, nb, exp):
        write_notebook(nb, course / "submitted" / student / module / name)
        expected[student] = exp

    add("solution", build_submission(release_nb, source_nb=source_nb), full)
    add("blank", release_nb, {t: 0.0 for t in points})
    # A wrong answer in every other exercise: it costs exactly those exercises (the
    # variants one by one, both ways, are in tests/test_exercises.py).
    targets = [gid for i, gid in enumerate(sols) if i % 2 == 0]
    exp = dict(full)
    exp.update({f"test_{gid}": 0.0 for gid in targets})
    add("wrong00", build_submission(release_nb, source_nb=source_nb, replacements={
        gid: variants[gid]["wrong"][0][1] for gid in targets}), exp)
    proc = run_nbgrader(["autograde", module, "--force"], cwd=course, check=False)
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in expected:
            scores[student] = {t: gb.find_grade(t, name[:-6], module, student).score
                               for t in points}
    return {"course": course, "module": module, "expected": expected, "scores": scores,
            "log": proc.stdout + proc.stderr, "variants": variants, "name": name}


def _explain(g, student) -> str:
    lines = []
    for t, want in g["expected"][student].items():
        got = g["scores"][student][t]
        if got != want:
            gid = t[len("test_"):]
            why = ""
            if student.startswith("wrong"):
                k = int(student[-1])
                why = f" (wrong variant {k}: {g['variants'][gid]['wrong'][k][0]})" if want == 0 else ""
            lines.append(f"  {student}: {t} scored {got}, expected {want}{why}")
            lines.append(_cell_error(g, student, t))
    return "\n".join(lines)


def _cell_error(g, student, grade_id) -> str:
    path = g["course"] / "autograded" / student / g["module"] / g["name"]
    if not path.exists():
        return f"    (no autograded notebook for {student})"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            texts = [o.get("text", "") or "\n".join(o.get("traceback", [])[-3:])
                     for o in cell.outputs]
            return "    output: " + " | ".join(t.strip()[-600:] for t in texts)
    return "    (cell missing)"


@pytest.mark.parametrize("graded", PARAMS, indirect=True)
def test_autograde_scores(graded):
    problems = "\n".join(_explain(graded, s) for s in graded["expected"])
    assert not problems.strip(), f"scores differ from expectations:\n{problems}"


@pytest.mark.parametrize("graded", PARAMS, indirect=True)
def test_blank_release_runs_without_kernel_crash(graded):
    path = graded["course"] / "autograded" / "blank" / graded["module"] / graded["name"]
    nb = nbformat.read(path, as_version=4)
    enames = [o.get("ename") for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert enames, "the blank notebook raised nothing: are the stubs missing?"
    crashes = [e for e in enames if e in ("DeadKernelError", "CellTimeoutError")]
    assert not crashes, f"the blank notebook crashed the kernel: {crashes}"
    # Each unsolved exercise fails with the teaching message, not a bare traceback.
    messages = [o.get("evalue", "") for c in nb.cells for o in c.get("outputs", [])
                if o.get("output_type") == "error"]
    assert any("is not implemented yet" in m for m in messages), messages[:3]
    # Tracebacks show the student's and the test cell's lines, not the library's frames.
    tracebacks = ["\n".join(o.get("traceback", [])) for c in nb.cells for o in c.get("outputs", [])
                  if o.get("output_type") == "error" and o.get("ename") == "CheckFailure"]
    assert tracebacks and not any("autograder/_" in t for t in tracebacks), tracebacks[:1]


@pytest.mark.parametrize("module", PARAMS)
def test_validate_release_fails_every_graded_cell(module, tmp_path):
    """`nbgrader validate --invert` passes no cell; plain validate fails them all."""
    course = make_scratch_course(tmp_path, [module])
    generate_release(course, module)
    nb_path = course / "release" / module / notebook_path(module).name
    from nbgrader.validator import Validator

    inverted = Validator(invert=True).validate(str(nb_path))
    assert not inverted.get("passed"), f"cells pass on the blank notebook: {inverted.get('passed')}"
    failed = Validator().validate(str(nb_path)).get("failed", [])
    n_tests = len(grade_cell_points(nbformat.read(notebook_path(module), as_version=4)))
    assert len(failed) == n_tests, f"validate reported {len(failed)} failing cells, expected {n_tests}"


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
