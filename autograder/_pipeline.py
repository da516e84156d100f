"""Grading a batch of submissions with nbgrader, one submission at a time.

nbgrader aborts a whole ``autograde`` run on one malformed notebook and writes a
kernel crash as a silent 0 in the export. Here every submission is preflighted,
graded by ``nbgrader autograde --student`` in its own process, and recorded in a
ledger (``autograded/.grading/ASSIGNMENT.json``): graded, or needing attention with
a reason code. The export and the summary read that ledger, so no problem is lost.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import time
from pathlib import Path

from autograder._course import run_nbgrader

REASONS = {
    "malformed": "the submission is not a readable notebook, or a notebook is missing",
    "kernel_died": "the kernel died while running the notebook",
    "timeout": "a cell ran past the time limit",
    "grading_failed": "nbgrader could not grade the submission",
}


@dataclasses.dataclass
class Outcome:
    student: str
    status: str  # "graded" or "attention"
    reason: str = ""
    detail: str = ""
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0


def ledger_path(course: Path, assignment: str) -> Path:
    return Path(course) / "autograded" / ".grading" / f"{assignment}.json"


def read_ledger(course: Path, assignment: str) -> dict[str, dict]:
    path = ledger_path(course, assignment)
    return json.loads(path.read_text()) if path.exists() else {}


def _write_ledger(course: Path, assignment: str, outcomes: dict[str, Outcome]) -> None:
    path = ledger_path(course, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = read_ledger(course, assignment)
    data.update({s: dataclasses.asdict(o) for s, o in outcomes.items()})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def preflight(course: Path, assignment: str, student: str) -> str | None:
    """Returns why a submission cannot be graded, or None when it can."""
    import nbformat

    release = sorted((Path(course) / "release" / assignment).glob("*.ipynb"))
    folder = Path(course) / "submitted" / student / assignment
    for expected in release:
        path = folder / expected.name
        if not path.exists():
            return f"{expected.name} is missing from the submission"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            return f"{expected.name} cannot be read: {err}"
        try:
            json.loads(text)
        except json.JSONDecodeError as err:
            return (f"{expected.name} is not valid JSON ({err.msg} at line {err.lineno}, "
                    f"column {err.colno}): a truncated or corrupted upload")
        try:
            nb = nbformat.reads(text, as_version=4)
            nbformat.validate(nb)
        except Exception as err:  # noqa: BLE001 - any schema problem means malformed
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            return f"{expected.name} is not a valid notebook: {first[:200]}"
    return None


def _inspect_autograded(course: Path, assignment: str, student: str) -> tuple[str, str]:
    """Finds kernel deaths and timeouts in the autograded notebooks."""
    import nbformat

    for path in sorted((Path(course) / "autograded" / student / assignment).glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") != "error":
                    continue
                if out.get("ename") == "CellTimeoutError":
                    return "timeout", f"{path.name}: a cell ran past the time limit"
                if out.get("ename") in ("DeadKernelError",) or "Kernel died" in str(out.get("evalue")):
                    return "kernel_died", f"{path.name}: {out.get('evalue')}"
    return "", ""


def _scores(course: Path, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    from autograder._course import nbgrader_db_url

    with Gradebook(nbgrader_db_url(course)) as gb:
        sub = gb.find_submission(assignment, student)
        return float(sub.score), float(sub.max_score)


def grade_one(course: Path, assignment: str, student: str, *, timeout: float = 1800) -> Outcome:
    """Preflights and autogrades one submission in its own nbgrader process."""
    start = time.monotonic()
    problem = preflight(course, assignment, student)
    if problem:
        return Outcome(student, "attention", "malformed", problem,
                       seconds=time.monotonic() - start)
    try:
        proc = run_nbgrader(["autograde", assignment, "--student", student, "--force"],
                            cwd=course, check=False, timeout=timeout)
    except Exception as err:  # noqa: BLE001 - subprocess timeout and the like
        return Outcome(student, "attention", "timeout" if "timed out" in str(err) else
                       "grading_failed", str(err)[:500], seconds=time.monotonic() - start)
    log = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0 or "[AutogradeApp | ERROR]" in log:
        reason = "kernel_died" if "Kernel died" in log or "DeadKernel" in log else "grading_failed"
        tail = "\n".join(line for line in log.splitlines() if "ERROR" in line)[-800:]
        return Outcome(student, "attention", reason, tail or log[-800:],
                       seconds=time.monotonic() - start)
    reason, detail = _inspect_autograded(course, assignment, student)
    score, max_score = _scores(course, assignment, student)
    status = "attention" if reason else "graded"
    return Outcome(student, status, reason, detail, score, max_score,
                   seconds=time.monotonic() - start)


def ensure_in_gradebook(course: Path, assignment: str) -> None:
    """Registers the assignment's source notebooks in the gradebook when missing.

    nbgrader autograde restores locked cells and hidden tests from the gradebook,
    which ``nbgrader generate_assignment`` fills. After a fresh clone the gradebook
    does not exist yet: run it once, writing its release copy to a scratch folder
    so that the committed release/ is left as it is.
    """
    import tempfile

    from nbgrader.api import Gradebook, MissingEntry

    from autograder._course import nbgrader_db_url

    with Gradebook(nbgrader_db_url(course)) as gb:
        try:
            gb.find_assignment(assignment)
            return
        except MissingEntry:
            pass
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        run_nbgrader(["generate_assignment", assignment, "--force",
                      f"--CourseDirectory.release_directory={tmp}"], cwd=course)


def submitted_students(course: Path, assignment: str) -> list[str]:
    base = Path(course) / "submitted"
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


def grade_assignment(course: Path, assignment: str, *, workers: int = 1,
                     students: list[str] | None = None, show: bool = True) -> dict[str, Outcome]:
    """Grades every submission of an assignment; returns ``{student: Outcome}``."""
    from rich.console import Console
    from rich.progress import Progress

    course = Path(course)
    ensure_in_gradebook(course, assignment)
    students = students if students is not None else submitted_students(course, assignment)
    console = Console(stderr=False)
    outcomes: dict[str, Outcome] = {}
    started = time.monotonic()
    with Progress(console=console, disable=not show, transient=False) as progress:
        task = progress.add_task(f"grading {assignment}", total=len(students))
        with cf.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = {pool.submit(grade_one, course, assignment, s): s for s in students}
            for fut in cf.as_completed(futures):
                student = futures[fut]
                try:
                    outcome = fut.result()
                except Exception as err:  # noqa: BLE001 - a bug here must not lose the batch
                    outcome = Outcome(student, "attention", "grading_failed", repr(err)[:500])
                outcomes[student] = outcome
                _write_ledger(course, assignment, {student: outcome})
                progress.advance(task)
    if show:
        print_summary(console, assignment, outcomes, time.monotonic() - started)
    return outcomes


def print_summary(console, assignment: str, outcomes: dict[str, Outcome], seconds: float) -> None:
    from rich.table import Table

    table = Table(title=f"{assignment}: {len(outcomes)} submission(s) in {seconds:.1f} s")
    for col in ("student", "score", "status", "reason"):
        table.add_column(col)
    for s in sorted(outcomes):
        o = outcomes[s]
        score = f"{o.score:g} / {o.max_score:g}" if o.score is not None else "-"
        table.add_row(s, score, o.status, f"{o.reason}: {o.detail}" if o.reason else "")
    console.print(table)
    attention = [o for o in outcomes.values() if o.status != "graded"]
    graded = len(outcomes) - len(attention)
    console.print(f"graded: {graded}   needs attention: {len(attention)}   "
                  f"time: {seconds:.1f} s")
    for o in attention:
        console.print(f"  NEEDS ATTENTION {o.student}: {o.reason} ({REASONS.get(o.reason, '')})")
