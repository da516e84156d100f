"""Checks of 08_autodiff: facts of exported programs (array sizes, residuals, memory), pytree nodes.

Each check is tested three ways: the assert on a right and a wrong function, the
collect step on an exported program (and on its serialized bytes, as the trusted
grader would see it), and the explain step on plain data that went through JSON.
"""
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from autograder.programs.artifacts import static_facts
from tests.test_jaxpr import graded
from autograder import (CheckFailure, assert_arrays_at_most, assert_memory_reduced, assert_node,
                        assert_saved_residuals, collect_array_sizes, collect_memory,
                        collect_node, collect_saved_residuals, explain_array_sizes,
                        explain_memory_reduction, explain_node, explain_saved_residuals,
                        export_program, export_residuals)


def _roundtrip(data):
    """What the trusted grader gets: plain data through JSON."""
    return json.loads(json.dumps(data))


def _loss(x):
    return jnp.sum(jnp.sin(x) ** 2)


def hvp_fwd_rev(x, v):
    return jax.jvp(jax.grad(_loss), (x,), (v,))[1]


def hvp_dense(x, v):
    return jax.hessian(_loss)(x) @ v


X40 = jnp.linspace(-1.0, 1.0, 40)


# ---------------------------------------------------------------- array sizes

def test_array_sizes_of_a_matrix_free_product_and_of_a_formed_hessian():
    small = collect_array_sizes(export_program(hvp_fwd_rev, (X40, X40)))
    dense = collect_array_sizes(export_program(hvp_dense, (X40, X40)))
    assert small["largest_elements"] == 40
    assert dense["largest_elements"] == 1600 and "40x40" in dense["largest_type"]


def hvp_dense_complex(x, v):
    """An n x n matrix formed in complex64 only (a regex over tensor<...> did not read
    complex<f32>; jax.hessian's own basis would have given it away as i32)."""
    z = x.astype(jnp.complex64)
    h = jnp.outer(jnp.cos(z), jnp.sin(z))
    return jnp.real(h @ v.astype(jnp.complex64))


def hvp_dense_bool_mask(x, v):
    """The Hessian's sparsity pattern as an i1 matrix: 1600 entries of 1 bit."""
    mask = jax.hessian(_loss)(x) != 0
    return jnp.where(mask, 1.0, 0.0) @ v


@pytest.mark.parametrize("fn", [hvp_dense_complex, hvp_dense_bool_mask])
def test_array_sizes_read_every_element_type(fn):
    facts = collect_array_sizes(export_program(fn, (X40, X40)))
    assert facts["largest_elements"] == 1600, facts
    with pytest.raises(CheckFailure):
        assert_arrays_at_most(fn, (X40, X40), 40 * 40 - 1, what="as many as the Hessian")


def test_array_sizes_read_float8_and_encodings_from_text_alone():
    from autograder.programs.array_sizes import largest_array

    text = ("%0 = stablehlo.convert %a : (tensor<64x64xf32>) -> tensor<64x64xf8E4M3FN>\n"
            "%1 = stablehlo.add %b, %b : tensor<128x128xcomplex<f64>, #enc>\n")
    facts = largest_array(text)
    assert facts["elements"] == 128 * 128 and facts["bytes"] == 128 * 128 * 16
    assert facts["type"] == "tensor<128x128xcomplex<f64>>"


def test_array_sizes_from_serialized_bytes_and_from_text_agree():
    exported = export_program(hvp_dense, (X40, X40))
    facts = collect_array_sizes(exported)
    assert collect_array_sizes(exported.serialize()) == facts
    assert collect_array_sizes(exported.mlir_module()) == facts


def test_assert_arrays_at_most_passes_and_fails_with_message():
    assert_arrays_at_most(hvp_fwd_rev, (X40, X40), 40 * 40 - 1, what="as many as the Hessian")
    with pytest.raises(CheckFailure) as info:
        assert_arrays_at_most(hvp_dense, (X40, X40), 40 * 40 - 1,
                              what="as many as the 40 x 40 Hessian", section="2.1",
                              fix="use jax.jvp of jax.grad")
    msg = str(info.value)
    assert msg.startswith("the program of hvp_dense(x=f32[40], v=f32[40]) builds an array of "
                          "1600 entries, as many as the 40 x 40 Hessian")
    assert "expected: no array with more than 1599 elements" in msg
    assert "got:      tensor<40x40x" in msg
    assert "fix: use jax.jvp of jax.grad" in msg and "reread: section 2.1" in msg


