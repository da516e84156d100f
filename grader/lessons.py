"""Which lesson cells a graded run needs: the others are left out of the sandbox.

A graded run executes the setup cell, the solution cells (the submission's code) and
the test cells (each exercise's single definition). A lesson cell only teaches unless
something that runs after it depends on it, and most do not (plots, timings, printed
examples): on a 2-core machine they were a third to a half of every sandboxed run. So,
reading the cells from the last one back, a lesson cell runs when

- it **binds a name** that a cell running after it reads (an assignment, ``def``,
  ``class``, ``import``, a ``for``/``with``/``except`` target, ``del``, a walrus);
- it **may change an object** such a cell reads: it stores into it (``x[i] = v``,
  ``x.a = v``), calls a method on it other than the read-only ones of arrays and
  containers (``x.append(v)``; ``x.sum()`` is read-only), passes it as ``out=``, or
  passes it to a function of the notebook whose cell changes objects itself;
- it **changes state beyond its names**: JAX's configuration, a global mesh, caches,
  monitoring listeners, the environment, the working directory, files, the global
  random state of NumPy or ``random``, warning or logging settings, print options, an
  attribute of a module, or it runs dynamic code (``exec``, ``globals()``...).

Names follow Python's scope rules (a function's parameters and locals, and a
comprehension's variables, are not the notebook's names). A cell that does not parse
(an IPython magic) runs; a notebook whose code declares ``global`` names or reads
IPython's output history (``_``, ``Out``) runs whole. An import binds its names and
nothing else: a cell that reaches a submodule through another cell's import of it
(``jax.experimental.pallas`` through ``jax``) must import it itself. Solution sources
come from the submission, so each run has its own set; the reference run's comes from
the instructor's solutions. Test cells run in a copy of the namespace
(source/README.md), and try-it cells never run when graded.
"""
from __future__ import annotations

import ast
import symtable

from grader import notebook as _nb
from grader.policy import dotted, opens_for_writing, root_name

# A call changes state beyond the cell's names when its dotted path ends with one of
# these, or starts with one of the roots (``np.random.normal``, ``logging.getLogger``).
_EFFECT_SUFFIXES = (
    "config.update", "set_mesh", "use_mesh", "clear_caches", "clear_backends",
    "set_printoptions", "setrecursionlimit", "write_text", "write_bytes", "mkdir",
    "makedirs", "unlink", "rmdir", "rmtree", "rename", "touch",
    "chdir", "putenv", "savefig", "save", "savez", "savez_compressed", "dump", "to_csv",
    "addHandler", "removeHandler", "setLevel", "basicConfig", "captureWarnings",
    # JAX's scoped settings, called outside a ``with`` (as a ``with`` item they end
    # with their block)
    "enable_x64", "disable_jit", "debug_nans", "debug_infs", "debug_key_reuse",
    "log_compiles", "explain_cache_misses", "default_device", "default_matmul_precision",
    "transfer_guard", "numpy_rank_promotion", "numpy_dtype_promotion", "checking_leaks",
)
# A call whose last name starts with one of these fills a global registry
# (``jax.tree_util.register_pytree_node``, ``register_dataclass``...).
_REGISTERS = ("register",)
_EFFECT_ROOTS = ("os", "sys", "warnings", "logging", "random", "np.random", "numpy.random",
                 "jax.monitoring", "jax.profiler", "shutil", "subprocess", "importlib",
                 "atexit", "signal", "threading", "multiprocessing", "ctypes", "builtins",
                 "gc", "pathlib", "tempfile", "socket")
# What the roots above may call without touching shared state.
_PURE_CALLS = ("default_rng", "Generator", "PCG64", "SeedSequence", "Philox", "SFC64",
               "os.path.join", "os.path.exists", "os.path.basename", "os.path.dirname",
               "os.path.getsize", "os.path.relpath", "os.path.isdir", "os.path.isfile",
               "os.listdir", "os.cpu_count", "os.getpid", "sys.getsizeof", "logging.getLogger",
               "pathlib.Path", "tempfile.mkdtemp", "tempfile.TemporaryDirectory",
               "tempfile.gettempdir")
_DYNAMIC = {"exec", "eval", "compile", "globals", "vars", "locals", "setattr", "delattr",
            "__import__", "breakpoint", "input"}
_HISTORY = {"_", "__", "___", "Out", "In", "_oh", "_ih", "get_ipython"}
# Methods of arrays, containers and compiled functions that change nothing.
_READ_ONLY = frozenset("""
    all any argmax argmin as_text astype at block_until_ready compile conj copy count cumsum
    dot endswith flatten format get index item items join keys lower max mean min prod ravel
    reshape round sharding shape squeeze startswith std sum swapaxes take tolist trace
    transpose values var view device devices addressable_data get_partition_spec
    is_equivalent_to cost_analysis memory_analysis split splitlines strip
""".split())


