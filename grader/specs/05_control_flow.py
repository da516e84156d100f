"""Trusted probes for 05_control_flow: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are judged outside. See
grader/trusted.py. Inputs mirror the hidden tests of source/05_control_flow.

Values (under jax.jit where the notebook's checks jit) and gradients are compared
with the reference solution. Structural rules come back as small facts computed in
the sandbox and judged by the checks below: whether pool1d is jax.jit-wrapped and
how many inputs its traced program takes, primitive counts of a jaxpr (``cond``,
``while``), and loop facts (loop primitives in the jaxpr, ``stablehlo.while`` and
copies of the body's characteristic op in StableHLO).
"""
from autograder._feedback import format_failure
from grader.trusted import Probe

_PRE = "import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom jax import lax\n"



def _flat(value) -> dict:
    """``{name: leaf}`` of a probe that returned a flat dict (paths like ``['name']``)."""
    if not isinstance(value, dict):
        raise ValueError("expected several facts, got one value")
    return {str(k)[2:-2] if str(k).startswith("['") else str(k): v for k, v in value.items()}


# ---------------------------------------------------------------- pool1d

_S_POOL = "2.1 Fix 1: make the argument static"
_POOL = _PRE + '''
def _static_facts(x, size, kind):
    # Is pool1d jax.jit-wrapped, and how many traced inputs does pool1d.trace(...) take?
    fn = pool1d
    if not (callable(fn) and hasattr(fn, "trace") and hasattr(fn, "lower")):
        try:
            fn(x, size=size, kind=kind)
        except NotImplementedError:
            raise
        except Exception:
            pass
        return {"jitted": False, "traced_inputs": -1, "error": ""}
    try:
        traced = fn.trace(x, size=size, kind=kind)
    except NotImplementedError:
        raise
    except Exception as err:
        first = (str(err).strip().splitlines() or [""])[0][:200]
        return {"jitted": True, "traced_inputs": -1, "error": type(err).__name__ + ": " + first}
    return {"jitted": True, "traced_inputs": len(jax.tree.leaves(traced.args_info)), "error": ""}

_signal = jnp.array([1.0, 5.0, 2.0, 2.0, 0.0, 3.0])
_x = jnp.asarray(np.random.default_rng(501).normal(size=12), jnp.float32)
'''


def _static_check(got, _expected):
    facts = _flat(got)
    if facts["jitted"] is not True:
        return format_failure(
            "pool1d is a plain Python function, not a jax.jit-wrapped one",
            expected="a function made by jax.jit with static_argnames=('size', 'kind')",
            got="a function jax.jit never wrapped")
    if facts["error"]:
        return format_failure(
            "jax.jit cannot trace pool1d(x, size=..., kind=...)",
            expected="size and kind static: Python values while JAX traces",
            got=str(facts["error"])[:300],
            cause="size or kind is traced: a string cannot be a traced input, and a traced "
                  "size cannot set the shape of x.reshape(-1, size)")
    if facts["traced_inputs"] != 1:
        return format_failure(
            "size or kind is traced, not static",
            expected="1 traced input: x", got=f"{facts['traced_inputs']} traced inputs",
            cause="jax.jit traces every argument that is not listed as static, so the "
                  "compiled program takes it as a run-time input")
    return None


# ---------------------------------------------------------------- loops

