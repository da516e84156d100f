"""Tests for autograder.jit.timing: time_call, SimulatedDevice, assert_benchmark_honest.

Only lower bounds of simulated durations are asserted (sleep never ends early), and
upper bounds only where the gap is a factor of 100 or more: nothing here depends on
how fast or how busy the machine is.
"""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder import CheckFailure, SimulatedDevice, Timing, assert_benchmark_honest, time_call


# --- time_call -------------------------------------------------------------------------

def test_time_call_warms_up_then_times_and_blocks():
    device = SimulatedDevice()
    f = device.function(first=0.03, then=0.01, name="f")
    t = time_call(f, 1.0, warmup=1, repeats=3)
    assert device.calls["f"] == 4
    assert device.blocks == 4                      # every call was blocked on
    assert len(t.warmup_times) == 1 and len(t.times) == 3
    assert t.first >= 0.03 * 0.999                 # the warm-up holds the "compile"
    assert min(t.times) >= 0.01 * 0.999
    assert t.median == statistics.median(t.times)
    assert t.min <= t.median and t.mean > 0 and t.median_ms == 1e3 * t.median


def test_time_call_passes_arguments_and_returns_the_result():
    t = time_call(jax.jit(lambda v, scale: v * scale), jnp.arange(3.0), scale=2.0, repeats=2)
    np.testing.assert_allclose(np.asarray(t.result), [0.0, 2.0, 4.0])


def test_time_call_without_warmup_and_its_text():
    t = time_call(lambda: 1.0, warmup=0, repeats=2)
    assert np.isnan(t.first) and t.warmup_times == ()
    assert str(t).startswith("median ") and "over 2 runs" in str(t)
    assert "first call" in str(Timing((0.5,), (0.001, 0.002)))


def test_time_call_needs_a_repeat():
    with pytest.raises(ValueError):
        time_call(lambda: 1.0, repeats=0)


# --- SimulatedDevice -------------------------------------------------------------------

def test_simulated_calls_return_at_once_and_queue_their_work():
    device = SimulatedDevice()
    f = device.function(first=0.05, then=0.02, name="f")
    start = time.perf_counter()
    outs = [f() for _ in range(3)]
    queued = time.perf_counter() - start
    jax.block_until_ready(outs[-1])
    done = time.perf_counter() - start
    # Dispatch takes microseconds; the last result waits for all the queued work.
    assert queued < 0.05 <= 0.09 * 0.999 <= done


def test_simulated_results_block_when_converted():
    device = SimulatedDevice()
    f = device.function(first=0.02, then=0.0, value=3.0)
    start = time.perf_counter()
    assert float(f()) == 3.0
    assert time.perf_counter() - start >= 0.02 * 0.999
    assert np.asarray(f()) == 3.0 and device.blocks == 2


# --- assert_benchmark_honest -----------------------------------------------------------

def _timed(fn, args, block=True):
    start = time.perf_counter()
    out = fn(*args)
    if block:
        jax.block_until_ready(out)
    return time.perf_counter() - start


def honest(eager_fn, jit_fn, *args, repeats=5):
    _timed(eager_fn, args)
    eager = statistics.median(_timed(eager_fn, args) for _ in range(repeats))
    first = _timed(jit_fn, args)
    steady = statistics.median(_timed(jit_fn, args) for _ in range(repeats))
    return {"eager_s": eager, "jit_first_s": first, "jit_s": steady, "speedup": eager / steady}


def test_an_honest_benchmark_passes_quietly(capfd):
    out = assert_benchmark_honest(honest, repeats=2)
    assert out["speedup"] == out["eager_s"] / out["jit_s"]
    assert capfd.readouterr().err == ""


def test_a_benchmark_that_blocks_once_per_loop_passes():
    # The queue makes a loop blocked only at its end measure all its calls: honest too.
    def batched(eager_fn, jit_fn, *args, repeats=5):
        def loop(fn):
            start = time.perf_counter()
            for _ in range(repeats):
                out = fn(*args)
            jax.block_until_ready(out)
            return (time.perf_counter() - start) / repeats
        jax.block_until_ready(eager_fn(*args))
        eager = loop(eager_fn)
        first = _timed(jit_fn, args)
        steady = loop(jit_fn)
        return {"eager_s": eager, "jit_first_s": first, "jit_s": steady,
                "speedup": eager / steady}

    assert_benchmark_honest(batched, repeats=2)


