"""Trusted probes for 03_jit: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are compared outside. See
grader/trusted.py. Inputs mirror the hidden tests of source/03_jit.

Values (powers, moving averages, Newton iterates, updates, training steps) are compared
with the reference solution. The rules about how the code is compiled are facts the
probes compute inside the sandbox and return as plain data: whether a function is
jitted, how many XLA compilations a list of calls caused, op counts of the lowered
StableHLO, what kind of text a function returned, which inputs are donated and
aliased, and how a benchmark called two simulated functions. They are judged here by
``check`` functions (``compare=False``: correct solutions may differ in them). Timings
are never compared: the benchmark runs on ``SimulatedDevice`` functions whose results
are ready only after a known delay, so the checks are lower bounds and exact call
counts, which hold on any machine.
"""
import json
import math

from autograder._timing import _EAGER_FIRST, _EAGER_STEP, _JIT_FIRST, _JIT_STEP
from grader.trusted import Probe

_PRE = "import numpy as np\nimport jax\nimport jax.numpy as jnp\n"

# _compiles(fn, calls): the number of XLA compilations while calling fn on each
# prepared argument tuple (arguments are built before counting: eager ops compile).
_COMPILES = _PRE + (
    "from autograder._compile import collect_compilations as _collect_compilations\n"
    "def _compiles(fn, calls):\n"
    "    with _collect_compilations() as seen:\n"
    "        for args in calls:\n"
    "            jax.block_until_ready(fn(*args))\n"
    "    return seen.count\n"
    "def _is_jitted(fn):\n"
    "    return bool(callable(fn) and hasattr(fn, 'lower') and hasattr(fn, 'trace'))\n"
)


def _field(got, key):
    """``got[key]`` of a dict-valued fact (paths look like ``['key']``), else None."""
    if isinstance(got, dict):
        return got.get(f"[{key!r}]")
    return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _jitted_check(what):
    def check(got, expected):
        del expected
        if got is True:
            return None
        return (f"{what} is not a jitted function (it has no .lower / .trace): it runs op "
                "by op instead of as one compiled program")
    return check


def _at_most(n, cause):
    def check(got, expected):
        del expected
        if not _is_int(got):
            return "the grader could not count the compilations (unexpected result)"
        if got > n:
            return (f"it compiled {got} times, expected at most {n} "
                    f"compilation{'s' if n != 1 else ''}: {cause}")
        return None
    return check


_JIT_FIX = ("decorate the def with @jax.jit, or assign the jitted function: "
            "f = jax.jit(f, static_argnames=...) when it has static arguments")

# ---------------------------------------------------------------- 1.2 primitive_counts

_S_COUNTS = "1.2 Nested jaxprs"
_COUNTS = _PRE + (
    "import collections.abc as _abc\n"
    "import json as _json\n"
    "import numbers as _numbers\n"
    "from jax import lax\n"
    "def _f1(v):\n"
    "    return jnp.sin(v) * 2 + jnp.linalg.norm(jnp.cos(v))\n"
    "def _f2(v):\n"
    "    y = lax.cond(jnp.sum(v) > 0, lambda u: jnp.sin(u) ** 2, lambda u: jnp.cos(u), v)\n"
    "    return jax.nn.relu(y) + jax.jit(lambda u: jnp.tanh(u) * 3)(v)\n"
    # A dict (or Counter) of counts as one JSON string; anything else described.
    "def _counts_json(c):\n"
    "    if not isinstance(c, _abc.Mapping):\n"
    "        return 'not a dict: ' + type(c).__name__\n"
    "    out = {}\n"
    "    for k, v in c.items():\n"
    "        if not isinstance(v, _numbers.Integral) or isinstance(v, bool):\n"
    "            return 'a count that is not an int: ' + repr(k)[:80] + ': ' + type(v).__name__\n"
    "        out[str(k)] = int(v)\n"
    "    return _json.dumps(out, sort_keys=True)\n"
)


