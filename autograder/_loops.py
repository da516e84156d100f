"""Control flow under tracing: jit-compatibility, loops that stay loops, and
gradients through loops.

Three questions a control-flow exercise asks of a student's function:

- Does it work under ``jax.jit`` with traced arguments? A Python ``if`` on a traced
  value raises ``TracerBoolConversionError`` (a ``ConcretizationTypeError``), a
  traced ``range(n)`` a ``TracerIntegerConversionError``; the message names the
  construct and the fix instead of repeating JAX's error.
- Is its loop compiled as a loop? The jaxpr must hold a ``scan`` or ``while``
  (``fori_loop`` with static bounds becomes ``scan``), and the StableHLO must hold a
  ``stablehlo.while`` whose characteristic body op is not copied once per step
  (a Python loop, or ``scan(unroll=True)``, copies it).
- Do gradients through the loop match finite differences? ``while_loop`` (and
  ``fori_loop`` with traced bounds) is not reverse-differentiable; the message says
  so and names the fix.
"""
from __future__ import annotations

import inspect
import zlib
from typing import Any, Callable, Sequence

import numpy as np

from autograder._feedback import (CheckFailure, call_signature, fail, format_failure,
                                  short_dtype)
from autograder._numeric import assert_tree_matches, call_student
from autograder._quiet import quiet, report_captured

# Characteristic jaxpr primitives and the StableHLO op each lowers to, for the
# "one body, not N copies" count. Anything else is looked up under its own name.
_STABLEHLO_NAME = {
    "sin": "sine", "cos": "cosine", "exp": "exponential", "log": "log",
    "tanh": "tanh", "logistic": "logistic", "mul": "multiply", "add": "add",
    "sub": "subtract", "div": "divide", "dot_general": "dot_general",
    "sqrt": "sqrt", "max": "maximum", "min": "minimum", "neg": "negate",
}

_LOOP_PRIMITIVES = ("scan", "while")


# --------------------------------------------------------------------------- errors

def _explain_trace_error(err: BaseException) -> tuple[str, str] | None:
    """``(cause, fix)`` for errors that come from tracing, ``None`` for others."""
    import jax

    text = str(err)
    errors = jax.errors
    if isinstance(err, errors.TracerBoolConversionError):
        return ("a Python `if`, `while`, `and`/`or`/`not` or `bool(...)` on a traced "
                "value: under jit its value is unknown while your Python code runs",
                "use jnp.where for elementwise choices, lax.cond / lax.switch for "
                "branches, lax.while_loop for loops; or mark the argument static if it "
                "is a setting, not data")
    if isinstance(err, errors.TracerIntegerConversionError):
        return ("a traced value used as a Python int: `range(n)`, a list index or a "
                "shape",
                "mark that argument static (static_argnums / static_argnames), or use "
                "it as a bound of lax.fori_loop")
    if isinstance(err, errors.TracerArrayConversionError):
        return ("NumPy (`np.*`, `np.asarray`) called on a traced value",
                "use jax.numpy (`jnp.*`) inside functions that JAX traces")
    if isinstance(err, errors.UnexpectedTracerError):
        return ("a traced value escaped the function (stored in a global, a list or an "
                "object outside it) and was used later",
                "return values instead of storing them outside the function")
    if isinstance(err, errors.ConcretizationTypeError):
        return ("a traced value used where Python needs a concrete number: `int(x)`, "
                "`float(x)`, a shape or a slice bound",
                "mark the argument static if it is a setting, or keep the computation "
                "in jnp / lax operations")
    if isinstance(err, TypeError) and "as an abstract array" in text:
        return ("a non-array argument (a string, a function, None) was passed to a "
                "jitted function without being marked static",
                "list it in static_argnames (or static_argnums) of jax.jit")
    if isinstance(err, (TypeError, IndexError)) and "Tracer" in text:
        return ("a traced value used as a shape or a slice bound: shapes must be known "
                "when JAX compiles",
                "mark the argument that decides a shape static (static_argnames)")
    if isinstance(err, ValueError) and "truth value of an array" in text:
        return ("a Python `if` (or `and`/`or`) on an array with several elements",
                "use jnp.where(condition, a, b), which chooses element by element")
    return None


