"""PRNG checks: typed keys, key reuse, determinism, key dependence, statistics, width.

Random answers cannot be compared with stored numbers: the numbers JAX draws from a
key may change between versions. So these checks test what stays true:

- key discipline: typed keys (:func:`assert_typed_keys`), no key used twice
  (:func:`assert_no_key_reuse`, JAX's key-reuse checker, which tracks typed keys
  only), the same key gives the same result (:func:`assert_deterministic`), another
  key gives another result (:func:`assert_varies_with_key`);
- distributions, with tolerances derived from the sample size
  (:func:`assert_sample_mean`, :func:`assert_sample_variance`,
  :func:`assert_sample_fraction`, :func:`assert_uncorrelated`);
- the shape of the key tree: many keys derived at once, not one after another
  (:func:`assert_wide_key_tree`).

The statistical checks return ``None``, never the statistic: nbgrader reads a number
left as a test cell's last value as partial credit. Every statistical check allows
``k`` standard errors (default 5). Test cells draw
their samples from fixed seeds, so a check is deterministic; ``k = 5`` makes sure a
correct answer passes for any seed and JAX version (a two-sided 5-sigma deviation
has probability about 6e-7 under the normal approximation) while a wrong scale or
shift, which moves the statistic by many standard errors, still fails.
"""
from __future__ import annotations

import math
import os
import traceback
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np

from autograder._feedback import call_signature, describe_value, fail
from autograder._numeric import call_student
from autograder._quiet import report_captured

# Captured at import, before student code runs (see DESIGN.md, tamper-resistance).
_asarray = np.asarray
_array_equal = np.array_equal
_sqrt = math.sqrt

# The primitives that consume or derive keys, as they appear in a jaxpr.
PRNG_PRIMITIVES = ("random_seed", "random_split", "random_fold_in", "random_bits")
_LOOP_PRIMITIVES = ("scan", "while")
_HERE = os.path.dirname(os.path.abspath(__file__))


# --- keys as data ---------------------------------------------------------------

def _is_key(x) -> bool:
    import jax

    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def collect_key_data(tree):
    """Replaces every typed key in a pytree by its raw data, as NumPy arrays.

    Typed keys cannot be compared with ``==`` across calls or turned into NumPy
    arrays; their data (``jax.random.key_data``, two ``uint32`` words per threefry
    key) can. Other leaves become NumPy arrays too. Reading key data does not
    consume a key.

    >>> import jax
    >>> collect_key_data(jax.random.split(jax.random.key(0), 3)).shape
    (3, 2)
    """
    import jax

    def leaf(x):
        if _is_key(x):
            return _asarray(jax.random.key_data(x))
        return _asarray(x)

    return jax.tree.map(leaf, tree)


def _fresh(tree):
    """Copies every key leaf with ``jax.random.clone``: same data, not yet consumed."""
    import jax

    return jax.tree.map(lambda x: jax.random.clone(x) if _is_key(x) else x, tree)


def assert_typed_keys(keys, *, shape: tuple | None = None, name: str = "result",
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None) -> None:
    """Asserts that ``keys`` is an array of typed PRNG keys, with ``shape`` if given.

    >>> import jax
    >>> assert_typed_keys(jax.random.split(jax.random.key(0), 4), shape=(4,))
    >>> assert_typed_keys(jax.numpy.zeros((4, 2), "uint32"), name="make_keys(0, 4)")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: make_keys(0, 4) is not an array of typed PRNG keys
      expected: a key array (dtype key<fry>), e.g. from jax.random.key or jax.random.split
      got:      u32[4,2]
      likely cause: raw uint32 arrays: legacy jax.random.PRNGKey keys or jax.random.key_data
      fix: create keys with jax.random.key(seed) and derive more with jax.random.split
    """
    __tracebackhide__ = True
    if not _is_key(keys):
        fail(f"{name} is not an array of typed PRNG keys", rung="type",
             expected="a key array (dtype key<fry>), e.g. from jax.random.key or jax.random.split",
             got=describe_value(keys),
             cause=hint or "raw uint32 arrays: legacy jax.random.PRNGKey keys or jax.random.key_data",
             fix=fix or "create keys with jax.random.key(seed) and derive more with jax.random.split",
             section=section)
    if shape is not None and tuple(keys.shape) != tuple(shape):
        fail(f"{name} has the wrong shape", rung="shape", expected=f"{tuple(shape)} keys",
             got=f"{tuple(keys.shape)} keys",
             cause=hint or "too many or too few keys (a key array's shape counts keys, "
                           "not the two uint32 words inside each key)",
             fix=fix or "jax.random.split(key, n) returns n keys, shape (n,)", section=section)


