"""Key discipline: no key used twice, the same key gives the same result, another key
another result.

Every check here calls the student's function on fresh copies of its keys with JAX's
key-reuse checker on (``jax.debug_key_reuse``, which tracks typed keys only), so a
reuse is caught whichever check runs first, and all calls share one compilation cache
(the checker's setting is part of JAX's cache key).

**In-process facts**, all of them, and why:

- key reuse (:func:`assert_no_key_reuse`, and every other check here): the checker
  runs while the function runs, in the student's process; a reuse is a
  ``KeyReuseError`` raised there, and the line it points at is a frame of that
  process. An exported program cannot show it: ``jax.export`` lowers keys to plain
  ``uint32`` data, and consuming a key is not an operation of the program.
- determinism (:func:`assert_deterministic`) and key dependence
  (:func:`assert_varies_with_key`): they compare the results of calls made in the
  student's process (hidden state such as ``np.random`` or a global key lives only
  there). What changed between the calls is computed where the calls ran and
  recorded as JSON facts; the verdict is given by ``explain_*`` outside.
"""
from __future__ import annotations

import os
import traceback
from typing import Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure, is_library_file
from autograder.random.keys import collect_key_data, fresh_keys

_array_equal = np.array_equal

_REUSE_CAUSE = ("a key that was already passed to a sampler or split was used again: the two "
                "draws are not independent (often identical); or a key kept outside the "
                "function that an earlier call already used")
_REUSE_FIX = ("split before every use: `key, sub = jax.random.split(key)` or "
              "`k1, k2 = jax.random.split(key)`, and pass each key to exactly one random "
              "function")


def _student_line(err: BaseException) -> str | None:
    """Where the innermost traceback frame outside JAX and this package points.

    In a notebook that is the student's cell: ``in init, line 3 of its cell: code``.
    """
    frames = traceback.extract_tb(err.__traceback__)
    for fr in reversed(frames):
        path = fr.filename or ""
        if (is_library_file(path) or "site-packages" in path or path.startswith("<frozen")
                or os.sep + "jax" + os.sep in path or os.sep + "jaxlib" + os.sep in path):
            continue
        code = (fr.line or "").strip()
        cell = "ipykernel_" in path or path.startswith("<ipython-input")
        where = "its cell" if cell else os.path.basename(path)
        return f"in {fr.name}, line {fr.lineno} of {where}" + (f": {code}" if code else "")
    return None


def call_with_reuse_checker(fn: Callable, args: Sequence = (), kwargs: dict | None = None):
    """``(result, reuse)``: ``fn`` called on fresh copies of its keys with the checker on.

    ``reuse`` is None, or the facts of the ``KeyReuseError`` (``{"error", "where"}``).
    The result's keys are cloned: the checker marks some legitimate results as
    consumed (a key array built with ``jnp.stack``, for one), and a test that slices
    or draws from them must not fail for that.
    """
    import jax
    from jax.errors import KeyReuseError

    args, kwargs = fresh_keys((tuple(args), dict(kwargs or {})))
    try:
        with jax.debug_key_reuse(True):
            result = call(fn, args, kwargs)
    except KeyReuseError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return None, {"error": first, "where": _student_line(err)}
    return fresh_keys(result), None


def _explain_reuse(facts: dict, label: str, *, section=None, hint=None, fix=None) -> str | None:
    reuse = facts.get("reuse")
    if not reuse:
        return None
    where = reuse.get("where") if isinstance(reuse, dict) else None
    error = reuse.get("error", "") if isinstance(reuse, dict) else ""
    return format_failure(
        f"{label} used a PRNG key twice",
        details=[f"got:      KeyReuseError: {error}"] + ([f"where:    {where}"] if where else []),
        cause=hint or _REUSE_CAUSE, fix=fix or _REUSE_FIX, section=section)


def _facts(observed) -> dict:
    return observed.facts if isinstance(observed.facts, dict) else {}


# --- no key reuse ----------------------------------------------------------------------

