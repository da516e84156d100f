"""A small reader of StableHLO text: functions, ops, regions, types and SSA names.

Enough structure to follow a program the way the checks need to: which ops sit inside
which region (a loop body, a branch, a called function), which values an op reads,
the types it takes and returns, and the value of small integer constants. It reads the
pretty-printed form that ``jax.export``'s ``Exported.mlir_module()`` and
``jax.jit(f).lower(...).as_text()`` produce; generic-form op names are understood too.
"""
from __future__ import annotations

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GENERIC_OP = re.compile(r'(^\s*|=\s*)"([a-z_]+\.[a-z_0-9.]+)"(?=\()')
_LOC = re.compile(r"\s+loc\(.*\)\s*$")
_NAME = re.compile(r"%[\w.$-]+")
_DEFS = re.compile(r"^\s*(%[\w.$-]+)(?::(\d+))?\s*=\s*(.*)$")
_OPNAME = re.compile(r'^"?([a-z_]+\.[a-z_0-9.]+)"?')
_WHILE_ARG = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+(?:#\d+)?)")
_CALLEE = re.compile(r"@([\w.$-]+)")
_QUOTED_SYMBOL = re.compile(r'@"((?:[^"\\]|\\.)*)"')
_INT_CONST = re.compile(r"dense<(-?\d+)>\s*:\s*tensor<i\d+>")
_TENSOR = re.compile(r"tensor<([^<>]*(?:<[^<>]*>)?[^<>]*)>")
_FUNC = re.compile(r"^\s*func\.func\s+(?:public\s+|private\s+)?@([\w.$-]+)\((.*)")


class Op:
    """One operation of the program: its kind, SSA names, types and regions."""

    __slots__ = ("kind", "defs", "uses", "sig", "regions", "carry", "callee", "line")

    def __init__(self, kind, defs, uses, sig, line):
        self.kind = kind            # "stablehlo.while", "func.call", ...
        self.defs = defs            # ["%3"]
        self.uses = uses            # operand names, "%3#1" read as "%3"
        self.sig = sig              # the type signature after the top-level " : "
        self.regions: list[list[Op]] = []
        self.carry: list[tuple[str, str]] = []   # while: (iterArg, init) in order
        self.callee = None
        self.line = line

    @property
    def short(self) -> str:
        return self.kind.split(".", 1)[1] if "." in self.kind else self.kind


def _symbol(match: re.Match) -> str:
    return "@q." + re.sub(r"[^\w.$-]", "_", match.group(1))


def _strip(line: str) -> str:
    # Generic-form op names are quoted ("stablehlo.case"): unquote them before the
    # strings (backend configs, names) are blanked out. So are the names of functions
    # that are not identifiers (``jax.jit(lambda ...)`` inside a function makes
    # ``@"<lambda>"``): they become ``@q._lambda_``, or every call to them would be lost.
    line = _GENERIC_OP.sub(r"\1\2", line)
    line = _QUOTED_SYMBOL.sub(_symbol, line)
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


def _parse_op(text: str) -> Op | None:
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
    op = Op(kind, defs, [], sig, text)
    if kind == "stablehlo.while":
        op.carry = [(a, b.split("#")[0]) for a, b in _WHILE_ARG.findall(body)]
        op.uses = [b for _, b in op.carry]
    else:
        op.uses = [n.split("#")[0] for n in _NAME.findall(body)]
    if kind in ("func.call", "stablehlo.custom_call"):
        cm = _CALLEE.search(body)
        op.callee = cm.group(1) if cm else None
    return op


def parse_module(text: str) -> dict[str, tuple[list[str], list[Op]]]:
    """Functions of a StableHLO module: name -> (argument names, ops).

    >>> import jax, jax.numpy as jnp
    >>> funcs = parse_module(jax.jit(lambda x: jnp.sum(jnp.sin(x))).lower(jnp.ones(3)).as_text())
    >>> [op.kind for op in funcs["main"][1]]
    ['stablehlo.sine', 'stablehlo.constant', 'stablehlo.reduce', 'func.return']
    """
    funcs: dict[str, tuple[list[str], list[Op]]] = {}
    # Stack of (op owning the region or None for a function body, the region's ops).
    stack: list[tuple[Op | None, list[Op]]] = []
    for raw in text.splitlines():
        line = _strip(raw)
        s = line.strip()
        if not s or s.startswith(("#", "module", "//")):
            continue
        fm = _FUNC.match(line)
        if fm:
            ops: list[Op] = []
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
                region: list[Op] = []
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


def signature_types(sig: str) -> tuple[list[str], list[str]]:
    """(operand types, result types) of a signature such as ``(a, b) -> c``."""
    if "->" in sig:
        left, right = sig.rsplit("->", 1)
        return _TENSOR.findall(left), _TENSOR.findall(right)
    found = _TENSOR.findall(sig)
    return found, found[-1:]


def dims(tensor_body: str) -> list[int]:
    """``8x16xf32`` -> ``[8, 16]``; ``f32`` (a scalar) -> ``[]``."""
    return [int(p) for p in tensor_body.split("x")[:-1] if p.isdigit()]


class Scope:
    """SSA names visible in a region: defined here, or in an enclosing region."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent, self.defs = parent, {}   # name -> ("op", Op) | ("iterarg", init) | ...

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.defs:
                return scope.defs[name], scope
            scope = scope.parent
        return None, None


# Ops that pass a value through unchanged (a mesh in context adds sharding constraints).
IDENTITY = frozenset({"sdy.sharding_constraint", "stablehlo.optimization_barrier"})


def source_of(name: str, scope: Scope) -> str:
    """The name a value had before identity ops passed it along."""
    for _ in range(32):
        found, where = scope.lookup(name)
        if not found or found[0] != "op" or found[1].kind not in IDENTITY or not found[1].uses:
            return name
        name, scope = found[1].uses[0], where
    return name


def eval_int(name: str, scope: Scope, depth: int = 0) -> int | None:
    """Evaluates a scalar integer made of constants, multiply and convert."""
    if depth > 32:
        return None
    found, where = scope.lookup(name)
    if found is None:
        return None
    tag, op = found
    if tag == "iterarg":
        return eval_int(op, where.parent, depth + 1) if where.parent else None
    if tag != "op":
        return None
    if op.kind in IDENTITY and op.uses:
        return eval_int(op.uses[0], where, depth + 1)
    if op.kind == "stablehlo.constant":
        m = _INT_CONST.search(op.line)
        return int(m.group(1)) if m else None
    if op.kind == "stablehlo.convert" and op.uses:
        return eval_int(op.uses[0], where, depth + 1)
    if op.kind == "stablehlo.multiply" and len(op.uses) == 2:
        a, b = (eval_int(u, where, depth + 1) for u in op.uses)
        return a * b if a is not None and b is not None else None
    return None
