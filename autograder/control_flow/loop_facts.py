"""Loops that stay loops: a compiled loop holds one copy of its body, not one per step.

A Python ``for`` loop runs while JAX traces, so the program holds one copy of the
body per step; ``scan(unroll=True)`` copies it when it is lowered. ``lax.fori_loop``
and ``lax.scan`` lower to one ``stablehlo.while`` holding one body.

Where the facts come from:

- **exported program** (derived outside the student's process): the number of
  ``stablehlo.while`` ops and of copies of the body's characteristic op. This fact
  decides the verdict: an unrolled loop fails here whatever else was recorded.
- **in-process**: whether the *jaxpr* holds a ``scan`` or ``while``. Only the jaxpr
  tells a Python loop (unrolled while tracing) from ``unroll=True`` (unrolled while
  lowering): both give the same program. It decides which message teaches.
"""
from __future__ import annotations

from typing import Callable, Sequence

from autograder.programs.artifacts import (TIE_TOLERANCE, as_arrays, explain_program,
                                   export_program, program_facts, program_sides,
                                   programs_of, static_facts)
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.programs.jaxpr import count_primitives, make_jaxpr_of
from autograder.control_flow.jit_compat import _bind_static
from autograder.programs.region_work import explain_region_work
from autograder.core.tracing import explain_jit_error

# Characteristic jaxpr primitives and the StableHLO op each lowers to, for the
# "one body, not N copies" count. Anything else is looked up under its own name.
_STABLEHLO_NAME = {
    "sin": "sine", "cos": "cosine", "exp": "exponential", "log": "log",
    "tanh": "tanh", "logistic": "logistic", "mul": "multiply", "add": "add",
    "sub": "subtract", "div": "divide", "dot_general": "dot_general",
    "sqrt": "sqrt", "max": "maximum", "min": "minimum", "neg": "negate",
}
_LOOP_PRIMITIVES = ("scan", "while")
# Computing operations a program may gain when its step count doubles (a real loop
# gains none: only a constant changes).
GROWTH_ALLOWED = 2
# Not computation: function boundaries, region terminators, constants.
_STRUCTURAL = {"func.func", "func.return", "stablehlo.return", "stablehlo.constant"}


def _hlo_op(body_op: str) -> str:
    return _STABLEHLO_NAME.get(body_op, body_op)


def program_loop_facts(ops: dict, body_op: str | None = None) -> dict[str, int]:
    """Loop facts of a program's op counts (``static_facts(...)["ops"]``).

    >>> program_loop_facts({"stablehlo.while": 1, "stablehlo.sine": 1,
    ...                     "stablehlo.constant": 3}, "sin")
    {'stablehlo_while': 1, 'stablehlo_ops': 2, 'stablehlo_body_op': 1}
    """
    facts = {"stablehlo_while": int(ops.get("stablehlo.while", 0)),
             "stablehlo_ops": sum(int(n) for op, n in ops.items() if op not in _STRUCTURAL)}
    if body_op is not None:
        facts["stablehlo_body_op"] = int(ops.get(f"stablehlo.{_hlo_op(body_op)}", 0))
    return facts


def _jaxpr_loop_facts(fn: Callable, args: Sequence, body_op: str | None) -> dict[str, int]:
    prims = count_primitives(make_jaxpr_of(fn, args))
    facts = {"jaxpr_loops": sum(prims[p] for p in _LOOP_PRIMITIVES),
             "jaxpr_eqns": sum(prims.values())}
    if body_op is not None:
        facts["jaxpr_body_op"] = prims[body_op]
    return facts


