"""The trusted judge: a submission's records against the reference's, outside the sandbox."""
from __future__ import annotations

import numpy as np

from autograder import _wire
from grader.judge import judge_cell


def _tree(*values):
    leaves = tuple(_wire.observe_leaf(f"[{i}]" if len(values) > 1 else "", v)
                   for i, v in enumerate(values))
    tree = "PyTreeDef(*)" if len(values) == 1 else f"PyTreeDef(({', '.join('*' * len(values))},))"
    return _wire.Observation("tree", tree=tree, leaves=leaves)


def _ref(*records, stopped=""):
    return _wire.CellResult("test_x", tuple(records), stopped)


def _rec(observed, expected=None, label="f(x=f32[2])", **params):
    return _wire.Record("values", label, {"rtol": 1e-5, "atol": 1e-6, "dtype": "kind",
                                          "section": "1.2 Example", **params},
                        observed, expected)


def test_matching_values_pass():
    ref = _ref(_rec(_tree(np.ones(2)), _tree(np.ones(2))))
    assert judge_cell(ref, _ref(_rec(_tree(np.ones(2))))).passed


def test_wrong_values_are_explained_with_the_reference_parameters():
    ref = _ref(_rec(_tree(np.array([1.0, 2.0])), _tree(np.array([1.0, 2.0]))))
    # The student's record claims a huge tolerance: only the reference's parameters count.
    student = _ref(_wire.Record("values", "f(x=f32[2])", {"rtol": 1e9},
                                _tree(np.array([1.0, 5.0]))))
    verdict = judge_cell(ref, student)
    assert not verdict.passed
    assert verdict.message.startswith("f(x=f32[2]) has wrong values")
    assert "worst at index (1,): expected 2, got 5" in verdict.message
    assert "reread: section 1.2 Example" in verdict.message


def test_a_missing_return_is_named():
    ref = _ref(_rec(_tree(np.ones(2)), _tree(np.ones(2))))
    verdict = judge_cell(ref, _ref(_rec(_tree(None))))
    assert "got None (is a return statement missing?)" in verdict.message


def test_not_implemented_and_errors():
    ref = _ref(_rec(_tree(np.ones(1)), _tree(np.ones(1))))
    stub = _wire.observe_error(NotImplementedError())
    assert judge_cell(ref, _ref(_rec(stub))).message.startswith("f is not implemented yet")
    boom = _wire.observe_error(TypeError("bad operand"))
    assert "f(x=f32[2]) raised TypeError: bad operand" in judge_cell(ref, _ref(_rec(boom))).message


def test_a_check_that_did_not_run_fails_with_where_the_test_stopped():
    ref = _ref(_rec(_tree(np.ones(1)), _tree(np.ones(1))),
               _rec(_tree(np.ones(1)), _tree(np.ones(1)), label="g()"))
    student = _ref(_rec(_tree(np.ones(1))), stopped="TypeError: 'NoneType' is not subscriptable")
    verdict = judge_cell(ref, student)
    assert not verdict.passed and "g(): this check did not run" in verdict.message
    assert "NoneType" in verdict.message


def test_records_that_differ_from_the_reference_fail():
    ref = _ref(_rec(_tree(np.ones(1)), _tree(np.ones(1))))
    forged = _ref(_wire.Record("call", "something else", {}, _tree(np.ones(1))))
    assert "ran differently" in judge_cell(ref, forged).message


def test_labels_may_name_the_students_own_parameters():
    ref = _ref(_rec(_tree(np.ones(2)), _tree(np.ones(2)), label="f(x=f32[2])"))
    mine = _ref(_rec(_tree(np.ones(2)), label="f(my_input=f32[2])"))
    assert judge_cell(ref, mine).passed


def test_an_explainer_that_cannot_read_forged_facts_fails_with_a_message():
    ref = _ref(_wire.Record("compiles_at_most", "step", {"max_compilations": 1},
                            _wire.observe_facts({"count": 1})))
    forged = _ref(_wire.Record("compiles_at_most", "step", {},
                               _wire.observe_facts({"count": 1, "names": 5, "details": None})))
    assert judge_cell(ref, forged).passed  # a count of 1 is read, the rest ignored
    forged = _ref(_wire.Record("compiles_at_most", "step", {},
                               _wire.observe_facts({"count": 3, "names": 5})))
    verdict = judge_cell(ref, forged)
    assert not verdict.passed and "step" in verdict.message


def test_no_results_at_all():
    ref = _ref(_rec(_tree(np.ones(1)), _tree(np.ones(1))))
    assert "no usable result" in judge_cell(ref, None).message
