"""Trusted probes for 07_capstone: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are compared outside. See
grader/trusted.py. Inputs mirror the tests of source/07_capstone (same seeds,
shapes, optimizers and reference train steps); every probe builds its own inputs and
reference steps, so it never depends on the student's other answers.

Values (losses, gradients, optimizer updates, parameters and optimizer states after a
few steps) are compared with the reference. Rules with no reference to equal are judged
by a ``check`` here on a small fact that the sandbox returns (``compare=False``): how
many XLA compilations three calls of a train step caused, which batches an epoch drew
(recorded by the autograder's probe step), whether the epoch's jaxpr holds a ``scan``,
the loss curve of a short training run, and where a data-parallel step's inputs lived
when the train step received them. Those facts are computed inside the sandbox with the
autograder's helpers, so a submission that tampers with its interpreter could forge them.
"""
import json

import numpy as np

from grader.trusted import Probe

_PRE = """\
import json
import numpy as np
import jax
import jax.numpy as jnp
import optax
from jax import lax
"""

# A linear softmax classifier, independent of the student's cross_entropy.
_SOFTMAX_LOSS = """\
def _softmax_loss(params, x, y):
    z = x @ params["w"] + params["b"]
    return jnp.mean(jax.nn.logsumexp(z, axis=-1) - jnp.take_along_axis(z, y[:, None], axis=-1)[:, 0])
"""



def _load(raw):
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _falls_below(threshold: float, within: int, what: str, why_stuck: str | None = None):
    """A check: the loss curve stays finite and goes below ``threshold`` within budget.

    ``why_stuck`` replaces the likely causes named for a curve that does not fall.
    """

    def check(got, expected):
        del expected  # the reference's curve is one run among many correct ones
        try:
            curve = np.asarray(got, dtype=np.float64).ravel()[:within]
        except (TypeError, ValueError):
            return f"{what}: the grader could not read the losses"
        if curve.size == 0:
            return f"{what}: no losses came back"
        bad = ~np.isfinite(curve)
        if bad.any():
            first = int(np.argmax(bad))
            return (f"{what} became {curve[first]} at step {first}\n"
                    f"  expected: finite losses\n  got:      step {first}: {curve[first]} "
                    f"(step 0: {curve[0]:.4g})\n"
                    "  (the updates blew up, or log(0) in the loss)")
        lowest = int(np.argmin(curve))
        if curve[lowest] < threshold:
            return None
        why = why_stuck or (
            "the loss went up: the update is applied with the wrong sign (params - updates "
            "where optax.apply_updates adds them), or the parameters are not updated at all"
            if curve[-1] >= curve[0] else
            "it trains, but too slowly: an optimizer state reset at every step, the same "
            "batch at every step, or not the optimizer's updates")
        return (f"{what} did not fall below {threshold:g} within {within} steps\n"
                f"  expected: a loss below {threshold:g} by step {curve.size - 1}\n"
                f"  got:      first {curve[0]:.4g}, lowest {curve[lowest]:.4g} at step {lowest}, "
                f"last {curve[-1]:.4g}\n  ({why})")

    return check


# ------------------------------------------------------------ exercise 1: cross_entropy

_S31 = "3.1 Cross-entropy from logits"
_CE_SETUP = _PRE + """\
_rng = np.random.default_rng(701)
_zh = jnp.asarray(3 * _rng.normal(size=(4, 3)), jnp.float32)
_yh = jnp.asarray(_rng.integers(0, 3, size=4), jnp.int32)
_zbig = jnp.asarray(150 * _rng.normal(size=(4, 3)), jnp.float32)
_ybig = jnp.asarray(_rng.integers(0, 3, size=4), jnp.int32)
_zg = jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32)
_yg = jnp.array([1, 2])
_z = jnp.array([[2.0, 0.5, -1.0], [0.0, 0.0, 0.0]])
_y = jnp.array([0, 2])
"""
_CE_STABLE_HINT = ("exp overflows (or softmax underflows to 0 and log gives -inf) for logits in "
                   "the hundreds")
