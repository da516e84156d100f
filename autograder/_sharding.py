"""Placement checks: meshes, shardings, which devices hold each slice, collectives.

Shardings are compared by what they place where, never by their spelling:
``P('data')`` and ``P('data', None)`` are different objects that put the same
slices on the same devices, so every check goes through
``Sharding.is_equivalent_to`` or the slice-to-devices map
(``devices_indices_map``). Collectives are checked as stable facts only: whether a
class of collective (``all-reduce``, ``all-gather`` ...) appears in the compiled HLO,
or whether a ``shard_map`` body uses a collective primitive, never how many.

Every check passes on CPU (simulated devices) and on GPU/TPU hosts.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from autograder._feedback import call_signature, describe_value, fail
from autograder._jaxpr import _sub_jaxprs, trace_jaxpr
from autograder._numeric import call_student

# Collective classes in optimized HLO. Async forms (``all-reduce-start`` /
# ``-done``, common on GPU) count as their class.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all", "collective-broadcast", "ragged-all-to-all")
_COLLECTIVE_OP = re.compile(
    r"(?<![\w.%-])(ragged-all-to-all|all-reduce|all-gather|reduce-scatter|"
    r"collective-permute|all-to-all|collective-broadcast)(?:-start|-done)?\(")

# What a collective is called in a jaxpr. With check_vma=True (the default),
# `psum` of a varying value traces to `psum_invariant`, and `pmean` is a psum
# followed by a division.
_PRIMITIVE_ALIASES = {
    "psum": ("psum", "psum_invariant", "psum2"),
    "pmean": ("psum", "psum_invariant", "psum2"),
    "all_gather": ("all_gather", "all_gather_invariant"),
    "psum_scatter": ("reduce_scatter", "psum_scatter"),
    "ppermute": ("ppermute",),
    "all_to_all": ("all_to_all",),
    "pmax": ("pmax",),
    "pmin": ("pmin",),
}


# --------------------------------------------------------------------------- devices

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


def _device_ids(items: Any) -> set[int] | None:
    """Normalizes an iterable of devices or ints to a set of ids; None if it is not one."""
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


def _ids_text(ids: Iterable[int]) -> str:
    ids = sorted(ids)
    return "{" + ", ".join(str(i) for i in ids) + "}" if ids else "{} (none)"


# ---------------------------------------------------------------------------- meshes

def _types_text(types: Sequence[Any]) -> str:
    return "(" + ", ".join(getattr(t, "name", str(t)) for t in types) + ")"


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
    autograder._feedback.CheckFailure: my_mesh has the wrong axis names
      expected: ('batch',)
      got:      ('data',)
      likely cause: the axis names are misspelled or in the wrong order
      fix: pass the names in order, e.g. jax.make_mesh(shape, ('batch',))
    """
    __tracebackhide__ = True
    from jax.sharding import AbstractMesh, Mesh

    if isinstance(mesh, AbstractMesh):
        fail(f"{name} is an AbstractMesh, which has no devices", rung="type",
             expected="a jax.sharding.Mesh", got=repr(mesh),
             cause=hint or "jax.sharding.get_abstract_mesh() (or a traced value) was returned",
             fix=fix or "build the mesh with jax.make_mesh(..., devices=devices) and return it",
             section=section)
    if not isinstance(mesh, Mesh):
        fail(f"{name} is not a mesh", rung="type", expected="a jax.sharding.Mesh",
             got=describe_value(mesh), cause=hint,
             fix=fix or "return the mesh object that jax.make_mesh(...) returns",
             section=section)
    names = tuple(axis_sizes)
    if tuple(mesh.axis_names) != names:
        fail(f"{name} has the wrong axis names", rung="shape", expected=names,
             got=tuple(mesh.axis_names),
             cause=hint or "the axis names are misspelled or in the wrong order",
             fix=fix or f"pass the names in order, e.g. jax.make_mesh(shape, {names!r})",
             section=section)
    got_sizes = dict(mesh.shape)
    if got_sizes != dict(axis_sizes):
        cause = "the axis sizes are swapped" if sorted(got_sizes.values()) == sorted(
            axis_sizes.values()) else "the mesh shape does not split the devices as asked"
        fail(f"{name} has the wrong shape", rung="shape", expected=dict(axis_sizes),
             got=got_sizes, cause=hint or cause,
             fix=fix or "the first entry of the shape goes with the first axis name",
             section=section)
    if axis_types is not None:
        want = tuple(axis_types) if isinstance(axis_types, (tuple, list)) else (
            (axis_types,) * len(names))
        if tuple(mesh.axis_types) != want:
            fail(f"{name} has the wrong axis types", rung="structure",
                 expected=_types_text(want), got=_types_text(mesh.axis_types),
                 cause=hint or ("jax.make_mesh makes Explicit axes unless told otherwise, "
                                "while jax.sharding.Mesh(...) makes Auto axes"),
                 fix=fix or "pass axis_types=(AxisType.X,) * number_of_axes",
                 section=section)
    if devices is not None:
        want_ids = _device_ids(devices) or set()
        got_ids = {int(d.id) for d in mesh.devices.flat}
        if got_ids != want_ids:
            fail(f"{name} is built on the wrong devices", rung="placement",
                 expected=f"device ids {_ids_text(want_ids)}",
                 got=f"device ids {_ids_text(got_ids)}",
                 cause=hint or ("the mesh was built from jax.devices() instead of the "
                                "devices you were given"),
                 fix=fix or "pass devices=devices to jax.make_mesh", section=section)


