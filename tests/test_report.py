"""Instructor analytics (grader/report.py) on a gradebook built by hand.

The class of ``toy`` (three exercises, four scored students and one malformed upload)
is written through nbgrader's Gradebook API, with a hand-written ledger and judged
bundles; every expected number below is worked out by hand in its comment.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.judge import _naming
from grader.report import HELD, NO_ITEM, collect, exercise_stats, write_report

# nbgrader's own add_submission warns about its session's autoflush.
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

MODULE = "toy"
# grade id of each test cell -> (points, its rubric items)
EXERCISES = {
    "test_toy_double": (2, ("returns twice x", "keeps the dtype")),
    "test_toy_batch": (3, ("uses vmap",)),
    "test_toy_never": (1, ("returns ones",)),
}
SCORES = {  # student -> score of each exercise, in EXERCISES' order
    "s1": (2, 3, 0),
    "s2": (2, 1.5, 0),  # partial credit on batch (a manual grade)
    "s3": (0, 0, 0),
    "s4": (2, 3, 0),
}
SECRET = "assert_close(double(7.0), 14.0)  # hidden"
# student -> {test id: verdict} of the failing test cells (the rest passed)
VERDICTS = {
    "s1": {"test_toy_never": {"passed": False, "message": _naming("got zeros", ("returns ones",))}},
    "s2": {"test_toy_batch": {"passed": False,
                              "message": _naming("batch looped in Python", ("uses vmap",))},
           "test_toy_never": {"passed": False, "message": _naming("got zeros", ("returns ones",))}},
    "s3": {"test_toy_double": {"passed": False, "message": _naming(
               f"double returned 0.0 at {SECRET}", ("returns twice x",))},
           "test_toy_batch": {"passed": False,
                              "message": _naming("batch looped in Python", ("uses vmap",))},
           "test_toy_never": {"passed": False, "message": "the grader got no usable result"}},
    "s4": {"test_toy_never": {"passed": False, "held": True,
                              "message": "a solution reaches around the language"}},
}
LEDGER = {
    "s1": {"status": "graded", "reason": "", "detail": "", "score": 5.0, "seconds": 10.0,
           "peak_memory_mb": 300.0},
    "s2": {"status": "attention", "reason": "timeout", "detail": "cell 9 ran past 60 s",
           "score": 3.5, "seconds": 70.0, "peak_memory_mb": 310.0},
    "s3": {"status": "graded", "reason": "", "detail": "", "score": 0.0, "seconds": 5.0},
    "s4": {"status": "graded", "reason": "", "detail": "", "score": 5.0, "seconds": 8.0},
    "s5": {"status": "attention", "reason": "malformed", "score": None, "seconds": 0.0,
           "detail": "toy.ipynb is not valid JSON: a truncated or corrupted upload"},
}


# ---------------------------------------------------------------- the class, by hand

def _source_notebook(course: Path) -> None:
    """source/toy/toy.ipynb: each exercise's solution and test cell, rubric lines in it."""
    nb = nbformat.v4.new_notebook()
    for test_id, (points, items) in EXERCISES.items():
        sol_id = test_id.removeprefix("test_")
        meta = {"schema_version": 3, "locked": False}
        sol = nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x\n"
                                        "    ### END SOLUTION")
        sol.metadata["nbgrader"] = {**meta, "grade": False, "solution": True, "grade_id": sol_id}
        test = nbformat.v4.new_code_cell("\n".join(f'# rubric: "{q}" -> check_{k}'
                                                   for k, q in enumerate(items)))
        test.metadata["nbgrader"] = {**meta, "grade": True, "solution": False,
                                     "grade_id": test_id, "points": points}
        nb.cells += [nbformat.v4.new_markdown_cell(f"## Exercise {sol_id} ({points} points)"),
                     sol, test]
    path = course / "source" / MODULE / f"{MODULE}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def make_gradebook(course: Path, scores: dict, template: Path | None = None) -> None:
    """course/gradebook.db through nbgrader's Gradebook API: the module, its graded
    cells and each student's auto score on each. ``template``: a gradebook that holds
    the module already (a new one costs seconds: nbgrader runs alembic to create it)."""
    from nbgrader.api import Gradebook

    (course / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n")
    if template is not None:
        shutil.copyfile(template, course / "gradebook.db")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        if template is None:
            gb.add_assignment(MODULE)
            gb.add_notebook(MODULE, MODULE)
            for test_id, (points, _) in EXERCISES.items():
                gb.add_grade_cell(test_id, MODULE, MODULE, max_score=points, cell_type="code")
        for student, row in scores.items():
            gb.add_student(student)
            gb.add_submission(MODULE, student)
            for test_id, value in zip(EXERCISES, row):
                grade = gb.find_grade(test_id, MODULE, MODULE, student)
                grade.auto_score, grade.needs_manual_grade = float(value), False
            gb.db.commit()


def write_records(course: Path, ledger: dict, verdicts: dict) -> None:
    """The pipeline's records: the ledger and each student's judged bundle."""
    base = course / "autograded" / ".grading" / MODULE
    base.mkdir(parents=True, exist_ok=True)
    (base / "ledger.json").write_text(json.dumps(
        {s: {"student": s, **entry} for s, entry in ledger.items()}))
    hidden = nbformat.v4.new_code_cell(f"### BEGIN HIDDEN TESTS\n{SECRET}\n### END HIDDEN TESTS")
    hidden.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_toy_double"}
    for student, failing in verdicts.items():
        passed = {t: {"passed": True, "message": ""} for t in EXERCISES if t not in failing}
        bundle = {"verdicts": {**passed, **failing}, "rebuilt": {"cells": [hidden]}}
        folder = base / "bundles" / student
        folder.mkdir(parents=True)
        (folder / f"{MODULE}.json").write_text(json.dumps(bundle))


def build_class(course: Path, template: Path | None = None) -> Path:
    """The whole hand-built class of toy in ``course``."""
    course.mkdir(parents=True, exist_ok=True)
    _source_notebook(course)
    make_gradebook(course, SCORES, template)
    write_records(course, LEDGER, VERDICTS)
    return course


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("template")
    make_gradebook(folder, {})
    return folder / "gradebook.db"


@pytest.fixture(scope="module")
def toy(tmp_path_factory, template):
    course = build_class(tmp_path_factory.mktemp("toy"), template)
    return course, write_report(course, MODULE)


def _rows(path: Path, key: str) -> dict[str, dict]:
    with open(path, newline="") as fh:
        return {row[key]: row for row in csv.DictReader(fh)}


# ---------------------------------------------------------------- the numbers

def test_statistics_match_a_hand_computation(toy):
    course, written = toy
    rows = _rows(written.exercises_csv, "grade_id")
    assert list(rows) == list(EXERCISES)  # the rubric's order
    double, batch, never = (rows[t] for t in EXERCISES)
    # double: 2, 2, 0, 2 of 2 points. Bins [0, 1), [1, 2) and full marks.
    assert double["histogram"] == "[0, 1): 1; [1, 2): 0; 2 (full): 3"
    assert float(double["mean"]) == 1.5 and float(double["median"]) == 2
    assert float(double["full_marks_share"]) == 0.75
    # batch: 3, 1.5, 0, 3 of 3: mean 7.5 / 4, median (1.5 + 3) / 2, full 2 of 4.
    assert batch["histogram"] == "[0, 1): 1; [1, 2): 1; [2, 3): 0; 3 (full): 2"
    assert float(batch["mean"]) == 1.875 and float(batch["median"]) == 2.25
    assert float(batch["full_marks_share"]) == 0.5
    # Discrimination of double: r of x = (2, 2, 0, 2) with the rest, y = batch + never
    # = (3, 1.5, 0, 3). Means 1.5 and 1.875; deviations (.5, .5, -1.5, .5) and
    # (1.125, -.375, -1.875, 1.125); Sxy = .5625 - .1875 + 2.8125 + .5625 = 3.75,
    # Sxx = 3, Syy = 1.265625 + .140625 + 3.515625 + 1.265625 = 6.1875.
    r = 3.75 / math.sqrt(3 * 6.1875)
    assert float(double["discrimination"]) == pytest.approx(r, abs=1e-5)
    # batch's rest is double's scores (never is all zero): the same pair, swapped.
    assert float(batch["discrimination"]) == pytest.approx(r, abs=1e-5)
    # never: everyone scored 0; its discrimination is undefined and says why.
    assert never["histogram"] == "[0, 1): 4; 1 (full): 0"
    assert float(never["mean"]) == 0 and float(never["full_marks_share"]) == 0
    assert never["discrimination"] == "undefined: every student has the same score on this exercise"


def test_failed_rubric_items_with_their_share_and_message(toy):
    course, written = toy
    with open(written.items_csv, newline="") as fh:
        items = [(r["exercise"], r["requirement"], int(r["students"]), float(r["share"]),
                  r["message"], int(r["message_students"])) for r in csv.DictReader(fh)]
    assert items == [
        # s3 only; the hidden test's line is cut out, as the student's feedback shows it
        ("double", "returns twice x", 1, 0.25,
         "double returned 0.0 at [text from the grader's hidden tests removed]", 1),
        ("batch", "uses vmap", 2, 0.5, "batch looped in Python", 2),  # s2, s3
        # s1 and s2; then s3 (a failure without a requirement line) and s4 (held)
        ("never", "returns ones", 2, 0.5, "got zeros", 2),
        ("never", NO_ITEM, 1, 0.25, "the grader got no usable result", 1),
        ("never", HELD, 1, 0.25, "a solution reaches around the language", 1),
    ]


def test_students_matrix_attention_and_grading_time(toy):
    course, written = toy
    rows = _rows(written.students_csv, "student")
    assert list(rows) == ["s1", "s2", "s3", "s4", "s5"]
    assert [rows["s2"][t] for t in EXERCISES] == ["2", "1.5", "0"]
    assert rows["s2"]["total"] == "3.5" and rows["s2"]["reason"] == "timeout"
    assert rows["s2"]["seconds"] == "70"
    # The malformed upload has no score: listed, never a 0.
    assert rows["s5"]["total"] == "" and rows["s5"]["reason"] == "malformed"
    page = written.html.read_text()
    assert "cell 9 ran past 60 s" in page and "not valid JSON" in page
    assert "1 submission(s) have no score and are left out of the statistics (malformed: 1)" in page
    assert "never: every student scored 0" in page
    assert "93.0 s of sandbox time; median 9.0 s, slowest s2 (70.0 s)" in page
    # Self-contained: four plots inside the page (three histograms, grading time), no URL.
    assert page.count('src="data:image/png;base64,') == 4
    assert "http://" not in page and "https://" not in page and "<script" not in page
    # Students are named by their ids, nothing else (the gradebook has no names here).
    assert all(f">{s}<" in page for s in SCORES)


def test_cli_writes_every_named_module(toy, tmp_path, monkeypatch, capsys):
    from grader.cli import main

    course, _ = toy
    monkeypatch.chdir(course)
    assert main(["report", MODULE, "--out", str(tmp_path / "out")]) == 0
    assert f"{MODULE}: {tmp_path / 'out' / 'toy.html'}" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "toy-items.csv", "toy-students.csv", "toy.csv", "toy.html"]