_CE_STABLE_FIX = ("use jax.nn.logsumexp or jax.nn.log_softmax, which subtract the largest logit "
                  "first")
_CE_GRAD_HINT = ("the value is right but jax.grad of it is not: a stop_gradient, or a term "
                 "computed outside JAX, hides part of the loss from differentiation")
_CE_GRAD_FIX = "compute the whole loss with differentiable jnp / jax.nn operations"

_CE_PROBES = [
    Probe("cross_entropy(_z, _y)", _CE_SETUP, name="cross_entropy(z, y) on a small batch",
          rtol=1e-5, atol=1e-6, section=_S31,
          hint="the mean over the batch of logsumexp(z_i) - z_i[y_i]"),
    Probe("cross_entropy(jnp.array([[300.0, 0.0, -300.0], [0.0, 1000.0, 0.0]]), jnp.array([2, 0]))",
          _CE_SETUP, name="cross_entropy on logits 300 and 1000 (exact mean: 800)", rtol=1e-5,
          atol=1e-6, section=_S31, hint=_CE_STABLE_HINT, fix=_CE_STABLE_FIX),
    Probe("cross_entropy(_zh, _yh)", _CE_SETUP, name="cross_entropy on random logits",
          rtol=1e-5, atol=1e-5, section=_S31,
          hint="the mean (not the sum) over the batch of logsumexp(z_i) - z_i[y_i]"),
    Probe("jax.jit(cross_entropy)(_zh, _yh)", _CE_SETUP, name="jax.jit(cross_entropy)",
          rtol=1e-5, atol=1e-5, section=_S31,
          fix="use only jnp / jax.nn operations, so that the loss traces under jit"),
    Probe("cross_entropy(_zbig, _ybig)", _CE_SETUP,
          name="cross_entropy on random logits of scale 150", rtol=1e-5, atol=1e-3,
          section=_S31, hint=_CE_STABLE_HINT, fix=_CE_STABLE_FIX),
    Probe("jax.grad(cross_entropy)(_z, _y)", _CE_SETUP, name="jax.grad(cross_entropy)(z, y)",
          rtol=1e-4, atol=1e-5, section=_S31, hint=_CE_GRAD_HINT, fix=_CE_GRAD_FIX),
    Probe("jax.grad(cross_entropy)(_zg, _yg)", _CE_SETUP,
          name="jax.grad(cross_entropy) on random logits", rtol=1e-4, atol=1e-5,
          section=_S31, hint=_CE_GRAD_HINT, fix=_CE_GRAD_FIX),
]

# ---------------------------------------------------- exercise 2: per_example_grad_norms

_S42 = "4.2 Per-example gradients"
_NORMS_SETUP = _PRE + """\
def _linear_example_loss(params, xi, yi):
    z = xi @ params["w"] + params["b"]
    return jax.nn.logsumexp(z) - z[yi]

def _mlp_example_loss(params, xi, yi):
    h = jnp.tanh(xi @ params[0]["w"] + params[0]["b"])
    z = h @ params[1]["w"] + params[1]["b"]
    return jax.nn.logsumexp(z) - z[yi]

_rng = np.random.default_rng(702)
_p = {"w": jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32),
      "b": jnp.asarray(_rng.normal(size=3), jnp.float32)}
_x = jnp.asarray(_rng.normal(size=(8, 2)), jnp.float32)
_y = jnp.asarray(_rng.integers(0, 3, size=8), jnp.int32)
_pm = [{"w": jnp.asarray(_rng.normal(size=(3, 5)), jnp.float32), "b": jnp.zeros(5)},
       {"w": jnp.asarray(_rng.normal(size=(5, 4)), jnp.float32),
        "b": jnp.asarray(_rng.normal(size=4), jnp.float32)}]
_xm = jnp.asarray(_rng.normal(size=(6, 3)), jnp.float32)
_ym = jnp.asarray(_rng.integers(0, 4, size=6), jnp.int32)
_norms = jax.jit(per_example_grad_norms, static_argnums=0)
"""
_NORMS_HINT = ("one norm per example: vmap the gradient of the one-example loss over x and y with "
               "params shared (in_axes=(None, 0, 0)), then the square root of the sum of squares "
               "over all leaves together (the global norm, not a sum of per-leaf norms)")
