"""cgroup v2 limits: one group per run, with ``memory.max``, ``memory.swap.max``,
``pids.max``, ``memory.oom.group``; ``memory.events`` tells an OOM kill and
``cgroup.kill`` ends every task at once.

Where the groups go (:func:`find_parent`):
- root: ``<cgroup2 mount>/jaxcourse``, with memory and pids enabled down to it;
- a user inside a delegated subtree (a ``Delegate=yes`` unit, a JupyterHub
  spawner that delegates): the grader moves itself into a leaf
  ``jaxcourse-grader`` of its own group ("no internal processes": a group that
  holds processes cannot enable controllers for its children) and puts the runs
  beside it;
- a user on a systemd host without such a unit: ``systemd.py`` asks systemd for a
  scope per run instead.

The project's machine has its memory and pids controllers on v1, and a cgroup2
hierarchy cannot be given them there: tests/test_cgroups.py runs this code against a
fake cgroupfs tree (files written and read, kills through ``cgroup.kill``), and
``make test-hosts`` runs it for real, as root in a Debian 12 guest (Linux 6.1, unified
cgroup v2; docs/isolation.md).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from grader.sandbox.limits import Limits, Stop, pids_limit_hit

MOUNTINFO = Path("/proc/self/mountinfo")
PARENT = "jaxcourse"
LEAF = "jaxcourse-grader"
NEEDED = {"memory", "pids"}


def mount_point(mountinfo: Path = MOUNTINFO) -> Path | None:
    """Where the cgroup2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on hybrid)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            return Path(left.split()[4])
    return None


def own_group(pid: int | str = "self") -> str | None:
    """A process's v2 group (``/user.slice/...``), from ``/proc/PID/cgroup``."""
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        pass
    return None


def _controllers(path: Path, name: str = "cgroup.controllers") -> set[str]:
    try:
        return {c.lstrip("+") for c in (path / name).read_text().split()}
    except OSError:
        return set()


def _enable(path: Path) -> None:
    """Makes memory and pids available to ``path``'s children (raises OSError)."""
    if not NEEDED <= _controllers(path, "cgroup.subtree_control"):
        (path / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(NEEDED)))


def find_parent(mount: Path | None, *, euid: int, own: str | None,
                pid: int | None = None) -> tuple[Path | None, str]:
    """The group under which runs get their own groups, or ``(None, why not)``."""
    if mount is None:
        return None, "no cgroup2 hierarchy is mounted"
    missing = "the memory and pids controllers are not on cgroup v2 here"
    if euid == 0:
        if not NEEDED <= _controllers(mount):
            return None, missing
        parent = mount / PARENT
        try:
            _enable(mount)
            parent.mkdir(exist_ok=True)
            _enable(parent)
        except OSError as err:  # e.g. a container's root group that holds processes
            return None, f"cannot enable memory and pids under {mount} ({err.strerror})"
        return parent, ""
    if not own:
        return None, "this process is in no cgroup v2 group"
    group = mount / own.lstrip("/")
    base = group.parent if group.name == LEAF else group
    if not NEEDED <= _controllers(base):
        return None, missing
    if not (os.access(base, os.W_OK) and os.access(base / "cgroup.subtree_control", os.W_OK)):
        return None, "this user may not create cgroups (no delegated subtree)"
    if group.name != LEAF:
        leaf = base / LEAF
        try:
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(pid or os.getpid()))
            _enable(base)
        except OSError as err:
            try:
                (base / "cgroup.procs").write_text(str(pid or os.getpid()))
                leaf.rmdir()
            except OSError:
                pass
            return None, f"cannot use the delegated group {base} ({err.strerror})"
    return base, ""


class CgroupV2:
    """A v2 group for one run: created here (``create``) or systemd's scope, read and killed."""

    def __init__(self, path: Path, limits: Limits, *, create: bool = True,
                 name: str = "cgroup-v2"):
        self.path, self.limits, self.create, self.name = path, limits, create, name
        self._peak: float | None = None
        self._events: dict[str, int] = {}  # the last memory.events read
        self._sampling = threading.Event()
        if create:
            path.mkdir()
            self._write("memory.max", str(limits.memory_mb << 20))
            self._write("memory.swap.max", "0", optional=True)  # no swap: RSS is the limit
            self._write("memory.oom.group", "1", optional=True)  # an OOM kill takes them all
            self._write("pids.max", str(limits.task_limit()))

    def _write(self, name: str, value: str, optional: bool = False) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError:
            if not optional:
                raise

    def wrap(self, command: list[str]) -> list[str]:
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > "{procs}" || exit 97; exec "$@"', "sandbox", *command]

    def preexec(self) -> None:
        pass

    def started(self, pid: int, job: Path) -> None:
        if not (self.path / "memory.peak").exists():  # kernels before 5.19: sample it
            threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self._sampling.wait(0.05):
            try:
                mb = int((self.path / "memory.current").read_text()) / 2**20
            except (OSError, ValueError):
                return
            self._peak = max(self._peak or 0.0, mb)

    def tasks_exhausted(self) -> bool:
        """Whether a fork was refused at ``pids.max``. Polled through the run (every 20
        ms), it also remembers ``memory.events`` and the peak: a systemd scope can be
        gone, and its files with it, by the time the run is over (a memory bomb in a
        real guest was reported as a dead kernel so)."""
        self.events()
        self.peak_mb()
        return pids_limit_hit(self.path / "pids.events")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        kill = self.path / "cgroup.kill"  # Linux 5.14+: every task, forks in flight too
        if kill.exists():
            try:
                kill.write_text("1")
            except OSError:
                pass
        frozen = self._freeze("1")  # older kernels: freeze, kill each task, thaw
        for _ in range(100):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        if frozen:
            self._freeze("0")

    def _freeze(self, value: str) -> bool:
        try:
            (self.path / "cgroup.freeze").write_text(value)
            return True
        except OSError:
            return False

    def events(self) -> dict[str, int]:
        """``memory.events``, or the last read of it once the group is gone."""
        try:
            lines = (self.path / "memory.events").read_text().splitlines()
        except OSError:
            return dict(self._events)
        out = {}
        for line in lines:
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
        self._events = out
        return out

    def stop(self) -> Stop | None:
        self._sampling.set()
        events = self.events()
        killed = events.get("oom_kill", 0) > 0 or events.get("oom_group_kill", 0) > 0
        if not killed:
            return None
        # `oom_kill` counts kills by any OOM killer; `oom` counts this group reaching its
        # own limit. Killed without reaching it, the run fell to the machine running out
        # of memory (seen in a Debian 12 guest, make test-hosts): said so, not blamed on
        # the run's limit.
        if events.get("oom", 0) > 0:
            return Stop("memory", self.limits.memory_mb, self.peak_mb(), self.name)
        return Stop("host", 0, self.peak_mb(), "kernel's OOM killer")

    def peak_mb(self) -> float | None:
        """``memory.peak``, or the last figure seen once the group is gone."""
        try:
            self._peak = int((self.path / "memory.peak").read_text()) / 2**20
        except (OSError, ValueError):
            pass
        return self._peak

    def remove(self) -> None:
        self._sampling.set()
        self.kill_all()
        if not self.create:
            return
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
