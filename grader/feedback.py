"""``python -m autograder feedback [A...]``: feedback for every assignment, past failures.

``nbgrader generate_feedback A --force`` goes on with the other students of A when one
student's autograded notebook fails, then exits 1; a shell loop that stopped there
left every later assignment without feedback. This runs it for each assignment that
has autograded submissions (autograded/*/A), whatever the earlier ones did, and ends
with a summary: each failed submission (assignment, student, the exception's line
from nbgrader's log) and how many feedback files were written.

nbgrader removes a student's feedback folder before converting (``--force``) and again
when the conversion fails, so a failed student has no feedback at all, not even an
earlier one. The summary says so, and also names any submission whose feedback is
missing after a run that reported nothing about it: none goes missing silently.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

# nbgrader's log lines: "[GenerateFeedbackApp | ERROR] message"; the lines that follow
# without the prefix (a traceback) belong to the same message, indented by 4 spaces.
_LOG_LINE = re.compile(r"^\[(?P<app>[^\]|]+) \| (?P<level>[A-Z]+)\] ?(?P<message>.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROCESSING = re.compile(r"^There was an error processing assignment: (?P<path>.+)$")
_STUDENT = re.compile(r"^There was an error processing assignment '(?P<assignment>.*)' "
                      r"for student '(?P<student>.*)'$")
REASON_LIMIT = 300


@dataclass
class Failure:
    assignment: str
    student: str | None  # None: nbgrader failed for the assignment as a whole
    reason: str
    removed: list[str] = field(default_factory=list)  # earlier feedback files now gone
    stale: list[str] = field(default_factory=list)  # earlier files left, not regenerated


@dataclass
class Outcome:
    assignment: str
    written: list[Path] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def _messages(output: str) -> list[tuple[str, str]]:
    """nbgrader's log as (level, message) pairs, a traceback joined to its message."""
    messages: list[tuple[str, list[str]]] = []
    for line in _ANSI.sub("", output).splitlines():
        m = _LOG_LINE.match(line)
        if m:
            messages.append((m["level"], [m["message"]]))
        elif messages:
            messages[-1][1].append(line)
        else:
            messages.append(("", [line]))
    return [(level, lines[0] + ("\n" + textwrap.dedent("\n".join(lines[1:])).rstrip()
                                if len(lines) > 1 else ""))
            for level, lines in messages]


