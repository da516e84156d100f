"""Facts read from a profiler trace file, and the check that a student's code wrote one.

``jax.profiler.trace(log_dir, create_perfetto_trace=True)`` writes
``log_dir/plugins/profile/<run>/perfetto_trace.json.gz``: gzip-compressed JSON in the
Chrome trace-event format, ``{"traceEvents": [...]}``. On the CPU backend (checked with
jax 0.12.0.1), XLA op executions are complete events (``"ph": "X"``) whose ``args``
carry ``hlo_module`` (``jit_step``), ``hlo_op`` and ``run_id`` (one id per execution
of the module); ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` adds an event
named ``name`` with ``args.step_num``.

:func:`trace_facts` derives facts from the file's *bytes*, never from the live
program, so the trusted grader can compute them outside the student's process from
the file the student's code wrote.
"""
from __future__ import annotations

import glob
import gzip
import json
import os
from typing import Callable, Sequence

from autograder._feedback import CheckFailure, describe_value, format_failure
from autograder._numeric import call_student
from autograder._quiet import report_captured

TRACE_FILE = "perfetto_trace.json.gz"
MAX_TRACE_BYTES = 50_000_000


def read_trace_events(data: bytes) -> list[dict]:
    """The events of a trace file's bytes (gzip-compressed or plain JSON).

    >>> read_trace_events(b'{"traceEvents": [{"ph": "X", "name": "a"}]}')
    [{'ph': 'X', 'name': 'a'}]
    """
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data.decode("utf-8"))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return [e for e in events if isinstance(e, dict)]


def trace_facts(data: bytes) -> dict:
    """How many times each XLA module ran, and the step annotations, from trace bytes.

    Returns ``{"runs": {module: executions}, "steps": {annotation: [step_num, ...]}}``;
    step numbers are ints, in the order of their start times.

    >>> events = [{"ph": "X", "ts": 5, "dur": 1, "name": "add",
    ...            "args": {"hlo_module": "jit_step", "hlo_op": "add", "run_id": "7"}},
    ...           {"ph": "X", "ts": 1, "dur": 9, "name": "train", "args": {"step_num": "0"}}]
    >>> trace_facts(json.dumps({"traceEvents": events}).encode())
    {'runs': {'jit_step': 1}, 'steps': {'train': [0]}}
    """
    runs: dict[str, set] = {}
    steps: dict[str, list] = {}
    for e in sorted(read_trace_events(data), key=lambda e: e.get("ts", 0)):
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        if "hlo_module" in args and "hlo_op" in args:
            runs.setdefault(str(args["hlo_module"]), set()).add(str(args.get("run_id")))
        elif "step_num" in args:
            try:
                num = int(args["step_num"])
            except (TypeError, ValueError):
                continue
            steps.setdefault(str(e.get("name")), []).append(num)
    return {"runs": {m: len(ids) for m, ids in sorted(runs.items())}, "steps": steps}


def collect_profile(fn: Callable, args: Sequence, *, log_dir: str) -> dict:
    """Runs the student's ``fn(*args)``, which returns ``(result, path)``; reads the file.

    Returns plain data: ``{"path_ok": bool, "path": str, "trace": bytes or None,
    "newest": bool, "result": ...}``, or ``{"problem": text}``. ``newest`` says the
    path is the most recent trace file under ``log_dir``.
    """
    import jax

    label = f"{getattr(fn, '__name__', 'fn')}(...)"
    # Work still queued from before (computing the inputs) must not land in the trace.
    jax.block_until_ready([a for a in jax.tree.leaves(args) if isinstance(a, jax.Array)])
    out, captured = call_student(fn, tuple(args), name=label)
    report_captured(captured, label)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return {"problem": f"returned {describe_value(out)}, not (state, path)"}
    result, path = out
    path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if path is None:
        return {"problem": f"returned ({describe_value(result)}, {describe_value(out[1])}): "
                           "the second element is not a path"}
    real_dir = os.path.realpath(log_dir)
    inside = os.path.realpath(path).startswith(real_dir + os.sep)
    files = sorted(glob.glob(os.path.join(log_dir, "plugins", "profile", "*", TRACE_FILE)),
                   key=os.path.getmtime)
    data = None
    if os.path.isfile(path) and inside and os.path.basename(path) == TRACE_FILE:
        with open(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES)
    return {"path_ok": data is not None, "path": path, "trace": data, "result": result,
            "found": [os.path.relpath(p, log_dir) for p in files],
            "newest": bool(files) and os.path.realpath(files[-1]) == os.path.realpath(path)}


