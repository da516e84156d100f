"""One definition, three places: how every check observes, expects and explains.

A check is three parts (chex's collect-then-judge, split so it can cross a process
boundary):

- ``observe``: runs the student's code and returns what it saw (a value, facts, or an
  exported program);
- ``expect``: runs the reference side (the instructor's reference or a closed form);
- ``explain``: a pure function of the two, as typed plain data
  (:mod:`autograder.core.wire`), returning the teaching message or None.

The test cell that calls the check runs in three places, and :func:`run` does what
each needs:

- **kernel** (a student's JupyterLab, ``nbgrader validate``, plain ``nbgrader
  autograde``): expect, observe, explain, and raise :class:`CheckFailure` at once;
- **reference** (the grader's run of the instructor's notebook, sandboxed): expect and
  observe, record both with the judging parameters;
- **student** (the grader's run of a submission, sandboxed): observe only and record;
  the expected side is never evaluated next to student code. The grader pairs each
  record with the reference's and calls the same ``explain`` outside the sandbox.

So a student's test cell and the trusted grade always agree, message included.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from autograder.core import wire as _wire
from autograder.core.feedback import CheckFailure, format_failure, without_library_frames
from autograder.core.quiet import quiet, report_captured

KERNEL, REFERENCE, STUDENT = "kernel", "reference", "student"
EXPLAINERS: dict[str, Callable[..., str | None]] = {}
# Kinds whose explainer is also asked about an error the student's code raised (it
# knows what the error means for this check; None falls back to explain_error).
EXPLAINS_ERRORS: set[str] = set()

_state = {"mode": KERNEL, "out": "probe", "records": None, "test_id": None, "rubric": {}}
# What puts back process-wide state a student's code may leave behind (JAX's
# configuration flags), run whenever a test cell's code has run: see at_test_cell_end.
_CELL_END: list[Callable[[], None]] = []


def mode() -> str:
    """``"kernel"``, ``"reference"`` or ``"student"``."""
    return _state["mode"]


def configure(role: str, out: str = "probe", text_limit: int | None = None,
              seed: int | None = None) -> None:
    """Switches this process to recording (called by the grader's sandbox notebook).

    ``text_limit`` is the grader's ``c.Grading.text_limit``: the most characters of any
    string recorded; ``seed`` its ``c.Grading.seed``, for inputs drawn with
    :func:`autograder.draw`.
    """
    if role not in (KERNEL, REFERENCE, STUDENT):
        raise ValueError(f"unknown role {role!r}")
    _state.update(mode=role, out=out)
    if seed is not None:
        from autograder.core import draws as _draws

        _draws.set_seed(seed)
    if text_limit is not None:
        _wire.MAX_TEXT = int(text_limit)


def explainer(kind: str, *, errors: bool = False):
    """Registers ``explain(observed, expected, *, label, **params)`` for a check kind.

    With ``errors=True`` it is also called when the student's code raised (``observed``
    is then an ``"error"`` observation): it may return a message that says what that
    error means for this check, or None for the generic one (:func:`explain_error`).
    """
    def register(fn):
        old = EXPLAINERS.get(kind)
        # The same function imported twice (doctest collection) is fine; two are not.
        if old is not None and old.__qualname__ != fn.__qualname__:
            raise ValueError(f"two explainers for check kind {kind!r}")
        EXPLAINERS[kind] = fn
        if errors:
            EXPLAINS_ERRORS.add(kind)
        return fn
    return register


@dataclasses.dataclass
class Check:
    """A check about to run. ``observe``/``expect`` return raw values; ``observe_as`` and
    ``expect_as`` say how to record them: ``"tree"`` (a pytree), ``"facts"`` (JSON) or
    ``"artifact"`` (an :class:`autograder.programs.artifacts.Exported` program)."""

    kind: str
    label: str
    observe: Callable[[], Any]
    expect: Callable[[], Any] | None = None
    params: dict = dataclasses.field(default_factory=dict)
    observe_as: str = "tree"
    expect_as: str = "tree"
    returns: Callable[[Any], Any] | None = None


# How each kind of observation is recorded, and what the kernel derives from a recorded
# one before judging it. Kinds beyond trees and facts are registered by the modules that
# make them (autograder.programs.artifacts: "artifact", an exported program), so this core
# imports no layer above it. Importing any autograder module imports the package,
# whose __init__ imports every check module: all kinds and explainers are registered
# before a check runs or a record is judged.
OBSERVERS: dict[str, Callable[[Any], _wire.Observation]] = {
    "tree": _wire.observe_tree, "facts": _wire.observe_facts}
DERIVERS: dict[str, Callable[[_wire.Observation, dict], _wire.Observation]] = {}


def observation_kind(name: str, observe: Callable[[Any], _wire.Observation],
                     derive: Callable[[_wire.Observation, dict], _wire.Observation]
                     | None = None) -> None:
    """Registers how a check's value is recorded as ``name`` (``observe_as``), and what
    the student's kernel derives from such a record before judging it (``derive``)."""
    OBSERVERS[name] = observe
    if derive is not None:
        DERIVERS[name] = derive


