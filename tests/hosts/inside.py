"""Runs inside the guest (guest.py), as root: grades a class of corpus cases at each level.

``python -m tests.hosts.inside OUT`` grades, for every level of :data:`LEVELS`, one
batch of ``00_corpus`` holding the cases of :data:`CASES` (tests/corpus/cases.py, the
submissions tests/test_corpus.py builds), as the level's user, and writes what it saw
to ``OUT/results.json`` after each level: the isolation the grader reported, every
outcome, and what was left afterwards (processes, cgroups, job folders, files written
outside the sandbox, connections to the guest's loopback). It judges nothing: the
host's test does (tests/hosts/test_hosts.py), from these facts.

``python -m tests.hosts.inside grade COURSE OUT_JSON`` is the grading of one level, run
as its user.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The corpus cases graded at every level: the honest one beside each kind of attack.
CASES = ["honest_full", "bomb_memory", "bomb_fork", "hang_loop", "bomb_disk",
         "escape_network", "escape_write"]


def chosen_cases() -> list[str]:
    """:data:`CASES`, or those HOSTS_CASES names (a quicker run, e.g. to see a regression)."""
    return os.environ.get("HOSTS_CASES", "").split() or CASES
# level -> (the user it runs as, how that user starts the grader, the way to hold limits
# the grader must choose there); the users are guest.RECIPE's.
LEVELS = {
    "root": ("root", "plain", "cgroup-v2"),
    "instructor+systemd": ("instructor", "session", "systemd-scope"),
    # A service of the user's manager with Delegate=yes (a JupyterHub spawner's).
    "instructor+delegated": ("instructor", "delegated", "cgroup-v2"),
    "teacher": ("teacher", "plain", "watchdog"),
}
DEFAULT = ["root", "instructor+systemd", "teacher"]  # HOSTS_LEVELS="..." chooses others
WORKERS = 2


def limits():
    """tests/test_corpus.py's limits, with a cell limit for the guest's speed: the host
    sets HOSTS_CELL_TIMEOUT (under qemu's emulator `import jax` alone took 24-50 s)."""
    import dataclasses

    from tests.test_corpus import LIMITS

    cell = float(os.environ.get("HOSTS_CELL_TIMEOUT") or LIMITS.cell_timeout)
    return dataclasses.replace(LIMITS, cell_timeout=cell,
                               notebook_timeout=max(LIMITS.notebook_timeout, 6 * cell))


def grade(course: str, out: str) -> None:
    """One level's batch, as the level's user (the grader as an instructor runs it)."""
    from grader import sandbox
    from grader.pipeline import grade_assignment
    from tests.corpus import assignment

    notes = sandbox.require(limits(), workers=WORKERS)
    started = time.monotonic()
    outcomes = grade_assignment(Path(course), assignment.NAME, workers=WORKERS, limits=limits(),
                                show=True)
    Path(out).write_text(json.dumps({
        "isolation": sandbox.isolation(), "notes": notes, "uid": os.getuid(),
        "cgroup": Path("/proc/self/cgroup").read_text().strip(),
        "seconds": time.monotonic() - started,
        "outcomes": {s: o.__dict__ for s, o in outcomes.items()}}, default=str))


def _course(user: str, marker: str, port: int) -> Path:
    """A scratch course of the chosen cases, owned by ``user``."""
    from grader.course import run_nbgrader
    from tests.corpus import assignment
    from tests.test_corpus import _build_class

    home = Path("/root") if user == "root" else Path("/home") / user
    course = home / f"course-{marker}"
    course.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", course)
    assignment.write_source(course)
    run_nbgrader(["generate_assignment", assignment.NAME, "--force"], cwd=course)
    _build_class(course, marker, port)
    for folder in (course / "submitted").iterdir():
        if folder.name not in chosen_cases():
            shutil.rmtree(folder)
    if user != "root":
        subprocess.run(["chown", "-R", f"{user}:{user}", str(course)], check=True)
    return course


def _command(user: str, how: str, course: Path, out: Path, log: Path) -> tuple[list, dict]:
    import pwd

    entry = pwd.getpwnam(user)
    grade_cmd = [sys.executable, "-m", "tests.hosts.inside", "grade", str(course), str(out)]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": entry.pw_dir,
           "USER": user, "LANG": "C.UTF-8", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1",
           "HOSTS_CELL_TIMEOUT": os.environ.get("HOSTS_CELL_TIMEOUT", ""),
           "HOSTS_CASES": os.environ.get("HOSTS_CASES", ""),
           "JAXCOURSE_JOB_TAG": os.environ["JAXCOURSE_JOB_TAG"]}
    if user == "root":
        return grade_cmd, env
    as_user = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
               "--init-groups", "--inh-caps=-all", "--"]
    if how == "plain":  # no session: nothing but the user's own processes
        return as_user + grade_cmd, env
    runtime = f"/run/user/{entry.pw_uid}"
    env.update(XDG_RUNTIME_DIR=runtime, DBUS_SESSION_BUS_ADDRESS=f"unix:path={runtime}/bus")
    if how == "session":  # a login's process that asks its manager for scopes
        return as_user + grade_cmd, env
    # A service of the user's manager with a delegated subtree (a JupyterHub spawner's).
    props = [f"--setenv={k}={v}" for k, v in env.items()
             if k not in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")]
    return as_user + ["systemd-run", "--user", "--quiet", "--wait", "--collect",
                      "-p", "Delegate=yes", f"--working-directory={REPO}", *props,
                      "-p", f"StandardOutput=append:{log}", "-p", f"StandardError=append:{log}",
                      "--", *grade_cmd], env


def _wait_for_session(uid: int, seconds: float = 60) -> None:
    bus = Path(f"/run/user/{uid}/bus")
    deadline = time.monotonic() + seconds
    while not bus.exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def _left_over(marker: str, uid: int) -> list[str]:
    """What a level left: processes and cgroups of its runs, job folders, processes
    of its user outside the user's systemd manager."""
    from tests.test_corpus import _leftovers

    tag = marker.replace(".", "")
    found = _leftovers(marker)
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").rglob(f"*jaxcourse-job-{tag}*")]
    if uid:
        for proc in Path("/proc").iterdir():
            try:
                if not proc.name.isdigit() or proc.stat().st_uid != uid:
                    continue
                group = (proc / "cgroup").read_text().strip()
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and f"user@{uid}.service/" not in group:
                found.append(f"process {proc.name} {(proc / 'cmdline').read_bytes()[:100]!r}")
    return sorted(set(found))


def _one_level(level: str, user: str, how: str, out: Path) -> dict:
    import pwd

    from tests.test_corpus import _Listener

    marker = f"9{uuid.uuid4().int % 10**8}.5"  # as test_corpus: a number `sleep` takes
    os.environ["JAXCOURSE_JOB_TAG"] = marker.replace(".", "")
    uid = pwd.getpwnam(user).pw_uid
    if how != "plain":
        _wait_for_session(uid)
    listener = _Listener()
    course = _course(user, marker, listener.port)
    result_file, log = course / "hosts-result.json", course / "hosts-grade.log"
    cmd, env = _command(user, how, course, result_file, log)
    started = time.monotonic()
    try:
        with open(out / f"{level}.log", "a") as shown:  # the host can follow it
            proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=shown, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL,
                                  timeout=float(os.environ.get("HOSTS_LEVEL_TIMEOUT") or 3000))
            seconds = time.monotonic() - started
            # A service of the user's manager wrote its log into the course.
            shown.write(log.read_text() if log.exists() else "")
        time.sleep(1)  # let systemd collect the last scopes
    finally:
        listener.close()
    home = Path(pwd.getpwnam(user).pw_dir)
    written = [str(p) for p in (course / marker, course / "autograded" / marker,
                                Path("/tmp") / marker, Path("/root") / marker, home / marker)
               if p.exists()]
    result = {"level": level, "user": user, "how": how, "rc": proc.returncode,
              "seconds": seconds, "leftovers": _left_over(marker, uid), "written": written,
              "connections": listener.connections}
    if result_file.exists():
        result.update(json.loads(result_file.read_text()))
    shutil.rmtree(course, ignore_errors=True)
    return result


def main(out: Path) -> None:
    results = {"kernel": os.uname().release, "limits": limits().__dict__, "cases": chosen_cases(), "systemd": _systemd_version(),
               "cgroup2": Path("/sys/fs/cgroup/cgroup.controllers").read_text().strip(),
               "levels": []}
    for level in os.environ.get("HOSTS_LEVELS", "").split() or DEFAULT:
        user, how, _ = LEVELS[level]
        try:
            results["levels"].append(_one_level(level, user, how, out))
        except Exception:  # noqa: BLE001 - reported to the host, the next level still runs
            results["levels"].append({"level": level, "user": user, "how": how,
                                      "error": traceback.format_exc()[-3000:]})
        (out / "results.json").write_text(json.dumps(results, indent=1))


def _systemd_version() -> str:
    proc = subprocess.run(["systemctl", "--version"], capture_output=True, text=True)
    return (proc.stdout.split("\n", 1)[0] if proc.returncode == 0 else "").strip()


if __name__ == "__main__":
    if sys.argv[1] == "grade":
        grade(sys.argv[2], sys.argv[3])
    else:
        main(Path(sys.argv[1]))
