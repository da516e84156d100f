"""Judges Pallas kernels read from exported programs: observe, explain, assert.

:func:`assert_kernel_structure` is one check (``kernel_structure``). Its ``observe``
exports the student's function at the test's inputs with
:func:`autograder.programs.artifacts.programs_of` (array arguments are the program's inputs,
every other argument a constant of it, as ``static_argnums`` would make it); nothing
about the kernel is measured next to the student's code. The kernel facts are derived
from the program's StableHLO text by :func:`autograder.programs.pallas_kernels.collect_kernel_facts`,
run by the program judge (``pallas_facts`` in the check's params asks
:func:`autograder.programs.artifacts.derive_one` for them): outside the student's process when
grading, in place in the student's kernel. :func:`explain_kernel_structure`
(``pallas/rules.py``) then judges them against the exercise's rules, purely, and the
program's outputs on the grader's inputs must match the reference program's
(:func:`explain_program`), so a program exported from some other function earns
nothing.

Where the facts come from:

- **exported program** (derived outside the student's process): that a
  ``pallas_call`` is present (its grid loop, told apart from a hand-written loop by
  the grid indices it advances), how many kernels, the grid (steps and per-axis
  sizes), the block shape of every operand, which output a kernel writes into which
  input's buffer (``input_output_aliases``), the ops inside each kernel and outside
  every kernel, and the chain of reductions inside a kernel (one pass or two). Every
  verdict of this module comes from these.
- **in-process**: that every index map returns block indices inside its array, a
  second check (``blocks_in_bounds``, :mod:`autograder.pallas.blocks`) run after this
  one: the exported program keeps only the slices, already clamped, not the maps.
  (Values and gradients are judged by the value checks of ``core.numeric`` and ``autodiff.grads``,
  on what the student's function returned.)

Why the facts are read from StableHLO rather than the jaxpr is written at the top of
``programs/pallas_kernels.py``.
"""
from __future__ import annotations

from typing import Callable, Sequence

from autograder.programs.artifacts import (TIE_TOLERANCE, explain_program, program_facts,
                                   program_sides, programs_of)
from autograder.core.check import Check, NotAFunction, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.pallas.blocks import _bind, assert_blocks_in_bounds
from autograder.programs.pallas_interpret import interpreting
from autograder.programs.pallas_kernels import KERNEL_CALLS
from autograder.pallas.rules import explain_kernel_structure

# --- exporting ----------------------------------------------------------------------

def export_program(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                   interpret: bool = False, name: str | None = None,
                   section: str | None = None):
    """``jax.export`` of ``jax.jit(fn)`` at these inputs: a helper for lessons.

    Array arguments become the program's inputs; every other argument (block sizes,
    ``eps``) is a constant of the program, as ``static_argnums`` would make it.
    Compiled Pallas kernels (GPU/TPU custom calls) are allowed in the export, so the
    program of a compiled kernel can be read too, as one opaque call. With
    ``interpret=True`` every kernel is exported in interpret mode, whatever ``fn``
    asked for: the form the grader reads on every backend, where the grid is a loop
    and each step's blocks and operations are visible. Errors of ``fn`` propagate
    (this is a helper, not a check; ``name`` and ``section`` are accepted for
    compatibility).

    >>> import jax.numpy as jnp
    >>> export_program(lambda x, k: x * k, (jnp.ones(3), 2)).in_avals
    (ShapedArray(float32[3]),)
    """
    import jax

    program, arrays, array_kwargs = _bind(fn, args, kwargs)
    if interpret:
        program = interpreting(program)
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in KERNEL_CALLS]
    return jax.export.export(jax.jit(program), disabled_checks=checks)(*arrays,
                                                                       **array_kwargs)


