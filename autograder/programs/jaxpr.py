"""Jaxpr inspection: a recursive walk over equations and their sub-jaxprs, and the
checks that a function uses (or avoids) a primitive.

``jnp`` functions appear as nested ``jit`` equations, ``fori_loop`` with static
bounds becomes ``scan``, ``vmap`` of ``cond`` becomes ``select_n``: so every
question ("is ``scan`` used?", "how many ``sin``?") walks into nested jaxprs.

Where the facts come from:

- **in-process** (the student's process traces the function): which *jaxpr*
  primitives it holds. A jaxpr exists only before lowering, and several primitives
  lower to the same StableHLO op (``scan`` and ``while`` both to ``stablehlo.while``,
  ``mul`` and ``integer_pow`` both to ``stablehlo.multiply``), so "``while``, not
  ``scan``" can only be read there. This record gives the teaching message.
- **exported programs** (derived outside the student's process): where the primitive
  always lowers to one StableHLO op (:data:`LOWERS_TO`), the program exported with
  ``jax.export`` must hold that op (``scan``/``while``: ``stablehlo.while``,
  ``cond``: ``stablehlo.case``); where only that primitive lowers to the op
  (:data:`ONLY_FROM`), a program that must avoid the primitive must not hold the op.
  So forging the in-process record gains nothing on those primitives. The program's
  values are not tied to the reference's: a check of a function's form may hold for
  answers that compute different values (an epoch that samples its own batches).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterator, Sequence

from autograder.programs.artifacts import explain_program, program_facts, programs_of
from autograder.core.check import Check, call, explain_error, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.core.numeric import call_student
from autograder.programs.region_work import explain_region_work
from autograder.core.tracing import explain_jit_error

# A jaxpr primitive -> the StableHLO op it always lowers to (so "uses" can be read from
# the exported program). A scan of length 0, or unrolled (unroll=True), has no while.
LOWERS_TO = {"scan": "while", "while": "while", "cond": "case", "sin": "sine",
             "cos": "cosine", "tanh": "tanh", "exp": "exponential", "log": "log",
             "logistic": "logistic", "sqrt": "sqrt", "dot_general": "dot_general",
             "sort": "sort"}
# The StableHLO ops whose regions must hold the work (see autograder.programs.region_work).
_REGION_OF = {"while": "loop", "case": "branch"}
# ... and those no other primitive lowers to (so "no" can be read there too).
ONLY_FROM = {"cond": "case", "sin": "sine", "cos": "cosine", "tanh": "tanh",
             "logistic": "logistic"}


def _sub_jaxprs(params: dict) -> Iterator[Any]:
    import jax.extend.core as jex

    for value in params.values():
        items = value if isinstance(value, (tuple, list)) else (value,)
        for item in items:
            if isinstance(item, jex.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jex.Jaxpr):
                yield item


def iter_eqns(jaxpr) -> Iterator[Any]:
    """Yields every equation of a (closed) jaxpr, nested bodies included.

    >>> import jax, jax.numpy as jnp
    >>> j = jax.make_jaxpr(lambda x: jnp.sum(jnp.sin(x)))(jnp.ones(3))
    >>> sorted({e.primitive.name for e in iter_eqns(j)})
    ['reduce_sum', 'sin']
    """
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in inner.eqns:
        yield eqn
        for sub in _sub_jaxprs(eqn.params):
            yield from iter_eqns(sub)


def count_primitives(jaxpr) -> Counter:
    """Counts primitives by name, walking nested jaxprs (jit, scan, cond, while ...).

    >>> import jax, jax.numpy as jnp
    >>> count_primitives(jax.make_jaxpr(lambda x: jnp.sin(jnp.sin(x)))(1.0))["sin"]
    2
    """
    return Counter(e.primitive.name for e in iter_eqns(jaxpr))


def trace_jaxpr(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                section: str | None = None, static_argnums=()):
    """Traces a student's function to a closed jaxpr, turning errors into feedback.

    A helper for lesson cells and checks that call it directly (it records a ``call``
    check); an ``observe`` uses :func:`make_jaxpr_of` instead.
    """
    __tracebackhide__ = True
    import jax

    kwargs = kwargs or {}
    label = call_signature(fn, args, kwargs)

    def make(*a, **k):
        return jax.make_jaxpr(fn, static_argnums=static_argnums)(*a, **k)

    make.__name__ = f"jax.make_jaxpr({getattr(fn, '__name__', 'fn')})"
    jaxpr, _ = call_student(make, args, kwargs, name=f"tracing {label}", section=section)
    return jaxpr


def make_jaxpr_of(fn: Callable, args: Sequence = (), kwargs: dict | None = None):
    """``observe`` side: the closed jaxpr of ``fn(*args, **kwargs)`` (errors propagate;
    a non-function raises :class:`autograder.core.check.NotAFunction`)."""
    import jax

    if not callable(fn):
        return call(fn)
    return call(jax.make_jaxpr(fn), args, kwargs)


def _primitive_checks(fn, args, kwargs, primitive, want, section, hint, fix) -> None:
    """The two records of a primitive check: the jaxpr (in-process), then the
    exported program where the primitive has a StableHLO counterpart."""
    __tracebackhide__ = True
    label = call_signature(fn, args, kwargs)
    teach = dict(primitive=primitive, want=want, section=section, hint=hint, fix=fix)
    run(Check("jaxpr_primitive", label, observe_as="facts", params=teach,
              observe=lambda: {"counts": dict(count_primitives(make_jaxpr_of(fn, args, kwargs)))}))
    op = (LOWERS_TO if want == "uses" else ONLY_FROM).get(primitive)
    if op is None:
        return
    # Tied to the reference's program by its outputs' layout, not their values: a check
    # of a function's form holds for answers that compute other values (an epoch that
    # samples its batches its own way, judged by the value checks).
    # A loop's or a switch's work is judged alive too: the judge perturbs the operations
    # of the loop body (of each branch, forced in turn).
    run(Check("program_op", label, observe=lambda: programs_of((fn, args, kwargs)),
              observe_as="artifact", params=dict(teach, op=op, tie="layout",
                                                 liveness=_REGION_OF.get(op)
                                                 if want == "uses" else None)))


@explainer("jaxpr_primitive", errors=True)
def explain_jaxpr_primitive(observed, expected, *, label: str, primitive: str, want: str,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None, **_ignored) -> str | None:
    """The verdict on the primitives counted in a jaxpr (``want``: uses or no)."""
    if observed.kind == "error":
        if observed.not_implemented or observed.error_type == "NotAFunction":
            return None
        return (explain_jit_error(observed, label, context="when traced", section=section)
                or explain_error(f"tracing {label}", observed, section=section))
    counts = observed.facts.get("counts") if isinstance(observed.facts, dict) else None
    if not isinstance(counts, dict):
        return format_failure(f"{label}: the grader got no jaxpr", section=section)
    n = counts.get(primitive, 0)
    if want == "uses" and not n:
        return format_failure(f"{label} does not use `{primitive}`",
                              expected=f"at least one `{primitive}` in the jaxpr",
                              got=f"primitives used: {', '.join(sorted(counts)) or 'none'}",
                              cause=hint, fix=fix, section=section)
    if want == "no" and n:
        return format_failure(f"{label} uses `{primitive}`",
                              expected=f"no `{primitive}` in the jaxpr",
                              got=f"{n} `{primitive}` equation(s)",
                              cause=hint, fix=fix, section=section)
    return None


@explainer("program_op")
def explain_program_op(observed, expected, *, label: str, primitive: str, want: str, op: str,
                       section: str | None = None, hint: str | None = None,
                       fix: str | None = None, tie: str = "values",
                       **_ignored) -> str | None:
    """The verdict on the StableHLO counterpart of a primitive in the exported program."""
    problem = explain_program(observed, expected, label=label, section=section, tie=tie)
    if problem:
        return problem
    ops = program_facts(observed)[0].get("ops", {})
    n = int(ops.get(f"stablehlo.{op}", 0))
    shown = f"`stablehlo.{op}`"
    if want == "uses" and not n:
        used = ", ".join(k.split(".", 1)[1] for k, _ in sorted(
            ops.items(), key=lambda kv: -kv[1]) if k.startswith("stablehlo."))
        loop = op == "while"
        return format_failure(
            f"{label} uses `{primitive}` in its jaxpr, but its exported program has no {shown}",
            expected=f"at least one {shown} (what `{primitive}` lowers to)",
            got=f"StableHLO ops: {used[:300] or 'none'}",
            cause=hint or ("the loop was unrolled when it was lowered: `unroll=True` in "
                           "lax.scan / lax.fori_loop copies the body once per step"
                           if loop else f"the compiled program does not contain `{primitive}`"),
            fix=fix or ("drop the `unroll` argument (the default, 1, keeps one loop body)"
                        if loop else None),
            section=section)
    if want == "uses" and op in _REGION_OF:
        return explain_region_work(program_facts(observed)[0], _REGION_OF[op], label=label,
                                   section=section)
    if want == "no" and n:
        return format_failure(
            f"the exported program of {label} has {n} {shown}",
            expected=f"no {shown} (only `{primitive}` lowers to it)", got=f"{n} {shown}",
            cause=hint, fix=fix, section=section)
    return None


def assert_uses_primitive(fn: Callable, args: Sequence, primitive: str, *,
                          kwargs: dict | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None):
    """Asserts that tracing ``fn(*args)`` produces at least one ``primitive``.

    Where the primitive always lowers to one StableHLO op (:data:`LOWERS_TO`: ``scan``
    and ``while`` to ``stablehlo.while``, ``cond`` to ``stablehlo.case``), the program
    exported from ``fn`` must hold that op too (so a fully unrolled ``scan`` fails);
    for loops and branches, the work must lie inside them: at least as many computing
    operations in the loop bodies (the branches) as outside (:mod:`autograder.programs.region_work`:
    a loop that does nothing beside the steps written out fails, whatever their ops).

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def cumsum(xs):
    ...     return lax.scan(lambda c, x: (c + x, c + x), 0.0, xs)[1]
    >>> assert_uses_primitive(cumsum, (jnp.ones(4),), "scan")
    >>> assert_uses_primitive(jnp.cumsum, (jnp.ones(4),), "while")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: cumsum(a=f32[4]) does not use `while`
      expected: at least one `while` in the jaxpr
      got:      primitives used: cumsum, jit
    """
    __tracebackhide__ = True
    _primitive_checks(fn, args, kwargs, primitive, "uses", section, hint, fix)


def assert_no_primitive(fn: Callable, args: Sequence, primitive: str, *,
                        kwargs: dict | None = None, section: str | None = None,
                        hint: str | None = None, fix: str | None = None):
    """Asserts that tracing ``fn(*args)`` produces no ``primitive`` at all.

    Where only this primitive lowers to a StableHLO op (:data:`ONLY_FROM`), the
    exported program must not hold that op either.

    >>> import jax.numpy as jnp
    >>> assert_no_primitive(lambda x: x * 2, (jnp.ones(2),), "sin")
    >>> assert_no_primitive(lambda x: jnp.sin(x) * 2, (jnp.ones(2),), "sin", section="1.1")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: <lambda>(x=f32[2]) uses `sin`
      expected: no `sin` in the jaxpr
      got:      1 `sin` equation(s)
      reread: section 1.1
    """
    __tracebackhide__ = True
    _primitive_checks(fn, args, kwargs, primitive, "no", section, hint, fix)
