"""Keys as data: typed keys, distinct keys, equal keys.

Typed keys cannot be compared with ``==`` across calls or turned into NumPy arrays;
their data (``jax.random.key_data``: two ``uint32`` words per threefry key) can, and
reading it does not consume a key. So these checks observe keys as data and judge
outside the student's process:

- :func:`assert_typed_keys` observes what the value *is* (a ``jax.Array`` of a key
  dtype, its shape): an in-process fact about a live object, recorded as JSON, since
  a key's type does not survive being written down as data;
- :func:`assert_distinct_keys` and :func:`assert_keys_match` observe the key data
  itself (a "tree" of key leaves) and compare rows in ``explain``, with NumPy only.
"""
from __future__ import annotations

import numpy as np

from autograder.core import wire as _wire
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import describe_value, format_failure

# Captured at import, before student code runs (see DESIGN.md, tamper-resistance).
_asarray = np.asarray
_array_equal = np.array_equal


def _is_key(x) -> bool:
    """Whether ``x`` (an array or an abstract value) has a PRNG key dtype."""
    import jax

    dtype = getattr(x, "dtype", None)
    try:
        return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:  # a dtype attribute that is not a dtype
        return False


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


def fresh_keys(tree):
    """Copies every key leaf with ``jax.random.clone``: same data, not yet consumed."""
    import jax

    return jax.tree.map(lambda x: jax.random.clone(x) if _is_key(x) else x, tree)


# --- typed keys ----------------------------------------------------------------------

def assert_typed_keys(keys, *, shape: tuple | None = None, name: str = "result",
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None) -> None:
    """Asserts that ``keys`` is an array of typed PRNG keys, with ``shape`` if given.

    >>> import jax
    >>> assert_typed_keys(jax.random.split(jax.random.key(0), 4), shape=(4,))
    >>> assert_typed_keys(jax.numpy.zeros((4, 2), "uint32"), name="make_keys(0, 4)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: make_keys(0, 4) is not an array of typed PRNG keys
      expected: a key array (dtype key<fry>), e.g. from jax.random.key or jax.random.split
      got:      u32[4,2]
      likely cause: raw uint32 arrays: legacy jax.random.PRNGKey keys or jax.random.key_data
      fix: create keys with jax.random.key(seed) and derive more with jax.random.split
    """
    __tracebackhide__ = True
    run(Check("typed_keys", name, observe=lambda: collect_key_type(keys), observe_as="facts",
              params=dict(shape=None if shape is None else [int(s) for s in shape],
                          section=section, hint=hint, fix=fix)))


def collect_key_type(keys) -> dict:
    """``{"typed", "shape", "got"}``: whether ``keys`` is a ``jax.Array`` of a key dtype
    (by type, not by attributes), its shape in keys, and how to describe it."""
    import jax

    typed = isinstance(keys, jax.Array) and _is_key(keys)
    return {"typed": typed, "shape": [int(s) for s in keys.shape] if typed else None,
            "got": describe_value(keys)}


