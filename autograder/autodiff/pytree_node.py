"""Objects of the student's own pytree classes (08_autodiff, section 6).

In-process facts: the class name and the attributes of an object the student's code
built (``jax.grad``, ``jax.tree.map`` or an optax step on a registered dataclass). A
program exported by ``jax.export`` carries flat arrays, not the Python class of a
pytree node, so the type and the metadata fields can only be read where the object
lives; they are recorded as plain JSON data and judged outside.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import describe_value, format_failure
from autograder.core.numeric import collect_tree_mismatches


def _plain(value: Any):
    if isinstance(value, (str, bool, int, float, type(None))):
        return value
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return np.asarray(value)
    return {"unsupported": describe_value(value)}


def collect_node(obj: Any, fields: Sequence[str]) -> dict:
    """The class name of ``obj`` and the named attributes, as plain data.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Point:
    ...     x: float
    ...     label: str
    >>> collect_node(Point(1.5, "a"), ["x", "label"])
    {'type': 'Point', 'fields': {'x': 1.5, 'label': 'a'}}
    """
    missing = {"missing": True}
    return {"type": type(obj).__name__,
            "fields": {f: _plain(getattr(obj, f)) if hasattr(obj, f) else missing
                       for f in fields}}


def _to_json(node: dict) -> dict:
    """Arrays as ``{"array": nested lists, "dtype": name}``: JSON, and typed again later."""
    def one(v):
        if isinstance(v, np.ndarray):
            return {"array": v.tolist(), "dtype": str(v.dtype)}
        return v
    return {"type": node["type"], "fields": {k: one(v) for k, v in node["fields"].items()}}


def _from_json(node: dict) -> dict:
    def one(v):
        if isinstance(v, dict) and "array" in v:
            return np.asarray(v["array"], dtype=v.get("dtype") or None)
        return v
    return {"type": node["type"], "fields": {k: one(v) for k, v in node["fields"].items()}}


def explain_node(observed: dict, expected: dict, *, name: str, rtol: float = 1e-5,
                 atol: float = 1e-6, section: str | None = None, hint: str | None = None,
                 fix: str | None = None) -> str | None:
    """Compares a :func:`collect_node` record with the expected one: type, then each field.

    >>> print(explain_node({"type": "dict", "fields": {}}, {"type": "Linear", "fields": {}},
    ...                    name="jax.grad(loss)(layer, x)"))
    jax.grad(loss)(layer, x) is not a Linear
      expected: an instance of Linear
      got:      dict
      likely cause: the class is not registered as a pytree node, or its unflatten function builds another type
      fix: register it with jax.tree_util.register_dataclass (or register_pytree_node with an unflatten that calls the class)
    """
    if observed["type"] != expected["type"]:
        return format_failure(
            f"{name} is not a {expected['type']}", expected=f"an instance of {expected['type']}",
            got=observed["type"],
            cause=hint or "the class is not registered as a pytree node, or its unflatten "
                          "function builds another type",
            fix=fix or "register it with jax.tree_util.register_dataclass (or "
                       "register_pytree_node with an unflatten that calls the class)",
            section=section)
    problems = []
    for field, want in expected["fields"].items():
        got = observed["fields"].get(field, {"missing": True})
        if isinstance(got, dict) and got.get("missing"):
            problems.append(f".{field}: missing")
        elif isinstance(want, (np.ndarray, list)) or isinstance(got, (np.ndarray, list)):
            # Arrays (lists after JSON) on either side: compare as arrays.
            if isinstance(got, (str, dict, type(None))) or isinstance(want, (str, dict, type(None))):
                problems.append(f".{field}: expected {describe_value(want)}, got "
                                f"{describe_value(got) if not isinstance(got, dict) else got}")
                continue
            for _, _, text in collect_tree_mismatches(np.asarray(got), np.asarray(want),
                                                      rtol=rtol, atol=atol):
                problems.append(f".{field}: {text}")
        elif got != want:
            problems.append(f".{field}: expected {want!r}, got {got!r}")
    if not problems:
        return None
    return format_failure(
        f"{name} has wrong fields", details=problems,
        cause=hint or "a metadata field was lost or became a leaf, or the fields were "
                      "rebuilt in another order",
        fix=fix or "flatten the data fields in their declared order and keep the metadata "
                   "fields in the auxiliary data",
        section=section)


def assert_node(obj: Any, expected_type: str, fields: dict, *, name: str = "result",
                rtol: float = 1e-5, atol: float = 1e-6, section: str | None = None,
                hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``obj`` is an instance of a class named ``expected_type`` with ``fields``.

    ``fields`` maps attribute names to expected values: arrays are compared with
    tolerances, strings and numbers exactly.

    >>> import dataclasses, jax.numpy as jnp
    >>> @dataclasses.dataclass
    ... class Linear:
    ...     w: object
    ...     activation: str
    >>> assert_node(Linear(jnp.ones(2), "tanh"), "Linear", {"w": jnp.ones(2), "activation": "tanh"})
    """
    __tracebackhide__ = True
    names = list(fields)
    run(Check("autodiff_node", name,
              observe=lambda: _to_json(collect_node(obj, names)),
              expect=lambda: _to_json({"type": expected_type,
                                       "fields": {k: _plain(v) for k, v in fields.items()}}),
              observe_as="facts", expect_as="facts",
              params=dict(rtol=float(rtol), atol=float(atol), section=section, hint=hint,
                          fix=fix)))


@explainer("autodiff_node")
def _explain_node_check(observed, expected, *, label: str, rtol: float = 1e-5,
                        atol: float = 1e-6, section: str | None = None, hint: str | None = None,
                        fix: str | None = None, **_ignored) -> str | None:
    return explain_node(_from_json(observed.facts), _from_json(expected.facts), name=label,
                        rtol=rtol, atol=atol, section=section, hint=hint, fix=fix)
