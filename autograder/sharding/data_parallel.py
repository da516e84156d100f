"""Checks of a data-parallel step: where did the train step's inputs live?

The student's ``make_parallel_step(train_step, mesh)`` is built around a *probe* train
step that records what it receives and returns its inputs unchanged. The placement of
each array it received (which device holds which slice: index ranges and device ids,
:func:`autograder.sharding.placement.sharding_facts`) is observed as plain data where the step
ran; the expected placement (the batch split over the mesh's first axis, one slice
per device) comes from the reference side, and the verdict
(:func:`explain_data_parallel`) is a pure function of both.

In-process facts, both checks (:func:`collect_step_placement`,
:func:`assert_step_is_data_parallel`): placement is a property of the live arrays the
student's code passed on, not of a compiled program, so it is observed as a value.
:func:`collect_step_placement` returns the probe's record with its live shardings, for
lessons and tests; the check itself records only plain data.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import describe_value, format_failure
from autograder.core.numeric import call_student
from autograder.sharding.placement import sharding_facts


@dataclasses.dataclass
class Placement:
    """Where a probe train step found its inputs: ``{path: sharding}`` per argument."""

    params: dict
    opt_state: dict
    x: Any
    y: Any
    traced: bool


def _leaves(tree) -> list:
    import jax

    return [(jax.tree_util.keystr(p), v) for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _shardings(tree) -> dict:
    return {path: getattr(v, "sharding", None) for path, v in _leaves(tree)}


def _probe(calls: list, shapes: list) -> Callable:
    """A train step that records the shardings (and shapes) of its inputs, and changes
    nothing."""
    import jax
    import jax.numpy as jnp

    def train_step(p, s, xb, yb):
        traced = any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((p, s, xb, yb)))
        calls.append(Placement(_shardings(p), _shardings(s), getattr(xb, "sharding", None),
                               getattr(yb, "sharding", None), traced))
        shapes.append({"params": {k: getattr(v, "shape", ()) for k, v in _leaves(p)},
                       "opt_state": {k: getattr(v, "shape", ()) for k, v in _leaves(s)},
                       "x": getattr(xb, "shape", ()), "y": getattr(yb, "shape", ())})
        return p, s, jnp.zeros((), jnp.float32)

    return train_step


def _array_facts(sharding, shape) -> dict | None:
    if sharding is None:
        return None
    facts = sharding_facts(sharding, tuple(shape))
    devices = sorted(sharding.device_set, key=lambda d: d.id)
    return dict(facts, first_device=str(devices[0]) if devices else "",
                text=str(sharding)[:300])


def _placement_facts(step, calls: list, shapes: list, params, opt_state, x, y) -> dict:
    """Calls the student's step on the inputs; where the probe found them, as data."""
    call(step, (params, opt_state, x, y))
    if not calls:
        return {"calls": 0}
    seen, shape = calls[0], shapes[0]
    facts = {"calls": len(calls), "traced": bool(seen.traced)}
    if seen.traced:
        return facts
    facts["x"] = _array_facts(seen.x, shape["x"])
    facts["y"] = _array_facts(seen.y, shape["y"])
    facts["state"] = [[tree_name + path, _array_facts(sharding, shape[tree_name][path])]
                      for tree_name, shardings in (("params", seen.params),
                                                   ("opt_state", seen.opt_state))
                      for path, sharding in shardings.items()]
    return facts


def _expected_placement(mesh, x, y) -> dict:
    from jax.sharding import NamedSharding, PartitionSpec

    axis = mesh.axis_names[0]
    batch = NamedSharding(mesh, PartitionSpec(axis))
    return {"axis": str(axis), "device_ids": sorted(int(d.id) for d in mesh.devices.flat),
            "x": _array_facts(batch, x.shape), "y": _array_facts(batch, y.shape)}


def _build(make_parallel_step: Callable, mesh, section):
    """Records the call of the student's factory (a check of its own) and the probe."""
    __tracebackhide__ = True
    calls: list = []
    shapes: list = []
    maker = getattr(make_parallel_step, "__name__", "make_parallel_step")
    step, _ = call_student(make_parallel_step, (_probe(calls, shapes), mesh),
                           name=f"{maker}(train_step, mesh)", section=section)
    return maker, step, calls, shapes


def _label(maker: str, x, y) -> str:
    return (f"the step {maker} returned, called on (params, opt_state, x: "
            f"{describe_value(x)}, y: {describe_value(y)})")


def collect_step_placement(make_parallel_step: Callable, mesh, params, opt_state, x, y, *,
                           section: str | None = None) -> Placement | None:
    """Builds ``make_parallel_step(probe, mesh)`` and records where the probe's inputs live.

    The probe stands in for the train step: it records the sharding of each array it
    receives and returns its inputs unchanged (with a zero loss). Fails (None in a
    grading run) when the step never calls it.

    >>> import jax
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = jax.make_mesh((len(jax.devices()),), ("data",))
    >>> def make(step, mesh):
    ...     def dp_step(p, s, x, y):
    ...         x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
    ...         return step(*jax.device_put((p, s), NamedSharding(mesh, P())), x, y)
    ...     return dp_step
    >>> n = 2 * len(jax.devices())
    >>> seen = collect_step_placement(make, mesh, {"w": jax.numpy.ones(2)}, (),
    ...                               jax.numpy.ones((n, 2)), jax.numpy.ones(n))
    >>> seen.x.spec, seen.params["['w']"].is_fully_replicated
    (P('data',), True)
    """
    __tracebackhide__ = True
    maker, step, calls, shapes = _build(make_parallel_step, mesh, section)
    return run(Check("step_placement", _label(maker, x, y),
                     observe=lambda: _placement_facts(step, calls, shapes, params, opt_state, x, y),
                     observe_as="facts", params=dict(maker=maker, section=section),
                     returns=lambda facts: calls[0] if calls else None))


