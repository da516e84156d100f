"""Do a kernel's index maps stay inside the arrays? One check, ``blocks_in_bounds``.

A ``BlockSpec``'s index map returns **block** indices. One past the last block (``(i, 1)``
where a row block spans the whole row) is silently clamped in interpret mode on a CPU,
so values alone cannot tell it from the right map there; compiled for a GPU or TPU the
same kernel reads or writes outside the array. This check evaluates every index map at
every grid step and compares each block index with the number of blocks of its axis.

Where the facts come from: **in-process**. The index maps are small jaxprs held in the
``pallas_call``'s parameters (``grid_mapping.block_mappings``); the exported program
keeps only the slices they produced, already clamped, so the jaxpr of the student's
function is the only place they can be read. The observation is plain data (the
out-of-range block indices found); :func:`explain_blocks_in_bounds` judges it purely.
"""
from __future__ import annotations

from typing import Callable, Sequence

from autograder.core.check import Check, NotAFunction, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.programs.pallas_interpret import pallas_eqns

MAX_STEPS = 4096  # grid points evaluated per kernel
MAX_FOUND = 20    # out-of-range indices kept


def collect_block_bounds(fn: Callable, args: Sequence = (), kwargs: dict | None = None
                         ) -> dict:
    """Traces ``fn`` (non-array arguments closed over) and evaluates each kernel's index
    maps at every grid step: ``{"kernels": n, "out_of_range": [...]}`` as plain data."""
    import itertools

    import jax

    found, kernels = [], 0
    for eqn in pallas_equations(fn, args, kwargs):
        kernels += 1
        gm = eqn.params["grid_mapping"]
        if gm.num_index_operands or gm.num_dynamic_grid_bounds:
            continue  # scalar prefetch or dynamic grids: not in this course
        grid = [int(g) for g in gm.grid]
        mappings = list(gm.block_mappings)
        n_in = len(mappings) - gm.num_outputs
        for step in itertools.islice(itertools.product(*map(range, grid)), MAX_STEPS):
            for k, bm in enumerate(mappings):
                shape = bm.array_aval.shape
                index = jax.core.eval_jaxpr(bm.index_map_jaxpr.jaxpr, bm.index_map_jaxpr.consts,
                                            *[jax.numpy.int32(s) for s in step])
                for axis, (idx, dim, block) in enumerate(zip(index, shape, bm.block_shape)):
                    size = block_size(block)
                    if type(block).__name__ in ("Element", "BoundedSlice") or size <= 0:
                        continue  # Element / Bounded blocks index elements: not judged
                    blocks = -(-int(dim) // size)
                    if not 0 <= int(idx) < blocks and len(found) < MAX_FOUND:
                        operand = (f"input {k + 1}" if k < n_in else f"output {k - n_in + 1}")
                        found.append({"kernel": kernels, "operand": operand,
                                      "step": list(step), "axis": axis, "index": int(idx),
                                      "blocks": blocks, "block": size, "dim": int(dim)})
    return {"kernels": kernels, "out_of_range": found}


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _bind(fn: Callable, args: Sequence, kwargs: dict | None):
    """``(program, arrays, array_kwargs)``: ``fn`` with every non-array argument (block
    sizes, ``eps``) closed over, so that it is a constant of the program, as
    ``static_argnums`` would make it; the arrays stay its inputs."""
    args, kwargs = tuple(args), dict(kwargs or {})
    positions = [i for i, a in enumerate(args) if _is_array(a)]
    array_kwargs = {k: v for k, v in kwargs.items() if _is_array(v)}
    constants = {k: v for k, v in kwargs.items() if k not in array_kwargs}

    def program(*arrays, **more):
        if not callable(fn):
            raise NotAFunction(type(fn).__name__ if fn is not None else "None")
        full = list(args)
        for i, a in zip(positions, arrays):
            full[i] = a
        return fn(*full, **constants, **more)

    program.__name__ = getattr(fn, "__name__", "the function")  # "... is not implemented yet"
    return program, tuple(args[i] for i in positions), array_kwargs


def pallas_equations(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> list:
    """The ``pallas_call`` equations of ``fn`` traced at these inputs (non-array
    arguments closed over, as :func:`autograder.pallas.checks.export_program` does, with :func:`_bind`)."""
    import jax

    from autograder.core.check import call

    program, arrays, array_kwargs = _bind(fn, args, kwargs)
    closed = jax.make_jaxpr(lambda *a, **k: call(program, a, k))(*arrays, **array_kwargs)
    return list(pallas_eqns(closed.jaxpr))


def block_size(block) -> int:
    """The length of one block dimension: a squeezed (``None``) dimension counts as 1,
    as Pallas counts it (``pallas_core._get_block_dim_size``); -1 where it has none."""
    if block is None or type(block).__name__ == "Squeezed":
        return 1
    size = getattr(block, "block_size", block)
    return int(size) if isinstance(size, int) else -1


def assert_blocks_in_bounds(fn: Callable, args: Sequence = (), *, kwargs: dict | None = None,
                            name: str | None = None, section: str | None = None) -> None:
    """Asserts that every index map of every kernel of ``fn`` returns, at every grid
    step, a block index inside its array (``0 <= index < cdiv(dim, block)``).

    >>> import jax, jax.numpy as jnp
    >>> from jax.experimental import pallas as pl
    >>> def double(x, bm):
    ...     spec = pl.BlockSpec((bm, x.shape[1]), lambda i: (i, 1))
    ...     return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...]),
    ...                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    ...                           grid=(pl.cdiv(x.shape[0], bm),), in_specs=[spec],
    ...                           out_specs=pl.BlockSpec((bm, x.shape[1]), lambda i: (i, 0)),
    ...                           interpret=True)(x)
    >>> assert_blocks_in_bounds(double, (jnp.ones((8, 4)), 4), name="double")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: an index map of double returns a block outside its array
      expected: block indices 0 .. 0 along axis 1 of input 1 (4 elements in blocks of 4)
      got:      block index 1 at grid step (0,); 2 such indices in all
      likely cause: the index map returns an element offset or a block one past the last; interpret mode on a CPU clamps it to the last block, so the values can look right there, but a GPU or TPU reads outside the array
      fix: return block indices, 0 up to cdiv(dim, block) - 1: a block that spans a whole axis has index 0
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs)
    run(Check("blocks_in_bounds", label,
              observe=lambda: collect_block_bounds(fn, args, kwargs),
              observe_as="facts", params=dict(section=section)))


@explainer("blocks_in_bounds")
def explain_blocks_in_bounds(observed, expected, *, label: str, section: str | None = None,
                             **_ignored) -> str | None:
    facts = observed.facts
    try:
        found = list(facts["out_of_range"])
        first = found[0] if found else None
        if first is not None:
            step, axis = tuple(int(s) for s in first["step"]), int(first["axis"])
            index, blocks = int(first["index"]), int(first["blocks"])
            dim, block, operand = int(first["dim"]), int(first["block"]), str(first["operand"])
    except (KeyError, TypeError, ValueError, IndexError):
        return format_failure(f"the grader could not read the index maps of {label}",
                              section=section)
    if first is None:
        return None
    step_text = "(" + ", ".join(map(str, step)) + ("," if len(step) == 1 else "") + ")"
    return format_failure(
        f"an index map of {label} returns a block outside its array",
        expected=f"block indices 0 .. {blocks - 1} along axis {axis} of {operand} "
                 f"({dim} elements in blocks of {block})",
        got=f"block index {index} at grid step {step_text}; {len(found)} such "
            f"ind{'ex' if len(found) == 1 else 'ices'} in all",
        cause="the index map returns an element offset or a block one past the last; "
              "interpret mode on a CPU clamps it to the last block, so the values can look "
              "right there, but a GPU or TPU reads outside the array",
        fix="return block indices, 0 up to cdiv(dim, block) - 1: a block that spans a "
            "whole axis has index 0",
        section=section)
