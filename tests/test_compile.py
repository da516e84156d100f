"""Tests for autograder.jit.compile: counting compilations and explaining recompiles."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest

from autograder import (CheckFailure, assert_compiles_at_most, assert_jitted,
                        collect_compilations)


@pytest.fixture
def x3():
    return jnp.ones(3)


def _double(v):
    return 2 * v


# --- collect_compilations ---------------------------------------------------------

def test_collect_compilations_counts_each_new_shape_once():
    a, b = jnp.ones(5), jnp.ones(6)   # created first: eager ops compile too
    f = jax.jit(_double)
    with collect_compilations() as seen:
        f(a)
        f(a)
        f(b)
    assert seen.count == 2
    assert seen.names == ["_double", "_double"]   # "jit(_double)" with jit( ) stripped
    assert seen.trace_count == 2 and seen.traces == ["_double", "_double"]


def test_collect_compilations_sees_eager_operations():
    a = jnp.ones(7)
    with collect_compilations() as seen:
        jnp.cos(a)
    # An eager jnp call is a jitted primitive too: one compilation, named after it.
    assert seen.count == 1 and seen.names == ["cos"]


def test_collect_compilations_stops_listening_after_the_block():
    a = jnp.ones(9)
    with collect_compilations() as seen:
        pass
    jax.jit(lambda v: v - 1)(a)
    assert seen.count == 0


def test_nested_collectors_both_count():
    a = jnp.ones(11)
    with collect_compilations() as outer:
        with collect_compilations() as inner:
            jax.jit(lambda v: v * 3)(a)
    assert outer.count == inner.count == 1


# --- assert_compiles_at_most --------------------------------------------------------

def test_passes_and_returns_the_record(x3):
    f = jax.jit(lambda v: v + 1)
    record = assert_compiles_at_most(f, [(x3,), (x3,), (x3,)], 1)
    assert record.count == 1


def test_passing_check_writes_nothing_to_stderr(x3, capfd):
    assert_compiles_at_most(jax.jit(lambda v: v + 2), [(x3,), (x3,)], 1)
    assert capfd.readouterr().err == ""


def test_shape_change_is_named():
    a, b = jnp.ones(3), jnp.ones(4)

    @jax.jit
    def total(v):
        return jnp.sum(v)

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(total, [(a,), (b,)], 1, section="2.1 The cache key")
    msg = str(err.value)
    assert msg.startswith("total compiled 2 times over 2 calls")
    assert "expected: at most 1 compilation" in msg
    assert "call 2 differs from call 1 in `v`: shape (3,) -> (4,)" in msg
    assert "jit compiles once per shape" in msg
    assert "reread: section 2.1 The cache key" in msg


def test_dtype_change_is_named_against_the_closest_call():
    a, b = jnp.ones(3), jnp.ones(4)
    c = jnp.ones(3, jnp.int32)

    @jax.jit
    def total(v):
        return jnp.sum(v)

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(total, [(a,), (b,), (c,)], 1)
    msg = str(err.value)
    # Call 3 is compared with call 1 (one difference), not call 2 (shape and dtype).
    assert "call 3 differs from call 1 in `v`: dtype f32[3] -> i32[3]" in msg
    assert "once per shape" in msg and "once per dtype" in msg


def test_weak_type_change_is_named():
    f = jax.jit(lambda v: v * 2)
    s = jnp.float32(2.0)
    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(f, [(2.0,), (s,)], 1)
    msg = str(err.value)
    assert "Python float 2.0 (weakly typed float32) -> f32[]" in msg
    assert "weak typing" in msg


def test_static_value_change_is_named(x3):
    @functools.partial(jax.jit, static_argnames="n")
    def power(v, n):
        return v ** n

    calls = [((x3,), {"n": 2}), ((x3,), {"n": 2}), ((x3,), {"n": 3})]
    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(power, calls, 1)
    msg = str(err.value)
    assert "call 3 differs from call 1 in `n`: value 2 -> 3" in msg
    assert "static_argnums / static_argnames" in msg
    assert "make the argument a traced array" in msg


def test_fresh_function_object_is_named(x3):
    def fresh(v):
        return jax.jit(lambda u: u * 5)(v)

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(fresh, [(x3,), (x3,)], 1, section="2.3")
    msg = str(err.value)
    assert "call 2: same input shapes, dtypes and static values as call 1, yet it " \
           "compiled again" in msg
    assert "the function being compiled was a new object each time" in msg
    assert "create the jitted function once" in msg


def test_pytree_structure_change_is_named(x3):
    f = jax.jit(lambda d: jax.tree.map(lambda v: v + 1, d))
    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(f, [({"a": x3},), ({"b": x3},)], 1)
    assert "the inputs' pytree structure" in str(err.value)
    assert "a different pytree structure" in str(err.value)


def test_several_programs_in_one_call_blame_eager_code():
    a = jnp.linspace(0.0, 1.0, 13)   # a shape no other test uses: fresh eager compiles

    def eager(v):
        return jnp.sin(v) + jnp.cos(v) * 3.5

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(eager, [(a,), (a,)], 1)
    msg = str(err.value)
    assert "call 1 alone compiled" in msg and "programs (" in msg
    assert "each jnp operation outside jit is compiled on its own" in msg
    assert "decorate it with @jax.jit" in msg


def test_hint_and_fix_replace_the_defaults(x3):
    def fresh(v):
        return jax.jit(lambda u: u * 6)(v)

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(fresh, [(x3,), (x3,)], 1, hint="my cause", fix="my fix",
                                name="step")
    msg = str(err.value)
    assert msg.startswith("step compiled 2 times")
    assert "likely cause: my cause" in msg and "fix: my fix" in msg


def test_a_single_argument_may_be_given_bare(x3):
    f = jax.jit(lambda v: v - 3)
    assert assert_compiles_at_most(f, [x3, x3], 1).count <= 1


def test_student_errors_become_feedback(x3):
    def broken(v):
        raise ValueError("boom")

    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(broken, [(x3,)], 1)
    assert "broken raised ValueError: boom" in str(err.value)


def test_not_implemented_is_reported_as_such(x3):
    def todo(v):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="todo is not implemented yet"):
        assert_compiles_at_most(todo, [(x3,)], 1)


# --- assert_jitted -------------------------------------------------------------------

def test_assert_jitted_accepts_jit_and_partial_jit():
    assert_jitted(jax.jit(_double))
    assert_jitted(functools.partial(jax.jit, static_argnums=0)(_double))


def test_assert_jitted_rejects_a_plain_function():
    with pytest.raises(CheckFailure) as err:
        assert_jitted(_double, section="2.2 Static arguments")
    msg = str(err.value)
    assert msg.startswith("_double is not a jitted function")
    assert "got:      a plain function" in msg
    assert "decorate the def with @jax.jit" in msg
    assert "reread: section 2.2 Static arguments" in msg


def test_assert_jitted_rejects_a_non_function():
    with pytest.raises(CheckFailure, match="got:      int 3"):
        assert_jitted(3, name="poly_features")


# --- the same count from programs (the judge's side) ---------------------------------

def _silenced(monkeypatch):
    """What a submission that silenced JAX's compile listeners would make the count say."""
    import contextlib

    from autograder.jit import compile as compile_module

    @contextlib.contextmanager
    def nothing_seen():
        yield compile_module.Compilations()

    monkeypatch.setattr(compile_module, "collect_compilations", nothing_seen)


