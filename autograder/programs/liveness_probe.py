"""The perturbation runs behind :mod:`autograder.programs.region_liveness`.

:func:`units_of` lists the operations inside a program's loops and branches that can
be perturbed (with their weights, the branches that lead to them and the units their
operands read); :class:`Probe` compiles the program rewritten so that a chosen window
of them can be perturbed and its switches' branches forced
(:mod:`autograder.programs.mlir_rewrite`); :class:`Tester` runs the perturbations,
galloping over dead groups, and asks each live operation whether it works
(:meth:`Tester.work`). The verdicts and the statistics are region_liveness's.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from autograder.programs.mlir_rewrite import (CASE, PAIR, UNIT, force_cases,
                                              instrument, operations, prepare, thread_fuel,
                                              walk_ops)
from autograder.programs.region_work import LAYOUT, new_counts, tally

# Regions that XLA runs as control flow, whose bodies may read a value defined outside
# them: the perturbation switches reach the operations there. Operations in the bodies
# of other operations (a reduction's combiner, a sort's comparator) belong to their
# owner: perturbing the owner's results perturbs them.
_CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})
# Changes within rounding of the output are not changes (see :func:`changed`); a live
# operation's perturbation (a quarter of its value and more) moves the output far more.
# 1e-4 leaves room for the cancellation noise of a junk 1000 times the output; a junk
# term scaled to move the output by more is live work here, and by more than an
# exercise's value tolerance, a wrong value.
RTOL, ATOL = 1e-4, 1e-6


@dataclasses.dataclass
class Unit:
    op: object          # the MLIR operation whose results are perturbed
    weight: int         # computing operations it stands for (itself and its bodies)
    kinds: frozenset    # the region kinds ("loop", "branch") it lies inside
    perturbable: bool = True
    # The branches that lead to it: ((case number, branch), ...) from the outside in,
    # cases numbered in the order of a walk of the program (see force_cases).
    path: tuple = ()
    # The units whose results its operands read (through layout operations), and
    # whether any operand comes from elsewhere (a block argument, an operation outside
    # the regions): see Tester.work.
    sources: tuple = ()
    external: bool = False


def _weight(op) -> int:
    return (op.name not in LAYOUT) + sum(o.name not in LAYOUT for o in walk_ops(op, []))


def units_of(main, *, tag_cases: bool = False
             ) -> tuple[list[Unit], dict[str, dict[str, int]]]:
    """The operations inside regions that can be perturbed, with their weights and the
    branches that lead to them, and the counts of
    :func:`autograder.programs.region_work.region_work` on the inlined program (inside,
    outside per kind). ``tag_cases``: each ``stablehlo.case`` gets its number, for
    :func:`autograder.programs.mlir_rewrite.force_cases`."""
    from jax._src.lib.mlir import ir

    units: list[Unit] = []
    counts = new_counts()
    cases = [0]

    def walk(ops, enclosing: frozenset, path: tuple) -> None:
        for op in ops:
            own = tally(counts, op.name, enclosing)
            if op.name in _CONTROL_FLOW:
                if enclosing and op.name not in LAYOUT:
                    units.append(Unit(op, 1, enclosing - own, path=path))
                number = None
                if op.name == "stablehlo.case":
                    number, cases[0] = cases[0], cases[0] + 1
                    if tag_cases:
                        op.attributes[CASE] = ir.IntegerAttr.get(
                            ir.IntegerType.get_signless(64), number)
                for b, region in enumerate(op.regions):
                    inner = path if number is None else path + ((number, b),)
                    for block in region.blocks:
                        walk(operations(block), enclosing | own, inner)
                continue
            for nested in walk_ops(op, []):  # a reduction's body: counted, not a unit
                tally(counts, nested.name, enclosing)
            if enclosing and op.name not in LAYOUT and op.name not in (
                    "stablehlo.return", "func.return"):
                units.append(Unit(op, _weight(op), enclosing, path=path))

    walk(operations(main.regions[0].blocks[0]), frozenset(), ())
    # A case inside a loop counts for the loop, not for the branches it holds.
    units = [u for u in units if u.kinds]
    i64 = ir.IntegerType.get_signless(64)
    for k, u in enumerate(units):
        u.op.attributes[_ID] = ir.IntegerAttr.get(i64, k)
    for u in units:
        u.sources, u.external = _sources(u.op)
    for u in units:
        del u.op.attributes[_ID]
    return units, counts


_ID = "liveness.id"
_CONSTANT = frozenset({"stablehlo.constant", "stablehlo.iota"})


def _sources(op) -> tuple[tuple[int, ...], bool]:
    """The units (tagged ``liveness.id``) that ``op``'s operands read, through layout
    operations, and whether an operand also reads something else than a unit or a
    constant."""
    from jax._src.lib.mlir import ir

    found: list[int] = []
    external, stack, steps = False, list(op.operands), 0
    while stack and steps < 10_000:
        steps += 1
        owner = stack.pop().owner
        if isinstance(owner, ir.Block):
            external = True
            continue
        owner = owner.operation if hasattr(owner, "operation") else owner
        if _ID in owner.attributes:
            found.append(ir.IntegerAttr(owner.attributes[_ID]).value)
        elif owner.name in LAYOUT and owner.name not in _CONSTANT:
            stack.extend(owner.operands)
        elif owner.name not in _CONSTANT:
            external = True
    return tuple(dict.fromkeys(found)), external or bool(stack)


def leaves(tree) -> list[np.ndarray]:
    import jax

    out = []
    for leaf in jax.tree.leaves(tree):
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def changed(original: list[np.ndarray], perturbed: list[np.ndarray]) -> bool:
    """Whether a perturbed run's outputs differ from the original's: integers at all,
    floats by more than rounding (``|d| > RTOL * |x| + ATOL``) where the perturbed value
    is finite. Rounding is not a change: ``(c + junk') - junk'`` is ``c`` to the last
    bits, and a perturbation that only drives an output to inf or NaN (``junk * 0``
    with an overflowing ``junk``) is not a sign of life."""
    for a, b in zip(original, perturbed):
        if a.shape != b.shape:
            return True
        pairs = [(a.real, b.real), (a.imag, b.imag)] if np.iscomplexobj(b) else [(a, b)]
        for x, y in pairs:
            if y.dtype.kind in "fc" or y.dtype.name == "bfloat16":
                x64, y64 = x.astype(np.float64), y.astype(np.float64)
                far = ~(np.abs(x64 - y64) <= RTOL * np.abs(x64) + ATOL)
                if np.any(np.isfinite(y64) & far):
                    return True
            elif np.any(x != y):
                return True
    return False


def _close(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x.astype(np.complex128) if np.iscomplexobj(x)
                                           else x.astype(np.float64),
                                           y.astype(np.complex128) if np.iscomplexobj(y)
                                           else y.astype(np.float64),
                                           rtol=1e-4, atol=1e-6, equal_nan=True)
        for x, y in zip(a, b))


class Probe:
    """The program with the operations ``chosen`` (indices into the units) perturbable
    and its switches' branches choosable, compiled: ``run(switches, fuel, path)`` ->
    (flat outputs, fuel left), ``path`` the branches to force (see :class:`Unit`).
    The units of ``pairs`` get a second switch each, all of one strength
    (``self.pair_slot[unit]``), for :meth:`Tester.work`: one compilation serves both."""

    def __init__(self, exported, call_args, call_kwargs, chosen: list[int],
                 pairs: list[int] = ()):
        import jax
        from jax._src.export import _export
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib.mlir import ir

        with jmlir.make_ir_context(), ir.Location.unknown():
            module, main = prepare(exported.mlir_module())
            units, _ = units_of(main, tag_cases=True)
            # The number of branches of each case (force_cases drops the tags).
            self.branches = {ir.IntegerAttr(op.attributes[CASE]).value: len(op.regions)
                             for op in walk_ops(main, []) if CASE in op.attributes}
            i64 = ir.IntegerType.get_signless(64)
            for position, k in enumerate(chosen):
                units[k].op.attributes[UNIT] = ir.IntegerAttr.get(i64, position)
            self.pair_slot = {k: len(chosen) + j for j, k in enumerate(pairs)}
            for k, position in self.pair_slot.items():
                units[k].op.attributes[PAIR] = ir.IntegerAttr.get(i64, position)
            self.free = np.full(max(force_cases(main), 1), -1, np.int32)
            thread_fuel(main)
            instrument(module, len(chosen) + len(pairs))
            if not module.operation.verify():
                raise ValueError("the instrumented program does not verify")
            blob = _export._module_to_bytecode(module)
        n_in, n_out = len(exported.in_avals), len(exported.out_avals)
        self.off = np.zeros(max(len(chosen) + len(pairs), 1), np.float32)
        scalar_i32 = jax.core.ShapedArray((), np.int32)
        self.args = (call_args, call_kwargs)
        instrumented = dataclasses.replace(
            exported, mlir_module_serialized=blob,
            in_tree=jax.tree.structure(((call_args, call_kwargs, self.free, UNLIMITED,
                                         self.off), {})),
            in_avals=tuple(exported.in_avals) + (
                jax.core.ShapedArray(self.free.shape, np.int32), scalar_i32,
                jax.core.ShapedArray(self.off.shape, np.float32)),
            in_shardings_hlo=tuple(exported.in_shardings_hlo) + (None, None, None),
            _in_named_shardings=tuple(exported._in_named_shardings) + (None, None, None),
            module_kept_var_idx=tuple(exported.module_kept_var_idx) + (
                n_in, n_in + 1, n_in + 2),
            out_tree=jax.tree.structure([0] * (n_out + 1)),
            out_avals=tuple(exported.out_avals) + (scalar_i32,),
            out_shardings_hlo=tuple(exported.out_shardings_hlo) + (None,),
            _out_named_shardings=tuple(exported._out_named_shardings) + (None,))
        self.compiled = jax.jit(instrumented.call).lower(
            call_args, call_kwargs, self.free, UNLIMITED, self.off).compile()

    def run(self, switches=None, fuel=None, path: tuple = (), args=None):
        """``args``: other inputs of the same types (``(call_args, call_kwargs)``)."""
        forced = self.free.copy()
        for case, branch in path:
            forced[case] = branch
        *values, left = self.compiled(*(args or self.args), forced,
                                      np.int32(UNLIMITED if fuel is None else fuel),
                                      self.off if switches is None else switches)
        return leaves(values), int(left)


UNLIMITED = np.int32(2**31 - 1)


class OutOfTime(Exception):
    pass


class Tester:
    """Runs perturbations of groups of units, one compilation per window of units."""

    def __init__(self, exported, call_args, call_kwargs, original, units, budget):
        self.args = (exported, call_args, call_kwargs)
        self.original, self.units = original, units
        self.budget = budget  # seconds of perturbed runs (compilations are not counted)
        self.runs, self.drift, self.spent, self.unjudged, self.idle = 0, False, 0.0, 0, 0
        # The inputs each branch path is judged on (see _home): an index into
        # [the grader's inputs] + variants, or None where no input takes it.
        self.variants = variants(call_args, call_kwargs,
                                 1 + max((b for u in units for _, b in u.path), default=0))
        self.homes: dict[tuple, int | None] = {}

    def test(self, window: list[int], stop=lambda live, dead: False) -> dict[int, bool]:
        """``{unit: live}`` for the units of ``window`` (in order), galloping: after a
        dead group the next is twice as large, after a live one a single unit; stops
        early once ``stop(live weight, dead weight)``. The units inside a switch's
        branch are tested with that branch forced (every switch on their path), against
        a baseline run forced the same way."""
        if not window:
            return {}
        # Each unit and the units it reads get a pair switch too, so that asking the
        # live ones whether they work (see work) needs no second compilation.
        pairs = list(dict.fromkeys(
            [k for k in window if self.units[k].perturbable]
            + [p for k in window for p in self.units[k].sources if self.units[p].perturbable]))
        probe = Probe(*self.args, window, pairs)
        # Switched off, it computes the same function, not always to the last bit (XLA
        # fuses and contracts it otherwise, and a chaotic computation amplifies that):
        # perturbed runs are compared with its own run, which must repeat exactly; how
        # far it lies from the program's is recorded.
        natural, fuel = self._natural(probe)
        self.drift = self.drift or not _close(self.original, natural)
        known: dict[int, bool] = {}
        unjudged: set[int] = set()
        weight = {k: self.units[k].weight for k in window}
        tally = [0, 0]  # live, dead
        # path -> [(baseline, inputs, fuel), members, next member, group size]
        paths: dict[tuple, list] = {}
        for path in dict.fromkeys(self.units[k].path for k in window):
            members = [k for k in window if self.units[k].path == path]
            where = (natural, None, fuel)
            if path:
                where = self._home(probe, path, natural, fuel)
                if not _finite_where(natural, where[0]):
                    # No input of the variants takes that branch, and forced on these
                    # inputs it gives inf or nan where the program does not (a logarithm
                    # its switch keeps from negative numbers): nothing can be seen to
                    # change there, so its operations are not judged, and count as live.
                    known.update((k, True) for k in members)
                    unjudged.update(members)
                    tally[0] += sum(weight[k] for k in members)
                    self.unjudged += len(members)
                    continue
            paths[path] = [where, members, 0, 1]
        asked: set[int] = set(unjudged)
        while True:
            for path, state in paths.items():
                (baseline, inputs, fuel_here), members, i, size = state
                while i < len(members) and not stop(*tally):
                    if self.spent > self.budget:
                        raise OutOfTime
                    group = members[i:i + size]
                    switches = np.zeros_like(probe.off)
                    switches[[window.index(k) for k in group]] = 1.0
                    self.runs += 1
                    started = time.monotonic()
                    outputs = probe.run(switches, fuel_here, path, inputs)[0]
                    self.spent += time.monotonic() - started
                    if not changed(baseline, outputs):
                        known.update((k, False) for k in group)
                        tally[1] += sum(weight[k] for k in group)
                        i += len(group)
                        size *= 2
                    elif len(group) == 1:
                        known[group[0]] = True
                        tally[0] += weight[group[0]]
                        i += 1
                    else:
                        size = 1
                state[2:] = [i, size]
            # The live ones found are asked whether they work; the idle ones count as
            # dead, and the galloping goes on where that leaves the verdict open.
            fresh = [k for k in known if known[k] and k not in asked]
            asked.update(fresh)
            idle = self.work(fresh, probe, {path: state[0] for path, state
                                            in paths.items()}) if fresh else {}
            for k in idle:
                known[k] = False
                tally[0] -= weight[k]
                tally[1] += weight[k]
            if not idle:
                return known

    @staticmethod
    def _natural(probe) -> tuple[list[np.ndarray], int]:
        """The instrumented program's own outputs (switched off), which must repeat
        exactly, and the fuel a perturbed run gets: twice the iterations the program
        took, and some more."""
        natural, left = probe.run()
        if changed(natural, probe.run()[0]):
            raise ValueError("the program's outputs differ between two runs")
        return natural, min(2 * (int(UNLIMITED) - left) + 100, int(UNLIMITED))

    def _home(self, probe: Probe, path: tuple, natural, fuel: int) -> tuple:
        """``(baseline, inputs, fuel)`` to judge the operations of the branches of
        ``path`` on: the first of the grader's inputs and their :func:`variants` on
        which the program takes those branches itself (forcing them changes nothing,
        and forcing another branch of the last switch does: so it runs, and not only
        in a loop that these inputs never enter), else the grader's inputs with the
        branches forced. A branch forced where its switch would not take it can tell
        (it may read the index, or compute a nan that only the right index avoids) and
        change what it computes; on an input that takes it, it computes what the value
        checks see there."""
        if path not in self.homes:
            self.homes[path] = None
            case, branch = path[-1]
            others = [path[:-1] + ((case, b),) for b in range(probe.branches.get(case, 0))
                      if b != branch]
            for v, inputs in enumerate([None] + self.variants):
                own, left = (natural, 1) if inputs is None else probe.run(None, fuel, (), inputs)
                self.runs += 2
                if left <= 0:  # the variant's loops run past the grader's budget
                    continue
                # _close, not changed: a forced nan is a change here.
                if (_close(own, probe.run(None, fuel, path, inputs)[0])
                        and any(not _close(own, probe.run(None, fuel, other, inputs)[0])
                                for other in others)):
                    self.homes[path] = v
                    break
        v = self.homes[path]
        inputs = None if not v else self.variants[v - 1]
        baseline, left = probe.run(None, fuel, path, inputs)
        if changed(baseline, probe.run(None, fuel, path, inputs)[0]):
            raise ValueError("the program's outputs differ between two runs")
        if v:  # the variant's own budget, as _natural gives the grader's inputs theirs
            fuel = min(2 * (fuel - left) + 100, int(UNLIMITED))
        return baseline, inputs, fuel

    def work(self, live: list[int], probe: Probe, where: dict) -> dict[int, bool]:
        """``{unit: False}`` for each unit of ``live`` that does no work on these inputs
        although its result matters: one that passes a source through (perturbing the
        source changes the outputs exactly as perturbing the unit alike does: ``c *
        1.0``, ``c + junk * 0.0``, a ``where`` that always picks one side), or one that
        reads nothing but dead units and constants (``junk * 0.0``: a constant whose
        shift still reaches the output). Each (unit, source) pair is run twice on
        ``probe``'s pair switches (which :meth:`test` gave every unit of its window and
        every source of one), the unit perturbed and the source perturbed with the same
        strength; ``where``: per branch path, the switched-off outputs, the inputs and
        the fuel (see :meth:`_home`)."""
        through: set[int] = set()
        source_live: dict[int, bool] = {}
        for u in live:
            path = self.units[u].path
            for p in self.units[u].sources:
                if p == u or not self.units[p].perturbable:
                    continue
                if self.spent > self.budget:
                    raise OutOfTime
                outs = []
                started = time.monotonic()
                baseline, inputs, fuel = where[path]
                for k in (u, p):
                    switches = np.zeros_like(probe.off)
                    switches[probe.pair_slot[k]] = 1.0
                    outs.append(probe.run(switches, fuel, path, inputs)[0])
                    self.runs += 1
                self.spent += time.monotonic() - started
                source_live[p] = source_live.get(p, False) or changed(baseline, outs[1])
                if not changed(outs[0], outs[1]):
                    through.add(u)
        verdict = {}
        for u in live:
            unit = self.units[u]
            constant = not unit.external and all(source_live.get(p) is False
                                                 for p in unit.sources)
            if u in through or constant:
                verdict[u] = False
                self.idle += 1
        return verdict


# The most variants of the grader's inputs a switch's branches are looked for on.
MAX_VARIANTS = 16


def variants(call_args, call_kwargs, branches: int) -> list[tuple]:
    """``(call_args, call_kwargs)`` with one integer scalar set to another of ``0 ..
    branches - 1`` or one boolean scalar negated, in turn (at most
    :data:`MAX_VARIANTS`): inputs on which a switch whose index the caller passes (an
    activation's ``kind``, a ``training`` flag) takes each of its branches."""
    import jax

    flat, tree = jax.tree.flatten((call_args, call_kwargs))
    out = []
    for i, leaf in enumerate(flat):
        dtype = getattr(leaf, "dtype", None)
        if (dtype is None or getattr(leaf, "shape", None) != ()
                or jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)):
            continue
        value = np.asarray(leaf)
        if value.dtype == np.bool_:
            options = [not bool(value)]
        elif np.issubdtype(value.dtype, np.integer):
            options = [v for v in range(branches) if v != int(value)]
        else:
            continue
        for option in options:
            new = list(flat)
            new[i] = np.asarray(option, value.dtype)
            out.append(jax.tree.unflatten(tree, new))
    return out[:MAX_VARIANTS]


def _finite_where(natural: list[np.ndarray], forced: list[np.ndarray]) -> bool:
    """Whether ``forced`` is finite wherever ``natural`` is (float outputs)."""
    for a, b in zip(natural, forced):
        if a.shape == b.shape and (b.dtype.kind in "fc" or b.dtype.name == "bfloat16"):
            wide = np.complex128 if np.iscomplexobj(b) else np.float64
            if np.any(np.isfinite(a.astype(wide)) & ~np.isfinite(b.astype(wide))):
                return False
    return True
