"""Which inputs a jitted function donates, for exercises whose callers reuse them.

Donation (``jax.jit(f, donate_argnums=...)``) lets XLA write outputs into the input
buffers; the donated arrays are deleted by the call. That is right for a training
loop that threads its state, and wrong for a function the lesson calls several
times on the same arrays: every later call raises "Array has been deleted".

:func:`collect_donated_inputs` reads the donation a jitted function declares for
some arguments (``Lowered.args_info``: one flag per leaf), as plain data;
:func:`explain_donated_inputs` judges it (pure); :func:`assert_donates_nothing`
runs both.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from autograder.core.check import Check, call, explainer, run
from autograder.core.tracing import is_jit_function
from autograder.core.feedback import call_signature, format_failure


def collect_donated_inputs(fn: Callable, args: Sequence = (), kwargs: dict | None = None, *,
                           name: str | None = None,
                           section: str | None = None) -> dict[str, Any]:
    """The leaves of ``args`` that ``fn`` donates, as plain data.

    Returns ``{"jitted": bool, "donated": [argument paths such as "args[0]['w']"]}``.
    A ``jax.jit`` function is lowered (nothing runs, nothing is deleted). Any other
    callable (a wrapper or a ``functools.partial`` around a donating jitted function)
    is called once on copies of the arrays, and the copies it deleted are the donated
    ones. A function that calls a donating jitted function *inside* another
    ``jax.jit`` donates nothing (donation only applies to the outermost call).

    >>> import jax, jax.numpy as jnp
    >>> step = jax.jit(lambda p, g: p - g, donate_argnums=0)
    >>> collect_donated_inputs(step, (jnp.ones(2), jnp.ones(2)))
    {'jitted': True, 'donated': ['args[0]']}
    """
    import jax

    del name, section

    def where(path):
        return ("args" if path and getattr(path[0], "idx", None) == 0 else "kwargs") + \
            jax.tree_util.keystr(path[1:])

    if not is_jit_function(fn):
        copies = jax.tree.map(lambda a: a.copy() if isinstance(a, jax.Array) else a,
                              (tuple(args), dict(kwargs or {})))
        call(fn, *copies)
        flat = jax.tree_util.tree_flatten_with_path(copies)[0]
        return {"jitted": False, "donated": [where(path) for path, a in flat
                                             if isinstance(a, jax.Array) and a.is_deleted()]}
    lowered = call(fn.lower, tuple(args), kwargs or {})
    info = lowered.args_info
    flat = jax.tree_util.tree_flatten_with_path(
        info, is_leaf=lambda a: hasattr(a, "donated"))[0]
    return {"jitted": True,
            "donated": [where(path) for path, a in flat if getattr(a, "donated", False)]}


def explain_donated_inputs(observed: Mapping, expected: Any = None, *,
                           name: str = "the function", section: str | None = None,
                           hint: str | None = None, fix: str | None = None) -> str | None:
    """The message for a function that donates inputs it must keep, or ``None`` (pure).

    ``expected`` is unused (the rule is "donates nothing"); it is accepted so that
    every ``explain_*`` has one shape.

    >>> explain_donated_inputs({"jitted": True, "donated": []}) is None
    True
    >>> print(explain_donated_inputs({"jitted": True, "donated": ["args[0]['w']"]},
    ...                              name="train_step"))
    train_step donates its inputs
      expected: no donated argument
      got:      donated: args[0]['w']
      likely cause: jax.jit(..., donate_argnums=...) deletes the donated arrays after each call, and this chapter calls the step again on the same arrays
      fix: jit the step without donate_argnums / donate_argnames
    """
    del expected
    if hasattr(observed, "facts"):  # an observation from the grader
        observed = observed.facts
    donated = list(observed.get("donated", []))
    if not donated:
        return None
    shown = ", ".join(donated[:6]) + (f" and {len(donated) - 6} more" if len(donated) > 6 else "")
    return format_failure(
        f"{name} donates its inputs", expected="no donated argument", got=f"donated: {shown}",
        cause=hint or ("jax.jit(..., donate_argnums=...) deletes the donated arrays after "
                       "each call, and this chapter calls the step again on the same arrays"),
        fix=fix or "jit the step without donate_argnums / donate_argnames", section=section)


def assert_donates_nothing(fn: Callable, args: Sequence, *, kwargs: dict | None = None,
                           name: str | None = None, section: str | None = None,
                           hint: str | None = None, fix: str | None = None) -> dict:
    """Asserts that the jitted ``fn`` donates none of its arguments.

    Args:
      fn: the student's function (a plain function passes: it donates nothing).
      args, kwargs: inputs to lower it for (a ``jax.jit`` function: nothing runs,
        nothing is deleted) or to call it on, copied (any other callable, which may
        wrap a donating jitted function).
      name, section, hint, fix: how to name it, the section to reread, and a likely
        cause and a fix that replace the defaults.

    Returns:
      The facts of :func:`collect_donated_inputs`.

    >>> import jax, jax.numpy as jnp
    >>> def step(p, g):
    ...     return p - g
    >>> _ = assert_donates_nothing(jax.jit(step), (jnp.ones(2), jnp.ones(2)))
    >>> _ = assert_donates_nothing(jax.jit(step, donate_argnums=(0, 1)),
    ...                            (jnp.ones(2), jnp.ones(2)), name="step")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: step donates its inputs
      expected: no donated argument
      got:      donated: args[0], args[1]
      likely cause: jax.jit(..., donate_argnums=...) deletes the donated arrays after each call, and this chapter calls the step again on the same arrays
      fix: jit the step without donate_argnums / donate_argnames
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", None) or call_signature(fn, args, kwargs)
    return run(Check("donates_nothing", label,
                     observe=lambda: collect_donated_inputs(fn, args, kwargs),
                     observe_as="facts", params=dict(section=section, hint=hint, fix=fix)))


@explainer("donates_nothing")
def _explain_donates_nothing(observed, expected, *, label, **params):
    return explain_donated_inputs(observed.facts, name=label, **params)
