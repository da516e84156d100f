"""The adversarial corpus (tests/corpus/cases.py) through the real pipeline.

One batch holds every case: bubblewrap sandboxes on two local workers, trusted
judging, nbgrader recording into a SQLite gradebook. Every case must end as its
expectation says, the honest ones with the scores plain serial ``nbgrader
autograde`` gives (cell by cell), and nothing may be left behind: no process, no
cgroup, no job folder, no file written outside the sandbox, no network connection.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from grader import sandbox as _sandbox
from grader.course import run_nbgrader
from grader.pipeline import grade_assignment, read_ledger
from grader.tools.submission import build_submission
import grader
from tests.corpus import assignment
from tests.corpus.cases import ADD, BLANK, CASES, HALVE, NORM2, mutate

from tests.conftest import missing_sandbox

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("corpus"),
              # Escapes and bombs: only meaningful in the sandbox.
              pytest.mark.skipif(missing_sandbox() is not None, reason=str(missing_sandbox()))]

# 25 s per cell: on the project's VM a memory bomb took 11 s from its cell's start to
# the cgroup-v1 kill at 1 GiB (first-touch faults and reclaim before the OOM kill;
# tests/measure_limits.py), so a 10 s limit let it time out first now and then.
LIMITS = _sandbox.Limits(cell_timeout=25, notebook_timeout=180, memory_mb=1024)
HONEST = ["honest_full", "honest_blank", "honest_partial", "honest_warning", "honest_float64",
          "honest_syntax_error", "honest_helper", "honest_stdlib", "wrong_unrolled",
          "wrong_not_jitted"]


class _Listener:
    """A TCP server on the host's loopback that records any connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def _build_class(course: Path, marker: str, port: int) -> None:
    release = nbformat.read(str(course / "release" / assignment.NAME / f"{assignment.NAME}.ipynb"),
                            as_version=4)
    from grader.config import settings

    fill = {"{course}": str(course), "{port}": str(port), "{marker}": marker,
            "{grader}": str(Path(grader.__file__).parent), "{seed}": str(settings(course).seed)}
    for case in CASES:
        replacements = {}
        for gid, key, correct in (("corpus_add", "add", ADD), ("corpus_norm2", "norm2", NORM2),
                                  ("corpus_halve", "halve", HALVE)):
            code = case[key]
            if code == BLANK:
                continue
            code = code or correct
            for k, v in fill.items():
                code = code.replace(k, v)
            replacements[gid] = code
        nb = json.loads(nbformat.writes(build_submission(release, replacements=replacements)))
        folder = course / "submitted" / case["name"] / assignment.NAME
        folder.mkdir(parents=True, exist_ok=True)
        content = mutate(case["mutate"], nb, folder) if case["mutate"] else None
        target = folder / f"{assignment.NAME}.ipynb"
        if content is None:
            target.write_text(json.dumps(nb))
        elif content != b"":
            (target.write_bytes if isinstance(content, bytes) else target.write_text)(content)


