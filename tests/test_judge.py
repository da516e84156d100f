"""The trusted judge: a submission's records against the reference's, outside the sandbox."""
from __future__ import annotations

import dataclasses

import numpy as np

from autograder.core import wire as _wire
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


def _error(text, error_type="ValueError"):
    return _wire.Observation("error", error_type=error_type, error=text)


SECRET = "assert_matches_reference(add, ref, (_secret_input,))"


def test_a_cell_with_hidden_tests_never_quotes_the_students_text():
    """The student's code ran beside the hidden tests: its exception text and its own
    class names stay out of the message; the verdict is the same."""
    ref = _wire.CellResult("test_x", (_rec(_tree(np.ones(2)), _tree(np.ones(2))),
                                      _rec(_tree(np.ones(2)), _tree(np.ones(2)))),
                           hidden_from=1)
    for error_type, shown in (("ValueError", "ValueError"),
                              ("Seed20261203Error", "an exception of its own class")):
        student = _wire.CellResult("test_x", (_rec(_error(SECRET, error_type)),))
        verdict = judge_cell(ref, student)
        assert not verdict.passed and SECRET not in verdict.message and "20261203" not in verdict.message
        assert f"raised {shown}" in verdict.message, verdict.message
        stopped = _wire.CellResult("test_x", (_rec(_tree(np.ones(2))),),
                                   stopped=f"{error_type}: {SECRET}")
        verdict = judge_cell(ref, stopped)
        assert not verdict.passed and SECRET not in verdict.message, verdict.message
        assert shown in verdict.message
    # Without hidden tests the student's own text teaches, as in their kernel.
    visible = _ref(_rec(_tree(np.ones(2)), _tree(np.ones(2))))
    verdict = judge_cell(visible, _ref(_rec(_error("shapes (3,) and (4,) differ"))))
    assert "shapes (3,) and (4,) differ" in verdict.message


def test_a_decompression_bomb_in_a_result_file_fails_only_its_exercise_and_says_why():
    import io
    import zipfile

    from grader.runner import judge_bundle

    ref = _ref(_rec(_tree(np.ones(2)), _tree(np.ones(2))))
    raw_json, raw_npz = _wire.dumps(_ref(_rec(_tree(np.ones(2)))))
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a0.npy", bytes(64 << 20))
    good = {"probe/test_y.json": raw_json.replace(b"test_x", b"test_y"), "probe/test_y.npz": raw_npz}
    bundle = {"unanswered": {}, "files": {k: v.hex() for k, v in {
        "probe/test_x.json": raw_json, "probe/test_x.npz": bomb.getvalue(), **good}.items()}}
    reference = {"test_x": ref, "test_y": _wire.CellResult("test_y", ref.records)}
    verdicts = judge_bundle(bundle, ["test_x", "test_y"], reference)
    assert not verdicts["test_x"]["passed"]
    assert "refused" in verdicts["test_x"]["message"] and "compressed" in verdicts["test_x"]["message"]
    assert verdicts["test_y"]["passed"], verdicts["test_y"]


def test_a_failing_check_names_the_rubric_items_the_reference_bound_to_it(tmp_path):
    """The reference run records, for each check, the rubric items its test cell binds
    to it; the judge names them when the student's check fails, and ignores what a
    student's record claims."""
    from autograder.core import check as _check

    source = ('# doubles.\n'
              '# rubric: "returns twice x" -> assert_matches_reference\n'
              '# rubric: "keeps the dtype" -> assert_matches_reference, assert_tree_matches\n'
              'from autograder import assert_matches_reference\n'
              'assert_matches_reference(double, lambda x: 2 * x, (np.ones(2, np.float32),))\n')
    cells = {}
    for role, double in (("reference", lambda x: 2 * x), ("student", lambda x: 3 * x)):
        _check.configure(role, out=str(tmp_path / role))
        try:
            _check.run_test_cell("test_x", source, {"double": double, "np": np})
        finally:
            _check.configure("kernel")
        files = {name: (tmp_path / role / f"test_x.{name}").read_bytes() for name in ("json", "npz")}
        cells[role] = _wire.loads(files["json"], files["npz"])
    (ref,) = cells["reference"].records
    assert ref.requirements == ("returns twice x", "keeps the dtype")
    assert cells["student"].records[0].requirements == ()  # recorded by the reference only
    verdict = judge_cell(cells["reference"], cells["student"])
    assert not verdict.passed and verdict.message.endswith(
        'requirement not met: "returns twice x"\n  requirement not met: "keeps the dtype"')
    forged = _wire.CellResult("test_x", (dataclasses.replace(cells["student"].records[0],
                                                             requirements=("nothing",)),))
    assert '"nothing"' not in judge_cell(cells["reference"], forged).message