def collect_loop_facts(fn: Callable, args: Sequence = (), *, body_op: str | None = None,
                       static_argnums: Sequence[int] = (),
                       section: str | None = None) -> dict[str, int]:
    """Facts about how ``fn``'s loops are traced and lowered.

    The StableHLO facts are read from the program exported with ``jax.export``, as
    the grader reads them. Errors of ``fn`` propagate (this is a helper, not a check;
    ``section`` is accepted for compatibility).

    Args:
      fn: the function; ``args`` at ``static_argnums`` are closed over (not traced).
      args: the inputs.
      body_op: a jaxpr primitive characteristic of the loop body (``"sin"``,
        ``"tanh"``), counted in the jaxpr and, under its StableHLO name, in StableHLO.
      static_argnums: positions of arguments that stay Python values (a trip count).

    Returns:
      ``{"jaxpr_loops": scan + while equations, "jaxpr_eqns": all equations,
      "jaxpr_body_op": copies of body_op, "stablehlo_while": while ops,
      "stablehlo_ops": all ops but constants and returns, "stablehlo_body_op":
      copies of body_op}``.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def spin(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: jnp.sin(c), x)
    >>> facts = collect_loop_facts(spin, (1.0, 50), body_op="sin", static_argnums=(1,))
    >>> facts["jaxpr_loops"], facts["stablehlo_while"], facts["stablehlo_body_op"]
    (1, 1, 1)
    """
    bound, dyn, _ = _bind_static(fn, args, static_argnums)
    facts = _jaxpr_loop_facts(bound, dyn, body_op)
    exported, _ = export_program(bound, as_arrays(dyn))
    facts.update(program_loop_facts(static_facts(exported.mlir_module())["ops"], body_op))
    return facts


def _doubled(args: Sequence, static_argnums: Sequence[int], trip_count: int):
    """The inputs with twice the steps, or None where none says how many: a static
    int equal to ``trip_count`` doubles, and an array whose leading axis has
    ``trip_count`` entries (a sequence the loop runs over) is repeated to twice that."""
    import jax
    import jax.numpy as jnp

    static = {i % len(args) for i in static_argnums} if args else set()
    changed = False

    def grow(leaf):
        nonlocal changed
        shape = getattr(leaf, "shape", ())
        if len(shape) >= 1 and shape[0] == trip_count:
            changed = True
            return jnp.concatenate([leaf, leaf])
        return leaf

    out = []
    for i, arg in enumerate(args):
        if i in static:
            if type(arg) is int and arg == trip_count:
                arg, changed = 2 * arg, True
            out.append(arg)
        else:
            out.append(jax.tree.map(grow, arg))
    return tuple(out) if changed else None


