"""Timing JAX code honestly: warm up, block until ready, report the median.

JAX dispatches work asynchronously: a call returns as soon as the work is queued,
so a timer stopped without ``jax.block_until_ready`` measures the queueing, not the
computation. The first call of a jitted function also traces and compiles. So
:func:`time_call` times the warm-up calls separately, blocks on every result and
reports the median of the repeats.

Grades never depend on these numbers (they vary with the machine and its load);
:class:`SimulatedDevice` exists so that a student's *benchmark code* can be checked
with lower bounds that hold on any machine: its functions return at once, like an
asynchronous dispatch, and only ``block_until_ready`` waits for the "device".
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

from autograder.core.check import Check, call, explainer, run
from autograder.core.feedback import describe_value

# Captured at import, before student code runs: a submission that patches
# time.perf_counter later does not change what the checks measure.
_perf_counter = time.perf_counter
_sleep = time.sleep


def _block(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall-clock times of one function: warm-up calls, then timed repeats (seconds).

    Attributes:
      warmup_times: each warm-up call (the first includes tracing and compiling).
      times: each timed call after the warm-up, every one blocked until ready.
      result: what the last call returned.
    """

    warmup_times: tuple[float, ...]
    times: tuple[float, ...]
    result: Any = None

    @property
    def first(self) -> float:
        """The first call (compilation included), in seconds; NaN without warm-up."""
        return self.warmup_times[0] if self.warmup_times else float("nan")

    @property
    def median(self) -> float:
        """The median of the timed calls, in seconds: the steady-state cost."""
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        """The fastest timed call, in seconds."""
        return min(self.times)

    @property
    def mean(self) -> float:
        """The mean of the timed calls, in seconds."""
        return statistics.fmean(self.times)

    @property
    def median_ms(self) -> float:
        """The median in milliseconds, for printing."""
        return 1e3 * self.median

    def __str__(self) -> str:
        first = f", first call {1e3 * self.first:.3g} ms" if self.warmup_times else ""
        return f"median {self.median_ms:.3g} ms over {len(self.times)} runs{first}"


