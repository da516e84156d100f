"""Mapping a function over a large batch in chunks: ``lax.map`` against ``vmap``.

``jax.vmap(f)(xs)`` runs every example at once: fast when the device has room, but
every intermediate of ``f`` exists for the whole batch at the same time.
``lax.map(f, xs, batch_size=k)`` runs a ``scan`` over chunks of ``k`` examples
(``vmap`` inside each chunk), so intermediates exist for ``k`` examples only.

What a chunked map looks like in a jaxpr is a stable fact: a ``scan`` whose length
is the number of chunks and whose per-step slice of ``xs`` has ``k`` rows.
:func:`collect_scan_facts` records every scan (plain data);
:func:`explain_map_chunks` judges them (pure); :func:`assert_maps_in_chunks` runs
both on a student's function.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure


# Operations of which a batched ``f`` holds one or a few copies per step, and a loop
# over the chunk's rows written out in the body holds one per row.
_HEAVY = frozenset({"dot_general", "exp", "exp2", "log", "log1p", "tanh", "logistic", "sin",
                    "cos", "sqrt", "rsqrt", "pow", "div", "reduce_sum", "reduce_max",
                    "reduce_min", "argmax", "argmin", "erf", "cumsum"})
# A body's reads of a closed-over array, one step's rows at a time.
_ROW_READS = frozenset({"dynamic_slice", "gather"})


def _scan_split(params) -> tuple[int, int]:
    """(consts, carries) among a scan's flat inputs, the rest being the per-step xs:
    ``num_consts``/``num_carry`` up to JAX 0.10, ``ft_in`` = (consts, carry, xs) in
    JAX 0.12, one entry per flat input."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    ft = params["ft_in"]  # a flattree.FTTuple of three: len() counts the flat inputs
    consts, carry, _ = getattr(ft, "elts", ft)
    return len(consts), len(carry)


def _rows_read(operand, result) -> set[int]:
    """The rows a step reads from a closed-over array: ``{k}`` for a block of ``k`` rows
    (``(n, d) -> (k, d)``, or one chunk of an array reshaped to ``(chunks, k, d)``); a
    single row (``(n, d) -> (d,)``) reads no block."""
    operand, shape = tuple(int(d) for d in operand), [int(d) for d in result]
    while shape and shape[0] == 1:
        shape.pop(0)
    if shape and (len(shape) == len(operand) or (
            len(operand) >= 3 and len(shape) == len(operand) - 1
            and operand[-len(shape):] == tuple(shape))):
        return {shape[0]}
    return set()


def _scans(jaxpr, depth: int, out: list) -> None:
    from collections import Counter

    from autograder.programs.jaxpr import _sub_jaxprs, iter_eqns

    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name == "scan":
            n_consts, n_carry = _scan_split(eqn.params)
            xs = [tuple(int(d) for d in v.aval.shape) for v in eqn.invars[n_consts + n_carry:]
                  if hasattr(v, "aval") and hasattr(v.aval, "shape")]
            rows = {s[1] for s in xs if len(s) >= 2}
            body = eqn.params["jaxpr"].jaxpr
            consts = set(body.invars[:n_consts])
            for inner in body.eqns:  # rows sliced from a closed-over xs by the step index
                if inner.primitive.name in _ROW_READS and inner.invars[0] in consts:
                    rows |= _rows_read(inner.invars[0].aval.shape, inner.outvars[0].aval.shape)
            heavy = Counter(e.primitive.name for e in iter_eqns(body)
                            if e.primitive.name in _HEAVY)
            out.append({"length": int(eqn.params["length"]), "depth": depth,
                        "step_rows": sorted(rows),
                        "inner_scans": sorted(int(e.params["length"]) for e in iter_eqns(body)
                                              if e.primitive.name == "scan"),
                        "copies": max(heavy.values(), default=0)})
        for sub in _sub_jaxprs(eqn.params):
            _scans(sub, depth + 1, out)


