"""The value ladder for arrays and pytrees: type, shape, dtype, finite, values.

Each leaf stops at its first failing rung; failures of several leaves are reported
together, each with its path (``['params']['w']``), so a student sees every wrong
leaf at once.
"""
from __future__ import annotations

import numpy as np

from autograder.core import wire as _wire
from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure, short_dtype

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
    """``float``, ``int``, ``bool``, ``complex`` (a dtype or its name, bfloat16 included).

    >>> _kind("bfloat16"), _kind("int32"), _kind(np.float64)
    ('float', 'int', 'float')
    """
    name = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    if name == "bool":
        return "bool"
    for kind, prefixes in (("complex", ("complex",)), ("float", ("float", "bfloat")),
                           ("int", ("int", "uint"))):
        if name.startswith(prefixes):
            return kind
    return name


def _leaf_failure(got: _wire.Leaf, expected: _wire.Leaf, *, rtol, atol, dtype,
                  values=True) -> tuple[str, str] | None:
    """Returns (rung, text) for the first failing rung of one leaf, or None.

    ``dtype``: ``"exact"`` (the dtype's name), ``"kind"`` (float/int/bool/complex) or
    None. A Python scalar counts as its NumPy dtype (``float`` is float64).
    """
    if expected.kind in ("none", "text", "other"):
        if got.kind != expected.kind or (expected.kind == "text" and got.value != expected.value):
            return "type", f"expected {_describe(expected)}, got {_describe(got)}"
        return None
    if expected.kind == "key" or got.kind == "key":
        if got.kind != expected.kind:
            return "type", f"expected {_describe(expected)}, got {_describe(got)}"
    elif got.kind not in ("array", "scalar"):
        return "type", f"expected an array like {_describe(expected)}, got {_describe(got)}"
    g, e = got.value, expected.value
    if g.shape != e.shape:
        return "shape", f"shape expected {e.shape}, got {g.shape}"
    if dtype == "exact" and got.dtype != expected.dtype:
        return "dtype", f"dtype expected {expected.dtype}, got {got.dtype}"
    if dtype in ("kind", "exact") and _kind(got.dtype) != _kind(expected.dtype):
        return "dtype", (f"dtype expected {expected.dtype} ({_kind(expected.dtype)}), "
                         f"got {got.dtype} ({_kind(got.dtype)})")
    if expected.kind == "key":
        return None if not values or np.array_equal(g, e) else (
            "values", "the keys hold different key data")
    if _kind(expected.dtype) in ("float", "complex") and g.dtype.kind in "fc":
        bad = _isfinite(e) & ~_isfinite(g)
        if bad.any():
            idx = _first(bad)
            return "finite", (f"{int(bad.sum())} of {bad.size} entries are not finite "
                              f"(first at index {idx}: {g[idx] if idx else g})")
    if not values:
        return None
    if _kind(expected.dtype) in ("bool", "int") or g.dtype.kind not in "fciub":
        ok = (g == e)
        if not np.all(ok):
            idx = _first(~ok)
            return "values", (f"{int((~ok).sum())} of {ok.size} entries differ "
                              f"(first at index {idx}: expected {e[idx]}, got {g[idx]})")
        return None
    gf = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
    ef = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
    err = _abs(gf - ef)
    tol = atol + rtol * _abs(ef)
    both_nan = ~_isfinite(ef) & ~_isfinite(gf) & (np.isnan(ef) == np.isnan(gf))
    same_inf = np.isinf(ef) & (gf == ef)
    bad = ~((err <= tol) | both_nan | same_inf)
    if bad.any():
        worst = int(_argmax(np.where(bad, err - tol, -np.inf).ravel()))
        idx = tuple(int(i) for i in _unravel(worst, bad.shape)) if bad.ndim else ()
        return "values", (f"{int(bad.sum())} of {bad.size} entries differ beyond "
                          f"rtol={rtol:g}, atol={atol:g}; worst at index {idx}: "
                          f"expected {ef[idx]:.6g}, got {gf[idx]:.6g}")
    return None


def _first(mask: np.ndarray) -> tuple:
    return tuple(int(i) for i in _unravel(int(_argmax(mask)), mask.shape)) if mask.ndim else ()


def _describe(leaf: _wire.Leaf) -> str:
    if leaf.kind == "none":
        return "None (is a return statement missing?)"
    if leaf.kind == "text":
        return f"the string {leaf.value[:60]!r}"
    if leaf.kind == "other":
        return f"a {leaf.value}"
    if leaf.kind == "scalar":
        return f"a Python {leaf.dtype.rstrip('0123456789')} {leaf.value.item()!r}"
    if leaf.kind == "key":
        return f"a PRNG key array {leaf.dtype}{list(leaf.shape)}"
    return f"{short_dtype(leaf.dtype)}[{','.join(str(s) for s in leaf.shape)}]"


