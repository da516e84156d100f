"""Rewriting an exported StableHLO program with JAX's MLIR bindings, for the judge.

What :mod:`autograder.programs.region_liveness` needs to ask a program which of its
operations matter: :func:`prepare` parses it, inlines its calls to private functions
(MLIR's own inliner does not inline into StableHLO's regions) and merges common
subexpressions; :func:`force_cases` lets the caller pick the branch of every switch;
:func:`thread_fuel` bounds every loop by one budget of iterations, a
new argument of ``main``; :func:`instrument` puts a switchable perturbation after each
operation tagged for it, switched by another new argument. The rewritten program is
serialized and compiled like any exported one. Only the judge and the tests call these:
the bindings are JAX's own (``jax._src.lib.mlir``), checked on JAX 0.12.0.1.
"""
from __future__ import annotations

# (scale, shift) of each operation's perturbation, in turn: distinct, so that two
# operations perturbed together (a group found dead at once) do not cancel.
_STRENGTH = tuple((1.25 + 0.0625 * i, 0.6 - 0.05 * i) for i in range(7))


def operations(block):
    return [op.operation for op in block.operations]


def walk_ops(op, out: list) -> list:
    for region in op.regions:
        for block in region.blocks:
            for inner in operations(block):
                out.append(inner)
                walk_ops(inner, out)
    return out


def funcs_of(module) -> dict:
    from jax._src.lib.mlir import ir

    return {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
            for op in module.body.operations if op.operation.name == "func.func"}


def prepare(text: str):
    """The program parsed, its calls inlined and common subexpressions merged (MLIR's
    ``cse``: the same computation written twice is one computation, so that
    ``(c + junk) - junk`` perturbs both copies of ``junk`` at once)."""
    from jax._src.lib.mlir import ir, passmanager

    module = ir.Module.parse(text)
    inline_calls(module)
    passmanager.PassManager.parse("builtin.module(cse)").run(module.operation)
    return module, funcs_of(module)["main"]