# ------------------------------------------------------------------------- placement

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


def _slice_text(bounds: tuple) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]"


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


def _placement_text(sharding: Any, shape: tuple) -> str:
    groups = _slice_devices(sharding, shape)
    copies = {len(v) for v in groups.values()}
    copies_text = "/".join(str(c) for c in sorted(copies))
    shard = sharding.shard_shape(tuple(shape))
    return (f"{_spec_text(sharding)}: {len(groups)} slice(s) of shape {tuple(shard)}, "
            f"each on {copies_text} device(s)")


def _mesh_axes_of(sharding: Any, ndim: int) -> list[set[str]] | None:
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return None
    axes = []
    for i in range(ndim):
        entry = spec[i] if i < len(spec) else None
        if entry is None:
            axes.append(set())
        elif isinstance(entry, (tuple, list)):
            axes.append(set(entry))
        else:
            axes.append({entry})
    return axes


def _placement_cause(got: Any, expected: Any, shape: tuple) -> tuple[str, str]:
    """The likely cause and fix for two non-equivalent shardings."""
    full = tuple(shape)
    got_shard = tuple(got.shard_shape(full))
    want_shard = tuple(expected.shard_shape(full))
    got_devs = {d.id for d in got.device_set}
    want_devs = {d.id for d in expected.device_set}
    if got_devs != want_devs and len(got_devs) == 1:
        return ("the array sits on one device: it was never placed on the mesh",
                "jax.device_put(x, NamedSharding(mesh, P(...)))")
    if got_devs != want_devs:
        return (f"the array lives on devices {_ids_text(got_devs)}, the mesh on "
                f"{_ids_text(want_devs)}: it was placed with another mesh",
                "build the NamedSharding from the mesh you were given")
    if got_shard == full and want_shard != full:
        return ("the array is replicated: every device holds a full copy where it should "
                "hold a slice (P() or a missing PartitionSpec entry does that)",
                "name the mesh axis for each dimension that must be split, e.g. P('data', None)")
    if want_shard == full and got_shard != full:
        return ("the array is split, but every device should hold a full copy",
                "use P() (replicated) for this array")
    got_axes = _mesh_axes_of(got, len(full))
    want_axes = _mesh_axes_of(expected, len(full))
    if got_axes is not None and want_axes is not None:
        for dim, (g, w) in enumerate(zip(got_axes, want_axes)):
            if g == w:
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
    autograder._feedback.CheckFailure: place(x) is not a jax.Array
      expected: a jax.Array placed as P() on mesh {'data': 1}
      got:      f64[3]
      likely cause: a NumPy array has no device placement
      fix: return the result of jax.device_put(x, sharding)
    """
    __tracebackhide__ = True
    import jax

    want_text = _spec_text(expected)
    if isinstance(x, jax.core.Tracer):
        fail(f"{name} is a tracer, not a placed array", rung="type",
             expected=f"a concrete jax.Array placed as {want_text}", got=describe_value(x),
             cause=hint or "placement can only be read from a concrete array, outside jit",
             fix=fix or "return the array from your function instead of inspecting it inside jit",
             section=section)
    if not isinstance(x, jax.Array):
        fail(f"{name} is not a jax.Array", rung="type",
             expected=f"a jax.Array placed as {want_text}", got=describe_value(x),
             cause=hint or ("a NumPy array has no device placement" if hasattr(x, "shape")
                            else "your function returned something else"),
             fix=fix or "return the result of jax.device_put(x, sharding)", section=section)
    shape = tuple(x.shape)
    try:
        same = x.sharding.is_equivalent_to(expected, len(shape))
    except Exception:  # noqa: BLE001 - a spec longer than ndim: not equivalent
        same = False
    if same:
        return
    got_groups = _slice_devices(x.sharding, shape)
    want_groups = _slice_devices(expected, shape)
    details = [f"expected placement: {_placement_text(expected, shape)}",
               f"got placement:      {_placement_text(x.sharding, shape)}"]
    for bounds, want_ids in want_groups.items():
        got_ids = got_groups.get(bounds)
        if got_ids != want_ids:
            if got_ids is None:
                # The slices differ in size: say where the slice's first element lives.
                first = tuple(start for start, _ in bounds)
                holders = {d for k, v in got_groups.items() for d in v
                           if all(a <= i < b for (a, b), i in zip(k, first))}
                details.append(f"slice {_slice_text(bounds)} should be on devices "
                               f"{_ids_text(want_ids)}; here its first element "
                               f"{list(first)} is on devices {_ids_text(holders)}")
            else:
                details.append(f"slice {_slice_text(bounds)} is on devices {_ids_text(got_ids)}, "
                               f"expected {_ids_text(want_ids)}")
            break
    cause, default_fix = _placement_cause(x.sharding, expected, shape)
    fail(f"{name} is placed differently than asked", rung="placement", details=details,
         cause=hint or cause, fix=fix or default_fix, section=section)


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
    autograder._feedback.CheckFailure: x has shards of the wrong shape
      expected: every shard (1, 2)
      got:      shards (4, 2) on 1 device(s)
      likely cause: the array is not split: each device holds all of it
      fix: split the dimensions over mesh axes with NamedSharding(mesh, P(...))
    """
    __tracebackhide__ = True
    import jax

    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        fail(f"{name} is not a placed jax.Array", rung="type", expected="a jax.Array",
             got=describe_value(x), cause=hint, fix=fix or "return the result of jax.device_put",
             section=section)
    want = tuple(int(s) for s in shape)
    shapes = Counter(tuple(s.data.shape) for s in x.addressable_shards)
    if set(shapes) == {want}:
        return
    got = ", ".join(f"{s} on {n} device(s)" for s, n in shapes.items())
    replicated = set(shapes) == {tuple(x.shape)}
    fail(f"{name} has shards of the wrong shape", rung="placement",
         expected=f"every shard {want}", got=f"shards {got}",
         cause=hint or ("the array is not split: each device holds all of it" if replicated
                        else "the array is split over other mesh axes, or other dimensions"),
         fix=fix or "split the dimensions over mesh axes with NamedSharding(mesh, P(...))",
         section=section)


