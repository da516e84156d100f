"""Facts read from a program's StableHLO (or optimized HLO) text alone: pure functions
of the text, no JAX needed.

The program judge (:func:`autograder.programs.artifacts.derive_one`) calls :func:`static_facts`
on an exported program's text, outside the student's process; the checks read what it
derived (:mod:`autograder.programs.exported` reads ``locations`` with :func:`scope_facts` and
``dots``, from :func:`dot_facts`). The allowlist of what a judged program may contain
is here too. :mod:`autograder.programs.artifacts` re-exports these names.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter

from autograder.programs.array_sizes import largest_array
from autograder.programs.mlir import dims, parse_module, signature_types
from autograder.programs.region_work import LAYOUT, program_work, region_work
from autograder.programs.while_trips import (trip_counts_by_function, while_stops_on_values,
                                             while_trip_counts)

# Custom calls a plain JAX program on CPU may contain (shardings, LAPACK); anything
# else, host callbacks included, is refused.
ALLOWED_CUSTOM_CALLS = re.compile(
    r"^(Sharding|SPMDFullToShardShape|SPMDShardToFullShape|annotate_device_placement|"
    r"lapack_\w+|X64Combine|X64SplitLow|X64SplitHigh|mhlo\.\w+)$")
ALLOWED_DIALECTS = ("stablehlo", "func", "sdy", "chlo", "mhlo")
REFUSED_OPS = {"stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv"}
# Collective classes in optimized HLO. Async forms (``all-reduce-start`` / ``-done``,
# common on GPU) count as their class; instruction names (``%all-reduce.3 = ...``) and
# metadata are not ops.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all", "collective-broadcast", "ragged-all-to-all")
_COLLECTIVE_OP = re.compile(
    r"(?<![\w.%-])(ragged-all-to-all|all-reduce|all-gather|reduce-scatter|"
    r"collective-permute|all-to-all|collective-broadcast)(?:-start|-done)?\(")
_COLLECTIVE_COUNT = re.compile(
    r"(?<![\w.%-])(ragged-all-to-all|all-reduce|all-gather|reduce-scatter|"
    r"collective-permute|all-to-all|collective-broadcast)(?:-start)?\(")


_LOCATION = re.compile(r"\s*loc\((?:[^()\"]|\"[^\"]*\"|\((?:[^()\"]|\"[^\"]*\"|\([^()]*\))*\))*\)")


def program_digest(text: str) -> str:
    """A hash of the program itself: its StableHLO without source locations (which name
    the call stack that traced it), so that two calls that compile the same program,
    from anywhere, give the same digest.

    >>> a = 'func.func @main(%arg0: tensor<f32> loc("x")) {\\n} loc(#loc3)'
    >>> b = 'func.func @main(%arg0: tensor<f32>) {\\n}'
    >>> program_digest(a + '\\n#loc3 = loc("f"(#loc1))') == program_digest(b)
    True
    """
    lines = [line for line in text.splitlines() if not line.startswith("#loc")]
    return hashlib.sha256(_LOCATION.sub("", "\n".join(lines)).encode()).hexdigest()[:16]


# An operation's name at the start of its line (``%0 = stablehlo.add ...``).
_OP = re.compile(r"^\s*(?:%[\w#:, %]+ = )?\"?([a-z_]+\.[a-z_0-9]+)")


def static_facts(text: str) -> dict:
    """Facts read from a program's StableHLO text alone (no JAX needed)."""
    ops = Counter(m.group(1) for line in text.splitlines() if (m := _OP.match(line)))
    funcs, trips = parse_module(text), trip_counts_by_function(text)  # read once, used twice
    targets = re.findall(r"custom_call\s*@([\w.$]+)", text)
    targets += re.findall(r'call_target_name\s*=\s*"([^"]+)"', text)
    refused = sorted({op for op in ops if op.split(".")[0] not in ALLOWED_DIALECTS}
                     | (set(ops) & REFUSED_OPS)
                     | {f"custom_call @{t}" for t in targets
                        if not ALLOWED_CUSTOM_CALLS.match(t)})
    arg_attrs = re.findall(r"%arg(\d+): [^{)]*\{([^}]*)\}", _main_signature(text))
    donated = [int(i) for i, attrs in arg_attrs
               if "tf.aliasing_output" in attrs or "jax.buffer_donor" in attrs]
    aliased = [int(i) for i, attrs in arg_attrs if "tf.aliasing_output" in attrs]
    # Every location name, and each op's full name (a nested jit's ops under their call).
    locations = sorted(set(re.findall(r'loc\("([^"]{1,200})"', text))
                       | {name for _, _, name in op_locations(text) if len(name) <= 200})[:500]
    return {"ops": dict(sorted(ops.items())), "ops_expanded": expanded_ops(text),
            "custom_calls": sorted(set(targets)),
            "refused": refused, "donated": donated, "aliased": aliased, "locations": locations,
            "manual_ops": _manual_ops(text), "size": len(text),
            "while_trips": while_trip_counts(text, trips),
            "while_stops": while_stops_on_values(text),
            "dots": dot_facts(text)[:200], "largest_array": largest_array(text),
            "region_work": region_work(text, funcs),
            "work": program_work(text, funcs, trips),
            "scope_ops": scope_op_counts(text),
            "digest": program_digest(text)}


