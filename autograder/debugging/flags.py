"""Configuration flags in the debugging chapter: observed, judged and put back.

A student who leaves ``jax_debug_nans`` or ``jax_enable_x64`` on changes every later
cell, so the flags are part of what the checks observe. Two checks:

- :func:`assert_flags_at_defaults` (the first line of each test cell) observes the
  flags a solution cell left set, and puts them back before anything else runs;
- :func:`assert_flags_restored` observes the flags before and after a call of the
  student's function (with a setting of the caller's applied first), and puts them
  back whatever the call did.

Both are *in-process facts*: a configuration flag exists only in the process that
runs the student's code, so it is observed there, as plain data, and judged by
:func:`explain_flags` outside. The observation also has a side effect that is not a
judgement: the flags are put back. They are put back again when a test cell ends
(IPython's ``post_run_cell`` in a notebook; :func:`autograder.core.check.at_test_cell_end`
in the grader's runs, where one notebook cell can run several test cells): a flag one
exercise leaves on can change no other exercise, in a student's kernel, in a grading
sandbox or in the grader's candidate harness.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from autograder.core.check import Check, at_test_cell_end, call, explainer, run
from autograder.core.feedback import call_signature, format_failure

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


def _force(name: str, value: Any) -> None:
    """Sets a flag, also when a context manager entered and never exited (a leaked
    ``jax.debug_nans(True).__enter__()``) holds a thread-local value over the global one."""
    import jax

    jax.config.update(name, value)
    if getattr(jax.config, name) == value:
        return
    try:  # private, guarded: only a leaked context manager gets here
        from jax._src import config as _config

        state = _config.config_states[name]
        state.set_local(_config.config_ext.unset)
        hook = getattr(state, "_update_thread_local_hook", None)
        if hook:
            hook(None)
    except Exception:  # noqa: BLE001 - the check then reports the flag as it is
        pass


def restore_flags(values: dict[str, Any]) -> dict[str, Any]:
    """Sets each flag back to ``values[name]`` where it differs; returns what it set."""
    import jax

    changed = {}
    for name, value in values.items():
        if getattr(jax.config, name) != value:
            _force(name, value)
            changed[name] = value
    return changed


def reset_course_flags() -> None:
    """Puts every course flag back to its default (when a test cell ends)."""
    restore_flags(COURSE_FLAGS)


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


def _facts(observed) -> dict:
    facts = observed.facts
    if not isinstance(facts, dict):
        raise ValueError("flags are not a JSON object")
    return facts


def _reset_flags_when_cell_ends() -> None:
    """Puts the course flags back to their defaults when the running cell ends, pass or
    fail, so a check that failed halfway leaves no flag on: in a notebook (IPython's
    ``post_run_cell``) and in the grader's runs (``_check.at_test_cell_end``)."""
    at_test_cell_end(reset_course_flags)
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: nothing runs "after the cell"
        return
    shell = get_ipython()
    if shell is None:
        return

    def reset(result=None):
        del result
        reset_course_flags()
        try:
            shell.events.unregister("post_run_cell", reset)
        except ValueError:
            pass

    shell.events.register("post_run_cell", reset)


def _observe_and_reset() -> dict:
    observed = collect_flags()
    reset_course_flags()
    _reset_flags_when_cell_ends()
    return observed


def assert_flags_at_defaults(*, section: str | None = None, hint: str | None = None,
                             fix: str | None = None) -> None:
    """Puts every course flag back to its default, then fails if one was not there.

    Test cells call it first, so a flag a solution cell left on is reported by its
    own exercise and turned off before any later cell runs. It also turns them off
    again when the test cell ends, whether or not its checks passed: a student's
    function that leaves a flag on cannot break the cells after it.

    >>> assert_flags_at_defaults()
    >>> import jax
    >>> jax.config.update("jax_debug_nans", True)
    >>> assert_flags_at_defaults(section="1.2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: jax_debug_nans was left on when this test cell started
    ...
    >>> jax.config.jax_debug_nans
    False
    """
    __tracebackhide__ = True
    run(Check("flags_at_defaults", "the course's configuration flags",
              observe=_observe_and_reset, observe_as="facts",
              params=dict(defaults=dict(COURSE_FLAGS), section=section,
                          hint=hint or "a solution cell (or a cell you added) set a flag "
                                       "globally with jax.config.update and never put it back",
                          fix=fix or "scope the flag to the code that needs it with its "
                                     "context manager (`with jax.debug_nans(True): ...`); "
                                     "the check has turned it off again")))


@explainer("flags_at_defaults")
def _explain_at_defaults(observed, expected, *, label: str, defaults: dict,
                         section=None, hint=None, fix=None, **_ignored) -> str | None:
    del expected, label
    return explain_flags(_facts(observed), dict(defaults), what="when this test cell started",
                         section=section, hint=hint, fix=fix)


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
      What ``fn`` returned (None when it raised, in a grading run).

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
    autograder.core.feedback.CheckFailure: jax_debug_nans was changed after careless(x=float 1.0) returned
    ...
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    kept: dict = {}

    def observe() -> dict:
        original = collect_flags()
        try:
            restore_flags(setting or {})
            before = collect_flags()
            try:
                kept["result"] = call(fn, args, kwargs)
            finally:
                after = collect_flags()
        finally:
            restore_flags(original)
        return {"before": before, "after": after}

    return run(Check("flags_restored", label, observe=observe, observe_as="facts",
                     params=dict(section=section, hint=hint, fix=fix),
                     returns=lambda facts: kept.get("result")))


@explainer("flags_restored")
def _explain_restored(observed, expected, *, label: str, section=None, hint=None, fix=None,
                      **_ignored) -> str | None:
    del expected
    facts = _facts(observed)
    return explain_flags(dict(facts["after"]), dict(facts["before"]),
                         what=f"after {label} returned", section=section, hint=hint, fix=fix)
