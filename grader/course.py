"""Running nbgrader on a course folder, and scratch copies of the course.

nbgrader reads ``nbgrader_config.py`` from its working directory, and the course's
config sets the course root to the folder that holds it. So a scratch course is a
folder with a copy of that config and of ``source/``: every generated file
(release, gradebook, submissions) stays inside it.
"""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def nbgrader_env() -> dict[str, str]:
    """The environment for an nbgrader subprocess.

    nbgrader runs ``alembic`` in a subprocess when it creates a gradebook: the
    interpreter's bin/ must be on PATH even when the venv is not activated.
    """
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


# ``nbgrader ARGS`` with one second less of start-up: jsonschema (imported through
# nbformat) loads its optional IRI format checker, rfc3987_syntax (a dependency of
# jupyter_events), which compiles a grammar at import time. jsonschema skips the
# checker when the import fails; nbgrader never validates IRI formats. The grading
# sandbox's driver (_sandbox_child.py) does the same.
_LEAN_START = "import json, sys; sys.modules.setdefault('rfc3987_syntax', None); "
_NBGRADER_MAIN = _LEAN_START + "from nbgrader.apps.nbgraderapp import main; main()"
# The same, but the arguments come later, as one JSON list on stdin (EOF: exit).
_NBGRADER_LATER = (_LEAN_START + "from nbgrader.apps.nbgraderapp import NbGraderApp; "
                   "line = sys.stdin.readline(); "
                   "line or sys.exit(0); "
                   "NbGraderApp.launch_instance(argv=json.loads(line))")


def run_nbgrader(args: list[str], cwd: os.PathLike, *, check: bool = True,
                 capture: bool = True, timeout: float | None = None,
                 env: dict[str, str] | None = None):
    """Runs ``nbgrader ARGS`` in ``cwd`` with this interpreter (``env``: extra variables)."""
    cmd = [sys.executable, "-c", _NBGRADER_MAIN, *args]
    proc = subprocess.run(cmd, cwd=cwd, env={**nbgrader_env(), **(env or {})}, text=True,
                          capture_output=capture, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`nbgrader {' '.join(args)}` failed with exit code "
                           f"{proc.returncode} in {cwd}:\n{(proc.stdout or '')[-3000:]}"
                           f"{(proc.stderr or '')[-3000:]}")
    return proc


def start_nbgrader(cwd: os.PathLike, log: os.PathLike, *,
                   env: dict[str, str] | None = None) -> subprocess.Popen:
    """Starts an nbgrader process that imports itself now and runs when told what.

    :func:`give_nbgrader_args` sends its arguments; it then runs ``nbgrader ARGS`` in
    ``cwd`` as the command line does. Importing nbgrader is most of a short run's
    time (2.5 s of 4.7 s for 24 notebooks on a 2-core machine): a batch starts the
    process for its next recording while other work goes on. Output goes to ``log``
    (a pipe nobody reads could fill and stall it).
    """
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-c", _NBGRADER_LATER], cwd=cwd,
                                env={**nbgrader_env(), **(env or {})}, stdin=subprocess.PIPE,
                                stdout=out, stderr=subprocess.STDOUT)


def give_nbgrader_args(proc: subprocess.Popen, args: list[str] | None) -> None:
    """Starts a :func:`start_nbgrader` process's run (None: lets it exit unused)."""
    try:
        if args is not None:
            proc.stdin.write((json.dumps(args) + "\n").encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # it died while waiting: the caller sees a failed run


def make_scratch_course(dest: os.PathLike, assignments: list[str], *,
                        repo: Path = REPO) -> Path:
    """Creates a course folder with the repo's config and the named source modules."""
    dest = Path(dest)
    (dest / "source").mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "nbgrader_config.py", dest / "nbgrader_config.py")
    for name in assignments:
        target = dest / "source" / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(repo / "source" / name, target,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return dest


def generate_release(course: os.PathLike, name: str) -> Path:
    """``nbgrader generate_assignment NAME`` in a course folder; returns release/NAME."""
    run_nbgrader(["generate_assignment", name, "--force"], cwd=course)
    return Path(course) / "release" / name


def _notebook_json(path: Path):
    return json.loads(path.read_text())


def diff_trees(generated: Path, committed: Path) -> list[str]:
    """Differences between two release folders (notebooks compared as JSON)."""
    problems = []
    gen = {p.relative_to(generated) for p in generated.rglob("*") if p.is_file()}
    com = ({p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
           if committed.exists() else set())
    for rel in sorted(gen - com):
        problems.append(f"missing from {committed}: {rel}")
    for rel in sorted(com - gen):
        problems.append(f"not generated by `make release`: {committed / rel}")
    for rel in sorted(gen & com):
        a, b = generated / rel, committed / rel
        same = (_notebook_json(a) == _notebook_json(b) if rel.suffix == ".ipynb"
                else filecmp.cmp(a, b, shallow=False))
        if not same:
            problems.append(f"differs from what `make release` writes: {committed / rel}")
    return problems


def release(assignments: list[str], *, check: bool = False, repo: Path = REPO) -> int:
    """Regenerates release/ (or, with ``check``, reports how it differs)."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        course = make_scratch_course(tmp, assignments, repo=repo)
        for name in assignments:
            generated = generate_release(course, name)
            committed = repo / "release" / name
            if check:
                problems = diff_trees(generated, committed)
                failures.extend(problems)
                print(f"{name}: {'up to date' if not problems else 'STALE'}")
            else:
                if committed.exists():
                    shutil.rmtree(committed)
                shutil.copytree(generated, committed)
                print(f"{name}: wrote {committed.relative_to(repo)}")
    for p in failures:
        print("  " + p)
    if failures:
        print("release/ is stale: run `make release` and commit the result.")
    return 1 if failures else 0


def nbgrader_db_url(course: os.PathLike) -> str:
    """The gradebook URL of a course folder, as its nbgrader_config.py sets it."""
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    url = cfg.get("CourseDirectory", {}).get("db_url")
    if url:
        return str(url)
    return f"sqlite:///{Path(course).resolve() / 'gradebook.db'}"
