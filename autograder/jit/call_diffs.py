"""Why a call compiled again: the inputs of calls described as plain data and compared.

:func:`call_inputs` describes each leaf of a call's inputs (shape, dtype, weak type,
static value, sharding); :func:`differences` names what changed between two calls, and
``CAUSE``/``FIX`` turn each kind of change into the likely cause and fix that
:mod:`autograder.jit.compile` puts in its message.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from autograder.core.feedback import short_dtype

@dataclasses.dataclass(frozen=True)
class _Leaf:
    kind: str          # "array", "python" (bool/int/float/complex) or "object"
    shape: tuple = ()
    dtype: str = ""
    weak: bool = False
    value: Any = None  # python scalars: the value; objects: (type name, id, repr)
    sharding: Any = None


def _describe_leaf(x: Any) -> _Leaf:
    import numpy as np

    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        import jax

        # A Python scalar traces as a weakly typed scalar of JAX's default dtype.
        return _Leaf("python", (), str(jax.dtypes.result_type(x)), True, x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        weak = bool(getattr(x, "weak_type", False))
        sharding = getattr(x, "sharding", None) if hasattr(x, "addressable_shards") else None
        return _Leaf("array", tuple(x.shape), str(x.dtype), weak, None, sharding)
    text = repr(x)
    text = text if len(text) <= 60 else text[:57] + "..."
    return _Leaf("object", value=(type(x).__name__, id(x), text, _safe_hash(x)))


def _safe_hash(x: Any):
    try:
        return hash(x)
    except TypeError:
        return None


def split_call(call: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` from a call spec: an argument tuple or an (args, kwargs) pair."""
    if (isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], (tuple, list))
            and isinstance(call[1], dict)):
        return tuple(call[0]), dict(call[1])
    if isinstance(call, (tuple, list)):
        return tuple(call), {}
    return (call,), {}


def _param_names(fn: Callable) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def call_inputs(fn: Callable, args: tuple, kwargs: dict):
    """``(treedef, {label: _Leaf})`` for one call's inputs."""
    import jax

    names = _param_names(fn)
    leaves, treedef = jax.tree_util.tree_flatten_with_path((args, kwargs))
    described = {}
    for path, leaf in leaves:
        first, rest = path[0].idx, path[1:]
        if first == 0:
            i = rest[0].idx
            label = names[i] if i < len(names) else f"arg{i}"
            label += jax.tree_util.keystr(tuple(rest[1:]))
        else:
            label = str(rest[0].key) + jax.tree_util.keystr(tuple(rest[1:]))
        described[label] = _describe_leaf(leaf)
    return treedef, described


def _sharding_differs(a, b) -> bool:
    if a is None or b is None:
        return False
    try:
        return not a.is_equivalent_to(b, 1)
    except Exception:  # noqa: BLE001 - shardings of different kinds or ranks
        return a != b


def _leaf_differences(label: str, a: _Leaf, b: _Leaf) -> list[tuple[str, str]]:
    """``[(kind, text), ...]``: how input ``label`` changed from ``a`` to ``b``."""
    if a.kind == "object" or b.kind == "object":
        if a.kind != b.kind or a.value[0] != b.value[0]:
            before = a.value[0] if a.kind == "object" else _dtype_text(a)
            after = b.value[0] if b.kind == "object" else _dtype_text(b)
            return [("type", f"`{label}`: {before} -> {after}")]
        if a.value[1] == b.value[1]:
            return []
        same = a.value[3] is not None and a.value[3] == b.value[3]
        kind = "fresh object" if same else "static value"
        return [(kind, f"`{label}`: a different {a.value[0]} object ({a.value[2]} -> "
                       f"{b.value[2]})")]
    out = []
    if a.shape != b.shape:
        out.append(("shape", f"`{label}`: shape {a.shape} -> {b.shape}"))
    if a.dtype != b.dtype:
        out.append(("dtype", f"`{label}`: dtype {_dtype_text(a)} -> {_dtype_text(b)}"))
    elif a.kind != b.kind or a.weak != b.weak:
        out.append(("weak type", f"`{label}`: {_dtype_text(a)} -> {_dtype_text(b)} (a "
                                 "Python scalar is weakly typed, an array is not)"))
    elif a.kind == "python" and a.value != b.value:
        out.append(("static value", f"`{label}`: value {a.value!r} -> {b.value!r}"))
    if not out and _sharding_differs(a.sharding, b.sharding):
        out.append(("sharding", f"`{label}`: sharding {a.sharding} -> {b.sharding}"))
    return out


def _dtype_text(leaf: _Leaf) -> str:
    if leaf.kind == "python":
        return f"Python {type(leaf.value).__name__} {leaf.value!r} (weakly typed {leaf.dtype})"
    shape = ",".join(str(s) for s in leaf.shape)
    return f"{short_dtype(leaf.dtype)}[{shape}]" + (" (weakly typed)" if leaf.weak else "")


def differences(a, b) -> list[tuple[str, str]]:
    (tree_a, leaves_a), (tree_b, leaves_b) = a, b
    if tree_a != tree_b:
        return [("structure", f"the inputs' pytree structure: {tree_a} -> {tree_b}")]
    out = []
    for label, leaf in leaves_a.items():
        out.extend(_leaf_differences(label, leaf, leaves_b[label]))
    return out


CAUSE = {
    "shape": "every new input shape is a new program: jit compiles once per shape",
    "dtype": "every new dtype is a new program: jit compiles once per dtype",
    "weak type": "a Python scalar and a jnp array of the same dtype trace differently "
                 "(weak typing), so each compiles once",
    "static value": "a static argument (static_argnums / static_argnames) is part of "
                    "the cache key: every new value compiles again",
    "fresh object": "a static argument is cached by hash and equality: a new object that "
                    "hashes by identity (a lambda, an array-holding object) misses the cache",
    "type": "a different kind of input is a different program",
    "structure": "a different pytree structure (another dict key, a tuple instead of a "
                 "list) is a different program",
    "sharding": "a different input sharding is a different program",
    "several programs": "the function runs more than one compiled program per call: "
                        "each jnp operation outside jit is compiled on its own (once per "
                        "shape and per value of any Python number it uses), or several "
                        "pieces are jitted separately",
    "fresh function": "nothing about the inputs changed, so the function being compiled "
                      "was a new object each time: `jax.jit(lambda ...)`, `jax.jit(f)` "
                      "of a function defined inside the call, or a `functools.partial` "
                      "made per call, misses JAX's cache, which is keyed on the function",
}

FIX = {
    "shape": "pad or bucket inputs to a few fixed shapes, or accept one compile per shape",
    "dtype": "cast inputs to one dtype before calling",
    "weak type": "pass arrays (jnp.asarray(x, jnp.float32)) rather than Python scalars, "
                 "or accept one extra compile",
    "static value": "make the argument a traced array instead of static, if the program "
                    "does not need its value at trace time",
    "fresh object": "pass a hashable value (an int, a string, a tuple), not a new object",
    "type": "call it with the same kinds of inputs every time",
    "structure": "keep the same pytree structure across calls",
    "sharding": "place inputs with the same sharding every call",
    "several programs": "jit the whole function once (decorate it with @jax.jit), so that "
                        "one call runs one program",
    "fresh function": "create the jitted function once, outside the loop or function "
                      "(at module level, or with @jax.jit on the def), and call it",
}
