"""Every notebook runs top to bottom with every answer its exercises allow.

For each module, one fresh kernel (nbclient, 8 simulated CPU devices through
``course.setup()``) runs the source notebook with the instructor's solutions, and one
more runs it with correct variant ``k`` of EVERY exercise in place at once, for
``k = 0, 1, ...`` up to the largest number of correct variants any exercise has (an
exercise with fewer keeps the instructor's solution). So a lesson cell after an
exercise must survive every allowed answer: a step that donates its inputs, a
function returned jitted or not, a Counter instead of a dict. A variant run executes
what its answers reach (the lesson cells that read them, and what those need, as the
grader's lesson analysis decides it); the lessons no answer reaches run the same in
every run, so the solution run is where they run (variant runs took half the time).

With the variants, a graded test cell that reads another exercise's names (a name
bound by another solution cell that holds a variant in this run) runs too, hidden tests
included, in a namespace of its own (a copy of the notebook's globals), as the trusted
grader runs it: one exercise's correct answer must not fail another's test. The other
test cells are left empty: tests/test_exercises.py runs each exercise's test cell on each
of its variants with the instructor's solutions elsewhere (and the reference run, on the
solutions), so here they would only repeat that. Empty test cells also mean a lesson
cell that reads a name only a test cell defines fails here. Any error fails the run and
names the cell.

Variants live in tests/variants/<module>.py (VARIANTS keyed by grade_id). Each
(module, k) is its own test, so `pytest -n 2` runs two kernels at a time.
"""
from __future__ import annotations

import ast
import importlib
import os
import re
from pathlib import Path

import nbformat
import pytest

from grader.kernels import private_sockets
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
    """Every module's solution run first, then every variant run: a variant run loads
    from the session's compilation cache what its module's solution run compiled
    (tests/conftest.py's course_kernel_env), and xdist hands tests out in this order."""
    largest = {module: max((len(v["correct"]) for v in load_variants(module).values()),
                           default=0) for module in modules()}
    params = []
    for k in [None, *range(max(largest.values(), default=0))]:
        for module in modules():
            if k is None or k < largest[module]:
                label = "solution" if k is None else f"correct{k}"
                params.append(pytest.param(module, k, id=f"{module}-{label}"))
    return params


def _isolated(source: str, grade_id: str) -> str:
    """A test cell's code, run in a copy of the notebook's namespace."""
    return (f"__test_namespace = dict(globals())\n"
            f"exec(compile({source!r}, {grade_id!r}, 'exec'), __test_namespace)\n"
            f"del __test_namespace")


