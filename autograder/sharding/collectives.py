"""Collectives: which classes of communication a program compiles to, and whether a
``jax.shard_map`` body combines the devices' results.

Both structure checks read exported programs, never the student's process:

- :func:`assert_collective_in_hlo` exports the function at the test's (sharded)
  arguments; the grader places its own inputs on a mesh shaped like the program's,
  compiles it and reads the collective classes of the optimized HLO (``collectives``
  of :mod:`autograder.programs.artifacts`, ``compile=True``). Presence of a class, never a
  count.
- :func:`assert_shard_map_uses` reads the exported StableHLO: a ``shard_map`` lowers to
  ``sdy.manual_computation``, and its collectives appear there as
  ``stablehlo.all_reduce`` (``psum``, ``pmean``, ``pmax``, ``pmin``),
  ``stablehlo.all_gather``, ``stablehlo.reduce_scatter`` (``psum_scatter``),
  ``stablehlo.collective_permute`` (``ppermute``) and ``stablehlo.all_to_all``. Jit's
  own collectives are inserted later, by XLA's partitioner, so any of these in the
  StableHLO comes from manual code.

When grading, both programs also run on the grader's inputs and must give the
reference program's values, so a program exported from another function earns
nothing.

In-process facts: :func:`assert_collective_set` compares a set the student's function
returned (a value, like any result) with the reference's. :func:`collect_collectives`
(a pure function of HLO text) and :func:`collect_shard_map_primitives` (a jaxpr walk,
for lessons and tests) are helpers that return facts; no graded check relies on them
in the student's process.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from autograder.programs.artifacts import (COLLECTIVES, collective_classes, explain_program,
                                   program_facts, programs_of)
from autograder.core.check import REFERENCE, Check, explainer, mode, run
from autograder.core.feedback import call_signature, describe_value, format_failure
from autograder.programs.jaxpr import _sub_jaxprs, trace_jaxpr
from autograder.sharding.mesh import explain_same_set
from autograder.sharding.parallel import explain_collective_bytes

# What each collective primitive lowers to in StableHLO (``pmean`` is a psum and a
# division; with check_vma=True ``psum`` of a varying value traces to psum_invariant).
_STABLEHLO_OF = {
    "psum": "stablehlo.all_reduce",
    "pmean": "stablehlo.all_reduce",
    "pmax": "stablehlo.all_reduce",
    "pmin": "stablehlo.all_reduce",
    "all_gather": "stablehlo.all_gather",
    "psum_scatter": "stablehlo.reduce_scatter",
    "ppermute": "stablehlo.collective_permute",
    "all_to_all": "stablehlo.all_to_all",
}


def collect_collectives(hlo_text: str) -> set[str]:
    """The classes of collective ops in (optimized) HLO text.

    Async forms count as their class: ``all-reduce-start`` is an ``all-reduce``.
    Instruction *names* (``%all-reduce.3 = ...``) are not ops and do not count.

    >>> hlo = '''
    ... %all-reduce.1 = f32[8]{0} all-reduce(f32[8]{0} %p), replica_groups={{0,1}}
    ... %ags = (f32[2], f32[4]) all-gather-start(f32[2]{0} %q), dimensions={0}
    ... %agd = f32[4]{0} all-gather-done((f32[2], f32[4]) %ags)
    ... '''
    >>> sorted(collect_collectives(hlo))
    ['all-gather', 'all-reduce']
    """
    return set(collective_classes(hlo_text))


def _as_names(names: str | Sequence[str], known: Sequence[str], kind: str) -> tuple[str, ...]:
    out = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in out if n not in known]
    if unknown or not out:
        raise ValueError(f"unknown {kind} {unknown or out!r}: use some of {', '.join(known)}")
    return out


def _or_text(names: Sequence[str]) -> str:
    names = [f"`{n}`" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _reference_program(fn: Callable, args: Sequence, kwargs: dict | None):
    """The expected side of a program check: in the reference run, the reference's own
    program (the grader runs both on its inputs and compares their values); in the
    kernel nothing, since it would be the student's program again."""
    if mode() != REFERENCE:
        return None
    return lambda: programs_of((fn, tuple(args), kwargs))