def _counts_check(got, expected):
    """Compares two ``{primitive: count}`` JSON strings and names the differences."""
    try:
        want = json.loads(expected)
    except (TypeError, ValueError):
        return "the reference counts could not be read"
    if not isinstance(got, str):
        return "expected a dict {primitive name: count}"
    if not got.startswith("{"):
        return f"expected a dict {{primitive name: count}}, got {got[:200]}"
    try:
        have = json.loads(got)
    except ValueError:
        return "the grader could not read the counts (unexpected result)"
    if not isinstance(have, dict):
        return "expected a dict {primitive name: count}"
    diffs = [f"`{k}`: expected {want.get(k, 0)}, got {have.get(k, 0)}"
             for k in sorted(set(want) | set(have)) if want.get(k, 0) != have.get(k, 0)]
    if diffs:
        return ("the counts differ from a walk over every equation, nested jaxprs included: "
                + "; ".join(diffs[:8]) + ("; ..." if len(diffs) > 8 else ""))
    return None


# ---------------------------------------------------------------- 2.2 poly_features

_S_POLY = "2.2 Static arguments"
_POLY = _COMPILES + (
    "_xv = jnp.array([0.5, -1.0, 2.0, 1.5])\n"
    "_xh = jnp.asarray(np.random.default_rng(301).normal(size=7), jnp.float32)\n"
    # A shape no earlier cell used, so the counts start from an empty cache.
    "_x11 = jnp.asarray(np.random.default_rng(311).normal(size=11), jnp.float32)\n"
)
_POLY_FIX = "poly_features = jax.jit(poly_features, static_argnames='degree')"

# ---------------------------------------------------------------- 3 ema_update

_S_EMA_PURE = "3.1 Side effects run once, at trace time"
_S_EMA_STATE = "3.3 State in, state out"
_EMA = _COMPILES + (
    "_rng = np.random.default_rng(303)\n"
    "_sh = {'mean': jnp.asarray(_rng.normal(size=5), jnp.float32), 'count': jnp.int32(7)}\n"
    "_obs = [jnp.asarray(_rng.normal(size=5), jnp.float32) for _ in range(4)]\n"
    "def _run(update):\n"
    "    s = _sh\n"
    "    for k, o in enumerate(_obs):\n"
    "        s = update(s, o, 0.5 + 0.1 * k)\n"
    "    return s\n"
    "def _three_calls(update, decay):\n"
    "    s = {'mean': jnp.zeros(3), 'count': jnp.int32(0)}\n"
    "    for obs in (jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, -1.0, 4.0]),\n"
    "                jnp.array([2.0, 2.0, 2.0])):\n"
    "        s = update(s, obs, decay)\n"
    "    return s\n"
    # A shape no earlier cell used, and decays no earlier cell used.
    "_s4 = {'mean': jnp.zeros(4), 'count': jnp.int32(0)}\n"
    "_x4 = jnp.array([1.0, 2.0, 3.0, 4.0])\n"
    "_ema_calls = [(_s4, _x4, 0.61), (_s4, _x4, 0.27), (_s4, _x4, 0.83)]\n"
)
_EMA_HINT = ("if `count` is off: a Python side effect (a global counter, list.append) runs "
             "once while tracing, not on every call, so the count must come from "
             "state['count']; if `mean` is off: check the formula "
             "decay * mean + (1 - decay) * x")

# ---------------------------------------------------------------- 4.2 benchmark

_S_BENCH = "4.2 Warm-up, median, eager baseline, ratio"
_BENCH_KEYS = ("eager_s", "jit_first_s", "jit_s", "speedup")
_BENCH = _PRE + (
    "from autograder._timing import SimulatedDevice as _SimulatedDevice\n"
    "def _bench_facts(repeats):\n"
    "    device = _SimulatedDevice()\n"
    f"    eager_fn = device.function(first={_EAGER_FIRST!r}, then={_EAGER_STEP!r},\n"
    "                               name='eager_fn')\n"
    f"    jit_fn = device.function(first={_JIT_FIRST!r}, then={_JIT_STEP!r}, name='jit_fn')\n"
    "    out = benchmark(eager_fn, jit_fn, 1.0, repeats=repeats)\n"
    "    facts = {'eager_calls': int(device.calls.get('eager_fn', 0)),\n"
    "             'jit_calls': int(device.calls.get('jit_fn', 0)),\n"
    "             'returned': type(out).__name__}\n"
    f"    for k in {_BENCH_KEYS!r}:\n"
    "        if not isinstance(out, dict) or k not in out:\n"
    "            facts[k] = 'missing'\n"
    "            continue\n"
    "        try:\n"
    "            facts[k] = float(out[k])\n"
    "        except (TypeError, ValueError):\n"
    "            facts[k] = 'not a number: ' + type(out[k]).__name__\n"
    "    return facts\n"
)


