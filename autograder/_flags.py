"""Configuration flags in the debugging chapter: collected, judged and put back.

A student who leaves ``jax_debug_nans`` or ``jax_enable_x64`` on changes every later
cell, so the flags are part of what the checks observe. Checks that call student code
put back every course flag it changed; :func:`assert_flags_at_defaults` (the first
line of each test cell) resets flags left on by a solution cell before it reports
them, and, in a notebook, resets them again when the test cell ends.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from autograder._feedback import CheckFailure, call_signature, format_failure
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
