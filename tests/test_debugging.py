"""Tests for the debugging chapter's checks (09_debugging): autograder.debugging.flags,
_debugging, _checkify, _recompiles, _traces and _exported.

Each check passes on a correct input and fails, with its teaching message asserted,
on the realistic mistake it exists to catch. The explain_* functions are also fed
plain data that went through JSON, as the trusted grader would.
"""
from __future__ import annotations

import glob
import gzip
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from autograder import (COURSE_FLAGS, CheckFailure, assert_cache_miss_report,
                        assert_callback_log, assert_checkify_errors, assert_dot_dtypes,
                        assert_flags_at_defaults, assert_flags_restored, assert_named_scopes,
                        assert_no_retraces, assert_plain_result, assert_profile_written,
                        collect_checkify_errors, collect_flags, collect_retraces, dot_facts,
                        read_trace_events, scope_facts, trace_facts)
from autograder.debugging.checkify import explain_checkify_errors, split_mapped_errors
from autograder.debugging.callbacks import explain_callback_log, explain_plain
from autograder.programs.exported import explain_dots, explain_scopes, exported_text
from tests.judging import judge_programs, recorded
from autograder.debugging.cache_misses import explain_cache_miss_report
from autograder.jit.recompiles import describe_miss, explain_retraces, stable_miss_lines
from autograder.debugging.traces import explain_profile


@pytest.fixture(autouse=True)
def course_flags():
    """Every test starts and ends with the course's flags."""
    for name, value in COURSE_FLAGS.items():
        jax.config.update(name, value)
    yield
    for name, value in COURSE_FLAGS.items():
        jax.config.update(name, value)


def _roundtrip(data):
    return json.loads(json.dumps(data))


# --- flags ---------------------------------------------------------------------------

def test_assert_flags_at_defaults_resets_and_names_the_flag_and_its_cost():
    assert_flags_at_defaults()
    jax.config.update("jax_enable_x64", True)
    with pytest.raises(CheckFailure) as err:
        assert_flags_at_defaults(section="3.4")
    text = str(err.value)
    assert text.startswith("jax_enable_x64 was left on when this test cell started")
    assert "cost: every later default dtype becomes 64-bit" in text
    assert "reread: section 3.4" in text
    assert collect_flags()["jax_enable_x64"] is False


def test_assert_flags_restored_keeps_the_callers_setting():
    def scoped(x):
        with jax.debug_nans(True), jax.debug_infs(True):
            return x * 2

    def to_false(x):
        jax.config.update("jax_debug_nans", False)
        return x

    assert assert_flags_restored(scoped, (3.0,), setting={"jax_debug_nans": True}) == 6.0
    with pytest.raises(CheckFailure) as err:
        assert_flags_restored(to_false, (1.0,), setting={"jax_debug_nans": True})
    assert "jax_debug_nans was changed after to_false(x=float 1.0) returned" in str(err.value)
    assert "expected: jax_debug_nans=True" in str(err.value)
    assert collect_flags()["jax_debug_nans"] is False      # the setting was put back too


def test_assert_flags_restored_catches_a_flag_left_on():
    def leaves_x64(x):
        jax.config.update("jax_enable_x64", True)
        return x

    with pytest.raises(CheckFailure, match="jax_enable_x64 was left on after leaves_x64"):
        assert_flags_restored(leaves_x64, (1.0,))
    assert collect_flags()["jax_enable_x64"] is False


# --- plain results -------------------------------------------------------------------

def test_explain_plain_names_the_path_and_tolerates_float_noise():
    exp = {"runs": 2, "ops": {"add": 2}, "gaps_us": [30.0]}
    assert explain_plain(_roundtrip({"runs": 2, "ops": {"add": 2}, "gaps_us": [30.0 + 1e-9]}),
                         exp, name="f") is None
    text = explain_plain({"runs": 2, "ops": {"add": 3}, "gaps_us": [30.0]}, exp, name="f")
    assert text.splitlines()[:3] == ["f returned the wrong value at ['ops']['add']",
                                     "  expected: 2", "  got:      3"]
    text = explain_plain({**exp, "gaps_us": [1.0, 2.0]}, exp, name="f")
    assert "at ['gaps_us']" in text and "expected: 1 items" in text and "got:      2 items" in text


