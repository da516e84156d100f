"""StableHLO and optimized-HLO inspection, on stable facts only.

Op presence and counts in StableHLO (to detect unrolling: a ``stablehlo.while`` with
one copy of the body, not N copies), and the presence or absence of a class of
collective in compiled HLO. Never fusion counts, FLOPs or exact text: those change
with backend and version.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Sequence

from autograder.programs.artifacts import explain_program, program_facts, programs_of
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import call_signature, format_failure

_STABLEHLO_OP = re.compile(r"\b(stablehlo|chlo|sdy)\.([a-z_][a-z0-9_]*)\b")  # not mhlo.*: module attributes


def stablehlo_text(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> str:
    """The StableHLO module of ``jax.jit(fn)`` lowered for these arguments."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **(kwargs or {})).as_text()


def count_stablehlo_ops(text: str) -> Counter:
    """Counts ops by name (``while``, ``sine``, ``dot_general`` ...) in StableHLO text.

    >>> import jax.numpy as jnp
    >>> count_stablehlo_ops(stablehlo_text(lambda x: jnp.sin(x) * 2, (jnp.ones(2),)))["sine"]
    1
    """
    return Counter(m.group(2) for m in _STABLEHLO_OP.finditer(text))


def compiled_hlo_text(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> str:
    """The optimized HLO that XLA compiled ``jax.jit(fn)`` to, for these arguments."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **(kwargs or {})).compile().as_text()


def _lowered(fn: Callable, args: Sequence, kwargs: dict | None, label: str,
             section: str | None):
    """``jax.jit(fn).lower(*args)`` (or ``fn.lower`` when jitted), errors as feedback."""
    __tracebackhide__ = True
    import jax

    from autograder.core.numeric import call_student

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)

    def lower(*a, **k):
        return jitted.lower(*a, **k)

    lowered, _ = call_student(lower, args, kwargs or {}, name=f"lowering {label}",
                              section=section)
    return lowered


def _op_name(op: str) -> str:
    return op.split(".", 1)[1] if "." in op else op


def assert_stablehlo_op_count(fn: Callable, args: Sequence, op: str, *,
                              at_most: int | None = None, at_least: int | None = None,
                              kwargs: dict | None = None, section: str | None = None,
                              hint: str | None = None, fix: str | None = None) -> None:
    """Asserts how many ``op`` ops the StableHLO of ``jax.jit(fn)(*args)`` contains.

    Counts are stable facts of the lowered program (before XLA optimizes it): a loop
    written with ``lax.fori_loop`` or ``lax.scan`` lowers to one ``stablehlo.while``
    holding one copy of its body, a Python ``for`` loop to N copies of the body. A
    function called from several places (a ``jax.jit`` helper called in a Python loop)
    counts once per call site.

    Args:
      fn: the function (jitted or not; a jitted one is lowered with its own options).
      args: the inputs to lower it for.
      op: the op name, with or without dialect: ``"while"``, ``"stablehlo.sine"``.
      at_most, at_least: the bounds (inclusive); give one or both.
      kwargs, section, hint, fix: keyword inputs; the section to reread; a likely
        cause and a fix replacing the defaults.

    Returns nothing (a number as a test cell's last value would be read by nbgrader as
    partial credit); use :func:`count_stablehlo_ops` for the counts themselves.

    >>> import jax, jax.numpy as jnp
    >>> def loop(x):
    ...     return jax.lax.fori_loop(0, 8, lambda i, v: jnp.sin(v), x)
    >>> assert_stablehlo_op_count(loop, (jnp.ones(3),), "while", at_least=1)
    >>> def unrolled(x):
    ...     for _ in range(8):
    ...         x = jnp.sin(x)
    ...     return x
    >>> assert_stablehlo_op_count(unrolled, (jnp.ones(3),), "sine", at_most=1)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: the StableHLO of unrolled(x=f32[3]) has 8 `stablehlo.sine` ops
      expected: at most 1 `stablehlo.sine`
      got:      8 `stablehlo.sine`
      likely cause: the computation was repeated in the program: a Python loop inside a jitted function is unrolled at trace time, one copy of its body per iteration
      fix: write the loop with jax.lax.fori_loop or jax.lax.scan, which lower to one `stablehlo.while` with one copy of the body
    """
    __tracebackhide__ = True
    if at_most is None and at_least is None:
        raise ValueError("give at_most, at_least or both")
    label = call_signature(fn, args, kwargs)
    run(Check("stablehlo_op_count", label,
              observe=lambda: programs_of((fn, args, kwargs)), observe_as="artifact",
              params=dict(op=_op_name(op), at_most=at_most, at_least=at_least,
                          section=section, hint=hint, fix=fix)))


@explainer("stablehlo_op_count")
def explain_stablehlo_op_count(observed, expected, *, label: str, op: str,
                               at_most: int | None = None, at_least: int | None = None,
                               section: str | None = None, hint: str | None = None,
                               fix: str | None = None, **_ignored) -> str | None:
    """The verdict on an op count of an exported program's StableHLO."""
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)[0]
    # Each call site of a function counts (a jitted helper called once per probe is
    # one copy of its work per call, though the text holds its body once).
    ops = facts.get("ops_expanded") or facts.get("ops", {})
    n = int(ops.get(f"stablehlo.{op}", 0))
    shown = f"`stablehlo.{op}`"
    if at_most is not None and n > at_most:
        return format_failure(
            f"the StableHLO of {label} has {n} {shown} ops",
            expected=f"at most {at_most} {shown}", got=f"{n} {shown}",
            cause=hint or "the computation was repeated in the program: a Python loop "
                          "inside a jitted function is unrolled at trace time, one copy "
                          "of its body per iteration",
            fix=fix or "write the loop with jax.lax.fori_loop or jax.lax.scan, which lower "
                       "to one `stablehlo.while` with one copy of the body",
            section=section)
    if at_least is not None and n < at_least:
        used = ", ".join(f"{k.split('.', 1)[1]} x{v}" for k, v in sorted(
            ops.items(), key=lambda kv: -kv[1]) if k.startswith("stablehlo."))
        return format_failure(
            f"the StableHLO of {label} has {n} {shown} ops",
            expected=f"at least {at_least} {shown}", got=f"{n} {shown} (most used: "
                                                         f"{used[:300]})",
            cause=hint or f"the program does not contain {shown}: the operation the "
                          "exercise asks for is not used (or was written another way)",
            fix=fix, section=section)
    return None


