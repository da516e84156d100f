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
  through every ``while`` and ``case`` (``mlir_rewrite.thread_fuel``): a perturbation
  that stops a loop from ending (a negated condition, a counter that no longer moves)
  ends.
- A switch runs one branch on one input: every ``case`` gets a new index, chosen by a
  third new argument where it is set (``mlir_rewrite.force_cases``), and the
  operations of each branch (and of the branches that lead to it) are tested on the
  first input that takes it: the grader's inputs, or those with one integer scalar set
  to another branch number or one boolean negated (``liveness_probe.variants``), on
  which forcing the branch changes nothing and forcing another does (the switch runs
  there). A branch forced where its switch would not take it can tell (it may read
  the index, or make a NaN that only its own index avoids) and compute something
  else, so forcing on the grader's inputs is the fallback only. There, a branch that
  gives inf or NaN where the program does not (a logarithm guarded by its switch)
  cannot be judged: its operations count as live (``"unjudged"``).
- Mattering is not working: ``c * 1.0``, ``c + junk * 0.0`` and the ``junk * 0.0``
  itself all reach the output. Each operation found live is asked whether it passes a
  source through (perturbing the source changes the outputs exactly as perturbing the
  operation alike does) or reads only dead operations and constants (a constant whose
  shift reaches the output); either way it is ``"idle"`` and counts as dead
  (``liveness_probe.Tester.work``).
- The heaviest operations are tested first (an operation with a body of its own, a
  reduction, weighs its whole body), dead groups doubling, until the live ones reach
  the count outside (``"live"``) or the dead ones leave too few (``"dead"``). Undecided
  there, weighted samples of the rest bound their live share (Clopper-Pearson,
  :data:`ALPHA`, :data:`BATCHES`); still undecided, the rest is tested whole when no
  more than :data:`LAST_WINDOW` operations of it are left untested (``"exhaustive"``).