def _is_at(node: ast.AST) -> bool:
    """``x.at[i]``: its ``.set``/``.add``... return a new array."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "at")


def _is_effect(path: str) -> bool:
    if any(path == p or path.endswith("." + p) for p in _PURE_CALLS):
        return False
    if any(path == s or path.endswith("." + s) for s in _EFFECT_SUFFIXES):
        return True
    if path.rsplit(".", 1)[-1].startswith(_REGISTERS) and "." in path:
        return True
    return any(path == r or path.startswith(r + ".") for r in _EFFECT_ROOTS)


def _changes_outside(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names whose objects a function may change without having created them: its
    arguments and globals (``params[k] = v``, ``arg.append(v)``; a list it builds and
    appends to is its own). Module names among them are calls of module functions."""
    own = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
           and isinstance(n.ctx, ast.Store)}
    own -= {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    probe = _Cell("")
    for node in ast.walk(fn):
        probe._visit(node, set())
    return probe.changes - own


class _TopLevel(ast.NodeVisitor):
    """The names a cell binds and reads in the notebook's own scope.

    Function, lambda and class bodies are left to ``symtable`` (their reads of the
    notebook's names are their implicit globals); a comprehension's variables are its
    own (Python 3.12's ``symtable`` merges inlined comprehensions into the enclosing
    scope, which would make every ``[f(x) for x in xs]`` a use of a global ``x``).
    """

    def __init__(self, cell: _Cell):
        self.cell = cell
        self.local: list[set[str]] = []  # the variables of enclosing comprehensions
        # Names a read here cannot miss: bound earlier in the cell by a statement at its
        # top level (x = ...; import; def), or the variable of an enclosing for, with
        # or except block.
        self.definite: set[str] = set()
        self.bound: list[set[str]] = []
        self.current: set[str] = set()

    def bind(self, name: str, module: bool = False) -> None:
        self.cell.binds.add(name)
        self.current.add(name)
        (self.cell.modules if module else self.cell.assigned).add(name)

    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body:
            self.current = set()
            self.visit(stmt)
            if isinstance(stmt, (ast.Assign, ast.Import, ast.ImportFrom, ast.FunctionDef,
                                 ast.AsyncFunctionDef, ast.ClassDef)) or (
                    isinstance(stmt, ast.AnnAssign) and stmt.value is not None):
                self.definite |= self.current

    def visit_Name(self, node: ast.Name) -> None:
        if any(node.id in scope for scope in self.local):
            return
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.definite and not any(node.id in b for b in self.bound):
                self.cell.reads.add(node.id)
        else:
            self.bind(node.id)

    def _block(self, names: set[str], body: list) -> None:
        self.bound.append(names)
        for stmt in body:
            self.visit(stmt)
        self.bound.pop()

    def visit_For(self, node) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        self._block({n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)},
                    node.body)
        for stmt in node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node) -> None:
        names = set()
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
                names |= {n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)}
        self._block(names, node.body)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name)
        self._block({node.name} if node.name else set(), node.body)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.bind(node.target.id)  # the enclosing scope's, even in a comprehension
        self.visit(node.value)

    def _comprehension(self, node) -> None:
        names = {n.id for gen in node.generators for n in ast.walk(gen.target)
                 if isinstance(n, ast.Name)}
        self.visit(node.generators[0].iter)  # evaluated outside the comprehension
        self.local.append(names)
        for i, gen in enumerate(node.generators):
            if i:
                self.visit(gen.iter)
            for cond in gen.ifs:
                self.visit(cond)
        for part in ("elt", "key", "value"):
            if getattr(node, part, None) is not None:
                self.visit(getattr(node, part))
        self.local.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _import(self, node) -> None:
        for alias in node.names:
            self.bind(alias.asname or alias.name.split(".")[0], module=True)

    visit_Import = visit_ImportFrom = _import

    def _definition(self, node) -> None:
        # decorators, defaults and bases run here; the body is a scope of its own
        parts = list(getattr(node, "decorator_list", []))
        if isinstance(node, ast.ClassDef):
            parts += node.bases + [k.value for k in node.keywords]
        else:
            parts += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        for part in parts:
            self.visit(part)
        if not isinstance(node, ast.Lambda):
            self.bind(node.name)
            self.cell.functions.add(node.name)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _definition

    def _match_name(self, node) -> None:
        name = getattr(node, "name", None) or getattr(node, "rest", None)
        if name:
            self.bind(name)
        self.generic_visit(node)

    visit_MatchAs = visit_MatchStar = visit_MatchMapping = _match_name


