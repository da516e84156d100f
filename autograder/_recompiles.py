"""Recompilation checks for the debugging chapter: functions traced (and so compiled)
again, and the cache-miss explanations JAX logs.

Both read JAX's own explanations: with ``jax_explain_cache_misses`` on, every miss of
the tracing cache of a function of *yours* (JAX skips its own functions, so eager
``jnp`` operations never appear) is logged at WARNING level as ``TRACING CACHE MISS``,
naming the function, where it is defined, and what changed since the closest earlier
call. :func:`assert_no_retraces` runs a function (a whole training loop) and fails
when one of your functions was traced twice in one run: a short last batch, a new
learning rate baked in, a fresh closure, or a state whose pytree structure changes.
:func:`assert_cache_miss_report` compares the explanations a student's function
collected with the ones JAX logs, on what is stable (the ``*`` lines that say what
changed, and "never seen function"), not on call sites, object ids or file names.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import re
from typing import Callable, Iterator, Sequence

from autograder._compile import collect_compilations
from autograder._flags import collect_flags, restore_flags
from autograder._feedback import CheckFailure, call_signature, format_failure
from autograder._numeric import call_student
from autograder._quiet import quiet, report_captured

MISS_MARK = "TRACING CACHE MISS"
_DEFINED = re.compile(r"^\s*(?:for\s+)?(\S+)(?:\s+id=\d+)?\s+defined at (.+?)\s*$")


@contextlib.contextmanager
def _jax_log_records() -> Iterator[list[str]]:
    """Collects the messages of the 'jax' logger (WARNING and up) inside the block.

    Nothing reaches stderr: the records stop at this handler (no propagation).
    """
    logger = logging.getLogger("jax")
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())
    saved = (logger.propagate, logger.level)
    logger.addHandler(handler)
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate, _ = saved
        logger.setLevel(saved[1])


def describe_miss(message: str) -> dict:
    """``{"function": "name (defined at file:line)", "lines": [...]}`` for one explanation.

    >>> describe_miss("TRACING CACHE MISS at a.py:9 (run):\\n  never seen function:\\n"
    ...               "    step id=123 defined at /n/cell.py:4")
    {'function': 'step (defined at /n/cell.py:4)', 'lines': ['never seen function']}
    """
    function = "?"
    for line in message.splitlines()[1:]:
        m = _DEFINED.match(line)
        if m:
            function = f"{m.group(1)} (defined at {m.group(2)})"
            break
    return {"function": function, "lines": stable_miss_lines(message)}


# ------------------------------------------------------------- traced more than once

def collect_retraces(fn: Callable, calls: Sequence) -> list[dict]:
    """Runs ``fn`` on each argument tuple with ``jax_explain_cache_misses`` on.

    Returns one dict per call (plain data): ``{"misses": [describe_miss(...), ...],
    "compiles": n, "compiled": [names]}``, the tracing-cache misses of your functions,
    and the XLA compilations during that call (eager operations included, under their
    primitive's name).

    >>> import jax, jax.numpy as jnp
    >>> def double(v):
    ...     return v * 2
    >>> f = jax.jit(double)
    >>> runs = collect_retraces(f, [(jnp.ones(3),), (jnp.ones(3),)])
    >>> [len(r["misses"]) for r in runs], runs[0]["misses"][0]["lines"]
    ([1, 0], ['never seen function'])
    """
    import jax

    label = getattr(fn, "__name__", type(fn).__name__)
    out = []
    for i, args in enumerate(calls):
        with _jax_log_records() as messages, collect_compilations() as seen, \
                jax.explain_cache_misses(True):
            result, captured = call_student(fn, tuple(args),
                                            name=f"{label} (call {i + 1}: "
                                                 f"{call_signature(fn, tuple(args))})")
            with contextlib.suppress(Exception):
                jax.block_until_ready(result)
        report_captured(captured, label)
        out.append({"misses": [describe_miss(m) for m in messages if MISS_MARK in m],
                    "compiles": seen.count, "compiled": list(seen.names)})
    return out


_WHY = (  # (text in an explanation, cause, fix)
    ("never seen function", "a new function object on every step: jax.jit of a lambda, "
     "a nested def or a functools.partial created inside the loop",
     "create the jitted function once, before the loop (or at top level)"),
    ("weak_type", "a Python number and an array take turns as the same argument (a "
     "Python float is weakly typed)", "pass the same kind of value every step"),
    ("different input types", "a new input shape or dtype: the last batch is shorter "
     "than the others", "pad every batch to one shape and mask the padding out of the loss"),
    ("different input pytree", "the pytree structure of an input changes: a state that "
     "is None on the first step and a dict afterwards",
     "build the state with its final structure (zeros) before the loop"),
    ("explanation unavailable", "a static argument changed value (static_argnames), so "
     "every new learning rate is a new program",
     "pass numbers that change as ordinary (traced) arguments, never as static ones"),
)


def explain_retraces(observed: list[dict], *, name: str, across_calls: bool = False,
                     section: str | None = None, hint: str | None = None,
                     fix: str | None = None) -> str | None:
    """Fails when one of your functions was traced more than once in a call (or, with
    ``across_calls=True``, over all the calls).

    >>> ok = [{"misses": [{"function": "step (defined at c.py:3)",
    ...                    "lines": ["never seen function"]}], "compiles": 2,
    ...        "compiled": ["step", "dynamic_slice"]}]
    >>> explain_retraces(ok, name="train") is None
    True
    >>> again = {"function": "step (defined at c.py:3)",
    ...          "lines": ["different input types:", "* at xb, now f32[2,3] and before f32[16,3]"]}
    >>> print(explain_retraces([{"misses": ok[0]["misses"] + [again], "compiles": 3,
    ...                          "compiled": ["step", "dynamic_slice", "step"]}],
    ...                        name="train"))
    train traced `step` 2 times in call 1
      expected: each of your jitted functions traced (and compiled) once per run
      got:      call 1: step (defined at c.py:3) traced 2 times, compiled 2 times; 3 XLA compilations in all
      trace 2 of step: different input types: * at xb, now f32[2,3] and before f32[16,3]
      likely cause: a new input shape or dtype: the last batch is shorter than the others
      fix: pad every batch to one shape and mask the padding out of the loss
    """
    groups = [[m for call in observed for m in call["misses"]]] if across_calls else \
        [call["misses"] for call in observed]
    for index, misses in enumerate(groups):
        counts = collections.Counter(m["function"] for m in misses)
        repeated = [f for f, c in counts.items() if c > 1]
        if not repeated:
            continue
        function = repeated[0]
        short = function.split(" (")[0]
        where = "over all calls" if across_calls else f"in call {index + 1}"
        traces = [m for m in misses if m["function"] == function]
        details = [f"trace {k + 1} of {short}: " + (" ".join(m["lines"]) or "(no reason given)")
                   for k, m in enumerate(traces) if k > 0][:4]
        text = " ".join(line for m in traces[1:] for line in m["lines"])
        reasons = [(c, f) for key, c, f in _WHY if key in text] or [(
            "something about the inputs or the function object changed between steps",
            "keep shapes, dtypes, pytree structure and the jitted function the same")]
        calls = observed if across_calls else [observed[index]]
        compiles = sum(call["compiles"] for call in calls)
        own = sum(call.get("compiled", []).count(short) for call in calls)
        return format_failure(
            f"{name} traced `{short}` {counts[function]} times {where}",
            expected="each of your jitted functions traced (and compiled) once per run",
            got=(f"{'all calls' if across_calls else f'call {index + 1}'}: {function} traced "
                 f"{counts[function]} times, compiled {own} times; {compiles} XLA "
                 "compilations in all"),
            details=details,
            cause=hint or "; and ".join(dict.fromkeys(c for c, _ in reasons)),
            fix=fix or "; ".join(dict.fromkeys(f for _, f in reasons)),
            section=section)
    return None


def assert_no_retraces(fn: Callable, calls: Sequence, *, across_calls: bool = False,
                       section: str | None = None, hint: str | None = None,
                       fix: str | None = None, name: str | None = None) -> list[dict]:
    """Calls ``fn`` on each argument tuple; none of your functions may be traced twice
    in one call (``across_calls=True``: over all the calls).

    Returns:
      What :func:`collect_retraces` observed.

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones(3)
    >>> def run(v):
    ...     for scale in (1.0, 2.0):
    ...         v = jax.jit(lambda u: u * scale)(v)    # a fresh lambda per step
    ...     return v
    >>> assert_no_retraces(run, [(x,)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: run traced `<lambda>` 2 times in call 1
    ...
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    observed = collect_retraces(fn, calls)
    message = explain_retraces(observed, name=label, across_calls=across_calls,
                               section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")
    return observed


# -------------------------------------------------------------- cache-miss explanations

def stable_miss_lines(message: str) -> list[str]:
    """What an explanation says, without its call site, ids or file names.

    Keeps "never seen function" and the lines that name what changed.

    >>> stable_miss_lines("TRACING CACHE MISS at a.py:3 (f):\\n  for step defined at a.py:1\\n"
    ...                   "  all previously seen cache keys differ. For the closest ...:\\n"
    ...                   "  different input types:\\n  * at x, now f32[5] and before f32[4]")
    ['different input types:', '* at x, now f32[5] and before f32[4]']
    >>> stable_miss_lines("TRACING CACHE MISS at a.py:3 (f):\\n  never seen function:\\n"
    ...                   "    step id=1234 defined at a.py:1")
    ['never seen function']
    """
    out = []
    for line in str(message).splitlines()[1:]:
        text = line.strip()
        if text.startswith("never seen function"):
            out.append("never seen function")
        elif (text.startswith("different ") or text.startswith("* ")
              or "explanation unavailable" in text):
            out.append(text)
    return out


def collect_jax_explanations(make_target: Callable, calls: Sequence) -> list[str]:
    """What JAX logs, with ``jax_explain_cache_misses`` on, for ``calls`` of a new target.

    >>> import jax, jax.numpy as jnp
    >>> def make():
    ...     def double(v):
    ...         return 2 * v
    ...     return jax.jit(double)
    >>> [stable_miss_lines(m) for m in collect_jax_explanations(make, [(jnp.ones(2),)])]
    [['never seen function']]
    """
    import jax

    target = make_target()
    with quiet(), _jax_log_records() as messages, jax.explain_cache_misses(True):
        for args in calls:
            jax.block_until_ready(target(*args))
    return [m for m in messages if MISS_MARK in m]


def collect_cache_miss_report(fn: Callable, target: Callable, calls: Sequence) -> dict:
    """Runs the student's ``fn(target, calls)``; returns plain data about it.

    ``{"messages": [str], "stderr": [lines], "flags_before": {...}, "flags_after": {...},
    "handlers_left": [names]}`` (and ``"problem"`` when the result is not a list of
    strings). Flags the call changed are put back, handlers it left are removed.
    """
    before = collect_flags()
    logger = logging.getLogger("jax")
    handlers = list(logger.handlers)
    label = f"{getattr(fn, '__name__', 'fn')}(fn, calls)"
    try:
        with quiet() as captured:
            result, inner = call_student(fn, (target, list(calls)), name=label)
        after = collect_flags()
        extra = [type(h).__name__ for h in logger.handlers if h not in handlers]
    finally:
        restore_flags(before)
        for h in list(logger.handlers):     # leave the logger as it was
            if h not in handlers:
                logger.removeHandler(h)
    data = {"stderr": captured.summary(limit=5) + inner.summary(limit=5),
            "flags_before": before, "flags_after": after, "messages": [],
            "handlers_left": extra}
    if not isinstance(result, (list, tuple)) or not all(isinstance(m, str) for m in result):
        data["problem"] = f"returned {_short(result)}, not a list of strings"
    else:
        data["messages"] = list(result)
    return data


def explain_cache_miss_report(observed: dict, expected: list[str], *, name: str,
                              section: str | None = None, hint: str | None = None,
                              fix: str | None = None) -> str | None:
    """Compares the tracing-cache-miss explanations, one by one; stderr must stay
    empty and the flags unchanged.

    >>> ref = ["TRACING CACHE MISS at a:1 (g):\\n  never seen function:\\n    f id=1"]
    >>> obs = {"messages": ref, "stderr": [], "flags_before": {}, "flags_after": {},
    ...        "handlers_left": []}
    >>> explain_cache_miss_report(obs, ref, name="report") is None
    True
    >>> print(explain_cache_miss_report({**obs, "messages": []}, ref, name="report"))
    report returned 0 cache-miss explanations; JAX logged 1
      expected: [['never seen function']]
      got:      []
      likely cause: the records went to no handler of yours: the flag was off while the calls ran, or the handler was not on the 'jax' logger
      fix: add a logging.Handler to logging.getLogger('jax') before the calls, make the calls inside `with jax.explain_cache_misses(True):`, and collect record.getMessage()
    """
    if observed.get("problem"):
        return format_failure(f"{name} {observed['problem']}",
                              fix="return a list with the message of each log record",
                              section=section)
    if observed["stderr"]:
        return format_failure(
            f"{name} let JAX's log reach stderr",
            expected="nothing on stderr", got=" | ".join(observed["stderr"][:2]),
            cause=hint or "no handler of your own was on the 'jax' logger, so Python's "
                          "last-resort handler printed the records to stderr",
            fix=fix or "attach a logging.Handler that collects record.getMessage() to "
                       "logging.getLogger('jax'), and remove it in a `finally:` block",
            section=section)
    if observed.get("handlers_left"):
        return format_failure(
            f"{name} left a handler on the 'jax' logger",
            expected="the logger's handlers as before the call",
            got=f"{len(observed['handlers_left'])} more: {observed['handlers_left']}",
            cause=hint or "the handler is added but never removed, so every later JAX log "
                          "record goes to it too",
            fix=fix or "remove it in a `finally:` block: logger.removeHandler(handler)",
            section=section)
    changed = [k for k in observed["flags_after"]
               if observed["flags_after"][k] != observed["flags_before"].get(k)]
    if changed:
        return format_failure(
            f"{name} left {', '.join(changed)} changed",
            expected=", ".join(f"{k}={observed['flags_before'][k]!r}" for k in changed),
            got=", ".join(f"{k}={observed['flags_after'][k]!r}" for k in changed),
            cause=hint or "jax.config.update(...) without putting the old value back",
            fix=fix or "make the calls inside `with jax.explain_cache_misses(True):`",
            section=section)
    got = [stable_miss_lines(m) for m in observed["messages"] if MISS_MARK in m]
    want = [stable_miss_lines(m) for m in expected if MISS_MARK in m]
    if len(got) != len(want):
        return format_failure(
            f"{name} returned {len(got)} cache-miss explanations; JAX logged {len(want)}",
            expected=_short(want), got=_short(got),
            cause=hint or ("the records went to no handler of yours: the flag was off while "
                           "the calls ran, or the handler was not on the 'jax' logger"),
            fix=fix or ("add a logging.Handler to logging.getLogger('jax') before the calls, "
                        "make the calls inside `with jax.explain_cache_misses(True):`, and "
                        "collect record.getMessage()"),
            section=section)
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return format_failure(
                f"{name}: explanation {i + 1} differs from the one JAX logged",
                expected=_short(w), got=_short(g),
                cause=hint or "the messages are out of order, or not those of these calls",
                fix=fix or "return every message, in the order JAX logged it",
                section=section)
    return None


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 300 else text[:297] + "..."


def assert_cache_miss_report(fn: Callable, make_target: Callable, calls: Sequence, *,
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None, name: str | None = None) -> dict:
    """Asserts ``fn(target, calls)`` returns the cache-miss explanations JAX logs.

    The expected explanations are JAX's own, logged for the same calls on another new
    target. ``make_target()`` must build a new jitted function each time (a function
    defined inside it), so that both start from an empty cache.

    >>> import logging, jax, jax.numpy as jnp
    >>> def report(target, calls):
    ...     lines = []
    ...     handler = logging.Handler()
    ...     handler.emit = lambda record: lines.append(record.getMessage())
    ...     logging.getLogger("jax").addHandler(handler)
    ...     try:
    ...         with jax.explain_cache_misses(True):
    ...             for args in calls:
    ...                 target(*args)
    ...     finally:
    ...         logging.getLogger("jax").removeHandler(handler)
    ...     return lines
    >>> def make():
    ...     def double(v):
    ...         return 2 * v
    ...     return jax.jit(double)
    >>> calls = [(jnp.ones(3),), (jnp.ones(3),), (jnp.ones(4),)]
    >>> _ = assert_cache_miss_report(report, make, calls)
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    expected = collect_jax_explanations(make_target, calls)
    observed = collect_cache_miss_report(fn, make_target(), calls)
    message = explain_cache_miss_report(observed, expected, name=label, section=section,
                                        hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    return observed