def test_assert_plain_result_tells_none_from_an_empty_string():
    assert assert_plain_result(lambda: None, lambda: None) is None
    with pytest.raises(CheckFailure) as err:
        assert_plain_result(lambda: "", lambda: None, name="nan_origin(f, x)",
                            hint="without a NaN, return None")
    assert "expected: None" in str(err.value) and "got:      ''" in str(err.value)
    assert "likely cause: without a NaN, return None" in str(err.value)


# --- checkify ------------------------------------------------------------------------

def _pick(x, i):
    def f(x, i):
        checkify.check(i >= 0, "negative index")
        return 1.0 / x[i]
    return checkify.checkify(f, errors=checkify.all_checks)(x, i)


_X = jnp.array([1.0, 0.0, 4.0])


def test_assert_checkify_errors_passes_jit_and_vmap():
    cases = [(_X, 0), (_X, 1), (_X, 5), (_X, -1)]
    want = [None, "division by zero", "out-of-bounds", "negative index"]
    observed = assert_checkify_errors(_pick, cases, want)
    assert observed[0]["error"] is None and float(observed[0]["value"]) == 1.0
    assert_checkify_errors(_pick, cases, want, vmap=True)


def test_a_missing_check_names_the_case_and_the_fix():
    def no_index_checks(x, i):
        return checkify.checkify(lambda x, i: 1.0 / x[i], errors=checkify.float_checks)(x, i)

    with pytest.raises(CheckFailure) as err:
        assert_checkify_errors(no_index_checks, [(_X, 0), (_X, 5)], [None, "out-of-bounds"],
                               labels=["valid", "index 5 of 3"], section="2.2")
    text = str(err.value)
    assert text.startswith("no_index_checks did not report the expected error for 1 of 2")
    assert "expected: an error containing 'out-of-bounds' for index 5 of 3" in text
    assert "fix: pass errors=checkify.all_checks" in text


def test_a_user_check_that_is_missing_gets_its_own_cause():
    def no_user_check(x, i):
        return checkify.checkify(lambda x, i: 1.0 / x[i], errors=checkify.all_checks)(x, i)

    with pytest.raises(CheckFailure, match="negative indices wrap around"):
        assert_checkify_errors(no_user_check, [(_X, -1)], ["negative index"])


def test_a_user_check_message_must_be_exactly_the_one_asked_for():
    def worded(x, i, message="negative index found"):
        def f(x, i):
            checkify.check(i >= 0, message, **({"i": i} if "{i}" in message else {}))
            return x[i]
        return checkify.checkify(f)(x, i)

    for message in ("negative index found", "negative index: {i}"):
        with pytest.raises(CheckFailure) as err:
            assert_checkify_errors(lambda x, i: worded(x, i, message), [(_X, -1)],
                                   ["negative index"])
        assert "expected: the error 'negative index', exactly" in str(err.value)
    assert_checkify_errors(lambda x, i: worded(x, i, "negative index"), [(_X, -1)],
                           ["negative index"])


def test_a_check_that_fires_on_valid_input_is_a_false_alarm():
    def off_by_one(x, i):
        def f(x, i):
            checkify.check(i > 0, "negative index")
            return x[i]
        return checkify.checkify(f)(x, i)

    with pytest.raises(CheckFailure, match="a check fires on valid input"):
        assert_checkify_errors(off_by_one, [(_X, 0)], [None])


def test_swapped_outputs_and_throw_inside_are_problems_not_crashes():
    def swapped(x, i):
        err, out = _pick(x, i)
        return out, err

    def throws(x, i):
        err, out = _pick(x, i)
        err.throw()
        return err, out

    with pytest.raises(CheckFailure, match="the first element is not a checkify Error"):
        assert_checkify_errors(swapped, [(_X, 0)], [None])
    observed = collect_checkify_errors(throws, [(_X, 0)])
    assert "raised" in observed[0]["problem"]


def test_split_mapped_errors_and_vmap_judgement_on_plain_data():
    text = "at mapped index 1: division by zero\nat mapped index 2: out-of-bounds indexing"
    assert split_mapped_errors(text) == {1: "division by zero", 2: "out-of-bounds indexing"}
    assert explain_checkify_errors(_roundtrip([{"error": text}]),
                                   [None, "division by zero", "out-of-bounds"],
                                   name="f", vmap=True) is None
    msg = explain_checkify_errors([{"error": text}], ["division", None, None], name="f",
                                  vmap=True)
    assert "under jax.vmap" in msg


# --- debug callbacks -----------------------------------------------------------------