def _assert_same_set(got: set, expected: set, *, name: str, item: str, section, hint, fix,
                     shown: Callable[[set], str], rung: str = "values") -> None:
    __tracebackhide__ = True
    if got == expected:
        return
    details = []
    if expected - got:
        details.append(f"missing:    {shown(expected - got)}")
    if got - expected:
        details.append(f"unexpected: {shown(got - expected)}")
    fail(f"{name} returned the wrong {item}", rung=rung, expected=shown(expected),
         got=shown(got), details=details, cause=hint, fix=fix, section=section)


def assert_device_set(got: Any, expected: Any, *, name: str = "result",
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None) -> None:
    """Asserts that ``got`` names the same devices as ``expected`` (any order).

    Both may hold device ids (ints) or ``Device`` objects.

    >>> import jax
    >>> d0 = jax.devices()[0]
    >>> assert_device_set({d0.id}, [d0])
    >>> assert_device_set([], [d0], name="devices_holding(x, (0, 0))")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: devices_holding(x, (0, 0)) returned the wrong device set
      expected: {0}
      got:      {} (none)
      missing:    {0}
    """
    __tracebackhide__ = True
    got_ids = _device_ids(got)
    if got_ids is None:
        fail(f"{name} did not return a set of device ids", rung="type",
             expected="a set of ints, e.g. {0, 1}", got=describe_value(got), cause=hint,
             fix=fix or "collect shard.device.id for the matching shards into a set",
             section=section)
    want_ids = _device_ids(expected) or set()
    _assert_same_set(got_ids, want_ids, name=name, item="device set", section=section,
                     hint=hint, fix=fix, shown=_ids_text)


