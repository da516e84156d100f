"""Placement: which devices hold which slice of an array the student's code returned.

Shardings are compared by what they place where, never by their spelling:
``P('data')`` and ``P('data', None)`` are different objects that put the same slices
on the same devices. So a placement is observed as data, in the process that holds
the array: each slice's index ranges and the ids of the devices holding it
(``devices_indices_map``), the shard shape, the spec as text and the mesh axes of
each dimension (:func:`collect_placement`). The verdict and the message are a pure
function of that data and of the same data for the expected sharding on the same
shape, which the reference side computes (:func:`explain_sharded_as`).

In-process facts, both checks (:func:`assert_sharded_as`, :func:`assert_shard_shapes`):
the array is what the student returned, and where it lives is a property of that live
array (its buffers on devices), not of a compiled program.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import describe_value, format_failure
from autograder.sharding.mesh import ids_text


def _index_bounds(index: tuple, shape: tuple) -> tuple:
    """``(slice(None), slice(2, 4))`` -> ``((0, 8), (2, 4))`` for shape (8, 4+)."""
    out = []
    for dim, s in zip(shape, index):
        start, stop, _ = s.indices(dim) if isinstance(s, slice) else (int(s), int(s) + 1, 1)
        out.append((start, stop))
    return tuple(out)


def _slice_devices(sharding: Any, shape: tuple) -> dict[tuple, frozenset[int]]:
    groups: dict[tuple, set[int]] = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        groups.setdefault(_index_bounds(index, shape), set()).add(int(device.id))
    return {k: frozenset(v) for k, v in sorted(groups.items())}


def collect_slice_devices(x: Any) -> dict[tuple, frozenset[int]]:
    """Maps each slice of a ``jax.Array`` to the ids of the devices that hold it.

    Keys are ``((start, stop), ...)`` per dimension; a replicated slice maps to
    several device ids.

    >>> import jax, jax.numpy as jnp
    >>> x = jax.device_put(jnp.zeros((4, 2)), jax.devices()[0])
    >>> collect_slice_devices(x) == {((0, 4), (0, 2)): frozenset({jax.devices()[0].id})}
    True
    """
    return _slice_devices(x.sharding, tuple(x.shape))


def _spec_text(sharding: Any) -> str:
    spec = getattr(sharding, "spec", None)
    if spec is not None:
        mesh = getattr(sharding, "mesh", None)
        shape = dict(getattr(mesh, "shape", {}) or {})
        return f"{spec} on mesh {shape}"
    if type(sharding).__name__ == "SingleDeviceSharding":
        (device,) = tuple(sharding.device_set)
        return f"one device ({device.platform}:{device.id})"
    return type(sharding).__name__


def _mesh_axes_of(sharding: Any, ndim: int) -> list[list[str]] | None:
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return None
    axes = []
    for i in range(ndim):
        entry = spec[i] if i < len(spec) else None
        if entry is None:
            axes.append([])
        elif isinstance(entry, (tuple, list)):
            axes.append(sorted(str(e) for e in entry))
        else:
            axes.append([str(entry)])
    return axes


def sharding_facts(sharding: Any, shape: Sequence[int]) -> dict:
    """A sharding's placement of an array of ``shape``, as plain data.

    ``slices``: ``[[[start, stop], ...], [device ids]]`` per slice, sorted;
    ``shard_shape``, ``device_ids``, ``spec`` (text) and ``mesh_axes`` (the mesh axes
    splitting each dimension, None for a sharding without a spec).

    >>> import jax, jax.numpy as jnp
    >>> d0 = jax.devices()[0]
    >>> sharding_facts(jax.sharding.SingleDeviceSharding(d0), (4, 2))["slices"]
    [[[[0, 4], [0, 2]], [0]]]
    """
    shape = tuple(int(s) for s in shape)
    try:
        slices = [[[list(b) for b in bounds], sorted(ids)]
                  for bounds, ids in _slice_devices(sharding, shape).items()]
        shard_shape = [int(s) for s in sharding.shard_shape(shape)]
    except Exception as err:  # noqa: BLE001 - a spec that does not fit the shape
        return {"shape": list(shape), "spec": _spec_text(sharding),
                "error": f"{type(err).__name__}: {str(err)[:200]}"}
    return {"shape": list(shape), "spec": _spec_text(sharding), "slices": slices,
            "shard_shape": shard_shape,
            "device_ids": sorted(int(d.id) for d in sharding.device_set),
            "mesh_axes": _mesh_axes_of(sharding, len(shape))}


def _array_types():
    import jax

    return jax.Array, jax.core.Tracer


_ARRAY, _TRACER = _array_types()  # captured at import, before any student code runs


def collect_placement(x: Any) -> dict:
    """Where an array's slices live (:func:`sharding_facts`), or what ``x`` is instead.

    >>> import numpy as np
    >>> collect_placement(np.zeros(3))
    {'kind': 'not_array', 'described': 'f64[3]', 'has_shape': True}
    """
    if isinstance(x, _TRACER):
        return {"kind": "tracer", "described": describe_value(x)}
    if not isinstance(x, _ARRAY):
        return {"kind": "not_array", "described": describe_value(x),
                "has_shape": hasattr(x, "shape")}
    return {"kind": "array", **sharding_facts(x.sharding, tuple(x.shape))}


def assert_sharded_as(x: Any, expected: Any, *, name: str = "result",
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None) -> None:
    """Asserts that ``x`` places the same slices on the same devices as ``expected``.

    Equivalence, not spelling: ``NamedSharding(mesh, P('data'))`` and
    ``NamedSharding(mesh, P('data', None))`` are the same placement. On failure the
    message names both placements, the first slice whose devices differ and the
    likely cause (replicated instead of sharded, the wrong mesh axis, another mesh).

    Args:
      x: the student's array (a concrete ``jax.Array``, not a tracer).
      expected: a ``jax.sharding.Sharding`` (usually ``NamedSharding(mesh, spec)``).
      name, section, hint, fix: how to name ``x``; the section to reread; a likely
        cause and a fix that replace the computed ones.

    Raises:
      CheckFailure: if ``x`` is not a ``jax.Array`` or is placed differently.

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> x = jax.device_put(jnp.zeros((4, 3)), NamedSharding(mesh, P("data")))
    >>> assert_sharded_as(x, NamedSharding(mesh, P("data", None)))
    >>> assert_sharded_as(np.zeros(3), NamedSharding(mesh, P()), name="place(x)")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: place(x) is not a jax.Array
      expected: a jax.Array placed as P() on mesh {'data': 1}
      got:      f64[3]
      likely cause: a NumPy array has no device placement
      fix: return the result of jax.device_put(x, sharding)
    """
    __tracebackhide__ = True

    def expect() -> dict:
        # The expected sharding laid over the array's shape (the reference's array when
        # grading: a student's array of another shape fails the values check first).
        shape = getattr(x, "shape", None)
        if shape is None:
            return {"spec": _spec_text(expected)}
        return sharding_facts(expected, tuple(shape))

    run(Check("sharded_as", name, observe=lambda: collect_placement(x), expect=expect,
              observe_as="facts", expect_as="facts",
              params=dict(section=section, hint=hint, fix=fix)))


def _placement_text(facts: dict) -> str:
    copies = "/".join(str(c) for c in sorted({len(ids) for _, ids in facts["slices"]}))
    return (f"{facts['spec']}: {len(facts['slices'])} slice(s) of shape "
            f"{tuple(facts['shard_shape'])}, each on {copies} device(s)")


def _slice_text(bounds) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]"


def _placement_cause(got: dict, want: dict) -> tuple[str, str]:
    """The likely cause and fix for two placements that differ."""
    full = tuple(want["shape"])
    got_shard, want_shard = tuple(got["shard_shape"]), tuple(want["shard_shape"])
    got_devs, want_devs = set(got["device_ids"]), set(want["device_ids"])
    if got_devs != want_devs and len(got_devs) == 1:
        return ("the array sits on one device: it was never placed on the mesh",
                "jax.device_put(x, NamedSharding(mesh, P(...)))")
    if got_devs != want_devs:
        return (f"the array lives on devices {ids_text(got_devs)}, the mesh on "
                f"{ids_text(want_devs)}: it was placed with another mesh",
                "build the NamedSharding from the mesh you were given")
    if got_shard == full and want_shard != full:
        return ("the array is replicated: every device holds a full copy where it should "
                "hold a slice (P() or a missing PartitionSpec entry does that)",
                "name the mesh axis for each dimension that must be split, e.g. P('data', None)")
    if want_shard == full and got_shard != full:
        return ("the array is split, but every device should hold a full copy",
                "use P() (replicated) for this array")
    got_axes, want_axes = got.get("mesh_axes"), want.get("mesh_axes")
    if got_axes is not None and want_axes is not None:
        for dim, (g, w) in enumerate(zip(got_axes, want_axes)):
            if set(g) == set(w):
                continue
            g_text = " and ".join(repr(a) for a in sorted(g))
            w_text = " and ".join(repr(a) for a in sorted(w))
            order_fix = ("PartitionSpec entries go with array dimensions, in order: "
                         "P(axis_for_dim0, axis_for_dim1, ...)")
            if not w:
                return (f"dimension {dim} is split over {g_text} where it should be whole",
                        f"put None for dimension {dim} in the PartitionSpec")
            if not g:
                return (f"dimension {dim} is whole where it should be split over {w_text}",
                        order_fix)
            return (f"dimension {dim} is split over {g_text} where {w_text} was expected: "
                    "the wrong mesh axis, or the entries of P(...) in the wrong order",
                    order_fix)
    return ("the slices sit on different devices than expected",
            "compare jax.debug.visualize_array_sharding(x) with the layout asked for")


def _first_difference(got: dict, want: dict) -> str | None:
    got_groups = {tuple(map(tuple, b)): set(ids) for b, ids in got["slices"]}
    for bounds, want_ids in want["slices"]:
        key = tuple(map(tuple, bounds))
        got_ids = got_groups.get(key)
        if got_ids == set(want_ids):
            continue
        if got_ids is None:
            # The slices differ in size: say where the slice's first element lives.
            first = tuple(start for start, _ in bounds)
            holders = {d for k, v in got_groups.items() for d in v
                       if all(a <= i < b for (a, b), i in zip(k, first))}
            return (f"slice {_slice_text(bounds)} should be on devices {ids_text(want_ids)}; "
                    f"here its first element {list(first)} is on devices {ids_text(holders)}")
        return (f"slice {_slice_text(bounds)} is on devices {ids_text(got_ids)}, "
                f"expected {ids_text(want_ids)}")
    return None


@explainer("sharded_as")
def explain_sharded_as(observed, expected, *, label: str, section=None, hint=None, fix=None,
                       **_ignored) -> str | None:
    """Type, then placement: the observed slices against the expected sharding's."""
    got = observed.facts if isinstance(observed.facts, dict) else {}
    want = expected.facts if expected is not None and isinstance(expected.facts, dict) else {}
    want_text = want.get("spec", "the expected sharding")
    if got.get("kind") == "tracer":
        return format_failure(
            f"{label} is a tracer, not a placed array",
            expected=f"a concrete jax.Array placed as {want_text}", got=got.get("described"),
            cause=hint or "placement can only be read from a concrete array, outside jit",
            fix=fix or "return the array from your function instead of inspecting it inside jit",
            section=section)
    if got.get("kind") != "array":
        return format_failure(
            f"{label} is not a jax.Array", expected=f"a jax.Array placed as {want_text}",
            got=got.get("described", "something else"),
            cause=hint or ("a NumPy array has no device placement" if got.get("has_shape")
                           else "your function returned something else"),
            fix=fix or "return the result of jax.device_put(x, sharding)", section=section)
    if got.get("shape") != want.get("shape"):
        return format_failure(
            f"{label} has the wrong shape", expected=tuple(want.get("shape", ())),
            got=tuple(got.get("shape", ())),
            cause="the placement can only be compared on an array of the expected shape",
            fix="return the array with the shape the docstring gives", section=section)
    if "slices" not in want:
        return format_failure(
            f"{label} cannot be placed as {want_text}", got=want.get("error"),
            cause="the expected sharding does not fit the array's shape", section=section)
    if "slices" in got and got["slices"] == want["slices"]:
        return None
    details = [f"expected placement: {_placement_text(want)}",
               f"got placement:      {_placement_text(got)}"]
    first = _first_difference(got, want)
    if first:
        details.append(first)
    cause, default_fix = _placement_cause(got, want)
    return format_failure(f"{label} is placed differently than asked", details=details,
                          cause=hint or cause, fix=fix or default_fix, section=section)