def _good_log(fn, log):
    def g(x):
        y = fn(x)
        jax.debug.callback(lambda n: log.append(float(n)), jnp.linalg.norm(y))
        return y
    return g


def _tracer_log(fn, log):
    def g(x):
        y = fn(x)
        log.append(jnp.linalg.norm(y))
        return y
    return g


_XS = [jnp.array([3.0, 4.0]), jnp.array([0.0, 1.0])]
_NORMS = [float(np.linalg.norm(np.asarray(x))) for x in _XS]


@pytest.mark.parametrize("transform", ["eager", "jit", "vmap"])
def test_assert_callback_log_counts_one_entry_per_run(transform):
    assert_callback_log(_good_log, lambda x: x, _XS, _NORMS, transform=transform)


def test_a_python_append_logs_a_tracer_once():
    with pytest.raises(CheckFailure) as err:
        assert_callback_log(_tracer_log, lambda x: x, _XS, _NORMS, transform="jit")
    text = str(err.value)
    assert text.startswith("the log of _tracer_log under jax.jit holds 1 entries for 2 runs")
    assert "appends a tracer" in text and "jax.debug.callback" in text


def test_explain_callback_log_on_wrong_numbers_and_duplicates():
    assert "holds the wrong numbers" in explain_callback_log(
        {"entries": [1.0, 2.0], "outputs": []}, [1.0, 3.0], name="g", transform="vmap")
    assert "logged twice" in explain_callback_log(
        {"entries": [1.0, 1.0, 2.0, 2.0], "outputs": []}, [1.0, 2.0], name="g",
        transform="jit")


# --- retraces ------------------------------------------------------------------------

_BATCHES = [jnp.ones((4, 2)), jnp.ones((4, 2)), jnp.ones((3, 2))]


def _loop_fresh_lambda(batches):
    w = jnp.zeros(2)
    for xb in batches[:2]:
        w = jax.jit(lambda w, xb: w + xb.sum(0))(w, xb)
    return w


@jax.jit
def _accumulate(w, xb):
    return w + xb.sum(0)


def _loop_short_batch(batches):
    w = jnp.zeros(2)
    for xb in batches:
        w = _accumulate(w, xb)
    return w


def _loop_padded(batches):
    w = jnp.zeros(2)
    for xb in batches:
        xb = np.pad(np.asarray(xb), ((0, 4 - xb.shape[0]), (0, 0)))
        w = _accumulate(w, xb)
    return w


def test_assert_no_retraces_names_a_fresh_lambda():
    with pytest.raises(CheckFailure) as err:
        assert_no_retraces(_loop_fresh_lambda, [(_BATCHES,)], section="4.4")
    text = str(err.value)
    assert text.startswith("_loop_fresh_lambda traced `<lambda>` 2 times in call 1")
    assert "a new function object on every step" in text
    assert "reread: section 4.4" in text


def test_assert_no_retraces_names_a_new_shape():
    with pytest.raises(CheckFailure) as err:
        assert_no_retraces(_loop_short_batch, [(_BATCHES,)])
    text = str(err.value)
    assert "traced `_accumulate` 2 times in call 1" in text
    assert "traced 2 times, compiled 2 times" in text      # the compile count, from jax.monitoring
    assert "now f32[3,2] and before f32[4,2]" in text
    assert "pad every batch to one shape" in text


def test_padding_on_the_host_traces_once_and_eager_programs_do_not_count():
    observed = assert_no_retraces(_loop_padded, [(_BATCHES,), (_BATCHES,)])
    assert sum(len(call["misses"]) for call in observed) <= 1   # traced at most once, ever


def test_require_jit_fails_a_step_run_eagerly_beside_a_jitted_helper():
    def eager_steps(w, x):
        w = jax.jit(lambda w: w * 1.0)(w)  # only the set-up is jitted
        for _ in range(3):
            w = w - 0.1 * jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)
        return w

    def jitted_steps(w, x):
        step = jax.jit(lambda w: w - 0.1 * jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w))
        for _ in range(3):
            w = step(w)
        return w

    args = (jnp.ones(3), jnp.ones((4, 3)))
    with pytest.raises(CheckFailure) as err:
        assert_no_retraces(eager_steps, [args], require_jit=True)
    assert "ran matrix products eagerly, outside jax.jit" in str(err.value)
    assert "matmul" in str(err.value)
    assert_no_retraces(jitted_steps, [args], require_jit=True)
    assert_no_retraces(eager_steps, [args])  # without require_jit, eager is allowed