def time_call(fn: Callable, *args: Any, warmup: int = 1, repeats: int = 5,
              **kwargs: Any) -> Timing:
    """Times ``fn(*args, **kwargs)``: ``warmup`` calls first, then ``repeats`` calls.

    Every call is blocked until its result is ready (``jax.block_until_ready``), so
    the time includes the computation and not only its dispatch. The warm-up calls
    are timed too but kept apart (:attr:`Timing.first` is the compile-and-run time).

    Args:
      fn: the function to time.
      *args, **kwargs: its inputs (create them before: creating arrays costs time).
      warmup: untimed-for-the-median calls made first (tracing and compiling happen
        in the first one).
      repeats: timed calls; report their median.

    Returns:
      A :class:`Timing`: ``.median``, ``.min``, ``.mean``, ``.first`` (seconds),
      ``.times``, ``.result``.

    >>> import jax, jax.numpy as jnp
    >>> def double(x):
    ...     return x * 2
    >>> t = time_call(jax.jit(double), jnp.ones(1000), repeats=3)
    >>> len(t.times), t.median > 0, t.first >= 0
    (3, True, True)
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    warm, timed = [], []
    result = None
    for k in range(warmup + repeats):
        start = _perf_counter()
        result = _block(fn(*args, **kwargs))
        elapsed = _perf_counter() - start
        (warm if k < warmup else timed).append(elapsed)
    return Timing(tuple(warm), tuple(timed), result)


class _Pending:
    """What a :class:`SimulatedDevice` function returns: a result not ready yet."""

    def __init__(self, device: "SimulatedDevice", ready_at: float, value: Any):
        self._device = device
        self._ready_at = ready_at
        self._value = value

    def block_until_ready(self):
        wait = self._ready_at - _perf_counter()
        if wait > 0:
            _sleep(wait)
        self._device.blocks += 1
        return self

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        self.block_until_ready()
        return np.asarray(self._value, dtype=dtype)

    def __float__(self):
        self.block_until_ready()
        return float(self._value)

    def item(self):
        return self.__float__()

    def __repr__(self):
        self.block_until_ready()
        return f"SimulatedResult({self._value!r})"


class SimulatedDevice:
    """A pretend accelerator for checking benchmark code, independent of speed.

    ``device.function(first=0.2, then=0.01)`` returns a function that, like a jitted
    JAX function, returns at once: its result becomes ready ``first`` seconds later on
    the first call (tracing and compiling) and ``then`` seconds later on the next ones.
    ``jax.block_until_ready(result)``, ``result.block_until_ready()``, ``float(result)``
    and ``np.asarray(result)`` wait until it is ready. Work is queued like on a real
    device: a call made before the previous result is ready starts after it.

    Sleeping never ends early, so a benchmark that blocks measures at least these
    durations on any machine; one that does not block measures microseconds.

    >>> import jax
    >>> device = SimulatedDevice()
    >>> f = device.function(first=0.05, then=0.01, name="step")
    >>> start = time.perf_counter(); out = f(1.0); queued = time.perf_counter() - start
    >>> _ = jax.block_until_ready(out); done = time.perf_counter() - start
    >>> queued < 0.01 <= 0.05 <= done, device.calls["step"], device.blocks
    (True, 1, 1)
    """

    def __init__(self):
        self.calls: dict[str, int] = {}
        self.blocks = 0
        self._busy_until = 0.0

    def function(self, *, first: float, then: float, name: str = "f",
                 value: Any = 1.0) -> Callable:
        """A function whose results take ``first`` (then ``then``) seconds to be ready."""

        def simulated(*args: Any, **kwargs: Any) -> _Pending:
            del args, kwargs
            n = self.calls.get(name, 0)
            self.calls[name] = n + 1
            start = max(_perf_counter(), self._busy_until)
            self._busy_until = start + (first if n == 0 else then)
            return _Pending(self, self._busy_until, value)

        simulated.__name__ = simulated.__qualname__ = name
        return simulated


# Simulated durations for assert_benchmark_honest (seconds). Only lower bounds are
# checked against them (sleep never ends early), plus call counts and arithmetic.
_EAGER_FIRST, _EAGER_STEP = 0.04, 0.02
_JIT_FIRST, _JIT_STEP = 0.15, 0.005
_BENCH_KEYS = ("eager_s", "jit_first_s", "jit_s", "speedup")
_MAX_SECONDS = 5.0  # an upper bound for any of them, however busy the machine


def assert_benchmark_honest(benchmark: Callable, *, repeats: int = 3,
                            section: str | None = None) -> dict:
    """Checks a student's benchmark on a :class:`SimulatedDevice`, not on real speed.

    The contract checked: ``benchmark(eager_fn, jit_fn, *args, repeats=r)`` returns a
    dict with ``eager_s`` (median of ``r`` eager calls after one warm-up call),
    ``jit_first_s`` (the first jitted call alone: compile and run), ``jit_s`` (median
    of ``r`` jitted calls after it) and ``speedup = eager_s / jit_s``, blocking every
    timed result until ready.

    The simulated functions return at once and their results become ready later, so:
    a benchmark that does not block measures less than the simulated work (checked
    with lower bounds, which hold on any machine); one without warm-up calls the
    functions the wrong number of times (counted exactly). No bound depends on how
    fast this machine is.

    Returns:
      The student's result dict.

    >>> import statistics, time, jax
    >>> def bench(eager_fn, jit_fn, *args, repeats=5):
    ...     def timed(f):
    ...         start = time.perf_counter()
    ...         jax.block_until_ready(f(*args))
    ...         return time.perf_counter() - start
    ...     timed(eager_fn)                               # warm-up
    ...     eager = statistics.median(timed(eager_fn) for _ in range(repeats))
    ...     first = timed(jit_fn)
    ...     steady = statistics.median(timed(jit_fn) for _ in range(repeats))
    ...     return {"eager_s": eager, "jit_first_s": first, "jit_s": steady,
    ...             "speedup": eager / steady}
    >>> sorted(assert_benchmark_honest(bench))
    ['eager_s', 'jit_first_s', 'jit_s', 'speedup']
    """
    __tracebackhide__ = True
    label = f"{getattr(benchmark, '__name__', 'benchmark')}(eager_fn, jit_fn, x, repeats={repeats})"

    returned = {}

    def observe():
        device = SimulatedDevice()
        eager_fn = device.function(first=_EAGER_FIRST, then=_EAGER_STEP, name="eager_fn")
        jit_fn = device.function(first=_JIT_FIRST, then=_JIT_STEP, name="jit_fn")
        out = call(benchmark, (eager_fn, jit_fn, 1.0), {"repeats": repeats})
        facts = {"calls": {k: int(v) for k, v in device.calls.items()},
                 "described": describe_value(out), "is_dict": isinstance(out, dict)}
        if isinstance(out, dict):
            facts["values"] = {k: _number(out[k]) for k in _BENCH_KEYS if k in out}
        returned["out"] = out
        return facts

    return run(Check("benchmark_honest", label, observe=observe, observe_as="facts",
                     params=dict(repeats=repeats, section=section),
                     returns=lambda facts: returned.get("out")))


def _number(v):
    """A float for a number, else the description of what it is."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return describe_value(v)


