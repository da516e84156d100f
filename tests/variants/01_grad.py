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
        ],
        "wrong": [
            ("set instead of add: repeated indices keep one value",
             "def scatter_add(x, idx, vals):\n    return x.at[idx].set(x[idx] + vals)\n"),
            ("in-place NumPy style assignment fails on a JAX array",
             "def scatter_add(x, idx, vals):\n    x[idx] += vals\n    return x\n"),
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
        ],
    },
}
