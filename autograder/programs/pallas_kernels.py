"""Reads the Pallas kernels of an exported program: StableHLO text in, plain facts out.

The checks never ask the student's function what it did: they export it with
``jax.export`` and read the program, which is text (or bytes), so the trusted grader
can derive the same facts outside the student's process and run the artifact to
confirm its values. The jaxpr would be more explicit (its ``pallas_call`` equation
holds ``params['grid_mapping']``: the grid and the block shapes), but a jaxpr exists
only in the process that traced it, and ``GridMapping`` is a private ``jax._src`` type.

In interpret mode (CPU) Pallas writes a ``pallas_call`` out as ordinary StableHLO
(jax 0.12.0.1, ``jax/_src/pallas/hlo_interpreter.py``): the grid is one
``stablehlo.while`` over ``prod(grid)`` steps; every operand is padded to whole blocks
and carried through the loop, each step cutting its block out (``dynamic_slice``) and
writing it back (``dynamic_update_slice``, whose update has the block's shape); the
kernel body is inlined in the loop body, so "the reduction happens in the kernel" is
"the ``reduce`` is inside the loop and not outside". What tells that loop from one
written by hand (``lax.fori_loop`` over dynamic slices) is the grid: after writing the
blocks back, each step advances one index per grid axis, last axis first, wrapping to
0 at the axis size (``_get_next_indices`` in the interpreter); a loop whose grid cannot
be read that way is not counted as a kernel. Lost on the way: the grid's
per-axis sizes (their product survives), the index maps (values catch a wrong one) and
the name ``pallas_call`` (only some kernels keep it in a location). Compiled for a GPU
or TPU, a kernel is one opaque ``custom_call``: its block shapes and ops are ``None``.

This reads the interpreter's output, so it is tied to the pinned jax: tests/test_pallas.py
builds real kernels and asserts these facts, and fails if an upgrade changes them.
"""
from __future__ import annotations

import math
import re

from autograder.programs.mlir import (IDENTITY, Op, Scope, dims, eval_int, parse_module, source_of,
                              signature_types)

# Custom-call targets that hold a compiled Pallas kernel, by lowering.
KERNEL_CALLS = {
    "__gpu$xla.gpu.triton": "triton",
    "mosaic_gpu_v2": "mosaic_gpu",
    "tpu_custom_call": "mosaic_tpu",
}

_GRID = re.compile(r"grid_([xyz])\s*=\s*(\d+)")


def _grid(tail: list[Op], scope: Scope, carried: list[str]) -> list[int] | None:
    """Per-axis grid sizes from the step that advances the grid indices.

    After writing the blocks back, each iteration moves to the next grid point, last
    axis first: ``i_k + 1``, compared for equality with the axis size, wraps to 0.
    The axis a comparison belongs to is the one new index it depends on.
    """
    memo: dict[str, frozenset] = {}

    def deps(name, depth=0):
        if name not in memo:
            found, where = scope.lookup(name)
            memo[name] = frozenset()
            if found and found[0] == "iterarg" and name in carried:
                memo[name] = frozenset([name])
            elif found and found[0] == "op" and depth < 64:
                memo[name] = frozenset().union(*(deps(u, depth + 1) for u in found[1].uses))
        return memo[name]

    sizes, seen = {}, set()
    for op in tail:
        if op.kind == "stablehlo.compare" and " EQ" in op.line and len(op.uses) == 2:
            size, own = eval_int(op.uses[1], scope), deps(op.uses[0]) - seen
            if size is None or len(own) != 1:
                return None
            sizes.update(dict.fromkeys(own, size))
            seen |= own
    return [sizes[a] for a in carried if a in sizes]


# Ops that move a value without computing from it (the interpreter pads operands to
# whole blocks, in a function of their own): a kernel input after them is the argument.
_KEEPS = IDENTITY | {"stablehlo.pad", "stablehlo.reshape", "stablehlo.bitcast_convert",
                     "stablehlo.broadcast_in_dim"}


