"""The import graph of the project's packages: layers point down, no circles (issue 32).

Read from the source with ``ast`` (every ``import`` and ``from ... import``, at module
level or inside a function: a deferred import is still a dependency; imports under
``if TYPE_CHECKING:`` are not). Layers, lowest first: ``autograder`` (the student-side
check library, which runs next to student code) and ``course`` (the notebooks' helpers)
never import ``grader`` (the host-side pipeline).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("autograder", "course", "grader")
# Known arrows that close a circle: none. (The check core once imported the package to
# register every explainer and the artifact facts lazily; both now register themselves.)
KNOWN: set[tuple[str, str]] = set()


def import_graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports."""
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                # `from package import submodule` depends on the submodule.
                found |= set(subs) if len(subs) == len(node.names) else {base, *subs}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = import_graph()
    for a, b in KNOWN:
        assert b in graph[a], f"{a} no longer imports {b}: drop it from KNOWN"
        graph[a] = graph[a] - {b}
    assert circles(graph) == [], "import circles (a module reaches itself through these)"


# `python -m autograder ...` is the instructor's command line: its entry point hands over
# to the grader, and no library module imports it.
ENTRY_POINTS = {"autograder.__main__"}


def test_lower_layers_never_import_the_grader():
    graph = import_graph()
    upward = sorted((a, b) for a, targets in graph.items() for b in targets
                    if not a.startswith("grader") and a not in ENTRY_POINTS
                    and b.split(".")[0] == "grader")
    assert not any(a in ENTRY_POINTS for targets in graph.values() for a in targets)
    assert upward == []
    assert not any(b.startswith("autograder") for b in graph["course"]), \
        "course (the notebooks' helpers) does not need the check library"


def test_the_graph_reader_finds_circles_and_arrows():
    graph = import_graph()
    assert "grader.notebook" in graph["grader.runner"]
    assert "autograder.core.check" in graph["autograder.core.numeric"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def package_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """subpackage of ``package`` -> the other subpackages its modules import."""
    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        parts = name.split(".")
        if parts[0] != package or len(parts) < 3:
            continue
        out.setdefault(parts[1], set()).update(
            t.split(".")[1] for t in targets
            if t.split(".")[0] == package and t.count(".") >= 2 and t.split(".")[1] != parts[1])
    return out


def test_the_check_library_is_layered():
    """``autograder``'s subpackages: ``core`` (the check vocabulary) imports nothing else,
    ``programs`` (export and the facts read from programs) only ``core``, and the topic
    packages (one per chapter) import those two and each other without a circle."""
    packages = package_graph(import_graph(), "autograder")
    assert {"core", "programs", "pallas", "sharding", "random"} <= set(packages)
    assert packages["core"] == set(), "core imports another subpackage"
    assert packages["programs"] <= {"core"}, f"programs imports {packages['programs']}"
    assert circles(packages) == [], "subpackages of autograder import each other"
    flat = [p.name for p in (ROOT / "autograder").glob("_*.py")
            if p.name not in ("__init__.py", "__main__.py")]
    assert flat == [], f"modules outside the subpackages: {flat}"


# The grading pipeline reads top down: the command line and the nbgrader plugins call
# the pipeline, the pipeline its tasks, a task the runner, the runner the sandbox and
# the judge. The ledger, recording, notebook and policy modules sit beside it and call
# none of them back.
PIPELINE = ["grader.pipeline", "grader.tasks", "grader.runner", "grader.sandbox"]
BESIDE = ["grader.ledger", "grader.notebook", "grader.policy", "grader.judge",
          "grader.recording", "grader.lessons", "grader.kernels"]


def test_the_pipeline_calls_down_and_nothing_beside_it_calls_back():
    graph = import_graph()

    def reaches(module: str) -> set[str]:
        return {t for t in graph[module]} | {t for name, targets in graph.items()
                                             if name.startswith(module + ".")
                                             for t in targets}

    for i, upper in enumerate(PIPELINE):
        for lower in PIPELINE[i + 1:]:
            back = {t for t in reaches(lower) if t == upper or t.startswith(upper + ".")}
            assert not back, f"{lower} imports {sorted(back)}, above it in the pipeline"
    for module in BESIDE:
        back = {t for t in reaches(module) for step in PIPELINE
                if t == step or t.startswith(step + ".")}
        assert not back, f"{module} (beside the pipeline) imports {sorted(back)}"


def test_notebooks_import_one_flat_namespace():
    """``from autograder import ...`` names checks, never a subpackage: the
    subpackages are the grader's own (the tamper policy holds a solution that imports
    one), and no public name is shadowed by one."""
    import types

    import autograder
    from grader.policy import _PRIVATE_SUBMODULES

    assert not [n for n in autograder.__all__
                if isinstance(getattr(autograder, n), types.ModuleType)]
    assert not set(autograder.__all__) & _PRIVATE_SUBMODULES["autograder"]
    assert {"core", "programs", "pallas"} <= _PRIVATE_SUBMODULES["autograder"]
    assert "assert_matches_reference" in autograder.__all__


def test_every_module_says_what_it_holds_and_stays_readable():
    """Every module of the three packages opens with a docstring, and none is over
    500 lines unless its docstring says why (issue 32)."""
    problems = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text()
            doc = ast.get_docstring(ast.parse(source)) or ""
            if not doc.strip():
                problems.append(f"{path.relative_to(ROOT)}: no docstring")
            if source.count("\n") > 500 and "500 lines" not in doc:
                problems.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines, "
                                "and its docstring does not say why it is over 500")
    assert problems == []


def test_the_grader_starts_its_sandboxes_without_jax_fork_warnings():
    """The grader imports JAX, then starts sandboxes with subprocess (fork, then exec at
    once): JAX's warning that a fork may deadlock printed once per sandbox in `make
    bench`. Importing the grader silences it for subprocess's fork only."""
    import subprocess
    import sys

    script = ("import sys, subprocess\n"
              "if sys.argv[1] == 'grader':\n    import grader\n"
              "import jax, jax.numpy as jnp\n"
              "jnp.ones(3).block_until_ready()\n"
              "subprocess.run(['true'], preexec_fn=lambda: None)\n")
    runs = {which: subprocess.run([sys.executable, "-c", script, which], cwd=ROOT,
                                  capture_output=True, text=True, timeout=120)
            for which in ("plain", "grader")}
    assert "os.fork() was called" in runs["plain"].stderr  # the warning this is about
    assert runs["grader"].returncode == 0 and "os.fork()" not in runs["grader"].stderr
