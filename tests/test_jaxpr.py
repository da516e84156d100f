"""Tests for autograder.programs.jaxpr, and for how the structure checks of _jaxpr, _vmap and
_loop_facts are judged when grading: recorded in a reference and a student role, the
exported programs derived as the program judge derives them, judged by the grader's
judge_cell. Messages are asserted, since they are what a student reads.
"""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from autograder import (CheckFailure, assert_batched_without_loop, assert_compiled_as_loop,
                        assert_jitted_with_static, assert_no_primitive, assert_uses_primitive)
from autograder.programs import artifacts as _artifacts
from autograder.core import check as _check, wire as _wire


def cumsum_scan(xs):
    return lax.scan(lambda c, x: (c + jnp.tanh(x), c + x), 0.0, xs)[1]


def cumsum_unrolled(xs):
    return lax.scan(lambda c, x: (c + jnp.tanh(x), c + x), 0.0, xs, unroll=True)[1]


def newton_fixed(a):
    return lax.fori_loop(0, 20, lambda i, x: (x + a / x) / 2, jnp.maximum(a, 1.0))


# --- in the kernel -------------------------------------------------------------------

def test_uses_primitive_passes_for_scan_while_and_cond():
    assert_uses_primitive(cumsum_scan, (jnp.ones(6),), "scan")
    assert_uses_primitive(lambda a: lax.while_loop(lambda x: x > 1.0, lambda x: x / 2, a),
                          (jnp.float32(9.0),), "while")
    assert_uses_primitive(lambda k, x: lax.switch(k, [jnp.sin, jnp.cos], x),
                          (jnp.int32(1), jnp.ones(3)), "cond")


def test_uses_primitive_names_the_primitives_found():
    with pytest.raises(CheckFailure) as err:
        assert_uses_primitive(newton_fixed, (jnp.float32(2.0),), "while", section="3.3",
                              fix="use lax.while_loop")
    msg = str(err.value)
    assert msg.startswith("newton_fixed(a=f32[]) does not use `while`")
    assert "expected: at least one `while` in the jaxpr" in msg
    assert "scan" in msg.splitlines()[2]  # got: primitives used: ..., scan, ...
    assert "fix: use lax.while_loop" in msg and "reread: section 3.3" in msg


def test_uses_primitive_reads_the_exported_program_too():
    # The jaxpr holds a scan, but the program that XLA gets has no loop at all.
    with pytest.raises(CheckFailure) as err:
        assert_uses_primitive(cumsum_unrolled, (jnp.ones(6),), "scan")
    msg = str(err.value)
    assert msg.startswith("cumsum_unrolled(xs=f32[6]) uses `scan` in its jaxpr, but its "
                          "exported program has no `stablehlo.while`")
    assert "`unroll=True`" in msg


def test_no_primitive_reports_the_count_and_checks_the_program():
    assert_no_primitive(jnp.cumsum, (jnp.ones(3),), "sin")
    with pytest.raises(CheckFailure, match=r"uses `cond`\n  expected: no `cond` in the jaxpr"):
        assert_no_primitive(lambda k, x: lax.cond(k > 0, jnp.sin, jnp.cos, x),
                            (jnp.int32(1), jnp.ones(3)), "cond")


def test_primitive_checks_explain_tracing_errors_and_stubs():
    def branchy(x):
        if x > 0:
            return jnp.sin(x)
        return x

    with pytest.raises(CheckFailure) as err:
        assert_uses_primitive(branchy, (jnp.float32(1.0),), "cond")
    assert str(err.value).startswith("branchy(x=f32[]) fails when traced: "
                                      "TracerBoolConversionError")
    assert "lax.cond / lax.switch" in str(err.value)

    def stub(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="stub is not implemented yet"):
        assert_uses_primitive(stub, (1.0,), "scan")
    with pytest.raises(CheckFailure, match="stub is not a function"):
        assert_uses_primitive(_NotCallable(), (1.0,), "scan")


class _NotCallable:
    __name__ = "stub"  # what a student left under the exercise's name


# --- when grading: reference and student runs, judged outside -----------------------

def _records(role: str, check) -> _wire.CellResult:
    _check.configure(role)
    _check._state["records"] = []
    try:
        check()
    finally:
        records, _check._state["records"] = _check._state["records"], None
        _check.configure(_check.KERNEL)
    raw_json, raw_npz = _wire.dumps(_wire.CellResult("test_x", tuple(records)))
    return _wire.loads(raw_json, raw_npz)  # as the grader reads what a sandbox wrote


def named(fn, name: str):
    """``fn`` under the exercise's name, as the reference and a submission both define it
    (the check's label names the function, and the grader pairs records by label)."""
    def exercise(*args, **kwargs):
        return fn(*args, **kwargs)

    exercise.__name__ = name
    exercise.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return exercise