# ----------------------------------------------------------------------- collectives

def collect_collectives(hlo_text: str) -> set[str]:
    """The classes of collective ops in (optimized) HLO text.

    Async forms count as their class: ``all-reduce-start`` is an ``all-reduce``.
    Instruction *names* (``%all-reduce.3 = ...``) are not ops and do not count.

    >>> hlo = '''
    ... %all-reduce.1 = f32[8]{0} all-reduce(f32[8]{0} %p), replica_groups={{0,1}}
    ... %ags = (f32[2], f32[4]) all-gather-start(f32[2]{0} %q), dimensions={0}
    ... %agd = f32[4]{0} all-gather-done((f32[2], f32[4]) %ags)
    ... '''
    >>> sorted(collect_collectives(hlo))
    ['all-gather', 'all-reduce']
    """
    return {m.group(1) for m in _COLLECTIVE_OP.finditer(hlo_text)}


def _as_names(names: str | Sequence[str], known: Sequence[str], kind: str) -> tuple[str, ...]:
    out = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in out if n not in known]
    if unknown or not out:
        raise ValueError(f"unknown {kind} {unknown or out!r}: use some of {', '.join(known)}")
    return out


def _or_text(names: Sequence[str]) -> str:
    names = [f"`{n}`" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def assert_collective_in_hlo(fn: Callable, args: Sequence, collective: str | Sequence[str], *,
                             present: bool = True, kwargs: dict | None = None,
                             name: str | None = None, section: str | None = None,
                             hint: str | None = None, fix: str | None = None) -> set[str]:
    """Asserts that the compiled HLO of ``jax.jit(fn)(*args)`` has (or lacks) a collective.

    Collectives are inserted when XLA partitions the program, so this compiles
    ``fn`` for the given (sharded) arguments and reads the optimized HLO. Only the
    presence of a class is checked, never a count.

    Args:
      fn: the function (jitted or not).
      args: its arguments, placed as the test needs (their shardings matter).
      collective: a class from :data:`COLLECTIVES`, or several: with
        ``present=True`` any one of them passes; with ``present=False`` none may appear.
      present: whether the collective must appear (``True``) or be absent.
      kwargs, name, section, hint, fix: keyword inputs; how to name the call; the
        section to reread; a likely cause and a fix that replace the defaults.

    Returns:
      The set of collective classes found.

    >>> import jax.numpy as jnp
    >>> assert_collective_in_hlo(jnp.sin, (jnp.ones(4),), "all-reduce", present=False)
    set()
    >>> assert_collective_in_hlo(jnp.sin, (jnp.ones(4),), "all-reduce", name="sin(x)")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: sin(x) compiles to no `all-reduce`
      expected: `all-reduce` in the compiled HLO
      got:      collectives in the compiled HLO: none
      likely cause: no data crosses devices: each device computed on its own data only (a missing reduction, or inputs that are not sharded)
      fix: print(jax.jit(f).lower(*args).compile().as_text()) and look for the collective
    """
    __tracebackhide__ = True
    from autograder._hlo import compiled_hlo_text

    wanted = _as_names(collective, COLLECTIVES, "collective")
    label = name or call_signature(fn, args, kwargs)

    def compile_hlo(*a, **k):
        return compiled_hlo_text(fn, a, k)

    text, _ = call_student(compile_hlo, tuple(args), kwargs or {}, name=f"compiling {label}",
                           section=section)
    found = collect_collectives(text)
    found_text = ", ".join(sorted(found)) or "none"
    if present and not found & set(wanted):
        fail(f"{label} compiles to no {_or_text(wanted)}", rung="structure",
             expected=f"{_or_text(wanted)} in the compiled HLO",
             got=f"collectives in the compiled HLO: {found_text}",
             cause=hint or ("no data crosses devices: each device computed on its own data "
                            "only (a missing reduction, or inputs that are not sharded)"),
             fix=fix or ("print(jax.jit(f).lower(*args).compile().as_text()) and look for "
                         "the collective"), section=section)
    if not present and found & set(wanted):
        fail(f"{label} compiles to {_or_text(sorted(found & set(wanted)))}", rung="structure",
             expected=f"no {_or_text(wanted)} in the compiled HLO",
             got=f"collectives in the compiled HLO: {found_text}",
             cause=hint or ("XLA had to move data between devices: an input or an "
                            "intermediate is laid out differently than the computation needs"),
             fix=fix or "place the inputs so that each device already holds what it needs",
             section=section)
    return found


def assert_collective_set(got: Any, expected: Iterable[str], *, name: str = "result",
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> None:
    """Asserts that ``got`` (an iterable of collective class names) matches ``expected``.

    >>> assert_collective_set({"all-reduce"}, ["all-reduce"])
    >>> assert_collective_set(set(), {"all-gather"}, name="collectives_in_hlo(f, x)")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: collectives_in_hlo(f, x) returned the wrong collectives
      expected: {'all-gather'}
      got:      set()
      missing:    {'all-gather'}
    """
    __tracebackhide__ = True
    if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__") or not all(
            isinstance(g, str) for g in got):
        fail(f"{name} did not return a set of collective names", rung="type",
             expected="a set of str, e.g. {'all-reduce'}", got=describe_value(got),
             cause=hint, fix=fix or "return a set of names such as 'all-reduce'",
             section=section)
    _assert_same_set(set(got), set(expected), name=name, item="collectives", section=section,
                     hint=hint, fix=fix, shown=lambda s: repr(set(sorted(s))) if s else "set()")


# ------------------------------------------------------------------------- shard_map

def _count_in_shard_maps(jaxpr, inside: bool, counts: Counter) -> None:
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        name = eqn.primitive.name
        if name == "shard_map":
            counts["shard_map"] += 1
        elif inside:
            counts[name] += 1
        for sub in _sub_jaxprs(eqn.params):
            _count_in_shard_maps(sub, inside or name == "shard_map", counts)


def collect_shard_map_primitives(fn: Callable, args: Sequence = (),
                                 kwargs: dict | None = None, *,
                                 section: str | None = None) -> Counter:
    """Counts the primitives inside the ``shard_map`` bodies of ``fn(*args)``.

    The count under the key ``"shard_map"`` is the number of ``shard_map``
    equations, nested ones included; the other keys count the primitives their
    bodies use (nested jaxprs walked). ``psum`` appears as ``psum_invariant`` when
    ``check_vma=True`` (the default).

    >>> import jax, jax.numpy as jnp
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> def total(x):
    ...     return jax.shard_map(lambda b: jax.lax.psum(b.sum(), "data"), mesh=mesh,
    ...                          in_specs=P("data"), out_specs=P())(x)
    >>> x = jax.device_put(jnp.ones(4), jax.NamedSharding(mesh, P("data")))
    >>> counts = collect_shard_map_primitives(total, (x,))
    >>> counts["shard_map"], counts["psum_invariant"]
    (1, 1)
    """
    __tracebackhide__ = True
    counts: Counter = Counter()
    _count_in_shard_maps(trace_jaxpr(fn, args, kwargs, section=section), False, counts)
    return counts


def assert_shard_map_uses(fn: Callable, args: Sequence, collectives: str | Sequence[str] = "psum",
                          *, kwargs: dict | None = None, name: str | None = None,
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> Counter:
    """Asserts that ``fn(*args)`` runs a ``jax.shard_map`` whose body uses a collective.

    Args:
      fn: the student's function.
      args: its arguments.
      collectives: one name or several (any one passes): ``"psum"``, ``"pmean"``,
        ``"all_gather"``, ``"psum_scatter"``, ``"ppermute"``, ``"all_to_all"``,
        ``"pmax"``, ``"pmin"``. Their jaxpr spellings (``psum_invariant`` ...) count.
      kwargs, name, section, hint, fix: keyword inputs; how to name the call; the
        section to reread; a likely cause and a fix that replace the defaults.

    Returns:
      The primitive counts of :func:`collect_shard_map_primitives`.

    >>> import jax, jax.numpy as jnp
    >>> from jax.sharding import PartitionSpec as P
    >>> mesh = jax.make_mesh((1,), ("data",), devices=jax.devices()[:1])
    >>> def double(x):
    ...     return jax.shard_map(lambda b: b + b, mesh=mesh,
    ...                          in_specs=P("data"), out_specs=P("data"))(x)
    >>> x = jax.device_put(jnp.ones(4), jax.NamedSharding(mesh, P("data")))
    >>> _ = assert_shard_map_uses(double, (x,), "psum")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: the shard_map in double(x=f32[4]) uses no collective
      expected: `psum` inside the shard_map body
      got:      primitives in the body: add
      likely cause: without a collective each device only sees its own shard: a sum or mean covers the local rows only
      fix: combine the per-device results with jax.lax.psum (or pmean, all_gather) over the mesh axis the data is split on
    """
    __tracebackhide__ = True
    wanted = _as_names(collectives, tuple(_PRIMITIVE_ALIASES), "collective primitive")
    label = name or call_signature(fn, args, kwargs)
    counts = collect_shard_map_primitives(fn, args, kwargs, section=section)
    if not counts["shard_map"]:
        from autograder._jaxpr import count_primitives

        used = count_primitives(trace_jaxpr(fn, args, kwargs, section=section))
        fail(f"{label} does not use jax.shard_map", rung="structure",
             expected=f"a jax.shard_map whose body uses {_or_text(wanted)}",
             got=f"primitives used: {', '.join(sorted(used)) or 'none'}",
             cause=hint or "the computation was written with jit and jnp only",
             fix=fix or ("wrap the per-device computation: jax.shard_map(f, in_specs=..., "
                         "out_specs=...)(x)"), section=section)
    aliases = {alias for w in wanted for alias in _PRIMITIVE_ALIASES[w]}
    if not aliases & set(counts):
        body = sorted(k for k in counts if k != "shard_map")
        fail(f"the shard_map in {label} uses no collective", rung="structure",
             expected=f"{_or_text(wanted)} inside the shard_map body",
             got=f"primitives in the body: {', '.join(body) or 'none'}",
             cause=hint or ("without a collective each device only sees its own shard: a sum "
                            "or mean covers the local rows only"),
             fix=fix or ("combine the per-device results with jax.lax.psum (or pmean, "
                         "all_gather) over the mesh axis the data is split on"),
             section=section)
    return counts