_NORMS_FIX = ("check one example by hand: jax.grad(loss_fn)(params, x[0], y[0]) and the square "
              "root of the sum of its squared entries over every leaf")

_NORMS_PROBES = [
    Probe("_norms(_linear_example_loss, _p, _x, _y)", _NORMS_SETUP,
          name="jax.jit(per_example_grad_norms) for a linear softmax model", rtol=1e-4,
          atol=1e-6, section=_S42, hint=_NORMS_HINT, fix=_NORMS_FIX),
    Probe("_norms(_mlp_example_loss, _pm, _xm, _ym)", _NORMS_SETUP,
          name="jax.jit(per_example_grad_norms) for a two-layer model (a list of layers)",
          rtol=1e-4, atol=1e-6, section=_S42, hint=_NORMS_HINT, fix=_NORMS_FIX),
]

# ---------------------------------------------------------- exercise 3: make_optimizer

_S52 = "5.2 Warm up, then decay"
_OPT_SETUP = _PRE + """\
def _updates_under_jit(optimizer, grads):
    # One update per row of grads, threading the state, all inside jax.jit.
    params = jnp.zeros(grads.shape[1:])
    def body(state, g):
        u, state = optimizer.update(g, state, params)
        return state, u
    return jax.jit(lambda gs: lax.scan(body, optimizer.init(params), gs)[1])(grads)

_g = jnp.asarray(np.random.default_rng(703).normal(size=(45, 4)), jnp.float32)
"""
_OPT_HINT = ("0 at step 0, peak*t/warmup during warmup, a half cosine down to 0 at total_steps, "
             "then 0; optax's decay_steps counts the warmup steps too")
_OPT_FIX = ("optax.adam(optax.warmup_cosine_decay_schedule(0.0, peak_lr, warmup_steps, total_steps, "
            "0.0)); a hand-written schedule gets a traced count, so it must use jnp.where, not a "
            "Python if")

_OPT_PROBES = [
    Probe("-_updates_under_jit(make_optimizer(0.1, 5, 20), jnp.ones((25, 3)))[:, 0]", _OPT_SETUP,
          name="the learning rate of make_optimizer(0.1, 5, 20) at steps 0..24 (minus Adam's "
               "update for a constant gradient of 1, under jax.jit)",
          rtol=1e-4, atol=1e-7, section=_S52, hint=_OPT_HINT, fix=_OPT_FIX),
    Probe("-_updates_under_jit(make_optimizer(0.03, 10, 40), jnp.ones((45, 2)))[:, 0]", _OPT_SETUP,
          name="the learning rate of make_optimizer(0.03, 10, 40) at steps 0..44",
          rtol=1e-4, atol=1e-7, section=_S52, hint=_OPT_HINT, fix=_OPT_FIX),
    Probe("_updates_under_jit(make_optimizer(0.03, 10, 40), _g)", _OPT_SETUP,
          name="the updates of make_optimizer(0.03, 10, 40) for random gradients",
          rtol=1e-4, atol=1e-7, section="5.1 An optimizer is a pair of pure functions",
          hint="the schedule is right but the optimizer is not Adam with optax's default betas "
               "(0.9, 0.999) and eps (1e-8)",
          fix="pass the schedule to optax.adam(...) as its learning rate"),
]

# --------------------------------------------------------- exercise 4: make_train_step