Left alone: the same maths written twice in different forms and cancelled (``f(c) -
g(c)`` with ``g`` another formula for ``f``) changes the output when one side is
perturbed, and a term scaled below the value checks' tolerance is live; an operation
whose source is a block argument (the loop's carry itself) or lies outside the regions
cannot be asked whether it passes it through, and counts as work (one per chain of
``* 1.0``); an operation that is an identity only on these inputs (a relu of positive
numbers, adding a zero bias) is idle here, in a correct answer too (its real arithmetic
still counts); a branch that no variant of the inputs takes (chosen by a float's sign)
is judged forced, where it can tell; programs for more than one device keep their
counts alone.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from autograder.programs.liveness_probe import OutOfTime, Tester, leaves, units_of
from autograder.programs.mlir_rewrite import perturbable, prepare, walk_ops
from autograder.programs.region_work import REGION_OPS

# The seconds of perturbed runs one program may take (its compilations are not
# counted: a padded program is slow to compile, and that must not save it); past them
# the verdict is "undecided" and the counts alone judge (a program whose runs take that
# long is slow for its value checks too).
TIME_BUDGET = 30.0
# The heaviest operations are tested first, one window of them compiled at once; a real
# loop is decided there (its first operations are live, and little lies outside it).
FIRST_WINDOW = 16
# Then samples of the rest, drawn in proportion to weight (with replacement), bound
# the live share of the untested operations: Clopper-Pearson at ALPHA, the chance that
# a loop whose untested work is live enough is called dead, split evenly between the
# looks (one after each batch). Small batches first: a padding is often decided after
# 32 draws (0 of 32 bounds the share below 39 %), and each batch's live operations are
# also tested for work (Tester.work: two runs per source). 1,024 draws in all bound a
# share of 0 live draws below 1.6 % (a padding must outweigh the work outside ~65 times
# to stay undecided); only operations not tested yet are compiled.
BATCHES = (32, 32, 64, 128, 256, 256, 256)
ALPHA = 1e-6
# Undecided after the draws, the operations no draw has tested are tested too when they
# are at most this many (one more compilation): the verdict is then exact.
LAST_WINDOW = 512


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
    ``a`` (``b``) operations were shown to work (to change nothing, or to be idle:
    ``"idle"`` counts those, ``"unjudged"`` the live ones of branches that cannot be
    forced here). The heaviest :data:`FIRST_WINDOW` operations are tested first (dead
    groups doubling, live ones one at a time) until ``a >= m`` (verdict ``"live"``) or
    ``n - b < m`` (``"dead"``). Undecided there, weighted samples of the rest are tested
    and bound their live share (``"sampled": [live draws, draws]``, ``"at_most_live"``
    the upper bound on the work inside): ``"dead"`` when even the
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
    original = leaves(outputs)
    result = {}
    for kind in kinds:
        outside, inside = counts[kind]["outside"], counts[kind]["inside"]
        mine = sorted((k for k, u in enumerate(units) if kind in u.kinds),
                      key=lambda k: -units[k].weight)
        # An operation none of whose results the perturbation knows is not judged.
        live = sum(units[k].weight for k in mine if not units[k].perturbable)
        queue = [k for k in mine if units[k].perturbable]
        tester = Tester(exported, call_args, call_kwargs, original, units, time_budget)
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
                for batch in BATCHES:
                    draws = rng.choice(len(rest), size=batch, p=weights / weights.sum())
                    found.update(tester.test([rest[i] for i in sorted(set(draws.tolist()))
                                              if rest[i] not in found]))
                    hits += sum(bool(found[rest[i]]) for i in draws)
                    drawn += batch
                    shown = sum(units[k].weight for k in found if found[k])
                    # The live work of the rest lies within [low, high] of its weight
                    # (the sampled operations shown live are a floor too); each round
                    # is one look, so each gets its share of ALPHA.
                    low, high = share_bounds(hits, drawn, ALPHA / len(BATCHES))
                    entry["at_most_live"] = int(live + high * weights.sum())
                    if live + high * weights.sum() < outside:
                        verdict = "dead"
                    elif live + max(low * weights.sum(), shown) >= outside:
                        verdict = "live"
                    if verdict is not None:
                        break
                entry["sampled"] = [hits, drawn]
                untested = [k for k in rest if k not in found]
                if verdict is None and len(untested) <= LAST_WINDOW:
                    # The draws have tested most of the rest: the others are tested too,
                    # and the verdict is exact (a bound from draws stays loose where a
                    # few operations beside the padding are live).
                    found.update(tester.test(untested))
                    shown = sum(units[k].weight for k in found if found[k])
                    verdict = "live" if live + shown >= outside else "dead"
                    entry["exhaustive"] = True
                dead += sum(units[k].weight for k in found if not found[k])
                live += shown
            entry["verdict"] = verdict or "undecided"
        except OutOfTime:
            dead = live = 0
            entry = {"inside": inside, "outside": outside, "verdict": "undecided"}
        entry.update(live=live, dead=dead, runs=tester.runs)
        if tester.drift:
            entry["drift"] = True
        if tester.unjudged:
            entry["unjudged"] = tester.unjudged
        if tester.idle:
            entry["idle"] = tester.idle
        result[kind] = entry
    return result


def liveness_facts(exported, call_args, call_kwargs, result, facts: dict,
                   kind: str = "loop") -> dict:
    """``{"region_live": ...}`` for :func:`autograder.programs.artifacts.derive_one`:
    which operations inside the program's loops (``kind="loop"``) or switches'
    branches (``"branch"``) change its result, where the counts alone
    (``facts["region_work"]``) would let the region pass (some work outside it, no
    more than inside); ``{}`` elsewhere. A program that cannot be instrumented keeps its
    counts alone, with the reason."""
    work = (facts.get("region_work") or {}).get(kind) or {}
    if not (work.get("regions") and 0 < work.get("outside", 0) <= work.get("inside", 0)):
        return {}
    try:
        return {"region_live": region_liveness(exported, call_args, call_kwargs, result, [kind])}
    except Exception as err:  # noqa: BLE001 - the counts still judge the program
        return {"region_live": {kind: {"skipped": f"{type(err).__name__}: {str(err)[:200]}"}}}
