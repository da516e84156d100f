"""Alternative correct answers and realistic wrong answers for 07_capstone, keyed by grade_id."""

VARIANTS = {
    "07_capstone_cross_entropy": {
        "correct": [
            '''import optax

def cross_entropy(logits, labels):
    """Mean softmax cross-entropy, from optax."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
''',
            '''def cross_entropy(logits, labels):
    """Max-shifted log-sum-exp by hand, minus the true logit (advanced indexing)."""
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = m[:, 0] + jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1))
    return jnp.mean(lse - logits[jnp.arange(logits.shape[0]), labels])
''',
            '''def cross_entropy(logits, labels):
    """logsumexp minus the true logit picked with a one-hot mask."""
    true_logit = jnp.sum(logits * jax.nn.one_hot(labels, logits.shape[-1]), axis=-1)
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - true_logit)
''',
        ],
        "wrong": [
            ("log of softmax: the probability underflows to 0 for large logits and log gives -inf",
             '''def cross_entropy(logits, labels):
    """-log p(label), with p from softmax."""
    probs = jax.nn.softmax(logits, axis=-1)
    return -jnp.mean(jnp.log(probs[jnp.arange(logits.shape[0]), labels]))
'''),
            ("stop_gradient on the log-sum-exp 'for stability': right value, wrong gradient",
             '''def cross_entropy(logits, labels):
    """logsumexp (treated as a constant) minus the true logit."""
    lse = jax.lax.stop_gradient(jax.nn.logsumexp(logits, axis=-1))
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(lse - picked)
'''),
            ("naive exp overflows to inf for logits above ~88",
             '''def cross_entropy(logits, labels):
    """log(sum(exp)) without the max shift."""
    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(lse - picked)
'''),
            ("sums over the batch instead of taking the mean",
             '''def cross_entropy(logits, labels):
    """Sum of the per-example losses."""
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jnp.sum(jax.nn.logsumexp(logits, axis=-1) - picked)
'''),
            ("log_softmax over the batch axis (axis=0) instead of the classes",
             '''def cross_entropy(logits, labels):
    """Log-probabilities normalised over the wrong axis."""
    log_probs = jax.nn.log_softmax(logits, axis=0)
    return -jnp.mean(jnp.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0])
'''),
        ],
    },
    "07_capstone_per_example_grad_norms": {
        "correct": [
            '''def per_example_grad_norms(loss_fn, params, x, y):
    """Jacobian of the vector of per-example losses: one gradient row per example."""
    def losses(p):
        return jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, x, y)
    jac = jax.jacrev(losses)(params)
    n = x.shape[0]
    return jnp.sqrt(sum(jnp.sum(j.reshape(n, -1) ** 2, axis=1) for j in jax.tree.leaves(jac)))
''',
            '''import optax

def per_example_grad_norms(loss_fn, params, x, y):
    """vmap of a one-example function that returns the global norm directly."""
    def one(xi, yi):
        return optax.global_norm(jax.grad(loss_fn)(params, xi, yi))
    return jax.vmap(one)(x, y)
''',
        ],
        "wrong": [
            ("the norm of the batch-mean gradient, repeated for every example",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """Gradient of the mean loss, its norm broadcast to every example."""
    def mean_loss(p):
        return jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0, 0))(p, x, y))
    g = jax.grad(mean_loss)(params)
    norm = jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g)))
    return jnp.full(x.shape[0], norm)
'''),
            ("squared norms: the square root is missing",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """Sum of squares of each example's gradient."""
    grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, x, y)
    return sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(grads))
'''),
            ("adds the norms of the leaves instead of taking the global norm",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """Sum over leaves of each leaf's norm."""
    grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, x, y)
    return sum(jnp.linalg.norm(g.reshape(g.shape[0], -1), axis=1) for g in jax.tree.leaves(grads))
'''),
            ("the gradient with respect to the example (argnums=1), not the parameters",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """Norm of d loss / d xi."""
    grads = jax.vmap(jax.grad(loss_fn, argnums=1), in_axes=(None, 0, 0))(params, x, y)
    return jnp.linalg.norm(grads, axis=-1)
'''),
            ("only the first leaf of the gradient counted (the biases or the first weights)",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """Norm of the first leaf only."""
    grads = jax.vmap(jax.grad(loss_fn), in_axes=(None, 0, 0))(params, x, y)
    g = jax.tree.leaves(grads)[0]
    return jnp.linalg.norm(g.reshape(g.shape[0], -1), axis=1)
'''),
            ("a Python loop over the examples: right values, one gradient program per example",
             '''def per_example_grad_norms(loss_fn, params, x, y):
    """One jax.grad per example, stacked."""
    out = []
    for i in range(x.shape[0]):
        g = jax.grad(loss_fn)(params, x[i], y[i])
        out.append(jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g))))
    return jnp.stack(out)