_S61 = "6.1 A pure step"
_STEP_SETUP = _PRE + _SOFTMAX_LOSS + """\
import course
from autograder._training import _fresh, collect_training_run
_xs, _ys = course.classification_data(jax.random.key(41), n=512)
_xs, _ys = _xs[:256], _ys[:256]
_p0 = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
_adam = optax.adam(0.05)
_s0 = _adam.init(_p0)

def _compilations():
    from autograder._compile import collect_compilations
    step = make_train_step(_adam, _softmax_loss)
    copies = [_fresh((_p0, _s0, _xs, _ys)) for _ in range(3)]   # made before counting
    with collect_compilations() as seen:
        for args in copies:
            jax.block_until_ready(step(*args))
    return json.dumps({"count": seen.count, "names": seen.names[:6]})

def _losses(steps, threshold):
    # Stops early once the loss is below threshold (the check asks no more), 5 steps at a time.
    step = make_train_step(_adam, _softmax_loss)
    params, opt_state, losses = _p0, _s0, []
    while len(losses) < steps and not (losses and min(losses) < threshold):
        chunk = [(_xs, _ys)] * min(5, steps - len(losses))
        run = collect_training_run(step, params, opt_state, chunk)
        params, opt_state = run.params, run.opt_state
        losses.extend(run.losses)
    return np.asarray(losses, np.float64)

def _after(steps):
    run = collect_training_run(make_train_step(_adam, _softmax_loss), _p0, _s0,
                               [(_xs, _ys)] * steps)
    return run.params

def _first_state():
    return make_train_step(_adam, _softmax_loss)(*_fresh((_p0, _s0, _xs, _ys)))[1]

def _layers_loss(params, x, y):
    return _softmax_loss(params[0], x, y)

def _layers_run():
    rng = np.random.default_rng(704)
    pl = [{"w": jnp.asarray(0.5 * rng.normal(size=(2, 3)), jnp.float32), "b": jnp.zeros(3)}]
    batches = [(_xs[:64], _ys[:64]), (_xs[64:128], _ys[64:128])] * 2
    run = collect_training_run(make_train_step(_adam, _layers_loss), pl, _adam.init(pl), batches)
    return run.params, run.opt_state, np.asarray(run.losses, np.float32)
"""


def _check_compiles_once(got, expected):
    del expected
    g = _load(got)
    if not isinstance(g, dict) or not isinstance(g.get("count"), int):
        return "the grader could not count the compilations"
    count = g["count"]
    if count == 1:
        return None
    if count == 0:
        return ("never compiled over 3 calls\n  expected: exactly 1 compilation (the first call)\n"
                "  got:      0 compilations\n"
                "  (the step is not wrapped in jax.jit, so it runs eagerly, one small program "
                "per operation: decorate the step you return with @jax.jit)")
    names = ", ".join(str(n) for n in g.get("names") or [])
    return (f"compiled {count} times over 3 calls with the same shapes and dtypes\n"
            "  expected: exactly 1 compilation (the first call)\n"
            f"  got:      {count} compilations ({names})\n"
            "  (jax.jit applied inside the step to a freshly defined function compiles at every "
            "call: jit the step once, in make_train_step, and return the jitted function)")


_STEP_PROBES = [
    Probe("_compilations()", _STEP_SETUP,
          name="XLA compilations of 3 calls of make_train_step(adam, loss)(params, opt_state, "
               "x, y)",
          compare=False, check=_check_compiles_once, section="6.2 Compile once",
          fix="build the step once: `@jax.jit def train_step(...)` inside make_train_step, "
              "then `return train_step`"),
    Probe("_losses(50, 0.2)", _STEP_SETUP, name="the loss of 50 full-batch Adam steps",
          compare=False,
          check=_falls_below(0.2, 50, "the loss of 50 full-batch Adam steps"),
          section=_S61,
          fix="loss, grads = jax.value_and_grad(loss_fn)(params, x, y); updates, opt_state = "
              "optimizer.update(grads, opt_state, params); params = optax.apply_updates(params, "
              "updates)"),
    Probe("_after(3)", _STEP_SETUP, name="params after 3 steps: structure, shapes and dtypes",
          values=False, dtype="exact", section=_S61,
          hint="an update changed a parameter's shape or dtype: an update broadcast against a "
               "wrongly shaped array, a float64 constant, or parameters rebuilt in another "
               "container",
          fix="apply updates leaf by leaf with optax.apply_updates and return the parameters in "
              "the structure you were given"),
    Probe("_first_state()", _STEP_SETUP, name="the optimizer state returned by the first step",
          rtol=1e-4, atol=1e-6, section=_S61,
          hint="the step returned the optimizer state it was given, not the one "
               "optimizer.update returned: Adam then restarts at every step (its count stays 0)",
          fix="`updates, opt_state = optimizer.update(grads, opt_state, params)` and return that "
              "opt_state"),
    Probe("_layers_run()", _STEP_SETUP,
          name="(params, opt_state, losses) after 4 Adam steps on a list of layers",
          rtol=1e-4, atol=1e-6, section=_S61,
          hint="the step must apply optimizer.update's updates with optax.apply_updates (they "
               "already point downhill), return the new state, and return the loss computed "
               "before the update",
          fix="follow the recipe of section 6.1 term by term"),
]