def _encode(value: Any, as_: str) -> _wire.Observation:
    if as_ not in OBSERVERS:
        raise ValueError(f"unknown observation kind {as_!r}")
    return OBSERVERS[as_](value)


def _derived(obs: _wire.Observation, params: dict) -> _wire.Observation:
    derive = DERIVERS.get(obs.kind)
    return derive(obs, params) if derive is not None else obs


def _observe(check: Check):
    """Runs the student side under :func:`quiet`; errors become observations."""
    with quiet() as captured:
        try:
            raw = check.observe()
            return raw, _encode(raw, check.observe_as), None, captured
        except Exception as err:  # noqa: BLE001 - any student error is an observation
            return None, _wire.observe_error(err), err, captured


def explain(kind: str, observed: _wire.Observation, expected: _wire.Observation | None,
            label: str, params: dict) -> str | None:
    """The verdict on one record: a teaching message, or None when it passes."""
    section = params.get("section")
    if observed.kind == "error":
        if kind in EXPLAINS_ERRORS:
            try:
                message = EXPLAINERS[kind](observed, expected, label=label, **params)
            except Exception:  # noqa: BLE001 - fall back to the generic message
                message = None
            if message:
                return message
        return explain_error(label, observed, section=section, fix=params.get("error_fix"))
    if kind not in EXPLAINERS:
        return format_failure(f"{label}: the grader has no judgement for a {kind!r} check")
    try:
        return EXPLAINERS[kind](observed, expected, label=label, **params)
    except Exception as err:  # noqa: BLE001 - facts from a sandbox may be anything
        return format_failure(f"{label}: the grader could not read this result "
                              f"({type(err).__name__}: {str(err)[:200]})", section=section)


def explain_error(label: str, observed: _wire.Observation, *, section: str | None = None,
                  fix: str | None = None) -> str:
    """The message for a student's code that raised instead of answering.

    >>> obs = _wire.observe_error(ValueError("shapes (3,) and (4,) differ"))
    >>> print(explain_error("f(x=f32[3])", obs, section="1.2 Shapes"))
    f(x=f32[3]) raised ValueError: shapes (3,) and (4,) differ
      likely cause: the traceback above points at the line in your code that failed
      fix: run the exercise's 'try it' cell to reproduce the error, then fix that line
      reread: section 1.2 Shapes
    """
    name = label.split("(")[0] or label
    if observed.error_type == "NotAFunction":
        return format_failure(f"{name} is not a function", expected="a function",
                              got=observed.error, section=section,
                              fix="define it with `def` in the exercise's solution cell")
    if observed.error_type == "ProgramNotExportable":  # autograder.programs.artifacts
        return format_failure(
            f"the program of {label} cannot be judged: it holds a host callback",
            got=observed.error.splitlines()[0] if observed.error else None,
            cause="jax.debug.print, jax.debug.callback, jax.pure_callback or io_callback "
                  "inside the graded function: jax.export cannot serialize a call back "
                  "into Python, so the grader cannot read the compiled program",
            fix="remove prints and callbacks from the graded function (print outside it, "
                "on its results)", section=section)
    if observed.not_implemented:
        return format_failure(f"{name} is not implemented yet", section=section,
                              fix="replace `raise NotImplementedError()` in its solution cell "
                                  "with your code")
    first = observed.error.splitlines()[0] if observed.error else ""
    return format_failure(
        f"{label} raised {observed.error_type}" + (f": {first}" if first else ""),
        cause="the traceback above points at the line in your code that failed",
        fix=fix or "run the exercise's 'try it' cell to reproduce the error, then fix that line",
        section=section)


