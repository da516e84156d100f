"""The run-notebooks tool (issue 30): a notebook top to bottom, each failure recorded."""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat

from grader.tools.run_notebooks import table
from tests.conftest import REPO


def test_every_cell_runs_and_each_failure_is_recorded(tmp_path):
    nb = nbformat.v4.new_notebook()
    test = nbformat.v4.new_code_cell("assert double(2) == 5, 'double(2) is not 5'")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_m_double"}
    nb.cells = [nbformat.v4.new_markdown_cell("# m"),
                nbformat.v4.new_code_cell("import jax.numpy as jnp\nx = jnp.ones(3)"),
                nbformat.v4.new_code_cell("def double(v):\n    return 2 * v"),
                test,
                nbformat.v4.new_code_cell("%time y = double(x)"),  # a magic
                nbformat.v4.new_code_cell("import time\ntime.sleep(30)"),
                nbformat.v4.new_code_cell("print(y.sum())")]
    (tmp_path / "source" / "00_m").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "source" / "00_m" / "00_m.ipynb")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "autograder", "run-notebooks",
                           "--source", str(tmp_path / "source"), "--out", str(out),
                           "--cell-timeout", "3"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr  # failures make it exit 1
    (record,) = json.loads((out / "notebook_runs.json").read_text())
    assert record["backend"] == "cpu" and record["cells"] == 6
    assert [(f["cell"], f["kind"], f["grade_id"], f["error"]) for f in record["failed"]] == [
        (3, "test", "test_m_double", "AssertionError: double(2) is not 5"),
        (5, "lesson", "", "CellTimeout: the cell ran past 3 s")]
    assert record["failed"][0]["message"] == "double(2) is not 5"  # the whole message
    md = (out / "notebook_runs.md").read_text()
    assert "| 00_m | cpu (" in md and "| 00_m | 3 | test `test_m_double` |" in md
    assert f"jax {record['jax']}" in md


def test_a_notebook_that_cannot_run_is_a_row_not_a_crash():
    md = table([{"module": "01_x", "error": "the notebook ran past 10 s"}])
    assert "| 01_x | - | - | - | the notebook ran past 10 s |" in md
