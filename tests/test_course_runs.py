"""Every notebook runs top to bottom with every answer its exercises allow.

For each module, one fresh kernel (nbclient, 8 simulated CPU devices through
``course.setup()``) runs the source notebook with the instructor's solutions, and one
more runs it with correct variant ``k`` of EVERY exercise in place at once, for
``k = 0, 1, ...`` up to the largest number of correct variants any exercise has (an
exercise with fewer keeps the instructor's solution). So a lesson cell after an
exercise must survive every allowed answer: a step that donates its inputs, a
function returned jitted or not, a Counter instead of a dict.

With the variants, graded test cells run too, hidden tests included, but each in a
namespace of its own (a copy of the notebook's globals), as the trusted grader runs
them: one exercise's correct answer must not fail another's test, and a lesson cell
that reads a name only a test cell defines fails here. With the instructor's
solutions the test cells are left empty (the reference run of tests/test_exercises.py
runs them). Any error fails the run and names the cell.

Variants live in tests/variants/<module>.py (VARIANTS keyed by grade_id). Each
(module, k) is its own test, so `pytest -n 2` runs two kernels at a time.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO, modules

pytestmark = pytest.mark.notebook

# Per cell: generous, because this 2-core machine is shared; the bench measures speed.
CELL_TIMEOUT_S = 300


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _is_solution(cell) -> bool:
    meta = _nbgrader(cell)
    return cell.cell_type == "code" and bool(meta.get("solution")) and not meta.get("grade")


def _is_test(cell) -> bool:
    meta = _nbgrader(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def source_notebook(module: str) -> Path:
    paths = sorted((REPO / "source" / module).glob("*.ipynb"))
    assert len(paths) == 1, f"expected one notebook in source/{module}, found {paths}"
    return paths[0]


def load_variants(module: str) -> dict:
    return importlib.import_module(f"tests.variants.{module}").VARIANTS


def _runs() -> list:
    params = []
    for module in modules():
        variants = load_variants(module)
        largest = max((len(v["correct"]) for v in variants.values()), default=0)
        for k in [None, *range(largest)]:
            label = "solution" if k is None else f"correct{k}"
            params.append(pytest.param(module, k, id=f"{module}-{label}"))
    return params


def _isolated(source: str, grade_id: str) -> str:
    """A test cell's code, run in a copy of the notebook's namespace."""
    return (f"__test_namespace = dict(globals())\n"
            f"exec(compile({source!r}, {grade_id!r}, 'exec'), __test_namespace)\n"
            f"del __test_namespace")


def build_run(module: str, k: int | None):
    """The source notebook with answer ``k`` in every solution cell; test cells isolated
    (``k=None``: the instructor's solutions, test cells empty).

    Returns ``(notebook, {grade_id: "solution" | "correct k"})``.
    """
    nb = nbformat.read(source_notebook(module), as_version=4)
    variants = load_variants(module)
    used = {}
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if _is_solution(cell):
            gid = meta["grade_id"]
            correct = variants.get(gid, {}).get("correct", [])
            if k is not None and k < len(correct):
                cell.source = correct[k]
                used[gid] = f"correct {k}"
            else:
                used[gid] = "solution"
        elif _is_test(cell) and k is None:
            # The instructor's solutions pass every test cell in the reference run
            # (grader.runner.reference_results, made for every module by
            # tests/test_exercises.py, test cells isolated as here); this run checks
            # the lessons, and their hidden tests took most of its time (01_grad: 25 of 39 s).
            cell.source = ""
        elif _is_test(cell):
            cell.source = _isolated(cell.source, meta["grade_id"])
    return nb, used


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_error(nb) -> str:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = _ANSI.sub("", "\n".join(out.get("traceback", [])[-4:]))
                return (f"cell {cell.get('id')}: {out.get('ename')}: {out.get('evalue')}\n"
                        f"--- the cell ---\n{cell.source}\n--- traceback ---\n{tb}")
    return "(no error output recorded)"


@pytest.mark.parametrize("module, k", _runs())
def test_notebook_runs_top_to_bottom(module, k, tmp_path):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb, used = build_run(module, k)
    if k is not None and all(v == "solution" for v in used.values()):
        pytest.skip(f"no exercise of {module} has a correct variant {k}")
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            allow_errors=False, resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellExecutionError:
        answers = ", ".join(f"{gid}: {what}" for gid, what in used.items())
        pytest.fail(f"{module} does not run top to bottom with these answers ({answers}):\n"
                    f"{_first_error(nb)}", pytrace=False)


def test_build_run_puts_variant_k_everywhere_and_isolates_tests():
    module = modules()[0]
    nb, used = build_run(module, 0)
    variants = load_variants(module)
    sols = {_nbgrader(c)["grade_id"]: c.source for c in nb.cells if _is_solution(c)}
    assert sols and all(sols[g] == variants[g]["correct"][0] for g in sols if g in variants)
    assert all(v == "correct 0" for g, v in used.items() if variants.get(g, {}).get("correct"))
    tests = [c.source for c in nb.cells if _is_test(c)]
    assert tests and all(t.startswith("__test_namespace = dict(globals())") for t in tests)
    # The isolated cell still holds the test code, hidden part included.
    original = nbformat.read(source_notebook(module), as_version=4)
    first = next(c.source for c in original.cells if _is_test(c))
    assert repr(first) in tests[0]
    solution_run, _ = build_run(module, None)
    assert all(c.source == "" for c in solution_run.cells if _is_test(c))
