"""Exported programs: what a structure check hands the grader instead of a claim.

A check about compiled code (op counts, loops, donation, collectives, memory) does
not measure the student's function where the student's code runs. It exports it
(``jax.export``: serialized StableHLO, plain bytes) at the grader's inputs; the facts
are then derived from those bytes by :func:`derive`, which takes the program, never
the live function. In the student's kernel that happens in place; when grading, a
second sandbox that runs no student code deserializes every program, refuses any op
outside an allowlist (host callbacks, unknown custom calls, infeed/outfeed), runs it
on the grader's inputs (so the grader can compare its values with the reference: a
program of some other function earns nothing) and derives the same facts.

Facts a program gives (``facts`` of the derived observation, one dict per program; those
read from its text alone are computed in :mod:`autograder.programs.text`): ``ops``
(StableHLO op counts over every function, nested ones included), ``donated`` (argument
indices aliased to outputs), ``refused`` (ops outside the allowlist),
``in_avals``/``out_avals``, ``nr_devices``, ``custom_calls``, ``locations``, ``size``
(characters of StableHLO), ``while_trips`` (the trip count of each ``stablehlo.while``,
None where the loop stops on a computed condition), ``dots`` (``[lhs, rhs, result]``
element types of each ``dot_general``), ``manual_ops`` (op counts inside
``jax.shard_map`` bodies), ``largest_array`` (the largest tensor type and its element
count), with ``liveness="loop"`` or ``"branch"`` (first program only) ``region_live``
(:mod:`autograder.programs.region_liveness`), with ``pallas_facts=True`` ``pallas`` (the
Pallas kernels: :func:`autograder.programs.pallas_kernels.collect_kernel_facts`), with
``handover=[source, target]`` (first program only) ``handover``
(:mod:`autograder.programs.scope_handover`), and with ``compile=True`` the optimized
HLO's ``collectives`` (classes present, :data:`COLLECTIVES`), ``hlo_ops`` and
``temp_bytes`` (``memory_analysis``). A program exported for several devices is placed
on a mesh of the judge's devices with the names, sizes and axis types it was exported
for, its inputs sharded as it expects.
"""
from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from typing import Any

import numpy as np

from autograder.core import check as _check, wire as _wire
from autograder.programs.region_liveness import liveness_facts
from autograder.programs.scope_handover import handover_facts
from autograder.programs.tie import (TIE_TOLERANCE, explain_program,  # noqa: F401 - re-exported
                                     explain_values_tie, program_facts)
from autograder.programs.text import (ALLOWED_CUSTOM_CALLS, ALLOWED_DIALECTS,  # noqa: F401
                                      COLLECTIVES, REFUSED_OPS, collective_bytes,
                                      collective_classes, collective_counts, static_facts)

MAX_PROGRAM_BYTES = 16 << 20


class ProgramNotExportable(Exception):
    """``jax.export`` cannot serialize the function's program (a host callback in it)."""


@dataclasses.dataclass
class Programs:
    """Exported programs of one check, with the dynamic inputs each was exported at."""

    exported: list
    inputs: list  # per program: the flat list of array arguments


def export_program(fn, args=(), kwargs=None):
    """``jax.export`` of ``fn`` at ``args``: ``(exported, flat array inputs)``.

    A function that is not a ``jax.jit`` function is jitted first, on the flat leaves of
    its inputs and outputs: the same program, and one whose pytrees can be serialized
    (``Exported.serialize`` refuses pytree nodes of other libraries, an optax state
    among them). Static arguments, donation and shardings of a jitted function are
    kept; when its pytrees do not serialize, its program is kept as it is and only its
    pytree structure is flattened (:func:`_on_leaves`).
    """
    import jax

    from autograder.core.check import NotAFunction

    if not callable(fn):
        raise NotAFunction(type(fn).__name__ if fn is not None else "None")
    kwargs = kwargs or {}
    # Exported for the platform its inputs live on: on a one-accelerator host the
    # sharding chapter runs on the simulated CPU devices, and a program exported for
    # the default backend (the TPU) would ask for 8 TPUs.
    platforms = _input_platforms(jax.tree.leaves((args, kwargs)))
    try:
        if _is_jit(fn):
            exported = _on_leaves(jax.export.export(fn, platforms=platforms)(*args, **kwargs))
        else:
            # Exported on the flat leaves of its inputs and outputs: the same program, and
            # one whose pytrees serialize (optax states do not).
            tree_leaves, treedef = jax.tree.flatten((tuple(args), kwargs))

            def flat_fn(*leaves):
                a, k = jax.tree.unflatten(treedef, leaves)
                return jax.tree.leaves(fn(*a, **k))

            flat_fn.__name__ = getattr(fn, "__name__", "fn")
            exported = jax.export.export(jax.jit(flat_fn), platforms=platforms)(*tree_leaves)
    except NotImplementedError as err:
        if not _raised_by_jax_export(err):
            raise  # the student's own (an unsolved stub)
        raise ProgramNotExportable(
            f"the program cannot be exported ({err}): a host callback (jax.debug.print, "
            "jax.debug.callback, jax.pure_callback, io_callback) is in the graded "
            "function; remove it") from None
    leaves = jax.tree.leaves((args, kwargs))
    if len(leaves) == len(exported.in_avals):
        # Every leaf is an input (no static arguments): a Python number is traced as a
        # scalar of its aval's dtype, so it is recorded as one.
        flat = [leaf if _is_array(leaf) else np.asarray(leaf, dtype=aval.dtype)
                for leaf, aval in zip(leaves, exported.in_avals)]
    else:
        flat = [leaf for leaf in leaves if _is_array(leaf)]
        if len(flat) != len(exported.in_avals):
            flat = []  # static and traced leaves mixed: the program cannot be re-run here
    return exported, flat


