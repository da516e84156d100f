"""Facts about differentiated programs, derived from exported programs (08_autodiff).

Every check here is a :class:`autograder.core.check.Check`: ``observe`` exports the
student's function with ``jax.export`` (:func:`autograder.programs.artifacts.programs_of`), the
facts are derived from the serialized program (in the kernel in place; when grading, in
the program judge's sandbox, which runs no student code), and a registered ``explain``
turns plain facts into the teaching message.

Facts from exported programs (derived outside the student's process):

- ``autodiff_array_sizes`` (:func:`assert_arrays_at_most`): the largest tensor type of
  the program (``largest_array``), i.e. whether a Jacobian or Hessian was formed; the
  program is tied to the graded function by its values on the grader's inputs;
- ``autodiff_work`` (:func:`assert_work_at_most`): the program's work (``work``,
  elements computed with loop trips) against the reference program's, i.e. whether a
  Jacobian was built in the mode its shape calls for;
- ``autodiff_saved_residuals`` (:func:`assert_saved_residuals`): the output avals of the
  program ``args -> leaves of jax.vjp(fn, *args)[1]``, i.e. what reverse mode keeps;
- ``autodiff_memory`` (:mod:`autograder.autodiff.memory`): ``temp_bytes`` of the
  program compiled on its own, against a baseline compiled the same way.

In-process facts (:mod:`autograder.autodiff.pytree_node`): ``autodiff_node`` reads the class
name and attributes of an object the student's code built. A pytree node's class is a
Python object that no exported program carries (a program's outputs are flat arrays),
so these stay facts of the student's process, recorded as plain JSON data.

The ``collect_*``/``explain_*`` helpers on plain data stay public for notebooks and tests.
"""
from __future__ import annotations

import math
import re
from typing import Callable, Sequence

import numpy as np

from autograder.programs.array_sizes import largest_array
from autograder.programs.artifacts import explain_program, program_facts, program_sides, programs_of
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.core.numeric import call_student


# ---------------------------------------------------------------- exporting


def export_program(fn: Callable, args: Sequence = (), *, name: str | None = None,
                   section: str | None = None):
    """``jax.export.export(jax.jit(fn))(*args)``, with errors turned into feedback.

    >>> import jax.numpy as jnp
    >>> export_program(jnp.sin, (jnp.ones(3),)).out_avals
    (ShapedArray(float32[3]),)
    """
    __tracebackhide__ = True
    import jax

    label = name or call_signature(fn, args)

    def export(*a):
        return jax.export.export(jax.jit(fn))(*a)

    exported, _ = call_student(export, tuple(args), name=f"exporting {label}", section=section)
    return exported


def residuals_of(fn: Callable) -> Callable:
    """``args -> the leaves of jax.vjp(fn, *args)[1]``: what reverse mode keeps.

    The outputs of this function are exactly the arrays the VJP function holds for the
    backward pass, so their shapes are a fact of its exported program.
    """
    import jax

    def residuals(*a):
        return jax.tree.leaves(jax.vjp(fn, *a)[1])

    residuals.__name__ = f"residuals of {getattr(fn, '__name__', 'fn')}"
    return residuals


def export_residuals(fn: Callable, args: Sequence = (), *, name: str | None = None,
                     section: str | None = None):
    """Exports the forward half of reverse mode (:func:`residuals_of`)."""
    __tracebackhide__ = True
    return export_program(residuals_of(fn), args, name=name or f"the residuals of "
                          f"{call_signature(fn, args)}", section=section)


def _exported(program):
    """An ``Exported`` from an ``Exported`` or its serialized bytes."""
    if isinstance(program, (bytes, bytearray, memoryview)):
        import jax

        return jax.export.deserialize(bytearray(program))
    return program


def _text(program) -> str:
    if isinstance(program, str):
        return program
    return _exported(program).mlir_module()


# ---------------------------------------------------------------- array sizes


def collect_array_sizes(program) -> dict:
    """The largest array in a program: ``{"largest_elements", "largest_type", "arrays"}``.

    Args:
      program: an ``Exported``, its serialized bytes, or StableHLO text.

    >>> import jax, jax.numpy as jnp
    >>> f = lambda x: jnp.sin(x) * 2
    >>> facts = collect_array_sizes(jax.export.export(jax.jit(jax.jacrev(f)))(jnp.ones(5)))
    >>> facts["largest_elements"], facts["largest_type"]
    (25, 'tensor<5x5xf32>')
    """
    facts = largest_array(_text(program))
    return {"largest_elements": facts["elements"], "largest_type": facts["type"],
            "arrays": facts["arrays"]}


