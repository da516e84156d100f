"""``python -m autograder report A...`` (``make report``): instructor analytics.

What each exercise teaches and where a class gets stuck, one page per module, read from:

- the gradebook (nbgrader's ``Gradebook`` at the course's ``db_url``, SQLite or
  PostgreSQL): each recorded submission's score on each graded cell;
- the grading ledger (``autograded/.grading/A/ledger.json``): each submission's status,
  reason and detail, grading seconds and peak memory;
- the judged bundles (``autograded/.grading/A/bundles/<student>/*.json``): each failing
  test cell's message as the feedback shows it (redacted), whose last lines name the
  rubric items the failing check judges (``requirement not met: "..."``,
  ``grader.judge``);
- the rubric (``grader.rubric``): each exercise's items, in order.

It writes, in ``reports/`` (``--out``): ``A.html``, one self-contained page
(``grader.report_page``: plots are PNGs inside it, no external URL), ``A.csv`` (one
row per exercise), ``A-items.csv`` (one row per rubric item failed) and
``A-students.csv`` (the students x exercises matrix, with each submission's status and
grading time).

Statistics are over the submissions the gradebook scored (raw scores, before any late
penalty); a submission with no score (malformed) is listed, not counted. Students are
named by their nbgrader ids only. Discrimination is the Pearson correlation of an
exercise's score with the rest of the module's score (the total without it): near 1
the exercise separates students as the module does, near 0 or below it does not. The
checks of a test cell stop at the first failing one, so a student's feedback names the
items of that check only: an item's share is of students whose feedback named it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path

from grader.ledger import grading_dir, read_ledger
from grader.report_page import number, render

NO_ITEM = "(a failure that names no rubric item)"
HELD = "(held for review)"
# grader.judge ends a failing check's message with one such line per rubric item.
_UNMET = re.compile(r'\n?[ \t]*requirement not met: "(?P<quote>[^"\n]*)"[ \t]*$', re.M)


@dataclasses.dataclass(frozen=True)
class Exercise:
    grade_id: str  # the graded cell's name in the gradebook
    name: str
    max_score: float
    items: tuple[str, ...] = ()  # its rubric's requirements, in order


@dataclasses.dataclass(frozen=True)
class Failure:
    message: str  # as the student's feedback shows it, without the requirement lines
    items: tuple[str, ...]  # the rubric items it names


@dataclasses.dataclass
class Facts:
    """Everything a report shows, as plain data (:func:`collect`)."""

    module: str
    exercises: list[Exercise]
    scores: dict[str, dict[str, float]]  # student -> grade id -> score, from the gradebook
    failures: dict[str, dict[str, Failure]]  # student -> grade id -> its failing verdict
    ledger: dict[str, dict]
    notes: list[str]


@dataclasses.dataclass
class ItemStat:
    requirement: str
    students: int
    share: float
    message: str  # the most common message among those students
    message_students: int


@dataclasses.dataclass
class ExerciseStat:
    exercise: Exercise
    scores: list[float]
    histogram: list[tuple[str, int]]
    mean: float | None
    median: float | None
    full_share: float | None
    discrimination: float | None
    undefined: str  # why discrimination is undefined ("" when it is not)
    items: list[ItemStat]


@dataclasses.dataclass(frozen=True)
class Written:
    html: Path
    exercises_csv: Path
    items_csv: Path
    students_csv: Path


# ---------------------------------------------------------------- facts

def split_failure(message: str) -> Failure:
    """A failing verdict's message, and the rubric items its last lines name.

    >>> split_failure('got 3\\n  requirement not met: "returns twice x"')
    Failure(message='got 3', items=('returns twice x',))
    """
    items = tuple(m["quote"] for m in _UNMET.finditer(message))
    return Failure(_UNMET.sub("", message).strip(), items)


def _verdicts(course: Path, module: str, student: str) -> dict[str, Failure] | None:
    """The failing test cells of a student's judged bundles; None without bundles."""
    from grader.nbgrader_plugins import _secrets, redact

    paths = sorted((grading_dir(course, module) / "bundles" / student).glob("*.json"))
    out: dict[str, Failure] = {}
    for path in paths:
        try:
            bundle = json.loads(path.read_text())
            verdicts = dict(bundle.get("verdicts") or {})
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        secrets = _secrets(bundle)
        for test_id, verdict in verdicts.items():
            if not isinstance(verdict, dict) or (verdict.get("passed") and not verdict.get("held")):
                continue
            failure = split_failure(redact(str(verdict.get("message", "")), secrets))
            items = (HELD,) if verdict.get("held") else failure.items or (NO_ITEM,)
            out[test_id] = Failure(failure.message, items)
    return out if paths else None