def run(check: Check, *, with_captured: bool = False) -> Any:
    """Runs a check as this process's role requires; returns the observed raw value
    (``(value, captured)`` with ``with_captured``: what the student's code printed to
    stderr or warned).

    In the kernel a failing check raises :class:`CheckFailure` (chained to the student's
    own exception, so the traceback shows their line). In a grading sandbox nothing is
    raised: the record is kept, and ``None`` stands in for a value that could not be
    computed.
    """
    __tracebackhide__ = True
    role = _state["mode"]
    expected = None
    if check.expect is not None and role != STUDENT:
        # The reference runs first: a function that mutates its inputs cannot change it.
        expected = _encode(check.expect(), check.expect_as)
    raw, observed, err, captured = _observe(check)
    result = check.returns(raw) if (check.returns and err is None) else raw
    if role == KERNEL:
        observed = _derived(_wire.roundtrip(observed), check.params)
        if expected is not None:
            expected = _derived(_wire.roundtrip(expected), check.params)
        message = explain(check.kind, observed, expected, check.label, check.params)
        if message:
            if err is None or observed.not_implemented:
                raise CheckFailure(message) from None
            # Chained, so the traceback still shows the student's own failing line (and
            # none of this library's frames).
            err.__traceback__ = without_library_frames(err.__traceback__)
            raise CheckFailure(message) from err
        report_captured(captured, check.label)
        return (result, captured) if with_captured else result
    _state_records().append(_wire.Record(
        check.kind, check.label, dict(check.params), observed,
        expected if role == REFERENCE else None,
        requirements=_state["rubric"].get(_public_check(), ()) if role == REFERENCE else ()))
    return (result, captured) if with_captured else result


def _public_check() -> str:
    """The name of the ``autograder`` function the test cell called (the outermost frame
    of this package), which the rubric binds to requirements."""
    import sys

    frame, name = sys._getframe(2), ""
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("autograder"):
        name = frame.f_code.co_name
        frame = frame.f_back
    return name


def _state_records() -> list:
    if _state["records"] is None:
        # A check outside a graded test cell (a lesson cell) in a grading run: kept
        # nowhere, judged by nobody.
        _state["records"] = []
    return _state["records"]


def at_test_cell_end(fn: Callable[[], None]) -> None:
    """Registers ``fn`` (once) to run whenever a test cell's code has run, pass or fail.

    A check module whose checks put back process-wide state (JAX's configuration
    flags) registers how: then what one exercise's code leaves behind cannot change
    the next exercise's, in a grading sandbox and in the grader's candidate harness,
    where one notebook cell runs a test cell twice (IPython's ``post_run_cell`` covers
    a student's own kernel).
    """
    if fn not in _CELL_END:
        _CELL_END.append(fn)


def _test_cell_ended() -> None:
    for fn in list(_CELL_END):
        try:
            fn()
        except Exception:  # noqa: BLE001 - putting state back must not stop grading
            pass


def run_test_cell(test_id: str, source: str, namespace: dict, hidden: str = "",
                  seed: int | None = None) -> None:
    """Runs a test cell's code in a private namespace and writes its records.

    The namespace is a copy of the notebook's: what the test defines (inputs,
    references) never becomes a global the student's functions could look up.
    ``source`` is the visible part, ``hidden`` the hidden tests, run after it in the
    same scope; the records say where the hidden ones start, so that the grader
    never shows the student's own text (an exception's message, the reason the test
    stopped) from them. ``seed`` (``c.Grading.seed``) is set for this cell's draws
    only, and the cell's source is dropped from the line cache afterwards: what the
    kernel keeps between cells holds neither.
    """
    from autograder.core import draws as _draws, rubric as _rubric

    _forget_test_sources()
    _state.update(records=[], test_id=test_id, rubric=_rubric.by_check(source))
    scope = dict(namespace)
    stopped, hidden_from = "", None
    if seed is not None:
        _draws.set_seed(seed)
    try:
        exec(compile(source, f"<test {test_id}>", "exec"), scope)  # noqa: S102 - the instructor's test
        if hidden:
            hidden_from = len(_state["records"])
            exec(compile(hidden, f"<test {test_id}>", "exec"), scope)  # noqa: S102
    except Exception as err:  # noqa: BLE001 - a stopped test is part of the result
        stopped = f"{type(err).__name__}: {str(err).strip()[:500]}"
    finally:
        _test_cell_ended()
        if seed is not None:
            _draws.set_seed(None)
        _forget_test_sources()
    records, _state["records"], _state["rubric"] = _state["records"], None, {}
    if hidden and hidden_from is None:
        hidden_from = len(records)  # stopped in the visible part: every record is visible
    raw_json, raw_npz = _wire.dumps(_wire.CellResult(test_id, tuple(records), stopped,
                                                     hidden_from))
    os.makedirs(_state["out"], exist_ok=True)
    with open(os.path.join(_state["out"], f"{test_id}.npz"), "wb") as f:
        f.write(raw_npz)
    with open(os.path.join(_state["out"], f"{test_id}.json"), "wb") as f:
        f.write(raw_json)