def explain_array_sizes(observed: dict, *, at_most: int, name: str, what: str,
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None) -> str | None:
    """The message when the program holds an array of more than ``at_most`` elements.

    >>> explain_array_sizes({"largest_elements": 10, "largest_type": "tensor<10xf32>"},
    ...                     at_most=99, name="hvp", what="as many as the Hessian") is None
    True
    >>> print(explain_array_sizes({"largest_elements": 10000,
    ...                            "largest_type": "tensor<100x100xf32>"},
    ...                           at_most=9999, name="hvp",
    ...                           what="as many as the 100 x 100 Hessian"))
    the program of hvp builds an array of 10000 entries, as many as the 100 x 100 Hessian
      expected: no array with more than 9999 elements
      got:      tensor<100x100xf32> (10000 elements)
      likely cause: the matrix was formed (jax.hessian, jax.jacfwd or jax.jacrev build it column by column) instead of applied to a vector
    """
    n = int(observed["largest_elements"])
    if n <= at_most:
        return None
    return format_failure(
        f"the program of {name} builds an array of {n} entries, {what}",
        expected=f"no array with more than {at_most} elements",
        got=f"{observed['largest_type']} ({n} elements)",
        cause=hint or "the matrix was formed (jax.hessian, jax.jacfwd or jax.jacrev build it "
                      "column by column) instead of applied to a vector",
        fix=fix, section=section)


def assert_arrays_at_most(fn: Callable, args: Sequence, at_most: int, *, what: str,
                          name: str | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that no array in the exported program of ``fn`` has more than ``at_most`` elements.

    This is how "without forming the Jacobian (or Hessian)" is checked: a Jacobian
    built by ``jacfwd``/``jacrev`` needs an identity matrix and a batch of tangents
    (or cotangents) the size of the matrix; products with a vector do not. The fact
    (``largest_array``) is derived from the exported program.

    Args:
      fn: the function to export (with ``jax.jit``) for ``args``.
      at_most: the largest number of elements an array may hold.
      what: completes the message "builds an array of N entries, ...", e.g.
        "as many as the 300 x 300 Jacobian".

    >>> import jax, jax.numpy as jnp
    >>> def hvp(x, v):
    ...     return jax.jvp(jax.grad(lambda z: jnp.sum(z ** 4)), (x,), (v,))[1]
    >>> assert_arrays_at_most(hvp, (jnp.ones(50), jnp.ones(50)), 50 * 50 - 1,
    ...                       what="as many as the 50 x 50 Hessian")
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args)
    observe, expect = program_sides(lambda: programs_of((fn, tuple(args), None)))
    run(Check("autodiff_array_sizes", label, observe=observe, expect=expect,
              observe_as="artifact", expect_as="artifact",
              params=dict(at_most=int(at_most), what=what, section=section, hint=hint,
                          fix=fix)))


@explainer("autodiff_array_sizes")
def _explain_array_sizes_check(observed, expected, *, label: str, at_most: int, what: str,
                               section: str | None = None, hint: str | None = None,
                               fix: str | None = None, **_ignored) -> str | None:
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    largest = program_facts(observed)[0].get("largest_array") or {}
    return explain_array_sizes({"largest_elements": largest.get("elements", 0),
                                "largest_type": largest.get("type", "")},
                               at_most=at_most, name=label, what=what, section=section,
                               hint=hint, fix=fix)


def explain_work(observed: dict, reference: dict, *, times: float, name: str,
                 section: str | None = None, hint: str | None = None,
                 fix: str | None = None) -> str | None:
    """The message when a program does more than ``times`` the reference's work
    (``observed``/``reference``: :func:`autograder.programs.region_work.program_work`).

    >>> explain_work({"elements": 9000}, {"elements": 6000}, times=8, name="jac") is None
    True
    >>> print(explain_work({"elements": 480000}, {"elements": 6000}, times=8, name="jac"))
    the program of jac does 80 times the work of the reference's
      expected: at most 8 times the reference's 6000 elements computed
      got:      480000 elements computed (loop bodies counted once per trip)
      likely cause: the Jacobian was built in the other mode: one linearized pass per input where there are fewer outputs, or per output where there are fewer inputs
    """
    mine, theirs = int(observed.get("elements", 0)), int(reference.get("elements", 0))
    if theirs <= 0 or mine <= times * theirs:
        return None
    return format_failure(
        f"the program of {name} does {mine / theirs:.0f} times the work of the reference's",
        expected=f"at most {times:g} times the reference's {theirs} elements computed",
        got=f"{mine} elements computed (loop bodies counted once per trip)",
        cause=hint or ("the Jacobian was built in the other mode: one linearized pass per "
                       "input where there are fewer outputs, or per output where there are "
                       "fewer inputs"),
        fix=fix, section=section)


