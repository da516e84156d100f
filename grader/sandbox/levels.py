"""Which isolation a run gets on this machine, chosen once per process, and the lines
that report it.

A level is a sandbox and a way to hold limits, written ``bubblewrap+cgroup-v1``.

- **Sandbox**: ``bubblewrap`` wherever it works; otherwise ``NO-SANDBOX``, which runs
  only when unsandboxed runs were allowed (``--allow-unsandboxed``, for notebooks
  you trust): without it grading stops with one line naming the package to install.
- **Limits**, the first that works, in this order:

  1. ``cgroup-v2``: root, or a user inside a delegated v2 subtree (cgroup_v2.py);
  2. ``cgroup-v1``: root with the v1 memory and pids controllers (cgroup_v1.py);
  3. ``systemd-scope``: a user whose systemd manager delegates memory and pids
     (systemd.py);
  4. ``watchdog``: anyone else (watchdog.py).

  Direct cgroups come first: nothing else has to run, limits are enforced by the
  kernel at every page, and the grader reads exact peaks. v2 before v1 only by
  convention: a controller lives in one hierarchy at a time, so at most one of them
  offers memory (this project's VM: v1; current distributions: v2). A systemd scope
  is as exact but costs a D-Bus round trip per run and needs a user manager. The
  watchdog samples, so a fast allocator overshoots by what it allocates in one
  interval; it comes last.

``JAXCOURSE_LIMITS=cgroup-v2|cgroup-v1|systemd-scope|watchdog`` forces a way to hold
limits (for tests and measurements); an unavailable one is refused.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

from grader.sandbox import bwrap, cgroup_v1, cgroup_v2, systemd, watchdog
from grader.sandbox.limits import Limits, SandboxUnavailable

KINDS = ("cgroup-v2", "cgroup-v1", "systemd-scope", "watchdog")
ISOLATION_DOC = "docs/isolation.md"


@dataclasses.dataclass(frozen=True)
class Level:
    sandbox: str  # "bubblewrap" or "NO-SANDBOX"
    limits: str  # one of KINDS
    sandbox_problem: str = ""  # one line: why there is no bubblewrap sandbox
    notes: tuple[str, ...] = ()  # why each better way to hold limits is missing
    v2_parent: str | None = None  # where cgroup-v2 groups go

    @property
    def name(self) -> str:
        return f"{self.sandbox}+{self.limits}"

    @property
    def sandboxed(self) -> bool:
        return self.sandbox == "bubblewrap"


def choose(*, sandbox_problem: str, v2: tuple[Path | None, str], v1: bool,
           scope: tuple[bool, str], forced: str = "") -> Level:
    """The level these facts give (a pure function: the tests feed it facts)."""
    sandbox = "NO-SANDBOX" if sandbox_problem else "bubblewrap"
    offers = {"cgroup-v2": (v2[0] is not None, f"cgroup-v2: {v2[1]}"),
              "cgroup-v1": (v1, "cgroup-v1: this user may not create v1 memory and pids groups"),
              "systemd-scope": (scope[0], f"systemd-scope: {scope[1]}"),
              "watchdog": (True, "")}
    if forced:
        if forced not in offers:
            raise SandboxUnavailable(f"JAXCOURSE_LIMITS={forced} is not one of {', '.join(KINDS)}")
        if not offers[forced][0]:
            raise SandboxUnavailable(f"JAXCOURSE_LIMITS={forced} is not available here: "
                                     f"{offers[forced][1]}")
        chosen = forced
    else:
        chosen = next(k for k in KINDS if offers[k][0])
    notes = tuple(offers[k][1] for k in KINDS[:KINDS.index(chosen)] if not offers[k][0])
    return Level(sandbox, chosen, sandbox_problem, notes,
                 str(v2[0]) if chosen == "cgroup-v2" and v2[0] is not None else None)


@functools.cache
def detect() -> Level:
    """This process's level (probed once: bwrap's self-test, cgroupfs, systemd-run)."""
    _, problem = bwrap.probe()
    forced = os.environ.get("JAXCOURSE_LIMITS", "").strip()
    v2 = cgroup_v2.find_parent(cgroup_v2.mount_point(), euid=os.geteuid(),
                               own=cgroup_v2.own_group())
    v1 = cgroup_v1.available()
    # systemd-run takes a D-Bus round trip: ask only when nothing better is there.
    need_scope = v2[0] is None and not v1 and forced in ("", "systemd-scope")
    scope = systemd.available() if need_scope else (False, "not probed")
    return choose(sandbox_problem=problem, v2=v2, v1=v1, scope=scope, forced=forced)


def limiter(level: Level, job_name: str, limits: Limits):
    """The object that holds one run's limits at this level."""
    if level.limits == "cgroup-v2":
        return cgroup_v2.CgroupV2(Path(level.v2_parent) / job_name, limits)
    if level.limits == "cgroup-v1":
        return cgroup_v1.CgroupV1(job_name, limits)
    if level.limits == "systemd-scope":
        return systemd.SystemdScope(job_name, limits)
    return watchdog.Watchdog(job_name, limits)


def refusal(level: Level) -> str:
    """The one line that stops grading where there is no sandbox."""
    return (f"no grading sandbox: {level.sandbox_problem}. To grade notebooks you trust "
            "without a sandbox, pass --allow-unsandboxed (make autograde ALLOW_UNSANDBOXED=1).")


def require(limits: Limits, workers: int = 1) -> list[str]:
    """Raises SandboxUnavailable where grading must stop; else the lines to show first."""
    level = detect()
    if not level.sandboxed and not limits.allow_unsandboxed:
        raise SandboxUnavailable(refusal(level))
    lines = []
    if not level.sandboxed:
        lines.append(f"WARNING: grading WITHOUT a sandbox (--allow-unsandboxed): submissions "
                     f"can read and change whatever this user can. {level.sandbox_problem}.")
    if level.limits == "watchdog":
        lines.append(f"note: no cgroup is available to this user, so a watchdog holds the "
                     f"limits (sampled every {limits.watchdog_interval * 1000:.0f} ms; see "
                     f"{ISOLATION_DOC}).")
    available, _ = watchdog.host_available_mb()
    if workers * limits.memory_mb > available:
        lines.append(f"WARNING: {workers} workers x {limits.memory_mb} MiB is more than the "
                     f"{available:.0f} MiB this machine has available: use fewer workers.")
    return lines


def cgroup_parents() -> list[Path]:
    """Every folder that may hold this project's run groups (for the orphan sweep)."""
    parents = cgroup_v1.parents()
    mount = cgroup_v2.mount_point()
    if mount is not None:
        parents.append(mount / cgroup_v2.PARENT)
    level = detect()
    if level.v2_parent:
        parents.append(Path(level.v2_parent))
    return list(dict.fromkeys(parents))
