"""Tests for autograder.pallas.checks and _pallas_program: kernel facts read from exported programs.

Every program here is a real export of a real kernel (interpret mode on CPU, and
Pallas's Triton lowering for an abstract H100), so a jax upgrade that changes what
a kernel lowers to fails these tests instead of misgrading students.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from autograder import (CheckFailure, assert_kernel_structure, collect_kernel_facts,
                        explain_kernel_structure, export_program)
from tests.judging import judge_programs, recorded


# --- kernels ---------------------------------------------------------------------------

def _rows(block_rows, n):
    return pl.BlockSpec((block_rows, n), lambda i: (i, 0))


def _elementwise(kernel, x, block, *rest):
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec] * (1 + len(rest)),
                          out_specs=spec, interpret=True)(x, *rest)


def _double_kernel(x_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...]


def double(x, block):
    return _elementwise(_double_kernel, x, block)


def _matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += x_ref[...] @ y_ref[...]


def matmul(x, y, bm, bn, bk):
    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(_matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), k // bk),
                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                                    pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
                          interpret=True)(x, y)


def _norm(two_pass):
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        mean = jnp.mean(x, axis=1, keepdims=True)
        if two_pass:
            var = jnp.mean((x - mean) ** 2, axis=1, keepdims=True)
        else:
            var = jnp.mean(x * x, axis=1, keepdims=True) - mean ** 2
        o_ref[...] = (x - mean) * jax.lax.rsqrt(var + 1e-5)

    def norm(x, block_rows):
        spec = _rows(block_rows, x.shape[1])
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(pl.cdiv(x.shape[0], block_rows),), in_specs=[spec],
                              out_specs=spec, interpret=True)(x)
    return norm


def _var_kernel(x_ref, o_ref):
    o_ref[...] = jnp.var(x_ref[...], axis=1, keepdims=True) + 0 * x_ref[...]


def var_rows(x, block_rows):
    spec = _rows(block_rows, x.shape[1])
    return pl.pallas_call(_var_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(pl.cdiv(x.shape[0], block_rows),), in_specs=[spec],
                          out_specs=spec, interpret=True)(x)


def _k_loop_kernel(x_ref, y_ref, o_ref):
    def step(k, acc):
        piece = pl.ds(k * 8, 8)
        return acc + x_ref[:, piece] @ y_ref[piece, :]
    o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // 8, step, jnp.zeros(o_ref.shape))


def matmul_k_loop(x, y):
    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(_k_loop_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
                          grid=(m // 8, n // 8),
                          in_specs=[pl.BlockSpec((8, k), lambda i, j: (i, 0)),
                                    pl.BlockSpec((k, 8), lambda i, j: (0, j))],
                          out_specs=pl.BlockSpec((8, 8), lambda i, j: (i, j)),
                          interpret=True)(x, y)


@jax.custom_vjp
def pallas_sin(x):
    return _elementwise(lambda x_ref, o_ref: o_ref.__setitem__(..., jnp.sin(x_ref[...])), x, 8)


def _sin_bwd_kernel(x_ref, g_ref, o_ref):
    o_ref[...] = g_ref[...] * jnp.cos(x_ref[...])


pallas_sin.defvjp(lambda x: (pallas_sin(x), x),
                  lambda x, g: (_elementwise(_sin_bwd_kernel, x, 8, g),))


def _facts(fn, *args, **kwargs):
    # Through JSON, as the trusted grader will see them.
    return json.loads(json.dumps(collect_kernel_facts(export_program(fn, args, kwargs))))


# --- collect_kernel_facts --------------------------------------------------------------

def test_elementwise_kernel_facts_and_partial_blocks():
    facts = _facts(double, jnp.ones(20), 8)
    (k,) = facts["kernels"]
    assert k["lowering"] == "interpret"
    assert k["steps"] == 3 and k["grid"] == [3] and k["blocks"] == [[8], [8]]
    assert k["inside"]["multiply"] >= 1 and k["reduce_depth"] == 0
    # The interpreter's own work outside: pad to whole blocks, NaN-filled output, unpad.
    assert set(facts["outside"]) <= {"broadcast_in_dim", "call", "pad", "slice"}
    assert "multiply" not in facts["outside"]


def test_export_program_can_read_a_compiled_kernel_in_interpret_mode():
    # A kernel compiled for a TPU (interpret=False) exports as one opaque custom call;
    # 10's lessons read its grid, blocks and operations, and on a TPU found none
    # ('inside' was None). interpret=True exports the same kernel as the grader reads
    # it. Here on a CPU the compiled kernel does not even lower.
    def compiled_double(x, block):
        spec = pl.BlockSpec((block,), lambda i: (i,))
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...]),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],
                              out_specs=spec, interpret=False)(x)

    with pytest.raises(Exception, match="interpret"):
        export_program(compiled_double, (jnp.ones(20), 8))
    (k,) = collect_kernel_facts(export_program(compiled_double, (jnp.ones(20), 8),
                                               interpret=True))["kernels"]
    assert k["lowering"] == "interpret" and k["steps"] == 3 and k["blocks"] == [[8], [8]]
    assert k["inside"]["multiply"] >= 1


def test_a_three_axis_grid_counts_its_product_and_its_blocks():
    x, y = jnp.ones((40, 32)), jnp.ones((32, 24))
    (k,) = _facts(matmul, x, y, 16, 8, 8)["kernels"]
    assert k["steps"] == 3 * 3 * 4 and k["grid"] == [3, 3, 4]
    assert k["blocks"] == [[16, 8], [8, 8], [16, 8]]
    assert k["inside"]["dot_general"] == 1 and k["inside"]["case"] == 1


def test_the_grid_axis_by_axis_even_with_a_when_in_the_body():
    # The kernel's own `program_id(2) == 0` is a comparison too; the grid's are after it.
    for shape_x, shape_y, blocks, grid in [((40, 32), (32, 24), (16, 8, 8), [3, 3, 4]),
                                           ((16, 8), (8, 64), (16, 16, 8), [1, 4, 1]),
                                           ((8, 16), (16, 8), (8, 8, 16), [1, 1, 1])]:
        (k,) = _facts(matmul, jnp.ones(shape_x), jnp.ones(shape_y), *blocks)["kernels"]
        assert k["grid"] == grid, (blocks, k["grid"])


def test_a_contraction_is_a_reduction_in_a_chain():
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        centered = x - jnp.mean(x, axis=1, keepdims=True)
        var = jnp.einsum("ij,ij->i", centered, centered)[:, None] / x.shape[1]
        o_ref[...] = centered * jax.lax.rsqrt(var + 1e-5)

    def norm(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(2,), in_specs=[_rows(8, 16)], out_specs=_rows(8, 16),
                              interpret=True)(x)
    assert _facts(norm, jnp.ones((16, 16)))["kernels"][0]["reduce_depth"] == 2


def test_no_kernel_and_ops_outside():
    facts = _facts(lambda x, y: jnp.sum(x @ y, axis=0), jnp.ones((4, 4)), jnp.ones((4, 4)))
    assert facts["kernels"] == []
    assert facts["outside"]["dot_general"] == 1 and facts["outside"]["reduce"] == 1


def test_reduce_depth_follows_the_data_flow():
    x = jnp.ones((10, 16))
    assert _facts(_norm(two_pass=False), x, 8)["kernels"][0]["reduce_depth"] == 1
    assert _facts(_norm(two_pass=True), x, 8)["kernels"][0]["reduce_depth"] == 2
    # jnp.var is a jitted function: its two passes sit in a called function.
    assert _facts(var_rows, x, 8)["kernels"][0]["reduce_depth"] == 2


def test_a_loop_inside_a_kernel_belongs_to_the_kernel():
    (k,) = _facts(matmul_k_loop, jnp.ones((16, 32)), jnp.ones((32, 16)))["kernels"]
    assert k["steps"] == 4 and k["blocks"] == [[8, 32], [32, 8], [8, 8]]
    assert k["inside"]["while"] == 1 and k["inside"]["dot_general"] == 1


def test_custom_vjp_forward_and_backward_kernels():
    x = jnp.linspace(-2.0, 2.0, 20)
    assert len(_facts(pallas_sin, x)["kernels"]) == 1
    facts = _facts(jax.value_and_grad(lambda v: jnp.sum(pallas_sin(v))), x)
    assert len(facts["kernels"]) == 2
    assert "sine" not in facts["outside"] and "cosine" not in facts["outside"]


def test_facts_from_serialized_bytes_and_text():
    exported = export_program(double, (jnp.ones(20), 8))
    from_bytes = collect_kernel_facts(exported.serialize())
    assert from_bytes == collect_kernel_facts(exported.mlir_module())
    assert from_bytes["kernels"][0]["steps"] == 3


def test_a_triton_kernel_lowered_for_an_abstract_h100():
    # Pallas's Triton lowering runs on a CPU-only machine for an abstract GPU device.
    h100 = jax.sharding.AbstractDevice(device_kind="NVIDIA H100", num_cores=None,
                                       platform="gpu")
    mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=h100)

    def compiled(x):
        spec = pl.BlockSpec((4, 8), lambda i, j: (i, j))
        return pl.pallas_call(_double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(3, 3), in_specs=[spec], out_specs=spec)(x) + 1.0

    triton = jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
    x = jnp.ones((12, 20))  # made outside: no array can be built under an abstract mesh
    # jax 0.12 lowers a pallas_call for a GPU through Triton by default, and says so.
    with pytest.warns(DeprecationWarning, match="Triton backend is deprecated"), \
            jax.sharding.use_abstract_mesh(mesh):
        exported = jax.export.export(jax.jit(compiled), platforms=("cuda",),
                                     disabled_checks=[triton])(x)
    facts = collect_kernel_facts(exported)
    assert facts["kernels"] == [{"lowering": "triton", "steps": 9, "grid": None,
                                 "blocks": None, "inside": None, "reduce_depth": None}]
    assert facts["outside"]["add"] == 1
    # What a compiled kernel does not show is not judged; what it shows is.
    assert explain_kernel_structure(facts, {"kernels": 1, "steps": 9, "blocks": [(4, 8)] * 2,
                                            "inside": ["multiply"], "max_reduce_depth": 0}) is None
    assert "has 9 steps, expected 6" in explain_kernel_structure(facts, {"steps": 6})


def test_sharding_constraints_do_not_hide_the_grid():
    # With a mesh in context every value passes through sdy.sharding_constraint ops.
    h100 = jax.sharding.AbstractDevice(device_kind="NVIDIA H100", num_cores=None,
                                       platform="gpu")
    mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=h100)
    x, y = jnp.ones((32, 64)), jnp.ones((64, 16))
    with jax.sharding.use_abstract_mesh(mesh):
        exported = jax.export.export(jax.jit(lambda a, b: matmul(a, b, 16, 16, 16)),
                                     platforms=("cuda",))(x, y)
    assert "sdy.sharding_constraint" in exported.mlir_module()
    (k,) = collect_kernel_facts(exported)["kernels"]
    assert k["lowering"] == "interpret" and k["steps"] == 8
    assert k["blocks"] == [[16, 16], [16, 16], [16, 16]]


# --- explain_kernel_structure: one rule at a time ---------------------------------------

_FACTS = {"kernels": [{"lowering": "interpret", "steps": 6, "blocks": [[8, 4], [4], [8, 4]],
                       "inside": {"reduce": 2, "add": 3, "dynamic_slice": 2},
                       "reduce_depth": 2}],
          "outside": {"broadcast_in_dim": 1, "exponential": 1}}


def test_explain_passes_when_every_rule_holds():
    only_layout = dict(_FACTS, outside={"broadcast_in_dim": 1, "reshape": 2})
    assert explain_kernel_structure(only_layout, {"kernels": 1, "steps": 6,
                                             "blocks": [(8, 4), (1, 4), (8, 4)],
                                             "inside": ["reduce"], "not_outside": ["reduce"],
                                             "max_reduce_depth": 2}) is None


def test_explain_no_kernel():
    msg = explain_kernel_structure({"kernels": [], "outside": {"multiply": 2}}, {"kernels": 1},
                                   name="f(x)", section="1.1 Kernels")
    assert msg.startswith("f(x) runs no Pallas kernel\n")
    assert "got:      no grid loop and no kernel call in the exported program; ops outside: " \
           "multiply" in msg
    assert "write the computation in a kernel body and call it with pl.pallas_call" in msg
    assert msg.endswith("reread: section 1.1 Kernels")


def test_explain_kernel_count():
    msg = explain_kernel_structure(_FACTS, {"kernels": 2}, name="f(x)")
    assert msg.startswith("f(x) runs 1 Pallas kernel, expected 2")


def test_explain_work_outside_comes_before_the_grid():
    msg = explain_kernel_structure(_FACTS, {"steps": 5, "not_outside": ["exponential"]},
                                   name="f(x)")
    assert msg.startswith("f(x) computes `exponential` outside the kernel")
    assert "got:      1 `exponential` op(s) outside it" in msg


def test_explain_grid_order():
    facts = {"kernels": [dict(_FACTS["kernels"][0], grid=[2, 3])], "outside": {}}
    assert explain_kernel_structure(facts, {"grid": (2, 3)}) is None
    msg = explain_kernel_structure(facts, {"grid": (3, 2)}, name="f(x)")
    assert msg.startswith("the grid of f(x) is (2, 3), expected (3, 2)")
    assert "an axis that is reduced across steps must come last" in msg


def test_explain_steps():
    msg = explain_kernel_structure(_FACTS, {"steps": 8}, name="f(x)")
    assert msg.startswith("the grid of f(x) has 6 steps, expected 8")
    assert "a floor division drops the last partial block" in msg
    assert "pl.cdiv(size, block)" in msg


def test_explain_operand_count_and_block_shape():
    msg = explain_kernel_structure(_FACTS, {"blocks": [(8, 4), (8, 4)]}, name="f(x)")
    assert msg.startswith("the kernel of f(x) has 3 operands, expected 2 (inputs, then outputs)")
    assert "expected: (8, 4), (8, 4)" in msg and "got:      (8, 4), (4,), (8, 4)" in msg
    msg = explain_kernel_structure(_FACTS, {"blocks": [(8, 4), (8,), (8, 4)]}, name="f(x)")
    assert msg.startswith("f(x) uses the wrong block shape for operand 1")
    assert "ignores the block size it was given" in msg


def test_explain_inside_names_the_missing_op_and_why():
    msg = explain_kernel_structure(_FACTS, {"inside": ["case"]}, name="f(x)")
    assert msg.startswith("f(x) does not compute `case` inside its kernel")
    assert "got:      none; the kernel computes reduce" in msg   # bookkeeping not listed
    assert "@pl.when(pl.program_id(axis) == 0)" in msg


def test_inside_accepts_one_of_several_ops():
    # The kernel of _FACTS computes a reduce: "reduce|dot_general" is met, a sum written
    # as a product with a ones column would be too; neither of two absent ops is not.
    assert explain_kernel_structure(_FACTS, {"inside": ["reduce|dot_general"]},
                                    name="f(x)") is None
    msg = explain_kernel_structure(_FACTS, {"inside": ["dot_general|case"]}, name="f(x)")
    assert msg.startswith("f(x) does not compute `dot_general` or `case` inside its kernel")


def test_explain_reduce_depth_and_overrides():
    msg = explain_kernel_structure(_FACTS, {"max_reduce_depth": 1}, name="f(x)",
                                   hint="my cause", fix="my fix")
    assert msg.startswith("f(x) makes 2 passes over each block")
    assert "likely cause: my cause" in msg and "fix: my fix" in msg


# --- assert_kernel_structure ------------------------------------------------------------

def test_assert_passes_and_returns_nothing():
    assert assert_kernel_structure(double, (jnp.ones(20), 8), steps=3,
                                   blocks=[(8,), (8,)], not_outside=["multiply"]) is None


def test_assert_raises_a_structure_failure_named_after_the_call():
    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(lambda x, block: 2 * x, (jnp.ones(20), 8), name="double",
                                section="1.3 BlockSpec")
    assert str(err.value).startswith("double runs no Pallas kernel")
    assert "likely cause: the result is computed with jnp, not by a kernel" in str(err.value)
    assert str(err.value).endswith("reread: section 1.3 BlockSpec")


def test_assert_not_inside_names_the_kernel_that_computes_the_op():
    """A backward kernel must read a residual, not compute it again (10_pallas ex. 8)."""
    x = jnp.linspace(-2.0, 2.0, 20)
    grad = jax.grad(lambda v: jnp.sum(pallas_sin(v)))          # one kernel, cos inside
    assert assert_kernel_structure(grad, (x,), kernels=1, not_inside=["sine"]) is None
    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(grad, (x,), kernels=1, not_inside=["sine", "cosine"],
                                name="the backward pass", section="6.2 custom_vjp",
                                fix="read it from its Ref")
    text = str(err.value)
    assert text.startswith("the backward pass computes `cosine` inside its kernel")
    assert "expected: no `cosine` in any kernel of this program" in text
    assert "got:      `cosine`: 1 in kernel 1 of 1" in text
    assert "likely cause: the kernel computes a value it could read from an input" in text
    assert "fix: read it from its Ref" in text and text.endswith("reread: section 6.2 custom_vjp")


def test_assert_turns_an_error_into_feedback():
    def broken(x, block):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="broken is not implemented yet"):
        assert_kernel_structure(broken, (jnp.ones(4), 2))

    def fails(x, block):
        return x.reshape(3)

    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(fails, (jnp.ones(4), 2))
    assert str(err.value).startswith("exporting fails(x=f32[4], block=int 2) raised TypeError")


def test_assert_takes_block_sizes_as_keywords_too():
    # Non-array arguments, positional or keyword, are constants of the program.
    assert assert_kernel_structure(double, (jnp.ones(20),), kwargs={"block": 8}, steps=3,
                                   blocks=[(8,), (8,)]) is None
    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(double, (jnp.ones(20),), kwargs={"block": 8}, steps=2)
    assert str(err.value).startswith("the grid of double(x=f32[20], block=int 8) has 3 "
                                     "steps, expected 2")


def test_assert_names_a_function_that_is_not_one():
    with pytest.raises(CheckFailure, match="is not a function"):
        assert_kernel_structure(None, (jnp.ones(4), 2), name="silu(x, block)")


# --- a loop written by hand is not a kernel ---------------------------------------------

def by_hand(x, block):
    """Blocks cut out and written back by lax.fori_loop: the interpreter's loop without
    its grid indices."""
    def step(i, out):
        piece = jax.lax.dynamic_slice(x, (i * block,), (block,))
        return jax.lax.dynamic_update_slice(out, 2.0 * piece, (i * block,))
    return jax.lax.fori_loop(0, x.shape[0] // block, step, jnp.zeros_like(x))


def test_a_loop_written_by_hand_is_not_a_kernel():
    facts = _facts(by_hand, jnp.ones(24), 8)
    assert facts["kernels"] == []
    assert facts["outside"]["while"] == 1 and facts["outside"]["multiply"] >= 1
    msg = explain_kernel_structure(facts, {"kernels": 1}, name="double(x, block)")
    assert msg.startswith("double(x, block) runs no Pallas kernel")
    assert "a `while` loop that advances no grid indices" in msg
    assert "walked by a loop written by hand (lax.fori_loop with dynamic slices)" in msg


# --- judged as the grader judges: exported programs, derived outside ----------------

def _triple_kernel(x_ref, o_ref):
    o_ref[...] = 3.0 * x_ref[...]


def triple(x, block):   # the same kernel structure as double, other values
    return _elementwise(_triple_kernel, x, block)


def split_in_two(x, block):   # right values, but two kernels
    return _elementwise(_double_kernel, _elementwise(lambda a, o: o.__setitem__(..., a[...]),
                                                     x, block), block)


def test_kernel_structure_is_judged_from_the_exported_program():
    from autograder.core.check import REFERENCE, STUDENT

    x = jnp.linspace(-1.0, 1.0, 20)
    rules = dict(kernels=1, steps=3, blocks=[(8,), (8,)], not_outside=["multiply"],
                 name="double(x, 8)", section="1.3 BlockSpec")
    with recorded(REFERENCE) as ref:
        assert_kernel_structure(double, (x, 8), **rules)
    rec, bounds = ref
    assert rec.kind == "kernel_structure" and rec.observed.kind == "artifact"
    assert bounds.kind == "blocks_in_bounds" and bounds.observed.facts["out_of_range"] == []
    assert rec.expected is not None and rec.expected.kind == "artifact"
    assert rec.params["pallas_facts"] is True and rec.params["rules"]["steps"] == 3
    json.dumps(rec.params)  # plain JSON: the grader trusts the reference's params only
    verdicts = {}
    for fn in (double, triple, by_hand, split_in_two, lambda x, block: 2.0 * x):
        with recorded(STUDENT) as student:
            assert assert_kernel_structure(fn, (x, 8), **rules) is None  # nothing raised
        assert student[0].expected is None  # no expected side next to student code
        verdicts[getattr(fn, "__name__")] = judge_programs(ref, student)
    assert verdicts["double"].passed
    # The kernel is right, the program is not the function that was asked for.
    assert "the program exported from double(x, 8) does not compute the reference's " \
           "values on the grader's inputs" in verdicts["triple"].message
    assert "a `while` loop that advances no grid indices" in verdicts["by_hand"].message
    assert "double(x, 8) runs 2 Pallas kernels, expected 1" in verdicts["split_in_two"].message
    assert "double(x, 8) runs no Pallas kernel" in verdicts["<lambda>"].message
    assert verdicts["<lambda>"].message.endswith("reread: section 1.3 BlockSpec")


def test_a_student_error_is_judged_like_in_the_kernel():
    from autograder.core.check import REFERENCE, STUDENT

    def broken(x, block):
        raise NotImplementedError()

    x = jnp.ones(16)
    with recorded(REFERENCE) as ref:
        assert_kernel_structure(double, (x, 8), steps=2, name="double(x, 8)")
    with recorded(STUDENT) as student:
        assert_kernel_structure(broken, (x, 8), steps=2, name="double(x, 8)")
    assert student[0].observed.kind == "error"
    assert "double is not implemented yet" in judge_programs(ref, student).message


def test_explain_a_compiled_kernel_that_cannot_be_exported():
    from autograder.core import wire as _wire
    from autograder.pallas.checks import explain_kernel_check

    error = ValueError("Cannot serialize code with custom calls whose targets have no "
                       "compatibility guarantees: __gpu$xla.gpu.triton")
    msg = explain_kernel_check(_wire.observe_error(error), None, label="silu(x, 8)",
                               rules={}, section="7.3 Block shapes")
    assert msg.startswith("exporting silu(x, 8) gave a compiled kernel, which the grader "
                          "cannot read")
    assert "expected: a kernel run in interpret mode (interpret=True), as on a CPU" in msg
    assert "fix: run the test on a CPU, or with INTERPRET = True" in msg
    judge = _wire.Observation("error", error_type="ProgramJudge",
                              error="the grader could not judge this program (timeout)")
    msg = explain_kernel_check(judge, None, label="silu(x, 8)", rules={})
    assert msg.startswith("the grader could not judge the program of silu(x, 8)")
    assert "exporting" not in msg and "(timeout)" in msg
    # Not implemented, or not a function: the generic message (None here).
    assert explain_kernel_check(_wire.observe_error(NotImplementedError()), None,
                                label="silu(x, 8)", rules={}) is None


def _rows_doubled(x, bm, column_block):
    spec = pl.BlockSpec((bm, x.shape[1]), lambda i: (i, column_block))
    return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...]),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(pl.cdiv(x.shape[0], bm),), in_specs=[spec],
                          out_specs=pl.BlockSpec((bm, x.shape[1]), lambda i: (i, 0)),
                          interpret=True)(x)


def test_an_index_map_one_block_past_the_end_is_caught_though_the_values_match():
    from autograder.core.check import REFERENCE, STUDENT

    x = jnp.arange(32.0).reshape(8, 4)
    right = lambda x, bm: _rows_doubled(x, bm, 0)  # noqa: E731
    past = lambda x, bm: _rows_doubled(x, bm, 1)  # noqa: E731
    # Interpret mode on a CPU clamps the block index: the values cannot tell them apart.
    assert jnp.array_equal(right(x, 4), past(x, 4))
    with recorded(REFERENCE) as ref:
        assert_kernel_structure(right, (x, 4), steps=2, name="rows(x, 4)", section="4.1")
    with recorded(STUDENT) as student:
        assert_kernel_structure(past, (x, 4), steps=2, name="rows(x, 4)", section="4.1")
    verdict = judge_programs(ref, student)
    assert not verdict.passed
    assert "an index map of rows(x, 4) returns a block outside its array" in verdict.message
    assert "block indices 0 .. 0 along axis 1 of input 1 (4 elements in blocks of 4)" \
        in verdict.message
    assert "block index 1 at grid step (0,); 2 such indices in all" in verdict.message
    with recorded(STUDENT) as student:
        assert_kernel_structure(right, (x, 4), steps=2, name="rows(x, 4)", section="4.1")
    assert judge_programs(ref, student).passed



# --- the same maths under other op names, outside the kernel (issue 36) ---------------

def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _by_rows(kernel, x, block_rows):
    spec = _rows(block_rows, x.shape[1])
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(pl.cdiv(x.shape[0], block_rows),), in_specs=[spec],
                          out_specs=spec, interpret=True)(x)


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)


def softmax_rows(x, block_rows):
    return _by_rows(_softmax_kernel, x, block_rows)


def softmax_renamed_outside(x, block_rows):
    """A copy kernel, then softmax in jnp with no reduce, exponential or divide: the max
    by reduce_window, exp as a power of 2, the sum as a dot with ones, 1/s as rsqrt^2."""
    x = _by_rows(_copy_kernel, x, block_rows)
    m = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, x.shape[1]), (1, 1), "VALID")
    e = jnp.power(2.0, (x - m) * 1.4426950408889634)
    s = e @ jnp.ones((x.shape[1], 1))
    return e * jax.lax.rsqrt(s) ** 2


def test_the_same_maths_under_other_op_names_outside_the_kernel_fails():
    x = jax.random.normal(jax.random.key(0), (16, 32))
    rules = dict(kernels=1, steps=2, inside=["reduce"],
                 not_outside=["reduce", "exponential", "divide"])
    assert_kernel_structure(softmax_rows, (x, 8), **rules)
    assert jnp.allclose(softmax_renamed_outside(x, 8), softmax_rows(x, 8), atol=1e-5)
    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(softmax_renamed_outside, (x, 8), **rules)
    message = str(err.value)
    assert "outside the kernel" in message and "only data movement outside" in message
    # Named ops keep their own message; without not_outside nothing outside is judged.
    assert_kernel_structure(softmax_renamed_outside, (x, 8), kernels=1, steps=2)


def test_a_compiled_kernel_is_judged_in_interpret_mode_where_jax_runs_on_an_accelerator(
        monkeypatch):
    # On a TPU, `interpret=INTERPRET` is False and a kernel compiles to one opaque
    # tpu_custom_call, which the structure rules cannot read (all 8 exercises of module
    # 10 failed there). The check switches the traced kernels to interpret mode and
    # judges them on the CPU. Faked by the backend's name: on this CPU a kernel with
    # interpret=False cannot even be exported, so only the switch can make it pass.
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sin(x_ref[...]) * 2.0

    def compiled(x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec,
                              interpret=False)(x)

    x = jnp.ones((24, 128))
    with pytest.raises(CheckFailure):  # the CPU: the compiled kernel is not judged
        assert_kernel_structure(compiled, (x,), steps=3)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert_kernel_structure(jax.jit(compiled), (x,), steps=3, grid=[3],
                            blocks=[(8, 128), (8, 128)], inside=["sine"])
    with pytest.raises(CheckFailure, match="grid"):
        assert_kernel_structure(compiled, (x,), grid=[6])


# --- input_output_aliases: an output written into an input's buffer (10_pallas ex. 7) --

def _add_into_kernel(x_ref, r_ref, o_ref):
    o_ref[...] = x_ref[...] + r_ref[...]


def add_into(x, r, block_rows, aliases=None):
    """x + r in blocks of whole rows; ``aliases={1: 0}`` writes it over r's buffer."""
    spec = _rows(block_rows, x.shape[1])
    return pl.pallas_call(_add_into_kernel, out_shape=jax.ShapeDtypeStruct(r.shape, r.dtype),
                          grid=(pl.cdiv(x.shape[0], block_rows),), in_specs=[spec, spec],
                          out_specs=spec, input_output_aliases=aliases or {},
                          interpret=True)(x, r)


