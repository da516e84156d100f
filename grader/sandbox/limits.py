"""What a sandboxed run may use (``Limits``), what came back (``RunResult``), and why
a run stopped (``Stop``): plain data shared by every isolation level."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path


class SandboxUnavailable(RuntimeError):
    """No sandbox here and unsandboxed runs were not allowed; ``str()`` is one line."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed notebook run."""

    cell_timeout: float = 60.0
    notebook_timeout: float = 600.0
    memory_mb: int = 3072
    tasks: int = 0  # 0: 256 + 16 per CPU (XLA starts a thread per core and then some)
    output_bytes: int = 2_000_000
    read_bytes: int = 16_000_000  # the most read back from any one file
    # Where bubblewrap is missing or cannot run, grade anyway without it (for notebooks
    # you trust: they can read and write whatever the grading user can). Where
    # bubblewrap works it is always used, whatever this says.
    allow_unsandboxed: bool = False
    # How often the watchdog (the level for a user without cgroups) samples a sandbox.
    watchdog_interval: float = 0.02

    def task_limit(self) -> int:
        return self.tasks or 256 + 16 * (os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class Stop:
    """A limit that stopped a run: ``kind`` is memory, tasks, processes (the watchdog's)
    or host (free memory)."""

    kind: str
    limit: float  # MiB for memory and host, a count for tasks
    peak: float | None  # MiB (memory, host) or tasks, as measured by ``by``
    by: str  # the mechanism: cgroup-v1, cgroup-v2, systemd-scope, watchdog, rlimit-as

    def describe(self) -> str:
        """One line with the numbers, e.g. for the summary and the CSV."""
        peak = "" if self.peak is None else f"{self.peak:.0f} "
        if self.kind == "tasks":
            return f"stopped at {peak}tasks by the {self.by} task limit of {self.limit:.0f}"
        if self.kind == "processes":
            return (f"stopped at {peak}processes by the {self.by} process limit of "
                    f"{self.limit:.0f}")
        if self.kind == "host" and not self.limit:
            return (f"killed at {peak}MiB by the {self.by}: the machine ran out of memory "
                    "before this run reached its own limit")
        if self.kind == "host":
            return (f"stopped at {peak}MiB by the {self.by}: the machine's available memory "
                    f"fell below its floor of {self.limit:.0f} MiB")
        if self.by == "rlimit-as":
            return (f"a cell raised MemoryError under the address-space limit of "
                    f"{self.limit:.0f} MiB")
        at = f"at {peak}MiB " if peak else ""
        return f"stopped {at}by the {self.by} memory limit of {self.limit:.0f} MiB"


@dataclasses.dataclass
class RunResult:
    """What came back from a sandbox: untrusted data, already size-checked."""

    notebook: dict | None
    failure: str  # "", "timeout", "kernel_died", "out_of_memory", "notebook_timeout", ...
    failed_cell: int | None
    files: dict[str, bytes]
    output_capped: bool
    seconds: float
    peak_memory_mb: float | None
    isolation: str
    detail: str = ""
    stop: Stop | None = None  # the limit that stopped the run, with its numbers


def pids_limit_hit(events: Path) -> bool:
    """Whether a fork or a new thread failed at a group's ``pids.max``: its
    ``pids.events`` counts them (``max N``, cgroup v1 and v2 alike). An honest run
    stays far below the limit; one that reaches it is a bomb spinning on failed forks."""
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip().isdigit():
                return int(value) > 0
    except OSError:
        pass
    return False
