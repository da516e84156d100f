"""Would a TPU accept a kernel's blocks? ``collect_tpu_blocks``, ``tpu_block_problems``,
``assert_tpu_blocks``.

Interpret mode runs a block of any shape. Pallas's TPU backend (Mosaic) refuses, before
it lowers the kernel, every block that does not fit the TPU's vector registers: a
vreg holds 8 sublanes x 128 lanes of 32-bit values, and VMEM arrays are tiled the
same way. The rule, as jax 0.12.0.1 enforces it (``_check_block_mappings`` in
``jax/_src/pallas/mosaic/lowering.py``, called by ``lower_jaxpr_into_pipelined_module``
for every ``pallas_call`` compiled for a TPU), for every operand's block:

- skipped: a block in SMEM whose window is the whole array at block index 0 (a
  scalar table), and semaphores;
- rank 0: refused (a TPU lowers blocks of rank >= 1; scalars go in SMEM);
- memory space ANY (HBM): only the whole array with an index map of zeros;
- rank >= 2: the last dimension a multiple of 128 or the array's own, and the
  second-to-last a multiple of 8 or the array's own, whatever the dtype. A squeezed
  (``None``) dimension counts as 1;
- rank 1: the array's own length, a multiple of 8 x 128 = 1024, or a power of two at
  least 128 x (32 / bits of the dtype) (128 for float32, 256 for bfloat16; bool counts
  as 32 bits).

``tests/test_pallas_tpu.py`` holds this encoding to the lowering itself, both ways: that
lowering runs on a CPU when a kernel with ``interpret=False`` is exported for an
abstract TPU v5e.

``native_tiles=True`` also asks the second-to-last dimension for a whole tile of the
dtype, 8 x (32 / bits) rows (16 for bfloat16, 32 for int8): the layout a TPU keeps
such arrays in. jax 0.12's lowering does not ask it (a bfloat16 block of 8 rows
lowers); it is advice for speed, not a rule of the lowering.

Where the facts come from: **in-process**, from the ``grid_mapping`` parameter of each
``pallas_call`` in the jaxpr of the student's function (``pallas.blocks``); an
exported interpret-mode program keeps neither memory spaces nor dtypes of blocks. The
observation is plain data; :func:`judge_tpu_blocks` is a pure function of it.
Extended dtypes (PRNG keys) are judged on their logical shape.
"""
from __future__ import annotations

from typing import Callable, Sequence

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.pallas.blocks import block_size, pallas_equations

LANES, SUBLANES = 128, 8   # one vreg: 8 sublanes x 128 lanes of 32 bits
MAX_SHOWN = 5              # problems named in a failure message


# --- observing ----------------------------------------------------------------------

def _memory(space) -> str:
    """The TPU memory space a block lands in (``memory_space_to_tpu_memory_space`` for a
    TensorCore kernel): ``"vmem"``, ``"smem"``, ``"any"``, ``"semaphore"`` or another
    name."""
    value = str(getattr(space, "value", space) or "default").lower()
    if value in ("default", "vmem"):
        return "vmem"
    if value in ("smem", "error", "index", "key"):
        return "smem"
    if value in ("any", "hbm"):
        return "any"
    return "semaphore" if value.startswith("semaphore") else value


def _bits(dtype) -> int:
    import jax
    import numpy as np

    if dtype == np.bool_ or _extended(dtype):
        return 32  # a bool block is stored as int32 (BOOL_MEMREF_TYPE)
    return int(jax.dtypes.itemsize_bits(dtype))  # int4: 4


def _extended(dtype) -> bool:
    import jax

    return jax.dtypes.issubdtype(dtype, jax.dtypes.extended)


def _trivial_window(bm) -> bool:
    """The block is the whole array and its index map returns only literal zeros."""
    if any(block_size(b) != d for b, d in zip(bm.block_shape, bm.array_aval.shape)):
        return False
    return all(getattr(v, "val", None) == 0 for v in bm.index_map_jaxpr.jaxpr.outvars)