# ------------------------------------------------------------- exercise 5: train_epoch

_S72 = "7.2 Scan over the steps"
_EPOCH_SETUP = _PRE + _SOFTMAX_LOSS + """\
import functools
import course
_adam = optax.adam(0.05)

@jax.jit
def _adam_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(_softmax_loss)(params, x, y)
    updates, opt_state = _adam.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

def _epoch_with_adam(params, opt_state, key, x, y):
    return train_epoch(_adam_step, params, opt_state, key, x, y, batch_size=32, steps=8)

_xs, _ys = course.classification_data(jax.random.key(52), n=512)
_xs, _ys = _xs[:256], _ys[:256]
_p0 = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
_s0 = _adam.init(_p0)

def _batches(seed, n, batch_size, steps):
    # The autograder's probe step records which examples each step trained on.
    from autograder._training import _probe_epoch
    collect = _probe_epoch(train_epoch, n=n, batch_size=batch_size, steps=steps, section=None)
    key = jax.random.key(seed)
    seen = collect(key)
    other = collect(jax.random.fold_in(key, 1))
    return json.dumps({"losses_shape": [int(s) for s in seen.losses.shape],
                       "count": int(seen.count), "mismatched": int(seen.mismatched),
                       "rows": seen.rows.astype(int).tolist(),
                       "other_key_same_rows": bool(np.array_equal(other.rows, seen.rows))})

def _uses_scan():
    from autograder._jaxpr import count_primitives, trace_jaxpr
    counts = count_primitives(trace_jaxpr(_epoch_with_adam,
                                          (_p0, _s0, jax.random.key(53), _xs, _ys)))
    return json.dumps({"scan": int(counts["scan"]), "used": sorted(counts)})

def _three_epochs(final=False):
    epoch = jax.jit(_epoch_with_adam)
    losses, p, s = [], _p0, _s0
    for e in range(3):
        p, s, l = epoch(p, s, jax.random.fold_in(jax.random.key(54), e), _xs, _ys)
        losses.extend(float(v) for v in np.asarray(l).ravel())
    if final:  # measured here on all the examples, not taken from what the epoch returned
        return float(_softmax_loss(p, _xs, _ys))
    return np.asarray(losses, np.float64)
"""


