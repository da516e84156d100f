"""Tests for autograder.programs.hlo: StableHLO op counts, donation, and what a text is."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest

from autograder import (CheckFailure, assert_donated, assert_is_optimized_hlo,
                        assert_is_stablehlo, assert_stablehlo_op_count,
                        collect_aliased_parameters, compiled_hlo_text, count_stablehlo_ops,
                        stablehlo_text)


def _rolled(v):
    return jax.lax.fori_loop(0, 20, lambda i, u: jnp.sin(u) / 2, v)


def _unrolled(v):
    for _ in range(20):
        v = jnp.sin(v) / 2
    return v


# --- the three original helpers keep working ------------------------------------------

def test_stablehlo_text_and_counts():
    text = stablehlo_text(_unrolled, (jnp.ones(3),))
    assert "func.func public @main" in text
    assert count_stablehlo_ops(text)["sine"] == 20
    assert count_stablehlo_ops(stablehlo_text(_rolled, (jnp.ones(3),)))["while"] == 1


def test_compiled_hlo_text_is_optimized_hlo():
    assert compiled_hlo_text(_rolled, (jnp.ones(3),)).startswith("HloModule")


# --- assert_stablehlo_op_count -----------------------------------------------------------

def test_op_count_passes_and_returns_nothing():
    # None on purpose: a number as a test cell's last value is nbgrader partial credit.
    assert assert_stablehlo_op_count(_rolled, (jnp.ones(3),), "while", at_least=1) is None
    assert_stablehlo_op_count(_rolled, (jnp.ones(3),), "stablehlo.sine", at_most=1)


def test_op_count_reports_unrolling():
    with pytest.raises(CheckFailure) as err:
        assert_stablehlo_op_count(_unrolled, (jnp.ones(3),), "sine", at_most=1,
                                  section="5.3 Python loops unroll")
    msg = str(err.value)
    assert msg.startswith("the StableHLO of _unrolled(v=f32[3]) has 20 `stablehlo.sine` ops")
    assert "expected: at most 1 `stablehlo.sine`" in msg
    assert "a Python loop inside a jitted function is unrolled" in msg
    assert "jax.lax.fori_loop or jax.lax.scan" in msg
    assert "reread: section 5.3 Python loops unroll" in msg


def test_op_count_counts_a_jitted_helper_at_each_call_site():
    # jax.jit writes the helper out once and calls it 20 times: 20 copies of its work.
    step = jax.jit(lambda u: jnp.sin(u) / 2)

    def unrolled_calls(v):
        for _ in range(20):
            v = step(v)
        return v

    assert "call @" in stablehlo_text(unrolled_calls, (jnp.ones(3),))
    with pytest.raises(CheckFailure, match="has 20 `stablehlo.sine` ops"):
        assert_stablehlo_op_count(unrolled_calls, (jnp.ones(3),), "sine", at_most=1)
    rolled = lambda v: jax.lax.fori_loop(0, 20, lambda i, u: step(u), v)  # noqa: E731
    assert_stablehlo_op_count(rolled, (jnp.ones(3),), "sine", at_most=1)


def test_op_count_reports_a_missing_op_with_the_ops_used():
    with pytest.raises(CheckFailure) as err:
        assert_stablehlo_op_count(_unrolled, (jnp.ones(3),), "while", at_least=1,
                                  hint="no loop", fix="use fori_loop")
    msg = str(err.value)
    assert "expected: at least 1 `stablehlo.while`" in msg
    assert "got:      0 `stablehlo.while` (most used: " in msg
    assert "sine x20" in msg and "divide x20" in msg and "num_partitions" not in msg
    assert "likely cause: no loop" in msg and "fix: use fori_loop" in msg


def test_op_count_uses_the_options_of_a_jitted_function():
    def repeat(v, n):
        for _ in range(n):
            v = jnp.cos(v)
        return v

    jitted = jax.jit(repeat, static_argnums=1)
    with pytest.raises(CheckFailure, match="has 4 `stablehlo.cosine` ops"):
        assert_stablehlo_op_count(jitted, (jnp.ones(2), 4), "cosine", at_most=1)


def test_op_count_needs_a_bound():
    with pytest.raises(ValueError):
        assert_stablehlo_op_count(_rolled, (jnp.ones(3),), "while")


def test_op_count_turns_lowering_errors_into_feedback():
    def needs_static(v, n):
        return v * len(range(n))

    with pytest.raises(CheckFailure, match="raised"):
        assert_stablehlo_op_count(needs_static, (jnp.ones(2), 3), "multiply", at_most=1)


def test_a_host_callback_is_not_reported_as_an_unsolved_stub():
    """jax.export raises NotImplementedError for host callbacks: not "not implemented yet"."""
    @functools.partial(jax.jit, donate_argnums=0)
    def step(p, g):
        jax.debug.print("p = {}", p)
        return p - 0.1 * g

    with pytest.raises(CheckFailure) as err:
        assert_donated(step, (jnp.ones(3), jnp.ones(3)), 0)
    message = str(err.value)
    assert "not implemented yet" not in message
    assert message.startswith("the program of step(") and "holds a host callback" in message
    assert "jax.debug.print" in message and "remove prints and callbacks" in message


# --- donation ----------------------------------------------------------------------------

def _sgd(p, g):
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)


def test_collect_aliased_parameters():
    a = jnp.ones(3)
    assert collect_aliased_parameters(
        compiled_hlo_text(jax.jit(_sgd, donate_argnums=0), (a, a))) == [0]
    assert collect_aliased_parameters(compiled_hlo_text(jax.jit(_sgd), (a, a))) == []
    tree = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    assert collect_aliased_parameters(
        compiled_hlo_text(jax.jit(_sgd, donate_argnums=0), (tree, tree))) == [0, 1]


def test_assert_donated_passes_without_stderr(capfd):
    tree = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    assert_donated(jax.jit(_sgd, donate_argnums=0), (tree, tree), 0)
    assert_donated(jax.jit(_sgd, donate_argnames="p"), (tree, tree), 0)
    assert capfd.readouterr().err == ""


def test_assert_donated_rejects_a_plain_function():
    with pytest.raises(CheckFailure) as err:
        assert_donated(_sgd, (jnp.ones(2), jnp.ones(2)), 0, section="6. Donation")
    msg = str(err.value)
    assert msg.startswith("_sgd is not a jitted function, so it cannot donate argument 0 (`p`)")
    assert "_sgd = jax.jit(<your function>, donate_argnums=0)" in msg
    assert "reread: section 6. Donation" in msg


def test_assert_donated_names_the_undonated_argument():
    f = jax.jit(_sgd, donate_argnums=1)   # donates the gradient, not the parameters
    with pytest.raises(CheckFailure) as err:
        assert_donated(f, ({"w": jnp.ones(2)}, {"w": jnp.ones(2)}), 0)
    msg = str(err.value)
    assert "does not donate argument 0 (`p`)" in msg
    assert "got:      0 of 1 leaves donated" in msg
    assert "without donate_argnums (or donate_argnames)" in msg


def test_assert_donated_reports_an_unusable_donation_without_stderr(capfd):
    @functools.partial(jax.jit, donate_argnums=0)
    def norm_only(p, g):
        return jnp.sum(p * g)   # no output shaped like p: XLA cannot reuse its buffer

    with pytest.raises(CheckFailure) as err:
        assert_donated(norm_only, (jnp.ones(3), jnp.ones(3)), 0)
    msg = str(err.value)
    assert "norm_only donates argument 0 (`p`), but XLA reuses none of its buffers" in msg
    assert "got:      0 of 1 aliased (tf.aliasing_output in the exported program)" in msg
    assert "same shape and dtype" in msg
    # JAX warns "Some donated buffers were not usable": the check keeps it off stderr.
    assert capfd.readouterr().err == ""


def test_assert_donated_counts_partly_usable_donations():
    @functools.partial(jax.jit, donate_argnums=0)
    def half(p):
        return p["w"] * 2 + jnp.sum(p["b"])   # w's buffer is reused, b's cannot be

    tree = {"w": jnp.ones(3), "b": jnp.ones(2)}
    with pytest.raises(CheckFailure, match="cannot reuse 1 of its 2 buffers"):
        assert_donated(half, (tree,), 0)


def test_assert_donated_maps_parameters_when_jit_prunes_unused_inputs():
    @functools.partial(jax.jit, donate_argnums=1)
    def ignore_first(unused, p):
        return p * 2   # `unused` is pruned: p is parameter 0 of the compiled module

    assert_donated(ignore_first, (jnp.ones(4), jnp.ones(3)), 1)


# --- what a text is -------------------------------------------------------------------

def test_assert_is_stablehlo_passes_on_lowered_text():
    text = jax.jit(jnp.tanh).lower(jnp.ones(2)).as_text()
    assert_is_stablehlo(text, ops=["tanh", "stablehlo.tanh"])


@pytest.mark.parametrize("kind", ["jaxpr", "coloured jaxpr", "optimized", "unoptimized"])
def test_assert_is_stablehlo_names_what_it_got(kind):
    lowered = jax.jit(jnp.tanh).lower(jnp.ones(2))
    text = {
        "jaxpr": str(jax.make_jaxpr(jnp.tanh)(jnp.ones(2))),
        # As printed in a notebook: with terminal colour codes.
        "coloured jaxpr": "{ \x1b[34;1mlambda \x1b[39;22m; a\x1b[35m:f32[2]\x1b[39m. let }",
        "optimized": lowered.compile().as_text(),
        "unoptimized": lowered.as_text(dialect="hlo"),
    }[kind]
    expected = {
        "jaxpr": "got:      a jaxpr", "coloured jaxpr": "got:      a jaxpr",
        "optimized": "got:      optimized HLO", "unoptimized": "got:      HLO before optimization",
    }[kind]
    with pytest.raises(CheckFailure) as err:
        assert_is_stablehlo(text, name="texts[0]", section="5.1")
    msg = str(err.value)
    assert msg.startswith("texts[0] is not StableHLO")
    assert expected in msg
    assert "fix: jax.jit(f).lower(*args).as_text()" in msg


def test_assert_is_stablehlo_checks_type_and_ops():
    with pytest.raises(CheckFailure, match="is not a string"):
        assert_is_stablehlo(None)
    text = jax.jit(jnp.tanh).lower(jnp.ones(2)).as_text()
    with pytest.raises(CheckFailure) as err:
        assert_is_stablehlo(text, ops=["sine"])
    assert "is StableHLO, but not of the function asked for" in str(err.value)
    assert "expected: ops `stablehlo.sine`" in str(err.value)


def test_assert_is_optimized_hlo():
    lowered = jax.jit(jnp.tanh).lower(jnp.ones(2))
    optimized = lowered.compile().as_text()
    assert_is_optimized_hlo(optimized)
    assert_is_optimized_hlo(optimized, reference=optimized)
    with pytest.raises(CheckFailure) as err:
        assert_is_optimized_hlo(lowered.as_text(), name="texts[1]")
    msg = str(err.value)
    assert msg.startswith("texts[1] is not the optimized HLO")
    assert "got:      StableHLO (lowered.as_text())" in msg
    assert "compile().as_text()" in msg
    with pytest.raises(CheckFailure, match="is not a string"):
        assert_is_optimized_hlo(b"HloModule")


def test_assert_is_optimized_hlo_follows_a_reference_without_the_mark():
    # A backend whose compiled HLO lacks `is_scheduled=true`: plain HLO is accepted.
    unoptimized = jax.jit(jnp.tanh).lower(jnp.ones(2)).as_text(dialect="hlo")
    assert_is_optimized_hlo(unoptimized, reference=unoptimized)
    with pytest.raises(CheckFailure, match="HLO before optimization"):
        assert_is_optimized_hlo(unoptimized)
