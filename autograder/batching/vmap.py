"""Batching checks: the result matches a Python loop, and no Python loop was used.

A Python loop over a batch unrolls when JAX traces it: the program holds one copy of
the per-example body for every example, so it grows with the batch size. ``jax.vmap``
traces the body once, whatever the batch size. That is the proof used here: the
student's function is exported (``jax.export``) at two batch sizes and the operation
counts of the two programs are compared (never timings, which depend on the machine).
Values are compared with a trusted Python loop over a single-example reference, which
may use plain Python control flow because it runs on concrete numbers.

Where the facts come from:

- values: the student's batched result (a pytree), judged against the loop of the
  reference (the expected side, never computed next to student code when grading);
- "no Python loop over the batch": facts of the exported programs, derived outside
  the student's process: the operation count at each batch size (it must not grow by
  one or more per extra example) and the trip count of every ``stablehlo.while`` (a
  loop that runs once per example is ``lax.map`` or ``scan`` over the batch).

No fact about the compiled code is taken from the student's process. (``count_jaxpr_eqns``
counts a jaxpr's equations for the lesson; it no longer grades.)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from autograder.programs.artifacts import (TIE_TOLERANCE, as_arrays, explain_program,
                                   program_facts, program_sides, programs_of)
from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.programs.jaxpr import iter_eqns, trace_jaxpr
from autograder.core.numeric import RUNGS, collect_tree_mismatches, explain_tree
from autograder.core.tracing import explain_vmap_error

_TRACED = (" (the check traces your function, as jit and vmap do, so it must work on "
           "tracers, not only on concrete arrays)")


def _per_arg_axes(in_axes: Any, nargs: int) -> tuple:
    if in_axes is None or isinstance(in_axes, int):
        return (in_axes,) * nargs
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) != nargs:
            raise ValueError(f"in_axes has {len(in_axes)} entries for {nargs} arguments")
        return tuple(in_axes)
    raise TypeError("in_axes must be an int, None, or a tuple with one entry per argument")


def _axis_tree_map(fn: Callable, axes: Any, tree: Any) -> Any:
    """Applies ``fn(axis, subtree)`` where ``axes`` is a prefix of ``tree`` (as in vmap)."""
    import jax

    return jax.tree.map(fn, axes, tree, is_leaf=lambda a: a is None)


def _take(leaf: Any, index: int, axis: int) -> Any:
    axis = axis % len(leaf.shape)
    return leaf[(slice(None),) * axis + (index,)]


def collect_loop_outputs(example_fn: Callable, args: Sequence, *, in_axes: Any = 0,
                         out_axes: Any = 0, jit: bool = False) -> Any:
    """Runs ``example_fn`` once per example in a Python loop and stacks the results.

    This is what ``jax.vmap(example_fn, in_axes, out_axes)(*args)`` must equal, computed
    the slow, obvious way on concrete values (so ``example_fn`` may use a Python ``if``).

    Args:
      example_fn: a function of one example.
      args: the batched arguments.
      in_axes: as in ``jax.vmap``: an int or ``None`` for every argument, or a tuple with
        one entry per argument, each an int, ``None`` (not batched) or a pytree prefix of
        that argument.
      out_axes: as in ``jax.vmap``: where the batch axis goes in each output leaf.
      jit: run each example through ``jax.jit(example_fn)`` (one compilation instead of
        one per eager operation); falls back to plain calls if ``example_fn`` needs
        concrete values (a Python ``if``).

    Returns:
      The stacked outputs, with the structure ``example_fn`` returns.

    >>> import jax.numpy as jnp
    >>> xs = jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> collect_loop_outputs(lambda w, x: w @ x, (jnp.ones(2), xs), in_axes=(None, 0))
    Array([ 3.,  7., 11.], dtype=float32)
    """
    import jax
    import jax.numpy as jnp

    args = tuple(args)
    axes = _per_arg_axes(in_axes, len(args))
    sizes: set[int] = set()

    def note_size(axis, sub):
        if axis is not None:
            for leaf in jax.tree.leaves(sub):
                sizes.add(int(leaf.shape[axis]))
        return sub

    _axis_tree_map(note_size, axes, args)
    if len(sizes) != 1:
        raise ValueError(f"the mapped axes have sizes {sorted(sizes)}; expected one batch size")
    (n,) = sizes

    def example(i):
        def pick(axis, sub):
            if axis is None:
                return sub
            return jax.tree.map(lambda leaf: _take(leaf, i, axis), sub)
        return _axis_tree_map(pick, axes, args)

    call = jax.jit(example_fn) if jit else example_fn
    outs = []
    for i in range(n):
        try:
            outs.append(call(*example(i)))
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
            if call is example_fn:
                raise
            call = example_fn  # it needs concrete values: run it eagerly
            outs.append(call(*example(i)))

    def stack(axis, *subs):
        if axis is None:
            return subs[0]
        return jax.tree.map(lambda *leaves: jnp.stack(leaves, axis=axis), *subs)

    return jax.tree.map(stack, out_axes, *outs, is_leaf=lambda a: a is None)


def count_jaxpr_eqns(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                     section: str | None = None) -> int:
    """The number of equations in the jaxpr of ``fn(*args)``, nested bodies included.

    >>> import jax, jax.numpy as jnp
    >>> loop = lambda xs: jnp.stack([jnp.sin(x) for x in xs])
    >>> count_jaxpr_eqns(loop, (jnp.ones(3),)), count_jaxpr_eqns(loop, (jnp.ones(7),))
    (5, 9)
    >>> count_jaxpr_eqns(jax.vmap(jnp.sin), (jnp.ones(3),))
    1
    """
    __tracebackhide__ = True
    return sum(1 for _ in iter_eqns(trace_jaxpr(fn, args, kwargs, section=section)))


def _jitted_call(fn: Callable, args: Sequence):
    """``observe`` of a batched call: ``jax.jit(fn)(*args)`` (one compilation costs far
    less than the dozens of eager ones, and the program is exported anyway)."""
    import jax

    if not callable(fn):
        return call(fn)
    return call(jax.jit(fn), args)


def _pick_hint(hint: str | dict | None, got, expected, rtol: float,
               atol: float) -> str | None:
    """``hint``, or for a dict ``{rung: text}`` the text of the rung that fails."""
    if not isinstance(hint, dict):
        return hint
    found = collect_tree_mismatches(got, expected, rtol=rtol, atol=atol)
    if not found:
        return None
    rung = min((m[1] for m in found), key=RUNGS.index)
    return hint.get(rung)


@explainer("batched_values", errors=True)
def explain_batched_values(observed, expected, *, label: str, rtol: float = 1e-5,
                           atol: float = 1e-6, hint: str | dict | None = None,
                           fix: str | None = None, section: str | None = None,
                           context: str = "", **_ignored) -> str | None:
    """The value ladder against the loop of the reference; tracing errors explained."""
    if observed.kind == "error":
        return explain_vmap_error(observed, label, context=context, section=section)
    if expected is None:
        return format_failure(f"{label}: the grader has no expected value", section=section)
    return explain_tree(observed, expected, label=label, rtol=rtol, atol=atol,
                        section=section, hint=_pick_hint(hint, observed, expected, rtol, atol),
                        fix=fix)


# A batched program may hold this many times the operations of jax.vmap of the
# example function, plus a few: hand-vectorised answers differ from vmap's program,
# a batch padded to a fixed size and looped over holds one copy per padded example.
PADDED_FACTOR, PADDED_SLACK = 3, 10


def _vmapped(example_fn: Callable, in_axes: Any, out_axes: Any) -> Callable:
    import jax

    return jax.vmap(example_fn, in_axes=in_axes, out_axes=out_axes)


@explainer("batched_program", errors=True)
def explain_batched_program(observed, expected, *, label: str, sizes: list,
                            allow_scan: bool = False, example_name: str = "",
                            rtol: float = 1e-5, atol: float = 1e-6,
                            section: str | None = None, **_ignored) -> str | None:
    """No Python loop over the batch, read from the programs exported at each size."""
    if observed.kind == "error":
        return explain_vmap_error(observed, f"tracing {label}", context=_TRACED,
                                  section=section)
    problem = explain_program(observed, None, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)
    if len(facts) != len(sizes) + 1:
        return format_failure(f"the grader got {len(facts)} programs of {label} for "
                              f"{len(sizes)} batch sizes", section=section)
    # The last program is jax.vmap of the trusted example function at the first size:
    # the reference run's when grading (trusted), this process's in the kernel.
    example = (program_facts(expected) or facts)[-1] if expected is not None else facts[-1]
    facts = facts[:-1]
    counts = [sum(int(v) for v in f.get("ops", {}).values()) for f in facts]
    extra = sizes[-1] - sizes[0]
    growth = counts[-1] - counts[0]
    if growth >= extra:
        got = ", ".join(f"{c} operations at batch {n}" if i == 0 else f"{c} at batch {n}"
                        for i, (n, c) in enumerate(zip(sizes, counts)))
        per = growth / extra
        per_text = f"{per:g}" if per != int(per) else str(int(per))
        return format_failure(
            f"{label} repeats the per-example work once per example",
            expected="the same number of operations in the exported program at every "
                     "batch size (vmap traces the body once)",
            got=f"{got} (+{per_text} per extra example)",
            cause="a Python loop (for, a list comprehension, map) over the batch: JAX "
                  "traces the body once per example and unrolls it",
            fix=f"replace the loop with jax.vmap({example_name}, in_axes=...) so the "
                "body is traced once for the whole batch",
            section=section)
    per_example = [n in f.get("while_trips", []) for n, f in zip(sizes, facts)]
    if not allow_scan and all(per_example):
        return format_failure(
            f"{label} runs the examples one at a time in a loop",
            expected="one batched computation for all examples",
            got=f"a `stablehlo.while` that runs once per example ({sizes[-1]} steps at "
                f"batch {sizes[-1]}): a `scan` whose length is the batch size",
            cause="lax.map, lax.scan or fori_loop over the batch: correct values, but a "
                  "sequential loop, one example per step",
            fix=f"use jax.vmap({example_name}, in_axes=...), which runs every example in "
                "one batched operation",
            section=section)
    problem = _explain_padded(facts, example, sizes, allow_scan, label=label,
                              example_name=example_name, section=section)
    if problem:
        return problem
    return explain_program(observed, expected, label=label, section=section,
                           rtol=max(rtol, TIE_TOLERANCE["rtol"]),
                           atol=max(atol, TIE_TOLERANCE["atol"]))


def _work(facts: dict) -> tuple[int, int]:
    """(computing operations outside loops, in all) of a program's facts."""
    loop = (facts.get("region_work") or {}).get("loop") or {}
    return int(loop.get("outside", 0)), int(loop.get("outside", 0)) + int(loop.get("inside", 0))


