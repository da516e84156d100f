"""Alternative correct answers and realistic wrong answers for 08_autodiff, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise.
"""

VARIANTS = {
    "08_autodiff_jvp_and_vjp": {
        "correct": [
            # One forward pass: linearize, then transpose the linear map for J^T u.
            "def jvp_and_vjp(f, x, v, u):\n"
            "    y, f_jvp = jax.linearize(f, x)\n"
            "    (ju,) = jax.linear_transpose(f_jvp, x)(u)\n"
            "    return y, f_jvp(v), ju\n",
            # J^T u as the gradient of u . f(x); primals and tangents as lists.
            "def jvp_and_vjp(f, x, v, u):\n"
            "    jv = jax.jvp(f, [x], [v])[1]\n"
            "    ju = jax.grad(lambda z: jnp.vdot(u, f(z)))(x)\n"
            "    return f(x), jv, ju\n",
        ],
        "wrong": [
            ("forms the Jacobian with jacfwd: right values, but an n x m matrix in the program",
             "def jvp_and_vjp(f, x, v, u):\n"
             "    J = jax.jacfwd(f)(x)\n"
             "    return f(x), J @ v, J.T @ u\n"),
            ("f_vjp(u) returns a tuple, returned without unpacking",
             "def jvp_and_vjp(f, x, v, u):\n"
             "    y, jv = jax.jvp(f, (x,), (v,))\n"
             "    _, f_vjp = jax.vjp(f, x)\n"
             "    return y, jv, f_vjp(u)\n"),
            ("v and u exchanged: pushes u forward and pulls v back",
             "def jvp_and_vjp(f, x, v, u):\n"
             "    y, jv = jax.jvp(f, (x,), (u,))\n"
             "    _, f_vjp = jax.vjp(f, x)\n"
             "    return y, jv, f_vjp(v)[0]\n"),
            ("primals and tangents passed bare instead of as tuples",
             "def jvp_and_vjp(f, x, v, u):\n"
             "    y, jv = jax.jvp(f, x, v)\n"
             "    _, f_vjp = jax.vjp(f, x)\n"
             "    return y, jv, f_vjp(u)[0]\n"),
            ("J^T u through jacrev: the m x n Jacobian is formed",
             "def jvp_and_vjp(f, x, v, u):\n"
             "    y, jv = jax.jvp(f, (x,), (v,))\n"
             "    return y, jv, u @ jax.jacrev(f)(x)\n"),
        ],
    },
    "08_autodiff_jacobian_by_shape": {
        "correct": [
            "def jacobian_by_shape(f, x):\n"
            "    n, m = x.size, f(x).size\n"
            "    if n > m:\n"
            "        return jax.jacrev(f)(x)\n"
            "    return jax.jacfwd(f)(x)\n",
            # By hand: n JVPs for a tall map, m VJPs for a wide one (never an identity matrix).
            "def jacobian_by_shape(f, x):\n"
            "    y, f_vjp = jax.vjp(f, x)\n"
            "    n, m = x.shape[0], y.shape[0]\n"
            "    if n <= m:\n"
            "        cols = [jax.jvp(f, (x,), (jnp.zeros(n).at[i].set(1.0),))[1] for i in range(n)]\n"
            "        return jnp.stack(cols, axis=1)\n"
            "    return jnp.stack([f_vjp(jnp.zeros(m).at[i].set(1.0))[0] for i in range(m)])\n",
            # One pass at a time in lax.map, in the right mode: one linearization, then
            # min(n, m) passes (no array larger than J, the work of the right mode).
            "def jacobian_by_shape(f, x):\n"
            "    n, m = x.shape[0], jax.eval_shape(f, x).shape[0]\n"
            "    if n <= m:\n"
            "        _, f_jvp = jax.linearize(f, x)\n"
            "        return lax.map(f_jvp, jnp.eye(n, dtype=x.dtype)).T\n"
            "    _, f_vjp = jax.vjp(f, x)\n"
            "    return lax.map(lambda e: f_vjp(e)[0], jnp.eye(m, dtype=x.dtype))\n",
        ],
        "wrong": [
            # The mode judged by its cost: each of these keeps every array no larger than J.
            ("forward mode one tangent at a time in lax.map, whatever the shape: 300 "
             "passes for a map with 4 outputs",
             "def jacobian_by_shape(f, x):\n"
             "    _, f_jvp = jax.linearize(f, x)\n"
             "    return lax.map(f_jvp, jnp.eye(x.shape[0], dtype=x.dtype)).T\n"),
            ("reverse mode in a Python loop over the outputs, whatever the shape: 200 VJPs "
             "for a map with 3 inputs",
             "def jacobian_by_shape(f, x):\n"
             "    y, f_vjp = jax.vjp(f, x)\n"
             "    m = y.shape[0]\n"
             "    return jnp.stack([f_vjp(jnp.zeros(m, x.dtype).at[i].set(1.0))[0] for i in range(m)])\n"),
            ("the modes exchanged, each one pass at a time in lax.map",
             "def jacobian_by_shape(f, x):\n"
             "    n, m = x.shape[0], jax.eval_shape(f, x).shape[0]\n"
             "    if n > m:\n"
             "        _, f_jvp = jax.linearize(f, x)\n"
             "        return lax.map(f_jvp, jnp.eye(n, dtype=x.dtype)).T\n"
             "    _, f_vjp = jax.vjp(f, x)\n"
             "    return lax.map(lambda e: f_vjp(e)[0], jnp.eye(m, dtype=x.dtype))\n"),
            ("always reverse mode: an m x m identity of cotangents for a tall map",
             "def jacobian_by_shape(f, x):\n    return jax.jacrev(f)(x)\n"),
            ("always forward mode: an n x n identity of tangents for a wide map",
             "def jacobian_by_shape(f, x):\n    return jax.jacfwd(f)(x)\n"),
            ("the modes exchanged: reverse for tall maps, forward for wide ones",
             "def jacobian_by_shape(f, x):\n"
             "    n, m = x.shape[0], jax.eval_shape(f, x).shape[0]\n"
             "    return jax.jacrev(f)(x) if n <= m else jax.jacfwd(f)(x)\n"),
            ("transposed: an (n, m) array",
             "def jacobian_by_shape(f, x):\n"
             "    n, m = x.shape[0], jax.eval_shape(f, x).shape[0]\n"
             "    return (jax.jacfwd(f)(x) if n <= m else jax.jacrev(f)(x)).T\n"),
            ("reverse mode by hand with vmap over an m x m identity, whatever the shape",
             "def jacobian_by_shape(f, x):\n"
             "    y, f_vjp = jax.vjp(f, x)\n"
             "    return jax.vmap(lambda e: f_vjp(e)[0])(jnp.eye(y.shape[0]))\n"),
        ],
    },
    "08_autodiff_hessian_diag_estimate": {
        "correct": [
            # Reverse-over-reverse products: the gradient of <grad f(x), v>, vmapped over the probes.
            "def hessian_diag_estimate(f, x, key, num_probes):\n"
            "    z = jax.random.rademacher(key, (num_probes, x.size), dtype=x.dtype)\n"
            "    hvp = lambda v: jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x)\n"
            "    return (z * jax.vmap(hvp)(z)).sum(axis=0) / num_probes\n",
            # One linearization of the gradient, applied to every probe at once.
            "def hessian_diag_estimate(f, x, key, num_probes):\n"
            "    n = x.shape[0]\n"
            "    z = jax.random.rademacher(key, (num_probes, n), dtype=x.dtype)\n"
            "    _, grad_jvp = jax.linearize(jax.grad(f), x)\n"
            "    return jnp.mean(z * jax.vmap(grad_jvp)(z), axis=0)\n",
            # The probes one after another in a lax.map: one copy of the product in the program.
            "def hessian_diag_estimate(f, x, key, num_probes):\n"
            "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
            "    hz = lax.map(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1], z)\n"
            "    return jnp.mean(z * hz, axis=0)\n",
        ],
        "wrong": [
            ("forms the n x n Hessian with jax.hessian: right values, but H is in the program",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    return jnp.mean(z * (z @ jax.hessian(f)(x)), axis=0)\n"),
            ("a Python loop over the probes: right values, one copy of the product per probe",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    total = jnp.zeros_like(x)\n"
             "    for i in range(num_probes):\n"
             "        total = total + z[i] * jax.jvp(jax.grad(f), (x,), (z[i],))[1]\n"
             "    return total / num_probes\n"),
            ("the sum over the probes, not their mean",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    hz = jax.vmap(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(z)\n"
             "    return jnp.sum(z * hz, axis=0)\n"),
            ("normal probes instead of Rademacher ones",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.normal(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    hz = jax.vmap(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(z)\n"
             "    return jnp.mean(z * hz, axis=0)\n"),
            ("one probe drawn from the key and repeated num_probes times",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jnp.tile(jax.random.rademacher(key, (x.shape[0],), dtype=x.dtype), (num_probes, 1))\n"
             "    hz = jax.vmap(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(z)\n"
             "    return jnp.mean(z * hz, axis=0)\n"),
            ("z . (H z), the trace estimate, instead of z * (H z): a scalar",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    hz = jax.vmap(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(z)\n"
             "    return jnp.mean(jnp.sum(z * hz, axis=1))\n"),
            ("each probe from its own split key: not the probes the statement fixes",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    keys = jax.random.split(key, num_probes)\n"
             "    z = jax.vmap(lambda k: jax.random.rademacher(k, x.shape, dtype=x.dtype))(keys)\n"
             "    hz = jax.vmap(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(z)\n"
             "    return jnp.mean(z * hz, axis=0)\n"),
            ("a Python loop over the probes around a jitted product: one call of it per probe",
             "def hessian_diag_estimate(f, x, key, num_probes):\n"
             "    z = jax.random.rademacher(key, (num_probes, x.shape[0]), dtype=x.dtype)\n"
             "    hvp = jax.jit(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])\n"
             "    total = jnp.zeros_like(x)\n"
             "    for i in range(num_probes):\n"
             "        total = total + z[i] * hvp(z[i])\n"
             "    return total / num_probes\n"),
        ],
    },
    "08_autodiff_gauss_newton_step": {
        "correct": [
            # CG written out, with linearize and linear_transpose.
            "def gauss_newton_step(residual_fn, x, iters, damping):\n"
            "    r, f_jvp = jax.linearize(residual_fn, x)\n"
            "    f_t = jax.linear_transpose(f_jvp, x)\n"
            "    def G(v):\n"
            "        return f_t(f_jvp(v))[0] + damping * v\n"
            "    res = -f_t(r)[0]\n"
            "    d, p, rs = jnp.zeros_like(x), res, res @ res\n"
            "    for _ in range(iters):\n"
            "        Gp = G(p)\n"
            "        alpha = rs / (p @ Gp)\n"
            "        d, res = d + alpha * p, res - alpha * Gp\n"
            "        rs_new = res @ res\n"
            "        p, rs = res + (rs_new / rs) * p, rs_new\n"
            "    return x + d\n",
            # The gradient of 0.5 ||r||^2, and cg with its default tolerance.
            "def gauss_newton_step(residual_fn, x, iters, damping):\n"
            "    g = jax.grad(lambda z: 0.5 * jnp.sum(residual_fn(z) ** 2))(x)\n"
            "    _, res_vjp = jax.vjp(residual_fn, x)\n"
            "    def A(v):\n"
            "        return res_vjp(jax.jvp(residual_fn, (x,), (v,))[1])[0] + damping * v\n"
            "    d, _ = jax.scipy.sparse.linalg.cg(A, -g, maxiter=iters)\n"
            "    return x + d\n",
        ],
        "wrong": [
            ("a gradient step, no curvature",
             "def gauss_newton_step(residual_fn, x, iters, damping):\n"
             "    r, res_vjp = jax.vjp(residual_fn, x)\n"
             "    return x - res_vjp(r)[0]\n"),
            ("ignores iters: always 10 CG iterations",
             "def gauss_newton_step(residual_fn, x, iters, damping):\n"
             "    r, res_vjp = jax.vjp(residual_fn, x)\n"
             "    A = lambda v: res_vjp(jax.jvp(residual_fn, (x,), (v,))[1])[0] + damping * v\n"
             "    d, _ = jax.scipy.sparse.linalg.cg(A, -res_vjp(r)[0], maxiter=10)\n"
             "    return x + d\n"),
            ("ignores the damping",
             "def gauss_newton_step(residual_fn, x, iters, damping):\n"
             "    r, res_vjp = jax.vjp(residual_fn, x)\n"
             "    A = lambda v: res_vjp(jax.jvp(residual_fn, (x,), (v,))[1])[0]\n"
             "    d, _ = jax.scipy.sparse.linalg.cg(A, -res_vjp(r)[0], tol=0.0, maxiter=iters)\n"
             "    return x + d\n"),
            ("solves G d = +J^T r: the step goes uphill",
             "def gauss_newton_step(residual_fn, x, iters, damping):\n"
             "    r, res_vjp = jax.vjp(residual_fn, x)\n"
             "    A = lambda v: res_vjp(jax.jvp(residual_fn, (x,), (v,))[1])[0] + damping * v\n"
             "    d, _ = jax.scipy.sparse.linalg.cg(A, res_vjp(r)[0], tol=0.0, maxiter=iters)\n"
             "    return x + d\n"),
            ("forms J and J^T J: right values, but an n x n matrix in the program",
             "def gauss_newton_step(residual_fn, x, iters, damping):\n"
             "    J = jax.jacfwd(residual_fn)(x)\n"
             "    G = J.T @ J + damping * jnp.eye(x.shape[0])\n"
             "    d, _ = jax.scipy.sparse.linalg.cg(G, -J.T @ residual_fn(x), tol=0.0, maxiter=iters)\n"
             "    return x + d\n"),
        ],
    },
    "08_autodiff_softplus": {
        "correct": [
            # The library's stable form (jnp.logaddexp has its own stable derivative).
            "def softplus(x):\n    return jnp.logaddexp(x, 0.0)\n",
            # A custom_jvp object defined at the top level, value by a safe where.
            "@jax.custom_jvp\n"
            "def softplus(x):\n"
            "    return jnp.where(x > 20.0, x, jnp.log1p(jnp.exp(jnp.minimum(x, 20.0))))\n"
            "\n"
            "@softplus.defjvp\n"
            "def _softplus_jvp(primals, tangents):\n"
            "    (x,), (t,) = primals, tangents\n"
            "    return softplus(x), t * jax.nn.sigmoid(x)\n",
        ],
        "wrong": [
            ("the naive formula: exp overflows, the value is inf at x = 100",
             "def softplus(x):\n    return jnp.log1p(jnp.exp(x))\n"),
            ("a where fixes the value, but the automatic derivative is NaN at large x",
             "def softplus(x):\n    return jnp.where(x > 30.0, x, jnp.log1p(jnp.exp(x)))\n"),
            ("a custom rule exp(x) / (1 + exp(x)): inf / inf = NaN at large x",
             "def softplus(x):\n"
             "    @jax.custom_jvp\n"
             "    def sp(x):\n"
             "        return jnp.logaddexp(x, 0.0)\n"
             "    @sp.defjvp\n"
             "    def sp_jvp(primals, tangents):\n"
             "        (x,), (t,) = primals, tangents\n"
             "        return sp(x), jnp.exp(x) / (1.0 + jnp.exp(x)) * t\n"
             "    return sp(x)\n"),
            ("the rule ignores the tangent: not linear in t, so every gradient is 0",
             "def softplus(x):\n"
             "    @jax.custom_jvp\n"
             "    def sp(x):\n"
             "        return jnp.logaddexp(x, 0.0)\n"
             "    @sp.defjvp\n"
             "    def sp_jvp(primals, tangents):\n"
             "        (x,), _ = primals, tangents\n"
             "        return sp(x), jax.nn.sigmoid(x)\n"
             "    return sp(x)\n"),
            ("the rule returns the naive primal: jax.jvp's value is inf at large x",
             "def softplus(x):\n"
             "    @jax.custom_jvp\n"
             "    def sp(x):\n"
             "        return jnp.logaddexp(x, 0.0)\n"
             "    @sp.defjvp\n"
             "    def sp_jvp(primals, tangents):\n"
             "        (x,), (t,) = primals, tangents\n"
             "        return jnp.log1p(jnp.exp(x)), jax.nn.sigmoid(x) * t\n"
             "    return sp(x)\n"),
            ("the rule's tangent is finite but its own derivative is NaN (a where of exp)",
             "def softplus(x):\n"
             "    @jax.custom_jvp\n"
             "    def sp(x):\n"
             "        return jnp.logaddexp(x, 0.0)\n"
             "    @sp.defjvp\n"
             "    def sp_jvp(primals, tangents):\n"
             "        (x,), (t,) = primals, tangents\n"
             "        s = jnp.where(x > 0, 1.0 / (1.0 + jnp.exp(-x)), jnp.exp(x) / (1.0 + jnp.exp(x)))\n"
             "        return sp(x), s * t\n"
             "    return sp(x)\n"),
        ],
    },
    "08_autodiff_clip_gradient_norm": {
        "correct": [
            # optax's clip_by_global_norm inside the backward pass, max_norm closed over.
            "def clip_gradient_norm(x, max_norm):\n"
            "    @jax.custom_vjp\n"
            "    def ident(x):\n"
            "        return x\n"
            "    def fwd(x):\n"
            "        return x, None\n"
            "    def bwd(_, g):\n"
            "        clipped, _ = optax.clip_by_global_norm(max_norm).update(g, optax.EmptyState())\n"
            "        return (clipped,)\n"
            "    ident.defvjp(fwd, bwd)\n"
            "    return ident(x)\n",
            "def clip_gradient_norm(x, max_norm):\n"
            "    @jax.custom_vjp\n"
            "    def ident(x):\n"
            "        return x\n"
            "    def bwd(_, g):\n"
            "        norm = jnp.linalg.norm(g.ravel())\n"
            "        return (jnp.where(norm > max_norm, g * (max_norm / jnp.maximum(norm, 1e-30)), g),)\n"
            "    ident.defvjp(lambda x: (x, None), bwd)\n"
            "    return ident(x)\n",
        ],
        "wrong": [
            ("clips each entry to [-max_norm, max_norm] instead of the norm",
             "def clip_gradient_norm(x, max_norm):\n"
             "    @jax.custom_vjp\n"
             "    def ident(x):\n"
             "        return x\n"
             "    ident.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -max_norm, max_norm),))\n"
             "    return ident(x)\n"),
            ("always rescales to max_norm, also short cotangents",
             "def clip_gradient_norm(x, max_norm):\n"
             "    @jax.custom_vjp\n"
             "    def ident(x):\n"
             "        return x\n"
             "    ident.defvjp(lambda x: (x, None),\n"
             "                 lambda _, g: (g * max_norm / jnp.sqrt(jnp.sum(g ** 2)),))\n"
             "    return ident(x)\n"),
            ("g / ||g|| * min(||g||, max_norm): 0 / 0 = NaN for a zero cotangent",
             "def clip_gradient_norm(x, max_norm):\n"
             "    @jax.custom_vjp\n"
             "    def ident(x):\n"
             "        return x\n"
             "    def bwd(_, g):\n"
             "        norm = jnp.sqrt(jnp.sum(g ** 2))\n"
             "        return (g / norm * jnp.minimum(norm, max_norm),)\n"
             "    ident.defvjp(lambda x: (x, None), bwd)\n"
             "    return ident(x)\n"),
            ("clips the value in the forward pass; the backward pass is the chain rule",
             "def clip_gradient_norm(x, max_norm):\n"
             "    norm = jnp.sqrt(jnp.sum(x ** 2))\n"
             "    return x * jnp.minimum(1.0, max_norm / norm)\n"),
            ("max_norm ignored: always clips to norm 1",
             "def clip_gradient_norm(x, max_norm):\n"
             "    @jax.custom_vjp\n"
             "    def ident(x):\n"
             "        return x\n"
             "    def bwd(_, g):\n"
             "        norm = jnp.sqrt(jnp.sum(g ** 2))\n"
             "        return (g * jnp.minimum(1.0, 1.0 / jnp.where(norm > 0, norm, 1.0)),)\n"
             "    ident.defvjp(lambda x: (x, None), bwd)\n"
             "    return ident(x)\n"),
        ],
    },
    "08_autodiff_binarize": {
        "correct": [
            # stop_gradient, twice: x flows where |x| <= 1, a constant elsewhere.
            "def binarize(x):\n"
            "    s = jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
            "    through = jnp.where(jnp.abs(x) <= 1.0, x, jax.lax.stop_gradient(x))\n"
            "    return through + jax.lax.stop_gradient(s - through)\n",
            # A custom JVP: the tangent passes in the window; reverse mode transposes it.
            "@jax.custom_jvp\n"
            "def binarize(x):\n"
            "    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
            "\n"
            "@binarize.defjvp\n"
            "def _binarize_jvp(primals, tangents):\n"
            "    (x,), (t,) = primals, tangents\n"
            "    return binarize(x), jnp.where(jnp.abs(x) <= 1.0, t, jnp.zeros_like(t))\n",
        ],
        "wrong": [
            ("no estimator: the gradient of a where of constants is 0",
             "def binarize(x):\n    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"),
            ("identity STE without the window: the gradient passes for |x| > 1 too",
             "def binarize(x):\n"
             "    s = jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
             "    return x + jax.lax.stop_gradient(s - x)\n"),
            ("jnp.sign: 0 maps to 0, not +1",
             "def binarize(x):\n"
             "    @jax.custom_vjp\n"
             "    def b(x):\n"
             "        return jnp.sign(x)\n"
             "    b.defvjp(lambda x: (jnp.sign(x), x), lambda x, g: (jnp.where(jnp.abs(x) <= 1.0, g, 0.0),))\n"
             "    return b(x)\n"),
            ("a strict window |x| < 1: the cotangent is dropped at |x| = 1",
             "def binarize(x):\n"
             "    @jax.custom_vjp\n"
             "    def b(x):\n"
             "        return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
             "    b.defvjp(lambda x: (b(x), x), lambda x, g: (jnp.where(jnp.abs(x) < 1.0, g, 0.0),))\n"
             "    return b(x)\n"),
            ("the clip trick: jnp.clip's derivative is 0.5 at |x| = 1",
             "def binarize(x):\n"
             "    c = jnp.clip(x, -1.0, 1.0)\n"
             "    return c + jax.lax.stop_gradient(jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype) - c)\n"),
            ("the backward pass returns the window, not g times the window",
             "def binarize(x):\n"
             "    @jax.custom_vjp\n"
             "    def b(x):\n"
             "        return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
             "    b.defvjp(lambda x: (b(x), x),\n"
             "             lambda x, g: (jnp.where(jnp.abs(x) <= 1.0, 1.0, 0.0).astype(g.dtype),))\n"
             "    return b(x)\n"),
            ("the signs in float32 whatever the dtype of x",
             "def binarize(x):\n"
             "    @jax.custom_vjp\n"
             "    def b(x):\n"
             "        return jnp.where(x >= 0, 1.0, -1.0)\n"
             "    b.defvjp(lambda x: (b(x), x), lambda x, g: (jnp.where(jnp.abs(x) <= 1.0, g, 0.0),))\n"
             "    return b(x)\n"),
        ],
    },
    "08_autodiff_implicit_fixed_point": {
        "correct": [
            # The JAX docs' pattern: f as a non-differentiable argument of a top-level custom_vjp.
            "def _iterate(g, x0):\n"
            "    def cond(c):\n"
            "        return (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
            "    return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
            "\n"
            "@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))\n"
            "def implicit_fixed_point(f, theta, x_init):\n"
            "    return _iterate(lambda x: f(theta, x), x_init)\n"
            "\n"
            "def _fp_fwd(f, theta, x_init):\n"
            "    x_star = implicit_fixed_point(f, theta, x_init)\n"
            "    return x_star, (theta, x_star)\n"
            "\n"
            "def _fp_bwd(f, res, x_bar):\n"
            "    theta, x_star = res\n"
            "    _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
            "    _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n"
            "    w = _iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n"
            "    return vjp_theta(w)[0], jnp.zeros_like(x_star)\n"
            "\n"
            "implicit_fixed_point.defvjp(_fp_fwd, _fp_bwd)\n",
            # The adjoint by a dense solve of (I - df/dx)^T w = x_bar (fine for small n).
            'def implicit_fixed_point(f, theta, x_init):\n'
            '    # The loop carries a flag the body computes; the condition reads the flag.\n'
            '    def settle(g, x0):\n'
            '        def body(c):\n'
            '            x, _, i = c\n'
            '            x_new = g(x)\n'
            '            return x_new, jnp.max(jnp.abs(x_new - x)) <= 1e-6, i + 1\n'
            '        return lax.while_loop(lambda c: ~c[1] & (c[2] < 1000), body,\n'
            '                              (x0, jnp.array(False), 0))[0]\n'
            '\n'
            '    @jax.custom_vjp\n'
            '    def solve(theta, x_init):\n'
            '        return settle(lambda x: f(theta, x), x_init)\n'
            '\n'
            '    def solve_fwd(theta, x_init):\n'
            '        x_star = solve(theta, x_init)\n'
            '        return x_star, (theta, x_star)\n'
            '\n'
            '    def solve_bwd(res, x_bar):\n'
            '        theta, x_star = res\n'
            '        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n'
            '        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n'
            '        w = settle(lambda w: x_bar + vjp_x(w)[0], x_bar)\n'
            '        return vjp_theta(w)[0], jnp.zeros_like(x_star)\n'
            '\n'
            '    solve.defvjp(solve_fwd, solve_bwd)\n'
            '    return solve(theta, x_init)\n',
        ],
        "wrong": [
            ('the adjoint by a fixed 50 steps (a truncated Neumann series): 20 % off on a slow contraction',
             'def implicit_fixed_point(f, theta, x_init):\n'
             '    def iterate(g, x0):\n'
             '        def cond(carry):\n'
             '            x, x_new, i = carry\n'
             '            return (jnp.max(jnp.abs(x_new - x)) > 1e-6) & (i < 1000)\n'
             '        def body(carry):\n'
             '            _, x, i = carry\n'
             '            return x, g(x), i + 1\n'
             '        return lax.while_loop(cond, body, (x0, g(x0), 1))[1]\n'
             '\n'
             '    @jax.custom_vjp\n'
             '    def solve(theta, x_init):\n'
             '        return iterate(lambda x: f(theta, x), x_init)\n'
             '\n'
             '    def solve_fwd(theta, x_init):\n'
             '        x_star = solve(theta, x_init)\n'
             '        return x_star, (theta, x_star)\n'
             '\n'
             '    def solve_bwd(residuals, x_bar):\n'
             '        theta, x_star = residuals\n'
             '        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n'
             '        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n'
             '        # the adjoint by a truncated Neumann series: 50 terms, no convergence test\n'
             '        w = lax.fori_loop(0, 50, lambda i, w: x_bar + vjp_x(w)[0], x_bar)\n'
             '        (theta_bar,) = vjp_theta(w)\n'
             '        return theta_bar, jnp.zeros_like(x_star)\n'
             '\n'
             '    solve.defvjp(solve_fwd, solve_bwd)\n'
             '    return solve(theta, x_init)\n'),
            ('no custom_vjp: a 1000-step fori_loop that freezes once settled, differentiated through',
             'def implicit_fixed_point(f, theta, x_init):\n'
             '    # no custom_vjp: a fixed 1000-step loop that freezes once converged, differentiated through\n'
             '    def body(i, carry):\n'
             '        x, done = carry\n'
             '        x_new = f(theta, x)\n'
             '        settled = jnp.max(jnp.abs(x_new - x)) <= 1e-6\n'
             '        return jnp.where(done, x, x_new), done | settled\n'
             '    x, _ = lax.fori_loop(0, 1000, body, (x_init, jnp.array(False)))\n'
             '    return x\n'),
            ("the adjoint by a dense solve (jacfwd, then solve): the matrix df/dx formed, no second loop for w",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def run(theta, x0):\n"
             "        def cond(c):\n"
             "            return (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
             "        body = lambda c: (c[1], f(theta, c[1]), c[2] + 1)\n"
             "        return lax.while_loop(cond, body, (x0, f(theta, x0), 1))[1]\n"
             "    solve = jax.custom_vjp(run)\n"
             "    def fwd(theta, x0):\n"
             "        x_star = run(theta, x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        Jx = jax.jacfwd(lambda x: f(theta, x))(x_star)\n"
             "        w = jnp.linalg.solve(jnp.eye(x_star.shape[0]) - Jx.T, x_bar)\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        return vjp_theta(w)[0], jnp.zeros_like(x_star)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ('lax.custom_root with a dense tangent solve: no custom_vjp, no loop for w',
             'def implicit_fixed_point(f, theta, x_init):\n'
             '    def solver(g, x0):\n'
             '        def cond(carry):\n'
             '            x, x_new, i = carry\n'
             '            return (jnp.max(jnp.abs(x_new - x)) > 1e-6) & (i < 1000)\n'
             '        def body(carry):\n'
             '            _, x, i = carry\n'
             '            return x, x - g(x), i + 1\n'
             '        return lax.while_loop(cond, body, (x0, x0 - g(x0), 1))[1]\n'
             '\n'
             '    def tangent_solve(g, y):\n'
             '        J = jax.jacobian(g)(y)\n'
             '        return jnp.linalg.solve(J, y)\n'
             '\n'
             '    return lax.custom_root(lambda x: x - f(theta, x), x_init, solver, tangent_solve)\n'),
            ('forward and adjoint as 1000-step fori_loops that freeze once settled: no while_loop',
             'def implicit_fixed_point(f, theta, x_init):\n'
             '    # forward and adjoint solves as 1000-step fori_loops that freeze once settled (no while_loop)\n'
             '    def iterate(g, x0):\n'
             '        def body(i, carry):\n'
             '            x, done = carry\n'
             '            x_new = g(x)\n'
             '            settled = jnp.max(jnp.abs(x_new - x)) <= 1e-6\n'
             '            return jnp.where(done, x, x_new), done | settled\n'
             '        return lax.fori_loop(0, 1000, body, (x0, jnp.array(False)))[0]\n'
             '\n'
             '    @jax.custom_vjp\n'
             '    def solve(theta, x_init):\n'
             '        return iterate(lambda x: f(theta, x), x_init)\n'
             '\n'
             '    def solve_fwd(theta, x_init):\n'
             '        x_star = solve(theta, x_init)\n'
             '        return x_star, (theta, x_star)\n'
             '\n'
             '    def solve_bwd(residuals, x_bar):\n'
             '        theta, x_star = residuals\n'
             '        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n'
             '        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n'
             '        w = iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n'
             '        (theta_bar,) = vjp_theta(w)\n'
             '        return theta_bar, jnp.zeros_like(x_star)\n'
             '\n'
             '    solve.defvjp(solve_fwd, solve_bwd)\n'
             '    return solve(theta, x_init)\n'),
            ("a plain while_loop: reverse-mode differentiation raises",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def cond(c):\n"
             "        return jnp.max(jnp.abs(c[1] - c[0])) > 1e-6\n"
             "    return lax.while_loop(cond, lambda c: (c[1], f(theta, c[1])), (x_init, f(theta, x_init)))[1]\n"),
            ("20 iterations with fori_loop: differentiable, but not converged for a slow contraction",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    return lax.fori_loop(0, 20, lambda i, x: f(theta, x), x_init)\n"),
            ("the backward pass keeps only the direct term (df/dtheta)^T x_bar",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def run(theta, x0):\n"
             "        cond = lambda c: (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
             "        return lax.while_loop(cond, lambda c: (c[1], f(theta, c[1]), c[2] + 1),\n"
             "                              (x0, f(theta, x0), 1))[1]\n"
             "    solve = jax.custom_vjp(run)\n"
             "    def fwd(theta, x0):\n"
             "        x_star = run(theta, x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        return vjp_theta(x_bar)[0], jnp.zeros_like(x_star)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ("the backward pass linearizes f at x_init instead of at x*",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def iterate(g, x0):\n"
             "        cond = lambda c: (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
             "        return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
             "    solve = jax.custom_vjp(lambda theta, x0: iterate(lambda x: f(theta, x), x0))\n"
             "    def fwd(theta, x0):\n"
             "        return iterate(lambda x: f(theta, x), x0), (theta, x0)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x0 = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x0), theta)\n"
             "        _, vjp_x = jax.vjp(lambda x: f(theta, x), x0)\n"
             "        w = iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n"
             "        return vjp_theta(w)[0], jnp.zeros_like(x0)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ("the adjoint iteration uses df/dx (a JVP) instead of its transpose",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def iterate(g, x0):\n"
             "        cond = lambda c: (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
             "        return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
             "    solve = jax.custom_vjp(lambda theta, x0: iterate(lambda x: f(theta, x), x0))\n"
             "    def fwd(theta, x0):\n"
             "        x_star = iterate(lambda x: f(theta, x), x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        jvp_x = lambda w: jax.jvp(lambda x: f(theta, x), (x_star,), (w,))[1]\n"
             "        w = iterate(lambda w: x_bar + jvp_x(w), x_bar)\n"
             "        return vjp_theta(w)[0], jnp.zeros_like(x_star)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ("passes the cotangent on to x_init: x* does not depend on the start",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def iterate(g, x0):\n"
             "        cond = lambda c: (jnp.max(jnp.abs(c[1] - c[0])) > 1e-6) & (c[2] < 1000)\n"
             "        return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
             "    solve = jax.custom_vjp(lambda theta, x0: iterate(lambda x: f(theta, x), x0))\n"
             "    def fwd(theta, x0):\n"
             "        x_star = iterate(lambda x: f(theta, x), x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n"
             "        w = iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n"
             "        return vjp_theta(w)[0], w\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ("stops at a change of 1e-5, not 1e-6: not converged as far as the text asks",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def iterate(g, x0):\n"
             "        cond = lambda c: (jnp.max(jnp.abs(c[1] - c[0])) > 1e-5) & (c[2] < 1000)\n"
             "        return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
             "    solve = jax.custom_vjp(lambda theta, x0: iterate(lambda x: f(theta, x), x0))\n"
             "    def fwd(theta, x0):\n"
             "        x_star = iterate(lambda x: f(theta, x), x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n"
             "        w = iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n"
             "        return vjp_theta(w)[0], jnp.zeros_like(x_star)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
            ("no cap of 1000 applications of f: a map that never settles runs on",
             "def implicit_fixed_point(f, theta, x_init):\n"
             "    def iterate(g, x0):\n"
             "        cond = lambda c: jnp.max(jnp.abs(c[1] - c[0])) > 1e-6\n"
             "        return lax.while_loop(cond, lambda c: (c[1], g(c[1]), c[2] + 1), (x0, g(x0), 1))[1]\n"
             "    solve = jax.custom_vjp(lambda theta, x0: iterate(lambda x: f(theta, x), x0))\n"
             "    def fwd(theta, x0):\n"
             "        x_star = iterate(lambda x: f(theta, x), x0)\n"
             "        return x_star, (theta, x_star)\n"
             "    def bwd(res, x_bar):\n"
             "        theta, x_star = res\n"
             "        _, vjp_theta = jax.vjp(lambda t: f(t, x_star), theta)\n"
             "        _, vjp_x = jax.vjp(lambda x: f(theta, x), x_star)\n"
             "        w = iterate(lambda w: x_bar + vjp_x(w)[0], x_bar)\n"
             "        return vjp_theta(w)[0], jnp.zeros_like(x_star)\n"
             "    solve.defvjp(fwd, bwd)\n"
             "    return solve(theta, x_init)\n"),
        ],
    },
    "08_autodiff_remat_every": {
        "correct": [
            # A Python loop over the groups; each checkpointed group runs its blocks in a
            # Python loop (the last group's slice is shorter by itself).
            "def remat_every(params, x, k):\n"
            "    L = params['w1'].shape[0]\n"
            "    def group(h, layers):\n"
            "        for i in range(layers['w1'].shape[0]):\n"
            "            h, _ = block(h, {'w1': layers['w1'][i], 'w2': layers['w2'][i]})\n"
            "        return h\n"
            "    h = x\n"
            "    for start in range(0, L, k):\n"
            "        h = jax.checkpoint(group)(h, jax.tree.map(lambda p: p[start:start + k], params))\n"
            "    return jnp.mean(h ** 2)\n",
            # Two levels: each group checkpointed, and each block inside it too.
            "def remat_every(params, x, k):\n"
            "    L = params['w1'].shape[0]\n"
            "    n = L // k\n"
            "    def group(h, layers):\n"
            "        return lax.scan(jax.checkpoint(block), h, layers)[0], None\n"
            "    group = jax.remat(group, prevent_cse=False)\n"
            "    full = {name: p[:n * k].reshape((n, k) + p.shape[1:]) for name, p in params.items()}\n"
            "    h, _ = lax.scan(group, x, full)\n"
            "    if L % k:\n"
            "        h, _ = group(h, {name: p[n * k:] for name, p in params.items()})\n"
            "    return jnp.mean(jnp.square(h))\n",
            # A fori_loop over the group indices, each group sliced with dynamic_slice.
            "def remat_every(params, x, k):\n"
            "    L = params['w1'].shape[0]\n"
            "    @jax.checkpoint\n"
            "    def group(h, layers):\n"
            "        return lax.scan(block, h, layers)[0]\n"
            "    def body(g, h):\n"
            "        return group(h, jax.tree.map(lambda p: lax.dynamic_slice_in_dim(p, g * k, k), params))\n"
            "    h = lax.fori_loop(0, L // k, body, x)\n"
            "    if L % k:\n"
            "        h = group(h, jax.tree.map(lambda p: p[L - L % k:], params))\n"
            "    return jnp.sum(h * h) / h.size\n",
        ],
        "wrong": [
            ("zero blocks appended to fill the last group: the last group is not shorter, and 9 blocks run for 7 (a zero block passes h through only because of this block's form)",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    G = -(-L // k)\n"
             "    def pad(p):\n"
             "        zeros = jnp.zeros((G * k - L,) + p.shape[1:], p.dtype)\n"
             "        return jnp.concatenate([p, zeros]).reshape((G, k) + p.shape[1:])\n"
             "    body = jax.checkpoint(lambda h, layers: (lax.scan(block, h, layers)[0], None))\n"
             "    h, _ = lax.scan(body, x, jax.tree.map(pad, params))\n"
             "    return jnp.vdot(h, h) / h.size\n"),
            ("checkpoints every block (section 5.2's answer): keeps the input of every block",
             "def remat_every(params, x, k):\n"
             "    h, _ = lax.scan(jax.checkpoint(block), x, params)\n"
             "    return jnp.mean(h ** 2)\n"),
            ("groups without a checkpoint: every block's activations are kept",
             "def remat_every(params, x, k):\n"
             "    h = x\n"
             "    for start in range(0, params['w1'].shape[0], k):\n"
             "        h, _ = lax.scan(block, h, jax.tree.map(lambda p: p[start:start + k], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("checkpoints the whole loss: keeps only x, and the backward pass keeps everything",
             "def remat_every(params, x, k):\n"
             "    return jax.checkpoint(stack_loss)(params, x)\n"),
            ("k groups of L // k blocks instead of groups of k blocks",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    size = -(-L // k)\n"
             "    h = x\n"
             "    for start in range(0, L, size):\n"
             "        h, _ = jax.checkpoint(lambda h, ps: lax.scan(block, h, ps))(h, jax.tree.map(lambda p: p[start:start + size], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the shorter group first: the groups start at blocks 0, L % k, L % k + k, ...",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    starts = sorted({0} | set(range(L % k, L, k)))\n"
             "    def group(h, layers):\n"
             "        for i in range(layers['w1'].shape[0]):\n"
             "            h, _ = block(h, {'w1': layers['w1'][i], 'w2': layers['w2'][i]})\n"
             "        return h\n"
             "    h = x\n"
             "    for a, b in zip(starts, starts[1:] + [L]):\n"
             "        h = jax.checkpoint(group)(h, jax.tree.map(lambda p: p[a:b], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the blocks left over when k does not divide L are not checkpointed",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    n = L // k\n"
             "    body = jax.checkpoint(lambda h, layers: (lax.scan(block, h, layers)[0], None))\n"
             "    h, _ = lax.scan(body, x, jax.tree.map(lambda p: p[:n * k].reshape((n, k) + p.shape[1:]), params))\n"
             "    h, _ = lax.scan(block, h, jax.tree.map(lambda p: p[n * k:], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the blocks left over when k does not divide L are dropped",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    n = L // k\n"
             "    body = jax.checkpoint(lambda h, layers: (lax.scan(block, h, layers)[0], None))\n"
             "    h, _ = lax.scan(body, x, jax.tree.map(lambda p: p[:n * k].reshape((n, k) + p.shape[1:]), params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the blocks left over are added to the last full group, which is then longer",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    starts = list(range(0, L - L % k, k)) if L >= k else [0]\n"
             "    def group(h, layers):\n"
             "        for i in range(layers['w1'].shape[0]):\n"
             "            h, _ = block(h, {'w1': layers['w1'][i], 'w2': layers['w2'][i]})\n"
             "        return h\n"
             "    h = x\n"
             "    for a, b in zip(starts, starts[1:] + [L]):\n"
             "        h = jax.checkpoint(group)(h, jax.tree.map(lambda p: p[a:b], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the dots policy on each group: the pre-activations of every block are saved",
             "def remat_every(params, x, k):\n"
             "    h = x\n"
             "    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable\n"
             "    for start in range(0, params['w1'].shape[0], k):\n"
             "        h, _ = jax.checkpoint(lambda h, ps: lax.scan(block, h, ps), policy=policy)(\n"
             "            h, jax.tree.map(lambda p: p[start:start + k], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("w2 behind lax.stop_gradient: the value and the groups are right, the gradient "
             "for w2 is zero",
             "def remat_every(params, x, k):\n"
             "    def group(h, layers):\n"
             "        for i in range(layers['w1'].shape[0]):\n"
             "            h, _ = block(h, {'w1': layers['w1'][i], 'w2': lax.stop_gradient(layers['w2'][i])})\n"
             "        return h\n"
             "    h = x\n"
             "    for start in range(0, params['w1'].shape[0], k):\n"
             "        h = jax.checkpoint(group)(h, jax.tree.map(lambda p: p[start:start + k], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("each group a lax.scan of its own in an unrolled Python loop: on the CPU backend the "
             "compiled gradient needs about as much memory as without checkpointing",
             "def remat_every(params, x, k):\n"
             "    group = jax.checkpoint(lambda h, layers: lax.scan(block, h, layers)[0])\n"
             "    h = x\n"
             "    for start in range(0, params['w1'].shape[0], k):\n"
             "        h = group(h, jax.tree.map(lambda p: p[start:start + k], params))\n"
             "    return jnp.mean(h ** 2)\n"),
            ("the shorter last group checkpointed block by block, not as one group: it keeps "
             "the input of every block in it",
             "def remat_every(params, x, k):\n"
             "    L = params['w1'].shape[0]\n"
             "    n = L // k\n"
             "    @jax.checkpoint\n"
             "    def group(h, layers):\n"
             "        return lax.scan(block, h, layers)[0], None\n"
             "    full = jax.tree.map(lambda p: p[:n * k].reshape((n, k) + p.shape[1:]), params)\n"
             "    h, _ = lax.scan(group, x, full)\n"
             "    h, _ = lax.scan(jax.checkpoint(block), h, jax.tree.map(lambda p: p[n * k:], params))\n"
             "    return jnp.mean(h ** 2)\n"),
        ],
    },
    "08_autodiff_save_only": {
        "correct": [
            "def save_only(primitive_names=(), names=()):\n"
            "    def policy(prim, *_, **params):\n"
            "        return prim.name in primitive_names or (\n"
            "            prim.name == 'name' and params.get('name') in names)\n"
            "    return policy\n",
            # The library's combinator over a tag policy and a primitive policy.
            "def save_only(primitive_names=(), names=()):\n"
            "    by_primitive = lambda prim, *avals, **params: prim.name in set(primitive_names)\n"
            "    return jax.checkpoint_policies.save_from_both_policies(\n"
            "        jax.checkpoint_policies.save_only_these_names(*names), by_primitive)\n",
        ],
        "wrong": [
            ("compares the Primitive object with the names: no primitive is ever saved",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        if prim.name == 'name':\n"
             "            return params['name'] in names\n"
             "        return prim in primitive_names\n"
             "    return policy\n"),
            ("ignores the tags: values named with checkpoint_name are recomputed",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        return prim.name in primitive_names\n"
             "    return policy\n"),
            ("looks for the tags among the primitives' names: the tag is params['name'] of the "
             "primitive 'name'",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        return prim.name in primitive_names or prim.name in names\n"
             "    return policy\n"),
            ("saves every tagged value, whatever its tag",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        return prim.name == 'name' or prim.name in primitive_names\n"
             "    return policy\n"),
            ("inverted: saves everything except what was named",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        if prim.name == 'name':\n"
             "            return params['name'] not in names\n"
             "        return prim.name not in primitive_names\n"
             "    return policy\n"),
            ("names matched as substrings: 'pow' also saves integer_pow, 'pr' the 'pre' tag",
             "def save_only(primitive_names=(), names=()):\n"
             "    def policy(prim, *avals, **params):\n"
             "        if prim.name == 'name':\n"
             "            return any(n in params['name'] for n in names)\n"
             "        return any(p in prim.name for p in primitive_names)\n"
             "    return policy\n"),
        ],
    },
    "08_autodiff_pytree_dataclass": {
        "correct": [
            # A fast flatten beside the keyed one; data, then meta, set field by field.
            "def pytree_dataclass(cls, meta_fields=()):\n"
            "    data = [f.name for f in dataclasses.fields(cls) if f.name not in meta_fields]\n"
            "    meta = tuple(meta_fields)\n"
            "    def flatten(obj):\n"
            "        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)\n"
            "    def flatten_with_keys(obj):\n"
            "        keyed = [(jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data]\n"
            "        return keyed, tuple(getattr(obj, n) for n in meta)\n"
            "    def unflatten(aux, children):\n"
            "        obj = cls.__new__(cls)\n"
            "        for n, value in zip(data, children):\n"
            "            object.__setattr__(obj, n, value)\n"
            "        for n, value in zip(meta, aux):\n"
            "            object.__setattr__(obj, n, value)\n"
            "        return obj\n"
            "    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten,\n"
            "                                            flatten_func=flatten)\n"
            "    return cls\n",
            # Meta fields kept as (name, value) pairs in the aux data.
            "def pytree_dataclass(cls, meta_fields=()):\n"
            "    fields = dataclasses.fields(cls)\n"
            "    data = [f.name for f in fields if f.name not in meta_fields]\n"
            "    def flatten_with_keys(obj):\n"
            "        aux = tuple((n, getattr(obj, n)) for n in meta_fields)\n"
            "        return tuple((jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data), aux\n"
            "    def unflatten(aux, children):\n"
            "        obj = object.__new__(cls)\n"
            "        values = dict(zip(data, children))\n"
            "        values.update(aux)\n"
            "        for n, value in values.items():\n"
            "            object.__setattr__(obj, n, value)\n"
            "        return obj\n"
            "    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten)\n"
            "    return cls\n",
        ],
        "wrong": [
            ("register_dataclass: the leaves are named, but unflatten calls the class and "
             "__post_init__ refuses the tracers of jax.grad",
             "def pytree_dataclass(cls, meta_fields=()):\n"
             "    data = [f.name for f in dataclasses.fields(cls) if f.name not in meta_fields]\n"
             "    return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=list(meta_fields))\n"),
            ("keys right, but unflatten calls the class: __post_init__ runs on tracers",
             "def pytree_dataclass(cls, meta_fields=()):\n"
             "    data = [f.name for f in dataclasses.fields(cls) if f.name not in meta_fields]\n"
             "    def flatten_with_keys(obj):\n"
             "        keyed = [(jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data]\n"
             "        return keyed, tuple(getattr(obj, n) for n in meta_fields)\n"
             "    def unflatten(aux, children):\n"
             "        return cls(**dict(zip(data, children)), **dict(zip(meta_fields, aux)))\n"
             "    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten)\n"
             "    return cls\n"),
            ("register_pytree_node without keys: the leaves' paths are flat indices, not .w and .b",
             "def pytree_dataclass(cls, meta_fields=()):\n"
             "    data = [f.name for f in dataclasses.fields(cls) if f.name not in meta_fields]\n"
             "    def flatten(obj):\n"
             "        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta_fields)\n"
             "    def unflatten(aux, children):\n"
             "        obj = object.__new__(cls)\n"
             "        for n, value in zip(list(data) + list(meta_fields), list(children) + list(aux)):\n"
             "            object.__setattr__(obj, n, value)\n"
             "        return obj\n"
             "    jax.tree_util.register_pytree_node(cls, flatten, unflatten)\n"
             "    return cls\n"),
            ("unflatten sets only the data fields: a meta field reads the class default",
             "def pytree_dataclass(cls, meta_fields=()):\n"
             "    data = [f.name for f in dataclasses.fields(cls) if f.name not in meta_fields]\n"
             "    def flatten_with_keys(obj):\n"
             "        keyed = [(jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data]\n"
             "        return keyed, None\n"
             "    def unflatten(aux, children):\n"
             "        obj = object.__new__(cls)\n"
             "        for n, value in zip(data, children):\n"
             "            object.__setattr__(obj, n, value)\n"
             "        return obj\n"
             "    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten)\n"
             "    return cls\n"),
            ("unflatten zips the children and the aux data with all the fields in declaration "
             "order: a meta field declared between data fields gets a data field's value",
             "def pytree_dataclass(cls, meta_fields=()):\n"
             "    names = [f.name for f in dataclasses.fields(cls)]\n"
             "    data = [n for n in names if n not in meta_fields]\n"
             "    def flatten_with_keys(obj):\n"
             "        keyed = [(jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in data]\n"
             "        return keyed, tuple(getattr(obj, n) for n in meta_fields)\n"
             "    def unflatten(aux, children):\n"
             "        obj = object.__new__(cls)\n"
             "        for n, value in zip(names, list(children) + list(aux)):\n"
             "            object.__setattr__(obj, n, value)\n"
             "        return obj\n"
             "    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten)\n"
             "    return cls\n"),
        ],
    },
}