def _loop_check(fn_name: str, body_op: str, hlo_op: str, trip_count: int):
    limit = max(1, trip_count // 2)

    def check(got, _expected):
        facts = _flat(got)
        if int(facts["jaxpr_loops"]) == 0:
            copies = int(facts["jaxpr_body_op"])
            return format_failure(
                f"{fn_name} is not compiled as a loop: its jaxpr has no `scan` or `while`",
                expected=f"one `scan` or `while` whose body runs {trip_count} times",
                got=(f"`{body_op}` appears {copies} times in the jaxpr, about once per step: "
                     "the loop was unrolled while JAX traced it" if copies >= limit else
                     f"no loop primitive; `{body_op}` appears {copies} time(s) in the jaxpr"),
                cause="a Python `for` loop runs while JAX traces, so the program holds one copy "
                      "of the body per step: compile time and program size grow with the "
                      "step count",
                fix="write one step as a function and run it with lax.fori_loop or lax.scan")
        whiles, copies = int(facts["stablehlo_while"]), int(facts["stablehlo_body_op"])
        if whiles == 0 or copies > limit:
            return format_failure(
                f"{fn_name} is unrolled when lowered to StableHLO",
                expected=f"a `stablehlo.while` whose body holds at most {limit} `{hlo_op}`",
                got=f"{whiles} `stablehlo.while`, {copies} copies of `{hlo_op}` for "
                    f"{trip_count} steps",
                cause="`unroll=True` (or a large unroll factor) in lax.scan / lax.fori_loop "
                      "copies the body once per step",
                fix="drop the `unroll` argument (the default, 1, keeps one body)")
        return None
    return check


_LOOP_FACTS = '''from autograder._loops import collect_loop_facts

def _loop_facts(fn, args, body_op, static_argnums=()):
    try:
        facts = collect_loop_facts(fn, args, body_op=body_op, static_argnums=static_argnums)
    except AssertionError as failure:
        if "is not implemented yet" in str(failure):
            raise NotImplementedError() from None
        raise
    return {k: int(facts[k]) for k in ("jaxpr_loops", "jaxpr_body_op", "stablehlo_while",
                                       "stablehlo_body_op")}
'''


def _uses(primitive: str, fn_name: str, cause: str):
    def check(got, _expected):
        facts = _flat(got)
        if int(facts["count"]) < 1:
            return format_failure(
                f"{fn_name} does not use `{primitive}`",
                expected=f"at least one `{primitive}` in the jaxpr",
                got=f"primitives used: {str(facts['primitives'])[:300] or 'none'}",
                cause=cause)
        return None
    return check


_COUNT = '''from autograder._jaxpr import count_primitives

def _count(fn, args, primitive):
    counts = count_primitives(jax.make_jaxpr(fn)(*args))
    return {"count": int(counts[primitive]), "primitives": ", ".join(sorted(counts))[:300]}
'''

# ---------------------------------------------------------------- inputs

_S_HUBER = "2.2 Fix 2: jnp.where for elementwise choices"
_HUBER = _PRE + (
    "_r = jnp.asarray(np.random.default_rng(502).normal(scale=2.0, size=(3, 5)), jnp.float32)\n"
    "_r1 = jnp.array([-2.5, -1.0, -0.3, 0.2, 0.9, 3.0])\n")

_S_ACT = "2.3 Fix 3: lax.cond and lax.switch for real branches"
_ACT = _PRE + (
    "_x = jnp.linspace(-2.0, 2.0, 7)\n"
    "_kinds = jnp.array([2, 0, 1, 1, 0], jnp.int32)\n"
    "_rows = jnp.asarray(np.random.default_rng(503).normal(size=(5, 4)), jnp.float32)\n")

_S_PEND = "3.2 lax.fori_loop: a counted loop"
_PEND = _PRE + (
    "_s0 = jnp.array([1.0, 0.0])\n"
    "_s1 = jnp.array([0.4, -1.2])\n"
    "_wp = jnp.array([0.7, -1.3])\n")

_S_NEWTON = "3.3 lax.while_loop: stop when done"
_NEWTON = _PRE + "_a = jnp.array([0.01, 0.3, 2.0, 7.0, 100.0, 2500.0], jnp.float32)\n"
_NEWTON_HINT = ("stop when |x*x - a| <= tol * a (relative to a), tested before each update; "
                "start from max(a, 1); count only the updates")

_S_RNN = "3.4 lax.scan: a loop that collects its outputs"
# The draws of the hidden tests, in their order (one generator, seed 506).
_RNN = _PRE + '''_rng = np.random.default_rng(506)
_p = {"W_x": jnp.asarray(0.5 * _rng.normal(size=(3, 4)), jnp.float32),
      "W_h": jnp.asarray(0.5 * _rng.normal(size=(4, 4)), jnp.float32),
      "b": jnp.asarray(0.1 * _rng.normal(size=4), jnp.float32)}
_h0 = jnp.asarray(_rng.normal(size=4), jnp.float32)
_xs2 = jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32)
_xs40 = jnp.asarray(_rng.normal(size=(40, 3)), jnp.float32)
_p5 = {"W_x": jnp.asarray(0.4 * _rng.normal(size=(2, 5)), jnp.float32),
       "W_h": jnp.asarray(0.4 * _rng.normal(size=(5, 5)), jnp.float32),
       "b": jnp.asarray(0.1 * _rng.normal(size=5), jnp.float32)}
_xs9 = jnp.asarray(_rng.normal(size=(9, 2)), jnp.float32)
_h9 = jnp.asarray(_rng.normal(size=5), jnp.float32)
_w9 = jnp.asarray(np.random.default_rng(507).normal(size=(9, 5)), jnp.float32)
'''
_RNN_HINT = ("return every state after its update, h_1..h_T, stacked into (T, H): not "
             "h_0..h_{T-1}, and not only h_T")

_TRACE_FIX = ("use jnp.where for elementwise choices, lax.cond / lax.switch for branches, "
              "lax.while_loop for loops: a Python `if`/`while` on a traced value fails under jit")

PROBES = {
    "test_05_control_flow_pool1d": [
        Probe("_static_facts(_signal, 2, 'max')", _POOL,
              name="pool1d(signal, size=2, kind='max') traced by jax.jit", compare=False,
              check=_static_check, section=_S_POOL,
              fix="make pool1d = jax.jit(pool1d, static_argnames=('size', 'kind')) (or decorate "
                  "it with functools.partial(jax.jit, static_argnames=('size', 'kind')))"),
        Probe("_static_facts(_x, 4, 'mean')", _POOL,
              name="pool1d(x, size=4, kind='mean') traced by jax.jit", compare=False,
              check=_static_check, section=_S_POOL,
              fix="make pool1d = jax.jit(pool1d, static_argnames=('size', 'kind'))"),
        Probe("[pool1d(_signal, 2, 'max'), pool1d(_signal, 3, 'mean')]", _POOL,
              name="pool1d(signal, 2, 'max') and pool1d(signal, 3, 'mean')",
              section=_S_POOL, hint="windows (1, 5), (2, 2), (0, 3) and (1, 5, 2), (2, 0, 3): "
                                    "consecutive and not overlapping",
              fix="x.reshape(-1, size) gives one window per row; reduce along axis 1 (and jit "
                  "pool1d with static_argnames=('size', 'kind'))"),
        Probe("[pool1d(_x, size=s, kind=k) for s, k in [(3, 'max'), (4, 'mean'), (2, 'mean'), (6, 'max')]]",
              _POOL, name="pool1d(x of 12 values, size, kind) for 4 settings", section=_S_POOL,
              hint="windows must be consecutive and not overlap: x.reshape(-1, size) gives one "
                   "window per row",
              fix="reduce x.reshape(-1, size) along axis 1 with max or mean (and jit pool1d "
                  "with static_argnames=('size', 'kind'))"),
    ],
    "test_05_control_flow_huber": [
        Probe("jax.jit(huber)(jnp.array([-3.0, -0.5, 0.0, 0.5, 2.0]), 1.0)", _HUBER,
              name="jax.jit(huber)([-3, -0.5, 0, 0.5, 2], 1.0)", section=_S_HUBER,
              hint="r**2 / 2 where |r| <= delta, else delta * (|r| - delta / 2)",
              fix=_TRACE_FIX),
        Probe("jax.jit(huber)(_r, jnp.float32(0.7))", _HUBER,
              name="jax.jit(huber)(r of shape (3, 5), delta=0.7)", section=_S_HUBER,
              hint="the quadratic branch holds for |r| <= delta, on both sides of 0; the linear "
                   "one is delta * (|r| - delta / 2), continuous at |r| = delta",
              fix="jnp.where(jnp.abs(r) <= delta, 0.5 * r ** 2, delta * (jnp.abs(r) - 0.5 * delta))"),
        Probe("jax.grad(lambda r: jnp.sum(huber(r, 0.8)))(_r1)", _HUBER,
              name="jax.grad(lambda r: jnp.sum(huber(r, 0.8)))", section=_S_HUBER,
              hint="the gradient is r where |r| <= delta and delta * sign(r) elsewhere",
              fix="build huber from jnp operations (jnp.where, jnp.abs) that jax.grad "
                  "differentiates"),
    ],
    "test_05_control_flow_activation": [
        Probe("[jax.jit(activation)(jnp.int32(k), _x) for k in range(3)]", _ACT,
              name="jax.jit(activation)(kind, x) for kind = 0, 1, 2", section=_S_ACT,
              hint="the branches must be in the order relu, tanh, softplus",
              fix="return lax.switch(kind, [jax.nn.relu, jnp.tanh, jax.nn.softplus], x)"),
        Probe("_count(activation, (jnp.int32(0), _x), 'cond')", _ACT + _COUNT,
              name="the jaxpr of activation(kind, x)", compare=False, section=_S_ACT,
              check=_uses("cond", "activation",
                          "jnp.where / jnp.select compute every activation and then pick one"),
              fix="return lax.switch(kind, [branch0, branch1, branch2], x)"),
        Probe("[jax.jit(activation)(jnp.int32(k), _x) for k in (-3, 5)]", _ACT,
              name="jax.jit(activation)(kind, x) for kind = -3 and 5", section=_S_ACT,
              hint="lax.switch clamps the index: below 0 acts as 0 (relu), above 2 as 2 (softplus)",
              fix="pass kind to lax.switch unchanged (or clamp it with jnp.clip(kind, 0, 2))"),
        Probe("jax.jit(jax.vmap(activation))(_kinds, _rows)", _ACT,
              name="jax.vmap(activation)(kinds, rows)", section=_S_ACT,
              hint="under vmap a batched kind turns the switch into a select: every row must "
                   "get its own activation",
              fix=_TRACE_FIX),
    ],
    "test_05_control_flow_simulate_pendulum": [
        Probe("simulate_pendulum(_s0, jnp.float32(9.81), 1)", _PEND,
              name="simulate_pendulum([1, 0], 9.81, 1 step)", section=_S_PEND,
              hint="take exactly n_steps steps; semi-implicit Euler updates omega first "
                   "(damping term: damping * omega), then moves theta with the NEW omega"),
        Probe("[simulate_pendulum(_s1, jnp.float32(4.0), n) for n in (7, 120)]", _PEND,
              name="simulate_pendulum([0.4, -1.2], 4.0, 7 and 120 steps)", rtol=1e-4, atol=1e-5,
              section=_S_PEND,
              hint="the loop must take exactly n_steps steps, omega first, then theta with the "
                   "new omega"),
        Probe("simulate_pendulum(_s1, jnp.float32(4.0), 30, dt=0.02, damping=0.5)", _PEND,
              name="simulate_pendulum([0.4, -1.2], 4.0, 30, dt=0.02, damping=0.5)", rtol=1e-4,
              atol=1e-5, section=_S_PEND, hint="use the dt and damping arguments, not fixed numbers"),
        Probe("_loop_facts(simulate_pendulum, (_s0, jnp.float32(9.81), 60), 'sin', (2,))",
              _PEND + _LOOP_FACTS, name="the loop of simulate_pendulum(state0, k, 60 steps)",
              compare=False, check=_loop_check("simulate_pendulum", "sin", "sine", 60),
              section="3.1 Python loops unroll"),
        Probe("jax.grad(lambda s, k: jnp.sum(simulate_pendulum(s, k, 40) * _wp), argnums=(0, 1))"
              "(_s0, jnp.float32(9.81))", _PEND,
              name="jax.grad through simulate_pendulum(state0, k, 40 steps)", rtol=1e-4,
              atol=1e-5, section=_S_PEND,
              hint="a gradient that does not flow through every step: jax.lax.stop_gradient, a "
                   "cast to int or NumPy, or a value computed outside the loop",
              fix="use lax.fori_loop with Python int bounds or lax.scan: jax.grad cannot go "
                  "through lax.while_loop (fori_loop with traced bounds becomes one)"),
    ],
    "test_05_control_flow_newton_sqrt": [
        Probe("jax.jit(newton_sqrt)(jnp.float32(2.0))", _NEWTON,
              name="jax.jit(newton_sqrt)(2.0)", section=_S_NEWTON,
              hint="(x, steps) with 4 updates for a = 2: " + _NEWTON_HINT,
              fix="lax.while_loop(cond_fun, body_fun, (x0, 0)): a Python while on a traced "
                  "value fails under jit"),
        Probe("_count(newton_sqrt, (jnp.float32(2.0),), 'while')", _NEWTON + _COUNT,
              name="the jaxpr of newton_sqrt(2.0)", compare=False, section=_S_NEWTON,
              check=_uses("while", "newton_sqrt",
                          "a loop with a fixed number of steps (fori_loop, scan) does not stop "
                          "when the root has converged"),
              fix="use lax.while_loop(cond_fun, body_fun, (x0, 0))"),
        Probe("[jax.jit(newton_sqrt)(a) for a in _a]", _NEWTON,
              name="jax.jit(newton_sqrt)(a) for a in [0.01, 0.3, 2, 7, 100, 2500]",
              section=_S_NEWTON, hint=_NEWTON_HINT,
              fix="stop on the relative residual: jnp.abs(x * x - a) > tol * a"),
        Probe("jax.jit(newton_sqrt, static_argnames=('tol', 'max_steps'))"
              "(jnp.float32(50.0), tol=1e-2, max_steps=3)", _NEWTON,
              name="newton_sqrt(50.0, tol=1e-2, max_steps=3)", section=_S_NEWTON,
              hint="use the tol and max_steps arguments"),
        Probe("jax.jit(jax.vmap(newton_sqrt))(_a)", _NEWTON,
              name="jax.vmap(newton_sqrt)(a)", section=_S_NEWTON, hint=_NEWTON_HINT),
        Probe("jax.jit(lambda a: jax.jvp(lambda a: newton_sqrt(a)[0], (a,), (jnp.ones_like(a),))[1])"
              "(jnp.float32(7.0))", _NEWTON,
              name="jax.jvp of newton_sqrt at a = 7 (1 / (2 sqrt(7)))", rtol=1e-3, atol=1e-5,
              section=_S_NEWTON,
              hint="forward mode goes through lax.while_loop: the root must depend on a through "
                   "the updates"),
    ],
    "test_05_control_flow_rnn_states": [
        Probe("rnn_states(_p, _h0, _xs2)", _RNN, name="rnn_states(params, h0, 2 inputs)",
              rtol=1e-5, atol=1e-6, section=_S_RNN, hint=_RNN_HINT),
        Probe("_loop_facts(rnn_states, (_p, _h0, _xs40), 'tanh')", _RNN + _LOOP_FACTS,
              name="the loop of rnn_states(params, h0, 40 inputs)", compare=False,
              check=_loop_check("rnn_states", "tanh", "tanh", 40),
              section="3.1 Python loops unroll"),
        Probe("rnn_states(_p, _h0, _xs40)", _RNN, name="rnn_states(params, h0, 40 inputs)",
              rtol=1e-4, atol=1e-5, section=_S_RNN, hint=_RNN_HINT),
        Probe("rnn_states(_p5, jnp.zeros(5), _xs9)", _RNN,
              name="rnn_states(params with H = 5, zeros, 9 inputs)", rtol=1e-4, atol=1e-5,
              section=_S_RNN, hint=_RNN_HINT),
        Probe("jax.grad(lambda p, h: jnp.sum(rnn_states(p, h, _xs9) * _w9), argnums=(0, 1))(_p5, _h9)",
              _RNN, name="jax.grad through rnn_states(params, h0, 9 inputs)", rtol=1e-4,
              atol=1e-5, section=_S_RNN,
              hint="a gradient that does not flow through every step: jax.lax.stop_gradient, a "
                   "cast to int or NumPy, or a value computed outside the loop",
              fix="use lax.scan (or lax.fori_loop with Python int bounds): jax.grad cannot go "
                  "through lax.while_loop"),
    ],
}
