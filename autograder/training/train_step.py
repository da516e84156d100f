"""Checks of a train step: it compiles once, keeps its parameters' shapes and dtypes,
threads its optimizer state and brings the loss below a threshold within a budget.

They grade behaviour, never numbers that depend on a JAX version. Each observes plain
data in the process that ran the student's step and judges it with a pure
``explain_*`` (the same in the student's kernel and in the grader):

- :func:`collect_training_run`: the losses of a run and where its structure broke
  (the run's parameters and states are returned for the checks that follow).
- :func:`assert_keeps_shapes_and_dtypes`, :func:`assert_state_changes`: pytrees the
  step returned, compared with the reference side's (the state it was given).
- :func:`assert_loss_falls_below`: the loss curve, as numbers.
- :func:`assert_train_step_compiles_once` counts compilations with ``jax.monitoring``
  in the process that calls the step: a compile count is an event of that process
  (the cache is keyed on the live function object), so it is in-process evidence; no
  exported program can say how often its source function was compiled.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.jit.compile import collect_compile_facts, explain_compiles_at_most
from autograder.core.feedback import describe_value, format_failure
from autograder.core.numeric import assert_tree_matches

# Captured at import, before any student code runs.
_asarray = np.asarray
_isfinite = np.isfinite
_array_equal = np.array_equal


def _fresh(tree):
    """Copies every JAX array leaf: a step that donates its inputs cannot delete ours."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda a: jnp.copy(a) if isinstance(a, jax.Array) else a, tree)


@dataclasses.dataclass
class TrainingRun:
    """What :func:`collect_training_run` saw.

    Attributes:
      losses: the loss each step returned, as Python floats.
      params: the parameters after the last step.
      opt_state: the optimizer state after the last step.
      first_opt_state: the optimizer state returned by the first step.
    """

    losses: list[float]
    params: Any
    opt_state: Any
    first_opt_state: Any


def _scalar(loss) -> float | None:
    """A loss as a float, or None when it is not one number (shape ())."""
    try:
        return float(loss) if np.shape(loss) == () else None
    except (TypeError, ValueError):
        return None


def _run_steps(train_step: Callable, params, opt_state, batches: Sequence, keep: dict) -> dict:
    """Runs the steps, threading the state; facts about the run (``keep["run"]`` gets
    the :class:`TrainingRun` when every step returned a usable result)."""
    losses: list[float] = []
    first_state = None
    params, opt_state = _fresh((params, opt_state))
    facts = {"name": getattr(train_step, "__name__", "train_step"), "steps": len(batches)}
    for i, (x, y) in enumerate(batches):
        out = call(train_step, (params, opt_state, x, y))
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            return dict(facts, problem="structure", step=i, described=describe_value(out),
                        losses=losses)
        params, opt_state, loss = out
        value = _scalar(loss)
        if value is None:
            return dict(facts, problem="loss", step=i, described=describe_value(loss),
                        losses=losses)
        losses.append(value)
        if i == 0:
            first_state = opt_state
    keep["run"] = TrainingRun(losses, params, opt_state, first_state)
    return dict(facts, losses=losses)