def assert_no_key_reuse(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                        name: str | None = None, section: str | None = None,
                        hint: str | None = None, fix: str | None = None):
    """Calls ``fn`` with JAX's key-reuse checker on; fails if a key is used twice.

    Key reuse at run time is an in-process fact: the checker raises in the student's
    process while ``fn`` runs, and what it said (and the line it points at) is
    recorded as data for the grader to judge.

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
    autograder.core.feedback.CheckFailure: two_draws(key=key<fry>[]) used a PRNG key twice
      got:      KeyReuseError: Previously-consumed key passed to jit-compiled function at index 0
      where:    in two_draws, line 3 of ...: b = jax.random.normal(key)
      likely cause: a key that was already passed to a sampler or split was used again: ...
      fix: split before every use: `key, sub = jax.random.split(key)` or ...
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs or {})
    kept = {}

    def observe():
        kept["result"], reuse = call_with_reuse_checker(fn, args, kwargs)
        return {"reuse": reuse}

    return run(Check("no_key_reuse", label, observe=observe, observe_as="facts",
                     params=dict(section=section, hint=hint, fix=fix),
                     returns=lambda facts: kept.get("result")))


@explainer("no_key_reuse")
def explain_no_key_reuse(observed, expected, *, label: str, section=None, hint=None,
                         fix=None, **_ignored) -> str | None:
    return _explain_reuse(_facts(observed), label, section=section, hint=hint, fix=fix)


# --- the same key, the same result ---------------------------------------------------

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


def collect_determinism(fn: Callable, args: Sequence = (), kwargs: dict | None = None,
                        kept: dict | None = None) -> dict:
    """Two checked calls with equal keys: ``{"reuse", "difference"}`` (None when equal)."""
    first, reuse = call_with_reuse_checker(fn, args, kwargs)
    if kept is not None:
        kept["result"] = first
    if reuse:
        return {"reuse": reuse}
    second, reuse = call_with_reuse_checker(fn, args, kwargs)
    if reuse:
        return {"reuse": reuse}
    return {"reuse": None,
            "difference": _first_difference(collect_key_data(first), collect_key_data(second))}


def assert_deterministic(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                         name: str | None = None, section: str | None = None,
                         hint: str | None = None, fix: str | None = None):
    """Calls ``fn`` twice with equal (freshly cloned) keys; the results must be identical.

    Both calls run in the student's process with the key-reuse checker on, as in
    :func:`assert_no_key_reuse`; how the results differ is recorded as a fact.

    Returns:
      The result of the first call.

    >>> import jax, numpy as np
    >>> def noisy(key):
    ...     return jax.random.normal(key) + np.random.normal()
    >>> assert_deterministic(noisy, (jax.random.key(0),))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: noisy(key=key<fry>[]) gave different results for the same key
      expected: identical results from equal keys
      got:      result: 1 of 1 entries differ
      likely cause: randomness that does not come from the key: np.random, Python's random, time, or a counter kept outside the function
      fix: draw every random number with jax.random from the key argument (split it when you need several)
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs or {})
    kept = {}
    return run(Check("deterministic", label,
                     observe=lambda: collect_determinism(fn, args, kwargs, kept),
                     observe_as="facts", params=dict(section=section, hint=hint, fix=fix),
                     returns=lambda facts: kept.get("result")))


@explainer("deterministic")
def explain_deterministic(observed, expected, *, label: str, section=None, hint=None,
                          fix=None, **_ignored) -> str | None:
    facts = _facts(observed)
    reused = _explain_reuse(facts, label, section=section)
    if reused or not facts.get("difference"):
        return reused
    return format_failure(
        f"{label} gave different results for the same key",
        expected="identical results from equal keys", got=str(facts["difference"]),
        cause=hint or ("randomness that does not come from the key: np.random, Python's "
                       "random, time, or a counter kept outside the function"),
        fix=fix or ("draw every random number with jax.random from the key argument "
                    "(split it when you need several)"),
        section=section)


# --- another key, another result -----------------------------------------------------

