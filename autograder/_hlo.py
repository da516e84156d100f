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

    from autograder._numeric import call_student

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
    holding one copy of its body, a Python ``for`` loop to N copies of the body.

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
    autograder._feedback.CheckFailure: the StableHLO of unrolled(x=f32[3]) has 8 `stablehlo.sine` ops
      expected: at most 1 `stablehlo.sine`
      got:      8 `stablehlo.sine`
      likely cause: the computation was repeated in the program: a Python loop inside a jitted function is unrolled at trace time, one copy of its body per iteration
      fix: write the loop with jax.lax.fori_loop or jax.lax.scan, which lower to one `stablehlo.while` with one copy of the body
    """
    __tracebackhide__ = True
    from autograder._feedback import call_signature, fail

    if at_most is None and at_least is None:
        raise ValueError("give at_most, at_least or both")
    label = call_signature(fn, args, kwargs)
    name = _op_name(op)
    text = _lowered(fn, args, kwargs, label, section).as_text()
    counts = count_stablehlo_ops(text)
    n = counts[name]
    shown = f"`stablehlo.{name}`"
    if at_most is not None and n > at_most:
        fail(f"the StableHLO of {label} has {n} {shown} ops", rung="structure",
             expected=f"at most {at_most} {shown}", got=f"{n} {shown}",
             cause=hint or "the computation was repeated in the program: a Python loop "
                           "inside a jitted function is unrolled at trace time, one copy "
                           "of its body per iteration",
             fix=fix or "write the loop with jax.lax.fori_loop or jax.lax.scan, which lower "
                        "to one `stablehlo.while` with one copy of the body",
             section=section)
    if at_least is not None and n < at_least:
        # Ops of the stablehlo dialect only (the module's mhlo.* attributes are no ops).
        ops = Counter(re.findall(r"\bstablehlo\.([a-z_][a-z0-9_]*)\b", text))
        used = ", ".join(f"{k} x{v}" for k, v in ops.most_common(8))
        fail(f"the StableHLO of {label} has {n} {shown} ops", rung="structure",
             expected=f"at least {at_least} {shown}", got=f"{n} {shown} (most used: {used})",
             cause=hint or f"the program does not contain {shown}: the operation the "
                           "exercise asks for is not used (or was written another way)",
             fix=fix, section=section)


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
    autograder._feedback.CheckFailure: sgd does not donate argument 0 (`p`)
      expected: every leaf of `p` donated
      got:      0 of 1 leaves donated
      likely cause: jax.jit was called without donate_argnums (or donate_argnames) for this argument
      fix: jax.jit(sgd, donate_argnums=0)
    """
    __tracebackhide__ = True
    import jax

    from autograder._feedback import call_signature, fail
    from autograder._quiet import quiet

    name = getattr(fn, "__name__", None) or type(fn).__name__
    label = call_signature(fn, args, kwargs)
    try:
        import inspect

        params = [p.name for p in inspect.signature(fn).parameters.values()]
        arg_label = f"argument {argnum} (`{params[argnum]}`)"
        short = f"`{params[argnum]}`"
    except (TypeError, ValueError, IndexError):
        arg_label, short = f"argument {argnum}", f"argument {argnum}"
    if not hasattr(fn, "lower"):
        fail(f"{name} is not a jitted function, so it cannot donate {arg_label}",
             rung="type", expected="a function made by jax.jit(..., donate_argnums=...)",
             got=f"a plain {type(fn).__name__}",
             cause=hint or "donation is an option of jax.jit: a plain Python function "
                           "has no compiled program whose buffers could be reused",
             fix=fix or f"{name} = jax.jit(<your function>, donate_argnums={argnum})",
             section=section)
    lowered = _lowered(fn, args, kwargs, label, section)
    info = jax.tree.leaves(lowered.args_info[0][argnum])
    donated = sum(bool(a.donated) for a in info)
    if donated < len(info):
        fail(f"{name} does not donate {arg_label}", rung="structure",
             expected=f"every leaf of {short} donated",
             got=f"{donated} of {len(info)} leaves donated",
             cause=hint or "jax.jit was called without donate_argnums (or donate_argnames) "
                           "for this argument",
             fix=fix or f"jax.jit({name}, donate_argnums={argnum})", section=section)
    # Compiling an unusable donation warns ("Some donated buffers were not usable"):
    # keep it off stderr, the failure below says it better.
    with quiet():
        hlo = lowered.compile().as_text()
    aliased = set(collect_aliased_parameters(hlo))
    flat_args = [jax.tree.leaves(a) for a in args]
    start = sum(len(leaves) for leaves in flat_args[:argnum])
    mine = set(range(start, start + len(flat_args[argnum])))
    kept = _kept_leaves(lowered, sum(len(leaves) for leaves in flat_args))
    params_of_mine = {p for p, leaf in enumerate(kept) if leaf in mine}
    missing = len(params_of_mine - aliased)
    if missing:
        fail(f"{name} donates {arg_label}, but XLA reuses none of its buffers"
             if missing == len(params_of_mine) else
             f"{name} donates {arg_label}, but XLA cannot reuse {missing} of its "
             f"{len(params_of_mine)} buffers", rung="structure",
             expected=f"each leaf of {short} aliased to an output of the same shape and dtype",
             got=f"{len(params_of_mine) - missing} of {len(params_of_mine)} aliased "
                 "(input_output_alias in the compiled HLO)",
             cause=hint or "a donated buffer can only be reused for an output with the same "
                           "shape and dtype: the function does not return an updated "
                           f"{short} of the same shape and dtype",
             fix=fix or f"return the updated {short} itself (same shape and dtype), e.g. "
                        "`return params - lr * grads`",
             section=section)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _text_kind(text: str) -> str:
    """What a compiler text looks like: stablehlo, hlo, optimized-hlo, jaxpr or other."""
    # Jaxprs printed in a notebook carry terminal colour codes: drop them first.
    stripped = _ANSI.sub("", text).lstrip()
    if stripped.startswith("{ lambda") or stripped.startswith("let"):
        return "jaxpr"
    if stripped.startswith("HloModule"):
        header = stripped.splitlines()[0]
        return "optimized-hlo" if "is_scheduled=true" in header else "hlo"
    if "func.func" in text and _STABLEHLO_OP.search(text):
        return "stablehlo"
    return "other"