def _bench_check(repeats):
    def check(got, expected):
        del expected  # timings are never compared with the reference
        if not isinstance(got, dict):
            return "the grader could not read the benchmark's result (unexpected result)"
        if _field(got, "returned") != "dict":
            return (f"benchmark returned a {_field(got, 'returned')}, expected a dict with keys "
                    + ", ".join(_BENCH_KEYS))
        vals = {}
        for k in _BENCH_KEYS:
            v = _field(got, k)
            if v == "missing":
                return (f"the returned dict has no key `{k}` (expected keys "
                        f"{', '.join(_BENCH_KEYS)})")
            try:
                vals[k] = float(v)
            except (TypeError, ValueError):
                return f"`{k}` is not a number ({v})"
        bad = [k for k, v in vals.items() if not (math.isfinite(v) and v > 0)]
        if bad:
            return ("values that are not positive finite numbers: "
                    + ", ".join(f"{k}={vals[k]!r}" for k in bad)
                    + " (a time of 0 from a coarse clock, or a division by zero: measure "
                      "with time.perf_counter())")
        expected_calls = 1 + repeats
        wrong = [f"{n} called {_field(got, n + '_calls')} times" for n in ("eager", "jit")
                 if _field(got, n + "_calls") != expected_calls]
        if wrong:
            return (f"it does not follow the warm-up protocol: with repeats={repeats} each "
                    f"function must be called {expected_calls} times (1 warm-up or first call, "
                    f"then {repeats} timed calls), got " + "; ".join(wrong) + ". The first call "
                    "traces and compiles: without a separate warm-up call the compile time "
                    "leaks into the steady-state numbers")
        short = [f"{k} = {vals[k]:.3g} s, but the work takes at least {floor:g} s"
                 for k, floor in (("eager_s", _EAGER_STEP), ("jit_first_s", _JIT_FIRST),
                                  ("jit_s", _JIT_STEP)) if vals[k] < 0.999 * floor]
        if short:
            return ("it measured less time than the work takes: " + "; ".join(short)
                    + ". JAX dispatches asynchronously: a call returns as soon as the work is "
                      "queued, so block before stopping the timer: "
                      "jax.block_until_ready(fn(*args))")
        if not vals["jit_s"] < vals["jit_first_s"]:
            return (f"the steady-state time includes the compilation: jit_s = "
                    f"{vals['jit_s']:.3g} s is not below jit_first_s = {vals['jit_first_s']:.3g} "
                    "s; time the first call alone, then take the median of the calls after it")
        ratio = vals["eager_s"] / vals["jit_s"]
        if not math.isclose(vals["speedup"], ratio, rel_tol=1e-6):
            return (f"the speedup is wrong: expected eager_s / jit_s = {ratio:.4g}, got "
                    f"{vals['speedup']:.4g} (the ratio is inverted, or computed from other "
                    "numbers than those returned)")
        return None
    return check


# ---------------------------------------------------------------- 5.1 stablehlo_and_hlo

