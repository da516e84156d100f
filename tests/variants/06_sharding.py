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
            ("the 'data' size from jax.device_count(), not from the devices it was given",
             "def build_mesh(devices, model_size, axis_type=AxisType.Explicit):\n"
             "    return jax.make_mesh((jax.device_count() // model_size, model_size),\n"
             "                         ('data', 'model'), axis_types=(axis_type, axis_type),\n"
             "                         devices=devices[:jax.device_count()])\n"),
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
            ("builds its own mesh over jax.devices() instead of using the mesh it was given",
             "def place_batch_and_weights(x, w, mesh):\n"
             "    m = mesh.shape['model']\n"
             "    own = jax.make_mesh((jax.device_count() // m, m), ('data', 'model'))\n"
             "    return (jax.device_put(x, NamedSharding(own, P('data', None))),\n"
             "            jax.device_put(w, NamedSharding(own, P(None, 'model'))))\n"),
            ("the batch split over both mesh axes (rows over 'data', columns over 'model')",
             "def place_batch_and_weights(x, w, mesh):\n"
             "    return (jax.device_put(x, NamedSharding(mesh, P('data', 'model'))),\n"
             "            jax.device_put(w, NamedSharding(mesh, P(None, 'model'))))\n"),
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
            ("the stop bound included: the first row of the next block counts too",
             "def devices_holding(x, index):\n"
             "    held = set()\n"
             "    for shard in x.addressable_shards:\n"
             "        bounds = [s.indices(n)[:2] for s, n in zip(shard.index, x.shape)]\n"
             "        if all(lo <= i <= hi for i, (lo, hi) in zip(index, bounds)):\n"
             "            held.add(shard.device.id)\n"
             "    return held\n"),
            ("only the first dimension looked at: the column split is ignored",
             "def devices_holding(x, index):\n"
             "    held = set()\n"
             "    for shard in x.addressable_shards:\n"
             "        lo, hi, _ = shard.index[0].indices(x.shape[0])\n"
             "        if lo <= index[0] < hi:\n"
             "            held.add(shard.device.id)\n"
             "    return held\n"),
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
            ("constrains the input x, not the result: the output follows w's columns",
             "def dense_full_rows(x, w):\n"
             "    if AxisType.Explicit in jax.sharding.get_abstract_mesh().axis_types:\n"
             "        x = jax.sharding.reshard(x, P('data', None))\n"
             "    else:\n"
             "        x = jax.lax.with_sharding_constraint(x, P('data', None))\n"
             "    return jnp.tanh(x @ w)\n"),
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
            ("the global sums divided by the local row count: the mean is n_devices times too large",
             "def center_columns(x):\n"
             "    def body(block):\n"
             "        return block - jax.lax.psum(block.sum(axis=0), 'data') / block.shape[0]\n"
             "    return jax.shard_map(body, in_specs=P('data', None), out_specs=P('data', None))(x)\n"),
            ("one mean of the whole matrix subtracted, not one per column",
             "def center_columns(x):\n"
             "    def body(block):\n"
             "        return block - jax.lax.pmean(block.mean(), 'data')\n"
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
            ("the learning rate of the notebook's example hard-coded: lr is ignored",
             "def dp_train_step(params, x, y, lr):\n"
             "    grads = jax.grad(mse)(params, x, y)\n"
             "    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)\n"),
            ("psum of the per-device losses: the gradient of a sum, n_devices times too large",
             "def dp_train_step(params, x, y, lr):\n"
             "    def local(params, x, y):\n"
             "        grads = jax.grad(lambda p: jax.lax.psum(mse(p, x, y), 'data'))(params)\n"
             "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"
             "    return jax.shard_map(local, in_specs=(P(), P('data'), P('data')),\n"
             "                         out_specs=P())(params, x, y)\n"),
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
            ("reads the lowered StableHLO: the collectives that XLA inserts from shardings "
             "exist only after compilation (and the HLO spelling all-reduce never matches there)",
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).as_text()\n"
             "    classes = ['all-reduce', 'all-gather', 'reduce-scatter', 'collective-permute',\n"
             "               'all-to-all']\n"
             "    return {c for c in classes if c in text}\n"),
            ("looks only for all-reduce and all-gather",
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
             "    return {c for c in ('all-reduce', 'all-gather') if c in text}\n"),
            ("misses collective-permute and all-to-all (a roll, a transpose of the layout)",
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
             "    classes = ['all-reduce', 'all-gather', 'reduce-scatter']\n"
             "    return {c for c in classes if c + '(' in text}\n"),
            ("the whole match kept (leading space and parenthesis): not a class name",
             "import re\n"
             "\n"
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
             "    pattern = r'\\s(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)\\('\n"
             "    return {m.group(0) for m in re.finditer(pattern, text)}\n"),
            ("a list of every occurrence, with repeats, where a set of classes is asked",
             "import re\n"
             "\n"
             "def collectives_in_hlo(fn, *args):\n"
             "    text = jax.jit(fn).lower(*args).compile().as_text()\n"
             "    pattern = r'\\s(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)\\('\n"
             "    return re.findall(pattern, text)\n"),
        ],
    },
    "06_sharding_megatron_mlp": {
        "correct": [
            '''def megatron_mlp(params, x):
    """Plain jit code; the second matmul says where its result goes."""
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    if AxisType.Explicit in jax.sharding.get_abstract_mesh().axis_types:
        out = jnp.matmul(h, params["w2"], out_sharding=P("data", None))
    else:
        out = jax.lax.with_sharding_constraint(h @ params["w2"], P("data", None))
    return out + params["b2"]
''',
            '''def megatron_mlp(params, x):
    """shard_map, specs read from the arrays' types (Explicit) or stated."""
    def block(w1, b1, w2, b2, x):
        h = jnp.maximum(jnp.dot(x, w1) + b1, 0.0)
        return jax.lax.psum(jnp.dot(h, w2), "model") + b2
    return jax.shard_map(block, in_specs=(P(None, "model"), P("model"), P("model", None), P(),
                                          P("data", None)),
                         out_specs=P("data", None))(params["w1"], params["b1"], params["w2"],
                                                     params["b2"], x)
''',
        ],
        "wrong": [
            ('gathers the weights onto every device first: right values, no model parallelism',
             '''def megatron_mlp(params, x):
    def block(p, x):
        w1 = jax.lax.all_gather(p["w1"], "model", axis=1, tiled=True)
        b1 = jax.lax.all_gather(p["b1"], "model", axis=0, tiled=True)
        w2 = jax.lax.all_gather(p["w2"], "model", axis=0, tiled=True)
        return jax.nn.relu(x @ w1 + b1) @ w2 + p["b2"]
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)), out_specs=P("data", None),
                         check_vma=False)(params, x)
'''),
            ('no psum: each device returns its own partial sum',
             '''def megatron_mlp(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return h @ p["w2"] + p["b2"]
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)), out_specs=P("data", None),
                         check_vma=False)(params, x)
'''),
            ("b2 added inside the psum: counted once per 'model' device",
             '''def megatron_mlp(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jax.lax.psum(h @ p["w2"] + p["b2"], "model")
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)),
                         out_specs=P("data", None))(params, x)
'''),
            ('row-split w1 and w2: a psum after each matmul, and the weights moved at every call',
             '''def megatron_mlp(params, x):
    w1 = jax.device_put(params["w1"], P("model", None))
    x = jax.device_put(x, P("data", "model"))
    def first(w1, b1, x):
        return jax.nn.relu(jax.lax.psum(x @ w1, "model") + b1)
    h = jax.shard_map(first, in_specs=(P("model", None), P(), P("data", "model")),
                      out_specs=P("data", None))(w1, params["b1"], x)
    b1 = None
    def second(w2, b2, h):
        return jax.lax.psum(h @ w2, "model") + b2
    h = jax.device_put(h, P("data", "model"))
    return jax.shard_map(second, in_specs=(P("model", None), P(), P("data", "model")),
                         out_specs=P("data", None))(params["w2"], params["b2"], h)
'''),
            ("a second all-reduce to 'make sure' the output agrees over 'model': twice the traffic",
             '''def megatron_mlp(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        out = jax.lax.psum(h @ p["w2"], "model")
        return jax.lax.pmean(out, "model") + p["b2"]
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)), out_specs=P("data", None),
                         check_vma=False)(params, x)
'''),
            ('returns the output replicated: the whole batch gathered on every device',
             '''def megatron_mlp(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        out = jax.lax.psum(h @ p["w2"], "model") + p["b2"]
        return jax.lax.all_gather(out, "data", axis=0, tiled=True)
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)), out_specs=P(),
                         check_vma=False)(params, x)
'''),
            ('tanh instead of relu',
             '''def megatron_mlp(params, x):
    def block(p, x):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jax.lax.psum(h @ p["w2"], "model") + p["b2"]
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}
    return jax.shard_map(block, in_specs=(specs, P("data", None)),
                         out_specs=P("data", None))(params, x)
'''),
            ('the hidden activations gathered before the second matmul (all-gather, no all-reduce)',
             '''def megatron_mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    if AxisType.Explicit in jax.sharding.get_abstract_mesh().axis_types:
        h = jax.sharding.reshard(h, P("data", None))
        w2 = jax.sharding.reshard(params["w2"], P())
    else:
        h = jax.lax.with_sharding_constraint(h, P("data", None))
        w2 = jax.lax.with_sharding_constraint(params["w2"], P())
    return h @ w2 + params["b2"]
'''),
        ],
    },
    "06_sharding_make_fsdp_step": {
        "correct": [
            '''def make_fsdp_step(optimizer, loss_fn):
    """Gather, differentiate the full weights, reduce-scatter the gradients by hand."""
    def local_step(params, opt_state, x, y):
        full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", axis=0, tiled=True), params)
        loss, grads = jax.value_and_grad(loss_fn)(full, x, y)
        n = jax.lax.axis_size("data")
        grads = jax.tree.map(
            lambda g: jax.lax.psum_scatter(g, "data", scatter_dimension=0, tiled=True) / n, grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    @jax.jit
    def step(params, opt_state, x, y):
        spec = lambda a: P("data") if a.ndim else P()
        ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()), check_vma=False)(params, opt_state, x, y)
    return step
''',
            '''def make_fsdp_step(optimizer, loss_fn):
    """The shard_map built once per structure, loss as the sum of per-device sums."""
    def local_step(params, opt_state, x, y):
        def loss_of_shards(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            local = loss_fn(full, x, y) * x.shape[0]
            return jax.lax.psum(local, "data") / (x.shape[0] * jax.lax.axis_size("data"))
        loss, grads = jax.value_and_grad(loss_of_shards)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = jax.tree.map(lambda p, u: p + u, params, updates)
        return params, opt_state, loss

    def step(params, opt_state, x, y):
        ps = jax.tree.map(lambda a: P("data"), params)
        ss = jax.tree.map(lambda a: P("data") if jnp.ndim(a) else P(), opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()))(params, opt_state, x, y)
    return jax.jit(step)
''',
        ],
        "wrong": [
            ('plain jit: right values and layout, but whole gradients all-reduced (no reduce-scatter)',
             '''def make_fsdp_step(optimizer, loss_fn):
    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step
'''),
            ("pmean of gradients that the all_gather's transpose already summed: n times too small",
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        def global_loss(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            return jax.lax.pmean(loss_fn(full, x, y), "data")
        loss, grads = jax.value_and_grad(global_loss)(params)
        grads = jax.tree.map(lambda g: g / jax.lax.axis_size("data"), grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def step(params, opt_state, x, y):
        spec = lambda a: P("data") if a.ndim else P()
        ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()))(params, opt_state, x, y)
    return step
'''),
            ('the local loss differentiated: the gradient sums n per-device means',
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        def local_loss(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            return loss_fn(full, x, y)
        loss, grads = jax.value_and_grad(local_loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")

    @jax.jit
    def step(params, opt_state, x, y):
        spec = lambda a: P("data") if a.ndim else P()
        ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()), check_vma=False)(params, opt_state, x, y)
    return step
'''),
            ('returns the optimizer state it was given',
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        def global_loss(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            return jax.lax.pmean(loss_fn(full, x, y), "data")
        loss, grads = jax.value_and_grad(global_loss)(params)
        updates, _ = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def step(params, opt_state, x, y):
        spec = lambda a: P("data") if a.ndim else P()
        ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()))(params, opt_state, x, y)
    return step
'''),
            ('data parallelism instead: params and state replicated, gradients all-reduced',
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(lambda p: jax.lax.pmean(loss_fn(p, x, y), "data"))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def step(params, opt_state, x, y):
        return jax.shard_map(local_step, in_specs=(P(), P(), P("data"), P("data")),
                             out_specs=(P(), P(), P()))(params, opt_state, x, y)
    return step
'''),
            ('returns the gathered full weights: params end up replicated',
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        def global_loss(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            return jax.lax.pmean(loss_fn(full, x, y), "data")
        loss, grads = jax.value_and_grad(global_loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        new = optax.apply_updates(params, updates)
        return jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), new), opt_state, loss

    @jax.jit
    def step(params, opt_state, x, y):
        spec = lambda a: P("data") if a.ndim else P()
        ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(jax.tree.map(lambda a: P(), params), ss, P()),
                             check_vma=False)(params, opt_state, x, y)
    return step
'''),
            ('optimizer state replicated: every device keeps every moment',
             '''def make_fsdp_step(optimizer, loss_fn):
    def local_step(params, opt_state, x, y):
        def global_loss(shards):
            full = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), shards)
            return jax.lax.pmean(loss_fn(full, x, y), "data")
        loss, grads = jax.value_and_grad(global_loss)(params)
        full_grads = jax.tree.map(lambda g: jax.lax.all_gather(g, "data", tiled=True), grads)
        full_params = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), params)
        updates, opt_state = optimizer.update(full_grads, opt_state, full_params)
        i = jax.lax.axis_index("data")
        mine = jax.tree.map(lambda u, w: jax.lax.dynamic_slice_in_dim(u, i * w.shape[0], w.shape[0]),
                            updates, params)
        return optax.apply_updates(params, mine), opt_state, loss

    @jax.jit
    def step(params, opt_state, x, y):
        ps = jax.tree.map(lambda a: P("data"), params)
        ss = jax.tree.map(lambda a: P(), opt_state)
        return jax.shard_map(local_step, in_specs=(ps, ss, P("data"), P("data")),
                             out_specs=(ps, ss, P()), check_vma=False)(params, opt_state, x, y)
    return step