def _explain_padded(facts: list, example: dict, sizes: list, allow_scan: bool, *,
                    label: str, example_name: str, section: str | None) -> str | None:
    """A batch padded to a fixed size: the program does not grow between the sizes,
    but holds the work of many examples, written out (more than ``PADDED_FACTOR`` times
    the work of ``jax.vmap`` of the example function, outside any loop) or run by a
    loop whose trip count is the padded size (the same at both sizes, at least the
    largest batch, and not a loop of the example function itself)."""
    outside, _ = _work(facts[0])
    _, batched = _work(example)
    fix = (f"use jax.vmap({example_name}, in_axes=...), which traces the body once for the "
           "whole batch")
    if outside > PADDED_FACTOR * batched + PADDED_SLACK:
        return format_failure(
            f"{label} does the work of many more examples than it was given",
            expected=f"about the work of one batched pass: jax.vmap({example_name}) computes "
                     f"with {batched} operations at batch {sizes[0]}",
            got=f"{outside} operations at batch {sizes[0]}",
            cause="the per-example work is written out for a fixed number of examples (a "
                  "batch padded to a fixed size and looped over in Python): the program "
                  "does not grow with the batch, but it is a loop all the same",
            fix=fix, section=section)
    trips = [set(f.get("while_trips") or []) for f in facts]
    padded = {t for t in set.intersection(*trips) if isinstance(t, int) and t >= sizes[-1]}
    padded -= set(example.get("while_trips") or [])
    if padded and not allow_scan:
        return format_failure(
            f"{label} runs the examples one at a time, over a padded batch",
            expected="one batched computation for all examples",
            got=f"a `stablehlo.while` of {max(padded)} steps at every batch size "
                f"({', '.join(map(str, sizes))})",
            cause="lax.map, lax.scan or fori_loop over a batch padded to a fixed size: "
                  "a sequential loop, one example per step",
            fix=fix, section=section)
    return None