def kernel_blocks(params: dict) -> dict:
    """The blocks of one ``pallas_call`` (its equation's ``params``) as plain data:
    ``{"kernel": name, "operands": [{"operand", "block", "array", "dtype", "bits",
    "memory", "trivial"}, ...]}``."""
    gm = params["grid_mapping"]
    info = getattr(params.get("jaxpr"), "debug_info", None)
    name = params.get("name") or getattr(info, "func_name", None) or "kernel"
    mappings = list(gm.block_mappings)
    n_in = len(mappings) - gm.num_outputs
    operands = []
    for k, bm in enumerate(mappings):
        dtype = bm.array_aval.dtype
        operands.append({
            "operand": f"input {k + 1}" if k < n_in else f"output {k - n_in + 1}",
            "block": [block_size(b) for b in bm.block_shape],
            "array": [int(d) for d in bm.array_aval.shape],
            "dtype": str(dtype), "bits": _bits(dtype),
            "memory": _memory(bm.block_aval.memory_space),
            "trivial": _trivial_window(bm)})
    return {"kernel": str(name), "operands": operands}


def collect_tpu_blocks(fn: Callable, args: Sequence = (), kwargs: dict | None = None
                       ) -> dict:
    """Traces ``fn`` (non-array arguments closed over) and returns the blocks of every
    kernel in it: ``{"kernels": [kernel_blocks(...), ...]}``."""
    return {"kernels": [kernel_blocks(eqn.params)
                        for eqn in pallas_equations(fn, args, kwargs)]}


# --- judging ------------------------------------------------------------------------

