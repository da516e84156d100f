"""Numerical gradient verification: float64, random directions, leaf names."""
import jax
import numpy as np
import jax.numpy as jnp
import pytest

from autograder import (CheckFailure, assert_grad_matches_numeric, assert_grads_match_numeric,
                        collect_grad_errors)


def loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


PARAMS = {"w": jnp.array([0.5, -1.0, 2.0]), "b": jnp.float32(0.1)}
X = jnp.arange(12.0).reshape(4, 3) / 10
Y = jnp.array([1.0, -1.0, 0.5, 2.0])


def test_correct_gradient_passes_and_is_float64_accurate():
    grad, errors = collect_grad_errors(jax.grad(loss), loss, (PARAMS, X, Y))
    assert set(errors) == {"params['b']", "params['w']"}
    assert max(e[2] for errs in errors.values() for e in errs) < 1e-7
    assert grad["w"].dtype == jnp.float64  # evaluated on float64 inputs
    assert_grad_matches_numeric(jax.grad(loss), loss, (PARAMS, X, Y))


def test_wrong_leaf_is_named():
    def wrong(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return {"w": g["w"], "b": g["b"] * 2}

    with pytest.raises(CheckFailure) as info:
        assert_grad_matches_numeric(wrong, loss, (PARAMS, X, Y), section="3.2")
    msg = str(info.value)
    assert "wrong(params={'w': f32[3], 'b': f32[]}, x=f32[4,3], y=f32[4]) is not the gradient of loss" in msg
    assert "params['b']: relative error" in msg and "params['w']" not in msg
    assert "reread: section 3.2" in msg


def test_several_wrong_leaves_reported_together():
    def zeros(params, x, y):
        return jax.tree.map(jnp.zeros_like, params)

    msg = str(pytest.raises(CheckFailure, assert_grad_matches_numeric, zeros, loss,
                            (PARAMS, X, Y)).value)
    assert "for 2 leaves" in msg and "params['b']" in msg and "params['w']" in msg


def test_shape_rung_runs_before_numerics():
    def wrt_x(params, x, y):
        return jax.grad(loss, argnums=1)(params, x, y)

    msg = str(pytest.raises(CheckFailure, assert_grad_matches_numeric, lambda w, x, y: x.T @ (x @ w - y),
                            lambda w, x, y: jnp.mean((x @ w - y) ** 2),
                            (jnp.ones(3), X, Y)).value)
    assert "is not the gradient" in msg
    msg = str(pytest.raises(CheckFailure, assert_grad_matches_numeric, wrt_x, loss,
                            (PARAMS, X, Y)).value)
    assert "has the wrong structure" in msg


def test_multiple_argnums():
    grad_fn = jax.grad(loss, argnums=(0, 1))
    assert_grad_matches_numeric(grad_fn, loss, (PARAMS, X, Y), argnums=(0, 1))
    _, errors = collect_grad_errors(grad_fn, loss, (PARAMS, X, Y), argnums=(0, 1))
    assert "x" in errors


def test_assert_grads_match_numeric_catches_nan_gradient():
    def naive_norm(x):
        s = jnp.sum(x ** 2)
        return jnp.where(s > 0, jnp.sqrt(s), 0.0)

    assert_grads_match_numeric(naive_norm, (jnp.array([3.0, 4.0]),))
    msg = str(pytest.raises(CheckFailure, assert_grads_match_numeric, naive_norm,
                            (jnp.zeros(2),)).value)
    assert "contains NaN or inf" in msg


def test_float32_only_numerics_would_false_fail_but_float64_passes():
    # A badly scaled function where float32 finite differences are useless.
    def f(x):
        return jnp.sum(jnp.exp(5 * x)) * 1e3

    x = jnp.array([1.0, 1.2])
    assert_grads_match_numeric(f, (x,), rtol=1e-6)


def test_numerical_gradients_run_on_the_cpu_where_jax_computes_on_an_accelerator(monkeypatch):
    # A TPU has no float64, and central differences in float32 miss by 0.4-1.3 %: where
    # the default backend is an accelerator, both sides of the comparison run on the
    # CPU backend. Faked here by the backend's name (this machine has only a CPU).
    from autograder.autodiff.grads import _float64

    with _float64():
        assert jax.config.jax_default_device is None  # a CPU: only float64 changes
        assert jnp.ones(1).dtype == jnp.float64
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with _float64():
        assert jax.config.jax_default_device == jax.devices("cpu")[0]
        assert jnp.ones(1).dtype == jnp.float64
    assert jax.config.jax_default_device is None and jnp.ones(1).dtype == jnp.float32


def _silu_kernels(interpret: bool):
    """SiLU with a Pallas kernel on each side of a custom_vjp, as 10's silu_vjp."""
    from jax.experimental import pallas as pl

    def fwd_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * jax.nn.sigmoid(x_ref[...])

    def bwd_kernel(x_ref, g_ref, o_ref):
        s = jax.nn.sigmoid(x_ref[...])
        o_ref[...] = g_ref[...] * s * (1 + x_ref[...] * (1 - s))

    def call(kernel, *arrays):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(arrays[0].shape,
                                                                     arrays[0].dtype),
                              interpret=interpret)(*arrays)

    @jax.custom_vjp
    def silu(x):
        return call(fwd_kernel, x)

    silu.defvjp(lambda x: (call(fwd_kernel, x), x), lambda x, g: (call(bwd_kernel, x, g),))
    return silu


def test_a_kernel_compiled_for_the_accelerator_is_interpreted_on_the_cpu(monkeypatch):
    # On a TPU the float64 side of a gradient check runs on the CPU backend, where a
    # kernel compiled for the TPU (interpret=False) refuses to run: 10's silu_vjp failed
    # so on a TPU v5e. Its kernels are switched to interpret mode there. Faked by the
    # backend's name: on this CPU a kernel with interpret=False fails the same way (the
    # float32 call before it runs on the TPU itself there, so only the float64 side is
    # called here).
    from autograder.autodiff.grads import collect_directional, collect_finite_differences

    silu = _silu_kernels(interpret=False)
    x = jnp.linspace(-4.0, 4.0, 16, dtype=jnp.float32)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(silu(v))))
    with pytest.raises(Exception, match="interpret"):
        grad(x)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    mine = collect_directional(grad, lambda v: jnp.sum(silu(v)), (x,))
    numeric = collect_finite_differences(lambda v: jnp.sum(silu(v)), (x,))
    exact = collect_directional(jax.grad(lambda v: jnp.sum(jax.nn.silu(v))),
                                lambda v: jnp.sum(jax.nn.silu(v)), (x,))
    assert mine.keys() == numeric.keys() == exact.keys()
    for leaf in mine:
        np.testing.assert_allclose(mine[leaf], exact[leaf], rtol=1e-6)
        np.testing.assert_allclose(numeric[leaf], exact[leaf], rtol=1e-6)
