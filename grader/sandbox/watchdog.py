"""The fallback for a user with no cgroup: a watchdog over the sandbox's process tree,
plus the resource limits (rlimits) that JAX survives.

Every ``Limits.watchdog_interval`` (20 ms) a thread in the grader walks the run's
process tree (``/proc/PID/task/TID/children``, so a sample reads only the sandbox's
own processes; psutil where that file is missing) and counts its processes (at most
``MAX_PROCESSES``). Another, apart so that a slow read of memory never delays the
count, reads the processes found: their tasks (threads), and it adds up
- resident memory: ``RssAnon + RssShmem`` of every process, a cheap figure that
  counts a shared page once per process that maps it. Over the limit, the sample is
  taken again with ``Pss_Anon + Pss_Shmem`` (``/proc/PID/smaps_rollup``: each shared
  page split between the processes that share it), and only that figure stops the run:
  the forks of a fork bomb share the kernel's pages, and their RSS sum had read 1,756
  MiB under a 1,024 MiB limit while the sandboxes used at most 1,119 (a kernel without
  those fields keeps the RSS figure),
- the job folder's size (every file a submission can write is in it, on a
  memory-backed filesystem; see bwrap.py), plus 1 KiB per entry for the inodes.
Over the process, task or memory limit, or when the machine's available memory falls
below a floor (5 % of RAM, 256 MiB to 2 GiB), it kills the whole tree with SIGKILL. In
a bubblewrap sandbox, killing the PID namespace's first process ends every process in
it; unsandboxed, the runner is a child subreaper, so orphans stay in its tree. The
sandbox runs at a lower priority than the grader (``NICE``), so that its threads are
not starved by what they watch.

The rlimits set on the sandbox's first process (inherited by all):
- ``RLIMIT_AS`` at the memory limit plus ``AS_MARGIN_MB``: one allocation far over
  the limit (10 GiB, 30 GiB) fails at once with MemoryError instead of racing the
  sampler. JAX reserves far more address space than it uses (2.0-2.3 GB of virtual
  memory for 0.4-0.6 GB resident on every course notebook, 2 cores, 8 simulated
  devices), and segfaulted under 512 MiB-1 GiB caps: see docs/isolation.md for the margin;
- ``RLIMIT_NPROC``: the tasks this user has now plus the task limit and a margin
  (:func:`nproc_margin`), so that a fork bomb passes the task limit, where the
  watchdog stops it, before fork fails (the count is per user, and the grader's own
  processes are in it; root ignores it);
- ``RLIMIT_FSIZE`` at the memory limit and ``RLIMIT_CORE`` at 0 (every level).
"""
from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

from grader.sandbox.limits import Limits, Stop

AS_MARGIN_MB = 4096
_PAGE = os.sysconf("SC_PAGE_SIZE")
_HAS_CHILDREN_FILE = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def host_available_mb() -> tuple[float, float]:
    """(MemAvailable, MemTotal) of this machine in MiB."""
    values = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "MemTotal"):
                    values[key] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return values.get("MemAvailable", float("inf")), values.get("MemTotal", 0.0)


def host_floor_mb() -> float:
    """Below this much available memory the watchdog stops its sandbox."""
    return min(2048.0, max(256.0, 0.05 * host_available_mb()[1]))


def _lowered(res: int, value: int) -> tuple[int, tuple[int, int]]:
    """``value`` as soft and hard limit, never above the hard limit in force (raising fails)."""
    hard = resource.getrlimit(res)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    return res, (value, value)


def common_rlimits(limits: Limits) -> list[tuple[int, tuple[int, int]]]:
    """The rlimits every level sets: no core dumps, no file larger than the memory limit."""
    return [_lowered(resource.RLIMIT_CORE, 0),
            _lowered(resource.RLIMIT_FSIZE, limits.memory_mb << 20)]


# Processes (not threads) a run may hold at this level: a notebook runs 3-5 (bubblewrap,
# the runner, the kernel, a subprocess), so a fork bomb is stopped here long before the
# task limit (tests/test_cgroups.py: 64 processes in 0.4 s; in the guest of make
# test-hosts, "stopped at 138 processes", with NICE and the counting thread).
MAX_PROCESSES = 64


# The sandbox's niceness at this level (the grader's is 0; a sandbox cannot lower its
# own). Where a sandbox's processes and the grader share the CPU process by process (a
# systemd host accounts CPU per unit, so the kernel's per-session autogroups do not
# apply), a fork bomb's spinning processes starve the watchdog's threads. Measured on
# 2 cores with the bomb in the grader's session (its heap of 128 MiB written, 400
# processes at most; 4 runs each): the sampler before it was split (see check_memory)
# took 13 samples in 120 s and stopped nothing; split, at nice 0 it stopped the bomb in
# 3.0-5.6 s at 67-400 processes, at nice 10 in 0.8-0.9 s at 77-122. A process at nice
# 10 weighs 110 against the grader's 1024; between sandboxes nothing changes (all of
# them run at it), but beside other work on the machine grading gives way.
NICE = 10
# Each watcher waits at least this many times the CPU time its last sample took.
DUTY = 4