# ------------------------------------------------------------------------ shard shapes

def collect_shard_shapes(x: Any) -> dict:
    """The shapes of ``x``'s addressable shards, ``[[shape, count], ...]`` in order.

    >>> import jax, jax.numpy as jnp
    >>> collect_shard_shapes(jax.device_put(jnp.zeros((4, 2)), jax.devices()[0]))
    {'kind': 'array', 'shape': [4, 2], 'shards': [[[4, 2], 1]]}
    """
    if isinstance(x, _TRACER) or not isinstance(x, _ARRAY):
        return {"kind": "not_array", "described": describe_value(x)}
    shapes = Counter(tuple(int(n) for n in s.data.shape) for s in x.addressable_shards)
    return {"kind": "array", "shape": [int(n) for n in x.shape],
            "shards": [[list(s), n] for s, n in shapes.items()]}


def assert_shard_shapes(x: Any, shape: Sequence[int], *, name: str = "result",
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None) -> None:
    """Asserts that every shard of ``x`` on this process has shape ``shape``.

    >>> import jax, jax.numpy as jnp
    >>> x = jax.device_put(jnp.zeros((4, 2)), jax.devices()[0])
    >>> assert_shard_shapes(x, (4, 2))
    >>> assert_shard_shapes(x, (1, 2), name="x")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: x has shards of the wrong shape
      expected: every shard (1, 2)
      got:      shards (4, 2) on 1 device(s)
      likely cause: the array is not split: each device holds all of it
      fix: split the dimensions over mesh axes with NamedSharding(mesh, P(...))
    """
    __tracebackhide__ = True
    run(Check("shard_shapes", name, observe=lambda: collect_shard_shapes(x), observe_as="facts",
              params=dict(shape=[int(s) for s in shape], section=section, hint=hint, fix=fix)))


@explainer("shard_shapes")
def explain_shard_shapes(observed, expected, *, label: str, shape: list, section=None,
                         hint=None, fix=None, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("kind") != "array":
        return format_failure(
            f"{label} is not a placed jax.Array", expected="a jax.Array",
            got=facts.get("described", "something else"), cause=hint,
            fix=fix or "return the result of jax.device_put", section=section)
    want = tuple(shape)
    shards = [(tuple(s), n) for s, n in facts.get("shards", [])]
    if shards and {s for s, _ in shards} == {want}:
        return None
    got = ", ".join(f"{s} on {n} device(s)" for s, n in shards)
    replicated = {s for s, _ in shards} == {tuple(facts.get("shape", ()))}
    return format_failure(
        f"{label} has shards of the wrong shape", expected=f"every shard {want}",
        got=f"shards {got}",
        cause=hint or ("the array is not split: each device holds all of it" if replicated
                       else "the array is split over other mesh axes, or other dimensions"),
        fix=fix or "split the dimensions over mesh axes with NamedSharding(mesh, P(...))",
        section=section)
