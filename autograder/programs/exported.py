"""Facts read from a program the student's function exported: named scopes and the
dtypes of its matrix products.

``jax.export.export(jax.jit(fn))(*args).mlir_module()`` is the StableHLO text of the
function, with debug locations: every op carries a name such as
``jit(step)/grad/transpose(jvp())/dot_general`` (the jit, the ``jax.named_scope``
labels, the transformations, the primitive). Both checks here are *exported-program
facts*: the student's function is exported (:func:`autograder.programs.artifacts.programs_of`)
and the facts are derived from the program's bytes by the program judge, outside the
student's process (in the student's kernel, in place): the op locations
(``locations``, read by :func:`scope_facts`) and the operand and result types of each
``dot_general`` (``dots``, :func:`dot_facts`). The judge also runs the program on the
grader's inputs, so a program of some other function earns nothing.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from autograder.programs.artifacts import explain_program, program_facts, programs_of
from autograder.core.check import Check, explainer, run
from autograder.core.feedback import format_failure
from autograder.programs.text import dot_facts, scope_facts


def exported_text(fn: Callable, args: Sequence, *, name: str | None = None,
                  section: str | None = None) -> str:
    """The StableHLO text (with locations) of ``jax.jit(fn)`` exported at ``args``.

    >>> import jax.numpy as jnp
    >>> text = exported_text(lambda x: jnp.sin(x) * 2, (jnp.ones(3),))
    >>> "stablehlo.sine" in text and '"jit(<lambda>)/sin"' in text
    True
    """
    del name, section  # kept for the notebooks' calls: a lesson helper, not a check
    import jax

    return jax.export.export(jax.jit(fn))(*args).mlir_module()


def explain_scopes(facts: dict, *, required: dict[str, Sequence[str]],
                   exclusive: dict[str, str], name: str, section: str | None = None,
                   hint: str | None = None, fix: str | None = None,
                   at_most: dict[str, dict[str, int]] | None = None,
                   counts: Sequence[Sequence] = ()) -> str | None:
    """Judges named scopes: each ``required[scope]`` primitive appears inside ``scope``
    (``"sub|add"``: one of them, for maths that may be written either way); every op of
    an ``exclusive`` primitive lies inside its scope; ``at_most[scope][ops]``: the scope
    holds at most that many operations on arrays among ``ops`` (StableHLO names,
    ``"multiply|divide"``), counted in ``counts`` (:func:`autograder.programs.text.scope_op_counts`).

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
            options = prim.split("|")
            paths = [p for option in options for p in facts.get(option, [])]
            if not any(scope in p.split("/") for p in paths):
                shown = (", ".join(repr(p) if p else "(no scope)" for p in paths)
                         or f"no `{prim}` op at all")
                prim = " or ".join(f"`{o}`" for o in options)
                return format_failure(
                    f"{name} has no {prim} inside jax.named_scope({scope!r})",
                    expected=f"a {prim} op labelled .../{scope}/...",
                    got=f"{prim} ops in scopes: {shown}",
                    cause=hint or (f"the {_ROLE.get(scope, scope)} is not inside `with "
                                   f"jax.named_scope({scope!r}):`, or the scope has another "
                                   "name"),
                    fix=fix or (f"wrap the {_ROLE.get(scope, scope)} in `with "
                                f"jax.named_scope({scope!r}):`"),
                    section=section)
    for scope, limits in (at_most or {}).items():
        for ops, limit in limits.items():
            names = ops.split("|")
            found = sum(int(n) for path, op, n in counts
                        if op in names and scope in str(path).split("/"))
            if found > limit:
                shown = " or ".join(f"`{o}`" for o in names)
                return format_failure(
                    f"{name} does more arithmetic inside jax.named_scope({scope!r}) than "
                    f"the {_ROLE.get(scope, scope)} itself",
                    expected=f"at most {limit} {shown} op(s) on arrays there",
                    got=f"{found}",
                    cause=hint or (f"part of another computation (a factor of the gradient, "
                                   f"its mean's 1/n) moved into the {_ROLE.get(scope, scope)}"),
                    fix=fix or f"keep only the {_ROLE.get(scope, scope)} inside the scope",
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
                        fix: str | None = None, name: str | None = None,
                        at_most: dict | None = None,
                        hands_over: tuple[str, str] | None = None,
                        reference: Callable | None = None) -> None:
    """Exports ``jax.jit(fn)`` at ``args`` and judges its named scopes.

    ``required``: ``{scope: [primitives]}``, each primitive must appear inside that
    scope; ``exclusive``: ``{primitive: scope}``, every op of the primitive must lie
    inside the scope; ``at_most``: ``{scope: {"multiply|divide": n}}``, the scope holds
    at most ``n`` of those operations on arrays (StableHLO names; a scalar's arithmetic,
    such as a learning rate's, is not counted); ``hands_over=(source, target)``: every
    float array that the reference's scope ``source`` hands to its scope ``target`` is
    also among what the submission's ``source`` hands to its ``target`` (values on the
    grader's inputs, up to sign: :func:`explain_handover`), where ``reference`` is a
    function with those scopes written the intended way (the test cell's own, exported
    at the same ``args`` wherever the check runs, so that the student's test cell and
    the grade agree). Returns nothing: the facts are derived from the exported program
    (outside the student's process when grading).

    >>> import jax, jax.numpy as jnp
    >>> def step(w, x):
    ...     with jax.named_scope("grad"):
    ...         g = jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)
    ...     with jax.named_scope("update"):
    ...         return w - 0.1 * g
    >>> assert_named_scopes(step, (jnp.ones(3), jnp.ones((2, 3))),
    ...                     required={"update": ["sub"]}, exclusive={"dot_general": "grad"})
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    if hands_over and reference is None:
        raise TypeError("assert_named_scopes(hands_over=...) needs reference=, a function "
                        "with the scopes written the intended way")
    expect = (lambda: programs_of((reference, tuple(args), None))) if hands_over else None
    run(Check("named_scopes", label, observe=lambda: programs_of((fn, tuple(args), None)),
              observe_as="artifact", expect=expect, expect_as="artifact",
              params=dict(required={k: list(v) for k, v in required.items()},
                          exclusive=dict(exclusive), section=section, hint=hint, fix=fix,
                          at_most={k: dict(v) for k, v in (at_most or {}).items()},
                          **({"handover": list(hands_over)} if hands_over else {}))))


def _program(observed, expected, label, section) -> tuple[str | None, dict]:
    problem = explain_program(observed, expected, label=label, section=section)
    return problem, (program_facts(observed)[0] if not problem else {})


@explainer("named_scopes")
def _explain_scopes(observed, expected, *, label: str, required: dict, exclusive: dict,
                    section=None, hint=None, fix=None, at_most=None, handover=None,
                    **_ignored) -> str | None:
    problem, facts = _program(observed, expected, label, section)
    if problem:
        return problem
    text = " ".join(f'loc("{name}")' for name in facts.get("locations", []))
    problem = explain_scopes(scope_facts(text), required=required, exclusive=exclusive,
                             name=label, section=section, hint=hint, fix=fix,
                             at_most=at_most, counts=facts.get("scope_ops") or [])
    if problem or not handover or expected is None:
        return problem
    reference = (program_facts(expected) or [{}])[0].get("handover")
    return explain_handover(facts.get("handover"), reference, source=handover[0],
                            target=handover[1], name=label, section=section)


def explain_handover(observed, reference, *, source: str, target: str, name: str,
                     section: str | None = None, rtol: float = 1e-4,
                     atol: float = 1e-5) -> str | None:
    """Each float array (not a scalar) that the reference's scope ``source`` hands to
    its scope ``target`` must be among what the submission's hands over, up to sign
    (``-g`` handed to ``w + lr * g`` is the same split of the work) and up to shape (the
    same elements as a column or a row): the gradient's
    scope hands the update the gradient, not a multiple of it whose factor was folded
    into the learning rate. ``observed``/``reference``: the ``handover`` facts
    (:func:`autograder.programs.scope_handover.handover_values`).

    >>> g = {"shape": [2], "dtype": "float32", "values": [1.0, -2.0]}
    >>> explain_handover([g], [g], source="grad", target="update", name="step") is None
    True
    >>> half = dict(g, values=[0.5, -1.0])
    >>> print(explain_handover([half], [g], source="grad", target="update", name="step"))
    step's scope 'update' does not read from scope 'grad' what the reference's does
      expected: a float32 (2,) array equal to the one the reference's 'grad' hands over (up to sign): [1, -2]
      got:      float32 (2,): [0.5, -1]
      likely cause: part of the gradient computation (forward and backward) lies outside jax.named_scope('grad'): a factor (such as a mean's 1/n) applied in the parameter update or folded into a scalar
      fix: compute all of the gradient computation (forward and backward) inside jax.named_scope('grad') and hand its result to the parameter update as it is
    """
    if not isinstance(reference, list):
        return None  # the reference's program could not be rewritten: nothing to compare
    role, user = _ROLE.get(source, source), _ROLE.get(target, target)
    if not isinstance(observed, list):
        return format_failure(
            f"the grader could not read what {name}'s scope {target!r} reads from {source!r}",
            got=str((observed or {}).get("error") if isinstance(observed, dict) else observed),
            section=section)

    def shown(entry) -> str:
        values = entry.get("values")
        body = ("[" + ", ".join(f"{v:.6g}" for v in values[:4])
                + (", ..." if len(values) > 4 else "") + "]") if values else "(too large)"
        return f"{entry['dtype']} {tuple(entry['shape'])}: {body}"

    for want in reference:
        if not want.get("shape") or want.get("values") is None:
            continue  # a scalar (a learning rate converted inside a scope) or too large
        expect = np.asarray(want["values"])
        tol = atol * max(1.0, float(np.max(np.abs(expect), initial=0.0)))
        # The same elements in any shape: a gradient computed as an (n, 1) column and
        # squeezed in the update is the same split of the work.
        if any(got.get("values") is not None and len(got["values"]) == expect.size
               and any(np.allclose(sign * np.asarray(got["values"]), expect, rtol=rtol, atol=tol)
                       for sign in (1.0, -1.0))
               for got in observed):
            continue
        return format_failure(
            f"{name}'s scope {target!r} does not read from scope {source!r} what the "
            "reference's does",
            expected=(f"a {want['dtype']} {tuple(want['shape'])} array equal to the one "
                      f"the reference's {source!r} hands over (up to sign): "
                      + shown(want).split(": ", 1)[1]),
            got="; ".join(shown(g) for g in observed[:4]) or "nothing",
            cause=(f"part of the {role} lies outside jax.named_scope({source!r}): a factor "
                   f"(such as a mean's 1/n) applied in the {user} or folded into a scalar"),
            fix=(f"compute all of the {role} inside jax.named_scope({source!r}) and hand "
                 f"its result to the {user} as it is"),
            section=section)
    return None


# ------------------------------------------------------------------ matrix products

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
                      fix: str | None = None, name: str | None = None) -> None:
    """Exports ``jax.jit(fn)`` at ``args``; every dot_general must be
    ``(operands, operands) -> result`` (dtype names as in StableHLO: bf16, f16, f32).

    >>> import jax.numpy as jnp
    >>> a = jnp.ones((2, 3), jnp.bfloat16)
    >>> assert_dot_dtypes(lambda a: jnp.dot(a, a.T, preferred_element_type=jnp.float32),
    ...                       (a,), operands="bf16", result="f32")
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    run(Check("dot_dtypes", label, observe=lambda: programs_of((fn, tuple(args), None)),
              observe_as="artifact",
              params=dict(operands=operands, result=result, section=section, hint=hint,
                          fix=fix)))


@explainer("dot_dtypes")
def _explain_dots(observed, expected, *, label: str, operands: str, result=None,
                  section=None, hint=None, fix=None, **_ignored) -> str | None:
    problem, facts = _program(observed, expected, label, section)
    if problem:
        return problem
    dots = [tuple(str(t) for t in d) for d in facts.get("dots", [])]
    return explain_dots(dots, operands=operands, result=result, name=label,
                        section=section, hint=hint, fix=fix)