def test_a_static_learning_rate_is_explained():
    step = jax.jit(lambda w, lr: w - lr, static_argnames="lr")

    def run(w):
        for lr in (0.1, 0.2):
            w = step(w, lr=lr)
        return w

    with pytest.raises(CheckFailure, match="a static argument changed value"):
        assert_no_retraces(run, [(jnp.ones(2),)])


def test_across_calls_counts_a_function_made_per_call():
    def per_call(w):
        @jax.jit
        def inner(w):
            return w * 2
        return inner(w)

    assert_no_retraces(per_call, [(jnp.ones(2),), (jnp.ones(2),)])
    with pytest.raises(CheckFailure, match="over all calls"):
        assert_no_retraces(per_call, [(jnp.ones(2),), (jnp.ones(2),)], across_calls=True)


def test_describe_miss_and_explain_retraces_on_plain_data():
    msg = ("TRACING CACHE MISS at cell.py:9 (run):\n  for step defined at /n/cell.py:4\n"
           "  all previously seen cache keys differ. For the closest previous key:\n"
           "  different input pytree:\n  * at input path [0][1], now pytree leaf and "
           "before <class 'NoneType'>, so their Python types differ")
    miss = describe_miss(msg)
    assert miss["function"] == "step (defined at /n/cell.py:4)"
    observed = _roundtrip([{"misses": [describe_miss(msg.replace("for step", "never seen "
                                                                 "function:\n    step")),
                                       miss], "compiles": 2}])
    text = explain_retraces(observed, name="train")
    assert "the pytree structure of an input changes" in text
    assert "build the state with its final structure" in text


# --- cache-miss reports --------------------------------------------------------------

def _make_target():
    def scale(x):
        return x * 2
    return jax.jit(scale)


_CALLS = [(jnp.ones(3),), (jnp.ones(3),), (jnp.ones(4),)]


def _report(fn, calls):
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("jax").addHandler(handler)
    try:
        with jax.explain_cache_misses(True):
            for args in calls:
                fn(*args)
    finally:
        logging.getLogger("jax").removeHandler(handler)
    return lines


def test_assert_cache_miss_report_passes_a_handler_on_the_jax_logger():
    observed = assert_cache_miss_report(_report, _make_target, _CALLS)
    assert [stable_miss_lines(m) for m in observed["messages"]] == [
        ["never seen function"], ["different input types:", "* at x, now f32[4] and before f32[3]"]]


def _resets_to_defaults(fn, calls):  # "restores" the defaults, not what it found
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    jax.config.update("jax_explain_cache_misses", True)
    try:
        for args in calls:
            fn(*args)
    finally:
        jax.config.update("jax_explain_cache_misses", False)
        logger.removeHandler(handler)
    return lines


def test_a_caller_state_is_put_back_not_reset_to_the_defaults():
    logger = logging.getLogger("jax")
    before = (logger.level, logger.propagate, jax.config.jax_explain_cache_misses)
    assert_cache_miss_report(_report, _make_target, _CALLS, prior=True)
    assert_cache_miss_report(_resets_to_defaults, _make_target, _CALLS)  # from defaults
    with pytest.raises(CheckFailure, match="left jax_explain_cache_misses changed"):
        assert_cache_miss_report(_resets_to_defaults, _make_target, _CALLS, prior=True)
    assert (logger.level, logger.propagate, jax.config.jax_explain_cache_misses) == before


def test_no_handler_means_stderr(monkeypatch):
    # pytest's log capture puts a handler on the root logger; a kernel has none, so
    # Python's last-resort handler prints to stderr. Make it so here too.
    monkeypatch.setattr(logging.getLogger("jax"), "propagate", False)

    def to_stderr(fn, calls):
        with jax.explain_cache_misses(True):
            for args in calls:
                fn(*args)
        return []

    with pytest.raises(CheckFailure) as err:
        assert_cache_miss_report(to_stderr, _make_target, _CALLS)
    assert str(err.value).startswith("to_stderr let JAX's log reach stderr")
    assert "last-resort handler" in str(err.value)


def leaves_handler(fn, calls):
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("jax").addHandler(handler)
    with jax.explain_cache_misses(True):
        for args in calls:
            fn(*args)
    return lines