def assert_batched_without_loop(fn: Callable, make_args: Callable[[int], Sequence], *,
                                example_fn: Callable, in_axes: Any = 0,
                                out_axes: Any = 0, sizes: Sequence[int] = (3, 7),
                                rtol: float = 1e-5, atol: float = 1e-6,
                                allow_scan: bool = False, name: str | None = None,
                                example_name: str | None = None,
                                section: str | None = None,
                                hint: str | dict | None = None,
                                fix: str | None = None) -> None:
    """Asserts that ``fn`` batches ``example_fn`` correctly and without a loop.

    The ladder: ``fn(*make_args(sizes[-1]))`` must equal a Python loop of
    ``example_fn`` over the examples (type, shape, dtype, finite, values); then the
    structure: ``fn`` is exported at every size in ``sizes``, and if its program gains
    at least one operation per extra example, the per-example body was repeated, i.e.
    a Python loop unrolled. A program with more than ``PADDED_FACTOR`` times the
    operations of ``jax.vmap(example_fn)`` (plus ``PADDED_SLACK``) fails too: a batch
    padded to a fixed size and looped over does not grow between the sizes. A loop
    that runs once per example (``lax.map``, ``fori_loop`` or ``scan`` over the batch)
    is reported too, unless ``allow_scan``.

    Args:
      fn: the student's batched function.
      make_args: ``make_args(n)`` returns the argument tuple for a batch of ``n``.
      example_fn: the trusted function of one example.
      in_axes, out_axes: how the batch is laid out, as in ``jax.vmap``; used to run the
        loop reference.
      sizes: at least two batch sizes, increasing; avoid 1 (it can hide a bug).
      rtol, atol: value tolerances.
      allow_scan: accept a ``scan`` over the batch (a sequential ``lax.map``).
      name: how to name the call (default ``fn(arg=..., ...)``).
      example_name: how the fix names the function to vmap (default: the name of
        ``example_fn`` without leading underscores).
      section: the lesson section to reread.
      hint: the likely cause of a value-ladder failure; a dict ``{rung: text}``
        (rungs ``"type"``, ``"shape"``, ``"dtype"``, ``"finite"``, ``"values"``) gives
        one per rung.
      fix: the fix for a value-ladder failure.

    >>> import jax, jax.numpy as jnp
    >>> def norm(x):
    ...     return jnp.sqrt(jnp.sum(x ** 2))
    >>> make = lambda n: (jnp.arange(n * 2.0).reshape(n, 2),)
    >>> assert_batched_without_loop(jax.vmap(norm), make, example_fn=norm)
    >>> def norms(xs):
    ...     return jnp.stack([norm(x) for x in xs])
    >>> assert_batched_without_loop(norms, make, example_fn=norm)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: norms(xs=f32[7,2]) repeats the per-example work once per example
      expected: the same number of operations in the exported program at every batch size (vmap traces the body once)
      got:      ... operations at batch 3, ... at batch 7 (+... per extra example)
      likely cause: a Python loop (for, a list comprehension, map) over the batch: JAX traces the body once per example and unrolls it
      fix: replace the loop with jax.vmap(norm, in_axes=...) so the body is traced once for the whole batch
    """
    __tracebackhide__ = True
    sizes = tuple(sizes)
    if len(sizes) < 2 or list(sizes) != sorted(set(sizes)):
        raise ValueError("sizes must hold at least two increasing batch sizes")
    inputs = [tuple(make_args(n)) for n in sizes]
    args = inputs[-1]
    label = name or call_signature(fn, args)
    if example_name is None:
        example_name = getattr(example_fn, "__name__", "").lstrip("_")
        if not example_name or example_name == "<lambda>":
            example_name = "the per-example function"
    # The reference runs first (expect), on its own copy of the inputs.
    run(Check("batched_values", label, observe=lambda: _jitted_call(fn, args),
              expect=lambda: collect_loop_outputs(example_fn, args, in_axes=in_axes,
                                                  out_axes=out_axes, jit=True),
              params=dict(rtol=rtol, atol=atol, hint=hint, fix=fix, section=section,
                          context=_TRACED)))
    batched = _vmapped(example_fn, in_axes, out_axes)
    observe, expect = program_sides(
        lambda: programs_of(*[(fn, as_arrays(a), None) for a in inputs],
                            (batched, as_arrays(inputs[0]), None)))
    run(Check("batched_program", label, observe=observe, expect=expect,
              observe_as="artifact", expect_as="artifact",
              params=dict(sizes=list(sizes), allow_scan=allow_scan,
                          example_name=example_name, rtol=rtol, atol=atol, section=section)))


