"""Tests for autograder.pallas.tpu: the blocks a TPU accepts, judged on a CPU.

Every case is a real kernel, run in interpret mode here (which accepts any block), then
judged twice: by the checker, and by Pallas's own TPU lowering (Mosaic), which runs on
this CPU when the function is exported for an abstract TPU v5e. The two must agree, so
the rule the checker encodes is the rule of the jax the course pins, both ways: what
the lowering accepts passes, what it refuses is named.

The last test runs module 10's source notebook (lessons, solutions, visible and hidden
tests) in a subprocess, records every pallas_call that is lowered there, and asserts
that a TPU accepts every block and that every kernel lowers for a TPU.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder import CheckFailure, assert_tpu_blocks, tpu_block_problems
from autograder.pallas.tpu import judge_tpu_blocks
from tests.conftest import REPO
from tests.judging import judge_programs, recorded

NOTEBOOK = REPO / "source" / "10_pallas" / "10_pallas.ipynb"


# --- kernels ---------------------------------------------------------------------------

def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def blocked(x, block, index_map=None, *, interpret=True):
    """One kernel over x in `block` blocks (None: a squeezed dimension), one grid axis
    per dimension unless `index_map` says otherwise."""
    steps = tuple(pl.cdiv(d, 1 if b is None else b) for d, b in zip(x.shape, block))
    index_map = index_map or (lambda *ij: ij)
    spec = pl.BlockSpec(block, index_map)
    return pl.pallas_call(_double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=steps, in_specs=[spec], out_specs=spec,
                          interpret=interpret)(x)


def _table_kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * (s_ref[0] if s_ref.shape else s_ref[...])


def with_table(x, s, s_spec, *, interpret=True):
    """Rows of x scaled by s[0], s given its own spec (SMEM, say)."""
    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_table_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(pl.cdiv(x.shape[0], 8),), in_specs=[s_spec, spec],
                          out_specs=spec, interpret=interpret)(s, x)


# --- the lowering's own verdict ----------------------------------------------------------

def _tpu_mesh():
    v5e = jax.sharding.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    return jax.sharding.AbstractMesh((1,), ("x",), abstract_device=v5e)


def lowering_refuses(fn, *args) -> str | None:
    """What Pallas's TPU lowering says of fn(*args, interpret=False): None when it
    lowers, else the first line of the error (a TPU's rank-1 rule reads the chip's
    sizes: the abstract v5e gives them)."""
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a
             for a in args]
    arrays = [i for i, a in enumerate(args) if hasattr(a, "shape")]

    def program(*xs):
        full = list(args)
        for i, v in zip(arrays, xs):
            full[i] = v
        return fn(*full, interpret=False)

    try:
        with jax.sharding.use_abstract_mesh(_tpu_mesh()):
            jax.export.export(jax.jit(program), platforms=("tpu",))(*[avals[i] for i in arrays])
    except ValueError as err:
        return str(err).splitlines()[0]
    return None


def verdicts(fn, *args):
    """(the checker's problems, the lowering's refusal), after running fn in interpret
    mode, which accepts the block whatever it is."""
    out = fn(*args)
    assert all(jnp.all(jnp.isfinite(o)) for o in jax.tree.leaves(out))
    return tpu_block_problems(fn, args), lowering_refuses(fn, *args)


def assert_accepted(fn, *args):
    problems, refused = verdicts(fn, *args)
    assert problems == [] and refused is None, (problems, refused)


def assert_refused(fn, *args, says: str):
    problems, refused = verdicts(fn, *args)
    assert refused is not None, f"the lowering accepts it; the checker says {problems}"
    assert problems and says in problems[0], (problems, refused)
    return problems, refused


# --- 2-D blocks --------------------------------------------------------------------------

@pytest.mark.parametrize("shape, block", [
    ((16, 256), (8, 128)),     # one vreg tile per step
    ((24, 384), (24, 128)),    # rows: a multiple of 8; columns: of 128
    ((10, 20), (10, 20)),      # the whole array: any shape
    ((12, 256), (12, 128)),    # rows whole, columns in tiles
    ((32, 20), (16, 20)),      # columns whole, rows in tiles
    ((20, 300), (8, 128)),     # partial blocks at both ends: the shapes of blocks count
    ((40, 256), (16, 256)),
])
def test_2d_blocks_a_tpu_accepts(shape, block):
    assert_accepted(blocked, jnp.ones(shape), block)


def test_2d_blocks_a_tpu_refuses_and_what_the_checker_says():
    problems, refused = assert_refused(blocked, jnp.ones((8, 12)), (4, 4), says="last dim")
    assert "last two dimensions of your block shape are divisible by 8 and 128" in refused
    assert problems == ["block (4, 4) of input 1 of kernel `_double_kernel`: last dim 4 is "
                        "neither a multiple of 128 nor the array's 12; second-to-last dim 4 "
                        "is neither a multiple of 8 nor the array's 8",
                        "block (4, 4) of output 1 of kernel `_double_kernel`: last dim 4 is "
                        "neither a multiple of 128 nor the array's 12; second-to-last dim 4 "
                        "is neither a multiple of 8 nor the array's 8"]
    problems, _ = assert_refused(blocked, jnp.ones((16, 256)), (8, 64), says="last dim 64")
    assert "nor the array's 256" in problems[0] and "second-to-last" not in problems[0]
    problems, _ = assert_refused(blocked, jnp.ones((16, 128)), (4, 128),
                                 says="second-to-last dim 4 is neither a multiple of 8 "
                                      "nor the array's 16")
    assert "last dim 128" not in problems[0]
    # A block larger than a small array is not the array.
    assert_refused(blocked, jnp.ones((5, 7)), (8, 8), says="last dim 8")


# --- 1-D blocks --------------------------------------------------------------------------

@pytest.mark.parametrize("n, block, dtype", [
    (3000, 1024, jnp.float32),    # a multiple of 8 x 128
    (5000, 3072, jnp.float32),    # a multiple of 1024 that is no power of two
    (300, 128, jnp.float32),      # a power of two >= 128 (32-bit)
    (300, 300, jnp.float32),      # the whole array
    (7, 7, jnp.float32),
    (1000, 256, jnp.bfloat16),    # bfloat16: a power of two >= 256
    (1000, 512, jnp.int8),        # int8: >= 512
    (300, 128, jnp.int32),
])
def test_1d_blocks_a_tpu_accepts(n, block, dtype):
    assert_accepted(blocked, jnp.ones(n, dtype), (block,))


@pytest.mark.parametrize("n, block, dtype, rule", [
    (300, 100, jnp.float32, "a power of two of at least 128 (float32); 100 is none"),
    (300, 64, jnp.float32, "a power of two of at least 128 (float32); 64 is none"),
    (4000, 384, jnp.float32, "a multiple of 1024"),          # 3 x 128, no power of two
    (1000, 128, jnp.bfloat16, "at least 256 (bfloat16); 128 is none"),
    (1000, 256, jnp.int8, "at least 512 (int8); 256 is none"),
    (5, 4, jnp.float32, "the array's 5 elements"),
])
def test_1d_blocks_a_tpu_refuses(n, block, dtype, rule):
    problems, refused = assert_refused(blocked, jnp.ones(n, dtype), (block,), says=rule)
    assert "rank 1 block shapes" in refused
    assert problems[0].startswith(f"block ({block},) of input 1 of kernel `_double_kernel`: "
                                  "a 1-D block must be")


# --- dtypes: what the lowering asks, and a whole tile of the dtype ------------------------

@pytest.mark.parametrize("dtype, rows", [(jnp.bfloat16, 16), (jnp.int8, 32)])
def test_packed_dtypes_lower_with_8_rows_but_a_whole_tile_has_more(dtype, rows):
    x = jnp.ones((64, 256), dtype)
    # jax 0.12's lowering asks 8 rows of every dtype ...
    assert_accepted(blocked, x, (8, 128))
    assert_accepted(blocked, x, (rows, 128))
    # ... a tile of a packed dtype holds more rows: native_tiles asks for them.
    problems = tpu_block_problems(blocked, (x, (8, 128)), native_tiles=True)
    assert f"second-to-last dim 8 is neither a multiple of {rows} nor the array's 64" \
        in problems[0]
    assert tpu_block_problems(blocked, (x, (rows, 128)), native_tiles=True) == []
    assert tpu_block_problems(blocked, (x, (64, 256)), native_tiles=True) == []


# --- grids, index maps, squeezed dimensions ----------------------------------------------

def test_index_maps_do_not_matter_only_the_block_shape():
    x = jnp.ones((16, 512))
    # A 1-D grid over columns whose index map ignores nothing: block (16, 128).
    assert_accepted(blocked, x, (16, 128), lambda i, j: (0, j))
    assert_refused(blocked, x, (16, 64), lambda i, j: (0, j), says="last dim 64")


def test_a_squeezed_dimension_counts_as_1():
    # Leading: free. In the last two: 1, which passes only where the array has 1.
    assert_accepted(blocked, jnp.ones((4, 16, 256)), (None, 8, 128))
    assert_accepted(blocked, jnp.ones((16, 1, 256)), (8, None, 256))
    problems, _ = assert_refused(blocked, jnp.ones((16, 4, 256)), (8, None, 256),
                                 says="second-to-last dim 1 is neither a multiple of 8 "
                                      "nor the array's 4")
    assert problems[0].startswith("block (8, 1, 256) of input 1")


# --- memory spaces -----------------------------------------------------------------------

def test_a_scalar_table_in_smem_is_exempt_but_a_windowed_one_is_not():
    x = jnp.ones((16, 128))
    assert_accepted(with_table, x, jnp.arange(3.0), pl.BlockSpec(memory_space=pltpu.SMEM))
    # The same 3 scalars in VMEM: a whole 1-D array, accepted too.
    assert_accepted(with_table, x, jnp.arange(3.0), pl.BlockSpec((3,), lambda i: (0,)))
    # A window over SMEM (8 of 16, moving with the grid) is judged like any block.
    assert_refused(with_table, x, jnp.arange(16.0),
                   pl.BlockSpec((8,), lambda i: (i,), memory_space=pltpu.SMEM),
                   says="a 1-D block must be the array's 16 elements")


def test_a_block_of_rank_0_is_refused_outside_smem():
    x = jnp.ones((16, 128))
    assert_accepted(with_table, x, jnp.float32(2.0), pl.BlockSpec(memory_space=pltpu.SMEM))
    assert_refused(with_table, x, jnp.float32(2.0), pl.BlockSpec((), lambda i: ()),
                   says="a TPU lowers blocks of rank 1 or more")


# --- the check, and the grader's verdict -------------------------------------------------

def test_assert_tpu_blocks_passes_and_fails_with_a_message_that_teaches():
    x = jnp.ones((20, 300))
    assert assert_tpu_blocks(blocked, (x, (8, 128))) is None
    with pytest.raises(CheckFailure) as err:
        assert_tpu_blocks(blocked, (x, (4, 4)), name="blocked(x, (4, 4))",
                          section="1.4 Blocks a TPU accepts")
    message = str(err.value)
    assert message.startswith("a TPU would refuse 2 blocks of blocked(x, (4, 4))")
    assert "got:      block (4, 4) of input 1 of kernel `_double_kernel`: last dim 4" in message
    assert "interpret mode runs blocks of any shape" in message
    assert message.endswith("reread: section 1.4 Blocks a TPU accepts")


def test_the_grader_judges_the_recorded_blocks():
    from autograder.core.check import REFERENCE, STUDENT

    x = jnp.ones((20, 300))
    with recorded(REFERENCE) as ref:
        assert_tpu_blocks(blocked, (x, (8, 128)), name="f(x)")
    json.dumps(ref[0].observed.facts)  # plain data
    for block, passes in (((8, 128), True), ((16, 256), True), ((4, 128), False)):
        with recorded(STUDENT) as student:
            assert_tpu_blocks(blocked, (x, block), name="f(x)")
        verdict = judge_programs(ref, student)
        assert verdict.passed is passes, verdict.message
    assert "second-to-last dim 4 is neither a multiple of 8" in verdict.message


def test_unreadable_facts_are_the_graders_failure_not_a_pass():
    from autograder.pallas.tpu import explain_tpu_blocks
    from autograder.core.wire import Observation

    message = explain_tpu_blocks(Observation("facts", facts={"kernels": [{}]}), None,
                                 label="f(x)")
    assert message.startswith("the grader could not read the blocks of f(x)")
    assert judge_tpu_blocks({"kernels": []}) == []


# --- module 10: every kernel the notebook lowers ------------------------------------------

def _record_lowered_kernels(out_path: str) -> None:
    """In a fresh process: runs every code cell of module 10's source notebook with a
    hook on the pallas_call lowering rule, then writes the blocks of every kernel that
    was lowered, and what Pallas's TPU lowering says of each (run again with
    interpret=False for an abstract TPU v5e), to ``out_path``."""
    import traceback

    import matplotlib

    matplotlib.use("Agg")
    from jax._src.interpreters import mlir
    from jax._src.pallas.pallas_call import pallas_call_p

    from autograder.pallas.tpu import kernel_blocks

    seen, calls, cell_errors = {}, [], []
    original = mlir._lowerings[pallas_call_p]  # a LoweringRuleEntry

    def recording(ctx, *nodes, **params):
        facts = kernel_blocks(params)
        key = json.dumps(facts, sort_keys=True)
        if key not in seen:
            seen[key] = facts
            calls.append((facts, ctx.avals_in, params))
        return original.rule(ctx, *nodes, **params)

    mlir.register_lowering(pallas_call_p, recording, inline=original.inline)
    nb = json.loads(NOTEBOOK.read_text())
    namespace = {"__name__": "__main__"}
    os.chdir(NOTEBOOK.parent)
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        try:
            exec(compile("".join(cell["source"]), f"<cell {index}>", "exec"), namespace)
        except Exception:  # noqa: BLE001 - every failing cell is reported
            cell_errors.append(f"cell {index}: {traceback.format_exc(limit=-2)}")
    mlir._lowerings[pallas_call_p] = original
    lowered = []
    for facts, avals, params in calls:
        if any(a.dtype == "float64" for a in avals):
            # float64 kernels run only in the CPU's gradient checks (a TPU has no float64).
            lowered.append(None)
            continue
        params = {**params, "interpret": False}
        try:
            with jax.sharding.use_abstract_mesh(_tpu_mesh()):
                jax.export.export(jax.jit(lambda *a: pallas_call_p.bind(*a, **params)),
                                  platforms=("tpu",))(
                    *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
            lowered.append(None)
        except Exception as err:  # noqa: BLE001 - the lowering's word, reported
            lowered.append(f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
    with open(out_path, "w") as f:
        json.dump({"kernels": [facts for facts, _, _ in calls], "lowering": lowered,
                   "cell_errors": cell_errors}, f)


@pytest.fixture(scope="module")
def module_10(tmp_path_factory, course_kernel_env):
    out = tmp_path_factory.mktemp("pallas_tpu") / "kernels.json"
    # The session's compilation cache: a hit skips XLA's compilation, not the lowering
    # that the hook records.
    env = {**os.environ, **course_kernel_env, "MPLBACKEND": "Agg", "PYTHONPATH": str(REPO)}
    code = (f"from tests.test_pallas_tpu import _record_lowered_kernels; "
            f"_record_lowered_kernels({str(out)!r})")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


def test_module_10_runs_and_every_kernel_it_lowers_has_blocks_a_tpu_accepts(module_10):
    assert module_10["cell_errors"] == [], "\n".join(module_10["cell_errors"])
    kernels = module_10["kernels"]
    # Lessons, solutions and tests lower dozens of distinct kernels (a broken hook
    # would record none).
    assert len(kernels) >= 30, [k["kernel"] for k in kernels]
    problems = judge_tpu_blocks({"kernels": kernels})
    assert problems == [], "\n".join(problems)


def test_module_10_every_kernel_lowers_for_a_tpu(module_10):
    refused = [f"{k['kernel']} {[(o['block'], o['array']) for o in k['operands']]}: {why}"
               for k, why in zip(module_10["kernels"], module_10["lowering"]) if why]
    assert refused == [], "\n".join(refused)
