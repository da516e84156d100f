"""Runs an untrusted notebook in a sandbox and reads back plain, size-capped data.

One run = one fresh job folder on a memory-backed filesystem (/dev/shm), one
bubblewrap sandbox (no network, a private PID namespace, every capability dropped,
a read-only view of the Python runtime and the ``course``/``autograder`` packages and
nothing else of this machine: no source/, no gradebook, no other submission), one
cgroup holding memory and task limits, and ``_sandbox_child.py`` inside it driving an
ipykernel with nbclient. The grader outside enforces the notebook's wall clock by
killing every task of the cgroup; the child enforces the per-cell limit.

Facts this rests on (checked on Debian 12, cgroup v1, bubblewrap 0.8):
- an address-space limit (RLIMIT_AS) makes JAX segfault: memory is limited by the
  cgroup (resident memory, tmpfs pages included, so filling /dev/shm is limited too);
- XLA starts a thread pool: the task limit is generous (a fork bomb still stops);
- bwrap run by root maps the sandbox user to root outside, so only files that are
  safe to read are bound in, never whole folders such as /etc or the course.
Where bubblewrap or cgroups are missing, ``isolation()`` says so and the summary of
every grading run repeats it; the wall clock and the output cap still apply.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

CHILD = Path(__file__).with_name("child.py")
CGROUP_V1 = Path("/sys/fs/cgroup")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf", "passwd", "group",
              "hosts", "host.conf", "mime.types")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed notebook run."""

    cell_timeout: float = 60.0
    notebook_timeout: float = 600.0
    memory_mb: int = 3072
    tasks: int = 0  # 0: 256 + 16 per CPU (XLA starts a thread per core and then some)
    output_bytes: int = 2_000_000
    read_bytes: int = 16_000_000  # the most read back from any one file


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


def _bwrap() -> str | None:
    path = shutil.which("bwrap")
    if not path:
        return None
    probe = subprocess.run([path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                            "--proc", "/proc", "--dev", "/dev", "true"],
                           capture_output=True, timeout=30)
    return path if probe.returncode == 0 else None


def _cgroup_ok() -> bool:
    for controller in ("memory", "pids"):
        base = CGROUP_V1 / controller
        if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
            return False
    return True


_ISOLATION: str | None = None


def isolation() -> str:
    """``"bubblewrap+cgroup"`` at best; anything else is reported loudly."""
    global _ISOLATION
    if _ISOLATION is None:
        parts = ["bubblewrap" if _bwrap() else "NO-SANDBOX"]
        parts.append("cgroup" if _cgroup_ok() else "NO-CGROUP-LIMITS")
        _ISOLATION = "+".join(parts)
    return _ISOLATION


class _Cgroup:
    """A v1 memory + pids cgroup for one run (created and removed by the grader)."""

    def __init__(self, name: str, limits: Limits):
        self.dirs = {c: CGROUP_V1 / c / "jaxcourse" / name for c in ("memory", "pids")}
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
        tasks = limits.tasks or 256 + 16 * (os.cpu_count() or 1)
        (self.dirs["pids"] / "pids.max").write_text(str(tasks))

    def enter_command(self) -> list[str]:
        procs = " ".join(str(d / "cgroup.procs") for d in self.dirs.values())
        return ["sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 97; done; exec "$@"',
                "sandbox"]

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

    def out_of_memory(self) -> bool:
        try:
            control = (self.dirs["memory"] / "memory.oom_control").read_text()
        except OSError:
            return False
        for line in control.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return True
        return False

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


def clean_orphans(min_age_s: float = 600.0) -> list[str]:
    """Removes job folders and cgroups a killed grader left behind; returns them.

    Only what is older than ``min_age_s`` and holds no process: a batch running
    beside this one keeps its own.
    """
    removed = []
    now = time.time()
    for controller in ("memory", "pids"):
        base = CGROUP_V1 / controller / "jaxcourse"
        for group in base.glob("jaxcourse-job-*") if base.is_dir() else []:
            try:
                if (now - group.stat().st_mtime > min_age_s
                        and not (group / "cgroup.procs").read_text().split()):
                    group.rmdir()
                    removed.append(str(group))
            except OSError:
                pass
    for job in Path("/dev/shm").glob("jaxcourse-job-*"):
        try:
            if now - job.stat().st_mtime > min_age_s:
                shutil.rmtree(job, ignore_errors=True)
                removed.append(str(job))
        except OSError:
            pass
    return removed


def _package_dirs() -> list[Path]:
    import autograder
    import course

    return [Path(autograder.__file__).resolve().parent, Path(course.__file__).resolve().parent]


