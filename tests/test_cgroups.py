"""The ways to hold limits, without JAX: the order levels are chosen in, cgroup v2 and
systemd scopes against a fake cgroupfs tree, the watchdog on small real bombs, and
the sweep of what a killed grader leaves.

cgroup v2 cannot be given the memory and pids controllers on the project's machine
(they are on v1 there), so the v2 code runs here against plain folders laid out as
cgroupfs is: the tests check what it writes, what it reads (``memory.events``,
``memory.peak``) and that it kills every task listed in ``cgroup.procs``. A fake
``systemd-run`` stands in for systemd. Real v1 groups are exercised by
tests/test_corpus.py (as root), the watchdog by tests/test_unprivileged.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.sandbox import cgroup_v2, jobs, levels, run, systemd, watchdog
from grader.sandbox.limits import Limits, SandboxUnavailable, Stop

LIMITS = Limits(memory_mb=256, tasks=64)


def _fake_v2(tmp_path: Path, controllers="cpuset cpu io memory hugetlb pids") -> Path:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cgroup.procs").write_text("")
    return root


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


# ---------------------------------------------------------------- the order of levels

def test_levels_are_chosen_in_the_documented_order():
    none = (None, "not here")
    facts = dict(sandbox_problem="", v2=(Path("/sys/fs/cgroup/jaxcourse"), ""), v1=True,
                 scope=(True, ""))
    assert levels.choose(**facts).name == "bubblewrap+cgroup-v2"
    assert levels.choose(**{**facts, "v2": none}).name == "bubblewrap+cgroup-v1"
    assert levels.choose(**{**facts, "v2": none, "v1": False}).name == "bubblewrap+systemd-scope"
    level = levels.choose(**{**facts, "v2": none, "v1": False, "scope": (False, "no bus")})
    assert level.name == "bubblewrap+watchdog"
    assert level.notes == ("cgroup-v2: not here",
                           "cgroup-v1: this user may not create v1 memory and pids groups",
                           "systemd-scope: no bus")
    level = levels.choose(**{**facts, "sandbox_problem": "bubblewrap is not installed"})
    assert level.name == "NO-SANDBOX+cgroup-v2" and not level.sandboxed


def test_a_forced_level_must_be_available():
    facts = dict(sandbox_problem="", v2=(None, "not here"), v1=True, scope=(False, "no bus"))
    assert levels.choose(**facts, forced="watchdog").name == "bubblewrap+watchdog"
    with pytest.raises(SandboxUnavailable, match="systemd-scope is not available here: .*no bus"):
        levels.choose(**facts, forced="systemd-scope")
    with pytest.raises(SandboxUnavailable, match="not one of"):
        levels.choose(**facts, forced="docker")


def test_no_sandbox_no_run(monkeypatch):
    """run_notebook refuses before it makes anything, unless unsandboxed runs are allowed."""
    level = levels.Level("NO-SANDBOX", "watchdog", "bubblewrap is not installed: install the "
                         "package bubblewrap (apt-get install bubblewrap)")
    monkeypatch.setattr(levels, "detect", lambda: level)
    before = set(jobs.base().glob("jaxcourse-job-*"))
    with pytest.raises(SandboxUnavailable, match="^no grading sandbox: bubblewrap is not installed"):
        run.run_notebook({"cells": []}, limits=LIMITS)
    assert set(jobs.base().glob("jaxcourse-job-*")) == before
    lines = levels.require(Limits(allow_unsandboxed=True))
    assert lines[0].startswith("WARNING: grading WITHOUT a sandbox") and "root" not in lines[0]


# ---------------------------------------------------------------- cgroup v2

def test_v2_mount_point_is_read_from_mountinfo(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw\n"
                    "35 25 0:31 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n")
    assert cgroup_v2.mount_point(info) == Path("/sys/fs/cgroup/unified")
    info.write_text("25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw\n")
    assert cgroup_v2.mount_point(info) is None


def test_v2_root_gets_a_parent_with_memory_and_pids(tmp_path):
    root = _fake_v2(tmp_path)
    parent, why = cgroup_v2.find_parent(root, euid=0, own="/")
    assert parent == root / "jaxcourse" and why == ""
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_v2_without_the_controllers_is_not_used(tmp_path):
    root = _fake_v2(tmp_path, controllers="hugetlb")  # the project's VM: memory is on v1
    parent, why = cgroup_v2.find_parent(root, euid=0, own="/")
    assert parent is None and "memory and pids controllers are not on cgroup v2" in why
    assert not (root / "jaxcourse").exists()


def test_v2_delegated_subtree_moves_the_grader_into_a_leaf(tmp_path):
    """A Delegate=yes unit: the grader leaves its group for a leaf, runs go beside it."""
    root = _fake_v2(tmp_path)
    unit = root / "system.slice" / "grader.service"
    unit.mkdir(parents=True)
    (unit / "cgroup.controllers").write_text("memory pids\n")
    (unit / "cgroup.subtree_control").write_text("")
    (unit / "cgroup.procs").write_text("")
    parent, why = cgroup_v2.find_parent(root, euid=1000, own="/system.slice/grader.service",
                                        pid=4242)
    assert parent == unit, why
    assert (unit / "jaxcourse-grader" / "cgroup.procs").read_text() == "4242"
    assert (unit / "cgroup.subtree_control").read_text() == "+memory +pids"
    # A worker started later is in the leaf already: same parent, nothing moved again.
    again, _ = cgroup_v2.find_parent(root, euid=1000,
                                     own="/system.slice/grader.service/jaxcourse-grader", pid=1)
    assert again == unit and (unit / "jaxcourse-grader" / "cgroup.procs").read_text() == "4242"


def test_v2_session_group_of_a_user_is_not_delegated(tmp_path, monkeypatch):
    """A login session's group is root's: no groups for this user there."""
    root = _fake_v2(tmp_path)
    session = root / "user.slice" / "session-3.scope"
    session.mkdir(parents=True)
    (session / "cgroup.controllers").write_text("memory pids\n")
    (session / "cgroup.subtree_control").write_text("")
    # Root-owned in life; the test may run as root, who may write anything.
    monkeypatch.setattr(cgroup_v2.os, "access", lambda path, mode: False)
    parent, why = cgroup_v2.find_parent(root, euid=1000, own="/user.slice/session-3.scope")
    assert parent is None and "no delegated subtree" in why
    assert not (session / "jaxcourse-grader").exists()


def test_v2_group_writes_the_limits_and_reads_an_oom_kill(tmp_path):
    parent = _fake_v2(tmp_path) / "jaxcourse"
    parent.mkdir()
    group = cgroup_v2.CgroupV2(parent / "jaxcourse-job-x", LIMITS)
    files = {f.name: f.read_text() for f in group.path.iterdir()}
    assert files == {"memory.max": str(256 << 20), "memory.swap.max": "0",
                     "memory.oom.group": "1", "pids.max": "64"}
    assert group.wrap(["python", "x"])[:2] == ["sh", "-c"]
    assert f'> "{group.path}/cgroup.procs"' in group.wrap(["python"])[2]
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\n")
    assert group.stop() is None  # the limit was reached, nothing was killed
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 40\noom 2\noom_kill 1\n")
    (group.path / "memory.peak").write_text(str(256 << 20))
    assert group.stop() == Stop("memory", 256, 256.0, "cgroup-v2")
    assert group.stop().describe() == "stopped at 256 MiB by the cgroup-v2 memory limit of 256 MiB"
    # Killed by the machine's OOM killer, the group's own limit never reached (`oom` 0):
    # not the run's limit (a regression make test-hosts showed on a real kernel).
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\n")
    (group.path / "memory.peak").write_text(str(200 << 20))
    assert group.stop() == Stop("host", 0, 200.0, "kernel's OOM killer")
    assert group.stop().describe() == ("killed at 200 MiB by the kernel's OOM killer: the "
                                       "machine ran out of memory before this run reached "
                                       "its own limit")


def test_v2_peak_is_sampled_where_the_kernel_has_no_memory_peak(tmp_path):
    group = cgroup_v2.CgroupV2(_fake_v2(tmp_path) / "jaxcourse-job-y", LIMITS)
    (group.path / "memory.current").write_text(str(100 << 20))
    group.started(os.getpid(), tmp_path)
    time.sleep(0.2)
    (group.path / "memory.current").write_text(str(30 << 20))
    time.sleep(0.2)
    assert group.peak_mb() == 100.0
    group.stop()


def test_v2_kill_ends_every_task_listed(tmp_path):
    group = cgroup_v2.CgroupV2(_fake_v2(tmp_path) / "jaxcourse-job-z", LIMITS)
    procs = [_sleeper(), _sleeper()]
    (group.path / "cgroup.procs").write_text("\n".join(str(p.pid) for p in procs))
    (group.path / "cgroup.kill").write_text("")
    t = time.monotonic()
    group_done = []

    def reap():  # a real kernel empties cgroup.procs as tasks die: the fake does it here
        for p in procs:
            p.wait()
        (group.path / "cgroup.procs").write_text("")
        group_done.append(True)

    import threading

    threading.Thread(target=reap, daemon=True).start()
    group.kill_all()
    assert all(p.wait(timeout=5) == -9 for p in procs)
    assert (group.path / "cgroup.kill").read_text() == "1"
    assert (group.path / "cgroup.freeze").read_text() == "0"  # frozen for the kill, thawed
    assert time.monotonic() - t < 3 and group_done


def test_a_group_that_refused_a_fork_at_its_task_limit_is_exhausted(tmp_path):
    """pids.events counts the forks refused at pids.max (v1 and v2 alike)."""
    group = cgroup_v2.CgroupV2(_fake_v2(tmp_path) / "run", LIMITS)
    assert not group.tasks_exhausted()  # no pids.events yet
    (group.path / "pids.events").write_text("max 0\n")
    assert not group.tasks_exhausted()
    (group.path / "pids.events").write_text("max 3\n")
    assert group.tasks_exhausted()


def test_an_oom_kill_seen_while_polling_is_told_after_the_group_is_gone(tmp_path):
    """A systemd scope may be removed, memory.events with it, before the run is over:
    what the poll read during the run still tells the run's own memory limit."""
    import shutil

    group = cgroup_v2.CgroupV2(_fake_v2(tmp_path) / "run", LIMITS, create=False)
    group.path.mkdir()
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert not group.tasks_exhausted()
    shutil.rmtree(group.path)
    assert group.stop() == Stop("memory", LIMITS.memory_mb, None, "cgroup-v2")  # no memory.peak here