def explain_profile(observed: dict, facts: dict | None, *, module: str, runs: int,
                    annotation: str, name: str, section: str | None = None,
                    hint: str | None = None, fix: str | None = None) -> str | None:
    """Judges a written profile from :func:`trace_facts` of its bytes.

    The file must be the newest ``perfetto_trace.json.gz`` under the log folder; the
    module must have run exactly ``runs`` times inside the trace; the annotation must
    have marked steps ``0 .. runs-1``.

    >>> ok = {"path_ok": True, "newest": True, "path": "p", "found": ["p"]}
    >>> facts = {"runs": {"jit_step": 3}, "steps": {"train": [0, 1, 2]}}
    >>> explain_profile(ok, facts, module="jit_step", runs=3, annotation="train",
    ...                 name="profile") is None
    True
    >>> print(explain_profile(ok, {**facts, "runs": {"jit_step": 1}}, module="jit_step",
    ...                       runs=3, annotation="train", name="profile"))  # doctest: +ELLIPSIS
    the trace written by profile holds 1 runs of jit_step, not 3
      expected: 3 executions of jit_step (one per batch) inside the trace
      got:      1 (all modules: {'jit_step': 1})
      likely cause: the trace stopped before the device finished: ...
    ...
    """
    if observed.get("problem"):
        return format_failure(f"{name} {observed['problem']}",
                              fix="return (state, path) with the path of the "
                                  "perfetto_trace.json.gz file", section=section)
    if not observed["path_ok"] or not observed["newest"]:
        return format_failure(
            f"{name} did not return the trace file it wrote",
            expected=f"the newest .../plugins/profile/<run>/{TRACE_FILE} inside the log "
                     "folder it was given",
            got=f"{observed['path']!r} (trace files found: {observed['found'] or 'none'})",
            cause=hint or ("the trace was written without create_perfetto_trace=True, to "
                           "another folder, or the path returned is the folder, not the file"),
            fix=fix or ("use jax.profiler.trace(log_dir, create_perfetto_trace=True) and "
                        f"return the {TRACE_FILE} that glob finds under log_dir"),
            section=section)
    got_runs = facts["runs"].get(module, 0)
    if got_runs != runs:
        if got_runs < runs:
            cause = ("the trace stopped before the device finished: calls return at once "
                     "(asynchronous dispatch), so runs still queued when the `with` block "
                     "ends are not recorded")
            default_fix = "call jax.block_until_ready(state) inside the `with` block, at its end"
        else:
            cause = ("the step ran more often inside the trace than once per batch (a warm-up "
                     "call inside it?)")
            default_fix = ("warm up (compile) before entering the trace, and run one step per "
                           "batch inside")
        return format_failure(
            f"the trace written by {name} holds {got_runs} runs of {module}, not {runs}",
            expected=f"{runs} executions of {module} (one per batch) inside the trace",
            got=f"{got_runs} (all modules: {facts['runs']})", cause=hint or cause,
            fix=fix or default_fix, section=section)
    steps = facts["steps"].get(annotation, [])
    if sorted(steps) != list(range(runs)):
        return format_failure(
            f"the trace written by {name} does not mark each step with {annotation!r}",
            expected=f"{annotation!r} annotations with step_num 0 .. {runs - 1}",
            got=f"step numbers {steps} (annotations found: {sorted(facts['steps']) or 'none'})",
            cause=hint or "the step annotation is missing, named differently, or its "
                          "step_num is not the step's index",
            fix=fix or (f"wrap each step in `with jax.profiler.StepTraceAnnotation("
                        f"{annotation!r}, step_num=i):`"),
            section=section)
    return None


def assert_profile_written(fn: Callable, args: Sequence, *, log_dir: str, module: str,
                           runs: int, annotation: str = "train",
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None, name: str | None = None):
    """Runs ``fn(*args)`` (it returns ``(result, trace path)``) and judges the trace file.

    Returns:
      The first element ``fn`` returned, for value checks.

    >>> import glob, os, tempfile, jax, jax.numpy as jnp
    >>> @jax.jit
    ... def step(w, b):
    ...     return w + b
    >>> def profile(step, w, batches, log_dir):
    ...     with jax.profiler.trace(log_dir, create_perfetto_trace=True):
    ...         for i, b in enumerate(batches):
    ...             with jax.profiler.StepTraceAnnotation("train", step_num=i):
    ...                 w = step(w, b)
    ...         jax.block_until_ready(w)
    ...     return w, glob.glob(os.path.join(log_dir, "plugins", "profile", "*",
    ...                                      "perfetto_trace.json.gz"))[0]
    >>> log_dir = tempfile.mkdtemp()
    >>> assert_profile_written(profile, (step, jnp.zeros(2), [jnp.ones(2)] * 2, log_dir),
    ...                        log_dir=log_dir, module="jit_step", runs=2)
    Array([2., 2.], dtype=float32)
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    observed = collect_profile(fn, args, log_dir=log_dir)
    facts = None
    if observed.get("trace") is not None:
        try:
            facts = trace_facts(observed["trace"])
        except (ValueError, OSError, EOFError, UnicodeDecodeError) as err:
            observed = {"problem": f"wrote a trace file that is not gzip JSON ({err})"}
    message = explain_profile(observed, facts, module=module, runs=runs,
                              annotation=annotation, name=label, section=section,
                              hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")
    return observed["result"]
