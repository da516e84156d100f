"""Alternative correct answers and realistic wrong answers for 02_vmap, keyed by grade_id.

Each code string replaces the whole solution cell; the notebook's lesson cells have
already defined jax, jnp, predict, embed, weighted_xent, distance, example_loss, mse
and sgd_step. Wrong answers come with the reason they are wrong; each must cost
exactly its own exercise. tests/test_exercises.py grades every one of them, in the
student's kernel and through the grader.
"""

VARIANTS = {
    "02_vmap_batched_predict": {
        "correct": [
            "def batched_predict(params, xs):\n"
            "    return jax.vmap(lambda x: predict(params, x))(xs)\n",
            "def batched_predict(params, xs):\n"
            "    mu = jnp.mean(xs, axis=1, keepdims=True)\n"
            "    sd = jnp.std(xs, axis=1, keepdims=True)\n"
            "    return ((xs - mu) / (sd + 1e-6)) @ params['w'] + params['b']\n",
            "def batched_predict(params, xs):\n"
            "    return jnp.vectorize(lambda x: predict(params, x), signature='(d)->()')(xs)\n",
        ],
        "wrong": [
            ("a Python loop over the examples instead of vmap",
             "def batched_predict(params, xs):\n"
             "    return jnp.stack([predict(params, x) for x in xs])\n"),
            ("predict called on the whole batch: normalized with statistics of all examples",
             "def batched_predict(params, xs):\n"
             "    return predict(params, xs)\n"),
            ("in_axes=0 also maps the parameters (the scalar b has no axis 0)",
             "def batched_predict(params, xs):\n"
             "    return jax.vmap(predict, in_axes=0)(params, xs)\n"),
            ("lax.map: a sequential scan over the examples",
             "def batched_predict(params, xs):\n"
             "    return jax.lax.map(lambda x: predict(params, x), xs)\n"),
            ("uses the notebook's global params, not its argument (the visible test passes them)",
             "def batched_predict(p, xs):\n"
             "    return jax.vmap(predict, in_axes=(None, 0))(params, xs)\n"),
            ("by hand, but normalizes over axis 0: statistics of the batch, not of each example",
             "def batched_predict(params, xs):\n"
             "    mu = jnp.mean(xs, axis=0)\n"
             "    sd = jnp.std(xs, axis=0)\n"
             "    return ((xs - mu) / (sd + 1e-6)) @ params['w'] + params['b']\n"),
            ("squeezes the result: a batch of one example becomes a scalar",
             "def batched_predict(params, xs):\n"
             "    return jnp.squeeze(jax.vmap(predict, in_axes=(None, 0))(params, xs))\n"),
        ],
    },
    "02_vmap_embed_columns": {
        "correct": [
            "def embed_columns(W, xs_cols):\n"
            "    return jax.vmap(embed, in_axes=(None, 0))(W, xs_cols.T).T\n",
            "def embed_columns(W, xs_cols):\n"
            "    mu = xs_cols.mean(axis=0)\n"
            "    sd = xs_cols.std(axis=0)\n"
            "    return jnp.tanh(W @ ((xs_cols - mu) / (sd + 1e-6)))\n",
        ],
        "wrong": [
            ("out_axes left at 0: the result is (n, k) instead of (k, n)",
             "def embed_columns(W, xs_cols):\n"
             "    return jax.vmap(embed, in_axes=(None, 1))(W, xs_cols)\n"),
            ("embed called on the whole matrix: one normalization for all columns",
             "def embed_columns(W, xs_cols):\n"
             "    return embed(W, xs_cols)\n"),
            ("a Python loop over the columns",
             "def embed_columns(W, xs_cols):\n"
             "    cols = [embed(W, xs_cols[:, i]) for i in range(xs_cols.shape[1])]\n"
             "    return jnp.stack(cols, axis=1)\n"),
            ("in_axes=(None, 0): maps over the rows (features) instead of the columns",
             "def embed_columns(W, xs_cols):\n"
             "    return jax.vmap(embed, in_axes=(None, 0), out_axes=1)(W, xs_cols)\n"),
            ("by hand, but normalizes each row (over the examples) instead of each column",
             "def embed_columns(W, xs_cols):\n"
             "    mu = xs_cols.mean(axis=1, keepdims=True)\n"
             "    sd = xs_cols.std(axis=1, keepdims=True)\n"
             "    return jnp.tanh(W @ ((xs_cols - mu) / (sd + 1e-6)))\n"),
        ],
    },
    "02_vmap_batched_weighted_xent": {
        "correct": [
            "def batched_weighted_xent(params, batch):\n"
            "    def one(x, y):\n"
            "        return weighted_xent(params, {'x': x, 'y': y,\n"
            "                                      'class_weights': batch['class_weights']})\n"
            "    return jax.vmap(one)(batch['x'], batch['y'])\n",
            "def batched_weighted_xent(params, batch):\n"
            "    x, y, cw = batch['x'], batch['y'], batch['class_weights']\n"
            "    xn = (x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)\n"
            "    logits = xn @ params['W'].T + params['b']\n"
            "    picked = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]\n"
            "    return cw[y] * (jax.nn.logsumexp(logits, axis=1) - picked)\n",
            "def batched_weighted_xent(params, batch):\n"
            "    n = batch['x'].shape[0]\n"
            "    tiled = dict(batch, class_weights=jnp.broadcast_to(\n"
            "        batch['class_weights'], (n,) + batch['class_weights'].shape))\n"
            "    return jax.vmap(weighted_xent, in_axes=(None, 0))(params, tiled)\n",
        ],
        "wrong": [
            ("in_axes=(None, 0) maps class_weights too: its axis is the classes, not the batch",
             "def batched_weighted_xent(params, batch):\n"
             "    return jax.vmap(weighted_xent, in_axes=(None, 0))(params, batch)\n"),
            ("a Python loop over the examples",
             "def batched_weighted_xent(params, batch):\n"
             "    out = []\n"
             "    for i in range(batch['x'].shape[0]):\n"
             "        ex = {'x': batch['x'][i], 'y': batch['y'][i],\n"
             "              'class_weights': batch['class_weights']}\n"
             "        out.append(weighted_xent(params, ex))\n"
             "    return jnp.stack(out)\n"),
            ("class weights ignored: plain cross-entropy",
             "def batched_weighted_xent(params, batch):\n"
             "    def one(x, y):\n"
             "        ones = jnp.ones_like(batch['class_weights'])\n"
             "        return weighted_xent(params, {'x': x, 'y': y, 'class_weights': ones})\n"
             "    return jax.vmap(one)(batch['x'], batch['y'])\n"),
            ("one_hot with the notebook's 3 classes hard-coded",
             "def batched_weighted_xent(params, batch):\n"
             "    x = batch['x']\n"
             "    xn = (x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)\n"
             "    logits = xn @ params['W'].T + params['b']\n"
             "    onehot = jax.nn.one_hot(batch['y'], 3)\n"
             "    nll = jax.nn.logsumexp(logits, axis=1) - jnp.sum(onehot * logits, axis=1)\n"
             "    return batch['class_weights'][batch['y']] * nll\n"),
            ("a naive log(sum(exp(logits))): overflows to inf for large logits",
             "def batched_weighted_xent(params, batch):\n"
             "    def one(x, y):\n"
             "        logits = params['W'] @ normalize(x) + params['b']\n"
             "        nll = jnp.log(jnp.sum(jnp.exp(logits))) - logits[y]\n"
             "        return batch['class_weights'][y] * nll\n"
             "    return jax.vmap(one)(batch['x'], batch['y'])\n"),
            ("squeezes the result: a batch of one example becomes a scalar",
             "def batched_weighted_xent(params, batch):\n"
             "    axes = {'x': 0, 'y': 0, 'class_weights': None}\n"
             "    return jax.vmap(weighted_xent, in_axes=(None, axes))(params, batch).squeeze()\n"),
        ],
    },
    "02_vmap_pairwise_distances": {
        "correct": [
            "def pairwise_distances(a, b):\n"
            "    return jnp.sqrt(jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1))\n",
            "def pairwise_distances(a, b):\n"
            "    return jax.vmap(lambda u: jax.vmap(lambda v: jnp.linalg.norm(u - v))(b))(a)\n",
            "def pairwise_distances(a, b):\n"
            "    return jax.vmap(lambda u: jnp.sqrt(jnp.sum((u - b) ** 2, axis=1)))(a)\n",
        ],
        "wrong": [
            ("nesting swapped: the result is (m, n), rows follow b",
             "def pairwise_distances(a, b):\n"
             "    inner = jax.vmap(distance, in_axes=(0, None))\n"
             "    return jax.vmap(inner, in_axes=(None, 0))(a, b)\n"),
            ("a double Python loop over the pairs",
             "def pairwise_distances(a, b):\n"
             "    return jnp.stack([jnp.stack([distance(u, v) for v in b]) for u in a])\n"),
            ("squared distances: the square root is missing",
             "def pairwise_distances(a, b):\n"
             "    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)\n"),
            ("vmap over a, but a Python loop over b",
             "def pairwise_distances(a, b):\n"
             "    return jax.vmap(lambda u: jnp.stack([distance(u, v) for v in b]))(a)\n"),
            ("the expansion |u|^2 + |v|^2 - 2 u.v: rounding turns coincident points into > 0",
             "def pairwise_distances(a, b):\n"
             "    sq = jnp.sum(a ** 2, 1)[:, None] + jnp.sum(b ** 2, 1)[None, :] - 2 * a @ b.T\n"
             "    return jnp.sqrt(jnp.maximum(sq, 0.0))\n"),
        ],
    },
    "02_vmap_per_example_grads": {
        "correct": [
            "def per_example_grads(params, xs, ys):\n"
            "    return jax.vmap(lambda x, y: jax.grad(example_loss)(params, x, y))(xs, ys)\n",
            "def per_example_grads(params, xs, ys):\n"
            "    losses = lambda p: jax.vmap(example_loss, in_axes=(None, 0, 0))(p, xs, ys)\n"
            "    return jax.jacrev(losses)(params)\n",
        ],
        "wrong": [
            ("jax.grad of the batch loss: one averaged gradient, no per-example axis",
             "def per_example_grads(params, xs, ys):\n"
             "    def batch_loss(p):\n"
             "        return jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(p, xs, ys))\n"
             "    return jax.grad(batch_loss)(params)\n"),
            ("a Python loop over the examples, then stacked",
             "def per_example_grads(params, xs, ys):\n"
             "    grads = [jax.grad(example_loss)(params, x, y) for x, y in zip(xs, ys)]\n"
             "    return jax.tree.map(lambda *g: jnp.stack(g), *grads)\n"),
            ("gradient with respect to x (argnums=1) instead of params",
             "def per_example_grads(params, xs, ys):\n"
             "    g = jax.grad(example_loss, argnums=1)\n"
             "    return jax.vmap(g, in_axes=(None, 0, 0))(params, xs, ys)\n"),
            ("in_axes=0 maps params too (the scalar b has no axis 0)",
             "def per_example_grads(params, xs, ys):\n"
             "    return jax.vmap(jax.grad(example_loss))(params, xs, ys)\n"),
            ("uses the notebook's global params, not its argument (the visible test passes them)",
             "def per_example_grads(p, xs, ys):\n"
             "    return jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)\n"),
        ],
    },
    "02_vmap_ensemble_sgd_step": {
        "correct": [
            "def ensemble_sgd_step(params, x, y, lr):\n"
            "    return jax.vmap(lambda p: sgd_step(p, x, y, lr))(params)\n",
            "def ensemble_sgd_step(params, x, y, lr):\n"
            "    # The models are independent: the gradient of the summed losses with\n"
            "    # respect to model i is the gradient of model i's own loss.\n"
            "    total = lambda P: jnp.sum(jax.vmap(mse, in_axes=(0, None, None))(P, x, y))\n"
            "    grads = jax.grad(total)(params)\n"
            "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n",
        ],
        "wrong": [
            ("a Python loop over the models, then stacked",
             "def ensemble_sgd_step(params, x, y, lr):\n"
             "    k = params['w'].shape[0]\n"
             "    new = [sgd_step(jax.tree.map(lambda l: l[i], params), x, y, lr) for i in range(k)]\n"
             "    return jax.tree.map(lambda *ls: jnp.stack(ls), *new)\n"),
            ("gradient of the mean ensemble loss: every step shrunk by 1/k",
             "def ensemble_sgd_step(params, x, y, lr):\n"
             "    mean = lambda P: jnp.mean(jax.vmap(mse, in_axes=(0, None, None))(P, x, y))\n"
             "    grads = jax.grad(mean)(params)\n"
             "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"),
            ("in_axes=0 maps the shared data and the learning rate too",
             "def ensemble_sgd_step(params, x, y, lr):\n"
             "    return jax.vmap(sgd_step)(params, x, y, lr)\n"),
            ("lr ignored: the 0.1 of the example is hard-coded",
             "def ensemble_sgd_step(params, x, y, lr):\n"
             "    return jax.vmap(sgd_step, in_axes=(0, None, None, None))(params, x, y, 0.1)\n"),
            ("steps uphill: params + lr * grads",
             "def ensemble_sgd_step(params, x, y, lr):\n"
             "    grads = jax.vmap(jax.grad(mse), in_axes=(0, None, None))(params, x, y)\n"
             "    return jax.tree.map(lambda p, g: p + lr * g, params, grads)\n"),
        ],
    },
    "02_vmap_huber": {
        "correct": [
            "def huber(r, delta=1.0):\n"
            "    a = jnp.abs(r)\n"
            "    q = jnp.minimum(a, delta)\n"
            "    return 0.5 * q ** 2 + delta * (a - q)\n",
            "def huber(r, delta=1.0):\n"
            "    return jax.lax.cond(jnp.abs(r) <= delta,\n"
            "                        lambda: 0.5 * r ** 2,\n"
            "                        lambda: delta * (jnp.abs(r) - 0.5 * delta))\n",
        ],
        "wrong": [
            ("a Python if on the residual: fails under vmap",
             "def huber(r, delta=1.0):\n"
             "    if abs(r) <= delta:\n"
             "        return 0.5 * r ** 2\n"
             "    return delta * (abs(r) - 0.5 * delta)\n"),
            ("jnp.where with the branches swapped",
             "def huber(r, delta=1.0):\n"
             "    a = jnp.abs(r)\n"
             "    return jnp.where(a > delta, 0.5 * r ** 2, delta * (a - 0.5 * delta))\n"),
            ("float() on the residual: a concrete value is needed while tracing",
             "def huber(r, delta=1.0):\n"
             "    if float(jnp.abs(r)) <= delta:\n"
             "        return 0.5 * r ** 2\n"
             "    return delta * (abs(r) - 0.5 * delta)\n"),
            ("linear branch without the -delta/2 offset: the loss jumps at |r| = delta",
             "def huber(r, delta=1.0):\n"
             "    a = jnp.abs(r)\n"
             "    return jnp.where(a <= delta, 0.5 * r ** 2, delta * a)\n"),
            ("delta ignored: the threshold and the slope are always 1",
             "def huber(r, delta=1.0):\n"
             "    a = jnp.abs(r)\n"
             "    return jnp.where(a <= 1.0, 0.5 * r ** 2, a - 0.5)\n"),
            ("default delta 2.0 instead of the 1.0 of the contract",
             "def huber(r, delta=2.0):\n"
             "    a = jnp.abs(r)\n"
             "    return jnp.where(a <= delta, 0.5 * r ** 2, delta * (a - 0.5 * delta))\n"),
        ],
    },
}
