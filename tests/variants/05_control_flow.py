"""Alternative correct answers and realistic wrong answers for 05_control_flow, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise. The first two of
each list are the ones the notebook harness grades; keep the most typical first.
"""

VARIANTS = {
    "05_control_flow_pool1d": {
        "correct": [
            "import functools\n"
            "import jax\n"
            "import jax.numpy as jnp\n\n"
            "@functools.partial(jax.jit, static_argnums=(1, 2))\n"
            "def pool1d(x, size, kind):\n"
            "    windows = jnp.reshape(x, (x.shape[0] // size, size))\n"
            "    reduce = jnp.max if kind == 'max' else jnp.mean\n"
            "    return reduce(windows, axis=1)\n",
            "import functools\n"
            "import jax\n"
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "@functools.partial(jax.jit, static_argnames=['size', 'kind'])\n"
            "def pool1d(x, size, kind):\n"
            "    if kind == 'max':\n"
            "        return lax.reduce_window(x, -jnp.inf, lax.max, (size,), (size,), 'VALID')\n"
            "    total = lax.reduce_window(x, 0.0, lax.add, (size,), (size,), 'VALID')\n"
            "    return total / size\n",
        ],
        "wrong": [
            ("jitted without static arguments: the string kind and the shape-setting size are traced",
             "import jax\n"
             "import jax.numpy as jnp\n\n"
             "@jax.jit\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(-1, size)\n"
             "    if kind == 'max':\n"
             "        return windows.max(axis=1)\n"
             "    return windows.mean(axis=1)\n"),
            ("right values but never jitted: a plain Python function",
             "import jax.numpy as jnp\n\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(-1, size)\n"
             "    if kind == 'max':\n"
             "        return windows.max(axis=1)\n"
             "    return windows.mean(axis=1)\n"),
            ("only kind static: size is traced and cannot set a shape",
             "import functools\n"
             "import jax\n\n"
             "@functools.partial(jax.jit, static_argnames='kind')\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(-1, size)\n"
             "    if kind == 'max':\n"
             "        return windows.max(axis=1)\n"
             "    return windows.mean(axis=1)\n"),
            ("windows taken with a stride (every size-th sample) instead of consecutive samples",
             "import functools\n"
             "import jax\n\n"
             "@functools.partial(jax.jit, static_argnames=('size', 'kind'))\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(size, -1).T\n"
             "    if kind == 'max':\n"
             "        return windows.max(axis=1)\n"
             "    return windows.mean(axis=1)\n"),
        ],
    },
    "05_control_flow_huber": {
        "correct": [
            "import jax.numpy as jnp\n\n"
            "def huber(r, delta):\n"
            "    quadratic = jnp.minimum(jnp.abs(r), delta)\n"
            "    return 0.5 * quadratic ** 2 + delta * (jnp.abs(r) - quadratic)\n",
            "import jax.numpy as jnp\n\n"
            "def huber(r, delta):\n"
            "    small = jnp.abs(r) <= delta\n"
            "    return jnp.select([small], [0.5 * jnp.square(r)],\n"
            "                      delta * jnp.abs(r) - 0.5 * delta ** 2)\n",
        ],
        "wrong": [
            ("a Python if on the traced residuals: fails under jit",
             "import jax.numpy as jnp\n\n"
             "def huber(r, delta):\n"
             "    if jnp.abs(r) <= delta:\n"
             "        return 0.5 * r ** 2\n"
             "    return delta * (jnp.abs(r) - 0.5 * delta)\n"),
            ("condition without abs: large negative residuals get the quadratic branch",
             "import jax.numpy as jnp\n\n"
             "def huber(r, delta):\n"
             "    return jnp.where(r <= delta, 0.5 * r ** 2, delta * (jnp.abs(r) - 0.5 * delta))\n"),
            ("linear branch without the -delta/2 offset: the loss jumps at |r| = delta",
             "import jax.numpy as jnp\n\n"
             "def huber(r, delta):\n"
             "    return jnp.where(jnp.abs(r) <= delta, 0.5 * r ** 2, delta * jnp.abs(r))\n"),
            ("a list comprehension with float(): needs concrete values, fails under jit",
             "import jax.numpy as jnp\n\n"
             "def huber(r, delta):\n"
             "    d = float(delta)\n"
             "    vals = [0.5 * v ** 2 if abs(v) <= d else d * (abs(v) - 0.5 * d)\n"
             "            for v in r.ravel().tolist()]\n"
             "    return jnp.array(vals).reshape(r.shape)\n"),
        ],
    },
    "05_control_flow_activation": {
        "correct": [
            "import jax\n"
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def activation(kind, x):\n"
            "    branches = [lambda v: jnp.maximum(v, 0.0), jnp.tanh,\n"
            "                lambda v: jnp.logaddexp(v, 0.0)]\n"
            "    return lax.switch(jnp.clip(kind, 0, 2), branches, x)\n",
            "import jax\n"
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def activation(kind, x):\n"
            "    k = jnp.clip(kind, 0, 2)\n"
            "    return lax.cond(k == 0, jax.nn.relu,\n"
            "                    lambda v: lax.cond(k == 1, jnp.tanh, jax.nn.softplus, v), x)\n",
        ],
        "wrong": [
            ("a Python if chain on the traced kind: fails under jit",
             "import jax\n"
             "import jax.numpy as jnp\n\n"
             "def activation(kind, x):\n"
             "    if kind <= 0:\n"
             "        return jax.nn.relu(x)\n"
             "    if kind == 1:\n"
             "        return jnp.tanh(x)\n"
             "    return jax.nn.softplus(x)\n"),
            ("jnp.select computes every activation: right values, but no cond",
             "import jax\n"
             "import jax.numpy as jnp\n\n"
             "def activation(kind, x):\n"
             "    return jnp.select([kind <= 0, kind == 1],\n"
             "                      [jax.nn.relu(x), jnp.tanh(x)], jax.nn.softplus(x))\n"),
            ("nested lax.cond without clamping: a negative kind gives softplus, not relu",
             "import jax\n"
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def activation(kind, x):\n"
             "    return lax.cond(kind == 0, jax.nn.relu,\n"
             "                    lambda v: lax.cond(kind == 1, jnp.tanh, jax.nn.softplus, v), x)\n"),
            ("branches in the wrong order",
             "import jax\n"
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def activation(kind, x):\n"
             "    return lax.switch(kind, [jnp.tanh, jax.nn.relu, jax.nn.softplus], x)\n"),
        ],
    },
    "05_control_flow_simulate_pendulum": {
        "correct": [
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
            "    def step(carry, _):\n"
            "        theta, omega = carry\n"
            "        omega = omega - dt * (k * jnp.sin(theta) + damping * omega)\n"
            "        return (theta + dt * omega, omega), None\n"
            "    (theta, omega), _ = lax.scan(step, (state0[0], state0[1]), None, length=n_steps)\n"
            "    return jnp.stack([theta, omega])\n",
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
            "    def step(i, s):\n"
            "        s = s.at[1].add(-dt * (k * jnp.sin(s[0]) + damping * s[1]))\n"
            "        return s.at[0].add(dt * s[1])\n"
            "    return lax.fori_loop(0, n_steps, step, jnp.asarray(state0))\n",
        ],
        "wrong": [
            ("a Python for loop: right values, but unrolled into n_steps copies of the step",
             "import jax.numpy as jnp\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    theta, omega = state0[0], state0[1]\n"
             "    for _ in range(n_steps):\n"
             "        omega = omega - dt * (k * jnp.sin(theta) + damping * omega)\n"
             "        theta = theta + dt * omega\n"
             "    return jnp.stack([theta, omega])\n"),
            ("lax.while_loop with a step counter: right values, but jax.grad cannot go through it",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def body(carry):\n"
             "        i, s = carry\n"
             "        w = s[1] - dt * (k * jnp.sin(s[0]) + damping * s[1])\n"
             "        return i + 1, jnp.stack([s[0] + dt * w, w])\n"
             "    return lax.while_loop(lambda c: c[0] < n_steps, body, (0, state0))[1]\n"),
            ("explicit Euler: theta moves with the old omega",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        w = s[1] - dt * (k * jnp.sin(s[0]) + damping * s[1])\n"
             "        return jnp.stack([s[0] + dt * s[1], w])\n"
             "    return lax.fori_loop(0, n_steps, step, state0)\n"),
            ("one step short: fori_loop(1, n_steps, ...)",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        w = s[1] - dt * (k * jnp.sin(s[0]) + damping * s[1])\n"
             "        return jnp.stack([s[0] + dt * w, w])\n"
             "    return lax.fori_loop(1, n_steps, step, state0)\n"),
        ],
    },
    "05_control_flow_newton_sqrt": {
        "correct": [
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
            "    def cond(c):\n"
            "        return jnp.logical_and(jnp.abs(c['x'] ** 2 - a) > tol * a, c['n'] < max_steps)\n"
            "    def body(c):\n"
            "        return {'x': 0.5 * (c['x'] + a / c['x']), 'n': c['n'] + 1}\n"
            "    out = lax.while_loop(cond, body, {'x': jnp.where(a > 1.0, a, 1.0), 'n': jnp.int32(0)})\n"
            "    return out['x'], out['n']\n",
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
            "    def body(c):\n"
            "        x, n, _ = c\n"
            "        x = (x + a / x) / 2\n"
            "        return x, n + 1, jnp.abs(x * x - a)\n"
            "    x0 = jnp.maximum(a, 1.0)\n"
            "    x, n, _ = lax.while_loop(lambda c: (c[2] > tol * a) & (c[1] < max_steps), body,\n"
            "                             (x0, 0, jnp.abs(x0 * x0 - a)))\n"
            "    return x, n\n",
        ],
        "wrong": [
            ("a Python while loop on the traced residual: fails under jit",
             "import jax.numpy as jnp\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    x, steps = jnp.maximum(a, 1.0), 0\n"
             "    while jnp.abs(x * x - a) > tol * a and steps < max_steps:\n"
             "        x, steps = (x + a / x) / 2, steps + 1\n"
             "    return x, steps\n"),
            ("a fixed 20 iterations with fori_loop: does not stop when converged",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    x = lax.fori_loop(0, 20, lambda i, x: (x + a / x) / 2, jnp.maximum(a, 1.0))\n"
             "    return x, 20\n"),
            ("absolute instead of relative tolerance: never converges for large a in float32",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: (jnp.abs(c[0] * c[0] - a) > tol) & (c[1] < max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1)\n"
             "    return lax.while_loop(cond, body, (jnp.maximum(a, 1.0), 0))\n"),
        ],
    },
    "05_control_flow_rnn_states": {
        "correct": [
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def rnn_states(params, h0, xs):\n"
            "    inputs = xs @ params['W_x'] + params['b']   # all input projections at once\n"
            "    def step(h, u):\n"
            "        h = jnp.tanh(u + h @ params['W_h'])\n"
            "        return h, h\n"
            "    return lax.scan(step, h0, inputs)[1]\n",
            "import jax.numpy as jnp\n"
            "from jax import lax\n\n"
            "def rnn_states(params, h0, xs):\n"
            "    T = xs.shape[0]\n"
            "    def body(t, carry):\n"
            "        h, hs = carry\n"
            "        h = jnp.tanh(jnp.dot(xs[t], params['W_x']) + jnp.dot(h, params['W_h']) + params['b'])\n"
            "        return h, hs.at[t].set(h)\n"
            "    _, hs = lax.fori_loop(0, T, body, (h0, jnp.zeros((T,) + h0.shape, h0.dtype)))\n"
            "    return hs\n",
        ],
        "wrong": [
            ("a Python loop and jnp.stack: right values, but unrolled into T copies of the step",
             "import jax.numpy as jnp\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    h, hs = h0, []\n"
             "    for x in xs:\n"
             "        h = jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b'])\n"
             "        hs.append(h)\n"
             "    return jnp.stack(hs)\n"),
            ("emits the state before the update: returns h_0..h_{T-1}",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        return jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b']), h\n"
             "    return lax.scan(step, h0, xs)[1]\n"),
            ("returns only the final state",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        h = jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b'])\n"
             "        return h, h\n"
             "    return lax.scan(step, h0, xs)[0]\n"),
            ("scan with unroll=True: one loop in the jaxpr, but T copies in the compiled program",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        h = jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b'])\n"
             "        return h, h\n"
             "    return lax.scan(step, h0, xs, unroll=True)[1]\n"),
        ],
    },
}