def _check_epoch(batch_size: int, steps: int):
    """A check mirroring autograder.assert_epoch_samples_fresh_batches on plain facts."""

    def check(got, expected):
        del expected
        g = _load(got)
        try:
            rows = np.asarray(g["rows"], dtype=np.int64)
            count, mismatched = int(g["count"]), int(g["mismatched"])
        except (TypeError, KeyError, ValueError):
            return "the grader could not read the batches the epoch drew"
        if list(g.get("losses_shape") or []) != [steps]:
            return (f"returned losses of the wrong shape\n  expected: ({steps},): one loss per "
                    f"step\n  got:      {tuple(g.get('losses_shape') or ())}\n"
                    "  (return the `ys` that lax.scan stacks from the body's second output)")
        if count != steps:
            return (f"did not thread the optimizer state through the steps\n"
                    f"  expected: the final opt_state to have seen {steps} updates\n"
                    f"  got:      it saw {count}\n"
                    "  (each step started from the initial optimizer state: carry "
                    "(params, opt_state) in the scan and feed each step the state the previous "
                    "step returned)")
        if rows.shape != (steps, batch_size):
            return (f"trained on batches of the wrong shape\n  expected: {steps} batches of "
                    f"{batch_size} examples\n  got:      {rows.shape}")
        unwritten = [i for i in range(steps) if (rows[i] < 0).all()]
        if unwritten:
            return (f"did not thread the parameters through the steps\n"
                    f"  expected: the final params to carry the updates of all {steps} steps\n"
                    f"  got:      the updates of step(s) {unwritten[:5]} are missing\n"
                    "  (each step started from the initial parameters)")
        if mismatched:
            return (f"paired examples with the wrong labels\n"
                    f"  expected: y[i] to stay with x[i] in every batch\n"
                    f"  got:      {mismatched} example(s) arrived with another example's label\n"
                    "  (x and y were indexed differently: draw one index array per step and "
                    "use it for both, x[idx] and y[idx])")
        for i in range(steps):
            values, counts = np.unique(rows[i], return_counts=True)
            if (counts > 1).any():
                return (f"put an example twice in the batch of step {i}\n"
                        f"  expected: {batch_size} distinct examples per batch\n"
                        f"  got:      {int((counts > 1).sum())} example(s) repeated, e.g. example "
                        f"{int(values[np.argmax(counts)])} {int(counts.max())} times\n"
                        "  (jax.random.choice samples with replacement unless replace=False; "
                        "jax.random.permutation(k, n)[:batch_size] gives distinct examples)")
        batches = [frozenset(row.tolist()) for row in rows]
        if len(set(batches)) < steps:
            first = next((i, j) for i in range(steps) for j in range(i + 1, steps)
                         if batches[i] == batches[j])
            return (f"trained on the same batch at steps {first[0]} and {first[1]}\n"
                    "  expected: a fresh random batch at every step\n"
                    f"  got:      {steps} steps, {len(set(batches))} distinct batch(es)\n"
                    "  (one key is reused at every step: split the epoch key into one key per "
                    "step, jax.random.split(key, steps), and scan over those keys)")
        if g.get("other_key_same_rows") is not False:
            return ("drew the same batches for two different epoch keys\n"
                    "  expected: other batches for another key\n"
                    "  got:      identical batches at every step\n"
                    "  (derive every step's key from the `key` argument)")
        return None

    return check


def _below(threshold: float):
    def check(got, expected):
        del expected
        value = float(got)
        if np.isfinite(value) and value < threshold:
            return None
        return (f"is too high\n  expected: a finite loss below {threshold:g} (the reference "
                f"reaches about 0.12)\n  got:      {value:.4g}")

    return check


def _check_scan(got, expected):
    del expected
    g = _load(got)
    if not isinstance(g, dict) or not isinstance(g.get("scan"), int):
        return "the grader could not read the traced epoch"
    if g["scan"] >= 1:
        return None
    return ("does not use `scan`\n  expected: at least one `scan` in the jaxpr\n"
            f"  got:      primitives used: {', '.join((g.get('used') or [])[:20]) or 'none'}"
            + (" ..." if len(g.get("used") or []) > 20 else ""))


_EPOCH_FIX = ("split the key into one key per step, draw batch_size distinct indices per step "
              "with that step's key, index x and y with them, and carry (params, opt_state) "
              "through lax.scan")

