"""Tests for the PRNG checks (autograder.random.keys, _random_discipline, _random_stats,
_random_tree): key discipline, statistics and the shape of key trees.

No expected value here is a sampled number: key checks compare keys with each other,
statistical checks get deterministic samples (alternating signs, fixed patterns)
whose statistics are known in closed form, or correct samples that must pass.
Messages are asserted on, since they are what a student reads.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import (CheckFailure, assert_deterministic, assert_distinct_keys,
                        assert_key_discipline, assert_keys_match, assert_no_key_reuse,
                        assert_sample_fraction, assert_sample_mean, assert_sample_variance,
                        assert_typed_keys, assert_uncorrelated, assert_varies_with_key,
                        assert_wide_key_tree, collect_key_carrying_loops, collect_key_data,
                        count_prng_ops)


# --- student-like functions ---------------------------------------------------------

def two_layers_ok(key, n):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (n,)), "w2": jax.random.normal(k2, (n,))}


def two_layers_reused(key, n):
    w1 = jax.random.normal(key, (n,))
    w2 = jax.random.normal(key, (n,))  # the reuse the checker must point at
    return {"w1": w1, "w2": w2}


def ignores_key(key, n):
    return jax.random.normal(jax.random.key(0), (n,))


def noise_deep(key, n):
    out = []
    for _ in range(n):
        key, sub = jax.random.split(key)
        out.append(jax.random.normal(sub, (2,)))
    return jnp.stack(out)


def noise_wide(key, n):
    return jax.vmap(lambda k: jax.random.normal(k, (2,)))(jax.random.split(key, n))


def noise_fold_in(key, n):
    return jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), (2,)))(jnp.arange(n))


def noise_lax_map(key, n):
    return jax.lax.map(lambda k: jax.random.normal(k, (2,)), jax.random.split(key, n))


def noise_scan_chain(key, n):
    def body(k, _):
        k, sub = jax.random.split(k)
        return k, jax.random.normal(sub, (2,))
    return jax.lax.scan(body, key, None, length=n)[1]


def noise_fori_chain(key, n):
    def body(i, carry):
        k, out = carry
        k, sub = jax.random.split(k)
        return k, out.at[i].set(jax.random.normal(sub, (2,)))
    return jax.lax.fori_loop(0, n, body, (key, jnp.zeros((n, 2))))[1]


def noise_while_chain(key, n):
    def body(carry):
        i, k, out = carry
        k, sub = jax.random.split(k)
        return i + 1, k, out.at[i].set(jax.random.normal(sub, (2,)))
    return jax.lax.while_loop(lambda c: c[0] < n, body, (0, key, jnp.zeros((n, 2))))[2]


# --- keys as data -------------------------------------------------------------------

def test_collect_key_data_replaces_keys_and_does_not_consume_them():
    keys = jax.random.split(jax.random.key(0), 3)
    data = collect_key_data({"k": keys, "x": jnp.arange(2.0)})
    assert data["k"].shape == (3, 2) and data["k"].dtype == np.uint32
    assert isinstance(data["x"], np.ndarray)
    with jax.debug_key_reuse(True):
        collect_key_data(keys)
        jax.random.normal(keys[0])  # still unconsumed: reading data is not a use


def test_assert_typed_keys_passes_typed_and_rejects_raw_keys():
    assert_typed_keys(jax.random.split(jax.random.key(0), 4), shape=(4,))
    with jax.legacy_prng_key("allow"):
        raw = jax.random.split(jax.random.PRNGKey(0), 4)
    with pytest.raises(CheckFailure) as err:
        assert_typed_keys(raw, shape=(4,), name="make_keys(0, 4)", section="1.2 Keys")
    msg = str(err.value)
    assert "make_keys(0, 4) is not an array of typed PRNG keys" in msg
    assert "got:      u32[4,2]" in msg and "PRNGKey" in msg and "jax.random.key(seed)" in msg
    assert "reread: section 1.2 Keys" in msg


def test_assert_typed_keys_shape_counts_keys():
    with pytest.raises(CheckFailure) as err:
        assert_typed_keys(jax.random.split(jax.random.key(0), 3), shape=(4,), name="keys")
    msg = str(err.value)
    assert "keys has the wrong shape" in msg
    assert "expected: (4,) keys" in msg and "got:      (3,) keys" in msg


def test_assert_distinct_keys_finds_copies_and_overlaps_between_arrays():
    assert_distinct_keys(jax.random.split(jax.random.key(0), 5))
    # key(seed + i) for seeds 3 and 4 overlap in 3 keys: 4, 5, 6.
    a = jax.vmap(jax.random.key)(jnp.arange(3, 7))
    b = jax.vmap(jax.random.key)(jnp.arange(4, 8))
    with pytest.raises(CheckFailure) as err:
        assert_distinct_keys((a, b), name="both seeds", hint="the seeds overlap")
    msg = str(err.value)
    assert "both seeds contains equal keys" in msg
    assert "expected: 8 different keys" in msg
    assert "only 5 distinct: key 4 equals key 1, key 5 equals key 2, key 6 equals key 3" in msg
    assert "likely cause: the seeds overlap" in msg


def test_assert_keys_match_names_the_first_differing_position():
    k = jax.random.key(3)
    ids = jnp.array([1, 2, 3])
    by_id = jax.vmap(lambda i: jax.random.fold_in(k, i))(ids)
    assert_keys_match(by_id[1:], jax.vmap(lambda i: jax.random.fold_in(k, i))(ids[1:]))
    with pytest.raises(CheckFailure) as err:
        assert_keys_match(jax.random.split(k, 3), by_id, name="example_keys", fix="fold in ids")
    msg = str(err.value)
    assert "example_keys holds different keys" in msg
    assert "3 of 3 positions differ (first: position 0)" in msg and "fix: fold in ids" in msg
    with pytest.raises(CheckFailure, match="is not an array of typed PRNG keys"):
        assert_keys_match(jnp.zeros((3, 2), jnp.uint32), by_id)


# --- key discipline -----------------------------------------------------------------

def test_assert_no_key_reuse_returns_the_result_and_stays_quiet(capfd):
    out = assert_no_key_reuse(two_layers_ok, (jax.random.key(0), 4))
    assert set(out) == {"w1", "w2"} and out["w1"].shape == (4,)
    assert capfd.readouterr().err == ""


def test_assert_no_key_reuse_names_the_function_and_the_line():
    with pytest.raises(CheckFailure) as err:
        assert_no_key_reuse(two_layers_reused, (jax.random.key(0), 4), section="2.2 The checker")
    msg = str(err.value)
    assert "two_layers_reused(key=key<fry>[], n=int 4) used a PRNG key twice" in msg
    assert "KeyReuseError: Previously-consumed key" in msg
    assert "where:    in two_layers_reused, line" in msg
    assert "w2 = jax.random.normal(key, (n,))" in msg
    assert "jax.random.split(key)" in msg and "reread: section 2.2 The checker" in msg


def test_assert_no_key_reuse_inside_jit():
    with pytest.raises(CheckFailure, match="used a PRNG key twice") as err:
        assert_no_key_reuse(jax.jit(two_layers_reused, static_argnums=1),
                            (jax.random.key(0), 4))
    assert "KeyReuseError" in str(err.value)


def test_assert_no_key_reuse_catches_a_global_key_used_by_an_earlier_call():
    global_key = jax.random.key(5)

    def uses_global(key):
        return jax.random.normal(global_key)

    assert_no_key_reuse(uses_global, (jax.random.key(0),))  # first use is fine
    with pytest.raises(CheckFailure) as err:
        assert_no_key_reuse(uses_global, (jax.random.key(0),))
    assert "a key kept outside the function" in str(err.value)


def test_assert_no_key_reuse_ignores_what_the_caller_did_with_the_key():
    key = jax.random.key(1)
    with jax.debug_key_reuse(True):
        jax.random.normal(key)  # the caller consumed it
    assert_no_key_reuse(two_layers_ok, (key, 2))  # cloned before the call: no failure


def test_assert_no_key_reuse_hands_back_usable_stacked_keys():
    def stacked(key, n):
        return jnp.stack([jax.random.fold_in(key, i) for i in range(n)])

    keys = assert_no_key_reuse(stacked, (jax.random.key(2), 3))
    with jax.debug_key_reuse(True):
        jax.random.normal(keys[0])  # the checker marks stack outputs consumed; ours are fresh


def test_assert_no_key_reuse_reports_not_implemented():
    def stub(key):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="stub is not implemented yet"):
        assert_no_key_reuse(stub, (jax.random.key(0),))


def test_assert_deterministic_catches_numpy_randomness():
    assert_deterministic(two_layers_ok, (jax.random.key(0), 3))
    rng = np.random.default_rng(0)

    def noisy(key, n):
        return jax.random.normal(key, (n,)) + rng.normal()

    with pytest.raises(CheckFailure) as err:
        assert_deterministic(noisy, (jax.random.key(0), 3), section="1.3 Same key")
    msg = str(err.value)
    assert "gave different results for the same key" in msg
    assert "got:      result: 3 of 3 entries differ" in msg and "np.random" in msg


def test_assert_varies_with_key_catches_a_hard_coded_key():
    assert_varies_with_key(two_layers_ok, (jax.random.key(0), 3))
    with pytest.raises(CheckFailure) as err:
        assert_varies_with_key(ignores_key, (jax.random.key(1), 3), section="4.1 Init")
    msg = str(err.value)
    assert "ignores_key(key=key<fry>[], n=int 3) gave the same result for two different values of key" in msg
    assert "got:      identical results" in msg and "hard-coded jax.random.key" in msg


def test_assert_varies_with_key_every_leaf_names_the_frozen_leaves():
    def last_layer_fixed(key, n):
        return [jax.random.normal(key, (n,)), jax.random.normal(jax.random.key(0), (n,))]

    assert_varies_with_key(last_layer_fixed, (jax.random.key(1), 2))  # one leaf is enough
    with pytest.raises(CheckFailure) as err:
        assert_varies_with_key(last_layer_fixed, (jax.random.key(1), 2), every_leaf=True)
    msg = str(err.value)
    assert "a different result for a different key in every leaf" in msg
    assert "identical for [1]" in msg


def test_assert_varies_with_key_with_another_argument():
    def same_every_epoch(key, epoch):
        return jax.random.permutation(key, 8)

    def per_epoch(key, epoch):
        return jax.random.permutation(jax.random.fold_in(key, epoch), 8)

    assert_varies_with_key(per_epoch, (jax.random.key(0), 0), key_argnum=1, other_key=1)
    with pytest.raises(CheckFailure) as err:
        assert_varies_with_key(same_every_epoch, (jax.random.key(0), 0), key_argnum=1,
                               other_key=1, hint="the order ignores the epoch")
    msg = str(err.value)
    assert "two different values of epoch" in msg and "a different result for a different epoch" in msg
    assert "likely cause: the order ignores the epoch" in msg


def test_assert_key_discipline_runs_all_three_rungs():
    out = assert_key_discipline(two_layers_ok, (jax.random.key(0), 5))
    assert out["w2"].shape == (5,)
    with pytest.raises(CheckFailure, match="used a PRNG key twice"):
        assert_key_discipline(two_layers_reused, (jax.random.key(0), 5))
    with pytest.raises(CheckFailure, match="gave the same result for two different"):
        assert_key_discipline(ignores_key, (jax.random.key(0), 5))


# --- statistics ---------------------------------------------------------------------

def test_assert_sample_mean_tolerance_is_k_standard_errors():
    x = np.tile([-1.0, 1.0], 50)  # n = 100, mean 0, sd 1: standard error 0.1
    assert assert_sample_mean(x + 0.49, 0.0, 1.0) is None  # 4.9 se: passes, returns no number
    with pytest.raises(CheckFailure) as err:
        assert_sample_mean(x + 0.51, 0.0, 1.0, name="weights", section="3.2 Tolerances")
    msg = str(err.value)
    assert "weights: the sample mean is too far from 0" in msg
    assert "expected: 0 +- 0.5 (5 standard errors of 1/sqrt(100))" in msg
    assert "got:      0.51 (5.1 standard errors away)" in msg
    assert "reread: section 3.2 Tolerances" in msg


def test_assert_sample_variance_uses_the_excess_kurtosis():
    x = np.tile([-1.0, 1.0], 2048)  # variance 1 * n/(n-1); excess kurtosis of +-1 is -2
    assert assert_sample_variance(x, 1.0) is None  # no number: nbgrader would read partial credit
    with pytest.raises(CheckFailure) as err:
        assert_sample_variance(x, 1.25, name="w")  # chi-square, 4095 dof: 1.117 .. 1.393
    assert "w: the sample variance is too far from 1.25" in str(err.value)
    assert "between 1.117 and 1.393" in str(err.value)
    # A larger kurtosis widens the tolerance: Bernoulli(0.01) has excess kurtosis ~ 95.
    assert_sample_variance(x, 1.25, excess_kurtosis=95.0)
    # variance 5: se = 5 * sqrt(2/4095 + 95/4096) = 0.77, |1 - 5| > 5 se = 3.85.
    with pytest.raises(CheckFailure, match=r"sqrt\(2/\(n-1\) \+ 95/n\)"):
        assert_sample_variance(x, 5.0, excess_kurtosis=95.0)


def test_assert_sample_fraction_binomial_tolerance():
    hits = np.arange(400) % 4 == 0  # exactly 0.25
    assert assert_sample_fraction(hits, 0.25) is None
    # p = 0.35: se = sqrt(0.35 * 0.65 / 400) = 0.0238, tolerance 0.119 > |0.25 - 0.35|.
    assert_sample_fraction(hits, 0.35)
    with pytest.raises(CheckFailure) as err:
        assert_sample_fraction(hits, 0.75, name="kept", hint="swapped p")
    msg = str(err.value)
    assert "kept: 0.25 of 400 draws, expected 0.75" in msg
    assert "likely cause: swapped p" in msg
    assert_sample_fraction(np.zeros(10, bool), 0.0)  # p = 0: the tolerance is exactly 0
    with pytest.raises(CheckFailure):
        assert_sample_fraction(np.eye(1, 10, dtype=bool), 0.0)


def test_assert_uncorrelated_catches_shared_keys():
    a = np.tile([1.0, -1.0], 500)
    b = np.tile([1.0, 1.0, -1.0, -1.0], 250)
    assert assert_uncorrelated(a, b) is None
    with pytest.raises(CheckFailure) as err:
        assert_uncorrelated(a, a, name="layers 1 and 2")
    msg = str(err.value)
    assert "layers 1 and 2 are correlated: r = 1.000" in msg
    assert "|r| <= 0.158 (5 standard errors of 1/sqrt(n-1), n=1000)" in msg
    assert "the same key" in msg
    with pytest.raises(CheckFailure, match="one of them is constant"):
        assert_uncorrelated(a, np.zeros(1000))
    with pytest.raises(CheckFailure, match="have different sizes"):
        assert_uncorrelated(a, b[:10])


@pytest.mark.parametrize("seed", range(8))
def test_correct_samples_pass_for_every_seed(seed):
    # The 5-standard-error tolerances must not fail correct draws, whatever the seed.
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    x = 0.5 * jax.random.normal(k1, (2000,)) + 1.0
    assert_sample_mean(x, 1.0, 0.5)
    assert_sample_variance(x, 0.25)
    assert_sample_fraction(jax.random.bernoulli(k2, 0.3, (2000,)), 0.3)
    assert_uncorrelated(x, jax.random.normal(k3, (2000,)))


# --- the shape of the key tree ------------------------------------------------------

def test_count_prng_ops_counts_nested_jaxprs():
    key = jax.random.key(0)
    deep = count_prng_ops(jax.make_jaxpr(noise_deep, static_argnums=1)(key, 3))
    assert deep == {"random_split": 3, "random_bits": 3}
    wide = count_prng_ops(jax.make_jaxpr(jax.jit(noise_wide, static_argnums=1),
                                         static_argnums=1)(key, 3))
    assert wide == {"random_split": 1, "random_bits": 1}
    assert count_prng_ops(jax.make_jaxpr(noise_fold_in, static_argnums=1)(key, 3))["random_fold_in"] == 1


@pytest.mark.parametrize("fn, expected", [
    (noise_scan_chain, ["scan"]), (noise_fori_chain, ["scan"]), (noise_while_chain, ["while"]),
    (noise_lax_map, []), (noise_wide, []),
])
def test_collect_key_carrying_loops(fn, expected):
    jaxpr = jax.make_jaxpr(fn, static_argnums=1)(jax.random.key(0), 4)
    assert collect_key_carrying_loops(jaxpr) == expected


@pytest.mark.parametrize("fn", [noise_wide, noise_fold_in, noise_lax_map])
def test_assert_wide_key_tree_accepts_wide_trees(fn):
    assert_wide_key_tree(fn, lambda n: (jax.random.key(0), n), static_argnums=(1,))


def test_assert_wide_key_tree_rejects_a_python_loop():
    with pytest.raises(CheckFailure) as err:
        assert_wide_key_tree(noise_deep, lambda n: (jax.random.key(0), n), sizes=(2, 5),
                             static_argnums=(1,), section="5.1 Wide, not deep")
    msg = str(err.value)
    assert "noise_deep makes its random draws one item at a time: its PRNG work grows with n" in msg
    assert "n=2: 4 PRNG operations (random_split 2, random_bits 2)" in msg
    assert "n=5: 10 PRNG operations (random_split 5, random_bits 5)" in msg
    assert "keys = jax.random.split(key, n)" in msg and "reread: section 5.1 Wide, not deep" in msg


@pytest.mark.parametrize("fn, loop", [(noise_scan_chain, "scan"), (noise_fori_chain, "scan"),
                                      (noise_while_chain, "while")])
def test_assert_wide_key_tree_rejects_a_key_carried_through_a_loop(fn, loop):
    with pytest.raises(CheckFailure) as err:
        assert_wide_key_tree(fn, lambda n: (jax.random.key(0), n), static_argnums=(1,))
    msg = str(err.value)
    assert f"{fn.__name__} carries a key from one loop iteration to the next" in msg
    assert f"got:      a {loop} loop whose body returns a key" in msg


def test_assert_wide_key_tree_reports_functions_that_cannot_be_traced():
    def needs_concrete(key, n):
        return np.asarray(jax.random.normal(key, (n,)))  # fails on a tracer

    with pytest.raises(CheckFailure, match="raised TracerArrayConversionError"):
        assert_wide_key_tree(needs_concrete, lambda n: (jax.random.key(0), n), static_argnums=(1,))



# --- false failures of the distribution checks ------------------------------------------

def _binomial_pmf(n: int, p: float) -> np.ndarray:
    from scipy.special import gammaln

    c = np.arange(n + 1)
    return np.exp(gammaln(n + 1) - gammaln(c + 1) - gammaln(n - c + 1)
                  + c * np.log(p) + (n - c) * np.log1p(-p))


# The probabilities the course's fraction checks use (04: dropout keeps 3/4, 1/2, 1/10;
# N(0, 1) beyond 1.75; row 1 after row 0 in 16 rows; ascending pairs), at sizes from a
# handful of trials to thousands, the 64 epochs of 04's epoch_batches among them.
@pytest.mark.parametrize("p", [0.75, 0.5, 0.1, 0.0801, 1 / 16])
def test_a_correct_fraction_fails_with_probability_at_most_alpha(p):
    from autograder.random.stats import alpha, binomial_interval

    a = alpha(5.0)
    for n in [*range(1, 200), 256, 500, 512, 1000, 2048, 4096, 10000]:
        lo, hi = binomial_interval(n, p, a)
        pmf = _binomial_pmf(n, p)
        rejected = pmf[:lo].sum() + pmf[hi + 1:].sum()
        assert rejected <= a * (1 + 1e-9), (n, p, lo, hi, rejected)
        # ... and the interval is no wider than it must be: one count less on a side
        # would reject more than a/2 there (where that side can reject at all).
        if hi < n:
            assert pmf[hi:].sum() > a / 2, (n, p, hi)
    # 64 trials with p = 1/16: k standard errors of the normal approximation rejected
    # 14 hits or more, 3.4e-5 of correct answers; the exact interval rejects 17 or more.
    assert binomial_interval(64, 1 / 16, a) == (0, 16)
    assert _binomial_pmf(64, 1 / 16)[14:].sum() > 3e-5


@pytest.mark.parametrize("n", [64, 512, 1000, 4096])
def test_a_correct_variance_of_normal_draws_fails_with_probability_alpha(n):
    from scipy.stats import chi2

    from autograder.random.stats import alpha, chi2_interval, explain_sample_variance

    a = alpha(5.0)
    lo, hi = chi2_interval(n - 1, a)
    rejected = chi2.cdf(lo, n - 1) + chi2.sf(hi, n - 1)
    assert rejected == pytest.approx(a, rel=1e-6)
    # The old k standard errors rejected 2.4e-6 of correct answers at n = 512.
    se = np.sqrt(2 / (n - 1))
    old = chi2.cdf((1 - 5 * se) * (n - 1), n - 1) + chi2.sf((1 + 5 * se) * (n - 1), n - 1)
    assert old > rejected
    # Values just inside the interval pass, just outside fail.
    from autograder.core.wire import observe_tree

    def verdict(s2):
        x = np.zeros(n)
        x[:2] = [-1.0, 1.0]
        x *= np.sqrt(s2 * (n - 1) / 2)  # sample variance exactly s2
        return explain_sample_variance(observe_tree([x]), None, label="w", variance=1.0)

    assert verdict(lo / (n - 1) * 1.001) is None and verdict(hi / (n - 1) * 0.999) is None
    assert "between" in verdict(hi / (n - 1) * 1.01) and verdict(lo / (n - 1) * 0.99)