def _shape(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def operand_problem(kernel: str, op: dict, *, native_tiles: bool = False) -> str | None:
    """Why a TPU would refuse this operand's block (one line), or None."""
    block, array, memory = list(op["block"]), list(op["array"]), op["memory"]
    if memory == "semaphore" or (memory == "smem" and op["trivial"]):
        return None
    where = f"block {_shape(block)} of {op['operand']} of kernel `{kernel}`"
    packing = max(32 // int(op["bits"]), 1)
    if not block:
        return f"{where}: a TPU lowers blocks of rank 1 or more (put a scalar in SMEM)"
    if memory == "any" and not op["trivial"]:
        return (f"{where}: a block in memory space ANY must be the whole array "
                f"{_shape(array)} with an index map of zeros")
    if len(block) == 1:
        (b,), (a,) = block, array
        smallest = LANES * (32 // int(op["bits"]))
        if b == a or b % (SUBLANES * LANES) == 0 or (b >= smallest and _power_of_two(b)):
            return None
        return (f"{where}: a 1-D block must be the array's {a} elements, a multiple of "
                f"{SUBLANES * LANES}, or a power of two of at least {smallest} "
                f"({op['dtype']}); {b} is none of these")
    lines = []
    if not (block[-1] == array[-1] or block[-1] % LANES == 0):
        lines.append(f"last dim {block[-1]} is neither a multiple of {LANES} nor the "
                     f"array's {array[-1]}")
    rows = SUBLANES * (packing if native_tiles else 1)
    if not (block[-2] == array[-2] or block[-2] % rows == 0):
        lines.append(f"second-to-last dim {block[-2]} is neither a multiple of {rows} nor "
                     f"the array's {array[-2]}")
    return f"{where}: " + "; ".join(lines) if lines else None


def judge_tpu_blocks(facts: dict, *, native_tiles: bool = False) -> list[str]:
    """Every block of ``facts`` (:func:`collect_tpu_blocks`) a TPU would refuse, one
    line each; pure.

    >>> op = {"operand": "input 1", "block": [4, 4], "array": [8, 12], "dtype": "float32",
    ...       "bits": 32, "memory": "vmem", "trivial": False}
    >>> judge_tpu_blocks({"kernels": [{"kernel": "double", "operands": [op]}]})
    ["block (4, 4) of input 1 of kernel `double`: last dim 4 is neither a multiple of 128 nor the array's 12; second-to-last dim 4 is neither a multiple of 8 nor the array's 8"]
    """
    found = []
    for kernel in facts["kernels"]:
        for op in kernel["operands"]:
            problem = operand_problem(str(kernel["kernel"]), op, native_tiles=native_tiles)
            if problem:
                found.append(problem)
    return found


def tpu_block_problems(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                       native_tiles: bool = False) -> list[str]:
    """Every block of every kernel of ``fn`` at these inputs that a TPU would refuse.

    Traces ``fn`` only (nothing runs, nothing is compiled), so it works on a CPU for a
    kernel written with ``interpret=True``.

    >>> import jax, jax.numpy as jnp
    >>> from jax.experimental import pallas as pl
    >>> def double(x, bm, bn):
    ...     spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    ...     return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...]),
    ...                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    ...                           grid=(pl.cdiv(x.shape[0], bm), pl.cdiv(x.shape[1], bn)),
    ...                           in_specs=[spec], out_specs=spec, interpret=True)(x)
    >>> tpu_block_problems(double, (jnp.ones((16, 256)), 8, 128))
    []
    >>> tpu_block_problems(double, (jnp.ones((16, 256)), 8, 64))[0]
    "block (8, 64) of input 1 of kernel `<lambda>`: last dim 64 is neither a multiple of 128 nor the array's 256"
    """
    return judge_tpu_blocks(collect_tpu_blocks(fn, args, kwargs), native_tiles=native_tiles)


# --- the check ----------------------------------------------------------------------

def assert_tpu_blocks(fn: Callable, args: Sequence = (), *, kwargs: dict | None = None,
                      name: str | None = None, section: str | None = None) -> None:
    """Asserts that a TPU accepts every block of every kernel of ``fn`` at these inputs
    (the rule of jax 0.12's Mosaic lowering: see this module).

    >>> import jax, jax.numpy as jnp
    >>> from jax.experimental import pallas as pl
    >>> def scale(x, block):
    ...     spec = pl.BlockSpec((block,), lambda i: (i,))
    ...     return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., 3 * x_ref[...]),
    ...                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    ...                           grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],
    ...                           out_specs=spec, interpret=True)(x)
    >>> assert_tpu_blocks(scale, (jnp.ones(300), 128))
    >>> assert_tpu_blocks(scale, (jnp.ones(300), 100), name="scale")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: a TPU would refuse 2 blocks of scale
      expected: blocks whose last two dims are multiples of 8 and 128 (or the array's own); a 1-D block of the whole array, of a multiple of 1024, or of a power of two >= 128 (float32)
      got:      block (100,) of input 1 of kernel `<lambda>`: a 1-D block must be the array's 300 elements, a multiple of 1024, or a power of two of at least 128 (float32); 100 is none of these; block (100,) of output 1 of kernel `<lambda>`: a 1-D block must be the array's 300 elements, a multiple of 1024, or a power of two of at least 128 (float32); 100 is none of these
      likely cause: interpret mode runs blocks of any shape, but a TPU's vector registers hold 8 x 128 32-bit values, and its compiler refuses blocks that do not tile them
      fix: choose blocks of 8 x 128 tiles (rows of 128 lanes; 1-D blocks of 1024), or the whole array along a dimension
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs)
    run(Check("tpu_blocks", label, observe=lambda: collect_tpu_blocks(fn, args, kwargs),
              observe_as="facts", params=dict(section=section)))


@explainer("tpu_blocks")
def explain_tpu_blocks(observed, expected, *, label: str, section: str | None = None,
                       **_ignored) -> str | None:
    try:
        found = judge_tpu_blocks(observed.facts)
    except (KeyError, TypeError, ValueError):
        return format_failure(f"the grader could not read the blocks of {label}",
                              section=section)
    if not found:
        return None
    more = len(found) - MAX_SHOWN
    return format_failure(
        f"a TPU would refuse {len(found)} block{'s' if len(found) != 1 else ''} of {label}",
        expected="blocks whose last two dims are multiples of 8 and 128 (or the array's "
                 "own); a 1-D block of the whole array, of a multiple of 1024, or of a "
                 "power of two >= 128 (float32)",
        got="; ".join(found[:MAX_SHOWN]) + (f"; and {more} more" if more > 0 else ""),
        cause="interpret mode runs blocks of any shape, but a TPU's vector registers hold "
              "8 x 128 32-bit values, and its compiler refuses blocks that do not tile them",
        fix="choose blocks of 8 x 128 tiles (rows of 128 lanes; 1-D blocks of 1024), or "
            "the whole array along a dimension",
        section=section)
