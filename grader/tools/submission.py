"""Building submissions from the release notebook: for tests, demos and instructors.

A submission is the release notebook with solution cells filled in: from the
instructor's source (what a perfect student writes), from replacement code (an
alternative or a wrong answer), or left as the stub (a blank submission).
"""
from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Mapping

_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$", re.M)


def read_notebook(path):
    import nbformat

    return nbformat.read(os.fspath(path), as_version=4)


def write_notebook(nb, path) -> None:
    import nbformat

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, os.fspath(path))


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def solution_ids(nb) -> list[str]:
    """grade_ids of the autograded solution cells, in notebook order."""
    return [_meta(c)["grade_id"] for c in nb.cells
            if _meta(c).get("solution") and not _meta(c).get("grade")
            and c.cell_type == "code"]


def grade_cell_points(nb) -> dict[str, float]:
    """``{grade_id: points}`` of the autograded test cells, in notebook order."""
    return {_meta(c)["grade_id"]: float(_meta(c).get("points", 0)) for c in nb.cells
            if _meta(c).get("grade") and not _meta(c).get("solution")}


def strip_solution_markers(source: str) -> str:
    """The code a student writes: the source solution without its markers.

    >>> strip_solution_markers("def f(x):\\n    ### BEGIN SOLUTION\\n    return x\\n    ### END SOLUTION")
    'def f(x):\\n    return x'
    """
    return "\n".join(line for line in source.split("\n") if not _MARKER.match(line))


def build_submission(release_nb, *, source_nb=None, replacements: Mapping[str, str] = {}):
    """Returns a copy of ``release_nb`` with solution cells filled in.

    Args:
      release_nb: the student notebook (stubs in solution cells).
      source_nb: if given, every solution cell not in ``replacements`` gets the
        instructor's solution from it.
      replacements: ``{grade_id: code}`` to put in those solution cells.

    Raises:
      KeyError: a replacement names a grade_id that is not a solution cell.
    """
    import copy

    nb = copy.deepcopy(release_nb)
    known = set(solution_ids(nb))
    unknown = set(replacements) - known
    if unknown:
        raise KeyError(f"no solution cell with grade_id {sorted(unknown)}; "
                       f"solution cells: {sorted(known)}")
    reference = {}
    if source_nb is not None:
        reference = {_meta(c)["grade_id"]: strip_solution_markers(c.source)
                     for c in source_nb.cells if _meta(c).get("solution")}
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in replacements:
            cell.source = replacements[gid]
        elif gid in known and gid in reference:
            cell.source = reference[gid]
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder submission",
        description="Build submitted/STUDENT/ASSIGNMENT/ from the release notebook, "
                    "optionally filling solution cells from source/ or from files.")
    parser.add_argument("assignment")
    parser.add_argument("--student", required=True)
    parser.add_argument("--fill", choices=["source", "none"], default="none",
                        help="fill the other solution cells with the instructor's solutions")
    parser.add_argument("--replace", action="append", default=[], metavar="GRADE_ID=FILE",
                        help="put the code in FILE into that solution cell (repeatable)")
    parser.add_argument("--course-dir", default=".", help="course root (default: .)")
    args = parser.parse_args(argv)

    root = Path(args.course_dir)
    name = args.assignment
    release = sorted((root / "release" / name).glob("*.ipynb"))
    if not release:
        parser.error(f"no notebook in {root / 'release' / name}: run `make release` first")
    replacements = {}
    for item in args.replace:
        gid, _, path = item.partition("=")
        if not path:
            parser.error(f"--replace wants GRADE_ID=FILE, got {item!r}")
        replacements[gid] = Path(path).read_text()
    for nb_path in release:
        release_nb = read_notebook(nb_path)
        source_nb = None
        if args.fill == "source":
            source_nb = read_notebook(root / "source" / name / nb_path.name)
        mine = {k: v for k, v in replacements.items() if k in solution_ids(release_nb)}
        out = root / "submitted" / args.student / name / nb_path.name
        write_notebook(build_submission(release_nb, source_nb=source_nb, replacements=mine), out)
        print(f"wrote {out}")
    return 0
