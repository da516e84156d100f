"""Every module's exercises, judged as the grader judges them, agree with its variants.

In the sandbox, outside nbgrader: the source passes every exercise, a blank
submission fails every one, correct variants 0 and 1 pass, and wrong variants 0
and 1 fail exactly their own exercises. With tests/test_notebooks.py (the same
variants through plain nbgrader), this is what makes the pipeline's scores equal
plain nbgrader's on honest submissions.
"""
from __future__ import annotations

import pytest

from tests.conftest import modules
from tests.exercise_check import check


@pytest.mark.notebook
@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.xdist_group(f"spec-{m}"))
                                    for m in modules()])
def test_spec_agrees_with_variants(module):
    lines = []
    problems = check(module, show=lines.append)
    assert not problems, "\n".join(lines + problems)
