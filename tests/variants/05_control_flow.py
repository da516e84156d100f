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
            ("max by reduce_window from 0.0: a window of negative samples gives 0",
             "import functools\n"
             "import jax\n"
             "from jax import lax\n\n"
             "@functools.partial(jax.jit, static_argnames=('size', 'kind'))\n"
             "def pool1d(x, size, kind):\n"
             "    init, op = (0.0, lax.max) if kind == 'max' else (0.0, lax.add)\n"
             "    out = lax.reduce_window(x, init, op, (size,), (size,), 'VALID')\n"
             "    return out if kind == 'max' else out / size\n"),
            ("mean divides by the number of windows, not by the window size",
             "import functools\n"
             "import jax\n\n"
             "@functools.partial(jax.jit, static_argnames=('size', 'kind'))\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(-1, size)\n"
             "    if kind == 'max':\n"
             "        return windows.max(axis=1)\n"
             "    return windows.sum(axis=1) / windows.shape[0]\n"),
            ("squeezes the result: one window (size == n) gives a scalar, not shape (1,)",
             "import functools\n"
             "import jax\n\n"
             "@functools.partial(jax.jit, static_argnames=('size', 'kind'))\n"
             "def pool1d(x, size, kind):\n"
             "    windows = x.reshape(-1, size)\n"
             "    out = windows.max(axis=1) if kind == 'max' else windows.mean(axis=1)\n"
             "    return out.squeeze()\n"),
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
            ("kind % 3 wraps around instead of clamping: kind = -1 gives softplus, kind = 3 relu",
             "import jax\n"
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def activation(kind, x):\n"
             "    return lax.switch(kind % 3, [jax.nn.relu, jnp.tanh, jax.nn.softplus], x)\n"),
            ("softplus written as log(1 + exp(x)): overflows to inf for x above about 88",
             "import jax\n"
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def activation(kind, x):\n"
             "    return lax.switch(kind, [jax.nn.relu, jnp.tanh,\n"
             "                             lambda v: jnp.log(1.0 + jnp.exp(v))], x)\n"),
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
            ("the first step peeled out of the loop: n_steps = 0 still takes one step",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        w = s[1] - dt * (k * jnp.sin(s[0]) + damping * s[1])\n"
             "        return jnp.stack([s[0] + dt * w, w])\n"
             "    return lax.fori_loop(1, n_steps, step, step(0, state0))\n"),
            ("dt and damping hard-coded to their defaults",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        w = s[1] - 0.05 * (k * jnp.sin(s[0]) + 0.1 * s[1])\n"
             "        return jnp.stack([s[0] + 0.05 * w, w])\n"
             "    return lax.fori_loop(0, n_steps, step, state0)\n"),
            ("the damping term with the wrong sign: it pumps energy in",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        w = s[1] - dt * (k * jnp.sin(s[0]) - damping * s[1])\n"
             "        return jnp.stack([s[0] + dt * w, w])\n"
             "    return lax.fori_loop(0, n_steps, step, state0)\n"),
            ("returns the carry as a tuple (theta, omega), not an array of shape (2,)",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
             "    def step(i, s):\n"
             "        theta, omega = s\n"
             "        omega = omega - dt * (k * jnp.sin(theta) + damping * omega)\n"
             "        return theta + dt * omega, omega\n"
             "    return lax.fori_loop(0, n_steps, step, (state0[0], state0[1]))\n"),
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
            ("starts from x = a, not max(a, 1): for a just below 1 the start passes the test too early",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: (jnp.abs(c[0] * c[0] - a) > tol * a) & (c[1] < max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1)\n"
             "    return lax.while_loop(cond, body, (a, 0))\n"),
            ("starts from x = 1: for a just above 1 the start passes the test too early",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: (jnp.abs(c[0] * c[0] - a) > tol * a) & (c[1] < max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1)\n"
             "    return lax.while_loop(cond, body, (jnp.ones_like(a), 0))\n"),
            ("keeps going while the residual is >= tol * a: a residual of exactly 0 with tol = 0 never stops",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: ~(jnp.abs(c[0] * c[0] - a) < tol * a) & (c[1] < max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1)\n"
             "    return lax.while_loop(cond, body, (jnp.maximum(a, 1.0), 0))\n"),
            ("steps <= max_steps: one update past the cap",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: (jnp.abs(c[0] * c[0] - a) > tol * a) & (c[1] <= max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1)\n"
             "    return lax.while_loop(cond, body, (jnp.maximum(a, 1.0), 0))\n"),
            ("counts the steps as a float (0.0 + 1): steps must be an integer",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
             "    cond = lambda c: (jnp.abs(c[0] * c[0] - a) > tol * a) & (c[1] < max_steps)\n"
             "    body = lambda c: ((c[0] + a / c[0]) / 2, c[1] + 1.0)\n"
             "    return lax.while_loop(cond, body, (jnp.maximum(a, 1.0), 0.0))\n"),
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
            ("ignores h0: starts from a zero state",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        h = jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b'])\n"
             "        return h, h\n"
             "    return lax.scan(step, jnp.zeros_like(h0), xs)[1]\n"),
            ("W_h applied from the left (W_h @ h): the transpose of the recurrence",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        h = jnp.tanh(x @ params['W_x'] + params['W_h'] @ h + params['b'])\n"
             "        return h, h\n"
             "    return lax.scan(step, h0, xs)[1]\n"),
            ("squeezes the stacked states: a sequence of one step gives shape (H,), not (1, H)",
             "import jax.numpy as jnp\n"
             "from jax import lax\n\n"
             "def rnn_states(params, h0, xs):\n"
             "    def step(h, x):\n"
             "        h = jnp.tanh(x @ params['W_x'] + h @ params['W_h'] + params['b'])\n"
             "        return h, h\n"
             "    return jnp.squeeze(lax.scan(step, h0, xs)[1])\n"),
        ],
    },
    "05_control_flow_fixed_point": {
        "correct": [
            '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    """lax.cond inside the scan: only an active step calls f."""
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) > tol
        x = lax.cond(jnp.all(active), lambda: new, lambda: jnp.where(active, new, x))
        return (x, steps + active.astype(jnp.int32)), None
    x0 = jnp.asarray(x0)
    (x, steps), _ = lax.scan(step, (x0, jnp.zeros(jnp.shape(x0), jnp.int32)), None,
                             length=max_steps)
    return x, steps
''',
            '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    """fori_loop with Python bounds (a scan), carrying a done flag."""
    def body(i, carry):
        x, steps, done = carry
        new = f(a, x)
        done = done | (jnp.abs(new - x) <= tol)
        return jnp.where(done, x, new), steps + (~done).astype(jnp.int32), done
    x0 = jnp.asarray(x0)
    x, steps, _ = lax.fori_loop(0, max_steps, body,
                                (x0, jnp.zeros(x0.shape, jnp.int32), jnp.zeros(x0.shape, bool)))
    return x, steps
''',
        ],
        "wrong": [
            ('lax.while_loop: the right values, but jax.grad cannot run it backwards',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def not_done(c):
        return (jnp.abs(f(a, c[0]) - c[0]) > tol) & (c[1] < max_steps)
    return lax.while_loop(not_done, lambda c: (f(a, c[0]), c[1] + 1),
                          (jnp.asarray(x0), jnp.int32(0)))
'''),
            ('no mask: always max_steps updates, and steps counts them all',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        return (f(a, x), steps + 1), None
    (x, steps), _ = lax.scan(step, (jnp.asarray(x0), jnp.int32(0)), None, length=max_steps)
    return x, steps
'''),
            ('a Python loop with the mask: unrolled into max_steps copies of f',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    x, steps = jnp.asarray(x0), jnp.int32(0)
    for _ in range(max_steps):
        new = f(a, x)
        active = jnp.abs(new - x) > tol
        x, steps = jnp.where(active, new, x), steps + active.astype(jnp.int32)
    return x, steps
'''),
            ('the mask blocks the gradient: stop_gradient on the update',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) > tol
        return (jnp.where(active, lax.stop_gradient(new), x),
                steps + active.astype(jnp.int32)), None
    (x, steps), _ = lax.scan(step, (jnp.asarray(x0), jnp.int32(0)), None, length=max_steps)
    return x, steps
'''),
            ('tol and max_steps hard-coded to their defaults',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) > 1e-6
        return (jnp.where(active, new, x), steps + active.astype(jnp.int32)), None
    x0 = jnp.asarray(x0)
    (x, steps), _ = lax.scan(step, (x0, jnp.zeros(x0.shape, jnp.int32)), None, length=100)
    return x, steps
'''),
            ('tests convergence after the update: makes the small update too, one step too many',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps, done = carry
        new = f(a, x)
        x_next = jnp.where(done, x, new)
        steps = steps + (~done).astype(jnp.int32)
        done = done | (jnp.abs(new - x) <= tol)
        return (x_next, steps, done), None
    x0 = jnp.asarray(x0)
    (x, steps, _), _ = lax.scan(step, (x0, jnp.int32(0), jnp.zeros((), bool)), None,
                                length=max_steps)
    return x, steps
'''),
            ('starts from 0 instead of x0',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) > tol
        return (jnp.where(active, new, x), steps + active.astype(jnp.int32)), None
    (x, steps), _ = lax.scan(step, (jnp.zeros_like(jnp.asarray(x0)), jnp.int32(0)), None,
                             length=max_steps)
    return x, steps
