"""Alternative correct answers and realistic wrong answers for 01_grad, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise.
"""

VARIANTS = {
    "01_grad_scatter_add": {
        "correct": [
            "def scatter_add(x, idx, vals):\n    return x + jnp.zeros_like(x).at[idx].add(vals)\n",
            "def scatter_add(x, idx, vals):\n"
            "    onehot = jax.nn.one_hot(idx, x.shape[0], dtype=x.dtype)\n"
            "    return x + vals @ onehot\n",
            "def scatter_add(x, idx, vals):\n"
            "    return x + jnp.bincount(idx, weights=vals, length=x.shape[0])\n",
        ],
        "wrong": [
            ("set instead of add: repeated indices keep one value",
             "def scatter_add(x, idx, vals):\n    return x.at[idx].set(x[idx] + vals)\n"),
            ("in-place NumPy style assignment fails on a JAX array",
             "def scatter_add(x, idx, vals):\n    x[idx] += vals\n    return x\n"),
            ("bincount without length: the result is only as long as the largest index + 1",
             "def scatter_add(x, idx, vals):\n    return x + jnp.bincount(idx, weights=vals)\n"),
            ("forgets x: starts from zeros (the visible test starts from zeros too)",
             "def scatter_add(x, idx, vals):\n    return jnp.zeros_like(x).at[idx].add(vals)\n"),
            ("one-hot sized by the largest index: wrong when the last slot gets no update",
             "def scatter_add(x, idx, vals):\n"
             "    return x + vals @ jax.nn.one_hot(idx, int(idx.max()) + 1, dtype=x.dtype)\n"),
            ("stacks one update per index: breaks when there is no index (k = 0)",
             "def scatter_add(x, idx, vals):\n"
             "    return x + jnp.sum(jnp.stack([jnp.zeros_like(x).at[i].add(v)\n"
             "                                  for i, v in zip(idx, vals)]), axis=0)\n"),
        ],
    },
    "01_grad_mse_grad": {
        "correct": [
            "def mse_grad(w, x, y):\n    return 2.0 / x.shape[0] * x.T @ (x @ w - y)\n",
            # Honest code that makes JAX warn (float64 is off): the warning costs no points.
            "def mse_grad(w, x, y):\n"
            "    w = jnp.asarray(w, dtype=jnp.float64)\n"
            "    return jax.value_and_grad(mse_loss)(w, x, y)[1]\n",
        ],
        "wrong": [
            ("gradient with respect to x instead of w (wrong argnums)",
             "def mse_grad(w, x, y):\n    return jax.grad(mse_loss, argnums=1)(w, x, y)\n"),
            ("closed form without the factor 2",
             "def mse_grad(w, x, y):\n    return x.T @ (x @ w - y) / x.shape[0]\n"),
            ("sum of squared errors instead of the mean: n times too large",
             "def mse_grad(w, x, y):\n"
             "    return jax.grad(lambda w: jnp.sum((x @ w - y) ** 2))(w)\n"),
            ("the gradient at the notebook's w0, not at the w it is given",
             "def mse_grad(w, x, y):\n    return jax.grad(mse_loss)(w0, x, y)\n"),
            ("divides by the number of features instead of the number of examples",
             "def mse_grad(w, x, y):\n    return 2.0 / x.shape[1] * x.T @ (x @ w - y)\n"),
            ("the residual the wrong way round: the negative gradient",
             "def mse_grad(w, x, y):\n    return 2.0 / x.shape[0] * x.T @ (y - x @ w)\n"),
        ],
    },
    "01_grad_loss_and_grad": {
        "correct": [
            "def loss_and_grad(params, x, y):\n"
            "    def f(p, x, y):\n"
            "        preds = jnp.dot(x, p['w']) + p['b']\n"
            "        return jnp.mean(jnp.square(preds - y)), preds\n"
            "    return jax.value_and_grad(f, has_aux=True)(params, x, y)\n",
            "def loss_and_grad(params, x, y):\n"
            "    preds = x @ params['w'] + params['b']\n"
            "    loss = jnp.mean((preds - y) ** 2)\n"
            "    grads = jax.grad(lambda p: jnp.mean((x @ p['w'] + p['b'] - y) ** 2))(params)\n"
            "    return (loss, preds), grads\n",
        ],
        "wrong": [
            ("forgot has_aux=True: grad of a (loss, preds) tuple fails",
             "def loss_and_grad(params, x, y):\n"
             "    def f(p):\n"
             "        preds = x @ p['w'] + p['b']\n"
             "        return jnp.mean((preds - y) ** 2), preds\n"
             "    return jax.value_and_grad(f)(params)\n"),
            ("returns (loss, grads) without the auxiliary predictions",
             "def loss_and_grad(params, x, y):\n"
             "    def f(p):\n"
             "        return jnp.mean((x @ p['w'] + p['b'] - y) ** 2)\n"
             "    return jax.value_and_grad(f)(params)\n"),
            ("predictions without the bias: the loss is off and grads['b'] is zero",
             "def loss_and_grad(params, x, y):\n"
             "    def f(p):\n"
             "        preds = x @ p['w']\n"
             "        return jnp.mean((preds - y) ** 2), preds\n"
             "    return jax.value_and_grad(f, has_aux=True)(params)\n"),
            ("the loss closes over predictions made outside: its gradient is zero",
             "def loss_and_grad(params, x, y):\n"
             "    preds = x @ params['w'] + params['b']\n"
             "    def f(p):\n"
             "        return jnp.mean((preds - y) ** 2), preds\n"
             "    return jax.value_and_grad(f, has_aux=True)(params)\n"),
            ("sum of squared errors instead of the mean",
             "def loss_and_grad(params, x, y):\n"
             "    def f(p):\n"
             "        preds = x @ p['w'] + p['b']\n"
             "        return jnp.sum((preds - y) ** 2), preds\n"
             "    return jax.value_and_grad(f, has_aux=True)(params)\n"),
        ],
    },
    "01_grad_param_and_input_grads": {
        "correct": [
            "def param_and_input_grads(params, x, y):\n"
            "    return jax.grad(linear_loss, argnums=0)(params, x, y), "
            "jax.grad(linear_loss, argnums=1)(params, x, y)\n",
            "def param_and_input_grads(params, x, y):\n"
            "    _, grads = jax.value_and_grad(linear_loss, argnums=(0, 1))(params, x, y)\n"
            "    return grads\n",
        ],
        "wrong": [
            ("only the parameter gradient (default argnums=0)",
             "def param_and_input_grads(params, x, y):\n"
             "    return jax.grad(linear_loss)(params, x, y)\n"),
            ("gradients with respect to x and y instead of params and x",
             "def param_and_input_grads(params, x, y):\n"
             "    return jax.grad(linear_loss, argnums=(1, 2))(params, x, y)\n"),
            ("the two gradients in the other order: (grads_x, grads_params)",
             "def param_and_input_grads(params, x, y):\n"
             "    return jax.grad(linear_loss, argnums=(1, 0))(params, x, y)\n"),
            ("the input gradient of the summed loss: n times too large",
             "def param_and_input_grads(params, x, y):\n"
             "    gp = jax.grad(linear_loss)(params, x, y)\n"
             "    gx = jax.grad(lambda x: jnp.sum((x @ params['w'] + params['b'] - y) ** 2))(x)\n"
             "    return gp, gx\n"),
            ("a closed form that forgets the bias in the residual",
             "def param_and_input_grads(params, x, y):\n"
             "    r = x @ params['w'] - y\n"
             "    n = x.shape[0]\n"
             "    gp = {'w': 2.0 / n * x.T @ r, 'b': 2.0 * jnp.mean(r)}\n"
             "    return gp, 2.0 / n * jnp.outer(r, params['w'])\n"),
        ],
    },
    "01_grad_numerical_gradient": {
        "correct": [
            "def numerical_gradient(f, x, eps=1e-3):\n"
            "    eye = jnp.eye(x.shape[0], dtype=x.dtype) * eps\n"
            "    return jax.vmap(lambda e: (f(x + e) - f(x - e)) / (2 * eps))(eye).astype(x.dtype)\n",
            "def numerical_gradient(f, x, eps=1e-3):\n"
            "    out = []\n"
            "    for i in range(len(x)):\n"
            "        xp = x.at[i].add(eps)\n"
            "        xm = x.at[i].add(-eps)\n"
            "        out.append(f(xp) - f(xm))\n"
            "    return (jnp.array(out) / (2 * eps)).astype(x.dtype)\n",
        ],
        "wrong": [
            ("forward difference: error of order eps, not eps^2",
             "def numerical_gradient(f, x, eps=1e-3):\n"
             "    grads = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.zeros_like(x).at[i].set(eps)\n"
             "        grads.append((f(x + e) - f(x)) / eps)\n"
             "    return jnp.stack(grads).astype(x.dtype)\n"),
            ("divides by eps instead of 2 * eps",
             "def numerical_gradient(f, x, eps=1e-3):\n"
             "    grads = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.zeros_like(x).at[i].set(eps)\n"
             "        grads.append((f(x + e) - f(x - e)) / eps)\n"
             "    return jnp.stack(grads).astype(x.dtype)\n"),
            ("returns jax.grad: the exact derivative, not the finite difference asked for",
             "def numerical_gradient(f, x, eps=1e-3):\n    return jax.grad(f)(x).astype(x.dtype)\n"),
            ("another default step: eps=1e-4 when eps is not given",
             "def numerical_gradient(f, x, eps=1e-4):\n"
             "    grads = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.zeros_like(x).at[i].set(eps)\n"
             "        grads.append((f(x + e) - f(x - e)) / (2 * eps))\n"
             "    return jnp.stack(grads).astype(x.dtype)\n"),
            ("perturbs every coordinate at once: each entry is the same directional slope",
             "def numerical_gradient(f, x, eps=1e-3):\n"
             "    grads = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.ones_like(x) * eps\n"
             "        grads.append((f(x + e) - f(x - e)) / (2 * eps))\n"
             "    return jnp.stack(grads).astype(x.dtype)\n"),
            ("ignores the eps it is given: a hard-coded step of 1e-3",
             "def numerical_gradient(f, x, eps=1e-3):\n"
             "    h = 1e-3\n"
             "    grads = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.zeros_like(x).at[i].set(h)\n"
             "        grads.append((f(x + e) - f(x - e)) / (2 * h))\n"
             "    return jnp.stack(grads).astype(x.dtype)\n"),
            ("a NumPy float64 result: not the dtype of a float32 x",
             "def numerical_gradient(f, x, eps=1e-3):\n"
             "    out = []\n"
             "    for i in range(x.shape[0]):\n"
             "        e = jnp.zeros_like(x).at[i].set(eps)\n"
             "        out.append(float(f(x + e) - f(x - e)) / (2 * eps))\n"
             "    return np.array(out)\n"),
        ],
    },
    "01_grad_jacobian": {
        "correct": [
            "def jacobian(f, x):\n    return jax.jacfwd(f)(x)\n",
            "def jacobian(f, x):\n"
            "    m = f(x).shape[0]\n"
            "    return jnp.stack([jax.grad(lambda z, i=i: f(z)[i])(x) for i in range(m)])\n",
        ],
        "wrong": [
            ("transposed: (n, m) instead of (m, n)",
             "def jacobian(f, x):\n    return jax.jacrev(f)(x).T\n"),
            ("jax.grad on a vector-valued function",
             "def jacobian(f, x):\n    return jax.grad(f)(x)\n"),
            ("loops over the inputs instead of the outputs: (n, n) rows",
             "def jacobian(f, x):\n"
             "    return jnp.stack([jax.grad(lambda z, i=i: f(z)[i])(x) for i in range(x.shape[0])])\n"),
            ("squeezes the result: a single output or input loses its axis",
             "def jacobian(f, x):\n    return jnp.squeeze(jax.jacfwd(f)(x))\n"),
            ("float32 forward differences: only about three digits",
             "def jacobian(f, x):\n"
             "    fx = f(x)\n"
             "    cols = [(f(x.at[j].add(1e-3)) - fx) / 1e-3 for j in range(x.shape[0])]\n"
             "    return jnp.stack(cols, axis=1)\n"),
        ],
    },
    "01_grad_newton_step": {
        "correct": [
            "def newton_step(f, x):\n"
            "    H = jax.jacfwd(jax.jacrev(f))(x)\n"
            "    return x - jnp.linalg.inv(H) @ jax.grad(f)(x)\n",
            "def newton_step(f, x):\n"
            "    H = jax.jacrev(jax.grad(f))(x)\n"
            "    return x - jax.scipy.linalg.solve(H, jax.grad(f)(x))\n",
        ],
        "wrong": [
            ("steps uphill: x + H^-1 g",
             "def newton_step(f, x):\n"
             "    return x + jnp.linalg.solve(jax.hessian(f)(x), jax.grad(f)(x))\n"),
            ("a gradient step with the Hessian's diagonal only",
             "def newton_step(f, x):\n"
             "    return x - jax.grad(f)(x) / jnp.diag(jax.hessian(f)(x))\n"),
            ("multiplies by the Hessian instead of solving with it",
             "def newton_step(f, x):\n"
             "    return x - jax.hessian(f)(x) @ jax.grad(f)(x)\n"),
            ("returns the step H^-1 g, not the new point",
             "def newton_step(f, x):\n"
             "    return jnp.linalg.solve(jax.hessian(f)(x), jax.grad(f)(x))\n"),
            ("a plain gradient step",
             "def newton_step(f, x):\n    return x - jax.grad(f)(x)\n"),
        ],
    },
    "01_grad_td_loss": {
        "correct": [
            "def td_loss(w, s, r, s_next, gamma):\n"
            "    v_next = jax.lax.stop_gradient(s_next @ w)\n"
            "    return jnp.mean((r + gamma * v_next - s @ w) ** 2)\n",
            "def td_loss(w, s, r, s_next, gamma):\n"
            "    w_const = jax.lax.stop_gradient(w)\n"
            "    return jnp.mean(jnp.square(r + gamma * jnp.dot(s_next, w_const) - jnp.dot(s, w)))\n",
        ],
        "wrong": [
            ("no stop_gradient: the full gradient flows through the target",
             "def td_loss(w, s, r, s_next, gamma):\n"
             "    return jnp.mean((r + gamma * (s_next @ w) - s @ w) ** 2)\n"),
            ("stop_gradient on the prediction instead of the target",
             "def td_loss(w, s, r, s_next, gamma):\n"
             "    return jnp.mean((r + gamma * (s_next @ w) - jax.lax.stop_gradient(s @ w)) ** 2)\n"),
            ("stop_gradient on the next states, not on the value: the gradient still flows through w",
             "def td_loss(w, s, r, s_next, gamma):\n"
             "    target = r + gamma * (jax.lax.stop_gradient(s_next) @ w)\n"
             "    return jnp.mean((target - s @ w) ** 2)\n"),
            ("sum instead of mean over the transitions",
             "def td_loss(w, s, r, s_next, gamma):\n"
             "    target = jax.lax.stop_gradient(r + gamma * (s_next @ w))\n"
             "    return jnp.sum((target - s @ w) ** 2)\n"),
            ("a hard-coded discount of 0.5 (the visible test's gamma)",
             "def td_loss(w, s, r, s_next, gamma):\n"
             "    target = jax.lax.stop_gradient(r + 0.5 * (s_next @ w))\n"
             "    return jnp.mean((target - s @ w) ** 2)\n"),
        ],
    },
    "01_grad_safe_norm": {
        "correct": [
            "def safe_norm(x):\n"
            "    s = jnp.sum(x * x)\n"
            "    return jnp.where(s == 0, 0.0, jnp.sqrt(jnp.where(s == 0, 1.0, s)))\n",
            "@jax.custom_jvp\n"
            "def safe_norm(x):\n"
            "    return jnp.sqrt(jnp.sum(x ** 2))\n"
            "@safe_norm.defjvp\n"
            "def _safe_norm_jvp(primals, tangents):\n"
            "    (x,), (t,) = primals, tangents\n"
            "    n = safe_norm(x)\n"
            "    return n, jnp.where(n > 0, jnp.sum(x * t) / jnp.where(n > 0, n, 1.0), 0.0)\n",
        ],
        "wrong": [
            ("single jnp.where: the gradient at 0 is NaN",
             "def safe_norm(x):\n"
             "    s = jnp.sum(x ** 2)\n"
             "    return jnp.where(s > 0, jnp.sqrt(s), 0.0)\n"),
            ("adds an epsilon: the value is off and the gradient is not the norm's",
             "def safe_norm(x):\n"
             "    return jnp.sqrt(jnp.sum(x ** 2) + 1e-2)\n"),
            ("jnp.linalg.norm: right values, NaN gradient at 0",
             "def safe_norm(x):\n    return jnp.linalg.norm(x)\n"),
            ("a tiny epsilon under the square root: the norm of 0 is 1e-6, small norms are off",
             "def safe_norm(x):\n    return jnp.sqrt(jnp.sum(x ** 2) + 1e-12)\n"),
            ("clamps the sum of squares: the norm of 0 is 1e-6, not 0",
             "def safe_norm(x):\n    return jnp.sqrt(jnp.maximum(jnp.sum(x ** 2), 1e-12))\n"),
            ("a threshold instead of an exact zero test: small nonzero x gives 0",
             "def safe_norm(x):\n"
             "    s = jnp.sum(x ** 2)\n"
             "    big = s > 1e-6\n"
             "    return jnp.where(big, jnp.sqrt(jnp.where(big, s, 1.0)), 0.0)\n"),
        ],
    },
}
