"""Grading at scale: a real Dask cluster, a real PostgreSQL gradebook, a killed batch.

Each test grades a small class of the corpus assignment ``00_corpus``
(tests/corpus/assignment.py, trusted probes in tests/corpus/specs) in its own
scratch course, with real servers started here and stopped at the end:

- a Dask scheduler and two workers (subprocesses, 127.0.0.1 only): the scores are
  those of local workers and both Dask workers ran submissions;
- a PostgreSQL server (initdb + postgres as ``nobody``, 127.0.0.1 only) holding
  the gradebook: the scores are in PostgreSQL and nothing was locked;
- a batch killed with SIGKILL part way: the next run grades only what was not
  judged before the kill, and no sandbox outlives the kill.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from grader import sandbox as _sandbox
from grader.course import nbgrader_db_url, run_nbgrader
from grader.config import Grading
from grader.pipeline import grade_assignment, grading_dir, read_ledger
from grader.tools.submission import build_submission
from tests.corpus import assignment
from tests.corpus.cases import ADD, NORM2, WRONG_ADD, WRONG_NORM2

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("scale")]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
A = assignment.NAME
# An honest class: these tests are about scale and resuming, so they run at whatever
# isolation level this machine offers, bubblewrap or not (tests/test_corpus.py and
# tests/test_unprivileged.py are the ones about isolation).
LIMITS = _sandbox.Limits(cell_timeout=20, notebook_timeout=120, memory_mb=1024,
                         allow_unsandboxed=True)
# Student -> (solution cells filled in, score out of 2): the scores plain nbgrader
# gives (tests/test_corpus.py checks the same answers against it). A cell left out
# keeps the release stub.
CLASS = {
    "full": ({"corpus_add": ADD, "corpus_norm2": NORM2}, 2.0),
    "blank": ({}, 0.0),
    "partial": ({"corpus_add": ADD}, 1.0),
    "wrong": ({"corpus_add": WRONG_ADD, "corpus_norm2": NORM2}, 1.0),
    "both_wrong": ({"corpus_add": WRONG_ADD, "corpus_norm2": WRONG_NORM2}, 0.0),
}


# ---------------------------------------------------------------- helpers

def _env(tag: str) -> dict[str, str]:
    """The environment of every process a test starts: this venv first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["JAXCOURSE_JOB_TAG"] = tag
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(REPO)
    return env


def _scratch_course(course: Path, students: list[str], db_url: str | None = None) -> Path:
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    if db_url:
        with open(course / "nbgrader_config.py", "a") as f:
            f.write(f"\nc.CourseDirectory.db_url = {db_url!r}\n")
    assignment.write_source(course)
    run_nbgrader(["generate_assignment", A, "--force"], cwd=course)
    release = nbformat.read(str(course / "release" / A / f"{A}.ipynb"), as_version=4)
    for student in students:
        replacements, _ = CLASS[student]
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(build_submission(release, replacements=replacements),
                       str(folder / f"{A}.ipynb"))
    return course


def _expected(student: str) -> float:
    return CLASS[student][1]


def _gradebook_scores(course: Path, students) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(nbgrader_db_url(course)) as gb:
        return {s: float(gb.find_submission(A, s).score) for s in students}


def _session_of(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[4])  # state ppid pgrp session


