"""Adding an exercise touches one place: the source notebook (plus its variants).

An instructor appends a solution cell and a test cell to a module's source notebook,
runs `make release` (here: `nbgrader generate_assignment`), and the trusted grader
grades it: no spec, no probe, nothing else to write. Its correct answers score full
marks and its wrong answers zero, through `python -m autograder grade` (sandboxed,
judged outside, recorded by nbgrader), including a wrong answer whose values are right
but whose compiled program is not (a Python loop, unrolled into the program).
"""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from grader.course import generate_release
from grader.tools.submission import build_submission, read_notebook, write_notebook
from tests.conftest import REPO, missing_sandbox

pytestmark = pytest.mark.notebook

SOLUTION = '''def ema(xs, decay):
    """Exponential moving average of xs (shape (n,)): m_0 = xs[0],
    m_t = decay * m_{t-1} + (1 - decay) * xs[t]. Returns all n averages, as one loop
    in the compiled program (lax.scan), not one copy per step."""
    ### BEGIN SOLUTION
    def step(m, x):
        m = decay * m + (1 - decay) * x
        return m, m
    _, rest = jax.lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest])
    ### END SOLUTION
'''

TEST = '''# ema averages every step, and its program is one loop.
import numpy as np
import jax.numpy as jnp
from autograder import assert_matches_reference, assert_stablehlo_op_count

def _ema(xs, decay):
    out, m = [], None
    for x in np.asarray(xs, np.float64):
        m = x if m is None else decay * m + (1 - decay) * x
        out.append(m)
    return np.asarray(out, np.float32)

assert_matches_reference(ema, _ema, (jnp.array([1.0, 2.0, 3.0]), 0.5), rtol=1e-5)
### BEGIN HIDDEN TESTS
_xs = jnp.asarray(np.random.default_rng(11).normal(size=50), jnp.float32)
for _d in (0.0, 0.3, 1.0):
    assert_matches_reference(ema, _ema, (_xs, _d), rtol=1e-4, atol=1e-5)
assert_matches_reference(ema, _ema, (_xs[:1], 0.7))
assert_stablehlo_op_count(lambda xs: ema(xs, 0.9), (_xs,), "multiply", at_most=4,
                          hint="the loop was unrolled: one copy of the step per element")
### END HIDDEN TESTS
'''

VARIANTS = {
    "correct": [
        "def ema(xs, decay):\n"
        "    def step(m, x):\n"
        "        m = decay * m + (1 - decay) * x\n"
        "        return m, m\n"
        "    return jax.lax.scan(step, xs[0], xs)[1].at[0].set(xs[0])\n",
        "def ema(xs, decay):\n"
        "    def body(t, out):\n"
        "        return out.at[t].set(decay * out[t - 1] + (1 - decay) * xs[t])\n"
        "    return jax.lax.fori_loop(1, xs.shape[0], body, xs)\n",
    ],
    "wrong": [
        # Right values, but a Python loop: 50 multiplies in the program.
        "def ema(xs, decay):\n"
        "    out = [xs[0]]\n"
        "    for t in range(1, xs.shape[0]):\n"
        "        out.append(decay * out[-1] + (1 - decay) * xs[t])\n"
        "    return jnp.stack(out)\n",
        # The weights swapped: decay applied to the new value.
        "def ema(xs, decay):\n"
        "    def step(m, x):\n"
        "        m = (1 - decay) * m + decay * x\n"
        "        return m, m\n"
        "    _, rest = jax.lax.scan(step, xs[0], xs[1:])\n"
        "    return jnp.concatenate([xs[:1], rest])\n",
    ],
}


def _cell(source, **meta):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"schema_version": 3, "task": False, "grade": False,
                                 "locked": False, "solution": False, "points": 0, **meta}
    return cell


def test_an_exercise_added_to_the_source_notebook_is_graded(tmp_path):
    course = tmp_path / "course"
    (course / "source" / "99_new").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    # What the module had: a setup cell. What the instructor adds: the exercise.
    nb.cells = [
        _cell("import jax\nimport jax.numpy as jnp\n", grade_id="setup", locked=True),
        nbformat.v4.new_markdown_cell("## Exercise 1: an exponential moving average (2 points)"),
        _cell(SOLUTION, grade_id="99_new_ema", solution=True),
        _cell(TEST, grade_id="test_99_new_ema", grade=True, locked=True, points=2),
    ]
    nbformat.write(nb, str(course / "source" / "99_new" / "99_new.ipynb"))
    generate_release(course, "99_new")
    release = read_notebook(course / "release" / "99_new" / "99_new.ipynb")
    students = {}
    for kind in ("correct", "wrong"):
        for i, code in enumerate(VARIANTS[kind]):
            name = f"{kind}{i}"
            students[name] = kind
            write_notebook(build_submission(release, replacements={"99_new_ema": code}),
                           course / "submitted" / name / "99_new" / "99_new.ipynb")
    # Sandboxed where bubblewrap works; our own variants are trusted code elsewhere.
    waive = ["--allow-unsandboxed"] if missing_sandbox() else []
    graded = subprocess.run([sys.executable, "-m", "autograder", "grade", "99_new", *waive],
                            cwd=course, capture_output=True, text=True, timeout=1200)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for name, kind in students.items():
            score = gb.find_submission("99_new", name).score
            assert score == (2.0 if kind == "correct" else 0.0), (name, score, graded.stdout)
    feedback = (course / "autograded" / "wrong0" / "99_new" / "99_new.ipynb").read_text()
    assert "stablehlo.multiply" in feedback and "unrolled" in feedback