def _cell_scores(course: Path, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    from grader.course import nbgrader_db_url

    with Gradebook(nbgrader_db_url(course)) as gb:
        sub = gb.find_submission_notebook(assignment.NAME, assignment.NAME, student)
        return {g.name: g.score for g in sub.grades}


def _leftovers(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(f"process {proc.name}")
            except OSError:
                pass
    from grader.sandbox import jobs, levels

    tag = marker.replace(".", "")
    for base in levels.cgroup_parents():
        if base.is_dir():
            found += [f"cgroup {p}" for p in base.glob(f"jaxcourse-job-{tag}-*")]
    found += [f"job folder {p}" for p in jobs.base().glob(f"jaxcourse-job-{tag}-*")]
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    course = tmp_path_factory.mktemp("corpus")
    shutil.copy(Path(__file__).resolve().parents[1] / "nbgrader_config.py", course)
    assignment.write_source(course)
    run_nbgrader(["generate_assignment", assignment.NAME, "--force"], cwd=course)
    marker = f"9{uuid.uuid4().int % 10**8}.5"  # a number: it doubles as `sleep`'s argument
    listener = _Listener()
    os.environ["JAXCOURSE_JOB_TAG"] = marker.replace(".", "")  # spawned workers inherit it
    try:
        _build_class(course, marker, listener.port)
        outcomes = grade_assignment(course, assignment.NAME, workers=2, limits=LIMITS, show=True)
    finally:
        listener.close()
        del os.environ["JAXCOURSE_JOB_TAG"]
    return course, outcomes, marker, listener


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 30
    assert len({c["name"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_outcome(corpus, case):
    course, outcomes, _, _ = corpus
    outcome = outcomes[case["name"]]
    expect = case["expect"]
    summary = f"{case['what']}: got {outcome}"
    assert outcome.status == expect["status"], summary
    assert outcome.reason in expect["reasons"], summary
    scores = expect["score"] if isinstance(expect["score"], set) else {expect["score"]}
    assert outcome.score in scores, summary
    if expect["score"] is not None:
        assert outcome.max_score == 3, summary
    ledger = read_ledger(course, assignment.NAME)
    assert ledger[case["name"]]["status"] == outcome.status


def test_a_helper_in_an_added_cell_is_named_in_the_feedback(corpus):
    # Plain nbgrader would run the added cell; the grader runs the solution cells only,
    # so the NameError's message says where the name is and what to do.
    course, _, _, _ = corpus
    bundle = json.loads((course / "autograded" / ".grading" / assignment.NAME / "bundles"
                         / "added_cell_helper" / f"{assignment.NAME}.json").read_text())
    message = bundle["verdicts"]["test_corpus_add"]["message"]
    assert "raised NameError" in message, message
    assert "note: `_plus` is defined only in a cell you added; grading runs the solution " \
           "cells" in message, message
    assert bundle["verdicts"]["test_corpus_norm2"]["passed"]


def test_nothing_left_behind(corpus):
    course, _, marker, listener = corpus
    assert _leftovers(marker) == []
    assert listener.connections == 0
    for path in (course / marker, course / "autograded" / marker, Path("/tmp") / marker,
                 Path("/root") / marker):
        assert not path.exists(), path


def test_bombs_report_the_limit_that_stopped_them(corpus, tmp_path):
    """The memory and disk bombs: stopped at the limit, the number in the ledger and CSV."""
    import csv

    course, outcomes, _, _ = corpus
    level = _sandbox.isolation()
    for name in ("bomb_memory", "bomb_disk"):
        o = outcomes[name]
        assert o.isolation == level, o
        if o.reason == "out_of_memory":
            assert f"memory limit of {LIMITS.memory_mb} MiB" in o.stopped_by, o
        # A cgroup stops at the limit exactly; the watchdog within one sample of it.
        assert o.peak_memory_mb is not None and o.peak_memory_mb <= LIMITS.memory_mb * 1.1, o
    run_nbgrader(["export", "--exporter=grader.export.StatusCsvExport",
                  f"--StatusCsvExport.course_root={course}", "--to", str(tmp_path / "g.csv")],
                 cwd=course)
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp_path / "g.csv"))}
    row = rows["bomb_memory"]
    assert row["isolation"] == level and row["stopped_by"] == outcomes["bomb_memory"].stopped_by
    assert float(row["peak_memory_mb"]) > 0 and row["status"] == "needs_attention"


def test_honest_scores_equal_plain_nbgrader(corpus, tmp_path):
    """Plain serial `nbgrader autograde` on a copy gives the same cell scores."""
    course, outcomes, _, _ = corpus
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(course / "nbgrader_config.py", plain)
    shutil.copytree(course / "source", plain / "source")
    run_nbgrader(["generate_assignment", assignment.NAME, "--force"], cwd=plain)
    for student in HONEST:
        shutil.copytree(course / "submitted" / student, plain / "submitted" / student)
        run_nbgrader(["autograde", assignment.NAME, "--student", student], cwd=plain)
        assert _cell_scores(plain, student) == _cell_scores(course, student), student
        assert outcomes[student].status == "graded"


def test_a_second_run_regrades_nothing(corpus):
    course, before, _, _ = corpus
    after = grade_assignment(course, assignment.NAME, workers=2, limits=LIMITS, show=False)
    for name, outcome in before.items():
        assert after[name].score == outcome.score and after[name].reason == outcome.reason
        assert after[name].seconds == outcome.seconds  # read from the ledger, not re-run




def _visible_text(html_page: str) -> str:
    """What a feedback page shows, as plain text: tags stripped (highlighted code is
    split by them), entities decoded, whitespace runs made one space."""
    import html
    import re

    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", html_page)).split())


def _secrets(course: Path) -> list[str]:
    from grader.config import settings
    from grader.notebook import hidden_lines

    source = json.loads((course / "source" / assignment.NAME / f"{assignment.NAME}.ipynb")
                        .read_text())
    lines = [" ".join(line.split()) for line in hidden_lines(source)
             if len(line) >= 12 and not line.startswith("### ")]
    return lines + [str(settings(course).seed)]


@pytest.fixture(scope="module")
def feedback(corpus):
    """Feedback for the whole batch: nbgrader goes on past a notebook it fails on and
    exits 1 then, so the pages are checked one by one below."""
    course = corpus[0]
    run_nbgrader(["generate_feedback", assignment.NAME, "--force"], cwd=course, check=False)
    return course


@pytest.mark.parametrize("name", [c["name"] for c in CASES if c["expect"]["score"] is not None])
def test_feedback_holds_no_hidden_test_and_no_seed(feedback, name):
    """Every graded submission of the batch has feedback, and none of it quotes a hidden
    test or the seed (the leak_* cases try hardest)."""
    page = feedback / "feedback" / name / assignment.NAME / f"{assignment.NAME}.html"
    assert page.exists(), f"no feedback for {name}"
    text = _visible_text(page.read_text())
    # The student's own cells are theirs to show (leak_own_class writes the seed there).
    submitted = json.loads((feedback / "submitted" / name / assignment.NAME
                            / f"{assignment.NAME}.ipynb").read_text())
    own = " ".join("".join(c["source"]) for c in submitted["cells"])
    for secret in _secrets(feedback):
        assert text.count(secret) <= own.count(secret), (name, secret)
    if name == "leak_own_class":
        assert "an exception of its own class" in text


def test_the_leaks_did_read_the_secrets(feedback):
    """The frames of a running test hold its hidden code and the seed (so the test above
    is not vacuous: the instructor's autograded copy keeps what that attack printed);
    the plain places a kernel keeps a cell's text hold neither, and the notebook file
    the sandbox ran from was gone before the first solution cell."""
    def outputs(student):
        nb = json.loads((feedback / "autograded" / student / assignment.NAME
                         / f"{assignment.NAME}.ipynb").read_text())
        return " ".join(" ".join("".join(o.get("text", "")).split())
                        for c in nb["cells"] for o in c.get("outputs", []))

    secrets = _secrets(feedback)
    printed = outputs("leak_stash_print")
    assert secrets[0] in printed and secrets[-1] in printed, printed[:2000]
    plain = outputs("leak_plain_places")
    assert "found:" in plain and "last:" in plain, plain[:2000]
    for secret in secrets:
        assert secret not in plain, (secret, plain[:2000])
    assert "_jaxcourse_test" not in plain
    assert "notebooks here: []" in outputs("leak_notebook_file")