def _add_norm_kernel(x_ref, r_ref, y_ref, h_ref):
    h = x_ref[...] + r_ref[...]
    h_ref[...] = h
    y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + 1e-6)


def add_norm(x, r, block_rows, aliases=None, swap=False):
    """(norm(h), h) for h = x + r: two outputs, h aliased as ``aliases`` says; with
    ``swap`` the kernel receives (r, x)."""
    spec = _rows(block_rows, x.shape[1])
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(_add_norm_kernel, out_shape=(out, out),
                          grid=(pl.cdiv(x.shape[0], block_rows),), in_specs=[spec, spec],
                          out_specs=(spec, spec), input_output_aliases=aliases or {},
                          interpret=True)(*((r, x) if swap else (x, r)))


def test_aliases_are_read_from_the_grid_loop():
    # The interpreter starts an aliased output from the input's value and carries each
    # written block back into both: the loop returns one value for the two.
    x, r = jnp.ones((20, 128)), jnp.full((20, 128), 2.0)   # the last block sticks out
    for aliases, want in (({1: 0}, [[1, 0, 1]]), ({0: 0}, [[0, 0, 0]]), (None, [])):
        (k,) = _facts(lambda x, r: add_into(x, r, 8, aliases), x, r)["kernels"]
        assert k["aliases"] == want, aliases
        # The aliased input is no longer written back on its own; its block still counts.
        assert k["blocks"] == [[8, 128]] * 3 and k["steps"] == 3
    # Outputs are counted from 0 after the inputs; the argument an input holds is
    # followed through the padding and through a jit of its own.
    for aliases in ({1: 1}, {0: 1}, {1: 0}, {0: 0, 1: 1}):
        def step(x, r):
            return add_norm(x, r, 8, aliases)

        (k,) = _facts(jax.jit(step), x, r)["kernels"]
        assert k["aliases"] == sorted([i, o, i] for i, o in aliases.items()), aliases
        assert k["blocks"] == [[8, 128]] * 4
        assert k["arguments"] == [0, 1]
    (k,) = _facts(lambda x, r: add_norm(x, r, 8, {1: 1}, swap=True), x, r)["kernels"]
    assert k["aliases"] == [[1, 1, 0]]                  # kernel input 1 holds x
    assert k["arguments"] == [1, 0]
    (k,) = _facts(lambda x, r: add_into(x, 2.0 * r, 8, {1: 0}), x, r)["kernels"]
    assert k["aliases"] == [[1, 0, None]]               # a value computed before the kernel
    assert k["arguments"] == [0, None]
    (k,) = _facts(lambda x, r: add_into(x[None, 0], r.reshape(20, 128), 8), x, r)["kernels"]
    assert k["arguments"] == [None, 1]                  # a reshape keeps the argument
    # A kernel that writes through the aliased input's Ref: the same buffer.
    def through_input(x_ref, r_ref, o_ref):
        r_ref[...] = x_ref[...] + r_ref[...]

    spec = _rows(8, 128)
    written = lambda x, r: pl.pallas_call(  # noqa: E731
        through_input, out_shape=jax.ShapeDtypeStruct(r.shape, r.dtype), grid=(3,),
        in_specs=[spec, spec], out_specs=spec, input_output_aliases={1: 0},
        interpret=True)(x, r)
    assert jnp.all(written(x, r) == 3.0)
    (k,) = _facts(written, x, r)["kernels"]
    assert k["aliases"] == [[1, 0, 1]] and k["written_through_input"] == [0]
    (k,) = _facts(lambda x, r: add_into(x, r, 8, {1: 0}), x, r)["kernels"]
    assert k["written_through_input"] == []


