"""Distributions, tested with tolerances derived from the sample size.

Random answers cannot be compared with stored numbers: the numbers JAX draws from a
key may change between versions. These checks test what stays true, a statistic of
many draws, within ``k`` standard errors (default 5) of its closed-form value.

How they run: ``observe`` records the samples themselves as data (float64, or bool
for :func:`assert_sample_fraction`); the statistic, its standard error and the
verdict are computed by ``explain_*`` with NumPy, outside the student's process.
Nothing here draws random numbers: the test cell draws its samples from fixed seeds,
so for a given JAX version a verdict is deterministic.

False failures. A correct answer fails when its statistic lands more than ``k``
standard errors away: for the default ``k = 5`` the two-sided normal tail
``erfc(5 / sqrt(2)) = 5.7e-7``, "for any seed and JAX version" in practice. Each
check's docstring says how good that approximation is for it; for the 04_prng test
cells the exact probabilities (from the sampling distributions: chi-square, binomial,
the t distribution of a correlation, the exact convolution of a uniform mean) are
between 3.5e-7 and 2.4e-6, except the binomial fraction of 64 epochs with p = 1/16
(3.4e-5: few trials, a skewed count). A wrong scale or shift moves the statistic by
many standard errors and still fails.

The checks return ``None``, never the statistic: nbgrader reads a number left as a
test cell's last value as partial credit.
"""
from __future__ import annotations

import math

import numpy as np

from autograder._check import Check, explainer, run
from autograder._feedback import format_failure

# Captured at import, before student code runs (see DESIGN.md, tamper-resistance).
_asarray = np.asarray
_sqrt = math.sqrt


def _floats(x) -> np.ndarray:
    return _asarray(x, dtype=np.float64).ravel()


def _observed_samples(observed, count: int) -> list[np.ndarray] | None:
    """The ``count`` observed sample arrays, or None when the observation is not that."""
    leaves = observed.leaves
    if len(leaves) != count or any(leaf.kind not in ("array", "scalar") for leaf in leaves):
        return None
    return [np.asarray(leaf.value).ravel() for leaf in leaves]


def _unreadable(label: str, section) -> str:
    return format_failure(f"{label}: the grader could not read the samples",
                          expected="an array of numbers", section=section)


def _stat_failure(what, *, expected, got, hint, fix, section, default_cause, default_fix):
    return format_failure(what, expected=expected, got=got, cause=hint or default_cause,
                          fix=fix or default_fix, section=section)


# --- the mean ------------------------------------------------------------------------

def assert_sample_mean(samples, mean: float, std: float, *, k: float = 5.0,
                       name: str = "samples", section: str | None = None,
                       hint: str | None = None, fix: str | None = None) -> None:
    """Asserts ``|mean(samples) - mean| <= k * std / sqrt(n)``.

    Tolerance: the mean of ``n`` independent draws with standard deviation ``std``
    has standard error ``std / sqrt(n)`` (central limit theorem).

    False-failure probability: ``erfc(k / sqrt(2))``, 5.7e-7 for ``k = 5``, under the
    normal approximation of the mean, which is good for n in the hundreds or for
    bounded draws (the exact probability for the mean of 64 uniform positions 0..15
    is 3.5e-7). The samples come from the test's fixed seeds.

    >>> import numpy as np
    >>> x = np.tile([-1.0, 1.0], 2048)   # mean 0, standard deviation 1
    >>> assert_sample_mean(x, 0.0, 1.0)
    >>> assert_sample_mean(x + 0.5, 0.0, 1.0, name="normal draws")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: normal draws: the sample mean is too far from 0
      expected: 0 +- 0.0781 (5 standard errors of 1/sqrt(4096))
      got:      0.5 (32.0 standard errors away)
      likely cause: ...
    """
    __tracebackhide__ = True
    run(Check("sample_mean", name, observe=lambda: _floats(samples),
              params=dict(mean=float(mean), std=float(std), k=float(k), section=section,
                          hint=hint, fix=fix)))


@explainer("sample_mean")
def explain_sample_mean(observed, expected, *, label: str, mean: float, std: float,
                        k: float = 5.0, section=None, hint=None, fix=None,
                        **_ignored) -> str | None:
    samples = _observed_samples(observed, 1)
    if samples is None:
        return _unreadable(label, section)
    x = samples[0].astype(np.float64)
    n = x.size
    got = float(x.mean()) if n else float("nan")
    tol = k * std / _sqrt(max(n, 1))
    if abs(got - mean) <= tol:
        return None
    away = abs(got - mean) / (std / _sqrt(max(n, 1))) if std > 0 else float("inf")
    return _stat_failure(
        f"{label}: the sample mean is too far from {mean:.4g}",
        expected=f"{mean:.4g} +- {tol:.3g} ({k:g} standard errors of {std:.4g}/sqrt({n}))",
        got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
        section=section,
        default_cause="the samples come from another distribution: a shifted mean or the "
                      "wrong sampler",
        default_fix="check which jax.random function you call and what you add to or "
                    "multiply its output by")


