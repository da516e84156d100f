"""Unit tests for autograder.training: the capstone's train-loop checks.

Each check is run on a correct input (it passes) and on the realistic mistakes it
exists to catch (it fails, with the teaching message asserted on its text).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from autograder import (CheckFailure, assert_epoch_samples_fresh_batches,
                        assert_keeps_shapes_and_dtypes, assert_loss_falls_below,
                        assert_state_changes, assert_step_is_data_parallel,
                        assert_train_step_compiles_once, collect_epoch_batches,
                        collect_step_placement, collect_training_run)
from tests.judging import recorded


def _loss(params, x, y):
    z = x @ params["w"] + params["b"]
    return jnp.mean(jax.nn.logsumexp(z, axis=-1) - jnp.take_along_axis(z, y[:, None], axis=-1)[:, 0])


def _make_step(optimizer, *, donate=False):
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return jax.jit(step, donate_argnums=(0, 1) if donate else ())


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=64)
    centres = np.stack([np.cos(2 * np.pi * labels / 3), np.sin(2 * np.pi * labels / 3)], 1) * 2
    x = jnp.asarray(centres + 0.5 * rng.normal(size=(64, 2)), jnp.float32)
    y = jnp.asarray(labels, jnp.int32)
    params = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
    return params, x, y


# --- collect_training_run ------------------------------------------------------------

def test_collect_training_run_threads_state(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    run = collect_training_run(_make_step(adam), params, adam.init(params), [(x, y)] * 5)
    assert len(run.losses) == 5 and run.losses[-1] < run.losses[0]
    assert int(run.first_opt_state[0].count) == 1 and int(run.opt_state[0].count) == 5


def test_collect_training_run_survives_a_donating_step(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    state = adam.init(params)
    collect_training_run(_make_step(adam, donate=True), params, state, [(x, y)] * 2)
    assert not params["w"].is_deleted() and not state[0].count.is_deleted()


def test_collect_training_run_wrong_structure(problem):
    params, x, y = problem

    def two_outputs(p, s, x, y):
        return p, s

    with pytest.raises(CheckFailure) as err:
        collect_training_run(two_outputs, params, (), [(x, y)])
    text = str(err.value)
    assert "two_outputs returned the wrong structure" in text
    assert "a tuple (params, opt_state, loss)" in text
    assert "return new_params, new_opt_state, loss" in text


def test_collect_training_run_loss_must_be_scalar(problem):
    params, x, y = problem

    def per_example(p, s, x, y):
        return p, s, jnp.zeros(x.shape[0])

    with pytest.raises(CheckFailure, match="returned a loss that is not a scalar") as err:
        collect_training_run(per_example, params, (), [(x, y)])
    assert "f32[64]" in str(err.value) and "per-example losses" in str(err.value)


def test_collect_training_run_not_implemented(problem):
    params, x, y = problem

    def train_step(p, s, x, y):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="train_step is not implemented yet"):
        collect_training_run(train_step, params, (), [(x, y)], section="6.1")


# --- assert_train_step_compiles_once -------------------------------------------------

def test_compiles_once_passes_for_a_jitted_step(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    assert_train_step_compiles_once(_make_step(adam), (params, adam.init(params), x, y))


def test_compiles_once_passes_for_a_donating_step(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    assert_train_step_compiles_once(_make_step(adam, donate=True), (params, adam.init(params), x, y))


def test_compiles_once_names_a_jit_inside_the_step(problem):
    params, x, y = problem
    sgd = optax.sgd(0.1)

    def train_step(p, s, x, y):
        def body(p, s, x, y):
            loss, g = jax.value_and_grad(_loss)(p, x, y)
            u, s = sgd.update(g, s, p)
            return optax.apply_updates(p, u), s, loss
        return jax.jit(body)(p, s, x, y)

    with pytest.raises(CheckFailure) as err:
        assert_train_step_compiles_once(train_step, (params, sgd.init(params), x, y),
                                        section="6.2 Compile once")
    text = str(err.value)
    assert "train_step compiled 3 times over 3 calls" in text
    assert "yet it compiled again" in text
    assert "reread: section 6.2 Compile once" in text


def test_compiles_once_flags_an_eager_step(problem):
    params, x, y = problem
    sgd = optax.sgd(0.1)

    def train_step(p, s, x, y):     # not jitted: runs op by op
        loss, g = jax.value_and_grad(_loss)(p, x, y)
        u, s = sgd.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    state = sgd.init(params)
    train_step(params, state, x, y)      # warm the per-operation caches
    with pytest.raises(CheckFailure) as err:
        assert_train_step_compiles_once(train_step, (params, state, x, y))
    text = str(err.value)
    assert "train_step never compiled over 3 calls" in text
    assert "not wrapped in jax.jit" in text
    assert "@jax.jit" in text


# --- assert_keeps_shapes_and_dtypes --------------------------------------------------

def test_keeps_shapes_and_dtypes_passes():
    before = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
    assert_keeps_shapes_and_dtypes({"w": jnp.ones((2, 3)), "b": jnp.ones(3)}, before)


def test_keeps_shapes_and_dtypes_dtype_change():
    before = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
    after = {"w": jnp.zeros((2, 3), jnp.bfloat16), "b": jnp.zeros(3)}
    with pytest.raises(CheckFailure) as err:
        assert_keeps_shapes_and_dtypes(after, before, name="params after 50 steps", section="6.1")
    text = str(err.value)
    assert "params after 50 steps has the wrong dtype" in text
    assert "['w']: dtype expected float32, got bfloat16" in text
    assert "optax.apply_updates" in text and "reread: section 6.1" in text


def test_keeps_shapes_and_dtypes_structure_change():
    before = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}
    with pytest.raises(CheckFailure, match="has the wrong structure") as err:
        assert_keeps_shapes_and_dtypes([jnp.zeros((2, 3)), jnp.zeros(3)], before)
    assert "structure differs" in str(err.value)


# --- assert_state_changes ------------------------------------------------------------

def test_state_changes_passes_for_adam(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    s0 = adam.init(params)
    _, s1, _ = _make_step(adam)(params, s0, x, y)
    assert_state_changes(s0, s1)


def test_state_changes_flags_the_input_state_returned(problem):
    params, x, y = problem
    adam = optax.adam(0.1)
    s0 = adam.init(params)
    with pytest.raises(CheckFailure) as err:
        assert_state_changes(s0, jax.tree.map(jnp.copy, s0), section="6.1 A pure step")
    text = str(err.value)
    assert "opt_state came back unchanged after one step" in text
    assert "every leaf equals the state passed in" in text
    assert "optimizer.update(grads, opt_state, params)" in text


def test_state_changes_flags_another_structure():
    with pytest.raises(CheckFailure, match="opt_state has the wrong structure after one step"):
        assert_state_changes({"count": jnp.int32(0)}, [jnp.int32(1), jnp.int32(2)])


# --- assert_loss_falls_below ---------------------------------------------------------

def test_loss_falls_below_passes_within_budget():
    assert_loss_falls_below(np.array([1.0, 0.6, 0.3, 0.1]), 0.2, within=4)


def test_loss_falls_below_counts_only_the_budget():
    with pytest.raises(CheckFailure) as err:
        assert_loss_falls_below([1.0, 0.8, 0.5, 0.1], 0.2, within=3)
    text = str(err.value)
    assert "did not fall below 0.2 within 3 steps" in text
    assert "first 1, lowest 0.5 at step 2, last 0.5" in text
    assert "trains, but too slowly" in text


def test_loss_falls_below_rising_loss_blames_the_sign():
    with pytest.raises(CheckFailure) as err:
        assert_loss_falls_below([1.0, 2.0, 4.0], 0.5, name="the loss of 3 steps")
    text = str(err.value)
    assert "the loss of 3 steps did not fall below 0.5" in text
    assert "wrong sign" in text and "optax.apply_updates" in text


def test_loss_falls_below_nan():
    with pytest.raises(CheckFailure) as err:
        assert_loss_falls_below([1.0, 0.5, float("nan"), 0.1], 0.2)
    text = str(err.value)
    assert "became nan at step 2" in text and "finite losses" in text


# --- the epoch probe -----------------------------------------------------------------

def _good_epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
    def body(carry, k):
        idx = jax.random.permutation(k, x.shape[0])[:batch_size]
        p, s, loss = step(*carry, x[idx], y[idx])
        return (p, s), loss
    (params, opt_state), losses = lax.scan(body, (params, opt_state), jax.random.split(key, steps))
    return params, opt_state, losses


def _epoch_failure(epoch, **kwargs) -> str:
    with pytest.raises(CheckFailure) as err:
        assert_epoch_samples_fresh_batches(epoch, jax.random.key(3), n=32, batch_size=16,
                                           steps=4, section="7.2 Scan", **kwargs)
    return str(err.value)


def test_collect_epoch_batches_sees_every_batch():
    seen = collect_epoch_batches(_good_epoch, jax.random.key(0), n=32, batch_size=8, steps=4)
    assert seen.rows.shape == (4, 8) and seen.count == 4 and seen.mismatched == 0
    assert seen.rows.min() >= 0 and seen.rows.max() < 32
    assert all(len(set(r.tolist())) == 8 for r in seen.rows)
    assert seen.losses.shape == (4,)


def test_epoch_check_passes_for_a_good_epoch():
    seen = assert_epoch_samples_fresh_batches(_good_epoch, jax.random.key(1), n=32,
                                              batch_size=16, steps=4)
    assert seen.count == 4


def test_epoch_check_flags_examples_never_drawn_where_the_steps_suffice():
    def off_by_one(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(carry, k):
            idx = jax.random.permutation(k, x.shape[0] - 1)[:batch_size]
            p, s, loss = step(*carry, x[idx], y[idx])
            return (p, s), loss
        (params, opt_state), losses = lax.scan(body, (params, opt_state),
                                               jax.random.split(key, steps))
        return params, opt_state, losses

    # 2 x 4 batches of 16 from 32: a uniform sampler often misses some example, so
    # coverage is not judged there; with 2 x 24 it misses one with probability < 1e-12.
    assert_epoch_samples_fresh_batches(off_by_one, jax.random.key(3), n=32, batch_size=16,
                                       steps=4)
    with pytest.raises(CheckFailure) as err:
        assert_epoch_samples_fresh_batches(off_by_one, jax.random.key(3), n=32, batch_size=16,
                                           steps=24)
    assert "never drew some of the examples" in str(err.value)
    assert "example(s) [31]" in str(err.value)
    for seed in range(10):
        assert_epoch_samples_fresh_batches(_good_epoch, jax.random.key(seed), n=32,
                                           batch_size=16, steps=24)


def test_epoch_check_flags_a_key_reused_across_steps():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(carry, _):
            idx = jax.random.permutation(key, x.shape[0])[:batch_size]
            p, s, loss = step(*carry, x[idx], y[idx])
            return (p, s), loss
        (params, opt_state), losses = lax.scan(body, (params, opt_state), None, length=steps)
        return params, opt_state, losses

    text = _epoch_failure(epoch)
    assert "epoch trained on the same batch at steps 0 and 1" in text
    assert "4 steps, 1 distinct batch(es)" in text
    assert "jax.random.split(key, steps)" in text
    assert "reread: section 7.2 Scan" in text


def test_epoch_check_flags_an_opt_state_not_threaded():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(p, k):
            idx = jax.random.permutation(k, x.shape[0])[:batch_size]
            p, _, loss = step(p, opt_state, x[idx], y[idx])
            return p, loss
        params, losses = lax.scan(body, params, jax.random.split(key, steps))
        return params, opt_state, losses

    text = _epoch_failure(epoch)
    assert "did not thread the optimizer state" in text
    assert "the final opt_state to have seen 4 updates" in text and "it saw 0" in text


def test_epoch_check_flags_params_not_threaded():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(s, k):
            idx = jax.random.permutation(k, x.shape[0])[:batch_size]
            p, s, loss = step(params, s, x[idx], y[idx])
            return s, (p, loss)
        opt_state, (ps, losses) = lax.scan(body, opt_state, jax.random.split(key, steps))
        return jax.tree.map(lambda a: a[-1], ps), opt_state, losses

    text = _epoch_failure(epoch)
    assert "did not thread the parameters" in text
    assert "step(s) [0, 1, 2]" in text


def test_epoch_check_flags_x_and_y_shuffled_apart():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(carry, k):
            kx, ky = jax.random.split(k)
            xb = x[jax.random.permutation(kx, x.shape[0])[:batch_size]]
            yb = y[jax.random.permutation(ky, x.shape[0])[:batch_size]]
            p, s, loss = step(*carry, xb, yb)
            return (p, s), loss
        (params, opt_state), losses = lax.scan(body, (params, opt_state), jax.random.split(key, steps))
        return params, opt_state, losses

    text = _epoch_failure(epoch)
    assert "paired examples with the wrong labels" in text
    assert "x[idx], y[idx]" in text


def test_epoch_check_flags_sampling_with_replacement():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        def body(carry, k):
            idx = jax.random.choice(k, x.shape[0], (batch_size,))
            p, s, loss = step(*carry, x[idx], y[idx])
            return (p, s), loss
        (params, opt_state), losses = lax.scan(body, (params, opt_state), jax.random.split(key, steps))
        return params, opt_state, losses

    text = _epoch_failure(epoch)
    assert "put an example twice in the batch of step" in text
    assert "replace=False" in text


def test_epoch_check_flags_a_key_made_inside():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        return _good_epoch(step, params, opt_state, jax.random.key(0), x, y,
                           batch_size=batch_size, steps=steps)

    text = _epoch_failure(epoch)
    assert "drew the same batches for two different epoch keys" in text
    assert "jax.random.key(0)" in text


def test_epoch_check_flags_unstacked_losses():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        p, s, losses = _good_epoch(step, params, opt_state, key, x, y,
                                   batch_size=batch_size, steps=steps)
        return p, s, jnp.mean(losses)

    text = _epoch_failure(epoch)
    assert "returned losses of the wrong shape" in text and "(4,): one loss per step" in text


def test_epoch_check_flags_a_wrong_return_structure():
    def epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        p, s, losses = _good_epoch(step, params, opt_state, key, x, y,
                                   batch_size=batch_size, steps=steps)
        return p, losses

    assert "returned the wrong structure" in _epoch_failure(epoch)


def test_epoch_check_not_implemented():
    def train_epoch(step, params, opt_state, key, x, y, *, batch_size, steps):
        raise NotImplementedError()

    assert "train_epoch is not implemented yet" in _epoch_failure(train_epoch)


def test_epoch_check_not_a_function():
    # Jitting the probe epoch happens inside the check: a missing function is feedback.
    with pytest.raises(CheckFailure, match="train_epoch is not a function"):
        assert_epoch_samples_fresh_batches(None, jax.random.key(0), n=8, batch_size=2, steps=2)


# --- data-parallel placement ---------------------------------------------------------

needs_devices = pytest.mark.skipif(len(jax.devices()) < 2, reason="needs several devices")


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((len(jax.devices()),), ("data",), axis_types=(AxisType.Auto,))


def _dp_args():
    n = 4 * len(jax.devices())
    adam = optax.adam(0.1)
    params = {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}
    return params, adam.init(params), jnp.ones((n, 2)), jnp.zeros(n, jnp.int32)


def _good_dp(step, mesh):
    def dp_step(params, opt_state, x, y):
        x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
        params, opt_state = jax.device_put((params, opt_state), NamedSharding(mesh, P()))
        return step(params, opt_state, x, y)
    return dp_step


@needs_devices
def test_step_placement_isrecorded(mesh):
    seen = collect_step_placement(_good_dp, mesh, *_dp_args())
    assert seen.x.spec == P("data") and not seen.traced
    assert all(s.is_fully_replicated for s in seen.params.values())
    assert len(seen.opt_state) == 5   # count, mu['b'], mu['w'], nu['b'], nu['w']


@needs_devices
def test_data_parallel_passes(mesh):
    assert_step_is_data_parallel(_good_dp, mesh, *_dp_args())


@needs_devices
def test_data_parallel_flags_one_device(mesh):
    def make(step, mesh):
        return step

    with pytest.raises(CheckFailure) as err:
        assert_step_is_data_parallel(make, mesh, *_dp_args(), section="9.1 Mesh")
    text = str(err.value)
    n = len(jax.devices())
    assert f"x is not split over the mesh's {n} devices when train_step runs" in text
    assert "all of it on one device" in text and f"slices of shape (4, 2)" in text
    assert "the step gives the right numbers" in text
    assert "NamedSharding(mesh, P('data'))" in text and "reread: section 9.1 Mesh" in text


@needs_devices
def test_data_parallel_flags_a_replicated_batch(mesh):
    def make(step, mesh):
        def dp_step(params, opt_state, x, y):
            return step(*jax.device_put((params, opt_state, x, y), NamedSharding(mesh, P())))
        return dp_step

    with pytest.raises(CheckFailure) as err:
        assert_step_is_data_parallel(make, mesh, *_dp_args())
    text = str(err.value)
    assert "a full copy of shape" in text and "replicated (P()) instead of split" in text


@needs_devices
def test_data_parallel_flags_y_left_behind(mesh):
    def make(step, mesh):
        def dp_step(params, opt_state, x, y):
            x = jax.device_put(x, NamedSharding(mesh, P("data")))
            params, opt_state = jax.device_put((params, opt_state), NamedSharding(mesh, P()))
            return step(params, opt_state, x, y)
        return dp_step

    with pytest.raises(CheckFailure, match="y is not split over the mesh"):
        assert_step_is_data_parallel(make, mesh, *_dp_args())


@needs_devices
def test_data_parallel_flags_state_not_replicated(mesh):
    def make(step, mesh):
        def dp_step(params, opt_state, x, y):
            x, y = jax.device_put((x, y), NamedSharding(mesh, P("data")))
            return step(params, opt_state, x, y)
        return dp_step

    with pytest.raises(CheckFailure) as err:
        assert_step_is_data_parallel(make, mesh, *_dp_args())
    text = str(err.value)
    assert "does not replicate the model state" in text
    assert "params['w']: one device" in text
    assert "NamedSharding(mesh, P())" in text


@needs_devices
def test_data_parallel_flags_a_step_wrapped_in_jit(mesh):
    def make(step, mesh):
        return jax.jit(_good_dp(step, mesh))

    with pytest.raises(CheckFailure) as err:
        assert_step_is_data_parallel(make, mesh, *_dp_args())
    assert "called train_step inside a trace" in str(err.value)


def test_data_parallel_flags_a_step_that_never_calls_train_step():
    mesh = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,),
                         devices=jax.devices()[:1])

    def make(step, mesh):
        return lambda params, opt_state, x, y: (params, opt_state, 0.0)

    with pytest.raises(CheckFailure, match="never called train_step"):
        assert_step_is_data_parallel(make, mesh, *_dp_args())


def test_data_parallel_not_implemented():
    mesh = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,),
                         devices=jax.devices()[:1])

    def make_data_parallel_step(step, mesh):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="make_data_parallel_step is not implemented yet"):
        assert_step_is_data_parallel(make_data_parallel_step, mesh, *_dp_args())


# The probe epoch is compiled once per check, not once per key (the check runs two keys).
def test_probe_epoch_is_jitted_once():
    from autograder import collect_compilations

    f = functools.partial(_good_epoch)
    f.__name__ = "epoch"
    assert_epoch_samples_fresh_batches(f, jax.random.key(9), n=24, batch_size=8, steps=3)
    with collect_compilations() as seen:
        assert_epoch_samples_fresh_batches(f, jax.random.key(9), n=24, batch_size=8, steps=3)
    assert seen.count == 1, seen.names


# --- judged as the grader judges ------------------------------------------------------

def _judged(ref_records, student_records):
    from autograder.core import wire as _wire
    from grader.judge import judge_cell

    def cell(records):
        return _wire.loads(*_wire.dumps(_wire.CellResult("t", tuple(records))))

    return judge_cell(cell(ref_records), cell(student_records))


def test_a_training_run_is_paired_by_its_label_not_by_the_step_name(problem):
    # The grader pairs records by kind and label: the reference's step is called
    # train_step, a student's may have any name.
    from autograder.core.check import REFERENCE, STUDENT

    params, x, y = problem
    adam = optax.adam(0.1)
    with recorded(REFERENCE) as ref:
        collect_training_run(_make_step(adam), params, adam.init(params), [(x, y)] * 2)

    @jax.jit
    def my_step(p, s, x, y):
        return _make_step(adam)(p, s, x, y)

    with recorded(STUDENT) as mine:
        run = collect_training_run(my_step, params, adam.init(params), [(x, y)] * 2)
    assert run is not None and len(run.losses) == 2
    assert _judged(ref, mine).passed

    def two_outputs(p, s, x, y):
        return p, s

    with recorded(STUDENT) as mine:
        assert collect_training_run(two_outputs, params, (), [(x, y)] * 2) is None
    assert "two_outputs returned the wrong structure" in _judged(ref, mine).message


@needs_devices
def test_placement_is_judged_from_data(mesh):
    # The student's run records where the probe found its inputs (device ids and
    # index ranges); the reference's run records the expected placement.
    from autograder.core.check import REFERENCE, STUDENT

    def one_device(step, mesh):
        return step

    one_device.__name__ = _good_dp.__name__  # in a notebook both are the exercise's function
    with recorded(REFERENCE) as ref:
        assert_step_is_data_parallel(_good_dp, mesh, *_dp_args())
    with recorded(STUDENT) as mine:
        assert_step_is_data_parallel(one_device, mesh, *_dp_args())
    assert [r.kind for r in mine] == ["call", "data_parallel"]
    assert mine[1].expected is None          # the expected side never runs next to student code
    n = len(jax.devices())
    message = _judged(ref, mine).message
    assert message.startswith(f"x is not split over the mesh's {n} devices")
    assert "all of it on one device" in message
    assert _judged(ref, ref).passed
