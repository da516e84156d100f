"""The value ladder for arrays and pytrees: type, shape, dtype, finite, values.

Each leaf stops at its first failing rung; failures of several leaves are reported
together, each with its path (``['params']['w']``), so a student sees every wrong
leaf at once.
"""
from __future__ import annotations

import numpy as np

from autograder._feedback import CheckFailure, call_signature, describe_value, fail
from autograder._quiet import quiet, report_captured

# Captured at import, before any student code runs: a submission that patches
# numpy later does not change what the checks compute.
_asarray = np.asarray
_isfinite = np.isfinite
_abs = np.abs
_argmax = np.argmax
_unravel = np.unravel_index
_issubdtype = np.issubdtype

RUNGS = ("type", "shape", "dtype", "finite", "values")
STRUCTURE = "(structure)"  # the path reported when the pytree structures differ

_CAUSES = {
    "type": ("your function returned a different kind of object",
             "return a JAX array (or the pytree the docstring describes)"),
    "shape": ("an axis is missing, extra or transposed",
              "print `.shape` of your intermediate results and compare with the docstring"),
    "dtype": ("an integer or boolean array where floats were expected (or the reverse)",
              "use float inputs and jnp operations; avoid casting with astype unless asked"),
    "finite": ("a NaN or inf: a division by zero, log(0), sqrt of a negative number, "
               "or a NaN gradient through jnp.where",
               "guard the unsafe operation itself, not only its output"),
    "values": ("a mistake in the formula", "compare your result with a small example by hand"),
}


def _kind(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    for kind, base in (("complex", np.complexfloating), ("float", np.floating),
                       ("int", np.integer)):
        if _issubdtype(dtype, base):
            return kind
    if str(dtype).startswith("bfloat16") or str(dtype).startswith("float8"):
        return "float"
    return str(dtype)


def _is_arraylike(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") or isinstance(x, (bool, int, float, complex, np.generic))


def _leaf_failure(got, expected, *, rtol, atol, dtype, values=True) -> tuple[str, str] | None:
    """Returns (rung, text) for the first failing rung of one leaf, or None."""
    if not _is_arraylike(got):
        return "type", f"expected an array like {describe_value(expected)}, got {describe_value(got)}"
    if getattr(got, "dtype", None) is not None and str(got.dtype).startswith("key<"):
        return "type", "got a PRNG key array, expected numbers"
    g = _asarray(got)
    e = _asarray(expected)
    if g.shape != e.shape:
        return "shape", f"shape expected {e.shape}, got {g.shape}"
    if dtype == "exact" and g.dtype != e.dtype:
        return "dtype", f"dtype expected {e.dtype}, got {g.dtype}"
    if dtype == "kind" and _kind(g.dtype) != _kind(e.dtype):
        return "dtype", f"dtype expected {e.dtype} ({_kind(e.dtype)}), got {g.dtype} ({_kind(g.dtype)})"
    if _kind(e.dtype) in ("float", "complex"):
        e_fin = _isfinite(e)
        g_fin = _isfinite(g)
        bad = e_fin & ~g_fin
        if bad.any():
            idx = tuple(int(i) for i in _unravel(int(_argmax(bad)), bad.shape)) if bad.ndim else ()
            return "finite", (f"{int(bad.sum())} of {bad.size} entries are not finite "
                              f"(first at index {idx}: {g[idx] if idx else g})")
    if not values:
        return None
    if _kind(e.dtype) == "bool" or _kind(e.dtype) == "int":
        ok = (g == e)
        if not ok.all():
            idx = tuple(int(i) for i in _unravel(int(_argmax(~ok)), ok.shape)) if ok.ndim else ()
            return "values", (f"{int((~ok).sum())} of {ok.size} entries differ "
                              f"(first at index {idx}: expected {e[idx]}, got {g[idx]})")
        return None
    gf = g.astype(np.float64) if _kind(g.dtype) != "complex" else g
    ef = e.astype(np.float64) if _kind(e.dtype) != "complex" else e
    err = _abs(gf - ef)
    tol = atol + rtol * _abs(ef)
    bad = ~(err <= tol)
    if bad.any():
        worst = int(_argmax((err - tol).ravel()))
        idx = tuple(int(i) for i in _unravel(worst, bad.shape)) if bad.ndim else ()
        return "values", (f"{int(bad.sum())} of {bad.size} entries differ beyond "
                          f"rtol={rtol:g}, atol={atol:g}; worst at index {idx}: "
                          f"expected {ef[idx]:.6g}, got {gf[idx]:.6g}")
    return None


def collect_tree_mismatches(got, expected, *, rtol: float = 1e-5, atol: float = 1e-6,
                            dtype: str | None = "kind",
                            values: bool = True) -> list[tuple[str, str, str]]:
    """Compares two pytrees leaf by leaf; returns ``[(path, rung, text), ...]``.

    An empty list means they match. The structure itself is the first rung: if it
    differs, a single ``("(structure)", "type", ...)`` entry says how.

    >>> import jax.numpy as jnp
    >>> collect_tree_mismatches({"w": jnp.ones(3)}, {"w": jnp.ones(3)})
    []
    >>> collect_tree_mismatches({"w": jnp.ones(2)}, {"w": jnp.ones(3)})
    [("['w']", 'shape', 'shape expected (3,), got (2,)')]
    """
    import jax

    e_leaves, e_def = jax.tree_util.tree_flatten_with_path(expected)
    try:
        g_leaves = e_def.flatten_up_to(got)
    except (ValueError, TypeError) as err:
        g_def = jax.tree.structure(got)
        detail = _structure_difference(got, expected) or f"{g_def} instead of {e_def}"
        del err
        return [(STRUCTURE, "type", f"structure differs: {detail}")]
    out = []
    for (path, e), g in zip(e_leaves, g_leaves):
        res = _leaf_failure(g, e, rtol=rtol, atol=atol, dtype=dtype, values=values)
        if res is not None:
            out.append((jax.tree_util.keystr(path), *res))
    return out


def _structure_difference(got, expected) -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        missing = sorted(map(str, set(expected) - set(got)))
        extra = sorted(map(str, set(got) - set(expected)))
        parts = []
        if missing:
            parts.append(f"missing keys {missing}")
        if extra:
            parts.append(f"unexpected keys {extra}")
        return ", ".join(parts)
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)):
        if len(expected) != len(got):
            return f"expected {len(expected)} items, got {len(got)}"
    return f"expected {describe_value(expected)}, got {describe_value(got)}"


