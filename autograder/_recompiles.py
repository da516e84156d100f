"""Recompilation checks for the debugging chapter: programs compiled more than once,
and the cache-miss explanations JAX logs.

:func:`assert_compiles_once_each` runs a function (a whole training loop) on several
inputs and fails when any program was compiled twice: a step that recompiles for a
short last batch, a new learning rate, a fresh closure or a state whose pytree
structure changes shows up as the same name compiled again.

:func:`assert_cache_miss_report` compares the explanations a student's function
collected with ``jax_explain_cache_misses`` against a reference's, line by line on
what is stable (the ``*`` lines that say what changed, and "never seen function"),
not on call sites, object ids or file names.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Callable, Sequence

from autograder._compile import collect_compilations
from autograder._debugging import collect_flags, restore_flags
from autograder._feedback import CheckFailure, call_signature, format_failure
from autograder._numeric import call_student
from autograder._quiet import quiet, report_captured


# ----------------------------------------------------------- compiled more than once

def collect_compile_names(fn: Callable, calls: Sequence) -> list[list[str]]:
    """The names of the programs compiled during each call of ``fn`` (plain data).

    Each item of ``calls`` is an argument tuple. Eager operations count too, under
    their primitive's name (``dynamic_slice``, ``multiply``): create inputs first.

    >>> import jax, jax.numpy as jnp
    >>> def step(v):
    ...     return v * 2
    >>> f = jax.jit(step)
    >>> x, y = jnp.ones(3), jnp.ones(4)
    >>> collect_compile_names(f, [(x,), (x,), (y,)])
    [['step'], [], ['step']]
    """
    import jax

    label = getattr(fn, "__name__", type(fn).__name__)
    names = []
    for i, args in enumerate(calls):
        with collect_compilations() as seen:
            out, captured = call_student(fn, tuple(args),
                                         name=f"{label} (call {i + 1}: "
                                              f"{call_signature(fn, tuple(args))})")
            with contextlib.suppress(Exception):
                jax.block_until_ready(out)
        report_captured(captured, label)
        names.append(list(seen.names))
    return names


def explain_compiles_once_each(observed: list[list[str]], *, name: str,
                               section: str | None = None, hint: str | None = None,
                               fix: str | None = None) -> str | None:
    """Fails when a program name appears more than once over all the calls.

    >>> explain_compiles_once_each([["step"], [], []], name="train") is None
    True
    >>> print(explain_compiles_once_each([["step", "step"], ["step"]], name="train"))
    train compiled `step` 3 times over 2 calls
      expected: every program compiled at most once
      got:      call 1: step x2; call 2: step
      within call 1, `step` compiled 2 times: something changed between the steps of one run
      call 2 compiled `step` again although the inputs had the same shapes as before
      likely cause: a new shape (a short last batch), a new pytree structure (state created on the first step), a Python number baked into the program (a static or closed-over learning rate), or a jitted function created anew (jax.jit of a lambda or a partial inside the loop or inside the function)
      fix: pad every batch to one shape (with a mask), pass numbers as arrays, start the state with its final structure, and create the jitted step once, at top level
    """
    counts = collections.Counter(n for names in observed for n in names)
    repeated = [n for n, c in counts.items() if c > 1]
    if not repeated:
        return None
    first = repeated[0]
    per_call = []
    for i, names in enumerate(observed):
        if names:
            c = collections.Counter(names)
            per_call.append(f"call {i + 1}: " + ", ".join(
                f"{n} x{k}" if k > 1 else n for n, k in c.items()))
    details = []
    seen_before: set[str] = set()
    for i, names in enumerate(observed):
        c = collections.Counter(names)
        for n in repeated:
            if c[n] > 1:
                details.append(f"within call {i + 1}, `{n}` compiled {c[n]} times: something "
                               "changed between the steps of one run")
            if c[n] and n in seen_before:
                details.append(f"call {i + 1} compiled `{n}` again although the inputs had "
                               "the same shapes as before")
        seen_before.update(names)
    others = f" (and {', '.join(f'`{n}`' for n in repeated[1:])})" if repeated[1:] else ""
    return format_failure(
        f"{name} compiled `{first}` {counts[first]} times over {len(observed)} calls{others}",
        expected="every program compiled at most once",
        got="; ".join(per_call) or "nothing", details=details,
        cause=hint or ("a new shape (a short last batch), a new pytree structure (state "
                       "created on the first step), a Python number baked into the program "
                       "(a static or closed-over learning rate), or a jitted function "
                       "created anew (jax.jit of a lambda or a partial inside the loop or "
                       "inside the function)"),
        fix=fix or ("pad every batch to one shape (with a mask), pass numbers as arrays, "
                    "start the state with its final structure, and create the jitted step "
                    "once, at top level"),
        section=section)


def assert_compiles_once_each(fn: Callable, calls: Sequence, *, section: str | None = None,
                              hint: str | None = None, fix: str | None = None,
                              name: str | None = None) -> list[list[str]]:
    """Calls ``fn`` on each argument tuple and asserts no program compiled twice.

    Returns:
      The names compiled during each call (:func:`collect_compile_names`).

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones(3)
    >>> def run(v):
    ...     return jax.jit(lambda u: u * 2)(v)      # a fresh lambda per call
    >>> assert_compiles_once_each(run, [(x,), (x,)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: run compiled `<lambda>` 2 times over 2 calls
    ...
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    observed = collect_compile_names(fn, calls)
    message = explain_compiles_once_each(observed, name=label, section=section, hint=hint,
                                         fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")
    return observed


# -------------------------------------------------------------- cache-miss explanations

MISS_MARK = "TRACING CACHE MISS"


def stable_miss_lines(message: str) -> list[str]:
    """What an explanation says, without its call site, ids or file names.

    Keeps "never seen function" and the ``*`` lines that name what changed.

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
        elif text.startswith("different ") or text.startswith("* "):
            out.append(text)
    return out


def collect_cache_miss_report(fn: Callable, target: Callable, calls: Sequence) -> dict:
    """Runs the student's ``fn(target, calls)``; returns plain data about it.

    ``{"messages": [str], "stderr": [lines], "flags_before": {...}, "flags_after": {...}}``
    (``messages`` holds the returned strings, or ``{"problem": ...}`` when the result
    is not a list of strings). Flags the call changed are put back.
    """
    before = collect_flags()
    label = f"{getattr(fn, '__name__', 'fn')}(fn, calls)"
    try:
        with quiet() as captured:
            result, inner = call_student(fn, (target, list(calls)), name=label)
        after = collect_flags()
    finally:
        restore_flags(before)
    data = {"stderr": captured.summary(limit=5) + inner.summary(limit=5),
            "flags_before": before, "flags_after": after}
    if not isinstance(result, (list, tuple)) or not all(isinstance(m, str) for m in result):
        data["problem"] = f"returned {type(result).__name__}, not a list of strings"
        data["messages"] = []
    else:
        data["messages"] = list(result)
    return data


def explain_cache_miss_report(observed: dict, expected: list[str], *, name: str,
                              section: str | None = None, hint: str | None = None,
                              fix: str | None = None) -> str | None:
    """Compares the tracing-cache-miss messages, kind by kind; stderr must stay empty.

    >>> ref = ["TRACING CACHE MISS at a:1 (g):\\n  never seen function:\\n    f id=1"]
    >>> obs = {"messages": ref, "stderr": [], "flags_before": {}, "flags_after": {}}
    >>> explain_cache_miss_report(obs, ref, name="report") is None
    True
    >>> print(explain_cache_miss_report({**obs, "messages": []}, ref, name="report"))
    report returned 0 cache-miss explanations; JAX logged 1
      expected: ['never seen function']
      got:      []
      likely cause: the explanations went to stderr, or to no handler: the flag was off while the calls ran, or the handler was not on the 'jax' logger
      fix: add a logging.Handler to logging.getLogger('jax') before the calls, inside `with jax.explain_cache_misses(True):`, and collect record.getMessage()
    """
    if observed.get("problem"):
        return format_failure(f"{name} {observed['problem']}",
                              fix="return a list with the message of each log record",
                              section=section)
    if observed["stderr"]:
        return format_failure(
            f"{name} let JAX's log reach stderr",
            expected="nothing on stderr", got=" | ".join(observed["stderr"][:2]),
            cause=hint or "no handler of your own was attached to the 'jax' logger, so "
                          "Python's last-resort handler printed the records to stderr",
            fix=fix or "attach a logging.Handler that collects record.getMessage() to "
                       "logging.getLogger('jax'), and remove it in a `finally:` block",
            section=section)
    if observed["flags_after"] != observed["flags_before"]:
        changed = [k for k in observed["flags_after"]
                   if observed["flags_after"][k] != observed["flags_before"].get(k)]
        return format_failure(
            f"{name} left {', '.join(changed)} changed",
            expected=str({k: observed["flags_before"][k] for k in changed}),
            got=str({k: observed["flags_after"][k] for k in changed}),
            cause=hint or "jax.config.update(...) without putting the old value back",
            fix=fix or "use `with jax.explain_cache_misses(True):` around the calls",
            section=section)
    got = [stable_miss_lines(m) for m in observed["messages"] if MISS_MARK in m]
    want = [stable_miss_lines(m) for m in expected if MISS_MARK in m]
    if len(got) != len(want):
        return format_failure(
            f"{name} returned {len(got)} cache-miss explanations; JAX logged {len(want)}",
            expected=_short([w for ws in want for w in ws]),
            got=_short([g for gs in got for g in gs]),
            cause=hint or ("the explanations went to stderr, or to no handler: the flag was "
                           "off while the calls ran, or the handler was not on the 'jax' "
                           "logger"),
            fix=fix or ("add a logging.Handler to logging.getLogger('jax') before the calls, "
                        "inside `with jax.explain_cache_misses(True):`, and collect "
                        "record.getMessage()"),
            section=section)
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return format_failure(
                f"{name}: explanation {i + 1} differs from the one JAX gave",
                expected=_short(w), got=_short(g),
                cause=hint or "the messages are out of order, or not the ones of these calls",
                fix=fix or "return every message in the order JAX logged it",
                section=section)
    return None


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 300 else text[:297] + "..."


def assert_cache_miss_report(fn: Callable, reference: Callable, make_target: Callable,
                             calls: Sequence, *, section: str | None = None,
                             hint: str | None = None, fix: str | None = None,
                             name: str | None = None) -> dict:
    """Asserts ``fn(target, calls)`` returns the cache-miss explanations JAX logged.

    ``make_target()`` must build a new jitted function each time (a function defined
    inside it), so that the reference and the student each start from an empty cache.

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
    >>> _ = assert_cache_miss_report(report, report, make, calls)
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    with quiet():
        expected = list(reference(make_target(), list(calls)))
    observed = collect_cache_miss_report(fn, make_target(), calls)
    message = explain_cache_miss_report(observed, expected, name=label, section=section,
                                        hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    return observed
