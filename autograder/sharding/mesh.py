"""Meshes and device sets: which devices an example runs on, and whether a student's
mesh or set of devices names the ones asked for.

Both checks observe a value the student's code returned (a mesh, a set of device
ids) as plain data in the process that ran it, and judge it with a pure function of
that data (``explain_*``), so the student's kernel and the grader give one verdict.
Both are in-process facts, because what they judge is a live Python object the
student returned, not compiled code:

- :func:`assert_mesh`: the mesh's axis names, sizes, axis types and device ids.
- :func:`assert_device_set`: the device ids named; the expected ids come from the
  reference side (the instructor's run).

The device *order* inside a mesh is never checked: ``jax.make_mesh`` may reorder
devices to follow the physical topology of a GPU or TPU host.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import describe_value, format_failure


def collect_sharding_devices(minimum: int = 2) -> list:
    """The devices a sharding example runs on.

    The default backend's devices when there are at least ``minimum`` of them (8
    simulated CPU devices after ``course.setup()``, or the GPUs/TPUs of a
    multi-accelerator host); on a host with a single accelerator, the simulated
    CPU devices instead, so that sharding can still be shown.

    >>> devices = collect_sharding_devices(minimum=1)
    >>> len(devices) >= 1
    True
    """
    import jax

    devices = jax.devices()
    if len(devices) >= minimum:
        return list(devices)
    try:
        cpus = jax.devices("cpu")
    except RuntimeError:  # no CPU backend: give what there is
        return list(devices)
    return list(cpus) if len(cpus) > len(devices) else list(devices)


def device_ids(items: Any) -> set[int] | None:
    """An iterable of devices or ints as a set of ids; None if it is not one.

    >>> device_ids([3, 1]), device_ids("01"), device_ids(7)
    ({1, 3}, None, None)
    """
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        return None
    ids = set()
    for item in items:
        if hasattr(item, "id") and hasattr(item, "platform"):
            ids.add(int(item.id))
        elif isinstance(item, int) or (hasattr(item, "__index__") and not isinstance(item, bool)):
            ids.add(int(item))
        else:
            return None
    return ids


def ids_text(ids: Iterable[int]) -> str:
    """``{0, 1}``; ``{} (none)`` for no ids."""
    ids = sorted(ids)
    return "{" + ", ".join(str(i) for i in ids) + "}" if ids else "{} (none)"


# ---------------------------------------------------------------------------- meshes

def _mesh_types():
    from jax.sharding import AbstractMesh, Mesh

    return AbstractMesh, Mesh


_ABSTRACT_MESH, _MESH = _mesh_types()  # captured at import, before any student code runs


def _type_name(t: Any) -> str:
    return getattr(t, "name", str(t))


def collect_mesh_facts(mesh: Any) -> dict:
    """What :func:`assert_mesh` judges: a mesh as plain data.

    >>> import jax
    >>> facts = collect_mesh_facts(jax.make_mesh((1,), ("data",), devices=jax.devices()[:1]))
    >>> facts["axis_names"], facts["axis_sizes"], facts["axis_types"]
    (['data'], [1], ['Explicit'])
    """
    if isinstance(mesh, _ABSTRACT_MESH):
        return {"type": "abstract", "described": repr(mesh)[:300]}
    if not isinstance(mesh, _MESH):
        return {"type": "other", "described": describe_value(mesh)}
    names = [str(a) for a in mesh.axis_names]
    return {"type": "mesh", "axis_names": names,
            "axis_sizes": [int(mesh.shape[a]) for a in mesh.axis_names],
            "axis_types": [_type_name(t) for t in mesh.axis_types],
            "device_ids": sorted(int(d.id) for d in mesh.devices.flat)}


def assert_mesh(mesh: Any, *, axis_sizes: dict[str, int], axis_types: Any = None,
                devices: Sequence | None = None, name: str = "the mesh",
                section: str | None = None, hint: str | None = None,
                fix: str | None = None) -> None:
    """Asserts a mesh's axis names (in order), sizes, axis types and device set.

    The device *order* inside the mesh is not checked: ``jax.make_mesh`` may reorder
    devices to follow the physical topology of a GPU or TPU host.

    Args:
      mesh: the student's mesh (a ``jax.sharding.Mesh``).
      axis_sizes: the expected axes, in order: ``{"data": 4, "model": 2}``.
      axis_types: one ``jax.sharding.AxisType`` for every axis, or a tuple of them;
        ``None`` leaves them unchecked.
      devices: the devices (or ids) the mesh must be made of; ``None``: unchecked.
      name: how the message names the mesh, e.g. ``"build_mesh(devices, 2)"``.
      section, hint, fix: the section to reread; a likely cause and a fix that
        replace the defaults.

    Raises:
      CheckFailure: at the first wrong property (type, axes, sizes, types, devices).

    >>> import jax
    >>> from jax.sharding import AxisType
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> assert_mesh(mesh, axis_sizes={"data": 1}, axis_types=AxisType.Explicit,
    ...             devices=jax.devices()[:1])
    >>> assert_mesh(mesh, axis_sizes={"batch": 1}, name="my_mesh")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: my_mesh has the wrong axis names
      expected: ('batch',)
      got:      ('data',)
      likely cause: the axis names are misspelled or in the wrong order
      fix: pass the names in order, e.g. jax.make_mesh(shape, ('batch',))
    """
    __tracebackhide__ = True
    names = [str(a) for a in axis_sizes]
    types = None
    if axis_types is not None:
        types = ([_type_name(t) for t in axis_types] if isinstance(axis_types, (tuple, list))
                 else [_type_name(axis_types)] * len(names))
    ids = sorted(device_ids(devices) or set()) if devices is not None else None
    run(Check("mesh", name, observe=lambda: collect_mesh_facts(mesh), observe_as="facts",
              params=dict(axis_names=names, axis_sizes=[int(axis_sizes[a]) for a in axis_sizes],
                          axis_types=types, devices=ids, section=section, hint=hint,
                          fix=fix)))


@explainer("mesh")
def explain_mesh(observed, expected, *, label: str, axis_names: list, axis_sizes: list,
                 axis_types: list | None = None, devices: list | None = None,
                 section: str | None = None, hint: str | None = None, fix: str | None = None,
                 **_ignored) -> str | None:
    """The mesh's rungs in order: type, axis names, sizes, axis types, devices."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("type") == "abstract":
        return format_failure(
            f"{label} is an AbstractMesh, which has no devices",
            expected="a jax.sharding.Mesh", got=facts.get("described"),
            cause=hint or "jax.sharding.get_abstract_mesh() (or a traced value) was returned",
            fix=fix or "build the mesh with jax.make_mesh(..., devices=devices) and return it",
            section=section)
    if facts.get("type") != "mesh":
        return format_failure(
            f"{label} is not a mesh", expected="a jax.sharding.Mesh",
            got=facts.get("described", "something else"), cause=hint,
            fix=fix or "return the mesh object that jax.make_mesh(...) returns", section=section)
    names = tuple(axis_names)
    got_names = tuple(facts.get("axis_names", ()))
    if got_names != names:
        return format_failure(
            f"{label} has the wrong axis names", expected=names, got=got_names,
            cause=hint or "the axis names are misspelled or in the wrong order",
            fix=fix or f"pass the names in order, e.g. jax.make_mesh(shape, {names!r})",
            section=section)
    want_sizes = dict(zip(names, axis_sizes))
    got_sizes = dict(zip(got_names, facts.get("axis_sizes", ())))
    if got_sizes != want_sizes:
        cause = "the axis sizes are swapped" if sorted(got_sizes.values()) == sorted(
            want_sizes.values()) else "the mesh shape does not split the devices as asked"
        return format_failure(
            f"{label} has the wrong shape", expected=want_sizes, got=got_sizes,
            cause=hint or cause,
            fix=fix or "the first entry of the shape goes with the first axis name",
            section=section)
    got_types = list(facts.get("axis_types", ()))
    if axis_types is not None and got_types != list(axis_types):
        return format_failure(
            f"{label} has the wrong axis types", expected=_types_text(axis_types),
            got=_types_text(got_types),
            cause=hint or ("jax.make_mesh makes Explicit axes unless told otherwise, "
                           "while jax.sharding.Mesh(...) makes Auto axes"),
            fix=fix or "pass axis_types=(AxisType.X,) * number_of_axes", section=section)
    got_ids = set(facts.get("device_ids", ()))
    if devices is not None and got_ids != set(devices):
        return format_failure(
            f"{label} is built on the wrong devices",
            expected=f"device ids {ids_text(devices)}", got=f"device ids {ids_text(got_ids)}",
            cause=hint or ("the mesh was built from jax.devices() instead of the "
                           "devices you were given"),
            fix=fix or "pass devices=devices to jax.make_mesh", section=section)
    return None