def _raised_by_jax_export(err: BaseException) -> bool:
    """Whether JAX's export raised ``err`` itself ("serialization of host_callbacks is
    not yet implemented"), not code it traced: its innermost frame is in jax.export."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename.replace("\\", "/") if tb is not None else ""
    return "/jax/_src/export/" in filename


def _on_leaves(exported):
    """``exported`` itself when it serializes; otherwise the same program (module,
    shardings, donation) with flat input and output pytrees, as a plain function's.

    ``Exported.serialize`` refuses pytree nodes of other libraries (an optax state);
    the StableHLO program takes and returns flat leaves anyway, so only the structure
    used to flatten a call's arguments and unflatten its results changes.
    """
    import jax

    try:
        exported.serialize()
    except ValueError as err:
        if "PyTreeDef" not in str(err):
            raise
        n, m = len(exported.in_avals), len(exported.out_avals)
        return dataclasses.replace(exported,
                                   in_tree=jax.tree.structure((tuple(range(n)), {})),
                                   out_tree=jax.tree.structure(list(range(m))))
    return exported


def _input_platforms(leaves) -> tuple[str, ...] | None:
    """``("cpu",)`` when the arrays among ``leaves`` all live on CPU devices while the
    default backend is an accelerator; else None (export for the default backend)."""
    import jax

    if jax.default_backend() == "cpu":
        return None
    found = set()
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            try:
                found |= {d.platform for d in leaf.devices()}
            except Exception:  # noqa: BLE001 - a deleted (donated) array: no say
                continue
    return ("cpu",) if found == {"cpu"} else None


def program_devices(platforms) -> list:
    """This process's devices for a program exported for ``platforms``: the CPU
    devices for a CPU program where the default backend is an accelerator (the
    simulated devices the sharding chapter uses on a one-accelerator host), else the
    default backend's."""
    import jax

    from autograder.core.numeric import accelerator_cpus

    cpus = accelerator_cpus() if list(platforms)[:1] == ["cpu"] else []
    return cpus or list(jax.devices())


def _is_array(leaf) -> bool:
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def _is_jit(fn) -> bool:
    from autograder.core.tracing import is_jit_function

    return is_jit_function(fn)


def observe_artifact(programs: Programs) -> _wire.Observation:
    blobs, inputs = [], []
    for exported, flat in zip(programs.exported, programs.inputs):
        blob = bytes(exported.serialize())
        if len(blob) > MAX_PROGRAM_BYTES:
            raise ValueError(f"the exported program is {len(blob) >> 20} MiB, too large to judge")
        blobs.append(blob)
        inputs.append(_wire.observe_tree(list(flat)))
    return _wire.Observation("artifact", artifacts=tuple(blobs), inputs=tuple(inputs))


# ---------------------------------------------------------------- deriving facts