def inline_calls(module, *, limit: int = 10_000) -> None:
    """Inlines every ``func.call`` reachable from ``main`` (JAX emits one for each
    nested ``jax.jit`` and for some ``jnp`` functions), so that each operation of the
    program stands at one place. MLIR's own inliner does not inline into StableHLO's
    regions, hence this: clone the callee's body before the call, remap its arguments
    (in nested regions too), replace the call's results."""
    from jax._src.lib.mlir import ir

    funcs = funcs_of(module)
    main = funcs["main"]
    for _ in range(limit):
        call = next((op for op in walk_ops(main, []) if op.name == "func.call"), None)
        if call is None:
            return
        callee = funcs[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
        entry = callee.regions[0].blocks[0]
        mapping = list(zip(list(entry.arguments), list(call.operands)))
        results = []
        for op in operations(entry):
            if op.name == "func.return":
                results = [_mapped(mapping, v) for v in op.operands]
                break
            new = op.clone(ip=ir.InsertionPoint(call)).operation
            for nested in [new] + walk_ops(new, []):
                for old, value in mapping:
                    nested.replace_uses_of_with(old, value)
            mapping += list(zip(list(op.results), list(new.results)))
        for result, value in zip(call.results, results):
            result.replace_all_uses_with(value)
        call.erase()
    raise RecursionError("too many calls to inline")


def _mapped(mapping: list, value):
    for old, new in mapping:
        if old == value:
            return new
    return value


def _known(type_) -> bool:
    """Whether :func:`perturb` knows how to change a value of this type."""
    from jax._src.lib.mlir import ir

    return isinstance(type_, ir.RankedTensorType) and isinstance(
        type_.element_type, (ir.FloatType, ir.ComplexType, ir.IntegerType))


def perturbable(op) -> bool:
    """Whether any of the operation's results has a type :func:`perturb` knows."""
    return any(_known(result.type) for result in op.results)


def perturb(value, on, scale: float, shift: float, created: list):
    """``select(on, value * scale + shift, value)`` for a float tensor (its real part for
    a complex one), ``value + 1`` for integers, ``not value`` for booleans; None for a
    type the perturbation does not know. Every operation made is appended to
    ``created`` (their uses of ``value`` are not to be replaced)."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    def keep(v):
        created.append(v.owner.operation if hasattr(v.owner, "operation") else v.owner)
        return v

    if not _known(value.type):
        return None
    t = value.type
    et = t.element_type

    def splat(elem_type, number):
        shaped = ir.RankedTensorType.get(t.shape, elem_type)
        attr = (ir.FloatAttr.get(elem_type, number) if isinstance(elem_type, ir.FloatType)
                else ir.IntegerAttr.get(elem_type, int(number)))
        return keep(hlo.constant(ir.DenseElementsAttr.get_splat(shaped, attr)))

    def floats(v, elem_type):
        # Scale and shift: a consumer invariant to one (a softmax, a normalisation)
        # still sees the other. Two operations: hundreds of them are compiled at once.
        return keep(hlo.add(keep(hlo.multiply(v, splat(elem_type, scale))),
                            splat(elem_type, shift)))

    if isinstance(et, ir.FloatType):
        changed = floats(value, et)
    elif isinstance(et, ir.ComplexType):
        part = et.element_type
        re = keep(hlo.real(value))
        im = keep(hlo.imag(value))
        changed = keep(hlo.complex(floats(re, part), im))
    elif isinstance(et, ir.IntegerType) and et.width == 1:
        changed = keep(hlo.not_(value))
    else:
        changed = keep(hlo.add(value, splat(et, 1)))
    return keep(hlo.select(on, changed, value))


def _add_argument(main, type_):
    """A new last argument of ``main`` (its block argument, signature and attributes)."""
    from jax._src.lib.mlir import ir

    value = main.regions[0].blocks[0].add_argument(type_, ir.Location.unknown())
    signature = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        list(signature.inputs) + [type_], list(signature.results)))
    if "arg_attrs" in main.attributes:
        attrs = list(ir.ArrayAttr(main.attributes["arg_attrs"]))
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})])
    return value


def thread_fuel(main) -> None:
    """Bounds every loop of the program by one budget of iterations ("fuel"): a new
    ``tensor<i32>`` argument of ``main``, carried through every ``stablehlo.while``
    (one less each iteration; the loop stops when it is spent) and every
    ``stablehlo.case``, and returned as a new last result. A perturbation that stops a
    loop from ending (a negated condition, a counter that no longer moves) then ends
    once the budget is spent, which the baseline run sets from what the unperturbed
    program used. A rebuilt loop or switch keeps its ``liveness.unit`` tag and gets a
    ``liveness.fuel`` one (its last result is the fuel)."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    i32 = ir.IntegerType.get_signless(32)
    fuel_type = ir.RankedTensorType.get([], i32)

    def const(value: int):
        return hlo.constant(ir.DenseElementsAttr.get_splat(fuel_type,
                                                           ir.IntegerAttr.get(i32, value)))

    def move_block(old_block, new_block):
        for arg, new_arg in zip(old_block.arguments, new_block.arguments):
            arg.replace_all_uses_with(new_arg)
        for op in operations(old_block):
            ir.InsertionPoint(new_block).insert(op.detach_from_parent())

    def retire(old, new, n: int):
        for r, nr in zip(list(old.results)[:n], list(new.results)[:n]):
            r.replace_all_uses_with(nr)
        for tag in (UNIT, PAIR):  # the tags of an operation to perturb move with it
            if tag in old.attributes:
                new.attributes[tag] = old.attributes[tag]
        new.attributes[FUELLED] = ir.UnitAttr.get()
        old.erase()

    def thread(block, fuel):
        for op in operations(block):
            if op.name == "stablehlo.while":
                n = len(op.results)
                types = [r.type for r in op.results] + [fuel_type]
                new = hlo.WhileOp(types, list(op.operands) + [fuel],
                                  ip=ir.InsertionPoint(op)).operation
                for which, (old_region, region) in enumerate(zip(op.regions, new.regions)):
                    old_block = old_region.blocks[0]
                    new_block = region.blocks.append(*types)
                    move_block(old_block, new_block)
                    arg = new_block.arguments[n]
                    after = thread(new_block, arg)
                    terminator = operations(new_block)[-1]
                    with ir.InsertionPoint(terminator):
                        if which == 0:  # the condition: and the budget is not spent
                            left = hlo.compare(arg, const(0), hlo.ComparisonDirectionAttr.get("GT"))
                            outs = [hlo.and_(terminator.operands[0], left)]
                        else:
                            outs = list(terminator.operands) + [hlo.subtract(after, const(1))]
                        hlo.ReturnOp(outs)
                    terminator.erase()
                retire(op, new, n)
                fuel = new.results[n]
            elif op.name == "stablehlo.case":
                n = len(op.results)
                types = [r.type for r in op.results] + [fuel_type]
                new = hlo.CaseOp(types, op.operands[0], len(op.regions),
                                 ip=ir.InsertionPoint(op)).operation
                for old_region, region in zip(op.regions, new.regions):
                    new_block = region.blocks.append()
                    move_block(old_region.blocks[0], new_block)
                    after = thread(new_block, fuel)
                    terminator = operations(new_block)[-1]
                    with ir.InsertionPoint(terminator):
                        hlo.ReturnOp(list(terminator.operands) + [after])
                    terminator.erase()
                retire(op, new, n)
                fuel = new.results[n]
        return fuel

    entry = main.regions[0].blocks[0]
    fuel = thread(entry, _add_argument(main, fuel_type))
    terminator = operations(entry)[-1]
    with ir.InsertionPoint(terminator):
        make = hlo.ReturnOp if terminator.name == "stablehlo.return" else _func_return
        make(list(terminator.operands) + [fuel])
    terminator.erase()
    signature = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        list(signature.inputs), list(signature.results) + [fuel_type]))
    if "res_attrs" in main.attributes:
        attrs = list(ir.ArrayAttr(main.attributes["res_attrs"]))
        main.attributes["res_attrs"] = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})])