def test_the_guard_ends_a_run_whose_group_refused_a_fork(monkeypatch):
    """A fork bomb at pids.max spins on failed forks until its cell's time runs out,
    taking the CPU from the runs beside it: the guard kills it the moment it shows."""
    class Limiter:
        name, killed, polls = "cgroup-v2", 0, 0

        def tasks_exhausted(self):
            self.polls += 1
            return self.polls >= 3

        def kill_all(self):
            self.killed += 1

    limiter = Limiter()
    guard = run._TaskLimitGuard(limiter, interval=0.01)
    deadline = time.monotonic() + 5
    while not guard.hit and time.monotonic() < deadline:
        time.sleep(0.01)
    guard.close()
    assert guard.hit and limiter.killed == 1 and limiter.polls == 3


def test_an_unprivileged_watchdog_lets_a_bomb_pass_its_task_limit(monkeypatch):
    """RLIMIT_NPROC lies above the watchdog's limit, so a fork bomb gets over the limit
    (and is stopped) instead of spinning at the cap on failed forks."""
    import resource

    monkeypatch.setattr(watchdog.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(watchdog, "_user_tasks", lambda uid: 10)
    dog = watchdog.Watchdog("jaxcourse-job-test", LIMITS)
    nproc = dict(dog._rlimits)[resource.RLIMIT_NPROC][0]
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    expected = 10 + LIMITS.task_limit() + watchdog.nproc_margin(LIMITS)
    assert nproc == (expected if hard == resource.RLIM_INFINITY else min(expected, hard))
    assert watchdog.nproc_margin(LIMITS) >= 16


# ---------------------------------------------------------------- systemd scopes

def test_systemd_scope_command_and_its_group(tmp_path, monkeypatch):
    """The limits go to systemd-run; the scope's group is found and read as v2."""
    mount = _fake_v2(tmp_path)
    unit = "jaxcourse-job-abc.scope"
    path = f"/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}"
    scope_dir = mount / path.lstrip("/")
    scope_dir.mkdir(parents=True)
    (scope_dir / "memory.events").write_text("oom 1\noom_kill 1\n")  # its own limit reached, then a kill
    (scope_dir / "memory.peak").write_text(str(255 << 20))
    answers = iter(["/user.slice/user-1000.slice/session-2.scope", path])
    scope = systemd.SystemdScope("jaxcourse-job-abc", LIMITS, mount=mount,
                                 group_of=lambda pid: next(answers))
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    cmd = scope.wrap(["bwrap", "x"])
    at = next(i for i, part in enumerate(cmd) if part.endswith("systemd-run"))
    assert cmd[:at] == ["/usr/bin/env", "XDG_RUNTIME_DIR=/run/user/1000"]
    assert cmd[at + 1:] == ["--user", "--scope", "--quiet", "--collect", f"--unit={unit}",
                            "-p", f"MemoryMax={256 << 20}", "-p", "MemorySwapMax=0",
                            "-p", "TasksMax=64", "--", "bwrap", "x"]
    scope.started(12345, tmp_path)  # the first answer is before systemd-run moved itself
    assert scope.group is not None and scope.group.path == scope_dir
    assert scope.stop() == Stop("memory", 256, 255.0, "systemd-scope")


# Like the real one, it needs the user's manager (XDG_RUNTIME_DIR or the bus address),
# then runs the command after "--" in place of itself.
_FAKE_SYSTEMD_RUN = """#!/bin/sh
if [ -z "$XDG_RUNTIME_DIR" ] && [ -z "$DBUS_SESSION_BUS_ADDRESS" ]; then
  echo "Failed to connect to bus: \\$DBUS_SESSION_BUS_ADDRESS and \\$XDG_RUNTIME_DIR not defined" >&2
  exit 1
fi
echo "$XDG_RUNTIME_DIR" > "$(dirname "$0")/seen"
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


def test_a_run_in_a_systemd_scope_reaches_the_users_manager(tmp_path, monkeypatch):
    """The sandbox's command starts with PATH alone in its environment; systemd-run
    must still be given the way to the user's manager, or every run is lost as a dead
    kernel (found in a real Debian guest, tests/hosts: the first run of this level)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "systemd-run").write_text(_FAKE_SYSTEMD_RUN)
    (folder / "systemd-run").chmod(0o755)
    seen = folder / "seen"
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    problem = run.bwrap.probe()[1]
    level = levels.choose(sandbox_problem=problem, v2=(None, "not here"), v1=False,
                          scope=(True, ""), forced="systemd-scope")
    monkeypatch.setattr(levels, "detect", lambda: level)
    # No real scope here: the group is never found, and nothing waits for it.
    monkeypatch.setattr(systemd.SystemdScope, "started", lambda self, pid, job: None)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {},
                     "outputs": [], "source": "print(6 * 7)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    result = run.run_notebook(nb, limits=Limits(memory_mb=1024, allow_unsandboxed=True))
    assert result.failure == "", (result.failure, result.detail)
    assert seen.read_text().strip() == str(tmp_path)
    assert "42" in json.dumps(result.notebook["cells"][0]["outputs"])
    assert result.isolation.endswith("+systemd-scope")