_ALIAS_HEADER = re.compile(r"input_output_alias=\{(.*?)\}, [a-z_]+=")
_ALIAS_ENTRY = re.compile(r"\{[0-9, ]*\}:\s*\((\d+),")


def collect_aliased_parameters(hlo_text: str) -> list[int]:
    """The parameter numbers that XLA aliases to an output (donated and reused).

    Reads the ``input_output_alias={ {out}: (param, {}, may-alias), ... }`` attribute
    of the compiled ``HloModule`` header: the stable sign that a donated input buffer
    is reused for an output.

    >>> import jax, jax.numpy as jnp
    >>> def add(p, g):
    ...     return p + g
    >>> f = jax.jit(add, donate_argnums=0)
    >>> collect_aliased_parameters(compiled_hlo_text(f, (jnp.ones(3), jnp.ones(3))))
    [0]
    """
    header = next((line for line in hlo_text.splitlines() if line.startswith("HloModule")), "")
    match = _ALIAS_HEADER.search(header)
    if not match:
        return []
    return sorted({int(m.group(1)) for m in _ALIAS_ENTRY.finditer(match.group(1))})


def _kept_leaves(lowered, n_leaves: int) -> list[int]:
    """Which flat input leaves survive as parameters (jit prunes unused inputs)."""
    try:  # private: guarded, and the fallback is right whenever nothing was pruned
        kept = lowered._lowering.compile_args["kept_var_idx"]
        return sorted(int(i) for i in kept)
    except (AttributeError, KeyError, TypeError):
        return list(range(n_leaves))