# --- the variance --------------------------------------------------------------------

def assert_sample_variance(samples, variance: float, *, k: float = 5.0,
                           excess_kurtosis: float = 0.0, name: str = "samples",
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts the sample variance is within ``k`` standard errors of ``variance``.

    Tolerance: for ``n`` independent draws the sample variance ``s2`` has standard
    error ``variance * sqrt(2 / (n - 1) + excess_kurtosis / n)``; the excess
    kurtosis is 0 for normal draws, -1.2 for uniform ones, ``1/(p(1-p)) - 6`` for a
    Bernoulli(p).

    False-failure probability: ``erfc(k / sqrt(2))``, 5.7e-7 for ``k = 5``, under the
    normal approximation of ``s2``. For normal draws ``s2`` follows a scaled
    chi-square, whose right tail is heavier: the exact probability is 2.4e-6 for
    n = 512, 1.4e-6 for n = 1000, 7.7e-7 for n = 4096. The excess kurtosis must be
    right: too small a value narrows the tolerance. The samples come from the test's
    fixed seeds.

    >>> import numpy as np
    >>> x = np.tile([-0.25, 0.25], 2048)   # variance 0.0625 (ddof=1: 0.0625 * n/(n-1))
    >>> assert_sample_variance(x, 0.0625)
    >>> assert_sample_variance(x, 0.25, name="weights")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: weights: the sample variance is too far from 0.25
      expected: 0.25 +- 0.0276 (5 standard errors of 0.25*sqrt(2/(n-1)), n=4096)
      got:      0.06252 (33.9 standard errors away)
      likely cause: the wrong scale: ...
    """
    __tracebackhide__ = True
    run(Check("sample_variance", name, observe=lambda: _floats(samples),
              params=dict(variance=float(variance), k=float(k),
                          excess_kurtosis=float(excess_kurtosis), section=section,
                          hint=hint, fix=fix)))


@explainer("sample_variance")
def explain_sample_variance(observed, expected, *, label: str, variance: float,
                            k: float = 5.0, excess_kurtosis: float = 0.0, section=None,
                            hint=None, fix=None, **_ignored) -> str | None:
    samples = _observed_samples(observed, 1)
    if samples is None:
        return _unreadable(label, section)
    x = samples[0].astype(np.float64)
    n = x.size
    got = float(x.var(ddof=1)) if n > 1 else 0.0
    se = variance * _sqrt(max(2.0 / max(n - 1, 1) + excess_kurtosis / max(n, 1), 0.0))
    tol = k * se
    if abs(got - variance) <= tol:
        return None
    away = abs(got - variance) / se if se > 0 else float("inf")
    kurt = f" + {excess_kurtosis:g}/n" if excess_kurtosis else ""
    return _stat_failure(
        f"{label}: the sample variance is too far from {variance:.4g}",
        expected=f"{variance:.4g} +- {tol:.3g} ({k:g} standard errors of "
                 f"{variance:.4g}*sqrt(2/(n-1){kurt}), n={n})",
        got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
        section=section,
        default_cause="the wrong scale: a standard deviation used as a variance (or the "
                      "reverse), or the wrong sampler",
        default_fix="draws with standard deviation s are `s * jax.random.normal(key, "
                    "shape)`, with variance s**2")


# --- a fraction ------------------------------------------------------------------------

def assert_sample_fraction(hits, p: float, *, k: float = 5.0, name: str = "fraction",
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts the fraction of true ``hits`` is within ``k * sqrt(p(1-p)/n)`` of ``p``.

    Tolerance: a count of ``n`` independent Bernoulli(p) trials has standard
    deviation ``sqrt(n p (1-p))`` (binomial), so the fraction has ``sqrt(p(1-p)/n)``.

    False-failure probability: ``erfc(k / sqrt(2))``, 5.7e-7 for ``k = 5``, under the
    normal approximation, good when ``n p`` and ``n (1 - p)`` are both in the
    hundreds (exact binomial tails: 5.1e-7 for n = 2048, p = 0.5; 9.2e-7 for p = 0.1).
    With few expected hits the count is skewed and the right tail heavier: 3.4e-5
    for n = 64, p = 1/16. The samples come from the test's fixed seeds.

    >>> import numpy as np
    >>> kept = np.arange(2000) % 5 != 0   # 4 in 5 kept
    >>> assert_sample_fraction(kept, 0.8)
    >>> assert_sample_fraction(~kept, 0.8, name="kept entries")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: kept entries: 0.2 of 2000 draws, expected 0.8
      expected: 0.8 +- 0.0447 (5 standard errors of sqrt(p(1-p)/n))
      got:      0.2 (67.1 standard errors away)
      likely cause: ...
    """
    __tracebackhide__ = True
    run(Check("sample_fraction", name, observe=lambda: _asarray(hits).ravel().astype(bool),
              params=dict(p=float(p), k=float(k), section=section, hint=hint, fix=fix)))


@explainer("sample_fraction")
def explain_sample_fraction(observed, expected, *, label: str, p: float, k: float = 5.0,
                            section=None, hint=None, fix=None, **_ignored) -> str | None:
    samples = _observed_samples(observed, 1)
    if samples is None:
        return _unreadable(label, section)
    x = samples[0].astype(bool)
    n = x.size
    got = float(x.mean()) if n else float("nan")
    se = _sqrt(p * (1 - p) / max(n, 1))
    tol = k * se
    if abs(got - p) <= tol + 1e-12:
        return None
    away = abs(got - p) / se if se > 0 else float("inf")
    return _stat_failure(
        f"{label}: {got:.4g} of {n} draws, expected {p:.4g}",
        expected=f"{p:.4g} +- {tol:.3g} ({k:g} standard errors of sqrt(p(1-p)/n))",
        got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
        section=section,
        default_cause="the probability is swapped (p where 1 - p was meant) or the "
                      "comparison is reversed",
        default_fix="jax.random.bernoulli(key, p, shape) is True with probability p")


# --- no correlation ----------------------------------------------------------------------

def assert_uncorrelated(a, b, *, k: float = 5.0, name: str = "the two samples",
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None) -> None:
    """Asserts the Pearson correlation of ``a`` and ``b`` is within ``k / sqrt(n - 1)`` of 0.

    Tolerance: for independent samples the correlation coefficient has standard
    deviation close to ``1 / sqrt(n - 1)``. Equal samples (correlation 1) come from
    reusing a key.

    False-failure probability: ``erfc(k / sqrt(2))``, 5.7e-7 for ``k = 5``, under the
    normal approximation of ``r``; for independent normal samples the exact value
    (``r`` through the t distribution) is 5.0e-7 for n = 1000 and 5.5e-7 for
    n = 4000. The samples come from the test's fixed seeds.

    >>> import numpy as np
    >>> a = np.tile([1.0, -1.0], 500)
    >>> b = np.tile([1.0, 1.0, -1.0, -1.0], 250)   # orthogonal to a: r = 0
    >>> assert_uncorrelated(a, b)
    >>> assert_uncorrelated(a, a + 0.1 * b, name="layer 0 and layer 1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: layer 0 and layer 1 are correlated: r = 0.995
      expected: |r| <= 0.158 (5 standard errors of 1/sqrt(n-1), n=1000)
      got:      r = 0.995
      likely cause: both were drawn from the same key ...
    """
    __tracebackhide__ = True
    run(Check("uncorrelated", name, observe=lambda: (_floats(a), _floats(b)),
              params=dict(k=float(k), section=section, hint=hint, fix=fix)))


@explainer("uncorrelated")
def explain_uncorrelated(observed, expected, *, label: str, k: float = 5.0, section=None,
                         hint=None, fix=None, **_ignored) -> str | None:
    samples = _observed_samples(observed, 2)
    if samples is None:
        return _unreadable(label, section)
    x, y = (s.astype(np.float64) for s in samples)
    if x.size != y.size:
        return format_failure(f"{label} have different sizes",
                              expected="two samples of the same size",
                              got=f"{x.size} and {y.size}", section=section)
    n = x.size
    sx, sy = (x.std(), y.std()) if n else (0.0, 0.0)
    teach = dict(hint=hint, fix=fix, section=section,
                 default_cause="both were drawn from the same key (or from keys that are not "
                               "independent): equal keys give equal numbers",
                 default_fix="give each draw its own key from jax.random.split or "
                             "jax.random.fold_in")
    if sx == 0 or sy == 0:
        return _stat_failure(f"{label}: one of them is constant", expected="random values",
                             got=f"std {sx:.3g} and {sy:.3g}", **teach)
    r = float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))
    tol = k / _sqrt(max(n - 1, 1))
    if abs(r) <= tol:
        return None
    return _stat_failure(f"{label} are correlated: r = {r:.3f}",
                         expected=f"|r| <= {tol:.3g} ({k:g} standard errors of 1/sqrt(n-1), "
                                  f"n={n})",
                         got=f"r = {r:.4g}", **teach)
