"""What a batch knows about each submission: outcomes, the ledger, preflight, fingerprints.

The ledger (``autograded/.grading/A/ledger.json``) records every submission by the
fingerprint of its files: a re-run skips what is done, a killed batch resumes (judged
bundles are kept on disk), and a changed submission is graded again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

REASONS = {
    "malformed": "a notebook is missing, unreadable, not a notebook or too large",
    "timeout": "a cell ran past the time limit and was stopped",
    "notebook_timeout": "the whole notebook ran past its time limit",
    "out_of_memory": "the notebook used more memory than allowed",
    "kernel_died": "the kernel crashed (os._exit, a segfault, a killed process)",
    "output_flood": "a cell printed far more output than allowed",
    "held_for_review": "a solution reaches around the language: its exercise waits for a person",
    "grading_failed": "the grader failed on this submission, even graded alone (a bug, or a "
                      "submission that kills its worker): graded again on the next run",
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
    fingerprint: str = ""
    # "judged" (bundle on disk), "recorded" (in the gradebook: final) or "failed" (the
    # grader failed on it: the next run grades it again)
    phase: str = ""
    peak_memory_mb: float | None = None
    isolation: str = ""
    seed: int | None = None  # the grader's seed of drawn inputs (c.Grading.seed)
    stopped_by: str = ""  # the limit that stopped a run, with its numbers (grader.sandbox.Stop)


# ---------------------------------------------------------------- ledger

def grading_dir(course: Path, assignment: str) -> Path:
    return Path(course) / "autograded" / ".grading" / assignment


def cache_dir(course: Path, assignment: str) -> Path:
    """JAX's persistent compilation cache: written by the reference run only."""
    return grading_dir(course, assignment) / "jaxcache"


def ledger_path(course: Path, assignment: str) -> Path:
    return grading_dir(course, assignment) / "ledger.json"


def read_ledger(course: Path, assignment: str) -> dict[str, dict]:
    path = ledger_path(course, assignment)
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:
        return {}


def _write_ledger(course: Path, assignment: str, outcomes: dict[str, Outcome]) -> None:
    path = ledger_path(course, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = read_ledger(course, assignment)
    data.update({s: dataclasses.asdict(o) for s, o in outcomes.items()})
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


# ---------------------------------------------------------------- preflight

def _notebook_names(course: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (Path(course) / "source" / assignment).glob("*.ipynb"))


def preflight(course: Path, assignment: str, student: str,
              max_bytes: int = 20_000_000) -> str | None:
    """Returns why a submission cannot be graded, or None when it can."""
    import nbformat

    folder = Path(course) / "submitted" / student / assignment
    for name in _notebook_names(course, assignment):
        path = folder / name
        if path.is_symlink() or not path.is_file():
            return f"{name} is missing from the submission"
        size = path.stat().st_size
        if size > max_bytes:
            return (f"{name} is {size / 1e6:.0f} MB, over the limit of "
                    f"{max_bytes / 1e6:.0f} MB (clear the outputs and submit again)")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            return f"{name} cannot be read: {err}"
        try:
            json.loads(text)
        except json.JSONDecodeError as err:
            return (f"{name} is not valid JSON ({err.msg} at line {err.lineno}, "
                    f"column {err.colno}): a truncated or corrupted upload")
        except RecursionError:
            return f"{name} is nested too deeply to be a notebook"
        try:
            nb = nbformat.reads(text, as_version=4)
            nbformat.validate(nb)
        except Exception as err:  # noqa: BLE001 - any schema problem means malformed
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            return f"{name} is not a valid notebook: {first[:200]}"
    return None


def digest(*parts: bytes | str) -> str:
    """A short sha256 of ``parts``, each ended by a NUL byte (so that ("ab", "c") and
    ("a", "bc") differ): the key of the ledger's fingerprints and the reference cache."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:20]


def fingerprint(course: Path, assignment: str, student: str,
                max_bytes: int = 20_000_000) -> str:
    """A digest of the submission's notebooks and timestamp: what grading depends on."""

    folder = Path(course) / "submitted" / student / assignment
    parts: list[bytes | str] = []
    for name in _notebook_names(course, assignment) + ["timestamp.txt"]:
        path = folder / name
        parts.append(name)
        try:
            parts.append(path.read_bytes() if path.stat().st_size <= max_bytes
                         else f"size:{path.stat().st_size}")
        except OSError:
            parts.append("missing")
    return digest(*parts)