def assert_donated(fn: Callable, args: Sequence, argnum: int, *,
                   kwargs: dict | None = None, section: str | None = None,
                   hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``fn`` donates argument ``argnum`` and XLA reuses its buffers.

    Two facts, checked in order: every leaf of ``args[argnum]`` is marked donated
    (``jax.jit(..., donate_argnums=...)``), and the compiled module aliases each of
    those inputs to an output (``input_output_alias`` in the optimized HLO), which
    needs an output of the same shape and dtype. Both hold on CPU, GPU and TPU.

    Args:
      fn: the student's jitted function.
      args: inputs to lower and compile it for.
      argnum: the positional argument that must be donated.
      kwargs, section, hint, fix: keyword inputs; section to reread; overrides.

    >>> import jax, jax.numpy as jnp
    >>> def sgd(p, g):
    ...     return p - 0.1 * g
    >>> assert_donated(jax.jit(sgd, donate_argnums=0), (jnp.ones(3), jnp.ones(3)), 0)
    >>> assert_donated(jax.jit(sgd), (jnp.ones(3), jnp.ones(3)), 0)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: sgd does not donate argument 0 (`p`)
      expected: every leaf of `p` donated
      got:      0 of 1 leaves donated
      likely cause: jax.jit was called without donate_argnums (or donate_argnames) for this argument
      fix: jax.jit(sgd, donate_argnums=0)
    """
    __tracebackhide__ = True
    import inspect

    import jax

    from autograder.core.tracing import is_jit_function

    name = getattr(fn, "__name__", None) or type(fn).__name__
    label = call_signature(fn, args, kwargs)
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()]
        arg_label, short = f"argument {argnum} (`{params[argnum]}`)", f"`{params[argnum]}`"
    except (TypeError, ValueError, IndexError):
        arg_label, short = f"argument {argnum}", f"argument {argnum}"
    flat = [len(jax.tree.leaves(a)) for a in args]
    start = sum(flat[:argnum])
    teach = dict(name=name, arg_label=arg_label, short=short, argnum=argnum,
                 section=section, hint=hint, fix=fix)
    def intent():
        facts = {"jitted": is_jit_function(fn), "type": type(fn).__name__}
        if facts["jitted"]:
            info = jax.tree.leaves(fn.lower(*args, **(kwargs or {})).args_info[0][argnum])
            facts.update(donated=sum(bool(a.donated) for a in info), leaves=len(info))
        return facts

    # Donation is asked for in the jit (an in-process fact); whether XLA can reuse the
    # buffers is read from the exported program (aliasing only survives when usable).
    run(Check("donation_asked", label, observe=intent, observe_as="facts", params=teach))
    run(Check("donated", label, observe=lambda: programs_of((fn, args, kwargs)),
              observe_as="artifact",
              params=dict(teach, leaves=[start, start + flat[argnum]])))


@explainer("donation_asked")
def _explain_donation_asked(observed, expected, *, label, name, arg_label, short, argnum,
                            section=None, hint=None, fix=None, **_ignored):
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("jitted"):
        donated, leaves = facts.get("donated", 0), facts.get("leaves", 0)
        if donated >= leaves:
            return None
        return format_failure(
            f"{name} does not donate {arg_label}", expected=f"every leaf of {short} donated",
            got=f"{donated} of {leaves} leaves donated",
            cause=hint or "jax.jit was called without donate_argnums (or donate_argnames) "
                          "for this argument",
            fix=fix or f"jax.jit({name}, donate_argnums={argnum})", section=section)
    kind = facts.get("type", "object")
    return format_failure(
        f"{name} is not a jitted function, so it cannot donate {arg_label}",
        expected="a function made by jax.jit(..., donate_argnums=...)", got=f"a plain {kind}",
        cause=hint or "donation is an option of jax.jit: a plain Python function "
                      "has no compiled program whose buffers could be reused",
        fix=fix or f"{name} = jax.jit(<your function>, donate_argnums={argnum})",
        section=section)


@explainer("donated")
def explain_donated(observed, expected, *, label, name, arg_label, short, argnum, leaves,
                    section=None, hint=None, fix=None, **_ignored):
    """Donation read from the exported program: every leaf of the argument donated, and
    aliased to an output (``tf.aliasing_output`` on its parameter)."""
    problem = explain_program(observed, expected, label=label, section=section)
    if problem:
        return problem
    facts = program_facts(observed)[0]
    kept = facts.get("kept") or list(range(len(facts.get("in_avals", []))))
    mine = [p for p, leaf in enumerate(kept) if leaves[0] <= leaf < leaves[1]]
    aliased = set(facts.get("aliased", []))
    missing = len([p for p in mine if p not in aliased])
    if missing:
        return format_failure(
            f"{name} donates {arg_label}, but XLA reuses none of its buffers"
            if missing == len(mine) else
            f"{name} donates {arg_label}, but XLA cannot reuse {missing} of its {len(mine)} "
            "buffers",
            expected=f"each leaf of {short} aliased to an output of the same shape and dtype",
            got=f"{len(mine) - missing} of {len(mine)} aliased (tf.aliasing_output in the "
                "exported program)",
            cause=hint or "a donated buffer can only be reused for an output with the same "
                          "shape and dtype: the function does not return an updated "
                          f"{short} of the same shape and dtype",
            fix=fix or f"return the updated {short} itself (same shape and dtype), e.g. "
                       "`return params - lr * grads`",
            section=section)
    return None