def collect_scan_facts(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                       static_argnums: Sequence[int] = (),
                       section: str | None = None) -> dict[str, Any]:
    """Every ``scan`` in ``fn``'s jaxpr, as plain data.

    Returns ``{"scans": [{"length": steps, "depth": nesting depth, "step_rows": [the
    first dimension of each per-step slice of xs, and the rows of each block a step
    slices from a closed-over array by its index], "inner_scans": [the lengths of the
    scans inside its body], "copies": the most copies of one arithmetic operation in
    its body}, ...], "while": count}``, after dropping what nothing reads (a scan
    whose results are thrown away is not there). A ``lax.map(f, xs, batch_size=k)``
    over ``n`` rows is a scan of length ``n // k`` with ``step_rows == [k]``;
    ``lax.map`` without ``batch_size`` has one row per step (``step_rows`` then holds
    the row's own first dimension, or nothing for vectors).

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> facts = collect_scan_facts(lambda xs: lax.map(jnp.sin, xs, batch_size=4),
    ...                            (jnp.ones((12, 3)),))
    >>> facts["scans"]
    [{'length': 3, 'depth': 0, 'step_rows': [4], 'inner_scans': [], 'copies': 1}]
    """
    import jax

    from autograder.programs.jaxpr import count_primitives

    del section
    from jax._src.interpreters import partial_eval as pe

    jaxpr = call(jax.make_jaxpr(fn, static_argnums=tuple(static_argnums)), tuple(args),
                 kwargs or {}) if callable(fn) else call(fn)
    # A scan whose results nothing reads (its chunks computed, then vmap over the whole
    # batch returned) is no loop over the batch: dead equations are dropped first.
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    jaxpr = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))[0]
    scans: list = []
    _scans(jaxpr, 0, scans)
    return {"scans": scans, "while": int(count_primitives(jaxpr)["while"])}


