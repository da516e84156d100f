"""The rules a Pallas kernel is judged by: kernel facts in, a teaching message out.

:func:`explain_kernel_structure` is pure: it reads the plain facts that
:func:`autograder.programs.pallas_kernels.collect_kernel_facts` derived from an exported
program (after a JSON round trip, when grading) and the exercise's rules, and returns
the message of the first rule broken, or None. The check that records and judges
these facts is in ``pallas/checks.py``.
"""
from __future__ import annotations

from autograder.core.feedback import format_failure
from autograder.programs.region_work import LAYOUT

# --- judging ------------------------------------------------------------------------

_KERNEL_WORDS = ("a pallas_call: in interpret mode, a `stablehlo.while` over the grid "
                 "whose body cuts each operand into blocks")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _squeeze(dims) -> list[int]:
    return [int(d) for d in dims if d != 1]


def _shape(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def explain_kernel_structure(observed: dict, expected: dict, *, name: str = "the program",
                             section: str | None = None, hint: str | None = None,
                             fix: str | None = None) -> str | None:
    """Judges kernel facts against rules; returns the teaching message, or None.

    Pure: ``observed`` is what :func:`collect_kernel_facts` returned (after a JSON
    round trip, if you like) and ``expected`` holds the rules, each optional:

    - ``kernels``: how many kernels the program must hold;
    - ``steps``: the grid steps of every kernel (the product of its grid);
    - ``grid``: the grid of every kernel, axis by axis;
    - ``blocks``: the block shape of every operand, inputs then outputs;
    - ``inside``: ops that must run inside a kernel;
    - ``not_outside``: ops that must not run outside the kernels; when given, no other
      computing op may either (only the layout ops of :data:`LAYOUT_OUTSIDE`);
    - ``not_inside``: ops that no kernel may compute (a backward kernel that must read a
      residual rather than compute it again);
    - ``max_reduce_depth``: the longest chain of reductions feeding one another;
    - ``aliases``: ``[[argument, output], ...]``: the kernel's output ``output`` must be
      written into the buffer of the program's argument ``argument`` (aliased, with
      ``input_output_aliases``, to the kernel input that receives it); other aliases
      are not judged. ``argument_names`` names the arguments in the messages;
    - ``arguments``: the program's argument each input of the kernel must receive, in
      order (a kernel called with its inputs in another order fails).

    Facts a compiled (GPU/TPU) kernel does not show are ``None`` and are not judged.

    >>> facts = {"kernels": [{"lowering": "interpret", "steps": 4, "blocks": [[8], [8]],
    ...                       "inside": {"exponential": 1}, "reduce_depth": 0}],
    ...          "outside": {"multiply": 1}}
    >>> explain_kernel_structure(facts, {"kernels": 1, "steps": 4}) is None
    True
    >>> print(explain_kernel_structure(facts, {"not_outside": ["multiply"]}, name="silu(x)"))
    silu(x) computes `multiply` outside the kernel
      expected: no `multiply` outside the pallas_call
      got:      1 `multiply` op(s) outside it
      likely cause: part of the computation runs in jnp before or after pl.pallas_call, as separate XLA ops that read and write the whole array again
      fix: move that computation into the kernel body, on the blocks the Refs hold
    """
    def msg(what, exp, got, cause, default_fix):
        return format_failure(what, expected=exp, got=got, cause=hint or cause,
                              fix=fix or default_fix, section=section)

    kernels = observed.get("kernels", [])
    outside = observed.get("outside", {})
    for rule in (_rule_kernels, _rule_outside, _rule_steps, _rule_grid, _rule_blocks,
                 _rule_inside, _rule_depth, _rule_not_inside, _rule_arguments,
                 _rule_aliases):
        found = rule(kernels, outside, expected, name)
        if found:
            return msg(*found)
    return None


def _rule_kernels(kernels, outside, expected, name):
    want = expected.get("kernels")
    if want is None or len(kernels) == want:
        return None
    if not kernels:
        loop = bool(outside.get("while"))
        return (f"{name} runs no Pallas kernel",
                f"{_plural(want, 'kernel')} ({_KERNEL_WORDS})",
                "no grid loop and no kernel call in the exported program"
                + ("; a `while` loop that advances no grid indices" if loop else "")
                + "; ops outside: " + (", ".join(sorted(outside)) or "none"),
                "the blocks are walked by a loop written by hand (lax.fori_loop with "
                "dynamic slices), not by a pallas_call's grid" if loop else
                "the result is computed with jnp, not by a kernel (or pl.pallas_call is "
                "never called on this path)",
                "write the computation in a kernel body and call it with pl.pallas_call")
    return (f"{name} runs {_plural(len(kernels), 'Pallas kernel')}, expected {want}",
            _plural(want, "kernel"), _plural(len(kernels), "kernel"),
            "the work is split over several pallas_calls (each one reads and writes its "
            "operands in memory again), or a kernel is missing",
            "do the whole computation in the kernels the exercise asks for")


# What may run outside the kernels when a check says what must not: data movement and
# the program's structure (an allow-list: the same maths under another op name, a
# `power` for an `exponential`, a `dot_general` with ones for a `reduce`, is still
# computation).
LAYOUT_OUTSIDE = frozenset(op.split(".", 1)[1] for op in LAYOUT) | {"while", "case", "if"}


def _rule_outside(kernels, outside, expected, name):
    named = list(expected.get("not_outside") or ())
    computing = sorted(op for op in outside if op not in LAYOUT_OUTSIDE and op not in named)
    for op in named + (computing if named else []):
        if outside.get(op):
            return (f"{name} computes `{op}` outside the kernel",
                    f"no `{op}` outside the pallas_call" if op in named else
                    "only data movement outside the pallas_call (reshape, slice, pad, "
                    "broadcast, convert, ...): the computation runs in the kernel",
                    f"{outside[op]} `{op}` op(s) outside it",
                    "part of the computation runs in jnp before or after pl.pallas_call, "
                    "as separate XLA ops that read and write the whole array again",
                    "move that computation into the kernel body, on the blocks the Refs "
                    "hold")
    return None


def _rule_steps(kernels, outside, expected, name):
    steps = expected.get("steps")
    for k in kernels if steps is not None else ():
        if k.get("steps") is not None and k["steps"] != steps:
            return (f"the grid of {name} has {k['steps']} steps, expected {steps}",
                    f"{steps} grid steps (the product of the grid)",
                    f"{k['steps']} grid steps",
                    "the grid does not cover the array with one step per block: a floor "
                    "division drops the last partial block, a block size is ignored, or "
                    "an axis of the grid is missing or extra",
                    "give each axis pl.cdiv(size, block) steps, with the block sizes you "
                    "were given")
    return None


def _rule_grid(kernels, outside, expected, name):
    grid = expected.get("grid")
    for k in kernels if grid is not None else ():
        if k.get("grid") is not None and list(k["grid"]) != list(grid):
            return (f"the grid of {name} is {_shape(k['grid'])}, expected {_shape(grid)}",
                    f"grid {_shape(grid)}", f"grid {_shape(k['grid'])}",
                    "the grid's axes come in another order, or an axis has another number "
                    "of steps; an axis that is reduced across steps must come last, so "
                    "that the steps adding into one output block follow each other",
                    "build the grid in the order the exercise gives")
    return None


def _rule_blocks(kernels, outside, expected, name):
    blocks = expected.get("blocks")
    for k in kernels if blocks is not None else ():
        got = k.get("blocks")
        if got is None:
            continue
        want_b, got_b = [list(b) for b in blocks], [list(b) for b in got]
        shown = (", ".join(_shape(b) for b in want_b), ", ".join(_shape(b) for b in got_b))
        if len(got_b) != len(want_b):
            return (f"the kernel of {name} has {len(got_b)} operands, expected "
                    f"{len(want_b)} (inputs, then outputs)", *shown,
                    "an input is computed outside the kernel and passed in, or an input "
                    "or output is missing",
                    "pass the kernel the function's own inputs, and let it produce every "
                    "output")
        # Size-1 dimensions do not matter: b in (bn,) blocks or reshaped to (1, n) in
        # (1, bn) blocks (or a squeezed `None` dimension) is the same block.
        for i, (w, g) in enumerate(zip(want_b, got_b)):
            if _squeeze(w) != _squeeze(g):
                return (f"{name} uses the wrong block shape for operand {i} "
                        "(inputs first, then outputs)", *shown,
                        "a BlockSpec's block_shape ignores the block size it was given, or "
                        "covers the whole array instead of one block",
                        "build each BlockSpec from the block sizes passed to your function")
    return None


# Why an op is missing from the kernel, and what to do, for the ops the exercises need.
_INSIDE = {
    "case": ("nothing in the kernel tells the first step apart from the others: pl.when "
             "(or lax.cond) is what does it",
             "initialize the output block under @pl.when(pl.program_id(axis) == 0)"),
    "reduce": ("the reductions (jnp.sum, jnp.max, jnp.mean) run outside the kernel",
               "compute them in the kernel body, on the block the Ref holds"),
    "dot_general": ("the matrix product runs outside the kernel",
                    "multiply the blocks in the kernel: jnp.dot(x_ref[...], y_ref[...])"),
}


def _rule_inside(kernels, outside, expected, name):
    known = [k["inside"] for k in kernels if k.get("inside") is not None]
    if not known:
        return None
    union: dict[str, int] = {}
    for counts in known:
        for op, n in counts.items():
            union[op] = union.get(op, 0) + n
    for op in expected.get("inside") or ():
        options = op.split("|")  # "reduce|dot_general": a sum may be a product with ones
        if not any(union.get(o) for o in options):
            cause, todo = _INSIDE.get(options[0], ("that computation is not in the kernel body",
                                                   "compute it in the kernel body from the "
                                                   "values the Refs hold"))
            op = " or ".join(f"`{o}`" for o in options)
            return (f"{name} does not compute {op} inside its kernel",
                    f"at least one {op} in the kernel body",
                    "none; the kernel computes "
                    + (", ".join(sorted(o for o in union if o not in _BOOKKEEPING))
                       or "nothing but copies"),
                    cause, todo)
    return None


def _rule_depth(kernels, outside, expected, name):
    max_depth = expected.get("max_reduce_depth")
    for k in kernels if max_depth is not None else ():
        d = k.get("reduce_depth")
        if d is not None and d > max_depth:
            return (f"{name} makes {d} passes over each block: a reduction reads the "
                    "result of another reduction",
                    f"at most {_plural(max_depth, 'pass')} (every reduction reads the "
                    "block itself)",
                    f"a chain of {d} reductions",
                    "a statistic is computed from another one, e.g. the variance as the "
                    "mean of (x - mean)**2, or with jnp.var",
                    "compute all the sums from one read of the block, then combine them")
    return None


def _rule_not_inside(kernels, outside, expected, name):
    """A kernel computes an op it must read instead (a kernel whose body cannot be read,
    compiled for a GPU or TPU, is not judged).

    >>> facts = {"kernels": [{"inside": {"logistic": 1}}, {"inside": {"multiply": 3}}]}
    >>> _rule_not_inside(facts["kernels"], {}, {"not_inside": ["logistic"]}, "f")[2]
    '`logistic`: 1 in kernel 1 of 2'
    >>> _rule_not_inside(facts["kernels"][1:], {}, {"not_inside": ["logistic"]}, "f") is None
    True
    """
    for op in expected.get("not_inside") or ():
        found = [(k, kernel["inside"][op]) for k, kernel in enumerate(kernels, 1)
                 if isinstance(kernel.get("inside"), dict) and kernel["inside"].get(op)]
        if found:
            where = "; ".join(f"{n} in kernel {k} of {len(kernels)}" for k, n in found)
            return (f"{name} computes `{op}` inside its kernel",
                    f"no `{op}` in any kernel of this program", f"`{op}`: {where}",
                    "the kernel computes a value it could read from an input (a residual "
                    "the forward pass already computed)",
                    "pass that value to the kernel and read it from its Ref")
    return None


def _argument_words(expected):
    names = list(expected.get("argument_names") or ())

    def arg(a):
        return f"`{names[a]}` (argument {a})" if a is not None and a < len(names) else (
            f"argument {a}" if a is not None else "a value computed before the kernel")
    return arg


def _rule_arguments(kernels, outside, expected, name):
    """The kernel must receive the program's arguments in the order given.

    >>> rules = {"arguments": [0, 1], "argument_names": ["x", "residual"]}
    >>> print(_rule_arguments([{"arguments": [1, 0]}], {}, rules, "f")[0])
    the kernel of f receives its inputs in another order
    """
    want = expected.get("arguments")
    arg = _argument_words(expected)
    for k in kernels if want is not None else ():
        got = k.get("arguments")
        if got is None or list(got) == list(want):
            continue
        return (f"the kernel of {name} receives its inputs in another order",
                "inputs " + ", ".join(arg(a) for a in want),
                "inputs " + ", ".join(arg(a) for a in got),
                "pl.pallas_call(...) is called with the arrays in another order than the "
                "exercise gives (or an input is computed before the kernel)",
                "pass the kernel its inputs in the order the exercise gives, each array "
                "as it is")
    return None


def _rule_aliases(kernels, outside, expected, name):
    """An output must be written into the buffer of one of the function's arguments
    (``input_output_aliases`` on the kernel input that receives it); a kernel whose
    aliases cannot be read (compiled for a GPU or TPU) is not judged.

    >>> kernel = {"aliases": [[0, 1, 0]]}     # input 0 (holding argument 0) -> output 1
    >>> rules = {"aliases": [[1, 1]], "argument_names": ["x", "residual"]}
    >>> print(_rule_aliases([kernel], {}, rules, "f")[0])
    output 1 of the kernel of f is written into the buffer of `x` (argument 0), expected `residual` (argument 1)
    >>> _rule_aliases([{"aliases": [[0, 0, 0], [1, 1, 1]]}], {}, rules, "f") is None
    True
    >>> print(_rule_aliases([{"aliases": [[1, 1, 1]], "written_through_input": [1]}], {},
    ...                     rules, "f")[0])
    output 1 of the kernel of f is written through the Ref of the input that holds `residual` (argument 1), not through its own Ref
    """
    arg = _argument_words(expected)
    for k in kernels:
        got = k.get("aliases")
        if got is None:
            continue
        pairs = [(p[0], p[1], p[2] if len(p) > 2 else None) for p in got]
        for a, o in (tuple(p) for p in expected.get("aliases") or ()):
            if any(out == o and held == a for _, out, held in pairs):
                if o in (k.get("written_through_input") or ()):
                    return (f"output {o} of the kernel of {name} is written through the Ref "
                            f"of the input that holds {arg(a)}, not through its own Ref",
                            f"the kernel writes output {o} through its output Ref",
                            f"the kernel assigns into the input's Ref; output {o}'s Ref is "
                            "never written",
                            "the alias makes them one buffer in interpret mode, where this "
                            "gives the right values; on a TPU each Ref is a block of its own "
                            "in VMEM, and only the output's blocks are copied back: the "
                            "result is whatever the output's block held (section 5.3)",
                            f"assign output {o}'s values to its own Ref (the kernel's "
                            "output parameter), and only read the input's Ref")
                continue
            want = f"output {o} written into the buffer of {arg(a)}"
            shown = "aliases: " + (", ".join(
                f"output {out} into kernel input {i}, which holds {arg(held)}"
                for i, out, held in pairs) or "none")
            fix = (f"alias output {o} to the kernel input that receives {arg(a)}: "
                   f"input_output_aliases={{that input: {o}}}, inputs and outputs each "
                   "counted from 0 in the order the kernel receives its Refs")
            other = [held for _, out, held in pairs if out == o]
            if other:
                return (f"output {o} of the kernel of {name} is written into the buffer of "
                        f"{arg(other[0])}, expected {arg(a)}", want, shown,
                        "input_output_aliases names the wrong input, or the kernel receives "
                        "its inputs in another order than the alias assumes",
                        fix)
            taken = [out for _, out, held in pairs if held == a]
            if taken:
                return (f"the buffer of {arg(a)} holds output {taken[0]} of the kernel of "
                        f"{name}, expected output {o}", want, shown,
                        "input_output_aliases names the wrong output, or the kernel produces "
                        "its outputs in another order",
                        fix)
            return (f"output {o} of the kernel of {name} is a new buffer, not the buffer of "
                    f"{arg(a)}", want, shown,
                    "pl.pallas_call was given no input_output_aliases for this output: the "
                    f"kernel writes output {o} into a buffer of its own, and {arg(a)} is "
                    "kept as it was (not updated in place)",
                    fix)
    return None


# The interpreter's own ops inside a grid loop: not evidence of any computation.
_BOOKKEEPING = frozenset({
    "add", "call", "compare", "convert", "dynamic_slice", "dynamic_update_slice",
    "multiply", "return", "select", "constant", "broadcast_in_dim"})
