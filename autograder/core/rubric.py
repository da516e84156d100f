"""The rubric lines of a test cell: which requirement each check judges.

A test cell lists its rubric under its opening comment (``source/README.md``)::

    # rubric: "must not donate its inputs" -> assert_donates_nothing

When a test cell runs in a grading sandbox, each record keeps the requirements bound
to the check that made it (:func:`by_check`); the grader reads them from the
reference run only, and a failing check's feedback names them. ``grader.rubric`` reads
the same lines to prove that every rule of a statement is bound.
"""
from __future__ import annotations

import re

LINE = re.compile(r'^\s*#\s*rubric:\s*"(?P<quote>[^"]+)"\s*->\s*(?P<checks>[\w, ]+?)\s*$', re.M)
NOT_A_RULE = re.compile(r'^\s*#\s*not a rule:\s*"(?P<quote>[^"]+)"\s*--\s*(?P<why>.+?)\s*$',
                        re.M)


def items(source: str) -> list[tuple[str, tuple[str, ...]]]:
    """``[(requirement, (check, ...)), ...]`` in the order the cell lists them."""
    return [(m["quote"].strip(), tuple(c.strip() for c in m["checks"].split(",") if c.strip()))
            for m in LINE.finditer(source)]


def by_check(source: str) -> dict[str, tuple[str, ...]]:
    """``{check name: (requirement, ...)}``: what a failing check leaves unmet."""
    out: dict[str, tuple[str, ...]] = {}
    for requirement, checks in items(source):
        for check in checks:
            out[check] = out.get(check, ()) + (requirement,)
    return out
