"""Trip counts of the while loops in a StableHLO program, read from its text alone.

A counted loop (``scan``, ``fori_loop`` with Python bounds, ``lax.map``) lowers to a
``stablehlo.while`` whose condition is ``counter < N`` with the counter starting at a
constant; a ``while_loop`` that stops on a computed condition has no such count. A
loop whose trip count is the batch size runs the examples one at a time.
"""
from __future__ import annotations

import re

_FUNC = re.compile(r"(?m)^\s*func\.func ")
_INT_CONSTANT = re.compile(r"(%[\w#]+) = stablehlo\.constant dense<(-?\d+)> : tensor<[iu]\d+>")
_WHILE = re.compile(r"stablehlo\.while\((.*?)\) :.*?\n\s*cond \{(.*?)\n\s*\} do \{", re.S)
_COUNTER_TEST = re.compile(r"stablehlo\.compare\s+LT, (%[\w#]+), (%[\w#]+)")


def while_trip_counts(text: str) -> list:
    """The trip count of each ``stablehlo.while`` in a program (``N - start``), None where
    it is not a constant.

    >>> import jax, jax.numpy as jnp
    >>> text = jax.jit(lambda xs: jax.lax.map(jnp.sin, xs)).lower(jnp.ones(5)).as_text()
    >>> while_trip_counts(text)
    [5]
    """
    out = []
    for body in _FUNC.split(text)[1:]:
        for m in _WHILE.finditer(body):
            # SSA names are scoped by region (the cond and the body may both hold a
            # %c_2): a name means its last definition before it is used.
            before = body[:m.start()]
            inits = dict(re.findall(r"(%[\w#]+) = (%[\w#]+)", m.group(1)))
            test = _COUNTER_TEST.search(m.group(2))
            trips = None
            if test and test.group(1) in inits:
                start = _constant(inits[test.group(1)], before)
                stop = _constant(test.group(2), before + m.group(2)[:test.start()])
                if start is not None and stop is not None:
                    trips = stop - start
            out.append(trips)
    return out[:100]


def _constant(name: str, text: str) -> int | None:
    found = [v for n, v in _INT_CONSTANT.findall(text) if n == name]
    return int(found[-1]) if found else None