'''),
            ('updates while |f(a, x) - x| >= tol: a change of exactly tol is not converged',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) >= tol
        return (jnp.where(active, new, x), steps + active.astype(jnp.int32)), None
    x0 = jnp.asarray(x0)
    (x, steps), _ = lax.scan(step, (x0, jnp.zeros(x0.shape, jnp.int32)), None, length=max_steps)
    return x, steps
'''),
            ('the starting point behind stop_gradient: right values, and d x / d x0 is zero',
             '''def fixed_point(f, a, x0, tol=1e-6, max_steps=100):
    def step(carry, _):
        x, steps = carry
        new = f(a, x)
        active = jnp.abs(new - x) > tol
        return (jnp.where(active, new, x), steps + active.astype(jnp.int32)), None
    x0 = lax.stop_gradient(jnp.asarray(x0))
    (x, steps), _ = lax.scan(step, (x0, jnp.zeros(x0.shape, jnp.int32)), None, length=max_steps)
    return x, steps
'''),
        ],
    },
    "05_control_flow_map_in_chunks": {
        "correct": [
            '''def map_in_chunks(f, xs, chunk):
    """Full chunks through lax.map of vmap(f), the remainder through vmap(f)."""
    n = xs.shape[0]
    full = n - n % chunk
    head = xs[:full].reshape(full // chunk, chunk, *xs.shape[1:])
    out = lax.map(jax.vmap(f), head)
    out = out.reshape(full, *out.shape[2:])
    if full == n:
        return out
    return jnp.concatenate([out, jax.vmap(f)(xs[full:])])
''',
            '''def map_in_chunks(f, xs, chunk):
    """Pads the batch to whole chunks, scans over them, and cuts the padding off."""
    n = xs.shape[0]
    steps = -(-n // chunk)
    padded = jnp.concatenate([xs, jnp.zeros((steps * chunk - n, *xs.shape[1:]), xs.dtype)])
    blocks = padded.reshape(steps, chunk, *xs.shape[1:])
    _, out = lax.scan(lambda c, block: (c, jax.vmap(f)(block)), None, blocks)
    return out.reshape(steps * chunk, *out.shape[2:])[:n]
''',
            '''def map_in_chunks(f, xs, chunk):
    """Scans over the chunk numbers; each step slices its rows out of xs."""
    k = xs.shape[0] // chunk
    step = lambda c, i: (c, jax.vmap(f)(lax.dynamic_slice_in_dim(xs, i * chunk, chunk)))
    parts = []
    if k:
        ys = lax.scan(step, None, jnp.arange(k))[1]
        parts.append(ys.reshape((k * chunk,) + ys.shape[2:]))
    if xs.shape[0] % chunk:
        parts.append(jax.vmap(f)(xs[k * chunk:]))
    return jnp.concatenate(parts)
''',
        ],
        "wrong": [
            ('vmap over the whole batch: the right values, but every intermediate for all n rows at once',
             '''def map_in_chunks(f, xs, chunk):
    return jax.vmap(f)(xs)
'''),
            ('lax.map without batch_size: one row per step',
             '''def map_in_chunks(f, xs, chunk):
    return lax.map(f, xs)
'''),
            ('a fixed chunk of 32 rows: the chunk argument is ignored',
             '''def map_in_chunks(f, xs, chunk):
    return lax.map(f, xs, batch_size=32)
'''),
            ('a Python loop over the chunks: unrolled, one copy of f per chunk',
             '''def map_in_chunks(f, xs, chunk):
    parts = [jax.vmap(f)(xs[i:i + chunk]) for i in range(0, xs.shape[0], chunk)]
    return jnp.concatenate(parts)
'''),
            ('drops the last n % chunk rows',
             '''def map_in_chunks(f, xs, chunk):
    n = xs.shape[0] // chunk * chunk
    out = lax.map(jax.vmap(f), xs[:n].reshape(-1, chunk, *xs.shape[1:]))
    return out.reshape(n, *out.shape[2:])
'''),
            ('chunk read as the number of chunks',
             '''def map_in_chunks(f, xs, chunk):
    return lax.map(f, xs, batch_size=max(1, xs.shape[0] // chunk))
'''),
            ('reshape into chunks without handling a remainder: fails when chunk does not divide n',
             '''def map_in_chunks(f, xs, chunk):
    out = lax.map(jax.vmap(f), xs.reshape(-1, chunk, *xs.shape[1:]))
    return out.reshape(xs.shape[0], *out.shape[2:])
'''),
            ('a chunked scan whose results are thrown away: vmap over the whole batch is returned',
             '''def map_in_chunks(f, xs, chunk):
    k = xs.shape[0] // chunk
    lax.scan(lambda c, b: (c, jax.vmap(f)(b)), None, xs[:k * chunk].reshape(k, chunk, *xs.shape[1:]))
    return jax.vmap(f)(xs)
'''),
            ('the rows of each chunk mapped one at a time (lax.map inside): f not batched in the chunk',
             '''def map_in_chunks(f, xs, chunk):
    k = xs.shape[0] // chunk
    out = lax.map(lambda b: lax.map(f, b), xs[:k * chunk].reshape(k, chunk, *xs.shape[1:]))
    return jnp.concatenate([out.reshape(k * chunk, *out.shape[2:]), jax.vmap(f)(xs[k * chunk:])])
'''),
        ],
    },
}


