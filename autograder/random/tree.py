"""The shape of the key tree: many keys derived at once, not one after another.

A wide key tree (``jax.random.split(key, n)`` or ``fold_in`` under ``vmap``, then a
vmapped sampler) is the same program whatever ``n``; a Python loop over the items
adds operations with every item, and a ``scan``/``fori_loop`` that carries the key is
a chain ``n`` keys deep. :func:`assert_wide_key_tree` checks both, with two kinds of
evidence:

- **in-process facts** (the jaxpr, traced in the student's process): the PRNG
  primitives at each ``n`` (:func:`count_prng_ops`) and the loops whose body hands a
  key to the next iteration (:func:`collect_key_carrying_loops`). These are jaxpr
  facts with no StableHLO equivalent: ``jax.export`` lowers a key to its plain
  ``uint32`` data, so a loop that carries a key cannot be told from one that carries
  two integers (or a ``lax.map`` over a key array), and ``random_split``/
  ``random_bits`` lower to the threefry hash's integer arithmetic, in private
  functions whose names are JAX internals;
- **exported-program facts**: the function exported at both sizes; the grader counts
  the StableHLO ops of each program, outside the student's process, and a program
  that grows with ``n`` fails whatever the jaxpr facts said.

Only op and primitive counts are compared, never program text.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

from autograder.programs.artifacts import explain_program, program_facts, programs_of
from autograder.core.check import Check, NotAFunction, explainer, run
from autograder.core.feedback import format_failure
from autograder.programs.jaxpr import iter_eqns
from autograder.random.keys import _is_key

# The primitives that consume or derive keys, as they appear in a jaxpr.
PRNG_PRIMITIVES = ("random_seed", "random_split", "random_fold_in", "random_bits")
_LOOP_PRIMITIVES = ("scan", "while")
_DEFAULT_FIX = ("derive all n keys at once with `keys = jax.random.split(key, n)` and "
                "`jax.vmap` the per-item work over them")


def count_prng_ops(jaxpr) -> Counter:
    """Counts the PRNG primitives of a jaxpr, nested jaxprs included.

    ``random_split``, ``random_fold_in``, ``random_bits`` (behind every sampler) and
    ``random_seed``.

    >>> import jax
    >>> def deep(key):
    ...     out = []
    ...     for _ in range(3):
    ...         key, sub = jax.random.split(key)
    ...         out.append(jax.random.normal(sub))
    ...     return out
    >>> dict(count_prng_ops(jax.make_jaxpr(deep)(jax.random.key(0))))
    {'random_split': 3, 'random_bits': 3}
    """
    return Counter(eqn.primitive.name for eqn in iter_eqns(jaxpr)
                   if eqn.primitive.name in PRNG_PRIMITIVES)


def collect_key_carrying_loops(jaxpr) -> list[str]:
    """Names the ``scan``/``while`` loops whose body hands a key to the next iteration.

    A body that returns a key carries it: ``key, sub = jax.random.split(key)`` in a
    ``scan`` or ``fori_loop`` body, a chain of keys as deep as the loop is long.
    Mapping over keys made beforehand (``jax.lax.map(f, jax.random.split(key, n))``)
    carries none.

    >>> import jax
    >>> def chain(key):
    ...     def body(k, _):
    ...         k, sub = jax.random.split(k)
    ...         return k, jax.random.normal(sub)
    ...     return jax.lax.scan(body, key, None, length=4)[1]
    >>> collect_key_carrying_loops(jax.make_jaxpr(chain)(jax.random.key(0)))
    ['scan']
    """
    found = []
    for eqn in iter_eqns(jaxpr):
        if eqn.primitive.name not in _LOOP_PRIMITIVES:
            continue
        body = eqn.params.get("jaxpr") or eqn.params.get("body_jaxpr")
        body = getattr(body, "jaxpr", body)
        if body is not None and any(_is_key(getattr(v, "aval", None)) for v in body.outvars):
            found.append(eqn.primitive.name)
    return found


def collect_key_tree(fn: Callable, make_args: Callable[[int], Sequence],
                     sizes: Sequence[int], static_argnums=()) -> dict:
    """Traces ``fn(*make_args(n))`` for each ``n``: ``{"sizes", "counts", "loops"}``
    (per size ``[[primitive, count], ...]`` of the PRNG primitives; the key-carrying
    loops), as plain data."""
    import jax

    if not callable(fn):
        raise NotAFunction(type(fn).__name__ if fn is not None else "None")
    counts, loops = [], []
    for n in sizes:
        jaxpr = jax.make_jaxpr(fn, static_argnums=static_argnums)(*make_args(n))
        # Pairs, not a dict: JSON facts sort dict keys, and the message keeps jaxpr order.
        counts.append([[prim, int(c)] for prim, c in count_prng_ops(jaxpr).items()])
        loops.extend(collect_key_carrying_loops(jaxpr))
    return {"sizes": [int(n) for n in sizes], "counts": counts, "loops": loops}


def _exported_at_sizes(fn, make_args, sizes, static_argnums):
    import jax

    if not callable(fn):
        raise NotAFunction(type(fn).__name__ if fn is not None else "None")
    jitted = jax.jit(fn, static_argnums=static_argnums)
    return programs_of(*[(jitted, tuple(make_args(n)), {}) for n in sizes])


def assert_wide_key_tree(fn: Callable, make_args: Callable[[int], Sequence],
                         sizes: Sequence[int] = (4, 16), *, static_argnums=(),
                         name: str | None = None, section: str | None = None,
                         hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``fn`` derives its ``n`` keys at once, not one after another.

    Traces ``fn(*make_args(n))`` for each ``n`` in ``sizes``. A wide key tree
    (``jax.random.split(key, n)`` or ``fold_in`` under ``vmap``, then a vmapped
    sampler) has the same PRNG operations whatever ``n``; a Python loop adds
    operations with every item, and a ``scan``/``fori_loop`` that carries the key
    is a chain ``n`` keys deep (:func:`collect_key_carrying_loops`).

    Two checks, in order: the jaxpr facts (key-carrying loops, then PRNG primitive
    counts; in-process, see the module's docstring), then the StableHLO op counts
    of the programs exported at the first and last size (derived by the grader).

    >>> import jax
    >>> def wide(key, n):
    ...     return jax.vmap(jax.random.normal)(jax.random.split(key, n))
    >>> assert_wide_key_tree(wide, lambda n: (jax.random.key(0), n), static_argnums=(1,))
    >>> def deep(key, n):
    ...     out = []
    ...     for _ in range(n):
    ...         key, sub = jax.random.split(key)
    ...         out.append(jax.random.normal(sub))
    ...     return jax.numpy.stack(out)
    >>> assert_wide_key_tree(deep, lambda n: (jax.random.key(0), n), static_argnums=(1,))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: deep makes its random draws one item at a time: its PRNG work grows with n
      expected: the same PRNG operations for every n
      got:      n=4: 8 PRNG operations (random_split 4, random_bits 4); n=16: 32 PRNG operations (random_split 16, random_bits 16)
      likely cause: a Python loop over the items: a chain `key, sub = jax.random.split(key)`, or one sampler call per item
      fix: derive all n keys at once with `keys = jax.random.split(key, n)` and `jax.vmap` the per-item work over them
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "the function")
    sizes = [int(n) for n in sizes]
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    teach = dict(section=section, hint=hint, fix=fix,
                 error_fix="make the function traceable: no NumPy or float() on traced "
                           "values, and pass sizes as static arguments")
    run(Check("key_tree", label,
              observe=lambda: collect_key_tree(fn, make_args, sizes, statics),
              observe_as="facts", params=dict(teach)))
    ends = [sizes[0], sizes[-1]]
    run(Check("key_tree_program", label,
              observe=lambda: _exported_at_sizes(fn, make_args, ends, statics),
              observe_as="artifact", params=dict(teach, sizes=ends, tie="layout")))


@explainer("key_tree")
def explain_key_tree(observed, expected, *, label: str, section=None, hint=None, fix=None,
                     **_ignored) -> str | None:
    """Key-carrying loops first, then PRNG primitives that grow with n (jaxpr facts)."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    loops = [str(x) for x in facts.get("loops", [])]
    if loops:
        return format_failure(
            f"{label} carries a key from one loop iteration to the next: a key chain n deep",
            expected="keys made before the loop, none handed from iteration to iteration",
            got=f"a {loops[0]} loop whose body returns a key",
            cause=hint or ("`key, sub = jax.random.split(key)` in a scan or fori_loop body: "
                           "every key waits for the one before it"),
            fix=fix or _DEFAULT_FIX, section=section)
    sizes = facts.get("sizes", [])
    try:
        counts = [[(str(p), int(v)) for p, v in c] for c in facts.get("counts", [])]
    except (TypeError, ValueError):
        counts = []
    if not counts or len(counts) != len(sizes):
        return format_failure(f"{label}: the grader got no PRNG operation counts",
                              section=section)
    totals = [sum(v for _, v in c) for c in counts]
    if totals[-1] <= totals[0]:
        return None

    def show(n, c):
        ops = ", ".join(f"{p} {v}" for p, v in c)
        return f"n={n}: {sum(v for _, v in c)} PRNG operations ({ops})"

    return format_failure(
        f"{label} makes its random draws one item at a time: its PRNG work grows with n",
        expected="the same PRNG operations for every n",
        got="; ".join(show(n, c) for n, c in zip(sizes, counts)),
        cause=hint or ("a Python loop over the items: a chain `key, sub = "
                       "jax.random.split(key)`, or one sampler call per item"),
        fix=fix or _DEFAULT_FIX, section=section)


