"""cgroup v1 limits (root, memory and pids controllers on v1): one group per run.

Exercised for real on the project's machine (Debian 12, root, hybrid v1 hierarchy):
a 1 GiB limit stops a 4 GiB allocation, ``pids.max`` stops a fork bomb.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from grader.sandbox.limits import Limits, Stop, pids_limit_hit

ROOT = Path("/sys/fs/cgroup")
PARENT = "jaxcourse"
CONTROLLERS = ("memory", "pids")


def available(root: Path = ROOT) -> bool:
    """Whether this user may create memory and pids groups on v1."""
    for controller in CONTROLLERS:
        base = root / controller
        if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
            return False
    return True


def parents(root: Path = ROOT) -> list[Path]:
    """The folders that hold this project's groups (for the orphan sweep)."""
    return [root / c / PARENT for c in CONTROLLERS]


class CgroupV1:
    """A v1 memory + pids cgroup for one run (created and removed by the grader)."""

    name = "cgroup-v1"

    def __init__(self, job_name: str, limits: Limits, root: Path = ROOT):
        self.limits = limits
        self.dirs = {c: root / c / PARENT / job_name for c in CONTROLLERS}
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        mem = self.dirs["memory"]
        (mem / "memory.limit_in_bytes").write_text(str(limits.memory_mb << 20))
        swap = mem / "memory.memsw.limit_in_bytes"
        if swap.exists():
            try:
                swap.write_text(str(limits.memory_mb << 20))
            except OSError:
                pass
        (self.dirs["pids"] / "pids.max").write_text(str(limits.task_limit()))

    def wrap(self, command: list[str]) -> list[str]:
        procs = " ".join(str(d / "cgroup.procs") for d in self.dirs.values())
        return ["sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 97; done; exec "$@"',
                "sandbox", *command]

    def preexec(self) -> None:
        pass

    def started(self, pid: int, job: Path) -> None:
        pass

    def tasks_exhausted(self) -> bool:
        return pids_limit_hit(self.dirs["pids"] / "pids.events")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.dirs["pids"] / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def stop(self) -> Stop | None:
        try:
            control = (self.dirs["memory"] / "memory.oom_control").read_text()
        except OSError:
            return None
        for line in control.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return Stop("memory", self.limits.memory_mb, self.peak_mb(), self.name)
        return None

    def peak_mb(self) -> float | None:
        try:
            return int((self.dirs["memory"] / "memory.max_usage_in_bytes").read_text()) / 2**20
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