def assert_collective_in_hlo(fn: Callable, args: Sequence, collective: str | Sequence[str], *,
                             present: bool = True, kwargs: dict | None = None,
                             max_bytes: int | None = None,
                             name: str | None = None, section: str | None = None,
                             hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that the compiled HLO of ``jax.jit(fn)(*args)`` has (or lacks) a collective.

    Collectives are inserted when XLA partitions the program, so ``fn`` is exported
    for the given (sharded) arguments and the program is compiled where it is judged
    (by the grader, or here in the student's kernel); its optimized HLO is read. Only
    the presence of a class is checked, never a count.

    Args:
      fn: the function (jitted or not).
      args: its arguments, placed as the test needs (their shardings matter).
      collective: a class from :data:`COLLECTIVES`, or several: with
        ``present=True`` any one of them passes; with ``present=False`` none may appear.
      present: whether the collective must appear (``True``) or be absent.
      max_bytes: the most bytes all collectives may move together, per device (the
        gradients of a data-parallel step, not its batch: what a collective carries,
        not its name; :func:`autograder.sharding.parallel.explain_collective_bytes`).
      kwargs, name, section, hint, fix: keyword inputs; how to name the call; the
        section to reread; a likely cause and a fix that replace the defaults.

    Returns nothing: the collectives are facts of the exported program, derived where
    it is judged (use :func:`collect_collectives` on ``compiled_hlo_text(fn, args)``
    for the set itself).

    >>> import jax.numpy as jnp
    >>> assert_collective_in_hlo(jnp.sin, (jnp.ones(4),), "all-reduce", present=False)
    >>> assert_collective_in_hlo(jnp.sin, (jnp.ones(4),), "all-reduce", name="sin(x)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: sin(x) compiles to no `all-reduce`
      expected: `all-reduce` in the compiled HLO
      got:      collectives in the compiled HLO: none
      likely cause: no data crosses devices: each device computed on its own data only (a missing reduction, or inputs that are not sharded)
      fix: print(jax.jit(f).lower(*args).compile().as_text()) and look for the collective
    """
    __tracebackhide__ = True
    wanted = _as_names(collective, COLLECTIVES, "collective")
    label = name or call_signature(fn, args, kwargs)
    run(Check("collective_in_hlo", label,
              observe=lambda: programs_of((fn, tuple(args), kwargs)), observe_as="artifact",
              expect=_reference_program(fn, args, kwargs), expect_as="artifact",
              params=dict(compile=True, wanted=list(wanted), present=present,
                          max_bytes=max_bytes, section=section, hint=hint, fix=fix)))


@explainer("collective_in_hlo")
def explain_collective_in_hlo(observed, expected, *, label: str, wanted: list,
                              present: bool = True, max_bytes: int | None = None,
                              section: str | None = None,
                              hint: str | None = None, fix: str | None = None,
                              **_ignored) -> str | None:
    """Presence (or absence) of collective classes in the compiled exported program."""
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    found = set(program_facts(observed)[0].get("collectives", []))
    found_text = ", ".join(sorted(found)) or "none"
    if present and not found & set(wanted):
        return format_failure(
            f"{label} compiles to no {_or_text(wanted)}",
            expected=f"{_or_text(wanted)} in the compiled HLO",
            got=f"collectives in the compiled HLO: {found_text}",
            cause=hint or ("no data crosses devices: each device computed on its own data "
                           "only (a missing reduction, or inputs that are not sharded)"),
            fix=fix or ("print(jax.jit(f).lower(*args).compile().as_text()) and look for "
                        "the collective"), section=section)
    if not present and found & set(wanted):
        return format_failure(
            f"{label} compiles to {_or_text(sorted(found & set(wanted)))}",
            expected=f"no {_or_text(wanted)} in the compiled HLO",
            got=f"collectives in the compiled HLO: {found_text}",
            cause=hint or ("XLA had to move data between devices: an input or an "
                           "intermediate is laid out differently than the computation needs"),
            fix=fix or "place the inputs so that each device already holds what it needs",
            section=section)
    return explain_collective_bytes(program_facts(observed)[0], max_bytes, label=label,
                                    section=section, hint=hint, fix=fix)


def _names_facts(got: Any) -> dict:
    if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__"):
        return {"not_names": describe_value(got)}
    items = list(got)
    if not all(isinstance(g, str) for g in items):
        return {"not_names": describe_value(got)}
    return {"names": sorted(set(items)), "is_set": isinstance(got, (set, frozenset)),
            "count": len(items)}


def assert_collective_set(got: Any, expected: Iterable[str], *, name: str = "result",
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None, exact: bool = False) -> None:
    """Asserts that ``got`` (an iterable of collective class names) matches ``expected``;
    with ``exact=True`` it must be a ``set`` (or ``frozenset``): a list fails.

    >>> assert_collective_set({"all-reduce"}, ["all-reduce"])
    >>> assert_collective_set(set(), {"all-gather"}, name="collectives_in_hlo(f, x)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: collectives_in_hlo(f, x) returned the wrong collectives
      expected: {'all-gather'}
      got:      set()
      missing:    {'all-gather'}
    """
    __tracebackhide__ = True
    run(Check("collective_set", name, observe=lambda: _names_facts(got),
              expect=lambda: {"names": sorted(set(expected))},
              observe_as="facts", expect_as="facts",
              params=dict(section=section, hint=hint, fix=fix, exact=exact)))


def _set_text(names: set) -> str:
    return repr(set(sorted(names))) if names else "set()"


@explainer("collective_set")
def explain_collective_set(observed, expected, *, label: str, section=None, hint=None,
                           fix=None, exact: bool = False, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if "names" not in facts:
        return format_failure(
            f"{label} did not return a set of collective names",
            expected="a set of str, e.g. {'all-reduce'}",
            got=facts.get("not_names", "something else"), cause=hint,
            fix=fix or "return a set of names such as 'all-reduce'", section=section)
    if exact and not facts.get("is_set"):
        return format_failure(
            f"{label} did not return a set of collective names",
            expected="a set of str, e.g. {'all-reduce'}",
            got=f"a sequence of {facts.get('count', len(facts['names']))} names",
            cause="the contract asks for a set: each class once",
            fix=fix or "collect the names into a set: {m.group(1) for m in ...}",
            section=section)
    want = set(expected.facts.get("names", [])) if expected is not None else set()
    return explain_same_set(set(facts["names"]), want, label=label, item="collectives",
                            shown=_set_text, section=section, hint=hint, fix=fix)


# ------------------------------------------------------------------------- shard_map

def _count_in_shard_maps(jaxpr, inside: bool, counts: Counter) -> None:
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        name = eqn.primitive.name
        if name == "shard_map":
            counts["shard_map"] += 1
        elif inside:
            counts[name] += 1
        for sub in _sub_jaxprs(eqn.params):
            _count_in_shard_maps(sub, inside or name == "shard_map", counts)


def collect_shard_map_primitives(fn: Callable, args: Sequence = (),
                                 kwargs: dict | None = None, *,
                                 section: str | None = None) -> Counter:
    """Counts the jaxpr primitives inside the ``shard_map`` bodies of ``fn(*args)``.

    The count under the key ``"shard_map"`` is the number of ``shard_map``
    equations, nested ones included; the other keys count the primitives their
    bodies use (nested jaxprs walked). ``psum`` appears as ``psum_invariant`` when
    ``check_vma=True`` (the default). A helper for lessons and tests: the graded check
    (:func:`assert_shard_map_uses`) reads the exported program instead.

    >>> import jax, jax.numpy as jnp
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> def total(x):
    ...     return jax.shard_map(lambda b: jax.lax.psum(b.sum(), "data"), mesh=mesh,
    ...                          in_specs=P("data"), out_specs=P())(x)
    >>> x = jax.device_put(jnp.ones(4), jax.NamedSharding(mesh, P("data")))
    >>> counts = collect_shard_map_primitives(total, (x,))
    >>> counts["shard_map"], counts["psum_invariant"]
    (1, 1)
    """
    __tracebackhide__ = True
    counts: Counter = Counter()
    _count_in_shard_maps(trace_jaxpr(fn, args, kwargs, section=section), False, counts)
    return counts


def assert_shard_map_uses(fn: Callable, args: Sequence, collectives: str | Sequence[str] = "psum",
                          *, kwargs: dict | None = None, name: str | None = None,
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> None:
    """Asserts that ``fn(*args)`` runs a ``jax.shard_map`` whose body uses a collective.

    Read from the program exported at ``args``: the ``shard_map`` is its
    ``sdy.manual_computation``, the collective its StableHLO op (``psum`` and
    ``pmean`` are both an ``all_reduce``). On a mesh of one device both vanish from
    the program (there is nothing to communicate), so the arguments must be placed on
    at least two devices.

    Args:
      fn: the student's function.
      args: its arguments.
      collectives: one name or several (any one passes): ``"psum"``, ``"pmean"``,
        ``"all_gather"``, ``"psum_scatter"``, ``"ppermute"``, ``"all_to_all"``,
        ``"pmax"``, ``"pmin"``.
      kwargs, name, section, hint, fix: keyword inputs; how to name the call; the
        section to reread; a likely cause and a fix that replace the defaults.

    Returns nothing (use :func:`collect_shard_map_primitives` for counts).

    >>> import jax.numpy as jnp
    >>> def center(x):
    ...     return x - x.mean(axis=0)
    >>> assert_shard_map_uses(center, (jnp.ones((8, 2)),), ("psum", "pmean"))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: center(x=f32[8,2]) does not use jax.shard_map
      expected: a jax.shard_map whose body uses `psum` or `pmean`
      got:      StableHLO ops used: broadcast_in_dim, divide, reduce, subtract
      likely cause: the program runs on one device: its inputs are not placed on a mesh (a shard_map over one device leaves no trace in it)
      fix: wrap the per-device computation: jax.shard_map(f, in_specs=..., out_specs=...)(x)
    """
    __tracebackhide__ = True
    wanted = _as_names(collectives, tuple(_STABLEHLO_OF), "collective primitive")
    label = name or call_signature(fn, args, kwargs)
    run(Check("shard_map_uses", label,
              observe=lambda: programs_of((fn, tuple(args), kwargs)), observe_as="artifact",
              expect=_reference_program(fn, args, kwargs), expect_as="artifact",
              params=dict(wanted=list(wanted), section=section, hint=hint, fix=fix)))


def _ops_text(ops: dict) -> str:
    """The computing ops, without their dialect (constants and returns left out)."""
    shown = sorted(op.split(".", 1)[1] for op in ops if op.startswith(("stablehlo.", "chlo."))
                   and op not in ("stablehlo.return", "stablehlo.constant"))
    return ", ".join(shown) or "none"


@explainer("shard_map_uses")
def explain_shard_map_uses(observed, expected, *, label: str, wanted: list,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None, **_ignored) -> str | None:
    """A ``sdy.manual_computation`` in the program, holding one of the collectives."""
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)[0]
    ops, body = facts.get("ops", {}), facts.get("manual_ops", {})
    # Shardy lowers shard_map to sdy.manual_computation; GSPMD to a pair of custom calls.
    if not ops.get("sdy.manual_computation") and \
            "SPMDFullToShardShape" not in facts.get("custom_calls", []):
        return format_failure(
            f"{label} does not use jax.shard_map",
            expected=f"a jax.shard_map whose body uses {_or_text(wanted)}",
            got=f"StableHLO ops used: {_ops_text(ops)}",
            cause=hint or ("the computation was written with jit and jnp only"
                           if facts.get("nr_devices", 2) > 1 else
                           "the program runs on one device: its inputs are not placed on a "
                           "mesh (a shard_map over one device leaves no trace in it)"),
            fix=fix or ("wrap the per-device computation: jax.shard_map(f, in_specs=..., "
                        "out_specs=...)(x)"), section=section)
    targets = {_STABLEHLO_OF[w] for w in wanted}
    if not any(ops.get(t) for t in targets):
        return format_failure(
            f"the shard_map in {label} uses no collective",
            expected=f"{_or_text(wanted)} inside the shard_map body",
            got=f"StableHLO ops in the body: {_ops_text(body or ops)}",
            cause=hint or ("without a collective each device only sees its own shard: a sum "
                           "or mean covers the local rows only"),
            fix=fix or ("combine the per-device results with jax.lax.psum (or pmean, "
                        "all_gather) over the mesh axis the data is split on"),
            section=section)
    return None
