"""The memory of a compiled gradient, from exported programs (08_autodiff, section 5).

``temp_bytes`` of ``compiled.memory_analysis()`` is a fact of a program compiled on its
own: the student's function and the baseline are both exported (``jax.export``), and
the program judge (or, in the kernel, this process) compiles each and reads it
(:func:`autograder.programs.artifacts.derive_one` with ``compile=True``). Never wall-clock time,
and only as a ratio to the baseline compiled the same way on the same backend.
"""
from __future__ import annotations

from typing import Callable, Sequence

from autograder.programs.artifacts import TIE_TOLERANCE, explain_program, program_facts, programs_of
from autograder.autodiff.facts import _exported
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import format_failure


def collect_memory(program) -> dict:
    """Compiles an exported program on its own and reads ``memory_analysis()``.

    Returns ``{"temp_bytes", "argument_bytes", "output_bytes", "platform"}`` (``None``
    for sizes the backend does not report).

    >>> import jax, jax.numpy as jnp
    >>> prog = jax.export.export(jax.jit(lambda x: jnp.sin(x) @ x))(jnp.ones((8, 8)))
    >>> collect_memory(prog)["argument_bytes"]
    256
    """
    import jax

    exp = _exported(program)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exp.in_avals]
    args, kwargs = jax.tree.unflatten(exp.in_tree, specs)
    compiled = jax.jit(exp.call).lower(*args, **kwargs).compile()
    stats = compiled.memory_analysis()

    def size(attr):
        value = getattr(stats, attr, None) if stats is not None else None
        return None if value is None else int(value)

    return {"temp_bytes": size("temp_size_in_bytes"),
            "argument_bytes": size("argument_size_in_bytes"),
            "output_bytes": size("output_size_in_bytes"),
            "platform": jax.default_backend()}


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**16 else f"{n} bytes"


def explain_memory_reduction(observed: dict, baseline: dict, *, factor: float, name: str,
                             baseline_name: str, section: str | None = None,
                             hint: str | None = None, fix: str | None = None) -> str | None:
    """The message when ``observed`` temporary memory is not ``factor`` x below ``baseline``.

    >>> base = {"temp_bytes": 4_000_000}
    >>> explain_memory_reduction({"temp_bytes": 500_000}, base, factor=4, name="a",
    ...                          baseline_name="b") is None
    True
    >>> print(explain_memory_reduction({"temp_bytes": 3_900_000}, base, factor=4,
    ...                                name="jax.grad(remat_loss)",
    ...                                baseline_name="jax.grad(stack_loss)"))
    the compiled jax.grad(remat_loss) needs too much temporary memory
      expected: at most 1/4 of jax.grad(stack_loss)'s 3.81 MiB, i.e. 0.95 MiB
      got:      3.72 MiB (1.03x less than without checkpointing)
      likely cause: every layer's activations are still kept for the backward pass: the checkpoint is missing, wraps the whole loss (which recomputes everything and then saves it all again), or sits inside an unrolled Python loop that XLA is free to reschedule
      fix: list what reverse mode keeps with jax.ad_checkpoint.print_saved_residuals, and put jax.checkpoint around the computations whose intermediates should be recomputed in the backward pass instead
    """
    temp, base = observed.get("temp_bytes"), baseline.get("temp_bytes")
    if temp is None or base is None or temp < 0 or base < 0:
        return format_failure(
            f"the memory of the compiled {name} cannot be measured on this backend",
            expected="compiled.memory_analysis() with temp_size_in_bytes",
            got=f"{temp!r} (and {base!r} for {baseline_name})", section=section)
    limit = base / factor
    if temp <= limit:
        return None
    ratio = base / temp if temp else float("inf")
    return format_failure(
        f"the compiled {name} needs too much temporary memory",
        expected=f"at most 1/{factor:g} of {baseline_name}'s {_mib(base)}, i.e. {_mib(int(limit))}",
        got=f"{_mib(temp)} ({ratio:.2f}x less than without checkpointing)",
        cause=hint or "every layer's activations are still kept for the backward pass: the "
                      "checkpoint is missing, wraps the whole loss (which recomputes "
                      "everything and then saves it all again), or sits inside an unrolled "
                      "Python loop that XLA is free to reschedule",
        fix=fix or "list what reverse mode keeps with jax.ad_checkpoint.print_saved_residuals, "
                   "and put jax.checkpoint around the computations whose intermediates should "
                   "be recomputed in the backward pass instead",
        section=section)


def assert_memory_reduced(fn: Callable, baseline: Callable, args: Sequence, *, factor: float,
                          name: str | None = None, baseline_name: str | None = None,
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> None:
    """Asserts that the compiled ``fn`` needs ``factor`` x less temporary memory than ``baseline``.

    Both are exported (``jax.export``) and compiled on their own for the same
    arguments; ``fn`` is usually ``jax.grad`` of the student's checkpointed loss and
    ``baseline`` (the expected side, never run next to student code when grading) the
    gradient of the same loss without checkpointing. Both programs run on the same
    arguments and must compute the same values (checkpointing changes what is kept,
    not what is computed): the memory judged is that of the graded function, not of a
    program exported from another one.
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    base_label = baseline_name or getattr(baseline, "__name__", "the baseline")
    args = tuple(args)
    run(Check("autodiff_memory", label,
              observe=lambda: programs_of((fn, args, None)),
              expect=lambda: programs_of((baseline, args, None)),
              observe_as="artifact", expect_as="artifact",
              params=dict(factor=float(factor), baseline_name=base_label, compile=True,
                          section=section, hint=hint, fix=fix)))


@explainer("autodiff_memory")
def _explain_memory_check(observed, expected, *, label: str, factor: float,
                          baseline_name: str, section: str | None = None,
                          hint: str | None = None, fix: str | None = None,
                          **_ignored) -> str | None:
    problem = explain_program(observed, expected, label=label, section=section,
                              **TIE_TOLERANCE)
    if problem:
        return problem
    base = program_facts(expected)
    if not base:
        return format_failure(f"the grader has no baseline program for {label}",
                              section=section)
    return explain_memory_reduction(program_facts(observed)[0], base[0], factor=factor,
                                    name=label, baseline_name=baseline_name,
                                    section=section, hint=hint, fix=fix)