@explainer("key_tree_program")
def explain_key_tree_program(observed, expected, *, label: str, sizes=(4, 16), section=None,
                             hint=None, fix=None, tie: str = "layout",
                             **_ignored) -> str | None:
    """The exported programs at the first and last size must have the same op counts.

    They run on the grader's inputs and must return what the reference's return (tree,
    shapes, dtypes; not values: another valid key tree draws other numbers)."""
    problem = explain_program(observed, expected, label=label, section=section, tie=tie)
    if problem:
        return problem
    facts = program_facts(observed)
    if len(facts) != 2:
        return format_failure(f"the grader got {len(facts)} programs of {label}, not 2",
                              section=section)
    small, large = (Counter({k: int(v) for k, v in f.get("ops", {}).items()}) for f in facts)
    if sum(large.values()) <= sum(small.values()):
        return None
    grown = ", ".join(f"{op.split('.', 1)[-1]} +{d}" for op, d in
                      (large - small).most_common(4))
    return format_failure(
        f"the program of {label} grows with n: one copy of the per-item work per item",
        expected="the same StableHLO ops for every n",
        got=f"n={sizes[0]}: {sum(small.values())} ops; n={sizes[-1]}: "
            f"{sum(large.values())} ops (most grown: {grown})",
        cause=hint or ("a Python loop over the items, unrolled at trace time: a chain "
                       "`key, sub = jax.random.split(key)`, or one sampler call per item"),
        fix=fix or _DEFAULT_FIX, section=section)
