"""Distributions, tested with tolerances derived from the sample size.

Random answers cannot be compared with stored numbers: the numbers JAX draws from a
key may change between versions. These checks test what stays true, a statistic of
many draws, within ``k`` standard errors (default 5) of its closed-form value.

How they run: ``observe`` records the samples themselves as data (float64, or bool
for :func:`assert_sample_fraction`); the statistic, its standard error and the
verdict are computed by ``explain_*`` with NumPy, outside the student's process.
Nothing here draws random numbers: the test cell draws its samples from fixed seeds,
so for a given JAX version a verdict is deterministic.

False failures. A correct answer fails when its statistic lands in the rejection
region, whose probability for a correct answer is ``alpha = erfc(k / sqrt(2))``
(5.7e-7 for the default ``k = 5``). Where the statistic's exact distribution is known,
the region is cut from it, so the rate is exact by construction: a fraction's count is
binomial (exact tails, whatever ``n`` and ``p``: a normal approximation gave 3.4e-5 for
64 trials with p = 1/16), and the variance of normal draws is a scaled chi-square
(exact quantiles: the normal approximation gave 2.4e-6 for n = 512). The mean (normal
tails; 3.5e-7 exactly for the mean of 64 uniform positions 0..15) and the correlation
(t distribution: 5.0e-7 for n = 1000) stay under 1e-6 as they are; the variance of
other draws (a count, a bootstrap mean: their excess kurtosis given) rests on a normal
approximation, not computed exactly. ``tests/test_random.py`` computes the exact rates
of the binomial and chi-square intervals. A
wrong scale or shift moves the statistic far into the region and still fails.

The checks return ``None``, never the statistic: nbgrader reads a number left as a
test cell's last value as partial credit.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import format_failure

# Captured at import, before student code runs (see DESIGN.md, tamper-resistance).
_asarray = np.asarray
_sqrt = math.sqrt


def alpha(k: float) -> float:
    """The false-failure probability of a check at ``k``: the two-sided normal tail."""
    return math.erfc(k / math.sqrt(2.0))


def binomial_interval(n: int, p: float, a: float) -> tuple[int, int]:
    """The counts ``[lo, hi]`` a Binomial(n, p) count reaches but for tails of at most
    ``a / 2`` each: ``P(X < lo) <= a/2`` and ``P(X > hi) <= a/2``, exactly.

    >>> binomial_interval(64, 1 / 16, alpha(5.0))
    (0, 16)
    """
    from scipy.special import bdtr, bdtrc

    if n <= 0:
        return 0, 0

    def first(pred) -> int:  # the least count c in [0, n] with pred(c), by bisection
        left, right = 0, n
        while left < right:
            mid = (left + right) // 2
            left, right = (left, mid) if pred(mid) else (mid + 1, right)
        return left

    lo = first(lambda c: bdtr(c, n, p) > a / 2)     # P(X <= lo - 1) <= a/2 < P(X <= lo)
    hi = first(lambda c: bdtrc(c, n, p) <= a / 2)   # P(X > hi) <= a/2
    return lo, hi


def chi2_interval(dof: int, a: float) -> tuple[float, float]:
    """The central ``1 - a`` interval of a chi-square with ``dof`` degrees of freedom."""
    from scipy.special import chdtri

    return float(chdtri(dof, 1 - a / 2)), float(chdtri(dof, a / 2))


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
    autograder.core.feedback.CheckFailure: normal draws: the sample mean is too far from 0
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

    False-failure probability: for normal draws (``excess_kurtosis=0``) exactly
    ``alpha = erfc(k / sqrt(2))`` (5.7e-7 for ``k = 5``): ``(n - 1) s2 / variance``
    follows a chi-square with ``n - 1`` degrees of freedom, and the accepted interval
    is its central ``1 - alpha`` (:func:`chi2_interval`; ``k`` standard errors of a
    normal approximation failed a correct answer with 2.4e-6 at n = 512, the
    chi-square's right tail being heavier). For other draws, ``k`` standard errors
    with the excess kurtosis in the standard error, under the normal approximation.
    The excess kurtosis must be right: too small a value narrows the tolerance. The
    samples come from the test's fixed seeds.

    >>> import numpy as np
    >>> x = np.tile([-0.25, 0.25], 2048)   # variance 0.0625 (ddof=1: 0.0625 * n/(n-1))
    >>> assert_sample_variance(x, 0.0625)
    >>> assert_sample_variance(x, 0.25, name="weights")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: weights: the sample variance is too far from 0.25
      expected: between 0.2233 and 0.2786 (normal draws: ...)
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
    away = abs(got - variance) / se if se > 0 else float("inf")
    if excess_kurtosis == 0.0 and n > 1 and variance > 0:
        lo, hi = chi2_interval(n - 1, alpha(k))
        lo, hi = variance * lo / (n - 1), variance * hi / (n - 1)
        if lo <= got <= hi:
            return None
        expected = (f"between {lo:.4g} and {hi:.4g} (normal draws: (n-1) s2 / {variance:.4g} "
                    f"is chi-square with n-1 = {n - 1} degrees of freedom; a correct "
                    f"answer lands outside with probability {alpha(k):.1e})")
    else:
        tol = k * se
        if abs(got - variance) <= tol:
            return None
        kurt = f" + {excess_kurtosis:g}/n" if excess_kurtosis else ""
        expected = (f"{variance:.4g} +- {tol:.3g} ({k:g} standard errors of "
                    f"{variance:.4g}*sqrt(2/(n-1){kurt}), n={n})")
    return _stat_failure(
        f"{label}: the sample variance is too far from {variance:.4g}",
        expected=expected,
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

    The verdict is exact: the count of hits must lie in the binomial interval
    :func:`binomial_interval` whose two tails each hold at most ``alpha / 2``, with
    ``alpha = erfc(k / sqrt(2))`` (5.7e-7 for ``k = 5``), so a correct answer fails
    with probability at most ``alpha`` for any ``n`` and ``p`` (the ``k`` standard
    errors of a normal approximation failed one with 3.4e-5 for n = 64, p = 1/16,
    where the count is skewed). The samples come from the test's fixed seeds.

    >>> import numpy as np
    >>> kept = np.arange(2000) % 5 != 0   # 4 in 5 kept
    >>> assert_sample_fraction(kept, 0.8)
    >>> assert_sample_fraction(~kept, 0.8, name="kept entries")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: kept entries: 0.2 of 2000 draws, expected 0.8
      expected: 0.8: between 1508 and 1687 hits of 2000 (binomial; ...)
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
    lo, hi = binomial_interval(n, p, alpha(k))
    if n and lo <= int(x.sum()) <= hi:
        return None
    away = abs(got - p) / se if se > 0 else float("inf")
    return _stat_failure(
        f"{label}: {got:.4g} of {n} draws, expected {p:.4g}",
        expected=f"{p:.4g}: between {lo} and {hi} hits of {n} (binomial; a correct answer "
                 f"lands outside with probability at most {alpha(k):.1e})",
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
    autograder.core.feedback.CheckFailure: layer 0 and layer 1 are correlated: r = 0.995
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
