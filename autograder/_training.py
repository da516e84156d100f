"""Checks for a training loop: the capstone's train step, epoch and data-parallel step.

They grade behaviour, never numbers that depend on a JAX version: a train step
compiles once, keeps its parameters' shapes and dtypes, threads its optimizer state
and brings the loss below a threshold within a step budget; an epoch draws a fresh
batch at every step and threads its state through ``lax.scan``; a data-parallel step
places the batch across every device and replicates the parameters.

The epoch and placement checks run the student's code with a *probe*: a fake train
step whose "parameters" record what it was given (batch indices, shardings). So the
facts checked are the student's loop and placement, not the optimizer's numbers.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from autograder._feedback import describe_value, fail
from autograder._numeric import assert_tree_matches, call_student
from autograder._quiet import report_captured

# Captured at import, before any student code runs.
_asarray = np.asarray
_isfinite = np.isfinite
_unique = np.unique
_array_equal = np.array_equal


# --- the train step ------------------------------------------------------------------

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


def _unpack_step_output(out, label: str, section: str | None):
    __tracebackhide__ = True
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        fail(f"{label} returned the wrong structure", rung="type",
             expected="a tuple (params, opt_state, loss)", got=describe_value(out),
             cause="a train step is a pure function: everything that changes must come "
                   "back out, the new optimizer state included",
             fix="end the step with `return new_params, new_opt_state, loss`",
             section=section)
    params, opt_state, loss = out
    if np.shape(loss) != ():
        fail(f"{label} returned a loss that is not a scalar", rung="shape",
             expected="a scalar loss (shape ())", got=describe_value(loss),
             cause="the per-example losses were returned instead of their mean",
             fix="return the mean loss over the batch (the value you differentiated)",
             section=section)
    return params, opt_state, loss


def collect_training_run(train_step: Callable, params, opt_state, batches: Sequence, *,
                         name: str | None = None,
                         section: str | None = None) -> TrainingRun:
    """Runs ``train_step`` over ``batches``, threading its state; returns what it saw.

    Each call is ``params, opt_state, loss = train_step(params, opt_state, x, y)`` for
    ``(x, y)`` in ``batches``, starting from copies of ``params`` and ``opt_state`` (a
    step that donates its inputs cannot delete the caller's). Errors become feedback,
    as in :func:`autograder.call_student`.

    Args:
      train_step: the student's step ``(params, opt_state, x, y) -> (params, opt_state,
        loss)``.
      params, opt_state: the initial state.
      batches: a sequence of ``(x, y)`` pairs, one per step.
      name: how messages name the step (default: its ``__name__``).
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
    label = name or getattr(train_step, "__name__", "train_step")
    losses: list[float] = []
    first_state = None
    params, opt_state = _fresh((params, opt_state))
    for i, (x, y) in enumerate(batches):
        out, captured = call_student(train_step, (params, opt_state, x, y), section=section,
                                     name=f"{label} (step {i})")
        params, opt_state, loss = _unpack_step_output(out, label, section)
        if i == 0:
            first_state = opt_state
            report_captured(captured, label)
        losses.append(float(loss))
    return TrainingRun(losses, params, opt_state, first_state)