def _bwrap_command(job: Path, limits: Limits, cache: Path | None = None,
                   cache_writable: bool = False) -> list[str]:
    venv = Path(sys.prefix)
    python_home = Path(os.path.realpath(sys.base_prefix))
    cmd = [_bwrap() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        cmd += ["--ro-bind-try", top, top]
    for name in _ETC_FILES:
        cmd += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    cmd += ["--ro-bind-try", "/etc/fonts", "/etc/fonts",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind", str(python_home), str(python_home),
            "--ro-bind", str(venv), str(venv)]
    for pkg in _package_dirs():
        cmd += ["--ro-bind", str(pkg), str(pkg)]
    # The notebook driver is one file of the host-side grader: bind that file only.
    cmd += ["--ro-bind", str(CHILD), str(CHILD)]
    if cache is not None:
        cmd += ["--bind" if cache_writable else "--ro-bind", str(cache), str(cache)]
    cmd += ["--bind", str(job), str(job), "--chdir", str(job), "--clearenv"]
    for key, value in _environment(job, cache).items():
        cmd += ["--setenv", key, value]
    return cmd


def _environment(job: Path, cache: Path | None = None) -> dict[str, str]:
    venv_bin = str(Path(sys.prefix) / "bin")
    env = {
        "PATH": f"{venv_bin}:/usr/bin:/bin",
        "HOME": str(job),
        "USER": "student",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(job / ".mpl"),
        "IPYTHONDIR": str(job / ".ipython"),
        "JUPYTER_RUNTIME_DIR": str(job / ".runtime"),
        "JUPYTER_DATA_DIR": str(job / ".jupyter"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "JAX_PLATFORMS": "cpu",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    if cache is not None:
        # JAX's persistent compilation cache, filled by the reference run: the
        # notebook's own cells compile the same programs for every submission.
        env.update(JAX_COMPILATION_CACHE_DIR=str(cache),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    for key in ("JAX_NUM_CPU_DEVICES",):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


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
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def run_notebook(nb: dict, *, limits: Limits = Limits(), collect: tuple[str, ...] = (),
                 extra_files: dict[str, bytes] | None = None, cache: Path | None = None,
                 cache_writable: bool = False) -> RunResult:
    """Executes ``nb`` in a fresh sandbox; returns its outputs and collected files."""
    start = time.monotonic()
    level = isolation()
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    # JAXCOURSE_JOB_TAG names a batch's job folders and cgroups (tests look for leftovers).
    tag = "".join(ch for ch in os.environ.get("JAXCOURSE_JOB_TAG", "") if ch.isalnum())[:32]
    job = Path(tempfile.mkdtemp(prefix=f"jaxcourse-job-{tag}-" if tag else "jaxcourse-job-",
                                dir=shm))
    os.chmod(job, 0o700)
    (job / "in.ipynb").write_text(json.dumps(nb))
    for name, data in (extra_files or {}).items():
        (job / name).write_bytes(data)
    cgroup = _Cgroup(job.name, limits) if "NO-CGROUP" not in level else None
    inner = [sys.executable, "-I", str(CHILD), str(job), str(limits.cell_timeout),
             str(limits.output_bytes)]
    if "NO-SANDBOX" in level:
        command = inner
        env = _environment(job, cache)
    else:
        command = _bwrap_command(job, limits, cache, cache_writable) + inner
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if cgroup:
        command = cgroup.enter_command() + command
    failure, detail = "", ""
    try:
        proc = subprocess.Popen(command, cwd=job, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=limits.notebook_timeout)
        except subprocess.TimeoutExpired:
            code = None
            failure, detail = "notebook_timeout", (
                f"the notebook ran past its limit of {limits.notebook_timeout:g} s")
        # Whatever happened, nothing started by the submission outlives the run.
        if cgroup:
            cgroup.kill_all()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        events = _progress(job, limits.read_bytes)
        ended = [e for e in events if e.get("event") == "end"]
        started = [e["cell"] for e in events if e.get("event") == "start"]
        failed_cell = started[-1] if started else None
        oom = bool(cgroup and cgroup.out_of_memory())
        if not failure:
            kinds = {e.get("event") for e in events}
            if "flood" in kinds:
                failure, detail = "output_flood", (
                    f"a cell printed more than {20 * limits.output_bytes} bytes")
            elif oom:
                failure, detail = "out_of_memory", (
                    f"the notebook used more than its {limits.memory_mb} MiB of memory")
            elif "timeout" in kinds:
                failure, detail = "timeout", (
                    f"a cell ran past its limit of {limits.cell_timeout:g} s")
            elif "died" in kinds or not ended or code == 97:
                failure, detail = "kernel_died", (
                    "the kernel died (a crash, os._exit, a signal or a killed process)"
                    if code != 97 else "the sandbox could not join its cgroup")
            elif code != 0:
                failure, detail = "kernel_died", f"the notebook runner stopped (exit {code})"
        if failure == "notebook_timeout" and oom:
            failure = "out_of_memory"
        raw_nb = _read_capped(job / "out.ipynb", limits.read_bytes + limits.output_bytes * 2)
        notebook = None
        if raw_nb is not None:
            try:
                notebook = json.loads(raw_nb)
            except (json.JSONDecodeError, UnicodeDecodeError):
                notebook = None
        files = {}
        for name in collect:
            data = _read_capped(job / name, limits.read_bytes)
            if data is not None:
                files[name] = data
        return RunResult(
            notebook=notebook if isinstance(notebook, dict) else None,
            failure=failure,
            failed_cell=failed_cell if failure else None,
            files=files,
            output_capped=any(e.get("event") == "output_capped" for e in events),
            seconds=time.monotonic() - start,
            peak_memory_mb=cgroup.peak_mb() if cgroup else None,
            isolation=level,
            detail=detail,
        )
    finally:
        if cgroup:
            cgroup.remove()
        shutil.rmtree(job, ignore_errors=True)
