"""Pallas kernels switched to interpret mode, for running a program on the CPU.

A ``pallas_call`` compiled for a TPU or GPU (``interpret=False``) cannot run on the CPU
backend ("Only interpret mode is supported on CPU backend"). Where the grader moves a
computation to the CPU on an accelerator host (float64 gradient checks, judging a
kernel's structure), the same program is traced and each of its ``pallas_call``s,
nested ones included, is switched to interpret mode: the same kernels, grids and
blocks, run by the interpreter.
"""
from __future__ import annotations

from typing import Callable


def interpreted_jaxpr(jaxpr):
    """``jaxpr`` with every ``pallas_call`` in it (nested jaxprs included) in interpret
    mode."""
    from jax.extend.core import ClosedJaxpr, Jaxpr

    if isinstance(jaxpr, ClosedJaxpr) and jaxpr.jaxpr is not jaxpr:  # jax < 0.12
        return jaxpr.replace(jaxpr=interpreted_jaxpr(jaxpr.jaxpr))
    eqns = []
    for eqn in jaxpr.eqns:
        params = dict(eqn.params)
        if eqn.primitive.name == "pallas_call":
            params["interpret"] = True
        else:
            for key, value in params.items():
                if isinstance(value, (Jaxpr, ClosedJaxpr)):
                    params[key] = interpreted_jaxpr(value)
                elif (isinstance(value, tuple) and value
                      and all(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value)):
                    params[key] = tuple(interpreted_jaxpr(v) for v in value)
        eqns.append(eqn.replace(params=params))
    return jaxpr.replace(eqns=eqns)


def pallas_eqns(jaxpr):
    """Every ``pallas_call`` equation of ``jaxpr`` and of the jaxprs nested in it."""
    from jax.extend.core import jaxprs_in_params

    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            yield eqn
            continue
        for sub in jaxprs_in_params(eqn.params):
            yield from pallas_eqns(sub)


def interpreting(fn: Callable) -> Callable:
    """``fn`` with its Pallas kernels run in interpret mode, same arguments and results.

    A function without a kernel, or one that does not trace (Python control flow on
    values), is called as it is.

    >>> import jax.numpy as jnp
    >>> interpreting(lambda x: x * 2)(jnp.arange(3.0))
    Array([0., 2., 4.], dtype=float32)
    """
    import jax
    from jax.extend.core import jaxpr_as_fun

    def interpreted(*args, **kwargs):
        try:
            closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args, **kwargs)
        except Exception:  # noqa: BLE001 - not traceable: no kernel can be switched
            return fn(*args, **kwargs)
        if next(pallas_eqns(closed), None) is None:
            return fn(*args, **kwargs)
        flat = jaxpr_as_fun(interpreted_jaxpr(closed))(*jax.tree.leaves((args, kwargs)))
        return jax.tree.unflatten(jax.tree.structure(shape), flat)

    interpreted.__name__ = getattr(fn, "__name__", "the function")
    return interpreted