_FUNC = re.compile(r'^\s*func\.func\b[^@]*@("[^"]+"|[\w.$-]+)\(')
_CALL = re.compile(r'\bcall @("[^"]+"|[\w.$-]+)\(')


def expanded_ops(text: str) -> dict:
    r"""Op counts of ``main`` with every call counted at each call site: a function that
    ``jax.jit`` wrote out once and ``main`` calls six times holds six copies of its work
    (:func:`static_facts`'s ``ops`` count each op of the text once).

    >>> text = (
    ...     'func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {\n'
    ...     '  %0 = call @"<lambda>"(%arg0) : (tensor<f32>) -> tensor<f32>\n'
    ...     '  %1 = call @"<lambda>"(%0) : (tensor<f32>) -> tensor<f32>\n'
    ...     '  return %1 : tensor<f32>\n}\n'
    ...     'func.func private @"<lambda>"(%arg0: tensor<f32>) -> tensor<f32> {\n'
    ...     '  %0 = stablehlo.tanh %arg0 : tensor<f32>\n  return %0 : tensor<f32>\n}\n')
    >>> expanded_ops(text)["stablehlo.tanh"]
    2
    """
    own: dict[str, Counter] = {}
    calls: dict[str, Counter] = {}
    current = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group(1).strip('"')
            own[current], calls[current] = Counter(), Counter()
            continue
        if current is None:
            continue
        m = _OP.match(line)
        if m:
            own[current][m.group(1)] += 1
        for callee in _CALL.findall(line):
            calls[current][callee.strip('"')] += 1
    done: dict[str, Counter] = {}

    def total(name: str, depth: int = 0) -> Counter:
        if name not in done:
            out = Counter(own.get(name, {}))
            if depth < 50:
                for callee, times in calls.get(name, {}).items():
                    for op, n in total(callee, depth + 1).items():
                        out[op] += n * times
            done[name] = out
        return done[name]

    return dict(sorted(total("main").items())) if "main" in own else {}


def _manual_ops(text: str) -> dict:
    """Op counts inside the bodies of ``sdy.manual_computation`` (``jax.shard_map``).

    MLIR prints a region's ops indented under the op that holds it, up to a line at the
    op's own indentation that closes it.
    """
    ops: Counter = Counter()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "sdy.manual_computation" not in line:
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        i += 1
        while i < len(lines):
            inner = lines[i]
            if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                break
            m = _OP.match(inner)
            if m:
                ops[m.group(1)] += 1
            i += 1
    return dict(sorted(ops.items()))


def collective_counts(hlo_text: str) -> dict[str, int]:
    r"""How many collective ops of each class the (optimized) HLO holds; ``-start`` forms
    count as their class, ``-done`` forms not at all (they close the same op).

    >>> collective_counts("%a = f32[8]{0} all-reduce-start(f32[8]{0} %p)\n"
    ...                   "%b = f32[8]{0} all-reduce-done(f32[8]{0} %a)")
    {'all-reduce': 1}
    """
    return dict(sorted(Counter(m.group(1) for m in _COLLECTIVE_COUNT.finditer(hlo_text)).items()))


_HLO_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8\w*?)\[([\d,]*)\]")
_HLO_BITS = {"pred": 8, "bf16": 16, "c64": 64, "c128": 128}


def _hlo_bytes(text: str) -> int:
    """Bytes of every array type written in a piece of HLO text (``f32[8,16]{1,0}``)."""
    total = 0
    for dtype, dims in _HLO_ARRAY.findall(text):
        bits = _HLO_BITS.get(dtype) or int(re.sub(r"\D.*", "", dtype[1:]) or 8)
        if dtype.startswith("f8"):
            bits = 8
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * bits // 8
    return total


