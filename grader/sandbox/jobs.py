"""Job folders, and the sweep that removes what a killed grader left behind.

A run's job folder lives on a memory-backed filesystem (/dev/shm) and names the
process that owns it (``.owner``: pid and start time). A grader killed with SIGKILL
cannot clean up: its sandbox dies with it (bubblewrap's ``--die-with-parent``; the
unsandboxed runner by ``PR_SET_PDEATHSIG``), but its job folder and its cgroups stay.
The next grading run removes them (:func:`clean_orphans`, called by every batch):
every folder whose owner is gone, the processes still working in it, and the cgroups
named after it. A batch running beside it keeps its own: their owners are alive.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

PREFIX = "jaxcourse-job-"
SHM = Path("/dev/shm")


def base() -> Path:
    return SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else Path(tempfile.gettempdir())


def start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def create() -> Path:
    """A new job folder (mode 0700) owned by this process."""
    # JAXCOURSE_JOB_TAG names a batch's job folders and cgroups (tests look for leftovers).
    tag = "".join(ch for ch in os.environ.get("JAXCOURSE_JOB_TAG", "") if ch.isalnum())[:32]
    job = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{tag}-" if tag else PREFIX, dir=base()))
    os.chmod(job, 0o700)
    (job / ".owner").write_text(f"{os.getpid()} {start_time(os.getpid())}")
    return job


def owner_alive(job: Path) -> bool | None:
    """Whether the process that made ``job`` still runs (None: no readable record).

    A killed owner whose parent died too is a zombie until init reaps it, which can
    take long (this project's VM): same pid, same start time, but dead.
    """
    try:
        pid, start = (job / ".owner").read_text().split()
        stat = Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()
        return stat[0] not in "ZX" and int(stat[19]) == int(start)
    except FileNotFoundError:
        return False if (job / ".owner").exists() else None
    except (OSError, ValueError, IndexError):
        return None


def _processes_in(folder: Path) -> list[int]:
    """Processes (of this user, or any for root) whose working folder is inside ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(int(entry.name))
    return found


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def clean_orphans(cgroup_parents: list[Path], min_age_s: float = 600.0) -> list[str]:
    """Removes job folders, processes and cgroups a killed grader left; returns them.

    A folder goes when its owner is gone; one without an owner record (an older
    grader's) only when older than ``min_age_s``. A cgroup goes when its job folder
    is gone (a live run's folder outlives its groups).
    """
    removed = []
    now = time.time()
    for job in base().glob(f"{PREFIX}*"):
        try:
            if job.stat().st_uid != os.geteuid():
                continue
            alive = owner_alive(job)
            if alive or (alive is None and now - job.stat().st_mtime <= min_age_s):
                continue
        except OSError:
            continue
        for _ in range(3):
            pids = _processes_in(job)
            if not pids:
                break
            _kill(pids)
            removed += [f"process {pid}" for pid in pids]
            time.sleep(0.05)
        shutil.rmtree(job, ignore_errors=True)
        removed.append(str(job))
    for parent in cgroup_parents:
        for group in parent.glob(f"{PREFIX}*") if parent.is_dir() else ():
            if (base() / group.name).exists():
                continue
            try:
                _kill(int(p) for p in (group / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
            for _ in range(20):
                try:
                    group.rmdir()
                    removed.append(str(group))
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
    return removed