_KIND_NAMES = {
    "jaxpr": "a jaxpr (the output of jax.make_jaxpr or .trace(...).jaxpr)",
    "hlo": "HLO before optimization (lowered.as_text(dialect='hlo'))",
    "optimized-hlo": "optimized HLO (compiled.as_text())",
    "stablehlo": "StableHLO (lowered.as_text())",
    "other": "text that is neither a jaxpr, StableHLO nor HLO",
}


def assert_is_stablehlo(text, *, name: str = "the text", ops: Sequence[str] = (),
                        section: str | None = None) -> None:
    """Asserts that ``text`` is a StableHLO module (``jax.jit(f).lower(x).as_text()``).

    Args:
      text: the student's string.
      name: how the message names it.
      ops: op names that must appear (``"sine"`` or ``"stablehlo.sine"``): the
        module must be the lowering of the right function.
      section: the section to reread.

    >>> import jax, jax.numpy as jnp
    >>> assert_is_stablehlo(stablehlo_text(jnp.sin, (jnp.ones(2),)), ops=["sine"])
    >>> assert_is_stablehlo(str(jax.make_jaxpr(jnp.sin)(jnp.ones(2))), name="stablehlo")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: stablehlo is not StableHLO
      expected: StableHLO (lowered.as_text())
      got:      a jaxpr (the output of jax.make_jaxpr or .trace(...).jaxpr)
      likely cause: a jaxpr is JAX's own program; StableHLO is what lowering produces from it
      fix: jax.jit(f).lower(*args).as_text()
    """
    __tracebackhide__ = True
    from autograder._feedback import describe_value, fail

    if not isinstance(text, str):
        fail(f"{name} is not a string", rung="type", expected="a str (StableHLO text)",
             got=describe_value(text),
             fix="call .as_text() on the Lowered object: jax.jit(f).lower(*args).as_text()",
             section=section)
    kind = _text_kind(text)
    if kind != "stablehlo":
        cause = {
            "jaxpr": "a jaxpr is JAX's own program; StableHLO is what lowering produces from it",
            "hlo": "this is XLA's HLO, not StableHLO",
            "optimized-hlo": "this is the optimized HLO of the compiled program: compiling "
                             "comes after lowering",
        }.get(kind, "the text does not contain a `func.func` with `stablehlo.` ops")
        fail(f"{name} is not StableHLO", rung="type", expected=_KIND_NAMES["stablehlo"],
             got=_KIND_NAMES[kind], cause=cause, fix="jax.jit(f).lower(*args).as_text()",
             section=section)
    counts = count_stablehlo_ops(text)
    missing = [_op_name(op) for op in ops if counts[_op_name(op)] == 0]
    if missing:
        fail(f"{name} is StableHLO, but not of the function asked for", rung="values",
             expected="ops " + ", ".join(f"`stablehlo.{m}`" for m in missing),
             got="ops used: " + ", ".join(sorted(counts)),
             cause="it was lowered from another function or for other inputs",
             fix="lower the function you were given, with the arguments you were given",
             section=section)


