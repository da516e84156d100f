"""The PRNG checks judged as the grader judges them: recorded in a grading sandbox,
read back through the wire and explained outside, with the kernel's message.

The student-like functions come from :mod:`tests.test_random`. The key tree's growth
is also judged on exported programs, derived as the grader derives them.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import (CheckFailure, assert_deterministic,
                        assert_distinct_keys, assert_key_discipline, assert_keys_match,
                        assert_no_key_reuse, assert_sample_fraction, assert_sample_mean,
                        assert_sample_variance, assert_typed_keys, assert_uncorrelated,
                        assert_varies_with_key, assert_wide_key_tree, count_prng_ops)
from autograder.core import check as _check, wire as _wire
from autograder.programs import artifacts as _artifacts
from tests.test_random import (ignores_key, noise_deep, noise_scan_chain, noise_wide,
                               two_layers_ok, two_layers_reused)


def noise_wide_then_loop(key, n):
    x = noise_wide(key, n)
    return jnp.stack([x[i] * 2.0 for i in range(n)])  # wide keys, then one copy per item


def test_assert_wide_key_tree_judges_the_exported_programs_too():
    # Its PRNG primitives do not grow (one split, one sampler), but its program does:
    # the grader sees it in the StableHLO op counts of the two exported programs.
    assert dict(count_prng_ops(jax.make_jaxpr(noise_wide_then_loop, static_argnums=1)(
        jax.random.key(0), 4))) == {"random_split": 1, "random_bits": 1}
    with pytest.raises(CheckFailure) as err:
        assert_wide_key_tree(noise_wide_then_loop, lambda n: (jax.random.key(0), n),
                             static_argnums=(1,), section="5.1 Wide, not deep")
    msg = str(err.value)
    assert "the program of noise_wide_then_loop grows with n" in msg
    assert "expected: the same StableHLO ops for every n" in msg
    assert "got:      n=4: " in msg and "; n=16: " in msg and "most grown: " in msg
    assert "reread: section 5.1 Wide, not deep" in msg


def _judged_outside(check) -> list[str]:
    """Runs ``check()`` as a grading sandbox runs a submission (recording, raising
    nothing), then judges its records as the grader does: read back from the wire,
    programs derived, the same explain functions. Returns the failure messages."""
    saved = dict(_check._state)
    _check.configure(_check.STUDENT)
    _check._state["records"] = []
    try:
        check()
        records = tuple(_check._state["records"])
    finally:
        _check._state.clear()
        _check._state.update(saved)
    cell = _wire.loads(*_wire.dumps(_wire.CellResult("test_x", records)))
    messages = []
    for rec in cell.records:
        observed = rec.observed
        if observed.kind == "artifact":
            observed = _artifacts.derive(observed, rec.params)
        messages.append(_check.explain(rec.kind, observed, None, rec.label, rec.params))
    return [m for m in messages if m]


_K = jax.random.key(3)
_BY_ID = jax.vmap(lambda i: jax.random.fold_in(_K, i))(jnp.array([1, 2, 3]))
_PATTERN = np.tile([-1.0, 1.0], 50)


def _noisy(key, n, _rng=np.random.default_rng(0)):
    return jax.random.normal(key, (n,)) + _rng.normal()


@pytest.mark.parametrize("check", [
    lambda: assert_no_key_reuse(two_layers_reused, (jax.random.key(0), 4), section="2.2"),
    lambda: assert_deterministic(_noisy, (jax.random.key(0), 3)),
    lambda: assert_varies_with_key(ignores_key, (jax.random.key(1), 3)),
    lambda: assert_key_discipline(ignores_key, (jax.random.key(0), 5)),
    lambda: assert_typed_keys(jnp.zeros((4, 2), jnp.uint32), shape=(4,), name="make_keys"),
    lambda: assert_typed_keys(jax.random.split(_K, 3), shape=(4,), name="keys"),
    lambda: assert_distinct_keys(jnp.stack([_K, _K, _K]), name="keys"),
    lambda: assert_keys_match(jax.random.split(_K, 3), _BY_ID, name="example_keys"),
    lambda: assert_sample_mean(_PATTERN + 0.51, 0.0, 1.0, name="weights"),
    lambda: assert_sample_variance(np.tile([-1.0, 1.0], 2048), 1.25, name="w"),
    lambda: assert_sample_fraction(np.arange(400) % 4 == 0, 0.75, name="kept"),
    lambda: assert_uncorrelated(_PATTERN, _PATTERN, name="layers 1 and 2"),
    lambda: assert_wide_key_tree(noise_deep, lambda n: (jax.random.key(0), n), sizes=(2, 5),
                                 static_argnums=(1,)),
    lambda: assert_wide_key_tree(noise_scan_chain, lambda n: (jax.random.key(0), n),
                                 static_argnums=(1,)),
], ids=["reuse", "deterministic", "varies", "discipline", "typed", "typed-shape", "distinct",
        "match", "mean", "variance", "fraction", "uncorrelated", "deep", "chain"])
def test_the_grader_gives_the_kernels_message(check):
    with pytest.raises(CheckFailure) as err:
        check()
    judged = _judged_outside(check)
    assert judged and judged[0] == str(err.value)


def test_a_grading_sandbox_records_and_raises_nothing():
    def stub(key):
        raise NotImplementedError()

    out = []
    judged = _judged_outside(lambda: out.extend([
        assert_no_key_reuse(two_layers_reused, (jax.random.key(0), 4)),
        assert_no_key_reuse(stub, (jax.random.key(0),)),
        assert_no_key_reuse(two_layers_ok, (jax.random.key(0), 4))]))
    assert out[0] is None and out[1] is None and set(out[2]) == {"w1", "w2"}
    assert "used a PRNG key twice" in judged[0]
    assert "stub is not implemented yet" in judged[1] and len(judged) == 2


def test_the_deep_key_tree_also_fails_on_its_exported_programs():
    judged = _judged_outside(lambda: assert_wide_key_tree(
        noise_deep, lambda n: (jax.random.key(0), n), sizes=(2, 5), static_argnums=(1,)))
    assert "its PRNG work grows with n" in judged[0]
    assert "the program of noise_deep grows with n" in judged[1]


@pytest.mark.parametrize("kind, observed", [
    ("key_tree", _wire.Observation("facts", facts={"counts": "forged", "sizes": [4]})),
    ("key_tree", _wire.Observation("facts", facts=[])),
    ("no_key_reuse", _wire.Observation("facts", facts={"reuse": {"where": 3}})),
    ("typed_keys", _wire.Observation("facts", facts={"typed": "yes"})),
    ("distinct_keys", _wire.observe_tree("not keys")),
    ("keys_match", _wire.observe_tree((1, 2, 3))),
    ("sample_mean", _wire.observe_tree({"a": "text"})),
    ("uncorrelated", _wire.observe_tree(np.ones(3))),
    ("key_tree_program", _wire.Observation("facts", facts=[{"ops": {}}])),
])
def test_what_a_submission_forges_fails_with_a_message(kind, observed):
    params = {"mean": 0.0, "std": 1.0}
    message = _check.explain(kind, observed, None, "f", params)
    assert isinstance(message, str) and message.strip()  # a failure, never a crash or a pass


def _wide(fn):
    assert_wide_key_tree(fn, lambda n: (jax.random.key(0), n), static_argnums=(1,))


def test_the_key_tree_programs_run_and_are_tied_by_layout_not_values():
    """Both programs run on the grader's inputs (issue 36: they never ran): another
    valid wide tree (fold_in, other numbers) passes; a wide tree of a function that
    returns something else is not the graded function's program."""
    from tests.test_jaxpr import graded
    from tests.test_random import noise_fold_in

    assert graded(_wide, noise_wide, noise_fold_in).passed

    def pairs(key, n):
        return jnp.stack([noise_wide(key, n)] * 2, axis=1)

    verdict = graded(_wide, noise_wide, pairs)
    assert not verdict.passed
    assert "does not return what the reference's returns" in verdict.message
