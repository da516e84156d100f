"""Tests for autograder.batching.vmap: loop references, equation counts and batching checks.

Expected values come from closed forms (a norm, a ReLU) or from a Python loop written
out in the test; messages are asserted on, since they are what a student reads.
"""
from __future__ import annotations

import importlib.util
import io
import contextlib
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import (CheckFailure, assert_batched_without_loop, assert_vmap_matches_loop,
                        collect_loop_outputs, count_jaxpr_eqns)

REPO = Path(__file__).resolve().parent.parent


def norm(x):
    return jnp.sqrt(jnp.sum(x ** 2))


def rows(n):
    # Rows 3k, 3k+1, 3k+2 ... so that every norm is distinct and non-zero.
    return (jnp.arange(3.0 * n).reshape(n, 3) + 1.0,)


def loop_norms(xs):
    return jnp.stack([norm(x) for x in xs])


# --- collect_loop_outputs -------------------------------------------------------------

def test_collect_loop_outputs_broadcasts_none_and_maps_pytree_leaves():
    w = jnp.array([1.0, -1.0])
    batch = {"x": jnp.array([[1.0, 2.0], [3.0, 5.0]]), "scale": jnp.float32(10.0)}

    def f(w, ex):
        return ex["scale"] * (ex["x"] @ w)

    out = collect_loop_outputs(f, (w, batch), in_axes=(None, {"x": 0, "scale": None}))
    # Closed form: 10 * (1 - 2), 10 * (3 - 5).
    np.testing.assert_allclose(out, [-10.0, -20.0])


def test_collect_loop_outputs_other_axes_and_pytree_outputs():
    xs_cols = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # examples are columns

    def f(x):
        return {"sum": jnp.sum(x), "twice": 2 * x}

    out = collect_loop_outputs(f, (xs_cols,), in_axes=1, out_axes={"sum": 0, "twice": 1})
    np.testing.assert_allclose(out["sum"], [5.0, 7.0, 9.0])
    np.testing.assert_allclose(out["twice"], 2 * xs_cols)


def test_collect_loop_outputs_runs_python_if_even_with_jit():
    def relu_if(x):
        return x if x > 0 else 0.0 * x

    xs = jnp.array([-1.0, 2.0, -3.0])
    for jit in (False, True):  # jit falls back to plain calls when Python needs values
        np.testing.assert_allclose(collect_loop_outputs(relu_if, (xs,), jit=jit), [0.0, 2.0, 0.0])


def test_collect_loop_outputs_rejects_inconsistent_sizes():
    with pytest.raises(ValueError, match="sizes"):
        collect_loop_outputs(lambda a, b: a + b, (jnp.ones(2), jnp.ones(3)))


# --- count_jaxpr_eqns -----------------------------------------------------------------

def test_count_jaxpr_eqns_grows_with_a_loop_not_with_vmap():
    small, large = rows(3), rows(8)
    assert count_jaxpr_eqns(loop_norms, large) > count_jaxpr_eqns(loop_norms, small)
    assert count_jaxpr_eqns(jax.vmap(norm), large) == count_jaxpr_eqns(jax.vmap(norm), small)


# --- assert_batched_without_loop ------------------------------------------------------

def test_batched_passes_vmap_and_hand_batched_code():
    assert_batched_without_loop(jax.vmap(norm), rows, example_fn=norm)
    assert_batched_without_loop(lambda xs: jnp.sqrt(jnp.sum(xs ** 2, axis=1)), rows,
                                example_fn=norm)


def program_ops(fn, args):
    """Operations in the program exported from ``fn`` (what the grader counts)."""
    from autograder.programs.artifacts import static_facts

    exported = jax.export.export(jax.jit(fn))(*args)
    return sum(static_facts(exported.mlir_module())["ops"].values())


def test_program_ops_grow_with_a_loop_not_with_vmap():
    assert program_ops(loop_norms, rows(7)) >= program_ops(loop_norms, rows(3)) + 4
    assert program_ops(jax.vmap(norm), rows(7)) == program_ops(jax.vmap(norm), rows(3))


def test_batched_reports_a_python_loop_with_operation_counts():
    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(loop_norms, rows, example_fn=norm, section="1.3 Tracing")
    msg = str(info.value)
    assert "loop_norms(xs=f32[7,3]) repeats the per-example work once per example" in msg
    assert "the same number of operations in the exported program at every batch size" in msg
    counts = [program_ops(loop_norms, rows(n)) for n in (3, 7)]
    assert f"{counts[0]} operations at batch 3, {counts[1]} at batch 7" in msg
    assert f"(+{(counts[1] - counts[0]) / 4:g} per extra example)" in msg
    assert "a Python loop" in msg
    assert "jax.vmap(norm, in_axes=...)" in msg
    assert "reread: section 1.3 Tracing" in msg


def test_batched_example_name_in_the_fix():
    with pytest.raises(CheckFailure, match=r"jax.vmap\(jax.grad\(loss\), in_axes"):
        assert_batched_without_loop(loop_norms, rows, example_fn=norm,
                                    example_name="jax.grad(loss)")


