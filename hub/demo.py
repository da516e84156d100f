"""`make hub` and `make hub-clean`: the course on a JupyterHub, for a demo class.

``python hub/demo.py up`` (as root) creates, and records in a manifest as it goes:

- a Python 3.12 every user can run, and the course environment beside it
  (``PREFIX/python``, ``PREFIX/env``): the single-user servers run as the users, so
  neither may lie where only root can enter (pyenv's Python lives under /root, mode
  0700). Where the interpreter is already reachable (a distribution's
  /usr/bin/python3.12) it is used as it is; otherwise it is copied and its binary
  pointed at its own lib/ (``patchelf --set-rpath '$ORIGIN/../lib'``). The environment
  holds the pinned requirements, jupyterhub and the course's packages (not editable:
  nothing of this checkout needs to stay readable);
- OS accounts for the students and the instructors (``useradd``, home 0700, a random
  password set with ``chpasswd``) and one OS group, the class, that alone can enter the
  folder holding nbgrader's exchange;
- ``PREFIX/hub``: ``etc/`` (jupyterhub_config.py, hub.json, the server-wide Jupyter
  config every server reads: nbgrader_config.py with the exchange and course id, the
  instructor-only extensions off; ``jupyter-graders/`` turns them on for the
  formgrader group), ``srv/exchange`` and ``state/`` (the hub's database, cookie
  secret, pid files, log; root only);
- each instructor's course folder ``~/jax-xla`` (a copy of this checkout whose
  ``.venv`` is the shared environment) and ``~/.jupyter/nbgrader_config.py`` pointing
  the Formgrader at it, with the students in its gradebook;
- the hub itself (jupyterhub, which starts configurable-http-proxy), in the background.

``python hub/demo.py clean`` removes what the manifest lists: processes first, then
accounts (with their homes), the group and the folders.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COURSE_ID = "jax-xla"
COURSE_DIR = "jax-xla"  # in each instructor's home
# Processes of the demo accounts get this long to go after the hub stops their servers.
STOP_S = 30


# ------------------------------------------------------------------ the manifest
class Manifest:
    """What `up` created, written after every step so that `clean` can undo a half run."""

    def __init__(self, prefix: Path):
        self.path = prefix / "hub" / "manifest.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {
            "prefix": str(prefix), "accounts": [], "groups": [], "folders": [], "files": [],
            "processes": {}, "env_built": False}

    def add(self, kind: str, value) -> None:
        if value not in self.data[kind]:
            self.data[kind].append(value)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.chmod(0o600)
        tmp.replace(self.path)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kwargs)
    if proc.returncode != 0:
        sys.exit(f"error: `{' '.join(cmd)}` failed ({proc.returncode}):\n"
                 f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def say(line: str) -> None:
    print(f"hub: {line}", flush=True)


# ------------------------------------------------------------------ the environment
def _reachable(path: Path) -> bool:
    """Can any user execute ``path`` (every folder above it searchable by others)?"""
    path = path.resolve()
    for folder in [*reversed(path.parents)]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IXOTH)


def shared_python(prefix: Path, manifest: Manifest) -> Path:
    """A python3.12 every user can execute: this one, or a copy of it under PREFIX/python."""
    home = Path(os.path.realpath(sys.base_prefix))
    exe = home / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if _reachable(exe):
        return exe
    target = prefix / "python"
    copied = target / "bin" / exe.name
    if not copied.exists():
        say(f"{exe} lies where other users cannot enter: copying {home} to {target}")
        # The standard library's own test suite is a third of it and nobody runs it here.
        stdlib_tests = home / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "test"
        shutil.copytree(home, target, symlinks=True,
                        ignore=lambda folder, names: ["test"] if Path(folder) / "test" == stdlib_tests else [])
        runpath = subprocess.run([_patchelf(), "--print-rpath", str(copied)], text=True,
                                 capture_output=True).stdout.strip()
        if runpath:
            # A --enable-shared build (pyenv's) finds libpython through an absolute
            # RUNPATH into the old prefix: make it relative to the binary.
            run([_patchelf(), "--set-rpath", "$ORIGIN/../lib", str(copied)])
        for folder, dirs, files in os.walk(target):
            for name in dirs + files:
                p = Path(folder, name)
                if not p.is_symlink():
                    p.chmod(p.stat().st_mode | stat.S_IROTH | stat.S_IRGRP
                            | (stat.S_IXOTH | stat.S_IXGRP if p.stat().st_mode & stat.S_IXUSR else 0))
        target.chmod(0o755)
    run([str(copied), "-c", "import ssl, sqlite3, ctypes"])
    return copied


def _patchelf() -> str:
    found = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    if not Path(found).exists():
        sys.exit("error: patchelf is missing: run `make venv` (requirements.txt pins it)")
    return found


def _digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _env_keys() -> dict[str, str]:
    """The environment is rebuilt when the pins change; the course's packages are
    reinstalled (seconds) when their code changes."""
    return {"pins": _digest([REPO / "requirements.txt", REPO / "pyproject.toml"]),
            "code": _digest([p for package in ("course", "autograder", "grader")
                             for p in sorted((REPO / package).rglob("*.py"))])}


def course_env(prefix: Path, manifest: Manifest) -> Path:
    """PREFIX/env: the pinned requirements, jupyterhub and the course (non-editable)."""
    python = shared_python(prefix, manifest)
    env = prefix / "env"
    stamp = env / ".installed"
    keys = _env_keys()
    old = json.loads(stamp.read_text()) if stamp.exists() else {}
    if old == keys:
        # The stamp is also the Makefile's `.venv/.installed` in every course folder,
        # whose requirements.txt keeps this checkout's mtime: a fresh clone's is newer
        # than a kept environment's stamp, and `make` in the course folder would then
        # rebuild the (root-owned, shared) .venv as the instructor and fail.
        os.utime(stamp)
        say(f"course environment {env} is up to date")
        return env
    started = time.monotonic()
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    if old.get("pins") != keys["pins"]:
        say(f"building the course environment {env} (pip; a few minutes the first time)")
        if env.exists():
            shutil.rmtree(env)
        run([str(python), "-m", "venv", str(env)])
        manifest.data["env_built"] = True
        manifest.save()
        extra = "[hub]"
    else:
        say(f"the course's packages changed: reinstalling them into {env}")
        pip += ["--no-deps", "--force-reinstall"]
        extra = ""
    # The pins as constraints: only what the hub extra needs is installed, at the
    # versions make test runs with. A copy of the checkout is built, so that nothing
    # (build/, *.egg-info) lands in the working tree.
    with _tmpdir(prefix) as src:
        for name in ("pyproject.toml", "requirements.txt", "course", "autograder", "grader"):
            (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(
                REPO / name, src / name)
        run(pip + ["-c", str(REPO / "requirements.txt"), f"{src}{extra}"])
    _chmod_readable(env)
    stamp.write_text(json.dumps(keys) + "\n")
    say(f"course environment ready in {time.monotonic() - started:.0f} s")
    return env


class _tmpdir:
    def __init__(self, prefix: Path):
        self.path = prefix / ".build"

    def __enter__(self) -> Path:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def _chmod_readable(root: Path) -> None:
    """Files pip wrote under root's umask may be 0600 (some wheels): make them readable."""
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder, name)
            if p.is_symlink():
                continue
            mode = p.stat().st_mode
            want = mode | stat.S_IRGRP | stat.S_IROTH
            if p.is_dir() or mode & stat.S_IXUSR:
                want |= stat.S_IXGRP | stat.S_IXOTH
            if want != mode:
                p.chmod(want)
    root.chmod(0o755)