def test_explain_array_sizes_is_pure_on_json_data():
    facts = _roundtrip(collect_array_sizes(export_program(hvp_dense, (X40, X40))))
    assert explain_array_sizes(facts, at_most=1600, name="h", what="x") is None
    msg = explain_array_sizes(facts, at_most=100, name="h", what="more than allowed",
                              hint="a custom cause")
    assert "builds an array of 1600 entries, more than allowed" in msg
    assert "likely cause: a custom cause" in msg


def test_a_function_that_fails_to_export_gets_feedback():
    def not_traceable(x, v):
        return float(x[0]) * v    # concrete value of a tracer

    with pytest.raises(CheckFailure) as info:
        assert_arrays_at_most(not_traceable, (X40, X40), 10, what="x", section="1.4")
    msg = str(info.value)
    assert msg.startswith("not_traceable(x=f32[40], v=f32[40]) raised ConcretizationTypeError")
    assert "reread: section 1.4" in msg


# ---------------------------------------------------------------- saved residuals

def _block(h, w):
    return h + jnp.tanh(jnp.sin(h @ w)), None


def _stack(ck):
    body = jax.checkpoint(_block) if ck else _block

    def loss(ws, x):
        h, _ = lax.scan(body, x, ws)
        return jnp.mean(h ** 2)

    loss.__name__ = "remat_loss" if ck else "plain_loss"
    return loss


WS = jnp.ones((5, 3, 3)) / 3      # 5 layers of width 3
XB = jnp.ones((4, 3))             # batch 4: activations are stacked as (5, 4, 3)


def test_collect_saved_residuals_counts_stacked_activations():
    plain = collect_saved_residuals(export_residuals(_stack(False), (WS, XB)))
    remat = collect_saved_residuals(export_residuals(_stack(True), (WS, XB)))

    def count(rs):
        return sum(r["shape"] == [5, 4, 3] for r in rs)

    assert count(plain) > count(remat) == 1   # remat keeps only each layer's input
    assert all(r["dtype"] == "float32" and r["bytes"] == 4 * int(np.prod(r["shape"])) for r in plain)
    # The same facts from the serialized program.
    assert collect_saved_residuals(export_residuals(_stack(True), (WS, XB)).serialize()) == remat


def test_assert_saved_residuals_names_the_shapes_and_lists_all():
    assert_saved_residuals(_stack(True), _stack(True), (WS, XB), shapes=[(5, 4, 3)])
    with pytest.raises(CheckFailure) as info:
        assert_saved_residuals(_stack(False), _stack(True), (WS, XB), shapes=[(5, 4, 3)],
                               section="5.2")
    msg = str(info.value)
    assert msg.startswith("the backward pass of plain_loss saves the wrong residuals")
    assert "expected: 1 saved array(s) of shape [5,4,3]" in msg
    assert "all residuals saved:" in msg and "x float32[5,4,3]" in msg
    assert "print_saved_residuals(plain_loss, params, x)" in msg
    assert "reread: section 5.2" in msg


def test_explain_saved_residuals_ignores_untracked_shapes():
    a = {"shape": [2, 2], "dtype": "float32", "bytes": 16}
    b = {"shape": [7], "dtype": "float32", "bytes": 28}
    assert explain_saved_residuals(_roundtrip([a, b, b]), _roundtrip([a]), shapes=[(2, 2)],
                                   name="f") is None
    assert "0 saved array(s) of shape [2,2]" in explain_saved_residuals(
        [b], [a], shapes=[(2, 2)], name="f")


# ---------------------------------------------------------------- memory

