"""Jaxpr inspection: a recursive walk over equations and their sub-jaxprs.

``jnp`` functions appear as nested ``jit`` equations, ``fori_loop`` with static
bounds becomes ``scan``, ``vmap`` of ``cond`` becomes ``select_n``: so every
question ("is ``scan`` used?", "how many ``sin``?") walks into nested jaxprs.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterator, Sequence

from autograder._feedback import call_signature, fail
from autograder._numeric import call_student


def _sub_jaxprs(params: dict) -> Iterator[Any]:
    import jax.extend.core as jex

    for value in params.values():
        items = value if isinstance(value, (tuple, list)) else (value,)
        for item in items:
            if isinstance(item, jex.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jex.Jaxpr):
                yield item


def iter_eqns(jaxpr) -> Iterator[Any]:
    """Yields every equation of a (closed) jaxpr, nested bodies included.

    >>> import jax, jax.numpy as jnp
    >>> j = jax.make_jaxpr(lambda x: jnp.sum(jnp.sin(x)))(jnp.ones(3))
    >>> sorted({e.primitive.name for e in iter_eqns(j)})
    ['reduce_sum', 'sin']
    """
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in inner.eqns:
        yield eqn
        for sub in _sub_jaxprs(eqn.params):
            yield from iter_eqns(sub)


def count_primitives(jaxpr) -> Counter:
    """Counts primitives by name, walking nested jaxprs (jit, scan, cond, while ...).

    >>> import jax, jax.numpy as jnp
    >>> count_primitives(jax.make_jaxpr(lambda x: jnp.sin(jnp.sin(x)))(1.0))["sin"]
    2
    """
    return Counter(e.primitive.name for e in iter_eqns(jaxpr))


def trace_jaxpr(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                section: str | None = None, static_argnums=()):
    """Traces a student's function to a closed jaxpr, turning errors into feedback."""
    __tracebackhide__ = True
    import jax

    kwargs = kwargs or {}
    label = call_signature(fn, args, kwargs)

    def make(*a, **k):
        return jax.make_jaxpr(fn, static_argnums=static_argnums)(*a, **k)

    make.__name__ = f"jax.make_jaxpr({getattr(fn, '__name__', 'fn')})"
    jaxpr, _ = call_student(make, args, kwargs, name=f"tracing {label}", section=section)
    return jaxpr


def assert_uses_primitive(fn: Callable, args: Sequence, primitive: str, *,
                          kwargs: dict | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None):
    """Asserts that tracing ``fn(*args)`` produces at least one ``primitive``.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def cumsum(xs):
    ...     return lax.scan(lambda c, x: (c + x, c + x), 0.0, xs)[1]
    >>> assert_uses_primitive(cumsum, (jnp.ones(4),), "scan")
    >>> assert_uses_primitive(jnp.cumsum, (jnp.ones(4),), "while")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: cumsum(a=f32[4]) does not use `while`
      expected: at least one `while` in the jaxpr
      got:      primitives used: cumsum, jit
    """
    __tracebackhide__ = True
    counts = count_primitives(trace_jaxpr(fn, args, kwargs, section=section))
    if counts[primitive] == 0:
        fail(f"{call_signature(fn, args, kwargs)} does not use `{primitive}`",
             rung="structure", expected=f"at least one `{primitive}` in the jaxpr",
             got=f"primitives used: {', '.join(sorted(counts)) or 'none'}",
             cause=hint, fix=fix, section=section)


def assert_no_primitive(fn: Callable, args: Sequence, primitive: str, *,
                        kwargs: dict | None = None, section: str | None = None,
                        hint: str | None = None, fix: str | None = None):
    """Asserts that tracing ``fn(*args)`` produces no ``primitive`` at all.

    >>> import jax.numpy as jnp
    >>> assert_no_primitive(lambda x: x * 2, (jnp.ones(2),), "sin")
    """
    __tracebackhide__ = True
    counts = count_primitives(trace_jaxpr(fn, args, kwargs, section=section))
    if counts[primitive]:
        fail(f"{call_signature(fn, args, kwargs)} uses `{primitive}`",
             rung="structure", expected=f"no `{primitive}` in the jaxpr",
             got=f"{counts[primitive]} `{primitive}` equation(s)",
             cause=hint, fix=fix, section=section)
