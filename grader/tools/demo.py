"""``make demo``: the instructor's whole job on a sample class, in a scratch folder.

Release, a sample class built from the notebooks (full marks, partial, blank and a
malformed notebook), autograde, feedback, export, a score table, and last the
instructor's report of each module (``grader.report``: ``demo/reports/A.html``).
"""
from __future__ import annotations

import csv
import shutil
import time
from pathlib import Path

from grader.course import REPO, generate_release, make_scratch_course, run_nbgrader
from grader.pipeline import grade_assignment
from grader.report import write_report
from grader.tools.submission import (build_submission, read_notebook, solution_ids,
                                    write_notebook)

# The sample class: who they are and what they hand in.
CLASS = {
    "ada": "full",        # every solution cell filled in from source/
    "ben": "partial",     # the first half of the exercises solved, the rest left blank
    "cyd": "blank",       # the release notebook as handed out
    "dee": "malformed",   # a notebook truncated mid-file (a broken upload)
}


def build_class(course: Path, assignment: str) -> None:
    for nb_path in sorted((course / "release" / assignment).glob("*.ipynb")):
        release_nb = read_notebook(nb_path)
        source_nb = read_notebook(course / "source" / assignment / nb_path.name)
        ids = solution_ids(release_nb)
        for student, kind in CLASS.items():
            out = course / "submitted" / student / assignment / nb_path.name
            if kind == "full":
                nb = build_submission(release_nb, source_nb=source_nb)
            elif kind == "partial":
                solved = ids[: (len(ids) + 1) // 2]
                full = build_submission(release_nb, source_nb=source_nb)
                keep = {c.metadata["nbgrader"]["grade_id"]: c.source for c in full.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") in solved}
                nb = build_submission(release_nb, replacements=keep)
            else:
                nb = release_nb
            write_notebook(nb, out)
            if kind == "malformed":
                text = out.read_text()
                out.write_text(text[: len(text) // 2])


def run_demo(directory: str, assignments: list[str], *, allow_unsandboxed: bool = False) -> int:
    from grader import sandbox

    # Refuse before building anything where there is no sandbox (one line, see the CLI).
    sandbox.require(sandbox.Limits(allow_unsandboxed=allow_unsandboxed))
    course = Path(directory).resolve()
    if course.exists():
        shutil.rmtree(course)
    start = time.monotonic()
    make_scratch_course(course, assignments, repo=REPO)
    print(f"demo course in {course}")
    for name in assignments:
        generate_release(course, name)
        build_class(course, name)
        print(f"{name}: released; sample class built: "
              + ", ".join(f"{s} ({k})" for s, k in CLASS.items()))
    for name in assignments:
        grade_assignment(course, name, allow_unsandboxed=allow_unsandboxed)
        run_nbgrader(["generate_feedback", name, "--force"], cwd=course)
    run_nbgrader(["export", "--exporter=grader.export.StatusCsvExport",
                  f"--StatusCsvExport.course_root={course}", "--to", str(course / "grades.csv")],
                 cwd=course)
    print_grades(course / "grades.csv")
    print(f"feedback: {course / 'feedback'}")
    print(f"grades:   {course / 'grades.csv'}")
    for name in assignments:
        print(f"report:   {write_report(course, name, course / 'reports').html}")
    print(f"demo finished in {time.monotonic() - start:.1f} s")
    return 0


def print_grades(path: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    table = Table(title=f"grades ({path.name})")
    for col in ("assignment", "student_id", "score", "max_score", "status", "reason"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["assignment"], r["student_id"], r["score"] or "-", r["max_score"],
                      r["status"], r["reason"])
    Console().print(table)
