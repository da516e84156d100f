"""The grader run by an unprivileged user, as an instructor on a shared server runs it.

The user (a spare uid, see tests/unprivileged.py) may not create cgroups, so the
grader falls back to the watchdog (``bubblewrap+watchdog`` on the project's VM). One
batch of ``00_corpus`` holds an honest submission, a memory bomb (4 GiB against a
1 GiB limit), one 10 GiB allocation, a fork bomb, a disk filler and a read of the
grading user's home. Each must end with its reason and the numbers, the honest one
with full marks; while the batch runs, the sandboxes together never hold more than
the two workers' limits; afterwards nothing of that user is left running.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from grader import sandbox as _sandbox
from grader.course import run_nbgrader
from grader.sandbox import watchdog
from grader.tools.submission import build_submission
from tests import unprivileged
from tests.conftest import missing_sandbox
from tests.corpus import assignment
from tests.corpus.cases import ADD, NORM2

_SKIP = missing_sandbox() or unprivileged.missing()
pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("unprivileged"),
              pytest.mark.skipif(_SKIP is not None, reason=str(_SKIP))]

A = assignment.NAME
WORKERS = 2
# The cell limit leaves the memory bomb time to reach its limit: first-touching 1 GiB
# took 2.8 s on the idle 2-core VM and 10.6 s with the machine busy (measure_limits
# `_one` at the watchdog level), so 10 s let the cell time out first on CI.
LIMITS = _sandbox.Limits(cell_timeout=40, notebook_timeout=180, memory_mb=1024)
_READ = ("def add(x, y):\n"
         "    try:\n"
         "        open({path!r}).read()\n"
         "        return x + y\n"
         "    except OSError:\n"
         "        return x - y\n")
# Student -> (its add cell, the reasons it may end with, its score out of 2).
CLASS = {
    "honest": (ADD, {""}, 2.0),
    "bomb_memory": ("import numpy as _np\n_blocks = [_np.ones(2**27) for _ in range(4)]\n" + ADD,
                    {"out_of_memory"}, 1.0),
    "bomb_one_block": ("import numpy as _np\n_big = _np.ones(10 * 2**27)\n" + ADD,
                       {"out_of_memory"}, 1.0),
    "bomb_fork": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                  "        pass\n", {"out_of_memory", "kernel_died"}, 1.0),
    "bomb_disk": ("_i = 0\nwhile True:\n    open(f'fill{_i}', 'wb').write(b'0' * 2**24)\n"
                  "    _i += 1\n", {"out_of_memory"}, 1.0),
    "read_home": (None, {""}, 1.0),  # filled in with the home's path: the read must fail
}
_GRADE = """
import json, sys
from grader import sandbox
from grader.pipeline import grade_assignment
outcomes = grade_assignment(sys.argv[1], sys.argv[2], workers=int(sys.argv[5]),
                            limits=sandbox.Limits(**json.loads(sys.argv[4])))