def leaves_root_handler(fn, calls):  # collects through the root logger, never removed
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger().addHandler(handler)
    with jax.explain_cache_misses(True):
        for args in calls:
            fn(*args)
    return lines


def test_a_handler_left_on_the_root_logger_is_reported_and_undone():
    before = list(logging.getLogger().handlers)
    with pytest.raises(CheckFailure, match="left a handler on a logger") as err:
        assert_cache_miss_report(leaves_root_handler, _make_target, _CALLS)
    assert "Handler on the root logger" in str(err.value)
    assert logging.getLogger().handlers == before


def test_a_leftover_handler_and_a_leftover_flag_are_reported_and_undone():
    before = list(logging.getLogger("jax").handlers)
    with pytest.raises(CheckFailure, match="left a handler on a logger") as err:
        assert_cache_miss_report(leaves_handler, _make_target, _CALLS)
    assert "['Handler']" in str(err.value)
    assert logging.getLogger("jax").handlers == before
    obs = {"messages": [], "stderr": [], "handlers_left": [],
           "flags_before": {"jax_explain_cache_misses": False},
           "flags_after": {"jax_explain_cache_misses": True}}
    assert "left jax_explain_cache_misses changed" in explain_cache_miss_report(
        _roundtrip(obs), [], name="report")


_RAISING = [(jnp.ones(3),), ("not an array",)]


def _no_finally(fn, calls):
    """Removes its handler only when every call returns."""
    before = set(logging.getLogger("jax").handlers)
    lines = leaves_handler(fn, calls)
    for handler in set(logging.getLogger("jax").handlers) - before:
        logging.getLogger("jax").removeHandler(handler)
    return lines


def _swallows(fn, calls):
    try:
        return _report(fn, calls)
    except TypeError:
        return []


def _level_and_propagation(fn, calls):
    logger = logging.getLogger("jax")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return _report(fn, calls)


def test_a_call_that_raises_must_leave_everything_as_it_was():
    """Issue 29: state left as found, also when a call raises. The clean-up in a
    `finally:` passes; none, or an except that swallows the error, fails; the logger's
    level and propagation count as its state."""
    assert_cache_miss_report(_report, _make_target, _RAISING, raising=True)
    before = (list(logging.getLogger("jax").handlers), logging.getLogger("jax").level)
    with pytest.raises(CheckFailure, match="left a handler on a logger after a call "
                                           "that raised"):
        assert_cache_miss_report(_no_finally, _make_target, _RAISING, raising=True)
    with pytest.raises(CheckFailure, match="returned although one of the calls raised"):
        assert_cache_miss_report(_swallows, _make_target, _RAISING, raising=True)

    def _replaces(fn, calls):
        try:
            return _report(fn, calls)
        except TypeError as err:
            raise RuntimeError("a call failed") from err

    with pytest.raises(CheckFailure, match="raised RuntimeError, not the call's own error"):
        assert_cache_miss_report(_replaces, _make_target, _RAISING, raising=True)
    with pytest.raises(CheckFailure, match="left the 'jax' logger's level and propagate changed"):
        assert_cache_miss_report(_level_and_propagation, _make_target, _CALLS)
    assert (list(logging.getLogger("jax").handlers), logging.getLogger("jax").level) == before
    assert logging.getLogger("jax").propagate
    # Raising where no call should: Python's own exception names only.
    obs = {"messages": [], "stderr": [], "handlers_left": [], "flags_before": {},
           "flags_after": {}}
    assert explain_cache_miss_report({**obs, "raised": "TypeError"}, [], name="report"
                                     ).startswith("report raised TypeError")
    assert explain_cache_miss_report({**obs, "raised": "Seed123Error"}, [], name="report"
                                     ).startswith("report raised an exception")


# --- traces --------------------------------------------------------------------------

def _op(op, run, ts, dur, module="jit_step"):
    return {"ph": "X", "ts": ts, "dur": dur, "name": op,
            "args": {"hlo_module": module, "hlo_op": op, "run_id": str(run)}}