def assert_is_optimized_hlo(text, *, name: str = "the text", reference: str | None = None,
                            section: str | None = None) -> None:
    """Asserts that ``text`` is the optimized HLO of a compiled program.

    Optimized HLO (``jax.jit(f).lower(x).compile().as_text()``) starts with an
    ``HloModule`` header that XLA marks ``is_scheduled=true`` after its passes ran;
    HLO printed before compiling (``lowered.as_text(dialect="hlo")``) has no such mark.
    Pass ``reference`` (the reference's compiled text) to require the mark only where
    the backend prints it.

    >>> import jax, jax.numpy as jnp
    >>> lowered = jax.jit(jnp.sin).lower(jnp.ones(2))
    >>> assert_is_optimized_hlo(lowered.compile().as_text())
    >>> assert_is_optimized_hlo(lowered.as_text(dialect="hlo"), name="hlo")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: hlo is not the optimized HLO
      expected: optimized HLO (compiled.as_text())
      got:      HLO before optimization (lowered.as_text(dialect='hlo'))
      likely cause: the program was printed before XLA compiled (and optimized) it
      fix: jax.jit(f).lower(*args).compile().as_text()
    """
    __tracebackhide__ = True
    from autograder._feedback import describe_value, fail

    if not isinstance(text, str):
        fail(f"{name} is not a string", rung="type", expected="a str (optimized HLO text)",
             got=describe_value(text),
             fix="call .as_text() on the Compiled object: "
                 "jax.jit(f).lower(*args).compile().as_text()", section=section)
    kind = _text_kind(text)
    needs_mark = reference is None or _text_kind(reference) == "optimized-hlo"
    if kind == "optimized-hlo" or (kind == "hlo" and not needs_mark):
        return
    cause = {
        "hlo": "the program was printed before XLA compiled (and optimized) it",
        "stablehlo": "StableHLO is the input of the compiler, not its output",
        "jaxpr": "a jaxpr is JAX's own program, two steps before the compiled one",
    }.get(kind, "the text does not start with an `HloModule` header")
    fail(f"{name} is not the optimized HLO", rung="type", expected=_KIND_NAMES["optimized-hlo"],
         got=_KIND_NAMES[kind], cause=cause, fix="jax.jit(f).lower(*args).compile().as_text()",
         section=section)