# ------------------------------------------------------------------ accounts
def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _group_exists(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def create_accounts(names: list[str], group: str, manifest: Manifest) -> dict[str, str]:
    """One OS account per name (home 0700, a random password), all in the class's group."""
    clash = [n for n in names if _exists(n) and n not in manifest.data["accounts"]]
    if clash:
        sys.exit(f"error: account(s) {', '.join(clash)} exist already and were not made by "
                 f"make hub: choose other names (HUB_STUDENTS=..., HUB_INSTRUCTORS=...)")
    if _group_exists(group) and group not in manifest.data["groups"]:
        sys.exit(f"error: group {group} exists already and was not made by make hub: "
                 f"choose another (HUB_GROUP=...)")
    if not _group_exists(group):
        run(["groupadd", group])
        manifest.add("groups", group)
    passwords = {}
    for name in names:
        if not _exists(name):
            # Recorded before it exists: a failure halfway still gets cleaned.
            manifest.add("accounts", name)
            run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash",
                 "--groups", group, name])
        home = Path(pwd.getpwnam(name).pw_dir)
        home.chmod(0o700)  # Debian's useradd leaves homes 0755: others could read them
        passwords[name] = secrets.token_urlsafe(9)
    run(["chpasswd"], input="".join(f"{n}:{p}\n" for n, p in passwords.items()))
    return passwords