def test_an_output_written_through_the_aliased_input_fails():
    """Right values in interpret mode, wrong on a TPU: measured on a TPU v5e (jax 0.10.2),
    h written into the aliased input's Ref came back wrong (max error 6.6) without
    donation."""
    def through_input(x_ref, r_ref, o_ref):
        r_ref[...] = x_ref[...] + r_ref[...]

    def written(x, r):
        spec = _rows(8, 128)
        return pl.pallas_call(through_input, out_shape=jax.ShapeDtypeStruct(r.shape, r.dtype),
                              grid=(2,), in_specs=[spec, spec], out_specs=spec,
                              input_output_aliases={1: 0}, interpret=True)(x, r)

    x, r = jnp.ones((16, 128)), jnp.full((16, 128), 2.0)
    rules = dict(kernels=1, steps=2, aliases={"r": 0}, section="5.3")
    assert_kernel_structure(lambda x, r: add_into(x, r, 8, {1: 0}), (x, r), **rules)
    with pytest.raises(CheckFailure) as err:
        assert_kernel_structure(written, (x, r), name="written(x, r)", **rules)
    text = str(err.value)
    assert text.startswith("output 0 of the kernel of written(x, r) is written through the Ref "
                           "of the input that holds `r` (argument 1), not through its own Ref")
    assert "only the output's blocks are copied back" in text


