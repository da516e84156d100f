"""Mutants of an instructor's solution, made from its syntax tree.

Each mutant changes one thing a student might get wrong: an operator or comparison,
a constant off by one, an axis or ``keepdims``, ``mean`` for ``sum``, a dropped
``stop_gradient`` or ``where`` guard, a dtype, the order of two arguments, a loop
bound, a key reused instead of split, a static argument made traced (or the other
way); and the mistakes of code with effects: a statement called for its effect left
out (a handler never removed, a log never appended), a ``finally`` flattened (state
not restored when the call raises), a flag flipped, two keyword arguments or the two
first results swapped, a step of a method chain skipped (``lower(...).as_text()`` for
``lower(...).compile().as_text()``), ``in`` for ``not in``. A check that lets a mutant through has a hole, unless the mutant is equivalent
(it computes the same function); equivalent mutants are listed in the exercise's test
cell as ``# equivalent mutant <id>: <reason>`` lines, so the definition says why.

A mutant's id (``<operator>@<line>:<col>``) is stable as long as the solution's text
is: it names the site in the solution cell.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import random
import re
from typing import Callable, Iterator

_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$", re.M)
EQUIVALENT = re.compile(r"#\s*equivalent mutant\s+(\S+)\s*:\s*(.+)")

_BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
                ast.Pow: ast.Mult, ast.FloorDiv: ast.Div, ast.MatMult: ast.Mult,
                ast.Mod: ast.FloorDiv}
_CMP_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
              ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
              ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_FUNC_SWAPS = {"mean": "sum", "sum": "mean", "max": "min", "min": "max", "argmax": "argmin",
               "argmin": "argmax", "jacfwd": "jacrev", "maximum": "minimum",
               "minimum": "maximum", "exp": "log", "log": "exp", "log1p": "log",
               "logsumexp": "max", "softmax": "log_softmax", "cumsum": "cumprod",
               "sqrt": "square", "tanh": "sigmoid", "all_gather": "psum",
               "psum": "pmean", "pmean": "psum", "split": "fold_in"}
_DTYPE_SWAPS = {"float32": "float16", "float64": "float32", "int32": "float32",
                "bfloat16": "float32", "float16": "float32", "uint32": "int32"}
_GUARDS = {"stop_gradient"}
_AT_SWAPS = {"add": "set", "set": "add", "multiply": "add", "min": "max", "max": "min",
             "get": "set"}
_DIFF = {"grad", "value_and_grad", "jacrev", "jacfwd", "hessian", "jacobian"}


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    description: str
    source: str


def strip_markers(source: str) -> str:
    return "\n".join(line for line in source.split("\n") if not _MARKERS.match(line))


def equivalent_ids(test_source: str) -> dict[str, str]:
    """``{mutant id: reason}`` declared in a test cell."""
    return {m.group(1): m.group(2).strip() for m in EQUIVALENT.finditer(test_source)}


class _Sites(ast.NodeVisitor):
    """Collects (node path, operator, description, apply) for every mutation site."""

    def __init__(self):
        self.sites: list[tuple[str, str, Callable[[ast.AST], ast.AST | None]]] = []
        self.path: list = []

    def add(self, node: ast.AST, op: str, what: str, apply) -> None:
        self.sites.append((f"{op}@{node.lineno}:{node.col_offset}", what, apply))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        new = _BINOP_SWAPS.get(type(node.op))
        if new:
            self.add(node, "binop", f"{type(node.op).__name__} -> {new.__name__}",
                     lambda n, new=new: _replace(n, op=new()))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        new = _CMP_SWAPS.get(type(node.ops[0]))
        if new:
            self.add(node, "compare", f"{type(node.ops[0]).__name__} -> {new.__name__}",
                     lambda n, new=new: _replace(n, ops=[new()] + n.ops[1:]))
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Call):
            self.add(node, "drop", f"leave out the call {_call_name(node.value) or ''}(...)",
                     lambda n: ast.Pass())
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if node.finalbody and not node.handlers:
            self.add(node, "nofinally", "run the finally block only when nothing raised",
                     lambda n: n.body + n.orelse + n.finalbody)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
            self.add(node, "retswap", "return the first two results in the other order",
                     lambda n: _replace(n, value=_replace(n.value, elts=[
                         n.value.elts[1], n.value.elts[0]] + n.value.elts[2:])))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.USub):
            self.add(node, "negate", "drop a minus sign", lambda n: n.operand)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bool):
            self.add(node, "flag", f"{v} -> {not v}", lambda n: ast.Constant(not n.value))
            return
        if not isinstance(v, (int, float)):
            return
        if isinstance(v, int):
            self.add(node, "const+1", f"{v} -> {v + 1}", lambda n: ast.Constant(n.value + 1))
            self.add(node, "const-1", f"{v} -> {v - 1}", lambda n: ast.Constant(n.value - 1))
        elif v not in (0.0,):
            self.add(node, "const*2", f"{v} -> {2 * v}", lambda n: ast.Constant(2 * n.value))
            self.add(node, "const=1", f"{v} -> 1.0", lambda n: ast.Constant(1.0))

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Subscript)
                and isinstance(node.func.value.value, ast.Attribute)
                and node.func.value.value.attr == "at" and name in _AT_SWAPS):
            new = _AT_SWAPS[name]
            self.add(node, "at", f".at[].{name} -> .at[].{new}",
                     lambda n, new=new: _rename_call(n, new))
        elif name in _FUNC_SWAPS:
            new = _FUNC_SWAPS[name]
            self.add(node, "func", f"{name} -> {new}", lambda n, new=new: _rename_call(n, new))
        if name in _DIFF and len(node.args) == 1 and not any(
                k.arg == "argnums" for k in node.keywords):
            self.add(node, "argnums", f"{name}(f) -> {name}(f, argnums=1)",
                     lambda n: _replace(n, keywords=n.keywords + [
                         ast.keyword("argnums", ast.Constant(1))]))
        if name in _GUARDS and node.args:
            self.add(node, "unguard", f"drop {name}", lambda n: n.args[0])
        if name == "where" and len(node.args) == 3:
            self.add(node, "where", "jnp.where(c, a, b) -> a", lambda n: n.args[1])
            self.add(node, "where", "jnp.where(c, a, b) -> b", lambda n: n.args[2])
        if name == "range" and node.args:
            self.add(node, "bound", "range(..., n) -> range(..., n - 1)",
                     lambda n: _replace(n, args=n.args[:-1] + [
                         ast.BinOp(n.args[-1], ast.Sub(), ast.Constant(1))]))
        if name in ("fori_loop",) and len(node.args) >= 2:
            self.add(node, "bound", "fori_loop(lo, hi) -> fori_loop(lo, hi - 1)",
                     lambda n: _replace(n, args=[n.args[0], ast.BinOp(
                         n.args[1], ast.Sub(), ast.Constant(1))] + n.args[2:]))
        if name == "split" and node.args:
            self.add(node, "key-reuse", "split(key) -> (key, key)",
                     lambda n: ast.Tuple([n.args[0], n.args[0]], ast.Load()))
        if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            self.add(node, "argswap", f"swap the first two arguments of {name or 'a call'}",
                     lambda n: _replace(n, args=[n.args[1], n.args[0]] + n.args[2:]))
        # Two keyword arguments given each other's value (decay_steps for warmup_steps).
        named = [i for i, kw in enumerate(node.keywords)
                 if kw.arg and not isinstance(kw.value, ast.Constant)][:4]
        for a, b in itertools.combinations(named, 2):
            self.add(node, "kwswap", f"swap the values of {node.keywords[a].arg}= and "
                     f"{node.keywords[b].arg}=", lambda n, a=a, b=b: _replace(n, keywords=[
                         _replace(kw, value=n.keywords[b if i == a else a].value)
                         if i in (a, b) else kw for i, kw in enumerate(n.keywords)]))
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Attribute) and not func.value.args
                and not func.value.keywords):
            skipped = func.value.func.attr
            self.add(node, "chain", f"skip .{skipped}() in a method chain",
                     lambda n: _replace(n, func=_replace(n.func, value=n.func.value.func.value)))
        for i, kw in enumerate(node.keywords):
            if kw.arg in ("axis", "keepdims", "static_argnums", "static_argnames",
                          "has_aux", "argnums", "in_axes", "out_axes", "donate_argnums"):
                self.add(kw.value, f"kw-{kw.arg}", f"change {kw.arg}=",
                         lambda n, i=i, kw=kw: _mutate_keyword(n, kw.arg))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "T" and isinstance(node.ctx, ast.Load):
            self.add(node, "transpose", "drop a .T", lambda n: n.value)
        if node.attr in _DTYPE_SWAPS:
            new = _DTYPE_SWAPS[node.attr]
            self.add(node, "dtype", f"{node.attr} -> {new}",
                     lambda n, new=new: _replace(n, attr=new))
        self.generic_visit(node)


def _replace(node, **fields):
    new = copy.copy(node)
    for k, v in fields.items():
        setattr(new, k, v)
    return new


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _rename_call(node: ast.Call, new: str) -> ast.Call:
    func = copy.copy(node.func)
    if isinstance(func, ast.Attribute):
        func.attr = new
    else:
        func.id = new
    return _replace(node, func=func)


def _mutate_keyword(value: ast.AST, name: str):
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return ast.Constant(not value.value)
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return ast.Constant(0 if value.value != 0 else 1)
    if name in ("static_argnums", "static_argnames", "donate_argnums", "in_axes", "out_axes"):
        return ast.Constant(None) if name != "static_argnames" else ast.Tuple([], ast.Load())
    return ast.Constant(None)


def _all_sites(tree: ast.AST) -> list[tuple[str, str, Callable]]:
    visitor = _Sites()
    visitor.visit(tree)
    return visitor.sites


def _apply(tree: ast.AST, site_id: str, apply) -> str | None:
    """The source with the one site changed, or None when it does not parse back."""
    target = copy.deepcopy(tree)
    op, _, pos = site_id.partition("@")
    line, col = (int(x) for x in pos.split(":"))

    class Swap(ast.NodeTransformer):
        done = False

        def generic_visit(self, node):
            if (not self.done and getattr(node, "lineno", None) == line
                    and getattr(node, "col_offset", None) == col and _matches(op, node)):
                try:
                    out = apply(node)
                except (IndexError, AttributeError):
                    # Another node starts here too (`jnp.where(...).astype(t)`: the outer
                    # call first): the site is further down.
                    return super().generic_visit(node)
                self.done = True
                if isinstance(out, list):  # statements in place of one
                    return out
                return ast.copy_location(out, node) if out is not None else node
            return super().generic_visit(node)

    new = Swap().visit(target)
    ast.fix_missing_locations(new)
    try:
        return ast.unparse(new)
    except Exception:  # noqa: BLE001 - a mutant that cannot be written is skipped
        return None


def _matches(op: str, node: ast.AST) -> bool:
    kinds = {"binop": ast.BinOp, "compare": ast.Compare, "negate": ast.UnaryOp,
             "const+1": ast.Constant, "const-1": ast.Constant, "const*2": ast.Constant,
             "const=1": ast.Constant, "func": ast.Call, "unguard": ast.Call, "where": ast.Call,
             "bound": ast.Call, "key-reuse": ast.Call, "argswap": ast.Call,
             "dtype": ast.Attribute, "at": ast.Call, "argnums": ast.Call,
             "transpose": ast.Attribute, "drop": ast.Expr, "nofinally": ast.Try,
             "retswap": ast.Return, "flag": ast.Constant, "kwswap": ast.Call,
             "chain": ast.Call}
    return isinstance(node, kinds.get(op, ast.AST))


def mutants(solution_source: str, *, limit: int | None = None, seed: str = "") -> list[Mutant]:
    """The mutants of a solution cell (markers stripped), at most ``limit`` of them.

    With a limit, mutants are drawn deterministically (seeded by ``seed``), spread over
    the kinds of mutation so that rare kinds are not crowded out by constants.
    """
    code = strip_markers(solution_source)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    original = ast.unparse(tree)
    out: list[Mutant] = []
    seen = {original}
    counts: dict[str, int] = {}
    for site_id, what, apply in _all_sites(tree):
        counts[site_id] = counts.get(site_id, 0) + 1
        mid = site_id if counts[site_id] == 1 else f"{site_id}#{counts[site_id]}"
        source = _apply_nth(tree, site_id, counts[site_id] - 1)
        if source is None or source in seen:
            continue
        seen.add(source)
        out.append(Mutant(mid, what, source))
    if limit is not None and len(out) > limit:
        out = _spread(out, limit, seed)
    return out


def _apply_nth(tree: ast.AST, site_id: str, nth: int) -> str | None:
    """Applies the nth mutation registered at ``site_id`` (several kinds share a node)."""
    sites = [(s, a) for s, _, a in _all_sites(copy.deepcopy(tree)) if s == site_id]
    if nth >= len(sites):
        return None
    return _apply(tree, site_id, sites[nth][1])


def _spread(items: list[Mutant], limit: int, seed: str) -> list[Mutant]:
    rng = random.Random(seed)
    by_kind: dict[str, list[Mutant]] = {}
    for m in items:
        by_kind.setdefault(m.id.split("@")[0], []).append(m)
    for group in by_kind.values():
        rng.shuffle(group)
    chosen: list[Mutant] = []
    kinds = sorted(by_kind)
    while len(chosen) < limit:
        for kind in kinds:
            if by_kind[kind] and len(chosen) < limit:
                chosen.append(by_kind[kind].pop())
    return sorted(chosen, key=lambda m: items.index(m))


def iter_solution_cells(nb: dict) -> Iterator[tuple[str, str]]:
    from grader import notebook as _nb

    for cell in nb["cells"]:
        if _nb.is_solution(cell):
            yield _nb.meta(cell)["grade_id"], _nb.text(cell.get("source"))