def assert_distinct_keys(keys, *, name: str = "result", section: str | None = None,
                         hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that no two keys are equal, in a key array or a sequence of key arrays.

    Pass several arrays as a tuple rather than ``jnp.concatenate``-ing them: the
    key-reuse checker counts a concatenated key array as consumed.

    >>> import jax, jax.numpy as jnp
    >>> assert_distinct_keys(jax.random.split(jax.random.key(0), 3))
    >>> assert_distinct_keys((jax.random.split(jax.random.key(0), 3),
    ...                       jax.random.split(jax.random.key(1), 3)))
    >>> k = jax.random.key(0)
    >>> assert_distinct_keys(jnp.stack([k, k, k]), name="keys")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: keys contains equal keys
      expected: 3 different keys
      got:      only 1 distinct: key 1 equals key 0, key 2 equals key 0
      likely cause: the same key was copied instead of split: equal keys give equal numbers
      fix: derive n different keys with jax.random.split(key, n)
    """
    __tracebackhide__ = True
    import jax

    leaves = jax.tree.leaves(collect_key_data(keys))
    data = np.concatenate([leaf.reshape(-1, leaf.shape[-1]) for leaf in leaves])
    first: dict[bytes, int] = {}
    dups = []
    for i, row in enumerate(data):
        j = first.setdefault(row.tobytes(), i)
        if j != i:
            dups.append(f"key {i} equals key {j}")
    if dups:
        shown = ", ".join(dups[:4]) + (f" (and {len(dups) - 4} more)" if len(dups) > 4 else "")
        fail(f"{name} contains equal keys", expected=f"{len(data)} different keys",
             got=f"only {len(first)} distinct: {shown}",
             cause=hint or "the same key was copied instead of split: equal keys give equal numbers",
             fix=fix or "derive n different keys with jax.random.split(key, n)", section=section)


def assert_keys_match(got, expected, *, name: str = "result", section: str | None = None,
                      hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that two key arrays hold the same keys, position by position.

    >>> import jax
    >>> k = jax.random.key(1)
    >>> assert_keys_match(jax.random.fold_in(k, 3), jax.random.fold_in(k, 3))
    >>> assert_keys_match(jax.random.split(k, 2), jax.random.split(k, 2)[::-1], name="keys")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: keys holds different keys
      expected: the same key at every position
      got:      2 of 2 positions differ (first: position 0)
    """
    __tracebackhide__ = True
    assert_typed_keys(got, shape=tuple(expected.shape), name=name, section=section)
    g = collect_key_data(got).reshape(-1, collect_key_data(got).shape[-1])
    e = collect_key_data(expected).reshape(g.shape)
    bad = [i for i in range(len(g)) if not _array_equal(g[i], e[i])]
    if bad:
        fail(f"{name} holds different keys", expected="the same key at every position",
             got=f"{len(bad)} of {len(g)} positions differ (first: position {bad[0]})",
             cause=hint, fix=fix, section=section)


# --- key discipline: reuse, determinism, dependence -------------------------------

def _student_line(err: BaseException) -> str | None:
    """Where the innermost traceback frame outside JAX and this package points.

    In a notebook that is the student's cell: ``in init, line 3 of its cell: code``.
    """
    frames = traceback.extract_tb(err.__traceback__)
    for fr in reversed(frames):
        path = fr.filename or ""
        if (path.startswith(_HERE) or "site-packages" in path or path.startswith("<frozen")
                or os.sep + "jax" + os.sep in path or os.sep + "jaxlib" + os.sep in path):
            continue
        code = (fr.line or "").strip()
        cell = "ipykernel_" in path or path.startswith("<ipython-input")
        where = "its cell" if cell else os.path.basename(path)
        return f"in {fr.name}, line {fr.lineno} of {where}" + (f": {code}" if code else "")
    return None


def _call_checked(fn: Callable, args: Sequence, kwargs: dict, *, label: str,
                  section: str | None, hint: str | None = None, fix: str | None = None):
    """Calls ``fn`` on fresh copies of its keys with the key-reuse checker on.

    Every check of this module calls the student's function this way, so a reuse is
    caught whichever check runs first, and all calls share one compilation cache
    (the checker's setting is part of JAX's cache key).
    """
    __tracebackhide__ = True
    import jax
    from jax.errors import KeyReuseError

    args, kwargs = _fresh((tuple(args), dict(kwargs or {})))
    caught: list[BaseException] = []

    def checked(*a, **k):
        try:
            with jax.debug_key_reuse(True):
                return fn(*a, **k)
        except KeyReuseError as err:
            caught.append(err)
            return None

    checked.__name__ = getattr(fn, "__name__", "fn")
    result, captured = call_student(checked, args, kwargs, name=label, section=section)
    if caught:
        err = caught[0]
        where = _student_line(err)
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        fail(f"{label} used a PRNG key twice", rung="values",
             details=[f"got:      KeyReuseError: {first}"]
             + ([f"where:    {where}"] if where else []),
             cause=hint or ("a key that was already passed to a sampler or split was used again: "
                            "the two draws are not independent (often identical); or a key "
                            "kept outside the function that an earlier call already used"),
             fix=fix or ("split before every use: `key, sub = jax.random.split(key)` or "
                         "`k1, k2 = jax.random.split(key)`, and pass each key to exactly "
                         "one random function"),
             section=section)
    # Hand back fresh copies of any keys the function returned: the checker marks
    # some legitimate results as consumed (a key array built with jnp.stack, for
    # one), and the test that slices or draws from them must not fail for that.
    return _fresh(result), captured


def assert_no_key_reuse(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                        name: str | None = None, section: str | None = None,
                        hint: str | None = None, fix: str | None = None):
    """Calls ``fn`` with JAX's key-reuse checker on; fails if a key is used twice.

    Key arguments are cloned first, so keys the caller used before do not count
    against ``fn``. The checker (``jax.debug_key_reuse``) tracks typed keys only:
    a key is consumed when it is passed to a sampler or to ``split``; ``fold_in``
    and ``key_data`` do not consume it. :func:`assert_deterministic` and
    :func:`assert_varies_with_key` call ``fn`` the same way.

    Returns:
      The result of ``fn``, its keys cloned so that the caller can use them.

    >>> import jax
    >>> def two_draws(key):
    ...     a = jax.random.normal(key)
    ...     b = jax.random.normal(key)
    ...     return a, b
    >>> assert_no_key_reuse(two_draws, (jax.random.key(0),))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: two_draws(key=key<fry>[]) used a PRNG key twice
      got:      KeyReuseError: Previously-consumed key passed to jit-compiled function at index 0
      where:    in two_draws, line 3 of ...: b = jax.random.normal(key)
      likely cause: a key that was already passed to a sampler or split was used again: ...
      fix: split before every use: `key, sub = jax.random.split(key)` or ...
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs or {})
    result, captured = _call_checked(fn, args, kwargs, label=label, section=section,
                                     hint=hint, fix=fix)
    report_captured(captured, label)
    return result


def _first_difference(a, b) -> str | None:
    """Where two pytrees of NumPy arrays differ, or None if they are identical."""
    import jax

    a_leaves, a_def = jax.tree_util.tree_flatten_with_path(a)
    b_leaves, b_def = jax.tree_util.tree_flatten_with_path(b)
    if a_def != b_def:
        return f"the structure changed: {a_def} then {b_def}"
    for (path, x), (_, y) in zip(a_leaves, b_leaves):
        if x.shape != y.shape:
            return f"{jax.tree_util.keystr(path) or 'result'}: shape {x.shape} then {y.shape}"
        if not _array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
            n = int((x != y).sum())
            return f"{jax.tree_util.keystr(path) or 'result'}: {n} of {x.size} entries differ"
    return None


def assert_deterministic(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                         name: str | None = None, section: str | None = None,
                         hint: str | None = None, fix: str | None = None):
    """Calls ``fn`` twice with equal (freshly cloned) keys; the results must be identical.

    Both calls run with the key-reuse checker on, as in :func:`assert_no_key_reuse`.

    Returns:
      The result of the first call.

    >>> import jax, numpy as np
    >>> def noisy(key):
    ...     return jax.random.normal(key) + np.random.normal()
    >>> assert_deterministic(noisy, (jax.random.key(0),))
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: noisy(key=key<fry>[]) gave different results for the same key
      expected: identical results from equal keys
      got:      result: 1 of 1 entries differ
      likely cause: randomness that does not come from the key: np.random, Python's random, time, or a counter kept outside the function
      fix: draw every random number with jax.random from the key argument (split it when you need several)
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    first, cap1 = _call_checked(fn, args, kwargs, label=label, section=section)
    second, _ = _call_checked(fn, args, kwargs, label=label, section=section)
    diff = _first_difference(collect_key_data(first), collect_key_data(second))
    if diff:
        fail(f"{label} gave different results for the same key",
             expected="identical results from equal keys", got=diff,
             cause=hint or ("randomness that does not come from the key: np.random, Python's "
                            "random, time, or a counter kept outside the function"),
             fix=fix or ("draw every random number with jax.random from the key argument "
                         "(split it when you need several)"),
             section=section)
    report_captured(cap1, label)
    return first


def _param_name(fn: Callable, num: int) -> str:
    import inspect

    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[num] if num < len(params) else f"argument {num}"


def assert_varies_with_key(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                           key_argnum: int = 0, other_key=None, every_leaf: bool = False,
                           name: str | None = None, section: str | None = None,
                           hint: str | None = None, fix: str | None = None) -> None:
    """Calls ``fn`` with ``args[key_argnum]`` and with ``other_key``; results must differ.

    A function that ignores its key (a hard-coded ``jax.random.key(0)`` inside, or
    a global key) gives identical results for every key. By default one differing
    leaf is enough; ``every_leaf=True`` requires every leaf to change (e.g. every
    layer's weights). The argument need not be a key: pass ``key_argnum`` and
    ``other_key`` to check that results change with an epoch or a step number.

    Args:
      other_key: the second value; for a key argument the default is
        ``fold_in(key, 0x5EED)``, a key that differs from the first whatever seed
        the test used.

    >>> import jax
    >>> def ignores_key(key, n):
    ...     return jax.random.normal(jax.random.key(0), (n,))
    >>> assert_varies_with_key(ignores_key, (jax.random.key(1), 3))
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: ignores_key(key=key<fry>[], n=int 3) gave the same result for two different values of key
      expected: a different result for a different key
      got:      identical results
      likely cause: the function ignores its key argument: a hard-coded jax.random.key(...) inside it, or a key from outside the function
      fix: draw from the key you are given (split it when you need several keys)
    """
    __tracebackhide__ = True
    import jax

    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    arg = _param_name(fn, key_argnum)
    args = tuple(args)
    if other_key is None:
        other_key = jax.random.fold_in(jax.random.clone(args[key_argnum]), 0x5EED)
    b_args = list(args)
    b_args[key_argnum] = other_key
    first, cap = _call_checked(fn, args, kwargs, label=label, section=section)
    second, _ = _call_checked(fn, tuple(b_args), kwargs, label=label, section=section)
    a, b = collect_key_data(first), collect_key_data(second)
    leaves = jax.tree_util.tree_flatten_with_path(a)[0]
    b_leaves, b_def = jax.tree_util.tree_flatten_with_path(b)
    if jax.tree.structure(a) != b_def:
        return  # a different structure is a difference
    same = [jax.tree_util.keystr(p) or "result" for (p, x), (_, y) in zip(leaves, b_leaves)
            if x.shape == y.shape and _array_equal(x, y)]
    if (every_leaf and same) or len(same) == len(leaves):
        got = "identical results" if len(same) == len(leaves) else (
            f"identical for {', '.join(same[:4])}" + (" ..." if len(same) > 4 else ""))
        fail(f"{label} gave the same result for two different values of {arg}",
             expected=f"a different result for a different {arg}" + (
                 " in every leaf" if every_leaf and len(leaves) > 1 else ""),
             got=got,
             cause=hint or ("the function ignores its key argument: a hard-coded "
                            "jax.random.key(...) inside it, or a key from outside the function"),
             fix=fix or "draw from the key you are given (split it when you need several keys)",
             section=section)
    report_captured(cap, label)


def assert_key_discipline(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                          key_argnum: int = 0, every_leaf: bool = False,
                          name: str | None = None, section: str | None = None):
    """No key reuse, same key same result, different key different result.

    Runs :func:`assert_no_key_reuse`, :func:`assert_deterministic` and
    :func:`assert_varies_with_key` in that order and returns ``fn``'s result.

    >>> import jax
    >>> def draw(key, n):
    ...     k1, k2 = jax.random.split(key)
    ...     return jax.random.normal(k1, (n,)) + jax.random.uniform(k2, (n,))
    >>> assert_key_discipline(draw, (jax.random.key(0), 4)).shape
    (4,)
    """
    __tracebackhide__ = True
    result = assert_no_key_reuse(fn, args, kwargs, name=name, section=section)
    assert_deterministic(fn, args, kwargs, name=name, section=section)
    assert_varies_with_key(fn, args, kwargs, key_argnum=key_argnum, every_leaf=every_leaf,
                           name=name, section=section)
    return result


# --- distributions: tolerances from the sample size -------------------------------

def _samples(x) -> np.ndarray:
    return _asarray(x, dtype=np.float64).ravel()


def _stat_failure(what, *, expected, got, hint, fix, section, default_cause, default_fix):
    __tracebackhide__ = True
    fail(what, expected=expected, got=got, cause=hint or default_cause, fix=fix or default_fix,
         section=section)


def assert_sample_mean(samples, mean: float, std: float, *, k: float = 5.0,
                       name: str = "samples", section: str | None = None,
                       hint: str | None = None, fix: str | None = None) -> None:
    """Asserts ``|mean(samples) - mean| <= k * std / sqrt(n)``.

    Tolerance: the mean of ``n`` independent draws with standard deviation ``std``
    has standard error ``std / sqrt(n)`` (central limit theorem).

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
    x = _samples(samples)
    n = x.size
    got = float(x.mean())
    tol = k * std / _sqrt(n)
    if not abs(got - mean) <= tol:
        away = abs(got - mean) / (std / _sqrt(n)) if std > 0 else float("inf")
        _stat_failure(f"{name}: the sample mean is too far from {mean:.4g}",
                      expected=f"{mean:.4g} +- {tol:.3g} ({k:g} standard errors of "
                               f"{std:.4g}/sqrt({n}))",
                      got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
                      section=section,
                      default_cause="the samples come from another distribution: a shifted "
                                    "mean or the wrong sampler",
                      default_fix="check which jax.random function you call and what you add "
                                  "to or multiply its output by")


def assert_sample_variance(samples, variance: float, *, k: float = 5.0,
                           excess_kurtosis: float = 0.0, name: str = "samples",
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts the sample variance is within ``k`` standard errors of ``variance``.

    Tolerance: for ``n`` independent draws the sample variance ``s2`` has standard
    error ``variance * sqrt(2 / (n - 1) + excess_kurtosis / n)``; the excess
    kurtosis is 0 for normal draws, -1.2 for uniform ones, ``1/(p(1-p)) - 6`` for a
    Bernoulli(p).

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
    x = _samples(samples)
    n = x.size
    got = float(x.var(ddof=1)) if n > 1 else 0.0
    se = variance * _sqrt(max(2.0 / max(n - 1, 1) + excess_kurtosis / n, 0.0))
    tol = k * se
    if not abs(got - variance) <= tol:
        away = abs(got - variance) / se if se > 0 else float("inf")
        kurt = f" + {excess_kurtosis:g}/n" if excess_kurtosis else ""
        _stat_failure(f"{name}: the sample variance is too far from {variance:.4g}",
                      expected=f"{variance:.4g} +- {tol:.3g} ({k:g} standard errors of "
                               f"{variance:.4g}*sqrt(2/(n-1){kurt}), n={n})",
                      got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
                      section=section,
                      default_cause="the wrong scale: a standard deviation used as a "
                                    "variance (or the reverse), or the wrong sampler",
                      default_fix="draws with standard deviation s are `s * "
                                  "jax.random.normal(key, shape)`, with variance s**2")


def assert_sample_fraction(hits, p: float, *, k: float = 5.0, name: str = "fraction",
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts the fraction of true ``hits`` is within ``k * sqrt(p(1-p)/n)`` of ``p``.

    Tolerance: a count of ``n`` independent Bernoulli(p) trials has standard
    deviation ``sqrt(n p (1-p))`` (binomial), so the fraction has ``sqrt(p(1-p)/n)``.

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
    x = _asarray(hits).ravel().astype(bool)
    n = x.size
    got = float(x.mean())
    se = _sqrt(p * (1 - p) / n)
    tol = k * se
    if not abs(got - p) <= tol + 1e-12:
        away = abs(got - p) / se if se > 0 else float("inf")
        _stat_failure(f"{name}: {got:.4g} of {n} draws, expected {p:.4g}",
                      expected=f"{p:.4g} +- {tol:.3g} ({k:g} standard errors of "
                               f"sqrt(p(1-p)/n))",
                      got=f"{got:.4g} ({away:.1f} standard errors away)", hint=hint, fix=fix,
                      section=section,
                      default_cause="the probability is swapped (p where 1 - p was meant) "
                                    "or the comparison is reversed",
                      default_fix="jax.random.bernoulli(key, p, shape) is True with "
                                  "probability p")


def assert_uncorrelated(a, b, *, k: float = 5.0, name: str = "the two samples",
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None) -> None:
    """Asserts the Pearson correlation of ``a`` and ``b`` is within ``k / sqrt(n - 1)`` of 0.

    Tolerance: for independent samples the correlation coefficient has standard
    deviation close to ``1 / sqrt(n - 1)``. Equal samples (correlation 1) come from
    reusing a key.

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
    x, y = _samples(a), _samples(b)
    if x.size != y.size:
        fail(f"{name} have different sizes", expected="two samples of the same size",
             got=f"{x.size} and {y.size}", section=section)
    n = x.size
    sx, sy = x.std(), y.std()
    default_cause = ("both were drawn from the same key (or from keys that are not "
                     "independent): equal keys give equal numbers")
    default_fix = "give each draw its own key from jax.random.split or jax.random.fold_in"
    if sx == 0 or sy == 0:
        _stat_failure(f"{name}: one of them is constant", expected="random values",
                      got=f"std {sx:.3g} and {sy:.3g}", hint=hint, fix=fix, section=section,
                      default_cause=default_cause, default_fix=default_fix)
    r = float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))
    tol = k / _sqrt(max(n - 1, 1))
    if not abs(r) <= tol:
        _stat_failure(f"{name} are correlated: r = {r:.3f}",
                      expected=f"|r| <= {tol:.3g} ({k:g} standard errors of 1/sqrt(n-1), n={n})",
                      got=f"r = {r:.4g}", hint=hint, fix=fix, section=section,
                      default_cause=default_cause, default_fix=default_fix)


