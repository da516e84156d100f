"""Runtime errors returned as values (``jax.experimental.checkify``).

:func:`collect_checkify_errors` runs a student's function, which returns
``(err, value)``, under ``jax.jit`` (or ``jax.jit(jax.vmap(...))``) and keeps the
error's text, plain data; :func:`explain_checkify_errors` judges that text against
what each input must report (``None``, ``"out-of-bounds"``, ``"division by zero"``,
``"nan generated"`` or a user check's message), per mapped index under ``vmap``.

What a checkify error says is a value the student's function returned, observed in
its process like any other value (an exported program would carry the checks as
ops, but not the messages they map to).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import describe_value, format_failure

_MAPPED = re.compile(r"at mapped index (\d+): ")


def _error_type():
    from jax.experimental import checkify

    return checkify.Error


def collect_checkify_errors(fn: Callable, cases: Sequence[Sequence], *,
                            vmap: bool = False) -> list[dict]:
    """Runs ``jax.jit(fn)`` on each case, where ``fn`` returns ``(err, value)``.

    With ``vmap=True`` the cases are stacked along a new leading axis and run as one
    call of ``jax.jit(jax.vmap(fn))``.

    Returns one dict per call (plain data): ``{"error": str or None, "value": list}``
    when the call returned a checkify ``Error`` first, or ``{"problem": text}`` when it
    did not (it raised, or returned something else).

    >>> import jax.numpy as jnp
    >>> from jax.experimental import checkify
    >>> def inverse(x):
    ...     return checkify.checkify(lambda x: 1.0 / x, errors=checkify.div_checks)(x)
    >>> [r["error"] for r in collect_checkify_errors(inverse, [(jnp.float32(2),),
    ...                                                      (jnp.float32(0),)])]
    [None, 'division by zero']
    """
    import jax

    if not callable(fn):
        call(fn)  # raises NotAFunction: the check reports it
    calls = cases
    wrapped = jax.jit(fn)
    if vmap:
        calls = [jax.tree.map(lambda *leaves: np.stack(leaves), *cases)]
        wrapped = jax.jit(jax.vmap(fn))
    error_type = _error_type()
    out = []
    for args in calls:
        try:
            result = call(wrapped, tuple(args))
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - what it raised is the observation
            first = (str(err).strip().splitlines() or [""])[0][:300]
            out.append({"problem": f"raised {type(err).__name__}: {first}"})
            continue
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            out.append({"problem": f"returned {describe_value(result)}, not (err, value)"})
            continue
        err, value = result
        if not isinstance(err, error_type):
            out.append({"problem": f"returned ({describe_value(err)}, ...): the first "
                                   "element is not a checkify Error"})
            continue
        text = err.get()
        out.append({"error": None if text is None else str(text)[:2000],
                    "value": np.asarray(value).tolist()})
    return out


def split_mapped_errors(text: str | None) -> dict[int, str]:
    """``{mapped index: message}`` from a vmapped checkify error.

    >>> split_mapped_errors("at mapped index 1: division by zero\\nat mapped index 3: x")
    {1: 'division by zero', 3: 'x'}
    """
    if not text:
        return {}
    found = {}
    for line in text.splitlines():
        m = _MAPPED.match(line)
        if m:
            found[int(m.group(1))] = line[m.end():]
    return found


def explain_checkify_errors(observed: list[dict], expected: list, *, name: str,
                            labels: Sequence[str] | None = None, vmap: bool = False,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> str | None:
    """Each case must report its expected error, or no error (None): a user check's
    message exactly, an automatic check's text as a part (:func:`reports`).

    With ``vmap=True``, ``observed`` holds the one batched call and ``expected[i]`` is
    what mapped index ``i`` must report.

    >>> ok = [{"error": None, "value": 1.0}, {"error": "division by zero", "value": 0.0}]
    >>> explain_checkify_errors(ok, [None, "division by zero"], name="f") is None
    True
    >>> print(explain_checkify_errors(ok, [None, "out-of-bounds"], name="f",
    ...                               labels=["valid", "label 5 of 5 classes"]))
    f did not report the expected error for 1 of 2 inputs
      expected: an error containing 'out-of-bounds' for label 5 of 5 classes
      got:      'division by zero'
      likely cause: that check is not enabled: checkify.checkify(f) alone functionalizes only checkify.check calls
      fix: pass errors=checkify.all_checks (or the union of the sets you need) to checkify.checkify
    """
    labels = list(labels or [f"input {i + 1}" for i in range(len(expected))])
    if len(observed) != (1 if vmap else len(expected)):
        return format_failure(f"{name} could not be checked: {len(observed)} results for "
                              f"{len(expected)} inputs", section=section)
    if vmap:
        call_ = observed[0]
        if "problem" in call_:
            return _problem_message(name, call_["problem"], "the vmapped call", section)
        per_index = split_mapped_errors(call_["error"])
        got = [{"error": per_index.get(i), "value": None} for i in range(len(expected))]
        if call_["error"] and not per_index:
            got = [{"error": call_["error"], "value": None} for _ in expected]
    else:
        got = observed
    bad = []
    for i, (obs, want) in enumerate(zip(got, expected)):
        if "problem" in obs:
            return _problem_message(name, str(obs["problem"]), labels[i], section)
        text = obs["error"]
        if text is not None and not isinstance(text, str):
            raise ValueError("an error text that is not a string")
        if want is None and text is not None:
            bad.append((i, "no error", repr(text), "false"))
        elif want is not None and (text is None or not reports(text, want)):
            bad.append((i, (f"the error {want!r}, exactly" if want_is_user(want)
                            else f"an error containing {want!r}"),
                        "no error" if text is None else repr(text), "missing"))
    if not bad:
        return None
    i, exp_text, got_text, kind = bad[0]
    where = " under jax.vmap" if vmap else ""
    details = [f"{labels[j]}: expected {e}, got {g}" for j, e, g, _ in bad[1:]]
    if kind == "false":
        cause = ("a check fires on valid input: an off-by-one bound (`> 0` where `>= 0` "
                 "is meant) or a check on the wrong value")
        default_fix = "make each check true exactly on the inputs the docstring allows"
    else:
        cause = ("that check is not enabled: checkify.checkify(f) alone functionalizes "
                 "only checkify.check calls")
        default_fix = ("pass errors=checkify.all_checks (or the union of the sets you need) "
                       "to checkify.checkify")
        if want_is_user(expected[i]):
            cause = ("the user check is missing or its message differs: JAX cannot know "
                     "that a negative label is wrong (negative indices wrap around)")
            default_fix = f"add checkify.check(..., {expected[i]!r}) before the gather"
    return format_failure(
        f"{name} did not report the expected error{where} for {len(bad)} of "
        f"{len(expected)} inputs",
        expected=f"{exp_text} for {labels[i]}", got=got_text, details=details,
        cause=hint or cause, fix=fix or default_fix, section=section)


_AUTOMATIC = ("out-of-bounds", "division by zero", "nan generated")


# What JAX appends to a user check's message.
_USER_SUFFIX = " (`check` failed)"


def reports(text: str, want: str) -> bool:
    """Whether an error text reports ``want``: a user check's message exactly (JAX's
    suffix aside), an automatic check's text as a part (its details vary).

    >>> reports("negative label (`check` failed)", "negative label")
    True
    >>> reports("negative label found (`check` failed)", "negative label")
    False
    >>> reports("out-of-bounds indexing for array of shape (3,)", "out-of-bounds")
    True
    """
    if not want_is_user(want):
        return want in text
    first = (text.strip().splitlines() or [""])[0]
    return (first[:-len(_USER_SUFFIX)] if first.endswith(_USER_SUFFIX) else first) == want


def want_is_user(want: Any) -> bool:
    """Whether an expected error text is a user check (not an automatic one)."""
    return isinstance(want, str) and not any(want.startswith(a) for a in _AUTOMATIC)


def _problem_message(name: str, problem: str, where: str, section: str | None) -> str:
    return format_failure(
        f"{name} could not be checked on {where}: {problem}",
        cause="the function must return (err, value), with err the Error that "
              "checkify.checkify(f, errors=...)(...) returns, and run under jax.jit",
        fix="return checkify.checkify(inner, errors=...)(args...) and never call "
            "err.throw() inside the function",
        section=section)


def assert_checkify_errors(fn: Callable, cases: Sequence[Sequence], expected: Sequence, *,
                           labels: Sequence[str] | None = None, vmap: bool = False,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None, name: str | None = None) -> list[dict]:
    """Asserts that ``jax.jit(fn)`` returns ``(err, value)`` whose error names each case.

    Args:
      fn: the student's function; it returns ``(err, value)`` from ``checkify``.
      cases: argument tuples.
      expected: per case, ``None`` (no error) or a text the error message must contain
        (``"out-of-bounds"``, ``"division by zero"``, ``"nan generated"``, or the
        message of a user check).
      labels: how messages name each case (default ``input 1``, ...).
      vmap: run all cases as one ``jax.vmap`` call instead.

    Returns:
      What :func:`collect_checkify_errors` observed (None when it could not run, in a
      grading run).

    >>> import jax.numpy as jnp
    >>> from jax.experimental import checkify
    >>> def first_over(x, i):
    ...     return checkify.checkify(lambda x, i: 1.0 / x[i],
    ...                              errors=checkify.all_checks)(x, i)
    >>> x = jnp.array([1.0, 0.0])
    >>> _ = assert_checkify_errors(first_over, [(x, 0), (x, 1), (x, 2)],
    ...                            [None, "division by zero", "out-of-bounds"])
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", type(fn).__name__)
    return run(Check("checkify_errors", label,
                     observe=lambda: collect_checkify_errors(fn, cases, vmap=vmap),
                     observe_as="facts",
                     params=dict(want=list(expected), labels=list(labels) if labels else None,
                                 vmap=vmap, section=section, hint=hint, fix=fix)))


@explainer("checkify_errors")
def _explain(observed, expected, *, label: str, want: list, labels=None, vmap=False,
             section=None, hint=None, fix=None, **_ignored) -> str | None:
    del expected
    facts = observed.facts
    if not isinstance(facts, list) or not all(isinstance(f, dict) for f in facts):
        raise ValueError("checkify results are not a list of objects")
    return explain_checkify_errors(facts, list(want), name=label, labels=labels, vmap=bool(vmap),
                                   section=section, hint=hint, fix=fix)
