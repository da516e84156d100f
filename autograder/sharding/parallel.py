"""Model-parallel checks: how many collectives a program runs, and where a pytree lives.

Two questions a model-parallel exercise asks (Megatron-style tensor parallelism,
FSDP), each in the collect / explain / assert shape:

- *Which collectives, and how many?* :func:`collect_collective_counts` reads the
  compiled (optimized) HLO and counts each class of collective op.
  :func:`explain_collective_counts` judges the counts against bounds. A Megatron
  MLP block runs exactly one ``all-reduce`` (after its row-sharded second matmul);
  FSDP gathers its weights (``all-gather``) and reduce-scatters their gradients
  (``reduce-scatter``). Counts are bounds on *this function's* program, where every
  collective is data-dependent on the last, so XLA cannot merge them; async forms
  (``all-reduce-start`` / ``-done``, common on GPU) count once.
- *Where does every leaf live?* :func:`collect_tree_placement` turns each leaf's
  sharding into plain data (which slice each device holds);
  :func:`explain_tree_placement` compares two of them and reports every misplaced
  leaf together, by its path.

``explain_*`` functions are pure: they read plain data (ints, strings, lists,
dicts), so the trusted grader can run them outside the student's process on what a
sandbox sent back.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from autograder.programs.artifacts import explain_program, program_facts, programs_of
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, format_failure

# One op per match: `all-reduce(` or `all-reduce-start(`; `-done(` closes an async op
# that `-start(` already counted, and instruction *names* (`%all-reduce.3 =`) are
# not ops.
_OP = re.compile(
    r"(?<![\w.%-])(ragged-all-to-all|all-reduce|all-gather|reduce-scatter|"
    r"collective-permute|all-to-all|collective-broadcast)(-start)?\(")

CLASSES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all",
           "collective-broadcast", "ragged-all-to-all")

_WHY = {
    "all-reduce": "a sum (or mean) over devices: partial results combined, every device "
                  "gets the total",
    "all-gather": "an array gathered whole onto every device",
    "reduce-scatter": "a sum over devices of which each device keeps only its own slice",
    "collective-permute": "data shifted between neighbouring devices",
    "all-to-all": "a split moved from one dimension to another",
}


# ------------------------------------------------------------------- collectives

def collect_collective_counts(hlo_text: str) -> dict[str, int]:
    """Counts the collective ops of each class in (optimized) HLO text.

    Classes that do not occur are absent from the result. ``-start`` forms count
    as their class, ``-done`` forms do not (they close the same op).

    >>> hlo = '''
    ... %all-reduce.1 = f32[8]{0} all-reduce(f32[8]{0} %p), replica_groups={{0,1}}
    ... %ags = (f32[2], f32[4]) all-gather-start(f32[2]{0} %q), dimensions={0}
    ... %agd = f32[4]{0} all-gather-done((f32[2], f32[4]) %ags)
    ... %all-reduce.2 = f32[8]{0} all-reduce(f32[8]{0} %all-reduce.1)
    ... '''
    >>> collect_collective_counts(hlo)
    {'all-gather': 1, 'all-reduce': 2}
    """
    counts: dict[str, int] = {}
    for match in _OP.finditer(hlo_text):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return dict(sorted(counts.items()))


def _counts_text(counts: Mapping[str, int]) -> str:
    shown = [f"{n} {name}" for name, n in sorted(counts.items()) if n]
    return ", ".join(shown) if shown else "none"


def explain_collective_counts(observed: Mapping[str, int], expected: Any = None, *,
                              name: str = "the function",
                              at_least: Mapping[str, int] | None = None,
                              at_most: Mapping[str, int] | None = None,
                              absent: Sequence[str] = (), section: str | None = None,
                              hint: str | None = None, fix: str | None = None) -> str | None:
    """Judges collective counts against bounds; returns the failure message or ``None``.

    Pure: ``observed`` is what :func:`collect_collective_counts` returned (a dict of
    ints, possibly after a trip through JSON). ``expected`` is unused (the rule is
    the bounds); it is accepted so that every ``explain_*`` has one shape.

    The rungs, in order: a required class is missing (``at_least``), a forbidden
    class is present (``absent``), a class appears too often (``at_most``).

    >>> explain_collective_counts({"all-reduce": 1}, at_least={"all-reduce": 1},
    ...                           at_most={"all-reduce": 1}, absent=["all-gather"]) is None
    True
    >>> print(explain_collective_counts({"all-reduce": 2}, name="mlp(params, x)",
    ...                                 at_most={"all-reduce": 1}, section="8.1"))
    mlp(params, x) runs too many collectives
      expected: at most 1 all-reduce in the compiled HLO
      got:      2 all-reduce
      likely cause: a collective runs where none is needed: each extra all-reduce sends a whole activation between devices
      fix: print(jax.jit(f).lower(*args).compile().as_text()) and find the operation each collective serves
      reread: section 8.1
    """
    del expected
    got = {str(k): int(v) for k, v in dict(observed).items()}
    found = _counts_text(got)
    for cls, n in (at_least or {}).items():
        if got.get(cls, 0) < n:
            return format_failure(
                f"{name} compiles to no {cls}" if not got.get(cls) else
                f"{name} compiles to too few {cls} ops",
                expected=f"at least {n} {cls} in the compiled HLO ({_WHY.get(cls, cls)})",
                got=f"collectives in the compiled HLO: {found}",
                cause=hint or "the devices never combine their partial results, or the "
                              "layout is not the one the exercise asks for",
                fix=fix or "print(jax.jit(f).lower(*args).compile().as_text()) and look "
                           "for the collective",
                section=section)
    for cls in absent:
        if got.get(cls, 0):
            return format_failure(
                f"{name} compiles to {cls}",
                expected=f"no {cls} in the compiled HLO",
                got=f"collectives in the compiled HLO: {found}",
                cause=hint or f"XLA inserted {_WHY.get(cls, cls)}: an input or an "
                              "intermediate is laid out differently than the computation needs",
                fix=fix or "keep every array in the layout the exercise gives; do not "
                           "reshard or replicate it inside the function",
                section=section)
    for cls, n in (at_most or {}).items():
        if got.get(cls, 0) > n:
            return format_failure(
                f"{name} runs too many collectives",
                expected=f"at most {n} {cls} in the compiled HLO",
                got=found,
                cause=hint or f"a collective runs where none is needed: each extra {cls} "
                              "sends a whole activation between devices",
                fix=fix or "print(jax.jit(f).lower(*args).compile().as_text()) and find "
                           "the operation each collective serves",
                section=section)
    return None


def assert_collective_counts(fn: Callable, args: Sequence, *, kwargs: dict | None = None,
                             at_least: Mapping[str, int] | None = None,
                             at_most: Mapping[str, int] | None = None,
                             absent: Sequence[str] = (),
                             max_bytes: int | None = None,
                             name: str | None = None,
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None) -> dict[str, int]:
    """Asserts bounds on the collectives in the compiled HLO of ``jax.jit(fn)(*args)``.

    Collectives exist once XLA has partitioned the program (``.compile()``): the
    arguments' shardings and the current mesh (``jax.set_mesh``) decide them, so call
    this inside the same ``with jax.set_mesh(mesh):`` block as the function.

    Args:
      fn: the student's function (jitted or not).
      args: its arguments, placed as the exercise says.
      kwargs: keyword arguments.
      at_least: ``{class: n}``: each class must appear at least ``n`` times.
      at_most: ``{class: n}``: no class may appear more than ``n`` times.
      absent: classes that must not appear.
      max_bytes: the most bytes all its collectives may move together (per device;
        :func:`explain_collective_bytes`).
      name, section, hint, fix: how to name the call, the section to reread, and a
        likely cause and a fix that replace the defaults.

    Returns nothing: the counts are facts of the program the grader compiles (use
    :func:`collect_collective_counts` on compiled text for the counts themselves).

    >>> import jax.numpy as jnp
    >>> assert_collective_counts(jnp.sin, (jnp.ones(4),), absent=["all-gather"])
    >>> assert_collective_counts(jnp.sin, (jnp.ones(4),), at_least={"all-reduce": 1},
    ...                          name="sin(x)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: sin(x) compiles to no all-reduce
      expected: at least 1 all-reduce in the compiled HLO (a sum (or mean) over devices: partial results combined, every device gets the total)
      got:      collectives in the compiled HLO: none
      likely cause: the devices never combine their partial results, or the layout is not the one the exercise asks for
      fix: print(jax.jit(f).lower(*args).compile().as_text()) and look for the collective
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs)
    # The counts are derived from the exported program, compiled by the grader's
    # program judge on its own mesh (the kernel does the same in place).
    run(Check("collective_counts", label, observe=lambda: programs_of((fn, args, kwargs)),
              observe_as="artifact",
              params=dict(compile=True, at_least=dict(at_least or {}),
                          at_most=dict(at_most or {}), absent=list(absent),
                          max_bytes=max_bytes,
                          section=section, hint=hint, fix=fix)))


