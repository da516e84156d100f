"""`python -m autograder feedback` (make feedback): one broken submission stops nothing.

A scratch course with three tiny assignments (no JAX, so nbgrader runs in seconds) and
two students each, released and autograded by plain nbgrader. nbgrader
generate_feedback goes on past a student it fails on, then exits 1; the command must
go on to the next assignments too, and say which submission failed and why.
"""
from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.course import run_nbgrader
from tests.conftest import REPO

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("feedback_batch")]

ASSIGNMENTS = ("01_a", "02_b", "03_c")
STUDENTS = ("ada", "ben")
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
TEST = ("assert double(2) == 4, 'double(2) should be 4'\n### BEGIN HIDDEN TESTS\n"
        "assert double(-3) == -6\n### END HIDDEN TESTS\n")


def _cell(source, grade_id, **flags):
    meta = {"grade": False, "grade_id": grade_id, "locked": False, "points": 0,
            "schema_version": 3, "solution": False, "task": False, **flags}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})


def _env() -> dict[str, str]:
    """Plain nbgrader: without JAXCOURSE_BUNDLES it executes the notebooks itself."""
    return {k: v for k, v in os.environ.items() if k != "JAXCOURSE_BUNDLES"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """Released, submitted (ada solved it, ben did not) and autograded: no feedback yet."""
    course = tmp_path_factory.mktemp("feedback-batch") / "course"
    course.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("JAXCOURSE_BUNDLES", raising=False)
        for name in ASSIGNMENTS:
            nb = nbformat.v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}
            nb.cells = [_cell(SOLUTION, "double", solution=True),
                        _cell(TEST, "test_double", grade=True, locked=True, points=1)]
            (course / "source" / name).mkdir(parents=True)
            nbformat.write(nb, course / "source" / name / f"{name}.ipynb")
            run_nbgrader(["generate_assignment", name, "--force"], cwd=course)
            released = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
            solved = copy.deepcopy(released)
            solved.cells[0].source = "def double(x):\n    return 2 * x\n"
            for student, nb in zip(STUDENTS, (solved, released)):
                folder = course / "submitted" / student / name
                folder.mkdir(parents=True)
                nbformat.write(nb, folder / f"{name}.ipynb")
            run_nbgrader(["autograde", name], cwd=course)
    return course


def _copy(graded: Path, tmp_path: Path) -> Path:
    course = tmp_path / "course"  # the config sets the root (and gradebook) to its folder
    shutil.copytree(graded, course)
    return course


def _feedback(course: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "feedback"], cwd=course,
                          env=_env(), capture_output=True, text=True, timeout=600)


def _html(course: Path, student: str, name: str) -> list[Path]:
    return sorted((course / "feedback" / student / name).glob("*.html"))


def test_feedback_for_every_submission_exits_0(graded, tmp_path):
    course = _copy(graded, tmp_path)
    proc = _feedback(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    for name in ASSIGNMENTS:
        for student in STUDENTS:
            assert _html(course, student, name), (student, name, proc.stdout)
    assert "feedback: 6 file(s) written for 3 assignment(s); 0 failure(s)" in proc.stdout
    assert "FAILED" not in proc.stdout


def test_a_broken_submission_is_reported_and_the_rest_get_feedback(graded, tmp_path):
    course = _copy(graded, tmp_path)
    bad = course / "autograded" / "ben" / "01_a" / "01_a.ipynb"
    text = bad.read_text()
    bad.write_text(text[: len(text) // 2])  # truncated JSON: nbgrader cannot read it
    earlier = course / "feedback" / "ben" / "01_a" / "01_a.html"  # from an earlier run
    earlier.parent.mkdir(parents=True)
    earlier.write_text("<html>earlier feedback</html>")

    proc = _feedback(course)

    assert proc.returncode != 0, proc.stdout
    # nbgrader itself failed on that student (its own log line, echoed on stderr) ...
    assert "There was an error processing assignment '01_a' for student 'ben'" in proc.stderr
    # ... and the summary names the assignment, the student and the exception.
    assert "FAILED 01_a student ben: nbformat.reader.NotJSONError" in proc.stdout, proc.stdout
    assert "earlier feedback removed: feedback/ben/01_a/01_a.html" in proc.stdout
    assert "feedback: 5 file(s) written for 3 assignment(s); 1 failure(s)" in proc.stdout
    assert proc.stdout.count("FAILED") == 1, proc.stdout
    assert not earlier.exists()
    for name in ASSIGNMENTS:
        for student in STUDENTS:
            if (name, student) != ("01_a", "ben"):
                assert _html(course, student, name), (student, name, proc.stdout)


def test_marker_text_in_a_students_cell_is_data_not_a_marker(graded, tmp_path):
    # nbgrader's own ClearHiddenTests stops the whole feedback run on a solution cell
    # that holds its hidden-test markers as text; the course's HideHiddenTests clears
    # only test cells, so that student gets feedback like everyone else, with the text.
    course = _copy(graded, tmp_path)
    path = course / "autograded" / "ada" / "01_a" / "01_a.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = ('NOTE = """\n### BEGIN HIDDEN TESTS\nmine\n### END HIDDEN TESTS\n"""\n'
                          + nb.cells[0].source)
    nbformat.write(nb, path)

    proc = _feedback(course)

    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "feedback: 6 file(s) written for 3 assignment(s); 0 failure(s)" in proc.stdout
    (page,) = _html(course, "ada", "01_a")
    assert "BEGIN HIDDEN TESTS" in page.read_text()  # the student's own text, kept
    for name in ASSIGNMENTS:
        for student in STUDENTS:
            (page,) = _html(course, student, name)
            assert "double(-3)" not in page.read_text()  # the hidden test, never