def _gradebook(url: str, module: str, notes: list[str]):
    """``([(grade id, max score)], {student: {grade id: score}})`` of the module."""
    import sys

    sys.modules.setdefault("rfc3987_syntax", None)  # a lean start: see grader.nbgrader_main
    from nbgrader.api import Gradebook, MissingEntry

    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        notes.append(f"No gradebook at {url.removeprefix('sqlite:///')}: nothing is graded yet.")
        return [], {}
    with Gradebook(url) as gb:
        try:
            assignment = gb.find_assignment(module)
        except MissingEntry:
            notes.append(f"The gradebook has no assignment {module}: nothing is graded yet.")
            return [], {}
        cells = [(c.name, float(c.max_score or 0)) for nb in assignment.notebooks
                 for c in [*nb.grade_cells, *nb.task_cells]]
        scores = {sub.student.id: {g.name: float(g.score or 0) for nb in sub.notebooks
                                   for g in nb.grades}
                  for sub in gb.assignment_submissions(module)}
    return cells, scores


def collect(course: Path, module: str, db_url: str | None = None) -> Facts:
    """Reads the gradebook, the ledger, the bundles and the rubric of one module."""
    from grader import rubric
    from grader.course import nbgrader_db_url

    course, notes = Path(course), []
    try:
        by_test = {ex.test_id: ex for ex in rubric.load(module, course)}
    except FileNotFoundError:
        by_test = {}
        notes.append(f"No source notebook source/{module}/{module}.ipynb: rubric items unknown.")
    except (OSError, ValueError, KeyError, TypeError) as err:
        by_test = {}
        notes.append(f"The rubric of {module} could not be read ({type(err).__name__}: "
                     f"{str(err)[:200]}): rubric items unknown.")
    cells, scores = _gradebook(db_url or nbgrader_db_url(course), module, notes)
    if not cells:
        cells = [(t, ex.points) for t, ex in by_test.items()]
    order = list(by_test)
    cells.sort(key=lambda c: (order.index(c[0]) if c[0] in order else len(order), c[0]))
    exercises = []
    for grade_id, points in cells:
        ex = by_test.get(grade_id)
        name = (ex.solution_id if ex else grade_id.removeprefix("test_")).removeprefix(f"{module}_")
        exercises.append(Exercise(grade_id, name, points,
                                  tuple(i.requirement for i in ex.items) if ex else ()))
    failures = {}
    for student in sorted(scores):
        found = _verdicts(course, module, student)
        if found is not None:
            failures[student] = found
    unrecorded = sorted(set(scores) - set(failures))
    if unrecorded:
        named = ", ".join(unrecorded[:10]) + (", ..." if len(unrecorded) > 10 else "")
        notes.append(f"{len(unrecorded)} scored submission(s) have no judged bundle "
                     f"(graded outside the pipeline?): their failed rubric items are not "
                     f"counted: {named}.")
    return Facts(module, exercises, scores, failures, read_ledger(course, module), notes)


# ---------------------------------------------------------------- statistics