'''),
        ],
    },
}


# Collectives that carry more than the exercise needs (issue 36): the right values and
# the right collective names and counts, but an array gathered whole in disguise.
VARIANTS["06_sharding_megatron_mlp"]["wrong"].append((
    "one psum of zero-padded slices of the activations and w2: an all-gather in disguise, "
    "with Megatron's one all-reduce", 'def megatron_mlp(params, x):\n    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}\n\n    def block(p, x):\n        # One psum of zero-padded slices: the hidden activations and w2 gathered whole.\n        m, i = jax.lax.axis_size("model"), jax.lax.axis_index("model")\n        h = jax.nn.relu(x @ p["w1"] + p["b1"])\n        rows, k = h.shape\n        h_pad = jax.lax.dynamic_update_slice(jnp.zeros((rows, k * m), h.dtype), h, (0, i * k))\n        w_pad = jax.lax.dynamic_update_slice(jnp.zeros((k * m, p["w2"].shape[1]), h.dtype),\n                                             p["w2"], (i * k, 0))\n        both = jax.lax.psum(jnp.concatenate([h_pad, w_pad.T]), "model")\n        return both[:rows] @ both[rows:].T + p["b2"]\n\n    return jax.shard_map(block, in_specs=(specs, P("data", None)),\n                         out_specs=P("data", None))(params, x)\n'))
VARIANTS["06_sharding_dp_train_step"]["wrong"].append((
    "the batch summed into every device from zero-padded rows: 'an all-reduce' that "
    "gathers the batch", 'def dp_train_step(params, x, y, lr):\n    def local(params, x, y):\n        # The batch summed into every device from zero-padded rows, then one device\'s step.\n        d, i = jax.lax.axis_size("data"), jax.lax.axis_index("data")\n        n = x.shape[0]\n        xy = jnp.concatenate([x, y[:, None]], axis=1)\n        full = jax.lax.psum(jax.lax.dynamic_update_slice(\n            jnp.zeros((n * d, xy.shape[1]), xy.dtype), xy, (i * n, 0)), "data")\n        grads = jax.grad(mse)(params, full[:, :-1], full[:, -1])\n        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n\n    return jax.shard_map(local, in_specs=(P(), P("data", None), P("data")),\n                         out_specs=P())(params, x, y)\n'))
