"""Recompilation: functions of yours traced (and so compiled) again in a run.

With ``jax_explain_cache_misses`` on, every miss of the tracing cache of a function
of *yours* (JAX skips its own functions, so eager ``jnp`` operations never appear) is
logged at WARNING level as ``TRACING CACHE MISS``, naming the function, where it is
defined, and what changed since the closest earlier call. :func:`assert_no_retraces`
runs a function (a whole training loop) and fails when one of your functions was
traced or compiled twice in one run: a short last batch, a new learning rate baked
in, a fresh closure, or a state whose pytree structure changes; or, with
``require_jit``, when none of your functions ran under ``jax.jit`` at all (JAX's
caches are cleared first, so a function that compiled before the check still counts).

These are *in-process facts*: compilations and JAX's log records exist only in the
process that runs the student's code (no exported program records how often it was
traced). :func:`collect_retraces` observes them there as plain data (each miss's
stable lines, the compile count and names); :func:`explain_retraces` judges outside.
Forging them needs the monitoring hooks or the logger patched, which the tampering
policy holds for review. The cache-miss report exercise is in ``debugging.cache_misses``.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import re
from typing import Callable, Iterator, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.jit.compile import collect_compilations
from autograder.core.feedback import format_failure

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

def collect_retraces(fn: Callable, calls: Sequence, *, fresh: bool = False) -> list[dict]:
    """Runs ``fn`` on each argument tuple with ``jax_explain_cache_misses`` on.

    With ``fresh=True`` JAX's caches are cleared first (``jax.clear_caches()``), so
    every jitted function the calls use is traced at least once: one that ran before
    the check still shows.

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

    if not callable(fn):
        call(fn)  # raises NotAFunction: the check reports it
    if fresh:
        jax.clear_caches()
    out = []
    for args in calls:
        with _jax_log_records() as messages, collect_compilations() as seen, \
                jax.explain_cache_misses(True):
            result = call(fn, tuple(args))
            with contextlib.suppress(Exception):
                jax.block_until_ready(result)
        out.append({"misses": [describe_miss(m) for m in messages if MISS_MARK in m][:200],
                    "compiles": seen.count, "compiled": list(seen.names)[:500]})
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


# With ``require_jit``, a product JAX compiled on its own (an eager ``x @ w``: jnp's
# matmul is a jitted function of JAX's, compiled under its own name when called outside
# any jit) shows a step that runs eagerly, whatever else was jitted.
EAGER_PRODUCTS = frozenset({"matmul", "dot", "dot_general", "einsum", "tensordot", "vdot",
                            "inner"})


def explain_retraces(observed: list[dict], *, name: str, across_calls: bool = False,
                     require_jit: bool = False, section: str | None = None,
                     hint: str | None = None, fix: str | None = None) -> str | None:
    """Fails when one of your functions was traced (or compiled) more than once in a
    call (or, with ``across_calls=True``, over all the calls); with ``require_jit``,
    also when none of your functions was traced at all (everything ran eagerly), or a
    matrix product ran eagerly (:data:`EAGER_PRODUCTS`: the step is not the jitted part).

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
    if require_jit and not any(call["misses"] for call in observed):
        return format_failure(
            f"{name} ran none of your functions under jax.jit",
            expected="each step run as one call of a jitted function",
            got=f"no function of yours traced; {sum(c['compiles'] for c in observed)} "
                "small programs compiled for eager operations",
            cause=hint or "every operation ran eagerly, one small program at a time: "
                          "removing jax.jit is not the cure for recompilation",
            fix=fix or "create the jitted step once (jax.jit) and call it for every batch",
            section=section)
    eager = sorted({n for call in observed for n in call.get("compiled", [])
                    if n in EAGER_PRODUCTS}) if require_jit else []
    if eager:
        return format_failure(
            f"{name} ran matrix products eagerly, outside jax.jit",
            expected="each step run as one call of a jitted function",
            got=f"eager programs compiled for {', '.join(eager)}, one operation at a time",
            cause=hint or "the step itself is not jitted (a jitted helper beside it, for "
                          "the set-up, does not make the step compiled)",
            fix=fix or "create the jitted step once (jax.jit) and call it for every batch",
            section=section)
    groups = [[m for call in observed for m in call["misses"]]] if across_calls else \
        [call["misses"] for call in observed]
    for index, misses in enumerate(groups):
        calls = observed if across_calls else [observed[index]]
        compiled = collections.Counter(n for call in calls for n in call.get("compiled", []))
        counts = collections.Counter(m["function"] for m in misses)
        repeated = [f for f, c in counts.items() if c > 1 or compiled[f.split(" (")[0]] > 1]
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
        compiles = sum(call["compiles"] for call in calls)
        verb = "traced" if counts[function] > 1 else "compiled"
        times = counts[function] if counts[function] > 1 else compiled[short]
        return format_failure(
            f"{name} {verb} `{short}` {times} times {where}",
            expected="each of your jitted functions traced (and compiled) once per run",
            got=(f"{'all calls' if across_calls else f'call {index + 1}'}: {function} traced "
                 f"{counts[function]} times, compiled {compiled[short]} times; {compiles} XLA "
                 "compilations in all"),
            details=details,
            cause=hint or "; and ".join(dict.fromkeys(c for c, _ in reasons)),
            fix=fix or "; ".join(dict.fromkeys(f for _, f in reasons)),
            section=section)
    return None


def assert_no_retraces(fn: Callable, calls: Sequence, *, across_calls: bool = False,
                       require_jit: bool = False, section: str | None = None,
                       hint: str | None = None, fix: str | None = None,
                       name: str | None = None) -> list[dict]:
    """Calls ``fn`` on each argument tuple; none of your functions may be traced (or
    compiled) twice in one call (``across_calls=True``: over all the calls). With
    ``require_jit=True`` JAX's caches are cleared first and at least one function of
    yours must be traced: a loop that runs everything eagerly fails.

    Returns:
      What :func:`collect_retraces` observed (None in a grading run where ``fn``
      raised).

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones(3)
    >>> def run(v):
    ...     for scale in (1.0, 2.0):
    ...         v = jax.jit(lambda u: u * scale)(v)    # a fresh lambda per step
    ...     return v
    >>> assert_no_retraces(run, [(x,)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: run traced `<lambda>` 2 times in call 1
    ...
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    return run(Check("no_retraces", label,
                     observe=lambda: collect_retraces(fn, calls, fresh=require_jit),
                     observe_as="facts",
                     params=dict(across_calls=across_calls, require_jit=require_jit,
                                 section=section, hint=hint, fix=fix)))


@explainer("no_retraces")
def _explain(observed, expected, *, label: str, across_calls=False, require_jit=False,
             section=None, hint=None, fix=None, **_ignored) -> str | None:
    del expected
    facts = observed.facts
    if not isinstance(facts, list) or not all(
            isinstance(c, dict) and isinstance(c.get("misses"), list)
            and isinstance(c.get("compiles"), int) for c in facts):
        raise ValueError("retraces are not a list of calls")
    return explain_retraces(facts, name=label, across_calls=bool(across_calls),
                            require_jit=bool(require_jit), section=section, hint=hint,
                            fix=fix)