'''),
            ('lax.map over the examples: the right norms, one example per step of a loop',
             '''def per_example_grad_norms(loss_fn, params, x, y):
    def one(xy):
        g = jax.grad(loss_fn)(params, *xy)
        return jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(g)))
    return jax.lax.map(one, (x, y))
'''),
        ],
    },
    "07_capstone_make_optimizer": {
        "correct": [
            '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """Adam with a hand-written, traceable schedule (jnp.where, no Python if)."""
    def schedule(count):
        t = jnp.asarray(count, jnp.float32)
        warm = peak_lr * t / warmup_steps
        frac = jnp.clip((t - warmup_steps) / (total_steps - warmup_steps), 0.0, 1.0)
        cos = 0.5 * peak_lr * (1.0 + jnp.cos(jnp.pi * frac))
        return jnp.where(t < warmup_steps, warm, cos)
    return optax.adam(schedule)
''',
            '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """Adam's scaling chained with a joined linear + cosine schedule."""
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, peak_lr, warmup_steps),
         optax.cosine_decay_schedule(peak_lr, total_steps - warmup_steps)],
        boundaries=[warmup_steps])
    return optax.chain(optax.scale_by_adam(), optax.scale_by_learning_rate(schedule))
''',
        ],
        "wrong": [
            ("a constant learning rate: no warmup and no decay",
             '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """Adam at the peak rate."""
    return optax.adam(peak_lr)
'''),
            ("decay_steps = total_steps - warmup_steps: the cosine reaches 0 warmup_steps too early",
             '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """Warmup-cosine with the decay length as decay_steps."""
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak_lr, warmup_steps,
                                                  total_steps - warmup_steps, 0.0)
    return optax.adam(schedule)
'''),
            ("a Python `if` on the step count: fails when the count is traced under jit",
             '''import math

def make_optimizer(peak_lr, warmup_steps, total_steps):
    """A schedule written with Python control flow."""
    def schedule(count):
        if count < warmup_steps:
            return peak_lr * count / warmup_steps
        frac = min((count - warmup_steps) / (total_steps - warmup_steps), 1.0)
        return 0.5 * peak_lr * (1 + math.cos(math.pi * frac))
    return optax.adam(schedule)
'''),
            ("SGD with the right schedule instead of Adam",
             '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """SGD, warmup-cosine schedule."""
    return optax.sgd(optax.warmup_cosine_decay_schedule(0.0, peak_lr, warmup_steps,
                                                         total_steps, 0.0))
'''),
            ("AdamW (weight decay 1e-4 by default) instead of Adam: the update depends on params",
             '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    """AdamW, warmup-cosine schedule."""
    return optax.adamw(optax.warmup_cosine_decay_schedule(0.0, peak_lr, warmup_steps,
                                                           total_steps, 0.0))
'''),
            ("Adam with Keras' eps (1e-7) instead of optax's 1e-8: unseen for gradients near 1",
             '''def make_optimizer(peak_lr, warmup_steps, total_steps):
    return optax.adam(optax.warmup_cosine_decay_schedule(0.0, peak_lr, warmup_steps,
                                                         total_steps), eps=1e-7)
'''),
        ],
    },
    "07_capstone_make_train_step": {
        "correct": [
            '''def make_train_step(optimizer, loss_fn):
    """Loss and gradient in two calls, updates applied with jax.tree.map, jitted once."""
    def train_step(params, opt_state, x, y):
        loss = loss_fn(params, x, y)
        grads = jax.grad(loss_fn)(params, x, y)
        updates, new_state = optimizer.update(grads, opt_state, params)
        new_params = jax.tree.map(lambda p, u: p + u, params, updates)
        return new_params, new_state, loss
    return jax.jit(train_step)
''',
            '''def make_train_step(optimizer, loss_fn):
    """A jitted core built once, called from a plain Python wrapper."""
    @jax.jit
    def core(params, opt_state, batch):
        x, y = batch
        loss, grads = jax.value_and_grad(lambda p: loss_fn(p, x, y))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def train_step(params, opt_state, x, y):
        return core(params, opt_state, (x, y))
    return train_step
''',
        ],
        "wrong": [
            ("jax.jit applied inside the step to a freshly defined function: compiles at every call",
             '''def make_train_step(optimizer, loss_fn):
    """Jits the step body at every call."""
    def train_step(params, opt_state, x, y):
        def body(params, opt_state, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss
        return jax.jit(body)(params, opt_state, x, y)
    return train_step
'''),
            ("donates params and opt_state: the later cells call it again on params0, "
             "which the first call deleted",
             '''def make_train_step(optimizer, loss_fn):
    """Donating step (fine in a loop that threads its state, not in this chapter)."""
    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return train_step
'''),
            ("returns the optimizer state it was given: Adam restarts at every step",
             '''def make_train_step(optimizer, loss_fn):
    """Forgets the new optimizer state."""
    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, new_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return train_step
'''),
            ("subtracts optax's updates, which already point downhill: the loss goes up",
             '''def make_train_step(optimizer, loss_fn):
    """params - updates."""
    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return jax.tree.map(lambda p, u: p - u, params, updates), opt_state, loss
    return train_step
'''),
            ("ignores the optimizer's updates: plain gradient descent at a fixed rate",
             '''def make_train_step(optimizer, loss_fn):
    """SGD by hand; the optimizer only advances its state."""
    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        _, opt_state = optimizer.update(grads, opt_state, params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), opt_state, loss
    return train_step
'''),
            ('a plain wrapper around a jitted core that donates params and opt_state: the later '
             'calls on params0 find it deleted',
             '''def make_train_step(optimizer, loss_fn):
    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def core(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    def train_step(params, opt_state, x, y):
        return core(params, opt_state, x, y)
    return train_step
'''),
        ],
    },
    "07_capstone_train_epoch": {
        "correct": [
            '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """scan over per-step keys; batches from a permutation of the examples."""
    def body(carry, step_key):
        idx = jax.random.permutation(step_key, x.shape[0])[:batch_size]
        params, opt_state, loss = train_step(*carry, x[idx], y[idx])
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state),
                                           jax.random.split(key, steps))
    return params, opt_state, losses
''',
            '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """fori_loop (a scan when its bounds are static), losses written into an array."""
    keys = jax.random.split(key, steps)

    def body(i, carry):
        params, opt_state, losses = carry
        idx = jax.random.choice(keys[i], x.shape[0], (batch_size,), replace=False)
        params, opt_state, loss = train_step(params, opt_state, x[idx], y[idx])
        return params, opt_state, losses.at[i].set(loss)

    return lax.fori_loop(0, steps, body, (params, opt_state, jnp.zeros(steps)))
''',
            '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """scan over step numbers; each step's key is fold_in(key, step)."""
    def body(carry, i):
        k = jax.random.fold_in(key, i)
        idx = jax.random.permutation(k, x.shape[0])[:batch_size]
        params, opt_state, loss = train_step(*carry, jnp.take(x, idx, axis=0),
                                             jnp.take(y, idx, axis=0))
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state), jnp.arange(steps))
    return params, opt_state, losses
