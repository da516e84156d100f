"""Judging outside the sandbox: a submission's records against the reference's.

Each graded test cell's code ran twice, sandboxed: on the instructor's notebook (the
*reference* run: what every check observed and expected, and its parameters) and on
the submission (what the student's code produced, nothing else). Here the records are
paired by position and each is explained with the reference's kind, label, parameters
and expected value, by the same ``explain`` the student's kernel uses. Nothing the
submission wrote decides how it is judged: a student record only supplies its
observation.
"""
from __future__ import annotations

import dataclasses
import re

from autograder.core import check as _check, wire as _wire
from autograder.core.feedback import format_failure, safe_error_type


def _without_text(observation: _wire.Observation) -> _wire.Observation:
    """An error observation as a hidden test's message may show it: the exception's
    kind, not its text (the student's code chose the text, and that code ran beside
    the hidden tests)."""
    return dataclasses.replace(observation, error="",
                               error_type=safe_error_type(observation.error_type))


def _stopped(text: str, hidden: bool) -> str:
    if not hidden:
        return text
    name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text or "")
    return safe_error_type(name.group(0) if name else "")


@dataclasses.dataclass
class Verdict:
    passed: bool
    message: str = ""
    held: bool = False  # points held for a person to review (the tampering policy)


def decode(files: dict[str, bytes], test_id: str) -> _wire.CellResult | None:
    """A test cell's records from the files a sandbox wrote; None when unusable."""
    return decode_or_refusal(files, test_id)[0]


def decode_or_refusal(files: dict[str, bytes], test_id: str
                      ) -> tuple[_wire.CellResult | None, str]:
    """``(records, "")``, or ``(None, why the files were refused)`` ("" when they are
    missing or hold another cell's records)."""
    raw_json, raw_npz = files.get(f"probe/{test_id}.json"), files.get(f"probe/{test_id}.npz")
    if raw_json is None or raw_npz is None:
        return None, ""
    try:
        cell = _wire.loads(raw_json, raw_npz)
    except _wire.WireError as err:
        return None, str(err)[:300]
    return (cell, "") if cell.test_id == test_id else (None, "")


def _artifact_facts(observation: _wire.Observation, derived: dict | None, key: str):
    if observation.kind != "artifact":
        return observation
    if derived is None or key not in derived:
        return _wire.Observation("error", error_type="GraderError",
                                 error="the program could not be judged")
    return derived[key]


def _naming(message: str, requirements: tuple) -> str:
    """A failing check's message, ending with the rubric items that check judges."""
    return message + "".join(f'\n  requirement not met: "{q}"' for q in requirements)


def judge_cell(reference: _wire.CellResult, student: _wire.CellResult | None, *,
               derived: dict | None = None, reference_derived: dict | None = None) -> Verdict:
    """The verdict on one test cell: the first failing check's message, or a pass.

    ``derived``/``reference_derived`` hold what the program judge computed from each
    exported program (``{"<test id>/<index>": Observation}``).
    """
    if student is None:
        return Verdict(False, format_failure(
            "the grader got no usable result for this exercise",
            cause="the notebook stopped before the grader's checks ran, "
                  "or the submission interfered with them"))
    # The student's own text (an exception's message) is never shown from a cell with
    # hidden tests: that code could read them. Which records are hidden, the
    # reference says.
    secret = reference.hidden_from is not None
    for index, ref in enumerate(reference.records):
        if index >= len(student.records):
            stopped = _stopped(student.stopped, secret) or "the test cell stopped"
            return Verdict(False, _naming(format_failure(
                f"{ref.label}: this check did not run, because the test stopped earlier "
                f"({stopped})", section=ref.params.get("section")), ref.requirements))
        got = student.records[index]
        # Labels name the student's own parameters (call_signature): only the kind of
        # check must match; the message uses the reference's label.
        if got.kind != ref.kind:
            theirs = "another check" if secret else repr(got.label)
            return Verdict(False, format_failure(
                "the grader's checks ran differently on your notebook than on the "
                f"instructor's (check {index + 1}: expected {ref.label!r}, got {theirs})",
                cause="a function of the exercise changed what the test cell does"))
        key = f"{reference.test_id}/{index}"
        observed = _artifact_facts(got.observed, derived, key)
        expected = ref.expected
        if expected is not None:
            expected = _artifact_facts(expected, reference_derived, f"{key}/expected")
        elif ref.observed.kind == "artifact":
            # A structure check: the reference's own program, run on the same inputs, is
            # what the student's program must compute (a program of another function
            # earns nothing).
            expected = _artifact_facts(ref.observed, reference_derived, key)
        message = _check.explain(ref.kind, observed, expected, ref.label, ref.params)
        if message and secret and observed.kind == "error":
            # Judged on the whole observation, explained without the student's text.
            quiet = _without_text(observed)
            message = (_check.explain(ref.kind, quiet, expected, ref.label, ref.params)
                       or _check.explain_error(ref.label, quiet,
                                               section=ref.params.get("section")))
        if message:
            return Verdict(False, _naming(message, ref.requirements))
    if student.stopped:
        return Verdict(False, format_failure(
            f"the test stopped with {_stopped(student.stopped, secret)}",
            cause="your function returned something the test could not use"))
    return Verdict(True)


def reference_problems(reference: _wire.CellResult | None, test_id: str,
                       derived: dict | None = None) -> list[str]:
    """Why the instructor's own notebook fails its checks (a broken exercise definition)."""
    if reference is None:
        return [f"{test_id}: the source notebook gave no results"]
    problems = []
    if reference.stopped:
        problems.append(f"{test_id}: the test cell stopped: {reference.stopped}")
    for index, rec in enumerate(reference.records):
        observed = _artifact_facts(rec.observed, derived, f"{test_id}/{index}")
        expected = rec.expected
        if expected is not None:
            expected = _artifact_facts(expected, derived, f"{test_id}/{index}/expected")
        message = _check.explain(rec.kind, observed, expected, rec.label, rec.params)
        if message:
            problems.append(f"{test_id}: the instructor's solution fails its own check "
                            f"{rec.label!r}:\n{message}")
    return problems


def artifacts_of(cell: _wire.CellResult, *, expected: bool = False) -> dict[str, _wire.Record]:
    """``{"<test id>/<index>[/expected]": record}`` of the records holding a program."""
    out = {}
    for index, rec in enumerate(cell.records):
        if rec.observed.kind == "artifact":
            out[f"{cell.test_id}/{index}"] = rec
        if expected and rec.expected is not None and rec.expected.kind == "artifact":
            out[f"{cell.test_id}/{index}/expected"] = rec
    return out
