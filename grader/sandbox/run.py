"""One sandboxed run of an untrusted notebook, and what came back from it.

One run = one fresh job folder (jobs.py), one bubblewrap sandbox (bwrap.py), the
limits of this machine's isolation level (levels.py: a cgroup, a systemd scope or the
watchdog) and ``child.py`` inside driving an ipykernel with nbclient. The grader
outside enforces the notebook's wall clock by killing every task of the run; the
child enforces the per-cell limit. Nothing a run writes is trusted: files are read
back size-capped, notebooks as JSON.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.sandbox import bwrap, jobs, levels
from grader.sandbox.limits import Limits, RunResult, SandboxUnavailable, Stop
from grader.sandbox.watchdog import common_rlimits

CHILD = bwrap.CHILD
EXIT_NO_CGROUP = 97  # the cgroup wrappers' exit code when joining the group failed
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not glibc/musl Linux
    _prctl = None


def isolation() -> str:
    """This machine's level, e.g. ``bubblewrap+cgroup-v1`` (see levels.py)."""
    return levels.detect().name


def _read_capped(path: Path, limit: int) -> bytes | None:
    """Reads a file the sandbox wrote, or None when it is missing, odd or too large."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        with open(path, "rb") as f:
            return f.read(limit + 1)[:limit]
    except OSError:
        return None


def _progress(job: Path, limit: int) -> list[dict]:
    raw = _read_capped(job / "progress.jsonl", limit) or b""
    events = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # a line the sandbox garbled
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _preexec(rlimits, limiter):
    """In the child before exec: rlimits, die with the grader, keep orphans in the tree."""
    import resource

    def run() -> None:
        for res, value in rlimits:
            resource.setrlimit(res, value)
        limiter.preexec()
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            # Unsandboxed, orphans of the kernel would leave the tree the watchdog
            # walks; a subreaper keeps them (bubblewrap's PID namespace does it there).
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    return run


class _TaskLimitGuard:
    """Ends a run the moment its group refuses a fork at the task limit (cgroups and
    systemd scopes; the watchdog stops its own). The kernel only refuses the fork: a
    fork bomb then spins on failed forks, hundreds of processes, until its cell's time
    runs out, and takes the CPU from the runs beside it (in a real guest under qemu's
    emulator, tests/hosts, the sandbox beside one lost its points to time-outs)."""

    def __init__(self, limiter, interval: float = 0.02):
        self.hit = False
        self._done = threading.Event()
        self._limiter = limiter
        threading.Thread(target=self._watch, args=(interval,), daemon=True,
                         name="jaxcourse-task-limit").start()

    def _watch(self, interval: float) -> None:
        while not self._done.wait(interval):
            if self._limiter.tasks_exhausted():
                self.hit = True
                self._limiter.kill_all()
                return

    def close(self) -> None:
        self._done.set()


def _classify(code, events, stop: Stop | None, limits: Limits) -> tuple[str, str]:
    """(failure, detail) of a run that ended with ``code`` (None: killed on the wall clock)."""
    kinds = {e.get("event") for e in events}
    ended = any(e.get("event") == "end" for e in events)
    if stop is not None and stop.kind in ("memory", "host"):
        return "out_of_memory", stop.describe()
    if code is None:
        return "notebook_timeout", f"the notebook ran past its limit of {limits.notebook_timeout:g} s"
    if "flood" in kinds:
        return "output_flood", f"a cell printed more than {20 * limits.output_bytes} bytes"
    if "memory_error" in kinds:
        return "out_of_memory", (stop.describe() if stop else
                                 "a cell raised MemoryError (the system refused the allocation)")
    if "timeout" in kinds:
        return "timeout", f"a cell ran past its limit of {limits.cell_timeout:g} s"
    if stop is not None:  # tasks
        return "kernel_died", stop.describe()
    if code == EXIT_NO_CGROUP and not ended:
        return "kernel_died", "the sandbox could not join its cgroup"
    if "died" in kinds or not ended:
        return "kernel_died", "the kernel died (a crash, os._exit, a signal or a killed process)"
    if code != 0:
        return "kernel_died", f"the notebook runner stopped (exit {code})"
    return "", ""


def run_notebook(nb: dict, *, limits: Limits = Limits(), collect: tuple[str, ...] = (),
                 extra_files: dict[str, bytes] | None = None, cache: Path | None = None,
                 cache_writable: bool = False) -> RunResult:
    """Executes ``nb`` in a fresh sandbox; returns its outputs and collected files.

    Raises SandboxUnavailable where bubblewrap cannot run, unless
    ``limits.allow_unsandboxed``.
    """
    start = time.monotonic()
    level = levels.detect()
    if not level.sandboxed and not limits.allow_unsandboxed:
        raise SandboxUnavailable(levels.refusal(level))
    job = jobs.create()
    limiter = None
    try:
        (job / "in.ipynb").write_text(json.dumps(nb))
        for name, data in (extra_files or {}).items():
            (job / name).write_bytes(data)
        bwrap.prepare(job)
        limiter = levels.limiter(level, job.name, limits)
        inner = [sys.executable, "-I", str(CHILD), str(job), str(limits.cell_timeout),
                 str(limits.output_bytes)]
        if level.sandboxed:
            command = bwrap.command(job, cache, cache_writable) + inner
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            command, env = inner, bwrap.environment(job, cache)
        rlimits = common_rlimits(limits)
        proc = subprocess.Popen(limiter.wrap(command), cwd=job, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_preexec(rlimits, limiter))
        limiter.started(proc.pid, job)
        guard = _TaskLimitGuard(limiter)
        try:
            code = proc.wait(timeout=limits.notebook_timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            guard.close()
        # Whatever happened, nothing started by the submission outlives the run.
        limiter.kill_all()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        stop = limiter.stop()
        if stop is None and guard.hit:
            stop = Stop("tasks", limits.task_limit(), float(limits.task_limit()), limiter.name)
        events = _progress(job, limits.read_bytes)
        if stop is None and any(e.get("event") == "memory_error" for e in events):
            address_space = getattr(limiter, "address_space_mb", None)
            if address_space:
                stop = Stop("memory", address_space, None, "rlimit-as")
        failure, detail = _classify(code, events, stop, limits)
        started = [e["cell"] for e in events if e.get("event") == "start"]
        raw_nb = _read_capped(job / "out.ipynb", limits.read_bytes + limits.output_bytes * 2)
        notebook = None
        if raw_nb is not None:
            try:
                notebook = json.loads(raw_nb)
            except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the stack
                notebook = None
        files = {}
        for name in collect:
            data = _read_capped(job / name, limits.read_bytes)
            if data is not None:
                files[name] = data
        return RunResult(
            notebook=notebook if isinstance(notebook, dict) else None,
            failure=failure,
            failed_cell=(started[-1] if started else None) if failure else None,
            files=files,
            output_capped=any(e.get("event") == "output_capped" for e in events),
            seconds=time.monotonic() - start,
            peak_memory_mb=limiter.peak_mb(),
            isolation=level.name,
            detail=detail,
            stop=stop if failure else None,
        )
    finally:
        if limiter is not None:
            limiter.remove()
        shutil.rmtree(job, ignore_errors=True)


def clean_orphans(min_age_s: float = 600.0) -> list[str]:
    """Removes job folders, processes and cgroups a killed grader left; returns them."""
    return jobs.clean_orphans(levels.cgroup_parents(), min_age_s)
