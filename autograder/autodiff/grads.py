"""Numerical gradient verification.

Central differences in float64 along several seeded random directions, one leaf of
the differentiated arguments at a time, so that a failure names the argument or
pytree leaf whose gradient is wrong. ``jax.test_util.check_grads`` alone gives false
failures in float32; here the student's gradient is evaluated on float64 inputs and
compared with a relative-error tolerance.
"""
from __future__ import annotations

import zlib
from typing import Callable, Sequence

import numpy as np

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, describe_value, format_failure
from autograder.core.numeric import accelerator_cpus, assert_tree_matches, call_student
from autograder.programs.pallas_interpret import interpreting


def _float64():
    """float64 on, and computing on the CPU where this process's JAX computes on a GPU
    or TPU: a TPU has no float64 (it computes such programs at lower precision), and
    central differences in float32 miss by 0.4-1.3 % (05's pendulum and fixed point,
    measured on a TPU v5e). Both sides of the comparison, the student's gradient and
    the finite differences, run there. On a CPU (grading) only float64 is turned on."""
    import contextlib

    import jax

    stack = contextlib.ExitStack()
    stack.enter_context(jax.enable_x64(True))
    cpus = accelerator_cpus()
    if cpus:
        stack.enter_context(jax.default_device(cpus[0]))
    return stack


