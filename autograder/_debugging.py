"""Checks for the debugging chapter: configuration flags, plain results, errors
returned as values (``checkify``) and debug callbacks.

Every check has three parts: ``collect_*`` runs the student's code and returns plain
data (numbers, strings, lists and dicts of them), ``explain_*`` is a pure function
of that data and of what was expected (a teaching message, or ``None``), and
``assert_*`` joins them in the student's kernel. The trusted grader runs the same
``explain_*`` on data that came back from a sandbox.

Flags matter here more than anywhere: a student who leaves ``jax_debug_nans`` or
``jax_enable_x64`` on changes every later cell. Checks that call student code put
back every course flag it changed, and :func:`assert_flags_at_defaults` resets
flags left on by a solution cell before it reports them.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import numpy as np

from autograder._feedback import CheckFailure, call_signature, describe_value, format_failure
from autograder._numeric import call_student
from autograder._quiet import report_captured

# The values every cell of the course may assume (what course.setup() leaves).
COURSE_FLAGS = {
    "jax_debug_nans": False,
    "jax_debug_infs": False,
    "jax_enable_x64": False,
    "jax_disable_jit": False,
    "jax_explain_cache_misses": False,
    "jax_log_compiles": False,
}

# What each flag costs when it is left on: the messages say it.
FLAG_COSTS = {
    "jax_debug_nans": "every jitted call and every eager operation then checks its "
                      "outputs for NaN (a wait for the device after each call), and any "
                      "later cell that makes a NaN on purpose raises FloatingPointError",
    "jax_debug_infs": "every call then checks its outputs for inf, and any later cell "
                      "that overflows on purpose raises FloatingPointError",
    "jax_enable_x64": "every later default dtype becomes 64-bit (jnp.arange gives int64, "
                      "float64 inputs stay float64): memory doubles and dtypes change",
    "jax_disable_jit": "jax.jit then does nothing: every call runs op by op, far slower, "
                       "and nothing is compiled",
    "jax_explain_cache_misses": "every later cache miss is logged at WARNING level, "
                                "which reaches stderr (a graded cell that writes to "
                                "stderr fails)",
    "jax_log_compiles": "every later compilation is logged at WARNING level, which "
                        "reaches stderr (a graded cell that writes to stderr fails)",
}


# --------------------------------------------------------------------------- flags

def collect_flags(names: Sequence[str] = tuple(COURSE_FLAGS)) -> dict[str, Any]:
    """The current value of each configuration flag in ``names``.

    >>> collect_flags(["jax_debug_nans"])
    {'jax_debug_nans': False}
    """
    import jax

    return {name: getattr(jax.config, name) for name in names}


def restore_flags(values: dict[str, Any]) -> dict[str, Any]:
    """Sets each flag back to ``values[name]`` where it differs; returns what it set."""
    import jax

    changed = {}
    for name, value in values.items():
        if getattr(jax.config, name) != value:
            jax.config.update(name, value)
            changed[name] = value
    return changed


def explain_flags(observed: dict, expected: dict, *, what: str, section: str | None = None,
                  hint: str | None = None, fix: str | None = None) -> str | None:
    """The message for flags whose observed value differs from the expected one.

    >>> print(explain_flags({"jax_debug_nans": True}, {"jax_debug_nans": False},
    ...                     what="after nan_origin(...) returned"))  # doctest: +ELLIPSIS
    jax_debug_nans was left on after nan_origin(...) returned
      expected: jax_debug_nans=False
      got:      jax_debug_nans=True
      cost: every jitted call and every eager operation then checks its outputs ...
      likely cause: jax.config.update(...) without putting the old value back
      fix: use the context manager (`with jax.debug_nans(True):`), or save the old value and restore it in a `finally:` block
    """
    wrong = [name for name in expected if observed.get(name) != expected[name]]
    if not wrong:
        return None
    verb = "left on" if all(observed.get(n) is True for n in wrong) else "changed"
    what_changed = " and ".join(wrong)
    details = [f"cost: {FLAG_COSTS[n]}" for n in wrong if n in FLAG_COSTS]
    return format_failure(
        f"{what_changed} was {verb} {what}",
        expected=", ".join(f"{n}={expected[n]!r}" for n in wrong),
        got=", ".join(f"{n}={observed.get(n)!r}" for n in wrong),
        details=details,
        cause=hint or "jax.config.update(...) without putting the old value back",
        fix=fix or ("use the context manager (`with jax.debug_nans(True):`), or save the "
                    "old value and restore it in a `finally:` block"),
        section=section)


def _reset_flags_when_cell_ends() -> None:
    """In a notebook, puts the course flags back to their defaults when the running
    cell ends, pass or fail, so a check that failed halfway leaves no flag on."""
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: nothing runs "after the cell"
        return
    shell = get_ipython()
    if shell is None:
        return

    def reset(result=None):
        del result
        restore_flags(COURSE_FLAGS)
        try:
            shell.events.unregister("post_run_cell", reset)
        except ValueError:
            pass

    shell.events.register("post_run_cell", reset)


def assert_flags_at_defaults(*, section: str | None = None, hint: str | None = None,
                             fix: str | None = None) -> None:
    """Puts every course flag back to its default, then fails if one was not there.

    Test cells call it first, so a flag a solution cell left on is reported by its
    own exercise and turned off before any later cell runs. In a notebook it also
    turns them off again when the test cell ends, whether or not its checks passed:
    a student's function that leaves a flag on cannot break the cells after it.

    >>> assert_flags_at_defaults()
    >>> import jax
    >>> jax.config.update("jax_debug_nans", True)
    >>> assert_flags_at_defaults(section="1.2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: jax_debug_nans was left on when this test cell started
    ...
    >>> jax.config.jax_debug_nans
    False
    """
    __tracebackhide__ = True
    observed = collect_flags()
    restore_flags(COURSE_FLAGS)
    _reset_flags_when_cell_ends()
    message = explain_flags(
        observed, COURSE_FLAGS, what="when this test cell started",
        section=section,
        hint=hint or "a solution cell (or a cell you added) set a flag globally with "
                     "jax.config.update and never put it back",
        fix=fix or "scope the flag to the code that needs it with its context manager "
                   "(`with jax.debug_nans(True): ...`); the check has turned it off again")
    if message:
        raise CheckFailure(message, rung="values")


def assert_flags_restored(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                          setting: dict | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None,
                          name: str | None = None):
    """Calls ``fn`` and fails if a course flag is not what it was before the call.

    Args:
      fn, args, kwargs: the student's function and its inputs.
      setting: flags to set before the call (e.g. ``{"jax_debug_nans": True}``), to
        check that a value the caller chose survives the call. They are put back
        afterwards, as is every flag the call changed.
      section, hint, fix, name: as in the other checks.

    Returns:
      What ``fn`` returned.

    >>> import jax
    >>> def careful(x):
    ...     with jax.debug_nans(True):
    ...         return x + 1
    >>> assert_flags_restored(careful, (1.0,), setting={"jax_debug_nans": True})
    2.0
    >>> def careless(x):
    ...     jax.config.update("jax_debug_nans", False)
    ...     return x + 1
    >>> assert_flags_restored(careless, (1.0,), setting={"jax_debug_nans": True})
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: jax_debug_nans was changed after careless(x=float 1.0) returned
    ...
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    original = collect_flags()
    restore_flags(setting or {})
    before = collect_flags()
    try:
        result, captured = call_student(fn, args, kwargs, name=label, section=section)
        after = collect_flags()
    finally:
        restore_flags(original)
    message = explain_flags(after, before, what=f"after {label} returned", section=section,
                            hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    report_captured(captured, label)
    return result


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
    expected = _plain(reference(*args, **kwargs))
    label = name or call_signature(fn, args, kwargs)
    result, captured = call_student(fn, args, kwargs, name=label, section=section)
    message = explain_plain(_plain(result), expected, name=label, rtol=rtol, atol=atol,
                            section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    report_captured(captured, label)
    return result


# ------------------------------------------------------------ errors returned as values

_MAPPED = re.compile(r"at mapped index (\d+): ")


def _error_text(err: Any) -> str | None:
    text = err.get()
    return None if text is None else str(text)


def collect_checkify_errors(fn: Callable, cases: Sequence[Sequence], *,
                            vmap: bool = False) -> list[dict]:
    """Runs ``jax.jit(fn)`` on each case, where ``fn`` returns ``(err, value)``.

    With ``vmap=True`` the cases are stacked along a new leading axis and run as one
    call of ``jax.jit(jax.vmap(fn))``.

    Returns one dict per call: ``{"error": str or None, "value": array}`` when the
    call returned a checkify ``Error`` first, or ``{"problem": text}`` when it did not
    (it raised, or returned something else).

    >>> import jax.numpy as jnp
    >>> from jax.experimental import checkify
    >>> def inverse(x):
    ...     return checkify.checkify(lambda x: 1.0 / x, errors=checkify.div_checks)(x)
    >>> [r["error"] for r in collect_checkify_errors(inverse, [(jnp.float32(2),),
    ...                                                      (jnp.float32(0),)])]
    [None, 'division by zero']
    """
    import jax

    calls = cases
    wrapped = jax.jit(fn)
    if vmap:
        calls = [jax.tree.map(lambda *leaves: np.stack(leaves), *cases)]
        wrapped = jax.jit(jax.vmap(fn))
    out = []
    for args in calls:
        try:
            result, _ = call_student(wrapped, tuple(args), name=_name(fn))
        except CheckFailure as failure:
            out.append({"problem": str(failure).splitlines()[0]})
            continue
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            out.append({"problem": f"returned {describe_value(result)}, not (err, value)"})
            continue
        err, value = result
        if not hasattr(err, "get") or not hasattr(err, "throw"):
            out.append({"problem": f"returned ({describe_value(err)}, ...): the first "
                                   "element is not a checkify Error"})
            continue
        out.append({"error": _error_text(err), "value": np.asarray(value)})
    return out


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def split_mapped_errors(text: str | None) -> dict[int, str]:
    """``{mapped index: message}`` from a vmapped checkify error.

    >>> split_mapped_errors("at mapped index 1: division by zero\\nat mapped index 3: x")
    {1: 'division by zero', 3: 'x'}
    """
    if not text:
        return {}
    found = {}
    for line in text.splitlines():
        m = _MAPPED.match(line)
        if m:
            found[int(m.group(1))] = line[m.end():]
    return found


def explain_checkify_errors(observed: list[dict], expected: list, *, name: str,
                            labels: Sequence[str] | None = None, vmap: bool = False,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> str | None:
    """Each case must report an error containing its expected text, or no error (None).

    With ``vmap=True``, ``observed`` holds the one batched call and ``expected[i]`` is
    what mapped index ``i`` must report.

    >>> ok = [{"error": None, "value": 1.0}, {"error": "division by zero", "value": 0.0}]
    >>> explain_checkify_errors(ok, [None, "division by zero"], name="f") is None
    True
    >>> print(explain_checkify_errors(ok, [None, "out-of-bounds"], name="f",
    ...                               labels=["valid", "label 5 of 5 classes"]))
    f did not report the expected error for 1 of 2 inputs
      expected: an error containing 'out-of-bounds' for label 5 of 5 classes
      got:      'division by zero'
      likely cause: that check is not enabled: checkify.checkify(f) alone functionalizes only checkify.check calls
      fix: pass errors=checkify.all_checks (or the union of the sets you need) to checkify.checkify
    """
    labels = list(labels or [f"input {i + 1}" for i in range(len(expected))])
    if vmap:
        call = observed[0]
        if "problem" in call:
            return _problem_message(name, call["problem"], "the vmapped call", section)
        per_index = split_mapped_errors(call["error"])
        got = [{"error": per_index.get(i), "value": None} for i in range(len(expected))]
        if call["error"] and not per_index:
            got = [{"error": call["error"], "value": None} for _ in expected]
    else:
        got = observed
    bad = []
    for i, (obs, want) in enumerate(zip(got, expected)):
        if "problem" in obs:
            return _problem_message(name, obs["problem"], labels[i], section)
        text = obs["error"]
        if want is None and text is not None:
            bad.append((i, "no error", repr(text), "false"))
        elif want is not None and (text is None or want not in text):
            bad.append((i, f"an error containing {want!r}",
                        "no error" if text is None else repr(text), "missing"))
    if not bad:
        return None
    i, exp_text, got_text, kind = bad[0]
    where = " under jax.vmap" if vmap else ""
    details = [f"{labels[j]}: expected {e}, got {g}" for j, e, g, _ in bad[1:]]
    if kind == "false":
        cause = ("a check fires on valid input: an off-by-one bound (`> 0` where `>= 0` "
                 "is meant) or a check on the wrong value")
        default_fix = "make each check true exactly on the inputs the docstring allows"
    else:
        cause = ("that check is not enabled: checkify.checkify(f) alone functionalizes "
                 "only checkify.check calls")
        default_fix = ("pass errors=checkify.all_checks (or the union of the sets you need) "
                       "to checkify.checkify")
        if want_is_user(expected[i]):
            cause = ("the user check is missing or its message differs: JAX cannot know "
                     "that a negative label is wrong (negative indices wrap around)")
            default_fix = f"add checkify.check(..., {expected[i]!r}) before the gather"
    return format_failure(
        f"{name} did not report the expected error{where} for {len(bad)} of "
        f"{len(expected)} inputs",
        expected=f"{exp_text} for {labels[i]}", got=got_text, details=details,
        cause=hint or cause, fix=fix or default_fix, section=section)


_AUTOMATIC = ("out-of-bounds", "division by zero", "nan generated")


def want_is_user(want: Any) -> bool:
    """Whether an expected error text is a user check (not an automatic one)."""
    return isinstance(want, str) and not any(want.startswith(a) for a in _AUTOMATIC)


def _problem_message(name: str, problem: str, where: str, section: str | None) -> str:
    return format_failure(
        f"{name} could not be checked on {where}: {problem}",
        cause="the function must return (err, value), with err the Error that "
              "checkify.checkify(f, errors=...)(...) returns, and run under jax.jit",
        fix="return checkify.checkify(inner, errors=...)(args...) and never call "
            "err.throw() inside the function",
        section=section)


def assert_checkify_errors(fn: Callable, cases: Sequence[Sequence], expected: Sequence, *,
                           labels: Sequence[str] | None = None, vmap: bool = False,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None, name: str | None = None) -> list[dict]:
    """Asserts that ``jax.jit(fn)`` returns ``(err, value)`` whose error names each case.

    Args:
      fn: the student's function; it returns ``(err, value)`` from ``checkify``.
      cases: argument tuples.
      expected: per case, ``None`` (no error) or a text the error message must contain
        (``"out-of-bounds"``, ``"division by zero"``, ``"nan generated"``, or the
        message of a user check).
      labels: how messages name each case (default ``input 1``, ...).
      vmap: run all cases as one ``jax.vmap`` call instead.

    Returns:
      What :func:`collect_checkify_errors` observed.

    >>> import jax.numpy as jnp
    >>> from jax.experimental import checkify
    >>> def first_over(x, i):
    ...     return checkify.checkify(lambda x, i: 1.0 / x[i],
    ...                              errors=checkify.all_checks)(x, i)
    >>> x = jnp.array([1.0, 0.0])
    >>> _ = assert_checkify_errors(first_over, [(x, 0), (x, 1), (x, 2)],
    ...                            [None, "division by zero", "out-of-bounds"])
    """
    __tracebackhide__ = True
    label = name or _name(fn)
    observed = collect_checkify_errors(fn, cases, vmap=vmap)
    message = explain_checkify_errors(observed, list(expected), name=label, labels=labels,
                                      vmap=vmap, section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    return observed


# ------------------------------------------------------------------- debug callbacks

def collect_callback_log(make: Callable, fn: Callable, inputs: Sequence, *,
                         transform: str = "jit") -> dict:
    """Builds ``g = make(fn, log)`` with a fresh list ``log`` and runs ``g`` on each input.

    ``transform`` is ``"eager"`` (plain calls), ``"jit"`` (one ``jax.jit(g)``, called
    on each input) or ``"vmap"`` (``jax.jit(jax.vmap(g))`` on the stacked inputs).
    Waits for pending callbacks (``jax.effects_barrier``) before reading the log.

    Returns ``{"entries": [...], "outputs": [...]}``: each log entry as a float, or as
    a description when it is not a number (a tracer, a list); the outputs of ``g``.

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
    g, captured = call_student(make, (fn, log), name=f"{_name(make)}(fn, log)")
    report_captured(captured, _name(make))
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
    for call, args in runs:
        out, captured = call_student(call, args, name=f"{transform} of the wrapped function")
        report_captured(captured, _name(make))
        outputs.append(np.asarray(out))
    jax.effects_barrier()
    return {"entries": [_entry(v) for v in log], "outputs": outputs}


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
    observed = collect_callback_log(make, fn, inputs, transform=transform)
    message = explain_callback_log(observed, expected, name=label, transform=transform,
                                   section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
    return observed