def _aliases(loop: Op, carried: list[str], blocks: dict, after: list[Op],
             argument_of=lambda init: None
             ) -> tuple[list[tuple], list[int] | None, list[int]]:
    """The kernel's ``input_output_aliases``, read from the grid loop: ``[(input,
    output, carried position of the input), ...]``, inputs and outputs each counted
    from 0 (as ``pallas_call`` counts them, its scalar-prefetch operands aside), the
    carried positions of the inputs (None when no output can be told), and the aliased
    outputs that the kernel wrote through the input's Ref instead of its own. Adds to
    ``blocks`` the block of an aliased operand that the loop no longer writes back
    itself.

    An aliased input and output are one buffer: the interpreter starts the output from
    the input's value and, after every step, carries the one written block back in
    both places, so the loop body returns the *same* value for the two (no two operands
    that are not aliased do: each is written back by its own ``dynamic_update_slice``),
    and the write-back of the other one is gone. jax 0.10's interpreter (seen on a TPU
    machine) writes both back, so a pair is also an input and an output that start from
    the same value or from the same argument (``argument_of``: the argument an initial
    value holds, through padding), the output read after the loop, the input not. The
    outputs are the operands whose values are read after the loop (the inputs' are
    dropped), so the first of them, or of the aliased partners, is output 0. An aliased
    pair whose kernel writes neither Ref is not seen (the two stay separate values).
    """
    returned = next((op.uses for op in reversed(loop.regions[1])
                     if op.kind == "stablehlo.return"), [])
    if len(returned) != len(carried):
        return [], None, []
    results = set()
    if loop.defs:
        used = re.compile(re.escape(loop.defs[0]) + r"#(\d+)\b")
        for op in _flatten(after):
            results.update(int(k) for k in used.findall(op.line))
    inits = [init for _, init in loop.carry]
    sources = [argument_of(init) for init in inits]
    pairs = []
    for q in range(len(carried)):
        for p in range(q):
            # jax 0.12's interpreter writes an aliased pair back as one value; older
            # ones (0.10) write each back, but start the output from the value the
            # input starts from, or from the same argument padded again (an output of
            # its own starts from a NaN fill).
            same_init = (p not in results and q in results
                         and (inits[p] == inits[q]
                              or (sources[p] is not None and sources[p] == sources[q])))
            if (returned[p] == returned[q] or same_init) and (p in blocks or q in blocks):
                pairs.append((p, q))
    for pair in pairs:
        for own, other in (pair, pair[::-1]):
            if own not in blocks:
                blocks[own] = _read_block(loop, carried[own]) or blocks[other]
    operands = sorted(blocks)
    outputs = [p for p in operands if p in results] + [q for _, q in pairs]
    if not outputs:
        return [], None, []
    first = operands.index(min(outputs))
    # Which Ref the kernel wrote a pair through, where the loop shows it (jax 0.12: the
    # one value carried back for both is a block written into the input's or the
    # output's carry). On a TPU a block written into an input's Ref is not copied back.
    writer = {op.defs[0]: op.uses[0] for op in loop.regions[1]
              if op.kind == "stablehlo.dynamic_update_slice" and op.defs and op.uses}
    through_input = sorted(operands.index(q) - first for p, q in pairs
                           if returned[p] == returned[q] and writer.get(returned[q]) == carried[p])
    return (sorted((operands.index(p), operands.index(q) - first, p) for p, q in pairs),
            operands[:first], through_input)


def _read_block(loop: Op, name: str) -> list[int] | None:
    """The shape of the block a grid step cuts out of the carried operand ``name``."""
    for op in loop.regions[1]:
        if op.kind == "stablehlo.dynamic_slice" and op.uses and op.uses[0] == name:
            _, results = signature_types(op.sig)
            if results:
                return dims(results[-1])
    return None


def _flatten(ops: list[Op]):
    for op in ops:
        yield op
        for region in op.regions:
            yield from _flatten(region)


# Ops that reduce along an axis: a chain of them is a chain of passes over the data.
_REDUCTIONS = frozenset({"stablehlo.reduce", "stablehlo.dot_general"})


def _is_grid_loop(op: Op) -> bool:
    """A ``while`` that carries arrays and writes blocks back into them."""
    if op.kind != "stablehlo.while" or len(op.regions) < 2:
        return False
    carried = {name for name, _ in op.carry}
    return any(inner.kind == "stablehlo.dynamic_update_slice" and inner.uses
               and inner.uses[0] in carried for inner in op.regions[1])