def assert_tree_matches(got, expected, *, name: str = "result", rtol: float = 1e-5,
                        atol: float = 1e-6, dtype: str | None = "kind",
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None, values: bool = True) -> None:
    """Asserts that ``got`` matches ``expected`` rung by rung, leaf by leaf.

    Args:
      got: the student's value (an array or a pytree of arrays).
      expected: the reference value, with the structure ``got`` must have.
      name: how the message names the value, e.g. ``"loss_grad(w, x, y)"``.
      rtol, atol: value tolerances: ``|got - expected| <= atol + rtol * |expected|``.
      dtype: ``"kind"`` (float vs int vs bool), ``"exact"``, or ``None`` (unchecked).
      section: the lesson section to reread.
      hint: the likely cause, replacing the default for the failing rung.
      fix: the fix, replacing the default for the failing rung.
      values: ``False`` stops after the finite rung (structure checks only).

    Raises:
      CheckFailure: with a message that names each failing leaf.

    >>> import jax.numpy as jnp
    >>> assert_tree_matches(jnp.array([1.0, 2.0]), jnp.array([1.0, 2.0]))
    >>> assert_tree_matches(jnp.array([1.0, 2.5]), jnp.array([1.0, 2.0]), name="f(x)")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: f(x) has wrong values
      expected: entries within rtol/atol of the reference
      got:      1 of 2 entries differ beyond rtol=1e-05, atol=1e-06; worst at index (1,): expected 2, got 2.5
      likely cause: a mistake in the formula
      fix: compare your result with a small example by hand
    """
    __tracebackhide__ = True
    mismatches = collect_tree_mismatches(got, expected, rtol=rtol, atol=atol, dtype=dtype,
                                         values=values)
    if not mismatches:
        return
    rung = min((m[1] for m in mismatches), key=RUNGS.index)
    # Report the coarsest rung only: finer rungs are meaningless until it is fixed.
    shown = [m for m in mismatches if m[1] == rung]
    cause, default_fix = _CAUSES[rung]
    what = f"{name} has the wrong {rung}" if rung != "values" else f"{name} has wrong values"
    if rung == "finite":
        what = f"{name} contains NaN or inf"
    if rung == "type" and shown[0][0] == STRUCTURE:
        what = f"{name} has the wrong structure"
    expected_text = {
        "type": describe_value(expected), "shape": _shapes(expected),
        "dtype": _dtypes(expected), "finite": "finite values everywhere",
        "values": "entries within rtol/atol of the reference",
    }[rung]
    if len(shown) == 1 and shown[0][0] in ("", STRUCTURE):
        fail(what, rung=rung, expected=expected_text, got=shown[0][2], cause=hint or cause,
             fix=fix or default_fix, section=section)
    if len(shown) == 1:
        path, _, text = shown[0]
        got_text = f"{path}: {text}" if path else text
        fail(what, rung=rung, expected=expected_text, got=got_text, cause=hint or cause,
             fix=fix or default_fix, section=section)
    fail(f"{what}: {len(shown)} leaves differ", rung=rung,
         details=[f"{p}: {t}" for p, _, t in shown], cause=hint or cause,
         fix=fix or default_fix, section=section)


