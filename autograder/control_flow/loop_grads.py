"""Gradients through loops: reverse mode against finite differences.

``while_loop`` (and ``fori_loop`` with traced bounds) is not reverse-differentiable:
the message says so and names the fix. Otherwise the student's gradient is checked
numerically by :func:`autograder.assert_grad_matches_numeric`, whose expected side
(finite differences) runs on the reference.

Every fact here is a value (outputs, directional derivatives) or an error the
student's code raised; nothing about the compiled program is read.
"""
from __future__ import annotations

import zlib
from typing import Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.control_flow.jit_compat import _bind_static
from autograder.core.tracing import explain_jit_error

_NOT_REVERSIBLE = "Reverse-mode differentiation does not work"


def _seed(text: str) -> int:
    return zlib.crc32(text.encode()) % (2**31)


def _output_weights(out, name: str) -> list:
    """Fixed random weights, one per float output leaf (None for the others), seeded by
    the function's name: the same in the reference's run and the student's."""
    import jax

    rng = np.random.default_rng(_seed(name))
    weights = []
    for leaf in jax.tree.leaves(out):
        a = np.asarray(leaf)
        weights.append(rng.normal(size=a.shape) if np.issubdtype(a.dtype, np.floating)
                       else None)
    return weights


def assert_loop_grads_match_numeric(fn: Callable, args: Sequence, *,
                                    argnums: int | Sequence[int] = 0,
                                    static_argnums: Sequence[int] = (),
                                    rtol: float = 1e-4, directions: int = 3,
                                    section: str | None = None, hint: str | None = None):
    """Asserts that reverse-mode gradients through ``fn`` match finite differences.

    ``fn`` may return any pytree of arrays. Its float outputs are reduced to one
    scalar with fixed weights (seeded by ``fn``'s name, so every output matters),
    ``jax.grad`` of that scalar is taken with respect to ``argnums``, and compared
    with central differences of the same scalar in float64
    (:func:`autograder.assert_grad_matches_numeric`). A loop JAX cannot
    reverse-differentiate (``lax.while_loop``, ``fori_loop`` with traced bounds) gets
    a message that says so.

    Args:
      fn: the student's function.
      args: the inputs; ``static_argnums`` stay Python values (closed over).
      argnums: the differentiated positions in ``args`` (never static ones).
      rtol, directions: as in :func:`autograder.assert_grad_matches_numeric`.
      section, hint: the section to reread, and an override of the likely cause of a
        gradient that disagrees with finite differences.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def power(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: c * x, 1.0)
    >>> assert_loop_grads_match_numeric(power, (1.1, 5), static_argnums=(1,))
    >>> def power_while(x, n):
    ...     body = lambda c: (c[0] * x, c[1] + 1)
    ...     return lax.while_loop(lambda c: c[1] < n, body, (1.0, 0))[0]
    >>> assert_loop_grads_match_numeric(power_while, (1.1, 5), static_argnums=(1,))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: jax.grad cannot differentiate power_while(x=float 1.1, n=int 5): its loop is not reverse-differentiable
      expected: a loop that reverse mode can differentiate: lax.scan, or lax.fori_loop with Python int bounds
      got:      ValueError: Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop.
      likely cause: lax.while_loop stops at a step it only learns at run time, so reverse mode cannot know how many steps to store; fori_loop with traced bounds becomes such a while_loop
      fix: use lax.scan or lax.fori_loop with Python int bounds (mark the step count static under jit); forward mode (jax.jvp, jax.jacfwd) does work through while_loop
    """
    __tracebackhide__ = True
    import jax
    import jax.numpy as jnp

    from autograder.autodiff.grads import assert_grad_matches_numeric

    label = call_signature(fn, args)
    bound, dyn, dyn_idx = _bind_static(fn, args, static_argnums)
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    try:
        dyn_nums = tuple(dyn_idx.index(n % len(args)) for n in nums)
    except ValueError:
        raise ValueError(f"argnums {nums} include a static argument") from None
    wrt = dyn_nums[0] if single else dyn_nums
    out = run(Check("loop_call", label, observe=lambda: call(bound, dyn),
                    params=dict(section=section)))
    weights = _output_weights(out, getattr(fn, "__name__", "fn"))

    def scalar(*dyn_args):
        res = jax.tree.leaves(bound(*dyn_args))
        total = 0.0
        for leaf, w in zip(res, weights):
            if w is not None:
                total = total + jnp.sum(leaf * jnp.asarray(w, dtype=leaf.dtype))
        return total

    scalar.__signature__ = bound.__signature__  # type: ignore[attr-defined]
    scalar.__name__ = getattr(fn, "__name__", "fn")
    # Compiled (once per dtype): the finite differences call these many times, and an
    # eager loop would trace its body again on every call.
    grad_fn = jax.jit(jax.grad(scalar, argnums=wrt))
    grad_fn.__name__ = f"jax.grad({scalar.__name__})"  # type: ignore[attr-defined]
    name = f"jax.grad through {label}"
    run(Check("grad_through_loop", name, observe=lambda: call(grad_fn, dyn),
              params=dict(call=label, section=section)))
    assert_grad_matches_numeric(
        grad_fn, jax.jit(scalar), dyn, argnums=wrt, rtol=rtol, directions=directions,
        name=name, section=section,
        hint=hint or "a gradient that does not flow through every step: jax.lax.stop_gradient, "
                     "a cast to int or NumPy, or a value computed outside the loop")


@explainer("loop_call", errors=True)
def explain_loop_call(observed, expected, *, label: str, section: str | None = None,
                      **_ignored) -> str | None:
    """A call that returned passes; a tracing error is explained."""
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="when called", section=section)
    return None


@explainer("grad_through_loop", errors=True)
def explain_grad_through_loop(observed, expected, *, label: str, call: str,
                              section: str | None = None, **_ignored) -> str | None:
    """``jax.grad`` ran through the loop (a while_loop cannot be reversed)."""
    if observed.kind != "error":
        return None
    if observed.error_type == "ValueError" and _NOT_REVERSIBLE in observed.error:
        first = observed.error.splitlines()[0]
        return format_failure(
            f"jax.grad cannot differentiate {call}: its loop is not reverse-differentiable",
            expected="a loop that reverse mode can differentiate: lax.scan, or "
                     "lax.fori_loop with Python int bounds",
            got=f"{observed.error_type}: {first}",
            cause="lax.while_loop stops at a step it only learns at run time, "
                  "so reverse mode cannot know how many steps to store; "
                  "fori_loop with traced bounds becomes such a while_loop",
            fix="use lax.scan or lax.fori_loop with Python int bounds (mark the step "
                "count static under jit); forward mode (jax.jvp, jax.jacfwd) does "
                "work through while_loop",
            section=section)
    return explain_jit_error(observed, label, context="under jax.grad", section=section)