def as_user(name: str, cmd: list[str], env: Path, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """``cmd`` run as ``name`` (its groups, its HOME), with the course environment on PATH."""
    user = pwd.getpwnam(name)
    environ = {"HOME": user.pw_dir, "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
               "PATH": f"{env}/bin:/usr/local/bin:/usr/bin:/bin"}
    environ.update(kwargs.pop("extra_env", {}))
    return run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups",
                "--", *cmd], cwd=cwd, env=environ, **kwargs)


# ------------------------------------------------------------------ configuration
_STUDENT_OFF = {  # instructor-only parts of nbgrader, off in every server ...
    "lab": ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
            "@jupyter/nbgrader:course-list"],
    "server": ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"],
}


def _extensions(folder: Path, on: bool) -> None:
    """... and on in a grader's (what `jupyter labextension disable --level=system` and
    `jupyter server extension disable --system` write, in this folder instead)."""
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {name: not on for name in _STUDENT_OFF["lab"]}}, indent=1) + "\n")
    (folder / "jupyter_server_config.d").mkdir(exist_ok=True)
    (folder / "jupyter_server_config.d" / "jaxcourse-hub.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {name: on for name in _STUDENT_OFF["server"]}}},
        indent=1) + "\n")


def nbgrader_config_text(exchange: Path) -> str:
    return f'''"""Server-wide nbgrader configuration of the course hub (make hub).

On a real course server this is /etc/jupyter/nbgrader_config.py: every nbgrader
command and every user's JupyterLab reads it.
"""
c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "{COURSE_ID}"
# One folder every student and instructor can write; nbgrader keeps each
# submission unreadable to other students (inbound/ cannot be listed).
c.Exchange.root = "{exchange}"
# A student sees the courses of their JupyterHub groups (nbgrader-{COURSE_ID},
# formgrade-{COURSE_ID}), read from the hub's API with their server's token.
c.Authenticator.plugin_class = "nbgrader.auth.JupyterHubAuthPlugin"
'''


