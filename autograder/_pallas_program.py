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
"the ``reduce`` is inside the loop and not outside". Lost on the way: the grid's
per-axis sizes (their product survives), the index maps (values catch a wrong one) and
the name ``pallas_call`` (only some kernels keep it in a location). Compiled for a GPU
or TPU, a kernel is one opaque ``custom_call``: its block shapes and ops are ``None``.

This reads the interpreter's output, so it is tied to the pinned jax: tests/test_pallas.py
builds real kernels and asserts these facts, and fails if an upgrade changes them.
"""
from __future__ import annotations

import math
import re


# Custom-call targets that hold a compiled Pallas kernel, by lowering.
KERNEL_CALLS = {
    "__gpu$xla.gpu.triton": "triton",
    "mosaic_gpu_v2": "mosaic_gpu",
    "tpu_custom_call": "mosaic_tpu",
}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GENERIC_OP = re.compile(r'(^\s*|=\s*)"([a-z_]+\.[a-z_0-9.]+)"(?=\()')
_LOC = re.compile(r"\s+loc\(.*\)\s*$")
_NAME = re.compile(r"%[\w.$-]+")
_DEFS = re.compile(r"^\s*(%[\w.$-]+)(?::(\d+))?\s*=\s*(.*)$")
_OPNAME = re.compile(r'^"?([a-z_]+\.[a-z_0-9.]+)"?')
_WHILE_ARG = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+(?:#\d+)?)")
_CALLEE = re.compile(r"@([\w.$-]+)")
_INT_CONST = re.compile(r"dense<(-?\d+)>\s*:\s*tensor<i\d+>")
_GRID = re.compile(r"grid_([xyz])\s*=\s*(\d+)")
_TENSOR = re.compile(r"tensor<([^<>]*(?:<[^<>]*>)?[^<>]*)>")
_FUNC = re.compile(r"^\s*func\.func\s+(?:public\s+|private\s+)?@([\w.$-]+)\((.*)")


class _Op:
    """One operation of the program: its kind, SSA names, types and regions."""

    __slots__ = ("kind", "defs", "uses", "sig", "regions", "carry", "callee", "line")

    def __init__(self, kind, defs, uses, sig, line):
        self.kind = kind            # "stablehlo.while", "func.call", ...
        self.defs = defs            # ["%3"]
        self.uses = uses            # operand names, "%3#1" read as "%3"
        self.sig = sig              # the type signature after the top-level " : "
        self.regions: list[list[_Op]] = []
        self.carry: list[tuple[str, str]] = []   # while: (iterArg, init) in order
        self.callee = None
        self.line = line

    @property
    def short(self) -> str:
        return self.kind.split(".", 1)[1] if "." in self.kind else self.kind


def _strip(line: str) -> str:
    # Generic-form op names are quoted ("stablehlo.case"): unquote them before the
    # strings (backend configs, names) are blanked out.
    line = _GENERIC_OP.sub(r"\1\2", line)
    return _LOC.sub("", _STRING.sub('""', line))


def _top_level_colon(text: str) -> int:
    """Index of the last ' : ' outside brackets (types follow it), or -1."""
    depth, last, i = 0, -1, 0
    while i < len(text):
        c = text[i]
        if text.startswith("->", i):
            i += 2
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == ":" and depth == 0 and text[i - 1:i] == " " and text[i + 1:i + 2] == " ":
            last = i
        i += 1
    return last


def _parse_op(text: str) -> _Op | None:
    m = _DEFS.match(text)
    if m:
        defs, rest = [m.group(1)], m.group(3)
    else:
        defs, rest = [], text.strip()
    om = _OPNAME.match(rest) if rest else None
    if om is None:
        if rest.startswith("return") or rest.startswith("call "):
            kind = "func.return" if rest.startswith("return") else "func.call"
        else:
            return None
    else:
        kind = om.group(1)
    colon = _top_level_colon(rest)
    body, sig = (rest[:colon], rest[colon + 1:].strip()) if colon >= 0 else (rest, "")
    op = _Op(kind, defs, [], sig, text)
    if kind == "stablehlo.while":
        op.carry = [(a, b.split("#")[0]) for a, b in _WHILE_ARG.findall(body)]
        op.uses = [b for _, b in op.carry]
    else:
        op.uses = [n.split("#")[0] for n in _NAME.findall(body)]
    if kind in ("func.call", "stablehlo.custom_call"):
        cm = _CALLEE.search(body)
        op.callee = cm.group(1) if cm else None
    return op


def _parse(text: str) -> dict[str, tuple[list[str], list[_Op]]]:
    """Functions of a StableHLO module: name -> (argument names, ops)."""
    funcs: dict[str, tuple[list[str], list[_Op]]] = {}
    # Stack of (op owning the region or None for a function body, the region's ops).
    stack: list[tuple[_Op | None, list[_Op]]] = []
    for raw in text.splitlines():
        line = _strip(raw)
        s = line.strip()
        if not s or s.startswith(("#", "module", "//")):
            continue
        fm = _FUNC.match(line)
        if fm:
            ops: list[_Op] = []
            args = re.findall(r"(%[\w.$-]+)\s*:", fm.group(2))
            funcs[fm.group(1)] = (args, ops)
            stack = [(None, ops)]
            continue
        if not stack:
            continue
        opens, closes = s.count("{"), s.count("}")
        if s.startswith("}"):
            # Closes the current region; "} do {" and "}, {" open the owner's next one.
            owner, _ = stack.pop()
            if owner is not None and opens > 0 and s.rstrip().endswith("{"):
                region: list[_Op] = []
                owner.regions.append(region)
                stack.append((owner, region))
            elif owner is not None:
                # The owner's types may come on its closing line: `}) : (...) -> ...`.
                colon = _top_level_colon(s)
                if colon >= 0 and not owner.sig:
                    owner.sig = s[colon + 1:].strip()
            continue
        op = _parse_op(line)
        region_ops = stack[-1][1]
        if op is None:
            # "cond {", "reducer(...) {", "^bb0(...):": a region of the last op.
            if opens > closes and region_ops:
                owner = region_ops[-1]
                region = []
                owner.regions.append(region)
                stack.append((owner, region))
            continue
        region_ops.append(op)
        if opens > closes:
            region = []
            op.regions.append(region)
            stack.append((op, region))
    return funcs


def _types(sig: str) -> tuple[list[str], list[str]]:
    """(operand types, result types) of a signature such as ``(a, b) -> c``."""
    if "->" in sig:
        left, right = sig.rsplit("->", 1)
        return _TENSOR.findall(left), _TENSOR.findall(right)
    found = _TENSOR.findall(sig)
    return found, found[-1:]


def _dims(tensor_body: str) -> list[int]:
    """``8x16xf32`` -> ``[8, 16]``; ``f32`` (a scalar) -> ``[]``."""
    return [int(p) for p in tensor_body.split("x")[:-1] if p.isdigit()]


class _Scope:
    """SSA names visible in a region: defined here, or in an enclosing region."""

    def __init__(self, parent: "_Scope | None" = None):
        self.parent, self.defs = parent, {}   # name -> ("op", _Op) | ("iterarg", init) | ...

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.defs:
                return scope.defs[name], scope
            scope = scope.parent
        return None, None


# Ops that pass a value through unchanged (a mesh in context adds sharding constraints).
_IDENTITY = frozenset({"sdy.sharding_constraint", "stablehlo.optimization_barrier"})


def _source(name: str, scope: _Scope) -> str:
    """The name a value had before identity ops passed it along."""
    for _ in range(32):
        found, where = scope.lookup(name)
        if not found or found[0] != "op" or found[1].kind not in _IDENTITY or not found[1].uses:
            return name
        name, scope = found[1].uses[0], where
    return name


def _eval_int(name: str, scope: _Scope, depth: int = 0) -> int | None:
    """Evaluates a scalar integer made of constants, multiply and convert."""
    if depth > 32:
        return None
    found, where = scope.lookup(name)
    if found is None:
        return None
    tag, op = found
    if tag == "iterarg":
        return _eval_int(op, where.parent, depth + 1) if where.parent else None
    if tag != "op":
        return None
    if op.kind in _IDENTITY and op.uses:
        return _eval_int(op.uses[0], where, depth + 1)
    if op.kind == "stablehlo.constant":
        m = _INT_CONST.search(op.line)
        return int(m.group(1)) if m else None
    if op.kind == "stablehlo.convert" and op.uses:
        return _eval_int(op.uses[0], where, depth + 1)
    if op.kind == "stablehlo.multiply" and len(op.uses) == 2:
        a, b = (_eval_int(u, where, depth + 1) for u in op.uses)
        return a * b if a is not None and b is not None else None
    return None


def _is_grid_loop(op: _Op) -> bool:
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
    def walk(self, ops: list[_Op], scope: _Scope, stack=()):
        for op in ops:
            if op.kind == "stablehlo.while" and _is_grid_loop(op):
                self.kernels.append(self._interpret_kernel(op, scope))
                self._define(op, scope)
                continue
            if op.kind == "stablehlo.custom_call" and op.callee in KERNEL_CALLS:
                self.kernels.append(self._compiled_kernel(op))
                self._define(op, scope)
                continue
            _, results = _types(op.sig)
            if op.kind not in ("func.return", "stablehlo.return") and any(
                    "x" in t for t in results):  # an array result, not a scalar
                self.outside[op.short] = self.outside.get(op.short, 0) + 1
            self._define(op, scope)
            for region in op.regions:
                child = _Scope(scope)
                self._define_carry(op, child)
                self.walk(region, child, stack)
            if op.kind == "func.call" and op.callee in self.funcs and op.callee not in stack:
                args, body = self.funcs[op.callee]
                callee_scope = _Scope()
                callee_scope.defs.update((a, ("arg", None)) for a in args)
                self.walk(body, callee_scope, stack + (op.callee,))

    @staticmethod
    def _define(op: _Op, scope: _Scope):
        for d in op.defs:
            scope.defs[d] = ("op", op)

    @staticmethod
    def _define_carry(op: _Op, scope: _Scope):
        for name, init in op.carry:
            scope.defs[name] = ("iterarg", init)

    # -- kernels --------------------------------------------------------------
    def _compiled_kernel(self, op: _Op) -> dict:
        grid = dict(_GRID.findall(op.line))
        steps = math.prod(int(grid.get(a, 1)) for a in "xyz") if grid else None
        return {"lowering": KERNEL_CALLS[op.callee], "steps": steps, "blocks": None,
                "inside": None, "reduce_depth": None}

    def _interpret_kernel(self, loop: _Op, scope: _Scope) -> dict:
        cond_scope = _Scope(scope)
        self._define_carry(loop, cond_scope)
        steps = None
        carried = [name for name, _ in loop.carry]
        for op in loop.regions[0]:
            self._define(op, cond_scope)
            if op.kind == "stablehlo.compare" and " LT" in op.line and len(op.uses) == 2 \
                    and _source(op.uses[0], cond_scope) in carried:
                steps = _eval_int(op.uses[1], cond_scope)
        blocks = {}
        for op in loop.regions[1]:
            if op.kind == "stablehlo.dynamic_update_slice" and op.uses and op.uses[0] in carried:
                operands, _ = _types(op.sig)
                if len(operands) >= 2:
                    blocks[carried.index(op.uses[0])] = _dims(operands[1])
        inside: dict[str, int] = {}
        depth = {"max": 0}
        for region in loop.regions:
            self._inside(region, inside, depth, (), {name: 0 for name in carried})
        return {"lowering": "interpret", "steps": steps,
                "blocks": [blocks[k] for k in sorted(blocks)], "inside": inside,
                "reduce_depth": depth["max"]}

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
            if op.kind == "stablehlo.reduce":
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
      kernel), ``steps`` (grid steps: the product of the grid), ``blocks`` (the block
      shape of each operand, inputs then outputs), ``inside`` (op counts in the
      kernel), ``reduce_depth`` (the longest chain of reductions that feed one
      another in the kernel: 1 when every statistic is read from the block itself).
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
    >>> k["lowering"], k["steps"], k["blocks"], k["reduce_depth"]
    ('interpret', 3, [[8], [8]], 0)
    """
    text = _program_text(program)
    funcs = _parse(text)
    walker = _Walker(funcs)
    if "main" in funcs:
        scope = _Scope()
        scope.defs.update((a, ("arg", None)) for a in funcs["main"][0])
        walker.walk(funcs["main"][1], scope, ("main",))
    return {"kernels": walker.kernels, "outside": dict(sorted(walker.outside.items()))}


def _program_text(program) -> str:
    if isinstance(program, str):
        return program
    if isinstance(program, (bytes, bytearray)):
        import jax

        program = jax.export.deserialize(bytearray(program))
    return program.mlir_module()


