"""Control flow under tracing: jit-compatibility and static arguments.

Three questions a control-flow exercise asks of a student's function, in three
modules:

- Does it work under ``jax.jit`` with traced arguments, and are its settings static?
  (here) A Python ``if`` on a traced value raises ``TracerBoolConversionError``, a
  traced ``range(n)`` a ``TracerIntegerConversionError``; the message names the
  construct and the fix instead of repeating JAX's error
  (:mod:`autograder.core.tracing`).
- Is its loop compiled as a loop? (:mod:`autograder.control_flow.loop_facts`)
- Do gradients through the loop match finite differences?
  (:mod:`autograder.control_flow.loop_grads`)

Where the facts come from:

- ``assert_works_under_jit``: values (the jitted result against the reference);
- ``assert_jitted_with_static``: whether ``fn`` is a ``jax.jit`` function is an
  **in-process** fact (a property of the Python object, read by its type, not its
  attributes: no program shows it, since a plain function is jitted when exported);
  which arguments are traced is read from the **exported program** (its inputs,
  ``in_avals``: static arguments are not inputs of the program).
"""
from __future__ import annotations

import inspect
import re
from typing import Callable, Sequence

from autograder.programs.artifacts import (TIE_TOLERANCE, explain_program, program_facts,
                                   program_sides, programs_of)
from autograder.core.check import Check, call, explainer, run
from autograder.core.tracing import is_jit_function
from autograder.core.feedback import call_signature, format_failure, short_dtype
from autograder.core.numeric import explain_tree
from autograder.core.tracing import explain_jit_error


def _bind_static(fn: Callable, args: Sequence, static_argnums: Sequence[int]):
    """``(bound, dynamic_args, dynamic_positions)``, with ``bound(*dynamic_args) == fn(*args)``.

    The arguments at ``static_argnums`` are closed over, so they stay Python values.

    ``bound`` carries the names of ``fn``'s dynamic parameters, so messages about
    gradients name ``k`` or ``params['W']`` rather than ``arg1``.
    """
    static = {i % len(args) for i in static_argnums} if args else set()
    dyn_idx = [i for i in range(len(args)) if i not in static]
    fixed = list(args)

    def bound(*dyn):
        full = list(fixed)
        for i, v in zip(dyn_idx, dyn):
            full[i] = v
        return fn(*full)

    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    dyn_names = [names[i] if i < len(names) else f"arg{i}" for i in dyn_idx]
    bound.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in dyn_names])
    bound.__name__ = getattr(fn, "__name__", "fn")
    return bound, tuple(args[i] for i in dyn_idx), dyn_idx


# ---------------------------------------------------------------------- under jit

def assert_works_under_jit(fn: Callable, args: Sequence = (), kwargs: dict | None = None,
                           *, static_argnums: Sequence[int] = (),
                           static_argnames: Sequence[str] = (),
                           reference: Callable | None = None, rtol: float = 1e-5,
                           atol: float = 1e-6, name: str | None = None,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None):
    """Asserts that ``jax.jit(fn)`` runs with traced arguments (and matches a reference).

    Every argument not listed in ``static_argnums`` / ``static_argnames`` is traced,
    so a Python ``if`` on it, ``range`` over it or a shape taken from it fails; the
    message names the construct and its fix.

    Args:
      fn: the student's function (jitted already or not).
      args, kwargs: the inputs.
      static_argnums, static_argnames: the arguments the exercise allows to be static.
      reference: if given, the result must match ``reference(*args, **kwargs)``.
      rtol, atol: value tolerances for the comparison.
      name: how to name the call in messages.
      section, hint, fix: as in :func:`autograder.assert_tree_matches` (used for the
        value comparison).

    Returns:
      The result of the jitted call.

    >>> import jax.numpy as jnp
    >>> def relu(x):
    ...     return jnp.where(x > 0, x, 0.0)
    >>> assert_works_under_jit(relu, (jnp.array([-1.0, 2.0]),))
    Array([0., 2.], dtype=float32)
    >>> def relu_if(x):
    ...     if x > 0:
    ...         return x
    ...     return 0.0
    >>> assert_works_under_jit(relu_if, (1.0,), section="1.2")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: relu_if(x=float 1.0) fails under jax.jit: TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].
      likely cause: a Python `if`, `while`, `and`/`or`/`not` or `bool(...)` on a traced value: under jit its value is unknown while your Python code runs
      fix: use jnp.where for elementwise choices, lax.cond / lax.switch for branches, lax.while_loop for loops; or mark the argument static if it is a setting, not data
      reread: section 1.2
    """
    __tracebackhide__ = True
    import jax

    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)

    def observe():
        if not callable(fn):
            return call(fn)
        jitted = jax.jit(fn, static_argnums=tuple(static_argnums),
                         static_argnames=tuple(static_argnames))
        return call(jitted, args, kwargs)

    return run(Check("under_jit", label, observe=observe,
                     expect=None if reference is None else (lambda: reference(*args, **kwargs)),
                     params=dict(rtol=rtol, atol=atol, section=section, hint=hint, fix=fix)))