def collect_training_run(train_step: Callable, params, opt_state, batches: Sequence, *,
                         name: str | None = None,
                         section: str | None = None) -> TrainingRun | None:
    """Runs ``train_step`` over ``batches``, threading its state; returns what it saw.

    Each call is ``params, opt_state, loss = train_step(params, opt_state, x, y)`` for
    ``(x, y)`` in ``batches``, starting from copies of ``params`` and ``opt_state`` (a
    step that donates its inputs cannot delete the caller's). A step that raises, or
    returns something other than ``(params, opt_state, scalar loss)``, fails the check
    (in a grading run it is recorded and None is returned).

    Args:
      train_step: the student's step ``(params, opt_state, x, y) -> (params, opt_state,
        loss)``.
      params, opt_state: the initial state.
      batches: a sequence of ``(x, y)`` pairs, one per step.
      name: how messages name the step (default: ``train_step``, whatever the step's
        own name: the grader pairs checks by name).
      section: the lesson section to reread.

    Returns:
      A :class:`TrainingRun`.

    >>> import jax.numpy as jnp
    >>> def halve(p, s, x, y):
    ...     return p / 2, s + 1, jnp.sum(p)
    >>> run = collect_training_run(halve, jnp.ones(2), 0, [(None, None)] * 3)
    >>> run.losses, run.opt_state
    ([2.0, 1.0, 0.5], 3)
    """
    __tracebackhide__ = True
    keep: dict = {}
    return run(Check("training_run", name or "train_step",
                     observe=lambda: _run_steps(train_step, params, opt_state, batches, keep),
                     observe_as="facts", params=dict(section=section),
                     returns=lambda facts: keep.get("run")))