def assert_train_step_compiles_once(train_step: Callable, args: Sequence, *,
                                    calls: int = 3, section: str | None = None,
                                    name: str | None = None) -> None:
    """Asserts that ``calls`` calls of ``train_step(*args)`` compile exactly once.

    At most once (:func:`autograder.assert_compiles_at_most` names what changed when
    it compiled again) and at least once: a step that never compiles runs eagerly, one
    small XLA program per operation, instead of as one fused program.

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
    from autograder._compile import assert_compiles_at_most

    label = name or getattr(train_step, "__name__", "train_step")
    # Fresh copies per call (made before counting): a step may donate its inputs.
    copies = [_fresh(tuple(args)) for _ in range(calls)]
    seen = assert_compiles_at_most(train_step, copies, 1, section=section, name=label)
    if seen.count == 0:
        fail(f"{label} never compiled over {calls} calls", rung="structure",
             expected="exactly 1 compilation (the first call)", got="0 compilations",
             cause="the step is not wrapped in jax.jit, so it runs eagerly, one small "
                   "program per operation, dispatched from Python at every step",
             fix="decorate the step you return with @jax.jit (or return jax.jit(step))",
             section=section)


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
    autograder._feedback.CheckFailure: params after 3 steps has the wrong shape
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
    autograder._feedback.CheckFailure: opt_state came back unchanged after one step
      expected: a new optimizer state (Adam's step count and moments change at every update)
      got:      every leaf equals the state passed in
      likely cause: the step returned the optimizer state it was given, not the one optimizer.update returned
      fix: `updates, opt_state = optimizer.update(grads, opt_state, params)` and return that opt_state
    """
    __tracebackhide__ = True
    import jax

    b_leaves, b_def = jax.tree.flatten(before)
    try:
        a_leaves = b_def.flatten_up_to(after)
    except (ValueError, TypeError):
        fail(f"{name} has the wrong structure after one step", rung="type",
             expected=str(b_def), got=str(jax.tree.structure(after)),
             cause="the step returned something other than the optimizer's new state",
             fix="return the state that optimizer.update returned", section=section)
    same = all(np.shape(a) == np.shape(b) and bool(np.all(_asarray(a) == _asarray(b)))
               for a, b in zip(a_leaves, b_leaves))
    if same:
        fail(f"{name} came back unchanged after one step", rung="values",
             expected="a new optimizer state (Adam's step count and moments change at "
                      "every update)",
             got="every leaf equals the state passed in",
             cause=hint or ("the step returned the optimizer state it was given, not the "
                            "one optimizer.update returned"),
             fix=fix or ("`updates, opt_state = optimizer.update(grads, opt_state, "
                         "params)` and return that opt_state"),
             section=section)


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
    autograder._feedback.CheckFailure: the loss did not fall below 0.3 within 3 steps
      expected: a loss below 0.3 by step 2
      got:      first 1, lowest 1 at step 0, last 1.3
      likely cause: the loss went up: the update is applied with the wrong sign (params - updates where optax.apply_updates adds them), or the parameters are not updated at all
      fix: use `params = optax.apply_updates(params, updates)`; optax's updates already point downhill
    """
    __tracebackhide__ = True
    curve = _asarray(losses, dtype=np.float64).ravel()
    if within is not None:
        curve = curve[:within]
    steps = len(curve)
    if steps == 0:
        fail(f"{name} has no steps", rung="shape", expected="at least one loss",
             got="an empty curve", section=section)
    bad = ~_isfinite(curve)
    if bad.any():
        first = int(np.argmax(bad))
        fail(f"{name} became {curve[first]} at step {first}", rung="finite",
             expected="finite losses", got=f"step {first}: {curve[first]} (step 0: "
                                          f"{curve[0]:.4g})",
             cause=hint or ("the updates blew up (a learning rate far too large), or "
                            "log(0) in the loss"),
             fix=fix or "check the learning rate and use a numerically stable loss",
             section=section)
    lowest = int(np.argmin(curve))
    if curve[lowest] < threshold:
        return
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
    fail(f"{name} did not fall below {threshold:g}"
         + (f" within {within} steps" if within is not None else ""),
         rung="values", expected=f"a loss below {threshold:g} by step {steps - 1}",
         got=f"first {curve[0]:.4g}, lowest {curve[lowest]:.4g} at step {lowest}, "
             f"last {curve[-1]:.4g}",
         cause=hint or cause, fix=fix or default_fix, section=section)


# --- the epoch: a probe step records the batches --------------------------------------

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


def _probe_epoch(train_epoch: Callable, *, n: int, batch_size: int, steps: int,
                 section: str | None) -> Callable:
    """Returns ``key -> EpochBatches``: the student's epoch with the probe, jitted once."""
    import functools

    import jax

    x, y = _probe_data(n)
    params, opt_state = _probe_state(steps, batch_size)
    label = _epoch_label(train_epoch, n, batch_size, steps)
    # Jitted once for all keys: one compilation instead of one per call.
    run = jax.jit(functools.partial(train_epoch, _probe_step, batch_size=batch_size,
                                    steps=steps))
    run.__name__ = getattr(train_epoch, "__name__", "train_epoch")  # type: ignore[attr-defined]

    def collect(key) -> EpochBatches:
        __tracebackhide__ = True
        out, captured = call_student(run, (params, opt_state, key, x, y), name=label,
                                     section=section)
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            fail(f"{label} returned the wrong structure", rung="type",
                 expected="a tuple (params, opt_state, losses)", got=describe_value(out),
                 fix="return the final carry of the scan and the stacked losses",
                 section=section)
        p, s, losses = out
        try:
            rows = _asarray(p["rows"]).astype(np.int64) - 1
            count = int(_asarray(s["count"]))
            mismatched = int(_asarray(p["mismatched"]))
        except (TypeError, KeyError, IndexError, ValueError):
            fail(f"{label} did not return the parameters and optimizer state of its last "
                 "step", rung="type", expected="(params, opt_state) as train_step returned "
                 "them", got=f"{describe_value(p)}, {describe_value(s)}",
                 cause="the carry of the scan is not (params, opt_state)",
                 fix="carry (params, opt_state) through the scan and return them",
                 section=section)
        report_captured(captured, label)
        return EpochBatches(rows, count, mismatched, _asarray(losses))

    return collect


