"""What jax.jit made: whether a function is jitted, and what an error raised while JAX
traces a student's function means, and its fix.

A Python ``if`` on a traced value raises ``TracerBoolConversionError``, a traced
``range(n)`` a ``TracerIntegerConversionError``, a wrong ``in_axes`` a ``ValueError``
from ``vmap``. The checks of :mod:`autograder.batching.vmap` and :mod:`autograder.control_flow.jit_compat`
name the construct and its fix instead of repeating JAX's text.

The explanation is read from the error as recorded (:func:`autograder.core.wire.observe_error`:
its type's name and its text), never from the live exception, so the student's kernel
and the grader give the same message. JAX's error classes are matched by name,
their subclasses listed with them.
"""
from __future__ import annotations

from typing import Any

from autograder.core import wire as _wire
from autograder.core.feedback import format_failure

# Names of TypeError and IndexError subclasses that tracing raises (an error is
# recorded by its own class name only).
_TYPE_ERRORS = frozenset({
    "TypeError", "JAXTypeError", "JaxprTypeError", "ConcretizationTypeError",
    "TracerBoolConversionError", "TracerIntegerConversionError",
    "TracerArrayConversionError", "UnexpectedTracerError", "KeyReuseError"})
_INDEX_ERRORS = frozenset({"IndexError", "JAXIndexError", "NonConcreteBooleanIndexError"})
# ConcretizationTypeError and the subclass that is not matched before it.
_CONCRETIZATION = frozenset({"ConcretizationTypeError", "TracerBoolConversionError"})

# Under vmap: checked most specific first.
_VMAP_TRACER = (
    ({"TracerBoolConversionError"},
     "a Python `if`, `while`, `and`/`or` or `bool()` on a value computed from a batched "
     "input: under vmap (and jit) that value is a tracer standing for every example at "
     "once, so Python cannot pick one branch",
     "compute both branches and choose per element with jnp.where(condition, a, b) "
     "(or lax.cond / lax.select)"),
    ({"TracerIntegerConversionError"},
     "a traced value used as a Python int (a list index, range(), a shape)",
     "index arrays with jnp operations (x[i], jnp.take) and keep sizes static"),
    ({"TracerArrayConversionError"},
     "a NumPy function (np.*) or np.asarray applied to a traced value: NumPy needs "
     "concrete numbers, which do not exist while JAX traces",
     "use jax.numpy (jnp.*) inside the function"),
    (_CONCRETIZATION,
     "a traced value converted to a concrete Python number (float(), int(), .item()) "
     "while JAX traces the function",
     "stay with jnp operations on arrays; drop the conversion"),
)

# vmap's own errors about in_axes, recognized by their text (unknown text falls back
# to the generic message, so a reworded error only loses the advice).
_IN_AXES = (
    ("vmap got inconsistent sizes",
     "in_axes maps arguments whose mapped axes differ in size: often an argument that "
     "every example shares (weights, a table, a hyperparameter) was mapped instead of "
     "broadcast",
     "give None in in_axes for every argument, or pytree leaf, that all examples share"),
    ("vmap was requested to map its argument",
     "in_axes maps an argument (or pytree leaf) that has no such axis, such as a scalar "
     "parameter or a Python float: in_axes=0 maps every argument",
     "use a tuple with one entry per argument, and None for arguments that all examples "
     "share"),
)


def vmap_advice(error_type: str, text: str) -> tuple[str, str] | None:
    """``(cause, fix)`` of an error raised under ``vmap``, or None.

    >>> vmap_advice("TracerBoolConversionError", "")[1][:40]
    'compute both branches and choose per ele'
    """
    for names, cause, fix in _VMAP_TRACER:
        if error_type in names:
            return cause, fix
    if error_type == "ValueError":
        for needle, cause, fix in _IN_AXES:
            if needle in text:
                return cause, fix
    return None