''',
            '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """Another sampling scheme the contract allows: the batch_size smallest of n uniform
    draws (distinct examples, its own key per step): other batches than the reference's,
    so other losses and parameters."""
    def body(carry, step_key):
        idx = jnp.argsort(jax.random.uniform(step_key, (x.shape[0],)))[:batch_size]
        params, opt_state, loss = train_step(*carry, x[idx], y[idx])
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state),
                                           jax.random.split(key, steps))
    return params, opt_state, losses
''',
        ],
        "wrong": [
            ("a Python loop over the steps: unrolled under jit instead of one scan",
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """Python for loop with fresh keys."""
    losses = []
    for step_key in jax.random.split(key, steps):
        idx = jax.random.choice(step_key, x.shape[0], (batch_size,), replace=False)
        params, opt_state, loss = train_step(params, opt_state, x[idx], y[idx])
        losses.append(loss)
    return params, opt_state, jnp.stack(losses)
'''),
            ("the epoch key reused at every step: every step trains on the same batch",
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """scan, but each step draws with the epoch key itself."""
    def body(carry, _):
        idx = jax.random.choice(key, x.shape[0], (batch_size,), replace=False)
        params, opt_state, loss = train_step(*carry, x[idx], y[idx])
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state), None, length=steps)
    return params, opt_state, losses
'''),
            ("every step starts from the initial optimizer state: it is not threaded through",
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """Carries params only."""
    def body(params, step_key):
        idx = jax.random.choice(step_key, x.shape[0], (batch_size,), replace=False)
        params, new_state, loss = train_step(params, opt_state, x[idx], y[idx])
        return params, (loss, new_state)

    params, (losses, states) = lax.scan(body, params, jax.random.split(key, steps))
    return params, jax.tree.map(lambda s: s[-1], states), losses
'''),
            ("jax.random.choice samples with replacement by default: repeated examples",
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """choice without replace=False."""
    def body(carry, step_key):
        idx = jax.random.choice(step_key, x.shape[0], (batch_size,))
        params, opt_state, loss = train_step(*carry, x[idx], y[idx])
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state),
                                           jax.random.split(key, steps))
    return params, opt_state, losses
'''),
            ("x and y shuffled with two different keys: labels no longer match their examples",
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    """One permutation for x, another for y."""
    def body(carry, step_key):
        kx, ky = jax.random.split(step_key)
        n = x.shape[0]
        xb = x[jax.random.permutation(kx, n)[:batch_size]]
        yb = y[jax.random.permutation(ky, n)[:batch_size]]
        params, opt_state, loss = train_step(*carry, xb, yb)
        return (params, opt_state), loss

    (params, opt_state), losses = lax.scan(body, (params, opt_state),
                                           jax.random.split(key, steps))
    return params, opt_state, losses
'''),
            ('an off-by-one: permutation(k, n - 1) never draws the last example',
             '''def train_epoch(train_step, params, opt_state, key, x, y, *, batch_size, steps):
    def body(carry, k):
        idx = jax.random.permutation(k, x.shape[0] - 1)[:batch_size]
        params, opt_state, loss = train_step(*carry, x[idx], y[idx])
        return (params, opt_state), loss
    (params, opt_state), losses = lax.scan(body, (params, opt_state), jax.random.split(key, steps))
    return params, opt_state, losses
'''),
        ],
    },
    "07_capstone_make_data_parallel_step": {
        "correct": [
            '''def make_data_parallel_step(train_step, mesh):
    """device_put with bare PartitionSpecs under jax.set_mesh."""
    def dp_step(params, opt_state, x, y):
        with jax.set_mesh(mesh):
            x, y = jax.device_put((x, y), P("data"))
            params, opt_state = jax.device_put((params, opt_state), P())
        return train_step(params, opt_state, x, y)
    return dp_step
''',
            '''def make_data_parallel_step(train_step, mesh):
    """Leaf by leaf; the batch assembled from per-device slices with a callback."""
    axis = mesh.axis_names[0]
    batch = NamedSharding(mesh, P(axis))
    replicated = NamedSharding(mesh, P())

    def place_batch(a):
        return jax.make_array_from_callback(a.shape, batch, lambda index: a[index])

    def dp_step(params, opt_state, x, y):
        params = jax.tree.map(lambda a: jax.device_put(a, replicated), params)
        opt_state = jax.tree.map(lambda a: jax.device_put(a, replicated), opt_state)
        return train_step(params, opt_state, place_batch(x), place_batch(y))
    return dp_step
''',
        ],
        "wrong": [
            ("no placement at all: the whole step runs on one device",
             '''def make_data_parallel_step(train_step, mesh):
    """Calls the step as it is."""
    def dp_step(params, opt_state, x, y):
        return train_step(params, opt_state, x, y)
    return dp_step
'''),
            ("the batch replicated with P() instead of split: every device processes every example",
             '''def make_data_parallel_step(train_step, mesh):
    """Everything replicated."""
    replicated = NamedSharding(mesh, P())

    def dp_step(params, opt_state, x, y):
        params, opt_state, x, y = jax.device_put((params, opt_state, x, y), replicated)
        return train_step(params, opt_state, x, y)
    return dp_step
'''),
            ("places the batch, then pulls it back with jax.device_get: it lands on one device",
             '''def make_data_parallel_step(train_step, mesh):
    """Shards, then converts to NumPy 'to be safe'."""
    batch = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())

    def dp_step(params, opt_state, x, y):
        x, y = jax.device_get(jax.device_put((x, y), batch))
        params, opt_state = jax.device_put((params, opt_state), replicated)
        return train_step(params, opt_state, jnp.asarray(x), jnp.asarray(y))
    return dp_step
'''),
            ("only x is split: the labels y stay on one device",
             '''def make_data_parallel_step(train_step, mesh):
    """Shards the inputs, forgets the labels."""
    def dp_step(params, opt_state, x, y):
        x = jax.device_put(x, NamedSharding(mesh, P("data")))
        params, opt_state = jax.device_put((params, opt_state), NamedSharding(mesh, P()))
        return train_step(params, opt_state, x, y)
    return dp_step
'''),
            ("wraps the already-jitted step in another jax.jit: train_step runs on tracers inside a trace",
             '''def make_data_parallel_step(train_step, mesh):
    """Placement and step under one more jax.jit 'to fuse them'."""
    batch = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())

    @jax.jit
    def dp_step(params, opt_state, x, y):
        x, y = jax.device_put((x, y), batch)
        params, opt_state = jax.device_put((params, opt_state), replicated)
        return train_step(params, opt_state, x, y)
    return dp_step
'''),
            ("builds its own mesh over every device instead of using the mesh it was given",
             '''def make_data_parallel_step(train_step, mesh):
    """A fresh mesh over jax.devices()."""
    own = jax.make_mesh((jax.device_count(),), ("data",))
    def dp_step(params, opt_state, x, y):
        x, y = jax.device_put((x, y), NamedSharding(own, P("data")))
        params, opt_state = jax.device_put((params, opt_state), NamedSharding(own, P()))
        return train_step(params, opt_state, x, y)
    return dp_step
'''),
        ],
    },
}