def test_batched_loop_over_only_one_of_two_growing_arguments_is_caught():
    def make(n):
        return jnp.ones((n, 2)), jnp.arange(2.0 * (n + 1)).reshape(n + 1, 2)

    def row(u, b):
        return jnp.stack([jnp.sum((u - v) ** 2) for v in b])

    half_loop = jax.vmap(lambda u, b: jnp.stack([jnp.sum((u - v) ** 2) for v in b]),
                         in_axes=(0, None))
    with pytest.raises(CheckFailure, match="repeats the per-example work"):
        assert_batched_without_loop(half_loop, make, example_fn=row, in_axes=(0, None))


def test_batched_reports_lax_map_as_a_sequential_scan_unless_allowed():
    seq = lambda xs: jax.lax.map(norm, xs)  # noqa: E731
    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(seq, rows, example_fn=norm)
    msg = str(info.value)
    assert "runs the examples one at a time in a loop" in msg
    assert "a `stablehlo.while` that runs once per example (7 steps at batch 7)" in msg
    assert "a `scan` whose length is the batch size" in msg
    assert "lax.map" in msg
    assert_batched_without_loop(seq, rows, example_fn=norm, allow_scan=True)


def test_batched_reports_a_hand_written_loop_that_counts_down():
    """A while_loop over the examples from the last to the first (issue 36: only
    `counter < constant` was read, so this passed as batched)."""
    def down(xs):
        def body(c):
            i, out = c
            return i - 1, out.at[i - 1].set(norm(xs[i - 1]))
        return jax.lax.while_loop(lambda c: c[0] > 0, body,
                                  (xs.shape[0], jnp.zeros(xs.shape[0])))[1]

    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(down, rows, example_fn=norm)
    assert "runs the examples one at a time in a loop" in str(info.value)


def _padded(xs, size=16):
    return jnp.zeros((size, xs.shape[1])).at[:xs.shape[0]].set(xs)


def padded_python_loop(xs):
    """A Python loop over a batch padded to 16: the same program at batch 3 and 7."""
    return jnp.stack([norm(x) for x in _padded(xs)])[:xs.shape[0]]


def padded_lax_map(xs):
    """lax.map over a batch padded to 16: a while of 16 steps at every batch size."""
    return jax.lax.map(norm, _padded(xs))[:xs.shape[0]]


@pytest.mark.parametrize("fn,message", [
    (padded_python_loop, "does the work of many more examples than it was given"),
    (padded_lax_map, "runs the examples one at a time, over a padded batch"),
])
def test_batched_reports_a_loop_over_a_padded_batch(fn, message):
    """Padding to a fixed size hid the loop: the program did not grow between the two
    batch sizes compared (issue 36)."""
    with pytest.raises(CheckFailure, match=message):
        assert_batched_without_loop(fn, rows, example_fn=norm)


@pytest.mark.parametrize("fn,allow_scan", [
    (lambda xs: jnp.sqrt(jnp.sum(xs ** 2, axis=1)), False),  # vectorised by hand
    (lambda xs: jnp.linalg.norm(xs, axis=-1), False),
    (lambda xs: jax.lax.map(norm, xs), True),
    (padded_lax_map, True),  # sequential is allowed here, padded or not
])
def test_batched_accepts_other_batched_forms(fn, allow_scan):
    assert_batched_without_loop(fn, rows, example_fn=norm, allow_scan=allow_scan)


def test_batched_values_come_before_structure_and_hints_follow_the_rung():
    hints = {"shape": "SHAPE HINT", "values": "VALUES HINT"}
    with pytest.raises(CheckFailure) as info:  # a loop AND wrong values: values first
        assert_batched_without_loop(lambda xs: 2 * loop_norms(xs), rows, example_fn=norm,
                                    hint=hints)
    assert "has wrong values" in str(info.value)
    assert "likely cause: VALUES HINT" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(lambda xs: jax.vmap(norm)(xs)[None], rows,
                                    example_fn=norm, hint=hints)
    assert "has the wrong shape" in str(info.value)
    assert "shape expected (7,), got (1, 7)" in str(info.value)
    assert "likely cause: SHAPE HINT" in str(info.value)


def test_batched_explains_in_axes_errors():
    def predict(params, x):
        return x @ params["w"] + params["b"]

    def make(n):
        return {"w": jnp.ones(3), "b": jnp.float32(1.0)}, jnp.ones((n, 3))

    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(jax.vmap(predict), make, example_fn=predict,
                                    in_axes=(None, 0))
    msg = str(info.value)
    assert "raised ValueError: vmap was requested to map its argument" in msg
    assert "in_axes=0 maps every argument" in msg
    assert "None for arguments that all examples share" in msg


def test_batched_explains_a_function_that_cannot_be_traced():
    def numpy_loop(xs):
        return jnp.asarray([np.sqrt(np.sum(np.asarray(x) ** 2)) for x in xs])

    with pytest.raises(CheckFailure) as info:
        assert_batched_without_loop(numpy_loop, rows, example_fn=norm)
    msg = str(info.value)
    assert "raised TracerArrayConversionError" in msg
    assert "use jax.numpy (jnp.*) inside the function" in msg
    assert "the check traces your function" in msg


