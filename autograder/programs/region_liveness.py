"""Which operations inside a loop body or a switch's branches change a program's result.

:mod:`autograder.programs.region_work` counts the computing operations inside the
regions of the loops and branches of a program and outside them: most of the work must
lie inside. A count is fooled by padding: a loop body that holds the real step once, or
not at all, beside hundreds of operations whose results are multiplied by zero, selected
away or cancelled (``junk * 0.0``, ``jnp.where(i > 100, junk, c)``, ``(c + junk) -
junk``), next to the steps written out in Python. Here the judge asks the program which
operations matter: it perturbs an operation's results inside the loop and runs the
program on the grader's inputs; an operation whose perturbation leaves every output
unchanged (to rounding) is dead on those inputs, whatever its name.

How, in the judge (never in the student's process):

- The exported StableHLO is parsed with JAX's MLIR bindings, calls to private functions
  are inlined (an operation is perturbed at one call site, not at every call of its
  function) and common subexpressions merged (``junk`` written twice is one ``junk``).
- After each operation to test, its results ``r`` become ``select(on, r * a + b, r)``
  (a scale and a shift, so that a consumer invariant to one, a softmax or a
  normalisation, still sees the other; integers get ``+ 1``, booleans are negated).
  ``on`` is read from a new argument of ``main``, a vector with one switch per
  operation, which the regions capture: one compilation, then one cheap run per test.
- Every loop is bounded by a budget of iterations, a second new argument threaded
  through every ``while`` and ``case`` (:func:`thread_fuel`): a perturbation that stops
  a loop from ending (a negated condition, a counter that no longer moves) ends.
- A switch runs one branch on one input: every ``case`` gets a new index, chosen by a
  third new argument where it is set (:func:`force_cases`), and the operations of each
  branch are tested with that branch (and the branches that lead to it) forced, against
  a run forced the same way. A branch that, forced on these inputs, gives inf or NaN
  where the program does not (a logarithm guarded by its switch) cannot be judged
  there: its operations count as live (``"unjudged"``).
- The heaviest operations are tested first (an operation with a body of its own, a
  reduction, weighs its whole body), dead groups doubling, until the live ones reach
  the count outside (``"live"``) or the dead ones leave too few (``"dead"``). Undecided
  there, a weighted sample of the rest bounds their live share (Clopper-Pearson,
  :data:`ALPHA`).

Left alone: the same maths written twice in different forms and cancelled (``f(c) -
g(c)`` with ``g`` another formula for ``f``) changes the output when one side is
perturbed, and a term scaled below the value checks' tolerance is live; the operation
that zeroes a junk term (``junk * 0.0``) is itself live (its result reaches the output,
and shifted it changes it), so padding made of many separately zeroed terms counts one
live operation per term; programs for more than one device keep their counts alone.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from autograder.programs.mlir_rewrite import (CASE, UNIT, force_cases, instrument,
                                              operations, perturbable, prepare, thread_fuel,
                                              walk_ops)
from autograder.programs.region_work import LAYOUT, REGION_OPS, new_counts, tally

# Regions that XLA runs as control flow, whose bodies may read a value defined outside
# them: the perturbation switches reach the operations there. Operations in the bodies
# of other operations (a reduction's combiner, a sort's comparator) belong to their
# owner: perturbing the owner's results perturbs them.
_CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})
# The seconds of perturbed runs one program may take (its compilations are not
# counted: a padded program is slow to compile, and that must not save it); past them
# the verdict is "undecided" and the counts alone judge (a program whose runs take that
# long is slow for its value checks too).
TIME_BUDGET = 30.0
# Changes within rounding of the output are not changes (see :func:`changed`); a live
# operation's perturbation (a quarter of its value and more) moves the output far more.
# 1e-4 leaves room for the cancellation noise of a junk 1000 times the output; a junk
# term scaled to move the output by more is live work here, and by more than an
# exercise's value tolerance, a wrong value.
RTOL, ATOL = 1e-4, 1e-6


@dataclasses.dataclass
class _Unit:
    op: object          # the MLIR operation whose results are perturbed
    weight: int         # computing operations it stands for (itself and its bodies)
    kinds: frozenset    # the region kinds ("loop", "branch") it lies inside
    perturbable: bool = True
    # The branches that lead to it: ((case number, branch), ...) from the outside in,
    # cases numbered in the order of a walk of the program (see force_cases).
    path: tuple = ()


def _weight(op) -> int:
    return (op.name not in LAYOUT) + sum(o.name not in LAYOUT for o in walk_ops(op, []))


def units_of(main, *, tag_cases: bool = False
             ) -> tuple[list[_Unit], dict[str, dict[str, int]]]:
    """The operations inside regions that can be perturbed, with their weights and the
    branches that lead to them, and the counts of
    :func:`autograder.programs.region_work.region_work` on the inlined program (inside,
    outside per kind). ``tag_cases``: each ``stablehlo.case`` gets its number, for
    :func:`autograder.programs.mlir_rewrite.force_cases`."""
    from jax._src.lib.mlir import ir

    units: list[_Unit] = []
    counts = new_counts()
    cases = [0]

    def walk(ops, enclosing: frozenset, path: tuple) -> None:
        for op in ops:
            own = tally(counts, op.name, enclosing)
            if op.name in _CONTROL_FLOW:
                if enclosing and op.name not in LAYOUT:
                    units.append(_Unit(op, 1, enclosing - own, path=path))
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
                units.append(_Unit(op, _weight(op), enclosing, path=path))

    walk(operations(main.regions[0].blocks[0]), frozenset(), ())
    # A case inside a loop counts for the loop, not for the branches it holds.
    units = [u for u in units if u.kinds]
    return units, counts


def _leaves(tree) -> list[np.ndarray]:
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


class _Instrumented:
    """The program with the operations ``chosen`` (indices into the units) perturbable
    and its switches' branches choosable, compiled: ``run(switches, fuel, path)`` ->
    (flat outputs, fuel left), ``path`` the branches to force (see :class:`_Unit`)."""

    def __init__(self, exported, call_args, call_kwargs, chosen: list[int]):
        import jax
        from jax._src.export import _export
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib.mlir import ir

        with jmlir.make_ir_context(), ir.Location.unknown():
            module, main = prepare(exported.mlir_module())
            units, _ = units_of(main, tag_cases=True)
            i64 = ir.IntegerType.get_signless(64)
            for position, k in enumerate(chosen):
                units[k].op.attributes[UNIT] = ir.IntegerAttr.get(i64, position)
            self.free = np.full(max(force_cases(main), 1), -1, np.int32)
            thread_fuel(main)
            instrument(module, len(chosen))
            if not module.operation.verify():
                raise ValueError("the instrumented program does not verify")
            blob = _export._module_to_bytecode(module)
        n_in, n_out = len(exported.in_avals), len(exported.out_avals)
        self.off = np.zeros(max(len(chosen), 1), np.float32)
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

    def run(self, switches=None, fuel=None, path: tuple = ()):
        forced = self.free.copy()
        for case, branch in path:
            forced[case] = branch
        *values, left = self.compiled(*self.args, forced,
                                      np.int32(UNLIMITED if fuel is None else fuel),
                                      self.off if switches is None else switches)
        return _leaves(values), int(left)


UNLIMITED = np.int32(2**31 - 1)
# The heaviest operations are tested first, one window of them compiled at once; a real
# loop is decided there (its first operations are live, and little lies outside it).
FIRST_WINDOW = 16
# Then a sample of the rest, drawn in proportion to weight (with replacement), bounds
# the live share of the untested operations: Clopper-Pearson at ALPHA, the chance that
# a loop whose untested work is live enough is called dead. 256 draws bound a share of
# 0 live draws below 5.3 %: a padding must outweigh the work outside ~19 times to stay
# undecided (and such a program takes minutes to compile).
SAMPLE = 256
ALPHA = 1e-6
# Undecided after one sample (a padding holding a few live operations, the ``* 0.0``
# that ends each junk term, three branches of it: 1 hit in 256 bounds the live share
# below 7.5 %, not enough against 31 operations outside), more are drawn, up to this
# many samples in all; only operations not tested yet are compiled.
SAMPLE_ROUNDS = 4


def share_bounds(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Clopper-Pearson bounds ``(low, high)`` on a binomial share from ``k`` of ``n``:
    ``P(X <= k | high) = alpha`` and ``P(X >= k | low) = alpha``.

    >>> low, high = share_bounds(0, 256)
    >>> low, round(high, 4)
    (0.0, 0.0525)
    >>> [round(b, 3) for b in share_bounds(128, 256)]
    [0.353, 0.647]
    """
    from math import comb

    def at_most(j, p):  # P(X <= j | p): decreasing in p
        return sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(j + 1))

    def solve(j, target):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if at_most(j, mid) > target else (lo, mid)
        return (lo + hi) / 2

    high = 1.0 if k >= n else solve(k, alpha)
    low = 0.0 if k <= 0 else solve(k - 1, 1.0 - alpha)
    return low, high