def assert_compiled_as_loop(fn: Callable, args: Sequence, *, body_op: str,
                            trip_count: int, static_argnums: Sequence[int] = (),
                            max_copies: int | None = None, section: str | None = None,
                            hint: str | None = None, fix: str | None = None):
    """Asserts that ``fn`` runs its loop as a compiled loop, not an unrolled one.

    Two rungs: the jaxpr holds a ``scan`` or ``while`` (``fori_loop`` with static
    bounds becomes ``scan``); and the exported program holds a ``stablehlo.while``
    with at most ``max_copies`` copies of ``body_op`` (default ``trip_count // 2``: a
    small unroll factor passes, full unrolling does not). A Python loop copies the
    body ``trip_count`` times at trace time; ``scan(unroll=True)`` copies it at
    lowering. Whatever ops the steps use: the program exported for twice the steps
    (a static int equal to ``trip_count`` doubled, or the arrays whose leading axis
    has ``trip_count`` entries repeated) holds no more computing operations than for
    ``trip_count`` (an unrolled loop grows, a real one does not), and the work lies
    inside the loop body (:mod:`autograder.programs.region_work`).

    Args:
      fn: the student's function.
      args: inputs for which the loop runs ``trip_count`` steps; those at
        ``static_argnums`` stay Python values (a step count, say).
      body_op: a jaxpr primitive that the loop body uses once or a few times per step
        (``"sin"``, ``"tanh"``); it is counted under its StableHLO name.
      trip_count: how many steps the loop runs for these inputs (make it large, 20+).
      max_copies: the most copies of ``body_op`` allowed in StableHLO.
      section, hint, fix: the section to reread, and overrides of cause and fix.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def spin(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: jnp.sin(c), x)
    >>> assert_compiled_as_loop(spin, (1.0, 40), body_op="sin", trip_count=40,
    ...                         static_argnums=(1,))
    >>> def spin_unrolled(x, n):
    ...     for _ in range(n):
    ...         x = jnp.sin(x)
    ...     return x
    >>> assert_compiled_as_loop(spin_unrolled, (1.0, 40), body_op="sin", trip_count=40,
    ...                         static_argnums=(1,), section="3.1")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: spin_unrolled(x=float 1.0, n=int 40) is not compiled as a loop: its jaxpr has no `scan` or `while`
      expected: one `scan` or `while` whose body runs 40 times
      got:      `sin` appears 40 times in the jaxpr, about once per step: the loop was unrolled while JAX traced it
      likely cause: a Python `for` loop runs while JAX traces, so the program holds one copy of the body per step: compile time and program size grow with the step count
      fix: write one step as a function and run it with lax.fori_loop or lax.scan
      reread: section 3.1
    """
    __tracebackhide__ = True
    label = call_signature(fn, args)
    bound, dyn, _ = _bind_static(fn, args, static_argnums)
    limit = max(1, trip_count // 2) if max_copies is None else max_copies
    teach = dict(body_op=body_op, trip_count=trip_count, limit=limit, section=section,
                 hint=hint, fix=fix)
    run(Check("loop_in_jaxpr", label, observe=lambda: _jaxpr_loop_facts(bound, dyn, body_op),
              observe_as="facts", params=teach))
    calls = [(bound, as_arrays(dyn), None)]
    longer = _doubled(args, static_argnums, trip_count)
    if longer is not None:
        bound2, dyn2, _ = _bind_static(fn, longer, static_argnums)
        calls.append((bound2, as_arrays(dyn2), None))
    observe, expect = program_sides(lambda: programs_of(*calls))
    # The judge perturbs the first program's loop body: is its work alive?
    run(Check("loop_program", label, observe=observe, expect=expect, observe_as="artifact",
              expect_as="artifact", params=dict(teach, liveness="loop")))


@explainer("loop_in_jaxpr", errors=True)
def explain_loop_in_jaxpr(observed, expected, *, label: str, body_op: str, trip_count: int,
                          limit: int, section: str | None = None, hint: str | None = None,
                          fix: str | None = None, **_ignored) -> str | None:
    """A loop primitive in the jaxpr (the student's process traced it)."""
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="when traced", section=section)
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("jaxpr_loops", 0):
        return None
    copies = facts.get("jaxpr_body_op", 0)
    got = (f"`{body_op}` appears {copies} times in the jaxpr, about once per step: the "
           "loop was unrolled while JAX traced it" if copies >= limit else
           f"no loop primitive; `{body_op}` appears {copies} time(s) in the jaxpr")
    return format_failure(
        f"{label} is not compiled as a loop: its jaxpr has no `scan` or `while`",
        expected=f"one `scan` or `while` whose body runs {trip_count} times", got=got,
        cause=hint or "a Python `for` loop runs while JAX traces, so the program holds "
                      "one copy of the body per step: compile time and program size "
                      "grow with the step count",
        fix=fix or "write one step as a function and run it with lax.fori_loop or lax.scan",
        section=section)


@explainer("loop_program", errors=True)
def explain_loop_program(observed, expected, *, label: str, body_op: str, trip_count: int,
                         limit: int, section: str | None = None, hint: str | None = None,
                         fix: str | None = None, **_ignored) -> str | None:
    """One `stablehlo.while` and few copies of the body op, in the exported program."""
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="when lowered to StableHLO",
                                 section=section)
    problem = explain_program(observed, None, label=label, section=section)
    if problem:
        return problem
    facts = program_loop_facts(program_facts(observed)[0].get("ops", {}), body_op)
    hlo_op = _hlo_op(body_op)
    if facts["stablehlo_while"] == 0 or facts["stablehlo_body_op"] > limit:
        return format_failure(
            f"{label} is unrolled when lowered to StableHLO",
            expected=f"a `stablehlo.while` whose body holds at most {limit} `{hlo_op}`",
            got=f"{facts['stablehlo_while']} `stablehlo.while`, {facts['stablehlo_body_op']} "
                f"copies of `{hlo_op}` for {trip_count} steps",
            cause=hint or "`unroll=True` (or a large unroll factor) in lax.scan / "
                          "lax.fori_loop copies the body once per step",
            fix=fix or "drop the `unroll` argument (the default, 1, keeps one body)",
            section=section)
    programs = program_facts(observed)
    if len(programs) > 1:
        sizes = [program_loop_facts(f.get("ops", {}))["stablehlo_ops"] for f in programs[:2]]
        if sizes[1] > sizes[0] + GROWTH_ALLOWED:
            return format_failure(
                f"the program of {label} grows with the number of steps",
                expected=f"the same program for {trip_count} and {2 * trip_count} steps "
                         "(one loop body, run more times)",
                got=f"{sizes[0]} operations for {trip_count} steps, {sizes[1]} for "
                    f"{2 * trip_count}",
                cause=hint or "the steps are written out (a Python loop, or a loop "
                              "unrolled while lowering) beside or instead of the loop",
                fix=fix or "write one step as a function and run it with lax.fori_loop "
                           "or lax.scan",
                section=section)
    problem = explain_region_work(programs[0], "loop", label=label, section=section,
                                  hint=hint, fix=fix)
    if problem:
        return problem
    return explain_program(observed, expected, label=label, section=section, **TIE_TOLERANCE)