def test_no_block_until_ready_is_caught():
    def unblocked(eager_fn, jit_fn, *args, repeats=5):
        _timed(eager_fn, args, block=False)
        eager = statistics.median(_timed(eager_fn, args, block=False) for _ in range(repeats))
        first = _timed(jit_fn, args, block=False)
        steady = statistics.median(_timed(jit_fn, args, block=False) for _ in range(repeats))
        return {"eager_s": eager, "jit_first_s": first, "jit_s": steady,
                "speedup": eager / steady}

    with pytest.raises(CheckFailure) as err:
        assert_benchmark_honest(unblocked, repeats=2, section="4.2")
    msg = str(err.value)
    assert "measured less time than the work takes" in msg
    assert "eager_s = " in msg and "but the work takes at least 0.02 s" in msg
    assert "JAX dispatches asynchronously" in msg
    assert "jax.block_until_ready(fn(*args))" in msg
    assert "reread: section 4.2" in msg


def test_no_warm_up_is_caught():
    def cold(eager_fn, jit_fn, *args, repeats=5):
        eager = statistics.median(_timed(eager_fn, args) for _ in range(repeats))
        times = [_timed(jit_fn, args) for _ in range(repeats)]
        steady = statistics.median(times)
        return {"eager_s": eager, "jit_first_s": times[0], "jit_s": steady,
                "speedup": eager / steady}

    with pytest.raises(CheckFailure) as err:
        assert_benchmark_honest(cold, repeats=2)
    msg = str(err.value)
    assert "does not follow the warm-up protocol" in msg
    assert "got:      eager_fn called 2 times; jit_fn called 2 times" in msg
    assert "the compile time leaks into the steady-state numbers" in msg


def test_compile_time_in_the_steady_state_is_caught():
    def worst_case(eager_fn, jit_fn, *args, repeats=5):
        out = honest(eager_fn, jit_fn, *args, repeats=repeats)
        out["jit_s"] = out["jit_first_s"]   # e.g. max() instead of median()
        out["speedup"] = out["eager_s"] / out["jit_s"]
        return out

    with pytest.raises(CheckFailure, match="steady-state time that includes the compilation"):
        assert_benchmark_honest(worst_case, repeats=2)


def test_an_inverted_speedup_is_caught():
    def inverted(eager_fn, jit_fn, *args, repeats=5):
        out = honest(eager_fn, jit_fn, *args, repeats=repeats)
        out["speedup"] = out["jit_s"] / out["eager_s"]
        return out

    with pytest.raises(CheckFailure) as err:
        assert_benchmark_honest(inverted, repeats=2)
    assert "reports the wrong speedup" in str(err.value)
    assert "speedup = eager_s / jit_s" in str(err.value)


def test_times_in_milliseconds_are_caught():
    def in_ms(eager_fn, jit_fn, *args, repeats=5):
        out = honest(eager_fn, jit_fn, *args, repeats=repeats)
        return {k: (v * 1000 if k != "speedup" else v) for k, v in out.items()}

    with pytest.raises(CheckFailure) as err:
        assert_benchmark_honest(in_ms, repeats=2)
    assert "returned times that cannot be seconds" in str(err.value)
    assert "the times were converted to milliseconds" in str(err.value)


def test_wrong_structure_and_non_numbers_are_caught():
    with pytest.raises(CheckFailure) as err:
        assert_benchmark_honest(lambda e, j, *a, repeats=5: {"eager_s": 1.0}, repeats=1)
    assert "returned the wrong structure" in str(err.value)
    assert "missing jit_first_s, jit_s, speedup" in str(err.value)
    bad = {"eager_s": "fast", "jit_first_s": 1.0, "jit_s": 1.0, "speedup": 1.0}
    with pytest.raises(CheckFailure, match="values that are not numbers"):
        assert_benchmark_honest(lambda e, j, *a, repeats=5: bad, repeats=1)
    zero = {"eager_s": 0.0, "jit_first_s": 1.0, "jit_s": 1.0, "speedup": 0.0}
    with pytest.raises(CheckFailure, match="not positive finite numbers"):
        assert_benchmark_honest(lambda e, j, *a, repeats=5: zero, repeats=1)


def test_unimplemented_benchmark_is_reported():
    def benchmark(eager_fn, jit_fn, *args, repeats=5):
        raise NotImplementedError()

    with pytest.raises(CheckFailure, match="benchmark is not implemented yet"):
        assert_benchmark_honest(benchmark)