def write_config(prefix: Path, env: Path, settings: dict, manifest: Manifest) -> dict:
    hub = prefix / "hub"
    etc, state, srv = hub / "etc", hub / "state", hub / "srv"
    for folder in (etc, state, srv):
        folder.mkdir(parents=True, exist_ok=True)
    (hub).chmod(0o755)
    etc.chmod(0o755)
    state.chmod(0o700)  # the hub's database and cookie secret: root only
    # The exchange: only the class (its OS group) can enter srv/; the exchange itself
    # is 1777: nbgrader wants 777 (it checks the mode's last three digits) and the
    # sticky bit stops one student renaming another's folders.
    os.chown(srv, 0, _gid(settings["group"]))
    srv.chmod(0o750)
    exchange = srv / "exchange"
    exchange.mkdir(exist_ok=True)
    exchange.chmod(0o1777)
    jupyter, graders = etc / "jupyter", etc / "jupyter-graders"
    jupyter.mkdir(exist_ok=True)
    (jupyter / "nbgrader_config.py").write_text(nbgrader_config_text(exchange))
    _extensions(jupyter, on=False)
    _extensions(graders, on=True)
    info = {
        "course_id": COURSE_ID, "ip": "127.0.0.1", "port": settings["port"],
        "students": settings["students"], "graders": settings["instructors"],
        "env": str(env), "proxy": settings["proxy"], "state": str(state),
        "jupyter_config": str(jupyter), "jupyter_config_graders": str(graders),
    }
    (etc / "hub.json").write_text(json.dumps(info, indent=1) + "\n")
    shutil.copy(REPO / "hub" / "jupyterhub_config.py", etc / "jupyterhub_config.py")
    manifest.add("folders", str(hub))
    return {"etc": etc, "state": state, "exchange": exchange}


def _gid(group: str) -> int:
    import grp

    return grp.getgrnam(group).gr_gid


def course_folder(name: str, env: Path, students: list[str], manifest: Manifest) -> Path:
    """The instructor's course folder: this checkout (as git lists it), the shared
    environment as its .venv, and the Formgrader pointed at it."""
    user = pwd.getpwnam(name)
    home = Path(user.pw_dir)
    course = home / COURSE_DIR
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if not src.is_file():
            continue  # deleted in the working tree
        dest = course / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)  # mtimes kept: make sees .venv newer than requirements.txt
    (course / ".venv").symlink_to(env)
    (home / ".jupyter").mkdir(exist_ok=True)
    # nbgrader's "one class, one grader" setup: the course root in the grader's own
    # config. load_subconfig brings the course's settings (feedback without hidden
    # tests, the grader's limits) to the Formgrader, whose server runs in the home.
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821 (sets CourseDirectory.root)\n")
    (course / "students.csv").write_text(
        "id,first_name,last_name\n" + "".join(f"{s},{s.capitalize()},Student\n" for s in students))
    for folder, dirs, files in os.walk(home):
        for entry in dirs + files:
            os.lchown(os.path.join(folder, entry), user.pw_uid, user.pw_gid)
    # The students in the gradebook, with names for the Formgrader (adding them to the
    # hub group is the hub's config: load_groups).
    as_user(name, ["nbgrader", "db", "student", "import", "students.csv",
                   "--Authenticator.plugin_class=nbgrader.auth.NoAuthPlugin"], env, course)
    (course / "students.csv").unlink()
    return course


