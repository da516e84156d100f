"""Alternative correct answers and realistic wrong answers for 04_prng, keyed by grade_id.

Each code string replaces the whole solution cell (the notebook has imported jax,
jax.numpy as jnp and numpy as np before). Wrong answers come with the reason they
are wrong; each must cost exactly its own exercise.
"""

VARIANTS = {
    "04_prng_make_keys": {
        "correct": [
            # fold_in an index instead of splitting: also distinct, also seed-specific.
            "def make_keys(seed, n):\n"
            "    base = jax.random.key(seed)\n"
            "    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(n))\n",
            # A deep chain of splits: valid keys, only less efficient.
            "def make_keys(seed, n):\n"
            "    key = jax.random.key(seed)\n"
            "    keys = []\n"
            "    for _ in range(n):\n"
            "        key, sub = jax.random.split(key)\n"
            "        keys.append(sub)\n"
            "    return jnp.stack(keys)\n",
        ],
        "wrong": [
            ("key i from seed + i: seed 3's second key is seed 4's first",
             "def make_keys(seed, n):\n"
             "    return jnp.stack([jax.random.key(seed + i) for i in range(n)])\n"),
            ("legacy raw uint32 keys from jax.random.PRNGKey",
             "def make_keys(seed, n):\n"
             "    return jax.random.split(jax.random.PRNGKey(seed), n)\n"),
            ("ignores the seed: the same keys for every seed",
             "def make_keys(seed, n):\n"
             "    return jax.random.split(jax.random.key(0), n)\n"),
            ("ignores n: always 8 keys (the visible test asks for 8)",
             "def make_keys(seed, n):\n"
             "    return jax.random.split(jax.random.key(seed), 8)\n"),
            ("raw key data instead of typed keys",
             "def make_keys(seed, n):\n"
             "    return jax.random.key_data(jax.random.split(jax.random.key(seed), n))\n"),
            ("n copies of one key: not n different keys",
             "def make_keys(seed, n):\n"
             "    return jnp.broadcast_to(jax.random.key(seed), (n,))\n"),
        ],
    },
    "04_prng_example_keys": {
        "correct": [
            "def example_keys(key, ids):\n"
            "    return jnp.stack([jax.random.fold_in(key, i) for i in ids])\n",
            "def example_keys(key, ids):\n"
            "    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, ids)\n",
        ],
        "wrong": [
            ("keys by position: split(key, len(ids)) ignores the ids",
             "def example_keys(key, ids):\n"
             "    return jax.random.split(key, ids.shape[0])\n"),
            ("ignores the key: jax.random.key(id) gives every run the same keys",
             "def example_keys(key, ids):\n"
             "    return jax.vmap(jax.random.key)(ids)\n"),
            ("folds in the position in the batch, not the id",
             "def example_keys(key, ids):\n"
             "    return jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(ids.shape[0]))\n"),
            ("splits the run's key first: consumes it, so the next batch reuses it",
             "def example_keys(key, ids):\n"
             "    base, _ = jax.random.split(key)\n"
             "    return jax.vmap(lambda i: jax.random.fold_in(base, i))(ids)\n"),
            ("folds in the first id, then splits by position",
             "def example_keys(key, ids):\n"
             "    return jax.random.split(jax.random.fold_in(key, ids[0]), ids.shape[0])\n"),
        ],
    },
    "04_prng_init_mlp": {
        "correct": [
            "def init_mlp(key, sizes):\n"
            "    params = []\n"
            "    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):\n"
            "        w = jax.random.normal(jax.random.fold_in(key, i), (m, n)) * (1.0 / m) ** 0.5\n"
            "        params.append({'w': w, 'b': jnp.zeros((n,))})\n"
            "    return params\n",
            # A deep chain and JAX's own LeCun initializer (a truncated normal, variance 1/fan_in).
            "def init_mlp(key, sizes):\n"
            "    init = jax.nn.initializers.lecun_normal()\n"
            "    params = []\n"
            "    for m, n in zip(sizes[:-1], sizes[1:]):\n"
            "        key, sub = jax.random.split(key)\n"
            "        params.append({'w': init(sub, (m, n), jnp.float32), 'b': jnp.zeros(n, jnp.float32)})\n"
            "    return params\n",
        ],
        "wrong": [
            ("the same key for every layer (key reuse)",
             "def init_mlp(key, sizes):\n"
             "    return [{'w': jax.random.normal(key, (m, n)) / jnp.sqrt(m), 'b': jnp.zeros(n)}\n"
             "            for m, n in zip(sizes[:-1], sizes[1:])]\n"),
            ("divides by fan_in instead of sqrt(fan_in): variance 1/fan_in**2",
             "def init_mlp(key, sizes):\n"
             "    keys = jax.random.split(key, len(sizes) - 1)\n"
             "    return [{'w': jax.random.normal(k, (m, n)) / m, 'b': jnp.zeros(n)}\n"
             "            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]\n"),
            ("folds in the layer width, so layers of equal width get the same weights",
             "def init_mlp(key, sizes):\n"
             "    return [{'w': jax.random.normal(jax.random.fold_in(key, m), (m, n)) / jnp.sqrt(m),\n"
             "             'b': jnp.zeros(n)} for m, n in zip(sizes[:-1], sizes[1:])]\n"),
            ("a hard-coded key inside: the same weights for every key",
             "def init_mlp(key, sizes):\n"
             "    keys = jax.random.split(jax.random.key(0), len(sizes) - 1)\n"
             "    return [{'w': jax.random.normal(k, (m, n)) / jnp.sqrt(m), 'b': jnp.zeros(n)}\n"
             "            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]\n"),
            ("lecun_uniform: the right variance, but uniform, not normal",
             "def init_mlp(key, sizes):\n"
             "    init = jax.nn.initializers.lecun_uniform()\n"
             "    keys = jax.random.split(key, len(sizes) - 1)\n"
             "    return [{'w': init(k, (m, n), jnp.float32), 'b': jnp.zeros(n)}\n"
             "            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]\n"),
            ("bfloat16 weights: the docstring asks for float32",
             "def init_mlp(key, sizes):\n"
             "    keys = jax.random.split(key, len(sizes) - 1)\n"
             "    return [{'w': jax.random.normal(k, (m, n), jnp.bfloat16) / jnp.sqrt(m).astype(jnp.bfloat16),\n"
             "             'b': jnp.zeros(n, jnp.bfloat16)}\n"
             "            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]\n"),
        ],
    },
    "04_prng_dropout": {
        "correct": [
            "def dropout(key, x, rate):\n"
            "    mask = jax.random.uniform(key, x.shape) >= rate\n"
            "    return x * mask / (1.0 - rate)\n",
            "def dropout(key, x, rate):\n"
            "    keep = 1.0 - rate\n"
            "    return jnp.where(jax.random.bernoulli(key, keep, x.shape), x, 0.0) / keep\n",
        ],
        "wrong": [
            ("no rescaling: kept entries are not divided by 1 - rate",
             "def dropout(key, x, rate):\n"
             "    return x * jax.random.bernoulli(key, 1.0 - rate, x.shape)\n"),
            ("keeps entries with probability rate instead of 1 - rate",
             "def dropout(key, x, rate):\n"
             "    return jnp.where(jax.random.bernoulli(key, rate, x.shape), x / (1.0 - rate), 0.0)\n"),
            ("a hard-coded key inside: the same mask for every key",
             "def dropout(key, x, rate):\n"
             "    keep = jax.random.bernoulli(jax.random.key(0), 1.0 - rate, x.shape)\n"
             "    return jnp.where(keep, x / (1.0 - rate), 0.0)\n"),
            ("drops an exact number of entries (a permutation), not independent draws",
             "def dropout(key, x, rate):\n"
             "    n_keep = int(round((1.0 - rate) * x.size))\n"
             "    keep = (jax.random.permutation(key, x.size) < n_keep).reshape(x.shape)\n"
             "    return jnp.where(keep, x / (1.0 - rate), 0.0)\n"),
            ("one mask per feature, shared by every row of the batch",
             "def dropout(key, x, rate):\n"
             "    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape[-1:])\n"
             "    return jnp.where(keep, x / (1.0 - rate), 0.0)\n"),
            ("a float32 mask multiplied in: a bfloat16 x comes back as float32",
             "def dropout(key, x, rate):\n"
             "    mask = jax.random.bernoulli(key, 1.0 - rate, x.shape).astype(jnp.float32)\n"
             "    return x * mask / (1.0 - rate)\n"),
        ],
    },
    "04_prng_epoch_batches": {
        "correct": [
            "def epoch_batches(key, x, epoch, batch_size):\n"
            "    rows = jax.random.permutation(jax.random.fold_in(key, epoch), x)\n"
            "    nb = x.shape[0] // batch_size\n"
            "    return rows[: nb * batch_size].reshape((nb, batch_size) + x.shape[1:])\n",
            # Sorting uniform numbers gives a uniform permutation too.
            "def epoch_batches(key, x, epoch, batch_size):\n"
            "    u = jax.random.uniform(jax.random.fold_in(key, epoch), (x.shape[0],))\n"
            "    order = jnp.argsort(u)\n"
            "    nb = x.shape[0] // batch_size\n"
            "    return jnp.stack([x[order[i * batch_size:(i + 1) * batch_size]] for i in range(nb)])\n",
        ],
        "wrong": [
            ("ignores the epoch: the same order every epoch",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    order = jax.random.permutation(key, x.shape[0])\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return x[order[: nb * batch_size]].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("draws row indices with replacement: rows repeat and others go missing",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    nb = x.shape[0] // batch_size\n"
             "    idx = jax.random.randint(jax.random.fold_in(key, epoch), (nb * batch_size,), 0, x.shape[0])\n"
             "    return x[idx].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("a key from the epoch alone: every run shuffles the same way",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    order = jax.random.permutation(jax.random.key(epoch), x.shape[0])\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return x[order[: nb * batch_size]].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("rotates the rows by a random offset instead of shuffling them",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    shift = jax.random.randint(jax.random.fold_in(key, epoch), (), 0, x.shape[0])\n"
             "    rows = jnp.roll(x, shift, axis=0)\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return rows[: nb * batch_size].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("shuffles each column on its own: rows are torn apart",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    rows = jax.random.permutation(jax.random.fold_in(key, epoch), x, axis=0, independent=True)\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return rows[: nb * batch_size].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("sorts each batch: the order within a batch is not random",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    order = jax.random.permutation(jax.random.fold_in(key, epoch), x.shape[0])\n"
             "    nb = x.shape[0] // batch_size\n"
             "    batches = order[: nb * batch_size].reshape(nb, batch_size)\n"
             "    return x[jnp.sort(batches, axis=1)]\n"),
            ("splits the run's key to get the epoch's key: consumes it, so epoch 1 reuses it",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    epoch_key = jax.random.split(key, epoch + 1)[epoch]\n"
             "    order = jax.random.permutation(epoch_key, x.shape[0])\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return x[order[: nb * batch_size]].reshape(nb, batch_size, *x.shape[1:])\n"),
            ("drops the last rows of x before shuffling: the same rows are never used",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    nb = x.shape[0] // batch_size\n"
             "    rows = jax.random.permutation(jax.random.fold_in(key, epoch), x[: nb * batch_size])\n"
             "    return rows.reshape(nb, batch_size, *x.shape[1:])\n"),
            ("reshapes with -1: a 1-D x gets a trailing axis of 1",
             "def epoch_batches(key, x, epoch, batch_size):\n"
             "    order = jax.random.permutation(jax.random.fold_in(key, epoch), x.shape[0])\n"
             "    nb = x.shape[0] // batch_size\n"
             "    return x[order[: nb * batch_size]].reshape(nb, batch_size, -1)\n"),
        ],
    },
    "04_prng_bootstrap_means": {
        "correct": [
            "def bootstrap_means(key, x, n_boot):\n"
            "    def one(k):\n"
            "        return jax.random.choice(k, x, (x.shape[0],), replace=True).mean()\n"
            "    return jax.vmap(one)(jax.random.split(key, n_boot))\n",
            # A wide tree made with fold_in of the resample index.
            "def bootstrap_means(key, x, n_boot):\n"
            "    m = x.shape[0]\n"
            "    def one(i):\n"
            "        idx = jax.random.randint(jax.random.fold_in(key, i), (m,), 0, m)\n"
            "        return jnp.mean(x[idx])\n"
            "    return jax.vmap(one)(jnp.arange(n_boot))\n",
        ],
        "wrong": [
            ("a deep chain: key, sub = split(key) in a Python loop over the resamples",
             "def bootstrap_means(key, x, n_boot):\n"
             "    out = []\n"
             "    for _ in range(n_boot):\n"
             "        key, sub = jax.random.split(key)\n"
             "        idx = jax.random.randint(sub, (x.shape[0],), 0, x.shape[0])\n"
             "        out.append(jnp.mean(x[idx]))\n"
             "    return jnp.stack(out)\n"),
            ("vmap over a copied key: every resample is the same",
             "def bootstrap_means(key, x, n_boot):\n"
             "    def one(_):\n"
             "        idx = jax.random.randint(key, (x.shape[0],), 0, x.shape[0])\n"
             "        return jnp.mean(x[idx])\n"
             "    return jax.vmap(one)(jnp.arange(n_boot))\n"),
            ("resamples without replacement: every mean equals mean(x)",
             "def bootstrap_means(key, x, n_boot):\n"
             "    def one(k):\n"
             "        return jnp.mean(jax.random.permutation(k, x))\n"
             "    return jax.vmap(one)(jax.random.split(key, n_boot))\n"),
            ("a scan that carries the key: a chain n_boot keys deep",
             "def bootstrap_means(key, x, n_boot):\n"
             "    def step(k, _):\n"
             "        k, sub = jax.random.split(k)\n"
             "        return k, jnp.mean(x[jax.random.randint(sub, (x.shape[0],), 0, x.shape[0])])\n"
             "    return jax.lax.scan(step, key, None, length=n_boot)[1]\n"),
            ("a resample size hard-coded to 100 (the visible x has 100 values)",
             "def bootstrap_means(key, x, n_boot):\n"
             "    def one(k):\n"
             "        return jnp.mean(x[jax.random.randint(k, (100,), 0, x.shape[0])])\n"
             "    return jax.vmap(one)(jax.random.split(key, n_boot))\n"),
            ("randint's maxval taken as inclusive: the last value is never drawn",
             "def bootstrap_means(key, x, n_boot):\n"
             "    def one(k):\n"
             "        return jnp.mean(x[jax.random.randint(k, (x.shape[0],), 0, x.shape[0] - 1)])\n"
             "    return jax.vmap(one)(jax.random.split(key, n_boot))\n"),
        ],
    },
}