@explainer("typed_keys")
def explain_typed_keys(observed, expected, *, label: str, shape=None,
                       section: str | None = None, hint: str | None = None,
                       fix: str | None = None, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("typed") is not True:
        return format_failure(
            f"{label} is not an array of typed PRNG keys",
            expected="a key array (dtype key<fry>), e.g. from jax.random.key or jax.random.split",
            got=str(facts.get("got", "something else")),
            cause=hint or "raw uint32 arrays: legacy jax.random.PRNGKey keys or jax.random.key_data",
            fix=fix or "create keys with jax.random.key(seed) and derive more with jax.random.split",
            section=section)
    got = tuple(facts.get("shape") or ())
    if shape is not None and got != tuple(shape):
        return format_failure(
            f"{label} has the wrong shape", expected=f"{tuple(shape)} keys", got=f"{got} keys",
            cause=hint or "too many or too few keys (a key array's shape counts keys, "
                          "not the two uint32 words inside each key)",
            fix=fix or "jax.random.split(key, n) returns n keys, shape (n,)", section=section)
    return None


# --- keys compared as data -------------------------------------------------------------

def _key_rows(leaves) -> np.ndarray | None:
    """The observed leaves' key data as rows (one per key), or None if they are not keys."""
    rows = []
    for leaf in leaves:
        if leaf.kind not in ("key", "array") or np.ndim(leaf.value) < 1:
            return None
        value = leaf.value
        rows.append(value.reshape(-1, value.shape[-1]))
    if not rows or len({r.shape[1] for r in rows}) != 1:
        return None
    return np.concatenate(rows)


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
    autograder.core.feedback.CheckFailure: keys contains equal keys
      expected: 3 different keys
      got:      only 1 distinct: key 1 equals key 0, key 2 equals key 0
      likely cause: the same key was copied instead of split: equal keys give equal numbers
      fix: derive n different keys with jax.random.split(key, n)
    """
    __tracebackhide__ = True
    run(Check("distinct_keys", name, observe=lambda: keys,
              params=dict(section=section, hint=hint, fix=fix)))


def _not_keys(label: str, obs: _wire.Observation, section: str | None) -> str:
    shown = ", ".join(leaf.kind + (f" {leaf.dtype}" if leaf.dtype else "")
                      for leaf in obs.leaves[:4]) or "nothing"
    return format_failure(f"{label} is not an array of keys", expected="key arrays",
                          got=shown, fix="pass the key arrays themselves", section=section)


@explainer("distinct_keys")
def explain_distinct_keys(observed, expected, *, label: str, section: str | None = None,
                          hint: str | None = None, fix: str | None = None,
                          **_ignored) -> str | None:
    data = _key_rows(observed.leaves)
    if data is None:
        return _not_keys(label, observed, section)
    first: dict[bytes, int] = {}
    dups = []
    for i, row in enumerate(data):
        j = first.setdefault(row.tobytes(), i)
        if j != i:
            dups.append(f"key {i} equals key {j}")
    if not dups:
        return None
    shown = ", ".join(dups[:4]) + (f" (and {len(dups) - 4} more)" if len(dups) > 4 else "")
    return format_failure(
        f"{label} contains equal keys", expected=f"{len(data)} different keys",
        got=f"only {len(first)} distinct: {shown}",
        cause=hint or "the same key was copied instead of split: equal keys give equal numbers",
        fix=fix or "derive n different keys with jax.random.split(key, n)", section=section)


def assert_keys_match(got, expected, *, name: str = "result", section: str | None = None,
                      hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that two key arrays hold the same keys, position by position.

    Two checks, in order: ``got`` is an array of typed keys shaped like ``expected``
    (:func:`assert_typed_keys`), then the key data of both are equal row by row. Both
    arrays are observed (in a test cell both usually come from the student's function).

    >>> import jax
    >>> k = jax.random.key(1)
    >>> assert_keys_match(jax.random.fold_in(k, 3), jax.random.fold_in(k, 3))
    >>> assert_keys_match(jax.random.split(k, 2), jax.random.split(k, 2)[::-1], name="keys")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: keys holds different keys
      expected: the same key at every position
      got:      2 of 2 positions differ (first: position 0)
    """
    __tracebackhide__ = True
    shape = getattr(expected, "shape", None)
    assert_typed_keys(got, shape=None if shape is None else tuple(shape), name=name,
                      section=section)
    run(Check("keys_match", name, observe=lambda: (got, expected),
              params=dict(section=section, hint=hint, fix=fix)))


@explainer("keys_match")
def explain_keys_match(observed, expected, *, label: str, section: str | None = None,
                       hint: str | None = None, fix: str | None = None,
                       **_ignored) -> str | None:
    leaves = observed.leaves
    if len(leaves) != 2:
        return _not_keys(label, observed, section)
    g, e = _key_rows(leaves[:1]), _key_rows(leaves[1:])
    if g is None or e is None:
        return _not_keys(label, observed, section)
    if g.shape != e.shape:
        return format_failure(f"{label} holds different keys",
                              expected=f"{len(e)} keys, the same at every position",
                              got=f"{len(g)} keys", cause=hint, fix=fix, section=section)
    bad = [i for i in range(len(g)) if not _array_equal(g[i], e[i])]
    if not bad:
        return None
    return format_failure(
        f"{label} holds different keys", expected="the same key at every position",
        got=f"{len(bad)} of {len(g)} positions differ (first: position {bad[0]})",
        cause=hint, fix=fix, section=section)