class _Walker:
    def __init__(self, funcs):
        self.funcs = funcs
        self.kernels: list[dict] = []
        self.outside: dict[str, int] = {}

    # -- outside any kernel -------------------------------------------------
    def walk(self, ops: list[Op], scope: Scope, stack=()):
        for n, op in enumerate(ops):
            if op.kind == "stablehlo.while" and _is_grid_loop(op):
                kernel = self._interpret_kernel(op, scope, ops[n + 1:])
                if kernel["grid"] is not None:
                    self.kernels.append(kernel)
                    self._define(op, scope)
                    continue
                # Blocks written back, but no grid indices advanced: a loop written by
                # hand (lax.fori_loop over dynamic slices), not a pallas_call. Its ops
                # count as outside every kernel.
            if op.kind == "stablehlo.custom_call" and op.callee in KERNEL_CALLS:
                self.kernels.append(self._compiled_kernel(op))
                self._define(op, scope)
                continue
            _, results = signature_types(op.sig)
            if op.kind not in ("func.return", "stablehlo.return") and any(
                    "x" in t for t in results):  # an array result, not a scalar
                self.outside[op.short] = self.outside.get(op.short, 0) + 1
            self._define(op, scope)
            for region in op.regions:
                child = Scope(scope)
                self._define_carry(op, child)
                self.walk(region, child, stack)
            if op.kind == "func.call" and op.callee in self.funcs and op.callee not in stack:
                args, body = self.funcs[op.callee]
                callee_scope = Scope()
                # Each parameter is bound to the caller's operand (followed by _argument).
                callee_scope.defs.update((a, ("arg", (u, scope))) for a, u in zip(args, op.uses))
                self.walk(body, callee_scope, stack + (op.callee,))

    def _argument(self, name: str, scope: Scope) -> int | None:
        """The index of the program's argument (``main``'s) that the value ``name`` is,
        through data movement that keeps it (padding to whole blocks, reshapes) and
        through called functions (the value each returns); None for a value computed
        from it."""
        for _ in range(64):
            found, where = scope.lookup(name)
            if not found:
                return None
            kind, what = found
            if kind == "arg":
                if what is None:
                    return None
                if what[0] == "main":
                    return what[1]
                name, scope = what
            elif kind == "op" and what.uses and what.kind in _KEEPS:
                name, scope = what.uses[0], where
            elif kind == "op" and what.kind == "func.call" and what.callee in self.funcs:
                # Into the called function, to the value it returns (one result only).
                args, body = self.funcs[what.callee]
                returned = [op for op in body if op.kind in ("func.return", "stablehlo.return")]
                if len(returned) != 1 or len(returned[0].uses) != 1:
                    return None
                scope = Scope()
                scope.defs.update((a, ("arg", (u, where))) for a, u in zip(args, what.uses))
                for op in body:
                    self._define(op, scope)
                name = returned[0].uses[0]
            else:
                return None
        return None

    @staticmethod
    def _define(op: Op, scope: Scope):
        for d in op.defs:
            scope.defs[d] = ("op", op)

    @staticmethod
    def _define_carry(op: Op, scope: Scope):
        for name, init in op.carry:
            scope.defs[name] = ("iterarg", init)

    # -- kernels --------------------------------------------------------------
    def _compiled_kernel(self, op: Op) -> dict:
        grid = dict(_GRID.findall(op.line))
        steps = math.prod(int(grid.get(a, 1)) for a in "xyz") if grid else None
        return {"lowering": KERNEL_CALLS[op.callee], "steps": steps, "grid": None,
                "blocks": None, "inside": None, "reduce_depth": None}

    def _interpret_kernel(self, loop: Op, scope: Scope, after: list[Op]) -> dict:
        cond_scope = Scope(scope)
        self._define_carry(loop, cond_scope)
        steps = None
        carried = [name for name, _ in loop.carry]
        for op in loop.regions[0]:
            self._define(op, cond_scope)
            if op.kind == "stablehlo.compare" and " LT" in op.line and len(op.uses) == 2 \
                    and source_of(op.uses[0], cond_scope) in carried:
                steps = eval_int(op.uses[1], cond_scope)
        blocks, last_write = {}, -1
        body_scope = Scope(scope)
        self._define_carry(loop, body_scope)
        for n, op in enumerate(loop.regions[1]):
            self._define(op, body_scope)
            if op.kind == "stablehlo.dynamic_update_slice" and op.uses and op.uses[0] in carried:
                operands, _ = signature_types(op.sig)
                if len(operands) >= 2:
                    blocks[carried.index(op.uses[0])] = dims(operands[1])
                last_write = n
        grid = _grid(loop.regions[1][last_write + 1:], body_scope, carried)
        pairs, inputs, through_input = _aliases(loop, carried, blocks, after,
                                                lambda init: self._argument(init, scope))
        aliases = [[i, o, self._argument(loop.carry[p][1], scope)] for i, o, p in pairs]
        arguments = (None if inputs is None else
                     [self._argument(loop.carry[p][1], scope) for p in inputs])
        inside: dict[str, int] = {}
        depth = {"max": 0}
        for region in loop.regions:
            self._inside(region, inside, depth, (), {name: 0 for name in carried})
        return {"lowering": "interpret", "steps": steps,
                "grid": grid if grid is not None and math.prod(grid) == steps else None,
                "blocks": [blocks[k] for k in sorted(blocks)], "inside": inside,
                "reduce_depth": depth["max"], "aliases": aliases, "arguments": arguments,
                "written_through_input": through_input}

    def _inside(self, ops, counts, depth, stack, env) -> int:
        """Counts ops and follows reduce chains; returns the depth of returned values."""
        returned = 0
        for op in ops:
            counts[op.short] = counts.get(op.short, 0) + 1
            d = max((env.get(u, 0) for u in op.uses), default=0)
            for region in op.regions:
                inner = dict(env)
                for name, init in op.carry:
                    inner[name] = env.get(init, 0)
                d = max(d, self._inside(region, counts, depth, stack, inner))
            if op.kind == "func.call" and op.callee in self.funcs and op.callee not in stack:
                args, body = self.funcs[op.callee]
                d += self._inside(body, counts, depth, stack + (op.callee,),
                                  {a: 0 for a in args})
            if op.kind in _REDUCTIONS:
                d += 1
                depth["max"] = max(depth["max"], d)
            for name in op.defs:
                env[name] = d
            if op.kind in ("stablehlo.return", "func.return"):
                returned = max(returned, d)
        return returned