def _bound_names(source: str) -> set[str]:
    """The names a cell binds at its top level (defs, classes, assignments; not its
    imports: a variant that imports jax.numpy as jnp does not make jnp its answer)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        else:
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            for target in filter(None, targets):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _read_names(source: str) -> set[str]:
    """The names a cell reads from the notebook: every name it loads, less the ones it
    binds itself anywhere (assignments, loop variables, parameters, local defs) and `_`."""
    nodes = list(ast.walk(ast.parse(source)))
    own = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    own |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    own |= {n.name for n in nodes
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own - {"_"}


def build_run(module: str, k: int | None):
    """The source notebook with answer ``k`` in every solution cell; the test cells that
    read another exercise's variant isolated, the others empty (``k=None``: the
    instructor's solutions, every test cell empty).

    Returns ``(notebook, {grade_id: "solution" | "correct k"})``.
    """
    return _build(nbformat.read(source_notebook(module), as_version=4),
                  load_variants(module), k)


def _build(nb, variants: dict, k: int | None):
    used, varied = {}, {}
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if _is_solution(cell):
            gid = meta["grade_id"]
            correct = variants.get(gid, {}).get("correct", [])
            if k is not None and k < len(correct):
                varied[gid] = _bound_names(correct[k])
                cell.source = correct[k]
                used[gid] = f"correct {k}"
            else:
                used[gid] = "solution"
    # What each varied answer reaches: its names, and the names of every later lesson cell
    # that reads one of them (`step = make_train_step(...)`), in notebook order.
    reach = {g: set(names) for g, names in varied.items()}
    readers: set[int] = set()  # the lesson cells that read a varied answer
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and not _is_test(cell) and not _is_solution(cell):
            try:
                read, bound = _read_names(cell.source), _bound_names(cell.source)
            except SyntaxError:  # IPython magics: nothing of an answer flows through them
                continue
            for names in reach.values():
                if read & names:
                    names |= bound
                    readers.add(index)
    for cell in nb.cells:
        if not _is_test(cell):
            continue
        gid = _nbgrader(cell)["grade_id"]
        others = set().union(*(names for g, names in reach.items() if f"test_{g}" != gid))
        # Cross-exercise reads only: each test cell on its own exercise's variants is
        # tests/test_exercises.py's, and the hidden tests were most of a run's time
        # (01_grad: 25 of 39 s).
        if _read_names(cell.source) & others:
            cell.source = _isolated(cell.source, gid)
        else:
            cell.source = ""
    if k is not None:
        _leave_out_the_rest(nb, varied, readers)
    return nb, used


def _leave_out_the_rest(nb, varied: dict, readers: set[int]) -> None:
    """Empties the code cells that nothing a variant reaches needs.

    What runs: the setup cell, the varied solution cells, the lesson cells that read
    what a variant binds (directly or through another lesson), the isolated test cells,
    and every cell these need, as the grader decides it for a graded run
    (:func:`grader.lessons.needed_cells`: a cell that binds a name they read, may change
    an object they read, or changes state beyond its names). A lesson that reads no
    answer runs the same in every run, so the solution run (``k=None``, every cell) is
    where it runs; most of each variant run was such lessons (plots, timings, demos).
    """
    from grader.lessons import needed_cells

    roots = {i for i, c in enumerate(nb.cells)
             if (_is_solution(c) and _nbgrader(c)["grade_id"] in varied)
             or (_is_test(c) and c.source) or i in readers}
    # Roots are marked as test cells for the analysis, which always runs those (as a
    # solution cell, a root would make the plain cell after it a try-it cell, never run).
    root_meta = {"nbgrader": {"solution": False, "grade": True, "grade_id": "root"}}
    analysed = [{**c, "metadata": root_meta if i in roots else {},
                 "source": "" if _is_test(c) and not c.source else c.source}
                for i, c in enumerate(nb.cells)]
    keep, gave_up = needed_cells({**nb, "cells": analysed})
    if gave_up:
        return
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and i not in keep:
            cell.source = ""


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
def test_notebook_runs_top_to_bottom(module, k, tmp_path, course_kernel_env):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb, used = build_run(module, k)
    if k is not None and all(v == "solution" for v in used.values()):
        pytest.skip(f"no exercise of {module} has a correct variant {k}")
    try:
        with private_sockets() as sockets:
            NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", config=sockets,
                           allow_errors=False,
                           resources={"metadata": {"path": str(tmp_path)}}).execute(
                env={**os.environ, **course_kernel_env})
    except CellExecutionError:
        answers = ", ".join(f"{gid}: {what}" for gid, what in used.items())
        pytest.fail(f"{module} does not run top to bottom with these answers ({answers}):\n"
                    f"{_first_error(nb)}", pytrace=False)


def test_build_run_puts_variant_k_everywhere_and_empties_tests():
    module = modules()[0]
    nb, used = build_run(module, 0)
    variants = load_variants(module)
    sols = {_nbgrader(c)["grade_id"]: c.source for c in nb.cells if _is_solution(c)}
    assert sols and all(sols[g] == variants[g]["correct"][0] for g in sols if g in variants)
    assert all(v == "correct 0" for g, v in used.items() if variants.get(g, {}).get("correct"))
    for k in (None, 0):
        run, _ = build_run(module, k)
        assert all(c.source == "" for c in run.cells if _is_test(c))


def cell(source, **nbgrader):
    """A code cell with ``nbgrader`` metadata when given."""
    c = nbformat.v4.new_code_cell(source)
    if nbgrader:
        c.metadata["nbgrader"] = nbgrader
    return c


def test_a_test_that_reads_another_exercise_runs_isolated():
    nb = nbformat.v4.new_notebook(cells=[
        cell("def f(x):\n    return x\n", solution=True, grade=False, grade_id="a"),
        cell("f(1)\n", solution=False, grade=True, grade_id="test_a"),
        cell("g = f(2) + 1\n"),  # a lesson: g carries a's answer
        cell("def h(x):\n    return 2 * x\n", solution=True, grade=False, grade_id="b"),
        cell("h(g)\n", solution=False, grade=True, grade_id="test_b"),
        cell("f = lambda x: x\nf(3)\n", solution=False, grade=True, grade_id="test_c"),
    ])
    variants = {"a": {"correct": ["def f(x):\n    return x + 0\n"], "wrong": []}}
    run, used = _build(nbformat.from_dict(nb), variants, 0)
    assert used == {"a": "correct 0", "b": "solution"}
    tests = {_nbgrader(c)["grade_id"]: c.source for c in run.cells if _is_test(c)}
    # test_b reads g, which a lesson computed from a's variant: it runs, isolated.
    assert tests["test_b"].startswith("__test_namespace = dict(globals())")
    assert repr("h(g)\n") in tests["test_b"]
    # test_a on a's own variant is tests/test_exercises.py's; test_c binds its own f.
    assert tests["test_a"] == "" and tests["test_c"] == ""
    solution_run, _ = _build(nbformat.from_dict(nb), variants, None)
    assert all(c.source == "" for c in solution_run.cells if _is_test(c))


def test_a_variant_run_leaves_out_only_what_no_answer_reaches():
    nb = nbformat.v4.new_notebook(cells=[
        cell("import course\ncourse.setup()\n"),
        cell("scale = 3\n"),                                 # read by a reader: runs
        cell("import matplotlib\nplot = 'a demo'\n"),        # nothing reads it: left out
        cell("def f(x):\n    return x\n", solution=True, grade=False, grade_id="a"),
        cell("f(1)\n", solution=False, grade=True, grade_id="test_a"),
        cell("shown = f(scale)\n"),                          # reads a's answer: runs
        cell("print(shown)\n"),                              # reads what it bound: runs
        cell("import jax\njax.config.update('jax_enable_x64', False)\n"),  # state: runs
        cell("print('the end')\n"),                          # left out
    ])
    variants = {"a": {"correct": ["def f(x):\n    return x + 0\n"], "wrong": []}}
    run, _ = _build(nbformat.from_dict(nb), variants, 0)
    ran = [i for i, c in enumerate(run.cells) if c.source]
    assert ran == [0, 1, 3, 5, 6, 7], ran
    solution_run, _ = _build(nbformat.from_dict(nb), variants, None)
    assert [i for i, c in enumerate(solution_run.cells) if c.source] == [0, 1, 2, 3, 5, 6, 7, 8]