def assert_work_at_most(fn: Callable, reference: Callable, args: Sequence, times: float, *,
                        name: str | None = None, section: str | None = None,
                        hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that the exported program of ``fn`` does at most ``times`` the work of
    ``reference``'s on ``args``.

    Work is what the program computes when it runs (:func:`program_work`: the elements
    its computing operations read or write, loop bodies counted once per trip, calls
    once per call), so it follows the cost rather than the program's size or its op
    names: a Jacobian built in the wrong mode runs max(n, m) linearized passes instead
    of min(n, m), batched or one after another, and does about max(n, m) / min(n, m)
    times the work. Both programs are exported in every mode; the student's is tied to
    the graded function by its values on the grader's inputs (the reference's values).

    >>> import jax, jax.numpy as jnp
    >>> f = lambda x: jnp.sin(x[0] * jnp.arange(100.0))   # R^1 -> R^100
    >>> assert_work_at_most(jax.jacfwd(f), jax.jacfwd(f), (jnp.ones(1),), 8)
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args)
    args = tuple(args)
    run(Check("autodiff_work", label,
              observe=lambda: programs_of((fn, args, None)),
              expect=lambda: programs_of((reference, args, None)),
              observe_as="artifact", expect_as="artifact",
              params=dict(times=float(times), section=section, hint=hint, fix=fix)))


@explainer("autodiff_work")
def _explain_work_check(observed, expected, *, label: str, times: float,
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None, **_ignored) -> str | None:
    from autograder.programs.artifacts import explain_values_tie

    problem = explain_program(observed, None, label=label, section=section)
    if problem:
        return problem
    theirs = program_facts(expected)
    if not theirs or not isinstance(theirs[0], dict) or "work" not in theirs[0]:
        return format_failure(f"the grader has no reference program for {label}",
                              section=section)
    mine_out, their_out = getattr(observed, "outputs", ()), getattr(expected, "outputs", ())
    if mine_out and their_out:
        message = explain_values_tie(mine_out[0], their_out[0], label=label, section=section)
        if message:
            return message
    return explain_work(program_facts(observed)[0].get("work") or {}, theirs[0]["work"],
                        times=times, name=label, section=section, hint=hint, fix=fix)


# ---------------------------------------------------------------- saved residuals


def collect_saved_residuals(program) -> list[dict]:
    """The outputs of an exported residual program: ``[{"shape", "dtype", "bytes"}]``.

    >>> import jax, jax.numpy as jnp
    >>> prog = export_residuals(lambda x: jnp.sum(jnp.sin(x)), (jnp.ones(3),))
    >>> collect_saved_residuals(prog)
    [{'shape': [3], 'dtype': 'float32', 'bytes': 12}]
    """
    return [_residual(aval.dtype, aval.shape) for aval in _exported(program).out_avals]


def _residual(dtype, shape) -> dict:
    shape = [int(d) for d in shape]
    dtype = np.dtype(dtype)
    return {"shape": shape, "dtype": str(dtype), "bytes": int(math.prod(shape) * dtype.itemsize)}


_AVAL = re.compile(r"^~?([a-z]+[0-9]*)\[([0-9, ]*)\]")


def residuals_from_avals(avals: Sequence[str]) -> list[dict]:
    """:func:`collect_saved_residuals` from a program's ``out_avals`` facts (text).

    >>> residuals_from_avals(["float32[5,4,3]", "~float32[]"])
    [{'shape': [5, 4, 3], 'dtype': 'float32', 'bytes': 240}, {'shape': [], 'dtype': 'float32', 'bytes': 4}]
    """
    out = []
    for aval in avals:
        m = _AVAL.match(str(aval))
        if m:
            out.append(_residual(m.group(1), [d for d in m.group(2).split(",") if d.strip()]))
    return out