def test_aliases_are_read_from_an_older_interpreter_too():
    # jax 0.10.2's interpreter (the TPU machine's, 2026-12-06) writes the input and the
    # output of an aliased pair back separately; the output starts from the input's value.
    # The programs: exercise 7's solution (input_output_aliases={1: 1}), exported there with
    # export_program(..., interpret=True) at (16, 32) and (40, 16); read as 0.12's, neither
    # showed the alias.
    # With rows that do not fill the last block, the input and the output start from two
    # paddings of the same argument.
    data = Path(__file__).parent / "data"
    for name, block, steps in (("add_rms_norm_alias_jax0102.mlir", [8, 32], 2),
                               ("add_rms_norm_alias_padded_jax0102.mlir", [16, 16], 3)):
        (k,) = collect_kernel_facts((data / name).read_text())["kernels"]
        assert k["aliases"] == [[1, 1, 1]] and k["arguments"] == [0, 1, 2], name
        assert k["blocks"] == [block, block, block[1:], block, block] and k["steps"] == steps


def test_assert_aliases_teaches_what_to_alias():
    x, r = jnp.ones((16, 128)), jnp.full((16, 128), 2.0)
    rules = dict(kernels=1, steps=2, blocks=[(8, 128)] * 4, aliases={"r": 1},
                 section="5.3 An output written in place")
    assert assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {1: 1}},
                                   **rules) is None
    # The argument by its position among the arrays; other aliases are not judged.
    assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {0: 0, 1: 1}},
                            **{**rules, "aliases": {1: 1}})
    with pytest.raises(CheckFailure) as err:     # no alias: h gets a buffer of its own
        assert_kernel_structure(add_norm, (x, r, 8), name="add_norm(x, r, 8)", **rules)
    text = str(err.value)
    assert text.startswith("output 1 of the kernel of add_norm(x, r, 8) is a new buffer, "
                           "not the buffer of `r` (argument 1)")
    assert "expected: output 1 written into the buffer of `r` (argument 1)" in text
    assert "got:      aliases: none" in text
    assert "fix: alias output 1 to the kernel input that receives `r` (argument 1): " \
           "input_output_aliases={that input: 1}" in text
    assert text.endswith("reread: section 5.3 An output written in place")
    with pytest.raises(CheckFailure) as err:     # h written over x instead of r
        assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {0: 1}},
                                name="add_norm(x, r, 8)", **rules)
    text = str(err.value)
    assert text.startswith("output 1 of the kernel of add_norm(x, r, 8) is written into the "
                           "buffer of `x` (argument 0), expected `r` (argument 1)")
    assert "got:      aliases: output 1 into kernel input 0, which holds `x` (argument 0)" \
        in text
    with pytest.raises(CheckFailure) as err:     # the right index, the inputs swapped
        assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {1: 1}, "swap": True},
                                name="add_norm(x, r, 8)", **rules)
    assert "is written into the buffer of `x` (argument 0), expected `r`" in str(err.value)
    with pytest.raises(CheckFailure) as err:     # the inputs in another order, judged
        assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {0: 1}, "swap": True},
                                arguments=["x", "r"], name="add_norm(x, r, 8)", **rules)
    text = str(err.value)
    assert text.startswith("the kernel of add_norm(x, r, 8) receives its inputs in another "
                           "order")
    assert "expected: inputs `x` (argument 0), `r` (argument 1)" in text
    assert "got:      inputs `r` (argument 1), `x` (argument 0)" in text
    assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {0: 1}, "swap": True},
                            **rules)                 # the alias alone: r's buffer holds h
    with pytest.raises(CheckFailure) as err:     # r's buffer given to the other output
        assert_kernel_structure(add_norm, (x, r, 8), kwargs={"aliases": {1: 0}},
                                name="add_norm(x, r, 8)", **rules)
    assert str(err.value).startswith("the buffer of `r` (argument 1) holds output 0 of the "
                                      "kernel of add_norm(x, r, 8), expected output 1")