_S_HLO = "5.1 The stages: trace, lower, compile"
_HLO = _PRE + (
    "from autograder._hlo import _text_kind, count_stablehlo_ops as _count_ops\n"
    "def _g(v):\n"
    "    return jnp.exp(v) * jnp.tanh(v)\n"
    "def _h(m, w):\n"
    "    return jnp.maximum(m @ w, 0.0)\n"
    "def _kind(t):\n"
    "    return _text_kind(t) if isinstance(t, str) else 'not a str: ' + type(t).__name__\n"
    "def _hlo_facts(f, args, ops):\n"
    "    out = stablehlo_and_hlo(f, *args)\n"
    "    if not isinstance(out, (tuple, list)) or len(out) != 2:\n"
    "        what = 'not a pair: ' + type(out).__name__\n"
    "        return {'first': what, 'missing_ops': '', 'second': what}\n"
    "    first, second = out\n"
    "    counts = _count_ops(first) if isinstance(first, str) else {}\n"
    "    missing = [op for op in ops if not counts.get(op)]\n"
    "    return {'first': _kind(first), 'missing_ops': ','.join(missing),\n"
    "            'second': _kind(second)}\n"
)
_KIND_NAMES = {
    "jaxpr": "a jaxpr (the output of jax.make_jaxpr or .trace(...).jaxpr)",
    "hlo": "HLO before optimization (lowered.as_text(dialect='hlo'))",
    "optimized-hlo": "optimized HLO (compiled.as_text())",
    "stablehlo": "StableHLO (lowered.as_text())",
    "other": "text that is neither a jaxpr, StableHLO nor HLO",
}


def _kind_text(kind) -> str:
    return _KIND_NAMES.get(kind, str(kind)[:100])


def _hlo_check(got, expected):
    first, missing, second = (_field(got, k) for k in ("first", "missing_ops", "second"))
    if not all(isinstance(v, str) for v in (first, missing, second)):
        return "the grader could not read the result (unexpected result)"
    if first.startswith("not a pair"):
        return f"expected a pair (stablehlo_text, optimized_hlo_text), got {first[12:]}"
    if first != "stablehlo":
        cause = {"jaxpr": "a jaxpr is JAX's own program; StableHLO is what lowering produces "
                          "from it",
                 "hlo": "this is XLA's HLO, not StableHLO",
                 "optimized-hlo": "this is the optimized HLO of the compiled program: "
                                  "compiling comes after lowering"}.get(first, "")
        return (f"the first text is {_kind_text(first)}, expected StableHLO"
                + (f" ({cause})" if cause else "") + "; use jax.jit(f).lower(*args).as_text()")
    if missing:
        return (f"the first text is StableHLO, but without the ops "
                + ", ".join(f"`stablehlo.{m}`" for m in missing.split(","))
                + ": lower the function you were given, with the arguments you were given")
    want = _field(expected, "second")
    accepted = {"optimized-hlo"} if want == "optimized-hlo" else {"optimized-hlo", "hlo"}
    if second not in accepted:
        cause = {"hlo": "the program was printed before XLA compiled (and optimized) it",
                 "stablehlo": "StableHLO is the input of the compiler, not its output",
                 "jaxpr": "a jaxpr is JAX's own program, two steps before the compiled one",
                 }.get(second, "")
        return (f"the second text is {_kind_text(second)}, expected the optimized HLO"
                + (f" ({cause})" if cause else "")
                + "; use jax.jit(f).lower(*args).compile().as_text()")
    return None


# ---------------------------------------------------------------- 5.3 sqrt_newton

_S_NEWTON = "5.3 Python loops unroll"
_NEWTON = _PRE + (
    "from autograder._hlo import count_stablehlo_ops as _count_ops, stablehlo_text as _shlo\n"
    "_a = jnp.array([2.0, 9.0, 0.25, 100.0])\n"
    "_ah = jnp.asarray(np.random.default_rng(306).uniform(0.5, 20.0, size=(3, 2)), jnp.float32)\n"
    "_jitted = jax.jit(sqrt_newton, static_argnums=1)\n"
    "def _ops(args):\n"
    "    counts = _count_ops(_shlo(_jitted, args))\n"
    "    return {'divide': int(counts['divide']), 'while': int(counts['while'])}\n"
)