def _processes(sessions=(), marker: str | None = None) -> list[str]:
    """Live processes in one of these sessions, or with ``marker`` in their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if _session_of(proc.name) in sessions or (marker and marker.encode() in cmdline):
            command = cmdline.replace(b"\0", b" ")[:160].decode(errors="replace")
            found.append(f"{proc.name}: {command}")
    return found


def _cgroups(tag: str) -> list[Path]:
    from grader.sandbox import levels

    return [g for base in levels.cgroup_parents() if base.is_dir()
            for g in base.glob(f"jaxcourse-job-{tag}-*")]


def _sandbox_leftovers(tag: str) -> list[str]:
    """Sandbox processes, job folders and cgroups of a batch (named by JAXCOURSE_JOB_TAG)."""
    from grader.sandbox import jobs

    found = _processes(marker=f"jaxcourse-job-{tag}-")
    for group in _cgroups(tag):
        found.append(f"cgroup {group} with tasks {(group / 'cgroup.procs').read_text().split()}")
    found += [f"job folder {p}" for p in jobs.base().glob(f"jaxcourse-job-{tag}-*")]
    return found


def _stop(procs: list[subprocess.Popen], sig=signal.SIGTERM, wait: float = 20) -> None:
    """Stops each process group (started with start_new_session), then kills what is left."""
    for p in procs:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:  # the leader may have exited before its children: sweep the group
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def _wait_until(predicate, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"waited {timeout:g} s for {what}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tag() -> str:
    return f"scale{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------- Dask

def test_dask_cluster_grades_like_local_workers(tmp_path, monkeypatch):
    """A real scheduler and two real workers: right scores, both workers used, all stopped."""
    from distributed import Client, get_task_stream

    tag = _tag()
    monkeypatch.setenv("JAXCOURSE_JOB_TAG", tag)
    students = ["full", "blank", "partial", "wrong"]
    course = _scratch_course(tmp_path / "course", students)
    env = _env(tag)
    info = tmp_path / "scheduler.json"
    logs = tmp_path / "logs"
    logs.mkdir()
    common = ["--host", "127.0.0.1", "--no-dashboard", "--scheduler-file", str(info)]
    procs: list[subprocess.Popen] = []

    def start(name, args):
        log = open(logs / f"{name}.log", "wb")
        procs.append(subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, env=env,
                                      stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    try:
        start("scheduler", ["distributed.cli.dask_scheduler", "--port", "0", *common])
        _wait_until(lambda: info.is_file() and info.stat().st_size > 0, 60, "the scheduler file")
        for i in (1, 2):
            start(f"worker{i}", ["distributed.cli.dask_worker", "--nworkers", "1",
                                 "--nthreads", "1", "--name", f"grader{i}", "--death-timeout", "60",
                                 "--local-directory", str(tmp_path / f"w{i}"), *common])
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:"), address
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
            workers = client.scheduler_info()["workers"]
            assert {w["name"] for w in workers.values()} == {"grader1", "grader2"}
            assert all(a.startswith("tcp://127.0.0.1:") for a in workers)
            with get_task_stream(client=client) as stream:
                outcomes = grade_assignment(course, A, scheduler=address, limits=LIMITS, show=False)
            ran, judged = {}, {}
            for record in stream.data:
                if str(record["key"]).startswith("run_task"):
                    ran[record["key"]] = record["worker"]
                elif str(record["key"]).startswith("judge_task"):
                    judged[record["key"]] = record["worker"]
        scores = {s: o.score for s, o in outcomes.items()}
        assert scores == {s: _expected(s) for s in students}, outcomes
        assert all(o.status == "graded" and o.phase == "recorded" and o.max_score == 3
                   for o in outcomes.values()), outcomes
        assert _gradebook_scores(course, students) == scores
        assert len(ran) == len(students), ran  # one run per submission, nothing run twice
        # Judged in batches of c.Grading.judge_batch runs (one program-judge start per
        # batch), on the cluster too.
        assert len(judged) == -(-len(students) // Grading().judge_batch), judged
        assert set(ran.values()) == set(workers), f"tasks per worker: {ran}"
    finally:
        _stop(procs[1:])  # workers first (no reconnect attempts), then the scheduler
        _stop(procs[:1])
    sessions = {p.pid for p in procs}
    assert _processes(sessions) == [], "Dask processes left behind"
    assert _processes(marker=str(info)) == []
    assert _sandbox_leftovers(tag) == []



# ---------------------------------------------------------------- PostgreSQL

def _postgres_bin() -> Path | None:
    """The server's bin/: ``initdb`` on PATH, or Debian's layout, found through PATH's
    ``pg_config`` (postgresql-common keeps the server in /usr/lib/postgresql/N/bin).
    Only through PATH, so that a PATH without them runs as a machine without them."""
    found = shutil.which("initdb")
    if found and (Path(found).parent / "postgres").is_file():
        return Path(found).parent
    if shutil.which("pg_config"):
        for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (candidate / "initdb").is_file() and (candidate / "postgres").is_file():
                return candidate
    return None


def _as_nobody(cmd: list[str]) -> list[str]:
    """Runs ``cmd`` as ``nobody`` (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd]
    return ["runuser", "-u", "nobody", "-g", "nogroup", "--", *cmd]


