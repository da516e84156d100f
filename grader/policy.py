"""The tampering policy, read from each solution cell's syntax tree.

Values cannot be forged (they are judged outside the sandbox against the instructor's
solution), but a few facts can only be observed inside the student's process
(compilations counted, keys reused at run time), and the test cells' code runs next
to the student's. A solution that reaches around the language to touch them has that
exercise's points *held for a person*: nbgrader marks the test cell as needing manual
grading, the Formgrader shows the reason, and no automatic full marks are given.

What counts (from the syntax tree, so names built at run time are no way out):
dynamic code (``exec``, ``eval``, ``compile``, ``__import__``), attributes set by a
computed name (``setattr``/``delattr``) or read by one from a module (``getattr`` on
an object's own fields is ordinary code), writes to
``globals()``/``vars()``/``locals()`` or to an imported module's attributes, frame,
code and interpreter internals (``sys._getframe``, ``f_back``, ``__globals__``,
``gc``, ``inspect``, ``ctypes``, audit and trace hooks, IPython's hooks), processes,
threads and signals, file writes (reading files and folders is not tampering: a
profiler's trace is found and read that way), JAX's private modules and its monitoring
hooks (through an alias or ``getattr`` with a constant name too),
the grader's private modules, names that only the grader's test cells define, and
rebinding the notebook's library names. Public helpers of ``course`` and
``autograder`` are not tampering.
"""
from __future__ import annotations

import ast
import builtins

from grader import notebook as _nb

_DYNAMIC = {"exec", "eval", "compile", "__import__", "globals", "vars", "breakpoint",
            "memoryview"}
_BY_NAME = {"getattr", "setattr", "delattr", "hasattr"}
_MODULES = {"ctypes", "gc", "inspect", "importlib", "builtins", "subprocess", "socket",
            "signal", "threading", "_thread", "multiprocessing", "concurrent", "asyncio",
            "marshal", "pickle", "dill", "cloudpickle", "code", "codeop", "runpy", "pty",
            "shutil", "tempfile", "IPython", "ipykernel", "traceback", "atexit", "weakref",
            "types", "sysconfig", "site", "faulthandler", "resource", "mmap", "fcntl",
            "nbformat", "nbclient", "jupyter_client", "zmq", "grader"}
# Reading sys.stdout/stderr is harmless (rebinding them is a module write, caught anyway).
_SYS = {"modules", "_getframe", "settrace", "setprofile", "addaudithook", "meta_path",
        "path_hooks", "path_importer_cache", "excepthook", "displayhook",
        "_current_frames", "setrecursionlimit", "audit", "monitoring",
        "set_asyncgen_hooks", "unraisablehook"}
_OS = {"system", "kill", "killpg", "fork", "forkpty", "_exit", "abort", "popen", "spawnl",
       "spawnv", "spawnve", "spawnlp", "execv", "execve", "execl", "execvp", "posix_spawn",
       "write", "open", "remove", "unlink", "rename", "replace", "rmdir", "removedirs",
       "symlink", "link", "chmod", "chown", "truncate", "ftruncate", "dup2", "putenv",
       "environ", "setsid", "setuid", "setgid", "chdir", "mkfifo", "makedirs", "mkdir"}
_DUNDERS = {"__globals__", "__code__", "__closure__", "__builtins__", "__dict__",
            "__subclasses__", "__bases__", "__mro__", "__base__", "__import__", "__loader__",
            "__spec__", "__getattribute__", "__reduce__", "__reduce_ex__", "__defaults__",
            "__kwdefaults__", "__self__", "__func__", "__init_subclass__", "__class_getitem__"}
_FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_code", "f_builtins", "tb_frame",
                "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame",
                "co_code", "co_consts", "co_names", "f_trace"}
_WRITE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "symlink_to", "chmod",
                  "hardlink_to", "rename", "touch", "mkdir"}
# Calls that open a file with a mode argument: ``open``, ``Path.open``, ``io.open``,
# ``io.FileIO``, ``os.fdopen``. Reading is not tampering; writing is (probe files).
_OPENERS = {"open", "FileIO", "fdopen"}
_JAX_PRIVATE = {"_src", "monitoring", "_config", "lib"}
def _submodules(package: str) -> frozenset[str]:
    """The modules and subpackages of ``package``, found without importing it."""
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec(package)
    where = list(spec.submodule_search_locations or []) if spec else []
    return frozenset(name for _, name, _ in pkgutil.iter_modules(where))


# The grader's own modules: every submodule of ``autograder`` (its subpackages hold the
# checks; students use only the names the package itself exports) and the private
# modules of ``course``.
_PRIVATE_SUBMODULES = {"autograder": _submodules("autograder"), "course": frozenset()}


def _private(package: str, name: str) -> bool:
    """Is ``package.name`` one of the grader's private modules or names?"""
    return name.startswith("_") or name in _PRIVATE_SUBMODULES.get(package, frozenset())