def assert_vmap_matches_loop(example_fn: Callable, args: Sequence, *, reference: Callable,
                             in_axes: Any = 0, out_axes: Any = 0, rtol: float = 1e-5,
                             atol: float = 1e-6, section: str | None = None,
                             hint: str | dict | None = None,
                             fix: str | None = None) -> None:
    """Asserts that ``jax.vmap(example_fn)`` works and equals a loop of ``reference``.

    Use it on a student's *single-example* function that must survive ``vmap``. A
    Python ``if`` on a batched value raises ``TracerBoolConversionError`` under vmap;
    the message then explains why and points to ``jnp.where``. The reference runs on
    concrete values, one example at a time, so it may use a plain Python ``if``.

    Args:
      example_fn: the student's function of one example.
      args: the batched arguments.
      reference: the trusted function of one example.
      in_axes, out_axes: passed to ``jax.vmap`` and to the loop reference.
      rtol, atol, section, hint, fix: as in :func:`assert_batched_without_loop`.

    >>> import jax.numpy as jnp
    >>> def relu_if(x):
    ...     return x if x > 0 else 0.0 * x
    >>> def relu(x):
    ...     return jnp.where(x > 0, x, 0.0)
    >>> assert_vmap_matches_loop(relu, (jnp.array([-1.0, 2.0]),), reference=relu_if)
    >>> assert_vmap_matches_loop(relu_if, (jnp.array([-1.0, 2.0]),), reference=relu_if)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: jax.vmap(relu_if, in_axes=0)(x=f32[2]) raised TracerBoolConversionError: ...
      likely cause: a Python `if`, `while`, `and`/`or` or `bool()` on a value computed from a batched input: ...
      fix: compute both branches and choose per element with jnp.where(condition, a, b) (or lax.cond / lax.select)
    """
    __tracebackhide__ = True
    import jax

    args = tuple(args)
    fname = getattr(example_fn, "__name__", "fn")
    axes_text = f"in_axes={in_axes!r}" + (f", out_axes={out_axes!r}" if out_axes != 0 else "")
    label = f"jax.vmap({fname}, {axes_text}){call_signature(example_fn, args)[len(fname):]}"

    def observe():
        if not callable(example_fn):
            return call(example_fn)
        return call(jax.vmap(example_fn, in_axes=in_axes, out_axes=out_axes), args)

    run(Check("batched_values", label, observe=observe,
              expect=lambda: collect_loop_outputs(reference, args, in_axes=in_axes,
                                                  out_axes=out_axes),
              params=dict(rtol=rtol, atol=atol, hint=hint, fix=fix, section=section)))