def collect_kernel_facts(program) -> dict:
    """The Pallas kernels of a program, as plain data.

    Args:
      program: a ``jax.export.Exported``, its serialized bytes, or StableHLO text.

    Returns:
      ``{"kernels": [...], "outside": {op: count}}``. Each kernel is a dict:
      ``lowering`` ("interpret", or "triton"/"mosaic_gpu"/"mosaic_tpu" for a compiled
      kernel), ``steps`` (grid steps: the product of the grid), ``grid`` (axis by
      axis), ``blocks`` (the block shape of each operand, inputs then outputs),
      ``inside`` (op counts in the kernel), ``reduce_depth`` (the longest chain of
      reductions, ``reduce`` or ``dot_general``, that feed one another in the kernel:
      1 when every statistic is read from the block itself), ``aliases`` (the
      ``input_output_aliases`` of the kernel as ``[[input, output, argument], ...]``:
      output ``output`` is written into the buffer of input ``input``, each counted from
      0, which holds the program's argument ``argument``, or None when the input is
      computed), ``arguments`` (for each input of the kernel, the index of the
      program's argument it holds, or None; None when the inputs cannot be told),
      ``written_through_input`` (the aliased outputs whose blocks the kernel wrote
      through the input's Ref, not the output's: on a TPU those writes are not copied
      back; read where jax 0.12's interpreter shows it). A compiled kernel has none of
      these three.
      Facts a compiled kernel does not show are ``None``. ``outside`` counts the ops
      with array results that run outside every kernel.

    >>> import jax, jax.numpy as jnp
    >>> from jax.experimental import pallas as pl
    >>> def double(x_ref, o_ref):
    ...     o_ref[...] = 2 * x_ref[...]
    >>> def f(x):
    ...     spec = pl.BlockSpec((8,), lambda i: (i,))
    ...     return pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    ...                           grid=(pl.cdiv(x.shape[0], 8),), in_specs=[spec],
    ...                           out_specs=spec, interpret=True)(x)
    >>> facts = collect_kernel_facts(jax.export.export(jax.jit(f))(jnp.ones(20)))
    >>> k = facts["kernels"][0]
    >>> k["lowering"], k["steps"], k["grid"], k["blocks"], k["reduce_depth"]
    ('interpret', 3, [3], [[8], [8]], 0)
    """
    text = _program_text(program)
    funcs = parse_module(text)
    walker = _Walker(funcs)
    if "main" in funcs:
        scope = Scope()
        scope.defs.update((a, ("arg", ("main", i))) for i, a in enumerate(funcs["main"][0]))
        walker.walk(funcs["main"][1], scope, ("main",))
    return {"kernels": walker.kernels, "outside": dict(sorted(walker.outside.items()))}


def _program_text(program) -> str:
    if isinstance(program, str):
        return program
    if isinstance(program, (bytes, bytearray)):
        import jax

        program = jax.export.deserialize(bytearray(program))
    return program.mlir_module()


