"""Facts read from a profiler trace file, and the check that a student's code wrote one.

``jax.profiler.trace(log_dir, create_perfetto_trace=True)`` writes
``log_dir/plugins/profile/<run>/perfetto_trace.json.gz``: gzip-compressed JSON in the
Chrome trace-event format, ``{"traceEvents": [...]}``. On the CPU backend (checked with
jax 0.12.0.1), XLA op executions are complete events (``"ph": "X"``) whose ``args``
carry ``hlo_module`` (``jit_step``), ``hlo_op`` and ``run_id`` (one id per execution
of the module); ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` adds an event
named ``name`` with ``args.step_num``. On a TPU (checked with jax 0.10.2 on a v5e) the
ops carry none of these: the device's process (``/device:TPU:0``) has a thread named
``XLA Modules`` with one complete event per execution, named after the module and its
fingerprint (``jit_step(1445...)``, ``args.run_id``), and a thread ``XLA Ops`` with the
ops. :func:`trace_facts` counts runs from either form.

:func:`trace_facts` derives facts from the file's *bytes*, never from the live
program. :func:`assert_profile_written` observes, in the student's process, only what
exists there: the path the function returned, the trace files under the log folder
(in-process facts: a file system the grader cannot see) and the file's bytes, capped
at :data:`MAX_TRACE_BYTES`, recorded as they are (a uint8 array). The trace is parsed
by the pure explain function, in the grader's process when grading (decompression
capped at :data:`MAX_TRACE_JSON` bytes): no parse done next to the student's code is
trusted.
"""
from __future__ import annotations

import glob
import json
import os
import zlib
from typing import Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import describe_value, format_failure

TRACE_FILE = "perfetto_trace.json.gz"
MAX_TRACE_BYTES = 8 << 20    # compressed, as recorded (the grader's wire allows 64 MiB)
MAX_TRACE_JSON = 64 << 20    # decompressed, as parsed


def _gunzip(data: bytes, limit: int = MAX_TRACE_JSON) -> bytes:
    """Decompresses gzip bytes, refusing more than ``limit`` bytes of output (a small
    file can inflate to gigabytes)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflate.decompress(data, limit)
    if inflate.unconsumed_tail:
        raise ValueError(f"the trace inflates to more than {limit >> 20} MiB")
    return out


def read_trace_events(data: bytes) -> list[dict]:
    """The events of a trace file's bytes (gzip-compressed or plain JSON).

    >>> read_trace_events(b'{"traceEvents": [{"ph": "X", "name": "a"}]}')
    [{'ph': 'X', 'name': 'a'}]
    """
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data)
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
    device_runs: dict[str, int] = {}
    steps: dict[str, list] = {}
    def start(e):
        ts = e.get("ts", 0)
        return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0

    events = read_trace_events(data)
    module_threads = {(e.get("pid"), e.get("tid")) for e in events
                      if e.get("ph") == "M" and e.get("name") == "thread_name"
                      and (e.get("args") or {}).get("name") == "XLA Modules"}
    for e in sorted(events, key=start):
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        if "hlo_module" in args and "hlo_op" in args:
            runs.setdefault(str(args["hlo_module"]), set()).add(str(args.get("run_id")))
        elif (e.get("pid"), e.get("tid")) in module_threads:
            module = str(e.get("name", "")).split("(", 1)[0]
            device_runs[module] = device_runs.get(module, 0) + 1
        elif "step_num" in args:
            try:
                num = int(args["step_num"])
            except (TypeError, ValueError):
                continue
            steps.setdefault(str(e.get("name")), []).append(num)
    counted = {m: len(ids) for m, ids in runs.items()}
    for module, n in device_runs.items():  # a device's own record of its runs
        counted[module] = max(n, counted.get(module, 0))
    return {"runs": dict(sorted(counted.items())), "steps": steps}


def collect_profile(fn: Callable, args: Sequence, *, log_dir: str) -> dict:
    """Runs the student's ``fn(*args)``, which returns ``(result, path)``; reads the file.

    Returns ``{"path_ok": bool, "path": str, "trace": bytes or None, "newest": bool,
    "found": [paths], "result": ...}``, or ``{"problem": text}``. ``newest`` says the
    path is the most recent trace file under ``log_dir``; ``trace`` holds the file's
    first :data:`MAX_TRACE_BYTES` bytes (``"truncated"`` says there were more).
    """
    import jax

    # Work still queued from before (computing the inputs) must not land in the trace.
    jax.block_until_ready([a for a in jax.tree.leaves(args) if isinstance(a, jax.Array)])
    out = call(fn, tuple(args))
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
    data, truncated = None, False
    if os.path.isfile(path) and inside and os.path.basename(path) == TRACE_FILE:
        with open(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
        truncated, data = len(data) > MAX_TRACE_BYTES, data[:MAX_TRACE_BYTES]
    return {"path_ok": data is not None, "path": path[:1000], "trace": data,
            "truncated": truncated, "result": result,
            "found": [os.path.relpath(p, log_dir)[:300] for p in files][:20],
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
    kept: dict = {}

    def observe() -> dict:
        seen = collect_profile(fn, args, log_dir=log_dir)
        kept["result"] = seen.pop("result", None)
        trace = seen.pop("trace", None)
        # The bytes travel as they are, as an array; the facts beside them as text
        # (a JSON document inside the tree: paths are strings of any characters).
        return {"facts": json.dumps(seen),
                "trace": np.frombuffer(trace if trace is not None else b"", np.uint8)}

    run(Check("profile_written", label, observe=observe,
              params=dict(module=module, runs=runs, annotation=annotation, section=section,
                          hint=hint, fix=fix)))
    return kept.get("result")


@explainer("profile_written")
def _explain(observed, expected, *, label: str, module: str, runs: int, annotation: str,
             section=None, hint=None, fix=None, **_ignored) -> str | None:
    del expected
    leaves = {leaf.path: leaf for leaf in observed.leaves}
    facts_leaf, trace_leaf = leaves.get("['facts']"), leaves.get("['trace']")
    if facts_leaf is None or facts_leaf.kind != "text" or trace_leaf is None or \
            trace_leaf.kind != "array" or trace_leaf.dtype != "uint8":
        raise ValueError("a profile observation without its facts and trace")
    seen = json.loads(facts_leaf.value)
    if not isinstance(seen, dict):
        raise ValueError("profile facts that are not a JSON object")
    facts = None
    if not seen.get("problem") and seen.get("path_ok"):
        if seen.get("truncated"):
            seen = {"problem": f"wrote a trace file larger than {MAX_TRACE_BYTES >> 20} MiB: "
                               "trace a few steps, not a whole run"}
        else:
            try:
                facts = trace_facts(np.asarray(trace_leaf.value, np.uint8).tobytes())
            except (ValueError, TypeError, KeyError, AttributeError, OSError, EOFError,
                    zlib.error, RecursionError) as err:
                seen = {"problem": f"wrote a trace file that is not gzip JSON ({err})"[:400]}
    return explain_profile(seen, facts, module=module, runs=int(runs), annotation=annotation,
                           name=label, section=section, hint=hint, fix=fix)