def _loop_check(steps):
    def check(got, expected):
        del expected
        divide, loops = _field(got, "divide"), _field(got, "while")
        if not (_is_int(divide) and _is_int(loops)):
            return "the grader could not read the op counts (unexpected result)"
        if divide > 4:
            return (f"it has {divide} `stablehlo.divide` ops for {steps} steps, expected at "
                    "most 4 (one copy of the body): the loop was unrolled, one copy of its "
                    "body per iteration")
        if loops < 1:
            return (f"it has no `stablehlo.while` for {steps} steps: the iteration was "
                    "unrolled or skipped")
        return None
    return check


_NEWTON_FIX = ("use jax.lax.fori_loop(0, steps, body, a) (or lax.scan / lax.while_loop), "
               "which lowers to one `stablehlo.while` with one copy of the body")

# ---------------------------------------------------------------- 6 sgd_update

_S_DONATE = "6. Donation: updating buffers in place"
_SGD = _PRE + (
    "from autograder._hlo import _kept_leaves, collect_aliased_parameters as _aliased_params\n"
    "from autograder._quiet import quiet as _quiet\n"
    "def _params():\n"
    "    return {'w': jnp.arange(6.0).reshape(3, 2), 'b': jnp.array([0.5, -0.5])}\n"
    "_grads = {'w': jnp.ones((3, 2)), 'b': jnp.array([1.0, 2.0])}\n"
    "def _params_h():\n"
    "    rng = np.random.default_rng(307)\n"
    "    return {'layer': {'w': jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),\n"
    "                      'b': jnp.zeros(3)}, 'scale': jnp.ones(())}\n"
    "_gh = jax.tree.map(lambda a: jnp.full_like(a, 0.25), _params_h())\n"
    # Which leaves of argument `argnum` are donated, and how many XLA aliases to an output.
    "def _donation(fn, args, argnum):\n"
    "    if not (callable(fn) and hasattr(fn, 'lower')):\n"
    "        return {'jitted': False, 'leaves': -1, 'donated': -1, 'params': -1, 'aliased': -1}\n"
    "    lowered = fn.lower(*args)\n"
    "    info = jax.tree.leaves(lowered.args_info[0][argnum])\n"
    "    with _quiet():\n"
    "        hlo = lowered.compile().as_text()\n"
    "    aliased = set(_aliased_params(hlo))\n"
    "    flat = [jax.tree.leaves(a) for a in args]\n"
    "    start = sum(len(l) for l in flat[:argnum])\n"
    "    mine = set(range(start, start + len(flat[argnum])))\n"
    "    kept = _kept_leaves(lowered, sum(len(l) for l in flat))\n"
    "    params = {p for p, leaf in enumerate(kept) if leaf in mine}\n"
    "    return {'jitted': True, 'leaves': len(info),\n"
    "            'donated': sum(bool(a.donated) for a in info),\n"
    "            'params': len(params), 'aliased': len(params & aliased)}\n"
)


def _donation_check(got, expected):
    del expected
    jitted = _field(got, "jitted")
    nums = {k: _field(got, k) for k in ("leaves", "donated", "params", "aliased")}
    if jitted is False:
        return ("sgd_update is not a jitted function, so it cannot donate params: donation is "
                "an option of jax.jit")
    if jitted is not True or not all(_is_int(v) for v in nums.values()):
        return "the grader could not read the donation facts (unexpected result)"
    if nums["donated"] < nums["leaves"]:
        return (f"sgd_update does not donate argument 0 (`params`): {nums['donated']} of "
                f"{nums['leaves']} leaves donated (jax.jit was called without donate_argnums "
                "for params, or donates another argument)")
    if nums["aliased"] < nums["params"]:
        return (f"sgd_update donates params, but XLA reuses only {nums['aliased']} of its "
                f"{nums['params']} buffers: return the updated params themselves, with the "
                "same shapes and dtypes")
    return None


# ---------------------------------------------------------------- 7 make_train_step

