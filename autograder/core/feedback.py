"""One template for every failure message, and the exception that carries it.

A message that teaches says: what failed, expected against got, the likely cause,
the fix, and the lesson section to reread. Library frames carry
``__tracebackhide__`` so IPython (and so nbgrader's feedback) shows the student's
own lines, not ours.
"""
from __future__ import annotations

import builtins
import inspect
import os
import traceback
import types
from typing import Any, Sequence


# The autograder package (this file is in its core/ subpackage): frames from any of its
# files are the library's, not the student's.
_LIBRARY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CheckFailure(AssertionError):
    """Raised by every ``assert_*`` check. ``str(err)`` is the teaching message."""

    def __init__(self, message: str, *, rung: str = "values"):
        super().__init__(message)
        self.rung = rung

    def _render_traceback_(self) -> list[str]:
        # IPython calls this to format the error. It hides frames that set
        # __tracebackhide__ except the one that raised, which is always ours:
        # drop every frame of this package so the student sees their own lines.
        try:
            from IPython import get_ipython

            shell = get_ipython()
            tb = without_library_frames(self.__traceback__)
            if shell is not None:
                return shell.InteractiveTB.structured_traceback(type(self), self, tb)
        except Exception:  # noqa: BLE001 - formatting must never hide the failure
            tb = self.__traceback__
        return traceback.format_exception(type(self), self, tb)


def is_library_file(path: str) -> bool:
    """Is ``path`` a file of the autograder package (any of its subpackages)?"""
    return os.path.abspath(path).startswith(_LIBRARY_DIR + os.sep)


def without_library_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback chain without frames from files of the autograder package."""
    kept = []
    while tb is not None:
        if not is_library_file(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def format_failure(what: str, *, expected: Any = None, got: Any = None,
                   cause: str | None = None, fix: str | None = None,
                   section: str | None = None, details: Sequence[str] = ()) -> str:
    """Builds a message in the course template.

    >>> print(format_failure("per_example_grads(params, x) returned the wrong shape",
    ...                      expected="(32, 3)", got="(3,)",
    ...                      cause="the batch axis is missing",
    ...                      fix="vmap the gradient over the examples",
    ...                      section="2.3 Per-example gradients"))
    per_example_grads(params, x) returned the wrong shape
      expected: (32, 3)
      got:      (3,)
      likely cause: the batch axis is missing
      fix: vmap the gradient over the examples
      reread: section 2.3 Per-example gradients
    """
    lines = [what]
    if expected is not None or got is not None:
        lines.append(f"  expected: {expected}")
        lines.append(f"  got:      {got}")
    lines.extend(f"  {d}" for d in details)
    if cause:
        lines.append(f"  likely cause: {cause}")
    if fix:
        lines.append(f"  fix: {fix}")
    if section:
        lines.append(f"  reread: section {section}")
    return "\n".join(lines)


# Exception names a message may show where the student's code could have chosen the
# name (a class named after what it read): Python's own and JAX's; any other is
# shown as OWN_CLASS.
KNOWN_ERRORS = frozenset({name for name, value in vars(builtins).items()
                          if isinstance(value, type) and issubclass(value, BaseException)} | {
    "CheckFailure", "ConcretizationTypeError", "JaxRuntimeError", "KeyReuseError",
    "NonConcreteBooleanIndexError", "NotAFunction", "TracerArrayConversionError",
    "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError",
    "XlaRuntimeError", "GraderError", "WireError", "JaxprTypeError"})
OWN_CLASS = "an exception of its own class"


def safe_error_type(name: str) -> str:
    """The exception's name when it is Python's or JAX's, else :data:`OWN_CLASS`.

    >>> safe_error_type("ValueError"), safe_error_type("Seed123Error")
    ('ValueError', 'an exception of its own class')
    """
    return name if name in KNOWN_ERRORS else OWN_CLASS


def fail(what: str, *, rung: str = "values", **kwargs: Any):
    """Raises :class:`CheckFailure` with a templated message."""
    __tracebackhide__ = True
    raise CheckFailure(format_failure(what, **kwargs), rung=rung)


def describe_value(x: Any) -> str:
    """A short description of a value: ``f32[8,3]`` for arrays, the type otherwise.

    >>> import numpy as np
    >>> describe_value(np.zeros((8, 3), np.float32)), describe_value(2.0)
    ('f32[8,3]', 'float 2.0')
    """
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{short_dtype(dtype)}[{','.join(str(s) for s in shape)}]"
    if isinstance(x, (bool, int, float, complex)):
        return f"{type(x).__name__} {x!r}"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {describe_value(v)}" for k, v in list(x.items())[:6]) + "}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(describe_value(v) for v in x[:6])
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if callable(x):
        name = getattr(x, "__name__", type(x).__name__)
        # A test's private helpers (_rosen) are not named in feedback.
        return "a function" if name.startswith("_") or name == "<lambda>" else name
    return type(x).__name__


def short_dtype(dtype: Any) -> str:
    """``float32`` -> ``f32``, ``int32`` -> ``i32``, ``bool`` -> ``bool``."""
    name = str(dtype)
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i"),
                        ("complex", "c")):
        if name.startswith(long):
            return short + name[len(long):]
    return name


def call_signature(fn: Any, args: Sequence[Any] = (), kwargs: dict | None = None) -> str:
    """``loss(w: f32[3], x: f32[8,3])``: names the function and describes its inputs."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    parts = []
    for i, a in enumerate(args):
        label = params[i] if i < len(params) and params[i] not in ("args",) else f"arg{i}"
        parts.append(f"{label}={describe_value(a)}")
    parts.extend(f"{k}={describe_value(v)}" for k, v in (kwargs or {}).items())
    return f"{name}({', '.join(parts)})"
