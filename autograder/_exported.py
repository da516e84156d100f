"""Facts read from a program the student's function exported: named scopes and the
dtypes of its matrix products.

``jax.export.export(jax.jit(fn))(*args).mlir_module()`` is the StableHLO text of the
function, with debug locations: every op carries a name such as
``jit(step)/grad/transpose(jvp())/dot_general`` (the jit, the ``jax.named_scope``
labels, the transformations, the primitive). :func:`scope_facts` and
:func:`dot_facts` read that text only, so the trusted grader can derive the same
facts outside the student's process from the exported bytes.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

from autograder._feedback import CheckFailure, format_failure
from autograder._numeric import call_student

_LOC = re.compile(r'loc\("((?:jit|pjit)\([^"]*)"')
_TRANSFORM = re.compile(r"^[\w.]+\(.*\)$")  # jit(f), jvp(), transpose(jvp()), vmap(...)
_DOT = re.compile(r"stablehlo\.dot_general\b.*:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)"
                  r"\s*->\s*(tensor<[^>]*>)")


def exported_text(fn: Callable, args: Sequence, *, name: str | None = None,
                  section: str | None = None) -> str:
    """The StableHLO text (with locations) of ``jax.jit(fn)`` exported at ``args``.

    >>> import jax.numpy as jnp
    >>> text = exported_text(lambda x: jnp.sin(x) * 2, (jnp.ones(3),))
    >>> "stablehlo.sine" in text and '"jit(<lambda>)/sin"' in text
    True
    """
    __tracebackhide__ = True
    import jax

    label = name or getattr(fn, "__name__", "fn")

    def export():
        return jax.export.export(jax.jit(fn))(*args).mlir_module()

    export.__name__ = f"jax.export.export(jax.jit({label}))"
    text, _ = call_student(export, (), name=f"exporting {label}", section=section)
    return text


def scope_facts(text: str) -> dict[str, list[str]]:
    """``{primitive: sorted scope paths}`` from the op locations of an exported program.

    A scope path joins the ``jax.named_scope`` labels around the op (``""`` when none).

    >>> scope_facts('loc("jit(step)/grad/transpose(jvp())/dot_general") '
    ...             'loc("jit(step)/update/sub") loc("jit(step)/sub") loc("w")')
    {'dot_general': ['grad'], 'sub': ['', 'update']}
    """
    facts: dict[str, set] = {}
    for name in _LOC.findall(text):
        parts = name.split("/")
        if len(parts) < 2:
            continue
        scopes = [p for p in parts[1:-1] if not _TRANSFORM.match(p)]
        facts.setdefault(parts[-1], set()).add("/".join(scopes))
    return {prim: sorted(paths) for prim, paths in sorted(facts.items())}


def explain_scopes(facts: dict, *, required: dict[str, Sequence[str]],
                   exclusive: dict[str, str], name: str, section: str | None = None,
                   hint: str | None = None, fix: str | None = None) -> str | None:
    """Judges named scopes: each ``required[scope]`` primitive appears inside ``scope``;
    every op of an ``exclusive`` primitive lies inside its scope.

    >>> facts = {"dot_general": ["grad"], "sub": ["update"]}
    >>> explain_scopes(facts, required={"update": ["sub"]}, exclusive={"dot_general": "grad"},
    ...                name="step") is None
    True
    >>> print(explain_scopes({"dot_general": ["", "grad"], "sub": [""]},
    ...                      required={"update": ["sub"]}, exclusive={}, name="step"))
    step has no `sub` inside jax.named_scope('update')
      expected: a `sub` op labelled .../update/...
      got:      `sub` ops in scopes: (no scope)
      likely cause: the parameter update is not inside `with jax.named_scope('update'):`, or the scope has another name
      fix: wrap the parameter update in `with jax.named_scope('update'):`
    """
    for scope, prims in required.items():
        for prim in prims:
            paths = facts.get(prim, [])
            if not any(scope in p.split("/") for p in paths):
                shown = (", ".join(repr(p) if p else "(no scope)" for p in paths)
                         or f"no `{prim}` op at all")
                return format_failure(
                    f"{name} has no `{prim}` inside jax.named_scope({scope!r})",
                    expected=f"a `{prim}` op labelled .../{scope}/...",
                    got=f"`{prim}` ops in scopes: {shown}",
                    cause=hint or (f"the {_ROLE.get(scope, scope)} is not inside `with "
                                   f"jax.named_scope({scope!r}):`, or the scope has another "
                                   "name"),
                    fix=fix or (f"wrap the {_ROLE.get(scope, scope)} in `with "
                                f"jax.named_scope({scope!r}):`"),
                    section=section)
    for prim, scope in exclusive.items():
        outside = [p for p in facts.get(prim, []) if scope not in p.split("/")]
        if outside:
            return format_failure(
                f"{name} has `{prim}` ops outside jax.named_scope({scope!r})",
                expected=f"every `{prim}` labelled .../{scope}/...",
                got="also in scopes: " + ", ".join(repr(p) for p in outside),
                cause=hint or (f"part of the {_ROLE.get(scope, scope)} runs outside the "
                               "scope, so a profile would not attribute its time to it"),
                fix=fix or f"put all of the {_ROLE.get(scope, scope)} inside the scope",
                section=section)
    return None


_ROLE = {"update": "parameter update", "grad": "gradient computation (forward and backward)"}


def assert_named_scopes(fn: Callable, args: Sequence, *, required: dict, exclusive: dict,
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None, name: str | None = None) -> dict:
    """Exports ``jax.jit(fn)`` at ``args`` and judges its named scopes.

    >>> import jax, jax.numpy as jnp
    >>> def step(w, x):
    ...     with jax.named_scope("grad"):
    ...         g = jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)
    ...     with jax.named_scope("update"):
    ...         return w - 0.1 * g
    >>> facts = assert_named_scopes(step, (jnp.ones(3), jnp.ones((2, 3))),
    ...                             required={"update": ["sub"]},
    ...                             exclusive={"dot_general": "grad"})
    >>> facts["sub"]
    ['update']
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    facts = scope_facts(exported_text(fn, args, name=label, section=section))
    message = explain_scopes(facts, required=required, exclusive=exclusive, name=label,
                             section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")
    return facts


# ------------------------------------------------------------------ matrix products

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


def explain_dots(facts: list, *, operands: str, result: str | None, name: str,
                 section: str | None = None, hint: str | None = None,
                 fix: str | None = None) -> str | None:
    """Every matrix product must take ``operands``-typed inputs and give ``result``
    (``result=None``: any result dtype).

    >>> explain_dots([("bf16", "bf16", "f32")], operands="bf16", result="f32", name="f") is None
    True
    >>> print(explain_dots([("f32", "f32", "f32")], operands="bf16", result="f32", name="f"))
    f multiplies f32 x f32 -> f32, not bf16 x bf16 -> f32
      expected: every dot_general: (bf16, bf16) -> f32
      got:      [('f32', 'f32', 'f32')]
      likely cause: the inputs were converted to float32 before the product: that doubles the memory and bandwidth they need
      fix: keep the inputs in bf16 and ask for a f32 result: jnp.dot(a, b, preferred_element_type=jnp.float32)
    """
    if not facts:
        return format_failure(f"{name} computes no matrix product (no dot_general)",
                              expected=f"a dot_general ({operands}, {operands}) -> {result}",
                              got="none", fix="use jnp.dot, jnp.matmul, @ or jnp.einsum",
                              section=section)
    bad = [f for f in facts
           if f[:2] != (operands, operands) or (result is not None and f[2] != result)]
    if not bad:
        return None
    lhs, rhs, res = bad[0]
    want = f"({operands}, {operands}) -> {result or 'any dtype'}"
    if result is not None and res != result:
        cause = (f"the product returns {res}: without preferred_element_type the result "
                 "has the inputs' dtype, so every partial sum is rounded to it")
    else:
        cause = (f"the inputs were converted to {'float32' if lhs == 'f32' else lhs} before "
                 "the product: that doubles the memory and bandwidth they need")
    return format_failure(
        f"{name} multiplies {lhs} x {rhs} -> {res}, not {operands} x {operands} -> "
        f"{result or 'any dtype'}",
        expected=f"every dot_general: {want}",
        got=str(bad[:3]), cause=hint or cause,
        fix=fix or (f"keep the inputs in {operands} and ask for a {result} result: "
                    "jnp.dot(a, b, preferred_element_type=jnp.float32)" if result else
                    f"cast the inputs of the product to {operands} and keep them there"),
        section=section)


def assert_dot_dtypes(fn: Callable, args: Sequence, *, operands: str, result: str | None,
                      section: str | None = None, hint: str | None = None,
                      fix: str | None = None, name: str | None = None) -> list:
    """Exports ``jax.jit(fn)`` at ``args``; every dot_general must be
    ``(operands, operands) -> result`` (dtype names as in StableHLO: bf16, f16, f32).

    >>> import jax.numpy as jnp
    >>> a = jnp.ones((2, 3), jnp.bfloat16)
    >>> _ = assert_dot_dtypes(lambda a: jnp.dot(a, a.T, preferred_element_type=jnp.float32),
    ...                       (a,), operands="bf16", result="f32")
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    facts = dot_facts(exported_text(fn, args, name=label, section=section))
    message = explain_dots(facts, operands=operands, result=result, name=label,
                           section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")
    return facts