def _call(thunk: Callable[[], Any], label: str, *, context: str,
          section: str | None):
    """Runs ``thunk`` like :func:`call_student`, explaining tracing errors."""
    __tracebackhide__ = True
    thunk.__name__ = label.split("(")[0]
    try:
        return call_student(thunk, name=label, section=section)
    except CheckFailure as failure:
        err = failure.__cause__
        explained = _explain_trace_error(err) if err is not None else None
        if explained is None:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        message = format_failure(
            f"{label} fails {context}: {type(err).__name__}" + (f": {first}" if first else ""),
            cause=explained[0], fix=explained[1], section=section)
        raise CheckFailure(message, rung="type") from err


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


# ---------------------------------------------------------------------- jit checks

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
    autograder._feedback.CheckFailure: relu_if(x=float 1.0) fails under jax.jit: TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].
      likely cause: a Python `if`, `while`, `and`/`or`/`not` or `bool(...)` on a traced value: under jit its value is unknown while your Python code runs
      fix: use jnp.where for elementwise choices, lax.cond / lax.switch for branches, lax.while_loop for loops; or mark the argument static if it is a setting, not data
      reread: section 1.2
    """
    __tracebackhide__ = True
    import jax

    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    if not callable(fn):
        call_student(fn, args, kwargs, name=label, section=section)  # reports "not a function"
    expected = reference(*args, **kwargs) if reference is not None else None
    jitted = jax.jit(fn, static_argnums=tuple(static_argnums),
                     static_argnames=tuple(static_argnames))
    got, captured = _call(lambda: jitted(*args, **kwargs), label,
                          context="under jax.jit", section=section)
    if reference is not None:
        assert_tree_matches(got, expected, name=f"{label} under jax.jit", rtol=rtol, atol=atol,
                            section=section, hint=hint, fix=fix)
    report_captured(captured, label)
    return got


def assert_jitted_with_static(fn: Callable, args: Sequence = (),
                              kwargs: dict | None = None, *, static: Sequence[str],
                              section: str | None = None):
    """Asserts that ``fn`` is a ``jax.jit``-wrapped function whose ``static`` arguments
    are static (compile-time constants), not traced inputs.

    It traces ``fn`` with these arguments (``fn.trace``, nothing is compiled) and
    checks that the traced program's inputs are the other arguments only.

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
    autograder._feedback.CheckFailure: plain is a plain Python function, not a jax.jit-wrapped one
      expected: a function made by jax.jit with static_argnames=('n',)
      got:      function
      fix: decorate it: @functools.partial(jax.jit, static_argnames=('n',)), or assign plain = jax.jit(<function>, static_argnames=('n',))
    """
    __tracebackhide__ = True
    import jax

    kwargs = dict(kwargs or {})
    fname = getattr(fn, "__name__", type(fn).__name__)
    names = tuple(static)
    label = call_signature(fn, args, kwargs)
    if not (callable(fn) and hasattr(fn, "trace") and hasattr(fn, "lower")):
        if not callable(fn):
            call_student(fn, args, kwargs, name=label, section=section)
        # An unsolved stub is "not implemented yet", not "not jitted".
        with quiet():
            try:
                fn(*args, **kwargs)
                stub = False
            except NotImplementedError:
                stub = True
            except Exception:  # noqa: BLE001 - any other error: report the missing jit
                stub = False
        if stub:
            fail(f"{fname} is not implemented yet", rung="type",
                 fix="replace `raise NotImplementedError()` in its solution cell with your code",
                 section=section)
        fail(f"{fname} is a plain Python function, not a jax.jit-wrapped one",
             rung="type", expected=f"a function made by jax.jit with static_argnames={names!r}",
             got=type(fn).__name__,
             fix=f"decorate it: @functools.partial(jax.jit, static_argnames={names!r}), or "
                 f"assign {fname} = jax.jit(<function>, static_argnames={names!r})",
             section=section)
    traced, _ = _call(lambda: fn.trace(*args, **kwargs), label,
                      context="when jax.jit traces it", section=section)
    n_inputs = len(jax.tree.leaves(traced.args_info))
    dynamic = (tuple(args), {k: v for k, v in kwargs.items() if k not in names})
    n_dynamic = len(jax.tree.leaves(dynamic))
    if n_inputs != n_dynamic:
        fail(f"{label}: {', '.join(names)} is traced, not static",
             rung="structure",
             expected=f"{n_dynamic} traced input(s): the arguments other than {', '.join(names)}",
             got=f"{n_inputs} traced inputs: " + ", ".join(
                 f"{short_dtype(a.dtype)}[{','.join(map(str, a.shape))}]"
                 for a in jax.tree.leaves(traced.args_info)),
             cause="jax.jit traces every argument that is not listed as static, so the "
                   "compiled program takes it as a run-time input",
             fix=f"pass static_argnames={names!r} to jax.jit", section=section)


# --------------------------------------------------------------------- loop checks

def collect_loop_facts(fn: Callable, args: Sequence = (), *, body_op: str | None = None,
                       static_argnums: Sequence[int] = (),
                       section: str | None = None) -> dict[str, int]:
    """Facts about how ``fn``'s loops are traced and lowered.

    Args:
      fn: the function; ``args`` at ``static_argnums`` are closed over (not traced).
      args: the inputs.
      body_op: a jaxpr primitive characteristic of the loop body (``"sin"``,
        ``"tanh"``), counted in the jaxpr and, under its StableHLO name, in StableHLO.
      static_argnums: positions of arguments that stay Python values (a trip count).

    Returns:
      ``{"jaxpr_loops": scan + while equations, "jaxpr_eqns": all equations,
      "jaxpr_body_op": copies of body_op, "stablehlo_while": while ops,
      "stablehlo_ops": all ops, "stablehlo_body_op": copies of body_op}``.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def spin(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: jnp.sin(c), x)
    >>> facts = collect_loop_facts(spin, (1.0, 50), body_op="sin", static_argnums=(1,))
    >>> facts["jaxpr_loops"], facts["stablehlo_while"], facts["stablehlo_body_op"]
    (1, 1, 1)
    """
    __tracebackhide__ = True
    import jax

    from autograder._hlo import count_stablehlo_ops
    from autograder._jaxpr import count_primitives

    bound, dyn, _ = _bind_static(fn, args, static_argnums)
    label = call_signature(fn, args)
    jaxpr, _ = _call(lambda: jax.make_jaxpr(bound)(*dyn), label,
                     context="when traced", section=section)
    prims = count_primitives(jaxpr)
    text, _ = _call(lambda: jax.jit(bound).lower(*dyn).as_text(), label,
                    context="when lowered to StableHLO", section=section)
    ops = count_stablehlo_ops(text)
    structural = {"func", "return", "constant", "num_partitions", "num_replicas"}
    facts = {
        "jaxpr_loops": sum(prims[p] for p in _LOOP_PRIMITIVES),
        "jaxpr_eqns": sum(prims.values()),
        "stablehlo_while": ops["while"],
        "stablehlo_ops": sum(n for op, n in ops.items() if op not in structural),
    }
    if body_op is not None:
        facts["jaxpr_body_op"] = prims[body_op]
        facts["stablehlo_body_op"] = ops[_STABLEHLO_NAME.get(body_op, body_op)]
    return facts


def assert_compiled_as_loop(fn: Callable, args: Sequence, *, body_op: str,
                            trip_count: int, static_argnums: Sequence[int] = (),
                            max_copies: int | None = None, section: str | None = None,
                            hint: str | None = None, fix: str | None = None):
    """Asserts that ``fn`` runs its loop as a compiled loop, not an unrolled one.

    Two rungs: the jaxpr holds a ``scan`` or ``while`` (``fori_loop`` with static
    bounds becomes ``scan``); and the StableHLO holds a ``stablehlo.while`` with at
    most ``max_copies`` copies of ``body_op`` (default ``trip_count // 2``: a small
    unroll factor passes, full unrolling does not). A Python loop copies the body
    ``trip_count`` times at trace time; ``scan(unroll=True)`` copies it at lowering.

    Args:
      fn: the student's function.
      args: inputs for which the loop runs ``trip_count`` steps; those at
        ``static_argnums`` stay Python values (a step count, say).
      body_op: a jaxpr primitive that the loop body uses once or a few times per step
        (``"sin"``, ``"tanh"``); it is counted under its StableHLO name.
      trip_count: how many steps the loop runs for these inputs (make it large, 20+).
      max_copies: the most copies of ``body_op`` allowed in StableHLO.
      section, hint, fix: the section to reread, and overrides of cause and fix.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def spin(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: jnp.sin(c), x)
    >>> assert_compiled_as_loop(spin, (1.0, 40), body_op="sin", trip_count=40,
    ...                         static_argnums=(1,))
    >>> def spin_unrolled(x, n):
    ...     for _ in range(n):
    ...         x = jnp.sin(x)
    ...     return x
    >>> assert_compiled_as_loop(spin_unrolled, (1.0, 40), body_op="sin", trip_count=40,
    ...                         static_argnums=(1,), section="3.1")
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: spin_unrolled(x=float 1.0, n=int 40) is not compiled as a loop: its jaxpr has no `scan` or `while`
      expected: one `scan` or `while` whose body runs 40 times
      got:      `sin` appears 40 times in the jaxpr, about once per step: the loop was unrolled while JAX traced it
      likely cause: a Python `for` loop runs while JAX traces, so the program holds one copy of the body per step: compile time and program size grow with the step count
      fix: write one step as a function and run it with lax.fori_loop or lax.scan
      reread: section 3.1
    """
    __tracebackhide__ = True
    label = call_signature(fn, args)
    facts = collect_loop_facts(fn, args, body_op=body_op, static_argnums=static_argnums,
                               section=section)
    limit = max(1, trip_count // 2) if max_copies is None else max_copies
    hlo_op = _STABLEHLO_NAME.get(body_op, body_op)
    if facts["jaxpr_loops"] == 0:
        copies = facts["jaxpr_body_op"]
        got = (f"`{body_op}` appears {copies} times in the jaxpr, about once per step: the "
               "loop was unrolled while JAX traced it" if copies >= limit else
               f"no loop primitive; `{body_op}` appears {copies} time(s) in the jaxpr")
        fail(f"{label} is not compiled as a loop: its jaxpr has no `scan` or `while`",
             rung="structure", expected=f"one `scan` or `while` whose body runs {trip_count} times",
             got=got,
             cause=hint or "a Python `for` loop runs while JAX traces, so the program holds "
                           "one copy of the body per step: compile time and program size "
                           "grow with the step count",
             fix=fix or "write one step as a function and run it with lax.fori_loop or lax.scan",
             section=section)
    if facts["stablehlo_while"] == 0 or facts["stablehlo_body_op"] > limit:
        got = (f"{facts['stablehlo_while']} `stablehlo.while`, {facts['stablehlo_body_op']} "
               f"copies of `{hlo_op}` for {trip_count} steps")
        fail(f"{label} is unrolled when lowered to StableHLO",
             rung="structure",
             expected=f"a `stablehlo.while` whose body holds at most {limit} `{hlo_op}`",
             got=got,
             cause=hint or "`unroll=True` (or a large unroll factor) in lax.scan / "
                           "lax.fori_loop copies the body once per step",
             fix=fix or "drop the `unroll` argument (the default, 1, keeps one body)",
             section=section)


# ----------------------------------------------------------------- loop gradients

def _seed(text: str) -> int:
    return zlib.crc32(text.encode()) % (2**31)


def assert_loop_grads_match_numeric(fn: Callable, args: Sequence, *,
                                    argnums: int | Sequence[int] = 0,
                                    static_argnums: Sequence[int] = (),
                                    rtol: float = 1e-4, directions: int = 3,
                                    section: str | None = None, hint: str | None = None):
    """Asserts that reverse-mode gradients through ``fn`` match finite differences.

    ``fn`` may return any pytree of arrays. Its float outputs are reduced to one
    scalar with fixed weights (seeded by ``fn``'s name, so every output matters),
    ``jax.grad`` of that scalar is taken with respect to ``argnums``, and compared
    with central differences of the same scalar in float64
    (:func:`autograder.assert_grad_matches_numeric`). A loop JAX cannot
    reverse-differentiate (``lax.while_loop``, ``fori_loop`` with traced bounds) gets
    a message that says so.

    Args:
      fn: the student's function.
      args: the inputs; ``static_argnums`` stay Python values (closed over).
      argnums: the differentiated positions in ``args`` (never static ones).
      rtol, directions: as in :func:`autograder.assert_grad_matches_numeric`.
      section, hint: the section to reread, and an override of the likely cause of a
        gradient that disagrees with finite differences.

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> def power(x, n):
    ...     return lax.fori_loop(0, n, lambda i, c: c * x, 1.0)
    >>> assert_loop_grads_match_numeric(power, (1.1, 5), static_argnums=(1,))
    >>> def power_while(x, n):
    ...     body = lambda c: (c[0] * x, c[1] + 1)
    ...     return lax.while_loop(lambda c: c[1] < n, body, (1.0, 0))[0]
    >>> assert_loop_grads_match_numeric(power_while, (1.1, 5), static_argnums=(1,))
    Traceback (most recent call last):
    ...
    autograder._feedback.CheckFailure: jax.grad cannot differentiate power_while(x=float 1.1, n=int 5): its loop is not reverse-differentiable
      expected: a loop that reverse mode can differentiate: lax.scan, or lax.fori_loop with Python int bounds
      got:      ValueError: Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop.
      likely cause: lax.while_loop stops at a step it only learns at run time, so reverse mode cannot know how many steps to store; fori_loop with traced bounds becomes such a while_loop
      fix: use lax.scan or lax.fori_loop with Python int bounds (mark the step count static under jit); forward mode (jax.jvp, jax.jacfwd) does work through while_loop
    """
    __tracebackhide__ = True
    import jax
    import jax.numpy as jnp

    from autograder._grads import assert_grad_matches_numeric

    label = call_signature(fn, args)
    bound, dyn, dyn_idx = _bind_static(fn, args, static_argnums)
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    try:
        dyn_nums = tuple(dyn_idx.index(n % len(args)) for n in nums)
    except ValueError:
        raise ValueError(f"argnums {nums} include a static argument") from None
    out, _ = _call(lambda: bound(*dyn), label, context="when called", section=section)
    leaves = jax.tree.leaves(out)
    weights = []
    rng = np.random.default_rng(_seed(getattr(fn, "__name__", "fn")))
    for leaf in leaves:
        a = np.asarray(leaf)
        floating = np.issubdtype(a.dtype, np.floating)
        weights.append(rng.normal(size=a.shape) if floating else None)

    def scalar(*dyn_args):
        res = jax.tree.leaves(bound(*dyn_args))
        total = 0.0
        for leaf, w in zip(res, weights):
            if w is not None:
                total = total + jnp.sum(leaf * jnp.asarray(w, dtype=leaf.dtype))
        return total

    scalar.__signature__ = bound.__signature__  # type: ignore[attr-defined]
    scalar.__name__ = getattr(fn, "__name__", "fn")
    # Compiled (once per dtype): the finite differences call these many times, and an
    # eager loop would trace its body again on every call.
    grad_fn = jax.jit(jax.grad(scalar, argnums=dyn_nums[0] if single else dyn_nums))
    grad_fn.__name__ = f"jax.grad({scalar.__name__})"  # type: ignore[attr-defined]
    try:
        _call(lambda: grad_fn(*dyn), f"jax.grad through {label}", context="under jax.grad",
              section=section)
    except CheckFailure as failure:
        err = failure.__cause__
        if isinstance(err, ValueError) and "Reverse-mode differentiation does not work" in str(err):
            first = str(err).strip().splitlines()[0]
            fail(f"jax.grad cannot differentiate {label}: its loop is not reverse-differentiable",
                 rung="gradients",
                 expected="a loop that reverse mode can differentiate: lax.scan, or "
                          "lax.fori_loop with Python int bounds",
                 got=f"{type(err).__name__}: {first}",
                 cause="lax.while_loop stops at a step it only learns at run time, "
                       "so reverse mode cannot know how many steps to store; "
                       "fori_loop with traced bounds becomes such a while_loop",
                 fix="use lax.scan or lax.fori_loop with Python int bounds (mark the step "
                     "count static under jit); forward mode (jax.jvp, jax.jacfwd) does "
                     "work through while_loop",
                 section=section)
        raise
    assert_grad_matches_numeric(
        grad_fn, jax.jit(scalar), dyn, argnums=dyn_nums[0] if single else dyn_nums, rtol=rtol,
        directions=directions, name=f"jax.grad through {label}", section=section,
        hint=hint or "a gradient that does not flow through every step: jax.lax.stop_gradient, "
                     "a cast to int or NumPy, or a value computed outside the loop")
