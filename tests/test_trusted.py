"""The trusted judge's messages: what a student reads when a probe fails."""
from __future__ import annotations

import numpy as np

from grader.trusted import Probe, judge_probe


def _ok(*leaves):
    return {"ok": True, "tree": "PyTreeDef(*)",
            "leaves": [("", "array" if isinstance(v, np.ndarray) else "json", v) for v in leaves]}


def test_matching_values_pass():
    assert judge_probe(Probe("f(x)"), _ok(np.ones(3)), _ok(np.ones(3))) is None


def test_wrong_values_name_the_call_and_the_worst_entry():
    msg = judge_probe(Probe("f(_x, jnp.ones(2))", section="1.2 Example"),
                      _ok(np.array([1.0, 5.0])), _ok(np.array([1.0, 2.0])))
    assert msg.startswith("f(...) on the grader's inputs does not match the reference solution")
    assert "worst at index (1,): expected 2, got 5" in msg
    assert "reread: section 1.2 Example" in msg
    assert "_x" not in msg  # the grader's inputs are not named in feedback


def test_a_missing_return_is_named():
    msg = judge_probe(Probe("f(x)"), _ok(None), _ok(np.ones(2)))
    assert "expected an array, got None (is a return statement missing?)" in msg


def test_not_implemented_and_errors():
    stub = {"ok": False, "error_type": "NotImplementedError", "error": ""}
    assert judge_probe(Probe("f(x)"), stub, _ok(np.ones(1))).startswith(
        "f(...) on the grader's inputs: not implemented yet")
    boom = {"ok": False, "error_type": "TypeError", "error": "bad operand"}
    assert "f(...) on the grader's inputs raised TypeError: bad operand" in judge_probe(
        Probe("f(x)"), boom, _ok(np.ones(1)))


def test_a_check_that_cannot_read_forged_facts_fails_with_a_message():
    def check(got, expected):
        return None if got["count"] == 1 else "compiled more than once"

    msg = judge_probe(Probe("facts()", compare=False, check=check), _ok("not a dict"), _ok(1))
    assert "the grader could not read this result (TypeError:" in msg
    assert judge_probe(Probe("facts()", compare=False, check=lambda g, e: "compiled twice"),
                       _ok(2), _ok(1)).endswith("facts(...) on the grader's inputs: compiled twice")