def test_batched_not_implemented_and_not_callable():
    def stub(xs):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="stub is not implemented yet"):
        assert_batched_without_loop(stub, rows, example_fn=norm)
    with pytest.raises(CheckFailure, match="is not a function"):
        assert_batched_without_loop(None, rows, example_fn=norm)


def test_batched_keeps_stderr_clean_and_notes_warnings_on_stdout(capfd):
    def noisy(xs):
        warnings.warn("a harmless warning")
        return jax.vmap(norm)(xs)

    assert_batched_without_loop(noisy, rows, example_fn=norm)
    out, err = capfd.readouterr()
    assert err == ""
    assert "a harmless warning" in out


def test_batched_rejects_bad_sizes():
    with pytest.raises(ValueError, match="increasing"):
        assert_batched_without_loop(jax.vmap(norm), rows, example_fn=norm, sizes=(7, 3))


# --- assert_vmap_matches_loop ---------------------------------------------------------

def relu_if(x, t=0.0):
    return x if x > t else 0.0 * x


def test_vmap_matches_loop_passes_where_and_cond():
    xs = jnp.array([-1.0, 2.0, 0.5])
    assert_vmap_matches_loop(lambda x, t=0.0: jnp.where(x > t, x, 0.0), (xs,), reference=relu_if)
    cond = lambda x, t: jax.lax.cond(x > t, lambda: x, lambda: 0.0 * x)  # noqa: E731
    assert_vmap_matches_loop(cond, (xs, jnp.array([0.0, 3.0, 0.0])), reference=relu_if,
                             in_axes=(0, 0))


def test_vmap_matches_loop_explains_python_if():
    with pytest.raises(CheckFailure) as info:
        assert_vmap_matches_loop(relu_if, (jnp.array([-1.0, 2.0]), 0.0), reference=relu_if,
                                 in_axes=(0, None), section="6.2 jnp.where")
    msg = str(info.value)
    assert msg.startswith("jax.vmap(relu_if, in_axes=(0, None))(x=f32[2], t=float 0.0) "
                          "raised TracerBoolConversionError")
    assert "a Python `if`" in msg and "jnp.where(condition, a, b)" in msg
    assert "reread: section 6.2 jnp.where" in msg


def test_vmap_matches_loop_explains_float_conversion():
    def to_float(x):
        return jnp.float32(2.0) * float(x)

    with pytest.raises(CheckFailure) as info:
        assert_vmap_matches_loop(to_float, (jnp.ones(2),), reference=lambda x: 2.0 * x)
    assert "raised ConcretizationTypeError" in str(info.value)
    assert "float(), int(), .item()" in str(info.value)


def test_vmap_matches_loop_wrong_values_with_hint():
    with pytest.raises(CheckFailure) as info:
        assert_vmap_matches_loop(lambda x: jnp.where(x > 0, 0.0, x), (jnp.array([-1.0, 2.0]),),
                                 reference=relu_if, hint={"values": "branches swapped?"})
    msg = str(info.value)
    assert "has wrong values" in msg and "likely cause: branches swapped?" in msg


# --- the notebook's extra variants ----------------------------------------------------
# tests/test_notebooks.py grades correct[0:2] and wrong[0:2] through nbgrader; the
# remaining variants run here against the same test cells, in one process.

def _load_variants():
    spec = importlib.util.spec_from_file_location("v02", REPO / "tests/variants/02_vmap.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.VARIANTS


@pytest.fixture(scope="module")
def notebook_namespace():
    import matplotlib
    import nbformat

    matplotlib.use("Agg")
    nb = nbformat.read(REPO / "source/02_vmap/02_vmap.ipynb", as_version=4)
    ns: dict = {"__name__": "__notebook__"}
    solutions, tests = {}, {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if "block_until_ready" in cell.source or "record_run" in cell.source:
            continue  # timing and the run record: slow, and nothing later needs them
        if meta.get("solution"):
            solutions[meta["grade_id"]] = cell.source
        if meta.get("grade"):
            tests[meta["grade_id"]] = cell.source
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(cell.source, meta.get("grade_id", "cell"), "exec"), ns)
    return ns, solutions, tests


EXTRA = [(gid, kind, k) for gid, v in _load_variants().items()
         for kind in ("correct", "wrong") for k in range(2, len(v[kind]))]


@pytest.mark.notebook
@pytest.mark.parametrize("gid,kind,k", EXTRA)
def test_extra_variants(notebook_namespace, gid, kind, k):
    ns, solutions, tests = notebook_namespace
    variant = _load_variants()[gid][kind][k]
    source = variant if kind == "correct" else variant[1]
    err = io.StringIO()
    try:
        exec(compile(source, gid, "exec"), ns)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if kind == "correct":
                exec(compile(tests["test_" + gid], "test_" + gid, "exec"), ns)
            else:
                with pytest.raises(CheckFailure):
                    exec(compile(tests["test_" + gid], "test_" + gid, "exec"), ns)
    finally:
        exec(compile(solutions[gid], gid, "exec"), ns)
    assert err.getvalue() == "", f"{gid} {kind}[{k}] wrote to stderr: {err.getvalue()}"
