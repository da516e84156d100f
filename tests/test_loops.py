"""Unit tests for autograder.control_flow.jit_compat: jit-compatibility, loops that stay loops,
gradients through loops. Messages are part of the contract, so they are asserted too.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from autograder import (CheckFailure, assert_compiled_as_loop, assert_jitted_with_static,
                        assert_loop_grads_match_numeric, assert_works_under_jit,
                        collect_loop_facts)


# ----------------------------------------------------------------- assert_works_under_jit

def relu_where(x):
    return jnp.where(x > 0, x, 0.0)


def test_works_under_jit_returns_the_jitted_result():
    out = assert_works_under_jit(relu_where, (jnp.array([-1.0, 2.0]),),
                                 reference=lambda x: jnp.array([0.0, 2.0]))
    np.testing.assert_allclose(out, [0.0, 2.0])


def test_works_under_jit_explains_python_if_on_a_traced_scalar():
    def relu_if(x):
        if x > 0:
            return x
        return 0.0 * x

    with pytest.raises(CheckFailure) as err:
        assert_works_under_jit(relu_if, (1.5,), section="1.2 If on a tracer")
    msg = str(err.value)
    assert msg.startswith("relu_if(x=float 1.5) fails under jax.jit: TracerBoolConversionError")
    assert "a Python `if`, `while`" in msg
    assert "lax.cond / lax.switch" in msg
    assert "reread: section 1.2 If on a tracer" in msg
    # The student's own error is chained, so the traceback shows their line.
    assert isinstance(err.value.__cause__, jax.errors.TracerBoolConversionError)


def test_works_under_jit_explains_python_if_on_an_array():
    def relu_if(x):
        if x > 0:
            return x
        return 0.0 * x

    with pytest.raises(CheckFailure, match="several elements") as err:
        assert_works_under_jit(relu_if, (jnp.ones(3),))
    assert "jnp.where(condition, a, b)" in str(err.value)


def test_works_under_jit_explains_range_over_a_traced_int():
    def repeat(x, n):
        for _ in range(n):
            x = x + 1.0
        return x

    with pytest.raises(CheckFailure) as err:
        assert_works_under_jit(repeat, (1.0, 3))
    msg = str(err.value)
    assert "TracerIntegerConversionError" in msg
    assert "used as a Python int: `range(n)`" in msg
    assert "static_argnums / static_argnames" in msg


def test_works_under_jit_accepts_static_arguments():
    def repeat(x, n):
        for _ in range(n):
            x = x + 1.0
        return x

    out = assert_works_under_jit(repeat, (1.0, 3), static_argnums=(1,),
                                 reference=lambda x, n: x + n)
    assert float(out) == 4.0
    out = assert_works_under_jit(repeat, (1.0,), {"n": 2}, static_argnames=("n",))
    assert float(out) == 3.0


@pytest.mark.parametrize("body, needle", [
    (lambda x: jnp.zeros(x), "used as a shape or a slice bound"),       # TypeError with a tracer
    (lambda x: float(x) * 2.0, "`int(x)`, `float(x)`"),                 # ConcretizationTypeError
    (lambda x: jnp.asarray(np.asarray(x)), "NumPy (`np.*`"),            # TracerArrayConversionError
])
def test_works_under_jit_explains_other_tracing_errors(body, needle):
    with pytest.raises(CheckFailure, match="fails under jax.jit") as err:
        assert_works_under_jit(body, (3,))
    assert needle in str(err.value)


def test_works_under_jit_explains_a_string_argument_that_is_not_static():
    def scale(x, kind):
        return 2 * x if kind == "double" else x

    with pytest.raises(CheckFailure) as err:
        assert_works_under_jit(scale, (1.0, "double"))
    assert "a non-array argument (a string, a function, None)" in str(err.value)
    assert_works_under_jit(scale, (1.0, "double"), static_argnums=(1,),
                           reference=lambda x, kind: 2.0)


def test_works_under_jit_keeps_the_generic_message_for_ordinary_bugs():
    def broken(x):
        return x @ jnp.ones((5, 2))

    with pytest.raises(CheckFailure) as err:
        assert_works_under_jit(broken, (jnp.ones(3),))
    msg = str(err.value)
    assert msg.startswith("broken(x=f32[3]) raised TypeError")
    assert "run the exercise's 'try it' cell" in msg


def test_works_under_jit_reports_a_stub_as_not_implemented():
    def stub(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="stub is not implemented yet"):
        assert_works_under_jit(stub, (1.0,))


def test_works_under_jit_compares_with_the_reference():
    with pytest.raises(CheckFailure) as err:
        assert_works_under_jit(relu_where, (jnp.array([-1.0, 2.0]),),
                               reference=lambda x: jnp.array([0.0, 3.0]), hint="the slope is 1")
    msg = str(err.value)
    assert msg.startswith("relu_where(x=f32[2]) under jax.jit has wrong values")
    assert "expected 3, got 2" in msg
    assert "likely cause: the slope is 1" in msg


# -------------------------------------------------------------- assert_jitted_with_static

def _pool(x, size, kind):
    w = x.reshape(-1, size)
    return w.max(axis=1) if kind == "max" else w.mean(axis=1)


def test_jitted_with_static_passes_for_names_and_numbers():
    x = jnp.arange(6.0)
    by_name = jax.jit(_pool, static_argnames=("size", "kind"))
    by_num = jax.jit(_pool, static_argnums=(1, 2))
    for fn in (by_name, by_num):
        assert_jitted_with_static(fn, (x,), {"size": 2, "kind": "max"}, static=("size", "kind"))


def test_jitted_with_static_rejects_a_plain_function():
    with pytest.raises(CheckFailure) as err:
        assert_jitted_with_static(_pool, (jnp.arange(6.0),), {"size": 2, "kind": "max"},
                                  static=("size", "kind"), section="2.1")
    msg = str(err.value)
    assert msg.startswith("_pool is a plain Python function, not a jax.jit-wrapped one")
    assert "static_argnames=('size', 'kind')" in msg
    assert "reread: section 2.1" in msg


def test_jitted_with_static_reports_an_unsolved_stub():
    def pool1d(x, size, kind):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="pool1d is not implemented yet"):
        assert_jitted_with_static(pool1d, (jnp.arange(6.0),), {"size": 2, "kind": "max"},
                                  static=("size", "kind"))


def test_jitted_with_static_explains_a_traced_setting_that_fails():
    only_kind = jax.jit(_pool, static_argnames="kind")
    with pytest.raises(CheckFailure) as err:
        assert_jitted_with_static(only_kind, (jnp.arange(6.0),), {"size": 2, "kind": "max"},
                                  static=("size", "kind"))
    msg = str(err.value)
    assert "fails when jax.jit traces it: TypeError" in msg
    assert "mark the argument that decides a shape static" in msg


def test_jitted_with_static_catches_a_traced_setting_that_happens_to_work():
    scale = jax.jit(lambda x, n: x * n)
    with pytest.raises(CheckFailure) as err:
        assert_jitted_with_static(scale, (jnp.ones(3),), {"n": 2}, static=("n",))
    msg = str(err.value)
    assert ": n is traced, not static" in msg
    assert "expected: 1 traced input(s)" in msg
    assert "got:      2 traced inputs: f32[3], i32[]" in msg


# ------------------------------------------------------------------ collect_loop_facts

def spin_python(x, n):
    for _ in range(n):
        x = jnp.sin(x) + 0.5 * x
    return x


def spin_fori(x, n):
    return lax.fori_loop(0, n, lambda i, x: jnp.sin(x) + 0.5 * x, x)


def test_loop_facts_grow_with_n_only_for_the_python_loop():
    small = collect_loop_facts(spin_python, (1.0, 3), body_op="sin", static_argnums=(1,))
    large = collect_loop_facts(spin_python, (1.0, 12), body_op="sin", static_argnums=(1,))
    assert (small["jaxpr_loops"], small["jaxpr_body_op"], small["stablehlo_body_op"]) == (0, 3, 3)
    assert (large["jaxpr_body_op"], large["stablehlo_body_op"]) == (12, 12)
    assert large["stablehlo_ops"] > 3 * small["stablehlo_ops"]
    f_small = collect_loop_facts(spin_fori, (1.0, 3), body_op="sin", static_argnums=(1,))
    f_large = collect_loop_facts(spin_fori, (1.0, 12), body_op="sin", static_argnums=(1,))
    assert f_small == f_large
    assert (f_large["jaxpr_loops"], f_large["stablehlo_while"], f_large["stablehlo_body_op"]) == (1, 1, 1)


def test_loop_facts_without_body_op_and_with_a_traced_bound():
    facts = collect_loop_facts(spin_fori, (1.0, 5))  # n traced: fori_loop becomes while
    assert facts["jaxpr_loops"] == 1 and facts["stablehlo_while"] == 1
    assert "jaxpr_body_op" not in facts


# -------------------------------------------------------------- assert_compiled_as_loop

def cumsum_scan(xs, unroll=1):
    return lax.scan(lambda c, x: (c + jnp.tanh(x), c), 0.0, xs, unroll=unroll)[1]


def test_compiled_as_loop_passes_for_fori_scan_while_and_small_unroll():
    assert_compiled_as_loop(spin_fori, (1.0, 30), body_op="sin", trip_count=30,
                            static_argnums=(1,))
    assert_compiled_as_loop(cumsum_scan, (jnp.ones(30),), body_op="tanh", trip_count=30)
    assert_compiled_as_loop(cumsum_scan, (jnp.ones(30), 2), body_op="tanh", trip_count=30,
                            static_argnums=(1,))

    def halve(x):
        return lax.while_loop(lambda c: c > 1.0, lambda c: jnp.sin(c) * 0 + c / 2, x)

    assert_compiled_as_loop(halve, (1000.0,), body_op="sin", trip_count=10)


def test_compiled_as_loop_rejects_a_python_loop():
    with pytest.raises(CheckFailure) as err:
        assert_compiled_as_loop(spin_python, (1.0, 30), body_op="sin", trip_count=30,
                                static_argnums=(1,), section="3.1 Python loops unroll")
    msg = str(err.value)
    assert msg.startswith("spin_python(x=float 1.0, n=int 30) is not compiled as a loop: "
                          "its jaxpr has no `scan` or `while`")
    assert "`sin` appears 30 times in the jaxpr, about once per step" in msg
    assert "lax.fori_loop or lax.scan" in msg
    assert "reread: section 3.1 Python loops unroll" in msg


def test_compiled_as_loop_rejects_a_library_call_without_loop():
    with pytest.raises(CheckFailure) as err:
        assert_compiled_as_loop(lambda xs: jnp.cumsum(jnp.tanh(xs)), (jnp.ones(30),),
                                body_op="tanh", trip_count=30, fix="use lax.scan")
    msg = str(err.value)
    assert "no loop primitive; `tanh` appears 1 time(s) in the jaxpr" in msg
    assert "fix: use lax.scan" in msg


def test_compiled_as_loop_rejects_full_unrolling_in_stablehlo():
    with pytest.raises(CheckFailure) as err:
        assert_compiled_as_loop(cumsum_scan, (jnp.ones(30), True), body_op="tanh",
                                trip_count=30, static_argnums=(1,))
    msg = str(err.value)
    assert "is unrolled when lowered to StableHLO" in msg
    assert "at most 15 `tanh`" in msg
    # The exported program drops the last step's tanh: it only feeds the final carry,
    # which cumsum_scan does not return.
    assert "0 `stablehlo.while`, 29 copies of `tanh` for 30 steps" in msg
    assert "`unroll=True`" in msg


def test_compiled_as_loop_honours_max_copies():
    with pytest.raises(CheckFailure, match="at most 1 `tanh`"):
        assert_compiled_as_loop(cumsum_scan, (jnp.ones(30), 2), body_op="tanh", trip_count=30,
                                static_argnums=(1,), max_copies=1)


def test_compiled_as_loop_explains_tracing_errors():
    def spin_if(x, n):
        if x > 0:
            return spin_fori(x, n)
        return x

    with pytest.raises(CheckFailure) as err:
        assert_compiled_as_loop(spin_if, (1.0, 30), body_op="sin", trip_count=30,
                                static_argnums=(1,))
    assert "fails when traced: TracerBoolConversionError" in str(err.value)


# ------------------------------------------------------- assert_loop_grads_match_numeric

def rnn(params, h0, xs):
    def step(h, x):
        h = jnp.tanh(x @ params["W"] + h * params["u"])
        return h, h
    return lax.scan(step, h0, xs)[1]


def _rnn_args():
    rng = np.random.default_rng(0)
    params = {"W": jnp.asarray(0.5 * rng.normal(size=(2, 3)), jnp.float32),
              "u": jnp.asarray(0.5 * rng.normal(size=3), jnp.float32)}
    return params, jnp.zeros(3), jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)


def test_loop_grads_pass_through_scan_and_static_fori():
    assert_loop_grads_match_numeric(rnn, _rnn_args(), argnums=(0, 1))
    assert_loop_grads_match_numeric(spin_fori, (0.7, 20), static_argnums=(1,))


def test_loop_grads_ignore_integer_outputs():
    def with_count(x):
        return lax.fori_loop(0, 4, lambda i, c: (jnp.sin(c[0]), c[1] + 1), (x, 0))

    assert_loop_grads_match_numeric(with_count, (jnp.array([0.3, 1.2]),))


def test_loop_grads_explain_while_loop():
    def spin_while(x, n):
        body = lambda c: (c[0] + 1, jnp.sin(c[1]))
        return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]

    with pytest.raises(CheckFailure) as err:
        assert_loop_grads_match_numeric(spin_while, (0.7, 20), static_argnums=(1,),
                                        section="3.3")
    msg = str(err.value)
    assert msg.startswith("jax.grad cannot differentiate spin_while(x=float 0.7, n=int 20): "
                          "its loop is not reverse-differentiable")
    assert "lax.scan or lax.fori_loop with Python int bounds" in msg
    assert "forward mode (jax.jvp, jax.jacfwd)" in msg
    assert "reread: section 3.3" in msg


def test_loop_grads_catch_a_gradient_cut_inside_the_loop():
    def rnn_cut(params, h0, xs):
        def step(h, x):
            h = jnp.tanh(x @ params["W"] + lax.stop_gradient(h) * params["u"])
            return h, h
        return lax.scan(step, h0, xs)[1]

    with pytest.raises(CheckFailure) as err:
        assert_loop_grads_match_numeric(rnn_cut, _rnn_args(), argnums=(0,))
    msg = str(err.value)
    assert "jax.grad through rnn_cut(params=" in msg
    assert "disagree with finite differences" in msg
    assert "params['u']" in msg  # the leaf whose gradient is wrong is named
    assert "jax.lax.stop_gradient" in msg


def test_loop_grads_refuse_a_static_argnum_to_differentiate():
    with pytest.raises(ValueError, match="static argument"):
        assert_loop_grads_match_numeric(spin_fori, (0.7, 20), argnums=1, static_argnums=(1,))


def test_static_binding_keeps_parameter_names():
    from autograder.control_flow.jit_compat import _bind_static

    def f(a, n, b):
        return a * n + b

    bound, dyn, idx = _bind_static(f, (1.0, 3, 2.0), (1,))
    assert bound(*dyn) == 5.0 and idx == [0, 2]
    import inspect

    assert list(inspect.signature(bound).parameters) == ["a", "b"]
    # functools.partial objects work too (no signature names needed).
    part = functools.partial(f, b=1.0)
    bound, dyn, _ = _bind_static(part, (1.0, 3), (1,))
    assert bound(*dyn) == 4.0