def _mesh_of(exported, text: str, devices: list):
    """A mesh of the first of ``devices`` shaped like the one the program was exported
    for: names, sizes and axis types from its input shardings (Explicit axes stay
    Explicit), or names and sizes from its ``sdy.mesh`` when no input is sharded."""
    import jax
    from jax.sharding import AxisType

    n = int(exported.nr_devices)
    try:
        shardings = exported.in_shardings_jax()
    except TypeError:
        # jax 0.10 builds them only on a given mesh (failed so on a TPU v5e): the
        # abstract ones it keeps beside, which carry the axis types, are read instead.
        shardings = getattr(exported, "_in_named_shardings", None) or ()
    for sharding in shardings:
        abstract = getattr(sharding, "mesh", None)
        sizes = tuple(getattr(abstract, "axis_sizes", ()) or ())
        if sizes and int(np.prod(sizes)) == n:
            return jax.make_mesh(sizes, tuple(abstract.axis_names),
                                 axis_types=tuple(abstract.axis_types),
                                 devices=devices[:n])
    m = re.search(r"sdy\.mesh @\w+ = <\[(.*?)\]>", text)
    if not m:
        return None
    axes = re.findall(r'"(\w+)"=(\d+)', m.group(1))
    if not axes:
        return None
    shape = tuple(int(n) for _, n in axes)
    return jax.make_mesh(shape, tuple(a for a, _ in axes),
                         axis_types=(AxisType.Auto,) * len(axes),
                         devices=devices[:int(np.prod(shape))])