_S_STEP = "7. A jitted training step with optax"
_STEP = _COMPILES + (
    "import optax\n"
    "def _lin_loss(params, x, y):\n"
    "    return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)\n"
    "_x = jnp.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]])\n"
    "_y = jnp.array([1.0, -2.0, 0.5])\n"
    "_opt = optax.sgd(0.1)\n"
    "def _fresh():\n"
    "    p = {'w': jnp.array([0.5, -0.5]), 'b': jnp.array(0.1)}\n"
    "    return p, _opt.init(p)\n"
    "_rng = np.random.default_rng(308)\n"
    "_xh = jnp.asarray(_rng.normal(size=(16, 3)), jnp.float32)\n"
    "_yh = jnp.asarray(_rng.normal(size=16), jnp.float32)\n"
    "_adam = optax.adam(0.05)\n"
    "_p0 = {'w': jnp.asarray(_rng.normal(size=3), jnp.float32), 'b': jnp.zeros(())}\n"
    "_s0 = _adam.init(_p0)\n"
    "def _three_steps(step):\n"
    "    p, s = jax.tree.map(jnp.copy, _p0), jax.tree.map(jnp.copy, _s0)\n"
    "    out = []\n"
    "    for _ in range(3):\n"
    "        p, s, loss = step(p, s, _xh, _yh)\n"
    "        out.append(loss)\n"
    "    return p, s, jnp.stack(out)\n"
)
_STEP_HINT = ("optax updates already point downhill: apply them with optax.apply_updates "
              "(params + updates); the loss is the one before the update")

