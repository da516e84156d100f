"""Alternative correct answers and realistic wrong answers for 06_sharding, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise.
"""

VARIANTS = {
    "06_sharding_build_mesh": {
        "correct": [
            "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
            "    grid = np.array(devices).reshape(len(devices) // model_size, model_size)\n"
            "    return jax.sharding.Mesh(grid, ('data', 'model'), axis_types=(axis_type,) * 2)\n",
            "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
            "    sizes = (len(devices) // model_size, model_size)\n"
            "    types = tuple(axis_type for _ in sizes)\n"
            "    return jax.make_mesh(sizes, axis_names=('data', 'model'), axis_types=types,\n"
            "                         devices=list(devices))\n",
        ],
        "wrong": [
            ("ignores axis_type: jax.make_mesh always gives Explicit axes",
             "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
             "    return jax.make_mesh((len(devices) // model_size, model_size), ('data', 'model'),\n"
             "                         devices=devices)\n"),
            ("jax.sharding.Mesh without axis_types: Auto axes where Explicit was asked",
             "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
             "    grid = np.array(devices).reshape(len(devices) // model_size, model_size)\n"
             "    return jax.sharding.Mesh(grid, ('data', 'model'))\n"),
            ("uses all of jax.devices() instead of the devices it was given",
             "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
             "    return jax.make_mesh((len(devices) // model_size, model_size), ('data', 'model'),\n"
             "                         axis_types=(axis_type, axis_type))\n"),
            ("axis sizes swapped: model_size devices on 'data'",
             "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
             "    return jax.make_mesh((model_size, len(devices) // model_size), ('data', 'model'),\n"
             "                         axis_types=(axis_type, axis_type), devices=devices)\n"),
        ],
    },
    "06_sharding_place_batch_and_weights": {
        "correct": [
            "def place_batch_and_weights(x, w, mesh):\n"
            "    # Missing trailing entries mean None.\n"
            "    return (jax.device_put(x, NamedSharding(mesh, P('data'))),\n"
            "            jax.device_put(w, NamedSharding(mesh, P(None, 'model'))))\n",
            "def place_batch_and_weights(x, w, mesh):\n"
            "    with jax.set_mesh(mesh):\n"
            "        return jax.device_put((x, w), (P('data', None), P(None, 'model')))\n",
        ],
        "wrong": [
            ("the batch is replicated (P()) where it should be split over 'data'",
             "def place_batch_and_weights(x, w, mesh):\n"
             "    return (jax.device_put(x, NamedSharding(mesh, P())),\n"
             "            jax.device_put(w, NamedSharding(mesh, P(None, 'model'))))\n"),
            ("the weight columns are split over the wrong mesh axis ('data')",
             "def place_batch_and_weights(x, w, mesh):\n"
             "    return (jax.device_put(x, NamedSharding(mesh, P('data', None))),\n"
             "            jax.device_put(w, NamedSharding(mesh, P(None, 'data'))))\n"),
            ("the weights are split by rows instead of columns",
             "def place_batch_and_weights(x, w, mesh):\n"
             "    return (jax.device_put(x, NamedSharding(mesh, P('data', None))),\n"
             "            jax.device_put(w, NamedSharding(mesh, P('model', None))))\n"),
        ],
    },
    "06_sharding_devices_holding": {
        "correct": [
            "def devices_holding(x, index):\n"
            "    held = set()\n"
            "    for device, idx in x.sharding.devices_indices_map(x.shape).items():\n"
            "        mask = np.zeros(x.shape, dtype=bool)\n"
            "        mask[idx] = True\n"
            "        if mask[tuple(index)]:\n"
            "            held.add(device.id)\n"
            "    return held\n",
            "def devices_holding(x, index):\n"
            "    def contains(shard):\n"
            "        return all(i in range(*s.indices(n)) for i, s, n in zip(index, shard.index, x.shape))\n"
            "    return {shard.device.id for shard in x.addressable_shards if contains(shard)}\n",
        ],
        "wrong": [
            ("counts only the first copy of each slice (replica_id == 0)",
             "def devices_holding(x, index):\n"
             "    held = set()\n"
             "    for shard in x.addressable_shards:\n"
             "        if shard.replica_id != 0:\n"
             "            continue\n"
             "        if all(s.indices(n)[0] <= i < s.indices(n)[1]\n"
             "               for i, s, n in zip(index, shard.index, x.shape)):\n"
             "            held.add(shard.device.id)\n"
             "    return held\n"),
            ("compares with slice.start/stop directly: slice(None) has None bounds",
             "def devices_holding(x, index):\n"
             "    held = set()\n"
             "    for shard in x.addressable_shards:\n"
             "        if all(s.start <= i < s.stop for i, s in zip(index, shard.index)):\n"
             "            held.add(shard.device.id)\n"
             "    return held\n"),
            ("assumes device k holds the k-th row block, ignoring the mesh and the spec",
             "def devices_holding(x, index):\n"
             "    rows = x.shape[0] // len(x.sharding.device_set)\n"
             "    return {sorted(d.id for d in x.sharding.device_set)[index[0] // rows]}\n"),
        ],
    },
    "06_sharding_dense_full_rows": {
        "correct": [
            "def dense_full_rows(x, w):\n"
            "    mesh = jax.sharding.get_abstract_mesh()\n"
            "    if mesh.axis_types[mesh.axis_names.index('data')] == AxisType.Auto:\n"
            "        return jnp.tanh(jax.lax.with_sharding_constraint(x @ w, P('data', None)))\n"
            "    return jnp.tanh(jnp.dot(x, w, out_sharding=P('data', None)))\n",
            "def dense_full_rows(x, w):\n"
            "    h = jnp.tanh(x @ w)\n"
            "    try:\n"
            "        return jax.sharding.reshard(h, P('data', None))\n"
            "    except ValueError:  # reshard refuses Auto axes\n"
            "        return jax.lax.with_sharding_constraint(h, P('data', None))\n",
        ],
        "wrong": [
            ("no constraint: the result keeps the propagated P('data', 'model')",
             "def dense_full_rows(x, w):\n"
             "    return jnp.tanh(x @ w)\n"),
            ("with_sharding_constraint only: an assertion that fails under Explicit axes",
             "def dense_full_rows(x, w):\n"
             "    return jax.lax.with_sharding_constraint(jnp.tanh(x @ w), P('data', None))\n"),
            ("reshard only: refused under Auto axes",
             "def dense_full_rows(x, w):\n"
             "    return jax.sharding.reshard(jnp.tanh(x @ w), P('data', None))\n"),
            ("constrains the rows over the wrong mesh axis ('model')",
             "def dense_full_rows(x, w):\n"
             "    h = jnp.tanh(x @ w)\n"
             "    if AxisType.Explicit in jax.sharding.get_abstract_mesh().axis_types:\n"
             "        return jax.sharding.reshard(h, P('model', None))\n"
             "    return jax.lax.with_sharding_constraint(h, P('model', None))\n"),
        ],
    },
    "06_sharding_center_columns": {
        "correct": [
            "def center_columns(x):\n"
            "    def body(block):\n"
            "        return block - jax.lax.pmean(block.mean(axis=0), 'data')\n"
            "    return jax.shard_map(body, in_specs=P('data'), out_specs=P('data'))(x)\n",
            "def center_columns(x):\n"
            "    def body(block):\n"
            "        everything = jax.lax.all_gather(block, 'data', tiled=True)\n"
            "        return block - everything.mean(axis=0)\n"
            "    return jax.shard_map(body, in_specs=P('data', None), out_specs=P('data', None))(x)\n",
        ],
        "wrong": [
            ("no collective: each device subtracts the mean of its own rows",
             "def center_columns(x):\n"
             "    def body(block):\n"
             "        return block - block.mean(axis=0)\n"
             "    return jax.shard_map(body, in_specs=P('data', None), out_specs=P('data', None))(x)\n"),
            ("no shard_map: jnp on the global array (right values, not per-device code)",
             "def center_columns(x):\n"
             "    return x - x.mean(axis=0)\n"),
            ("the collective runs over the wrong mesh axis ('model')",
             "def center_columns(x):\n"
             "    def body(block):\n"
             "        total = jax.lax.psum(block.sum(axis=0), 'model')\n"
             "        count = jax.lax.psum(block.shape[0], 'model')\n"
             "        return block - total / count\n"
             "    return jax.shard_map(body, in_specs=P('data', None), out_specs=P('data', None))(x)\n"),
        ],
    },
    "06_sharding_dp_train_step": {
        "correct": [
            "def dp_train_step(params, x, y, lr):\n"
            "    # Plain jit-style code: the batch is split, params replicated, XLA all-reduces.\n"
            "    grads = jax.grad(mse)(params, x, y)\n"
            "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n",
            "def dp_train_step(params, x, y, lr):\n"
            "    def local(params, x, y):\n"
            "        summed = jax.grad(mse)(params, x, y)  # already summed over 'data'\n"
            "        n = jax.lax.axis_size('data')\n"
            "        return jax.tree.map(lambda p, g: p - lr * g / n, params, summed)\n"
            "    return jax.shard_map(local, in_specs=(P(), P('data'), P('data')),\n"
            "                         out_specs=P())(params, x, y)\n",
        ],
        "wrong": [
            ("gradients never reduced: each device applies its own local update",
             "def dp_train_step(params, x, y, lr):\n"
             "    def local(params, x, y):\n"
             "        grads = jax.grad(mse)(params, x, y)\n"
             "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"
             "    return jax.shard_map(local, in_specs=(P(), P('data'), P('data')),\n"
             "                         out_specs=P(), check_vma=False)(params, x, y)\n"),
            ("pmean of gradients that shard_map already summed: the step is n times too large",
             "def dp_train_step(params, x, y, lr):\n"
             "    def local(params, x, y):\n"
             "        grads = jax.lax.pmean(jax.grad(mse)(params, x, y), 'data')\n"
             "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"
             "    return jax.shard_map(local, in_specs=(P(), P('data'), P('data')),\n"
             "                         out_specs=P())(params, x, y)\n"),
            ("gathers the whole batch onto every device first: right numbers, no data parallelism",
             "def dp_train_step(params, x, y, lr):\n"
             "    x = jax.sharding.reshard(x, P())\n"
             "    y = jax.sharding.reshard(y, P())\n"
             "    grads = jax.grad(mse)(params, x, y)\n"
             "    return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"),
        ],
    },
    "06_sharding_collectives_in_hlo": {
        "correct": [
            "def collectives_in_hlo(fn, *args):\n"
            "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
            "    classes = ['all-reduce', 'all-gather', 'reduce-scatter', 'collective-permute',\n"
            "               'all-to-all']\n"
            "    return {c for c in classes if c + '(' in text or c + '-start(' in text}\n",
            "import re\n"
            "\n"
            "def collectives_in_hlo(fn, *args):\n"
            "    compiled = jax.jit(fn).lower(*args).compile()\n"
            "    found = set()\n"
            "    for line in compiled.as_text().splitlines():\n"
            "        for op in re.findall(r' ([a-z][a-z-]*)\\(', line):\n"
            "            op = op.removesuffix('-start').removesuffix('-done')\n"
            "            if op in ('all-reduce', 'all-gather', 'reduce-scatter',\n"
            "                      'collective-permute', 'all-to-all'):\n"
            "                found.add(op)\n"
            "    return found\n",
        ],
        "wrong": [
            ("reads the lowered StableHLO: collectives appear only after compilation",
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).as_text()\n"
             "    classes = ['all-reduce', 'all-gather', 'reduce-scatter', 'collective-permute',\n"
             "               'all-to-all']\n"
             "    return {c for c in classes if c in text}\n"),
            ("looks only for all-reduce and all-gather",
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
             "    return {c for c in ('all-reduce', 'all-gather') if c in text}\n"),
        ],
    },
}
