"""Where a program's work lies: inside the regions of a loop or a branch, or outside.

A structure check that asks only whether a ``stablehlo.while`` or ``stablehlo.case``
is present is fooled by dead structure: a loop that does nothing beside the real work
unrolled, a switch whose branches never matter beside a ``select`` of every branch.
What the exercise teaches is that the work runs *inside* the region. This module
counts a program's operations that compute (everything but layout: an allow-list,
so the same maths under another op name is still counted) inside the regions of the
region ops and outside them, following calls into the functions they call.
"""
from __future__ import annotations

import math

from autograder.programs.mlir import Op, dims, parse_module, signature_types
from autograder.programs.while_trips import trip_counts_by_function

# Operations that move, reshape or relabel data, and the program's own structure:
# the allow-list of what may stand outside a loop or a branch at no cost.
LAYOUT = frozenset({
    "stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.broadcast",
    "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
    "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.concatenate",
    "stablehlo.convert", "stablehlo.iota", "stablehlo.get_tuple_element", "stablehlo.tuple",
    "stablehlo.return", "func.return", "func.call", "stablehlo.pad", "stablehlo.reverse",
    "stablehlo.bitcast_convert", "stablehlo.copy", "stablehlo.optimization_barrier",
    "stablehlo.custom_call", "sdy.sharding_constraint", "mhlo.sharding",
})
REGION_OPS = {"loop": frozenset({"stablehlo.while"}), "branch": frozenset({"stablehlo.case",
                                                                          "stablehlo.if"})}


def new_counts() -> dict[str, dict[str, int]]:
    return {kind: {"regions": 0, "inside": 0, "outside": 0} for kind in REGION_OPS}


def tally(counts: dict, name: str, enclosing: frozenset) -> frozenset:
    """Counts one operation named ``name`` inside the regions of the kinds
    ``enclosing``; returns the kinds whose regions it opens (a loop, a branch)."""
    own = frozenset(k for k, kinds in REGION_OPS.items() if name in kinds)
    for kind, c in counts.items():
        if kind in own:
            c["regions"] += 1
        elif name not in LAYOUT:
            c["inside" if kind in enclosing else "outside"] += 1
    return own


def region_work(text: str, funcs: dict | None = None) -> dict[str, dict[str, int]]:
    """For each kind of region op (``"loop"``, ``"branch"``): ``{"regions": n, "inside":
    k, "outside": m}``, how many such ops the program holds, and how many computing
    operations lie inside their regions and outside them. One parse, one walk.

    >>> import jax, jax.numpy as jnp
    >>> from jax import lax
    >>> def loop(x):
    ...     return lax.fori_loop(0, 9, lambda i, c: jnp.sin(c) * 2.0, x)
    >>> region_work(jax.jit(loop).lower(1.0).as_text())["loop"]
    {'regions': 1, 'inside': 4, 'outside': 0}
    >>> def dead(x):  # the work unrolled beside a loop that does nothing
    ...     for _ in range(9):
    ...         x = jnp.sin(x) * 2.0
    ...     return lax.fori_loop(0, 2, lambda i, c: c + 1.0, x)
    >>> region_work(jax.jit(dead).lower(1.0).as_text())["loop"]
    {'regions': 1, 'inside': 3, 'outside': 18}
    """
    funcs = parse_module(text) if funcs is None else funcs
    counts = new_counts()

    def walk(ops: list[Op], enclosing: frozenset) -> None:
        for op in ops:
            own = tally(counts, op.kind, enclosing)
            if op.kind == "func.call" and op.callee in funcs:
                # A function called twice is counted twice: an unrolled loop of calls
                # is as much work as the calls it makes.
                walk(funcs[op.callee][1], enclosing)
            for body in op.regions:
                walk(body, enclosing | own)

    if "main" in funcs:
        walk(funcs["main"][1], frozenset())
    return counts