# --- the shape of the key tree -----------------------------------------------------

def _sub_jaxprs(params: dict):
    import jax.extend.core as jex

    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jex.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jex.Jaxpr):
                yield item


def _walk(jaxpr):
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        yield eqn
        for sub in _sub_jaxprs(eqn.params):
            yield from _walk(sub)


def count_prng_ops(jaxpr) -> Counter:
    """Counts the PRNG primitives of a jaxpr, nested jaxprs included.

    ``random_split``, ``random_fold_in``, ``random_bits`` (behind every sampler) and
    ``random_seed``.

    >>> import jax
    >>> def deep(key):
    ...     out = []
    ...     for _ in range(3):
    ...         key, sub = jax.random.split(key)
    ...         out.append(jax.random.normal(sub))
    ...     return out
    >>> dict(count_prng_ops(jax.make_jaxpr(deep)(jax.random.key(0))))
    {'random_split': 3, 'random_bits': 3}
    """
    return Counter(eqn.primitive.name for eqn in _walk(jaxpr)
                   if eqn.primitive.name in PRNG_PRIMITIVES)


def collect_key_carrying_loops(jaxpr) -> list[str]:
    """Names the ``scan``/``while`` loops whose body hands a key to the next iteration.

    A body that returns a key carries it: ``key, sub = jax.random.split(key)`` in a
    ``scan`` or ``fori_loop`` body, a chain of keys as deep as the loop is long.
    Mapping over keys made beforehand (``jax.lax.map(f, jax.random.split(key, n))``)
    carries none.

    >>> import jax
    >>> def chain(key):
    ...     def body(k, _):
    ...         k, sub = jax.random.split(k)
    ...         return k, jax.random.normal(sub)
    ...     return jax.lax.scan(body, key, None, length=4)[1]
    >>> collect_key_carrying_loops(jax.make_jaxpr(chain)(jax.random.key(0)))
    ['scan']
    """
    found = []
    for eqn in _walk(jaxpr):
        if eqn.primitive.name not in _LOOP_PRIMITIVES:
            continue
        body = eqn.params.get("jaxpr") or eqn.params.get("body_jaxpr")
        body = getattr(body, "jaxpr", body)
        if body is not None and any(_is_key(getattr(v, "aval", None)) for v in body.outvars):
            found.append(eqn.primitive.name)
    return found