def explain_map_chunks(observed: Mapping, expected: Any = None, *, n: int, chunk: int,
                       name: str = "the function", section: str | None = None,
                       hint: str | None = None, fix: str | None = None) -> str | None:
    """Judges scan facts: is the batch of ``n`` rows mapped in chunks of ``chunk``? (pure)

    Passes when some scan runs ``n // chunk`` steps (or ``ceil(n / chunk)`` for a
    padded last chunk) over slices of ``chunk`` rows. ``expected`` is unused (the rule
    is the chunking); it is accepted so that every ``explain_*`` has one shape.

    >>> ok = {"scans": [{"length": 3, "depth": 0, "step_rows": [4]}], "while": 0}
    >>> explain_map_chunks(ok, n=12, chunk=4) is None
    True
    >>> one_by_one = {"scans": [{"length": 12, "depth": 0, "step_rows": [3]}], "while": 0}
    >>> print(explain_map_chunks(one_by_one, n=12, chunk=4, name="f(xs)"))
    f(xs) does not map the batch in chunks of 4
      expected: a scan of 3 steps over chunks of 4 rows
      got:      a scan of 12 steps (one example per step)
      likely cause: lax.map without batch_size runs one example per step: the least memory, but n sequential steps
      fix: lax.map(f, xs, batch_size=chunk) runs vmap(f) on chunk rows per step
    """
    del expected
    steps = {n // chunk, math.ceil(n / chunk)}
    scans = list(observed.get("scans", []))
    chunked = [s for s in scans
               if int(s["length"]) in steps and chunk in [int(r) for r in s["step_rows"]]]
    want = f"a scan of {n // chunk} steps over chunks of {chunk} rows"
    for scan in chunked:
        # f batched inside each chunk: not a loop over the chunk's rows (a nested
        # lax.map or scan of `chunk` steps, or `chunk` copies of the work written out).
        if not (chunk > 1 and chunk in scan.get("inner_scans", [])) and not (
                chunk >= 4 and int(scan.get("copies", 0)) >= chunk):
            return None
    if chunked:
        scan = chunked[0]
        inner = chunk > 1 and chunk in scan.get("inner_scans", [])
        return format_failure(
            f"{name} does not batch f inside each chunk of {chunk}", expected=want
            + ", with f applied to the chunk's rows at once (vmap)",
            got=(f"a scan of {scan['length']} steps whose body loops over the {chunk} rows "
                 "of each chunk" if inner else
                 f"a scan of {scan['length']} steps whose body holds {scan['copies']} "
                 "copies of the same operation, about one per row of the chunk"),
            cause=hint or ("the rows of a chunk run one after another (lax.map without "
                           "batch_size, or a Python loop over the rows inside the step): "
                           "the chunk is not processed together"),
            fix=fix or "inside the step, apply jax.vmap(f) to the chunk's rows",
            section=section)
    if not scans:
        got = ("no loop: " + ("a while_loop" if observed.get("while") else
                              "the whole batch at once (vmap), or a Python loop that was "
                              "unrolled while tracing"))
        cause = hint or ("without a loop over chunks every intermediate exists for all "
                         f"{n} rows at once, which is what chunking avoids; a Python loop "
                         "is unrolled into one copy of the body per chunk")
    else:
        shown = "; ".join(
            f"a scan of {s['length']} steps"
            + (" (one example per step)" if int(s["length"]) == n else
               f" over slices of {s['step_rows'][0]} rows" if s["step_rows"] else "")
            for s in scans[:3])
        got = shown
        if any(int(s["length"]) == n for s in scans):
            cause = hint or ("lax.map without batch_size runs one example per step: the "
                             "least memory, but n sequential steps")
        else:
            cause = hint or "the chunk size is not the one asked for (a fixed number, or n)"
    return format_failure(
        f"{name} does not map the batch in chunks of {chunk}", expected=want, got=got,
        cause=cause,
        fix=fix or "lax.map(f, xs, batch_size=chunk) runs vmap(f) on chunk rows per step",
        section=section)


def assert_maps_in_chunks(fn: Callable, args: Sequence, *, n: int, chunk: int,
                          kwargs: dict | None = None, static_argnums: Sequence[int] = (),
                          name: str | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None) -> dict:
    """Asserts that ``fn(*args)`` maps its ``n`` rows in chunks of ``chunk`` (one scan).

    Args:
      fn: the student's function.
      args, kwargs: its inputs; those at ``static_argnums`` stay Python values (a
        function argument, the chunk size).
      n: the number of rows being mapped.
      chunk: the number of rows each step must process together.
      name, section, hint, fix: how to name the call, the section to reread, and a
        likely cause and a fix that replace the defaults.

    Returns:
      The facts of :func:`collect_scan_facts`.

    >>> import jax, jax.numpy as jnp
    >>> xs = jnp.ones((10, 2))
    >>> _ = assert_maps_in_chunks(lambda xs: jax.lax.map(jnp.sin, xs, batch_size=5), (xs,),
    ...                           n=10, chunk=5)
    >>> assert_maps_in_chunks(jax.vmap(jnp.sin), (xs,), n=10, chunk=5, name="vmap(sin)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: vmap(sin) does not map the batch in chunks of 5
      expected: a scan of 2 steps over chunks of 5 rows
      got:      no loop: the whole batch at once (vmap), or a Python loop that was unrolled while tracing
      likely cause: without a loop over chunks every intermediate exists for all 10 rows at once, which is what chunking avoids; a Python loop is unrolled into one copy of the body per chunk
      fix: lax.map(f, xs, batch_size=chunk) runs vmap(f) on chunk rows per step
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs)
    return run(Check("maps_in_chunks", label,
                     observe=lambda: collect_scan_facts(fn, args, kwargs,
                                                        static_argnums=static_argnums),
                     observe_as="facts",
                     params=dict(n=n, chunk=chunk, section=section, hint=hint, fix=fix)))


@explainer("maps_in_chunks")
def _explain_maps_in_chunks(observed, expected, *, label, **params):
    return explain_map_chunks(observed.facts, name=label, **params)