def program_work(text: str, funcs: dict | None = None,
                 trips: list[list] | None = None) -> dict:
    """``{"elements": w, "unknown_loops": k}``: how many elements the program's computing
    operations produce when it runs, each loop body counted once per trip and each
    called function once per call; ``k`` loops whose trip count is not a constant
    (a ``while_loop`` that stops on a computed condition) count their body once.

    A cost that follows the work rather than the program's size or its names: a
    Jacobian built in the wrong mode runs max(n, m) linearized passes instead of
    min(n, m), batched (a larger array) or one after another in a loop (more trips),
    and either way produces about max(n, m) / min(n, m) times as many elements.

    >>> import jax, jax.numpy as jnp
    >>> from jax import lax
    >>> once = jax.jit(lambda x: jnp.sin(x) * 2.0).lower(jnp.ones(10)).as_text()
    >>> program_work(once)
    {'elements': 20, 'unknown_loops': 0}
    >>> looped = jax.jit(lambda xs: lax.map(lambda x: jnp.sin(x) * 2.0, xs)).lower(jnp.ones((7, 10)))
    >>> program_work(looped.as_text())["elements"] >= 7 * 20
    True

    ``funcs``/``trips``: the module already parsed (:func:`parse_module`) and its
    :func:`trip_counts_by_function`, where the caller has them.
    """
    funcs = parse_module(text) if funcs is None else funcs
    trips = trip_counts_by_function(text) if trips is None else trips
    # Unknown counts where the two readings do not see the same functions.
    loops = dict(zip(funcs, trips)) if len(trips) == len(funcs) else {}
    unknown = [0]

    def cost(ops: list[Op], order: list, depth: int) -> int:
        total = 0
        for op in ops:
            if op.kind == "stablehlo.while":
                k = order.pop(0) if order else None
                if not isinstance(k, int):
                    unknown[0] += 1
                    k = 1
                total += max(k, 0) * sum(cost(r, order, depth) for r in op.regions)
                continue
            if op.kind == "func.call" and op.callee in funcs and depth < 64:
                total += cost(funcs[op.callee][1], list(loops.get(op.callee, [])), depth + 1)
            elif op.kind not in LAYOUT:
                # The most elements the op reads or writes: a reduction reads its whole
                # input, an elementwise op writes as many as it reads.
                ins, outs = signature_types(op.sig or "")
                total += max((math.prod(dims(t)) for t in ins + outs), default=0)
            # Every other region once: a case's branches as if each ran (an upper bound
            # of the one that does), a shard_map body, a reduction's scalar adder (its
            # work is counted in the elements the reduce reads).
            for region in op.regions:
                total += cost(region, order, depth)
        return total

    elements = cost(funcs["main"][1], list(loops.get("main", [])), 0) if "main" in funcs else 0
    return {"elements": int(elements), "unknown_loops": unknown[0]}


def explain_region_work(facts: dict, region: str, *, label: str, section: str | None = None,
                        hint: str | None = None, fix: str | None = None) -> str | None:
    """The verdict on where the work lies (``facts``: a program's ``region_work``): at
    least as many computing operations inside the loops (branches) as outside them,
    and, where the judge ran the program perturbed (``region_live``, from
    :mod:`autograder.programs.region_liveness`), at least as many inside that change
    its result: padding that changes nothing is not work.

    A real answer's setup outside its loop is small beside the step inside it (the
    course's answers: 0-6 operations outside, 10-210 inside); a loop that does nothing
    beside the steps written out, or a switch that only picks among branches computed
    before it, has most of its work outside (144 against 2, 15 against 0).
    """
    from autograder.core.feedback import format_failure

    work = (facts.get("region_work") or {}).get(region) if isinstance(facts, dict) else None
    if not isinstance(work, dict) or not work.get("regions"):
        return None  # no region at all: the presence checks say so
    inside, outside = int(work.get("inside", 0)), int(work.get("outside", 0))
    where = "loop body" if region == "loop" else "branches"
    if outside <= inside:
        live = (facts.get("region_live") or {}).get(region) or {}
        if live.get("verdict") != "dead":
            return None
        return format_failure(
            f"the work of {label} is not inside its {where}",
            expected=f"most of the work inside the {where}, and that work changes the result",
            got=_dead_work(live, inside, outside, region),
            cause=hint or ("operations that do not matter (multiplied by zero, selected "
                           "away, cancelled) or pass the carry on unchanged (times one, plus "
                           "zero) beside the real step written out of the loop"
                           if region == "loop" else
                           "branches whose work does not matter (multiplied by zero, "
                           "selected away) beside every branch computed outside the switch"),
            fix=fix or f"move the step itself into the {where}",
            section=section)
    return format_failure(
        f"the work of {label} is not inside its {where}",
        expected=f"most computing operations inside the {where} (what the exercise teaches "
                 "is that the work runs there)",
        got=f"{inside} operation(s) inside, {outside} outside",
        cause=hint or ("a loop that does little beside the steps written out in Python (or "
                       "a switch that only picks among values all computed before it): the "
                       "program still grows with the steps, or still computes every branch"
                       if region == "loop" else
                       "every branch is computed before the switch, which only picks a "
                       "value: the program still computes every branch"),
        fix=fix or (f"move the step itself into the {where}"),
        section=section)


def _dead_work(live: dict, inside: int, outside: int, region: str) -> str:
    """What the perturbation runs found, in words (see explain_region_work)."""
    idle = live.get("idle")
    text = (f"{live.get('outside', outside)} computing operation(s) outside; inside, "
            f"{live.get('inside', inside)}, of which at least {live.get('dead', 0)} do no work "
            "(the grader perturbed each one's results and ran the program"
            + ("" if region == "loop" else ", each branch forced in turn")
            + ": the outputs stayed the same"
            + (f", or, for {idle} of them, changed only as they did when the value the "
               "operation reads was perturbed: it passes that value on" if idle else "") + ")")
    sampled, most = live.get("sampled"), live.get("at_most_live")
    if sampled and most is not None:
        text += (f"; a weighted sample of the others ({sampled[0]} of {sampled[1]} draws "
                 f"doing work) bounds the work inside at {most} operation(s), fewer than "
                 "outside")
    return text