def _explain_called(facts: dict, maker: str, section) -> str | None:
    if not facts.get("calls"):
        return format_failure(
            f"the step {maker} returned never called train_step",
            expected="one call of train_step on the placed arrays", got="no call",
            fix="return a function that places its inputs and then calls train_step",
            section=section)
    return None


@explainer("step_placement")
def explain_step_placement(observed, expected, *, label: str, maker: str, section=None,
                           **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    return _explain_called(facts, maker, section)


def assert_step_is_data_parallel(make_parallel_step: Callable, mesh, params, opt_state,
                                 x, y, *, section: str | None = None) -> Placement | None:
    """Asserts that a data-parallel step shards the batch and replicates the state.

    Builds ``make_parallel_step(probe, mesh)`` and calls it on ``(params, opt_state, x,
    y)``: the probe must receive ``x`` and ``y`` split along their first axis over all
    of the mesh's devices (one slice each) and every leaf of ``params`` and
    ``opt_state`` replicated on all of them. A step that runs everything on one
    device gives the same numbers, only slower and without the memory split: this
    check sees it.

    >>> import jax
    >>> mesh = jax.make_mesh((len(jax.devices()),), ("data",))
    >>> n = 2 * len(jax.devices())
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> def make(step, mesh):
    ...     def dp_step(p, s, x, y):
    ...         x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
    ...         return step(*jax.device_put((p, s), NamedSharding(mesh, P())), x, y)
    ...     return dp_step
    >>> seen = assert_step_is_data_parallel(make, mesh, {"w": jax.numpy.ones(2)}, (),
    ...                                     jax.numpy.ones((n, 2)), jax.numpy.ones(n))
    """
    __tracebackhide__ = True
    maker, step, calls, shapes = _build(make_parallel_step, mesh, section)
    return run(Check("data_parallel", _label(maker, x, y),
                     observe=lambda: _placement_facts(step, calls, shapes, params, opt_state, x, y),
                     expect=lambda: _expected_placement(mesh, x, y),
                     observe_as="facts", expect_as="facts",
                     params=dict(maker=maker, section=section),
                     returns=lambda facts: calls[0] if calls else None))


def _place_text(facts: dict | None) -> str:
    if facts is None:
        return "not a JAX array"
    shape, shard = tuple(facts["shape"]), tuple(facts.get("shard_shape", ()))
    n = len(facts.get("device_ids", ()))
    if n == 1:
        return f"all of it on one device ({facts.get('first_device')}), shape {shape}"
    if shard == shape:
        return f"a full copy of shape {shape} on each of {n} devices"
    return f"{n} devices holding slices of shape {shard}"


@explainer("data_parallel")
def explain_data_parallel(observed, expected, *, label: str, maker: str, section=None,
                          **_ignored) -> str | None:
    """Called once, on concrete arrays; the batch split over the mesh; the state copied."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    want = expected.facts if expected is not None and isinstance(expected.facts, dict) else {}
    problem = _explain_called(facts, maker, section)
    if problem:
        return problem
    if facts.get("traced"):
        return format_failure(
            f"the step {maker} returned called train_step inside a trace",
            expected="train_step called on placed, concrete arrays",
            got="it received tracers (inside jax.jit, vmap or grad)",
            cause="the data-parallel step was wrapped in another transformation; "
                  "train_step is already jitted",
            fix="place the arrays with jax.device_put, then call train_step directly",
            section=section)
    devices = set(want.get("device_ids", ()))
    count, axis = len(devices), want.get("axis", "data")
    for name in ("x", "y"):
        got, wanted = facts.get(name), want.get(name) or {}
        if got is not None and got.get("slices") == wanted.get("slices"):
            continue
        if got is not None and len(got.get("device_ids", ())) > 1 and \
                tuple(got.get("shard_shape", ())) == tuple(got["shape"]):
            cause = ("the batch was replicated (P()) instead of split: every device "
                     "computes the gradient of the whole batch, so nothing runs in "
                     "parallel")
        else:
            cause = ("the batch was never placed (or was brought back to one "
                     "device), so one device does all the work while the others "
                     "idle: the step gives the right numbers, which is why this goes "
                     "unnoticed")
        return format_failure(
            f"{name} is not split over the mesh's {count} devices when train_step runs",
            expected=_place_text(wanted) if wanted else "the batch split over the mesh",
            got=_place_text(got), cause=cause,
            fix=f"{name} = jax.device_put({name}, NamedSharding(mesh, P({axis!r})))"
                + (" (and the same for y)" if name == "x" else ""),
            section=section)
    bad = []
    for path, leaf in facts.get("state", []):
        if leaf is None:
            continue
        if not (set(leaf.get("device_ids", ())) == devices and len(leaf.get("slices", ())) == 1):
            where = "one device" if len(leaf.get("device_ids", ())) == 1 else "split across devices"
            bad.append(f"{path}: {where} ({leaf.get('text')})")
    if bad:
        return format_failure(
            f"the step {maker} returned does not replicate the model state on all "
            f"{count} devices", details=bad[:6],
            expected=f"every leaf of params and opt_state replicated on all {count} devices",
            got=f"{len(bad)} leaf (leaves) placed otherwise",
            cause="in data parallelism every device holds a full copy of the parameters "
                  "and optimizer state; only the batch is split",
            fix="params, opt_state = jax.device_put((params, opt_state), "
                "NamedSharding(mesh, P()))", section=section)
    return None