class _Cell:
    """What one cell's syntax says: the names it binds and reads, the modules it
    imports, the functions it defines, what it may change, and its first effect."""

    def __init__(self, source: str):
        self.binds: set[str] = set()
        self.reads: set[str] = set()
        self.modules: set[str] = set()  # bound by an import
        self.assigned: set[str] = set()  # bound otherwise
        self.functions: set[str] = set()
        self.changes: set[str] = set()  # names whose objects it may change (any scope)
        self.stores: set[str] = set()  # the roots of x[i] = v and x.a = v
        self.calls_with: dict[str, set[str]] = {}  # function name -> names passed to it
        self.changers: dict[str, set[str]] = {}  # function -> what it may change
        self.effect = ""
        self.whole_notebook = ""  # a reason to run every cell of the notebook
        try:
            tree = ast.parse(source)
            table = symtable.symtable(source, "<cell>", "exec")
        except (SyntaxError, ValueError):
            self.effect = "does not parse as Python"
            return
        _TopLevel(self).visit(tree)
        todo = list(table.get_children())
        while todo:
            scope = todo.pop()
            todo += scope.get_children()
            for sym in scope.get_symbols():
                if sym.is_declared_global():
                    self.whole_notebook = f"declares {sym.get_name()} global"
                elif sym.is_global() and sym.is_referenced():
                    self.reads.add(sym.get_name())
        with_items = {id(item.context_expr) for node in ast.walk(tree)
                      if isinstance(node, (ast.With, ast.AsyncWith)) for item in node.items}
        for node in ast.walk(tree):
            self._visit(node, with_items)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.changers[node.name] = _changes_outside(node)

    def _say(self, effect: str) -> None:
        self.effect = self.effect or effect

    def _visit(self, node: ast.AST, with_items: set[int]) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in _HISTORY:
                self.whole_notebook = f"reads IPython's {node.id}"
            if node.id in _DYNAMIC:
                self._say(f"uses {node.id}()")
        elif isinstance(node, ast.Call):
            path = dotted(node.func)
            if not path and isinstance(node.func, ast.Attribute):
                path = node.func.attr  # a method of a value: Path(p).write_text(...)
            if path and id(node) not in with_items and _is_effect(path):
                self._say(f"calls {path}()")
            if path == "open" and opens_for_writing(node):
                self._say("opens a file for writing")
            if (isinstance(node.func, ast.Attribute) and node.func.attr not in _READ_ONLY
                    and not _is_at(node.func.value)):
                receiver = root_name(node.func.value)
                if receiver:
                    self.changes.add(receiver)
            for kw in node.keywords:
                if kw.arg == "out" and root_name(kw.value, False):
                    self.changes.add(root_name(kw.value, False))
            if isinstance(node.func, ast.Name):
                args = node.args + [k.value for k in node.keywords]
                passed = {root_name(a.value if isinstance(a, ast.Starred) else a, False)
                          for a in args}
                self.calls_with.setdefault(node.func.id, set()).update(passed - {None})
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(
                node.ctx, ast.Load):
            if root_name(node.value):
                self.changes.add(root_name(node.value))
                self.stores.add(root_name(node.value))
        elif isinstance(node, ast.AugAssign) and root_name(node.target):
            self.changes.add(root_name(node.target))


def needed_cells(rebuilt: dict) -> tuple[dict[int, str], str]:
    """``{index: why}`` of the code cells a graded run of ``rebuilt`` executes, and
    why every cell but the try-it cells runs when the analysis gives up (else ``""``).

    ``rebuilt`` is the notebook that runs (:func:`grader.notebook.rebuild`): its
    solution cells hold the submission's sources.
    """
    cells = rebuilt["cells"]
    # Try-it cells never run when graded, not even when the analysis gives up.
    code = [i for i, c in enumerate(cells)
            if c.get("cell_type") == "code" and not _nb.is_try_it(cells, i)]
    every = dict.fromkeys(code, "runs")
    facts = {i: _Cell(_nb.text(cells[i].get("source"))) for i in code}
    for i in code:
        if facts[i].whole_notebook:
            return every, f"cell {i} {facts[i].whole_notebook}"
    assigned = set().union(*(f.assigned for f in facts.values()))
    modules = set().union(*(f.modules for f in facts.values())) - assigned
    for f in facts.values():
        if f.stores & modules:
            f._say(f"changes the module {sorted(f.stores & modules)[0]}")
    # A notebook function that changes objects it did not create may change its arguments.
    changers = {name for f in facts.values() for name, changes in f.changers.items()
                if changes - modules}
    keep: dict[int, str] = {}
    needed: set[str] = set()
    for i in reversed(code):
        cell, f = cells[i], facts[i]
        changed = f.changes - modules
        for name in f.calls_with.keys() & changers:
            changed |= f.calls_with[name] - modules
        why = ("runs" if i == code[0] or _nb.is_solution(cell) or _nb.is_test(cell) else
               f.effect or _names("binds", f.binds & needed) or _names("may change",
                                                                      changed & needed))
        if why:
            keep[i] = why
            needed |= f.reads
    return keep, ""


def _names(what: str, names: set[str]) -> str:
    return f"{what} {', '.join(sorted(names)[:3])}" + (" ..." if len(names) > 3 else "") \
        if names else ""