@explainer("collective_counts")
def _explain_collective_counts(observed, expected, *, label, compile=True, section=None,
                               **params):
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)[0]
    max_bytes = params.pop("max_bytes", None)
    return (explain_collective_counts(facts.get("collective_counts", {}), name=label,
                                      section=section, **params)
            or explain_collective_bytes(facts, max_bytes, label=label, section=section,
                                        hint=params.get("hint"), fix=params.get("fix")))


def explain_collective_bytes(facts: Mapping, max_bytes: int | None, *, label: str,
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None) -> str | None:
    """What a program's collectives move, against the most the exercise needs (pure).

    A collective's name does not say what it carries: one ``psum`` of zero-padded
    slices is an all-gather in disguise, and an all-reduce of the whole batch is the
    batch gathered on every device. ``facts["collective_bytes"]`` (per class, each op
    counting the larger of what it reads and returns, per device) summed over every
    class may not exceed ``max_bytes``.

    >>> explain_collective_bytes({"collective_bytes": {"all-reduce": 64}}, 64, label="f") is None
    True
    >>> print(explain_collective_bytes({"collective_bytes": {"all-reduce": 1024}}, 64,
    ...                                label="f(x)"))
    the collectives of f(x) move more than the exercise needs
      expected: at most 64 bytes through collectives (per device)
      got:      1,024 bytes (all-reduce 1,024)
      likely cause: more than the partial results crosses devices: an array gathered whole in disguise (a sum of zero-padded slices), or a whole activation or batch sent where only a result needs combining
      fix: combine only the partial results each device computed from its own slices
    """
    if max_bytes is None:
        return None
    moved = {str(k): int(v) for k, v in dict(facts.get("collective_bytes") or {}).items()}
    total = sum(moved.values())
    if total <= int(max_bytes):
        return None
    return format_failure(
        f"the collectives of {label} move more than the exercise needs",
        expected=f"at most {int(max_bytes):,} bytes through collectives (per device)",
        got=f"{total:,} bytes ({', '.join(f'{k} {v:,}' for k, v in moved.items())})",
        cause=hint or ("more than the partial results crosses devices: an array gathered "
                       "whole in disguise (a sum of zero-padded slices), or a whole "
                       "activation or batch sent where only a result needs combining"),
        fix=fix or "combine only the partial results each device computed from its own slices",
        section=section)