_TEST_CALL = "_jaxcourse_test("


def _forget_test_sources() -> None:
    """Drops the running test cell's source from where the kernel keeps a cell's text:
    IPython's line cache (every cell, history or not), the current execution's info
    (``displayhook.exec_result``, later ``last_execution_result``) and ipykernel's
    parent message. Called as the test starts and when it ends, so that no plain
    attribute a solution can reach holds it; what stays reachable (frames, the
    process's memory) needs what the tampering policy holds or gives nothing back
    (the feedback carries none of it: ``grader.nbgrader_plugins``)."""
    import linecache

    for name, entry in list(linecache.cache.items()):
        lines = entry[2] if isinstance(entry, tuple) and len(entry) > 2 else None
        if isinstance(lines, list) and any(_TEST_CALL in line for line in lines[:3]):
            linecache.cache.pop(name, None)
    try:
        from IPython import get_ipython

        shell = get_ipython()
        info = getattr(getattr(getattr(shell, "displayhook", None), "exec_result", None),
                       "info", None)
        if info is not None and _TEST_CALL in str(getattr(info, "raw_cell", "")):
            info.raw_cell = info.transformed_cell = ""
        kernel = getattr(shell, "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None else None
        content = parent.get("content") if isinstance(parent, dict) else None
        if isinstance(content, dict) and _TEST_CALL in str(content.get("code", "")):
            content["code"] = ""
    except Exception:  # noqa: BLE001 - outside IPython, or another IPython: nothing kept
        pass


class NotAFunction(TypeError):
    """What the student defined under an exercise's name is not callable."""


def call(fn, args=(), kwargs=None):
    """``observe`` for a call of a student's function (a non-function is an error)."""
    if not callable(fn):
        raise NotAFunction(type(fn).__name__ if fn is not None else "None")
    return fn(*args, **(kwargs or {}))


def run_candidate(exercise: str, index: int, source: str, test_id: str, test_source: str,
                  namespace: dict, out: str = "candidates", kernel: bool = True) -> None:
    """Grades one candidate answer of an exercise in this kernel, both ways.

    For the grader's mutation and variant tools: the candidate's solution source runs
    in a copy of the notebook's namespace (twice, so the two runs share no compiled
    functions), then the exercise's test cell runs on it as the student's own kernel
    runs it (the verdict goes to ``<out>/<exercise>/<index>/kernel.json``) and as the
    grading sandbox runs it (records, judged outside by the grader). ``kernel=False``
    skips the first (mutants are judged by the grader only).
    """
    import json

    folder = os.path.join(out, exercise, str(index))
    os.makedirs(folder, exist_ok=True)
    role, records, out_before = _state["mode"], _state["records"], _state["out"]
    verdict = {"passed": True, "message": ""}
    try:
        _state["mode"] = KERNEL
        scope = dict(namespace)
        try:
            if kernel:
                exec(compile(source, f"<candidate {exercise} {index}>", "exec"), scope)  # noqa: S102
                exec(compile(test_source, f"<test {test_id}>", "exec"), dict(scope))  # noqa: S102
            else:
                verdict = {"passed": None, "message": "not run"}
        except CheckFailure as err:
            verdict = {"passed": False, "message": str(err)}
        except Exception as err:  # noqa: BLE001 - any error fails the test cell
            verdict = {"passed": False, "message": f"{type(err).__name__}: {err}"[:2000]}
        finally:
            _test_cell_ended()  # the grader's run below starts as a fresh cell would
        with open(os.path.join(folder, "kernel.json"), "w") as f:
            json.dump(verdict, f)
        _state.update(mode=STUDENT, out=folder)
        scope = dict(namespace)
        try:
            exec(compile(source, f"<candidate {exercise} {index}>", "exec"), scope)  # noqa: S102
        except Exception:  # noqa: BLE001 - a broken solution cell: its test shows it
            pass
        run_test_cell(test_id, test_source, scope)
        # Judged both ways: a rerun of the notebook (after a later candidate hung or
        # crashed the kernel) leaves this one out.
        open(os.path.join(folder, "done"), "w").close()
    finally:
        _state.update(mode=role, records=records, out=out_before)