PROBES = {
    "test_03_jit_primitive_counts": [
        Probe("_counts_json(primitive_counts(_f1, jnp.arange(4.0)))", _COUNTS,
              name="primitive_counts(f1, x) with a nested jit (jnp.linalg.norm)",
              compare=False, check=_counts_check, section=_S_COUNTS,
              hint="jnp.linalg.norm is a nested `jit` equation: count it and walk into "
                   "eqn.params['jaxpr']",
              fix="recurse into every parameter that holds a Jaxpr (or a tuple of them) and "
                  "count its equations too"),
        Probe("_counts_json(primitive_counts(_f2, jnp.arange(3.0)))", _COUNTS,
              name="primitive_counts(f2, x) with lax.cond, relu and a nested jit",
              compare=False, check=_counts_check, section=_S_COUNTS,
              hint="lax.cond keeps its branches in a tuple (eqn.params['branches']) and "
                   "custom_jvp_call its body in eqn.params['call_jaxpr']: walk every "
                   "parameter that holds a jaxpr",
              fix="recurse into every parameter that holds a Jaxpr (or a tuple of them) and "
                  "count its equations too"),
    ],
    "test_03_jit_poly_features": [
        Probe("poly_features(_xv, 3)", _POLY, rtol=1e-5, section=_S_POLY,
              hint="column k is x**k, for k = 0 .. degree",
              fix="mark degree static: " + _POLY_FIX),
        Probe("poly_features(_xh, 5)", _POLY, rtol=1e-5, atol=1e-5, section=_S_POLY,
              hint="column k is x**k, for k = 0 .. degree",
              fix="mark degree static: " + _POLY_FIX),
        Probe("poly_features(_xh, 0)", _POLY, section=_S_POLY,
              hint="degree 0 is a single column of ones",
              fix="mark degree static: " + _POLY_FIX),
        Probe("_is_jitted(poly_features)", _POLY, name="poly_features itself",
              compare=False, check=_jitted_check("poly_features"), section=_S_POLY,
              hint="the def is not jitted (or jax.jit is applied inside the function, on "
                   "every call)", fix=_POLY_FIX),
        Probe("_compiles(poly_features, [(_x11, 1), (_x11, 1), (_x11, 1)])", _POLY,
              name="poly_features(x, 1) called three times",
              compare=False, section="2.3 A new function object misses the cache",
              check=_at_most(1, "the same inputs must reuse the cached program"),
              hint="jax.jit is applied on every call (a fresh function object misses the "
                   "cache), or the body runs op by op outside jit",
              fix=_POLY_FIX + ", once, outside the function"),
        Probe("_compiles(poly_features, [(_x11, 2), (_x11, 2), (_x11, 4), (_x11, 4)])", _POLY,
              name="poly_features(x, degree) called with degrees 2, 2, 4, 4",
              compare=False, section=_S_POLY,
              check=_at_most(2, "each distinct degree must compile once and then hit the "
                                "cache"),
              hint="a static argument is part of the cache key: one compilation per distinct "
                   "degree, not per call", fix=_POLY_FIX),
    ],
    "test_03_jit_ema_update": [
        Probe("_run(ema_update)", _EMA, rtol=1e-5, atol=1e-6,
              name="four threaded calls of ema_update from count 7",
              section=_S_EMA_PURE, hint=_EMA_HINT,
              fix="compute the new count from state['count'] and return it"),
        Probe("_three_calls(ema_update, 0.9)", _EMA,
              name="three threaded calls of ema_update(state, x, 0.9)",
              section=_S_EMA_PURE, hint=_EMA_HINT,
              fix="compute the new count from state['count'] and return it"),
        Probe("_is_jitted(ema_update)", _EMA, name="ema_update itself", compare=False,
              check=_jitted_check("ema_update"), section=_S_EMA_STATE,
              hint="the def is not jitted", fix="ema_update = jax.jit(ema_update)"),
        Probe("_compiles(ema_update, _ema_calls)", _EMA,
              name="ema_update(state, x, decay) called with decays 0.61, 0.27, 0.83",
              compare=False, section=_S_EMA_STATE,
              check=_at_most(1, "a static argument is part of the cache key, so every new "
                                "decay compiles again"),
              hint="decay is marked static (static_argnums / static_argnames), or the "
                   "function is jitted anew on every call",
              fix="keep decay traced: ema_update = jax.jit(ema_update), with no static "
                  "arguments"),
    ],
    "test_03_jit_benchmark": [
        Probe("_bench_facts(3)", _BENCH, name="benchmark(eager_fn, jit_fn, x, repeats=3) with "
              "simulated functions", compare=False, check=_bench_check(3), section=_S_BENCH,
              fix="warm up eager_fn once; take the median of `repeats` blocked eager calls; "
                  "time the first jit_fn call alone (jit_first_s), then the median of "
                  "`repeats` blocked calls (jit_s); speedup = eager_s / jit_s"),
        Probe("_bench_facts(4)", _BENCH, name="benchmark(eager_fn, jit_fn, x, repeats=4) with "
              "simulated functions", compare=False, check=_bench_check(4), section=_S_BENCH,
              fix="warm up eager_fn once; take the median of `repeats` blocked eager calls; "
                  "time the first jit_fn call alone (jit_first_s), then the median of "
                  "`repeats` blocked calls (jit_s); speedup = eager_s / jit_s"),
    ],
    "test_03_jit_stablehlo_and_hlo": [
        Probe("_hlo_facts(_g, (jnp.ones(3),), ('exponential', 'tanh'))", _HLO,
              name="stablehlo_and_hlo(f, x)", compare=False, check=_hlo_check,
              section=_S_HLO, fix="lowered = jax.jit(f).lower(*args); return "
                                  "lowered.as_text(), lowered.compile().as_text()"),
        Probe("_hlo_facts(_h, (jnp.ones((2, 3)), jnp.ones((3, 4))), ('dot_general', 'maximum'))",
              _HLO, name="stablehlo_and_hlo(f, m, w)", compare=False,
              check=_hlo_check, section=_S_HLO,
              fix="lowered = jax.jit(f).lower(*args); return lowered.as_text(), "
                  "lowered.compile().as_text()"),
    ],
    "test_03_jit_sqrt_newton": [
        Probe("_jitted(_a, 3)", _NEWTON, rtol=1e-5,
              name="jax.jit(sqrt_newton, static_argnums=1)(a, 3)", section=_S_NEWTON,
              hint="after 3 steps the iteration has not converged yet: run exactly `steps` "
                   "updates y <- (y + a / y) / 2 from y = a", fix=_NEWTON_FIX),
        *[Probe(f"_jitted(_ah, {s})", _NEWTON, rtol=1e-5, atol=1e-6,
                name=f"jax.jit(sqrt_newton, static_argnums=1)(a, {s})", section=_S_NEWTON,
                hint="run exactly `steps` updates y <- (y + a / y) / 2 from y = a (steps = 0 "
                     "returns a itself)", fix=_NEWTON_FIX)
          for s in (0, 1, 5)],
        Probe("_ops((_a, 50))", _NEWTON,
              name="the StableHLO of jax.jit(sqrt_newton, static_argnums=1)(a, 50)",
              compare=False, check=_loop_check(50), section=_S_NEWTON,
              hint="a Python loop inside a jitted function is unrolled at trace time (so is "
                   "lax.scan with unroll=True)", fix=_NEWTON_FIX),
        Probe("_ops((_ah, 200))", _NEWTON,
              name="the StableHLO of jax.jit(sqrt_newton, static_argnums=1)(a, 200)",
              compare=False, check=_loop_check(200), section=_S_NEWTON,
              hint="a Python loop inside a jitted function is unrolled at trace time (so is "
                   "lax.scan with unroll=True)", fix=_NEWTON_FIX),
    ],
    "test_03_jit_sgd_update": [
        Probe("sgd_update(_params(), _grads, 0.1)", _SGD, section=_S_DONATE,
              hint="the update is params - lr * grads, leaf by leaf",
              fix="jax.tree.map(lambda p, g: p - lr * g, params, grads)"),
        Probe("sgd_update(_params_h(), _gh, 0.05)", _SGD, rtol=1e-5, section=_S_DONATE,
              name="sgd_update on a nested params dict",
              hint="the update is params - lr * grads, leaf by leaf, for any pytree",
              fix="jax.tree.map(lambda p, g: p - lr * g, params, grads)"),
        Probe("_donation(sgd_update, (_params_h(), _gh, 0.05), 0)", _SGD,
              name="the compiled sgd_update(params, grads, lr)", compare=False,
              check=_donation_check, section=_S_DONATE,
              hint="donation is an option of jax.jit: donate_argnums=0 marks params, and XLA "
                   "then reuses their buffers for the outputs of the same shape and dtype",
              fix="sgd_update = jax.jit(sgd_update, donate_argnums=0)"),
    ],
    "test_03_jit_make_train_step": [
        Probe("make_train_step(_lin_loss, _opt)(*_fresh(), _x, _y)", _STEP, rtol=1e-5,
              name="make_train_step(loss_fn, optax.sgd(0.1))(params, opt_state, x, y)",
              section=_S_STEP, hint=_STEP_HINT,
              fix="loss, grads = jax.value_and_grad(loss_fn)(params, x, y); updates, "
                  "opt_state = optimizer.update(grads, opt_state, params); return "
                  "optax.apply_updates(params, updates), opt_state, loss"),
        Probe("_three_steps(make_train_step(_lin_loss, _adam))", _STEP, rtol=1e-5, atol=1e-6,
              name="three threaded steps of make_train_step(loss_fn, optax.adam(0.05))",
              section=_S_STEP, hint=_STEP_HINT + "; the new opt_state must be returned and "
                                                 "threaded into the next step",
              fix="return optax.apply_updates(params, updates), the new opt_state, and the "
                  "loss"),
        Probe("_is_jitted(make_train_step(_lin_loss, _opt))", _STEP,
              name="the step returned by make_train_step(loss_fn, optax.sgd(0.1))", compare=False,
              check=_jitted_check("the step returned by make_train_step"), section=_S_STEP,
              hint="jax.jit is applied inside the step (on every call) instead of to it",
              fix="decorate the inner def with @jax.jit and return it"),
        Probe("_compiles(_step, _calls)",
              _STEP + "_step = make_train_step(_lin_loss, _opt)\n"
                      "_calls = [(*_fresh(), _x, _y) for _ in range(3)]\n",
              name="train_step called three times on inputs of the same shapes",
              compare=False, section="2.3 A new function object misses the cache",
              check=_at_most(1, "the function being compiled is a new object each time, so "
                                "JAX's cache (keyed on the function) misses"),
              hint="jax.jit(lambda ...) or jax.jit of a function defined inside the step "
                   "creates a new function on every call",
              fix="create the jitted step once, in make_train_step (@jax.jit on the inner "
                  "def), and return it"),
    ],
}