def test_a_count_silenced_in_process_still_fails_on_the_programs(x3, monkeypatch):
    @functools.partial(jax.jit, static_argnames="decay")
    def ema(m, x, decay):
        return decay * m + (1 - decay) * x

    calls = [((x3, x3), {"decay": d}) for d in (0.7, 0.3, 0.5)]
    _silenced(monkeypatch)
    with pytest.raises(CheckFailure) as err:
        assert_compiles_at_most(ema, calls, 1, section="3.3")
    msg = str(err.value)
    assert msg.startswith("ema needs 3 different programs for 3 calls"), msg
    assert "call 2 gives another program than call 1, with the same inputs: a value is " \
           "compiled into it as a constant" in msg
    assert "drop it from static_argnums/static_argnames" in msg
    # A new input shape is a new program too, whatever the listeners say.
    with pytest.raises(CheckFailure, match="call 2 gives another program than call 1: its "
                                           r"inputs are float32\[4\]"):
        assert_compiles_at_most(jax.jit(jnp.sin), [(x3,), (jnp.ones(4),)], 1)


def test_programs_that_are_one_program_pass(x3, monkeypatch):
    @jax.jit
    def ema(m, x, decay):
        return decay * m + (1 - decay) * x

    assert assert_compiles_at_most(ema, [(x3, x3, d) for d in (0.7, 0.3, 0.5)], 1).count == 1
    # A static argument whose values repeat: as many programs as values, within the limit.
    power = jax.jit(lambda v, n: v ** n, static_argnums=1)
    assert assert_compiles_at_most(power, [(x3, 2), (x3, 2), (x3, 3)], 2).count == 2
    # Inputs donated by the calls were exported before them.
    step = jax.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)
    assert assert_compiles_at_most(step, [(jnp.ones(3), x3) for _ in range(3)], 1).count == 1
    # A program the judge does not run (a host callback) is left to the count.
    def noisy(v):
        jax.debug.print("v = {}", v)
        return v * 2

    with jax.disable_jit(False):
        _silenced(monkeypatch)
        assert_compiles_at_most(jax.jit(noisy), [(x3,), (x3,)], 1)


def test_the_programs_do_not_see_a_fresh_function_object(x3, monkeypatch):
    """The floor's limit: a new jit of the same function compiles the same program again,
    which only the count where the calls run sees."""
    def fresh(v):
        return jax.jit(lambda u: u * 5)(v)

    _silenced(monkeypatch)
    assert_compiles_at_most(fresh, [(x3,), (x3,)], 1)