def assert_loops_until_settled(fn: Callable, args: Sequence, *, loops: int = 1,
                               name: str | None = None, section: str | None = None,
                               hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that the program of ``fn(*args)`` runs at least ``loops`` loops that stop
    when the values settle: ``stablehlo.while`` loops whose condition computes on floats
    (:func:`autograder.programs.while_trips.while_stops_on_values`). A loop with a fixed
    number of steps (``fori_loop``, ``scan``, a counter and a bound) or a direct solve
    in its place does not count, whatever values it gives. Checked on the program
    exported from ``fn`` (``args`` are traced), run on the grader's inputs.

    >>> import jax, jax.numpy as jnp
    >>> def settle(x):
    ...     return jax.lax.while_loop(lambda c: jnp.abs(c[1] - c[0]) > 1e-6,
    ...                               lambda c: (c[1], jnp.cos(c[1])), (x, jnp.cos(x)))[1]
    >>> assert_loops_until_settled(settle, (jnp.float32(1.0),))
    >>> assert_loops_until_settled(lambda x: jax.lax.fori_loop(0, 99, lambda i, c: jnp.cos(c), x),
    ...                            (jnp.float32(1.0),), name="hundred_steps")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: hundred_steps runs 0 loop(s) that stop when the values settle, expected 1
      expected: 1 `lax.while_loop`(s) whose condition reads the iterates (the number of steps is not known in advance)
      got:      1 while loop(s), none of them stopping on the values
      likely cause: a loop with a fixed number of steps (fori_loop, scan), or a direct solve, in place of iterating until the change is small
      fix: iterate with lax.while_loop, its condition comparing the largest change with the tolerance
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args)
    observe, expect = program_sides(lambda: programs_of((fn, as_arrays(tuple(args)), None)))
    run(Check("loops_until_settled", label, observe=observe, expect=expect,
              observe_as="artifact", expect_as="artifact",
              params=dict(loops=loops, section=section, hint=hint, fix=fix)))


@explainer("loops_until_settled", errors=True)
def explain_loops_until_settled(observed, expected, *, label: str, loops: int,
                                section: str | None = None, hint: str | None = None,
                                fix: str | None = None, **_ignored) -> str | None:
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="when lowered to StableHLO",
                                 section=section)
    problem = explain_program(observed, expected, label=label, section=section,
                              **TIE_TOLERANCE)
    if problem:
        return problem
    stops = program_facts(observed)[0].get("while_stops") or []
    found = sum(1 for s in stops if s)
    if found >= loops:
        return None
    return format_failure(
        f"{label} runs {found} loop(s) that stop when the values settle, expected {loops}",
        expected=f"{loops} `lax.while_loop`(s) whose condition reads the iterates (the "
                 "number of steps is not known in advance)",
        got=f"{len(stops)} while loop(s), {found or 'none'} of them stopping on the values",
        cause=hint or "a loop with a fixed number of steps (fori_loop, scan), or a direct "
                      "solve, in place of iterating until the change is small",
        fix=fix or "iterate with lax.while_loop, its condition comparing the largest "
                   "change with the tolerance",
        section=section)