_EPOCH_PROBES = [
    Probe("_batches(51, 64, 32, 4)", _EPOCH_SETUP,
          name="train_epoch(probe step, ..., batch_size=32, steps=4) under jax.jit: its batches",
          compare=False, check=_check_epoch(32, 4), section=_S72, fix=_EPOCH_FIX),
    Probe("_uses_scan()", _EPOCH_SETUP, name="the jaxpr of train_epoch(adam_step, ...)",
          compare=False, check=_check_scan, section=_S72,
          hint="the steps run in a Python loop: under jit it is unrolled into one copy of the "
               "train step per iteration",
          fix="write the step as the body of lax.scan over the per-step keys"),
    Probe("_three_epochs()", _EPOCH_SETUP,
          name="the loss over 3 epochs of 8 Adam steps (under jax.jit)", compare=False,
          check=_falls_below(
              0.4, 24, "the loss over 3 epochs of 8 steps",
              "the epoch does not train: examples paired with another example's label, one "
              "batch drawn for every step, or the state not carried from step to step"),
          section=_S72, fix=_EPOCH_FIX),
    Probe("_three_epochs(final=True)", _EPOCH_SETUP,
          name="the loss on all 256 examples of the params after 3 epochs of 8 Adam steps",
          compare=False, check=_below(0.4), section=_S72,
          hint="the params the epoch returns must be the trained ones: the carry of the scan "
               "after the last step",
          fix=_EPOCH_FIX),
    Probe("_batches(55, 96, 48, 6)", _EPOCH_SETUP,
          name="train_epoch(probe step, ..., batch_size=48, steps=6) under jax.jit: its batches",
          compare=False, check=_check_epoch(48, 6), section=_S72, fix=_EPOCH_FIX),
]

# ------------------------------------------------- exercise 6: make_data_parallel_step

_S91 = "9.1 A mesh and two sharding rules"
_DP_SETUP = _PRE + _SOFTMAX_LOSS + """\
from jax.sharding import AxisType
from autograder._training import _place_text, collect_step_placement, collect_training_run
_mesh = jax.make_mesh((len(jax.devices()),), ("data",), axis_types=(AxisType.Auto,))
_n = 8 * len(jax.devices())
_n2 = 4 * len(jax.devices())
_rng = np.random.default_rng(706)
_x512 = jnp.asarray(_rng.normal(size=(512, 2)), jnp.float32)
_y512 = jnp.asarray(_rng.integers(0, 3, size=512), jnp.int32)
_xs, _ys = _x512[:_n], _y512[:_n]
_p0 = {"w": 0.1 * jnp.ones((2, 3)), "b": jnp.zeros(3)}
_sgd = optax.sgd(0.1)

@jax.jit
def _sgd_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(_softmax_loss)(params, x, y)
    updates, opt_state = _sgd.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

def _slices(sharding, shape):
    if sharding is None:
        return None
    shape = tuple(shape)
    return {str(d.id): [list(s.indices(n)[:2]) for s, n in zip(idx, shape)]
            for d, idx in sorted(sharding.devices_indices_map(shape).items(), key=lambda kv: kv[0].id)}

def _placement(params, opt_state, x, y):
    # A probe train step records where each of its inputs lives.
    seen = collect_step_placement(make_data_parallel_step, _mesh, params, opt_state, x, y)
    shapes = {}
    for tree_name, tree in (("params", params), ("opt_state", opt_state)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            shapes[tree_name + jax.tree_util.keystr(path)] = tuple(np.shape(leaf))
    state = {}
    for tree_name, shardings in (("params", seen.params), ("opt_state", seen.opt_state)):
        for path, sharding in shardings.items():
            key = tree_name + path
            shape = shapes.get(key)
            if shape is None:
                state[key] = {"slices": "an unexpected leaf", "text": str(sharding)}
                continue
            state[key] = {"slices": _slices(sharding, shape),
                          "text": _place_text(sharding, shape)}
    return json.dumps({
        "traced": bool(seen.traced),
        "x": {"slices": _slices(seen.x, x.shape), "text": _place_text(seen.x, x.shape)},
        "y": {"slices": _slices(seen.y, y.shape), "text": _place_text(seen.y, y.shape)},
        "state": state})

def _dp_run(batches):
    dp = make_data_parallel_step(_sgd_step, _mesh)
    run = collect_training_run(dp, _p0, _sgd.init(_p0), batches, name="dp_step")
    return run.params, np.asarray(run.losses, np.float32)
"""


