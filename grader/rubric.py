"""Each exercise's rubric: the requirements its statement states, each bound to the
checks that judge it, and the points they earn together.

The rubric is written in the exercise's test cell, right under its opening comment,
one line per requirement; the requirement is quoted from the statement (the exercise's
markdown and the solution's docstrings), so a test can prove that every rule a student
reads is judged::

    # rubric: "must not donate its inputs" -> assert_donates_nothing
    # rubric: "compile once per input shape" -> assert_train_step_compiles_once

A sentence of the statement that says "must", "use", "do not", "without", "never" or
"leave ... as" is a requirement; it is either bound by a rubric line (its quote lies
in the sentence) or declared not a rule, with the reason, in the same place::

    # not a rule: "without it the loop would run in Python" -- explains why, asks nothing

A requirement that cannot be judged is reworded as advice in the statement, never
left as a rule. An exercise's points are earned when every item passes (nbgrader
scores a test cell as a whole); the feedback of a failing check names the items bound
to it (``autograder.core.rubric``: the reference run records them).

``python -m autograder rubric MODULE`` prints the table; ``tests/test_rubric.py``
fails on a requirement without a check, a quote that is not in the statement, a check
that the test cell never calls, and a visible test that copies the solution
(:func:`visible_copies`).
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import json
import re
import textwrap
from pathlib import Path

from autograder.core import rubric as _rubric
from grader import notebook

_TRIGGER = re.compile(r"\b(must|use|do not|don't|does not|without|never|leaves?\b.{0,60}\bas\b)",
                      re.I)
_HEADING = re.compile(r"^#{2,3} Exercise\b", re.M)
_POINTS = re.compile(r"\((\d+) points?\)")


@dataclasses.dataclass(frozen=True)
class Item:
    requirement: str  # quoted from the statement
    checks: tuple[str, ...]  # the autograder checks that judge it


@dataclasses.dataclass(frozen=True)
class Exercise:
    solution_id: str
    test_id: str
    points: float
    statement: str  # the exercise's markdown and the solution's docstrings
    solution: tuple[str, ...]  # the code of each solution region
    visible: str
    hidden: str
    items: tuple[Item, ...]
    not_rules: tuple[tuple[str, str], ...]  # (quote, why)


def normalized(text: str) -> str:
    """Text as a quote is matched against it: no markdown emphasis or code marks, one
    space between words, lower case."""
    text = re.sub(r"[*`_]{1,3}(?=\S)|(?<=\S)[*`_]{1,3}", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def sentences(statement: str) -> list[str]:
    """The statement's sentences (list items and docstring lines joined), code blocks out."""
    text = re.sub(r"```.*?```", " ", statement, flags=re.S)
    parts = []
    for block in re.split(r"\n\s*\n|\n\s*[-*]\s+|\n\s*\d+\.\s+", text):
        block = " ".join(line.strip() for line in block.splitlines())
        parts += re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\"])", block)
    return [p.strip() for p in parts if p.strip() and not p.strip().startswith("#")]


def requirements(statement: str) -> list[str]:
    """The sentences that state a rule ("must", "use", "do not", "without", ...)."""
    return [s for s in sentences(statement) if _TRIGGER.search(normalized(s))]