def graded(check, reference, submission):
    """The verdict of the grader on ``check(submission)`` against ``check(reference)``."""
    from grader.judge import artifacts_of, judge_cell

    ref = _records(_check.REFERENCE, lambda: check(reference))
    student = _records(_check.STUDENT, lambda: check(submission))
    # The program judge: each program run on the reference's inputs (never the
    # submission's), its facts derived from the bytes alone.
    derived = {}
    for key, rec in artifacts_of(student).items():
        ref_rec = ref.records[int(key.split("/")[1])]
        trusted = _wire.Observation("artifact", artifacts=rec.observed.artifacts,
                                    inputs=ref_rec.observed.inputs)
        derived[key] = _artifacts.derive(trusted, ref_rec.params)
    ref_derived = {key: _artifacts.derive(rec.expected if key.endswith("/expected")
                                          else rec.observed, rec.params)
                   for key, rec in artifacts_of(ref, expected=True).items()}
    return judge_cell(ref, student, derived=derived, reference_derived=ref_derived)


def spin_fori(x, n):
    return lax.fori_loop(0, n, lambda i, c: jnp.sin(c) + 0.5 * c, x)


def spin_python(x, n):
    for _ in range(n):
        x = jnp.sin(x) + 0.5 * x
    return x


def spin_other(x, n):  # a loop, but not the function that was asked for
    return lax.fori_loop(0, n, lambda i, c: jnp.sin(c) - 0.5 * c, x)


def _as_loop(fn):
    assert_compiled_as_loop(named(fn, "spin"), (jnp.float32(0.3), 30), body_op="sin",
                            trip_count=30, static_argnums=(1,), section="3.1")


def test_graded_loop_structure_agrees_with_the_kernel():
    assert graded(_as_loop, spin_fori, spin_fori).passed
    verdict = graded(_as_loop, spin_fori, spin_python)
    assert not verdict.passed
    assert "is not compiled as a loop: its jaxpr has no `scan` or `while`" in verdict.message
    with pytest.raises(CheckFailure) as err:
        _as_loop(spin_python)
    assert str(err.value) == verdict.message


def test_graded_program_must_compute_the_reference_values():
    verdict = graded(_as_loop, spin_fori, spin_other)
    assert not verdict.passed
    assert "does not compute the reference's values on the grader's inputs" in verdict.message
    _as_loop(spin_other)  # the kernel has no reference program: it cannot tell


def norm(x):
    return jnp.sqrt(jnp.sum(x ** 2))


def _batched(fn):
    assert_batched_without_loop(named(fn, "norms"),
                                lambda n: (jnp.arange(3.0 * n).reshape(n, 3) + 1.0,),
                                example_fn=norm)


def test_graded_batching_reads_loops_from_the_programs():
    reference = lambda xs: jax.vmap(norm)(xs)  # noqa: E731
    assert graded(_batched, reference, lambda xs: jnp.sqrt(jnp.sum(xs ** 2, 1))).passed
    verdict = graded(_batched, reference, lambda xs: jnp.stack([norm(x) for x in xs]))
    assert "repeats the per-example work once per example" in verdict.message
    verdict = graded(_batched, reference, lambda xs: lax.map(norm, xs))
    assert "runs the examples one at a time in a loop" in verdict.message


def _pool(x, size, kind):
    w = x.reshape(-1, size)
    return w.max(axis=1) if kind == "max" else w.mean(axis=1)


def _static(fn):
    assert_jitted_with_static(fn, (jnp.arange(6.0),), {"size": 2, "kind": "max"},
                              static=("size", "kind"))


def test_graded_static_arguments_read_from_the_program_inputs():
    good = jax.jit(_pool, static_argnames=("size", "kind"))
    assert graded(_static, good, good).passed
    verdict = graded(_static, good, _pool)
    assert "_pool is a plain Python function" in verdict.message
    verdict = graded(_static, good, jax.jit(_pool, static_argnames="kind"))
    assert "fails when jax.jit traces it: TypeError" in verdict.message


def test_programs_of_functions_whose_inputs_hold_foreign_pytree_nodes():
    # An optax state is a NamedTuple that jax.export cannot serialize in a pytree: a
    # plain function is exported on flat leaves (the 07_capstone epoch takes one).
    import optax

    opt = optax.adam(0.1)
    params = {"w": jnp.ones(3)}

    def epoch(params, state, xs):
        def step(carry, x):
            p, s = carry
            g = jax.grad(lambda p: jnp.sum((p["w"] * x) ** 2))(p)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), jnp.sum(x)
        return lax.scan(step, (params, state), xs)

    assert_uses_primitive(epoch, (params, opt.init(params), jnp.ones((4, 3))), "scan")


