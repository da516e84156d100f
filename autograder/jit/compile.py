"""Counting compilations, and saying why a function compiled again.

JAX reports every trace and every XLA compilation through the public
``jax.monitoring`` listeners (events ``/jax/core/compile/jaxpr_trace_duration`` and
``/jax/core/compile/backend_compile_duration``, each with the function's name).
:func:`collect_compilations` listens for them; :func:`assert_compiles_at_most` calls a
function on a list of inputs and, when it compiled too often, compares the inputs of
the calls that compiled with those before them: a new shape, dtype or weak type, a new
static value, or nothing at all (then the function object itself was new).

Eager operations compile too (``jnp.ones(3)`` compiles a small ``broadcast`` once
per shape), so create inputs before counting.

The listeners live in the process that runs the student's code. So
:func:`assert_compiles_at_most` also records the function exported at each call
(``compiled_programs``), and the program judge, which runs no student code, hashes
each program without its source locations: every distinct program needs a
compilation of its own, a floor that the process cannot lower. It catches a static
argument that should be traced and a new input type; a new ``jax.jit`` object per
call compiles an identical program again, which only the listeners see.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.core.tracing import is_jit_function
from autograder.jit.call_diffs import CAUSE, FIX, call_inputs, differences, split_call
from autograder.core.feedback import describe_value, format_failure
from autograder.programs.artifacts import (Programs, explain_values_tie, program_facts,
                                           program_sides, programs_of)

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@dataclasses.dataclass
class Compilations:
    """What :func:`collect_compilations` saw: XLA compilations and traces.

    Attributes:
      names: the name of each compiled computation, in order (``"step"`` for
        ``jax.jit(step)``; eager operations show as their primitive, e.g. ``"sin"``).
      traces: the name of each function traced to a jaxpr, in order.
    """

    names: list[str] = dataclasses.field(default_factory=list)
    traces: list[str] = dataclasses.field(default_factory=list)

    @property
    def count(self) -> int:
        """The number of XLA compilations."""
        return len(self.names)

    @property
    def trace_count(self) -> int:
        """The number of traces (Python runs of a jitted function's body)."""
        return len(self.traces)


def _strip_jit(name: str) -> str:
    # "jit(step)" -> "step"; other wrappers (pmap(...)) are kept as they are.
    while name.startswith("jit(") and name.endswith(")"):
        name = name[4:-1]
    return name


@contextlib.contextmanager
def collect_compilations() -> Iterator[Compilations]:
    """Counts the XLA compilations (and traces) that happen inside the block.

    Yields:
      A :class:`Compilations` record, filled while the block runs: ``.count`` and
      ``.names`` for compilations, ``.trace_count`` and ``.traces`` for traces.

    >>> import jax, jax.numpy as jnp
    >>> x, y = jnp.ones(3), jnp.ones(4)       # create inputs first: eager ops compile
    >>> def double(v):
    ...     return v * 2
    >>> f = jax.jit(double)
    >>> with collect_compilations() as seen:
    ...     _ = f(x); _ = f(x); _ = f(y)
    >>> seen.count, seen.names
    (2, ['double', 'double'])
    """
    import jax.monitoring as monitoring

    record = Compilations()

    def listener(event: str, duration: float, **kwargs: Any) -> None:
        del duration
        name = _strip_jit(str(kwargs.get("fun_name", "?")))
        if event == COMPILE_EVENT:
            record.names.append(name)
        elif event == TRACE_EVENT:
            record.traces.append(name)

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield record
    finally:
        monitoring.unregister_event_duration_listener(listener)




def assert_compiles_at_most(fn: Callable, calls: Sequence, max_compilations: int, *,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None, name: str | None = None) -> Compilations:
    """Calls ``fn`` on each input in ``calls`` and asserts it compiled at most N times.

    When it compiled more often, the message names, for each call that compiled after
    the first, what changed since the earlier calls: a shape, a dtype, a weak type
    (Python scalar against array), a static value, the pytree structure, or nothing
    about the inputs (then the function object itself was new: ``jax.jit`` of a
    lambda or of a function defined inside the call).

    Args:
      fn: the function to call (usually the student's jitted function, or a function
        that calls one).
      calls: a list of inputs, one per call: an argument tuple ``(x, y)``, or an
        ``(args, kwargs)`` pair ``((x,), {"n": 3})``. Create the arrays before: eager
        operations compile too.
      max_compilations: the most XLA compilations allowed over all the calls.
      section, hint, fix: the section to reread; a likely cause and a fix that replace
        the ones derived from what changed.
      name: how the message names ``fn`` (default: its ``__name__``).

    Returns:
      The facts counted: ``{"count": ..., "names": [...], ...}``.

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones(3)
    >>> def scale(v):
    ...     return 2 * v
    >>> step = jax.jit(scale)
    >>> _ = assert_compiles_at_most(step, [(x,), (x,), (x,)], 1)
    >>> def fresh(v):
    ...     return jax.jit(lambda u: 2 * u)(v)
    >>> assert_compiles_at_most(fresh, [(x,), (x,), (x,)], 1)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: fresh compiled 3 times over 3 calls
      expected: at most 1 compilation
      got:      3 compilations: call 1: <lambda>; call 2: <lambda>; call 3: <lambda>
      call 2: same input shapes, dtypes and static values as call 1, yet it compiled again
      call 3: same input shapes, dtypes and static values as call 1, yet it compiled again
      likely cause: nothing about the inputs changed, so the function being compiled was a new object each time: `jax.jit(lambda ...)`, `jax.jit(f)` of a function defined inside the call, or a `functools.partial` made per call, misses JAX's cache, which is keyed on the function
      fix: create the jitted function once, outside the loop or function (at module level, or with @jax.jit on the def), and call it
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    teach = dict(max_compilations=max_compilations, section=section, hint=hint, fix=fix)
    # The count again from programs, where the student's code cannot reach it: each
    # call's program, exported here before the calls (which may donate their inputs),
    # is derived by the judge. Each distinct program needs a compilation of its own, so
    # their number is a floor under the count the listeners give in this process: a
    # static argument that should be traced (a new constant per value) or a new input
    # type shows there whatever this process reports. Judged after the count, whose
    # message names the argument that changed.
    exported = _exported_ahead(fn, calls)
    counted = run(Check("compiles_at_most", label,
                     observe=lambda: collect_compile_facts(fn, calls, label),
                     observe_as="facts",
                     params=teach,
                     returns=lambda facts: Compilations(
                         names=[n for names in facts["names"] for n in names])))
    if isinstance(exported, Programs):
        observe, expect = program_sides(lambda: exported)
        run(Check("compiled_programs", label, observe=observe, expect=expect,
                  observe_as="artifact", expect_as="artifact", params=teach))
    else:  # the count judges alone what could not be exported (a host callback)
        run(Check("compiled_programs", label, observe=lambda: {"exported": exported},
                  observe_as="facts", params=teach))
    return counted


def _exported_ahead(fn: Callable, calls: Sequence) -> "Programs | str":
    """``fn`` exported at each call now (quietly), or why it could not be (a stub, a
    host callback: the calls themselves then say what is wrong)."""
    from autograder.core.quiet import quiet

    try:
        with quiet():
            return programs_of(*((fn, *split_call(c)) for c in calls))
    except Exception as err:  # noqa: BLE001 - any failure leaves the floor unknown
        return f"{type(err).__name__}: {str(err)[:200]}"


def collect_compile_facts(fn: Callable, calls: Sequence, label: str) -> dict:
    """Calls ``fn`` on each input (counting XLA compilations) and says why each
    compilation after the first happened: plain data for :func:`explain_compiles_at_most`."""
    import jax

    specs = [split_call(c) for c in calls]
    inputs, per_call = [], []
    for args, kwargs in specs:
        inputs.append(call_inputs(fn, args, kwargs))
        with collect_compilations() as seen:
            out = call(fn, args, kwargs)
            with contextlib.suppress(Exception):
                jax.block_until_ready(out)
        per_call.append(seen)
    compiled = [i for i, seen in enumerate(per_call) if seen.count]
    details, kinds = [], []
    # Several programs in one call: eager operations (each jnp call outside jit is its
    # own small program) or several separately jitted pieces.
    several = [i for i in compiled if per_call[i].count > 1]
    if several:
        kinds.append("several programs")
        i = several[0]
        details.append(f"call {i + 1} alone compiled {per_call[i].count} programs "
                       f"({', '.join(dict.fromkeys(per_call[i].names))})")
    for i in compiled:
        if i == 0:
            continue
        diffs_by_call = [(j, differences(inputs[j], inputs[i])) for j in range(i)]
        same = [j for j, d in diffs_by_call if not d]
        if same:
            kinds.append("fresh function")
            details.append(f"call {i + 1}: same input shapes, dtypes and static values as "
                           f"call {same[0] + 1}, yet it compiled again")
            continue
        j, diffs = min(diffs_by_call, key=lambda jd: (len(jd[1]), jd[0]))
        if not several:  # eager programs compile per new value too: no static-value story
            kinds.extend(k for k, _ in diffs)
        details.append(f"call {i + 1} differs from call {j + 1} in "
                       + "; ".join(text for _, text in diffs))
    return {"count": sum(s.count for s in per_call), "calls": len(specs),
            "names": [list(s.names) for s in per_call], "details": details,
            "reasons": list(dict.fromkeys(kinds))}


@explainer("compiles_at_most")
def explain_compiles_at_most(observed, expected, *, label: str, max_compilations: int,
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None, **_ignored) -> str | None:
    """The verdict on counted compilations (facts from :func:`collect_compile_facts`)."""
    facts = observed.facts
    count = facts.get("count") if isinstance(facts, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        return format_failure(f"{label}: the grader could not count the compilations")
    if count <= max_compilations:
        return None
    names = facts.get("names", [])
    got = "; ".join(f"call {i + 1}: {', '.join(map(str, n))}" for i, n in enumerate(names) if n)
    reasons = [r for r in facts.get("reasons", []) if r in CAUSE]
    cause = hint or "; and ".join(CAUSE[k] for k in reasons) or (
        "each compilation is a separate XLA program")
    default_fix = "; and ".join(FIX[k] for k in reasons) or (
        "wrap the whole computation in one jax.jit, created once, and reuse it")
    return format_failure(
        f"{label} compiled {count} times over {facts.get('calls')} calls",
        expected=f"at most {max_compilations} compilation{'s' if max_compilations != 1 else ''}",
        got=f"{count} compilations: {got}", details=[str(d) for d in facts.get("details", [])],
        cause=cause, fix=fix or default_fix, section=section)


@explainer("compiled_programs")
def explain_compiled_programs(observed, expected, *, label: str, max_compilations: int,
                              section: str | None = None, hint: str | None = None,
                              fix: str | None = None, **_ignored) -> str | None:
    """The floor on the compilations: distinct programs among the calls' programs.

    Programs that could not be exported or judged (a stub, a host callback) count for
    nothing here: the compilations counted where the calls ran judge those.
    """
    if observed.kind != "facts" or not isinstance(observed.facts, list):
        return None  # not exported: the count alone (an error never reaches here)
    facts = program_facts(observed)
    usable = [i for i, f in enumerate(facts) if isinstance(f, dict) and f.get("digest")
              and not f.get("error") and not f.get("refused")]
    theirs = getattr(expected, "outputs", ()) if expected is not None else ()
    for i in usable:  # each program is one of the graded function, on that call's inputs
        if i < len(theirs) and i < len(observed.outputs) and theirs[i].leaves:
            message = explain_values_tie(observed.outputs[i], theirs[i], label=label,
                                         section=section)
            if message:
                return message
    first: dict[str, int] = {}
    for i in usable:
        first.setdefault(facts[i]["digest"], i)
    if len(first) <= max_compilations:
        return None
    details = []
    for digest, i in list(first.items())[1:]:
        j = next(iter(first.values()))
        same_inputs = facts[i].get("in_avals") == facts[j].get("in_avals")
        details.append(
            f"call {i + 1} gives another program than call {j + 1}" + (
                ", with the same inputs: a value is compiled into it as a constant"
                if same_inputs else
                f": its inputs are {', '.join(map(str, facts[i].get('in_avals', [])))}, "
                f"not {', '.join(map(str, facts[j].get('in_avals', [])))}"))
    baked = any("same inputs" in d for d in details)
    return format_failure(
        f"{label} needs {len(first)} different programs for {len(facts)} calls",
        expected=f"at most {max_compilations} program{'s' if max_compilations != 1 else ''} "
                 f"(each distinct program is compiled once)",
        got=f"{len(first)} distinct programs", details=details,
        cause=hint or ("an argument that changes between the calls is static (jit compiles "
                       "its value into the program), or a Python number is closed over"
                       if baked else "the calls pass inputs of other shapes or dtypes"),
        fix=fix or ("make the argument traced: drop it from static_argnums/static_argnames "
                    "and pass it as an argument" if baked else
                    "keep the inputs' shapes and dtypes fixed across calls"),
        section=section)


def assert_jitted(fn: Any, *, name: str | None = None, section: str | None = None,
                  hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``fn`` is a function made by ``jax.jit`` (it has ``.lower``, ``.trace``).

    A plain Python function that calls jitted pieces, or runs ``jnp`` operations
    eagerly, gives the same values but is dispatched op by op.

    >>> import jax
    >>> def double(x):
    ...     return 2 * x
    >>> assert_jitted(jax.jit(double))
    >>> assert_jitted(double)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: double is not a jitted function
      expected: a function made by jax.jit (it has .lower and .trace)
      got:      a plain function
      likely cause: the def is not decorated with jax.jit (or jax.jit is applied inside the function, on every call)
      fix: decorate the def with @jax.jit, or @functools.partial(jax.jit, static_argnames=...) when it has static arguments
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    run(Check("jitted", label, observe=lambda: {"jitted": is_jit_function(fn),
                                                "got": (f"a plain {type(fn).__name__}"
                                                        if callable(fn) else describe_value(fn))},
              observe_as="facts", params=dict(section=section, hint=hint, fix=fix)))


@explainer("jitted")
def explain_jitted(observed, expected, *, label: str, section: str | None = None,
                   hint: str | None = None, fix: str | None = None, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("jitted") is True:
        return None
    return format_failure(
        f"{label} is not a jitted function",
        expected="a function made by jax.jit (it has .lower and .trace)",
        got=str(facts.get("got", "something else")),
        cause=hint or "the def is not decorated with jax.jit (or jax.jit is applied inside "
                      "the function, on every call)",
        fix=fix or "decorate the def with @jax.jit, or @functools.partial(jax.jit, "
                   "static_argnames=...) when it has static arguments",
        section=section)
