"""What one named scope of a program hands to another, computed by running it.

"Put the whole gradient computation inside ``jax.named_scope("grad")`` and the update
inside ``"update"``" is a statement about data flow: the value the update reads from the
gradient's scope is the gradient. The op counts of each scope cannot judge it: a factor
of the gradient (its mean's ``1/n``) folded into the learning rate, in either scope, is
scalar arithmetic, and the values each scope hands over are then not the gradient.
:func:`handover_values` rewrites the exported program so that ``main`` also returns
every value that an operation of scope ``source`` defines and an operation of scope
``target`` reads (directly, or through unscoped layout operations such as a reshape),
compiles it and runs it on the graded inputs. The judge compares them with the
reference's (:func:`autograder.programs.exported.explain_handover`).

Only the judge and the tests call this: the bindings are JAX's own
(``jax._src.lib.mlir``), checked on JAX 0.12.0.1.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from autograder.programs.mlir_rewrite import funcs_of, operations, walk_ops
from autograder.programs.region_work import LAYOUT
from autograder.programs.text import _LOC as _NAME, named_scopes

_FLOATS = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
# A value handed over is kept whole up to this many elements (the check compares them).
MAX_ELEMENTS = 1 << 16


def scopes_of(op) -> tuple[str, ...]:
    """The ``jax.named_scope`` labels around an operation, read from its location.

    An operation without a ``jit(...)`` name (a constant JAX placed at the top) has none."""
    m = _NAME.search(str(op.location))
    scoped = named_scopes(m.group(1)) if m else None
    return scoped[0] if scoped else ()


def _crossing(main, source: str, target: str) -> list:
    """The values defined by operations at the top of ``main`` inside ``source`` (and
    not ``target``) and read by operations inside ``target`` (and not ``source``), at
    any depth, in the order the program reads them."""
    from jax._src.lib.mlir import ir

    top = operations(main.regions[0].blocks[0])

    def owner(value):
        if not isinstance(value, ir.OpResult):
            return None
        op = value.owner
        return op.operation if hasattr(op, "operation") else op

    found: list = []

    def reach(value, depth: int = 0) -> None:
        op = owner(value)
        if op is None or depth > 50:
            return
        scopes = scopes_of(op)
        if source in scopes and target not in scopes:
            if not any(value == v for v in found):
                found.append(value)
        elif not scopes and op.name in LAYOUT:  # a reshape between the scopes
            for operand in op.operands:
                reach(operand, depth + 1)

    for op in top + [inner for op in top for inner in walk_ops(op, [])]:
        scopes = scopes_of(op)
        if target in scopes and source not in scopes:
            for operand in op.operands:
                reach(operand)
    return found


def handover_values(exported, call_args, call_kwargs, source: str, target: str
                    ) -> list[dict]:
    """``[{"shape", "dtype", "values"}, ...]``: each float array that scope ``source``
    hands to scope ``target`` in ``exported``, computed on the inputs (values as a flat
    list, left out above :data:`MAX_ELEMENTS`)."""
    import jax
    from jax._src.export import _export
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import func

    with jmlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(exported.mlir_module())
        main = funcs_of(module)["main"]
        values = []
        for value in _crossing(main, source, target):
            type_ = value.type
            if (isinstance(type_, ir.RankedTensorType)
                    and str(type_.element_type) in _FLOATS):
                values.append((value, tuple(type_.shape), _FLOATS[str(type_.element_type)]))
        if not values:
            return []
        block = main.regions[0].blocks[0]
        ret = operations(block)[-1]
        results = list(ret.operands) + [v for v, _, _ in values]
        with ir.InsertionPoint(ret), ret.location:
            func.ReturnOp(results)
        ret.erase()
        signature = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            list(signature.inputs), list(signature.results) + [v.type for v, _, _ in values]))
        if "res_attrs" in main.attributes:
            attrs = list(ir.ArrayAttr(main.attributes["res_attrs"]))
            main.attributes["res_attrs"] = ir.ArrayAttr.get(
                attrs + [ir.DictAttr.get({})] * len(values))
        if not module.operation.verify():
            raise ValueError("the rewritten program does not verify")
        blob = _export._module_to_bytecode(module)
    import jax.numpy as jnp

    n_out, extra = len(exported.out_avals), len(values)
    avals = tuple(jax.core.ShapedArray(shape, jnp.dtype(dtype)) for _, shape, dtype in values)
    rewritten = dataclasses.replace(
        exported, mlir_module_serialized=blob,
        out_tree=jax.tree.structure([0] * (n_out + extra)),
        out_avals=tuple(exported.out_avals) + avals,
        out_shardings_hlo=tuple(exported.out_shardings_hlo) + (None,) * extra,
        _out_named_shardings=tuple(exported._out_named_shardings) + (None,) * extra)
    outputs = jax.jit(rewritten.call)(*call_args, **call_kwargs)
    handed = []
    for array, (_, shape, dtype) in zip(outputs[n_out:], values):
        array = np.asarray(array, dtype=np.float64)
        handed.append({"shape": list(shape), "dtype": dtype,
                       "values": array.ravel().tolist() if array.size <= MAX_ELEMENTS
                       else None})
    return handed


def handover_facts(exported, call_args, call_kwargs, source: str, target: str):
    """:func:`handover_values` for :func:`autograder.programs.artifacts.derive_one`, or
    ``{"error": ...}`` when the program cannot be rewritten (a failed check)."""
    try:
        return handover_values(exported, call_args, call_kwargs, source, target)
    except Exception as err:  # noqa: BLE001 - judged as a failed check
        return {"error": f"{type(err).__name__}: {str(err)[:200]}"}
