"""Trip counts of the while loops in a StableHLO program, read from its text alone.

A counted loop (``scan``, ``fori_loop`` with Python bounds, ``lax.map``) lowers to a
``stablehlo.while`` whose condition compares a carried counter, which starts at a
constant, with a constant; a loop written by hand may count down, compare the other
way round, or step by more than one. The count is read from the condition's comparison
(``LT``, ``LE``, ``GT``, ``GE``, ``NE``, either operand order) and the counter's step
in the body (the ``add`` or ``subtract`` of a constant that the body returns in the
counter's place). A ``while_loop`` that stops on a computed condition has no such
count. A loop whose trip count is the batch size runs the examples one at a time.
"""
from __future__ import annotations

import re

_FUNC = re.compile(r"(?m)^\s*func\.func ")
_INT_CONSTANT = re.compile(r"(%[\w#]+) = stablehlo\.constant dense<(-?\d+)> : tensor<[iu]\d+>")
_WHILE = re.compile(r"stablehlo\.while\((.*?)\) :.*?\n\s*cond \{(.*?)\n\s*\} do \{", re.S)
_WHILE_TYPED = re.compile(r"stablehlo\.while\((.*?)\) :([^\n]*)\n\s*cond \{(.*?)\n\s*\} do \{", re.S)
_COMPARE = re.compile(r"stablehlo\.compare\s+(LT|LE|GT|GE|NE), (%[\w#]+), (%[\w#]+)")
_RETURN = re.compile(r"stablehlo\.return ([^:]*?) :")
_STEP = re.compile(r"(%[\w#]+) = stablehlo\.(add|subtract) (%[\w#]+), (%[\w#]+)")
_SWAP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE"}


def while_trip_counts(text: str, by_function: list[list] | None = None) -> list:
    """The trip count of each ``stablehlo.while`` in a program, None where it is not a
    constant (at most 100). ``by_function``: :func:`trip_counts_by_function` of ``text``,
    where the caller has it.

    >>> import jax, jax.numpy as jnp
    >>> text = jax.jit(lambda xs: jax.lax.map(jnp.sin, xs)).lower(jnp.ones(5)).as_text()
    >>> while_trip_counts(text)
    [5]
    """
    by_function = trip_counts_by_function(text) if by_function is None else by_function
    return [k for counts in by_function for k in counts][:100]


_FLOAT_TYPE = re.compile(r"tensor<(?:[\dx?]*x)?(?:f16|bf16|f32|f64|f8\w*)>")


def while_stops_on_values(text: str) -> list[bool]:
    """For each ``stablehlo.while`` of a program (every function, in order; at most 100),
    whether its condition computes on floating-point values or reads a boolean the body
    carries (computed there from the values): a ``while_loop`` that stops when the
    iterates settle does, a counted loop (``fori_loop``, ``scan``, a counter compared
    with a bound) reads only integers.

    >>> import jax, jax.numpy as jnp
    >>> settle = lambda x: jax.lax.while_loop(lambda c: jnp.abs(c[1] - c[0]) > 1e-6,
    ...                                       lambda c: (c[1], jnp.cos(c[1])), (x, jnp.cos(x)))
    >>> count = lambda x: jax.lax.fori_loop(0, 10, lambda i, c: jnp.cos(c), x)
    >>> flag = lambda x: jax.lax.while_loop(lambda c: ~c[1], lambda c: (jnp.cos(c[0]),
    ...                                     jnp.abs(jnp.cos(c[0]) - c[0]) < 1e-6), (x, False))
    >>> [while_stops_on_values(jax.jit(f).lower(1.0).as_text()) for f in (settle, count, flag)]
    [[True], [False], [True]]
    """
    out = []
    for m in _WHILE_TYPED.finditer(text):
        names = [a.split("=")[0].strip() for a in m.group(1).split(",")]
        types = re.findall(r"tensor<[^>]*>", m.group(2))
        flags = [n for n, t in zip(names, types) if t == "tensor<i1>"]
        # A flag carried from the body (computed there from the values) counts too.
        out.append(bool(_FLOAT_TYPE.search(m.group(3))) or any(
            re.search(re.escape(n) + r"\b", m.group(3)) for n in flags))
    return out[:100]


def trip_counts_by_function(text: str) -> list[list]:
    """:func:`while_trip_counts` for each ``func.func`` of the module, in the order of the
    functions and of the loops in each (a loop's count where its function is called)."""
    out = []
    for body in _FUNC.split(text)[1:]:
        counts = []
        matches = list(_WHILE.finditer(body))
        for k, m in enumerate(matches):
            # SSA names are scoped by region (the cond and the body may both hold a
            # %c_2): a name means its last definition before it is used.
            before = body[:m.start()]
            carried = re.findall(r"(%[\w#]+) = (%[\w#]+)", m.group(1))
            inits = dict(carried)
            rest = body[m.end():matches[k + 1].start() if k + 1 < len(matches) else len(body)]
            counts.append(_trips(m.group(2), inits, [a for a, _ in carried], before, rest))
        out.append(counts)
    return out


def _trips(cond: str, inits: dict, order: list, before: str, rest: str) -> int | None:
    for test in _COMPARE.finditer(cond):
        relation, a, b = test.groups()
        if a not in inits and b in inits:
            relation, a, b = _SWAP[relation], b, a
        if a not in inits:
            continue
        start = _constant(inits[a], before)
        stop = _constant(b, before + cond[:test.start()])
        step = _step(a, order, before, rest)
        if start is None or stop is None or not step:
            continue
        span = {"LT": stop - start, "LE": stop - start + step,
                "GT": stop - start, "GE": stop - start + step, "NE": stop - start}[relation]
        if relation in ("LT", "LE") and step < 0 or relation in ("GT", "GE") and step > 0:
            return None  # counts away from its bound: it stops on something else
        trips = -(-span // step) if span * step > 0 else 0
        if relation == "NE" and span % step:
            return None
        return max(int(trips), 0)
    return None


def _step(counter: str, order: list, before: str, body: str) -> int | None:
    """What the body adds to the counter: the constant of the add/subtract it returns
    in the counter's place (the first such op of the counter if the return is not
    found); +1 where neither is there (the old reading)."""
    ret = _RETURN.search(body)
    wanted = None
    if ret and counter in order:
        names = [n.strip() for n in ret.group(1).split(",")]
        if len(names) == len(order):
            wanted = names[order.index(counter)]
    for m in _STEP.finditer(body):
        name, op, x, y = m.groups()
        if (wanted is None or name == wanted) and counter in (x, y):
            other = y if x == counter else x
            value = _constant(other, before + body[:m.start()])  # constants may be hoisted
            if value is None:
                return None
            if op == "subtract":
                return -value if x == counter else None
            return value
    return 1


def _constant(name: str, text: str) -> int | None:
    found = [v for n, v in _INT_CONSTANT.findall(text) if n == name]
    return int(found[-1]) if found else None
