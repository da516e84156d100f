"""Inside the sandbox: evaluate the grader's probes and write plain data.

A probe is an expression (plus a few lines of set-up) that the grader evaluates in
the student's namespace; what it returns is flattened to leaves and written as
``probe/<test id>.npz`` (arrays, loaded outside with ``allow_pickle=False``) and
``probe/<test id>.json`` (tree structure, strings, numbers, errors). The expected
values, the tolerances and the checks never enter the sandbox: the grader compares
outside (``grader.trusted``), so patching anything in here can only change what
the student's own code returns.
"""
from __future__ import annotations

import json
import os

_MAX_TEXT = 200_000


def _leaf(value, arrays: dict, key: str):
    import numpy as np

    if isinstance(value, (bool, int, float, str)) or value is None:
        if isinstance(value, str):
            value = value[:_MAX_TEXT]
        if isinstance(value, float) and value != value:
            return {"kind": "array", "key": _store(np.float64(value), arrays, key)}
        return {"kind": "json", "value": value}
    try:
        import jax

        if isinstance(value, jax.Array) and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            return {"kind": "key", "key": _store(np.asarray(jax.random.key_data(value)), arrays, key)}
    except Exception:  # noqa: BLE001 - JAX is not required to describe a leaf
        pass
    try:
        array = np.asarray(value)
    except Exception as err:  # noqa: BLE001
        return {"kind": "unsupported", "type": type(value).__name__, "error": repr(err)[:300]}
    if array.dtype == object:
        return {"kind": "unsupported", "type": type(value).__name__}
    return {"kind": "array", "key": _store(array, arrays, key)}


def _store(array, arrays: dict, key: str) -> str:
    arrays[key] = array
    return key


def _describe(value, arrays: dict, prefix: str) -> dict:
    import jax

    leaves, treedef = jax.tree_util.tree_flatten_with_path(value, is_leaf=lambda x: x is None)
    return {"tree": str(treedef),
            "leaves": [dict(path=jax.tree_util.keystr(path),
                            **_leaf(leaf, arrays, f"{prefix}_{i}"))
                       for i, (path, leaf) in enumerate(leaves)]}


def run(test_id: str, probes: list[tuple[str, str, str]], namespace: dict) -> None:
    """Evaluates ``(name, setup, expression)`` probes; writes probe/<test_id>.*"""
    import numpy as np

    os.makedirs("probe", exist_ok=True)
    arrays: dict = {}
    results = []
    for index, (name, setup, expression) in enumerate(probes):
        scope = dict(namespace)
        try:
            if setup:
                exec(compile(setup, f"<probe {name} setup>", "exec"), scope)
            value = eval(compile(expression, f"<probe {name}>", "eval"), scope)
            results.append({"name": name, "ok": True, **_describe(value, arrays, f"p{index}")})
        except BaseException as err:  # noqa: BLE001 - every failure is data for the grader
            if isinstance(err, (KeyboardInterrupt, SystemExit)) and not isinstance(err, SystemExit):
                raise
            results.append({"name": name, "ok": False, "error_type": type(err).__name__,
                            "error": str(err)[:2000]})
    with open(os.path.join("probe", f"{test_id}.npz"), "wb") as f:
        np.savez(f, **arrays)
    with open(os.path.join("probe", f"{test_id}.json"), "w") as f:
        json.dump({"test_id": test_id, "probes": results}, f)