# ------------------------------------------------------------------ the hub process
def start_hub(prefix: Path, env: Path, paths: dict, port: int, manifest: Manifest) -> int:
    log = open(paths["state"] / "jupyterhub.log", "a")
    proc = subprocess.Popen(
        [str(env / "bin" / "jupyterhub"), "-f", str(paths["etc"] / "jupyterhub_config.py")],
        cwd=paths["state"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={"PATH": f"{env}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "LANG": "C.UTF-8", "HOME": "/root"},
        start_new_session=True)
    manifest.data["processes"]["jupyterhub"] = proc.pid
    manifest.save()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"error: jupyterhub exited ({proc.returncode}); its log:\n"
                     + (paths["state"] / "jupyterhub.log").read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/hub/api/", timeout=5):
                break
        except OSError:
            time.sleep(0.5)
    else:
        sys.exit("error: the hub did not answer within 120 s; see " + str(paths["state"] / "jupyterhub.log"))
    proxy_pid = paths["state"] / "proxy.pid"
    if proxy_pid.exists():
        manifest.data["processes"]["configurable-http-proxy"] = int(proxy_pid.read_text())
        manifest.save()
    return proc.pid


# ------------------------------------------------------------------ up
def up(args) -> int:
    if os.geteuid() != 0:
        sys.exit("error: make hub runs as root: it creates OS accounts and starts a hub that "
                 "spawns each user's server as that user (see docs/shared-server.md for "
                 "a hub set up by hand)")
    for tool in ("useradd", "userdel", "groupadd", "chpasswd", "setpriv", "git"):
        if not shutil.which(tool):
            sys.exit(f"error: make hub needs {tool} (Debian: passwd, util-linux, git)")
    prefix = Path(args.prefix).resolve()
    manifest = Manifest(prefix)
    if manifest.data["processes"] or manifest.data["accounts"]:
        sys.exit(f"error: a hub was set up in {prefix} already (its manifest: "
                 f"{manifest.path}): make hub-clean HUB_PREFIX={prefix} first")
    started = time.monotonic()
    settings = {"port": args.port, "students": args.students.split(),
                "instructors": args.instructors.split(), "group": args.group,
                "proxy": str(Path(args.proxy).resolve())}
    manifest.data.update(settings=settings, node_modules=args.node_modules)
    manifest.save()
    prefix.chmod(0o755)
    env = course_env(prefix, manifest)
    names = settings["instructors"] + settings["students"]
    passwords = create_accounts(names, args.group, manifest)
    paths = write_config(prefix, env, settings, manifest)
    courses = [course_folder(n, env, settings["students"], manifest) for n in settings["instructors"]]
    passwords_file = paths["state"] / "passwords.txt"
    passwords_file.write_text("".join(f"{n} {p}\n" for n, p in passwords.items()))
    passwords_file.chmod(0o600)
    pid = start_hub(prefix, env, paths, args.port, manifest)
    summary(prefix, manifest, passwords, courses, paths, time.monotonic() - started)
    return 0


def summary(prefix: Path, manifest: Manifest, passwords: dict, courses: list[Path], paths: dict,
            seconds: float) -> None:
    s = manifest.data["settings"]
    port, group = s["port"], s["group"]
    out = [
        "",
        f"JupyterHub is up at http://127.0.0.1:{port}/ (set up in {seconds:.0f} s). Log in as:",
        *[f"  {n:<12} {'instructor' if n in s['instructors'] else 'student':<10} password {p}"
          for n, p in passwords.items()],
        "",
        "Created (listed in " + str(manifest.path) + "):",
        f"  OS accounts  {' '.join(manifest.data['accounts'])} (homes /home/NAME, 0700)",
        f"  OS group     {group} (the class: only it can enter {paths['exchange'].parent})",
        f"  hub groups   nbgrader-{COURSE_ID} (students and instructors), "
        f"formgrade-{COURSE_ID} (instructors: Formgrader)",
        f"  environment  {prefix / 'env'} on {prefix / 'python'} (Python 3.12 for every user)"
        + ("" if manifest.data["env_built"] else " (reused)"),
        f"  config       {paths['etc']}/jupyterhub_config.py, hub.json, "
        f"jupyter/nbgrader_config.py (server-wide), jupyter-graders/",
        f"  exchange     {paths['exchange']} (1777)",
        f"  hub state    {paths['state']} (database, cookie secret, passwords.txt, jupyterhub.log)",
        *[f"  course       {c} (its .venv is the environment; make autograde runs there)"
          for c in courses],
        f"  proxy        {s['proxy']} (npm ci into {manifest.data['node_modules']})",
        "  processes    " + ", ".join(f"{k} (pid {v})" for k, v in manifest.data["processes"].items())
        + "; each user's server once they log in",
        "",
        f"Remove all of it: make hub-clean HUB_PREFIX={prefix}",
    ]
    print("\n".join(out), flush=True)


# ------------------------------------------------------------------ clean
def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def processes_of(uids: set[int]) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if proc.stat().st_uid in uids and _alive(int(proc.name)):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def _stop(pid: int, what: str, cmdline_mark: str) -> None:
    """SIGTERM (then SIGKILL) one recorded process, if it is still the one we started."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return
    if cmdline_mark not in cmdline or not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    say(f"stopped {what} (pid {pid})")


def clean(args) -> int:
    prefix = Path(args.prefix).resolve()
    manifest = Manifest(prefix)
    if not manifest.path.exists():
        say(f"nothing to remove: no manifest at {manifest.path}")
        return 0
    if os.geteuid() != 0:
        sys.exit("error: make hub-clean runs as root (it removes OS accounts)")
    data = manifest.data
    # 1. The hub stops every user's server and the proxy it started.
    procs = data["processes"]
    if "jupyterhub" in procs:
        _stop(procs["jupyterhub"], "jupyterhub and, through it, the users' servers", "jupyterhub")
    if "configurable-http-proxy" in procs:
        _stop(procs["configurable-http-proxy"], "configurable-http-proxy", "configurable-http-proxy")
    # 2. Whatever the demo accounts still run (a kernel, a terminal, a grader), by pid.
    uids = set()
    for name in data["accounts"]:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    for pid in processes_of(uids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_S
    while processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.2)
    if processes_of(uids):
        sys.exit(f"error: processes of {data['accounts']} are still running: {processes_of(uids)}")
    # 3. Their grading scratch (the sandbox's job folders), accounts, homes and group.
    for job in Path("/dev/shm").glob("jaxcourse-job-*"):
        try:
            if job.stat().st_uid in uids:
                shutil.rmtree(job, ignore_errors=True)
        except OSError:
            pass
    for name in data["accounts"]:
        if _exists(name):
            run(["userdel", "--remove", name])
            say(f"removed account {name} and its home")
    for group in data["groups"]:
        if _group_exists(group):
            run(["groupdel", group])
            say(f"removed group {group}")
    # 4. Folders: the hub's, then (unless kept as a cache) the environment.
    for folder in data["folders"]:
        shutil.rmtree(folder, ignore_errors=True)
        say(f"removed {folder}")
    if args.keep_env:
        manifest.path.unlink(missing_ok=True)
        say(f"kept the environment {prefix / 'python'}, {prefix / 'env'} (HUB_KEEP_ENV=1)")
    else:
        # Only what `up` puts there: a HUB_PREFIX that holds other things keeps them.
        for name in ("python", "env", ".build", "hub"):
            shutil.rmtree(prefix / name, ignore_errors=True)
        try:
            prefix.rmdir()
            say(f"removed {prefix}")
        except OSError:
            say(f"removed {prefix}/python, env (the folder itself holds other things: kept)")
    node_modules = data.get("node_modules")
    if node_modules and not args.keep_env:
        shutil.rmtree(node_modules, ignore_errors=True)
        say(f"removed {node_modules}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hub/demo.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="set up the demo class and start the hub")
    p_up.add_argument("--prefix", default="/opt/jaxcourse")
    p_up.add_argument("--port", type=int, default=8000)
    p_up.add_argument("--students", default="ada ben")
    p_up.add_argument("--instructors", default="grace")
    p_up.add_argument("--group", default="jax-xla")
    p_up.add_argument("--proxy", default=str(REPO / "hub/node_modules/.bin/configurable-http-proxy"))
    p_up.add_argument("--node-modules", default=str(REPO / "hub/node_modules"))
    p_clean = sub.add_parser("clean", help="stop the hub and remove everything `up` created")
    p_clean.add_argument("--prefix", default="/opt/jaxcourse")
    p_clean.add_argument("--keep-env", action="store_true",
                         help="keep PREFIX/python and PREFIX/env (a cache for the next `up`)")
    args = parser.parse_args(argv)
    return up(args) if args.command == "up" else clean(args)


if __name__ == "__main__":
    sys.exit(main())
