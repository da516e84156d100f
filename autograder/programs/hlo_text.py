"""Is a text the compiler form the exercise asks for: StableHLO or optimized HLO.

Students print ``lowered.as_text()`` and ``compiled.as_text()``; these checks tell the
forms apart from their headers and ops (a jaxpr, HLO before optimization, StableHLO,
scheduled HLO) and name the call that gives the right one.
"""
from __future__ import annotations

import re
from typing import Sequence

from autograder.core.check import Check, explainer, run
from autograder.core.feedback import describe_value, format_failure
from autograder.programs.hlo import _STABLEHLO_OP, _op_name, count_stablehlo_ops

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
    >>> from autograder import stablehlo_text
    >>> assert_is_stablehlo(stablehlo_text(jnp.sin, (jnp.ones(2),)), ops=["sine"])
    >>> assert_is_stablehlo(str(jax.make_jaxpr(jnp.sin)(jnp.ones(2))), name="stablehlo")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: stablehlo is not StableHLO
      expected: StableHLO (lowered.as_text())
      got:      a jaxpr (the output of jax.make_jaxpr or .trace(...).jaxpr)
      likely cause: a jaxpr is JAX's own program; StableHLO is what lowering produces from it
      fix: jax.jit(f).lower(*args).as_text()
    """
    __tracebackhide__ = True
    run(Check("is_stablehlo", name, observe=lambda: _as_text(text), observe_as="facts",
              params=dict(ops=[_op_name(op) for op in ops], section=section)))


def _as_text(text) -> dict:
    """A student's text as a fact (capped), or what it was instead."""
    if isinstance(text, str):
        return {"text": text[:100_000]}
    return {"not_text": describe_value(text)}


@explainer("is_stablehlo")
def explain_is_stablehlo(observed, expected, *, label: str, ops=(), section=None,
                         **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if "text" not in facts:
        return format_failure(
            f"{label} is not a string", expected="a str (StableHLO text)",
            got=str(facts.get("not_text", "?")),
            fix="call .as_text() on the Lowered object: jax.jit(f).lower(*args).as_text()",
            section=section)
    text = facts["text"]
    kind = _text_kind(text)
    if kind != "stablehlo":
        cause = {
            "jaxpr": "a jaxpr is JAX's own program; StableHLO is what lowering produces from it",
            "hlo": "this is XLA's HLO, not StableHLO",
            "optimized-hlo": "this is the optimized HLO of the compiled program: compiling "
                             "comes after lowering",
        }.get(kind, "the text does not contain a `func.func` with `stablehlo.` ops")
        return format_failure(f"{label} is not StableHLO", expected=_KIND_NAMES["stablehlo"],
                              got=_KIND_NAMES[kind], cause=cause,
                              fix="jax.jit(f).lower(*args).as_text()", section=section)
    counts = count_stablehlo_ops(text)
    missing = [op for op in ops if counts[op] == 0]
    if missing:
        return format_failure(
            f"{label} is StableHLO, but not of the function asked for",
            expected="ops " + ", ".join(f"`stablehlo.{m}`" for m in missing),
            got="ops used: " + ", ".join(sorted(counts)),
            cause="it was lowered from another function or for other inputs",
            fix="lower the function you were given, with the arguments you were given",
            section=section)
    return None


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
    autograder.core.feedback.CheckFailure: hlo is not the optimized HLO
      expected: optimized HLO (compiled.as_text())
      got:      HLO before optimization (lowered.as_text(dialect='hlo'))
      likely cause: the program was printed before XLA compiled (and optimized) it
      fix: jax.jit(f).lower(*args).compile().as_text()
    """
    __tracebackhide__ = True
    needs_mark = reference is None or _text_kind(reference) == "optimized-hlo"
    run(Check("is_optimized_hlo", name, observe=lambda: _as_text(text), observe_as="facts",
              params=dict(needs_mark=needs_mark, section=section)))


@explainer("is_optimized_hlo")
def explain_is_optimized_hlo(observed, expected, *, label: str, needs_mark: bool = True,
                             section=None, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if "text" not in facts:
        return format_failure(
            f"{label} is not a string", expected="a str (optimized HLO text)",
            got=str(facts.get("not_text", "?")),
            fix="call .as_text() on the Compiled object: "
                "jax.jit(f).lower(*args).compile().as_text()", section=section)
    kind = _text_kind(facts["text"])
    if kind == "optimized-hlo" or (kind == "hlo" and not needs_mark):
        return None
    cause = {
        "hlo": "the program was printed before XLA compiled (and optimized) it",
        "stablehlo": "StableHLO is the input of the compiler, not its output",
        "jaxpr": "a jaxpr is JAX's own program, two steps before the compiled one",
    }.get(kind, "the text does not start with an `HloModule` header")
    return format_failure(f"{label} is not the optimized HLO",
                          expected=_KIND_NAMES["optimized-hlo"], got=_KIND_NAMES[kind],
                          cause=cause, fix="jax.jit(f).lower(*args).compile().as_text()",
                          section=section)