# ---------------------------------------------------------------- edge cases

def test_one_student_discrimination_undefined(tmp_path, template):
    make_gradebook(tmp_path, {"solo": (2, 3, 1)}, template)
    facts = collect(tmp_path, MODULE)  # no ledger, no bundles, no source notebook
    assert [st.discrimination for st in exercise_stats(facts)] == [None, None, None]
    assert {st.undefined for st in exercise_stats(facts)} == {"undefined: one student"}
    page = write_report(tmp_path, MODULE).html.read_text()
    assert "One student: discrimination is undefined" in page
    assert "No source notebook source/toy/toy.ipynb: rubric items unknown." in page
    assert "have no judged bundle" in page and "No grading times" in page


def test_empty_module_says_so(tmp_path, template):
    make_gradebook(tmp_path, {}, template)  # released, nothing submitted
    written = write_report(tmp_path, MODULE)
    page = written.html.read_text()
    assert "No submission of toy is scored in the gradebook: no statistics yet." in page
    assert "No scored submission." in page and "<img" not in page
    rows = _rows(written.exercises_csv, "grade_id")
    assert sorted(rows) == sorted(EXERCISES)  # no source notebook here: in name order
    assert {r["students"] for r in rows.values()} == {"0"}


def test_no_gradebook_is_not_created(tmp_path):
    """A module never graded, in a course without a gradebook: a page, and no gradebook."""
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n")
    _source_notebook(tmp_path)
    write_records(tmp_path, {"s5": LEDGER["s5"]}, {})  # only a malformed upload
    written = write_report(tmp_path, MODULE, tmp_path / "r")
    page = written.html.read_text()
    assert not (tmp_path / "gradebook.db").exists()
    assert "No gradebook at" in page and "malformed" in page
    assert list(_rows(written.exercises_csv, "grade_id")) == list(EXERCISES)  # from the rubric
    assert _rows(written.students_csv, "student")["s5"]["reason"] == "malformed"