def _func_return(values):
    from jax._src.lib.mlir.dialects import func

    return func.ReturnOp(values)


UNIT, FUELLED, CASE = "liveness.unit", "liveness.fuel", "liveness.case"
PAIR = "liveness.pair"


def force_cases(main) -> int:
    """Lets the caller choose the branch of each ``stablehlo.case`` tagged
    ``liveness.case = j``: a new last argument of ``main``, ``tensor<N x i32>``, whose
    entry ``j``, where it is 0 or more, replaces that case's index (-1 keeps the
    program's own). On one input a switch takes one branch; forced, each branch's
    operations can be asked whether they change the result when that branch runs.
    Returns ``N``, the number of cases tagged (the tags are dropped)."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    tagged = [op for op in walk_ops(main, []) if CASE in op.attributes]
    i32 = ir.IntegerType.get_signless(32)
    scalar = ir.RankedTensorType.get([], i32)
    forced = _add_argument(main, ir.RankedTensorType.get([max(len(tagged), 1)], i32))
    for op in tagged:
        j = ir.IntegerAttr(op.attributes[CASE]).value
        del op.attributes[CASE]
        with ir.InsertionPoint(op):
            want = hlo.reshape(scalar, hlo.slice(forced, [j], [j + 1], [1]))
            zero = hlo.constant(ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(i32, 0)))
            on = hlo.compare(want, zero, hlo.ComparisonDirectionAttr.get("GE"))
            op.operands[0] = hlo.select(on, want, op.operands[0])
    return len(tagged)


def instrument(module, n: int) -> None:
    """Adds the switches argument (``n`` entries) to ``main`` and a perturbation after
    each operation tagged ``liveness.unit = k`` (switch ``k``, of strength
    ``_STRENGTH[k % 7]``: distinct between neighbours, which are perturbed together)
    and a second one after each tagged ``liveness.pair = m`` (switch ``m``, always of
    strength ``_STRENGTH[0]``: two runs, each perturbing one operation, perturb them
    alike and can be compared), then drops the tags.

    Operations are found by their tags, in one walk: an ``ir.Operation``'s hash changes
    when its operands do, so no dictionary of operations survives the rewriting."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    main = funcs_of(module)["main"]
    f32 = ir.F32Type.get()
    switches = _add_argument(main, ir.RankedTensorType.get([max(n, 1)], f32))
    scalar = ir.RankedTensorType.get([], f32)
    tagged = []

    def collect(op):
        for region in op.regions:
            for block in region.blocks:
                ops = operations(block)  # a block ends with its terminator: there is a next
                for here, nxt in zip(ops, ops[1:]):
                    if UNIT in here.attributes or PAIR in here.attributes:
                        tagged.append((here, nxt))
                    collect(here)

    collect(main)
    for op, nxt in tagged:
        slots = [(ir.IntegerAttr(op.attributes[tag]).value, alike)
                 for tag, alike in ((UNIT, False), (PAIR, True)) if tag in op.attributes]
        own = list(op.results)[:-1] if FUELLED in op.attributes else list(op.results)
        for name in (UNIT, FUELLED, PAIR):
            if name in op.attributes:
                del op.attributes[name]
        # The switch is read next to the operation: the regions capture one value (the
        # switches), not one per operation (XLA turns each capture into a loop carry,
        # and hundreds of them made the compilation 20 times slower).
        for k, alike in slots:
            with ir.InsertionPoint(nxt):
                on = hlo.compare(hlo.reshape(scalar, hlo.slice(switches, [k], [k + 1], [1])),
                                 hlo.constant(ir.DenseElementsAttr.get_splat(
                                     scalar, ir.FloatAttr.get(f32, 0.0))),
                                 hlo.ComparisonDirectionAttr.get("NE"))
                for j, result in enumerate(own):
                    created: list = []
                    new = perturb(result, on, *_STRENGTH[0 if alike else k % len(_STRENGTH)],
                                  created)
                    if new is not None:
                        result.replace_all_uses_except(new, created)
                        own[j] = new  # a second perturbation wraps the first