def test_systemd_probe_needs_both_limits_in_the_scope(tmp_path, monkeypatch):
    """A fake systemd-run: one that runs the probe with limits, one whose manager
    does not delegate memory (the probe then reads "max")."""
    mount = _fake_v2(tmp_path)
    group = mount / "user.slice" / "probe.scope"
    group.mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, memory in (("good", str(300 << 20)), ("nodelegate", "max")):
        folder = bin_dir / name
        folder.mkdir()
        (folder / "systemd-run").write_text(
            f"#!/bin/sh\nprintf '%s\\n' {memory} 77\n")
        (folder / "systemd-run").chmod(0o755)
    monkeypatch.setattr(cgroup_v2, "mount_point", lambda *a: mount)
    for name, ok in (("good", True), ("nodelegate", False)):
        monkeypatch.setenv("PATH", f"{bin_dir / name}:/usr/bin:/bin")
        systemd.available.cache_clear()
        found, why = systemd.available()
        assert found is ok, why
        if not ok:
            assert "does not delegate the memory and pids controllers" in why
    systemd.available.cache_clear()


# ---------------------------------------------------------------- the watchdog

_GROW = """
import sys, time
blocks = []
while True:
    blocks.append(bytearray(8 << 20))  # 8 MiB, written: resident at once
    time.sleep(0.002)
"""
_THREADS = """
import threading, time
while True:
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    time.sleep(0.001)
"""
_FILES = """
import time
i = 0
while True:
    open(f"fill{i}", "wb").write(b"0" * (4 << 20))
    i += 1
"""


