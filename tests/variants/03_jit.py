"""Alternative correct answers and realistic wrong answers for 03_jit, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise.
"""

VARIANTS = {
    "03_jit_primitive_counts": {
        "correct": [
            # The staged API, a Counter, and duck typing on `.eqns`.
            "import collections\n"
            "def primitive_counts(f, *args):\n"
            "    counts = collections.Counter()\n"
            "    def walk(jaxpr):\n"
            "        for eqn in jaxpr.eqns:\n"
            "            counts[eqn.primitive.name] += 1\n"
            "            for p in eqn.params.values():\n"
            "                for item in (p if isinstance(p, (tuple, list)) else [p]):\n"
            "                    if hasattr(item, 'eqns'):\n"
            "                        walk(getattr(item, 'jaxpr', item))\n"
            "    walk(jax.jit(f).trace(*args).jaxpr)\n"
            "    return counts\n",
            # An explicit stack instead of recursion.
            "import jax.extend.core as jex\n"
            "def primitive_counts(f, *args):\n"
            "    counts = {}\n"
            "    stack = [jax.make_jaxpr(f)(*args)]\n"
            "    while stack:\n"
            "        jaxpr = stack.pop()\n"
            "        for eqn in jaxpr.eqns:\n"
            "            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
            "            for p in eqn.params.values():\n"
            "                items = list(p) if isinstance(p, (tuple, list)) else [p]\n"
            "                stack.extend(i for i in items if isinstance(i, jex.Jaxpr))\n"
            "    return counts\n",
        ],
        "wrong": [
            ("counts the top level only: a nested jit's body is never visited",
             "def primitive_counts(f, *args):\n"
             "    counts = {}\n"
             "    for eqn in jax.make_jaxpr(f)(*args).jaxpr.eqns:\n"
             "        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
             "    return counts\n"),
            ("walks only params['jaxpr']: misses cond branches and custom_jvp bodies",
             "def primitive_counts(f, *args):\n"
             "    counts = {}\n"
             "    def walk(jaxpr):\n"
             "        for eqn in jaxpr.eqns:\n"
             "            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
             "            if 'jaxpr' in eqn.params:\n"
             "                inner = eqn.params['jaxpr']\n"
             "                walk(getattr(inner, 'jaxpr', inner))\n"
             "    walk(jax.make_jaxpr(f)(*args).jaxpr)\n"
             "    return counts\n"),
            ("counts each primitive once: a set of names, not a count of equations",
             "def primitive_counts(f, *args):\n"
             "    names = set()\n"
             "    def walk(jaxpr):\n"
             "        for eqn in jaxpr.eqns:\n"
             "            names.add(eqn.primitive.name)\n"
             "            for p in eqn.params.values():\n"
             "                for item in (p if isinstance(p, (tuple, list)) else (p,)):\n"
             "                    if isinstance(item, Jaxpr):\n"
             "                        walk(item)\n"
             "    walk(jax.make_jaxpr(f)(*args))\n"
             "    return {name: 1 for name in names}\n"),
            ("traces f at its first argument only: breaks for functions of several arrays",
             "def primitive_counts(f, *args):\n"
             "    counts = {}\n"
             "    def walk(jaxpr):\n"
             "        for eqn in jaxpr.eqns:\n"
             "            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
             "            for p in eqn.params.values():\n"
             "                for item in (p if isinstance(p, (tuple, list)) else (p,)):\n"
             "                    if isinstance(item, Jaxpr):\n"
             "                        walk(item)\n"
             "    walk(jax.make_jaxpr(f)(args[0]))\n"
             "    return counts\n"),
            ("counts only the leaves: the jit/cond equation that holds a nested jaxpr is skipped",
             "def primitive_counts(f, *args):\n"
             "    counts = {}\n"
             "    def walk(jaxpr):\n"
             "        for eqn in jaxpr.eqns:\n"
             "            inner = [i for p in eqn.params.values()\n"
             "                     for i in (p if isinstance(p, (tuple, list)) else (p,))\n"
             "                     if isinstance(i, Jaxpr)]\n"
             "            if not inner:\n"
             "                counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
             "            for i in inner:\n"
             "                walk(i)\n"
             "    walk(jax.make_jaxpr(f)(*args))\n"
             "    return counts\n"),
            ("walks only the first cond branch: the other branch's equations are missed",
             "def primitive_counts(f, *args):\n"
             "    counts = {}\n"
             "    def walk(jaxpr):\n"
             "        for eqn in jaxpr.eqns:\n"
             "            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1\n"
             "            for p in eqn.params.values():\n"
             "                item = p[0] if isinstance(p, (tuple, list)) and p else p\n"
             "                if isinstance(item, Jaxpr):\n"
             "                    walk(item)\n"
             "    walk(jax.make_jaxpr(f)(*args))\n"
             "    return counts\n"),
        ],
    },
    "03_jit_poly_features": {
        "correct": [
            "@functools.partial(jax.jit, static_argnums=1)\n"
            "def poly_features(x, degree):\n"
            "    return x[:, None] ** jnp.arange(degree + 1)\n",
            "def poly_features(x, degree):\n"
            "    return jnp.vander(x, degree + 1, increasing=True)\n"
            "poly_features = jax.jit(poly_features, static_argnames=('degree',))\n",
        ],
        "wrong": [
            ("degree is not static: range(degree + 1) fails on a tracer",
             "@jax.jit\n"
             "def poly_features(x, degree):\n"
             "    return jnp.stack([x ** k for k in range(degree + 1)], axis=1)\n"),
            ("not jitted: right values, but run op by op",
             "def poly_features(x, degree):\n"
             "    return jnp.stack([x ** k for k in range(degree + 1)], axis=1)\n"),
            ("jax.jit applied inside the function: a new jitted function on every call",
             "def poly_features(x, degree):\n"
             "    inner = jax.jit(lambda v: jnp.stack([v ** k for k in range(degree + 1)], axis=1))\n"
             "    return inner(x)\n"),
            ("one column short: range(degree) stops at x**(degree - 1)",
             "def poly_features(x, degree):\n"
             "    return jnp.stack([x ** k for k in range(degree)], axis=1)\n"
             "poly_features = jax.jit(poly_features, static_argnames='degree')\n"),
            ("jnp.vander's default order: the columns run from x**degree down to x**0",
             "def poly_features(x, degree):\n"
             "    return jnp.vander(x, degree + 1)\n"
             "poly_features = jax.jit(poly_features, static_argnames='degree')\n"),
            ("powers as exp(k log x): NaN for negative x and for x = 0",
             "def poly_features(x, degree):\n"
             "    return jnp.exp(jnp.log(x)[:, None] * jnp.arange(degree + 1))\n"
             "poly_features = jax.jit(poly_features, static_argnames='degree')\n"),
        ],
    },
    "03_jit_ema_update": {
        "correct": [
            "def ema_update(state, x, decay):\n"
            "    mean = state['mean'] + (1 - decay) * (x - state['mean'])\n"
            "    return {'mean': mean, 'count': jnp.add(state['count'], 1)}\n"
            "ema_update = jax.jit(ema_update)\n",
            "@jax.jit\n"
            "def ema_update(state, x, decay):\n"
            "    decay = jnp.asarray(decay, state['mean'].dtype)\n"
            "    return dict(state, mean=decay * state['mean'] + (1 - decay) * x,\n"
            "                count=state['count'] + jnp.ones((), state['count'].dtype))\n",
        ],
        "wrong": [
            ("counts calls with a Python global: the increment runs only while tracing",
             "_calls = 0\n"
             "@jax.jit\n"
             "def ema_update(state, x, decay):\n"
             "    global _calls\n"
             "    _calls += 1\n"
             "    return {'mean': decay * state['mean'] + (1 - decay) * x,\n"
             "            'count': jnp.int32(_calls)}\n"),
            ("decay marked static: every new decay value compiles again",
             "@functools.partial(jax.jit, static_argnames='decay')\n"
             "def ema_update(state, x, decay):\n"
             "    return {'mean': decay * state['mean'] + (1 - decay) * x,\n"
             "            'count': state['count'] + 1}\n"),
            ("decay ignored: the 0.9 of the example is hard-coded",
             "@jax.jit\n"
             "def ema_update(state, x, decay):\n"
             "    return {'mean': 0.9 * state['mean'] + 0.1 * x, 'count': state['count'] + 1}\n"),
            ("count incremented by 1.0: it becomes a float32 instead of staying an int32",
             "@jax.jit\n"
             "def ema_update(state, x, decay):\n"
             "    return {'mean': decay * state['mean'] + (1 - decay) * x,\n"
             "            'count': state['count'] + 1.0}\n"),
            ("weights swapped: decay multiplies the new observation",
             "@jax.jit\n"
             "def ema_update(state, x, decay):\n"
             "    return {'mean': decay * x + (1 - decay) * state['mean'],\n"
             "            'count': state['count'] + 1}\n"),
            ("not jitted: right values, but dispatched op by op",
             "def ema_update(state, x, decay):\n"
             "    return {'mean': decay * state['mean'] + (1 - decay) * x,\n"
             "            'count': state['count'] + 1}\n"),
        ],
    },
    "03_jit_benchmark": {
        "correct": [
            # Mean over a loop blocked once at the end: queued calls still all finish.
            "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
            "    jax.block_until_ready(eager_fn(*args))\n"
            "    start = time.perf_counter()\n"
            "    for _ in range(repeats):\n"
            "        out = eager_fn(*args)\n"
            "    jax.block_until_ready(out)\n"
            "    eager_s = (time.perf_counter() - start) / repeats\n"
            "    start = time.perf_counter()\n"
            "    jax.block_until_ready(jit_fn(*args))\n"
            "    jit_first_s = time.perf_counter() - start\n"
            "    start = time.perf_counter()\n"
            "    for _ in range(repeats):\n"
            "        out = jit_fn(*args)\n"
            "    jax.block_until_ready(out)\n"
            "    jit_s = (time.perf_counter() - start) / repeats\n"
            "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
            "            'speedup': eager_s / jit_s}\n",
            # The method form of blocking, numpy medians, floats.
            "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
            "    def run(fn, n):\n"
            "        times = []\n"
            "        for _ in range(n):\n"
            "            t0 = time.perf_counter()\n"
            "            fn(*args).block_until_ready()\n"
            "            times.append(time.perf_counter() - t0)\n"
            "        return times\n"
            "    eager = run(eager_fn, repeats + 1)[1:]\n"
            "    jit = run(jit_fn, repeats + 1)\n"
            "    eager_s, jit_s = float(np.median(eager)), float(np.median(jit[1:]))\n"
            "    return {'eager_s': eager_s, 'jit_first_s': jit[0], 'jit_s': jit_s,\n"
            "            'speedup': eager_s / jit_s}\n",
        ],
        "wrong": [
            ("no block_until_ready: the timer stops when the work is queued",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        fn(*args)\n"
             "        return time.perf_counter() - start\n"
             "    timed(eager_fn)\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(repeats))\n"
             "    jit_first_s = timed(jit_fn)\n"
             "    jit_s = statistics.median(timed(jit_fn) for _ in range(repeats))\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
             "            'speedup': eager_s / jit_s}\n"),
            ("no warm-up: the eager baseline includes its compilation",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        jax.block_until_ready(fn(*args))\n"
             "        return time.perf_counter() - start\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(repeats))\n"
             "    jit_times = [timed(jit_fn) for _ in range(repeats)]\n"
             "    jit_s = statistics.median(jit_times)\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_times[0], 'jit_s': jit_s,\n"
             "            'speedup': eager_s / jit_s}\n"),
            ("repeats ignored: always five timed calls",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        jax.block_until_ready(fn(*args))\n"
             "        return time.perf_counter() - start\n"
             "    timed(eager_fn)\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(5))\n"
             "    jit_first_s = timed(jit_fn)\n"
             "    jit_s = statistics.median(timed(jit_fn) for _ in range(5))\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
             "            'speedup': eager_s / jit_s}\n"),
            ("default repeats=3 instead of the 5 the contract states",
             "def benchmark(eager_fn, jit_fn, *args, repeats=3):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        jax.block_until_ready(fn(*args))\n"
             "        return time.perf_counter() - start\n"
             "    timed(eager_fn)\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(repeats))\n"
             "    jit_first_s = timed(jit_fn)\n"
             "    jit_s = statistics.median(timed(jit_fn) for _ in range(repeats))\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
             "            'speedup': eager_s / jit_s}\n"),
            ("speedup inverted: jit_s / eager_s",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        jax.block_until_ready(fn(*args))\n"
             "        return time.perf_counter() - start\n"
             "    timed(eager_fn)\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(repeats))\n"
             "    jit_first_s = timed(jit_fn)\n"
             "    jit_s = statistics.median(timed(jit_fn) for _ in range(repeats))\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
             "            'speedup': jit_s / eager_s}\n"),
            ("times in milliseconds where the contract asks for seconds",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    def timed(fn):\n"
             "        start = time.perf_counter()\n"
             "        jax.block_until_ready(fn(*args))\n"
             "        return (time.perf_counter() - start) * 1000\n"
             "    timed(eager_fn)\n"
             "    eager_s = statistics.median(timed(eager_fn) for _ in range(repeats))\n"
             "    jit_first_s = timed(jit_fn)\n"
             "    jit_s = statistics.median(timed(jit_fn) for _ in range(repeats))\n"
             "    return {'eager_s': eager_s, 'jit_first_s': jit_first_s, 'jit_s': jit_s,\n"
             "            'speedup': eager_s / jit_s}\n"),
            ("blocks only the first call: the timed calls measure the dispatch",
             "def benchmark(eager_fn, jit_fn, *args, repeats=5):\n"
             "    jax.block_until_ready(eager_fn(*args))\n"
             "    t = []\n"
             "    for _ in range(repeats):\n"
             "        s = time.perf_counter(); eager_fn(*args); t.append(time.perf_counter() - s)\n"
             "    s = time.perf_counter(); jax.block_until_ready(jit_fn(*args))\n"
             "    jit_first_s = time.perf_counter() - s\n"
             "    u = []\n"
             "    for _ in range(repeats):\n"
             "        s = time.perf_counter(); jit_fn(*args); u.append(time.perf_counter() - s)\n"
             "    return {'eager_s': statistics.median(t), 'jit_first_s': jit_first_s,\n"
             "            'jit_s': statistics.median(u),\n"
             "            'speedup': statistics.median(t) / statistics.median(u)}\n"),
        ],
    },
    "03_jit_stablehlo_and_hlo": {
        "correct": [
            "def stablehlo_and_hlo(f, *args):\n"
            "    lowered = jax.jit(f).trace(*args).lower()\n"
            "    compiled = lowered.compile()\n"
            "    return lowered.as_text(), compiled.as_text()\n",
            "def stablehlo_and_hlo(f, *args):\n"
            "    lowered = jax.jit(f).lower(*args)\n"
            "    return str(lowered.compiler_ir('stablehlo')), lowered.compile().as_text()\n",
        ],
        "wrong": [
            ("returns the HLO before optimization instead of the compiled one",
             "def stablehlo_and_hlo(f, *args):\n"
             "    lowered = jax.jit(f).lower(*args)\n"
             "    return lowered.as_text(), lowered.as_text(dialect='hlo')\n"),
            ("returns the jaxpr instead of the StableHLO",
             "def stablehlo_and_hlo(f, *args):\n"
             "    compiled = jax.jit(f).lower(*args).compile()\n"
             "    return str(jax.make_jaxpr(f)(*args)), compiled.as_text()\n"),
            ("the pair in the wrong order: (optimized HLO, StableHLO)",
             "def stablehlo_and_hlo(f, *args):\n"
             "    lowered = jax.jit(f).lower(*args)\n"
             "    return lowered.compile().as_text(), lowered.as_text()\n"),
            ("lowers at the first argument only: breaks for functions of several arrays",
             "def stablehlo_and_hlo(f, *args):\n"
             "    lowered = jax.jit(f).lower(args[0])\n"
             "    return lowered.as_text(), lowered.compile().as_text()\n"),
            ("returns the Lowered and Compiled objects instead of their texts",
             "def stablehlo_and_hlo(f, *args):\n"
             "    lowered = jax.jit(f).lower(*args)\n"
             "    return lowered, lowered.compile()\n"),
        ],
    },
    "03_jit_sgd_update": {
        "correct": [
            "def sgd_update(params, grads, lr):\n"
            "    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)\n"
            "sgd_update = jax.jit(sgd_update, donate_argnames='params')\n",
            "@functools.partial(jax.jit, donate_argnums=(0,))\n"
            "def sgd_update(params, grads, lr):\n"
            "    leaves, treedef = jax.tree.flatten(params)\n"
            "    g_leaves = treedef.flatten_up_to(grads)\n"
            "    return treedef.unflatten([p - lr * g for p, g in zip(leaves, g_leaves)])\n",
        ],
        "wrong": [
            ("jitted without donation: new buffers are allocated every step",
             "@jax.jit\n"
             "def sgd_update(params, grads, lr):\n"
             "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"),
            ("donates grads (argument 1) instead of params",
             "@functools.partial(jax.jit, donate_argnums=1)\n"
             "def sgd_update(params, grads, lr):\n"
             "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"),
            ("lr static: every new learning rate compiles again",
             "@functools.partial(jax.jit, donate_argnums=0, static_argnums=2)\n"
             "def sgd_update(params, grads, lr):\n"
             "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"),
            ("lr ignored: the 0.1 of the example is hard-coded",
             "@functools.partial(jax.jit, donate_argnums=0)\n"
             "def sgd_update(params, grads, lr):\n"
             "    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)\n"),
            ("steps uphill: params + lr * grads",
             "@functools.partial(jax.jit, donate_argnums=0)\n"
             "def sgd_update(params, grads, lr):\n"
             "    return jax.tree.map(lambda p, g: p + lr * g, params, grads)\n"),
        ],
    },
}