def test_trace_facts_from_gzip_bytes():
    events = [_op("add", 1, 10.0, 2.0), _op("mul", 1, 12.0, 1.0), _op("add", 2, 20.0, 2.0),
              {"ph": "X", "ts": 9.0, "dur": 5.0, "name": "train", "args": {"step_num": "0"}},
              {"ph": "X", "ts": 19.0, "dur": 5.0, "name": "train", "args": {"step_num": "1"}},
              {"ph": "M", "name": "process_name", "args": {"name": "/host:CPU"}},
              _op("add", 7, 5.0, 1.0, module="jit_other")]
    data = gzip.compress(json.dumps({"traceEvents": events[::-1]}).encode())
    assert len(read_trace_events(data)) == 7
    assert trace_facts(data) == {"runs": {"jit_other": 1, "jit_step": 2},
                                 "steps": {"train": [0, 1]}}


def test_trace_facts_reads_a_tpu_trace():
    # The form of a TPU's trace (jax 0.10.2 on a v5e, events copied from a real file):
    # one event per run on the device's "XLA Modules" thread, ops without run ids on
    # "XLA Ops", host-side annotations as on a CPU.
    meta = [{"ph": "M", "pid": 3, "name": "process_name", "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "pid": 3, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}},
            {"ph": "M", "pid": 3, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}}]

    def run(ts, run_id, module="jit_features"):
        return {"ph": "X", "pid": 3, "tid": 2, "ts": ts, "dur": 6.82,
                "name": f"{module}(14457040574764829122)",
                "args": {"core_type": "0", "queue_id": "0", "run_id": str(run_id)}}

    def op(ts, name):
        return {"ph": "X", "pid": 3, "tid": 3, "ts": ts, "dur": 0.5, "name": name,
                "args": {"hlo_category": "sort", "long_name": f"%{name} = ..."}}

    events = meta + [run(49151.9, 9), op(49152.5, "sort.6"), run(49322.7, 10),
                     op(49323.0, "sort.6"), run(49517.3, 11), run(49600.0, 12, "jit_other"),
                     {"ph": "X", "pid": 701, "tid": 1, "ts": 49150.0, "dur": 400.0,
                      "name": "train", "args": {"step_num": "0"}}]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    assert trace_facts(data) == {"runs": {"jit_features": 3, "jit_other": 1},
                                 "steps": {"train": [0]}}


def test_explain_profile_messages():
    ok = {"path_ok": True, "newest": True, "path": "p", "found": ["p"]}
    facts = {"runs": {"jit_step": 3}, "steps": {"train": [0, 1, 2]}}
    kw = dict(module="jit_step", runs=3, annotation="train", name="profile")
    assert explain_profile(ok, facts, **kw) is None
    assert "block_until_ready" in explain_profile(ok, {**facts, "runs": {"jit_step": 1}}, **kw)
    assert "warm-up" in explain_profile(ok, {**facts, "runs": {"jit_step": 4}}, **kw)
    assert "StepTraceAnnotation('train', step_num=i)" in explain_profile(
        ok, {**facts, "steps": {"train": [1, 2, 3]}}, **kw)
    assert "did not return the trace file it wrote" in explain_profile(
        {**ok, "path_ok": False}, facts, **kw)


def test_assert_profile_written_reads_the_file(tmp_path):
    @jax.jit
    def step(w, b):
        return w + b

    def profile(step, state, batches, log_dir):
        with jax.profiler.trace(log_dir, create_perfetto_trace=True):
            for i, b in enumerate(batches):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    state = step(state, b)
            jax.block_until_ready(state)
        return state, glob.glob(os.path.join(log_dir, "plugins", "profile", "*",
                                             "perfetto_trace.json.gz"))[0]

    def folder_only(step, state, batches, log_dir):
        state, _ = profile(step, state, batches, log_dir)
        return state, log_dir

    batches = [jnp.ones(3)] * 3
    out = assert_profile_written(profile, (step, jnp.zeros(3), batches, str(tmp_path / "a")),
                                 log_dir=str(tmp_path / "a"), module="jit_step", runs=3)
    assert out.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(CheckFailure, match="did not return the trace file it wrote"):
        assert_profile_written(folder_only, (step, jnp.zeros(3), batches, str(tmp_path / "b")),
                               log_dir=str(tmp_path / "b"), module="jit_step", runs=3)


# --- exported programs ---------------------------------------------------------------

