"""Checks of a training epoch: it threads its state through the steps and draws a
fresh batch at every step.

The student's epoch runs under ``jax.jit`` with a *probe* train step: its "parameters"
record the example indices of each step's batch and whether every label stayed with
its example, its optimizer state counts the steps. So what is checked is the student's
loop, not an optimizer's numbers. The probe's final state is a value the student's
function returned, observed as plain data (``rows``, ``count``, ``mismatched``, the
losses' shape) where it ran; the verdict (:func:`explain_epoch_fresh_batches`) is a
pure function of that data.

In-process facts, both checks (:func:`collect_epoch_batches`,
:func:`assert_epoch_samples_fresh_batches`): which batches a loop draws is a fact of
running it with given keys, not of its program's structure, so it is observed as a
value, like any other result.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import numpy as np

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import describe_value, format_failure

# Captured at import, before any student code runs.
_asarray = np.asarray
_unique = np.unique


@dataclasses.dataclass
class EpochBatches:
    """What a probe train step saw during one epoch.

    Attributes:
      rows: ``(steps, batch_size)`` example indices of each step's batch (``-1``
        where a step never wrote its row).
      count: how many steps the final optimizer state counted.
      mismatched: how many examples arrived with another example's label.
      losses: the losses the epoch returned (as a NumPy array).
    """

    rows: np.ndarray
    count: int
    mismatched: int
    losses: np.ndarray


def _probe_data(n: int):
    import jax.numpy as jnp

    # Example i has features (i + 1, 0) and label i + 1: a batch tells which examples
    # it holds, and whether x and y were indexed alike. (1-based: 0 means "unwritten".)
    ids = jnp.arange(1, n + 1)
    x = jnp.stack([ids.astype(jnp.float32), jnp.zeros(n, jnp.float32)], axis=1)
    return x, ids.astype(jnp.int32)


def _probe_state(steps: int, batch_size: int):
    import jax.numpy as jnp

    params = {"rows": jnp.zeros((steps, batch_size), jnp.float32),
              "mismatched": jnp.zeros((), jnp.int32)}
    return params, {"count": jnp.zeros((), jnp.int32)}


def _probe_step(params, opt_state, xb, yb):
    import jax.numpy as jnp

    i = opt_state["count"]
    ids = xb[:, 0]
    rows = params["rows"].at[i].set(ids, mode="drop")
    mismatched = params["mismatched"] + jnp.sum(ids.astype(jnp.int32) != yb)
    # A scalar fingerprint of the batch, so losses differ when batches do.
    loss = jnp.sum(jnp.cos(0.618 * ids + 1.0))
    return {"rows": rows, "mismatched": mismatched}, {"count": i + 1}, loss


def _epoch_label(train_epoch, n, batch_size, steps) -> str:
    return (f"{getattr(train_epoch, '__name__', 'train_epoch')}(train_step, params, "
            f"opt_state, key, x: f32[{n},2], y: i32[{n}], batch_size={batch_size}, "
            f"steps={steps}) under jax.jit")


def _probe_epoch(train_epoch: Callable, *, n: int, batch_size: int, steps: int) -> Callable:
    """``key -> facts``: the student's epoch with the probe, jitted once for all keys."""
    import jax

    x, y = _probe_data(n)
    params, opt_state = _probe_state(steps, batch_size)
    jitted: list = []

    def collect(key) -> dict:
        if not jitted:  # here, not before: a name that is not a function is an observation
            if not callable(train_epoch):
                call(train_epoch)  # raises NotAFunction
            jitted.append(jax.jit(functools.partial(train_epoch, _probe_step,
                                                    batch_size=batch_size, steps=steps)))
        out = call(jitted[0], (params, opt_state, key, x, y))
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            return {"problem": "structure", "described": describe_value(out)}
        p, s, losses = out
        try:
            rows = _asarray(p["rows"]).astype(np.int64) - 1
            count = int(_asarray(s["count"]))
            mismatched = int(_asarray(p["mismatched"]))
        except (TypeError, KeyError, IndexError, ValueError):
            return {"problem": "state", "described": f"{describe_value(p)}, {describe_value(s)}"}
        try:
            shape = [int(d) for d in np.shape(losses)]
            values = _asarray(losses, dtype=np.float64).ravel().tolist()
        except (TypeError, ValueError):
            shape, values = None, []
        return {"rows": rows.tolist(), "count": count, "mismatched": mismatched,
                "losses_shape": shape, "losses_described": describe_value(losses),
                "losses": values}

    return collect