def collective_bytes(hlo_text: str) -> dict[str, int]:
    r"""Bytes each class of collective moves in (optimized) HLO, summed over its ops: for
    each op, the larger of what it reads and what it returns (an all-reduce's buffer,
    an all-gather's gathered array). Any element type; ``-done`` forms not counted.

    >>> collective_bytes("%a = f32[8,16]{1,0} all-reduce(f32[8,16]{1,0} %p), to_apply=%add\n"
    ...                  "%g = bf16[64]{0} all-gather(bf16[8]{0} %q), dimensions={0}")
    {'all-gather': 128, 'all-reduce': 512}
    """
    out: Counter = Counter()
    for line in hlo_text.splitlines():
        match = _COLLECTIVE_COUNT.search(line)
        if match is None or "=" not in line[:match.start()]:
            continue
        result = line[line.index("=", 0, match.start()) + 1:match.start()]
        operands = line[match.end():].split("),", 1)[0]
        out[match.group(1)] += max(_hlo_bytes(result), _hlo_bytes(operands))
    return dict(sorted(out.items()))


def collective_classes(hlo_text: str) -> list[str]:
    """The classes of collective ops in (optimized) HLO text, sorted.

    >>> collective_classes("%ars = f32[8]{0} all-reduce-start(f32[8]{0} %p)\\n"
    ...                    "%all-gather.2 = f32[] add(f32[] %a, f32[] %b)")
    ['all-reduce']
    """
    return sorted({m.group(1) for m in _COLLECTIVE_OP.finditer(hlo_text)})


def _main_signature(text: str) -> str:
    m = re.search(r"func\.func public @main\((.*?)\)\s*->", text, re.S)
    return m.group(1) if m else ""