def test_scope_facts_and_assert_named_scopes():
    def step(w, x):
        with jax.named_scope("grad"):
            g = jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)
        with jax.named_scope("update"):
            return w - 0.1 * g

    def unlabelled(w, x):
        return w - 0.1 * jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)

    args = (jnp.ones(3), jnp.ones((2, 3)))
    assert_named_scopes(step, args, required={"update": ["sub", "mul"]},
                        exclusive={"dot_general": "grad"})
    with pytest.raises(CheckFailure) as err:
        assert_named_scopes(unlabelled, args, required={"update": ["sub"]}, exclusive={},
                            section="5.4")
    assert str(err.value).startswith("unlabelled has no `sub` inside jax.named_scope('update')")
    assert "(no scope)" in str(err.value)
    assert scope_facts('loc("jit(f)/a/b/jvp()/mul")') == {"mul": ["a/b"]}


def test_explain_scopes_exclusive():
    text = explain_scopes({"dot_general": ["", "grad"]}, required={},
                          exclusive={"dot_general": "grad"}, name="step")
    assert text.startswith("step has `dot_general` ops outside jax.named_scope('grad')")


def test_explain_scopes_accepts_one_of_several_primitives():
    # w + (-lr) * g has an add, no sub: "sub|add" is met by either, in the scope.
    facts = {"mul": ["update"], "add": ["update"], "dot_general": ["grad"]}
    assert explain_scopes(facts, required={"update": ["mul", "sub|add"]}, exclusive={},
                          name="step") is None
    text = explain_scopes({**facts, "add": [""]}, required={"update": ["sub|add"]},
                          exclusive={}, name="step")
    assert text.startswith("step has no `sub` or `add` inside jax.named_scope('update')")
    assert "got:      `sub` or `add` ops in scopes: (no scope)" in text


def _sgd_step(update, loss=lambda r: jnp.mean(r ** 2)):
    def scoped_step(w, x, y, lr):
        with jax.named_scope("grad"):
            g = jax.grad(lambda w: loss(x @ w - y))(w)
        with jax.named_scope("update"):
            return update(w, g, lr)
    return scoped_step


def test_the_update_scope_holds_the_update_only():
    # One product with the gradient, however the update is written; a factor of the
    # gradient moved into the update (its mean's 2/n, on the gradient) is one too many.
    # The learning rate's own scalar arithmetic is not counted (optax's -1 * lr).
    import optax

    def with_optax(w, g, lr):
        updates, _ = optax.sgd(lr).update(g, optax.sgd(lr).init(w))
        return optax.apply_updates(w, updates)

    args = (jnp.array([1.0, -1.0, 0.5]), jnp.arange(12.0).reshape(4, 3) / 10, jnp.ones(4), 0.1)
    rules = dict(required={"update": ["sub|add"]}, exclusive={"dot_general": "grad"},
                 at_most={"update": {"multiply|divide": 1}})
    for update in (lambda w, g, lr: w - lr * g, lambda w, g, lr: w + (-lr) * g, with_optax):
        assert_named_scopes(_sgd_step(update), args, **rules)
    summed = lambda r: jnp.sum(r ** 2)
    for update in (lambda w, g, lr: w - lr * (g * 2.0 / 4), lambda w, g, lr: w - lr * g / 2.0):
        with pytest.raises(CheckFailure, match="does more arithmetic inside "
                                               "jax.named_scope\\('update'\\)"):
            assert_named_scopes(_sgd_step(update, summed), args, **rules)


def test_a_nested_jit_is_in_the_scopes_of_its_call():
    # A function that a nested jax.jit wrote out names its ops relative to the call
    # (``jvp()/dot_general``): they are in the scopes of the call site.
    def jitted(w, x, y, lr):
        with jax.named_scope("grad"):
            g = jax.jit(jax.grad(lambda w: jnp.mean((x @ w - y) ** 2)))(w)
        with jax.named_scope("update"):
            return jax.jit(lambda w, g: w - lr * g)(w, g)

    args = (jnp.array([1.0, -1.0, 0.5]), jnp.arange(12.0).reshape(4, 3) / 10, jnp.ones(4), 0.1)
    assert_named_scopes(jitted, args, required={"grad": ["dot_general"], "update": ["mul", "sub"]},
                        exclusive={"dot_general": "grad"},
                        at_most={"update": {"multiply|divide": 1}})
    facts = scope_facts(exported_text(jitted, args))
    assert facts["dot_general"] == ["grad"] and facts["sub"] == ["grad", "update"]