def _render(obs: _wire.Observation) -> str:
    """A pytree as text, each leaf described: ``(f32[3], {'b': f32[]})``."""
    text = obs.tree[len("PyTreeDef("):-1] if obs.tree.startswith("PyTreeDef(") else obs.tree
    parts = text.split("*")
    if len(parts) != len(obs.leaves) + 1:
        return obs.tree
    out = parts[0]
    for leaf, rest in zip(obs.leaves, parts[1:]):
        out += (_describe(leaf) if leaf.kind != "array" else
                f"{short_dtype(leaf.dtype)}[{','.join(str(s) for s in leaf.shape)}]") + rest
    return out[:300]


# The least tolerance for float32 values judged in a process whose JAX computes on a GPU
# or TPU (a student's kernel there; grading runs on a CPU): a TPU's exp, log, tanh and
# erf agree with a CPU's to four or five digits, and its schedules and reductions
# accumulate in other orders (0.0600098 for 0.06 in 07's warm-up cosine). Tolerances
# of test cells were chosen on a CPU; on a CPU nothing changes.
ACCELERATOR_FLOAT32 = (5e-4, 1e-5)


def accelerator_floor() -> tuple[float, float] | None:
    """``(rtol, atol)`` floor for float32 when this process computes on an accelerator,
    else None (a CPU, or JAX not imported)."""
    import sys

    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        return None if jax.default_backend() == "cpu" else ACCELERATOR_FLOAT32
    except Exception:  # noqa: BLE001 - no backend: nothing computed there
        return None


def accelerator_cpus() -> list:
    """The CPU devices, where this process's JAX computes on a GPU or TPU and has a CPU
    backend too; else ``[]`` (a CPU, or no CPU backend). What the checks fall back on
    for work an accelerator cannot do as a CPU grader does: float64, the simulated
    devices of the sharding chapter, interpret-mode kernels."""
    import jax

    if jax.default_backend() == "cpu":
        return []
    try:
        return list(jax.devices("cpu"))
    except RuntimeError:  # JAX_PLATFORMS without cpu
        return []


def collect_tree_mismatches(got, expected, *, rtol: float = 1e-5, atol: float = 1e-6,
                            dtype: str | None = "kind",
                            values: bool = True) -> list[tuple[str, str, str]]:
    """Compares two pytrees leaf by leaf; returns ``[(path, rung, text), ...]``.

    An empty list means they match. The structure itself is the first rung: if it
    differs, a single ``("(structure)", "type", ...)`` entry says how. Either side may
    be a live pytree or an observation (:mod:`autograder.core.wire`).

    >>> import jax.numpy as jnp
    >>> collect_tree_mismatches({"w": jnp.ones(3)}, {"w": jnp.ones(3)})
    []
    >>> collect_tree_mismatches({"w": jnp.ones(2)}, {"w": jnp.ones(3)})
    [("['w']", 'shape', 'shape expected (3,), got (2,)')]
    """
    g = got if isinstance(got, _wire.Observation) else _wire.observe_tree(got)
    e = expected if isinstance(expected, _wire.Observation) else _wire.observe_tree(expected)
    if g.tree != e.tree or len(g.leaves) != len(e.leaves):
        return [(STRUCTURE, "type", f"structure differs: {_structure_difference(g, e)}")]
    out = []
    floor = accelerator_floor()
    for gl, el in zip(g.leaves, e.leaves):
        r, a = rtol, atol
        if floor and gl.kind in ("array", "scalar") and str(gl.dtype) == "float32":
            # Computed on an accelerator, compared with a CPU's reference or formula.
            r, a = max(rtol, floor[0]), max(atol, floor[1])
        res = _leaf_failure(gl, el, rtol=r, atol=a, dtype=dtype, values=values)
        if res is not None:
            out.append((el.path, *res))
    return out


def _structure_difference(got: _wire.Observation, expected: _wire.Observation) -> str:
    """How two observed pytrees differ, said with their leaf paths."""
    gp, ep = got.paths(), expected.paths()
    if gp == [""] and ep != [""]:
        return f"expected {expected.tree}, got a single {_describe(got.leaves[0])}"
    missing = [p for p in ep if p not in gp]
    extra = [p for p in gp if p not in ep]
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else ""))
    if extra:
        parts.append("unexpected " + ", ".join(extra[:6]) + (" ..." if len(extra) > 6 else ""))
    if parts:
        return "; ".join(parts)
    return f"expected {expected.tree}, got {got.tree}"


