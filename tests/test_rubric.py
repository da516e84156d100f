"""Every rule a statement states is judged, and visible tests do not give the answer.

For each module: each exercise has a rubric, each rubric line quotes its statement and
names checks that its test cell calls, each requirement sentence of the statement is
bound to a rubric line (or declared not a rule), and no visible test writes out the
solution's own expressions. The machinery itself is tried on notebooks made here.
"""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from grader import rubric
from tests.conftest import REPO, modules


@pytest.mark.parametrize("module", modules())
def test_every_stated_requirement_has_a_check(module):
    found = [p for ex in rubric.load(module, REPO) for p in rubric.problems(ex)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("module", modules())
def test_visible_tests_do_not_copy_the_solution(module):
    found = [f"{ex.test_id}: the visible test writes out the solution's {copy!r}"
             for ex in rubric.load(module, REPO) for copy in rubric.visible_copies(ex)]
    assert not found, "\n".join(found)


def test_the_rubric_command_prints_every_exercise_with_its_checks_and_points():
    out = subprocess.run([sys.executable, "-m", "autograder", "rubric", "07_capstone"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].split() == ["exercise", "requirement", "checks", "points"]
    for ex in rubric.load("07_capstone", REPO):
        assert ex.solution_id.removeprefix("07_capstone_") in out
        for item in ex.items:
            assert item.requirement in out and all(c in out for c in item.checks)
    assert "07_capstone: 15 points" in out


# ---------------------------------------------------------------- the machinery

_STATEMENT = """## Exercise 1: halve (2 points)

Write `halve(x)` that returns `x / 2` for every entry. It must not change `x`, and
you must use `jnp.multiply`. The tests compare with a reference.

Without a Python loop, the program stays small.
"""
_SOLUTION = '''def halve(x):
    """Half of x. Never returns a copy of x."""
    ### BEGIN SOLUTION
    return jnp.multiply(x, 0.5) + jnp.zeros_like(x) * jnp.sum(x, axis=0)
    ### END SOLUTION

### BEGIN SOLUTION
halve = jax.jit(halve)
### END SOLUTION
'''


def _notebook(test: str) -> dict:
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell(_SOLUTION)
    solution.metadata["nbgrader"] = {"grade": False, "grade_id": "m_halve", "locked": False,
                                     "schema_version": 3, "solution": True, "task": False}
    cell = nbformat.v4.new_code_cell(test)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_m_halve", "locked": True,
                                 "points": 2, "schema_version": 3, "solution": False,
                                 "task": False}
    nb.cells = [nbformat.v4.new_markdown_cell("# Lessons\n\nYou must not read this."),
                nbformat.v4.new_markdown_cell(_STATEMENT), solution,
                nbformat.v4.new_code_cell("halve(jnp.ones(3))"), cell]
    return nb


_BOUND = '''# halve halves.
# rubric: "returns `x / 2` for every entry" -> assert_matches_reference
# rubric: "must not change x" -> assert_inputs_unchanged
# rubric: "you must use jnp.multiply" -> assert_uses_primitive
# rubric: "Never returns a copy" -> assert_matches_reference
# not a rule: "Without a Python loop, the program stays small" -- explains, asks nothing
assert_matches_reference(halve, lambda x: x / 2, (jnp.ones(3),))
assert_inputs_unchanged(halve, (jnp.ones(3),))
### BEGIN HIDDEN TESTS
assert_uses_primitive(halve, (jnp.ones(3),), "mul")
### END HIDDEN TESTS
'''


def test_a_bound_rubric_has_no_problems_and_reads_its_statement_only():
    (ex,) = rubric.exercises(_notebook(_BOUND))
    assert "You must not read this" not in ex.statement  # a lesson above the heading
    assert "Never returns a copy of x" in ex.statement  # the docstring is the statement too
    assert [i.checks for i in ex.items][:3] == [("assert_matches_reference",),
                                                 ("assert_inputs_unchanged",),
                                                 ("assert_uses_primitive",)]
    assert ex.points == 2 and rubric.problems(ex) == []


@pytest.mark.parametrize("change,problem", [
    ('# rubric: "must not change x" -> assert_inputs_unchanged\n',
     "a requirement with no check ('must'): 'It must not change"),
    ('# not a rule: "Without a Python loop, the program stays small" -- explains, asks nothing\n',
     "a requirement with no check ('without'): 'Without a Python loop"),
    ('assert_inputs_unchanged(halve, (jnp.ones(3),))\n', "which the test cell never calls"),
])
def test_an_unbound_requirement_or_an_uncalled_check_is_found(change, problem):
    (ex,) = rubric.exercises(_notebook(_BOUND.replace(change, "")))
    assert any(problem in p for p in rubric.problems(ex)), rubric.problems(ex)


def test_a_quote_that_the_statement_does_not_say_is_found():
    test = _BOUND.replace('"must not change x"', '"must not change y"')
    (ex,) = rubric.exercises(_notebook(test))
    assert any("which the statement does not say" in p for p in rubric.problems(ex))


def test_a_cell_without_a_rubric_is_found():
    (ex,) = rubric.exercises(_notebook("assert_matches_reference(halve, lambda x: x / 2, (1.0,))\n"))
    assert any("no rubric line" in p for p in rubric.problems(ex))


def test_a_visible_copy_of_the_solution_is_found_under_other_names():
    copied = _BOUND.replace("lambda x: x / 2",
                            "lambda v: jnp.multiply(v, 2.0) + jnp.zeros_like(v) * jnp.sum(v, axis=1)")
    (ex,) = rubric.exercises(_notebook(copied))
    assert rubric.visible_copies(ex) == [
        "jnp.multiply(x, 0.5) + jnp.zeros_like(x) * jnp.sum(x, axis=0)"]
    # In the hidden part a reference may say anything.
    hidden = _BOUND.replace("### BEGIN HIDDEN TESTS\n", "### BEGIN HIDDEN TESTS\n_ref = lambda v: "
                            "jnp.multiply(v, 0.5) + jnp.zeros_like(v) * jnp.sum(v, axis=0)\n")
    (ex,) = rubric.exercises(_notebook(hidden))
    assert rubric.visible_copies(ex) == []