def _runnable(fn: Callable) -> Callable:
    """``fn`` as it can run inside :func:`_float64`. On an accelerator host a kernel
    compiled for the TPU does not run on the CPU backend (10's silu_vjp failed so on a
    TPU v5e): when ``fn`` fails there, it runs again with its Pallas kernels in
    interpret mode (the first error stands if that fails too, or it has no kernel).
    Functions that run as they are run unchanged. On a CPU, ``fn`` itself."""
    if not accelerator_cpus():
        return fn

    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - retried once in interpret mode
            first = err
        try:
            return interpreting(fn)(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the first error says what went wrong
            raise first from None

    run.__name__ = getattr(fn, "__name__", "the function")
    return run


def _to_float64(tree):
    import jax
    import jax.numpy as jnp

    def cast(x):
        a = jnp.asarray(x)
        if not jnp.issubdtype(a.dtype, jnp.floating):
            return a
        # Through the host: the copy lands on the current default device (the CPU
        # of _float64 on an accelerator), not where the argument was.
        return jnp.asarray(np.asarray(a, dtype=np.float64))

    return jax.tree.map(cast, tree)


def _arg_name(f: Callable, num: int) -> str:
    """The name of ``f``'s positional parameter ``num`` (``arg{num}`` if unknown)."""
    import inspect

    try:
        params = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[num] if num < len(params) else f"arg{num}"


def _compiled_or_eager(f: Callable, args: Sequence) -> Callable:
    """``jax.jit(f)`` when f traces (one compile instead of many eager dispatches for
    the 2 x directions x leaves evaluations), else f itself (Python control flow on
    values is legal in a function that is only differentiated)."""
    import jax

    jitted = jax.jit(f)
    try:
        jitted(*args)
    except Exception:  # noqa: BLE001 - not traceable: evaluate eagerly
        return f
    return jitted


def _seed(name: str, k: int) -> int:
    # Deterministic by construction: the seed comes from the leaf's name.
    return (zlib.crc32(name.encode()) + 7919 * k) % (2**31)


def _leaves_to_check(args64, nums, f):
    """``[(pos, num, i, label, x, treedef, leaves)]`` for every float leaf differentiated."""
    import jax
    import jax.numpy as jnp

    out = []
    for pos, num in enumerate(nums):
        leaves, treedef = jax.tree_util.tree_flatten_with_path(args64[num])
        for i, (path, x) in enumerate(leaves):
            x = jnp.asarray(x)
            if jnp.issubdtype(x.dtype, jnp.floating):
                out.append((pos, num, i, _arg_name(f, num) + jax.tree_util.keystr(path), x,
                            treedef, leaves))
    return out


def _direction(label: str, k: int, shape) -> np.ndarray:
    v = np.random.default_rng(_seed(label, k)).normal(size=shape)
    return v / max(np.linalg.norm(v), 1e-12)


def collect_directional(grad_fn: Callable, f: Callable, args: Sequence, *,
                        argnums: int | Sequence[int] = 0, directions: int = 3) -> dict:
    """``{leaf: [<grad_fn(*args), v_k>, ...]}`` in float64 (runs the student's gradient).

    ``f`` only names the arguments (its signature); it is not called.
    """
    import jax

    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    with _float64():
        args64 = list(_to_float64(tuple(args)))
        grad = _runnable(grad_fn)(*args64)
        grads = (grad,) if single else tuple(grad)
        out = {}
        for pos, num, i, label, x, treedef, _ in _leaves_to_check(args64, nums, f):
            g = np.asarray(treedef.flatten_up_to(grads[pos])[i], dtype=np.float64)
            out[label] = [float(np.sum(g * _direction(label, k, x.shape)))
                          for k in range(directions)]
    return out


def collect_finite_differences(f: Callable, args: Sequence, *,
                               argnums: int | Sequence[int] = 0, directions: int = 3,
                               eps: float = 1e-6) -> dict:
    """``{leaf: [(f(x + h v_k) - f(x - h v_k)) / 2h, ...]}`` of a scalar ``f`` in float64."""
    import jax
    import jax.numpy as jnp

    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    with _float64():
        args64 = list(_to_float64(tuple(args)))
        fc = _compiled_or_eager(_runnable(f), args64)
        out = {}
        for _, num, i, label, x, treedef, leaves in _leaves_to_check(args64, nums, f):
            scale = float(max(1.0, float(jnp.max(jnp.abs(x))) if x.size else 1.0))
            h = eps * scale
            slopes = []
            for k in range(directions):
                v = jnp.asarray(_direction(label, k, x.shape), x.dtype)

                def shifted(sign):
                    new_leaves = [leaf for _, leaf in leaves]
                    new_leaves[i] = x + sign * h * v
                    new_args = list(args64)
                    new_args[num] = jax.tree_util.tree_unflatten(treedef, new_leaves)
                    return float(fc(*new_args))

                slopes.append((shifted(+1) - shifted(-1)) / (2 * h))
            out[label] = slopes
    return out


def collect_grad_errors(grad_fn: Callable, f: Callable, args: Sequence, *,
                        argnums: int | Sequence[int] = 0, directions: int = 3,
                        eps: float = 1e-6, atol: float = 1e-8):
    """Compares ``grad_fn(*args)`` with central differences of ``f`` in float64.

    For each leaf of the differentiated arguments and each of ``directions`` random
    unit directions ``v`` (seeded by the leaf's path), it compares the directional
    derivative ``<grad_fn(*args), v>`` with ``(f(x + eps v) - f(x - eps v)) / 2 eps``.

    Returns:
      ``(gradient, errors)``: the student's gradient at float64 inputs, and
      ``{leaf: [(numeric, analytic, relative_error), ...]}``, where ``leaf`` is the
      parameter's name plus the pytree path, e.g. ``params['w']``.

    >>> import jax, jax.numpy as jnp
    >>> f = lambda x: jnp.sum(jnp.sin(x))
    >>> _, errs = collect_grad_errors(jax.grad(f), f, (jnp.arange(3.0),))
    >>> max(e[2] for e in errs["x"]) < 1e-6
    True
    """
    import jax

    analytic = collect_directional(grad_fn, f, args, argnums=argnums, directions=directions)
    numeric = collect_finite_differences(f, args, argnums=argnums, directions=directions,
                                         eps=eps)
    with _float64():
        grad = _runnable(grad_fn)(*_to_float64(tuple(args)))
    return grad, {leaf: [(n, a, abs(n - a) / max(abs(n), abs(a), atol))
                         for n, a in zip(numeric[leaf], analytic.get(leaf, []))]
                  for leaf in numeric}


@explainer("grad_numeric")
def explain_grad_numeric(observed, expected, *, label: str, f_name: str = "f",
                         rtol: float = 1e-4, atol: float = 1e-8, section: str | None = None,
                         hint: str | None = None, **_ignored) -> str | None:
    """Directional derivatives of the student's gradient against finite differences."""
    analytic, numeric = observed.facts, expected.facts
    bad = []
    for leaf, slopes in numeric.items():
        mine = analytic.get(leaf) if isinstance(analytic, dict) else None
        if not isinstance(mine, list) or len(mine) != len(slopes):
            bad.append(f"{leaf}: no gradient for this leaf")
            continue
        rels = [abs(n - a) / max(abs(n), abs(a), atol) if _finite(a) else float("inf")
                for n, a in zip(slopes, mine)]
        worst = max(range(len(rels)), key=lambda k: rels[k])
        if not rels[worst] <= rtol:
            bad.append(f"{leaf}: relative error {rels[worst]:.2g} along direction {worst}: "
                       f"finite differences {slopes[worst]:.6g}, yours {mine[worst]:.6g}")
    if not bad:
        return None
    what = (f"{label} is not the gradient of {f_name}: directional derivatives "
            "disagree with finite differences")
    teach = dict(cause=hint or "a wrong derivative rule, a missing term or factor, or a "
                 "gradient taken with respect to the wrong argument",
                 fix="compare with jax.grad of your loss on a tiny input, term by term",
                 section=section)
    if len(bad) == 1:
        return format_failure(what, expected=f"the finite-difference slope of {f_name} along "
                              "random directions", got=bad[0], **teach)
    return format_failure(what + f" for {len(bad)} leaves", details=bad, **teach)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def assert_grad_matches_numeric(grad_fn: Callable, f: Callable, args: Sequence, *,
                                argnums: int | Sequence[int] = 0, rtol: float = 1e-4,
                                directions: int = 3, name: str | None = None,
                                section: str | None = None, hint: str | None = None):
    """Asserts that ``grad_fn`` returns the gradient of ``f``, checked numerically.

    The ladder runs first on the gradient's structure and shape (it must look like
    the differentiated arguments), then finiteness, then the values against central
    differences of ``f`` in float64 along ``directions`` random directions per leaf.

    Args:
      grad_fn: the student's gradient function, same signature as ``f``.
      f: the trusted scalar function (the reference loss).
      args: the point at which to check.
      argnums: the differentiated positional arguments (int or tuple).
      rtol: the largest relative error allowed between directional derivatives.
      directions: random directions per leaf.
      name: how to name the call (default ``grad_fn(arg=..., ...)``).
      section, hint: as in :func:`autograder.assert_tree_matches`.

    >>> import jax, jax.numpy as jnp
    >>> def f(w):
    ...     return jnp.sum(w ** 3)
    >>> def my_grad(w):
    ...     return 3 * w ** 2
    >>> assert_grad_matches_numeric(my_grad, f, (jnp.array([1.0, -2.0]),))
    >>> assert_grad_matches_numeric(lambda w: 2 * w, f, (jnp.array([1.0, -2.0]),))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: <lambda>(w=f32[2]) is not the gradient of f: directional derivatives disagree with finite differences
      expected: the finite-difference slope of f along random directions
      got:      w: relative error 1.7 along direction 0: finite differences -6.46925, yours 4.25651
      likely cause: a wrong derivative rule, a missing term or factor, or a gradient taken with respect to the wrong argument
      fix: compare with jax.grad of your loss on a tiny input, term by term
    """
    __tracebackhide__ = True
    import jax

    label = name or call_signature(grad_fn, args)
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    wrt = args[nums[0]] if single else tuple(args[n] for n in nums)
    # Rungs type/shape/finite on the float32 call first: clear messages, no float64 noise.
    got, _ = call_student(grad_fn, args, name=label, section=section)
    like = jax.tree.map(lambda x: np.zeros(np.shape(x), np.float32), wrt)
    assert_tree_matches(got, like, name=label, dtype="kind", section=section, values=False,
                        hint=hint or "the gradient must have the structure and shape of "
                                     "the argument it is taken with respect to")
    run(Check("grad_numeric", label,
              observe=lambda: collect_directional(grad_fn, f, args, argnums=argnums,
                                                  directions=directions),
              expect=lambda: collect_finite_differences(f, args, argnums=argnums,
                                                        directions=directions),
              observe_as="facts", expect_as="facts",
              params=dict(f_name=getattr(f, "__name__", "f"), rtol=rtol, section=section,
                          hint=hint)))


def assert_grads_match_numeric(f: Callable, args: Sequence, *,
                               argnums: int | Sequence[int] = 0, rtol: float = 1e-4,
                               directions: int = 3, section: str | None = None,
                               hint: str | None = None):
    """Asserts that ``jax.grad(f)`` agrees with finite differences of ``f``.

    Use it on a student's *function* (a loss, a custom primitive) whose gradient JAX
    derives: it catches non-differentiable constructs, NaN gradients and
    ``stop_gradient`` in the wrong place.

    >>> import jax.numpy as jnp
    >>> assert_grads_match_numeric(lambda x: jnp.sum(jnp.tanh(x)), (jnp.ones(3),))
    """
    __tracebackhide__ = True
    import jax

    name = f"jax.grad({getattr(f, '__name__', 'f')})"
    grad_fn = jax.grad(f, argnums=argnums)
    grad_fn.__name__ = name  # type: ignore[attr-defined]
    assert_grad_matches_numeric(grad_fn, f, args, argnums=argnums, rtol=rtol,
                                directions=directions, section=section, hint=hint,
                                name=f"{name} at {', '.join(describe_value(a) for a in args)}")