def region_liveness(exported, call_args, call_kwargs, outputs, kinds=tuple(REGION_OPS), *,
                    time_budget: float = TIME_BUDGET, seed: int = 0) -> dict[str, dict]:
    """For each region kind in ``kinds``: how much of the work inside its regions is
    live on these inputs (``outputs``: what the program returned on them).

    ``{"inside": n, "outside": m, "live": a, "dead": b, "verdict": v, "runs": r}``:
    ``a`` (``b``) operations were shown to change (not to change) the result. The
    heaviest :data:`FIRST_WINDOW` operations are tested first (dead groups doubling,
    live ones one at a time) until ``a >= m`` (verdict ``"live"``) or ``n - b < m``
    (``"dead"``). Undecided there, a weighted sample of the rest is tested and bounds
    their live share (``"sampled": [live draws, draws]``): ``"dead"`` when even the
    upper bound leaves the live work below ``m``, ``"live"`` when the lower bound
    reaches it, else ``"undecided"`` (the counts alone judge). Past ``time_budget``
    seconds of perturbed runs (compilations not counted): ``"undecided"``. A program
    that cannot be instrumented gets ``{"skipped": reason}``.
    """
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    def skipped(reason):
        return {kind: {"skipped": reason} for kind in kinds}

    if exported.nr_devices != 1 or len(exported.platforms) != 1:
        return skipped("a program for more than one device or platform")
    with jmlir.make_ir_context(), ir.Location.unknown():
        module, main = prepare(exported.mlir_module())
        if any(op.name == "stablehlo.if" for op in walk_ops(main, [])):
            return skipped("stablehlo.if")
        units, counts = units_of(main)
        units = [dataclasses.replace(u, op=None, perturbable=perturbable(u.op)) for u in units]
        del module, main
    original = _leaves(outputs)
    result = {}
    for kind in kinds:
        outside, inside = counts[kind]["outside"], counts[kind]["inside"]
        mine = sorted((k for k, u in enumerate(units) if kind in u.kinds),
                      key=lambda k: -units[k].weight)
        # An operation none of whose results the perturbation knows is not judged.
        live = sum(units[k].weight for k in mine if not units[k].perturbable)
        queue = [k for k in mine if units[k].perturbable]
        tester = _Tester(exported, call_args, call_kwargs, original, units, time_budget)
        try:
            first = queue[:FIRST_WINDOW]
            known = tester.test(first, stop=lambda lv, dd: live + lv >= outside
                                or inside - dd < outside)
            live += sum(units[k].weight for k in known if known[k])
            dead = sum(units[k].weight for k in known if not known[k])
            entry = {"inside": inside, "outside": outside}
            rest = [k for k in queue if k not in known]
            verdict = ("live" if live >= outside else "dead" if inside - dead < outside
                       else None)
            if verdict is None and rest:
                rng = np.random.default_rng(seed)
                weights = np.array([units[k].weight for k in rest], np.float64)
                found: dict[int, bool] = {}
                hits = drawn = 0
                for _ in range(SAMPLE_ROUNDS):
                    draws = rng.choice(len(rest), size=SAMPLE, p=weights / weights.sum())
                    found.update(tester.test([rest[i] for i in sorted(set(draws.tolist()))
                                              if rest[i] not in found]))
                    hits += sum(bool(found[rest[i]]) for i in draws)
                    drawn += SAMPLE
                    shown = sum(units[k].weight for k in found if found[k])
                    # The live work of the rest lies within [low, high] of its weight
                    # (the sampled operations shown live are a floor too); each round
                    # is one look, so each gets its share of ALPHA.
                    low, high = share_bounds(hits, drawn, ALPHA / SAMPLE_ROUNDS)
                    if live + high * weights.sum() < outside:
                        verdict = "dead"
                    elif live + max(low * weights.sum(), shown) >= outside:
                        verdict = "live"
                    if verdict is not None:
                        break
                entry["sampled"] = [hits, drawn]
                dead += sum(units[k].weight for k in found if not found[k])
                live += shown
            entry["verdict"] = verdict or "undecided"
        except _OutOfTime:
            dead = live = 0
            entry = {"inside": inside, "outside": outside, "verdict": "undecided"}
        entry.update(live=live, dead=dead, runs=tester.runs)
        if tester.drift:
            entry["drift"] = True
        if tester.unjudged:
            entry["unjudged"] = tester.unjudged
        result[kind] = entry
    return result