def test_collect_memory_reads_the_compiled_program():
    facts = collect_memory(export_program(jax.grad(_stack(False)), (WS, XB)))
    assert facts["argument_bytes"] == WS.nbytes + XB.nbytes
    assert facts["output_bytes"] == WS.nbytes
    assert facts["temp_bytes"] > 0 and facts["platform"] == jax.default_backend()


def test_assert_memory_reduced_on_a_deep_stack():
    ws = jnp.ones((16, 32, 32)) / 32
    x = jnp.ones((64, 32))
    assert_memory_reduced(jax.grad(_stack(True)), jax.grad(_stack(False)), (ws, x), factor=1.5,
                          name="grad(remat)", baseline_name="grad(plain)")
    with pytest.raises(CheckFailure) as info:
        assert_memory_reduced(jax.grad(_stack(False)), jax.grad(_stack(False)), (ws, x),
                              factor=2, name="jax.grad(plain_loss)",
                              baseline_name="jax.grad(stack_loss)", section="5.2")
    msg = str(info.value)
    assert msg.startswith("the compiled jax.grad(plain_loss) needs too much temporary memory")
    assert "expected: at most 1/2 of jax.grad(stack_loss)'s" in msg
    assert "(1.00x less than without checkpointing)" in msg
    assert "fix: list what reverse mode keeps with jax.ad_checkpoint.print_saved_residuals" in msg
    assert "lax.scan(jax.checkpoint(block)" not in msg  # no exercise's answer in a default


def test_explain_memory_reduction_handles_missing_figures():
    msg = explain_memory_reduction(_roundtrip({"temp_bytes": None}), {"temp_bytes": 10}, factor=2,
                                   name="g", baseline_name="b")
    assert msg.startswith("the memory of the compiled g cannot be measured on this backend")
    assert explain_memory_reduction({"temp_bytes": 5}, {"temp_bytes": 10}, factor=2, name="g",
                                    baseline_name="b") is None


# ---------------------------------------------------------------- pytree nodes

@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _Layer:
    w: jax.Array
    activation: str = dataclasses.field(default="tanh", metadata=dict(static=True))


def test_assert_node_passes_through_grad():
    layer = _Layer(jnp.array([1.0, 2.0]), "relu")
    g = jax.grad(lambda l: jnp.sum(l.w ** 2))(layer)
    assert_node(g, "_Layer", {"w": jnp.array([2.0, 4.0]), "activation": "relu"})


def test_assert_node_reports_type_then_fields():
    with pytest.raises(CheckFailure) as info:
        assert_node({"w": 1.0}, "_Layer", {"w": 1.0}, name="jax.grad(loss)(layer)", section="6.1")
    msg = str(info.value)
    assert msg.startswith("jax.grad(loss)(layer) is not a _Layer")
    assert "got:      dict" in msg and "register_dataclass" in msg
    with pytest.raises(CheckFailure) as info:
        assert_node(_Layer(jnp.array([1.0, 2.5]), "tanh"), "_Layer",
                    {"w": jnp.array([1.0, 2.0]), "activation": "relu", "bias": 0.0}, name="layer")
    msg = str(info.value)
    assert msg.startswith("layer has wrong fields")
    assert ".w: 1 of 2 entries differ" in msg
    assert ".activation: expected 'relu', got 'tanh'" in msg
    assert ".bias: missing" in msg


def test_explain_node_on_json_data():
    observed = collect_node(_Layer(jnp.array([1.0]), "tanh"), ["w", "activation"])
    plain = {"type": observed["type"],
             "fields": {"w": observed["fields"]["w"].tolist(), "activation": "tanh"}}
    plain = _roundtrip(plain)
    assert plain["fields"]["w"] == [1.0]
    expected = {"type": "_Layer", "fields": {"w": np.array([1.0]), "activation": "tanh"}}
    # Arrays come back from JSON as lists: they are compared as arrays.
    assert explain_node(plain, expected, name="x") is None
    plain["fields"]["w"] = [1.5]
    assert ".w: 1 of 1 entries differ" in explain_node(plain, expected, name="x")
    plain["fields"]["w"] = "tanh"
    assert ".w: expected f64[1], got str" in explain_node(plain, expected, name="x")