def _watched(code: str, tmp_path: Path, limits: Limits) -> tuple[watchdog.Watchdog, int, float]:
    """Runs ``code`` under a watchdog as the runner starts a sandbox (rlimits, a child
    subreaper), but in this test's session: its processes share the CPU with the
    watchdog's threads one by one (no autogroup of their own), as on a systemd host
    where the grader and its sandboxes share a unit's CPU."""
    job = tmp_path / "job"
    job.mkdir()
    dog = watchdog.Watchdog("jaxcourse-job-test", limits)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=job,
                            preexec_fn=run._preexec([], dog))
    dog.started(proc.pid, job)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        elapsed = time.monotonic() - start
        dog.remove()
        proc.wait()
    return dog, code, elapsed


_FORKS = """
import os, time
while True:
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    time.sleep(0.005)
"""


@pytest.mark.parametrize("code,kind", [(_GROW, "memory"), (_THREADS, "tasks"), (_FILES, "memory"),
                                       (_FORKS, "processes")],
                         ids=["allocator", "threads", "files", "forks"])
def test_watchdog_stops_a_bomb(code, kind, tmp_path):
    # Forks: a task limit above the process limit, so that it is the one reached.
    limits = Limits(memory_mb=200, tasks=1000 if kind == "processes" else 40)
    dog, exit_code, elapsed = _watched(code, tmp_path, limits)
    stop = dog.stop()
    assert exit_code == -9 and stop is not None and stop.kind == kind, (exit_code, stop)
    limit = {"memory": limits.memory_mb, "tasks": limits.tasks,
             "processes": watchdog.MAX_PROCESSES}[kind]
    assert limit < stop.peak <= limit * 1.5, stop
    # Stopped in 0.1-0.5 s on the idle 2-core VM. The fork bomb took 25-40 s before
    # kill_all froze the tree: its first process forked on while its children died.
    assert elapsed < 10 and dog.samples > 0, (elapsed, stop)