# ---------------------------------------------------------------- make demo's report

def check_demo_report(course: Path, stdout: str, module: str = "01_grad") -> None:
    """`make demo`'s report (tests/test_pipeline.py runs the demo once): printed, and its
    figures are those of the demo's gradebook, computed here by hand."""
    from nbgrader.api import Gradebook

    page = course / "reports" / f"{module}.html"
    assert f"report:   {page}" in stdout and page.is_file()
    scores: dict[str, list[float]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        points = {c.name: c.max_score for nb in gb.find_assignment(module).notebooks
                  for c in nb.grade_cells}
        totals = {sub.student.id: sub.score for sub in gb.assignment_submissions(module)}
        for sub in gb.assignment_submissions(module):
            for nb in sub.notebooks:
                for grade in nb.grades:
                    scores.setdefault(grade.name, []).append(grade.score)
    assert sorted(totals) == ["ada", "ben", "cyd"]  # dee's upload is malformed: no score
    rows = _rows(course / "reports" / f"{module}.csv", "grade_id")
    assert set(rows) == set(points)
    for gid, xs in scores.items():
        full = sum(x == points[gid] for x in xs)
        assert int(rows[gid]["students"]) == 3
        assert float(rows[gid]["mean"]) == pytest.approx(sum(xs) / 3, abs=1e-5)
        assert float(rows[gid]["median"]) == sorted(xs)[1]
        assert float(rows[gid]["full_marks_share"]) == pytest.approx(full / 3, abs=1e-5)
        assert rows[gid]["histogram"].endswith(f"{points[gid]:g} (full): {full}")
    students = _rows(course / "reports" / f"{module}-students.csv", "student")
    assert {s: float(students[s]["total"]) for s in totals} == totals
    assert students["dee"]["total"] == "" and students["dee"]["reason"] == "malformed"