def test_what_the_gradient_scope_hands_to_the_update_is_judged():
    # "The whole gradient inside 'grad'": what 'update' reads from 'grad' is the
    # gradient (up to sign), computed by running the program. A factor of it (the mean's
    # 1/n) folded into the learning rate, in either scope, passes every op count.
    import optax

    from autograder.core.check import REFERENCE, STUDENT

    def with_optax(w, g, lr):
        updates, _ = optax.sgd(lr).update(g, optax.sgd(lr).init(w))
        return optax.apply_updates(w, updates)

    def reshaped(w, x, y, lr):  # an unscoped reshape between the scopes
        with jax.named_scope("grad"):
            g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        g = g[None]
        with jax.named_scope("update"):
            return w - lr * g[0]

    def column(w, x, y, lr):  # the gradient as an (n, 1) column, squeezed in the update
        with jax.named_scope("grad"):
            g = 2.0 / x.shape[0] * x.T @ (x @ w[:, None] - y[:, None])
        with jax.named_scope("update"):
            return w - lr * g[:, 0]

    def climbs_down(w, x, y, lr):  # -grad handed over, the update adds
        with jax.named_scope("grad"):
            d = -jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        with jax.named_scope("update"):
            return w + lr * d

    def folded_in_grad(w, x, y, lr):
        with jax.named_scope("grad"):
            g = jax.grad(lambda w: jnp.sum((x @ w - y) ** 2))(w)
            step = lr / x.shape[0]
        with jax.named_scope("update"):
            return w - step * g

    summed = lambda r: jnp.sum(r ** 2)
    rng = np.random.default_rng(0)
    args = (jnp.asarray(rng.normal(size=5), jnp.float32),
            jnp.asarray(rng.normal(size=(9, 5)), jnp.float32),
            jnp.asarray(rng.normal(size=9), jnp.float32), 0.03)
    rules = dict(required={"update": ["sub|add"]}, exclusive={"dot_general": "grad"},
                 at_most={"update": {"multiply|divide": 1}}, hands_over=("grad", "update"),
                 reference=_sgd_step(lambda w, g, lr: w - lr * g), name="scoped_step")
    with recorded(REFERENCE) as ref:
        assert_named_scopes(reference_solution := _sgd_step(lambda w, g, lr: w - lr * g),
                            args, **rules)
    assert ref[0].params["handover"] == ["grad", "update"] and ref[0].expected is not None
    with pytest.raises(TypeError, match="needs reference="):
        assert_named_scopes(reference_solution, args, hands_over=("grad", "update"),
                            required={}, exclusive={})
    right = {"optax": _sgd_step(with_optax), "reshaped": reshaped, "climbs_down": climbs_down,
             "column": column}
    wrong = {"folded_in_update": _sgd_step(lambda w, g, lr: w - (lr / 9) * g, summed),
             "folded_in_grad": folded_in_grad}
    for name, fn in {**right, **wrong}.items():
        with recorded(STUDENT) as student:
            assert_named_scopes(fn, args, **rules)
        verdict = judge_programs(ref, student)
        assert verdict.passed == (name in right), (name, verdict.message)
        if name in right:
            assert_named_scopes(fn, args, **rules)  # the student's own test cell agrees
            continue
        assert "scope 'update' does not read from scope 'grad' what the reference's " \
               "does" in verdict.message
        assert "a factor (such as a mean's 1/n)" in verdict.message
        with pytest.raises(CheckFailure) as err:
            assert_named_scopes(fn, args, **rules)
        assert str(err.value) == verdict.message.split("\n  requirement")[0]


def test_dot_dtypes():
    a = jnp.ones((2, 3), jnp.bfloat16)
    assert_dot_dtypes(lambda a: jnp.dot(a, a.T, preferred_element_type=jnp.float32), (a,),
                      operands="bf16", result="f32")
    with pytest.raises(CheckFailure, match=r"multiplies bf16 x bf16 -> bf16, not"):
        assert_dot_dtypes(lambda a: jnp.dot(a, a.T).astype(jnp.float32), (a,),
                          operands="bf16", result="f32")
    with pytest.raises(CheckFailure, match="converted to float32 before the product"):
        assert_dot_dtypes(lambda a: a.astype(jnp.float32) @ a.T.astype(jnp.float32), (a,),
                          operands="bf16", result=None)
    assert dot_facts("nothing here") == []
    assert "computes no matrix product" in explain_dots([], operands="bf16", result="f32",
                                                        name="f")


def test_collect_retraces_is_plain_data():
    runs = collect_retraces(_accumulate, [(jnp.zeros(2), jnp.ones((5, 2)))])
    assert json.loads(json.dumps(runs)) == runs
