"""Which lesson cells a graded run executes (grader/lessons.py): every lesson something
graded depends on runs, the others are left out."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from grader import notebook as _nb
from grader.lessons import needed_cells
from grader.runner import sandbox_notebook

ROOT = Path(__file__).resolve().parents[1]


def _notebook(lessons: list[str], solution: str = "def f(x):\n    return x\n",
              test: str = "assert_matches_reference(f, lambda x: x, (x_data,))\n",
              after: list[str] = ()) -> dict:
    """setup, the lessons, a solution cell, its try-it cell, its test cell, more lessons."""
    setup = nbformat.v4.new_code_cell("import course\ncourse.setup()\n")
    sol = nbformat.v4.new_code_cell(solution)
    sol.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "m_f"}
    try_it = nbformat.v4.new_code_cell("print(f(heavy_example))\n")
    tc = nbformat.v4.new_code_cell("from autograder import assert_matches_reference\n" + test)
    tc.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_m_f",
                               "points": 1}
    nb = nbformat.v4.new_notebook()
    nb.cells = ([setup] + [nbformat.v4.new_code_cell(s) for s in lessons] + [sol, try_it, tc]
                + [nbformat.v4.new_code_cell(s) for s in after])
    return json.loads(nbformat.writes(nb))


def _lessons_run(nb: dict) -> list[int]:
    """The indices (1-based, among the lessons before the solution) of the lessons run."""
    keep, _ = needed_cells(nb)
    return sorted(i for i in keep if 0 < i < len(nb["cells"]) - 3)


BASE = "import jax.numpy as jnp\nx_data = jnp.ones(3)\n"


@pytest.mark.parametrize("lesson, runs", [
    # left out: nothing graded reads what they make
    ("import matplotlib.pyplot as plt\nplt.plot(x_data)\nplt.show()\n", False),
    ("heavy_example = jnp.ones((1000, 1000)) @ jnp.ones((1000, 1000))\n", False),
    ("print([float(v) for v in x_data])\n", False),
    ("def helper(x):\n    out = []\n    out.append(x)\n    return out\nhelper(x_data)\n", False),
    ("try:\n    1 / 0\nexcept ZeroDivisionError as err:\n    print(err)\n", False),
    ("y = x_data.at[0].set(2.0)\nprint(y.sum())\n", False),
    ("with jax.enable_x64(True):\n    print(x_data)\n", False),
    ("import tempfile\nfolder = tempfile.mkdtemp()\n", False),
    ("print(open('notes.txt').read())\n", False),
    # run: they bind or change what the test reads, or change state beyond their names
    ("x_data = x_data * 2\n", True),
    ("x_data.sort()\n", True),
    ("import numpy as np\nnp.copyto(x_data, 0, casting='unsafe')\nnp.add(x_data, 1, out=x_data)\n",
     True),
    ("def fill(a):\n    a[0] = 1\nfill(x_data)\n", True),
    ("jax.config.update('jax_enable_x64', True)\n", True),
    ("jax.set_mesh(mesh)\n", True),
    ("jnp.sum = lambda x: 0\n", True),
    ("import numpy as np\nnp.random.seed(0)\n", True),
    ("import logging\nlogging.getLogger('jax').addHandler(logging.NullHandler())\n", True),
    ("jax.tree_util.register_pytree_node(Box, flatten, unflatten)\n", True),
    ("open('data.txt', 'w').write('1')\n", True),
    ("import os\nos.environ['JAX_PLATFORMS'] = 'cpu'\n", True),
    ("exec('x = 1')\n", True),
    ("%timeit jnp.ones(3)\n", True),
])
def test_a_lesson_runs_only_when_something_graded_may_depend_on_it(lesson, runs):
    nb = _notebook([BASE, lesson])
    assert _lessons_run(nb) == ([1, 2] if runs else [1]), lesson


def test_what_a_solution_reads_runs_for_that_submission_only():
    lessons = [BASE, "def helper(x):\n    return 2 * x\n", "scale = 3.0\n"]
    honest = _notebook(lessons)
    assert _lessons_run(honest) == [1]
    uses_both = _notebook(lessons, solution="def f(x):\n    return helper(x) * scale\n")
    assert _lessons_run(uses_both) == [1, 2, 3]


def test_a_function_reads_the_globals_of_its_cell_when_it_runs():
    # the test calls a lesson's function, whose body reads another lesson's value
    nb = _notebook([BASE, "offset = 1.0\n", "def shift(x):\n    return x + offset\n"],
                   test="assert_matches_reference(f, shift, (x_data,))\n")
    assert _lessons_run(nb) == [1, 2, 3]


def test_scope_rules_parameters_and_comprehension_variables_are_not_globals():
    # x is a parameter and a comprehension variable here: the lesson binding a global
    # x is not needed
    nb = _notebook([BASE, "x = jnp.zeros(5)\n"],
                   solution="def f(x):\n    return jnp.stack([v for v in x])\n")
    assert _lessons_run(nb) == [1]


def test_lessons_after_the_last_test_never_run():
    nb = _notebook([BASE], after=["x_data = None\n", "import course\ncourse.record_run()\n"])
    keep, _ = needed_cells(nb)
    assert len(nb["cells"]) - 1 not in keep and len(nb["cells"]) - 2 not in keep


@pytest.mark.parametrize("where, source", [
    ("lesson", "counter = 0\ndef bump():\n    global counter\n    counter += 1\n"),
    ("solution", "def f(x):\n    global seen\n    seen = x\n    return x\n"),
    ("lesson", "print(_)\n"),
])
def test_global_names_or_output_history_run_the_whole_notebook(where, source):
    nb = (_notebook([BASE, source]) if where == "lesson"
          else _notebook([BASE, "seen = None\n"], solution=source))
    keep, why = needed_cells(nb)
    assert why and set(keep) == {i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                                 and not _nb.is_try_it(nb["cells"], i)}


def test_try_it_cells_never_run():
    nb = _notebook([BASE, "heavy_example = jnp.ones(3)\n"])
    keep, _ = needed_cells(nb)
    try_it = next(i for i, c in enumerate(nb["cells"]) if _nb.is_try_it(nb["cells"], i))
    assert try_it not in keep
    assert 2 not in keep  # only the try-it cell read heavy_example


def test_the_sandbox_notebook_leaves_unneeded_lessons_empty():
    nb = _notebook([BASE, "import matplotlib.pyplot as plt\nplt.plot(x_data)\n"])
    out = sandbox_notebook(nb, "student")
    assert "plt.plot" not in _nb.text(out["cells"][2]["source"])
    assert "x_data = jnp.ones(3)" in _nb.text(out["cells"][1]["source"])


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / "source").iterdir()
                                          if p.is_dir()))
def test_every_course_notebook_is_analysed_and_leaves_lessons_out(module):
    """The course's own notebooks parse, declare no globals, and their graded runs
    leave some lessons out (the measured saving: docs/benchmarks.md)."""
    source = json.loads((ROOT / "source" / module / f"{module}.ipynb").read_text())
    rebuilt = _nb.rebuild(source, _nb.submitted_solutions(source), {})
    keep, why = needed_cells(rebuilt)
    assert why == ""
    lessons = [i for i, c in enumerate(rebuilt["cells"])
               if c["cell_type"] == "code" and not _nb.meta(c) and i in keep]
    skipped = [i for i, c in enumerate(rebuilt["cells"])
               if c["cell_type"] == "code" and not _nb.meta(c) and i not in keep
               and not _nb.is_try_it(rebuilt["cells"], i)]
    assert skipped, f"{module}: every lesson runs when graded ({lessons})"
