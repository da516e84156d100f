"""Tests for autograder.batching.mapping: a batch mapped in chunks (lax.map with batch_size).

The facts come from jaxprs: ``lax.map(f, xs, batch_size=k)`` is a scan of ``n // k``
steps over slices of ``k`` rows, ``lax.map`` without it one row per step, ``vmap``
no scan at all. Messages are asserted on.
"""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from autograder import (CheckFailure, assert_maps_in_chunks, collect_scan_facts,
                        explain_map_chunks)

XS = jnp.ones((40, 3))


def _norm(row):
    return jnp.sqrt(jnp.sum(row ** 2))


def test_lax_map_with_batch_size_is_one_scan_over_chunks():
    facts = collect_scan_facts(lambda xs: lax.map(_norm, xs, batch_size=8), (XS,))
    assert facts == {"scans": [{"length": 5, "depth": 0, "step_rows": [8], "inner_scans": [],
                                "copies": 1}], "while": 0}
    assert_maps_in_chunks(lambda xs: lax.map(_norm, xs, batch_size=8), (XS,), n=40, chunk=8)


def test_a_remainder_is_allowed_and_so_is_padding():
    xs = jnp.ones((43, 3))
    assert_maps_in_chunks(lambda xs: lax.map(_norm, xs, batch_size=8), (xs,), n=43, chunk=8)

    def padded(xs):
        blocks = jnp.concatenate([xs, jnp.zeros((5, 3))]).reshape(6, 8, 3)
        return lax.scan(lambda c, b: (c, jax.vmap(_norm)(b)), None, blocks)[1].reshape(-1)[:43]

    assert_maps_in_chunks(padded, (xs,), n=43, chunk=8)


def test_one_row_per_step_is_named():
    with pytest.raises(CheckFailure) as e:
        assert_maps_in_chunks(lambda xs: lax.map(_norm, xs), (XS,), n=40, chunk=8,
                              name="map_in_chunks(f, xs, 8)", section="4.2")
    text = str(e.value)
    assert "map_in_chunks(f, xs, 8) does not map the batch in chunks of 8" in text
    assert "expected: a scan of 5 steps over chunks of 8 rows" in text
    assert "got:      a scan of 40 steps (one example per step)" in text
    assert "lax.map without batch_size runs one example per step" in text
    assert "reread: section 4.2" in text


def test_vmap_and_a_python_loop_have_no_scan():
    for fn in (jax.vmap(_norm),
               lambda xs: jnp.concatenate([jax.vmap(_norm)(xs[i:i + 8]) for i in range(0, 40, 8)])):
        with pytest.raises(CheckFailure) as e:
            assert_maps_in_chunks(fn, (XS,), n=40, chunk=8)
        assert "got:      no loop: the whole batch at once (vmap)" in str(e.value)


def test_a_wrong_chunk_size_is_named():
    with pytest.raises(CheckFailure) as e:
        assert_maps_in_chunks(lambda xs: lax.map(_norm, xs, batch_size=10), (XS,), n=40, chunk=8)
    assert "got:      a scan of 4 steps over slices of 10 rows" in str(e.value)
    assert "the chunk size is not the one asked for" in str(e.value)


def test_explain_works_on_json_data_and_static_arguments():
    facts = collect_scan_facts(lambda f, xs, k: lax.map(f, xs, batch_size=k), (_norm, XS, 4),
                               static_argnums=(0, 2))
    data = json.loads(json.dumps(facts))
    assert explain_map_chunks(data, n=40, chunk=4) is None
    assert explain_map_chunks(data, n=40, chunk=8) is not None
    assert "a while_loop" in explain_map_chunks({"scans": [], "while": 1}, n=40, chunk=8)


# Each row's features (8) equal the chunk (8) here on purpose: a scan's closed-over
# arrays and its carry are not its per-step slices (JAX 0.12 gives their counts in
# `ft_in`, not `num_consts`/`num_carry`), so their widths must not pass for chunk rows.
_BANK = jnp.ones((64, 8))


def _score(q):
    return jax.nn.logsumexp(_BANK @ q)


def test_rows_sliced_by_the_step_index_are_chunks_and_closed_over_arrays_are_not():
    xs = jnp.ones((43, 8))

    def by_index(xs, chunk=5):  # a correct answer: the step slices its chunk by index
        k = xs.shape[0] // chunk
        step = lambda c, i: (c, jax.vmap(_score)(lax.dynamic_slice_in_dim(xs, i * chunk, chunk)))
        ys = lax.scan(step, None, jnp.arange(k))[1].reshape(-1)
        return jnp.concatenate([ys, jax.vmap(_score)(xs[k * chunk:])])

    assert_maps_in_chunks(by_index, (xs,), n=43, chunk=5)

    def one_row_per_step(xs):  # rows one at a time: the closed-over xs is (43, 8)
        return lax.scan(lambda c, i: (c, _score(xs[i])), jnp.zeros((3, 8)), jnp.arange(43))[1]

    facts = collect_scan_facts(one_row_per_step, (xs,))
    assert facts["scans"][0]["step_rows"] == []
    with pytest.raises(CheckFailure, match="does not map the batch in chunks of 8"):
        assert_maps_in_chunks(one_row_per_step, (xs,), n=43, chunk=8)


def test_a_scan_whose_results_are_thrown_away_is_no_loop():
    def dead(xs):
        k = xs.shape[0] // 8
        lax.scan(lambda c, b: (c, jax.vmap(_score)(b)), None, xs[:k * 8].reshape(k, 8, 8))
        return jax.vmap(_score)(xs)

    with pytest.raises(CheckFailure, match="got:      no loop"):
        assert_maps_in_chunks(dead, (jnp.ones((40, 8)),), n=40, chunk=8)


@pytest.mark.parametrize("rows", ["lax.map", "python"])
def test_a_chunk_whose_rows_run_one_by_one_fails(rows):
    def per_row(b):
        if rows == "lax.map":
            return lax.map(_score, b)
        return jnp.stack([_score(b[i]) for i in range(b.shape[0])])

    def chunked(xs):
        return lax.scan(lambda c, b: (c, per_row(b)), None, xs.reshape(5, 8, 8))[1].reshape(-1)

    with pytest.raises(CheckFailure) as e:
        assert_maps_in_chunks(chunked, (jnp.ones((40, 8)),), n=40, chunk=8)
    assert "does not batch f inside each chunk of 8" in str(e.value)
    assert "apply jax.vmap(f) to the chunk's rows" in str(e.value)
