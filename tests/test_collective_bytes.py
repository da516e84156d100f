"""Collectives judged by what they move, not by their names (issue 36).

An all-gather in disguise (one psum of zero-padded slices) has Megatron's one
all-reduce; a data-parallel step that sums the zero-padded batch into every device
has "an all-reduce". The bytes their collectives move give them away; the course's
answers (shard_map and plain jit) stay within the bound. Runs on the 8 simulated CPU
devices (tests/conftest.py).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from autograder import CheckFailure, assert_collective_counts, assert_collective_in_hlo

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")
_SPECS = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}


def _megatron_shard_map(params, x):
    def block(p, x):
        partial = jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"]
        return jax.lax.psum(partial, "model") + p["b2"]
    return jax.shard_map(block, in_specs=(_SPECS, P("data", None)),
                         out_specs=P("data", None))(params, x)


def _megatron_jit(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    out = jnp.matmul(h, params["w2"], out_sharding=P("data", None))
    return out + params["b2"]


def _megatron_disguised(params, x):
    """One psum of zero-padded slices: the hidden activations and w2 gathered whole."""
    def block(p, x):
        m, i = jax.lax.axis_size("model"), jax.lax.axis_index("model")
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        rows, k = h.shape[0], h.shape[1]
        h_pad = jax.lax.dynamic_update_slice(jnp.zeros((rows, k * m)), h, (0, i * k))
        w_pad = jax.lax.dynamic_update_slice(jnp.zeros((k * m, p["w2"].shape[1])), p["w2"], (i * k, 0))
        both = jax.lax.psum(jnp.concatenate([h_pad, w_pad.T]), "model")
        return both[:rows] @ both[rows:].T + p["b2"]
    return jax.shard_map(block, in_specs=(_SPECS, P("data", None)),
                         out_specs=P("data", None))(params, x)


def _megatron_args(mesh, rows=8, d_in=4, hidden=8, d_out=2):
    rng = np.random.default_rng(0)
    p = {"w1": rng.normal(size=(d_in, hidden)), "b1": rng.normal(size=hidden),
         "w2": rng.normal(size=(hidden, d_out)), "b2": rng.normal(size=d_out)}
    p = jax.device_put({k: v.astype(np.float32) for k, v in p.items()},
                       {k: NamedSharding(mesh, s) for k, s in _SPECS.items()})
    x = jax.device_put(rng.normal(size=(rows, d_in)).astype(np.float32),
                       NamedSharding(mesh, P("data", None)))
    return p, x


def _megatron_check(fn, mesh, p, x):
    # The one all-reduce combines (rows per device, d_out) float32 partial sums.
    rows_per_device = x.shape[0] // mesh.shape["data"]
    assert_collective_counts(fn, (p, x), at_least={"all-reduce": 1}, at_most={"all-reduce": 1},
                             absent=("all-gather", "all-to-all", "collective-permute"),
                             max_bytes=rows_per_device * 2 * 4)


@pytest.mark.parametrize("fn", [_megatron_shard_map, _megatron_jit])
def test_megatron_answers_move_only_their_partial_sums(fn):
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    with jax.set_mesh(mesh):
        p, x = _megatron_args(mesh)
        _megatron_check(fn, mesh, p, x)


def test_an_all_gather_in_disguise_is_refused():
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    with jax.set_mesh(mesh):
        p, x = _megatron_args(mesh)
        np.testing.assert_allclose(jax.jit(_megatron_disguised)(p, x),
                                   jax.jit(_megatron_shard_map)(p, x), rtol=1e-5, atol=1e-5)
        # Name and count alone say yes: one all-reduce, nothing else.
        assert_collective_counts(_megatron_disguised, (p, x), at_least={"all-reduce": 1},
                                 at_most={"all-reduce": 1}, absent=("all-gather",))
        with pytest.raises(CheckFailure, match="move more than the exercise needs"):
            _megatron_check(_megatron_disguised, mesh, p, x)


def _mse(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _dp_jit(params, x, y, lr):
    grads = jax.grad(_mse)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def _dp_batch_summed_everywhere(params, x, y, lr):
    """The batch gathered onto every device by a psum of zero-padded rows."""
    def local(params, x, y):
        d, i = jax.lax.axis_size("data"), jax.lax.axis_index("data")
        n = x.shape[0]
        xy = jnp.concatenate([x, y[:, None]], axis=1)
        full = jax.lax.psum(jax.lax.dynamic_update_slice(
            jnp.zeros((n * d, xy.shape[1])), xy, (i * n, 0)), "data")
        return _dp_jit(params, full[:, :-1], full[:, -1], lr)
    return jax.shard_map(local, in_specs=(P(), P("data", None), P("data")),
                         out_specs=P())(params, x, y)


@pytest.mark.parametrize("fn,ok", [(_dp_jit, True), (_dp_batch_summed_everywhere, False)])
def test_a_data_parallel_step_moves_its_gradients_not_its_batch(fn, ok):
    mesh = jax.make_mesh((8,), ("data",))
    rng = np.random.default_rng(1)
    d = 3
    with jax.set_mesh(mesh):
        x = jax.device_put(rng.normal(size=(32, d)).astype(np.float32), P("data", None))
        y = jax.device_put(rng.normal(size=32).astype(np.float32), P("data"))
        p = jax.device_put({"w": np.ones(d, np.float32), "b": np.float32(0.0)}, P())
        np.testing.assert_allclose(jax.jit(fn)(p, x, y, 0.1)["w"], jax.jit(_dp_jit)(p, x, y, 0.1)["w"],
                                   rtol=1e-5)
        check = lambda **kw: assert_collective_in_hlo(jax.jit(fn), (p, x, y, 0.1),
                                                      ("all-reduce", "reduce-scatter"), **kw)
        check()  # an all-reduce exists either way
        if ok:  # the gradients (d + 1 floats), with room for a loss
            check(max_bytes=2 * (d + 1) * 4)
        else:
            with pytest.raises(CheckFailure, match="move more than the exercise needs"):
                check(max_bytes=2 * (d + 1) * 4)
