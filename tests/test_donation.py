"""Tests for autograder.jit.donation: a jitted function that must keep its inputs.

Donation is read from ``Lowered.args_info`` for a ``jax.jit`` function (lowering only:
nothing runs, nothing is deleted); any other callable is called on copies of the
arrays, and the copies it deleted are the donated ones. Messages are asserted on.
"""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import optax
import pytest

from autograder import (CheckFailure, assert_donates_nothing, collect_donated_inputs,
                        explain_donated_inputs)

PARAMS = {"w": jnp.ones(3), "b": jnp.zeros(())}
OPT = optax.sgd(0.1)


def _step(params, opt_state, x):
    grads = jax.grad(lambda p: jnp.sum((x * p["w"] + p["b"]) ** 2))(params)
    updates, opt_state = OPT.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def test_a_plain_jitted_step_passes_and_keeps_its_inputs():
    state = OPT.init(PARAMS)
    facts = assert_donates_nothing(jax.jit(_step), (PARAMS, state, jnp.ones(3)))
    assert facts == {"jitted": True, "donated": []}
    assert not PARAMS["w"].is_deleted()


def test_a_plain_function_donates_nothing():
    assert collect_donated_inputs(_step, (PARAMS, OPT.init(PARAMS), jnp.ones(3))) == {
        "jitted": False, "donated": []}


def test_donated_leaves_are_named_by_path():
    step = jax.jit(_step, donate_argnums=(0,))
    with pytest.raises(CheckFailure) as e:
        assert_donates_nothing(step, (PARAMS, OPT.init(PARAMS), jnp.ones(3)), name="train_step",
                               section="6.1 A pure step")
    text = str(e.value)
    assert "train_step donates its inputs" in text
    assert "got:      donated: args[0]['b'], args[0]['w']" in text
    assert "reread: section 6.1 A pure step" in text
    assert not PARAMS["w"].is_deleted()   # lowering only


def test_donate_argnames_counts_too():
    facts = collect_donated_inputs(jax.jit(_step, donate_argnames="params"),
                                   (PARAMS, OPT.init(PARAMS), jnp.ones(3)))
    assert facts["donated"] == ["args[0]['b']", "args[0]['w']"], facts


def test_explain_works_on_json_data():
    data = json.loads(json.dumps({"jitted": True, "donated": [f"args[0][{i}]" for i in range(8)]}))
    text = explain_donated_inputs(data, name="step")
    assert ("donated: args[0][0], args[0][1], args[0][2], args[0][3], args[0][4], args[0][5] "
            "and 2 more") in text


def test_a_wrapper_around_a_donating_jit_is_called_on_copies():
    import functools

    core = jax.jit(_step, donate_argnums=(0, 1))

    def train_step(params, opt_state, x):  # a plain function around the donating jit
        return core(params, opt_state, x)

    @functools.partial(jax.jit, static_argnums=0, donate_argnums=(1,))
    def _with_optimizer(opt, params, opt_state, x):
        return _step(params, opt_state, x)

    state = OPT.init(PARAMS)
    for step in (train_step, functools.partial(_with_optimizer, OPT)):
        with pytest.raises(CheckFailure, match=r"donated: args\[0\]\['b'\], args\[0\]\['w'\]"):
            assert_donates_nothing(step, (PARAMS, state, jnp.ones(3)), name="train_step")
        assert not PARAMS["w"].is_deleted() and not PARAMS["b"].is_deleted()  # copies
