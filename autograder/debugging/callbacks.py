"""Checks for the debugging chapter: plain results and debug callbacks.

Every check observes the student's code as plain data (numbers, strings, lists and
dicts of them) and is judged by a pure ``explain_*`` of that data, in the student's
kernel and, outside the sandbox, by the trusted grader (:mod:`autograder.core.check`).

Both are value checks, observed where the student's code runs: a plain result is a
value; a debug callback's log is what the callbacks appended, at run time, to a list
in the student's process (an exported program cannot hold host callbacks: the
program judge refuses them). The chapter's other checks live in ``debugging.flags``
(configuration flags), ``debugging.checkify`` (errors as values), ``jit.recompiles`` and
``debugging.cache_misses`` (recompilation), ``debugging.traces`` (profiler traces) and ``programs.exported``
(facts from exported programs).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, describe_value, format_failure

# --------------------------------------------------------------------- plain results

def _plain(x: Any) -> Any:
    """Plain data for a student's result: Python scalars, strings, None, lists, dicts."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, float)):
        return x
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "shape") and hasattr(x, "dtype") and getattr(x, "shape", None) == ():
        value = np.asarray(x).item()
        return value
    return {"<object>": describe_value(x)}


def explain_plain(observed: Any, expected: Any, *, name: str, rtol: float = 1e-6,
                  atol: float = 0.0, section: str | None = None, hint: str | None = None,
                  fix: str | None = None) -> str | None:
    """Compares plain values (None, bool, int, float, str, lists, dicts) exactly;
    floats within ``atol + rtol * |expected|``.

    >>> explain_plain("log", "log", name="f()") is None
    True
    >>> print(explain_plain("invalid value (nan) encountered in log", "log", name="f()"))
    f() returned the wrong value
      expected: 'log'
      got:      'invalid value (nan) encountered in log'
      likely cause: a mistake in the formula
      fix: compare your result with a small example by hand
    """
    problem = _plain_difference(observed, expected, rtol=rtol, atol=atol, path="")
    if problem is None:
        return None
    path, exp_text, got_text = problem
    where = f" at {path}" if path else ""
    return format_failure(f"{name} returned the wrong value{where}", expected=exp_text,
                          got=got_text, cause=hint or "a mistake in the formula",
                          fix=fix or "compare your result with a small example by hand",
                          section=section)