# --------------------------------------------------------------------- placement

def _leaf_placement(leaf: Any, sharding: Any = None) -> dict:
    """One leaf as plain data: its shape and the devices holding each slice."""
    import numpy as np

    shape = tuple(int(s) for s in np.shape(leaf)) if hasattr(leaf, "shape") else None
    sharding = sharding if sharding is not None else getattr(leaf, "sharding", None)
    if shape is None or sharding is None or not hasattr(sharding, "devices_indices_map"):
        return {"kind": "not a JAX array", "shape": list(shape) if shape else None}
    slices: dict[tuple, set[int]] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        bounds = tuple(tuple(s.indices(n)[:2]) for s, n in zip(index, shape))
        slices.setdefault(bounds, set()).add(int(device.id))
    return {"kind": "array", "shape": list(shape),
            "slices": [[[list(b) for b in bounds], sorted(ids)]
                       for bounds, ids in sorted(slices.items())]}


def collect_tree_placement(tree: Any, shardings: Any = None) -> dict[str, dict]:
    """Where each leaf of a pytree lives, as plain data keyed by leaf path.

    Each entry is ``{"kind": "array", "shape": [...], "slices": [[bounds, ids], ...]}``
    with ``bounds`` one ``[start, stop]`` per dimension and ``ids`` the sorted ids of
    the devices holding that slice (copies included). With ``shardings`` (a pytree
    of ``Sharding`` objects matching ``tree``), the placement those shardings *would*
    give ``tree``'s shapes is collected instead: the expected side of a check.

    >>> import jax, jax.numpy as jnp
    >>> placed = collect_tree_placement({"w": jnp.ones((2, 3))})
    >>> placed["['w']"]["shape"], len(placed["['w']"]["slices"])
    ([2, 3], 1)
    """
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    if shardings is None:
        specs = [None] * len(leaves)
    else:
        specs = treedef.flatten_up_to(shardings)
    return {jax.tree_util.keystr(path): _leaf_placement(leaf, spec)
            for (path, leaf), spec in zip(leaves, specs)}