def explain_tree(got: _wire.Observation, expected: _wire.Observation, *, label: str,
                 rtol: float = 1e-5, atol: float = 1e-6, dtype: str | None = "kind",
                 values: bool = True, section: str | None = None, hint: str | None = None,
                 fix: str | None = None, **_ignored) -> str | None:
    """The value ladder's verdict on two observed pytrees: a message or None.

    The coarsest failing rung is reported, for every leaf that fails it.
    """
    mismatches = collect_tree_mismatches(got, expected, rtol=rtol, atol=atol, dtype=dtype,
                                         values=values)
    if not mismatches:
        return None
    rung = min((m[1] for m in mismatches), key=RUNGS.index)
    shown = [m for m in mismatches if m[1] == rung]
    cause, default_fix = _CAUSES[rung]
    what = f"{label} has the wrong {rung}" if rung != "values" else f"{label} has wrong values"
    if rung == "finite":
        what = f"{label} contains NaN or inf"
    if rung == "type" and shown[0][0] == STRUCTURE:
        what = f"{label} has the wrong structure"
        if expected.paths() == [""]:  # one array was asked for: name what came instead
            what = f"{label} has the wrong type"
            shown = [(STRUCTURE, "type", _render(got))]
    expected_text = {
        "type": expected.tree if len(expected.leaves) != 1 else _describe(expected.leaves[0]),
        "shape": _shapes(expected), "dtype": _dtypes(expected),
        "finite": "finite values everywhere",
        "values": "entries within rtol/atol of the reference",
    }[rung]
    teach = dict(cause=hint or cause, fix=fix or default_fix, section=section)
    if len(shown) == 1:
        path, _, text = shown[0]
        got_text = f"{path}: {text}" if path and path != STRUCTURE else text
        return format_failure(what, expected=expected_text, got=got_text, **teach)
    return format_failure(f"{what}: {len(shown)} leaves differ",
                          details=[f"{p}: {t}" for p, _, t in shown], **teach)


@explainer("values")
def _explain_values(observed, expected, **params):
    return explain_tree(observed, expected, **params)


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
    autograder.core.feedback.CheckFailure: f(x) has wrong values
      expected: entries within rtol/atol of the reference
      got:      1 of 2 entries differ beyond rtol=1e-05, atol=1e-06; worst at index (1,): expected 2, got 2.5
      likely cause: a mistake in the formula
      fix: compare your result with a small example by hand
    """
    __tracebackhide__ = True
    run(Check("values", name, observe=lambda: got, expect=lambda: expected,
              params=dict(rtol=rtol, atol=atol, dtype=dtype, values=values, section=section,
                          hint=hint, fix=fix)))


def _shapes(obs: _wire.Observation) -> str:
    if len(obs.leaves) == 1 and not obs.leaves[0].path:
        return str(obs.leaves[0].shape)
    return ", ".join(f"{leaf.path} {leaf.shape}" for leaf in obs.leaves)


def _dtypes(obs: _wire.Observation) -> str:
    if len(obs.leaves) == 1 and not obs.leaves[0].path:
        return obs.leaves[0].dtype or obs.leaves[0].kind
    return ", ".join(f"{leaf.path} {leaf.dtype or leaf.kind}" for leaf in obs.leaves)


def call_student(fn, args=(), kwargs=None, *, name: str | None = None,
                 section: str | None = None):
    """Calls a student's function, turning errors into feedback; ``(result, captured)``.

    A ``NotImplementedError`` becomes "not implemented yet"; any other exception is
    reported with the call that raised it, chained so the traceback still shows the
    student's own line. In a grading run the call is recorded (and ``None`` returned
    for a call that failed); the grader judges it outside.
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    return run(Check("call", label, observe=lambda: call(fn, args, kwargs),
                     params=dict(section=section)), with_captured=True)


@explainer("call")
def _explain_call(observed, expected, **params):
    return None  # a call that returned passes; one that raised is explained by explain_error


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
    label = name or call_signature(fn, args, kwargs)
    return run(Check("values", label, observe=lambda: call(fn, args, kwargs),
                     expect=lambda: reference(*args, **kwargs),
                     params=dict(rtol=rtol, atol=atol, dtype=dtype, values=True,
                                 section=section, hint=hint, fix=fix)))