def test_postgresql_gradebook(tmp_path, monkeypatch):
    """The gradebook in a real PostgreSQL server: right scores, stored there, no lock errors."""
    import psycopg2

    pg = _postgres_bin()
    if pg is None:
        pytest.skip("needs postgresql: no PostgreSQL server (initdb, postgres) on PATH "
                    "(apt-get install postgresql)")
    tag = _tag()
    monkeypatch.setenv("JAXCOURSE_JOB_TAG", tag)
    # The server runs as nobody: its folder must not sit under pytest's root-only tmp.
    base = Path(tempfile.mkdtemp(prefix="jaxcourse-pg-"))
    server = None
    try:
        data = base / "data"
        if os.geteuid() == 0:
            shutil.chown(base, "nobody", "nogroup")
        env = {"PATH": f"{pg}:/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "HOME": str(base)}
        init = subprocess.run(_as_nobody([str(pg / "initdb"), "-D", str(data), "-U", "grader",
                                          "--auth=trust", "-E", "UTF8", "--no-locale",
                                          "--no-sync"]),
                              env=env, cwd=base, capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, init.stdout + init.stderr
        port = _free_port()
        log = base / "postgres.log"
        with open(log, "wb") as out:
            server = subprocess.Popen(
                _as_nobody([str(pg / "postgres"), "-D", str(data), "-h", "127.0.0.1",
                            "-p", str(port), "-k", str(base), "-c", "fsync=off",
                            "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                            "-c", "log_lock_waits=on", "-c", "deadlock_timeout=200ms"]),
                env=env, cwd=base, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)

        def ready():
            assert server.poll() is None, log.read_text()
            try:
                psycopg2.connect(host="127.0.0.1", port=port, user="grader",
                                 dbname="postgres", connect_timeout=2).close()
                return True
            except psycopg2.OperationalError:
                return False

        _wait_until(ready, 60, "PostgreSQL to accept connections")
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="grader", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE gradebook")
        conn.close()
        # The driver named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, and
        # requirements.txt pins psycopg2-binary.
        db_url = f"postgresql+psycopg2://grader@127.0.0.1:{port}/gradebook"

        students = ["full", "blank", "partial", "wrong"]
        course = _scratch_course(tmp_path / "course", students, db_url=db_url)
        assert nbgrader_db_url(course) == db_url
        outcomes = grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
        scores = {s: o.score for s, o in outcomes.items()}
        assert scores == {s: _expected(s) for s in students}, outcomes
        assert all(o.status == "graded" and o.phase == "recorded" for o in outcomes.values()), outcomes
        assert not (course / "gradebook.db").exists()  # nothing went to SQLite
        from nbgrader.api import Gradebook

        with Gradebook(db_url) as gb:
            assert gb.db.bind.dialect.name == "postgresql"
            assert {s: float(gb.find_submission(A, s).score) for s in students} == scores
            assert [a.name for a in gb.assignments] == [A]
        # The instructor's report reads the same PostgreSQL gradebook (grader/report.py).
        from grader.report import write_report

        with open(write_report(course, A, tmp_path / "reports").students_csv) as fh:
            assert {r["student"]: float(r["total"]) for r in csv.DictReader(fh)} == scores
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="grader", dbname="gradebook")
        with conn, conn.cursor() as cur:
            cur.execute("SELECT s.id, sa.id FROM submitted_assignment sa "
                        "JOIN student s ON s.id = sa.student_id")
            assert sorted(r[0] for r in cur.fetchall()) == sorted(students)
        conn.close()
        problems = [line for line in log.read_text(errors="replace").splitlines()
                    if any(w in line.lower() for w in ("lock", "deadlock", "could not serialize"))]
        assert problems == [], "\n".join(problems)
        assert not any("lock" in (o.detail or "").lower() for o in outcomes.values()), outcomes
    finally:
        if server is not None:
            _stop([server], sig=signal.SIGINT)  # fast shutdown: ends sessions, stops cleanly
            assert _processes({server.pid}) == [], "PostgreSQL processes left behind"
        shutil.rmtree(base, ignore_errors=True)
    assert _sandbox_leftovers(tag) == []


# ---------------------------------------------------------------- resume after a kill

# `python -m autograder grade` has no option for a specs folder and the corpus spec
# lives in tests/corpus/specs: the batch to kill calls grade_assignment as the CLI does.
# Judged two at a time: the kill comes after a judge batch, with runs of others done
# or under way and not yet judged.
_CHILD = """
import json, sys
from grader import sandbox as _sandbox
from grader.config import settings
from grader.pipeline import grade_assignment
cfg = settings(sys.argv[1])
cfg.judge_batch = 2
grade_assignment(sys.argv[1], sys.argv[2], workers=1, show=False, cfg=cfg,
                 limits=_sandbox.Limits(**json.loads(sys.argv[4])))
"""


def _bundle_files(course: Path, students) -> dict[str, bytes]:
    base = grading_dir(course, A) / "bundles"
    return {str(p.relative_to(base)): p.read_bytes()
            for s in students for p in sorted((base / s).glob("*.json"))}


def test_a_killed_batch_resumes(tmp_path, monkeypatch):
    """SIGKILL part way: the next run grades only what was not judged, and all end right."""
    import dataclasses

    students = ["full", "blank", "partial", "wrong", "both_wrong"]
    course = _scratch_course(tmp_path / "course", students)
    tag = _tag()
    log = tmp_path / "batch.log"
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(course), A, "-",
             json.dumps(dataclasses.asdict(LIMITS))],
            cwd=course, env=_env(tag), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def two_judged():
            assert child.poll() is None, f"the batch ended before the kill:\n{log.read_text()[-3000:]}"
            return len(read_ledger(course, A)) >= 2

        _wait_until(two_judged, 600, "two submissions in the ledger", poll=0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    # The pool worker shares the batch's process group; a sandbox has its own session
    # and dies with its parent (bwrap --die-with-parent and its PID namespace;
    # unsandboxed, the runner's PR_SET_PDEATHSIG and then the kernel's parent poller).
    assert _processes({child.pid}) == [], "processes of the killed batch left behind"
    _wait_until(lambda: not _processes(marker=f"jaxcourse-job-{tag}-"), 15,
                "the sandbox of the killed batch to die")
    # A SIGKILL leaves the running sandbox's job folder and its (now empty) cgroups
    # behind; the next run removes them (their owner is dead): checked below.
    from grader.sandbox import jobs

    folders = list(jobs.base().glob(f"jaxcourse-job-{tag}-*"))
    groups = _cgroups(tag)
    print(f"isolation {_sandbox.isolation()}; left by the kill: {folders} {groups}")
    assert len(folders) <= 1 and len(groups) <= 2, (folders, groups)
    for group in groups:
        assert (group / "cgroup.procs").read_text().split() == [], group

    before = read_ledger(course, A)
    done = sorted(before)
    assert 2 <= len(done) < len(students), done
    assert all(e["phase"] == "judged" for e in before.values()), before
    bundles_before = _bundle_files(course, done)
    assert len(bundles_before) == len(done)

    monkeypatch.setenv("JAXCOURSE_JOB_TAG", tag + "r")
    outcomes = grade_assignment(course, A, workers=2, limits=LIMITS, show=False)
    assert {s: o.score for s, o in outcomes.items()} == {s: _expected(s) for s in students}, outcomes
    assert all(o.status == "graded" and o.phase == "recorded" for o in outcomes.values()), outcomes
    assert _gradebook_scores(course, students) == {s: _expected(s) for s in students}
    after = read_ledger(course, A)
    for s in done:  # judged before the kill: recorded from its bundle, not run again
        assert after[s]["seconds"] == before[s]["seconds"], s
        assert outcomes[s].seconds == before[s]["seconds"], s
    assert _bundle_files(course, done) == bundles_before
    assert all(after[s]["seconds"] > 0 for s in students if s not in done)
    assert _sandbox_leftovers(tag + "r") == []
    assert _sandbox_leftovers(tag) == [], "the next run did not remove what the kill left"
    assert _processes(marker=f"jaxcourse-job-{tag}") == []