print("OUTCOMES " + json.dumps({s: o.__dict__ for s, o in outcomes.items()}))
"""


class _Meter:
    """Samples, every 20 ms, the memory of the user's sandboxes (processes whose
    command line names a job folder, plus those folders) and of all its processes,
    each shared page split between its sharers (PSS, as the watchdog counts)."""

    def __init__(self, uid: int):
        self.uid, self.sandboxes, self.everything = uid, 0.0, 0.0
        self.lowest_available = watchdog.host_available_mb()[0]
        self.start_available = self.lowest_available
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.02):
            sandboxes = everything = 0
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    if proc.stat().st_uid != self.uid:
                        continue
                    in_job = b"jaxcourse-job-" in (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                # PSS: a fork bomb's copies share their pages, and an RSS sum counts
                # them once per copy (26 GiB read while the host lost 1.7 GiB).
                pss = watchdog._proportional(int(proc.name))
                rss = pss if pss is not None else watchdog._status(int(proc.name))[0]
                everything += rss
                sandboxes += rss if in_job else 0
            for job in Path("/dev/shm").glob("jaxcourse-job-*"):
                try:
                    if job.stat().st_uid == self.uid:
                        size = watchdog.folder_bytes(job)
                        sandboxes += size
                        everything += size
                except OSError:
                    pass
            self.sandboxes = max(self.sandboxes, sandboxes / 2**20)
            self.everything = max(self.everything, everything / 2**20)
            self.lowest_available = min(self.lowest_available, watchdog.host_available_mb()[0])

    def stop(self):
        self._stop.set()
        self._thread.join()


def _course(base: Path, home: Path, uid: int) -> Path:
    course = base / "course"
    course.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "nbgrader_config.py", course)
    assignment.write_source(course)
    run_nbgrader(["generate_assignment", A, "--force"], cwd=course)
    release = nbformat.read(str(course / "release" / A / f"{A}.ipynb"), as_version=4)
    for student, (add, _, _) in CLASS.items():
        add = add or _READ.format(path=str(home / "secret.txt"))
        nb = build_submission(release, replacements={"corpus_add": add, "corpus_norm2": NORM2})
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{A}.ipynb"))
    unprivileged.chown_tree(course, uid)
    return course


def test_unprivileged_grader_holds_the_limits():
    uid = unprivileged.spare_uid()
    base = unprivileged.scratch_base()
    stage = base / "stage"
    stage.mkdir()
    home = unprivileged.make_home(base, uid)
    try:
        course = _course(base, home, uid)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home),
               "USER": "grader", "LANG": "C.UTF-8", "TF_CPP_MIN_LOG_LEVEL": "2",
               "PYTHONPATH": str(unprivileged.REPO)}
        cmd = unprivileged.command(
            [sys.executable, "-c", _GRADE, str(course), A, "-",
             json.dumps(dataclasses.asdict(LIMITS)), str(WORKERS)], uid, stage)
        meter = _Meter(uid)
        started = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True,
                                  timeout=900)
        finally:
            meter.stop()
        seconds = time.monotonic() - started
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        outcomes = json.loads(out.split("OUTCOMES ", 1)[1].splitlines()[0])
        print(f"{seconds:.0f} s; sandboxes at most {meter.sandboxes:.0f} MiB, all of the user's "
              f"processes {meter.everything:.0f} MiB; available memory "
              f"{meter.start_available:.0f} -> lowest {meter.lowest_available:.0f} MiB")
        for student, o in sorted(outcomes.items()):
            print(f"  {student}: {o['status']} {o['reason']} {o['score']} peak "
                  f"{o['peak_memory_mb']} MiB; {o['stopped_by']}")
        level = "bubblewrap+watchdog"
        flat = " ".join(out.split())  # the summary table wraps at the terminal's width
        assert f"isolation: {level}" in flat, out[-3000:]
        assert "note: no cgroup is available to this user, so a watchdog holds the limits" in flat
        for student, (_, reasons, score) in CLASS.items():
            o = outcomes[student]
            assert o["reason"] in reasons and o["score"] == score, (student, o)
            assert o["isolation"] == level and o["phase"] == "recorded", (student, o)
            # A fork bomb's copies share their pages: over the limit by their RSS sum,
            # the watchdog counts again with PSS, so its figure is the memory used.
            slack = 1.1
            assert o["peak_memory_mb"] <= LIMITS.memory_mb * slack, (student, o)
            if o["reason"] == "out_of_memory":
                assert " limit of " in o["stopped_by"] and " MiB" in o["stopped_by"], o
                assert f"NEEDS ATTENTION {student}: out_of_memory" in flat
        assert "watchdog memory limit of 1024 MiB" in outcomes["bomb_memory"]["stopped_by"]
        assert "address-space limit" in outcomes["bomb_one_block"]["stopped_by"]
        # No bomb took more than its limit: the sandboxes together stayed within the
        # workers' limits (10 %: the sampler's overshoot).
        # (The machine's available memory is printed above, not asserted: other tests
        # run beside this one; docs/benchmarks.md has it measured on an idle machine.)
        assert meter.sandboxes <= WORKERS * LIMITS.memory_mb * 1.1, meter.sandboxes
        # Nothing of that user is left: no process, no job folder.
        time.sleep(0.5)
        assert unprivileged.processes_of(uid) == []
        assert [p for p in Path("/dev/shm").glob("jaxcourse-job-*")
                if p.stat().st_uid == uid] == []
    finally:
        unprivileged.kill_all(uid)
        shutil.rmtree(base, ignore_errors=True)