def nproc_margin(limits: Limits) -> int:
    """How far ``RLIMIT_NPROC`` lies above the tasks the watchdog allows a sandbox: a
    quarter of the task limit, at least 16 (room for the user's other sandboxes to grow
    while a bomb climbs past the limit)."""
    return max(16, limits.task_limit() // 4)


def _user_tasks(uid: int) -> int:
    import psutil

    count = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        info = proc.info
        if info.get("uids") is not None and info["uids"].real == uid:
            count += info.get("num_threads") or 1
    return count


def tree(root: int) -> list[int]:
    """``root`` and every process below it (children of every thread)."""
    if not _HAS_CHILDREN_FILE:
        import psutil

        try:
            return [root] + [p.pid for p in psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return [root]
    found, i = [root], 0
    while i < len(found):
        pid = found[i]
        i += 1
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    found.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
    return found


def _status(pid: int) -> tuple[int, int]:
    """(resident anonymous + shmem bytes, threads) of one process; (0, 0) when gone."""
    rss = threads = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    rss += int(line.split()[1]) << 10
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, threads


def _proportional(pid: int) -> int | None:
    """Anonymous + shmem bytes of one process with shared pages split between their
    sharers (PSS); 0 when gone, None where the kernel does not report them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = {k: int(v.split()[0]) << 10 for k, _, v in (
                line.partition(":") for line in f) if k in ("Rss", "Pss_Anon", "Pss_Shmem")}
    except ProcessLookupError:  # ESRCH: the process is exiting, its memory is gone
        return 0
    except FileNotFoundError:
        return 0 if not os.path.exists(f"/proc/{pid}") else None
    except (OSError, ValueError):  # not ours to read: keep the RSS figure
        return None
    if "Rss" not in fields:  # no memory of its own left: a zombie, or gone
        return 0
    if len(fields) < 3:  # a kernel without the PSS fields
        return None
    return fields["Pss_Anon"] + fields["Pss_Shmem"]


def _identity(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a process; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def folder_bytes(path: Path) -> int:
    """Bytes a folder holds in memory-backed files, plus 1 KiB per entry (the inodes)."""
    total, stack = 0, [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512 + 1024
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            pass
    return total


def _kill_each(targets: dict[int, int | None]) -> int:
    """SIGKILL each pid (with its start time where known); how many were alive. Gone, a
    zombie, or a pid that now names another process is left alone."""
    alive = 0
    for pid, start in targets.items():
        now = _identity(pid)
        if now is None or now[0] in "ZX" or (start is not None and now[1] != start):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            alive += 1
        except (ProcessLookupError, PermissionError):
            pass
    return alive


class Watchdog:
    """Samples one run's process tree and job folder; kills the tree over a limit."""

    name = "watchdog"

    def __init__(self, job_name: str, limits: Limits):
        self.limits = limits
        self.floor_mb = host_floor_mb()
        self.peak: float | None = None  # MiB, the largest sample
        self.samples, self.sampling_s = 0, 0.0
        self.stopped: Stop | None = None
        self.stopped_at: float | None = None  # time.monotonic() of the kill
        self._root: int | None = None
        self._seen: dict[int, int] = {}  # pid -> start time, of every process sampled
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._pids: list[int] = []  # the tree check_counts walked last
        self._threads: list[threading.Thread] = []
        self._rlimits = []  # beyond common_rlimits, which the runner sets at every level
        self.address_space_mb = limits.memory_mb + AS_MARGIN_MB
        self._rlimits.append(_lowered(resource.RLIMIT_AS, self.address_space_mb << 20))
        if os.geteuid() != 0:
            # Above the watchdog's own limit by a margin. Capped at the task limit
            # itself, a fork bomb may never get over it (the user's other sandboxes grow
            # into the same per-user count), and then spins on failed forks until its
            # cell's time runs out, the sandboxes beside it starved meanwhile (in a real
            # guest under emulation, tests/hosts, the one beside it lost its points to
            # time-outs). Past the limit, the watchdog stops it.
            nproc = _user_tasks(os.getuid()) + limits.task_limit() + nproc_margin(limits)
            self._rlimits.append(_lowered(resource.RLIMIT_NPROC, nproc))

    def wrap(self, command: list[str]) -> list[str]:
        return command

    def tasks_exhausted(self) -> bool:
        return False  # its own samples stop a tree past the task limit

    def preexec(self) -> None:
        """In the child, before exec: only async-signal-safe work (no imports, no locks)."""
        for res, value in self._rlimits:
            resource.setrlimit(res, value)
        os.nice(NICE)

    def started(self, pid: int, job: Path) -> None:
        self._root, self._job = pid, job
        self._threads = [threading.Thread(target=self._watch, args=(check,), daemon=True,
                                          name=f"jaxcourse-watchdog-{check.__name__}")
                         for check in (self.check_counts, self.check_memory)]
        for thread in self._threads:
            thread.start()

    def _memory(self, pids: list[int], resident: list[int]) -> float:
        """MiB the run holds: its processes' resident memory and its files."""
        rss, files = sum(resident), folder_bytes(self._job)
        if (rss + files) / 2**20 > self.limits.memory_mb:
            # Over by the cheap figure: count each shared page once (see the docstring),
            # process by process: one whose PSS cannot be read keeps its RSS figure.
            proportional = (_proportional(pid) for pid in pids)
            rss = min(rss, sum(r if p is None else p for r, p in zip(resident, proportional)))
        return (rss + files) / 2**20

    def check_counts(self) -> Stop | None:
        """The run's processes, counted before anything is read from each of them (a
        fork bomb's hundreds); the tree walked is the one check_memory reads."""
        pids = tree(self._root)
        self._pids = pids
        if len(pids) > MAX_PROCESSES:
            return Stop("processes", MAX_PROCESSES, len(pids), self.name)
        for pid in pids:  # remembered: an orphan may leave the tree before the kill
            if pid not in self._seen:
                ident = _identity(pid)
                if ident is not None:
                    self._seen[pid] = ident[1]
        return None

    def check_memory(self) -> Stop | None:
        """The run's tasks and memory, and the machine's. Sampled by a thread of its own:
        reading a process's PSS waits while the process forks (its memory map is
        locked), and a fork bomb's PSS reads took 0.1-0.8 s each here, so that one
        sample of everything outlasted the bomb's growth from 8 processes to 400 (in
        the guest of make test-hosts, the cell's 150 s)."""
        pids = self._pids or tree(self._root)
        statuses = [_status(pid) for pid in pids]
        tasks = sum(t for _, t in statuses)
        if tasks > self.limits.task_limit():
            return Stop("tasks", self.limits.task_limit(), tasks, self.name)
        memory = self._memory(pids, [r for r, _ in statuses])
        with self._lock:
            self.peak = max(self.peak or 0.0, memory)
        if memory > self.limits.memory_mb:
            return Stop("memory", self.limits.memory_mb, memory, self.name)
        if host_available_mb()[0] < self.floor_mb:
            return Stop("host", self.floor_mb, memory, self.name)
        return None

    def _watch(self, check) -> None:
        wait = interval = self.limits.watchdog_interval
        while not self._done.wait(wait):
            t0, cpu0 = time.perf_counter(), time.thread_time()
            stop = check()
            took = time.perf_counter() - t0
            # At most 1 / (1 + DUTY) of a core: where a sample is slow (an emulated
            # CPU), the watcher at nice 0 would otherwise take the CPU from the
            # sandbox it watches, at nice 10. The CPU the sample used, not its wall
            # time: on a busy machine a sample waits for a core, and waiting 4 times
            # that long let a disk filler write 300 MiB past its limit between two
            # samples (tests/test_unprivileged.py under make test).
            wait = max(interval, DUTY * (time.thread_time() - cpu0))
            with self._lock:
                self.samples += 1
                self.sampling_s += took
                if stop is None or self.stopped is not None:
                    continue
                self.stopped = stop
            self._done.set()  # the other watcher ends
            self.kill_all()
            self.stopped_at = time.monotonic()
            return

    def kill_all(self) -> None:
        """SIGKILL every process of the run: the ones below the first process until none
        is left, then the first. The first process is a child subreaper (run.py), so the
        orphans of the processes killed come back to it and stay in the tree; killed
        first, a fork bomb's orphans left the tree and spun on (seen here, unsandboxed).
        In a bubblewrap sandbox, the PID namespace's end takes them all anyway.

        The tree is frozen first (:meth:`_freeze`): a fork bomb's first process went on
        forking while its children were killed, so that the killing took 200 rounds and
        25-40 s here (tests/test_cgroups.py, a fork every 5 ms)."""
        if self._root is None:
            return
        self._freeze()
        for targets in (self._below_first, self._first):
            for _ in range(200):
                if not _kill_each(targets()):
                    break
                time.sleep(0.01)

    def _freeze(self) -> None:
        """SIGSTOP the run's processes until a walk of the tree finds none it has not
        stopped. A stopped process cannot fork (a fork under way when the signal comes
        is restarted after it), so the tree stops growing. Only while the first process
        is alive: its pid is then still its own, and so is every pid below it."""
        stopped: set[int] = set()
        for _ in range(200):
            first = _identity(self._root)
            if first is None or first[0] in "ZX":
                return
            fresh = [pid for pid in tree(self._root) if pid not in stopped]
            if not fresh:
                return
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
            stopped.update(fresh)

    def _below_first(self) -> dict[int, int | None]:
        """Every process of the run but the first: pid -> start time where known."""
        targets: dict[int, int | None] = {pid: None for pid in tree(self._root)[1:]}
        targets.update(self._seen)
        targets.pop(self._root, None)
        return targets

    def _first(self) -> dict[int, int | None]:
        return {self._root: self._seen.get(self._root)}

    def stop(self) -> Stop | None:
        self._done.set()
        return self.stopped

    def peak_mb(self) -> float | None:
        return self.peak

    def remove(self) -> None:
        self._done.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self.kill_all()