def test_aliases_are_judged_from_the_exported_program():
    from autograder.core.check import REFERENCE, STUDENT

    x, r = jnp.ones((16, 128)), jnp.full((16, 128), 2.0)

    def in_place(x, r, block_rows):
        return add_into(x, r, block_rows, {1: 0})

    def kept(x, r, block_rows):
        return add_into(x, r, block_rows)

    with recorded(REFERENCE) as ref:
        assert_kernel_structure(in_place, (x, r, 8), aliases={"r": 0})
    assert ref[0].params["rules"]["aliases"] == [[1, 0]]
    assert ref[0].params["rules"]["argument_names"] == ["x", "r"]
    json.dumps(ref[0].params)
    with recorded(STUDENT) as student:
        assert_kernel_structure(in_place, (x, r, 8), aliases={"r": 0})
    assert judge_programs(ref, student).passed
    with recorded(STUDENT) as student:
        assert_kernel_structure(kept, (x, r, 8), aliases={"r": 0})
    verdict = judge_programs(ref, student)
    assert not verdict.passed
    # The reference's rules judge, with the reference's names.
    assert "output 0 of the kernel of in_place(x=f32[16,128], r=f32[16,128], block_rows=int 8) " \
           "is a new buffer, not the buffer of `r` (argument 1)" in verdict.message


def test_a_compiled_kernel_shows_no_aliases_and_they_are_not_judged():
    facts = {"kernels": [{"lowering": "mosaic_tpu", "steps": 2, "grid": None, "blocks": None,
                          "inside": None, "reduce_depth": None}], "outside": {}}
    assert explain_kernel_structure(facts, {"aliases": [[1, 0]]}) is None


def test_a_kernel_called_from_a_lambda_jitted_inside_the_function_is_found():
    """``jax.jit(lambda ...)`` around a pallas_call exports ``@"<lambda>"``, whose kernel
    the reader used to miss: a correct answer written that way failed "one kernel"."""
    def double_in_lambda(x):
        return jax.jit(lambda v: _rows_doubled(v, 8, 0))(x)

    x = jnp.ones((16, 128))
    (k,) = _facts(double_in_lambda, x)["kernels"]
    assert k["steps"] == 2 and k["blocks"] == [[8, 128], [8, 128]]
    assert_kernel_structure(double_in_lambda, (x,), kernels=1, steps=2)