def _types_text(types: Sequence[str]) -> str:
    return "(" + ", ".join(types) + ")"


# ------------------------------------------------------------------------ device sets

def explain_same_set(got: set, expected: set, *, label: str, item: str, shown,
                     section=None, hint=None, fix=None) -> str | None:
    """Two sets that must be equal: what is missing and what is unexpected."""
    if got == expected:
        return None
    details = []
    if expected - got:
        details.append(f"missing:    {shown(expected - got)}")
    if got - expected:
        details.append(f"unexpected: {shown(got - expected)}")
    return format_failure(f"{label} returned the wrong {item}", expected=shown(expected),
                          got=shown(got), details=details, cause=hint, fix=fix,
                          section=section)


def _ids_facts(value: Any) -> dict:
    ids = device_ids(value)
    if ids is None:
        return {"not_ids": describe_value(value)}
    items = list(value)
    # What an exact contract ("a set of ints") judges: the container, and whether each
    # item is an int id (a Device object has .id, but it is not one).
    return {"ids": sorted(ids), "is_set": isinstance(value, (set, frozenset)),
            "all_ints": not any(hasattr(i, "id") and hasattr(i, "platform") for i in items),
            "count": len(items)}


def assert_device_set(got: Any, expected: Any, *, name: str = "result",
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None, exact: bool = False) -> None:
    """Asserts that ``got`` names the same devices as ``expected`` (any order).

    Both may hold device ids (ints) or ``Device`` objects. With ``exact=True`` (a
    contract that says "a set of ints"), ``got`` must be a ``set`` (or ``frozenset``)
    of int ids: a list, or ``Device`` objects, fail.

    >>> import jax
    >>> d0 = jax.devices()[0]
    >>> assert_device_set({d0.id}, [d0])
    >>> assert_device_set([], [d0], name="devices_holding(x, (0, 0))")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: devices_holding(x, (0, 0)) returned the wrong device set
      expected: {0}
      got:      {} (none)
      missing:    {0}
    """
    __tracebackhide__ = True
    run(Check("device_set", name, observe=lambda: _ids_facts(got),
              expect=lambda: {"ids": sorted(device_ids(expected) or set())},
              observe_as="facts", expect_as="facts",
              params=dict(section=section, hint=hint, fix=fix, exact=exact)))


@explainer("device_set")
def explain_device_set(observed, expected, *, label: str, section=None, hint=None, fix=None,
                       exact: bool = False, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if "ids" not in facts:
        return format_failure(
            f"{label} did not return a set of device ids", expected="a set of ints, e.g. {0, 1}",
            got=facts.get("not_ids", "something else"), cause=hint,
            fix=fix or "collect shard.device.id for the matching shards into a set",
            section=section)
    if exact and not (facts.get("is_set") and facts.get("all_ints")):
        got = (f"a {'set' if facts.get('is_set') else 'sequence'} of "
               f"{facts.get('count', len(facts['ids']))} "
               f"{'ints' if facts.get('all_ints') else 'items, not all of them ints (devices?)'}")
        return format_failure(
            f"{label} did not return a set of device ids", expected="a set of ints, e.g. {0, 1}",
            got=got, cause="the contract asks for a set of int ids (shard.device.id), each once",
            fix=fix or "collect shard.device.id for the matching shards into a set",
            section=section)
    want = set(expected.facts.get("ids", [])) if expected is not None else set()
    return explain_same_set(set(facts["ids"]), want, label=label, item="device set",
                            shown=ids_text, section=section, hint=hint, fix=fix)