@explainer("under_jit", errors=True)
def explain_under_jit(observed, expected, *, label: str, rtol: float = 1e-5,
                      atol: float = 1e-6, section: str | None = None, hint: str | None = None,
                      fix: str | None = None, **_ignored) -> str | None:
    """A tracing error explained; else the value ladder against the reference, if any."""
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="under jax.jit", section=section)
    if expected is None:
        return None  # no reference: running under jit is the whole check
    return explain_tree(observed, expected, label=f"{label} under jax.jit", rtol=rtol,
                        atol=atol, section=section, hint=hint, fix=fix)


# ---------------------------------------------------------------- static arguments

def assert_jitted_with_static(fn: Callable, args: Sequence = (),
                              kwargs: dict | None = None, *, static: Sequence[str],
                              section: str | None = None):
    """Asserts that ``fn`` is a ``jax.jit``-wrapped function whose ``static`` arguments
    are static (compile-time constants), not traced inputs.

    Two facts, in order: ``fn`` is a function made by ``jax.jit`` (its type), and the
    program exported from it for this call takes the other arguments only as inputs.

    Args:
      fn: the student's function, e.g. ``jax.jit(pool, static_argnames=("size",))``.
      args, kwargs: a call in which the ``static`` arguments are passed by keyword.
      static: the names of the arguments that must be static.
      section: the lesson section to reread.

    >>> import functools, jax, jax.numpy as jnp
    >>> @functools.partial(jax.jit, static_argnames="n")
    ... def tile(x, n):
    ...     return jnp.concatenate([x] * n)
    >>> assert_jitted_with_static(tile, (jnp.ones(2),), {"n": 3}, static=("n",))
    >>> def plain(x, n):
    ...     return x * n
    >>> assert_jitted_with_static(plain, (jnp.ones(2),), {"n": 3}, static=("n",))
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: plain is a plain Python function, not a jax.jit-wrapped one
      expected: a function made by jax.jit with static_argnames=('n',)
      got:      function
      fix: decorate it: @functools.partial(jax.jit, static_argnames=('n',)), or assign plain = jax.jit(<function>, static_argnames=('n',))
    """
    __tracebackhide__ = True
    import jax

    kwargs = dict(kwargs or {})
    names = tuple(static)
    label = call_signature(fn, args, kwargs)
    teach = dict(fname=getattr(fn, "__name__", type(fn).__name__), names=list(names),
                 names_repr=repr(names), section=section)

    def wrapped():
        if is_jit_function(fn):
            return {"jitted": True}
        # An unsolved stub is "not implemented yet", not "not jitted".
        try:
            call(fn, args, kwargs)
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001 - any other error: report the missing jit
            pass
        return {"jitted": False, "type": type(fn).__name__}

    run(Check("jit_wrapped", label, observe=wrapped, observe_as="facts", params=teach))
    dynamic = (tuple(args), {k: v for k, v in kwargs.items() if k not in names})
    observe, expect = program_sides(lambda: programs_of((fn, args, kwargs)))
    run(Check("static_inputs", label, observe=observe, expect=expect, observe_as="artifact",
              expect_as="artifact",
              params=dict(teach, n_dynamic=len(jax.tree.leaves(dynamic)))))


@explainer("jit_wrapped")
def explain_jit_wrapped(observed, expected, *, label: str, fname: str, names_repr: str,
                        section: str | None = None, **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    if facts.get("jitted") is True:
        return None
    return format_failure(
        f"{fname} is a plain Python function, not a jax.jit-wrapped one",
        expected=f"a function made by jax.jit with static_argnames={names_repr}",
        got=str(facts.get("type", "something else")),
        fix=f"decorate it: @functools.partial(jax.jit, static_argnames={names_repr}), or "
            f"assign {fname} = jax.jit(<function>, static_argnames={names_repr})",
        section=section)


_AVAL = re.compile(r"^~?([a-z]+\d*)\[(.*)\]$")


def _aval_text(aval: str) -> str:
    """``float32[3]`` -> ``f32[3]``, ``~int32[]`` (weakly typed) -> ``i32[]``."""
    m = _AVAL.match(str(aval))
    return f"{short_dtype(m.group(1))}[{m.group(2)}]" if m else str(aval)


@explainer("static_inputs", errors=True)
def explain_static_inputs(observed, expected, *, label: str, names: list, n_dynamic: int,
                          section: str | None = None, **_ignored) -> str | None:
    """The inputs of the exported program are the non-static arguments only."""
    if observed.kind == "error":
        return explain_jit_error(observed, label, context="when jax.jit traces it",
                                 section=section)
    problem = explain_program(observed, None, label=label, section=section)
    if problem:
        return problem
    avals = program_facts(observed)[0].get("in_avals", [])
    if len(avals) != n_dynamic:
        return format_failure(
            f"{label}: {', '.join(names)} is traced, not static",
            expected=f"{n_dynamic} traced input(s): the arguments other than {', '.join(names)}",
            got=f"{len(avals)} traced inputs: " + ", ".join(_aval_text(a) for a in avals),
            cause="jax.jit traces every argument that is not listed as static, so the "
                  "compiled program takes it as a run-time input",
            fix=f"pass static_argnames={tuple(names)!r} to jax.jit", section=section)
    return explain_program(observed, expected, label=label, section=section, **TIE_TOLERANCE)