def _param_name(fn: Callable, num: int) -> str:
    import inspect

    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[num] if num < len(params) else f"argument {num}"


def collect_key_dependence(fn: Callable, args: Sequence, kwargs: dict | None, *,
                           key_argnum: int = 0, other_key=None) -> dict:
    """Calls ``fn`` with ``args[key_argnum]`` and with ``other_key``:
    ``{"reuse", "same", "leaves", "restructured"}``, ``same`` naming the leaves that did
    not change."""
    import jax

    args = tuple(args)
    if other_key is None:
        other_key = jax.random.fold_in(jax.random.clone(args[key_argnum]), 0x5EED)
    b_args = list(args)
    b_args[key_argnum] = other_key
    first, reuse = call_with_reuse_checker(fn, args, kwargs)
    if reuse:
        return {"reuse": reuse}
    second, reuse = call_with_reuse_checker(fn, tuple(b_args), kwargs)
    if reuse:
        return {"reuse": reuse}
    a, b = collect_key_data(first), collect_key_data(second)
    leaves = jax.tree_util.tree_flatten_with_path(a)[0]
    b_leaves, b_def = jax.tree_util.tree_flatten_with_path(b)
    if jax.tree.structure(a) != b_def:
        return {"reuse": None, "restructured": True, "same": [], "leaves": len(leaves)}
    same = [jax.tree_util.keystr(p) or "result" for (p, x), (_, y) in zip(leaves, b_leaves)
            if x.shape == y.shape and _array_equal(x, y)]
    return {"reuse": None, "restructured": False, "same": same, "leaves": len(leaves)}


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
    Both calls run in the student's process with the key-reuse checker on; which
    leaves stayed the same is recorded as a fact.

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
    autograder.core.feedback.CheckFailure: ignores_key(key=key<fry>[], n=int 3) gave the same result for two different values of key
      expected: a different result for a different key
      got:      identical results
      likely cause: the function ignores its key argument: a hard-coded jax.random.key(...) inside it, or a key from outside the function
      fix: draw from the key you are given (split it when you need several keys)
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs or {})
    run(Check("varies_with_key", label,
              observe=lambda: collect_key_dependence(fn, args, kwargs, key_argnum=key_argnum,
                                                     other_key=other_key),
              observe_as="facts",
              params=dict(arg=_param_name(fn, key_argnum), every_leaf=every_leaf,
                          section=section, hint=hint, fix=fix)))


@explainer("varies_with_key")
def explain_varies_with_key(observed, expected, *, label: str, arg: str = "key",
                            every_leaf: bool = False, section=None, hint=None, fix=None,
                            **_ignored) -> str | None:
    facts = _facts(observed)
    reused = _explain_reuse(facts, label, section=section)
    if reused or facts.get("restructured"):
        return reused  # a different structure is a difference
    same = [str(s) for s in facts.get("same", [])]
    leaves = facts.get("leaves", 0)
    if not ((every_leaf and same) or len(same) == leaves):
        return None
    got = "identical results" if len(same) == leaves else (
        f"identical for {', '.join(same[:4])}" + (" ..." if len(same) > 4 else ""))
    return format_failure(
        f"{label} gave the same result for two different values of {arg}",
        expected=f"a different result for a different {arg}" + (
            " in every leaf" if every_leaf and leaves > 1 else ""),
        got=got,
        cause=hint or ("the function ignores its key argument: a hard-coded "
                       "jax.random.key(...) inside it, or a key from outside the function"),
        fix=fix or "draw from the key you are given (split it when you need several keys)",
        section=section)


# --- all three ---------------------------------------------------------------------------

def assert_key_discipline(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                          key_argnum: int = 0, every_leaf: bool = False,
                          name: str | None = None, section: str | None = None):
    """No key reuse, same key same result, different key different result.

    Runs :func:`assert_no_key_reuse`, :func:`assert_deterministic` and
    :func:`assert_varies_with_key` in that order (each records itself; in a kernel
    the first failure raises) and returns ``fn``'s result.

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
