"""Command line: ``python -m autograder COMMAND``.

  release [--check] A...     generate release/ from source/ (or check it is current)
  grade A [--workers N] [--scheduler ADDR] [--force] [--allow-unsandboxed]
                             sandboxed, trusted grading of submitted/*/A
  feedback [A...]            nbgrader generate_feedback for each autograded assignment
                             (all of them by default), past failures; then a summary
  export [--to grades.csv]   CSV export with a status column (nbgrader export plugin)
  submission A --student S   build a submission from the release notebook
  demo [--dir demo] [--allow-unsandboxed]
                             the instructor's whole job on a sample class
  rubric A...                each exercise's requirements, the checks that judge them, points
  report [A...] [--out reports]
                             instructor analytics: per module, reports/A.html (one page:
                             each exercise's scores, discrimination, rubric items failed;
                             students x exercises; attention; grading time) and CSVs
  run-notebooks [A...] [--out DIR]
                             every source notebook top to bottom on this machine
                             (CPU, GPU or TPU): a table of the cells that fail
  mutants A [--exercise ID] [--limit N]
                             mutation score of each exercise's checks (survivors shown)
  bench [A...] [--parts student grading scale] [--size 24]
                             student run time; plain nbgrader vs pipeline; scale

Grading needs bubblewrap (the package bubblewrap) and stops with one line without
it. --allow-unsandboxed grades anyway where it is missing: only for notebooks you
trust (they can read and change whatever your user can).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ALLOW_HELP = ("where bubblewrap is missing or cannot run, grade without a sandbox: only for "
              "notebooks you trust (they can read and change whatever your user can)")


def _assignments(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "source").glob("[0-9][0-9]_*") if p.is_dir())


def _own_bin_first() -> None:
    """Puts this interpreter's bin/ first on PATH, for the commands nbgrader runs by name.

    nbgrader runs ``alembic`` when it creates a gradebook, in this process too: from a
    shell where the venv is not activated that was a FileNotFoundError.
    """
    own = str(Path(sys.executable).parent)  # not resolved: the venv's bin, not pyenv's
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [own]:
        os.environ["PATH"] = own + (os.pathsep + path if path else "")


def main(argv: list[str] | None = None) -> int:
    from grader.sandbox import SandboxUnavailable

    _own_bin_first()
    try:
        return _main(argv)
    except SandboxUnavailable as err:  # one line, no traceback: what to install, or waive
        print(f"error: {err}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    root = Path.cwd()
    if command == "mutants":
        from grader.tools.mutants import main as mutants_main

        return mutants_main(rest)
    if command == "run-notebooks":
        from grader.tools.run_notebooks import main as run_notebooks_main

        return run_notebooks_main(rest)
    if command == "submission":
        from grader.tools.submission import main as submission_main

        return submission_main(rest)
    parser = argparse.ArgumentParser(prog=f"python -m autograder {command}")
    if command == "release":
        from grader.course import release

        parser.add_argument("assignments", nargs="*")
        parser.add_argument("--check", action="store_true")
        args = parser.parse_args(rest)
        return release(args.assignments or _assignments(root), check=args.check, repo=root)
    if command == "rubric":
        from grader.rubric import table

        parser.add_argument("assignments", nargs="*")
        args = parser.parse_args(rest)
        for name in args.assignments or _assignments(root):
            print(table(name, root), end="\n\n")
        return 0
    if command == "report":
        from grader.report import main as report_main

        parser.add_argument("assignments", nargs="*")
        parser.add_argument("--out", default="reports",
                            help="folder of the pages and CSVs (relative to the course)")
        args = parser.parse_args(rest)
        return report_main(root, args.assignments or _assignments(root), Path(args.out))
    if command == "grade":
        from grader.pipeline import grade_assignment

        parser.add_argument("assignment")
        parser.add_argument("--workers", type=int, default=None,
                            help="parallel sandboxes on this machine (default: c.Grading.workers; "
                                 "0 there: one and a half per core, as memory allows)")
        parser.add_argument("--scheduler", default=None,
                            help="address of a Dask scheduler (tcp://host:8786) to run on")
        parser.add_argument("--force", action="store_true",
                            help="grade again what the ledger says is done")
        parser.add_argument("--allow-unsandboxed", action="store_true", help=ALLOW_HELP)
        args = parser.parse_args(rest)
        outcomes = grade_assignment(root, args.assignment, workers=args.workers,
                                    scheduler=args.scheduler, force=args.force,
                                    allow_unsandboxed=args.allow_unsandboxed)
        return 0 if outcomes is not None else 1
    if command == "feedback":
        from grader.feedback import main as feedback_main

        parser.add_argument("assignments", nargs="*",
                            help="default: every assignment with autograded/*/A")
        args = parser.parse_args(rest)
        return feedback_main(root, args.assignments)
    if command == "export":
        from grader.course import run_nbgrader

        parser.add_argument("--to", default="grades.csv")
        args = parser.parse_args(rest)
        run_nbgrader(["export", "--exporter=grader.export.StatusCsvExport",
                      f"--StatusCsvExport.course_root={root}", "--to", args.to],
                     cwd=root, capture=False)
        print(f"wrote {args.to}")
        return 0
    if command == "demo":
        from grader.tools.demo import run_demo

        parser.add_argument("--dir", default="demo")
        parser.add_argument("--assignments", nargs="*", default=None)
        parser.add_argument("--allow-unsandboxed", action="store_true", help=ALLOW_HELP)
        args = parser.parse_args(rest)
        return run_demo(args.dir, args.assignments or _assignments(root),
                        allow_unsandboxed=args.allow_unsandboxed)
    if command == "bench":
        from grader.tools.bench import main as bench_main

        parser.add_argument("assignments", nargs="*")
        parser.add_argument("--parts", nargs="+", default=["student", "grading", "scale"],
                            choices=["student", "grading", "scale", "growth"],
                            help="growth (not in the default): the pipeline on 24, 48 and "
                                 "96 submissions of --scale-module")
        parser.add_argument("--size", type=int, default=24, help="submissions per class")
        parser.add_argument("--scale-module", default="01_grad")
        args = parser.parse_args(rest)
        return bench_main(args.assignments or _assignments(root), parts=tuple(args.parts),
                          size=args.size, scale_module=args.scale_module)
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