_LOC = re.compile(r'loc\("((?:jit|pjit)\([^"]*)"')
_ANY_ALIAS = re.compile(r'^#(loc\d+) = loc\("([^"]*)"', re.M)
_OP_LOC_ANY = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_]+\.[\w.]+|call)\b"?.*\bloc\((?:#(loc\d+)|"([^"]*)")')
_TRANSFORM = re.compile(r"^[\w.]+\(.*\)$")  # jit(f), jvp(), transpose(jvp()), vmap(...)
_DOT = re.compile(r"stablehlo\.dot_general\b.*:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)"
                  r"\s*->\s*(tensor<[^>]*>)")


def named_scopes(name: str) -> tuple[tuple[str, ...], str] | None:
    """``(the jax.named_scope labels, the primitive)`` of an op's full location name
    (``jit(step)/grad/transpose(jvp())/dot_general`` -> ``(("grad",), "dot_general")``:
    the jit and the transformations are not scopes); None for a name without a path.

    >>> named_scopes("jit(step)/grad/transpose(jvp())/dot_general")
    (('grad',), 'dot_general')
    """
    parts = name.split("/")
    if len(parts) < 2:
        return None
    return tuple(p for p in parts[1:-1] if not _TRANSFORM.match(p)), parts[-1]


def scope_facts(text: str) -> dict[str, list[str]]:
    """``{primitive: sorted scope paths}`` from the op locations of an exported program
    (its text, or its ``locations`` fact joined as ``loc("...")`` entries).

    A scope path joins the ``jax.named_scope`` labels around the op (``""`` when none).
    In a program's text, an op of a function that ``main`` calls (a nested ``jax.jit``)
    has the scopes of its call sites (:func:`op_locations`).

    >>> scope_facts('loc("jit(step)/grad/transpose(jvp())/dot_general") '
    ...             'loc("jit(step)/update/sub") loc("jit(step)/sub") loc("w")')
    {'dot_general': ['grad'], 'sub': ['', 'update']}
    """
    facts: dict[str, set] = {}
    names = ([name for _, _, name in op_locations(text)] if "func.func" in text
             else _LOC.findall(text))
    for scoped in filter(None, map(named_scopes, names)):
        facts.setdefault(scoped[1], set()).add("/".join(scoped[0]))
    return {prim: sorted(paths) for prim, paths in sorted(facts.items())}


def op_locations(text: str) -> list[tuple[str, str, str]]:
    r"""``[(line, op, full name), ...]`` for each operation written on one line with its
    location (``op`` the StableHLO name, or ``call``). ``main``'s ops carry their whole
    name (``jit(step)/grad/jvp()/mul``); an op of a function that a nested ``jax.jit``
    wrote out carries a name relative to its call (``jvp()/mul``), so it gets the full
    name of each call site as a prefix (a function called from two scopes is in both).

    >>> text = (
    ...     'func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n'
    ...     '  %0 = call @inner(%arg0) : (tensor<3xf32>) -> tensor<3xf32> loc(#loc2)\n'
    ...     '  %1 = stablehlo.subtract %arg0, %0 : tensor<3xf32> loc(#loc3)\n'
    ...     '  return %1 : tensor<3xf32>\n}\n'
    ...     'func.func private @inner(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n'
    ...     '  %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32> loc(#loc4)\n'
    ...     '  return %0 : tensor<3xf32>\n}\n'
    ...     '#loc2 = loc("jit(step)/grad/jit(inner)"(#loc1))\n'
    ...     '#loc3 = loc("jit(step)/update/sub"(#loc1))\n'
    ...     '#loc4 = loc("jvp()/mul"(#loc1))\n')
    >>> [(op, name) for _, op, name in op_locations(text)]
    [('call', 'jit(step)/grad/jit(inner)'), ('stablehlo.subtract', 'jit(step)/update/sub'), ('stablehlo.multiply', 'jit(step)/grad/jit(inner)/jvp()/mul')]
    """
    aliases = dict(_ANY_ALIAS.findall(text))
    bodies: dict[str, list[tuple[str, str, str]]] = {"main": []}
    current = "main"  # a fragment without functions: main's ops
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group(1).strip('"')
            bodies[current] = []
            continue
        if line.startswith("#"):
            continue
        m = _OP_LOC_ANY.match(line)
        if m:
            bodies[current].append((line, m.group(1), aliases.get(m.group(2), "")
                                    if m.group(2) else m.group(3)))
    prefixes: dict[str, set] = {"main": {""}}
    for _ in range(50):  # call depth
        grew = False
        for caller, ops in bodies.items():
            for line, op, name in ops:
                callee = _CALL.search(line) if op == "call" else None
                if callee is None:
                    continue
                callee = callee.group(1).strip('"')
                full = {_joined(p, name) for p in prefixes.get(caller, ())}
                if not full <= prefixes.setdefault(callee, set()):
                    prefixes[callee] |= full
                    grew = True
        if not grew:
            break
    return [(line, op, _joined(prefix, name))
            for function, ops in bodies.items() for prefix in sorted(prefixes.get(function, ()))
            for line, op, name in ops]


def _joined(prefix: str, name: str) -> str:
    if not prefix or name.startswith(("jit(", "pjit(")):
        return name  # main's ops, and names JAX wrote whole
    return f"{prefix}/{name}" if name else prefix


def scope_op_counts(text: str) -> list[list]:
    r"""``[[scope path, op, count], ...]``: how many computing operations on arrays
    (StableHLO op names; layout left out, :data:`autograder.programs.region_work.LAYOUT`,
    and scalar arithmetic too) each named scope holds. :func:`scope_facts` says where a
    primitive appears; this says how much arithmetic on arrays a scope does, so that
    "the update is ``w - lr * g``" can be judged: one multiply, one subtract.

    >>> text = ('%0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<3xf32> loc(#loc5)\n'
    ...         '%1 = stablehlo.multiply %0, %b : tensor<3xf32> loc(#loc5)\n'
    ...         '%2 = stablehlo.multiply %1, %b : tensor<3xf32> loc(#loc6)\n'
    ...         '%3 = stablehlo.subtract %c, %2 : tensor<3xf32> loc(#loc7)\n'
    ...         '%4 = stablehlo.multiply %s, %s : tensor<f32> loc(#loc6)\n'
    ...         '#loc5 = loc("jit(step)/update/mul"(#loc1))\n'
    ...         '#loc6 = loc("jit(step)/update/mul"(#loc2))\n'
    ...         '#loc7 = loc("jit(step)/update/sub"(#loc2))\n')
    >>> scope_op_counts(text)
    [['update', 'multiply', 2], ['update', 'subtract', 1]]
    """
    counts: Counter = Counter()
    for line, op, name in op_locations(text):
        if op in LAYOUT or op == "call":
            continue
        results = signature_types(line.split(" loc(")[0].rsplit(" : ", 1)[-1])[1]
        if not results or not dims(results[-1]):
            continue  # a scalar (the learning rate's own arithmetic): not the update's
        scoped = named_scopes(name)
        if scoped is not None:
            counts[("/".join(scoped[0]), op.split(".", 1)[-1])] += 1
    return [[scope, op, n] for (scope, op), n in sorted(counts.items())][:500]


def _element_type(tensor: str) -> str:
    # tensor<256x64xbf16> -> bf16; tensor<f32> -> f32
    return tensor[len("tensor<"):-1].split("x")[-1]


def dot_facts(text: str) -> list[tuple[str, str, str]]:
    """``[(lhs dtype, rhs dtype, result dtype), ...]`` for each ``dot_general``.

    >>> dot_facts("%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
    ...           "(tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xf32> loc(#loc9)")
    [('bf16', 'bf16', 'f32')]
    """
    return [tuple(_element_type(t) for t in m.groups()) for m in _DOT.finditer(text)]
