"""Implicit host-to-device transfers: a function's values, computed under JAX's guard.

:func:`assert_no_implicit_transfers` calls the student's function inside
``jax.transfer_guard_host_to_device("disallow")``: every NumPy array or Python number
that reaches a device computation without ``jax.device_put`` (an argument of a jitted
function, an operand of an eager ``jnp`` operation, an index, a fill value) raises
``Disallowed host-to-device transfer``. Its result is then compared with the
reference's, leaf by leaf, as :func:`autograder.assert_matches_reference` does.

Only the host-to-device half of the guard is set. The device-to-host half
(``float(x)``, ``np.asarray(x)``, ``print(x)``) fires on a GPU or TPU but never on the
CPU backend, whose device memory is the host's: a check that set it would judge the
same answer differently by platform.

An *in-process fact*: the guard exists only in the process that runs the student's
code, so the call is observed there (its value, or the error it raised, as plain
data) and judged by :func:`explain_transfers` outside (:mod:`autograder.core.check`).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import call_signature, format_failure
from autograder.core.numeric import explain_tree

_DISALLOWED = re.compile(r"Disallowed host-to-device transfer: aval=ShapedArray\(([^)]*)\)")


def guarded_call(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> Any:
    """``fn(*args, **kwargs)`` with implicit host-to-device transfers disallowed.

    >>> import jax.numpy as jnp, numpy as np
    >>> guarded_call(lambda x: x * x, (jnp.arange(3.0),))
    Array([0., 1., 4.], dtype=float32)
    >>> guarded_call(lambda x: x * x, (np.arange(3.0),))   # NumPy: no device computation
    array([0., 1., 4.])
    """
    import jax

    with jax.transfer_guard_host_to_device("disallow"):
        return call(fn, args, kwargs)


def transferred_value(error: str) -> str | None:
    """What an implicit transfer carried, from the guard's error message: ``"float32[16,3]"``,
    ``"a Python scalar (float32[], weakly typed)"``; None for any other error.

    >>> transferred_value("INVALID_ARGUMENT: Disallowed host-to-device transfer: "
    ...                   "aval=ShapedArray(float32[16,3]), dst_sharding=...")
    'a float32[16,3] array'
    >>> transferred_value("Disallowed host-to-device transfer: "
    ...                   "aval=ShapedArray(int32[], weak_type=True), dst_sharding=...")
    'a Python scalar (int32[], weakly typed)'
    >>> transferred_value("ValueError: shapes differ") is None
    True
    """
    found = _DISALLOWED.search(error or "")
    if found is None:
        return None
    aval = found.group(1)
    if "weak_type=True" in aval:
        return f"a Python scalar ({aval.split(',')[0].strip()}, weakly typed)"
    aval = aval.strip()
    return f"{'an' if aval[:1] in 'aeiou' else 'a'} {aval} array"


@explainer("no_implicit_transfers", errors=True)
def explain_transfers(observed, expected, *, label: str, section: str | None = None,
                      hint: str | None = None, fix: str | None = None,
                      **params) -> str | None:
    """The message for a call that made an implicit transfer, or for its wrong values
    (None when it made none and its values match). ``hint`` and ``fix`` are about the
    values: a transfer gets its own cause and fix.

    >>> from autograder.core import wire as _wire
    >>> err = RuntimeError("INVALID_ARGUMENT: Disallowed host-to-device transfer: "
    ...                    "aval=ShapedArray(float32[], weak_type=True), dst_sharding=...")
    >>> print(explain_transfers(_wire.observe_error(err), None, label="f(x)",
    ...                         section="5.4"))  # doctest: +NORMALIZE_WHITESPACE
    f(x) made an implicit host-to-device transfer under jax.transfer_guard_host_to_device("disallow")
      expected: no value copied from the host without jax.device_put
      got:      a Python scalar (float32[], weakly typed) reached a device computation
      likely cause: a Python number passed to a jitted function at each call (a learning rate, a step count), or used in an eager jnp operation (`x + 1`, a slice `x[i:]`)
      fix: pass it as an array made once with jax.device_put, or move the arithmetic into your jitted function
      reread: section 5.4
    """
    if observed.kind == "error":
        what = transferred_value(observed.error)
        if what is None:
            return None                      # another error: the generic message
        scalar = what.startswith("a Python scalar")
        return format_failure(
            f"{label} made an implicit host-to-device transfer under "
            f'jax.transfer_guard_host_to_device("disallow")',
            expected="no value copied from the host without jax.device_put",
            got=f"{what} reached a device computation",
            cause=(
                "a Python number passed to a jitted function at each call (a learning "
                "rate, a step count), or used in an eager jnp operation (`x + 1`, a slice "
                "`x[i:]`)" if scalar else
                "a NumPy array or NumPy scalar passed to a jitted function or to an eager "
                "jnp operation (jnp.asarray, np.float32(lr), even jnp.zeros_like's fill "
                "value): it is copied to the device at every call"),
            fix=("pass it as an array made once with jax.device_put, or move the "
                 "arithmetic into your jitted function" if scalar else
                 "copy the host data once, before the loop, with jax.device_put"),
            section=section)
    return explain_tree(observed, expected, label=label, section=section, hint=hint,
                        fix=fix, **params)


def assert_no_implicit_transfers(fn: Callable, reference: Callable, args: Sequence = (),
                                 kwargs: dict | None = None, *, rtol: float = 1e-5,
                                 atol: float = 1e-6, dtype: str | None = "kind",
                                 section: str | None = None, hint: str | None = None,
                                 fix: str | None = None, name: str | None = None):
    """Calls ``fn`` under ``jax.transfer_guard_host_to_device("disallow")`` and compares
    its result with ``reference``'s (which runs first, without the guard).

    A NumPy array or Python number that ``fn`` lets reach a device computation without
    ``jax.device_put`` fails, with what it carried; explicit copies pass.

    Returns:
      The student's result, for further checks.

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> x = np.arange(3.0, dtype=np.float32)
    >>> def explicit(x):
    ...     return jax.jit(lambda v: v * 2)(jax.device_put(x))
    >>> assert_no_implicit_transfers(explicit, lambda x: 2 * x, (x,))
    Array([0., 2., 4.], dtype=float32)
    >>> def implicit(x):
    ...     return jax.jit(lambda v: v * 2)(x)
    >>> assert_no_implicit_transfers(implicit, lambda x: 2 * x, (x,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: implicit(...) made an implicit host-to-device transfer ...
    ...
    """
    __tracebackhide__ = True
    kwargs = kwargs or {}
    label = name or call_signature(fn, args, kwargs)
    return run(Check("no_implicit_transfers", label,
                     observe=lambda: guarded_call(fn, args, kwargs),
                     expect=lambda: reference(*args, **kwargs),
                     params=dict(rtol=rtol, atol=atol, dtype=dtype, values=True,
                                 section=section, hint=hint, fix=fix)))
