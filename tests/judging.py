"""Running a check as the grader's sandboxes do, and judging it as the grader does,
for the unit tests of the check modules."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def recorded(role):
    """The records a check writes in a grading sandbox of this role."""
    from autograder.core import check as _check

    saved = dict(_check._state)
    _check.configure(role)
    _check._state["records"] = []
    try:
        yield _check._state["records"]
    finally:
        _check._state.clear()
        _check._state.update(saved)


def judge_programs(ref_records, student_records):
    """What the grader does: derive every program from its bytes (the reference's inputs
    and params for both sides), then judge the student's records against the reference's."""
    from autograder.programs import artifacts as _artifacts
    from autograder.core import check as _check, wire as _wire
    from grader.judge import judge_cell

    ref = _wire.loads(*_wire.dumps(_wire.CellResult("t", tuple(ref_records))))
    student = _wire.loads(*_wire.dumps(_wire.CellResult("t", tuple(student_records))))
    derived, ref_derived = {}, {}
    for i, (r, s) in enumerate(zip(ref.records, student.records)):
        if r.observed.kind != "artifact" or s.observed.kind != "artifact":
            continue
        trusted = _wire.Observation("artifact", artifacts=s.observed.artifacts,
                                    inputs=r.observed.inputs)
        derived[f"t/{i}"] = _artifacts.derive(trusted, r.params)
        ref_derived[f"t/{i}"] = _artifacts.derive(r.observed, r.params)
        if r.expected is not None:
            ref_derived[f"t/{i}/expected"] = _artifacts.derive(r.expected, r.params)
    assert _check.mode() == "kernel"
    return judge_cell(ref, student, derived=derived, reference_derived=ref_derived)
