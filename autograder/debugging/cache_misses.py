"""JAX's cache-miss explanations, collected by the student's code.

:func:`assert_cache_miss_report` runs a student's ``fn(target, calls)``, which must
return the messages JAX logs on the ``"jax"`` logger with ``jax_explain_cache_misses``
on, and compares them with the ones JAX logs for the same calls of another new
target, on what is stable (the ``*`` lines that say what changed, and "never seen
function"), not on call sites, object ids or file names.

The messages are values the student's function returned; the stderr it let through,
the flags and the logger's handlers before and after the call are *in-process
facts* (they exist only in the process that ran it). All are observed there as plain
data (the raw messages, capped) and reduced to their stable lines by the pure
:func:`explain_cache_miss_report`, outside; the expected messages come from the
reference run.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import format_failure, safe_error_type
from autograder.debugging.flags import collect_flags, restore_flags
from autograder.core.quiet import quiet
from autograder.jit.recompiles import MISS_MARK, _jax_log_records, stable_miss_lines


# The expected side of a raising check: ``RAISES + type name`` of what the calls raise.
RAISES = "raises:"


def collect_raised(make_target: Callable, calls: Sequence) -> list[str]:
    """``[RAISES + name]`` of the error the calls of a new target raise (``[]`` if none).

    >>> import jax.numpy as jnp
    >>> collect_raised(lambda: (lambda v: v + 1), [(jnp.ones(2),), ("text",)])
    ['raises:TypeError']
    """
    target = make_target()
    with quiet():
        try:
            for args in calls:
                target(*args)
        except Exception as err:  # noqa: BLE001 - what it raised is the fact
            return [RAISES + type(err).__name__]
    return []


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
    return [m[:20_000] for m in messages if MISS_MARK in m][:200]


def _logger_state(logger: logging.Logger) -> dict:
    return {"level": logging.getLevelName(logger.level), "propagate": bool(logger.propagate),
            "disabled": bool(logger.disabled)}


def _loggers() -> list:
    return [logging.getLogger()] + [
        v for v in list(logging.Logger.manager.loggerDict.values())
        if isinstance(v, logging.Logger)]


def _handlers() -> dict:
    """``{id(logger): handlers}`` of the root logger and every named one."""
    return {id(lg): list(lg.handlers) for lg in _loggers()}


def _new_handlers(before: dict) -> list:
    """``[(logger, handler)]`` added since ``before`` (:func:`_handlers`)."""
    return [(lg, h) for lg in _loggers() for h in list(lg.handlers)
            if h not in before.get(id(lg), [])]


# The state a caller may have set before the call (``prior=True``): the flag already on
# and the 'jax' logger at WARNING (propagation stays on: a correct answer may collect the
# records on the root logger). Put back to these, not to the defaults.
PRIOR = {"flag": True, "level": logging.WARNING}


def collect_cache_miss_report(fn: Callable, target: Callable, calls: Sequence,
                              prior: bool = False) -> dict:
    """Runs the student's ``fn(target, calls)``; returns plain data about it.

    ``{"messages": [str], "stderr": [lines], "flags_before": {...}, "flags_after": {...},
    "handlers_left": [names], "logger_before": {...}, "logger_after": {...},
    "raised": name or ""}`` (and ``"problem"`` when the result is not a list of
    strings). Whether the call returned or raised, what it left is read, then put back:
    flags, handlers, the logger's level and propagation. ``prior``: the call starts
    from :data:`PRIOR` instead of the defaults (a function that resets to the defaults
    instead of to what it found leaves that changed).
    """
    logger = logging.getLogger("jax")
    saved = (logger.level, logger.propagate, logger.disabled)
    outer = collect_flags()
    if prior:
        restore_flags({"jax_explain_cache_misses": PRIOR["flag"]})
        logger.setLevel(PRIOR["level"])
    before = collect_flags()
    handlers = _handlers()  # of every logger: a handler may be left on the root one too
    state = _logger_state(logger)
    result, raised = None, ""
    try:
        with quiet() as captured:
            try:
                result = call(fn, (target, list(calls)))
            except Exception as err:  # noqa: BLE001 - raising is part of the contract
                if type(err).__name__ == "NotAFunction" or isinstance(err, NotImplementedError):
                    raise  # the usual messages: not a function, not implemented yet
                raised = type(err).__name__
        after = collect_flags()
        extra = [f"{type(h).__name__}" + ("" if where is logger else
                                          f" on the {where.name or 'root'} logger")
                 for where, h in _new_handlers(handlers)]
        state_after = _logger_state(logger)
    finally:
        restore_flags(outer)
        for where, h in _new_handlers(handlers):  # leave the loggers as they were
            where.removeHandler(h)
        logger.level, logger.propagate, logger.disabled = saved
    data = {"stderr": [line[:500] for line in captured.summary(limit=5)],
            "flags_before": before, "flags_after": after, "messages": [],
            "handlers_left": extra, "logger_before": state, "logger_after": state_after,
            "raised": raised}
    if raised:
        return data
    if not isinstance(result, (list, tuple)) or not all(isinstance(m, str) for m in result):
        data["problem"] = f"returned {_short(result)}, not a list of strings"
    else:
        data["messages"] = [m[:20_000] for m in result[:200]]
    return data


def explain_cache_miss_report(observed: dict, expected: list[str], *, name: str,
                              section: str | None = None, hint: str | None = None,
                              fix: str | None = None, raising: bool = False) -> str | None:
    """Compares the tracing-cache-miss explanations, one by one; stderr must stay
    empty, the flags and the 'jax' logger as they were. With ``raising``, a call
    raises: so must the function, leaving everything as it was all the same.

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
    raised = observed.get("raised") or ""
    if raised and not raising:
        # Python's and JAX's exception names only: a class of the student's could be
        # named anything (see the threat model in docs/grading.md).
        return format_failure(f"{name} raised {safe_error_type(raised)}", section=section,
                              fix="run the exercise's 'try it' cell to reproduce the error")
    if raising and not raised:
        return format_failure(
            f"{name} returned although one of the calls raised",
            expected="the call's error to reach the caller", got="a return value",
            cause="an except clause that swallows the error",
            fix="let the error propagate: put the clean-up in a `finally:` block, not in "
                "an `except:`", section=section)
    own = [w[len(RAISES):] for w in expected if w.startswith(RAISES)]
    if raising and own and raised != own[0]:
        return format_failure(
            f"{name} raised {safe_error_type(raised)}, not the call's own error",
            expected=f"the {safe_error_type(own[0])} the call raised",
            got=safe_error_type(raised),
            cause="an except clause that raises another error in place of the call's",
            fix="let the call's error propagate: put the clean-up in a `finally:` block",
            section=section)
    when = " after a call that raised" if raising else ""
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
            f"{name} left a handler on a logger{when}",
            expected="every logger's handlers as before the call",
            got=f"{len(observed['handlers_left'])} more: {observed['handlers_left']}",
            cause=hint or "the handler is added but never removed, so every later JAX log "
                          "record goes to it too",
            fix=fix or "remove it in a `finally:` block: logger.removeHandler(handler)",
            section=section)
    # State left changed: the logger's own settings, then JAX's flags.
    for what, before, after, cause, how in (
            ("the 'jax' logger's {}", observed.get("logger_before") or {},
             observed.get("logger_after") or {},
             "the logger is set up for the calls and not put back",
             "save what you change and put it back in a `finally:` block (a handler of "
             "your own needs no change of level or propagation)"),
            ("{}", observed["flags_before"], observed["flags_after"],
             "jax.config.update(...) without putting the old value back",
             "make the calls inside `with jax.explain_cache_misses(True):`")):
        moved = [k for k in sorted(set(before) | set(after)) if after.get(k) != before.get(k)]
        if moved:
            return format_failure(
                f"{name} left {what.format(' and '.join(moved))} changed{when}",
                expected=", ".join(f"{k}={before.get(k)!r}" for k in moved),
                got=", ".join(f"{k}={after.get(k)!r}" for k in moved),
                cause=hint or cause, fix=fix or how, section=section)
    if raising:
        return None
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
                             fix: str | None = None, name: str | None = None,
                             raising: bool = False, prior: bool = False) -> dict:
    """Asserts ``fn(target, calls)`` returns the cache-miss explanations JAX logs.

    The expected explanations are JAX's own, logged for the same calls on another new
    target. ``make_target()`` must build a new jitted function each time (a function
    defined inside it), so that both start from an empty cache. Always: nothing on
    stderr, and JAX's flags and the ``"jax"`` logger (handlers, level, propagation)
    as they were. ``raising=True``: one of ``calls`` raises, and ``fn`` must let the
    error through with everything put back all the same. ``prior=True``: the flag is on
    and the logger at WARNING before the call, and must be so after it (put back, not
    reset to the defaults).

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
    return run(Check("cache_miss_report", label,
                     observe=lambda: collect_cache_miss_report(fn, make_target(), calls,
                                                               prior=prior),
                     observe_as="facts",
                     expect=(lambda: collect_raised(make_target, calls)) if raising else (
                         lambda: collect_jax_explanations(make_target, calls)),
                     expect_as="facts",
                     params=dict(section=section, hint=hint, fix=fix, raising=bool(raising))))


@explainer("cache_miss_report")
def _explain(observed, expected, *, label: str, section=None, hint=None, fix=None,
             raising: bool = False, **_ignored) -> str | None:
    facts, want = observed.facts, expected.facts
    if not isinstance(facts, dict) or not isinstance(want, list):
        raise ValueError("a cache-miss report that is not a JSON object")
    return explain_cache_miss_report(facts, [str(m) for m in want], name=label,
                                     section=section, hint=hint, fix=fix,
                                     raising=bool(raising))

