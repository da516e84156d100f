"""Running the grader as an unprivileged user, from a test-suite that runs as root.

The user is a spare uid with no passwd entry and no other process, so that what it
runs can be counted and swept (as tests/test_scale.py starts PostgreSQL as
``nobody``). Two obstacles, and how they are met:

- pyenv's Python (and so the venv's interpreter) lies under /root, mode 0700: no
  other user can execute it. Giving that user CAP_DAC_READ_SEARCH would let it in,
  but bubblewrap then refuses to start ("Unexpected capabilities but not setuid").
  Instead the command runs in a private mount namespace where each inaccessible
  ancestor (``/root``) is covered by an empty, world-readable tmpfs and only the
  folder needed beneath it (``/root/.pyenv``) is bound back: the user can run
  Python and nothing else of /root, and the host's mounts are untouched.
- the user must own the course folder it grades and its HOME: the caller creates
  them outside pytest's root-only temporary folders and hands them over (``chown``).

Needs root, ``unshare`` and ``setpriv`` (util-linux). The user cannot write cgroupfs,
so the grader runs at the level an instructor without cgroups gets (here:
bubblewrap+watchdog).
"""
from __future__ import annotations

import os
import random
import shlex
import shutil
import stat
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def missing() -> str | None:
    """Why the grader cannot be run as another user here; None when it can."""
    if os.geteuid() != 0:
        return "runs only as root (it starts the grader as another user)"
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            return f"needs {tool} (util-linux)"
    return None


def spare_uid() -> int:
    """A uid with no passwd entry and no process (one per test, so counts are its own)."""
    import pwd

    running = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                running.add(proc.stat().st_uid)
            except OSError:
                pass
    while True:
        uid = random.randint(61000, 64999)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in running:
                return uid


def _blocked_ancestor(path: Path) -> tuple[Path, Path] | None:
    """(the first ancestor others cannot enter, its child on the way to ``path``)."""
    parts = path.resolve().parts
    for i in range(1, len(parts)):
        folder = Path(*parts[:i])
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder, Path(*parts[:i + 1])
    return None


def command(cmd: list[str], uid: int, stage: Path) -> list[str]:
    """``cmd`` run as ``uid`` in a mount namespace where the Python it needs is reachable.

    ``stage`` is an empty folder (the caller removes it afterwards).
    """
    needed = [Path(os.path.realpath(sys.base_prefix)), Path(sys.prefix), REPO]
    steps, covered = [], {}
    for path in needed:
        found = _blocked_ancestor(path)
        if found:
            covered.setdefault(found[0], set()).add(found[1])
    for n, (ancestor, children) in enumerate(covered.items()):
        for m, child in enumerate(sorted(children)):
            steps.append(f"mkdir -p {stage}/{n}-{m} && mount --bind {shlex.quote(str(child))} "
                         f"{stage}/{n}-{m}")
        steps.append(f"mount -t tmpfs -o mode=0755,size=1m jaxcourse-mask {shlex.quote(str(ancestor))}")
        for m, child in enumerate(sorted(children)):
            steps.append(f"mkdir -p {shlex.quote(str(child))} && mount --bind {stage}/{n}-{m} "
                         f"{shlex.quote(str(child))}")
    script = " && ".join(steps + [f'exec setpriv --reuid={uid} --regid={uid} --clear-groups '
                                  f'--inh-caps=-all -- "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *cmd]


def make_home(base: Path, uid: int) -> Path:
    """A HOME for the user (0700) holding ``secret.txt`` (0600)."""
    home = base / "home"
    home.mkdir(mode=0o700)
    (home / "secret.txt").write_text("the grading user's secret\n")
    (home / "secret.txt").chmod(0o600)
    chown_tree(home, uid)
    return home


def chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)


def scratch_base() -> Path:
    """A folder the user can reach (pytest's own temporary folders are root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="jaxcourse-unpriv-"))
    base.chmod(0o755)
    return base


def processes_of(uid: int) -> list[str]:
    """Live processes of ``uid`` (zombies excluded: init reaps them in its own time)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if proc.stat().st_uid == uid and state != "Z":
                    found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:120]!r}")
            except OSError:
                pass
    return found


def kill_all(uid: int) -> None:
    """SIGKILL to each live process of the spare ``uid`` (by pid; none should be left)."""
    import signal

    for line in processes_of(uid):
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass
