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


def _scans(jaxpr, depth: int, out: list) -> None:
    from autograder.programs.jaxpr import _sub_jaxprs

    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name == "scan":
            start = eqn.params.get("num_consts", 0) + eqn.params.get("num_carry", 0)
            xs = [tuple(int(d) for d in v.aval.shape) for v in eqn.invars[start:]
                  if hasattr(v, "aval") and hasattr(v.aval, "shape")]
            out.append({"length": int(eqn.params["length"]), "depth": depth,
                        "step_rows": sorted({s[1] for s in xs if len(s) >= 2})})
        for sub in _sub_jaxprs(eqn.params):
            _scans(sub, depth + 1, out)


def collect_scan_facts(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                       static_argnums: Sequence[int] = (),
                       section: str | None = None) -> dict[str, Any]:
    """Every ``scan`` in ``fn``'s jaxpr, as plain data.

    Returns ``{"scans": [{"length": steps, "depth": nesting depth, "step_rows": [the
    first dimension of each per-step slice of xs]}, ...], "while": count}``. A
    ``lax.map(f, xs, batch_size=k)`` over ``n`` rows is a scan of length ``n // k``
    with ``step_rows == [k]``; ``lax.map`` without ``batch_size`` has one row per step
    (``step_rows`` then holds the row's own first dimension, or nothing for vectors).

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> facts = collect_scan_facts(lambda xs: lax.map(jnp.sin, xs, batch_size=4),
    ...                            (jnp.ones((12, 3)),))
    >>> facts["scans"]
    [{'length': 3, 'depth': 0, 'step_rows': [4]}]
    """
    import jax

    from autograder.programs.jaxpr import count_primitives

    del section
    jaxpr = call(jax.make_jaxpr(fn, static_argnums=tuple(static_argnums)), tuple(args),
                 kwargs or {}) if callable(fn) else call(fn)
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
    for scan in scans:
        if int(scan["length"]) in steps and chunk in [int(r) for r in scan["step_rows"]]:
            return None
    want = f"a scan of {n // chunk} steps over chunks of {chunk} rows"
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
