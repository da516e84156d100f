"""Grading one submission: rebuild, run sandboxed (again if a cell hangs or crashes),
judge outside. The result is a bundle of plain data that nbgrader turns into grades.

A cell that hangs, crashes the kernel, floods output or exhausts memory does not
sink the notebook: the sandbox is killed, that cell is left out (a solution cell's
exercise scores 0 with the reason) and the notebook runs again, at most
``MAX_RUNS`` times. Every such incident is kept: the submission is graded and listed
as needing attention with the reason code.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from pathlib import Path

from grader import sandbox as _sandbox
from grader import trusted as _trusted
from autograder._feedback import format_failure

MAX_RUNS = 5
_STUB = re.compile(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[ \t]*$", re.S | re.M)
MESSAGES = {
    "timeout": "ran past the time limit of {cell:g} s per cell, so the grader stopped it",
    "out_of_memory": "used more than the memory limit of {memory} MiB",
    "kernel_died": "crashed the Python kernel (os._exit, a segfault, or a killed process)",
    "output_flood": "printed far more output than the limit allows",
}
# Ways out of the student's own code that the course never needs; a match does not
# change the score (that is decided outside), it asks a person to look.
_TAMPERING = re.compile(
    r"\b(autograder|_jaxcourse_probe|sys\.modules|__builtins__|builtins|get_ipython|"
    r"gc\.get_objects|ctypes|subprocess|socket|os\.(kill|fork|system|_exit)|signal\.signal|"
    r"sys\.settrace|sys\.setprofile|__code__|__globals__|setattr|delattr|__import__|"
    r"importlib)\b"
    # Rebinding a library's attribute (jax.make_jaxpr = ...) changes what checks see.
    r"|^[ \t]*(jax|jnp|lax|np|numpy|optax)(\.\w+)+[ \t]*=(?!=)", re.M)


def stub_source(source: str) -> str:
    """The release version of a solution cell (what a blank submission contains)."""
    return _STUB.sub(lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()",
                     source)


def tampering_signs(solutions: dict[str, str]) -> list[str]:
    """``["01_grad_x: sys.modules", ...]``: names a solution has no business using."""
    found = []
    for gid, source in solutions.items():
        hits = sorted({m.group(0) for m in _TAMPERING.finditer(source)})
        if hits:
            found.append(f"{gid}: {', '.join(hits)}")
    return found


def _tests_of_solution(nb: dict) -> dict[int, list[str]]:
    """Cell index of each solution cell -> the test cells that grade it."""
    cells = nb["cells"]
    tests = [(i, _trusted._meta(c)["grade_id"]) for i, c in enumerate(cells) if _trusted.is_test(c)]
    out = {}
    for i, cell in enumerate(cells):
        if _trusted.is_solution(cell):
            gid = _trusted._meta(cell)["grade_id"]
            named = [t for _, t in tests if t == f"test_{gid}"]
            following = [t for j, t in tests if j > i][:1]
            out[i] = named or following
    return out


@dataclasses.dataclass
class Incident:
    reason: str
    cell: int | None
    detail: str


def run_rebuilt(rebuilt: dict, spec: dict, limits: _sandbox.Limits, *,
                cache: Path | None = None, cache_writable: bool = False) -> dict:
    """Runs a rebuilt notebook in the sandbox until it completes; returns a bundle.

    The bundle holds the outputs of every rebuilt cell, the raw probe files and
    the incidents; judging happens afterwards (:func:`judge_bundle`).
    """
    started = time.monotonic()
    n = len(rebuilt["cells"])
    owners = _tests_of_solution(rebuilt)
    skipped: dict[int, str] = {}
    skipped_probes: set[str] = set()
    incidents: list[Incident] = []
    unanswered: dict[str, str] = {}
    runs, peak, capped = 0, None, False
    result = None
    deadline = started + 2 * limits.notebook_timeout
    while True:
        runs += 1
        nb = _trusted.sandbox_notebook(rebuilt, spec, skipped, skipped_probes)
        result = _sandbox.run_notebook(nb, limits=limits, collect=_trusted.probe_files(spec),
                                       cache=cache, cache_writable=cache_writable)
        peak = max(filter(None, [peak, result.peak_memory_mb]), default=None)
        capped = capped or result.output_capped
        if not result.failure:
            break
        cell = result.failed_cell
        text = MESSAGES.get(result.failure, result.detail).format(
            cell=limits.cell_timeout, memory=limits.memory_mb)
        incidents.append(Incident(result.failure, cell, result.detail))
        if (result.failure == "notebook_timeout" or cell is None or runs >= MAX_RUNS
                or time.monotonic() > deadline):
            break
        if cell >= n:
            test_id = nb["cells"][cell].get("metadata", {}).get(_trusted._PROBE_TAG)
            skipped_probes.add(test_id)
            unanswered[test_id] = format_failure(
                f"checking this exercise {text}",
                fix="make sure the function returns for every input the docstring allows")
        else:
            skipped[cell] = f"this cell {text}"
            for test_id in owners.get(cell, []):
                unanswered[test_id] = format_failure(
                    f"your solution cell {text}; it was not graded",
                    fix="run the notebook top to bottom in a fresh kernel before submitting")
    outputs = []
    executed = result.notebook if result is not None else None
    cells = executed.get("cells", []) if isinstance(executed, dict) else []
    for i in range(n):
        cell = cells[i] if i < len(cells) and isinstance(cells[i], dict) else {}
        outputs.append(cell.get("outputs", []) if isinstance(cell.get("outputs"), list) else [])
    return {
        "outputs": outputs,
        "files": {k: v.hex() for k, v in (result.files if result else {}).items()},
        "incidents": [dataclasses.asdict(i) for i in incidents],
        "unanswered": unanswered,
        "isolation": result.isolation if result else _sandbox.isolation(),
        "runs": runs,
        "seconds": time.monotonic() - started,
        "peak_memory_mb": peak,
        "output_capped": capped,
    }


def reference_check(spec: dict, files: dict[str, bytes]) -> None:
    """Raises unless the instructor's notebook answered every probe of the spec."""
    for test_id, probes in spec.items():
        results = _trusted.decode(files, test_id)
        if results is None or len(results) != len(probes):
            raise RuntimeError(f"the source notebook gave no probe results for {test_id}")
        for probe, res in zip(probes, results):
            if not res["ok"]:
                raise RuntimeError(f"the source notebook fails probe {probe.label!r} of "
                                   f"{test_id}: {res['error_type']}: {res['error']}")


def reference_results(source_nb: dict, spec: dict, limits: _sandbox.Limits) -> dict:
    """Runs the instructor's notebook with its probes; ``{test_id: [result, ...]}``."""
    rebuilt = _trusted.rebuild(source_nb, _trusted.submitted_solutions(source_nb), {})
    bundle = run_rebuilt(rebuilt, spec, limits)
    if bundle["incidents"]:
        raise RuntimeError(f"the source notebook does not run cleanly in the sandbox: "
                           f"{bundle['incidents']}")
    files = {k: bytes.fromhex(v) for k, v in bundle["files"].items()}
    reference_check(spec, files)
    return {test_id: _trusted.decode(files, test_id) for test_id in spec}


def judge_bundle(bundle: dict, spec: dict, reference: dict) -> dict[str, dict]:
    files = {k: bytes.fromhex(v) for k, v in bundle["files"].items()}
    verdicts = _trusted.judge(spec, files, reference, bundle["unanswered"])
    return {t: dataclasses.asdict(v) for t, v in verdicts.items()}


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:20]


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