def test_programs_of_jitted_functions_whose_pytrees_hold_foreign_nodes():
    # A jitted step that takes and returns an optax state (06_sharding's FSDP step):
    # its program is kept (donation included), only its pytrees are flattened, so it
    # serializes and the judge runs it on the recorded leaves.
    import numpy as np
    import optax

    opt = optax.adam(0.1)

    def step(params, state, x):
        g = jax.grad(lambda p: jnp.sum((p["w"] * x) ** 2))(params)
        u, state = opt.update(g, state, params)
        return optax.apply_updates(params, u), state, jnp.sum(x)

    params, x = {"w": jnp.arange(3.0)}, jnp.ones(3)
    args = (params, opt.init(params), x)
    programs = _artifacts.programs_of((jax.jit(step, donate_argnums=(0, 1)), args, None))
    derived = _artifacts.derive(_artifacts.observe_artifact(programs), {})
    facts = derived.facts[0]
    assert not facts.get("error") and not facts["refused"], facts
    assert facts["donated"] == [0, 1, 2, 3]  # w, the step count, mu["w"], nu["w"]
    expected = jax.tree.leaves(step(*args))
    got = [leaf.value for leaf in derived.outputs[0].leaves]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_graded_tie_ignores_whether_the_function_was_jitted():
    # A plain function is exported on flat leaves, a jitted one with its own output
    # pytree: the programs' values are compared leaf by leaf.
    def norms(xs):
        return {"norm": jax.vmap(norm)(xs)}

    def check(fn):
        assert_batched_without_loop(fn, lambda n: (jnp.arange(3.0 * n).reshape(n, 3),),
                                    example_fn=lambda x: {"norm": norm(x)})

    assert graded(check, norms, jax.jit(norms)).passed
    assert graded(check, jax.jit(norms), norms).passed


@pytest.mark.parametrize("fn, args, trips", [
    (lambda xs: lax.map(jnp.sin, xs), (jnp.ones(7),), [7]),
    (lambda x: lax.fori_loop(2, 9, lambda i, c: jnp.sin(c), x), (1.0,), [7]),
    (lambda xs: lax.scan(lambda c, x: (c + x, c), 0.0, xs, unroll=2)[1], (jnp.ones(8),), [4]),
    (lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c + 1, x), (1.0,), [None]),
    (lambda x, n: lax.fori_loop(0, n, lambda i, c: jnp.sin(c), x), (1.0, 5), [None]),
    (lambda xs: lax.map(lambda x: lax.map(jnp.sin, x), xs), (jnp.ones((4, 6)),), [4, 6]),
    (lambda xs: jax.vmap(jnp.sin)(xs), (jnp.ones(3),), []),
    # Written by hand (issue 36: only `counter < constant` was read): counting down,
    # the bound on the left, a step of 2, <=.
    (lambda xs: lax.while_loop(lambda c: c[0] > 0, lambda c: (c[0] - 1, c[1] + xs[c[0] - 1]),
                               (xs.shape[0], 0.0))[1], (jnp.ones(6),), [6]),
    (lambda xs: lax.while_loop(lambda c: xs.shape[0] > c[0],
                               lambda c: (c[0] + 1, c[1] + xs[c[0]]), (0, 0.0))[1],
     (jnp.ones(5),), [5]),
    (lambda xs: lax.while_loop(lambda c: c[0] < xs.shape[0],
                               lambda c: (c[0] + 2, c[1] + xs[c[0]]), (0, 0.0))[1],
     (jnp.ones(7),), [4]),
    (lambda xs: lax.while_loop(lambda c: c[0] <= 4, lambda c: (c[0] + 1, c[1] + 1.0),
                               (0, 0.0))[1], (jnp.ones(2),), [5]),
    (lambda x: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] - 1, c[1] * 2.0), (0, x))[1],
     (1.0,), [None]),
])
def test_while_trip_counts(fn, args, trips):
    from autograder.programs.while_trips import while_trip_counts

    assert while_trip_counts(jax.jit(fn).lower(*args).as_text()) == trips


def test_graded_form_checks_accept_answers_with_other_values():
    # Two correct epochs that sample their batches differently compute different
    # values: a check of a function's form must pass both (07_capstone's train_epoch).
    def epoch_choice(key, x):
        def step(c, k):
            return c + jnp.sum(x[jax.random.choice(k, x.shape[0], (2,), replace=False)]), c
        return lax.scan(step, 0.0, jax.random.split(key, 4))

    def epoch_permutation(key, x):
        def step(c, k):
            return c + jnp.sum(x[jax.random.permutation(k, x.shape[0])[:2]]), c
        return lax.scan(step, 0.0, jax.random.split(key, 4))

    def check(fn):
        assert_uses_primitive(named(fn, "epoch"), (jax.random.key(0), jnp.arange(8.0)), "scan")

    assert graded(check, epoch_choice, epoch_permutation).passed