def _batches(facts: dict) -> EpochBatches:
    losses = _asarray(facts["losses"])
    if facts["losses_shape"] is not None:
        losses = losses.reshape(facts["losses_shape"])
    return EpochBatches(_asarray(facts["rows"], dtype=np.int64), facts["count"],
                        facts["mismatched"], losses)


def collect_epoch_batches(train_epoch: Callable, key, *, n: int, batch_size: int,
                          steps: int, section: str | None = None) -> EpochBatches | None:
    """Runs ``train_epoch`` under ``jax.jit`` with a probe step; returns its batches.

    ``train_epoch(train_step, params, opt_state, key, x, y, batch_size=..., steps=...)``
    is called with a probe ``train_step`` whose parameters record the example indices
    of each step's batch (``x[i] = (i + 1, 0)``, ``y[i] = i + 1``) and whose optimizer
    state counts the steps. ``train_step``, ``batch_size`` and ``steps`` are static.
    Fails (None in a grading run) when the epoch raises or returns another structure.

    >>> import jax
    >>> from jax import lax
    >>> def epoch(step, p, s, key, x, y, *, batch_size, steps):
    ...     def body(carry, k):
    ...         idx = jax.random.permutation(k, x.shape[0])[:batch_size]
    ...         p, s, loss = step(*carry, x[idx], y[idx])
    ...         return (p, s), loss
    ...     (p, s), losses = lax.scan(body, (p, s), jax.random.split(key, steps))
    ...     return p, s, losses
    >>> seen = collect_epoch_batches(epoch, jax.random.key(0), n=16, batch_size=4, steps=3)
    >>> seen.rows.shape, seen.count, seen.mismatched
    ((3, 4), 3, 0)
    """
    __tracebackhide__ = True
    collect = _probe_epoch(train_epoch, n=n, batch_size=batch_size, steps=steps)
    return run(Check("epoch_batches", _epoch_label(train_epoch, n, batch_size, steps),
                     observe=lambda: collect(key), observe_as="facts",
                     params=dict(section=section),
                     returns=lambda facts: None if "problem" in facts else _batches(facts)))


def _explain_epoch_structure(facts: dict, label: str, section) -> str | None:
    if facts.get("problem") == "structure":
        return format_failure(
            f"{label} returned the wrong structure",
            expected="a tuple (params, opt_state, losses)", got=facts.get("described"),
            fix="return the final carry of the scan and the stacked losses", section=section)
    if facts.get("problem") == "state" or "rows" not in facts:
        return format_failure(
            f"{label} did not return the parameters and optimizer state of its last step",
            expected="(params, opt_state) as train_step returned them",
            got=facts.get("described"), cause="the carry of the scan is not (params, opt_state)",
            fix="carry (params, opt_state) through the scan and return them", section=section)
    return None


@explainer("epoch_batches")
def explain_epoch_batches(observed, expected, *, label: str, section=None,
                          **_ignored) -> str | None:
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    return _explain_epoch_structure(facts, label, section)


