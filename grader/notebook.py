"""Notebooks as the grader sees them: cell kinds, the rebuilt submission, stubs.

The notebook that runs is rebuilt from the instructor's source: only the source of
the solution cells comes from the submission (matched by grade_id; the first copy
wins; a missing one gets the release stub). Outputs, metadata, the kernel, edited or
deleted test cells and extra files of the submission change nothing.

In the sandbox every graded test cell runs its whole source (visible and hidden
checks: the exercise's single definition) through ``autograder.core.check.run_test_cell``,
in a private namespace, recording what each check observed; try-it cells do not run,
nor do lesson cells that nothing graded depends on (``grader.lessons``); the notebook
that runs is built by ``grader.runner.sandbox_notebook``.
"""
from __future__ import annotations

import copy
import re

_STUB = re.compile(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[ \t]*$", re.S | re.M)
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS", re.M)
TEST_TAG = "jaxcourse_test"
DEFAULT_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def meta(cell) -> dict:
    """The nbgrader metadata of a cell; ``{}`` when absent or malformed."""
    md = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = md.get("nbgrader") if isinstance(md, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def is_solution(cell) -> bool:
    m = meta(cell)
    return bool(m.get("solution")) and not m.get("grade") and cell.get("cell_type") == "code"


def is_test(cell) -> bool:
    m = meta(cell)
    return bool(m.get("grade")) and not m.get("solution") and cell.get("cell_type") == "code"


def text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def test_ids(nb: dict) -> list[str]:
    """The graded test cells' grade_ids, in notebook order."""
    return [meta(c)["grade_id"] for c in nb["cells"] if is_test(c)]


def test_sources(nb: dict) -> dict[str, str]:
    return {meta(c)["grade_id"]: text(c.get("source")) for c in nb["cells"] if is_test(c)}


def submitted_solutions(submission: dict | None, wanted=None) -> dict[str, str]:
    """``{grade_id: source}`` of the solution cells of a submission (first one wins).

    With ``wanted`` (the source's solution ids), a cell counts by its grade_id alone:
    a submission that flips a cell's flags in its metadata still has that cell read.
    """
    found: dict[str, str] = {}
    cells = submission.get("cells", []) if isinstance(submission, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        gid = meta(cell).get("grade_id")
        if not isinstance(gid, str) or gid in found:
            continue
        if (gid in wanted) if wanted is not None else is_solution(cell):
            found[gid] = text(cell.get("source"))
    return found


def _top_level_names(source: str) -> set[str]:
    """Names a cell defines at its top level (functions, classes, imports, plain
    assignments); IPython's magics and shell lines are skipped, a cell that does not
    parse defines nothing."""
    import ast

    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def added_definitions(source_nb: dict, submission: dict | None) -> list[str]:
    """Names that a submission defines only in code cells the grader does not run (cells
    the student added: no solution cell of theirs and no cell of the source defines
    them). Grading runs the solution cells, so an answer that needs one fails with a
    NameError; the feedback says why (:func:`note_added_names`)."""
    cells = submission.get("cells", []) if isinstance(submission, dict) else []
    known: set[str] = set()
    for cell in source_nb.get("cells", []):
        if cell.get("cell_type") == "code":
            known |= _top_level_names(text(cell.get("source")))
    added: set[str] = set()
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        names = _top_level_names(text(cell.get("source")))
        if isinstance(meta(cell).get("grade_id"), str):
            known |= names  # a solution cell (or any cell the grader knows) runs
        else:
            added |= names
    return sorted(added - known)


def note_added_names(message: str, added: list[str]) -> str:
    """``message`` with a note when it reports a NameError and the submission defines
    names only in cells the student added (the error's own text may be withheld, as for
    a hidden check, so every such name is listed: the first five).

    >>> print(note_added_names("f raised NameError", ["helper"]))
    f raised NameError
      note: `helper` is defined only in a cell you added; grading runs the solution cells (and the lessons they need), not added ones: move it into a solution cell
    >>> note_added_names("f raised TypeError", ["helper"])
    'f raised TypeError'
    """
    if not added or "NameError" not in (message or ""):
        return message
    names = added[:5]
    shown = ", ".join(f"`{n}`" for n in names) + (", ..." if len(added) > 5 else "")
    return (f"{message}\n  note: {shown} {'is' if len(added) == 1 else 'are'} defined only "
            "in a cell you added; grading runs the solution cells (and the lessons they "
            "need), not added ones: move it into a solution cell")


def stub_source(source: str, stub: str = DEFAULT_STUB) -> str:
    """The release version of a solution cell (what a blank submission contains).

    >>> print(stub_source("def f(x):\\n    ### BEGIN SOLUTION\\n    return x\\n    ### END SOLUTION\\n"))
    def f(x):
        # YOUR CODE HERE
        raise NotImplementedError()
    <BLANKLINE>
    """
    def indent(match):
        return "\n".join(match.group(1) + line for line in stub.splitlines())
    return _STUB.sub(indent, source)


def rebuild(source_nb: dict, solutions: dict[str, str], stubs: dict[str, str]) -> dict:
    """The instructor's notebook with the submission's solution sources in it."""
    nb = copy.deepcopy(source_nb)
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if is_solution(cell):
            gid = meta(cell)["grade_id"]
            cell["source"] = solutions.get(gid, stubs.get(gid, ""))
    return nb


def is_try_it(cells: list, index: int) -> bool:
    """A plain code cell right after a solution cell: where students try their code."""
    cell = cells[index]
    return (index > 0 and cell.get("cell_type") == "code" and not meta(cell)
            and is_solution(cells[index - 1]))


def tests_of_solution(nb: dict) -> dict[int, list[str]]:
    """Cell index of each solution cell -> the test cells that grade it."""
    cells = nb["cells"]
    tests = [(i, meta(c)["grade_id"]) for i, c in enumerate(cells) if is_test(c)]
    out = {}
    for i, cell in enumerate(cells):
        if is_solution(cell):
            gid = meta(cell)["grade_id"]
            named = [t for _, t in tests if t == f"test_{gid}"]
            following = [t for j, t in tests if j > i][:1]
            out[i] = named or following
    return out


def split_hidden(source: str) -> tuple[str, str]:
    """``(visible, hidden)``: a test cell's code before its first ``### BEGIN HIDDEN
    TESTS`` line, and from that line on ("" when it has none).

    >>> split_hidden("check(f)\\n### BEGIN HIDDEN TESTS\\ncheck(g)\\n### END HIDDEN TESTS\\n")
    ('check(f)\\n', '### BEGIN HIDDEN TESTS\\ncheck(g)\\n### END HIDDEN TESTS\\n')
    """
    match = _HIDDEN.search(source)
    if match is None:
        return source, ""
    return source[:match.start()], source[match.start():]


def hidden_lines(nb: dict) -> list[str]:
    """The stripped lines of every test cell's hidden tests (what feedback never shows)."""
    out = []
    for cell in nb.get("cells", []):
        if is_test(cell):
            out += [line.strip() for line in split_hidden(text(cell.get("source")))[1].splitlines()]
    return [line for line in out if line]


def result_files(test_ids_: list[str]) -> tuple[str, ...]:
    return tuple(f"probe/{t}.{ext}" for t in test_ids_ for ext in ("json", "npz"))
