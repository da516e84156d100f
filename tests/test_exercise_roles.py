"""No exercise twice: one role, one function, one signature across the whole course.

Lists the function every solution cell defines (the name in its grade_id) with its
signature, for every module, and fails when two exercises have the same role:

- the same words in their names, in any order, singular or plural, with filler verbs
  dropped (``sqrt_newton`` and ``newton_sqrt``; ``huber`` twice;
  ``make_train_step(loss_fn, optimizer)`` and ``make_train_step(optimizer, loss_fn)``,
  the same function with its arguments swapped);
- near-identical names (a spelling variant of the same words);
- the same parameters under names that share most of their words.

A capstone may *use* what earlier modules taught; it must not ask for the same
function again. Run ``pytest tests/test_exercise_roles.py -s`` to print the table.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools

import nbformat
import pytest

from tests.conftest import REPO, modules

# Words that name an action every exercise could have, not a role.
FILLER = {"make", "build", "get", "compute", "do", "my", "the", "a", "fn", "func", "function",
          "to", "of"}
SYNONYMS = {"gradient": "grad", "gradients": "grad", "grads": "grad", "sqrt": "sqrt",
            "square_root": "sqrt"}
NEAR_IDENTICAL = 0.9     # difflib ratio of the normalized names
SAME_PARAMS_OVERLAP = 0.5  # word overlap (Jaccard) that, with equal parameters, is one role


@dataclasses.dataclass(frozen=True)
class Exercise:
    module: str
    grade_id: str
    name: str
    params: tuple[str, ...]      # positional and keyword parameter names, in order
    signature: str

    @property
    def words(self) -> frozenset[str]:
        return role_words(self.name)


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def role_words(name: str) -> frozenset[str]:
    """The words of a function name that say what it is for.

    >>> sorted(role_words("make_train_step")), sorted(role_words("per_example_grads"))
    (['step', 'train'], ['example', 'grad', 'per'])
    """
    words = [SYNONYMS.get(w, w) for w in name.lower().strip("_").split("_") if w]
    return frozenset(_singular(w) for w in words if w not in FILLER)


def _signature(fn: ast.FunctionDef) -> tuple[tuple[str, ...], str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args]
    defaults = [None] * (len(names) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    parts = [n if d is None else f"{n}={d}" for n, d in zip(names, defaults)]
    if a.vararg:
        parts.append(f"*{a.vararg.arg}")
    elif a.kwonlyargs:
        parts.append("*")
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        parts.append(p.arg if d is None else f"{p.arg}={ast.unparse(d)}")
    if a.kwarg:
        parts.append(f"**{a.kwarg.arg}")
    return tuple(names + [p.arg for p in a.kwonlyargs]), f"{fn.name}({', '.join(parts)})"


def exercises() -> list[Exercise]:
    """Every solution cell's function, in course order."""
    found = []
    for module in modules():
        for path in sorted((REPO / "source" / module).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
                if cell.cell_type != "code" or not meta.get("solution") or meta.get("grade"):
                    continue
                gid = meta["grade_id"]
                wanted = gid[len(module) + 1:] if gid.startswith(module + "_") else gid
                defs = [n for n in ast.parse(cell.source).body
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                fn = next((d for d in defs if d.name == wanted), defs[0] if defs else None)
                assert fn is not None, f"{gid}: the solution cell defines no function"
                params, sig = _signature(fn)
                found.append(Exercise(module, gid, fn.name, params, sig))
    return found


def same_role(a: Exercise, b: Exercise) -> str | None:
    """Why ``a`` and ``b`` are one exercise twice, or ``None``."""
    if a.words == b.words:
        how = "the same name" if a.name == b.name else "the same words in their names"
        if a.name == b.name and a.params != b.params and sorted(a.params) == sorted(b.params):
            how += ", with the arguments swapped"
        return how
    ratio = difflib.SequenceMatcher(None, "_".join(sorted(a.words)),
                                    "_".join(sorted(b.words))).ratio()
    if ratio >= NEAR_IDENTICAL:
        return f"near-identical names (similarity {ratio:.2f})"
    union = a.words | b.words
    overlap = len(a.words & b.words) / len(union) if union else 0.0
    if len(a.params) >= 2 and sorted(a.params) == sorted(b.params) and overlap >= SAME_PARAMS_OVERLAP:
        return f"the same parameters and most of the same words (overlap {overlap:.2f})"
    return None


def table(items: list[Exercise]) -> str:
    width = max(len(e.grade_id) for e in items)
    return "\n".join(f"  {e.grade_id:{width}s}  {e.signature}" for e in items)


def test_every_exercise_defines_the_function_its_grade_id_names():
    wrong = [f"{e.grade_id}: defines {e.name}" for e in exercises()
             if not e.grade_id.endswith("_" + e.name)]
    assert not wrong, "solution cells whose function is not named after the grade_id:\n" + \
        "\n".join(wrong)


def test_no_two_exercises_have_the_same_role():
    items = exercises()
    print("\nEvery exercise of the course:\n" + table(items))
    clashes = [f"  {a.grade_id} `{a.signature}` and {b.grade_id} `{b.signature}`: {why}"
               for a, b in itertools.combinations(items, 2) if (why := same_role(a, b))]
    assert not clashes, ("two exercises with the same role (keep the better one, with one "
                         "signature):\n" + "\n".join(clashes) + "\n\nAll exercises:\n" + table(items))


def _ex(name: str, *params: str, module: str = "m") -> Exercise:
    return Exercise(module, f"{module}_{name}", name, tuple(params), f"{name}({', '.join(params)})")


@pytest.mark.parametrize("a, b", [
    (_ex("sqrt_newton", "a", "steps"), _ex("newton_sqrt", "a", "tol", "max_steps")),
    (_ex("huber", "r", "delta"), _ex("huber", "r", "delta")),
    (_ex("make_train_step", "loss_fn", "optimizer"), _ex("make_train_step", "optimizer", "loss_fn")),
    (_ex("per_example_grads", "params", "x"), _ex("per_example_gradients", "params", "x")),
    (_ex("pairwise_distance", "x", "y"), _ex("pairwise_distances", "x", "y")),
])
def test_the_rule_catches_the_duplicates_issue_17_found(a, b):
    assert same_role(a, b)


def test_swapped_arguments_are_named():
    why = same_role(_ex("make_train_step", "loss_fn", "optimizer"),
                    _ex("make_train_step", "optimizer", "loss_fn"))
    assert why == "the same name, with the arguments swapped"


@pytest.mark.parametrize("a, b", [
    (_ex("make_keys", "seed", "n"), _ex("example_keys", "key", "n")),
    # 02's per-example gradients and 07's per-example gradient norms, as they are.
    (_ex("per_example_grads", "params", "xs", "ys"),
     _ex("per_example_grad_norms", "loss_fn", "params", "x", "y")),
    (_ex("make_train_step", "optimizer", "loss_fn"), _ex("make_fsdp_step", "optimizer", "loss_fn")),
    (_ex("newton_step", "f", "x"), _ex("newton_sqrt", "a", "tol", "max_steps")),
    (_ex("dp_train_step", "params", "x", "y", "lr"),
     _ex("ensemble_sgd_step", "params", "x", "y", "lr")),
])
def test_the_rule_leaves_different_roles_alone(a, b):
    assert same_role(a, b) is None