def exception_line(tb: str) -> str:
    """The line that names the exception in a formatted traceback (its first line)."""
    lines = tb.splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if frames:
        for line in lines[frames[-1] + 1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()[:REASON_LIMIT]
    rest = [line.strip() for line in lines if line.strip()]
    return (rest[-1] if rest else "no reason in nbgrader's log")[:REASON_LIMIT]


def parse_failures(output: str) -> list[tuple[str, str, str]]:
    """(assignment, student, reason) for each submission nbgrader's log says failed.

    nbgrader logs "There was an error processing assignment: PATH" and the traceback
    when a submission fails, and at the end one line per failed (assignment, student).
    """
    messages = _messages(output)
    tracebacks: list[tuple[tuple[str, ...], str]] = []  # (path parts, reason)
    pairs: list[tuple[str, str]] = []
    for i, (level, message) in enumerate(messages):
        m = _PROCESSING.match(message)
        if m:
            following = messages[i + 1][1] if i + 1 < len(messages) else ""
            reason = (exception_line(following) if following.startswith("Traceback")
                      else "no traceback in nbgrader's log")
            tracebacks.append((Path(m["path"].strip()).parts, reason))
        m = _STUDENT.match(message)
        if m:
            pairs.append((m["assignment"], m["student"]))
    failures = []
    for assignment, student in pairs:
        match = next((t for t in tracebacks if set(t[0][-2:]) == {assignment, student}), None)
        if match is not None:
            tracebacks.remove(match)
        failures.append((assignment, student,
                         match[1] if match else "see nbgrader's log above"))
    return failures


def _last_error(output: str) -> str:
    """Why nbgrader failed as a whole: its last error, or an uncaught traceback."""
    messages = _messages(output)
    errors = [msg for level, msg in messages if level in ("ERROR", "CRITICAL")]
    if errors:
        last = errors[-1]
        return (exception_line(last) if "Traceback" in last
                else last.splitlines()[0])[:REASON_LIMIT]
    text = _ANSI.sub("", output)
    if "Traceback (most recent call last):" in text:  # raised past nbgrader's logging
        return exception_line(text[text.rindex("Traceback (most recent call last):"):])
    rest = [line.strip() for line in text.splitlines() if line.strip()]
    return (rest[-1] if rest else "nbgrader printed nothing")[:REASON_LIMIT]


def _expected(root: Path, assignment: str) -> dict[str, list[Path]]:
    """The feedback files each autograded submission of the assignment should get."""
    expected = {}
    for folder in sorted((root / "autograded").glob(f"*/{assignment}")):
        if folder.is_dir():
            student = folder.parent.name
            expected[student] = [root / "feedback" / student / assignment / f"{nb.stem}.html"
                                 for nb in sorted(folder.glob("*.ipynb"))]
    return expected


def _run(args: list[str], root: Path) -> tuple[int, str]:
    """nbgrader ARGS as grader.course.run_nbgrader runs it, its log echoed as it comes."""
    from grader.course import nbgrader_command, nbgrader_env

    lines = []
    with subprocess.Popen(nbgrader_command(args), cwd=root, env=nbgrader_env(), text=True,
                          errors="replace", stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT) as proc:
        for line in proc.stdout:
            sys.stderr.write(line)
            lines.append(line)
    sys.stderr.flush()
    return proc.returncode, "".join(lines)


def generate(root: Path, assignment: str) -> Outcome:
    """``nbgrader generate_feedback ASSIGNMENT --force``, and what came of each submission."""
    expected = _expected(root, assignment)
    before = {p for paths in expected.values() for p in paths if p.exists()}
    start = time.time() - 1.0  # file times are coarser than time.time()
    code, output = _run(["generate_feedback", assignment, "--force"], root)
    outcome = Outcome(assignment)
    reported = set()
    for a, student, reason in parse_failures(output):
        reported.add(student)
        outcome.failures.append(Failure(a, student, reason))
    if code != 0 and not reported:
        outcome.failures.append(Failure(assignment, None, _last_error(output)))
    for student, paths in expected.items():
        fresh = [p for p in paths if p.exists() and p.stat().st_mtime >= start]
        outcome.written.extend(fresh)
        missing = [p for p in paths if p not in fresh]
        if not missing:
            continue
        if student not in reported:
            why = ("nbgrader failed before writing it" if code != 0
                   else "nbgrader reported no error, yet wrote no feedback")
            outcome.failures.append(Failure(assignment, student, why))
        failure = next(f for f in outcome.failures if f.student == student)
        failure.removed = [str(p.relative_to(root)) for p in missing
                           if p in before and not p.exists()]
        failure.stale = [str(p.relative_to(root)) for p in missing if p.exists()]
    return outcome


def summary(outcomes: list[Outcome]) -> str:
    failures = [f for o in outcomes for f in o.failures]
    written = sum(len(o.written) for o in outcomes)
    lines = [f"feedback: {written} file(s) written for {len(outcomes)} assignment(s); "
             f"{len(failures)} failure(s)"]
    for o in outcomes:
        lines.append(f"  {o.assignment}: {len(o.written)} written"
                     + (f", {len(o.failures)} failed" if o.failures else ""))
    for f in failures:
        who = f"student {f.student}" if f.student else "the whole assignment"
        lines.append(f"FAILED {f.assignment} {who}: {f.reason}")
        if f.stale:
            lines.append(f"  not regenerated; an earlier run's feedback is left: "
                         f"{', '.join(f.stale)}")
        elif f.student:
            lines.append(f"  no feedback for {f.student} in feedback/{f.student}/{f.assignment}/"
                         + (f" (earlier feedback removed: {', '.join(f.removed)})"
                            if f.removed else ""))
    return "\n".join(lines)


def assignments_with_submissions(root: Path) -> list[str]:
    return sorted({p.name for p in (root / "autograded").glob("*/*") if p.is_dir()})


def main(root: Path, assignments: list[str]) -> int:
    """Feedback for each named assignment (all autograded ones when none are named)."""
    names = assignments or assignments_with_submissions(root)
    outcomes = []
    for name in names:
        if not _expected(root, name):
            print(f"{name}: no autograded submissions, skipped")
            continue
        print(f"{name}: generating feedback", flush=True)
        outcomes.append(generate(root, name))
    print(summary(outcomes))
    return 1 if any(o.failures for o in outcomes) else 0