def assert_wide_key_tree(fn: Callable, make_args: Callable[[int], Sequence],
                         sizes: Sequence[int] = (4, 16), *, static_argnums=(),
                         name: str | None = None, section: str | None = None,
                         hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``fn`` derives its ``n`` keys at once, not one after another.

    Traces ``fn(*make_args(n))`` for each ``n`` in ``sizes``. A wide key tree
    (``jax.random.split(key, n)`` or ``fold_in`` under ``vmap``, then a vmapped
    sampler) has the same PRNG operations whatever ``n``; a Python loop adds
    operations with every item, and a ``scan``/``fori_loop`` that carries the key
    is a chain ``n`` keys deep (:func:`collect_key_carrying_loops`). Only jaxpr
    primitive counts are compared, never HLO text.

    >>> import jax
    >>> def wide(key, n):
    ...     return jax.vmap(jax.random.normal)(jax.random.split(key, n))
    >>> assert_wide_key_tree(wide, lambda n: (jax.random.key(0), n), static_argnums=(1,))
    >>> def deep(key, n):
    ...     out = []
    ...     for _ in range(n):
    ...         key, sub = jax.random.split(key)
    ...         out.append(jax.random.normal(sub))
    ...     return jax.numpy.stack(out)
    >>> assert_wide_key_tree(deep, lambda n: (jax.random.key(0), n), static_argnums=(1,))
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: deep makes its random draws one item at a time: its PRNG work grows with n
      expected: the same PRNG operations for every n
      got:      n=4: 8 PRNG operations (random_split 4, random_bits 4); n=16: 32 PRNG operations (random_split 16, random_bits 16)
      likely cause: a Python loop over the items: a chain `key, sub = jax.random.split(key)`, or one sampler call per item
      fix: derive all n keys at once with `keys = jax.random.split(key, n)` and `jax.vmap` the per-item work over them
    """
    __tracebackhide__ = True
    from autograder._jaxpr import trace_jaxpr

    label = name or getattr(fn, "__name__", "the function")
    counts, loops = [], []
    for n in sizes:
        jaxpr = trace_jaxpr(fn, tuple(make_args(n)), section=section,
                            static_argnums=static_argnums)
        counts.append(count_prng_ops(jaxpr))
        loops.extend(collect_key_carrying_loops(jaxpr))
    default_fix = ("derive all n keys at once with `keys = jax.random.split(key, n)` and "
                   "`jax.vmap` the per-item work over them")
    if loops:
        fail(f"{label} carries a key from one loop iteration to the next: a key chain "
             f"n deep", rung="structure",
             expected="keys made before the loop, none handed from iteration to iteration",
             got=f"a {loops[0]} loop whose body returns a key",
             cause=hint or ("`key, sub = jax.random.split(key)` in a scan or fori_loop body: "
                            "every key waits for the one before it"),
             fix=fix or default_fix, section=section)
    totals = [sum(c.values()) for c in counts]
    if totals[-1] > totals[0]:
        def show(n, c):
            ops = ", ".join(f"{p} {v}" for p, v in c.items())
            return f"n={n}: {sum(c.values())} PRNG operations ({ops})"
        fail(f"{label} makes its random draws one item at a time: its PRNG work grows "
             f"with n", rung="structure",
             expected="the same PRNG operations for every n",
             got="; ".join(show(n, c) for n, c in zip(sizes, counts)),
             cause=hint or ("a Python loop over the items: a chain `key, sub = "
                            "jax.random.split(key)`, or one sampler call per item"),
             fix=fix or default_fix, section=section)