def _plain_difference(got, exp, *, rtol, atol, path):
    if isinstance(exp, dict):
        if not isinstance(got, dict):
            return path, "a dict", _short(got)
        missing = [k for k in exp if k not in got]
        extra = [k for k in got if k not in exp]
        if missing or extra:
            return (path, f"keys {sorted(map(str, exp))}",
                    f"keys {sorted(map(str, got))}")
        for key in exp:
            res = _plain_difference(got[key], exp[key], rtol=rtol, atol=atol,
                                    path=f"{path}[{key!r}]")
            if res:
                return res
        return None
    if isinstance(exp, list):
        if not isinstance(got, list):
            return path, f"a list of {len(exp)} items", _short(got)
        if len(got) != len(exp):
            return path, f"{len(exp)} items", f"{len(got)} items: {_short(got)}"
        for i, (g, e) in enumerate(zip(got, exp)):
            res = _plain_difference(g, e, rtol=rtol, atol=atol, path=f"{path}[{i}]")
            if res:
                return res
        return None
    if isinstance(exp, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        ok = (math.isnan(exp) and math.isnan(got)) or abs(got - exp) <= atol + rtol * abs(exp)
        return None if ok else (path, repr(exp), repr(got))
    if type(got) is not type(exp) or got != exp:
        return path, repr(exp), _short(got)
    return None


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 200 else text[:197] + "..."


def assert_plain_result(fn: Callable, reference: Callable, args: Sequence = (),
                        kwargs: dict | None = None, *, rtol: float = 1e-6, atol: float = 0.0,
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None, name: str | None = None):
    """Like ``assert_matches_reference``, for results that are plain Python values:
    a string, ``None``, numbers, lists and dicts of them.

    >>> assert_plain_result(lambda s: s.upper(), lambda s: "LOG", ("log",))
    'LOG'
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    kept: dict = {}

    def observe():
        kept["result"] = call(fn, args, kwargs)
        return _plain(kept["result"])

    return run(Check("plain", label, observe=observe, observe_as="facts",
                     expect=lambda: _plain(reference(*args, **kwargs)), expect_as="facts",
                     params=dict(rtol=rtol, atol=atol, section=section, hint=hint, fix=fix),
                     returns=lambda _: kept.get("result")))


@explainer("plain")
def _explain_plain(observed, expected, *, label: str, rtol=1e-6, atol=0.0, section=None,
                   hint=None, fix=None, **_ignored) -> str | None:
    return explain_plain(observed.facts, expected.facts, name=label, rtol=float(rtol),
                         atol=float(atol), section=section, hint=hint, fix=fix)


# ------------------------------------------------------------------- debug callbacks

def collect_callback_log(make: Callable, fn: Callable, inputs: Sequence, *,
                         transform: str = "jit") -> dict:
    """Builds ``g = make(fn, log)`` with a fresh list ``log`` and runs ``g`` on each input.

    ``transform`` is ``"eager"`` (plain calls), ``"jit"`` (one ``jax.jit(g)``, called
    on each input) or ``"vmap"`` (``jax.jit(jax.vmap(g))`` on the stacked inputs).
    Waits for pending callbacks (``jax.effects_barrier``) before reading the log.

    Returns plain data, ``{"entries": [...], "outputs": [...]}``: each log entry as a
    float, or as a description when it is not a number (a tracer, a list); the outputs
    of ``g`` as nested lists. ``{"problem": ...}`` says ``make`` returned no function.

    >>> import jax.numpy as jnp
    >>> def leaky(fn, log):                 # appends a tracer once, at trace time
    ...     def g(x):
    ...         log.append(fn(x).sum())
    ...         return fn(x)
    ...     return g
    >>> collect_callback_log(leaky, jnp.sin, [jnp.ones(2), jnp.zeros(2)])["entries"]
    ['<DynamicJaxprTracer>']
    """
    import jax
    import jax.numpy as jnp

    log: list = []
    g = call(make, (fn, log))
    if not callable(g):
        return {"entries": [], "outputs": [], "problem": f"returned {describe_value(g)}, "
                                                          "not a function"}
    if transform == "vmap":
        runs = [(jax.jit(jax.vmap(g)), (jnp.stack(list(inputs)),))]
    elif transform == "jit":
        jitted = jax.jit(g)
        runs = [(jitted, (x,)) for x in inputs]
    else:
        runs = [(g, (x,)) for x in inputs]
    outputs = []
    for wrapped, args in runs:
        outputs.append(np.asarray(wrapped(*args)).tolist())
    jax.effects_barrier()
    return {"entries": [_entry(v) for v in log[:_MAX_ENTRIES]], "outputs": outputs}


_MAX_ENTRIES = 1000


def _entry(v: Any):
    try:
        arr = np.asarray(v)
        if arr.dtype != object and arr.size == 1 and np.issubdtype(arr.dtype, np.number):
            return float(arr.reshape(()))
    except Exception:  # noqa: BLE001 - a tracer or an object: described below
        pass
    return f"<{type(v).__name__}>"


def explain_callback_log(observed: dict, expected: Sequence[float], *, name: str,
                         transform: str, rtol: float = 1e-4, atol: float = 1e-5,
                         section: str | None = None, hint: str | None = None,
                         fix: str | None = None) -> str | None:
    """The log must hold one float per run (any order), equal to the expected ones.

    >>> explain_callback_log({"entries": [2.0, 1.0], "outputs": []}, [1.0, 2.0],
    ...                      name="g", transform="jit") is None
    True
    >>> print(explain_callback_log({"entries": ["<DynamicJaxprTracer>"], "outputs": []},
    ...                            [1.0, 2.0], name="g", transform="jit"))  # doctest: +ELLIPSIS
    the log of g under jax.jit holds 1 entries for 2 runs
      expected: 2 floats, one per run: [1.0, 2.0]
      got:      ['<DynamicJaxprTracer>']
      likely cause: a Python side effect (log.append) runs once, while JAX traces ...
    ...
    """
    where = {"eager": "called eagerly", "jit": "under jax.jit",
             "vmap": "under jax.vmap"}.get(transform, transform)
    if observed.get("problem"):
        return format_failure(f"{name} {observed['problem']}",
                              fix="return the wrapped function g", section=section)
    entries = list(observed["entries"])
    exp = sorted(float(e) for e in expected)
    non_numbers = [e for e in entries if not isinstance(e, float)]
    if len(entries) != len(exp) or non_numbers:
        if non_numbers or len(entries) < len(exp):
            cause = ("a Python side effect (log.append) runs once, while JAX traces the "
                     "function, and appends a tracer instead of a number; later calls "
                     "reuse the compiled program and append nothing")
            default_fix = ("send the runtime value to Python with jax.debug.callback("
                           "lambda v: log.append(float(v)), value)")
        else:
            cause = "more than one entry per run: the value is logged twice"
            default_fix = "call jax.debug.callback once per run of the function"
        return format_failure(
            f"the log of {name} {where} holds {len(entries)} entries for {len(exp)} runs",
            expected=f"{len(exp)} floats, one per run: {[round(e, 6) for e in exp]}",
            got=_short(entries), cause=hint or cause, fix=fix or default_fix,
            section=section)
    got = sorted(entries)
    bad = [(g, e) for g, e in zip(got, exp) if not abs(g - e) <= atol + rtol * abs(e)]
    if bad:
        return format_failure(
            f"the log of {name} {where} holds the wrong numbers",
            expected=f"(sorted) {[round(e, 6) for e in exp]}",
            got=f"(sorted) {[round(g, 6) for g in got]}",
            cause=hint or "the logged value is not the norm of the output: the norm of "
                          "the input, or the squared norm",
            fix=fix or "log jnp.linalg.norm(y) where y = fn(x)", section=section)
    return None


def assert_callback_log(make: Callable, fn: Callable, inputs: Sequence,
                        expected: Sequence[float], *, transform: str = "jit",
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None, name: str | None = None) -> dict:
    """Asserts that ``make(fn, log)`` logs one expected float per run under ``transform``.

    >>> import jax, jax.numpy as jnp
    >>> def with_log(fn, log):
    ...     def g(x):
    ...         y = fn(x)
    ...         jax.debug.callback(lambda v: log.append(float(v)), jnp.sum(y))
    ...         return y
    ...     return g
    >>> xs = [jnp.ones(2), 2 * jnp.ones(2)]
    >>> _ = assert_callback_log(with_log, jnp.sin, xs, [float(jnp.sum(jnp.sin(x))) for x in xs])
    """
    __tracebackhide__ = True
    label = name or _name(make)
    return run(Check("callback_log", label,
                     observe=lambda: collect_callback_log(make, fn, inputs, transform=transform),
                     observe_as="facts",
                     params=dict(want=[float(e) for e in expected], transform=transform,
                                 section=section, hint=hint, fix=fix)))


@explainer("callback_log")
def _explain_callback_log(observed, expected, *, label: str, want: list, transform: str,
                          section=None, hint=None, fix=None, **_ignored) -> str | None:
    del expected
    facts = observed.facts
    if not isinstance(facts, dict) or not isinstance(facts.get("entries", []), list):
        raise ValueError("a callback log that is not a JSON object")
    return explain_callback_log(facts, list(want), name=label, transform=transform,
                                section=section, hint=hint, fix=fix)


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
