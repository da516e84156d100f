"""How a submission's exported program is tied to the function that was graded.

Every structure check first asks :func:`explain_program`: the program could be judged,
it uses no refused op, and on the grader's inputs it computes the reference's values
(within :data:`TIE_TOLERANCE`) or, for a check of a function's form, returns the
reference's output tree, shapes and dtype kinds. :mod:`autograder.programs.artifacts`
re-exports these names.
"""
from __future__ import annotations

from typing import Any

import numpy as np


# How close a submission's program must come to the reference's on the grader's
# inputs. This only ties the program to the function that was graded (the values are
# judged by the value checks, with the exercise's tolerances), so it is loose enough
# for another correct formulation's float32 rounding over many loop steps.
TIE_TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


def program_facts(obs: Any) -> list[dict]:
    """The per-program facts of a derived observation (``[]`` when there are none)."""
    facts = getattr(obs, "facts", None)
    return facts if isinstance(facts, list) else []


def _layout(obs) -> list[tuple]:
    """(path, shape, dtype kind) of each leaf of a tree observation."""
    return [(leaf.path, leaf.shape, np.dtype(leaf.value.dtype).kind if leaf.kind in (
        "array", "scalar") else leaf.kind) for leaf in obs.leaves]


def _describe_layout(obs) -> str:
    return ", ".join(f"{path or 'output'}: {shape} {kind}"
                     for path, shape, kind in _layout(obs))[:300]


def explain_program(observed, expected, *, label: str, section: str | None = None,
                    rtol: float = 1e-4, atol: float = 1e-5, tie: str = "values") -> str | None:
    """What every structure check says first: the program could not be judged, it uses
    refused ops, or (when grading) it is not a program of the graded function.

    ``tie`` says how a submission's program is tied to the reference's on the grader's
    inputs: ``"values"``, it computes the reference's values (within ``rtol``/``atol``);
    ``"layout"``, its outputs have the reference's tree, shapes and dtype kinds, for
    checks of a function's form whose contract allows other values (an epoch that
    samples its batches its own way: its values are judged by the value checks)."""
    from autograder.core.feedback import format_failure

    facts = program_facts(observed)
    if not facts:
        return format_failure(f"the grader got no program for {label}", section=section)
    for i, f in enumerate(facts):
        if not isinstance(f, dict) or f.get("error"):
            return format_failure(f"the grader could not judge the program of {label}",
                                  got=str(f.get("error") if isinstance(f, dict) else f),
                                  section=section)
        if f.get("refused"):
            return format_failure(
                f"the program of {label} uses what the grader does not run: "
                + ", ".join(map(str, f["refused"][:5])),
                cause="a host callback (jax.debug.print, jax.debug.callback, "
                      "jax.pure_callback, io_callback) or an operation outside plain JAX",
                fix="remove callbacks and prints from the graded function", section=section)
    if expected is not None:
        mine, theirs = observed.outputs, getattr(expected, "outputs", ())
        for i, (o, e) in enumerate(zip(mine, theirs)):
            if e.tree == "PyTreeDef(None)" or not e.leaves:
                continue
            if tie == "layout":
                if o.tree != e.tree or _layout(o) != _layout(e):
                    return format_failure(
                        f"the program exported from {label} does not return what the "
                        "reference's returns on the grader's inputs",
                        expected=_describe_layout(e), got=_describe_layout(o),
                        cause="the function that was compiled is not the one that was graded",
                        section=section)
                continue
            message = explain_values_tie(o, e, label=label, section=section, rtol=rtol,
                                         atol=atol)
            if message:
                return message
    return None


def explain_values_tie(outputs, reference_outputs, *, label: str, section: str | None = None,
                       rtol: float = TIE_TOLERANCE["rtol"],
                       atol: float = TIE_TOLERANCE["atol"]) -> str | None:
    """The message when a program's outputs on the grader's inputs are not the
    reference's (tree observations): it is not a program of the graded function."""
    from autograder.core.feedback import format_failure
    from autograder.core.numeric import explain_tree

    message = explain_tree(outputs, reference_outputs,
                           label=f"the program exported from {label}", rtol=rtol, atol=atol,
                           dtype="kind")
    if not message:
        return None
    return format_failure(
        f"the program exported from {label} does not compute the reference's values on "
        "the grader's inputs", details=message.splitlines()[1:4],
        cause="the function that was compiled is not the one that was graded",
        section=section)
