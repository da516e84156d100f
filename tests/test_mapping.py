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
    assert facts == {"scans": [{"length": 5, "depth": 0, "step_rows": [8]}], "while": 0}
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
