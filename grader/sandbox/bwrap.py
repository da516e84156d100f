"""The bubblewrap sandbox: is it usable here, and the command line of one run.

A sandbox has no network, a private PID namespace, every capability dropped, a
read-only view of the Python runtime and the ``course``/``autograder`` packages and
nothing else of this machine (no source/, gradebook, other submissions or specs).
Everything it can write lies in its job folder: the job's ``.tmp`` and ``.shm`` are
bound as ``/tmp`` and ``/dev/shm``, and the sandbox's own root and ``/dev`` (tmpfs
that bubblewrap creates) are remounted read-only. So whatever a submission writes is
memory the limits see: a cgroup charges tmpfs pages to the writer, and the watchdog
adds the job folder's size to the processes' resident memory.

Traps (checked on Debian 12, bubblewrap 0.8):
- bwrap run by root maps the sandbox user to root outside, so only files that are
  safe to read are bound in, never whole folders such as /etc or the course;
- ``--tmpfs``/``--bind`` apply in order: a mount under /tmp or /dev/shm must come
  after the mount of /tmp or /dev/shm itself;
- bwrap refuses to start with capabilities it did not get from setuid (an ambient
  CAP_DAC_READ_SEARCH: "Unexpected capabilities but not setuid");
- where user namespaces are refused (many containers, Ubuntu 24.04's AppArmor
  restriction) bwrap fails at start: :func:`probe` says so in one line.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("child.py")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf", "passwd", "group",
              "hosts", "host.conf", "mime.types")
INSTALL = "install the package bubblewrap (apt-get install bubblewrap, dnf install bubblewrap)"
USERNS_REFUSED = ("bubblewrap cannot create user namespaces here (refused by the kernel, a "
                  "container or a security profile): see 'Grading inside a container' in "
                  "docs/isolation.md")
# What bwrap prints when the kernel or a security module refuses a user namespace.
_USERNS_ERRORS = ("no permissions to creat", "operation not permitted", "permission denied",
                  "user namespace", "uid map", "setting up uid")


def find() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def probe(path: str | None = None) -> tuple[str | None, str]:
    """``(path to a working bwrap, "")``, or ``(None, one line saying why not)``."""
    path = path or find()
    if not path:
        return None, f"bubblewrap is not installed: {INSTALL}"
    try:
        test = subprocess.run([path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                               "--proc", "/proc", "--dev", "/dev", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"bubblewrap ({path}) could not be started: {err}"
    if test.returncode == 0:
        return path, ""
    first = (test.stderr.strip().splitlines() or [f"exit {test.returncode}"])[0][:200]
    if any(word in first.lower() for word in _USERNS_ERRORS):
        return None, f"{USERNS_REFUSED} ({first})"
    return None, f"bubblewrap ({path}) fails its self-test: {first}"


def _package_dirs() -> list[Path]:
    import autograder
    import course

    return [Path(autograder.__file__).resolve().parent, Path(course.__file__).resolve().parent]


def prepare(job: Path) -> None:
    """Creates the job's scratch folders bound as /tmp and /dev/shm (also used unsandboxed)."""
    for name in (".tmp", ".shm"):
        (job / name).mkdir(mode=0o700, exist_ok=True)


def command(job: Path, cache: Path | None = None, cache_writable: bool = False) -> list[str]:
    """bwrap and its options, up to (not including) the command it runs."""
    venv = Path(sys.prefix)
    python_home = Path(os.path.realpath(sys.base_prefix))
    cmd = [probe()[0] or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        cmd += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        cmd += ["--ro-bind-try", top, top]
    for name in _ETC_FILES:
        cmd += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    cmd += ["--ro-bind-try", "/etc/fonts", "/etc/fonts",
            "--proc", "/proc", "--dev", "/dev",
            # Scratch space inside the job folder (see the module's docstring), mounted
            # before the job folder, which may itself lie under /dev/shm or /tmp.
            "--bind", str(job / ".tmp"), "/tmp", "--bind", str(job / ".shm"), "/dev/shm",
            "--ro-bind", str(python_home), str(python_home),
            "--ro-bind", str(venv), str(venv)]
    for pkg in _package_dirs():
        cmd += ["--ro-bind", str(pkg), str(pkg)]
    # The notebook driver is one file of the host-side grader: bind that file only.
    cmd += ["--ro-bind", str(CHILD), str(CHILD)]
    if cache is not None:
        cmd += ["--bind" if cache_writable else "--ro-bind", str(cache), str(cache)]
    cmd += ["--bind", str(job), str(job),
            # bwrap's own root and /dev are tmpfs the limits cannot see from outside.
            "--remount-ro", "/dev", "--remount-ro", "/",
            "--chdir", str(job), "--clearenv"]
    for key, value in environment(job, cache).items():
        cmd += ["--setenv", key, value]
    return cmd


# XLA:CPU's backend (LLVM) at -O0 in every grading run: a submission's programs are
# compiled once and run on small inputs, so compiling is most of their cost. The HLO
# passes, fusions and buffer assignment that structure checks read are the same at
# every level (optimized HLO, memory_analysis and outputs compared on ten programs:
# equal HLO and temp bytes; transcendental functions differ in the last bits, within
# every check's tolerance); the reference run, the submissions and the program judge
# all compile with it, and JAX's compilation cache keys on it. 10_pallas's candidate
# run (tests/test_exercises.py): 407 s -> 299 s on the 2-core VM, reference runs
# 2-19 % faster. Students' kernels (make lab) keep XLA's default.
GRADING_XLA_FLAGS = "--xla_backend_optimization_level=0"


def compilation_cache_env(cache: Path) -> dict[str, str]:
    """The environment that points a JAX process at the persistent compilation cache
    ``cache`` and caches every program, however small or quick to compile."""
    return {"JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def environment(job: Path, cache: Path | None = None) -> dict[str, str]:
    venv_bin = str(Path(sys.prefix) / "bin")
    env = {
        "PATH": f"{venv_bin}:/usr/bin:/bin",
        "HOME": str(job),
        "USER": "student",
        "LANG": "C.UTF-8",
        "TMPDIR": str(job / ".tmp"),
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
        "XLA_FLAGS": GRADING_XLA_FLAGS,
    }
    if cache is not None:
        # JAX's persistent compilation cache, filled by the reference run: the
        # notebook's own cells compile the same programs for every submission.
        env.update(compilation_cache_env(cache))
    for key in ("JAX_NUM_CPU_DEVICES",):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env
