"""Grading one submission: rebuild, run sandboxed (again if a cell hangs or crashes),
judge outside. The result is a bundle of plain data that nbgrader turns into grades.

A cell that hangs, crashes the kernel, floods output or exhausts memory does not
sink the notebook: the sandbox is killed, that cell is left out (a solution cell's
exercise scores 0 with the reason) and the notebook runs again, at most
``max_runs`` times (``c.Grading.max_runs``). Every such incident is kept: the submission is graded and listed
as needing attention with the reason code.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import time
from pathlib import Path

from autograder.core.feedback import format_failure
from grader import judge as _judge
from grader import notebook as _nb
from grader import sandbox as _sandbox
from grader.lessons import needed_cells

MESSAGES = {
    "timeout": "ran past the time limit of {cell:g} s per cell, so the grader stopped it",
    "out_of_memory": "used more than the memory limit of {memory} MiB",
    "kernel_died": "crashed the Python kernel (os._exit, a segfault, or a killed process)",
    "output_flood": "printed far more output than the limit allows",
}
@dataclasses.dataclass
class Incident:
    reason: str
    cell: int | None
    detail: str


def sandbox_notebook(rebuilt: dict, role: str, skipped: dict[int, str] | None = None,
                     skipped_tests: set[str] = frozenset(), *, text_limit: int = 100_000,
                     seed: int | None = None) -> dict:
    """What runs in the sandbox: the rebuilt notebook with its test cells recording.

    The first code cell (the locked setup) starts by switching the check library to
    ``role`` (``"student"``: record what the student's code produced; ``"reference"``:
    also what the references expect). Cell indices stay those of ``rebuilt``.
    Try-it cells and the lesson cells nothing graded depends on
    (:func:`grader.lessons.needed_cells`) are left out; ``skipped`` cells (a previous
    run hung or crashed there) and ``skipped_tests`` are replaced by a comment.
    """
    nb = copy.deepcopy(rebuilt)
    cells = nb["cells"]
    needed, _ = needed_cells(rebuilt)
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and index not in needed:
            cell["source"] = ""
        elif skipped and index in skipped:
            cell["source"] = f"# not run by the grader: {skipped[index]}\n"
        elif _nb.is_test(cell):
            test_id = _nb.meta(cell)["grade_id"]
            cell.setdefault("metadata", {})[_nb.TEST_TAG] = test_id
            visible, hidden = _nb.split_hidden(_nb.text(cell["source"]))
            cell["source"] = ("" if test_id in skipped_tests else
                              "from autograder.core.check import run_test_cell as _jaxcourse_test\n"
                              f"_jaxcourse_test({test_id!r}, {visible!r}, globals(), "
                              f"{hidden!r}, seed={seed!r})\n")
    # The whole check library is imported here, before any student code: the references
    # it captures at import (numpy functions, the jit type) are the real ones. The seed
    # is not: each test cell carries it for its own draws (sandbox.child runs test cells
    # outside the kernel's history).
    switch = ("import autograder, autograder.core.check\n"
              f"autograder.core.check.configure({role!r}, text_limit={int(text_limit)})\n")
    for cell in cells:
        if cell.get("cell_type") == "code":
            cell["source"] = switch + _nb.text(cell["source"])
            break
    return nb


def time_phases(executed, rebuilt: dict, started: float, ended: float) -> dict[str, float]:
    """Where a sandbox run's seconds went, from nbclient's timestamps of each cell:
    ``start`` (the sandbox, Python and the kernel, up to the first cell), ``setup`` (the
    first code cell: importing JAX and the check library), ``lessons``, ``solutions``
    (the student's cells), ``checks`` (test cells: the student's code under test, and
    the recording) and ``end`` (writing the results out, stopping). ``started`` and
    ``ended`` are ``time.time()`` around the run.

    Read from the executed notebook, which the student's kernel could rewrite: for
    ``make bench`` only, never for a grade. Cells without timestamps count nothing.

    >>> cells = [{"cell_type": "code", "metadata": {"execution": {
    ...     "iopub.execute_input": "2026-01-01T00:00:01Z",
    ...     "shell.execute_reply": "2026-01-01T00:00:03.5Z"}}}]
    >>> import datetime
    >>> t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    >>> time_phases({"cells": cells}, {"cells": cells}, t0, t0 + 4.0)
    {'start': 1.0, 'setup': 2.5, 'lessons': 0.0, 'solutions': 0.0, 'checks': 0.0, 'end': 0.5}
    """
    import datetime

    phases = dict.fromkeys(("start", "setup", "lessons", "solutions", "checks"), 0.0)
    cells = executed.get("cells") if isinstance(executed, dict) else None
    first_code = next((i for i, c in enumerate(rebuilt["cells"])
                       if c.get("cell_type") == "code"), None)
    first_input, last_reply = None, None
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        stamps = meta.get("execution") if isinstance(meta, dict) else None
        if i >= len(rebuilt["cells"]) or not isinstance(stamps, dict):
            continue
        try:
            begin = datetime.datetime.fromisoformat(stamps["iopub.execute_input"]).timestamp()
            end = datetime.datetime.fromisoformat(stamps["shell.execute_reply"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        source = rebuilt["cells"][i]
        kind = ("setup" if i == first_code else "checks" if _nb.is_test(source)
                else "solutions" if _nb.is_solution(source) else "lessons")
        phases[kind] += max(0.0, end - begin)
        first_input = begin if first_input is None else min(first_input, begin)
        last_reply = end if last_reply is None else max(last_reply, end)
    if first_input is not None:
        phases["start"] = max(0.0, first_input - started)
    phases["end"] = max(0.0, ended - (last_reply if last_reply is not None else started)
                        - (0.0 if last_reply is not None else phases["start"]))
    return {k: round(v, 3) for k, v in phases.items()}


def run_rebuilt(rebuilt: dict, limits: _sandbox.Limits, *, role: str = "student",
                cache: Path | None = None, cache_writable: bool = False, max_runs: int = 5,
                text_limit: int = 100_000, seed: int | None = None) -> dict:
    """Runs a rebuilt notebook in the sandbox until it completes; returns a bundle.

    The bundle holds the outputs of every rebuilt cell, the raw probe files and
    the incidents; judging happens afterwards (:func:`judge_bundle`).
    """
    started = time.monotonic()
    n = len(rebuilt["cells"])
    owners = _nb.tests_of_solution(rebuilt)
    tests = _nb.test_ids(rebuilt)
    test_cells = {_nb.meta(c)["grade_id"]: i for i, c in enumerate(rebuilt["cells"])
                  if _nb.is_test(c)}
    skipped: dict[int, str] = {}
    skipped_tests: set[str] = set()
    incidents: list[Incident] = []
    unanswered: dict[str, str] = {}
    runs, peak, capped = 0, None, False
    result = None
    deadline = started + 2 * limits.notebook_timeout
    rerun_s, phases = 0.0, {}
    while True:
        runs += 1
        nb = sandbox_notebook(rebuilt, role, skipped, skipped_tests, text_limit=text_limit,
                              seed=seed)
        wall = time.time()
        result = _sandbox.run_notebook(nb, limits=limits, collect=_nb.result_files(tests),
                                       cache=cache, cache_writable=cache_writable)
        rerun_s += sum(phases.values())  # the runs before this one
        phases = time_phases(result.notebook, rebuilt, wall, time.time())
        peak = max(filter(None, [peak, result.peak_memory_mb]), default=None)
        capped = capped or result.output_capped
        if not result.failure:
            break
        cell = result.failed_cell
        text = MESSAGES.get(result.failure, result.detail).format(
            cell=limits.cell_timeout, memory=limits.memory_mb)
        incidents.append(Incident(result.failure, cell, result.detail))
        if (result.failure == "notebook_timeout" or cell is None or runs >= max_runs
                or time.monotonic() > deadline):
            break
        test_id = nb["cells"][cell].get("metadata", {}).get(_nb.TEST_TAG)
        if test_id is not None and test_cells.get(test_id) == cell:
            skipped_tests.add(test_id)
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
        "phases": {**phases, "reruns": round(rerun_s, 3)},
        "peak_memory_mb": peak,
        "output_capped": capped,
    }


def reference_results(source_nb: dict, limits: _sandbox.Limits, *,
                      cache: Path | None = None, seed: int | None = None) -> dict:
    """Runs the instructor's notebook, recording observed and expected values.

    Returns ``{"files": {result file: hex}, "problems": [...]}``: ``problems`` lists
    every check the instructor's own solution fails (the exercise is then broken, and
    grading stops with that list).
    """
    rebuilt = _nb.rebuild(source_nb, _nb.submitted_solutions(source_nb), {})
    bundle = run_rebuilt(rebuilt, limits, role="reference", cache=cache,
                         cache_writable=cache is not None, seed=seed)
    if bundle["incidents"]:
        raise RuntimeError(f"the source notebook does not run cleanly in the sandbox: "
                           f"{bundle['incidents']}")
    return {"files": bundle["files"], "seed": seed}


def decode_all(files_hex: dict, tests: list[str]) -> dict:
    files = {k: bytes.fromhex(v) for k, v in files_hex.items()}
    return {t: _judge.decode(files, t) for t in tests}


def judge_bundle(bundle: dict, tests: list[str], reference: dict, *,
                 derived: dict | None = None, reference_derived: dict | None = None,
                 held: dict[str, str] | None = None) -> dict[str, dict]:
    """``{test id: verdict}`` of one run, against the decoded reference results."""
    files = {k: bytes.fromhex(v) for k, v in bundle["files"].items()}
    decoded = {t: _judge.decode_or_refusal(files, t) for t in tests}
    verdicts = {}
    for test_id in tests:
        if test_id in bundle["unanswered"]:
            verdict = _judge.Verdict(False, bundle["unanswered"][test_id])
        elif reference.get(test_id) is None:
            verdict = _judge.Verdict(False, f"no reference results for {test_id}")
        else:
            student, why = decoded[test_id]
            verdict = _judge.judge_cell(reference[test_id], student,
                                        derived=derived, reference_derived=reference_derived)
            if why:
                verdict = _judge.Verdict(False, format_failure(
                    "the grader refused the results this exercise's checks sent back",
                    cause=f"they are not what the grader writes: {why}",
                    fix="leave the grader's files in the probe/ folder alone"))
        if held and test_id in held:
            verdict = _judge.Verdict(False, held[test_id], held=True)
        elif not verdict.passed and bundle.get("added_names"):
            verdict = dataclasses.replace(verdict, message=_nb.note_added_names(
                verdict.message, bundle["added_names"]))
        verdicts[test_id] = dataclasses.asdict(verdict)
    return verdicts


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