def jit_advice(error_type: str, text: str) -> tuple[str, str] | None:
    """``(cause, fix)`` of an error raised while ``jit`` traces, or None.

    >>> jit_advice("TypeError", "Shapes must be 1D sequences, got (JitTracer(~int32[]),)")[0]
    'a traced value used as a shape or a slice bound: shapes must be known when JAX compiles'
    """
    if error_type == "TracerBoolConversionError":
        return ("a Python `if`, `while`, `and`/`or`/`not` or `bool(...)` on a traced "
                "value: under jit its value is unknown while your Python code runs",
                "use jnp.where for elementwise choices, lax.cond / lax.switch for "
                "branches, lax.while_loop for loops; or mark the argument static if it "
                "is a setting, not data")
    if error_type == "TracerIntegerConversionError":
        return ("a traced value used as a Python int: `range(n)`, a list index or a "
                "shape",
                "mark that argument static (static_argnums / static_argnames), or use "
                "it as a bound of lax.fori_loop")
    if error_type == "TracerArrayConversionError":
        return ("NumPy (`np.*`, `np.asarray`) called on a traced value",
                "use jax.numpy (`jnp.*`) inside functions that JAX traces")
    if error_type == "UnexpectedTracerError":
        return ("a traced value escaped the function (stored in a global, a list or an "
                "object outside it) and was used later",
                "return values instead of storing them outside the function")
    if error_type in _CONCRETIZATION:
        return ("a traced value used where Python needs a concrete number: `int(x)`, "
                "`float(x)`, a shape or a slice bound",
                "mark the argument static if it is a setting, or keep the computation "
                "in jnp / lax operations")
    if error_type in _TYPE_ERRORS and "as an abstract array" in text:
        return ("a non-array argument (a string, a function, None) was passed to a "
                "jitted function without being marked static",
                "list it in static_argnames (or static_argnums) of jax.jit")
    if (error_type in _TYPE_ERRORS or error_type in _INDEX_ERRORS) and "Tracer" in text:
        return ("a traced value used as a shape or a slice bound: shapes must be known "
                "when JAX compiles",
                "mark the argument that decides a shape static (static_argnames)")
    if error_type == "ValueError" and "truth value of an array" in text:
        return ("a Python `if` (or `and`/`or`) on an array with several elements",
                "use jnp.where(condition, a, b), which chooses element by element")
    return None


def _first_line(observed: _wire.Observation) -> str:
    return observed.error.splitlines()[0] if observed.error else ""


def _explainable(observed: _wire.Observation) -> bool:
    # A stub and a non-function keep the generic messages ("not implemented yet").
    return (observed.kind == "error" and not observed.not_implemented
            and observed.error_type != "NotAFunction")


def explain_vmap_error(observed: _wire.Observation, label: str, *, context: str = "",
                       section: str | None = None) -> str | None:
    """``{label} raised {type}: {first line}`` with the cause and fix, or None.

    ``context`` is added to the cause of a tracing error (not to an in_axes mistake).

    >>> obs = _wire.Observation("error", error_type="TracerBoolConversionError",
    ...                         error="Attempted boolean conversion of traced array")
    >>> print(explain_vmap_error(obs, "jax.vmap(relu)(x=f32[2])").splitlines()[0])
    jax.vmap(relu)(x=f32[2]) raised TracerBoolConversionError: Attempted boolean conversion of traced array
    """
    if not _explainable(observed):
        return None
    advice = vmap_advice(observed.error_type, observed.error)
    if advice is None:
        return None
    cause, fix = advice
    if observed.error_type == "ValueError":
        context = ""  # an in_axes mistake, not a tracing problem
    first = _first_line(observed)
    return format_failure(f"{label} raised {observed.error_type}" + (f": {first}" if first else ""),
                          cause=cause + context, fix=fix, section=section)


def explain_jit_error(observed: _wire.Observation, label: str, *, context: str,
                      section: str | None = None) -> str | None:
    """``{label} fails {context}: {type}: {first line}`` with the cause and fix, or None.

    >>> obs = _wire.Observation("error", error_type="TracerIntegerConversionError",
    ...                         error="The __index__() method was called on traced array")
    >>> print(explain_jit_error(obs, "repeat(x=float 1.0, n=int 3)", context="under jax.jit"))
    ... # doctest: +NORMALIZE_WHITESPACE
    repeat(x=float 1.0, n=int 3) fails under jax.jit: TracerIntegerConversionError: The __index__() method was called on traced array
      likely cause: a traced value used as a Python int: `range(n)`, a list index or a shape
      fix: mark that argument static (static_argnums / static_argnames), or use it as a bound of lax.fori_loop
    """
    if not _explainable(observed):
        return None
    advice = jit_advice(observed.error_type, observed.error)
    if advice is None:
        return None
    first = _first_line(observed)
    return format_failure(
        f"{label} fails {context}: {observed.error_type}" + (f": {first}" if first else ""),
        cause=advice[0], fix=advice[1], section=section)


def is_jit_function(fn: Any) -> bool:
    """Whether ``fn`` is a function made by ``jax.jit`` (its type, not its attributes:
    setting ``.lower`` on a plain function does not make it one)."""
    return isinstance(fn, _JIT_TYPE)


def _jit_type():
    import jax

    return type(jax.jit(lambda x: x))


_JIT_TYPE = _jit_type()  # captured at import, before any student code runs