def _docstrings(source: str) -> str:
    try:
        tree = ast.parse(notebook.stub_source(source))
    except SyntaxError:
        return ""
    docs = [ast.get_docstring(node) or "" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return "\n\n".join(d for d in docs if d)


def _solution_code(source: str) -> tuple[str, ...]:
    """Each solution region of a cell, dedented on its own (a cell may hold two: a
    function's body and the line that jits it)."""
    inside = re.findall(r"### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION", source, re.S | re.M)
    return tuple(textwrap.dedent(region) for region in inside)


def _statement_markdown(cells: list, sol_index: int) -> list[str]:
    """The markdown of an exercise: from its "## Exercise" heading (the last one above
    its solution cell, in the same cell as lessons or not) down to the solution cell;
    without a heading, the markdown cells right above it."""
    above = []
    for index in range(sol_index - 1, -1, -1):
        cell = cells[index]
        if notebook.is_solution(cell) or notebook.is_test(cell):
            break
        if cell.get("cell_type") != "markdown":
            continue
        text = notebook.text(cell["source"])
        headings = list(_HEADING.finditer(text))
        if headings:
            return [text[headings[-1].start():]] + above
        above.insert(0, text)
    index = sol_index
    while index > 0 and cells[index - 1].get("cell_type") == "markdown":
        index -= 1
    return [notebook.text(c["source"]) for c in cells[index:sol_index]]


def exercises(nb: dict) -> list[Exercise]:
    """The graded exercises of a source notebook, in order."""
    cells = nb["cells"]
    by_test = {}
    for index, tests in notebook.tests_of_solution(nb).items():
        for test in tests:
            by_test.setdefault(test, index)
    out = []
    for i, cell in enumerate(cells):
        if not notebook.is_test(cell):
            continue
        test_id = notebook.meta(cell)["grade_id"]
        sol_index = by_test.get(test_id)
        if sol_index is None:
            continue
        markdown = _statement_markdown(cells, sol_index)
        solution = notebook.text(cells[sol_index]["source"])
        source = notebook.text(cell["source"])
        visible, hidden = notebook.split_hidden(source)
        out.append(Exercise(
            solution_id=notebook.meta(cells[sol_index])["grade_id"], test_id=test_id,
            points=float(notebook.meta(cell).get("points", 0)),
            statement="\n\n".join(markdown + [_docstrings(solution)]),
            solution=_solution_code(solution), visible=visible, hidden=hidden,
            items=tuple(Item(quote, checks) for quote, checks in _rubric.items(visible)),
            not_rules=tuple((m["quote"].strip(), m["why"])
                            for m in _rubric.NOT_A_RULE.finditer(visible))))
    return out


def _called(source: str) -> set[str]:
    """Names of the functions a test cell calls (``f(...)`` and ``module.f(...)``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            out.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return out


def problems(ex: Exercise) -> list[str]:
    """What makes this exercise's rubric incomplete or wrong; [] when sound."""
    out = []
    statement = normalized(ex.statement)
    called = _called(ex.visible + "\n" + ex.hidden)
    if not ex.items:
        out.append(f"{ex.test_id}: no rubric line (# rubric: \"<quote>\" -> <check>)")
    for item in ex.items:
        if normalized(item.requirement) not in statement:
            out.append(f"{ex.test_id}: the rubric quotes {item.requirement!r}, which the "
                       "statement does not say")
        for check in item.checks:
            if check not in called:
                out.append(f"{ex.test_id}: rubric item {item.requirement!r} names {check}, "
                           "which the test cell never calls")
    for quote, _ in ex.not_rules:
        if normalized(quote) not in statement:
            out.append(f"{ex.test_id}: 'not a rule' quotes {quote!r}, which the statement "
                       "does not say")
    quotes = [normalized(q) for q in [i.requirement for i in ex.items] + [q for q, _ in ex.not_rules]]
    for sentence in requirements(ex.statement):
        for word in unbound(normalized(sentence), quotes):
            out.append(f"{ex.test_id}: a requirement with no check ({word!r}): {sentence!r}")
    return out


def unbound(sentence: str, quotes: list[str]) -> list[str]:
    """The rule words of a (normalized) sentence that no quote covers: each "must",
    "use", ... needs a quote around it, so that one quote cannot bind a sentence that
    states two rules."""
    spans = [(m.start(), m.start() + len(q)) for q in quotes if q
             for m in re.finditer(re.escape(q), sentence)]
    out = []
    for word in _TRIGGER.finditer(sentence):
        if not any(a <= word.start() and word.end() <= b for a, b in spans):
            out.append(word.group(0))
    return out


# ---------------------------------------------------------------- visible copies

_KEEP = {"jax", "jnp", "lax", "np", "optax", "pl", "pltpu", "functools", "math", "course"}
_MIN_NODES = 12  # an expression this large, written the same way, is the answer itself


class _Anonymous(ast.NodeTransformer):
    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id=node.id if node.id in _KEEP else "_"), node)

    def visit_arg(self, node):
        return ast.arg(arg="_")

    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(value=0), node)


def _expressions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and sum(1 for _ in ast.walk(node)) >= _MIN_NODES:
            yield node


def _shape(node: ast.AST) -> str:
    return ast.dump(_Anonymous().visit(copy.deepcopy(node)))


def visible_copies(ex: Exercise) -> list[str]:
    """Expressions of the solution that the visible test writes out the same way (names
    and constants aside): a visible test that computes the answer gives it away."""
    try:
        visible = ast.parse(ex.visible)
        regions = [ast.parse(region) for region in ex.solution]
    except SyntaxError as err:  # an instructor's cell that does not parse is a defect
        return [f"(the test or solution does not parse: {err})"]
    shapes = {_shape(n): ast.unparse(n) for tree in regions for n in _expressions(tree)}
    found = {shapes[s] for s in map(_shape, _expressions(visible)) if s in shapes}
    # The largest copies only: their parts are implied.
    return sorted((f for f in found if not any(f != g and f in g for g in found)), key=len)


# ---------------------------------------------------------------- the table

def load(module: str, root: Path = Path(".")) -> list[Exercise]:
    path = root / "source" / module / f"{module}.ipynb"
    return exercises(json.loads(path.read_text()))


def table(module: str, root: Path = Path(".")) -> str:
    exercises_ = load(module, root)
    rows = [("exercise", "requirement", "checks", "points")]
    for ex in exercises_:
        name = ex.solution_id.removeprefix(f"{module}_")
        for k, item in enumerate(ex.items):
            rows.append((name if k == 0 else "", item.requirement, ", ".join(item.checks),
                         f"{ex.points:g}" if k == 0 else ""))
        if not ex.items:
            rows.append((name, "(no rubric)", "", f"{ex.points:g}"))
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((34, 60, 48, 6))]
    lines = []
    for row in rows:
        lines.append("  ".join(c.ljust(w) if len(c) <= w else c for c, w in zip(row, widths)).rstrip())
    total = sum(ex.points for ex in exercises_)
    lines.append(f"\n{module}: {total:g} points; an exercise's points need every one of its items")
    return "\n".join(lines)