class _OutOfTime(Exception):
    pass


class _Tester:
    """Runs perturbations of groups of units, one compilation per window of units."""

    def __init__(self, exported, call_args, call_kwargs, original, units, budget):
        self.args = (exported, call_args, call_kwargs)
        self.original, self.units = original, units
        self.budget = budget  # seconds of perturbed runs (compilations are not counted)
        self.runs, self.drift, self.spent, self.unjudged = 0, False, 0.0, 0

    def test(self, window: list[int], stop=lambda live, dead: False) -> dict[int, bool]:
        """``{unit: live}`` for the units of ``window`` (in order), galloping: after a
        dead group the next is twice as large, after a live one a single unit; stops
        early once ``stop(live weight, dead weight)``. The units inside a switch's
        branch are tested with that branch forced (every switch on their path), against
        a baseline run forced the same way."""
        if not window:
            return {}
        probe = _Instrumented(*self.args, window)
        # Switched off, it computes the same function, not always to the last bit (XLA
        # fuses and contracts it otherwise, and a chaotic computation amplifies that):
        # perturbed runs are compared with its own run, which must repeat exactly; how
        # far it lies from the program's is recorded.
        natural, left = probe.run()
        if changed(natural, probe.run()[0]):
            raise ValueError("the program's outputs differ between two runs")
        self.drift = self.drift or not _close(self.original, natural)
        # A perturbed run may take twice the iterations the program took, and some more.
        fuel = min(2 * (int(UNLIMITED) - left) + 100, int(UNLIMITED))
        known: dict[int, bool] = {}
        weight = {k: self.units[k].weight for k in window}
        tally = [0, 0]  # live, dead
        for path in dict.fromkeys(self.units[k].path for k in window):
            members = [k for k in window if self.units[k].path == path]
            baseline = natural
            if path:
                baseline = probe.run(None, fuel, path)[0]
                if changed(baseline, probe.run(None, fuel, path)[0]):
                    raise ValueError("the program's outputs differ between two runs")
                if not _finite_where(natural, baseline):
                    # That branch, forced on these inputs, gives inf or nan where the
                    # program does not (a logarithm its switch keeps from negative
                    # numbers): nothing can be seen to change there, so its operations
                    # are not judged, and count as live.
                    known.update((k, True) for k in members)
                    tally[0] += sum(weight[k] for k in members)
                    self.unjudged += len(members)
                    continue
            i, size = 0, 1
            while i < len(members) and not stop(*tally):
                if self.spent > self.budget:
                    raise _OutOfTime
                group = members[i:i + size]
                switches = np.zeros_like(probe.off)
                switches[[window.index(k) for k in group]] = 1.0
                self.runs += 1
                started = time.monotonic()
                outputs = probe.run(switches, fuel, path)[0]
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
        return known