def assert_epoch_samples_fresh_batches(train_epoch: Callable, key, *, n: int,
                                       batch_size: int, steps: int,
                                       section: str | None = None) -> EpochBatches | None:
    """Asserts that an epoch threads its state and draws a fresh batch at each step.

    Runs ``train_epoch`` under ``jax.jit`` with a probe step (see
    :func:`collect_epoch_batches`) for two different keys and checks, coarse to fine:
    the losses have shape ``(steps,)``; the optimizer state and the parameters are
    threaded from step to step; every example arrives with its own label; no example
    appears twice in a batch; no two steps draw the same batch (a key reused across
    steps); another key draws other batches (the key is used at all).

    Returns:
      What the probe saw with ``key``.

    >>> import jax
    >>> def same_batch(step, p, s, key, x, y, *, batch_size, steps):
    ...     losses = []
    ...     for _ in range(steps):
    ...         idx = jax.random.permutation(key, x.shape[0])[:batch_size]
    ...         p, s, loss = step(p, s, x[idx], y[idx])
    ...         losses.append(loss)
    ...     return p, s, jax.numpy.stack(losses)
    >>> assert_epoch_samples_fresh_batches(same_batch, jax.random.key(0), n=16,
    ...                                    batch_size=4, steps=3)
    Traceback (most recent call last):
    ...
    autograder.core.feedback.CheckFailure: same_batch trained on the same batch at steps 0 and 1
      expected: a fresh random batch at every step
      got:      3 steps, 1 distinct batch(es)
      likely cause: one key is reused at every step (or the batch is drawn once, outside the loop), so every step sees the same examples
      fix: split the epoch key into one key per step (`jax.random.split(key, steps)`) and scan over those keys
    """
    __tracebackhide__ = True
    import jax

    collect = _probe_epoch(train_epoch, n=n, batch_size=batch_size, steps=steps)

    def observe() -> dict:
        seen = collect(key)
        if "problem" in seen:
            return {"seen": seen}
        return {"seen": seen, "other": collect(jax.random.fold_in(key, 1))}

    return run(Check("epoch_fresh_batches", _epoch_label(train_epoch, n, batch_size, steps),
                     observe=observe, observe_as="facts",
                     params=dict(name=getattr(train_epoch, "__name__", "train_epoch"),
                                 batch_size=batch_size, steps=steps, n=n, section=section),
                     returns=lambda facts: (None if "problem" in facts["seen"]
                                            else _batches(facts["seen"]))))


