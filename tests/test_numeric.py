"""The value ladder: each rung fails with its own teaching message."""
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import (CheckFailure, assert_matches_reference, assert_tree_matches,
                        call_student, collect_tree_mismatches)


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(CheckFailure) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_matching_arrays_pass():
    assert_tree_matches(jnp.ones(3), jnp.ones(3))
    assert_tree_matches({"w": jnp.ones(2), "b": 0.5}, {"w": jnp.ones(2), "b": jnp.float32(0.5)})


def test_type_rung_names_what_came_back():
    msg = _message(assert_tree_matches, None, jnp.ones(3), name="f(x)")
    assert msg.startswith("f(x) has the wrong type")
    assert "expected an array like f32[3], got None (is a return statement missing?)" in msg
    msg = _message(assert_tree_matches, (jnp.ones(3),), jnp.ones(3), name="f(x)")
    assert msg.startswith("f(x) has the wrong type") and "got:      (f32[3],)" in msg
    msg = _message(assert_tree_matches, (jnp.ones(3),), {"w": jnp.ones(3)}, name="f(x)")
    assert msg.startswith("f(x) has the wrong structure")


def test_shape_rung_reports_both_shapes_and_section():
    msg = _message(assert_tree_matches, jnp.ones(3), jnp.ones((32, 3)), name="g(x)",
                   section="2.3 Per-example gradients")
    assert "g(x) has the wrong shape" in msg
    assert "expected: (32, 3)" in msg and "got:      shape expected (32, 3), got (3,)" in msg
    assert "reread: section 2.3 Per-example gradients" in msg


def test_dtype_rung_catches_int_for_float():
    msg = _message(assert_tree_matches, jnp.arange(3), jnp.arange(3.0))
    assert "has the wrong dtype" in msg and "int" in msg and "float32 (float)" in msg


def test_finite_rung_before_values():
    got = jnp.array([1.0, jnp.nan, 3.0])
    msg = _message(assert_tree_matches, got, jnp.array([1.0, 5.0, 3.0]), name="grad")
    assert msg.startswith("grad contains NaN or inf")
    assert "1 of 3 entries are not finite (first at index (1,)" in msg
    assert "NaN gradient through jnp.where" in msg


def test_values_rung_names_worst_entry():
    msg = _message(assert_tree_matches, jnp.array([1.0, 2.5, 3.0]), jnp.array([1.0, 2.0, 3.0]))
    assert "has wrong values" in msg
    assert "worst at index (1,): expected 2, got 2.5" in msg


def test_pytree_failures_are_reported_together_with_paths():
    got = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(4)}
    expected = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(3)}
    msg = _message(assert_tree_matches, got, expected, name="init(key)")
    assert "2 leaves differ" in msg
    assert "['b']: shape expected (3,), got (4,)" in msg
    assert "['w']: shape expected (3, 2), got (2, 3)" in msg


def test_pytree_structure_names_missing_keys():
    msg = _message(assert_tree_matches, {"w": jnp.ones(2)}, {"w": jnp.ones(2), "b": 1.0})
    assert "missing ['b']" in msg


def test_coarsest_rung_only():
    # One leaf has a shape error, another a value error: only the shape is reported.
    got = {"a": jnp.ones(2), "b": jnp.ones(3) * 2}
    expected = {"a": jnp.ones(3), "b": jnp.ones(3)}
    msg = _message(assert_tree_matches, got, expected)
    got_line = [line for line in msg.splitlines() if line.strip().startswith("got:")][0]
    assert "wrong shape" in msg and "['a']" in got_line and "['b']" not in got_line


def test_collect_returns_all_mismatches():
    out = collect_tree_mismatches([jnp.ones(2), jnp.ones(2)], [jnp.ones(2), jnp.zeros(2)])
    assert [(p, r) for p, r, _ in out] == [("[1]", "values")]


def test_tolerances_are_respected():
    assert_tree_matches(jnp.array([1.001]), jnp.array([1.0]), rtol=1e-2)
    with pytest.raises(CheckFailure):
        assert_tree_matches(jnp.array([1.001]), jnp.array([1.0]), rtol=1e-5)


def test_exact_dtype_mode():
    msg = _message(assert_tree_matches, np.ones(2, np.float64), np.ones(2, np.float32),
                   dtype="exact")
    assert "dtype expected float32, got float64" in msg


def test_reference_runs_first_and_student_result_is_returned():
    def doubles(x):
        return 2 * x

    out = assert_matches_reference(doubles, lambda x: x + x, (jnp.arange(3.0),))
    assert np.allclose(out, [0, 2, 4])


def test_not_implemented_gets_its_own_message():
    def stub(x):
        raise NotImplementedError()

    msg = _message(assert_matches_reference, stub, lambda x: x, (1.0,))
    assert msg.startswith("stub is not implemented yet")
    assert "replace `raise NotImplementedError()`" in msg


def test_student_exception_is_chained_and_names_the_call():
    def broken(x):
        return x.nonexistent

    with pytest.raises(CheckFailure) as info:
        assert_matches_reference(broken, lambda x: x, (jnp.ones(2),))
    assert str(info.value).startswith("broken(x=f32[2]) raised AttributeError")
    assert isinstance(info.value.__cause__, AttributeError)


def test_non_callable_is_reported():
    msg = _message(call_student, 3, ())
    assert "is not a function" in msg


def test_passing_call_reports_warnings_on_stdout_not_stderr(capfd):
    import warnings

    def warns(x):
        warnings.warn("float64 is not available")
        return x

    assert_matches_reference(warns, lambda x: x, (jnp.ones(2),))
    out, err = capfd.readouterr()
    assert err == ""
    assert "emitted a warning (it costs no points)" in out and "float64 is not available" in out