# Transfer-guard levels a solution may set: they only make JAX stricter.
_GUARD_KEPT = {"disallow", "disallow_explicit"}
_LIBRARY_ALIASES = {"jax", "jnp", "np", "numpy", "lax", "optax", "course", "autograder",
                    "random", "jr", "plt", "pl", "functools", "math", "sys", "os"}


def _names_bound(tree: ast.AST) -> set[str]:
    """Top-level names a cell defines (assignments, defs, classes, imports)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def _parse(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


class _Scan(ast.NodeVisitor):
    def __init__(self, modules: set[str], test_only: set[str], protected: set[str]):
        self.modules = set(modules)
        self.aliases: dict[str, str] = {}  # a name bound to a module: its root module
        self.test_only = test_only
        self.protected = protected
        self.found: list[str] = []

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    # imports -----------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(node, alias.name)
            self.modules.add((alias.asname or alias.name).split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._import(node, module)
        for alias in node.names:
            if module in ("autograder", "course") and _private(module, alias.name):
                self.flag(node, f"imports the private {module}.{alias.name}")
            if module == "jax" and alias.name in _JAX_PRIVATE:
                self.flag(node, f"imports jax.{alias.name}")
            if module in ("os", "sys") and alias.name in (_OS if module == "os" else _SYS):
                self.flag(node, f"imports {module}.{alias.name}")
            self.modules.add(alias.asname or alias.name)
        self.generic_visit(node)

    def _import(self, node: ast.AST, module: str) -> None:
        parts = module.split(".")
        if parts[0] in _MODULES:
            self.flag(node, f"imports {module}")
        if parts[0] in ("autograder", "course") and len(parts) > 1 and (
                _private(parts[0], parts[1]) or any(p.startswith("_") for p in parts[1:])):
            self.flag(node, f"imports the private module {module}")
        if parts[0] == "jax" and any(p in _JAX_PRIVATE for p in parts[1:]):
            self.flag(node, f"imports {module}")

    # calls -------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in _DYNAMIC:
                self.flag(node, f"calls {func.id}()")
            if func.id in _BY_NAME:
                self._by_name(node, func.id)
            if func.id in ("setattr", "delattr") and node.args and self._is_module(node.args[0]):
                self.flag(node, f"calls {func.id}() on a module")
            if func.id in _OPENERS and opens_for_writing(node):
                self.flag(node, "opens a file for writing")
            if func.id == "get_ipython":
                self.flag(node, "calls get_ipython()")
        if isinstance(func, ast.Attribute) and func.attr in _WRITE_METHODS:
            self.flag(node, f"calls .{func.attr}() (writes files)")
        if isinstance(func, ast.Attribute) and func.attr in _OPENERS and opens_for_writing(
                node, method=isinstance(func.value, ast.Call) or not self._is_module(func.value)):
            self.flag(node, f"calls .{func.attr}() to write a file")
        if (isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault", "pop",
                                                             "__setitem__", "clear")
                and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
                and func.value.func.id in ("globals", "vars", "locals")):
            self.flag(node, f"writes to {func.value.func.id}()")
        self._transfer_guard(node)
        self.generic_visit(node)

    def _transfer_guard(self, node: ast.Call) -> None:
        """The transfer guard loosened (``jax.transfer_guard("allow")``, any of its
        one-direction forms, or the ``jax_transfer_guard*`` flags): a check that runs the
        student's code under ``"disallow"`` (09_debugging's quiet_train) is switched off
        from inside by a thread-local setting. Tightening it is the student's own test."""
        path = dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute)
                                     else "")
        last = path.rsplit(".", 1)[-1]
        level = node.args[0] if node.args else None
        if last == "update" and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith("jax_transfer_guard"):
            level = node.args[1] if len(node.args) > 1 else None
        elif not last.startswith("transfer_guard"):
            return
        if not (isinstance(level, ast.Constant) and level.value in _GUARD_KEPT):
            shown = repr(level.value) if isinstance(level, ast.Constant) else "a computed level"
            self.flag(node, f"sets JAX's transfer guard to {shown}")

    def _by_name(self, node: ast.Call, fn: str) -> None:
        """``getattr``/``hasattr`` by a computed name reach anything only on a module (an
        object's own fields by name are ordinary code: a pytree's flatten); ``setattr``
        and ``delattr`` by a computed name are held anywhere. A constant name is judged
        as the attribute itself (``getattr(jax, '_src')`` is ``jax._src``)."""
        name = node.args[1] if len(node.args) > 1 else None
        constant = isinstance(name, ast.Constant) and isinstance(name.value, str)
        if not constant:
            if fn in ("setattr", "delattr") or (node.args and self._is_module(node.args[0])):
                self.flag(node, f"calls {fn}() with a computed attribute name")
            return
        ctx = ast.Store() if fn in ("setattr", "delattr") else ast.Load()
        self._attribute(ast.copy_location(ast.Attribute(node.args[0], name.value, ctx), node))

    # assignments ---------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        # An alias of a module is the module: ``m = jax`` then ``m.jit = ...``.
        if self._is_module(node.value) and isinstance(node.value, (ast.Name, ast.Attribute)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.modules.add(target.id)
                    self.aliases[target.id] = self._root(node.value) or target.id
        self.generic_visit(node)

    # attributes ----------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._attribute(node)
        self.generic_visit(node)

    def _root(self, node: ast.AST) -> str | None:
        """The name an expression hangs from, through the aliases of modules."""
        root = root_name(node)
        return self.aliases.get(root, root) if root is not None else None

    def _attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        root = self._root(node)
        if attr in _DUNDERS:
            self.flag(node, f"uses {attr}")
        if attr in _FRAME_ATTRS:
            self.flag(node, f"uses frame or code objects ({attr})")
        if root == "sys" and attr in _SYS and isinstance(node.value, ast.Name):
            self.flag(node, f"uses sys.{attr}")
        if root == "os" and attr in _OS and isinstance(node.value, ast.Name):
            self.flag(node, f"uses os.{attr}")
        if root in ("autograder", "course") and (attr.startswith("_") or (
                isinstance(node.value, ast.Name) and _private(root, attr))):
            self.flag(node, f"uses the private {root}.{attr}")
        if root == "jax" and attr in _JAX_PRIVATE and isinstance(node.value, ast.Name):
            self.flag(node, f"uses jax.{attr}")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and self._is_module(node.value):
            self.flag(node, f"rebinds the library attribute {dotted(node) or attr}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id in ("globals", "vars", "locals")):
            self.flag(node, f"writes to {node.value.func.id}()")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in self.test_only:
            self.flag(node, f"uses {node.id}, which only the grader's tests define")
        if isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in self.protected:
            self.flag(node, f"rebinds {node.id}, a name the notebook's checks use")
        if node.id in ("__builtins__", "__import__", "__loader__", "__spec__"):
            self.flag(node, f"uses {node.id}")

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if name in self.protected:
                self.flag(node, f"rebinds {name}, a name the notebook's checks use")

    def _is_module(self, node: ast.AST) -> bool:
        root = root_name(node)
        return root is not None and (root in self.modules or root in _LIBRARY_ALIASES)


def root_name(node: ast.AST, through_calls: bool = True) -> str | None:
    """The name an expression hangs from: ``x`` of ``x.a[0]``, and with
    ``through_calls`` of ``x.f().b`` (a method's receiver); else None."""
    kinds = (ast.Attribute, ast.Subscript, ast.Call) if through_calls else (
        ast.Attribute, ast.Subscript)
    while isinstance(node, kinds):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def dotted(node: ast.AST) -> str:
    """``a.b.c`` of a Name/Attribute chain; ``""`` for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def opens_for_writing(node: ast.Call, method: bool = False) -> bool:
    """Whether ``open(path, mode)`` (``method``: ``path.open(mode)``) may write: a mode
    with w, a, x or +, or a computed one."""
    position = 0 if method else 1
    mode = node.args[position] if len(node.args) > position else next(
        (k.value for k in node.keywords if k.arg == "mode"), None)
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True  # a computed mode


def context(source_nb: dict) -> tuple[set[str], set[str], set[str]]:
    """``(modules, test_only, protected)`` names of the instructor's notebook."""
    modules, defined, test_defined, protected = set(), set(dir(builtins)), set(), set()
    for cell in source_nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tree = _parse(_nb.text(cell.get("source")))
        if tree is None:
            continue
        names = _names_bound(tree)
        if _nb.is_test(cell):
            test_defined |= names
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "autograder":
                    protected |= {a.asname or a.name for a in node.names}
        else:
            defined |= names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
                protected |= {(a.asname or a.name).split(".")[0] for a in node.names}
    # Names the solutions may define themselves (a helper of the same name) are theirs.
    return modules, test_defined - defined, protected


def held_exercises(source_nb: dict, solutions: dict[str, str]) -> dict[str, list[str]]:
    """``{solution grade_id: [reason, ...]}`` for the solutions the policy holds."""
    modules, test_only, protected = context(source_nb)
    out = {}
    for gid, source in solutions.items():
        tree = _parse(source)
        if tree is None:
            continue  # a syntax error is the student's own failure, judged as usual
        scan = _Scan(modules, test_only - _names_bound(tree), protected)
        scan.visit(tree)
        if scan.found:
            out[gid] = sorted(set(scan.found), key=scan.found.index)
    return out


def held_tests(source_nb: dict, solutions: dict[str, str]) -> dict[str, str]:
    """``{test grade_id: message}`` for the test cells whose points are held."""
    held = held_exercises(source_nb, solutions)
    owners = _nb.tests_of_solution(source_nb)
    out = {}
    for index, cell in enumerate(source_nb["cells"]):
        gid = _nb.meta(cell).get("grade_id")
        if index in owners and gid in held:
            reasons = "; ".join(held[gid][:5])
            for test_id in owners[index]:
                out[test_id] = (
                    f"Held for review: the solution of {gid} reaches around the language "
                    f"({reasons}). A person will grade this exercise; it gets no automatic "
                    "points. Solutions need only JAX, NumPy and the course's public helpers.")
    return out