@explainer("training_run")
def explain_training_run(observed, expected, *, label: str, section: str | None = None,
                         **_ignored) -> str | None:
    """Every step returned ``(params, opt_state, loss)`` with a scalar loss."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    name = str(facts.get("name") or label)
    if facts.get("problem") == "structure":
        return format_failure(
            f"{name} returned the wrong structure", expected="a tuple (params, opt_state, loss)",
            got=facts.get("described"),
            cause="a train step is a pure function: everything that changes must come "
                  "back out, the new optimizer state included",
            fix="end the step with `return new_params, new_opt_state, loss`", section=section)
    if facts.get("problem") == "loss":
        return format_failure(
            f"{name} returned a loss that is not a scalar", expected="a scalar loss (shape ())",
            got=facts.get("described"),
            cause="the per-example losses were returned instead of their mean",
            fix="return the mean loss over the batch (the value you differentiated)",
            section=section)
    if len(facts.get("losses", [])) != facts.get("steps"):
        return format_failure(f"{label}: the grader could not follow the training run",
                              section=section)
    return None


def assert_train_step_compiles_once(train_step: Callable, args: Sequence, *,
                                    calls: int = 3, section: str | None = None,
                                    name: str | None = None) -> None:
    """Asserts that ``calls`` calls of ``train_step(*args)`` compile exactly once.

    At most once (the message names what changed when it compiled again, as
    :func:`autograder.assert_compiles_at_most` does) and at least once: a step that
    never compiles runs eagerly, one small XLA program per operation, instead of as
    one fused program.

    Create ``args`` first (eager operations compile too) and pass a freshly built
    step, so that its first call has not been compiled before. Each call gets its
    own copy of ``args``, so a step that donates its inputs passes too.

    >>> import jax, jax.numpy as jnp
    >>> x = jnp.ones(3)
    >>> def make_step():
    ...     @jax.jit
    ...     def step(p, s, x, y):
    ...         return p - 0.1 * x, s, jnp.sum(p)
    ...     return step
    >>> assert_train_step_compiles_once(make_step(), (x, 0, x, None))
    """
    __tracebackhide__ = True
    label = name or getattr(train_step, "__name__", "train_step")
    # Fresh copies per call (made before counting): a step may donate its inputs.
    copies = [_fresh(tuple(args)) for _ in range(calls)]
    run(Check("compiles_once", label,
              observe=lambda: collect_compile_facts(train_step, copies, label),
              observe_as="facts", params=dict(calls=calls, section=section)))


@explainer("compiles_once")
def explain_compiles_once(observed, expected, *, label: str, calls: int,
                          section: str | None = None, **_ignored) -> str | None:
    """At most one compilation (why it compiled again), and at least one."""
    problem = explain_compiles_at_most(observed, expected, label=label, max_compilations=1,
                                       section=section)
    if problem:
        return problem
    if observed.facts.get("count") == 0:
        return format_failure(
            f"{label} never compiled over {calls} calls",
            expected="exactly 1 compilation (the first call)", got="0 compilations",
            cause="the step is not wrapped in jax.jit, so it runs eagerly, one small "
                  "program per operation, dispatched from Python at every step",
            fix="decorate the step you return with @jax.jit (or return jax.jit(step))",
            section=section)
    return None


def assert_keeps_shapes_and_dtypes(after, before, *, name: str = "params",
                                   section: str | None = None, hint: str | None = None,
                                   fix: str | None = None) -> None:
    """Asserts that ``after`` has the structure, shapes and exact dtypes of ``before``.

    Use it on parameters after a few training steps: an update must not reshape,
    re-type or restructure them (the next step would then compile again, or fail).

    >>> import jax.numpy as jnp
    >>> before = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
    >>> assert_keeps_shapes_and_dtypes({"w": jnp.ones((2, 3)), "b": jnp.ones(3)}, before)
    >>> assert_keeps_shapes_and_dtypes({"w": jnp.ones((2, 3)), "b": jnp.ones((1, 3))},
    ...                                before, name="params after 3 steps")
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: params after 3 steps has the wrong shape
      expected: ['b'] (3,), ['w'] (2, 3)
      got:      ['b']: shape expected (3,), got (1, 3)
      likely cause: an update changed a parameter's shape or dtype: a gradient or update broadcast against a wrongly shaped array, a float64 constant, or a parameter rebuilt in another container
      fix: apply updates leaf by leaf with optax.apply_updates (or jax.tree.map), and return the parameters in the structure you were given
    """
    __tracebackhide__ = True
    assert_tree_matches(
        after, before, name=name, dtype="exact", values=False, section=section,
        hint=hint or ("an update changed a parameter's shape or dtype: a gradient or "
                      "update broadcast against a wrongly shaped array, a float64 "
                      "constant, or a parameter rebuilt in another container"),
        fix=fix or ("apply updates leaf by leaf with optax.apply_updates (or "
                    "jax.tree.map), and return the parameters in the structure you were "
                    "given"))


def assert_state_changes(before, after, *, name: str = "opt_state",
                         section: str | None = None, hint: str | None = None,
                         fix: str | None = None) -> None:
    """Asserts that a step returned an optimizer state different from the one it got.

    Every optax optimizer with state (Adam's moments and step count, a schedule's
    count) changes it at every update, so a state that comes back unchanged was not
    threaded through: the step returned its input instead of the new state.

    >>> import jax.numpy as jnp
    >>> assert_state_changes({"count": jnp.int32(0)}, {"count": jnp.int32(1)})
    >>> assert_state_changes({"count": jnp.int32(0)}, {"count": jnp.int32(0)})
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: opt_state came back unchanged after one step
      expected: a new optimizer state (Adam's step count and moments change at every update)
      got:      every leaf equals the state passed in
      likely cause: the step returned the optimizer state it was given, not the one optimizer.update returned
      fix: `updates, opt_state = optimizer.update(grads, opt_state, params)` and return that opt_state
    """
    __tracebackhide__ = True
    # The state the step was given is the expected side: when grading, the reference's.
    run(Check("state_changes", name, observe=lambda: after, expect=lambda: before,
              params=dict(section=section, hint=hint, fix=fix)))


def _same_leaf(a, b) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind in ("array", "scalar", "key"):
        return a.shape == b.shape and bool(_array_equal(a.value, b.value))
    return a.value == b.value


@explainer("state_changes")
def explain_state_changes(observed, expected, *, label: str, section=None, hint=None,
                          fix=None, **_ignored) -> str | None:
    """The state after one step has the structure of the one before, and other values."""
    if observed.tree != expected.tree or len(observed.leaves) != len(expected.leaves):
        return format_failure(
            f"{label} has the wrong structure after one step", expected=expected.tree,
            got=observed.tree,
            cause="the step returned something other than the optimizer's new state",
            fix="return the state that optimizer.update returned", section=section)
    if all(_same_leaf(a, b) for a, b in zip(observed.leaves, expected.leaves)):
        return format_failure(
            f"{label} came back unchanged after one step",
            expected="a new optimizer state (Adam's step count and moments change at "
                     "every update)",
            got="every leaf equals the state passed in",
            cause=hint or ("the step returned the optimizer state it was given, not the "
                           "one optimizer.update returned"),
            fix=fix or ("`updates, opt_state = optimizer.update(grads, opt_state, "
                        "params)` and return that opt_state"),
            section=section)
    return None


def assert_loss_falls_below(losses: Sequence[float], threshold: float, *,
                            within: int | None = None, name: str = "the loss",
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> None:
    """Asserts that a loss curve stays finite and falls below ``threshold`` in budget.

    Args:
      losses: the loss at each step (a sequence or a 1-D array).
      threshold: the value the loss must fall below (set it well above what the
        reference reaches, so that no JAX version or seed change flips the result).
      within: the step budget: only the first ``within`` losses count.
      name, section, hint, fix: as in :func:`autograder.assert_tree_matches`.

    >>> assert_loss_falls_below([1.0, 0.5, 0.2], 0.3)
    >>> assert_loss_falls_below([1.0, 1.1, 1.3], 0.3, within=3)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: the loss did not fall below 0.3 within 3 steps
      expected: a loss below 0.3 by step 2
      got:      first 1, lowest 1 at step 0, last 1.3
      likely cause: the loss went up: the update is applied with the wrong sign (params - updates where optax.apply_updates adds them), or the parameters are not updated at all
      fix: use `params = optax.apply_updates(params, updates)`; optax's updates already point downhill
    """
    __tracebackhide__ = True
    run(Check("loss_falls_below", name,
              observe=lambda: {"curve": _asarray(losses, dtype=np.float64).ravel().tolist()},
              observe_as="facts",
              params=dict(threshold=float(threshold), within=within, section=section,
                          hint=hint, fix=fix)))


@explainer("loss_falls_below")
def explain_loss_falls_below(observed, expected, *, label: str, threshold: float,
                             within: int | None = None, section=None, hint=None, fix=None,
                             **_ignored) -> str | None:
    """Finite losses, and one below the threshold within the budget."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    curve = _asarray(facts.get("curve", []), dtype=np.float64).ravel()
    if within is not None:
        curve = curve[:within]
    steps = len(curve)
    if steps == 0:
        return format_failure(f"{label} has no steps", expected="at least one loss",
                              got="an empty curve", section=section)
    bad = ~_isfinite(curve)
    if bad.any():
        first = int(np.argmax(bad))
        return format_failure(
            f"{label} became {curve[first]} at step {first}", expected="finite losses",
            got=f"step {first}: {curve[first]} (step 0: {curve[0]:.4g})",
            cause=hint or ("the updates blew up (a learning rate far too large), or "
                           "log(0) in the loss"),
            fix=fix or "check the learning rate and use a numerically stable loss",
            section=section)
    lowest = int(np.argmin(curve))
    if curve[lowest] < threshold:
        return None
    if curve[-1] >= curve[0]:
        cause = ("the loss went up: the update is applied with the wrong sign "
                 "(params - updates where optax.apply_updates adds them), or the "
                 "parameters are not updated at all")
        default_fix = ("use `params = optax.apply_updates(params, updates)`; optax's "
                       "updates already point downhill")
    else:
        cause = ("it trains, but too slowly: a learning rate that is too small, an "
                 "optimizer state that is reset at every step, or the same batch at "
                 "every step")
        default_fix = "compare one step of yours with the lesson's step, term by term"
    return format_failure(
        f"{label} did not fall below {threshold:g}"
        + (f" within {within} steps" if within is not None else ""),
        expected=f"a loss below {threshold:g} by step {steps - 1}",
        got=f"first {curve[0]:.4g}, lowest {curve[lowest]:.4g} at step {lowest}, "
            f"last {curve[-1]:.4g}",
        cause=hint or cause, fix=fix or default_fix, section=section)