@explainer("epoch_fresh_batches")
def explain_epoch_fresh_batches(observed, expected, *, label: str, name: str,
                                batch_size: int, steps: int, n: int | None = None,
                                section=None, **_ignored) -> str | None:
    """The epoch's rungs: structure, losses, state threaded, labels, batches, and, where
    the two epochs' steps are enough (:data:`COVERAGE_ALPHA`), every example drawn."""
    facts = observed.facts if isinstance(observed.facts, dict) else {}
    seen = facts.get("seen") if isinstance(facts.get("seen"), dict) else {}
    problem = _explain_epoch_structure(seen, label, section)
    if problem:
        return problem
    if seen.get("losses_shape") != [steps]:
        shape = seen.get("losses_shape")
        return format_failure(
            f"{name} returned losses of the wrong shape", expected=f"({steps},): one loss per step",
            got=str(tuple(shape)) if shape is not None else seen.get("losses_described"),
            cause="the per-step losses were not stacked (the scan's second output), or "
                  "were reduced to one number",
            fix="return the `ys` that lax.scan stacks from the body's second output",
            section=section)
    if seen.get("count") != steps:
        return format_failure(
            f"{name} did not thread the optimizer state through the steps",
            expected=f"the final opt_state to have seen {steps} updates",
            got=f"it saw {seen.get('count')}",
            cause="each step started from the initial optimizer state (or the epoch "
                  "returned the state it was given), so Adam's moments and the schedule "
                  "restart at every step",
            fix="carry (params, opt_state) in the scan and feed each step the state the "
                "previous step returned", section=section)
    rows = _asarray(seen["rows"], dtype=np.int64)
    if rows.ndim != 2 or rows.shape[0] != steps:
        return _explain_epoch_structure(
            {"problem": "state", "described": f"rows of shape {rows.shape}"}, label, section)
    unwritten = [i for i in range(steps) if (rows[i] < 0).all()]
    if unwritten:
        return format_failure(
            f"{name} did not thread the parameters through the steps",
            expected=f"the final params to carry the updates of all {steps} steps",
            got=f"the updates of step(s) {unwritten[:5]} are missing",
            cause="each step started from the initial parameters, so only the last "
                  "step's update survives",
            fix="carry (params, opt_state) in the scan and feed each step the params the "
                "previous step returned", section=section)
    if seen.get("mismatched"):
        return format_failure(
            f"{name} paired examples with the wrong labels",
            expected="y[i] to stay with x[i] in every batch",
            got=f"{seen['mismatched']} example(s) arrived with another example's label",
            cause="x and y were shuffled or indexed differently (two permutations, or "
                  "two keys)",
            fix="draw one index array per step and use it for both: x[idx], y[idx]",
            section=section)
    for i in range(steps):
        values, counts = _unique(rows[i], return_counts=True)
        if (counts > 1).any():
            return format_failure(
                f"{name} put an example twice in the batch of step {i}",
                expected=f"{batch_size} distinct examples per batch",
                got=f"{int((counts > 1).sum())} example(s) repeated, e.g. example "
                    f"{int(values[np.argmax(counts)])} {int(counts.max())} times",
                cause="sampling with replacement: jax.random.choice replaces by default",
                fix="use jax.random.permutation(k, n)[:batch_size] or "
                    "jax.random.choice(k, n, (batch_size,), replace=False)",
                section=section)
    batches = [frozenset(row.tolist()) for row in rows]
    distinct = len(set(batches))
    if distinct < steps:
        first = next((i, j) for i in range(steps) for j in range(i + 1, steps)
                     if batches[i] == batches[j])
        return format_failure(
            f"{name} trained on the same batch at steps {first[0]} and {first[1]}",
            expected="a fresh random batch at every step",
            got=f"{steps} steps, {distinct} distinct batch(es)",
            cause="one key is reused at every step (or the batch is drawn once, outside "
                  "the loop), so every step sees the same examples",
            fix="split the epoch key into one key per step (`jax.random.split(key, "
                "steps)`) and scan over those keys", section=section)
    other = facts.get("other") if isinstance(facts.get("other"), dict) else {}
    if other.get("rows") == seen["rows"]:
        return format_failure(
            f"{name} drew the same batches for two different epoch keys",
            expected="other batches for another key", got="identical batches at every step",
            cause="the batches do not depend on the `key` argument: a key made inside "
                  "the function (jax.random.key(0)) or NumPy's global random state, "
                  "which runs once at trace time",
            fix="derive every step's key from the `key` argument", section=section)
    if n and other.get("rows") and _missed_by_chance(n, batch_size, steps) <= COVERAGE_ALPHA:
        drawn = set(rows.ravel().tolist()) | set(_asarray(other["rows"]).ravel().tolist())
        never = sorted(set(range(n)) - drawn)
        if never:
            return format_failure(
                f"{name} never drew some of the examples",
                expected=f"every one of the {n} examples drawn at some step of "
                         f"{2 * steps} random batches of {batch_size}",
                got=f"{len(never)} never drawn, e.g. example(s) {never[:5]}",
                cause="the indices are drawn from fewer than n examples (an off-by-one such "
                      "as permutation(k, n - 1), or a fixed slice of the data)",
                fix="draw from all n = x.shape[0] examples: jax.random.permutation(k, "
                    "x.shape[0])[:batch_size]", section=section)
    return None


# The coverage rung runs only where a sampler that draws its batch uniformly without
# replacement misses some example with at most this probability (the union bound over
# the examples, two epochs of `steps` draws each): a correct answer fails it that rarely.
COVERAGE_ALPHA = 1e-6


def _missed_by_chance(n: int, batch_size: int, steps: int) -> float:
    """The chance that two epochs of uniform draws without replacement leave some
    example undrawn (a union bound).

    >>> _missed_by_chance(8, 4, 48) < 1e-20 and _missed_by_chance(64, 32, 4) > 0.1
    True
    """
    return n * (1.0 - batch_size / n) ** (2 * steps)