def describe_placement(entry: Mapping) -> str:
    """A placement entry of :func:`collect_tree_placement` in words (pure).

    >>> describe_placement({"kind": "array", "shape": [4, 2],
    ...                     "slices": [[[[0, 2], [0, 2]], [0]], [[[2, 4], [0, 2]], [1]]]})
    '2 slices of shape (2, 2), split along axis 0, on devices {0} | {1}'
    >>> describe_placement({"kind": "array", "shape": [3],
    ...                     "slices": [[[[0, 3]], [0, 1, 2, 3]]]})
    'a full copy on each of 4 devices (replicated)'
    """
    if entry.get("kind") != "array":
        return entry.get("kind", "not an array")
    shape = list(entry["shape"])
    slices = entry["slices"]
    if len(slices) == 1:
        ids = slices[0][1]
        return ("a full copy on each of %d devices (replicated)" % len(ids) if len(ids) > 1
                else f"all of it on device {ids[0]}")
    first = [b - a for a, b in slices[0][0]]
    split = [axis for axis, (size, whole) in enumerate(zip(first, shape)) if size != whole]
    copies = {len(ids) for _, ids in slices}
    holders = " | ".join("{" + ", ".join(map(str, ids)) + "}" for _, ids in slices[:4])
    more = " | ..." if len(slices) > 4 else ""
    copy_text = "" if copies == {1} else f", {max(copies)} copies of each"
    return (f"{len(slices)} slices of shape {tuple(first)}, split along axis "
            f"{', '.join(map(str, split))}{copy_text}, on devices {holders}{more}")


