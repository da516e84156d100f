"""Limits for an unprivileged user on a systemd host: one transient scope per run.

``systemd-run --user --scope -p MemoryMax=... -p MemorySwapMax=0 -p TasksMax=...``
asks the user's own service manager for a cgroup v2 group with the run's limits, as
rootless container engines do; the grader then reads ``memory.events`` and
``memory.peak`` in it and ends it with ``cgroup.kill`` (the user owns the groups its
manager creates). ``--collect`` lets systemd remove the scope once it is empty, even
after an OOM kill, so nothing is left when a grader is killed.

It needs a user manager (a login session, or ``loginctl enable-linger USER``) whose
subtree has the memory and pids controllers delegated (systemd's default for
``user@.service`` on current distributions); :func:`available` checks that both
limits really land in the scope.

The project's machine has no systemd as PID 1: tests/test_cgroups.py drives this code
through a fake ``systemd-run``, and ``make test-hosts`` runs it for real, as an
instructor with a user session in a Debian 12 guest (systemd 252; docs/isolation.md).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from pathlib import Path

from grader.sandbox import cgroup_v2
from grader.sandbox.limits import Limits, Stop

_PROBE_MEMORY, _PROBE_TASKS = 300 << 20, 77
# Prints the memory.max and pids.max of the scope it runs in.
_PROBE = 'p=$(sed -n "s/^0:://p" /proc/self/cgroup); cat "$1$p/memory.max" "$1$p/pids.max"'


@functools.cache
def available() -> tuple[bool, str]:
    """Whether a user scope gets real memory and task limits here, and why not."""
    exe = shutil.which("systemd-run")
    if not exe:
        return False, "systemd-run is not installed"
    mount = cgroup_v2.mount_point()
    if mount is None:
        return False, "no cgroup2 hierarchy is mounted"
    try:
        probe = subprocess.run(
            [exe, "--user", "--scope", "--quiet", "--collect", "-p", f"MemoryMax={_PROBE_MEMORY}",
             "-p", f"TasksMax={_PROBE_TASKS}", "--", "sh", "-c", _PROBE, "sh", str(mount)],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
            env={**os.environ, **bus_environment()})
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"systemd-run --user failed: {err}"
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[0]
        return False, f"systemd-run --user failed: {first[:160]}"
    if probe.stdout.split() != [str(_PROBE_MEMORY), str(_PROBE_TASKS)]:
        return False, ("the user's systemd manager does not delegate the memory and pids "
                       "controllers")
    return True, ""


def bus_environment() -> dict[str, str]:
    """The variables by which ``systemd-run --user`` reaches this user's manager: this
    process's own, else the runtime folder a login session or lingering gives the user."""
    env = {k: os.environ[k] for k in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
           if os.environ.get(k)}
    runtime = Path(f"/run/user/{os.getuid()}")
    if "XDG_RUNTIME_DIR" not in env and runtime.is_dir():
        env["XDG_RUNTIME_DIR"] = str(runtime)
    return env


class SystemdScope:
    """A transient user scope for one run; its group is read through :class:`CgroupV2`."""

    name = "systemd-scope"

    def __init__(self, job_name: str, limits: Limits, *, mount: Path | None = None,
                 group_of=cgroup_v2.own_group):
        self.limits = limits
        self.unit = f"{job_name}.scope"
        self.mount = mount or cgroup_v2.mount_point() or Path("/sys/fs/cgroup")
        self.group_of = group_of  # pid -> v2 group path (a seam for the fake in the tests)
        self.group: cgroup_v2.CgroupV2 | None = None

    def wrap(self, command: list[str]) -> list[str]:
        # The sandbox starts with an environment of PATH alone, and `systemd-run --user`
        # finds the user's manager through XDG_RUNTIME_DIR (or the bus address): without
        # them it fails ("Failed to connect to bus"), and every run was lost as a dead
        # kernel (the first run in a real guest, tests/hosts, showed it). bubblewrap
        # clears the environment again for the command.
        return ["/usr/bin/env", *(f"{k}={v}" for k, v in bus_environment().items()),
                shutil.which("systemd-run") or "systemd-run", "--user", "--scope", "--quiet",
                "--collect", f"--unit={self.unit}",
                "-p", f"MemoryMax={self.limits.memory_mb << 20}", "-p", "MemorySwapMax=0",
                "-p", f"TasksMax={self.limits.task_limit()}", "--", *command]

    def preexec(self) -> None:
        pass

    def started(self, pid: int, job: Path) -> None:
        # systemd-run moves itself into the scope, then execs the command: wait for it
        # (the command does not start before; a D-Bus round trip can take seconds on a
        # loaded or emulated host).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            path = self.group_of(pid)
            if path is None:
                return  # exited already (it failed, or the run was that short)
            if path.endswith("/" + self.unit):
                self.group = cgroup_v2.CgroupV2(self.mount / path.lstrip("/"), self.limits,
                                                create=False, name=self.name)
                self.group.started(pid, job)
                return
            time.sleep(0.01)

    def kill_all(self) -> None:
        if self.group is not None:
            self.group.kill_all()
        else:
            try:
                subprocess.run(["systemctl", "--user", "kill", "--signal=SIGKILL", self.unit],
                               capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def tasks_exhausted(self) -> bool:
        return self.group.tasks_exhausted() if self.group else False

    def stop(self) -> Stop | None:
        return self.group.stop() if self.group else None

    def peak_mb(self) -> float | None:
        return self.group.peak_mb() if self.group else None

    def remove(self) -> None:
        self.kill_all()  # an empty scope is collected by systemd (--collect)