@explainer("benchmark_honest")
def explain_benchmark_honest(observed, expected, *, label: str, repeats: int,
                             section: str | None = None, **_ignored) -> str | None:
    """The benchmark protocol's rungs: structure, numbers, warm-up, blocking, ratio."""
    import math

    from autograder.core.feedback import format_failure

    facts = observed.facts if isinstance(observed.facts, dict) else {}
    values = facts.get("values") if isinstance(facts.get("values"), dict) else {}
    missing = [k for k in _BENCH_KEYS if k not in values]
    if not facts.get("is_dict") or missing:
        return format_failure(
            f"{label} returned the wrong structure",
            expected="a dict with keys " + ", ".join(_BENCH_KEYS),
            got=str(facts.get("described")) + (f" (missing {', '.join(missing)})"
                                               if facts.get("is_dict") else ""),
            fix="return {'eager_s': ..., 'jit_first_s': ..., 'jit_s': ..., 'speedup': ...}",
            section=section)
    if any(not isinstance(values[k], float) for k in _BENCH_KEYS):
        return format_failure(
            f"{label} returned values that are not numbers",
            expected="four floats (seconds, and a ratio)",
            got=", ".join(f"{k}={values[k]}" for k in _BENCH_KEYS),
            fix="return plain floats, e.g. statistics.median(times)", section=section)
    vals = {k: float(values[k]) for k in _BENCH_KEYS}
    bad = [k for k, v in vals.items() if not (math.isfinite(v) and v > 0)]
    if bad:
        return format_failure(
            f"{label} returned values that are not positive finite numbers",
            expected="positive seconds and a positive ratio",
            got=", ".join(f"{k}={vals[k]!r}" for k in bad),
            cause="a time of 0 (time.time() is too coarse) or a division by zero",
            fix="measure with time.perf_counter()", section=section)
    # Seconds, not milliseconds: the simulated work takes under 0.2 s per call, and no
    # machine turns that into more than _MAX_SECONDS.
    slow = [k for k in _BENCH_KEYS[:3] if vals[k] > _MAX_SECONDS]
    if slow:
        return format_failure(
            f"{label} returned times that cannot be seconds",
            expected=f"seconds: the (simulated) calls take {_EAGER_STEP:g} to {_JIT_FIRST:g} s",
            got=", ".join(f"{k}={vals[k]:.4g}" for k in slow),
            cause="the times were converted to milliseconds (or another unit)",
            fix="return time.perf_counter() differences as they are, in seconds",
            section=section)
    # The protocol: one warm-up call, then `repeats` timed calls, for each.
    calls = facts.get("calls", {})
    expected_calls = 1 + repeats
    wrong = [f"{n} called {calls.get(n, 0)} times" for n in ("eager_fn", "jit_fn")
             if calls.get(n, 0) != expected_calls]
    if wrong:
        return format_failure(
            f"{label} does not follow the warm-up protocol",
            expected=f"each function called {expected_calls} times: 1 warm-up (or first) "
                     f"call, then repeats={repeats} timed calls",
            got="; ".join(wrong),
            cause="the first call traces and compiles (even eager operations compile once "
                  "per shape): without a separate warm-up call the compile time leaks into "
                  "the steady-state numbers",
            fix="call each function once before the timed loop (time the jitted one: that "
                "is jit_first_s), then time exactly `repeats` calls", section=section)
    # Blocking: each result is ready only after its simulated work.
    short = [f"{key} = {vals[key]:.3g} s, but the work takes at least {floor:g} s"
             for key, floor in (("eager_s", _EAGER_STEP), ("jit_first_s", _JIT_FIRST),
                                ("jit_s", _JIT_STEP)) if vals[key] < 0.999 * floor]
    if short:
        return format_failure(
            f"{label} measured less time than the work takes",
            expected="times no shorter than the (simulated) device work", got=short[0],
            details=short[1:],
            cause="JAX dispatches asynchronously: a call returns as soon as the work is "
                  "queued, so a timer stopped right after the call measures the dispatch, "
                  "not the computation",
            fix="block before stopping the timer: jax.block_until_ready(fn(*args))",
            section=section)
    if not vals["jit_s"] < vals["jit_first_s"]:
        return format_failure(
            f"{label} reports a steady-state time that includes the compilation",
            expected=f"jit_s < jit_first_s ({vals['jit_first_s']:.3g} s)",
            got=f"jit_s = {vals['jit_s']:.3g} s",
            cause="the first (compiling) call is mixed into the timed calls",
            fix="time the first call alone, then take the median of the calls after it",
            section=section)
    ratio = vals["eager_s"] / vals["jit_s"]
    if not math.isclose(vals["speedup"], ratio, rel_tol=1e-6):
        return format_failure(
            f"{label} reports the wrong speedup",
            expected=f"eager_s / jit_s = {ratio:.4g}", got=f"speedup = {vals['speedup']:.4g}",
            cause="the ratio is inverted, or computed from other numbers than those returned",
            fix="speedup = eager_s / jit_s (greater than 1 when jit is faster)",
            section=section)
    return None