def _shape_text(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def explain_saved_residuals(observed: list[dict], expected: list[dict], *,
                            shapes: Sequence[Sequence[int]], name: str,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> str | None:
    """Compares how many residuals of each tracked shape are saved.

    Only the ``shapes`` listed are compared (the activations whose saving the
    exercise is about); parameters and inputs saved as residuals are not.

    >>> act = {"shape": [4, 8, 32], "dtype": "float32", "bytes": 4096}
    >>> print(explain_saved_residuals([act, act, act], [act], shapes=[(4, 8, 32)],
    ...                               name="loss", section="5.3"))
    the backward pass of loss saves the wrong residuals
      expected: 1 saved array(s) of shape [4,8,32]
      got:      3 saved array(s) of shape [4,8,32]
      all residuals saved: 3 x float32[4,8,32]
      likely cause: the checkpoint policy saves more (or fewer) intermediate values than asked
      fix: print them with jax.ad_checkpoint.print_saved_residuals(loss, params, x) and compare with the policy
      reread: section 5.3
    """
    def count(residuals, shape):
        return sum(1 for r in residuals if list(r["shape"]) == [int(d) for d in shape])

    wrong = [(s, count(expected, s), count(observed, s)) for s in shapes
             if count(expected, s) != count(observed, s)]
    if not wrong:
        return None
    tally: dict[str, int] = {}
    for r in observed:
        key = f"{r['dtype']}{_shape_text(r['shape'])}"
        tally[key] = tally.get(key, 0) + 1
    listing = ", ".join(f"{n} x {k}" for k, n in tally.items()) or "none"
    return format_failure(
        f"the backward pass of {name} saves the wrong residuals",
        expected="; ".join(f"{e} saved array(s) of shape {_shape_text(s)}" for s, e, _ in wrong),
        got="; ".join(f"{g} saved array(s) of shape {_shape_text(s)}" for s, _, g in wrong),
        details=[f"all residuals saved: {listing}"],
        cause=hint or "the checkpoint policy saves more (or fewer) intermediate values than asked",
        fix=fix or f"print them with jax.ad_checkpoint.print_saved_residuals({name}, params, x) "
                   "and compare with the policy",
        section=section)


def assert_saved_residuals(fn: Callable, reference: Callable, args: Sequence, *,
                           shapes: Sequence[Sequence[int]], name: str | None = None,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts that reverse mode saves as many arrays of each of ``shapes`` as the reference.

    Both sides are exported programs (:func:`residuals_of`); the residual counts are
    read from their output avals. Their values are not compared (a correct answer may
    keep its residuals in another order); the value checks of the exercise judge those.

    >>> import jax, jax.numpy as jnp
    >>> def f(x):
    ...     return jnp.sum(jnp.sin(jnp.sin(x)))
    >>> assert_saved_residuals(jax.checkpoint(f), jax.checkpoint(f), (jnp.ones(3),), shapes=[(3,)])
    """
    __tracebackhide__ = True
    import jax

    label = name or getattr(fn, "__name__", "fn")
    args = tuple(args)
    try:  # in the reference run (whose parameters the grader uses): the solution's
        primal = len(jax.tree.leaves(jax.eval_shape(fn, *args)))
    except Exception:  # noqa: BLE001 - a broken function fails the check itself
        primal = 1
    run(Check("autodiff_saved_residuals", label,
              observe=lambda: programs_of((_primal_and_residuals(fn), args, None)),
              expect=lambda: programs_of((_primal_and_residuals(reference), args, None)),
              observe_as="artifact", expect_as="artifact",
              params=dict(shapes=[[int(d) for d in s] for s in shapes], primal=primal,
                          section=section, hint=hint, fix=fix)))


def _primal_and_residuals(fn: Callable) -> Callable:
    """``args -> (the outputs' leaves, the residuals' leaves)``: the residual program
    with the function's own outputs, so that it can be tied to the graded function
    (the residuals themselves may come in another order in a correct answer)."""
    import jax

    def both(*a):
        out, vjp = jax.vjp(fn, *a)
        return jax.tree.leaves(out), jax.tree.leaves(vjp)

    both.__name__ = f"residuals of {getattr(fn, '__name__', 'fn')}"
    return both


def _first_leaves(obs, n: int):
    from autograder.core import wire as _wire

    leaves = tuple(getattr(obs, "leaves", ()))[:n]
    return _wire.Observation("tree", tree=f"{n} output(s)", leaves=leaves)


@explainer("autodiff_saved_residuals")
def _explain_saved_residuals_check(observed, expected, *, label: str, shapes: list,
                                   primal: int | None = None, section: str | None = None,
                                   hint: str | None = None, fix: str | None = None,
                                   **_ignored) -> str | None:
    from autograder.programs.artifacts import explain_values_tie

    problem = explain_program(observed, None, label=f"the residuals of {label}",
                              section=section)
    if problem:
        return problem
    theirs = program_facts(expected)
    if not theirs:
        return format_failure(f"the grader has no reference residuals for {label}",
                              section=section)
    n = int(primal or 0)
    mine_out, their_out = getattr(observed, "outputs", ()), getattr(expected, "outputs", ())
    if n and mine_out and their_out and getattr(their_out[0], "leaves", ()):
        # The program judged is the graded function's: its outputs are the reference's.
        message = explain_values_tie(_first_leaves(mine_out[0], n),
                                     _first_leaves(their_out[0], n), label=label,
                                     section=section)
        if message:
            return message
    return explain_saved_residuals(
        residuals_from_avals(program_facts(observed)[0].get("out_avals", [])[n:]),
        residuals_from_avals(theirs[0].get("out_avals", [])[n:]),
        shapes=shapes, name=label, section=section, hint=hint, fix=fix)
