"""The instructor's job end to end (`make demo`), and preflight of broken submissions."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.course import generate_release, make_scratch_course
from grader.pipeline import preflight
from tests.conftest import REPO, missing_sandbox
from tests.test_report import check_demo_report

# The demo's and the fresh clone's notebooks are the course's own: where bubblewrap is
# missing they are graded without it, as an instructor would with --allow-unsandboxed.
UNSANDBOXED = ["--allow-unsandboxed"] if missing_sandbox() else []


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    course = make_scratch_course(tmp_path_factory.mktemp("pre"), ["01_grad"])
    generate_release(course, "01_grad")
    return course


def _submit(course, student, text):
    folder = course / "submitted" / student / "01_grad"
    folder.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (folder / "01_grad.ipynb").write_text(text)


def test_preflight_accepts_the_release_notebook(released):
    _submit(released, "ok", (released / "release/01_grad/01_grad.ipynb").read_text())
    assert preflight(released, "01_grad", "ok") is None


def test_preflight_reports_truncated_json(released):
    text = (released / "release/01_grad/01_grad.ipynb").read_text()
    _submit(released, "cut", text[: len(text) // 3])
    why = preflight(released, "01_grad", "cut")
    assert why.startswith("01_grad.ipynb is not valid JSON (") and "truncated or corrupted" in why


def test_preflight_reports_missing_notebook(released):
    _submit(released, "empty", None)
    assert preflight(released, "01_grad", "empty") == "01_grad.ipynb is missing from the submission"


def test_preflight_reports_schema_errors(released):
    nb = json.loads((released / "release/01_grad/01_grad.ipynb").read_text())
    nb["cells"][0]["cell_type"] = "spreadsheet"
    _submit(released, "schema", json.dumps(nb))
    assert preflight(released, "01_grad", "schema").startswith("01_grad.ipynb is not a valid notebook")


@pytest.mark.notebook
def test_demo_grades_the_sample_class(tmp_path):
    """`python -m autograder demo`: full, partial, blank and malformed, nothing silent."""
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "autograder", "demo", "--dir", str(out),
                           "--assignments", "01_grad", *UNSANDBOXED], cwd=REPO,
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    max_score = float(rows["ada"]["max_score"])
    assert float(rows["ada"]["score"]) == max_score and rows["ada"]["status"] == "graded"
    assert 0 < float(rows["ben"]["score"]) < max_score and rows["ben"]["status"] == "graded"
    assert float(rows["cyd"]["score"]) == 0 and rows["cyd"]["status"] == "graded"
    assert rows["dee"]["score"] == "" and rows["dee"]["status"] == "needs_attention"
    assert rows["dee"]["reason"] == "malformed"
    # The printed summary names the malformed submission and why.
    assert "NEEDS ATTENTION dee: malformed" in proc.stdout
    assert "needs attention: 1" in proc.stdout
    # Feedback was generated for the graded students: it teaches, and hides hidden tests.
    for student in ("ada", "ben", "cyd"):
        assert (out / "feedback" / student / "01_grad" / "01_grad.html").exists()
    page = (out / "feedback" / "cyd" / "01_grad" / "01_grad.html").read_text()
    assert "newton_step is not implemented yet" in page
    assert "HIDDEN TESTS" not in page and "_rosen" not in page
    ledger = json.loads((out / "autograded/.grading/01_grad/ledger.json").read_text())
    assert ledger["dee"]["status"] == "attention" and ledger["ada"]["status"] == "graded"
    # It ends with the instructor's report, whose figures are the gradebook's.
    check_demo_report(out, proc.stdout)
    # Each judged bundle says where its time went (make bench prints the means): the
    # sandbox's start, the imports, the student's cells, the checks, the judge.
    from grader.tools.bench_grading import phases

    bundle = json.loads((out / "autograded/.grading/01_grad/bundles/ada/01_grad.json").read_text())
    spent = bundle["phases"]
    assert spent["start"] > 0.2 and spent["setup"] > 0.5 and spent["checks"] > 0.5, spent
    assert spent["judge"] > 0 and spent["reruns"] == 0
    assert sum(v for k, v in spent.items() if k != "judge") <= bundle["seconds"] + 0.5
    assert set(phases(out, "01_grad")) == set(spent)


@pytest.mark.notebook
def test_displayed_number_is_not_partial_credit(tmp_path):
    """A passing test cell whose last value is a float scores full marks, not that float."""
    import shutil

    from grader.course import run_nbgrader
    from grader.tools.submission import build_submission, read_notebook, write_notebook

    course = tmp_path / "course"
    (course / "source" / "tiny").mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", course)
    nb = nbformat.v4.new_notebook()
    meta = {"schema_version": 3, "task": False}
    sol = nbformat.v4.new_code_cell("def loss():\n    ### BEGIN SOLUTION\n    return 0.25\n    ### END SOLUTION")
    sol.metadata["nbgrader"] = {**meta, "grade": False, "grade_id": "tiny_loss", "locked": False,
                                "solution": True}
    test = nbformat.v4.new_code_cell("from autograder import assert_matches_reference\n"
                                     "assert_matches_reference(loss, lambda: 0.25)")
    test.metadata["nbgrader"] = {**meta, "grade": True, "grade_id": "test_tiny_loss",
                                 "locked": True, "points": 2, "solution": False}
    nb.cells = [sol, test]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, course / "source" / "tiny" / "tiny.ipynb")
    generate_release(course, "tiny")
    sub = build_submission(read_notebook(course / "release/tiny/tiny.ipynb"),
                           source_nb=read_notebook(course / "source/tiny/tiny.ipynb"))
    write_notebook(sub, course / "submitted/s1/tiny/tiny.ipynb")
    run_nbgrader(["autograde", "tiny"], cwd=course)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_grade("test_tiny_loss", "tiny", "tiny", "s1").score == 2.0


@pytest.mark.notebook
def test_grade_and_export_from_a_fresh_clone_layout(tmp_path):
    """`make autograde` / `make grades` in a course whose gradebook does not exist yet:
    the committed release/ is used as is, the gradebook is filled from source/."""
    import shutil

    course = make_scratch_course(tmp_path / "course", ["01_grad"])
    shutil.copytree(REPO / "release" / "01_grad", course / "release" / "01_grad")
    before = (course / "release/01_grad/01_grad.ipynb").read_text()
    sub = subprocess.run([sys.executable, "-m", "autograder", "submission", "01_grad",
                          "--student", "kim", "--fill", "source"], cwd=course,
                         capture_output=True, text=True)
    assert sub.returncode == 0, sub.stderr
    # From a shell where the venv is not activated: the command puts its own bin/
    # first on PATH for nbgrader's `alembic` (it used to end in FileNotFoundError).
    import os

    own_bin = str(Path(sys.executable).parent)
    bare = {**os.environ, "PATH": os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if p and p != own_bin)}
    graded = subprocess.run([sys.executable, "-m", "autograder", "grade", "01_grad",
                             *UNSANDBOXED], cwd=course, capture_output=True, text=True,
                            timeout=900, env=bare)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    assert "graded: 1   needs attention: 0" in graded.stdout, graded.stdout[-2000:]
    assert (course / "release/01_grad/01_grad.ipynb").read_text() == before
    export = subprocess.run([sys.executable, "-m", "autograder", "export", "--to", "g.csv"],
                            cwd=course, capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    (row,) = list(csv.DictReader(open(course / "g.csv")))
    assert row["student_id"] == "kim" and row["status"] == "graded"
    assert float(row["score"]) == float(row["max_score"]) > 0


# ---------------------------------------------------------------- no sandbox, no grading

def _bin_with(tmp_path, scripts: dict[str, str]):
    """A PATH of one folder holding only these scripts (no bwrap unless given)."""
    import os

    folder = tmp_path / "bin"
    folder.mkdir()
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": str(folder)}


def _refused(proc, *words):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("error: no grading sandbox: ") and "--allow-unsandboxed" in lines[0]
    assert "root" not in lines[0] and "sudo" not in lines[0], lines[0]
    for word in words:
        assert word in lines[0], lines[0]


def test_grade_refuses_without_bubblewrap(tmp_path):
    """One line that names the package; nothing graded, no gradebook made."""
    env = _bin_with(tmp_path, {})
    for command in (["grade", "01_grad"], ["demo", "--dir", str(tmp_path / "demo")]):
        proc = subprocess.run([sys.executable, "-m", "autograder", *command], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env=env)
        _refused(proc, "install the package bubblewrap")
    assert not (tmp_path / "demo").exists() and not (tmp_path / "gradebook.db").exists()


def test_grade_refuses_where_user_namespaces_are_refused(tmp_path):
    """As in a container: bwrap installed but refused a namespace; the line says where to read."""
    fake = ("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because "
            "the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "01_grad"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=_bin_with(tmp_path, {"bwrap": fake}))
    _refused(proc, "cannot create user namespaces", "Grading inside a container")


def test_staging_keeps_what_nbgrader_needs_besides_the_notebooks(tmp_path):
    """The late penalty's timestamp.txt and collect's submission_secret.txt reach the
    folder nbgrader autogrades from (release_feedback refuses feedback without the secret)."""
    from grader.recording import _stage

    course = tmp_path / "course"
    submitted = course / "submitted" / "ada" / "01_grad"
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text("2026-12-03 14:00:00.000000 UTC")
    (submitted / "submission_secret.txt").write_text("3f2a" * 8)
    run = tmp_path / "run"
    _stage(course, "01_grad", run, "ada", {"bundles": {"01_grad.ipynb": {"rebuilt": {"cells": []}}}})
    staged = run / "submitted" / "ada" / "01_grad"
    assert (staged / "timestamp.txt").read_text() == "2026-12-03 14:00:00.000000 UTC"
    assert (staged / "submission_secret.txt").read_text() == "3f2a" * 8
    assert json.loads((staged / "01_grad.ipynb").read_text()) == {"cells": []}