# As the course's fork bomb (tests/corpus), with a kernel's heap written first, but
# bounded by itself (2**9 processes at most: tests run as root, whom no RLIMIT_NPROC
# stops). Every process spins, and forks while its heap is mapped: reading its PSS then
# waits on the fork (0.1-0.8 s a read), and the watchdog's sample that read the memory
# of every process first took the whole minute and stopped nothing (as it did in the
# guest of make test-hosts, where the bomb ran its cell's 150 s). Measured here on 2
# cores: stopped in 0.8-0.9 s, at 74-122 processes.
_SPINNING_FORKS = """
import os
heap = bytearray(64 << 20)
for _ in range(9):
    try:
        os.fork()
    except OSError:
        pass
while True:
    pass
"""


def test_watchdog_stops_a_spinning_fork_bomb_at_once(tmp_path):
    limits = Limits(memory_mb=1024, tasks=1000)
    dog, exit_code, elapsed = _watched(_SPINNING_FORKS, tmp_path, limits)
    stop = dog.stop()
    assert exit_code == -9 and stop is not None and stop.kind == "processes", (
        exit_code, stop, elapsed, dog.samples)
    assert elapsed < 5, (elapsed, stop)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, "heap = ")]
    assert not left, f"{len(left)} of the bomb's processes outlived it"


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# 150 MiB written, then three forks that share it and wait: their RSS sums to 600 MiB,
# the memory they use is 150 MiB. The first fork exits at once and is reaped last: a
# zombie, whose memory cannot be read (ESRCH), must not bring back the RSS figure of
# the others (CI once saw 464 MiB that way).
_SHARED = """
import os, time
block = bytearray(150 << 20)
children = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(0 if i == 0 else 1.0)
        os._exit(0)
    children.append(pid)
for pid in reversed(children):
    os.waitpid(pid, 0)
"""


