"""Tests for autograder.debugging.transfers: a function's values under the host-to-device guard.

The check passes a function that copies its inputs with jax.device_put, fails one that
lets a NumPy array or a Python number reach a device computation (naming what it
carried), leaves other errors to the generic message, and compares values as
assert_matches_reference does. The explainer is also fed observations that went
through the wire format, as the trusted grader would.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import CheckFailure, assert_no_implicit_transfers
from autograder.core import wire as _wire
from autograder.debugging.transfers import explain_transfers, guarded_call, transferred_value

_step = jax.jit(lambda w, x, lr: w - lr * x.T @ (x @ w))


def _reference(w, x, lrs):
    w = np.asarray(w, np.float64)
    for lr in lrs:
        w = w - lr * x.T @ (x @ w)
    return w.astype(np.float32)


def _device_steps(w, x, lrs):
    """Every number copied explicitly: the learning rates one by one."""
    xd = jax.device_put(x)
    for lr in lrs:
        w = _step(w, xd, jax.device_put(np.float32(lr)))
    return w


def _numpy_argument(w, x, lrs):
    for lr in lrs:
        w = _step(w, x, jax.device_put(np.float32(lr)))
    return w


def _python_lr(w, x, lrs):
    xd = jax.device_put(x)
    for lr in lrs:
        w = _step(w, xd, lr)
    return w


_W = jnp.array([1.0, -0.5, 0.25])
_X = (np.arange(12.0, dtype=np.float32).reshape(4, 3) / 10)
_LRS = [0.1, 0.05]


def test_explicit_copies_pass_and_return_the_value():
    got = assert_no_implicit_transfers(_device_steps, _reference, (_W, _X, _LRS),
                                       rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _reference(_W, _X, _LRS), rtol=1e-5)


def test_a_numpy_argument_fails_with_its_shape_and_the_device_put_fix():
    with pytest.raises(CheckFailure) as err:
        assert_no_implicit_transfers(_numpy_argument, _reference, (_W, _X, _LRS),
                                     name="train(w, x, lrs)", section="5.4")
    text = str(err.value)
    assert text.startswith('train(w, x, lrs) made an implicit host-to-device transfer under '
                           'jax.transfer_guard_host_to_device("disallow")')
    assert "got:      a float32[4,3] array reached a device computation" in text
    assert "a NumPy array" in text and "jax.device_put" in text
    assert "reread: section 5.4" in text


def test_a_python_number_fails_as_a_weakly_typed_scalar():
    with pytest.raises(CheckFailure) as err:
        assert_no_implicit_transfers(_python_lr, _reference, (_W, _X, _LRS))
    text = str(err.value)
    assert "a Python scalar (float32[], weakly typed) reached a device computation" in text
    assert "a learning rate" in text


def test_the_guard_is_off_again_after_the_call():
    with pytest.raises(CheckFailure):
        assert_no_implicit_transfers(_python_lr, _reference, (_W, _X, _LRS))
    _step(_W, _X, 0.1).block_until_ready()       # implicit copies allowed again
    assert guarded_call(lambda: 3) == 3


def test_wrong_values_get_the_value_message():
    with pytest.raises(CheckFailure) as err:
        assert_no_implicit_transfers(lambda w, x, lrs: _device_steps(w, x, lrs[:1]),
                                     _reference, (_W, _X, _LRS), name="train(w, x, lrs)")
    assert "wrong values" in str(err.value)


def test_another_error_gets_the_generic_message():
    def broken(w, x, lrs):
        raise ValueError("shapes (3,) and (4,) differ")

    with pytest.raises(CheckFailure) as err:
        assert_no_implicit_transfers(broken, _reference, (_W, _X, _LRS), name="train(w)")
    assert str(err.value).startswith("train(w) raised ValueError: shapes (3,) and (4,) differ")


def test_explain_after_the_wire():
    error = RuntimeError("INVALID_ARGUMENT: Disallowed host-to-device transfer: "
                         "aval=ShapedArray(int32[2]), dst_sharding=SingleDeviceSharding(...)")
    obs = _wire.roundtrip(_wire.observe_error(error))
    text = explain_transfers(obs, None, label="f(x)", section="5.4")
    assert "got:      an int32[2] array reached a device computation" in text
    good = _wire.roundtrip(_wire.observe_tree(np.ones(3, np.float32)))
    assert explain_transfers(good, good, label="f(x)", rtol=1e-6, atol=0.0,
                             dtype="exact") is None


def test_transferred_value_reads_only_the_guards_message():
    assert transferred_value("Disallowed device-to-host transfer: shape=(3)") is None
    assert transferred_value("") is None
    assert transferred_value(
        "Disallowed host-to-device transfer: aval=ShapedArray(bool[]), dst_sharding=x"
    ) == "a bool[] array"