def collect_epoch_batches(train_epoch: Callable, key, *, n: int, batch_size: int,
                          steps: int, section: str | None = None) -> EpochBatches:
    """Runs ``train_epoch`` under ``jax.jit`` with a probe step; returns its batches.

    ``train_epoch(train_step, params, opt_state, key, x, y, batch_size=..., steps=...)``
    is called with a probe ``train_step`` whose parameters record the example indices
    of each step's batch (``x[i] = (i + 1, 0)``, ``y[i] = i + 1``) and whose optimizer
    state counts the steps. ``train_step``, ``batch_size`` and ``steps`` are static.

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
    return _probe_epoch(train_epoch, n=n, batch_size=batch_size, steps=steps,
                        section=section)(key)


def assert_epoch_samples_fresh_batches(train_epoch: Callable, key, *, n: int,
                                       batch_size: int, steps: int,
                                       section: str | None = None) -> EpochBatches:
    """Asserts that an epoch threads its state and draws a fresh batch at each step.

    Runs ``train_epoch`` under ``jax.jit`` with a probe step (see
    :func:`collect_epoch_batches`) for two different keys and checks, coarse to fine: the losses have shape ``(steps,)``;
    the optimizer state and the parameters are threaded from step to step; every
    example arrives with its own label; no example appears twice in a batch; no two
    steps draw the same batch (a key reused across steps); another key draws other
    batches (the key is used at all).

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
    autograder._feedback.CheckFailure: same_batch trained on the same batch at steps 0 and 1
      expected: a fresh random batch at every step
      got:      3 steps, 1 distinct batch(es)
      likely cause: one key is reused at every step (or the batch is drawn once, outside the loop), so every step sees the same examples
      fix: split the epoch key into one key per step (`jax.random.split(key, steps)`) and scan over those keys
    """
    __tracebackhide__ = True
    import jax

    name = getattr(train_epoch, "__name__", "train_epoch")
    collect = _probe_epoch(train_epoch, n=n, batch_size=batch_size, steps=steps,
                           section=section)
    seen = collect(key)
    if seen.losses.shape != (steps,):
        fail(f"{name} returned losses of the wrong shape", rung="shape",
             expected=f"({steps},): one loss per step", got=str(seen.losses.shape),
             cause="the per-step losses were not stacked (the scan's second output), or "
                   "were reduced to one number",
             fix="return the `ys` that lax.scan stacks from the body's second output",
             section=section)
    if seen.count != steps:
        fail(f"{name} did not thread the optimizer state through the steps",
             rung="values", expected=f"the final opt_state to have seen {steps} updates",
             got=f"it saw {seen.count}",
             cause="each step started from the initial optimizer state (or the epoch "
                   "returned the state it was given), so Adam's moments and the schedule "
                   "restart at every step",
             fix="carry (params, opt_state) in the scan and feed each step the state the "
                 "previous step returned",
             section=section)
    unwritten = [i for i in range(steps) if (seen.rows[i] < 0).all()]
    if unwritten:
        fail(f"{name} did not thread the parameters through the steps", rung="values",
             expected=f"the final params to carry the updates of all {steps} steps",
             got=f"the updates of step(s) {unwritten[:5]} are missing",
             cause="each step started from the initial parameters, so only the last "
                   "step's update survives",
             fix="carry (params, opt_state) in the scan and feed each step the params the "
                 "previous step returned",
             section=section)
    if seen.mismatched:
        fail(f"{name} paired examples with the wrong labels", rung="values",
             expected="y[i] to stay with x[i] in every batch",
             got=f"{seen.mismatched} example(s) arrived with another example's label",
             cause="x and y were shuffled or indexed differently (two permutations, or "
                   "two keys)",
             fix="draw one index array per step and use it for both: x[idx], y[idx]",
             section=section)
    for i in range(steps):
        values, counts = _unique(seen.rows[i], return_counts=True)
        if (counts > 1).any():
            fail(f"{name} put an example twice in the batch of step {i}", rung="values",
                 expected=f"{batch_size} distinct examples per batch",
                 got=f"{int((counts > 1).sum())} example(s) repeated, e.g. example "
                     f"{int(values[np.argmax(counts)])} {int(counts.max())} times",
                 cause="sampling with replacement: jax.random.choice replaces by default",
                 fix="use jax.random.permutation(k, n)[:batch_size] or "
                     "jax.random.choice(k, n, (batch_size,), replace=False)",
                 section=section)
    batches = [frozenset(row.tolist()) for row in seen.rows]
    distinct = len(set(batches))
    if distinct < steps:
        first = next((i, j) for i in range(steps) for j in range(i + 1, steps)
                     if batches[i] == batches[j])
        fail(f"{name} trained on the same batch at steps {first[0]} and {first[1]}",
             rung="values", expected="a fresh random batch at every step",
             got=f"{steps} steps, {distinct} distinct batch(es)",
             cause="one key is reused at every step (or the batch is drawn once, outside "
                   "the loop), so every step sees the same examples",
             fix="split the epoch key into one key per step (`jax.random.split(key, "
                 "steps)`) and scan over those keys",
             section=section)
    other = collect(jax.random.fold_in(key, 1))
    if _array_equal(other.rows, seen.rows):
        fail(f"{name} drew the same batches for two different epoch keys",
             rung="values", expected="other batches for another key",
             got="identical batches at every step",
             cause="the batches do not depend on the `key` argument: a key made inside "
                   "the function (jax.random.key(0)) or NumPy's global random state, "
                   "which runs once at trace time",
             fix="derive every step's key from the `key` argument", section=section)
    return seen


# --- data parallelism: where did the step's inputs live? -----------------------------

@dataclasses.dataclass
class Placement:
    """Where a probe train step found its inputs: ``{path: sharding}`` per argument."""

    params: dict
    opt_state: dict
    x: Any
    y: Any
    traced: bool


def _shardings(tree) -> dict:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(p): getattr(v, "sharding", None) for p, v in leaves}


def collect_step_placement(make_parallel_step: Callable, mesh, params, opt_state, x, y, *,
                           section: str | None = None) -> Placement:
    """Builds ``make_parallel_step(probe, mesh)`` and records where the probe's inputs live.

    The probe stands in for the train step: it records the sharding of each array it
    receives and returns its inputs unchanged (with a zero loss).

    >>> import jax
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = jax.make_mesh((len(jax.devices()),), ("data",))
    >>> def make(step, mesh):
    ...     def dp_step(p, s, x, y):
    ...         x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
    ...         return step(*jax.device_put((p, s), NamedSharding(mesh, P())), x, y)
    ...     return dp_step
    >>> n = 2 * len(jax.devices())
    >>> seen = collect_step_placement(make, mesh, {"w": jax.numpy.ones(2)}, (),
    ...                               jax.numpy.ones((n, 2)), jax.numpy.ones(n))
    >>> seen.x.spec, seen.params["['w']"].is_fully_replicated
    (P('data',), True)
    """
    __tracebackhide__ = True
    import jax
    import jax.numpy as jnp

    calls: list[Placement] = []

    def probe_step(p, s, xb, yb):
        traced = any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((p, s, xb, yb)))
        calls.append(Placement(_shardings(p), _shardings(s), getattr(xb, "sharding", None),
                               getattr(yb, "sharding", None), traced))
        return p, s, jnp.zeros((), jnp.float32)

    probe_step.__name__ = "train_step"
    maker = getattr(make_parallel_step, "__name__", "make_parallel_step")
    step, _ = call_student(make_parallel_step, (probe_step, mesh),
                           name=f"{maker}(train_step, mesh)", section=section)
    label = f"the step {maker} returned"
    call_student(step, (params, opt_state, x, y), name=f"{label}, called on "
                 f"(params, opt_state, x: {describe_value(x)}, y: {describe_value(y)})",
                 section=section)
    if not calls:
        fail(f"{label} never called train_step", rung="type",
             expected="one call of train_step on the placed arrays", got="no call",
             fix="return a function that places its inputs and then calls train_step",
             section=section)
    return calls[0]


def _place_text(arr_sharding, shape) -> str:
    if arr_sharding is None:
        return "not a JAX array"
    devices = sorted(arr_sharding.device_set, key=lambda d: d.id)
    shard = arr_sharding.shard_shape(tuple(shape))
    if len(devices) == 1:
        return f"all of it on one device ({devices[0]}), shape {tuple(shape)}"
    if shard == tuple(shape):
        return f"a full copy of shape {tuple(shape)} on each of {len(devices)} devices"
    return f"{len(devices)} devices holding slices of shape {shard}"


def assert_step_is_data_parallel(make_parallel_step: Callable, mesh, params, opt_state,
                                 x, y, *, section: str | None = None) -> Placement:
    """Asserts that a data-parallel step shards the batch and replicates the state.

    Builds ``make_parallel_step(probe, mesh)`` and calls it on ``(params, opt_state, x,
    y)``: the probe must receive ``x`` and ``y`` split along their first axis over all
    of the mesh's devices (one slice each) and every leaf of ``params`` and
    ``opt_state`` replicated on all of them. A step that runs everything on one
    device gives the same numbers, only slower and without the memory split: this
    check sees it.

    >>> import jax
    >>> mesh = jax.make_mesh((len(jax.devices()),), ("data",))
    >>> n = 2 * len(jax.devices())
    >>> from jax.sharding import NamedSharding, PartitionSpec as P
    >>> def make(step, mesh):
    ...     def dp_step(p, s, x, y):
    ...         x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
    ...         return step(*jax.device_put((p, s), NamedSharding(mesh, P())), x, y)
    ...     return dp_step
    >>> seen = assert_step_is_data_parallel(make, mesh, {"w": jax.numpy.ones(2)}, (),
    ...                                     jax.numpy.ones((n, 2)), jax.numpy.ones(n))
    """
    __tracebackhide__ = True
    from jax.sharding import NamedSharding, PartitionSpec

    seen = collect_step_placement(make_parallel_step, mesh, params, opt_state, x, y,
                                  section=section)
    maker = getattr(make_parallel_step, "__name__", "make_parallel_step")
    if seen.traced:
        fail(f"the step {maker} returned called train_step inside a trace", rung="type",
             expected="train_step called on placed, concrete arrays",
             got="it received tracers (inside jax.jit, vmap or grad)",
             cause="the data-parallel step was wrapped in another transformation; "
                   "train_step is already jitted",
             fix="place the arrays with jax.device_put, then call train_step directly",
             section=section)
    devices = set(mesh.devices.flat)
    count = len(devices)
    axis = mesh.axis_names[0]
    for label, arr, sharding in (("x", x, seen.x), ("y", y, seen.y)):
        want = NamedSharding(mesh, PartitionSpec(axis))
        ok = (sharding is not None and set(sharding.device_set) == devices
              and sharding.is_equivalent_to(want, len(arr.shape)))
        if not ok:
            if sharding is not None and len(sharding.device_set) > 1 and \
                    sharding.shard_shape(tuple(arr.shape)) == tuple(arr.shape):
                cause = ("the batch was replicated (P()) instead of split: every device "
                         "computes the gradient of the whole batch, so nothing runs in "
                         "parallel")
            else:
                cause = ("the batch was never placed (or was brought back to one "
                         "device), so one device does all the work while the others "
                         "idle: the step gives the right numbers, which is why this goes "
                         "unnoticed")
            fail(f"{label} is not split over the mesh's {count} devices when train_step "
                 "runs", rung="placement",
                 expected=_place_text(want, arr.shape),
                 got=_place_text(sharding, arr.shape), cause=cause,
                 fix=f"{label} = jax.device_put({label}, NamedSharding(mesh, "
                     f"P({axis!r})))" + (" (and the same for y)" if label == "x" else ""),
                 section=section)
    bad = []
    for tree_name, shardings in (("params", seen.params), ("opt_state", seen.opt_state)):
        for path, sharding in shardings.items():
            if sharding is None:
                continue
            if not (set(sharding.device_set) == devices and sharding.is_fully_replicated):
                where = ("one device" if len(sharding.device_set) == 1
                         else "split across devices")
                bad.append(f"{tree_name}{path}: {where} ({sharding})")
    if bad:
        fail(f"the step {maker} returned does not replicate the model state on all "
             f"{count} devices", rung="placement", details=bad[:6],
             expected=f"every leaf of params and opt_state replicated on all {count} "
                      "devices", got=f"{len(bad)} leaf (leaves) placed otherwise",
             cause="in data parallelism every device holds a full copy of the parameters "
                   "and optimizer state; only the batch is split",
             fix="params, opt_state = jax.device_put((params, opt_state), "
                 "NamedSharding(mesh, P()))", section=section)
    return seen