def _finite_where(natural: list[np.ndarray], forced: list[np.ndarray]) -> bool:
    """Whether ``forced`` is finite wherever ``natural`` is (float outputs)."""
    for a, b in zip(natural, forced):
        if a.shape == b.shape and (b.dtype.kind in "fc" or b.dtype.name == "bfloat16"):
            wide = np.complex128 if np.iscomplexobj(b) else np.float64
            if np.any(np.isfinite(a.astype(wide)) & ~np.isfinite(b.astype(wide))):
                return False
    return True


def liveness_facts(exported, call_args, call_kwargs, result, facts: dict,
                   kind: str = "loop") -> dict:
    """``{"region_live": ...}`` for :func:`autograder.programs.artifacts.derive_one`:
    which operations inside the program's loops (``kind="loop"``) or switches'
    branches (``"branch"``) change its result, where the counts alone
    (``facts["region_work"]``) would let the region pass (some work outside it, no
    more than inside); ``{}`` elsewhere. A program that cannot be instrumented keeps its
    counts alone, with the reason."""
    kinds = [k for k, work in (facts.get("region_work") or {}).items()
             if k == kind and work.get("regions")
             and 0 < work.get("outside", 0) <= work.get("inside", 0)]
    if not kinds:
        return {}
    try:
        return {"region_live": region_liveness(exported, call_args, call_kwargs, result, kinds)}
    except Exception as err:  # noqa: BLE001 - the counts still judge the program
        return {"region_live": {k: {"skipped": f"{type(err).__name__}: {str(err)[:200]}"}
                                for k in kinds}}