# ---------------------------------------------------------------- judged by the grader
# Each check recorded in a reference run and a student run, its programs derived as the
# program judge derives them, and judged outside: the kernel's verdict and message.


def test_largest_array_is_a_fact_of_the_exported_program():
    text = export_program(hvp_dense, (X40, X40)).mlir_module()
    assert static_facts(text)["largest_array"]["elements"] == 1600


def _sizes(fn):
    assert_arrays_at_most(lambda x, v: fn(x, v), (X40, X40), 40 * 40 - 1,
                          what="as many as the 40 x 40 Hessian", name="hvp(x, v)", section="2.1")


def test_graded_array_sizes_agree_with_the_kernel():
    assert graded(_sizes, hvp_fwd_rev, hvp_fwd_rev).passed
    verdict = graded(_sizes, hvp_fwd_rev, hvp_dense)
    assert not verdict.passed
    assert verdict.message.startswith("the program of hvp(x, v) builds an array of 1600 entries")
    # A program of another function earns nothing, however small its arrays.
    verdict = graded(_sizes, hvp_fwd_rev, lambda x, v: 2 * v)
    assert "does not compute the reference's values" in verdict.message


def _residuals(fn):
    assert_saved_residuals(fn, _stack(True), (WS, XB), shapes=[(5, 4, 3)], name="loss",
                           section="5.2")


@pytest.mark.parametrize("check", ["memory", "residuals"])
def test_programs_are_judged_only_when_they_are_the_graded_functions(check):
    """The memory or the residuals of another function prove nothing (issue 36: these
    programs were never run): the right checkpointing of another loss is refused, by the
    kernel and the grader alike (the residuals may still come in another order)."""
    check = {"memory": _memory, "residuals": _residuals}[check]

    def other(ws, x):
        return 2.0 * _stack(True)(ws, x)

    with pytest.raises(CheckFailure) as info:
        check(other)
    assert "does not compute the reference's values" in str(info.value)
    verdict = graded(check, _stack(True), other)
    assert not verdict.passed and "does not compute the reference's values" in verdict.message


def test_graded_saved_residuals_agree_with_the_kernel():
    assert graded(_residuals, _stack(True), _stack(True)).passed
    verdict = graded(_residuals, _stack(True), _stack(False))
    assert verdict.message.startswith("the backward pass of loss saves the wrong residuals")
    assert "expected: 1 saved array(s) of shape [5,4,3]" in verdict.message


def _memory(fn):
    ws, x = jnp.ones((16, 32, 32)) / 32, jnp.ones((64, 32))
    assert_memory_reduced(jax.grad(fn), jax.grad(_stack(False)), (ws, x), factor=1.5,
                          name="jax.grad(loss)", baseline_name="jax.grad(plain_loss)")


def test_graded_memory_agrees_with_the_kernel():
    assert graded(_memory, _stack(True), _stack(True)).passed
    verdict = graded(_memory, _stack(True), _stack(False))
    assert verdict.message.startswith("the compiled jax.grad(loss) needs too much temporary memory")
    assert "(1.00x less than without checkpointing)" in verdict.message


def _node(make):
    assert_node(make(), "_Layer", {"w": jnp.array([2.0, 4.0]), "activation": "relu"},
                name="layer", section="6.1")


def test_graded_node_agrees_with_the_kernel():
    assert graded(_node, lambda: _Layer(jnp.array([2.0, 4.0]), "relu"),
                  lambda: _Layer(jnp.array([2.0, 4.0]), "relu")).passed
    verdict = graded(_node, lambda: _Layer(jnp.array([2.0, 4.0]), "relu"),
                     lambda: _Layer(jnp.array([2.0, 4.5]), "tanh"))
    assert verdict.message.startswith("layer has wrong fields")
    assert ".w: 1 of 2 entries differ" in verdict.message
    assert ".activation: expected 'relu', got 'tanh'" in verdict.message
    verdict = graded(_node, lambda: _Layer(jnp.array([2.0, 4.0]), "relu"),
                     lambda: {"w": jnp.array([2.0, 4.0])})
    assert verdict.message.startswith("layer is not a _Layer")
