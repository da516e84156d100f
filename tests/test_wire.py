"""The sandbox-to-grader format: round trips, and decoding of hostile data.

Everything a sandbox writes is untrusted. ``autograder.core.wire.loads`` must turn any
bytes into either typed records or a ``WireError``: never another exception, never
an object that is not plain data, never an array loaded with pickle.
"""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograder.core import wire as _wire

FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def _cell(*observations):
    return _wire.CellResult("test_x", tuple(_wire.Record("values", f"f{i}", {"rtol": 1e-5}, o)
                                            for i, o in enumerate(observations)))


def test_round_trip_keeps_kinds_dtypes_and_values():
    import jax
    import jax.numpy as jnp

    value = {"w": jnp.ones((2, 3), jnp.bfloat16), "n": 3, "name": "mlp", "none": None,
             "key": jax.random.key(0), "f": np.float32(2.5)}
    obs = _wire.roundtrip(_wire.observe_tree(value))
    kinds = {leaf.path: (leaf.kind, leaf.dtype) for leaf in obs.leaves}
    assert kinds["['w']"] == ("array", "bfloat16")
    assert kinds["['n']"] == ("scalar", "int64") and kinds["['name']"] == ("text", "")
    assert kinds["['none']"] == ("none", "") and kinds["['key']"][0] == "key"
    assert kinds["['f']"] == ("array", "float32")
    assert obs.tree == _wire.observe_tree(value).tree


def test_facts_errors_and_artifacts_round_trip():
    facts = _wire.roundtrip(_wire.observe_facts({"count": 2, "ops": ["a", "b"]}))
    assert facts.facts == {"count": 2, "ops": ["a", "b"]}
    err = _wire.roundtrip(_wire.observe_error(NotImplementedError()))
    assert err.not_implemented and err.error_type == "NotImplementedError"
    art = _wire.Observation("artifact", artifacts=(b"\x00\x01program",),
                            inputs=(_wire.observe_tree([np.ones(2)]),))
    back = _wire.roundtrip(art)
    assert back.artifacts == (b"\x00\x01program",) and back.inputs[0].leaves[0].shape == (2,)


def _encoded():
    return _wire.dumps(_cell(_wire.observe_tree({"a": np.arange(3.0)}),
                             _wire.observe_facts({"x": 1})))


@FUZZ
@given(st.binary(max_size=2000), st.binary(max_size=2000))
def test_random_bytes_are_rejected_cleanly(raw_json, raw_npz):
    with pytest.raises(_wire.WireError):
        _wire.loads(raw_json, raw_npz)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=30)


@FUZZ
@given(_json_values)
def test_any_json_document_decodes_or_is_rejected(doc):
    _, raw_npz = _encoded()
    try:
        cell = _wire.loads(json.dumps(doc).encode(), raw_npz)
    except _wire.WireError:
        return
    assert isinstance(cell, _wire.CellResult)


@FUZZ
@given(st.data())
def test_mutated_records_decode_or_are_rejected(data):
    raw_json, raw_npz = _encoded()
    doc = json.loads(raw_json)
    record = doc["records"][data.draw(st.integers(0, 1))]
    target = data.draw(st.sampled_from(["observed", "params", "kind", "label"]))
    record[target] = data.draw(_json_values)
    try:
        cell = _wire.loads(json.dumps(doc).encode(), raw_npz)
    except _wire.WireError:
        return
    for rec in cell.records:
        assert isinstance(rec.observed, _wire.Observation) and isinstance(rec.params, dict)


@FUZZ
@given(hnp.arrays(dtype=hnp.scalar_dtypes(), shape=hnp.array_shapes(max_dims=3, max_side=4)))
def test_any_numeric_array_round_trips(array):
    obs = _wire.roundtrip(_wire.observe_tree(array))
    (leaf,) = obs.leaves
    assert leaf.value.shape == array.shape
    np.testing.assert_array_equal(leaf.value, array)


def test_pickled_arrays_are_refused():
    raw_json, _ = _encoded()
    buffer = io.BytesIO()
    np.savez(buffer, a0=np.array([object()], dtype=object))
    with pytest.raises(_wire.WireError):
        _wire.loads(raw_json, buffer.getvalue())


def test_oversized_results_are_refused(monkeypatch):
    monkeypatch.setattr(_wire, "MAX_ARRAY_BYTES", 1000)
    raw_json, raw_npz = _wire.dumps(_cell(_wire.observe_tree(np.zeros(10_000))))
    with pytest.raises(_wire.WireError, match="too large"):
        _wire.loads(raw_json, raw_npz)
    monkeypatch.setattr(_wire, "MAX_JSON_BYTES", 100)
    with pytest.raises(_wire.WireError):
        _wire.loads(b" " * 101, raw_npz)


def test_deeply_nested_facts_are_refused():
    deep: list = []
    for _ in range(100):
        deep = [deep]
    raw_json, raw_npz = _wire.dumps(_cell(_wire.observe_facts({"ok": 1})))
    doc = json.loads(raw_json)
    doc["records"][0]["observed"]["facts"] = deep
    with pytest.raises(_wire.WireError):
        _wire.loads(json.dumps(doc).encode(), raw_npz)


def _bomb(compression: int, megabytes: int) -> bytes:
    """An .npz whose one member is a valid .npy of ``megabytes`` MiB of zeros,
    compressed (a few hundred KiB on disk)."""
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        with archive.open("a0.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f8", "fortran_order": False,
                         "shape": (megabytes << 17,)})
            chunk = bytes(1 << 20)
            for _ in range(megabytes):
                member.write(chunk)
    return buffer.getvalue()


@pytest.mark.parametrize("compression", ["deflate", "bzip2"])
def test_compression_bombs_are_refused_in_bounded_memory(compression):
    """A member that decompresses to 256 MiB (4x the array cap) is refused from the zip
    directory: the decoder's memory grows by a small fraction of the file's own size."""
    import tracemalloc
    import zipfile

    method = {"deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2}[compression]
    raw_npz = _bomb(method, 256)
    assert len(raw_npz) < 2 << 20  # the bomb is small on disk
    raw_json, _ = _wire.dumps(_cell(_wire.observe_tree({"a": np.arange(3.0)})))
    tracemalloc.start()
    try:
        with pytest.raises(_wire.WireError, match="compressed"):
            _wire.loads(raw_json, raw_npz)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(raw_npz) + (1 << 20), peak


def test_a_header_that_claims_more_than_its_member_holds_is_refused():
    """Stored, but the .npy header claims 1 TiB: refused before anything is allocated."""
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        with archive.open("a0.npy", "w") as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f8", "fortran_order": False, "shape": (1 << 37,)})
            member.write(bytes(64))
    raw_json, _ = _wire.dumps(_cell(_wire.observe_tree({"a": np.arange(3.0)})))
    with pytest.raises(_wire.WireError, match="does not match"):
        _wire.loads(raw_json, buffer.getvalue())


def test_decoded_arrays_are_writable_and_fortran_order_survives():
    array = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    buffer = io.BytesIO()
    np.savez(buffer, a0=array)
    arrays = _wire._arrays(buffer.getvalue())
    np.testing.assert_array_equal(arrays["a0"], array)
    arrays["a0"][0, 0] = 7.0
