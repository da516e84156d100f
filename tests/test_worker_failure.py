"""A grading worker that dies costs nobody a grade (issue 38).

A pool worker SIGKILLed while it runs a submission breaks the local process pool:
every task on it fails. Those submissions are graded again, each alone in a fresh
process, the pool is replaced for the rest of the batch, and the batch ends with
every score right. A task that kills its worker every time is the culprit: listed
as ``grading_failed``, never final, so the next run grades it again.
"""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from grader import pipeline
from grader import sandbox as _sandbox
from grader import tasks as _tasks
from grader.course import run_nbgrader
from grader.ledger import Outcome, _write_ledger
from grader.pipeline import grade_assignment, read_ledger
from grader.tools.submission import build_submission
from tests.conftest import missing_sandbox
from tests.corpus import assignment
from tests.corpus.cases import ADD, HALVE, NORM2

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("worker_failure"),
              pytest.mark.skipif(missing_sandbox() is not None, reason=str(missing_sandbox()))]

A = assignment.NAME
LIMITS = _sandbox.Limits(cell_timeout=25, notebook_timeout=120, memory_mb=1024)
FULL = {"corpus_add": ADD, "corpus_norm2": NORM2, "corpus_halve": HALVE}
CLASS = {"full_a": (FULL, 3.0), "full_b": (FULL, 3.0), "full_c": (FULL, 3.0),
         "blank": ({}, 0.0)}
HOSTILE = "kills_its_worker"


def _submit(course: Path, student: str, replacements: dict) -> None:
    release = nbformat.read(str(course / "release" / A / f"{A}.ipynb"), as_version=4)
    folder = course / "submitted" / student / A
    folder.mkdir(parents=True, exist_ok=True)
    nb = build_submission(release, replacements=replacements)
    (folder / f"{A}.ipynb").write_text(nbformat.writes(nb))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("worker_failure")
    shutil.copy(Path(__file__).resolve().parents[1] / "nbgrader_config.py", course)
    assignment.write_source(course)
    run_nbgrader(["generate_assignment", A, "--force"], cwd=course)
    for student, (replacements, _) in CLASS.items():
        _submit(course, student, replacements)
    tag = f"wf{uuid.uuid4().hex[:8]}"
    os.environ["JAXCOURSE_JOB_TAG"] = tag  # spawned workers inherit it
    try:
        yield course, tag
    finally:
        del os.environ["JAXCOURSE_JOB_TAG"]


def _busy_worker():
    """A pool worker of this process that runs a submission (its sandbox is its child)."""
    import psutil

    for child in psutil.Process().children():
        try:
            if "spawn_main" in " ".join(child.cmdline()) and child.children():
                return child
        except psutil.Error:
            continue
    return None


def _no_grading_failed_recorded(course: Path) -> None:
    ledger = read_ledger(course, A)
    final = {s: e for s, e in ledger.items()
             if e["reason"] == "grading_failed" and e["phase"] == "recorded"}
    assert final == {}, final


def test_a_killed_worker_costs_nobody_a_grade(course, monkeypatch):
    course, tag = course
    got: dict = {}
    retried = []  # a spy: the kill must have broken tasks for the test to mean anything
    solo = pipeline._Pool.solo
    monkeypatch.setattr(pipeline._Pool, "solo",
                        lambda pool, job, ref: retried.append(job.student) or solo(pool, job, ref))

    def batch():
        try:
            got["outcomes"] = grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
        except BaseException as err:  # noqa: BLE001 - reported by the test
            got["error"] = err

    thread = threading.Thread(target=batch, daemon=True)
    thread.start()
    victim, deadline = None, time.monotonic() + 300
    while victim is None and thread.is_alive() and time.monotonic() < deadline:
        victim = _busy_worker()
        time.sleep(0.05)
    assert victim is not None, f"no worker ran a submission: {got}"
    victim.send_signal(signal.SIGKILL)
    thread.join(300)
    assert not thread.is_alive(), "the batch did not end after its worker was killed"
    assert "error" not in got, got
    outcomes = got["outcomes"]
    assert retried, "the kill broke no task"
    assert {s: o.score for s, o in outcomes.items()} == {s: e for s, (_, e) in CLASS.items()}
    assert all(o.status == "graded" and o.phase == "recorded" for o in outcomes.values()), outcomes
    _no_grading_failed_recorded(course)
    # The dead workers' sandboxes left job folders; the batch removed them.
    from grader.sandbox import jobs

    assert list(jobs.base().glob(f"jaxcourse-job-{tag}-*")) == []


# A task that kills the process it runs in, for HOSTILE only: what a worker killed
# by the OOM killer on one submission looks like. The pool and its processes are
# real; the function travels to them by name (spawn), so it lives at module level.
_TALLY = "worker_kills.txt"


def _kill_or(task, job, *args):
    if job.student == HOSTILE:
        with open(Path(job.cache).parents[3] / _TALLY, "a") as tally:
            tally.write(f"{task.__name__}\n")
        os.kill(os.getpid(), signal.SIGKILL)
    return task(job, *args)


def run_or_die(job):
    return _kill_or(_tasks.run_task, job)


def grade_or_die(job, reference):
    return _kill_or(_tasks.grade_task, job, reference)


def test_a_task_that_kills_its_worker_every_time_is_not_final(course, monkeypatch):
    course, _ = course
    _submit(course, HOSTILE, FULL)
    monkeypatch.setattr(pipeline, "run_task", run_or_die)
    monkeypatch.setattr(pipeline, "grade_task", grade_or_die)
    outcomes = grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
    o = outcomes[HOSTILE]
    assert (o.status, o.reason, o.phase) == ("attention", "grading_failed", "failed"), o
    assert "twice, alone the second time" in o.detail and "BrokenProcessPool" in o.detail, o
    assert (course / _TALLY).read_text().split() == ["run_task", "grade_task"]
    assert all(outcomes[s].score == e for s, (_, e) in CLASS.items()), outcomes
    _no_grading_failed_recorded(course)
    # Not final: the next run without --force grades it again (and only it).
    again = grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
    assert (course / _TALLY).read_text().split() == ["run_task", "grade_task"] * 2
    assert again[HOSTILE].phase == "failed" and again[HOSTILE].reason == "grading_failed"
    assert read_ledger(course, A)[HOSTILE]["phase"] == "failed"
    # An older grader wrote grading_failed as "recorded": graded again all the same.
    ledger = read_ledger(course, A)
    _write_ledger(course, A, {HOSTILE: Outcome(**dict(ledger[HOSTILE], phase="recorded"))})
    grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
    assert (course / _TALLY).read_text().split() == ["run_task", "grade_task"] * 3