def derive_one(blob: bytes, inputs: _wire.Observation | None, *, compile: bool = False,
               run: bool = True, pallas: bool = False, liveness: str | None = None,
               handover: list | None = None) -> tuple[dict, _wire.Observation | None]:
    """``(facts, outputs)`` of one serialized program; runs nothing refused."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    exported = jax.export.deserialize(bytearray(blob))
    text = exported.mlir_module()
    facts = static_facts(text)
    if pallas:  # a pure function of the text, like static_facts
        from autograder.programs.pallas_kernels import collect_kernel_facts

        facts["pallas"] = collect_kernel_facts(text)
    facts.update(nr_devices=int(exported.nr_devices), platforms=list(exported.platforms),
                 kept=[int(i) for i in sorted(exported.module_kept_var_idx)],
                 in_avals=[str(a) for a in exported.in_avals],
                 out_avals=[str(a) for a in exported.out_avals])
    if facts["refused"]:
        return facts, None
    devices = program_devices(exported.platforms)
    if exported.nr_devices > len(devices):
        facts["refused"] = [f"a program for {exported.nr_devices} devices"]
        return facts, None
    args = []
    if inputs is not None and inputs.kind == "tree" and len(inputs.leaves) == len(exported.in_avals):
        args = [_leaf_value(leaf) for leaf in inputs.leaves]
    mesh = _mesh_of(exported, text, devices) if exported.nr_devices > 1 else None
    if mesh is not None and args:
        shardings = exported.in_shardings_jax(mesh)
        args = [jax.device_put(a, s if s is not None else NamedSharding(mesh, PartitionSpec()))
                for a, s in zip(args, shardings)]
    elif devices[0].platform != jax.default_backend() and args:
        args = [jax.device_put(a, devices[0]) for a in args]  # where the program runs
    outputs = None
    if args or not exported.in_avals:
        call_args, call_kwargs = jax.tree.unflatten(exported.in_tree, args)
        call = exported.call
        if compile:
            compiled = jax.jit(exported.call).lower(*call_args, **call_kwargs).compile()
            hlo = compiled.as_text()
            facts["collectives"] = collective_classes(hlo)
            facts["collective_counts"] = collective_counts(hlo)
            facts["collective_bytes"] = collective_bytes(hlo)
            facts["hlo_ops"] = dict(Counter(re.findall(r"= \S+ ([a-z\-]+)\(", hlo)))
            memory = compiled.memory_analysis()
            facts["temp_bytes"] = int(getattr(memory, "temp_size_in_bytes", -1) or 0)
            call = compiled  # run what was compiled: one compilation, not two
        if run:
            result = call(*call_args, **call_kwargs)
            # The flat leaves: a jitted function's program returns its own pytree, a
            # plain function's (exported on leaves) a list; the values tie the program
            # to the graded function, the structure is judged by the value checks.
            outputs = _wire.observe_tree(list(jax.tree.leaves(result)))
            if liveness:  # the region kind whose work the judge perturbs
                facts |= liveness_facts(exported, call_args, call_kwargs, result, facts, liveness)
            if handover:
                facts["handover"] = handover_facts(exported, call_args, call_kwargs, *handover)
    return facts, outputs


def _leaf_value(leaf: _wire.Leaf):
    import jax
    import jax.numpy as jnp

    if leaf.kind == "key":
        impl = leaf.dtype[4:-1] if leaf.dtype.startswith("key<") else "threefry2x32"
        return jax.random.wrap_key_data(jnp.asarray(leaf.value),
                                        impl={"fry": "threefry2x32"}.get(impl, impl))
    return jnp.asarray(leaf.value, dtype=leaf.dtype if leaf.dtype not in ("", "int64")
                       else leaf.value.dtype)


def derive(obs: _wire.Observation, params: dict) -> _wire.Observation:
    """The derived observation of an artifact: ``facts`` = list of per-program facts,
    ``outputs`` = their outputs on the recorded inputs (when they could run)."""
    facts, outputs = [], []
    for i, blob in enumerate(obs.artifacts):
        inputs = obs.inputs[i] if i < len(obs.inputs) else None
        try:
            f, out = derive_one(blob, inputs, compile=bool(params.get("compile")),
                                run=bool(params.get("run", True)),
                                pallas=bool(params.get("pallas_facts")),
                                liveness=params.get("liveness") if i == 0 else None,
                                handover=params.get("handover") if i == 0 else None)
        except Exception as err:  # noqa: BLE001 - a broken program is a failed check
            f, out = {"error": f"{type(err).__name__}: {str(err)[:300]}"}, None
        facts.append(f)
        outputs.append(out if out is not None else _wire.Observation("tree", tree="PyTreeDef(None)"))
    return _wire.Observation("facts", facts=facts, outputs=tuple(outputs))


def derive_here(obs: _wire.Observation, params: dict) -> _wire.Observation:
    """In the student's kernel: the same facts, derived in this process (quietly: a
    warning while compiling must not reach stderr in a graded cell)."""
    from autograder.core.quiet import quiet

    with quiet():
        return derive(obs, params)


# Registered with the check core: a check's "artifact" value is an exported program,
# and the student's kernel derives its facts here before judging them.
_check.observation_kind("artifact", observe_artifact, derive_here)


def judge_main(job: str = ".", part: str = "") -> None:
    """The program judge's entry point, inside a sandbox that runs no student code.

    Reads ``programs{part}.json``/``.npz`` (one record per program to judge: its
    artifact and the grader's inputs; ``params`` say what to derive) and writes
    ``derived{part}.json``/``.npz`` (one record per program, same labels).
    """
    with open(os.path.join(job, f"programs{part}.json"), "rb") as f:
        raw_json = f.read()
    with open(os.path.join(job, f"programs{part}.npz"), "rb") as f:
        raw_npz = f.read()
    cell = _wire.loads(raw_json, raw_npz)
    records = []
    for rec in cell.records:
        derived = derive(rec.observed, rec.params)
        records.append(_wire.Record("derived", rec.label, {}, derived))
    raw_json, raw_npz = _wire.dumps(_wire.CellResult("derived", tuple(records)))
    with open(os.path.join(job, f"derived{part}.npz"), "wb") as f:
        f.write(raw_npz)
    with open(os.path.join(job, f"derived{part}.json"), "wb") as f:
        f.write(raw_json)


def programs_of(*calls) -> Programs:
    """``observe`` for structure checks: each ``(fn, args, kwargs)`` exported."""
    exported, inputs = [], []
    for fn, args, kwargs in calls:
        e, flat = export_program(fn, args, kwargs)
        exported.append(e)
        inputs.append(flat)
    return Programs(exported, inputs)


def program_sides(make):
    """``(observe, expect)`` of a structure check whose programs are ``make()``.

    In the reference run the instructor's programs are the expected side too, so the
    grader runs a submission's program on the grader's inputs and compares its values
    with the reference's (:func:`explain_program`): a program exported from some other
    function earns nothing. Elsewhere there is no expected side: the kernel judges the
    student's own program, and a student's sandbox never evaluates one.
    """
    from autograder.core.check import REFERENCE, mode

    if mode() != REFERENCE:
        return make, None
    kept: list = []

    def expect():
        kept.append(make())
        return kept[-1]

    def observe():  # the reference's programs, exported once
        return kept.pop() if kept else make()

    return observe, expect


def as_arrays(tree: Any) -> Any:
    """Python numbers in ``tree`` as (weakly typed) arrays: jit traces them the same
    way, so the program is unchanged, and the grader can run it on recorded inputs.
    Only for arguments that are traced anyway (never static ones).

    >>> as_arrays((1.5, "kept"))[0].weak_type
    True
    """
    import jax
    import jax.numpy as jnp

    return jax.tree.map(
        lambda x: jnp.asarray(x) if isinstance(x, (bool, int, float)) else x, tree)
