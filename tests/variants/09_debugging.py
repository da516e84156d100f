"""Alternative correct answers and realistic wrong answers for 09_debugging, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise (the test cells turn
off any flag a wrong answer leaves on, when they start and when they end).
"""

# The start of a cache_miss_report that collects the 'jax' logger's records in `lines`
# (what its wrong variants share; each goes on from there).
_COLLECTING = ("import logging\n"
               "def cache_miss_report(fn, calls):\n"
               "    lines = []\n"
               "    handler = logging.Handler()\n"
               "    handler.emit = lambda record: lines.append(record.getMessage())\n")

VARIANTS = {
    "09_debugging_nan_origin": {
        "correct": [
            # Enters the flags one by one; jax_debug_infs only when asked. (Not
            # jax.config.update: in jax 0.12 a global update does not check functions
            # and operations that already ran under the context managers.)
            "import contextlib\n"
            "def nan_origin(fn, *args, infs=False):\n"
            "    with contextlib.ExitStack() as stack:\n"
            "        stack.enter_context(jax.debug_nans(True))\n"
            "        if infs:\n"
            "            stack.enter_context(jax.debug_infs(True))\n"
            "        try:\n"
            "            fn(*args)\n"
            "        except FloatingPointError as err:\n"
            "            return str(err).rsplit(' ', 1)[-1]\n"
            "    return None\n",
            "import re\n"
            "def nan_origin(fn, *args, infs=False):\n"
            "    with jax.debug_nans(True):\n"
            "        with jax.debug_infs(bool(infs)):\n"
            "            try:\n"
            "                fn(*args)\n"
            "            except FloatingPointError as err:\n"
            "                found = re.search(r'encountered in (\\w+)', str(err))\n"
            "                return found.group(1) if found else str(err)\n"
            "    return None\n",
        ],
        "wrong": [
            ("turns the flags on and never puts them back",
             "def nan_origin(fn, *args, infs=False):\n"
             "    jax.config.update('jax_debug_nans', True)\n"
             "    jax.config.update('jax_debug_infs', infs)\n"
             "    try:\n"
             "        fn(*args)\n"
             "    except FloatingPointError as err:\n"
             "        return str(err).split()[-1]\n"
             "    return None\n"),
            ("restores the flags to False, not to the caller's values",
             "def nan_origin(fn, *args, infs=False):\n"
             "    jax.config.update('jax_debug_nans', True)\n"
             "    jax.config.update('jax_debug_infs', infs)\n"
             "    try:\n"
             "        fn(*args)\n"
             "        return None\n"
             "    except FloatingPointError as err:\n"
             "        return str(err).split()[-1]\n"
             "    finally:\n"
             "        jax.config.update('jax_debug_nans', False)\n"
             "        jax.config.update('jax_debug_infs', False)\n"),
            ("returns the whole message, not the primitive's name",
             "def nan_origin(fn, *args, infs=False):\n"
             "    with jax.debug_nans(True), jax.debug_infs(infs):\n"
             "        try:\n"
             "            fn(*args)\n"
             "        except FloatingPointError as err:\n"
             "            return str(err)\n"
             "    return None\n"),
            ("ignores infs: jax_debug_infs is never turned on",
             "def nan_origin(fn, *args, infs=False):\n"
             "    with jax.debug_nans(True):\n"
             "        try:\n"
             "            fn(*args)\n"
             "        except FloatingPointError as err:\n"
             "            return str(err).split()[-1]\n"
             "    return None\n"),
            ("inspects the output instead of using the flag: cannot name the primitive",
             "def nan_origin(fn, *args, infs=False):\n"
             "    out = fn(*args)\n"
             "    bad = jnp.isnan(out) | (jnp.isinf(out) if infs else False)\n"
             "    return 'nan' if bool(jnp.any(bad)) else None\n"),
            ("returns an empty string, not None, when nothing goes wrong",
             "def nan_origin(fn, *args, infs=False):\n"
             "    with jax.debug_nans(True), jax.debug_infs(infs):\n"
             "        try:\n"
             "            fn(*args)\n"
             "        except FloatingPointError as err:\n"
             "            return str(err).split()[-1]\n"
             "    return ''\n"),
        ],
    },
    "09_debugging_with_norm_log": {
        "correct": [
            "def with_norm_log(fn, log):\n"
            "    def record(y):\n"
            "        log.append(float(np.linalg.norm(y)))\n"
            "    def g(x):\n"
            "        y = fn(x)\n"
            "        jax.debug.callback(record, y)\n"
            "        return y\n"
            "    return g\n",
            # Appends NumPy scalars rather than Python floats: numbers all the same.
            "def with_norm_log(fn, log):\n"
            "    def g(x):\n"
            "        y = fn(x)\n"
            "        jax.debug.callback(log.append, jnp.sqrt(jnp.sum(y * y)))\n"
            "        return y\n"
            "    return g\n",
        ],
        "wrong": [
            ("a Python side effect: log.append runs once, at trace time, with a tracer",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        y = fn(x)\n"
             "        log.append(jnp.linalg.norm(y))\n"
             "        return y\n"
             "    return g\n"),
            ("float() of a traced value: fails under jit",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        y = fn(x)\n"
             "        log.append(float(jnp.linalg.norm(y)))\n"
             "        return y\n"
             "    return g\n"),
            ("jax.debug.print shows the norm but logs nothing",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        y = fn(x)\n"
             "        jax.debug.print('norm {n}', n=jnp.linalg.norm(y))\n"
             "        return y\n"
             "    return g\n"),
            ("logs the norm of the input, not of the output",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        jax.debug.callback(lambda n: log.append(float(n)), jnp.linalg.norm(x))\n"
             "        return fn(x)\n"
             "    return g\n"),
            ("logs the squared norm",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        y = fn(x)\n"
             "        jax.debug.callback(lambda n: log.append(float(n)), jnp.sum(y ** 2))\n"
             "        return y\n"
             "    return g\n"),
            ("logs twice per run (the norm, then again from a second callback)",
             "def with_norm_log(fn, log):\n"
             "    def g(x):\n"
             "        y = fn(x)\n"
             "        n = jnp.linalg.norm(y)\n"
             "        jax.debug.callback(lambda v: log.append(float(v)), n)\n"
             "        jax.debug.callback(lambda v: log.append(float(v)), n)\n"
             "        return y\n"
             "    return g\n"),
        ],
    },
    "09_debugging_checked_nll": {
        "correct": [
            "def checked_nll(probs, labels, weights):\n"
            "    def nll(probs, labels, weights):\n"
            "        checkify.check(labels.min() >= 0, 'negative label')\n"
            "        picked = jnp.take_along_axis(probs, labels[:, None], axis=1)[:, 0]\n"
            "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
            "    errors = checkify.index_checks | checkify.float_checks | checkify.user_checks\n"
            "    return checkify.checkify(nll, errors=errors)(probs, labels, weights)\n",
            "def checked_nll(probs, labels, weights):\n"
            "    def nll(probs, labels, weights):\n"
            "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
            "        logp = jnp.log(probs[jnp.arange(probs.shape[0]), labels])\n"
            "        return -jnp.average(logp, weights=weights)\n"
            "    return jax.jit(checkify.checkify(nll, errors=checkify.all_checks))(\n"
            "        probs, labels, weights)\n",
        ],
        "wrong": [
            ("no user check: a negative label silently reads the last class",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    return checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"),
            ("checkify without errors=: only user checks, an out-of-bounds label passes",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    return checkify.checkify(nll)(probs, labels, weights)\n"),
            ("no float checks: zero weights give a silent NaN",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    errors = checkify.index_checks | checkify.user_checks\n"
             "    return checkify.checkify(nll, errors=errors)(probs, labels, weights)\n"),
            ("off by one: the user check rejects label 0",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels > 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    return checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"),
            ("calls err.throw() inside: cannot run under jit",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    err, loss = checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"
             "    err.throw()\n"
             "    return err, loss\n"),
            ("returns (loss, err): the order is swapped",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    err, loss = checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"
             "    return loss, err\n"),
            ("the unweighted mean: ignores the weights in the loss",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(jnp.log(picked)) / jnp.sum(weights) * jnp.mean(weights)\n"
             "    return checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"),
            ("the user check's message is not exactly 'negative label'",
             "def checked_nll(probs, labels, weights):\n"
             "    def nll(probs, labels, weights):\n"
             "        checkify.check(jnp.all(labels >= 0), 'negative label found')\n"
             "        picked = probs[jnp.arange(labels.shape[0]), labels]\n"
             "        return -jnp.sum(weights * jnp.log(picked)) / jnp.sum(weights)\n"
             "    return checkify.checkify(nll, errors=checkify.all_checks)(probs, labels, weights)\n"),
        ],
    },
    "09_debugging_compact_positive": {
        "correct": [
            "def compact_positive(x, size):\n"
            "    pos = x > 0\n"
            "    dest = jnp.where(pos, jnp.cumsum(pos) - 1, size)\n"
            "    vals = jnp.zeros(size, x.dtype).at[dest].set(x, mode='drop')\n"
            "    return vals, jnp.sum(pos).astype(jnp.int32)\n",
            "def compact_positive(x, size):\n"
            "    idx = jnp.nonzero(x > 0, size=size)[0]\n"
            "    count = jnp.count_nonzero(x > 0).astype(jnp.int32)\n"
            "    vals = jnp.where(jnp.arange(size) < count, x[idx], 0)\n"
            "    return vals, count\n",
        ],
        "wrong": [
            ("the default fill_value=0: the padding reads x[0]",
             "def compact_positive(x, size):\n"
             "    idx = jnp.nonzero(x > 0, size=size)[0]\n"
             "    return x[idx], jnp.sum(x > 0, dtype=jnp.int32)\n"),
            ("fill_value=-1: the padding wraps to the last element",
             "def compact_positive(x, size):\n"
             "    idx = jnp.nonzero(x > 0, size=size, fill_value=-1)[0]\n"
             "    return x.at[idx].get(mode='fill', fill_value=0), jnp.sum(x > 0, dtype=jnp.int32)\n"),
            ("x >= 0 keeps the zeros",
             "def compact_positive(x, size):\n"
             "    idx = jnp.nonzero(x >= 0, size=size, fill_value=x.shape[0])[0]\n"
             "    vals = x.at[idx].get(mode='fill', fill_value=0)\n"
             "    return vals, jnp.sum(x >= 0, dtype=jnp.int32)\n"),
            ("a boolean mask: its shape depends on the values, so it fails under jit",
             "def compact_positive(x, size):\n"
             "    vals = x[x > 0][:size]\n"
             "    vals = jnp.concatenate([vals, jnp.zeros(size - vals.shape[0], x.dtype)])\n"
             "    return vals, jnp.sum(x > 0, dtype=jnp.int32)\n"),
            ("sorts the positive entries: their order is lost",
             "def compact_positive(x, size):\n"
             "    pos = jnp.where(x > 0, x, 0)\n"
             "    vals = -jnp.sort(-pos)\n"
             "    vals = jnp.pad(vals, (0, max(size - x.shape[0], 0)))[:size]\n"
             "    return vals, jnp.sum(x > 0, dtype=jnp.int32)\n"),
            ("the count is capped at size",
             "def compact_positive(x, size):\n"
             "    idx = jnp.nonzero(x > 0, size=size, fill_value=x.shape[0])[0]\n"
             "    vals = x.at[idx].get(mode='fill', fill_value=0)\n"
             "    return vals, jnp.minimum(jnp.sum(x > 0, dtype=jnp.int32), size)\n"),
            ("the count as a float32",
             "def compact_positive(x, size):\n"
             "    idx = jnp.nonzero(x > 0, size=size, fill_value=x.shape[0])[0]\n"
             "    vals = x.at[idx].get(mode='fill', fill_value=0)\n"
             "    return vals, jnp.sum(x > 0).astype(jnp.float32)\n"),
        ],
    },
    "09_debugging_average_uint8": {
        "correct": [
            "def average_uint8(a, b):\n"
            "    return (a >> 1) + (b >> 1) + (a & b & 1)\n",
            "def average_uint8(a, b):\n"
            "    s = a.astype(jnp.float32) + b.astype(jnp.float32)\n"
            "    return jnp.floor(s / 2).astype(jnp.uint8)\n",
        ],
        "wrong": [
            ("a + b overflows: it wraps in uint8 before the division",
             "def average_uint8(a, b):\n"
             "    return (a + b) // 2\n"),
            ("widened but never cast back: an int32 result",
             "def average_uint8(a, b):\n"
             "    return (a.astype(jnp.int32) + b) // 2\n"),
            ("true division returns float32",
             "def average_uint8(a, b):\n"
             "    return (a.astype(jnp.uint16) + b) / 2\n"),
            ("rounds instead of rounding down",
             "def average_uint8(a, b):\n"
             "    return jnp.round((a.astype(jnp.float32) + b) / 2).astype(jnp.uint8)\n"),
            ("halves each first and loses the carry: 255 and 255 give 254",
             "def average_uint8(a, b):\n"
             "    return a // 2 + b // 2\n"),
            ("casts to int8: values above 127 wrap to negative numbers",
             "def average_uint8(a, b):\n"
             "    return ((a.astype(jnp.int8) + b.astype(jnp.int8)) // 2).astype(jnp.uint8)\n"),
        ],
    },
    "09_debugging_rms_norm": {
        "correct": [
            "def rms_norm(x, gain, eps=1e-6):\n"
            "    dt = jnp.float32 if jnp.dtype(x.dtype).itemsize < 4 else x.dtype\n"
            "    xf = x.astype(dt)\n"
            "    ms = jnp.mean(jnp.square(xf), axis=-1, keepdims=True)\n"
            "    return (xf / jnp.sqrt(ms + eps) * gain.astype(dt)).astype(x.dtype)\n",
            "def rms_norm(x, gain, eps=1e-6):\n"
            "    wide = jnp.asarray(x, jnp.result_type(x.dtype, jnp.float32))\n"
            "    inv = 1.0 / jnp.sqrt(jnp.mean(wide * wide, axis=-1, keepdims=True) + eps)\n"
            "    out = wide * inv * gain\n"
            "    return out.astype(x.dtype)\n",
        ],
        "wrong": [
            ("never cast back: a bfloat16 input times a float32 gain returns float32",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    x32 = x.astype(jnp.float32)\n"
             "    return x32 * jax.lax.rsqrt(jnp.mean(x32 ** 2, axis=-1, keepdims=True) + eps) * gain\n"),
            ("statistics in x's dtype: x ** 2 overflows float16",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    ms = jnp.mean(x ** 2, axis=-1, keepdims=True)\n"
             "    return (x * jax.lax.rsqrt(ms + eps) * gain.astype(x.dtype)).astype(x.dtype)\n"),
            ("eps ignored: a row of zeros gives NaN",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))\n"
             "    ms = jnp.mean(x32 ** 2, axis=-1, keepdims=True)\n"
             "    return (x32 / jnp.sqrt(ms) * gain).astype(x.dtype)\n"),
            ("the mean over the first axis, not the last",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))\n"
             "    ms = jnp.mean(x32 ** 2, axis=0, keepdims=True)\n"
             "    return (x32 * jax.lax.rsqrt(ms + eps) * gain).astype(x.dtype)\n"),
            ("always float32: float64 inputs lose their precision",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    x32 = x.astype(jnp.float32)\n"
             "    ms = jnp.mean(x32 ** 2, axis=-1, keepdims=True)\n"
             "    return (x32 * jax.lax.rsqrt(ms + eps) * gain.astype(jnp.float32)).astype(x.dtype)\n"),
            ("one RMS over the whole array, not one per row",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))\n"
             "    return (x32 * jax.lax.rsqrt(jnp.mean(x32 ** 2) + eps) * gain).astype(x.dtype)\n"),
            ("turns x64 on globally to compute in float64, and leaves it on",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    jax.config.update('jax_enable_x64', True)\n"
             "    x64 = x.astype(jnp.float64)\n"
             "    ms = jnp.mean(x64 ** 2, axis=-1, keepdims=True)\n"
             "    return (x64 * jax.lax.rsqrt(ms + eps) * gain).astype(x.dtype)\n"),
            ("statistics in the promoted dtype: float16 for a float16 x and gain, where x ** 2 "
             "overflows",
             "def rms_norm(x, gain, eps=1e-6):\n"
             "    xs = x.astype(jnp.result_type(x, gain))\n"
             "    ms = jnp.mean(xs ** 2, axis=-1, keepdims=True)\n"
             "    return (xs * jax.lax.rsqrt(ms + eps) * gain).astype(x.dtype)\n"),
        ],
    },
    "09_debugging_cache_miss_report": {
        "correct": [
            "import logging\n"
            "class _Lines(logging.Handler):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.lines = []\n"
            "    def emit(self, record):\n"
            "        self.lines.append(record.getMessage())\n"
            "def cache_miss_report(fn, calls):\n"
            "    handler = _Lines()\n"
            "    logger = logging.getLogger('jax')\n"
            "    old = jax.config.jax_explain_cache_misses\n"
            "    logger.addHandler(handler)\n"
            "    jax.config.update('jax_explain_cache_misses', True)\n"
            "    try:\n"
            "        for args in calls:\n"
            "            fn(*args)\n"
            "    finally:\n"
            "        jax.config.update('jax_explain_cache_misses', old)\n"
            "        logger.removeHandler(handler)\n"
            "    return handler.lines\n",
            # A handler on the root logger also sees the records ('jax' propagates to it).
            "import logging\n"
            "def cache_miss_report(fn, calls):\n"
            "    out = []\n"
            "    handler = logging.Handler()\n"
            "    handler.emit = lambda record: out.append(record.getMessage())\n"
            "    root = logging.getLogger()\n"
            "    root.addHandler(handler)\n"
            "    try:\n"
            "        with jax.explain_cache_misses(True):\n"
            "            for args in calls:\n"
            "                jax.block_until_ready(fn(*args))\n"
            "    finally:\n"
            "        root.removeHandler(handler)\n"
            "    return out\n",
        ],
        "wrong": [
            ("turns the flag on with jax.config.update and leaves it on",
             _COLLECTING +
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    jax.config.update('jax_explain_cache_misses', True)\n"
             "    for args in calls:\n"
             "        fn(*args)\n"
             "    logging.getLogger('jax').removeHandler(handler)\n"
             "    return lines\n"),
            ("removes its handler only when every call returns: a call that raises leaves "
             "it on the logger",
             _COLLECTING +
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    with jax.explain_cache_misses(True):\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    logging.getLogger('jax').removeHandler(handler)\n"
             "    return lines\n"),
            ("swallows a call's error and returns what it has",
             _COLLECTING +
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    try:\n"
             "        with jax.explain_cache_misses(True):\n"
             "            for args in calls:\n"
             "                fn(*args)\n"
             "    except Exception:\n"
             "        pass\n"
             "    finally:\n"
             "        logging.getLogger('jax').removeHandler(handler)\n"
             "    return lines\n"),
            ("sets the logger's level and propagation for the calls and leaves them",
             _COLLECTING +
             "    logger = logging.getLogger('jax')\n"
             "    logger.setLevel(logging.DEBUG)\n"
             "    logger.propagate = False\n"
             "    logger.addHandler(handler)\n"
             "    try:\n"
             "        with jax.explain_cache_misses(True):\n"
             "            for args in calls:\n"
             "                fn(*args)\n"
             "    finally:\n"
             "        logger.removeHandler(handler)\n"
             "    return lines\n"),
            ("no handler: the explanations go to stderr and the list stays empty",
             "def cache_miss_report(fn, calls):\n"
             "    with jax.explain_cache_misses(True):\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    return []\n"),
            ("a handler but no flag: JAX logs no explanation",
             _COLLECTING +
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    try:\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    finally:\n"
             "        logging.getLogger('jax').removeHandler(handler)\n"
             "    return lines\n"),
            ("returns the log records, not their messages",
             "import logging\n"
             "def cache_miss_report(fn, calls):\n"
             "    records = []\n"
             "    handler = logging.Handler()\n"
             "    handler.emit = records.append\n"
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    try:\n"
             "        with jax.explain_cache_misses(True):\n"
             "            for args in calls:\n"
             "                fn(*args)\n"
             "    finally:\n"
             "        logging.getLogger('jax').removeHandler(handler)\n"
             "    return records\n"),
            ("keeps only the first line of each message, which says where, not why",
             "import logging\n"
             "def cache_miss_report(fn, calls):\n"
             "    lines = []\n"
             "    handler = logging.Handler()\n"
             "    handler.emit = lambda record: lines.append(record.getMessage().splitlines()[0])\n"
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    try:\n"
             "        with jax.explain_cache_misses(True):\n"
             "            for args in calls:\n"
             "                fn(*args)\n"
             "    finally:\n"
             "        logging.getLogger('jax').removeHandler(handler)\n"
             "    return lines\n"),
            ("never removes its handler from the 'jax' logger",
             _COLLECTING +
             "    logging.getLogger('jax').addHandler(handler)\n"
             "    with jax.explain_cache_misses(True):\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    return lines\n"),
            ("collects through a handler on the root logger and never removes it",
             "def cache_miss_report(fn, calls):\n"
             "    lines = []\n"
             "    handler = logging.Handler()\n"
             "    handler.emit = lambda record: lines.append(record.getMessage())\n"
             "    logging.getLogger().addHandler(handler)\n"
             "    with jax.explain_cache_misses(True):\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    return [m for m in lines if 'TRACING CACHE MISS' in m]\n"),
            ("puts the flag back to False, the default, not to what the caller had",
             "def cache_miss_report(fn, calls):\n"
             "    lines = []\n"
             "    handler = logging.Handler()\n"
             "    handler.emit = lambda record: lines.append(record.getMessage())\n"
             "    logger = logging.getLogger('jax')\n"
             "    logger.addHandler(handler)\n"
             "    jax.config.update('jax_explain_cache_misses', True)\n"
             "    try:\n"
             "        for args in calls:\n"
             "            fn(*args)\n"
             "    finally:\n"
             "        jax.config.update('jax_explain_cache_misses', False)\n"
             "        logger.removeHandler(handler)\n"
             "    return [m for m in lines if 'TRACING CACHE MISS' in m]\n"),
            ("a call's error replaced by another: the caller cannot tell what went wrong",
             "def cache_miss_report(fn, calls):\n"
             "    lines = []\n"
             "    handler = logging.Handler()\n"
             "    handler.emit = lambda record: lines.append(record.getMessage())\n"
             "    logger = logging.getLogger('jax')\n"
             "    logger.addHandler(handler)\n"
             "    try:\n"
             "        with jax.explain_cache_misses(True):\n"
             "            for args in calls:\n"
             "                fn(*args)\n"
             "    except Exception as err:\n"
             "        raise RuntimeError('a call failed') from err\n"
             "    finally:\n"
             "        logger.removeHandler(handler)\n"
             "    return [m for m in lines if 'TRACING CACHE MISS' in m]\n"),
        ],
    },
    "09_debugging_train": {
        "correct": [
            # The step at top level: created once for every run.
            "@jax.jit\n"
            "def _masked_step(params, state, xb, yb, mask, lr):\n"
            "    def loss(p):\n"
            "        return jnp.sum(mask * (xb @ p['w'] + p['b'] - yb) ** 2) / jnp.sum(mask)\n"
            "    grads = jax.grad(loss)(params)\n"
            "    state = jax.tree.map(lambda m, g: 0.9 * m + g, state, grads)\n"
            "    return jax.tree.map(lambda p, m: p - lr * m, params, state), state\n"
            "\n"
            "def train(params, x, y, lrs, batch_size):\n"
            "    n = x.shape[0]\n"
            "    pad = len(lrs) * batch_size - n\n"
            "    xp = np.pad(x, ((0, pad), (0, 0)))\n"
            "    yp = np.pad(y, (0, pad))\n"
            "    mask = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])\n"
            "    state = {'w': np.zeros(x.shape[1], np.float32), 'b': np.float32(0.0)}\n"
            "    for i, lr in enumerate(lrs):\n"
            "        s = slice(i * batch_size, (i + 1) * batch_size)\n"
            "        params, state = _masked_step(params, state, xp[s], yp[s], mask[s], lr)\n"
            "    return params\n",
            # The whole loop in one lax.scan over padded batches.
            "def train(params, x, y, lrs, batch_size):\n"
            "    steps, d = len(lrs), x.shape[1]\n"
            "    n = x.shape[0]\n"
            "    xp = np.zeros((steps * batch_size, d), np.float32); xp[:n] = x\n"
            "    yp = np.zeros(steps * batch_size, np.float32); yp[:n] = y\n"
            "    mask = (np.arange(steps * batch_size) < n).astype(np.float32)\n"
            "    batches = (xp.reshape(steps, batch_size, d), yp.reshape(steps, batch_size),\n"
            "               mask.reshape(steps, batch_size), np.asarray(lrs, np.float32))\n"
            "    @jax.jit\n"
            "    def run(params, batches):\n"
            "        def body(carry, batch):\n"
            "            p, m = carry\n"
            "            xb, yb, mb, lr = batch\n"
            "            g = jax.grad(lambda p: jnp.sum(mb * (xb @ p['w'] + p['b'] - yb) ** 2)\n"
            "                         / jnp.sum(mb))(p)\n"
            "            m = jax.tree.map(lambda m, g: 0.9 * m + g, m, g)\n"
            "            return (jax.tree.map(lambda p, m: p - lr * m, p, m), m), None\n"
            "        zeros = jax.tree.map(jnp.zeros_like, params)\n"
            "        return jax.lax.scan(body, (params, zeros), batches)[0][0]\n"
            "    return run(params, batches)\n",
        ],
        "wrong": [
            ("a new jitted lambda at every step: every step compiles",
             "def train(params, x, y, lrs, batch_size):\n"
             "    n, padded = x.shape[0], len(lrs) * batch_size\n"
             "    xp = np.zeros((padded, x.shape[1]), np.float32); xp[:n] = x\n"
             "    yp = np.zeros(padded, np.float32); yp[:n] = y\n"
             "    mask = (np.arange(padded) < n).astype(np.float32)\n"
             "    state = jax.tree.map(jnp.zeros_like, params)\n"
             "    def core(p, s, xb, yb, mb, lr):\n"
             "        g = jax.grad(lambda p: jnp.sum(mb * (xb @ p['w'] + p['b'] - yb) ** 2)\n"
             "                     / jnp.sum(mb))(p)\n"
             "        s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "        return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        step = jax.jit(lambda p, s, xb, yb, mb: core(p, s, xb, yb, mb, lr))\n"
             "        params, state = step(params, state, xp[r], yp[r], mask[r])\n"
             "    return params\n"),
            ("lr as a static argument: one program per learning rate",
             "def _core(p, s, xb, yb, mb, lr):\n"
             "    g = jax.grad(lambda p: jnp.sum(mb * (xb @ p['w'] + p['b'] - yb) ** 2)\n"
             "                 / jnp.sum(mb))(p)\n"
             "    s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "    return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "_step = jax.jit(_core, static_argnames='lr')\n"
             "def train(params, x, y, lrs, batch_size):\n"
             "    n, padded = x.shape[0], len(lrs) * batch_size\n"
             "    xp = np.zeros((padded, x.shape[1]), np.float32); xp[:n] = x\n"
             "    yp = np.zeros(padded, np.float32); yp[:n] = y\n"
             "    mask = (np.arange(padded) < n).astype(np.float32)\n"
             "    state = jax.tree.map(jnp.zeros_like, params)\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, state = _step(params, state, xp[r], yp[r], mask[r], lr=lr)\n"
             "    return params\n"),
            ("no padding: the short last batch is a new shape",
             "@jax.jit\n"
             "def _step(p, s, xb, yb, lr):\n"
             "    g = jax.grad(lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "    return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "def train(params, x, y, lrs, batch_size):\n"
             "    state = jax.tree.map(jnp.zeros_like, params)\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, state = _step(params, state, x[r], y[r], lr)\n"
             "    return params\n"),
            ("the state starts as None: its structure changes after the first step",
             "@jax.jit\n"
             "def _step(p, s, xb, yb, mb, lr):\n"
             "    g = jax.grad(lambda p: jnp.sum(mb * (xb @ p['w'] + p['b'] - yb) ** 2)\n"
             "                 / jnp.sum(mb))(p)\n"
             "    if s is None:\n"
             "        s = jax.tree.map(jnp.zeros_like, g)\n"
             "    s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "    return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "def train(params, x, y, lrs, batch_size):\n"
             "    n, padded = x.shape[0], len(lrs) * batch_size\n"
             "    xp = np.zeros((padded, x.shape[1]), np.float32); xp[:n] = x\n"
             "    yp = np.zeros(padded, np.float32); yp[:n] = y\n"
             "    mask = (np.arange(padded) < n).astype(np.float32)\n"
             "    state = None\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, state = _step(params, state, xp[r], yp[r], mask[r], lr)\n"
             "    return params\n"),
            ("pads, but averages over batch_size: the padded rows count",
             "@jax.jit\n"
             "def _step(p, s, xb, yb, lr):\n"
             "    g = jax.grad(lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "    return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "def train(params, x, y, lrs, batch_size):\n"
             "    n, padded = x.shape[0], len(lrs) * batch_size\n"
             "    xp = np.zeros((padded, x.shape[1]), np.float32); xp[:n] = x\n"
             "    yp = np.zeros(padded, np.float32); yp[:n] = y\n"
             "    state = jax.tree.map(jnp.zeros_like, params)\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, state = _step(params, state, xp[r], yp[r], lr)\n"
             "    return params\n"),
            ("lr closed over by a jit made before the loop: frozen at its first value",
             "def train(params, x, y, lrs, batch_size):\n"
             "    n, padded = x.shape[0], len(lrs) * batch_size\n"
             "    xp = np.zeros((padded, x.shape[1]), np.float32); xp[:n] = x\n"
             "    yp = np.zeros(padded, np.float32); yp[:n] = y\n"
             "    mask = (np.arange(padded) < n).astype(np.float32)\n"
             "    state = jax.tree.map(jnp.zeros_like, params)\n"
             "    lr = lrs[0]\n"
             "    def core(p, s, xb, yb, mb):\n"
             "        g = jax.grad(lambda p: jnp.sum(mb * (xb @ p['w'] + p['b'] - yb) ** 2)\n"
             "                     / jnp.sum(mb))(p)\n"
             "        s = jax.tree.map(lambda m, g: 0.9 * m + g, s, g)\n"
             "        return jax.tree.map(lambda p, m: p - lr * m, p, s), s\n"
             "    step = jax.jit(core)\n"
             "    for i in range(len(lrs)):\n"
             "        lr = lrs[i]\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, state = step(params, state, xp[r], yp[r], mask[r])\n"
             "    return params\n"),
            ("every step runs eagerly; only the state's initialisation is jitted",
             "@jax.jit\n"
             "def _init_state(params):\n"
             "    return jax.tree.map(jnp.zeros_like, params)\n\n"
             "def train(params, x, y, lrs, batch_size):\n"
             "    state = _init_state(params)\n"
             "    for i, lr in enumerate(lrs):\n"
             "        xb = x[i * batch_size:(i + 1) * batch_size]\n"
             "        yb = y[i * batch_size:(i + 1) * batch_size]\n"
             "        grads = jax.grad(lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(params)\n"
             "        state = jax.tree.map(lambda m, g: 0.9 * m + g, state, grads)\n"
             "        params = jax.tree.map(lambda p, m: p - lr * m, params, state)\n"
             "    return params\n"),
        ],
    },
    "09_debugging_quiet_train": {
        "correct": [
            # One explicit copy per batch and per learning rate, a jitted step, the losses
            # stacked on the device.
            "@jax.jit\n"
            "def _step(p, xb, yb, lr):\n"
            "    loss, g = jax.value_and_grad(\n"
            "        lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
            "    return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
            "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
            "    losses = []\n"
            "    for i, lr in enumerate(lrs):\n"
            "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
            "        xb, yb, lr_d = jax.device_put((x[r], y[r], np.float32(lr)))\n"
            "        params, loss = _step(params, xb, yb, lr_d)\n"
            "        losses.append(loss)\n"
            "    return params, jnp.stack(losses)\n",
            # A fori_loop over the whole data on the device, rows taken with dynamic_slice.
            "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
            "    steps = len(lrs)\n"
            "    @jax.jit\n"
            "    def run(p, xd, yd, lr_d):\n"
            "        def body(i, carry):\n"
            "            p, losses = carry\n"
            "            xb = jax.lax.dynamic_slice_in_dim(xd, i * batch_size, batch_size)\n"
            "            yb = jax.lax.dynamic_slice_in_dim(yd, i * batch_size, batch_size)\n"
            "            loss, g = jax.value_and_grad(\n"
            "                lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
            "            p = jax.tree.map(lambda v, d: v - lr_d[i] * d, p, g)\n"
            "            return p, losses.at[i].set(loss)\n"
            "        return jax.lax.fori_loop(0, steps, body, (p, jnp.zeros(steps, jnp.float32)))\n"
            "    return run(params, *jax.device_put((x, y, np.array(lrs, np.float32))))\n",
            # Reads each loss back with float() (a device-to-host sync: advice, not judged,
            # and on the CPU not a transfer at all), then copies the list explicitly.
            "step_q = jax.jit(lambda p, xb, yb, lr: (jax.tree.map(\n"
            "    lambda v, d: v - lr * d, p,\n"
            "    jax.grad(lambda q: jnp.mean((xb @ q['w'] + q['b'] - yb) ** 2))(p)),\n"
            "    jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2)))\n"
            "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
            "    logged = []\n"
            "    for i, lr in enumerate(lrs):\n"
            "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
            "        params, loss = step_q(params, *jax.device_put((x[r], y[r], np.float32(lr))))\n"
            "        logged.append(float(loss))\n"
            "    return params, jax.device_put(np.array(logged, np.float32))\n",
        ],
        "wrong": [
            ("logged_train's loop: NumPy batches and a Python float passed to the jitted step "
             "(implicit copies), the losses turned into an array with jnp.asarray",
             "@jax.jit\n"
             "def _step(p, xb, yb, lr):\n"
             "    loss, g = jax.value_and_grad(\n"
             "        lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    losses = []\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, loss = _step(params, x[r], y[r], lr)\n"
             "        losses.append(float(loss))\n"
             "    return params, jnp.asarray(losses, jnp.float32)\n"),
            ("copies the data with device_put, but passes each learning rate as a Python float",
             "@jax.jit\n"
             "def _step(p, xb, yb, lr):\n"
             "    loss, g = jax.value_and_grad(\n"
             "        lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    xd, yd = jax.device_put((x, y))\n"
             "    losses = []\n"
             "    for i, lr in enumerate(lrs):\n"
             "        xb = jax.device_put(x[i * batch_size:(i + 1) * batch_size])\n"
             "        yb = jax.device_put(y[i * batch_size:(i + 1) * batch_size])\n"
             "        params, loss = _step(params, xb, yb, lr)\n"
             "        losses.append(loss)\n"
             "    return params, jnp.stack(losses)\n"),
            ("copies everything once, then slices the device arrays eagerly: each slice's "
             "start and each lrs[i] is a Python int sent to the device",
             "@jax.jit\n"
             "def _step(p, xb, yb, lr):\n"
             "    loss, g = jax.value_and_grad(\n"
             "        lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    xd, yd, lr_d = jax.device_put((x, y, np.array(lrs, np.float32)))\n"
             "    losses = []\n"
             "    for i in range(len(lrs)):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, loss = _step(params, xd[r], yd[r], lr_d[i])\n"
             "        losses.append(loss)\n"
             "    return params, jnp.stack(losses)\n"),
            ("jnp.asarray instead of jax.device_put: an implicit copy of the data",
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    steps = len(lrs)\n"
             "    @jax.jit\n"
             "    def run(p, xs, ys, lr_d):\n"
             "        def body(p, b):\n"
             "            xb, yb, lr = b\n"
             "            loss, g = jax.value_and_grad(\n"
             "                lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "            return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "        return jax.lax.scan(body, p, (xs, ys, lr_d))\n"
             "    xs = jnp.asarray(x.reshape(steps, batch_size, -1))\n"
             "    ys = jnp.asarray(y.reshape(steps, batch_size))\n"
             "    return run(params, xs, ys, jnp.asarray(np.array(lrs, np.float32)))\n"),
            ("records each loss after its step's update, not before",
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    steps = len(lrs)\n"
             "    @jax.jit\n"
             "    def run(p, xs, ys, lr_d):\n"
             "        def body(p, b):\n"
             "            xb, yb, lr = b\n"
             "            loss = lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2)\n"
             "            p = jax.tree.map(lambda v, d: v - lr * d, p, jax.grad(loss)(p))\n"
             "            return p, loss(p)\n"
             "        return jax.lax.scan(body, p, (xs, ys, lr_d))\n"
             "    data = jax.device_put((x.reshape(steps, batch_size, -1),\n"
             "                           y.reshape(steps, batch_size), np.array(lrs, np.float32)))\n"
             "    return run(params, *data)\n"),
            ("returns the losses as a list of device scalars, not one array",
             "@jax.jit\n"
             "def _step(p, xb, yb, lr):\n"
             "    loss, g = jax.value_and_grad(\n"
             "        lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "    return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    losses = []\n"
             "    for i, lr in enumerate(lrs):\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, loss = _step(params, *jax.device_put((x[r], y[r], np.float32(lr))))\n"
             "        losses.append(loss)\n"
             "    return params, losses\n"),
            ("computes everything in NumPy on the host and copies the results: the right "
             "values, but no step runs in a jitted function",
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    w, b = np.asarray(params['w'], np.float32), np.float32(params['b'])\n"
             "    losses = []\n"
             "    for i, lr in enumerate(lrs):\n"
             "        xb = x[i * batch_size:(i + 1) * batch_size]\n"
             "        yb = y[i * batch_size:(i + 1) * batch_size]\n"
             "        r = xb @ w + b - yb\n"
             "        losses.append(np.mean(r ** 2))\n"
             "        w = w - np.float32(lr) * 2 * xb.T @ r / len(yb)\n"
             "        b = b - np.float32(lr) * 2 * r.sum() / len(yb)\n"
             "    return jax.device_put(({'w': w.astype(np.float32), 'b': np.float32(b)},\n"
             "                           np.array(losses, np.float32)))\n"),
            ("bakes each learning rate into a new jitted step: no transfer, but a trace "
             "per step",
             "def quiet_train(params, x, y, lrs):\n"
            "    batch_size = len(x) // len(lrs)\n"
             "    losses = []\n"
             "    for i, lr in enumerate(lrs):\n"
             "        def core(p, xb, yb):\n"
             "            loss, g = jax.value_and_grad(\n"
             "                lambda p: jnp.mean((xb @ p['w'] + p['b'] - yb) ** 2))(p)\n"
             "            return jax.tree.map(lambda v, d: v - lr * d, p, g), loss\n"
             "        r = slice(i * batch_size, (i + 1) * batch_size)\n"
             "        params, loss = jax.jit(core)(params, *jax.device_put((x[r], y[r])))\n"
             "        losses.append(loss)\n"
             "    return params, jnp.stack(losses)\n"),
        ],
    },
    "09_debugging_profile_training": {
        "correct": [
            "def profile_training(step, state, batches, log_dir):\n"
            "    jax.profiler.start_trace(log_dir, create_perfetto_trace=True)\n"
            "    try:\n"
            "        for i, batch in enumerate(batches):\n"
            "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
            "                state = step(state, batch)\n"
            "        state = jax.block_until_ready(state)\n"
            "    finally:\n"
            "        jax.profiler.stop_trace()\n"
            "    found = []\n"
            "    for root, _, files in os.walk(log_dir):\n"
            "        found += [os.path.join(root, f) for f in files if f == 'perfetto_trace.json.gz']\n"
            "    return state, sorted(found, key=os.path.getmtime)[-1]\n",
            # Warms up outside the trace: the run it makes is not recorded.
            "import pathlib\n"
            "def profile_training(step, state, batches, log_dir):\n"
            "    jax.block_until_ready(step(state, batches[0]))\n"
            "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
            "        for i, batch in enumerate(batches):\n"
            "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
            "                state = step(state, batch)\n"
            "        jax.block_until_ready(state)\n"
            "    path = max(pathlib.Path(log_dir).glob('plugins/profile/*/perfetto_trace.json.gz'),\n"
            "               key=lambda p: p.stat().st_mtime)\n"
            "    return state, str(path)\n",
            # A plain TraceAnnotation named "train" with step_num: the annotation the
            # check reads (the statement names StepTraceAnnotation as the one TensorBoard's
            # step view reads; the trace file cannot tell the two apart).
            "def profile_training(step, state, batches, log_dir):\n"
            "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
            "        for i, batch in enumerate(batches):\n"
            "            with jax.profiler.TraceAnnotation('train', step_num=i):\n"
            "                state = step(state, batch)\n"
            "        jax.block_until_ready(state)\n"
            "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*', 'perfetto_trace.json.gz'))\n"
            "    return state, max(paths, key=os.path.getmtime)\n",
        ],
        "wrong": [
            ("no step annotations",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for batch in batches:\n"
             "            state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, paths[0]\n"),
            ("returns the log folder, not the trace file",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    return state, log_dir\n"),
            ("a warm-up call inside the trace: one run too many",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        jax.block_until_ready(step(state, batches[0]))\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, paths[0]\n"),
            ("without create_perfetto_trace: returns another file of the folder",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*', '*.json.gz'))\n"
             "    return state, paths[0]\n"),
            ("step numbers start at 1",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i + 1):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, paths[0]\n"),
            ("the annotation is named 'step', not 'train'",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('step', step_num=i):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, paths[0]\n"),
            ("returns the first trace by name: in a folder with an older run, the old one",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
             "                state = step(state, batch)\n"
             "        jax.block_until_ready(state)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, sorted(paths)[0]\n"),
            ("never waits for the device: runs still queued when the trace ends are lost",
             "def profile_training(step, state, batches, log_dir):\n"
             "    with jax.profiler.trace(log_dir, create_perfetto_trace=True):\n"
             "        for i, batch in enumerate(batches):\n"
             "            with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
             "                state = step(state, batch)\n"
             "    paths = glob.glob(os.path.join(log_dir, 'plugins', 'profile', '*',\n"
             "                                   'perfetto_trace.json.gz'))\n"
             "    return state, paths[0]\n"),
        ],
    },
    "09_debugging_scoped_step": {
        "correct": [
            "def scoped_step(w, x, y, lr):\n"
            "    with jax.named_scope('grad'):\n"
            "        _, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
            "    with jax.named_scope('update'):\n"
            "        new_w = w - lr * g\n"
            "    return new_w\n",
            "def scoped_step(w, x, y, lr):\n"
            "    with jax.named_scope('grad'):\n"
            "        g = 2.0 / x.shape[0] * x.T @ (x @ w - y)\n"
            "    with jax.named_scope('update'):\n"
            "        return w - lr * g\n",
            "def scoped_step(w, x, y, lr):\n"
            "    with jax.named_scope('grad'):\n"
            "        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
            "    with jax.named_scope('update'):\n"
            "        updates = jax.tree.map(lambda d: -lr * d, g)  # optax's sign: added\n"
            "        return jax.tree.map(lambda p, u: p + u, w, updates)\n",
            # A jitted gradient, a reshape between the scopes, a jitted update.
            "def scoped_step(w, x, y, lr):\n"
            "    loss = lambda w: jnp.mean(jnp.square(x @ w - y))\n"
            "    with jax.named_scope('grad'):\n"
            "        g = jax.jit(jax.grad(loss))(w)\n"
            "    g = g.reshape(1, -1)\n"
            "    with jax.named_scope('update'):\n"
            "        return jax.jit(lambda w, g: w - lr * g[0])(w, g)\n",
            # The gradient as an (n, 1) column, squeezed by the update.
            "def scoped_step(w, x, y, lr):\n"
            "    with jax.named_scope('grad'):\n"
            "        g = 2.0 / x.shape[0] * x.T @ (x @ w[:, None] - y[:, None])\n"
            "    with jax.named_scope('update'):\n"
            "        return w - lr * g[:, 0]\n",
            # The gradient's sign flipped in its scope, the update adds.
            "def scoped_step(w, x, y, lr):\n"
            "    with jax.named_scope('grad'):\n"
            "        descent = -jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
            "    with jax.named_scope('update'):\n"
            "        return w + lr * descent\n",
        ],
        "wrong": [
            ("part of the gradient (its mean's 2/n) applied in the update scope",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('grad'):\n"
             "        g = jax.grad(lambda w: jnp.sum((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w - lr * (g * 2.0 / x.shape[0])\n"),
            ("the mean's division done in the update scope",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('grad'):\n"
             "        g = jax.grad(lambda w: 2.0 * jnp.sum((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w - lr * g / (2.0 * x.shape[0])\n"),
            ("the mean's 1/n folded into the learning rate, inside the update scope",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('grad'):\n"
             "        g = jax.grad(lambda w: jnp.sum((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w - (lr / x.shape[0]) * g\n"),
            ("the mean's 1/n folded into the learning rate inside the grad scope",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('grad'):\n"
             "        g = jax.grad(lambda w: jnp.sum((x @ w - y) ** 2))(w)\n"
             "        step = lr / x.shape[0]\n"
             "    with jax.named_scope('update'):\n"
             "        return w - step * g\n"),
            ("no named scopes",
             "def scoped_step(w, x, y, lr):\n"
             "    return w - lr * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"),
            ("only the update is labelled",
             "def scoped_step(w, x, y, lr):\n"
             "    g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w - lr * g\n"),
            ("the forward product is outside the 'grad' scope",
             "def scoped_step(w, x, y, lr):\n"
             "    r = x @ w - y\n"
             "    with jax.named_scope('grad'):\n"
             "        g = 2.0 / x.shape[0] * x.T @ r\n"
             "    with jax.named_scope('update'):\n"
             "        return w - lr * g\n"),
            ("the scope is named 'gradient', not 'grad'",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('gradient'):\n"
             "        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w - lr * g\n"),
            ("the update climbs: w + lr * grad",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('grad'):\n"
             "        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
             "    with jax.named_scope('update'):\n"
             "        return w + lr * g\n"),
            ("one scope around everything",
             "def scoped_step(w, x, y, lr):\n"
             "    with jax.named_scope('step'):\n"
             "        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)\n"
             "        return w - lr * g\n"),
        ],
    },
    "09_debugging_matmul_f32": {
        "correct": [
            "def matmul_f32(a, b):\n"
            "    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())),\n"
            "                               preferred_element_type=jnp.float32)\n",
            "def matmul_f32(a, b):\n"
            "    return jnp.einsum('ik,kj->ij', a, b, preferred_element_type=jnp.float32)\n",
        ],
        "wrong": [
            ("a 16-bit product cast afterwards: already rounded",
             "def matmul_f32(a, b):\n"
             "    return (a @ b).astype(jnp.float32)\n"),
            ("converts the inputs to float32 first",
             "def matmul_f32(a, b):\n"
             "    return a.astype(jnp.float32) @ b.astype(jnp.float32)\n"),
            ("a 16-bit result",
             "def matmul_f32(a, b):\n"
             "    return jnp.dot(a, b)\n"),
            ("preferred_element_type=a.dtype: accumulated in 16 bits",
             "def matmul_f32(a, b):\n"
             "    return jnp.dot(a, b, preferred_element_type=a.dtype).astype(jnp.float32)\n"),
            ("converts one input: promotion converts the other to float32 too",
             "def matmul_f32(a, b):\n"
             "    return a @ b.astype(jnp.float32)\n"),
            ("precision=HIGHEST does not change the result's dtype",
             "def matmul_f32(a, b):\n"
             "    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)\n"),
        ],
    },
    "09_debugging_mixed_precision_step": {
        "correct": [
            "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
            "    w = master['w'].astype(compute_dtype)\n"
            "    b = master['b'].astype(compute_dtype)\n"
            "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
            "    def loss(w, b):\n"
            "        return loss_scale * jnp.mean(jnp.square(xc @ w + b - yc))\n"
            "    gw, gb = jax.grad(loss, argnums=(0, 1))(w, b)\n"
            "    gw = gw.astype(jnp.float32) / loss_scale\n"
            "    gb = gb.astype(jnp.float32) / loss_scale\n"
            "    return {'w': master['w'] - lr * gw, 'b': master['b'] - lr * gb}\n",
            "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
            "    cast = lambda t, d: jax.tree.map(lambda v: jnp.asarray(v, d), t)\n"
            "    params, xc, yc = cast(master, compute_dtype), cast(x, compute_dtype), cast(y, compute_dtype)\n"
            "    _, grads = jax.value_and_grad(\n"
            "        lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(params)\n"
            "    grads = jax.tree.map(lambda g: g.astype(jnp.float32) * (1.0 / loss_scale), grads)\n"
            "    return jax.tree.map(lambda m, g: (m - lr * g).astype(jnp.float32), master, grads)\n",
        ],
        "wrong": [
            ("lr applied to the scaled gradients in compute_dtype, cast to float32 after: "
             "the update is rounded to bfloat16",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    params = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    def scaled_loss(p):\n"
             "        return jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale\n"
             "    grads = jax.grad(scaled_loss)(params)\n"
             "    return jax.tree.map(lambda m, g: m - (lr * g).astype(jnp.float32) / loss_scale,\n"
             "                        master, grads)\n"),
            ("ignores loss_scale: small float16 gradients underflow to zero",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2))(p)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g.astype(jnp.float32), master, g)\n"),
            ("updates the low-precision copy: small updates vanish",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(p)\n"
             "    return jax.tree.map(lambda q, g: (q - lr * (g / loss_scale)).astype(jnp.float32), p, g)\n"),
            ("computes in float32: compute_dtype is ignored",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    g = jax.grad(lambda p: jnp.mean((x @ p['w'] + p['b'] - y) ** 2))(master)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g, master, g)\n"),
            ("scales the gradients instead of the loss: the underflow already happened",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2))(p)\n"
             "    g = jax.tree.map(lambda g: (g * loss_scale).astype(jnp.float32) / loss_scale, g)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g, master, g)\n"),
            ("never divides by loss_scale",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(p)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g.astype(jnp.float32), master, g)\n"),
            ("returns the master weights in compute_dtype",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(p)\n"
             "    g = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, g)\n"
             "    return jax.tree.map(lambda m, g: (m - lr * g).astype(compute_dtype), master, g)\n"),
            ("divides by loss_scale in compute_dtype: the gradients underflow again",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    p = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    g = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(p)\n"
             "    g = jax.tree.map(lambda g: (g / loss_scale).astype(jnp.float32), g)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g, master, g)\n"),
            ("y left in float32: the loss is promoted to float32, y never cast as asked",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    params = jax.tree.map(lambda v: v.astype(compute_dtype), master)\n"
             "    xc = x.astype(compute_dtype)\n"
             "    grads = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - y) ** 2) * loss_scale)(params)\n"
             "    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, grads)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g, master, grads)\n"),
            ("the bias left in float32: only w is cast to compute_dtype",
             "def mixed_precision_step(master, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16):\n"
             "    params = {'w': master['w'].astype(compute_dtype), 'b': master['b']}\n"
             "    xc, yc = x.astype(compute_dtype), y.astype(compute_dtype)\n"
             "    grads = jax.grad(lambda p: jnp.mean((xc @ p['w'] + p['b'] - yc) ** 2) * loss_scale)(params)\n"
             "    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, grads)\n"
             "    return jax.tree.map(lambda m, g: m - lr * g, master, grads)\n"),
        ],
    },
}