def test_watchdog_counts_pages_shared_by_forks_once(tmp_path):
    limits = Limits(memory_mb=400, tasks=40)
    dog, exit_code, _ = _watched(_SHARED, tmp_path, limits)
    assert exit_code == 0 and dog.stop() is None, (exit_code, dog.stop())
    assert dog.peak is not None and dog.peak <= limits.memory_mb, dog.peak


def test_watchdog_address_space_limit_refuses_a_huge_allocation(tmp_path):
    dog, exit_code, _ = _watched("bytearray(10 << 30)", tmp_path, Limits(memory_mb=200))
    assert exit_code == 1 and dog.stop() is None  # MemoryError at once, nothing to kill


# ---------------------------------------------------------------- the orphan sweep

def test_orphans_of_a_dead_grader_are_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = jobs.create()
    (orphan / ".owner").write_text(f"{dead.pid} 1")  # a pid that is gone (or reused)
    mine = jobs.create()  # this process is alive: kept
    worker = subprocess.Popen(["sleep", "60"], cwd=orphan)  # a process left working in it
    parent = tmp_path / "jaxcourse"
    (parent / orphan.name).mkdir(parents=True)  # an emptied group of the orphan job
    (parent / mine.name).mkdir()
    try:
        removed = jobs.clean_orphans([parent])
        assert str(orphan) in removed and not orphan.exists()
        assert worker.wait(timeout=5) == -9
        assert mine.exists() and (parent / mine.name).exists()
        assert not (parent / orphan.name).exists()
    finally:
        worker.kill()
        jobs.shutil.rmtree(mine, ignore_errors=True)


def test_a_zombie_owner_is_dead(tmp_path):
    """A killed grader whose parent died too stays a zombie until init reaps it."""
    job = jobs.create()
    try:
        child = subprocess.Popen(["true"])
        time.sleep(0.2)  # exited, not reaped: a zombie with its pid and start time
        (job / ".owner").write_text(f"{child.pid} {jobs.start_time(child.pid)}")
        assert jobs.owner_alive(job) is False
        assert str(job) in jobs.clean_orphans([])
        child.wait()
    finally:
        jobs.shutil.rmtree(job, ignore_errors=True)