def _shapes(tree) -> str:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    if len(leaves) == 1 and not leaves[0][0]:
        return str(np.shape(leaves[0][1]))
    return ", ".join(f"{jax.tree_util.keystr(p)} {np.shape(v)}" for p, v in leaves)


def _dtypes(tree) -> str:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    if len(leaves) == 1 and not leaves[0][0]:
        return str(_asarray(leaves[0][1]).dtype)
    return ", ".join(f"{jax.tree_util.keystr(p)} {_asarray(v).dtype}" for p, v in leaves)


def call_student(fn, args=(), kwargs=None, *, name: str | None = None,
                 section: str | None = None):
    """Calls a student's function inside :func:`quiet`, turning errors into feedback.

    Returns ``(result, captured)``. A ``NotImplementedError`` becomes "not implemented
    yet"; any other exception is reported with the call that raised it, chained so the
    traceback still shows the student's own line.
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    if not callable(fn):
        fail(f"{label} is not a function", rung="type", expected="a function",
             got=describe_value(fn), fix="define it with `def` in the exercise's solution cell",
             section=section)
    with quiet() as captured:
        try:
            result = fn(*args, **kwargs)
        except NotImplementedError:
            result = _NOT_IMPLEMENTED
        except Exception as err:  # noqa: BLE001 - any student error becomes feedback
            raise CheckFailure(_raised_message(label, err, section), rung="type") from err
    if result is _NOT_IMPLEMENTED:
        fail(f"{getattr(fn, '__name__', label)} is not implemented yet", rung="type",
             fix="replace `raise NotImplementedError()` in its solution cell with your code",
             section=section)
    return result, captured


_NOT_IMPLEMENTED = object()


def _raised_message(label: str, err: BaseException, section: str | None) -> str:
    from autograder._feedback import format_failure

    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return format_failure(
        f"{label} raised {type(err).__name__}" + (f": {text}" if text else ""),
        cause="the traceback above points at the line in your code that failed",
        fix="run the exercise's 'try it' cell to reproduce the error, then fix that line",
        section=section)


def assert_matches_reference(fn, reference, args=(), kwargs=None, *, rtol: float = 1e-5,
                             atol: float = 1e-6, dtype: str | None = "kind",
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None, name: str | None = None):
    """Calls ``fn`` and ``reference`` on the same inputs and compares the results.

    The reference runs first, so a function that mutates its (NumPy) inputs cannot
    change the expected value.

    Args:
      fn: the student's function.
      reference: the instructor's function with the same contract.
      args, kwargs: the inputs.
      rtol, atol, dtype, section, hint, fix: as in :func:`assert_tree_matches`.
      name: how to name the call in messages (default: ``fn(arg=f32[3], ...)``).

    Returns:
      The student's result, for further checks.

    >>> import jax.numpy as jnp
    >>> def double(x):
    ...     return 2 * x
    >>> assert_matches_reference(double, lambda x: x + x, (jnp.arange(3.0),))
    Array([0., 2., 4.], dtype=float32)
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    expected = reference(*args, **kwargs)
    label = name or call_signature(fn, args, kwargs)
    got, captured = call_student(fn, args, kwargs, name=label, section=section)
    assert_tree_matches(got, expected, name=label, rtol=rtol, atol=atol, dtype=dtype,
                        section=section, hint=hint, fix=fix)
    report_captured(captured, label)
    return got