# Structure that does not carry the work (issue 36): the right values and the required
# construct, but the work lies elsewhere, often under other op names. Each got full
# marks before the checks judged where the work lies.
_DEAD_STRUCTURE = [
    ('05_control_flow_activation',
     'every activation computed before a lax.switch that only picks one: the right values,'
     ' every branch still runs',
     "import jax\n"
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def activation(kind, x):\n"
     "    # Every activation computed, and a switch that only picks one of the results.\n"
     "    k = jnp.clip(kind, 0, 2)\n"
     "    every = jnp.stack([jax.nn.relu(x), jnp.tanh(x), jax.nn.softplus(x)])\n"
     "    return lax.switch(k, [lambda v: v[0], lambda v: v[1], lambda v: v[2]], every)\n"),
    ('05_control_flow_simulate_pendulum',
     'the steps written out in Python with sin as a shifted cosine, beside a fori_loop '
     'that does nothing: the program grows with n_steps',
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def simulate_pendulum(state0, k, n_steps, dt=0.05, damping=0.1):\n"
     "    # The steps written out in Python, sin written as a shifted cosine, and a loop\n"
     "    # that does nothing but exist.\n"
     "    theta, omega = state0[0], state0[1]\n"
     "    for _ in range(n_steps):\n"
     "        omega = omega - dt * (k * jnp.cos(theta - jnp.pi / 2) + damping * omega)\n"
     "        theta = theta + dt * omega\n"
     "    return lax.fori_loop(0, 2, lambda i, s: s * 1.0, jnp.stack([theta, omega]))\n"),
    ('05_control_flow_newton_sqrt',
     'fixed masked Newton steps written out in Python, beside a while_loop that does '
     'nothing: the right values, the work outside the loop',
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
     "    # Fixed masked steps written out, and a while_loop beside them that does nothing.\n"
     "    x, steps = jnp.maximum(a, 1.0), 0\n"
     "    for _ in range(60):\n"
     "        go = (jnp.abs(x * x - a) > tol * a) & (steps < max_steps)\n"
     "        x = jnp.where(go, (x + a / x) / 2, x)\n"
     "        steps = steps + go.astype(jnp.int32)\n"
     "    x = lax.while_loop(lambda c: c < 0, lambda c: c + 1.0, x)\n"
     "    return x, steps\n"),
    ('05_control_flow_rnn_states',
     'the steps unrolled with tanh as a scaled logistic, then a scan that only copies: the'
     ' program grows with the sequence',
     "import jax\n"
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def rnn_states(params, h0, xs):\n"
     "    # tanh as a scaled logistic, the steps unrolled; a scan that only copies.\n"
     "    h, out = h0, []\n"
     "    for t in range(xs.shape[0]):\n"
     '        h = 2 * jax.nn.sigmoid(2 * (xs[t] @ params["W_x"] + h @ params["W_h"] + params["b"])) - 1\n'
     "        out.append(h)\n"
     "    return lax.scan(lambda c, x: (c + 1.0, x * 1.0), 0.0, jnp.stack(out))[1]\n"),
    ('05_control_flow_fixed_point',
     'the masked steps unrolled in Python, beside a two-step scan that carries nothing: '
     'the work outside the loop',
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def fixed_point(f, a, x0, tol=1e-6, max_steps=100):\n"
     "    # The masked steps unrolled in Python; a scan of the right kind that carries nothing.\n"
     "    x = jnp.asarray(x0)\n"
     "    steps = jnp.zeros(x.shape, jnp.int32)\n"
     "    for _ in range(max_steps):\n"
     "        new = f(a, x)\n"
     "        active = jnp.abs(new - x) > tol\n"
     "        x, steps = jnp.where(active, new, x), steps + active.astype(jnp.int32)\n"
     "    x, _ = lax.scan(lambda c, _: (c * 1.0, None), x, None, length=2)\n"
     "    return x, steps\n"),
]
# Padding (issue 36): the same dead structure, but the loop body (the branches) is
# padded with more operations than the work outside, whose results change nothing (multiplied by zero,
# selected away): the counts alone passed it; the judge's perturbation runs do not.
_DEAD_STRUCTURE += [
    ('05_control_flow_newton_sqrt',
     'fixed masked Newton steps written out in Python, beside a while_loop padded with '
     'work multiplied by zero: more operations inside the loop than outside, none of '
     'them changing the result',
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def newton_sqrt(a, tol=1e-6, max_steps=50):\n"
     "    x, steps = jnp.maximum(a, 1.0), 0\n"
     "    for _ in range(60):\n"
     "        go = (jnp.abs(x * x - a) > tol * a) & (steps < max_steps)\n"
     "        x = jnp.where(go, (x + a / x) / 2, x)\n"
     "        steps = steps + go.astype(jnp.int32)\n"
     "\n"
     "    def pad(c):\n"
     "        j = c\n"
     "        for _ in range(200):\n"
     "            j = jnp.cos(j) * 1.5 + jnp.exp(-j * j)\n"
     "        return c + j * 0.0\n"
     "\n"
     "    x = lax.while_loop(lambda c: c[1] < 1, lambda c: (pad(c[0]), c[1] + 1), (x, 0))[0]\n"
     "    return x, steps\n"),
    ('05_control_flow_fixed_point',
     'the masked steps unrolled in Python, beside a two-step scan whose body selects its '
     'padding away: more operations inside the scan than outside, none of them changing '
     'the result',
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def fixed_point(f, a, x0, tol=1e-6, max_steps=100):\n"
     "    x = jnp.asarray(x0)\n"
     "    steps = jnp.zeros(x.shape, jnp.int32)\n"
     "    for _ in range(max_steps):\n"
     "        new = f(a, x)\n"
     "        active = jnp.abs(new - x) > tol\n"
     "        x, steps = jnp.where(active, new, x), steps + active.astype(jnp.int32)\n"
     "\n"
     "    def body(c, i):\n"
     "        j = c\n"
     "        for _ in range(400):\n"
     "            j = jnp.cos(j) * 1.5 + jnp.exp(-j * j)\n"
     "        return jnp.where(i > 1000, j, c), None\n"
     "\n"
     "    x, _ = lax.scan(body, x, jnp.arange(2))\n"
     "    return x, steps\n"),
    ('05_control_flow_activation',
     'every activation computed and selected outside, beside a lax.switch whose branches '
     'hold padding multiplied by zero: more operations inside the branches than outside, '
     'none of them changing the result, whichever branch runs',
     "import jax\n"
     "import jax.numpy as jnp\n"
     "from jax import lax\n"
     "\n"
     "def activation(kind, x):\n"
     "    k = jnp.clip(kind, 0, 2)\n"
     "    real = jnp.select([k == 0, k == 1], [jax.nn.relu(x), jnp.tanh(x)], jax.nn.softplus(x))\n"
     "\n"
     "    def pad(shift):\n"
     "        def branch(v):\n"
     "            j = v + shift\n"
     "            for _ in range(60):\n"
     "                j = jnp.cos(j) * 1.5 + jnp.exp(-j * j)\n"
     "            return j * 0.0\n"
     "        return branch\n"
     "\n"
     "    return real + lax.switch(kind, [pad(0.0), pad(1.0), pad(2.0)], x)\n"),
]
for _gid, _why, _code in _DEAD_STRUCTURE:
    VARIANTS[_gid]["wrong"].append((_why, _code))
