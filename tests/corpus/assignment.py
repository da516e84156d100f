"""A three-exercise assignment, ``00_corpus``, for grading adversarial submissions fast.

It has what a course notebook has that matters to grading (a locked setup cell,
solution cells, test cells with hidden tests, a try-it cell) and imports JAX, but
runs in seconds. The third exercise is graded on facts about compiled code (jitted,
compiles once, one copy of the loop body in its program), so forged facts can be
tried on it.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

NAME = "00_corpus"


def _meta(grade_id, *, grade=False, solution=False, locked=False, points=0):
    return {"nbgrader": {"grade": grade, "grade_id": grade_id, "locked": locked,
                         "points": points, "schema_version": 3, "solution": solution,
                         "task": False}}


def _code(source, **meta):
    cell = nbformat.v4.new_code_cell(source)
    if meta:
        cell.metadata.update(_meta(**meta))
    return cell


SOLUTIONS = {
    "corpus_add": "def add(x, y):\n    \"\"\"x + y for two arrays of the same shape.\"\"\"\n"
                  "    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n",
    "corpus_norm2": "def norm2(x):\n    \"\"\"The Euclidean norm of x.\"\"\"\n"
                    "    ### BEGIN SOLUTION\n    return jnp.sqrt(jnp.sum(x ** 2))\n"
                    "    ### END SOLUTION\n",
    "corpus_halve": "from functools import partial\n"
                    "@partial(jax.jit, static_argnums=1)\n"
                    "def halve(x, n):\n    \"\"\"x halved n times, with a loop that compiles as a loop.\"\"\"\n"
                    "    ### BEGIN SOLUTION\n"
                    "    return jax.lax.fori_loop(0, n, lambda i, v: v / 2, x)\n"
                    "    ### END SOLUTION\n",
}
HALVE_TEST = (
    "from autograder import (assert_compiles_at_most, assert_jitted, assert_matches_reference,\n"
    "                        assert_stablehlo_op_count)\n"
    "_x = jnp.arange(4.0)\n"
    "assert_jitted(halve)\n"
    "assert_matches_reference(halve, lambda x, n: x / 2.0 ** n, (_x, 3))\n"
    "### BEGIN HIDDEN TESTS\n"
    "_xh = jnp.linspace(-3.0, 5.0, 7)\n"
    "assert_matches_reference(halve, lambda x, n: x / 2.0 ** n, (_xh, 0))\n"
    "assert_compiles_at_most(halve, [(_xh, 5), (_xh, 5), (_xh, 5)], 1)\n"
    "assert_stablehlo_op_count(halve, (_xh, 40), 'divide', at_most=2,\n"
    "                          hint='the loop was unrolled: one divide per step')\n"
    "### END HIDDEN TESTS\n")



def source_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [
        _code("import numpy as np\nimport jax\nimport jax.numpy as jnp\n",
              grade_id="setup", locked=True),
        nbformat.v4.new_markdown_cell("## Exercise 1: add (1 point)"),
        _code(SOLUTIONS["corpus_add"], grade_id="corpus_add", solution=True),
        _code("from autograder import assert_matches_reference\n"
              "assert_matches_reference(add, lambda x, y: x + y, (jnp.ones(3), jnp.arange(3.0)))\n"
              "### BEGIN HIDDEN TESTS\n"
              "assert_matches_reference(add, lambda x, y: x + y, (jnp.full(4, 2.0), jnp.arange(4.0)))\n"
              "### END HIDDEN TESTS\n",
              grade_id="test_corpus_add", grade=True, locked=True, points=1),
        nbformat.v4.new_markdown_cell("## Exercise 2: norm2 (1 point)"),
        _code(SOLUTIONS["corpus_norm2"], grade_id="corpus_norm2", solution=True),
        _code("from autograder import assert_matches_reference\n"
              "assert_matches_reference(norm2, lambda x: jnp.float32(5.0), (jnp.array([3.0, 4.0]),))\n"
              "### BEGIN HIDDEN TESTS\n"
              "assert_matches_reference(norm2, lambda x: jnp.linalg.norm(x), (jnp.arange(5.0),),"
              " rtol=1e-5)\n"
              "### END HIDDEN TESTS\n",
              grade_id="test_corpus_norm2", grade=True, locked=True, points=1),
        _code("# Try it:\nprint(add(jnp.ones(2), jnp.ones(2)))\n"),
        nbformat.v4.new_markdown_cell("## Exercise 3: halve (1 point)"),
        _code(SOLUTIONS["corpus_halve"], grade_id="corpus_halve", solution=True),
        _code(HALVE_TEST, grade_id="test_corpus_halve", grade=True, locked=True, points=1),
    ]
    return nb


def write_source(course: Path) -> Path:
    path = Path(course) / "source" / NAME / f"{NAME}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(source_notebook(), str(path))
    return path