def explain_tree_placement(observed: Mapping[str, Mapping], expected: Mapping[str, Mapping], *,
                           name: str = "result", section: str | None = None,
                           hint: str | None = None, fix: str | None = None) -> str | None:
    """Compares two placements of :func:`collect_tree_placement`; the message or ``None``.

    Pure. Every misplaced leaf is listed with its path, expected against got.

    >>> whole = {"kind": "array", "shape": [2], "slices": [[[[0, 2]], [0, 1]]]}
    >>> split = {"kind": "array", "shape": [2], "slices": [[[[0, 1]], [0]], [[[1, 2]], [1]]]}
    >>> explain_tree_placement({"['w']": split}, {"['w']": split}) is None
    True
    >>> print(explain_tree_placement({"['w']": whole}, {"['w']": split}, name="params"))
    params is not placed as expected (1 of 1 leaves)
      ['w']: expected 2 slices of shape (1,), split along axis 0, on devices {0} | {1}
      ['w']: got      a full copy on each of 2 devices (replicated)
      likely cause: a leaf was gathered (or never split) where it should stay split, or split over the wrong mesh axis
      fix: print(jax.typeof(leaf)) or jax.debug.visualize_array_sharding(leaf) for each leaf, and return it with the layout it came in
    """
    wrong = []
    missing = sorted(set(expected) - set(observed))
    extra = sorted(set(observed) - set(expected))
    if missing or extra:
        return format_failure(
            f"{name} has the wrong structure",
            expected=f"leaves {sorted(expected)}", got=f"leaves {sorted(observed)}",
            cause=hint or "a leaf is missing or extra", fix=fix, section=section)
    for path in sorted(expected):
        want, got = expected[path], observed[path]
        if (want.get("kind"), want.get("slices")) != (got.get("kind"), got.get("slices")):
            wrong.append(path)
    if not wrong:
        return None
    details = []
    for path in wrong[:6]:
        details.append(f"{path}: expected {describe_placement(expected[path])}")
        details.append(f"{path}: got      {describe_placement(observed[path])}")
    if len(wrong) > 6:
        details.append(f"... and {len(wrong) - 6} more leaves")
    return format_failure(
        f"{name} is not placed as expected ({len(wrong)} of {len(expected)} leaves)",
        details=details,
        cause=hint or "a leaf was gathered (or never split) where it should stay split, "
                      "or split over the wrong mesh axis",
        fix=fix or "print(jax.typeof(leaf)) or jax.debug.visualize_array_sharding(leaf) "
                   "for each leaf, and return it with the layout it came in",
        section=section)


def assert_tree_placed_as(tree: Any, shardings: Any, *, name: str = "result",
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> None:
    """Asserts that every leaf of ``tree`` lives where ``shardings`` says.

    Placements are compared by what each device holds (``devices_indices_map``),
    never by spelling: ``P('data')`` and ``P('data', None)`` place a matrix alike.

    Args:
      tree: the student's pytree of arrays.
      shardings: a pytree of ``Sharding`` objects with ``tree``'s structure (a prefix
        is not enough: one sharding per leaf).
      name, section, hint, fix: how to name the tree, the section to reread, and a
        likely cause and a fix that replace the defaults.

    >>> import jax, jax.numpy as jnp
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> w = jax.device_put(jnp.ones(2), NamedSharding(mesh, P("data")))
    >>> assert_tree_placed_as({"w": w}, {"w": NamedSharding(mesh, P())})
    """
    __tracebackhide__ = True
    import jax

    def expect():
        try:
            return collect_tree_placement(tree, shardings)
        except (ValueError, TypeError) as err:  # the structures differ
            return {"(structure)": {"kind": "structure", "expected":
                                    str(jax.tree.structure(shardings)),
                                    "got": str(jax.tree.structure(tree)),
                                    "why": str(err).splitlines()[0][:300]}}

    run(Check("tree_placed_as", name, observe=lambda: collect_tree_placement(tree),
              expect=expect, observe_as="facts", expect_as="facts",
              params=dict(section=section, hint=hint, fix=fix)))


@explainer("tree_placed_as")
def _explain_tree_placed_as(observed, expected, *, label, section=None, hint=None, fix=None,
                            **_ignored):
    want = expected.facts if expected is not None else {}
    broken = want.get("(structure)") if isinstance(want, dict) else None
    if broken:
        return format_failure(f"{label} has the wrong structure", expected=broken["expected"],
                              got=broken["got"], cause=hint or broken["why"], fix=fix,
                              section=section)
    return explain_tree_placement(observed.facts, want, name=label, section=section,
                                  hint=hint, fix=fix)