def _check_placement(got, expected):
    g, e = _load(got), _load(expected)
    if not isinstance(g, dict):
        return "the grader could not read where train_step's inputs lived"
    if g.get("traced"):
        return ("called train_step inside a trace\n"
                "  expected: train_step called on placed, concrete arrays\n"
                "  got:      it received tracers (inside jax.jit, vmap or grad)\n"
                "  (train_step is already jitted: place the arrays with jax.device_put, then "
                "call train_step directly)")
    for name in ("x", "y"):
        have, want = g.get(name) or {}, e[name]
        if have.get("slices") != want["slices"]:
            replicated = "full copy" in str(have.get("text"))
            why = ("the batch was replicated (P()) instead of split: every device computes the "
                   "gradient of the whole batch, so nothing runs in parallel" if replicated else
                   "the batch was never placed (or was brought back to one device, e.g. by "
                   "jax.device_get), so one device does all the work while the others idle")
            return (f"gave train_step `{name}` not split over the mesh's devices\n"
                    f"  expected: {want['text']}\n  got:      {have.get('text')}\n  ({why}; "
                    f"{name} = jax.device_put({name}, NamedSharding(mesh, P('data'))))")
    bad = []
    have_state = g.get("state") or {}
    for path, want in e["state"].items():
        have = have_state.get(path) or {}
        if have.get("slices") != want["slices"]:
            bad.append(f"{path}: {have.get('text', 'missing')}")
    bad += [f"{path}: an unexpected leaf" for path in have_state if path not in e["state"]]
    if bad:
        return ("does not replicate the model state on all devices\n"
                "  expected: every leaf of params and opt_state replicated on all devices\n"
                f"  got:      {len(bad)} leaf (leaves) placed otherwise\n"
                + "\n".join(f"  {b}" for b in bad[:6])
                + "\n  (params, opt_state = jax.device_put((params, opt_state), "
                  "NamedSharding(mesh, P())))")
    return None


_DP_FIX = ("dp_step places x and y with jax.device_put(..., NamedSharding(mesh, P('data'))), "
           "params and opt_state with NamedSharding(mesh, P()), then returns "
           "train_step(params, opt_state, x, y)")

_DP_PROBES = [
    Probe("_placement(_p0, _sgd.init(_p0), _xs, _ys)", _DP_SETUP,
          name="make_data_parallel_step(train_step, mesh): where train_step's inputs live (SGD)",
          compare=False, check=_check_placement, section=_S91, fix=_DP_FIX),
    Probe("_dp_run([(_xs, _ys)] * 3)", _DP_SETUP,
          name="(params, losses) after 3 data-parallel SGD steps on one batch", rtol=1e-4,
          atol=1e-5, section="9.2 jit follows the data",
          hint="the data-parallel run must compute what the single-device run computes: the "
               "same train_step on the same examples", fix=_DP_FIX),
    Probe("_placement(_p0, optax.adam(0.01).init(_p0), _x512[_n:_n + _n2], _y512[_n:_n + _n2])",
          _DP_SETUP,
          name="make_data_parallel_step(train_step, mesh): where train_step's inputs live (Adam, "
               "another batch size)",
          compare=False, check=_check_placement, section=_S91, fix=_DP_FIX),
    Probe("_dp_run([(_x512[i * _n:(i + 1) * _n], _y512[i * _n:(i + 1) * _n]) for i in range(1, 4)])",
          _DP_SETUP, name="(params, losses) after 3 data-parallel SGD steps on 3 batches",
          rtol=1e-4, atol=1e-5, section="9.2 jit follows the data",
          hint="the data-parallel run must compute what the single-device run computes: the "
               "same train_step on the same examples", fix=_DP_FIX),
]

PROBES = {
    "test_07_capstone_cross_entropy": _CE_PROBES,
    "test_07_capstone_per_example_grad_norms": _NORMS_PROBES,
    "test_07_capstone_make_optimizer": _OPT_PROBES,
    "test_07_capstone_make_train_step": _STEP_PROBES,
    "test_07_capstone_train_epoch": _EPOCH_PROBES,
    "test_07_capstone_make_data_parallel_step": _DP_PROBES,
}