def histogram(scores: list[float], max_score: float) -> list[tuple[str, int]]:
    """Counts of scores in bins one point wide (wider past ten points), then full marks.

    >>> histogram([0, 2, 2, 1.5], 2)
    [('[0, 1)', 1), ('[1, 2)', 1), ('2 (full)', 2)]
    """
    width = max(1, math.ceil(max_score / 10))
    edges = [k * width for k in range(math.ceil(max_score / width))] if max_score > 0 else []
    counts = [0] * (len(edges) + 1)
    for s in scores:
        full = s >= max_score - 1e-9
        counts[-1 if full else max(0, min(len(edges) - 1, int(s // width)))] += 1
    labels = [f"[{lo:g}, {min(lo + width, max_score):g})" for lo in edges]
    return list(zip(labels + [f"{max_score:g} (full)"], counts))


def discrimination(scores: list[float], rest: list[float]) -> tuple[float | None, str]:
    """Pearson's r of an exercise's scores with the rest of the module's, or why undefined.

    >>> discrimination([0, 1, 1], [1, 3, 5])
    (0.8660254037844387, '')
    >>> discrimination([1], [3])
    (None, 'undefined: one student')
    """
    if len(scores) < 2:
        return None, "undefined: one student" if scores else "undefined: no students"
    if len(set(scores)) < 2:
        return None, "undefined: every student has the same score on this exercise"
    if len(set(rest)) < 2:
        return None, "undefined: every student has the same score on the rest of the module"
    return statistics.correlation(scores, rest), ""


def failed_items(ex: Exercise, students: list[str],
                 failures: dict[str, dict[str, Failure]]) -> list[ItemStat]:
    """The rubric items the students' feedback names as not met, most failed first."""
    messages: dict[str, list[str]] = {}
    for student in students:
        failure = failures.get(student, {}).get(ex.grade_id)
        for item in failure.items if failure else ():
            messages.setdefault(item, []).append(failure.message)
    order = {q: i for i, q in enumerate(ex.items)}
    out = []
    for item, said in messages.items():
        message, count = Counter(said).most_common(1)[0]
        out.append(ItemStat(item, len(said), len(said) / len(students), message, count))
    return sorted(out, key=lambda r: (-r.students, order.get(r.requirement, len(order)),
                                      r.requirement))


def exercise_stats(facts: Facts) -> list[ExerciseStat]:
    students = sorted(facts.scores)
    out = []
    for ex in facts.exercises:
        scores = [facts.scores[s].get(ex.grade_id, 0.0) for s in students]
        rest = [sum(v for g, v in facts.scores[s].items() if g != ex.grade_id) for s in students]
        value, why = discrimination(scores, rest)
        out.append(ExerciseStat(
            ex, scores, histogram(scores, ex.max_score),
            statistics.fmean(scores) if scores else None,
            statistics.median(scores) if scores else None,
            sum(s >= ex.max_score - 1e-9 for s in scores) / len(scores) if scores else None,
            value, why, failed_items(ex, students, facts.failures) if students else []))
    return out


def edge_notes(facts: Facts, stats: list[ExerciseStat]) -> list[str]:
    """What a reader must know before reading the numbers: empty, one student, ..."""
    out = list(facts.notes)
    n = len(facts.scores)
    if n == 0:
        out.append(f"No submission of {facts.module} is scored in the gradebook: "
                   "no statistics yet.")
    elif n == 1:
        out.append("One student: discrimination is undefined (it needs two or more).")
    for st in stats:
        if st.scores and not any(st.scores):
            out.append(f"{st.exercise.name}: every student scored 0 (an all-zero exercise): "
                       "check its statement and its tests.")
    unscored = {s: e for s, e in facts.ledger.items() if s not in facts.scores}
    reasons = Counter(e.get("reason") or e.get("status", "?") for e in unscored.values())
    if unscored:
        out.append(f"{len(unscored)} submission(s) have no score and are left out of the "
                   "statistics (" + ", ".join(f"{r}: {k}" for r, k in sorted(reasons.items()))
                   + "): see Submissions that need attention.")
    return out


# ---------------------------------------------------------------- files

def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _g(x: float | None) -> str:
    return number(x, ".6g")


def _student_rows(facts: Facts) -> list[list]:
    """The matrix with status and grading time; a submission with no score has empty cells."""
    rows = []
    for s in sorted(set(facts.scores) | set(facts.ledger)):
        scores, entry = facts.scores.get(s), facts.ledger.get(s, {})
        cells = [_g(scores.get(ex.grade_id, 0.0)) if scores is not None else ""
                 for ex in facts.exercises]
        rows.append([s, *cells, _g(sum(scores.values())) if scores is not None else "",
                     entry.get("status", "graded"), entry.get("reason", ""),
                     _g(entry.get("seconds")), _g(entry.get("peak_memory_mb"))])
    return rows


def write_report(course: Path, module: str, out: Path | None = None,
                 db_url: str | None = None) -> Written:
    """Writes ``out/A.html`` and its CSVs (``out``: ``course/reports``); returns the paths.

    ``db_url``: the gradebook's, when not the one the course's nbgrader_config.py names.
    """
    course = Path(course)
    out = Path(out) if out is not None else course / "reports"
    out.mkdir(parents=True, exist_ok=True)
    facts = collect(course, module, db_url)
    stats = exercise_stats(facts)
    page = out / f"{module}.html"
    page.write_text(render(facts, stats, edge_notes(facts, stats)))
    exercises_csv = _write_csv(out / f"{module}.csv", [
        "exercise", "grade_id", "points", "students", "mean", "median", "full_marks_share",
        "discrimination", "histogram"], [
        [st.exercise.name, st.exercise.grade_id, _g(st.exercise.max_score), len(st.scores),
         _g(st.mean), _g(st.median), _g(st.full_share), _g(st.discrimination) or st.undefined,
         "; ".join(f"{label}: {k}" for label, k in st.histogram)] for st in stats])
    items_csv = _write_csv(out / f"{module}-items.csv", [
        "exercise", "requirement", "students", "share", "message", "message_students"], [
        [st.exercise.name, i.requirement, i.students, _g(i.share), i.message, i.message_students]
        for st in stats for i in st.items])
    students_csv = _write_csv(out / f"{module}-students.csv", [
        "student", *[ex.grade_id for ex in facts.exercises], "total", "status", "reason",
        "seconds", "peak_memory_mb"], _student_rows(facts))
    return Written(page, exercises_csv, items_csv, students_csv)


def main(root: Path, modules: list[str], out: Path) -> int:
    """Writes each module's report under ``out`` (relative to ``root``); prints each page."""
    out = out if out.is_absolute() else Path(root) / out
    for module in modules:
        print(f"{module}: {write_report(root, module, out).html}")
    return 0