def judged_form(program: Callable, arrays: tuple, array_kwargs: dict):
    """``(program, arrays, array_kwargs)`` in the form the structure rules read.

    On a CPU that is the program as it is (its kernels run in interpret mode there).
    On a GPU or TPU a kernel compiles to one opaque custom call (``tpu_custom_call``)
    with nothing to read in it, so the program is traced, its ``pallas_call``s switched
    to interpret mode, and it is exported for the CPU with its inputs there: the same
    kernels, grids and blocks, in the form a CPU grader sees.
    """
    import jax

    from autograder.core.numeric import accelerator_cpus

    cpus = accelerator_cpus()
    if not cpus:  # a CPU (or no CPU backend): judge the program as it is
        return program, arrays, array_kwargs
    return interpreting(program), *jax.device_put((arrays, array_kwargs), cpus[0])


# --- the check ------------------------------------------------------------------------

def assert_kernel_structure(fn: Callable, args: Sequence = (), *, kwargs: dict | None = None,
                            kernels: int | None = 1, steps: int | None = None,
                            grid: Sequence[int] | None = None,
                            blocks: Sequence[Sequence[int]] | None = None,
                            inside: Sequence[str] = (), not_outside: Sequence[str] = (),
                            not_inside: Sequence[str] = (),
                            max_reduce_depth: int | None = None,
                            aliases: dict[int | str, int] | None = None,
                            arguments: Sequence[int | str] | None = None,
                            name: str | None = None,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> None:
    """Asserts facts about the Pallas kernels of ``jax.jit(fn)`` at these inputs.

    The function is exported (:func:`autograder.programs.artifacts.programs_of`, non-array
    arguments closed over); its kernels are read from the program's StableHLO
    (:func:`collect_kernel_facts`, outside the student's process when grading) and
    judged (:func:`explain_kernel_structure`); when grading, the program must also
    compute the reference program's values on the grader's inputs. Rules left at
    ``None`` or empty are not checked.

    Args:
      fn: the student's function (or a function built on it, e.g. a gradient).
      args, kwargs: the inputs; non-array arguments are constants of the program.
      kernels: how many kernels the program holds.
      steps: grid steps of each kernel, the product of its grid.
      grid: the grid of each kernel, axis by axis.
      blocks: block shape of every operand, inputs then outputs.
      inside: ops the kernels must compute (``"dot_general"``, ``"reduce"``; one of
        several: ``"reduce|dot_general"``, a sum that may be a product with ones).
      not_outside: ops that must not run outside the kernels.
      not_inside: ops that no kernel may compute (a backward kernel that must read a
        residual rather than compute it again: ``["exponential", "logistic"]``).
      max_reduce_depth: the longest chain of reductions feeding one another.
      aliases: ``{argument: output}``: the kernel's output ``output`` (counted from 0)
        must be written in place into the buffer of the function's array argument
        ``argument`` (its name, or its position among the array arguments), i.e.
        ``input_output_aliases`` must alias that output to the kernel input that
        receives the argument. Read from the program, not from the call.
      arguments: the function's array arguments (names or positions) that the kernel
        must receive as its inputs, in this order.
      name, section, hint, fix: how to name the call; what to reread; a likely cause
        and a fix replacing the defaults.

    >>> import jax, jax.numpy as jnp
    >>> from jax.experimental import pallas as pl
    >>> def scale_kernel(x_ref, o_ref):
    ...     o_ref[...] = 3.0 * x_ref[...]
    >>> def scale(x, block):
    ...     spec = pl.BlockSpec((block,), lambda i: (i,))
    ...     return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    ...                           grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],
    ...                           out_specs=spec, interpret=True)(x)
    >>> assert_kernel_structure(scale, (jnp.ones(10), 4), steps=3, blocks=[(4,), (4,)])
    >>> assert_kernel_structure(lambda x, block: 3.0 * x, (jnp.ones(10), 4), name="scale")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: scale runs no Pallas kernel
      expected: 1 kernel (a pallas_call: in interpret mode, a `stablehlo.while` over the grid whose body cuts each operand into blocks)
      got:      no grid loop and no kernel call in the exported program; ops outside: broadcast_in_dim, multiply
      likely cause: the result is computed with jnp, not by a kernel (or pl.pallas_call is never called on this path)
      fix: write the computation in a kernel body and call it with pl.pallas_call
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args, kwargs)
    program, arrays, array_kwargs = judged_form(*_bind(fn, args, kwargs))
    rules = {"kernels": kernels, "steps": steps,
             "grid": [int(g) for g in grid] if grid is not None else None,
             "blocks": [[int(d) for d in b] for b in blocks] if blocks is not None else None,
             "inside": list(inside), "not_outside": list(not_outside),
             "not_inside": list(not_inside), "max_reduce_depth": max_reduce_depth,
             **_argument_rules(fn, args, kwargs, aliases, arguments)}
    observe, expect = program_sides(lambda: programs_of((program, arrays, array_kwargs)))
    run(Check("kernel_structure", label, observe=observe, expect=expect,
              observe_as="artifact", expect_as="artifact",
              params=dict(pallas_facts=True, rules=rules, section=section, hint=hint,
                          fix=fix)))
    # Index maps stay inside the arrays: a fact of the jaxpr only (see _pallas_blocks).
    assert_blocks_in_bounds(fn, args, kwargs=kwargs, name=label, section=section)


def _argument_rules(fn, args, kwargs, aliases, arguments) -> dict:
    """``aliases``, ``arguments`` and ``argument_names`` for the rules: each argument
    named or counted among the program's inputs (the array arguments, positional then
    keyword)."""
    if not aliases and arguments is None:
        return {"aliases": None, "arguments": None}
    import inspect

    from autograder.pallas.blocks import _is_array

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"argument {i}"
             for i, a in enumerate(args) if _is_array(a)]
    names += [k for k, v in (kwargs or {}).items() if _is_array(v)]
    def index(a):
        return names.index(a) if isinstance(a, str) else int(a)
    return {"aliases": sorted([index(a), int(o)] for a, o in aliases.items())
            if aliases else None,
            "arguments": None if arguments is None else [index(a) for a in arguments],
            "argument_names": names}


@explainer("kernel_structure", errors=True)
def explain_kernel_check(observed, expected, *, label: str, rules: dict,
                         section: str | None = None, hint: str | None = None,
                         fix: str | None = None, **_ignored) -> str | None:
    """The verdict on a kernel-structure record: the program could be exported and
    judged, its kernels follow ``rules`` (:func:`explain_kernel_structure`), and, when
    grading, it computes the reference program's values on the grader's inputs."""
    if observed.kind == "error":
        return _explain_export_error(observed, label, section)
    problem = explain_program(observed, None, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)[0].get("pallas")
    if not isinstance(facts, dict):
        return format_failure(f"the grader could not read the kernels of {label}",
                              section=section)
    message = explain_kernel_structure(facts, rules, name=label, section=section,
                                       hint=hint, fix=fix)
    if message:
        return message
    return explain_program(observed, expected, label=label, section=section, **TIE_TOLERANCE)


def _explain_export_error(observed, label: str, section: str | None) -> str | None:
    """What an error while exporting means here; None for the generic message (a
    function not implemented yet, or not a function)."""
    if observed.not_implemented or observed.error_type == "NotAFunction":
        return None
    if observed.error_type == "ProgramJudge":  # the grader's failure, not an export error
        return format_failure(f"the grader could not judge the program of {label}",
                              got=observed.error, section=section)
    text = observed.error or ""
    first = text.splitlines()[0] if text else ""
    if any(target in text for target in KERNEL_CALLS):
        return format_failure(
            f"exporting {label} gave a compiled kernel, which the grader cannot read",
            expected="a kernel run in interpret mode (interpret=True), as on a CPU",
            got=first[:300],
            cause="the kernel was compiled for a GPU or TPU (interpret=False): its program "
                  "is an opaque custom call, and the grader judges kernels on CPUs",
            fix="run the test on a CPU, or with INTERPRET = True",
            section=section)
    return format_failure(
        f"exporting {label} raised {observed.error_type}" + (f": {first}" if first else ""),
        cause="jax.export traces the function with abstract arrays: a shape or block size "
              "computed from array values, or Python control flow on them, fails here",
        fix="run the exercise's 'try it' cell to reproduce the error, then fix that line",
        section=section)
