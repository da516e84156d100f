"""Alternative correct answers and realistic wrong answers for 10_pallas, keyed by grade_id.

Each code string replaces the whole solution cell. Wrong answers come with the
reason they are wrong; each must cost exactly its own exercise. Several wrong answers
give the right values and differ only in the kernel's structure (no kernel, work
outside it, a block size ignored, two passes): the structure checks read those from
the exported program.
"""

# Pieces of the silu_vjp answers below (exercise 8). `call(kernel, outputs, *arrays)`
# runs one kernel over 1-D arrays like x in blocks of 128 and returns its `outputs`
# arrays as a tuple; the forward kernel has two outputs, y and s = sigmoid(x); the
# wiring saves (x, s) and pulls back through `backward_kernel(x_ref, s_ref, g_ref, o_ref)`.
_SILU_CALL = (
    "    def call(kernel, outputs, *arrays):\n"
    "        spec = pl.BlockSpec((128,), lambda i: (i,))\n"
    "        out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
    "        return pl.pallas_call(kernel, out_shape=(out,) * outputs,\n"
    "                              grid=(pl.cdiv(x.shape[0], 128),),\n"
    "                              in_specs=[spec] * len(arrays),\n"
    "                              out_specs=(spec,) * outputs,\n"
    "                              interpret=INTERPRET)(*arrays)\n")
_SILU_FORWARD = (
    "    def forward_kernel(x_ref, y_ref, s_ref):\n"
    "        v = x_ref[...]\n"
    "        s = jax.nn.sigmoid(v)\n"
    "        y_ref[...] = v * s\n"
    "        s_ref[...] = s\n")
_SILU_WIRING = (
    "    @jax.custom_vjp\n"
    "    def f(v):\n"
    "        return call(forward_kernel, 2, v)[0]\n"
    "    def f_fwd(v):\n"
    "        y, s = call(forward_kernel, 2, v)\n"
    "        return y, (v, s)\n"
    "    f.defvjp(f_fwd, lambda res, g: call(backward_kernel, 1, *res, g))\n"
    "    return f(x)\n")
# The kernels and custom_vjp of a correct answer, for a `call` of its own (the tile
# layout below, and the 1-D blocks of 100 a TPU refuses).
_SILU_VJP_KERNELS = (
    _SILU_FORWARD
    + "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
    "        v, s = x_ref[...], s_ref[...]\n"
    "        o_ref[...] = g_ref[...] * (s + v * s * (1.0 - s))\n"
    + _SILU_WIRING)

# The grid and blocks of softmax_weighted_sum (exercise 9), as the statement asks them.
_SWS_GRID = (
    "        grid=(pl.cdiv(m, bm), n // bn),\n"
    "        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
    "                  pl.BlockSpec((bn, d), lambda i, j: (j, 0))],\n"
    "        out_specs=pl.BlockSpec((bm, d), lambda i, j: (i, 0)),\n")

# The kernel call shared by the softmax_weighted_sum answers below that keep their running
# state in scratch (the maximum and the sum as (bm, 1) columns, the weighted sum as (bm, d)).
_SWS_CALL = (
    "    (m, n), d = s.shape, v.shape[1]\n"
    "    return pl.pallas_call(\n"
    "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
    + _SWS_GRID
    + "        scratch_shapes=[pltpu.VMEM((bm, 1), jnp.float32), pltpu.VMEM((bm, 1), jnp.float32),\n"
    "                        pltpu.VMEM((bm, d), jnp.float32)],\n"
    "        interpret=INTERPRET)(s, v)\n")


# The update of a correct answer: the running state rescaled to the new maximum.
_SWS_UPDATE = (
    "        new_max = jnp.maximum(max_ref[...], jnp.max(scores, axis=1, keepdims=True))\n"
    "        rescale = jnp.exp(max_ref[...] - new_max)\n"
    "        weights = jnp.exp(scores - new_max)\n"
    "        sum_ref[...] = sum_ref[...] * rescale + jnp.sum(weights, axis=1, keepdims=True)\n"
    "        acc_ref[...] = acc_ref[...] * rescale + jnp.dot(weights, v_ref[...])\n"
    "        max_ref[...] = new_max\n")


def _sws(update: str, axis: int = 1, call: str = _SWS_CALL) -> str:
    """A softmax_weighted_sum answer whose kernel initializes the running state on the
    first step along grid axis `axis`, runs `update` (8-space indented, names: scores,
    v_ref, max_ref, sum_ref, acc_ref), writes acc / sum on the last step, and ends with
    `call`."""
    return ("def softmax_weighted_sum(s, v, bm, bn):\n"
            "    def kernel(s_ref, v_ref, o_ref, max_ref, sum_ref, acc_ref):\n"
            f"        j = pl.program_id({axis})\n"
            "        @pl.when(j == 0)\n"
            "        def _init():\n"
            "            max_ref[...] = jnp.full(max_ref.shape, -jnp.inf, jnp.float32)\n"
            "            sum_ref[...] = jnp.zeros_like(sum_ref)\n"
            "            acc_ref[...] = jnp.zeros_like(acc_ref)\n"
            "        scores = s_ref[...]\n"
            + update +
            f"        @pl.when(j == pl.num_programs({axis}) - 1)\n"
            "        def _write():\n"
            "            o_ref[...] = acc_ref[...] / sum_ref[...]\n"
            + call)


_SOFTMAX_WEIGHTED_SUM = {
    "correct": [
        # The running state replicated across 128 lanes, as Pallas's TPU flash attention
        # keeps it; the rescale factor named alpha; division as a multiplication.
        "def softmax_weighted_sum(s, v, bm, bn):\n"
        "    def kernel(s_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):\n"
        "        @pl.when(pl.program_id(1) == 0)\n"
        "        def _():\n"
        "            m_ref[...] = jnp.full(m_ref.shape, -1e30, jnp.float32)\n"
        "            l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)\n"
        "            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)\n"
        "        x = s_ref[...]\n"
        "        m_prev = m_ref[:, :1]\n"
        "        m_cur = jnp.max(x, axis=-1, keepdims=True)\n"
        "        m_next = jnp.maximum(m_prev, m_cur)\n"
        "        alpha = jnp.exp(m_prev - m_next)\n"
        "        p = jnp.exp(x - m_next)\n"
        "        l_next = alpha * l_ref[:, :1] + p.sum(axis=-1, keepdims=True)\n"
        "        acc_ref[...] = alpha * acc_ref[...] + p @ v_ref[...]\n"
        "        m_ref[...] = jnp.broadcast_to(m_next, m_ref.shape)\n"
        "        l_ref[...] = jnp.broadcast_to(l_next, l_ref.shape)\n"
        "        @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)\n"
        "        def _():\n"
        "            o_ref[...] = acc_ref[...] * (1.0 / l_ref[:, :1])\n"
        "    m, n = s.shape\n"
        "    d = v.shape[1]\n"
        "    return pl.pallas_call(\n"
        "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
        + _SWS_GRID
        + "        scratch_shapes=[pltpu.VMEM((bm, 128), jnp.float32),\n"
        "                        pltpu.VMEM((bm, 128), jnp.float32),\n"
        "                        pltpu.VMEM((bm, d), jnp.float32)],\n"
        "        compiler_params=pltpu.CompilerParams(\n"
        "            dimension_semantics=(\"parallel\", \"arbitrary\")),\n"
        "        interpret=INTERPRET)(s, v)\n",
        # The output block itself always holds the normalized partial result: each step
        # reweights it by old_sum * rescale / new_sum; no division at the end.
        "def softmax_weighted_sum(s, v, bm, bn):\n"
        "    def kernel(s_ref, v_ref, o_ref, max_ref, sum_ref):\n"
        "        first = pl.program_id(1) == 0\n"
        "        x = s_ref[...]\n"
        "        block_max = jnp.max(x, axis=1, keepdims=True)\n"
        "        old_max = jnp.where(first, block_max, max_ref[...])\n"
        "        old_sum = jnp.where(first, 0.0, sum_ref[...])\n"
        "        old_out = jnp.where(first, 0.0, o_ref[...])\n"
        "        new_max = jnp.maximum(old_max, block_max)\n"
        "        w = jnp.exp(x - new_max)\n"
        "        kept = old_sum * jnp.exp(old_max - new_max)\n"
        "        new_sum = kept + jnp.sum(w, axis=1, keepdims=True)\n"
        "        o_ref[...] = (old_out * kept + jax.lax.dot(w, v_ref[...])) / new_sum\n"
        "        max_ref[...] = new_max\n"
        "        sum_ref[...] = new_sum\n"
        "    m, n = s.shape\n"
        "    d = v.shape[1]\n"
        "    return pl.pallas_call(\n"
        "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
        + _SWS_GRID
        + "        scratch_shapes=[pltpu.VMEM((bm, 1), jnp.float32)] * 2,\n"
        "        interpret=INTERPRET)(s, v)\n",
        # The first block initializes the state from itself (no -inf), later blocks update
        # it: two pl.when branches; the grid and specs in a pl.GridSpec.
        "def softmax_weighted_sum(s, v, bm, bn):\n"
        "    def kernel(s_ref, v_ref, o_ref, mx, sm, acc):\n"
        "        j = pl.program_id(1)\n"
        "        x = s_ref[...]\n"
        "        @pl.when(j == 0)\n"
        "        def _first():\n"
        "            mx[...] = jnp.max(x, axis=1, keepdims=True)\n"
        "            e = jnp.exp(x - mx[...])\n"
        "            sm[...] = jnp.sum(e, axis=1, keepdims=True)\n"
        "            acc[...] = jnp.dot(e, v_ref[...], preferred_element_type=jnp.float32)\n"
        "        @pl.when(j > 0)\n"
        "        def _next():\n"
        "            new = jnp.maximum(mx[...], jnp.max(x, axis=1, keepdims=True))\n"
        "            c = jnp.exp(mx[...] - new)\n"
        "            e = jnp.exp(x - new)\n"
        "            sm[...] = c * sm[...] + jnp.sum(e, axis=1, keepdims=True)\n"
        "            acc[...] = c * acc[...] + jnp.dot(e, v_ref[...], preferred_element_type=jnp.float32)\n"
        "            mx[...] = new\n"
        "        @pl.when(j == pl.num_programs(1) - 1)\n"
        "        def _out():\n"
        "            o_ref[...] = acc[...] / sm[...]\n"
        "    m, n = s.shape\n"
        "    d = v.shape[1]\n"
        "    spec = pl.GridSpec(grid=(pl.cdiv(m, bm), n // bn),\n"
        "                       in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
        "                                 pl.BlockSpec((bn, d), lambda i, j: (j, 0))],\n"
        "                       out_specs=pl.BlockSpec((bm, d), lambda i, j: (i, 0)),\n"
        "                       scratch_shapes=[pltpu.VMEM((bm, 1), jnp.float32),\n"
        "                                       pltpu.VMEM((bm, 1), jnp.float32),\n"
        "                                       pltpu.VMEM((bm, d), jnp.float32)])\n"
        "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
        "                          grid_spec=spec, interpret=INTERPRET)(s, v)\n",
    ],
    "wrong": [
        ("the running sum is not rescaled when the maximum grows",
         _sws("        new_max = jnp.maximum(max_ref[...], jnp.max(scores, axis=1, keepdims=True))\n"
              "        rescale = jnp.exp(max_ref[...] - new_max)\n"
              "        weights = jnp.exp(scores - new_max)\n"
              "        sum_ref[...] = sum_ref[...] + jnp.sum(weights, axis=1, keepdims=True)\n"
              "        acc_ref[...] = acc_ref[...] * rescale + jnp.dot(weights, v_ref[...])\n"
              "        max_ref[...] = new_max\n")),
        ("the weighted sum is not rescaled when the maximum grows",
         _sws("        new_max = jnp.maximum(max_ref[...], jnp.max(scores, axis=1, keepdims=True))\n"
              "        rescale = jnp.exp(max_ref[...] - new_max)\n"
              "        weights = jnp.exp(scores - new_max)\n"
              "        sum_ref[...] = sum_ref[...] * rescale + jnp.sum(weights, axis=1, keepdims=True)\n"
              "        acc_ref[...] = acc_ref[...] + jnp.dot(weights, v_ref[...])\n"
              "        max_ref[...] = new_max\n")),
        ("the maximum is not carried: each block is shifted by its own maximum, and "
         "exp(old - new) overflows when a later block is much smaller",
         _sws("        new_max = jnp.max(scores, axis=1, keepdims=True)\n"
              "        rescale = jnp.exp(max_ref[...] - new_max)\n"
              "        weights = jnp.exp(scores - new_max)\n"
              "        sum_ref[...] = sum_ref[...] * rescale + jnp.sum(weights, axis=1, keepdims=True)\n"
              "        acc_ref[...] = acc_ref[...] * rescale + jnp.dot(weights, v_ref[...])\n"
              "        max_ref[...] = new_max\n")),
        ("no maximum subtracted at all: exp overflows for scores of 1e4",
         _sws("        weights = jnp.exp(scores)\n"
              "        sum_ref[...] = sum_ref[...] + jnp.sum(weights, axis=1, keepdims=True)\n"
              "        acc_ref[...] = acc_ref[...] + jnp.dot(weights, v_ref[...])\n")),
        ("each block's weighted sum normalized by its own sum: an average of block averages",
         _sws("        new_max = jnp.maximum(max_ref[...], jnp.max(scores, axis=1, keepdims=True))\n"
              "        weights = jnp.exp(scores - new_max)\n"
              "        sum_ref[...] = jnp.ones_like(sum_ref) * pl.num_programs(1)\n"
              "        acc_ref[...] += jnp.dot(weights, v_ref[...]) / jnp.sum(weights, axis=1, keepdims=True)\n"
              "        max_ref[...] = new_max\n")),
        ("two passes over each row: its maximum computed outside the kernel with jnp",
         "def softmax_weighted_sum(s, v, bm, bn):\n"
         "    def kernel(s_ref, mx_ref, v_ref, o_ref, sum_ref, acc_ref):\n"
         "        @pl.when(pl.program_id(1) == 0)\n"
         "        def _init():\n"
         "            sum_ref[...] = jnp.zeros_like(sum_ref)\n"
         "            acc_ref[...] = jnp.zeros_like(acc_ref)\n"
         "        w = jnp.exp(s_ref[...] - mx_ref[...])\n"
         "        sum_ref[...] += jnp.sum(w, axis=1, keepdims=True)\n"
         "        acc_ref[...] += jnp.dot(w, v_ref[...])\n"
         "        @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)\n"
         "        def _write():\n"
         "            o_ref[...] = acc_ref[...] / sum_ref[...]\n"
         "    (m, n), d = s.shape, v.shape[1]\n"
         "    row_max = jnp.max(s, axis=1, keepdims=True)\n"
         "    return pl.pallas_call(\n"
         "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
         "        grid=(pl.cdiv(m, bm), n // bn),\n"
         "        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
         "                  pl.BlockSpec((bm, 1), lambda i, j: (i, 0)),\n"
         "                  pl.BlockSpec((bn, d), lambda i, j: (j, 0))],\n"
         "        out_specs=pl.BlockSpec((bm, d), lambda i, j: (i, 0)),\n"
         "        scratch_shapes=[pltpu.VMEM((bm, 1), jnp.float32), pltpu.VMEM((bm, d), jnp.float32)],\n"
         "        interpret=INTERPRET)(s, row_max, v)\n"),
        ("the softmax computed outside the kernel with jax.nn.softmax; the kernel only "
         "accumulates the weighted sum",
         "def softmax_weighted_sum(s, v, bm, bn):\n"
         "    def kernel(p_ref, v_ref, o_ref):\n"
         "        @pl.when(pl.program_id(1) == 0)\n"
         "        def _init():\n"
         "            o_ref[...] = jnp.zeros_like(o_ref)\n"
         "        o_ref[...] += jnp.dot(p_ref[...], v_ref[...])\n"
         "    (m, n), d = s.shape, v.shape[1]\n"
         "    p = jax.nn.softmax(s, axis=1)\n"
         "    return pl.pallas_call(\n"
         "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
         + _SWS_GRID
         + "        interpret=INTERPRET)(p, v)\n"),
        ("the running maximum and sum kept in two extra outputs of shape (m,), in (bm,) "
         "blocks: 1-D blocks of 8 a TPU refuses, and two outputs too many",
         "def softmax_weighted_sum(s, v, bm, bn):\n"
         "    def kernel(s_ref, v_ref, o_ref, mx_ref, sm_ref):\n"
         "        first = pl.program_id(1) == 0\n"
         "        x = s_ref[...]\n"
         "        old_max = jnp.where(first, -jnp.inf, mx_ref[...])\n"
         "        old_sum = jnp.where(first, 0.0, sm_ref[...])\n"
         "        old_acc = jnp.where(first, 0.0, o_ref[...])\n"
         "        new_max = jnp.maximum(old_max, jnp.max(x, axis=1))\n"
         "        c = jnp.exp(old_max - new_max)\n"
         "        w = jnp.exp(x - new_max[:, None])\n"
         "        new_sum = old_sum * c + jnp.sum(w, axis=1)\n"
         "        acc = old_acc * c[:, None] + jnp.dot(w, v_ref[...])\n"
         "        mx_ref[...] = new_max\n"
         "        sm_ref[...] = new_sum\n"
         "        last = pl.program_id(1) == pl.num_programs(1) - 1\n"
         "        o_ref[...] = jnp.where(last, acc / new_sum[:, None], acc)\n"
         "    (m, n), d = s.shape, v.shape[1]\n"
         "    row = pl.BlockSpec((bm,), lambda i, j: (i,))\n"
         "    col = jax.ShapeDtypeStruct((m,), jnp.float32)\n"
         "    out, _, _ = pl.pallas_call(\n"
         "        kernel, out_shape=(jax.ShapeDtypeStruct((m, d), jnp.float32), col, col),\n"
         "        grid=(pl.cdiv(m, bm), n // bn),\n"
         "        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
         "                  pl.BlockSpec((bn, d), lambda i, j: (j, 0))],\n"
         "        out_specs=(pl.BlockSpec((bm, d), lambda i, j: (i, 0)), row, row),\n"
         "        interpret=INTERPRET)(s, v)\n"
         "    return out\n"),
        ("the column axis first in the grid: the scratch state of one row block is "
         "overwritten by the next before the row is finished",
         _sws(_SWS_UPDATE, axis=0,
              call="    (m, n), d = s.shape, v.shape[1]\n"
                   "    return pl.pallas_call(\n"
                   "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
                   "        grid=(n // bn, pl.cdiv(m, bm)),\n"
                   "        in_specs=[pl.BlockSpec((bm, bn), lambda j, i: (i, j)),\n"
                   "                  pl.BlockSpec((bn, d), lambda j, i: (j, 0))],\n"
                   "        out_specs=pl.BlockSpec((bm, d), lambda j, i: (i, 0)),\n"
                   "        scratch_shapes=[pltpu.VMEM((bm, 1), jnp.float32)] * 2\n"
                   "                       + [pltpu.VMEM((bm, d), jnp.float32)],\n"
                   "        interpret=INTERPRET)(s, v)\n")),
        ("bn ignored: whole rows in one block, a one-axis grid (right values, no streaming)",
         "def softmax_weighted_sum(s, v, bm, bn):\n"
         "    def kernel(s_ref, v_ref, o_ref):\n"
         "        x = s_ref[...]\n"
         "        w = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))\n"
         "        o_ref[...] = jnp.dot(w, v_ref[...]) / jnp.sum(w, axis=1, keepdims=True)\n"
         "    (m, n), d = s.shape, v.shape[1]\n"
         "    return pl.pallas_call(\n"
         "        kernel, out_shape=jax.ShapeDtypeStruct((m, d), jnp.float32),\n"
         "        grid=(pl.cdiv(m, bm),),\n"
         "        in_specs=[pl.BlockSpec((bm, n), lambda i: (i, 0)),\n"
         "                  pl.BlockSpec((n, d), lambda i: (0, 0))],\n"
         "        out_specs=pl.BlockSpec((bm, d), lambda i: (i, 0)),\n"
         "        interpret=INTERPRET)(s, v)\n"),
        ("the running maximum starts at 0 instead of -inf: rows whose scores all lie below "
         "about -88 underflow to 0 / 0",
         _sws(_SWS_UPDATE).replace("jnp.full(max_ref.shape, -jnp.inf, jnp.float32)",
                                   "jnp.zeros_like(max_ref)")),
    ],
}


VARIANTS = {
    "10_pallas_block_ids": {
        "correct": [
            # The grid's axes swapped, with index map and numbering to match.
            "def block_ids(m, n, bm, bn):\n"
            "    def kernel(o_ref):\n"
            "        step = pl.program_id(1) * pl.num_programs(0) + pl.program_id(0)\n"
            "        o_ref[...] = jnp.zeros(o_ref.shape, jnp.int32) + step\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
            "                          grid=(pl.cdiv(n, bn), pl.cdiv(m, bm)),\n"
            "                          out_specs=pl.BlockSpec((bm, bn), lambda j, i: (i, j)),\n"
            "                          interpret=INTERPRET)()\n",
            # The number of column blocks computed in Python and closed over.
            "def block_ids(m, n, bm, bn):\n"
            "    col_blocks = -(-n // bn)\n"
            "    def kernel(o_ref):\n"
            "        i, j = pl.program_id(0), pl.program_id(1)\n"
            "        o_ref[...] = jnp.broadcast_to(i * col_blocks + j, o_ref.shape).astype(jnp.int32)\n"
            "    grid = (-(-m // bm), col_blocks)\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
            "                          grid=grid, out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
            "                          interpret=INTERPRET)()\n",
        ],
        "wrong": [
            ("floor division in the grid: the last partial blocks are never written",
             "def block_ids(m, n, bm, bn):\n"
             "    def kernel(o_ref):\n"
             "        step = pl.program_id(0) * pl.num_programs(1) + pl.program_id(1)\n"
             "        o_ref[...] = jnp.full(o_ref.shape, step, jnp.int32)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          grid=(m // bm, n // bn),\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)()\n"),
            ("right values from jnp, no kernel at all",
             "def block_ids(m, n, bm, bn):\n"
             "    r = jnp.arange(m)[:, None] // bm\n"
             "    c = jnp.arange(n)[None, :] // bn\n"
             "    return (r * pl.cdiv(n, bn) + c).astype(jnp.int32)\n"),
            ("steps numbered column-major",
             "def block_ids(m, n, bm, bn):\n"
             "    def kernel(o_ref):\n"
             "        step = pl.program_id(1) * pl.num_programs(0) + pl.program_id(0)\n"
             "        o_ref[...] = jnp.full(o_ref.shape, step, jnp.int32)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)()\n"),
            ("one kernel step over the whole matrix, numbers from iota: blocks ignored",
             "def block_ids(m, n, bm, bn):\n"
             "    def kernel(o_ref):\n"
             "        r = jax.lax.broadcasted_iota(jnp.int32, (m, n), 0) // bm\n"
             "        c = jax.lax.broadcasted_iota(jnp.int32, (m, n), 1) // bn\n"
             "        o_ref[...] = r * pl.cdiv(n, bn) + c\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          interpret=INTERPRET)()\n"),
            ("num_programs(0) instead of the number of column blocks",
             "def block_ids(m, n, bm, bn):\n"
             "    def kernel(o_ref):\n"
             "        step = pl.program_id(0) * pl.num_programs(0) + pl.program_id(1)\n"
             "        o_ref[...] = jnp.full(o_ref.shape, step, jnp.int32)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)()\n"),
            ("the block index i written instead of the step number",
             "def block_ids(m, n, bm, bn):\n"
             "    def kernel(o_ref):\n"
             "        o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0), jnp.int32)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)()\n"),
            ("the column-block part of each step number added outside the kernel with jnp: "
             "the kernel writes i * nj only",
             "def block_ids(m, n, bm, bn):\n"
             "    nj = pl.cdiv(n, bn)\n"
             "    def kernel(o_ref):\n"
             "        o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0) * nj, jnp.int32)\n"
             "    rows = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),\n"
             "                          grid=(pl.cdiv(m, bm), nj),\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)()\n"
             "    return rows + (jnp.arange(n, dtype=jnp.int32) // bn)[None, :]\n"),
        ],
    },
    "10_pallas_add_row_bias": {
        "correct": [
            # b reshaped to (1, n) outside, in (1, bn) blocks: the same block of b.
            "def add_row_bias(x, b, bm, bn):\n"
            "    def kernel(x_ref, b_ref, o_ref):\n"
            "        o_ref[...] = x_ref[...] + b_ref[...]\n"
            "    m, n = x.shape\n"
            "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
            "                          in_specs=[spec, pl.BlockSpec((1, bn), lambda i, j: (0, j))],\n"
            "                          out_specs=spec, interpret=INTERPRET)(x, b.reshape(1, n))\n",
            # Column blocks as the outer grid axis.
            "def add_row_bias(x, b, bm, bn):\n"
            "    def kernel(x_ref, b_ref, o_ref):\n"
            "        o_ref[...] = x_ref[...] + jnp.broadcast_to(b_ref[...], o_ref.shape)\n"
            "    m, n = x.shape\n"
            "    spec = pl.BlockSpec((bm, bn), lambda j, i: (i, j))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(n, bn), pl.cdiv(m, bm)),\n"
            "                          in_specs=[spec, pl.BlockSpec((bn,), lambda j, i: (j,))],\n"
            "                          out_specs=spec, interpret=INTERPRET)(x, b)\n",
        ],
        "wrong": [
            ("b's index map follows the row step i instead of the column step j",
             "def add_row_bias(x, b, bm, bn):\n"
             "    def kernel(x_ref, b_ref, o_ref):\n"
             "        o_ref[...] = x_ref[...] + b_ref[...][None, :]\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          in_specs=[spec, pl.BlockSpec((bn,), lambda i, j: (i,))],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x, b)\n"),
            ("the addition done in jnp after a copy kernel",
             "def add_row_bias(x, b, bm, bn):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        o_ref[...] = x_ref[...]\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
             "    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                       grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)), in_specs=[spec],\n"
             "                       out_specs=spec, interpret=INTERPRET)(x)\n"
             "    return y + b[None, :]\n"),
            ("all of b loaded at every step and sliced by hand: b's block is (n,), not (bn,)",
             "def add_row_bias(x, b, bm, bn):\n"
             "    m, n = x.shape\n"
             "    bp = jnp.pad(b, (0, pl.cdiv(n, bn) * bn - n))\n"
             "    def kernel(x_ref, b_ref, o_ref):\n"
             "        j = pl.program_id(1)\n"
             "        o_ref[...] = x_ref[...] + b_ref[pl.ds(j * bn, bn)][None, :]\n"
             "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          in_specs=[spec, pl.BlockSpec(bp.shape, lambda i, j: (0,))],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x, bp)\n"),
            ("floor division in the grid: the partial blocks keep NaN",
             "def add_row_bias(x, b, bm, bn):\n"
             "    def kernel(x_ref, b_ref, o_ref):\n"
             "        o_ref[...] = x_ref[...] + b_ref[...][None, :]\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(m // bm, n // bn),\n"
             "                          in_specs=[spec, pl.BlockSpec((bn,), lambda i, j: (j,))],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x, b)\n"),
            ("blocks of whole rows: bn ignored",
             "def add_row_bias(x, b, bm, bn):\n"
             "    def kernel(x_ref, b_ref, o_ref):\n"
             "        o_ref[...] = x_ref[...] + b_ref[...][None, :]\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, bm),),\n"
             "                          in_specs=[spec, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x, b)\n"),
        ],
    },
    "10_pallas_silu": {
        "correct": [
            "def silu(x, block):\n"
            "    def kernel(x_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        o_ref[...] = v / (1.0 + jnp.exp(-v))\n"
            "    spec = pl.BlockSpec((block,), lambda i: (i,))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],\n"
            "                          out_specs=spec, interpret=INTERPRET)(x)\n",
            "def silu(x, block):\n"
            "    def kernel(x_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        o_ref[...] = 0.5 * v * (1.0 + jnp.tanh(0.5 * v))\n"
            "    n = x.shape[0]\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),\n"
            "                          grid=((n + block - 1) // block,),\n"
            "                          in_specs=[pl.BlockSpec((block,), lambda i: (i,))],\n"
            "                          out_specs=pl.BlockSpec((block,), lambda i: (i,)),\n"
            "                          interpret=INTERPRET)(x)\n",
        ],
        "wrong": [
            ("floor division in the grid: the tail keeps NaN",
             "def silu(x, block):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        o_ref[...] = v * jax.nn.sigmoid(v)\n"
             "    spec = pl.BlockSpec((block,), lambda i: (i,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(x.shape[0] // block,), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("sigmoid in the kernel, the multiplication by x in jnp outside it",
             "def silu(x, block):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        o_ref[...] = jax.nn.sigmoid(x_ref[...])\n"
             "    spec = pl.BlockSpec((block,), lambda i: (i,))\n"
             "    s = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                       grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],\n"
             "                       out_specs=spec, interpret=INTERPRET)(x)\n"
             "    return x * s\n"),
            ("jax.nn.silu in jnp: right values, no kernel",
             "def silu(x, block):\n"
             "    return jax.nn.silu(x)\n"),
            ("sigmoid as exp(x) / (1 + exp(x)): inf / inf = NaN for large x",
             "def silu(x, block):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        e = jnp.exp(v)\n"
             "        o_ref[...] = v * e / (1.0 + e)\n"
             "    spec = pl.BlockSpec((block,), lambda i: (i,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("block ignored: one step over the whole array",
             "def silu(x, block):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        o_ref[...] = v * jax.nn.sigmoid(v)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          interpret=INTERPRET)(x)\n"),
            ("the sigmoid alone, without the factor x",
             "def silu(x, block):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        o_ref[...] = jax.nn.sigmoid(x_ref[...])\n"
             "    spec = pl.BlockSpec((block,), lambda i: (i,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
        ],
    },
    "10_pallas_softmax_rows": {
        "correct": [
            # jax.nn.softmax inside the kernel subtracts the row maximum itself.
            "def softmax_rows(x, block_rows):\n"
            "    def kernel(x_ref, o_ref):\n"
            "        o_ref[...] = jax.nn.softmax(x_ref[...], axis=-1)\n"
            "    m, n = x.shape\n"
            "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
            "                          out_specs=spec, interpret=INTERPRET)(x)\n",
            "def softmax_rows(x, block_rows):\n"
            "    def kernel(x_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        e = jnp.exp(v - v.max(axis=1)[:, None])\n"
            "        o_ref[...] = e * (1.0 / e.sum(axis=1))[:, None]\n"
            "    m, n = x.shape\n"
            "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
            "                          out_specs=spec, interpret=INTERPRET)(x)\n",
        ],
        "wrong": [
            ("no maximum subtracted: exp overflows, inf / inf = NaN",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        e = jnp.exp(x_ref[...])\n"
             "        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("one maximum for the whole block: rows far below it underflow to 0 / 0",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        e = jnp.exp(v - jnp.max(v))\n"
             "        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("jax.nn.softmax in jnp after a copy kernel: the reductions run outside",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        o_ref[...] = x_ref[...]\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                       grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
             "                       out_specs=spec, interpret=INTERPRET)(x)\n"
             "    return jax.nn.softmax(y, axis=1)\n"),
            ("softmax over the block's columns (axis 0) instead of its rows",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        e = jnp.exp(v - jnp.max(v, axis=0, keepdims=True))\n"
             "        o_ref[...] = e / jnp.sum(e, axis=0, keepdims=True)\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("floor division in the grid: the last rows keep NaN",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        e = jnp.exp(v - jnp.max(v, axis=1, keepdims=True))\n"
             "        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)\n"
             "    m, n = x.shape\n"
             "    spec = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(m // block_rows,), in_specs=[spec],\n"
             "                          out_specs=spec, interpret=INTERPRET)(x)\n"),
            ("block_rows ignored: one step over the whole matrix",
             "def softmax_rows(x, block_rows):\n"
             "    def kernel(x_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        e = jnp.exp(v - jnp.max(v, axis=1, keepdims=True))\n"
             "        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          interpret=INTERPRET)(x)\n"),
        ],
    },
    "10_pallas_layer_norm": {
        "correct": [
            # The shift read as a value slice, the sums as means.
            "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
            "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        d = v - v[:, :1]\n"
            "        mu = jnp.mean(d, axis=1, keepdims=True)\n"
            "        var = jnp.mean(d * d, axis=1, keepdims=True) - mu ** 2\n"
            "        o_ref[...] = (d - mu) / jnp.sqrt(jnp.maximum(var, 0.0) + eps) * g_ref[...] + b_ref[...]\n"
            "    m, n = x.shape\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
            "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n",
            # gamma and beta as (1, n) rows; the shift is the row's last entry.
            "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
            "    m, n = x.shape\n"
            "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
            "        d = x_ref[...] - x_ref[:, n - 1:]\n"
            "        s1 = d.sum(axis=1, keepdims=True)\n"
            "        s2 = (d * d).sum(axis=1, keepdims=True)\n"
            "        var = jnp.maximum(s2 / n - (s1 / n) ** 2, 0.0)\n"
            "        o_ref[...] = g_ref[...] * (d - s1 / n) * jax.lax.rsqrt(var + eps) + b_ref[...]\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    whole = pl.BlockSpec((1, n), lambda i: (0, 0))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
            "                          out_specs=rows, interpret=INTERPRET)(\n"
            "        x, gamma.reshape(1, n), beta.reshape(1, n))\n",
            # The one-pass sums as products with a column of ones (a reduction all the same).
            "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
            "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        d = v - v[:, :1]\n"
            "        n = d.shape[1]\n"
            "        ones = jnp.ones((n, 1), jnp.float32)\n"
            "        mean_d = jnp.dot(d, ones, precision=jax.lax.Precision.HIGHEST) / n\n"
            "        msq = jnp.dot(d * d, ones, precision=jax.lax.Precision.HIGHEST) / n\n"
            "        var = jnp.maximum(msq - mean_d * mean_d, 0.0)\n"
            "        o_ref[...] = (d - mean_d) * jax.lax.rsqrt(var + eps) * g_ref[...] + b_ref[...]\n"
            "    m, n = x.shape\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
            "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n",
            # gamma and beta as (1, n) rows, beta passed before gamma (the statement
            # leaves their order free).
            "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
            "    def kernel(x_ref, b_ref, g_ref, o_ref):\n"
            "        v = x_ref[...]\n"
            "        d = v - v[:, :1]\n"
            "        n = v.shape[1]\n"
            "        s1 = jnp.sum(d, axis=1, keepdims=True)\n"
            "        s2 = jnp.sum(d * d, axis=1, keepdims=True)\n"
            "        mean_d = s1 / n\n"
            "        var = jnp.maximum(s2 / n - mean_d ** 2, 0.0)\n"
            "        o_ref[...] = (d - mean_d) / jnp.sqrt(var + eps) * g_ref[...] + b_ref[...]\n"
            "    m, n = x.shape\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    row = pl.BlockSpec((1, n), lambda i: (0, 0))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, row, row],\n"
            "                          out_specs=rows, interpret=INTERPRET)(\n"
            "        x, beta.reshape(1, n), gamma.reshape(1, n))\n",
        ],
        "wrong": [
            ("gamma and beta stacked into one (2, n) input: two inputs, not the three the "
             "statement names",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, p_ref, o_ref):\n"
             "        d = x_ref[...] - x_ref[:, :1]\n"
             "        n = d.shape[1]\n"
             "        mean_d = jnp.sum(d, axis=1, keepdims=True) / n\n"
             "        var = jnp.maximum(jnp.sum(d * d, axis=1, keepdims=True) / n - mean_d * mean_d, 0.0)\n"
             "        o_ref[...] = (d - mean_d) * jax.lax.rsqrt(var + eps) * p_ref[0] + p_ref[1]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    both = pl.BlockSpec((2, n), lambda i: (0, 0))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, both],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, jnp.stack([gamma, beta]))\n"),
            ("two passes: the variance reads the mean",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        mu = jnp.mean(v, axis=1, keepdims=True)\n"
             "        var = jnp.mean((v - mu) ** 2, axis=1, keepdims=True)\n"
             "        o_ref[...] = (v - mu) * jax.lax.rsqrt(var + eps) * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n"),
            ("jnp.var in the kernel: two passes inside it",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        mu = jnp.mean(v, axis=1, keepdims=True)\n"
             "        var = jnp.var(v, axis=1, keepdims=True)\n"
             "        o_ref[...] = (v - mu) * jax.lax.rsqrt(var + eps) * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n"),
            ("one pass without the shift: sum(x*x)/n - mean**2 cancels for a large mean",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        mu = jnp.mean(v, axis=1, keepdims=True)\n"
             "        var = jnp.maximum(jnp.mean(v * v, axis=1, keepdims=True) - mu * mu, 0.0)\n"
             "        o_ref[...] = (v - mu) * jax.lax.rsqrt(var + eps) * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n"),
            ("statistics computed in jnp outside the kernel and passed in",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    mu = jnp.mean(x, axis=1, keepdims=True)\n"
             "    inv = jax.lax.rsqrt(jnp.var(x, axis=1, keepdims=True) + eps)\n"
             "    def kernel(x_ref, mu_ref, inv_ref, g_ref, b_ref, o_ref):\n"
             "        o_ref[...] = (x_ref[...] - mu_ref[...]) * inv_ref[...] * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    col = pl.BlockSpec((block_rows, 1), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, col, col, whole, whole], out_specs=rows,\n"
             "                          interpret=INTERPRET)(x, mu, inv, gamma, beta)\n"),
            ("eps ignored: 1e-5 hard-coded",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
             "        d = x_ref[...] - x_ref[:, :1]\n"
             "        n = d.shape[1]\n"
             "        mean_d = jnp.sum(d, axis=1, keepdims=True) / n\n"
             "        var = jnp.maximum(jnp.sum(d * d, axis=1, keepdims=True) / n - mean_d ** 2, 0.0)\n"
             "        o_ref[...] = (d - mean_d) * jax.lax.rsqrt(var + 1e-5) * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n"),
            ("unbiased variance (divides by n - 1)",
             "def layer_norm(x, gamma, beta, block_rows, eps=1e-5):\n"
             "    def kernel(x_ref, g_ref, b_ref, o_ref):\n"
             "        d = x_ref[...] - x_ref[:, :1]\n"
             "        n = d.shape[1]\n"
             "        s1 = jnp.sum(d, axis=1, keepdims=True)\n"
             "        var = jnp.maximum((jnp.sum(d * d, axis=1, keepdims=True) - s1 * s1 / n) / (n - 1), 0.0)\n"
             "        o_ref[...] = (d - s1 / n) * jax.lax.rsqrt(var + eps) * g_ref[...] + b_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    whole = pl.BlockSpec((n,), lambda i: (0,))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                          grid=(pl.cdiv(m, block_rows),), in_specs=[rows, whole, whole],\n"
             "                          out_specs=rows, interpret=INTERPRET)(x, gamma, beta)\n"),
        ],
    },
    "10_pallas_matmul": {
        "correct": [
            # Store the first product, add the others: two pl.when branches.
            "def matmul(x, y, bm, bn, bk):\n"
            "    def kernel(x_ref, y_ref, o_ref):\n"
            "        k = pl.program_id(2)\n"
            "        prod = jax.lax.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)\n"
            "        @pl.when(k == 0)\n"
            "        def _first():\n"
            "            o_ref[...] = prod\n"
            "        @pl.when(k > 0)\n"
            "        def _rest():\n"
            "            o_ref[...] = o_ref[...] + prod\n"
            "    m, K = x.shape\n"
            "    n = y.shape[1]\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
            "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
            "                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
            "                                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
            "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),\n"
            "                          interpret=INTERPRET)(x, y)\n",
            # The grid and specs bundled in a pl.GridSpec; jnp.matmul for the product.
            "def matmul(x, y, bm, bn, bk):\n"
            "    def kernel(x_ref, y_ref, o_ref):\n"
            "        @pl.when(pl.program_id(2) == 0)\n"
            "        def _():\n"
            "            o_ref[...] = jnp.zeros(o_ref.shape, jnp.float32)\n"
            "        o_ref[...] += jnp.matmul(x_ref[...], y_ref[...])\n"
            "    m, K = x.shape\n"
            "    n = y.shape[1]\n"
            "    spec = pl.GridSpec(grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
            "                       in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
            "                                 pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
            "                       out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)))\n"
            "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
            "                          grid_spec=spec, interpret=INTERPRET)(x, y)\n",
        ],
        "wrong": [
            ("the output block is never zeroed: it starts as NaN (garbage on hardware)",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        o_ref[...] += jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
             "                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
             "                                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
            ("the output block overwritten at each step: only the last k block counts",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        @pl.when(pl.program_id(2) == 0)\n"
             "        def _():\n"
             "            o_ref[...] = jnp.zeros_like(o_ref)\n"
             "        o_ref[...] = jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
             "                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
             "                                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
            ("bk ignored: whole K panels and a 2-D grid (right values, wrong blocks)",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        o_ref[...] = jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          in_specs=[pl.BlockSpec((bm, K), lambda i, j: (i, 0)),\n"
             "                                    pl.BlockSpec((K, bn), lambda i, j: (0, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
            ("x @ y in jnp, then a copy kernel",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(p_ref, o_ref):\n"
             "        o_ref[...] = p_ref[...]\n"
             "    p = x @ y\n"
             "    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(p.shape, jnp.float32),\n"
             "                          grid=(pl.cdiv(p.shape[0], bm), pl.cdiv(p.shape[1], bn)),\n"
             "                          in_specs=[spec], out_specs=spec,\n"
             "                          interpret=INTERPRET)(p)\n"),
            ("the zeroing under pl.when on the last k step instead of the first",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)\n"
             "        def _():\n"
             "            o_ref[...] = jnp.zeros_like(o_ref)\n"
             "        o_ref[...] += jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
             "                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
             "                                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
            ("the K axis first in the grid: the steps adding into one output block are not "
             "consecutive (right values in interpret mode; undefined on a TPU, where an output "
             "block is kept for the next step only)",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        @pl.when(pl.program_id(0) == 0)\n"
             "        def _():\n"
             "            o_ref[...] = jnp.zeros_like(o_ref)\n"
             "        o_ref[...] += jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(K // bk, pl.cdiv(m, bm), pl.cdiv(n, bn)),\n"
             "                          in_specs=[pl.BlockSpec((bm, bk), lambda k, i, j: (i, k)),\n"
             "                                    pl.BlockSpec((bk, bn), lambda k, i, j: (k, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda k, i, j: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
            ("no pl.when: the output zeroed with jnp.where on the step index",
             "def matmul(x, y, bm, bn, bk):\n"
             "    def kernel(x_ref, y_ref, o_ref):\n"
             "        prev = jnp.where(pl.program_id(2) == 0, 0.0, o_ref[...])\n"
             "        o_ref[...] = prev + jnp.dot(x_ref[...], y_ref[...])\n"
             "    m, K = x.shape\n"
             "    n = y.shape[1]\n"
             "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),\n"
             "                          grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), K // bk),\n"
             "                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),\n"
             "                                    pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],\n"
             "                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),\n"
             "                          interpret=INTERPRET)(x, y)\n"),
        ],
    },
    "10_pallas_add_rms_norm": {
        "correct": [
            # y computed from the h just written to its output Ref; the alias built as a
            # dict of its own; the grid by ceiling division written out.
            "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
            "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
            "        h_ref[...] = x_ref[...] + r_ref[...]\n"
            "        h = h_ref[...]\n"
            "        y_ref[...] = h / jnp.sqrt(jnp.mean(jnp.square(h), axis=-1, keepdims=True) + eps) * w_ref[...]\n"
            "    m, n = x.shape\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
            "    in_place = dict([(1, 1)])   # residual (input 1) holds h (output 1)\n"
            "    y, h = pl.pallas_call(kernel, out_shape=[out, out],\n"
            "                          grid=((m + block_rows - 1) // block_rows,),\n"
            "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
            "                          out_specs=[rows, rows], input_output_aliases=in_place,\n"
            "                          interpret=INTERPRET)(x, residual, weight)\n"
            "    return y, h\n",
            # weight as a (1, n) row; the mean square from a sum; the out shape from residual.
            "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
            "    m, n = x.shape\n"
            "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
            "        h = x_ref[...] + r_ref[...]\n"
            "        inv = jax.lax.rsqrt(jnp.sum(h * h, axis=1, keepdims=True) / n + eps)\n"
            "        y_ref[...] = (h * inv) * w_ref[...]\n"
            "        h_ref[...] = h\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    out = jax.ShapeDtypeStruct(residual.shape, residual.dtype)\n"
            "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
            "                          in_specs=[rows, rows, pl.BlockSpec((1, n), lambda i: (0, 0))],\n"
            "                          out_specs=(rows, rows), input_output_aliases={1: 1},\n"
            "                          interpret=INTERPRET)(x, residual, weight.reshape(1, n))\n",
            # x aliased to y as well (allowed: the statement asks only that h be
            # written into residual's buffer); weight passed as a (1, n) row by indexing.
            "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
            "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
            "        h = x_ref[...] + r_ref[...]\n"
            "        h_ref[...] = h\n"
            "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
            "    m, n = x.shape\n"
            "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
            "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
            "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
            "                          in_specs=[rows, rows, pl.BlockSpec((1, n), lambda i: (0, 0))],\n"
            "                          out_specs=(rows, rows), input_output_aliases={0: 0, 1: 1},\n"
            "                          interpret=INTERPRET)(x, residual, weight[None, :])\n",
        ],
        "wrong": [
            ("no alias: h written into a new buffer, residual kept",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), interpret=INTERPRET)(x, residual, weight)\n"),
            ("h written into x's buffer instead of residual's",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={0: 1},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("the kernel given (residual, x, weight): alias {1: 1} writes h over x",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(r_ref, x_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 1},\n"
             "                          interpret=INTERPRET)(residual, x, weight)\n"),
            ("h written through residual's Ref (the aliased input), not through its own: "
             "the right values in interpret mode, lost on a TPU",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        r_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 1},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("y written into residual's buffer, h into a new one",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 0},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("the residual added in jnp before the kernel, which writes y over h",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    h = x + residual\n"
             "    def kernel(h_ref, w_ref, y_ref):\n"
             "        v = h_ref[...]\n"
             "        y_ref[...] = v * jax.lax.rsqrt(jnp.mean(v * v, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "                       grid=(pl.cdiv(m, block_rows),),\n"
             "                       in_specs=[rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                       out_specs=rows, interpret=INTERPRET)(h, weight)\n"
             "    return y, h\n"),
            ("two kernels: one adds in place, one normalizes",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    def add_kernel(x_ref, r_ref, h_ref):\n"
             "        h_ref[...] = x_ref[...] + r_ref[...]\n"
             "    def norm_kernel(h_ref, w_ref, y_ref):\n"
             "        v = h_ref[...]\n"
             "        y_ref[...] = v * jax.lax.rsqrt(jnp.mean(v * v, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    grid = (pl.cdiv(m, block_rows),)\n"
             "    h = pl.pallas_call(add_kernel, out_shape=out, grid=grid, in_specs=[rows, rows],\n"
             "                       out_specs=rows, input_output_aliases={1: 0},\n"
             "                       interpret=INTERPRET)(x, residual)\n"
             "    y = pl.pallas_call(norm_kernel, out_shape=out, grid=grid,\n"
             "                       in_specs=[rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                       out_specs=rows, interpret=INTERPRET)(h, weight)\n"
             "    return y, h\n"),
            ("the outputs in the wrong order: (h, y)",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, h_ref, y_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 0},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("the norm of x instead of x + residual",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        v = x_ref[...]\n"
             "        h_ref[...] = v + r_ref[...]\n"
             "        y_ref[...] = v * jax.lax.rsqrt(jnp.mean(v * v, axis=1, keepdims=True) + eps) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 1},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("eps ignored: 1e-6 hard-coded",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, w_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + 1e-6) * w_ref[...]\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    return pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows, pl.BlockSpec((n,), lambda i: (0,))],\n"
             "                          out_specs=(rows, rows), input_output_aliases={1: 1},\n"
             "                          interpret=INTERPRET)(x, residual, weight)\n"),
            ("the weight applied in jnp after the kernel",
             "def add_rms_norm(x, residual, weight, block_rows, eps=1e-6):\n"
             "    def kernel(x_ref, r_ref, y_ref, h_ref):\n"
             "        h = x_ref[...] + r_ref[...]\n"
             "        h_ref[...] = h\n"
             "        y_ref[...] = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + eps)\n"
             "    m, n = x.shape\n"
             "    rows = pl.BlockSpec((block_rows, n), lambda i: (i, 0))\n"
             "    out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "    y, h = pl.pallas_call(kernel, out_shape=(out, out), grid=(pl.cdiv(m, block_rows),),\n"
             "                          in_specs=[rows, rows], out_specs=(rows, rows),\n"
             "                          input_output_aliases={1: 1}, interpret=INTERPRET)(x, residual)\n"
             "    return y * weight, h\n"),
        ],
    },
    "10_pallas_silu_vjp": {
        "correct": [
            # Residuals saved in a dict, s first (JAX lists the input x first anyway);
            # blocks of 256; the sigmoid written out in its stable form.
            "def silu_vjp(x):\n"
            "    spec = pl.BlockSpec((256,), lambda i: (i,))\n"
            "    grid = (pl.cdiv(x.shape[0], 256),)\n"
            "    like = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
            "    def forward_kernel(x_ref, y_ref, s_ref):\n"
            "        v = x_ref[...]\n"
            "        e = jnp.exp(-jnp.abs(v))\n"
            "        s = jnp.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))\n"
            "        s_ref[...] = s\n"
            "        y_ref[...] = v * s\n"
            "    def backward_kernel(s_ref, x_ref, g_ref, o_ref):\n"
            "        s = s_ref[...]\n"
            "        o_ref[...] = g_ref[...] * (s + x_ref[...] * s * (1.0 - s))\n"
            "    def forward(v):\n"
            "        return pl.pallas_call(forward_kernel, out_shape=(like, like), grid=grid,\n"
            "                              in_specs=[spec], out_specs=(spec, spec),\n"
            "                              interpret=INTERPRET)(v)\n"
            "    @jax.custom_vjp\n"
            "    def f(v):\n"
            "        return forward(v)[0]\n"
            "    def f_fwd(v):\n"
            "        y, s = forward(v)\n"
            "        return y, {\"s\": s, \"x\": v}\n"
            "    def f_bwd(res, g):\n"
            "        return (pl.pallas_call(backward_kernel, out_shape=like, grid=grid,\n"
            "                               in_specs=[spec, spec, spec], out_specs=spec,\n"
            "                               interpret=INTERPRET)(res[\"s\"], res[\"x\"], g),)\n"
            "    f.defvjp(f_fwd, f_bwd)\n"
            "    return f(x)\n",
            # The custom_vjp function at the top of the cell, blocks of 1024 (a multiple of
            # 8 x 128); the value alone from a one-output kernel, the forward function's y
            # and s from a two-output one; the residuals saved as (s, x).
            "def _silu_call(kernel, outputs, *arrays):\n"
            "    spec = pl.BlockSpec((1024,), lambda i: (i,))\n"
            "    out = jax.ShapeDtypeStruct(arrays[0].shape, arrays[0].dtype)\n"
            "    return pl.pallas_call(kernel, out_shape=(out,) * outputs,\n"
            "                          grid=(pl.cdiv(arrays[0].shape[0], 1024),),\n"
            "                          in_specs=[spec] * len(arrays), out_specs=(spec,) * outputs,\n"
            "                          interpret=INTERPRET)(*arrays)\n"
            "\n"
            "def _silu_value_kernel(x_ref, y_ref):\n"
            "    v = x_ref[...]\n"
            "    y_ref[...] = v / (1.0 + jnp.exp(-v))\n"
            "\n"
            "def _silu_forward_kernel(x_ref, y_ref, s_ref):\n"
            "    v = x_ref[...]\n"
            "    s = 1.0 / (1.0 + jnp.exp(-v))\n"
            "    y_ref[...] = v * s\n"
            "    s_ref[...] = s\n"
            "\n"
            "def _silu_backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
            "    s = s_ref[...]\n"
            "    o_ref[...] = g_ref[...] * (s + x_ref[...] * (s - s * s))\n"
            "\n"
            "@jax.custom_vjp\n"
            "def _silu_custom(x):\n"
            "    return _silu_call(_silu_value_kernel, 1, x)[0]\n"
            "\n"
            "def _silu_fwd(x):\n"
            "    y, s = _silu_call(_silu_forward_kernel, 2, x)\n"
            "    return y, (s, x)\n"
            "\n"
            "def _silu_bwd(res, g):\n"
            "    s, x = res\n"
            "    return _silu_call(_silu_backward_kernel, 1, x, s, g)\n"
            "\n"
            "_silu_custom.defvjp(_silu_fwd, _silu_bwd)\n"
            "\n"
            "def silu_vjp(x):\n"
            "    return _silu_custom(x)\n",
            # x padded to rows of 128 lanes, in (8, 128) tiles: only layout work outside.
            "def silu_vjp(x):\n"
            "    n = x.shape[0]\n"
            "    rows = pl.cdiv(n, 128)\n"
            "    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))\n"
            "    def call(kernel, outputs, *arrays):\n"
            "        tiles = [jnp.pad(a, (0, rows * 128 - n)).reshape(rows, 128) for a in arrays]\n"
            "        out = jax.ShapeDtypeStruct((rows, 128), x.dtype)\n"
            "        results = pl.pallas_call(kernel, out_shape=(out,) * outputs,\n"
            "                                 grid=(pl.cdiv(rows, 8),), in_specs=[spec] * len(tiles),\n"
            "                                 out_specs=(spec,) * outputs,\n"
            "                                 interpret=INTERPRET)(*tiles)\n"
            "        return tuple(r.reshape(-1)[:n] for r in results)\n"
            + _SILU_VJP_KERNELS,
        ],
        "wrong": [
            ("saves x and s, but the backward kernel computes the sigmoid again instead of "
             "reading s: right values and gradient, an exponential in the backward kernel",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        s = jax.nn.sigmoid(v)\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             + _SILU_WIRING),
            ("saves x and s, but the backward kernel computes the sigmoid again as "
             "(1 + tanh(x / 2)) / 2: a tanh in the backward kernel",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        s = 0.5 * (1.0 + jnp.tanh(0.5 * v))\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             + _SILU_WIRING),
            ("saves y as well as x and s: a residual the backward pass never reads",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        v, s = x_ref[...], s_ref[...]\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(forward_kernel, 2, v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, s = call(forward_kernel, 2, v)\n"
             "        return y, (v, s, y)\n"
             "    f.defvjp(f_fwd, lambda res, g: call(backward_kernel, 1, *res[:2], g))\n"
             "    return f(x)\n"),
            ("saves x only, and the backward kernel recomputes the sigmoid from it "
             "(exercise 3's kernel on each side): right values and gradient",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + "    def forward_kernel(x_ref, y_ref):\n"
             "        v = x_ref[...]\n"
             "        y_ref[...] = v * jax.nn.sigmoid(v)\n"
             "    def backward_kernel(x_ref, g_ref, o_ref):\n"
             "        v = x_ref[...]\n"
             "        s = jax.nn.sigmoid(v)\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(forward_kernel, 1, v)[0]\n"
             "    f.defvjp(lambda v: (call(forward_kernel, 1, v)[0], v),\n"
             "             lambda v, g: call(backward_kernel, 1, v, g))\n"
             "    return f(x)\n"),
            ("saves x and y, and the backward kernel gets s as y / x: NaN at x = 0",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def backward_kernel(x_ref, y_ref, g_ref, o_ref):\n"
             "        v, y = x_ref[...], y_ref[...]\n"
             "        s = y / v\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(forward_kernel, 2, v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, s = call(forward_kernel, 2, v)\n"
             "        return y, (v, y)\n"
             "    f.defvjp(f_fwd, lambda res, g: call(backward_kernel, 1, *res, g))\n"
             "    return f(x)\n"),
            ("the derivative of the sigmoid, s * (1 - s), used as the derivative of SiLU",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        s = s_ref[...]\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 - s)\n"
             + _SILU_WIRING),
            ("the slope from the backward kernel, times the cotangent g in jnp outside it: "
             "right gradient, a multiply outside the kernels",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    def slope_kernel(x_ref, s_ref, o_ref):\n"
             "        v, s = x_ref[...], s_ref[...]\n"
             "        o_ref[...] = s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(forward_kernel, 2, v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, s = call(forward_kernel, 2, v)\n"
             "        return y, (v, s)\n"
             "    f.defvjp(f_fwd, lambda res, g: (g * call(slope_kernel, 1, *res)[0],))\n"
             "    return f(x)\n"),
            ("s = jax.nn.sigmoid(x) in jnp, handed to a kernel that only multiplies: the "
             "sigmoid outside the kernels",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + "    def forward_kernel(x_ref, s_ref, y_ref):\n"
             "        y_ref[...] = x_ref[...] * s_ref[...]\n"
             "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        v, s = x_ref[...], s_ref[...]\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             "    def forward(v):\n"
             "        s = jax.nn.sigmoid(v)\n"
             "        return call(forward_kernel, 1, v, s)[0], s\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return forward(v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, s = forward(v)\n"
             "        return y, (v, s)\n"
             "    f.defvjp(f_fwd, lambda res, g: call(backward_kernel, 1, *res, g))\n"
             "    return f(x)\n"),
            ("one kernel for both: the forward kernel returns y and SiLU's slope, saved as "
             "the only residual, and the backward pass multiplies it by g in jnp",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + "    def kernel(x_ref, y_ref, d_ref):\n"
             "        v = x_ref[...]\n"
             "        s = jax.nn.sigmoid(v)\n"
             "        y_ref[...] = v * s\n"
             "        d_ref[...] = s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(kernel, 2, v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, d = call(kernel, 2, v)\n"
             "        return y, d\n"
             "    f.defvjp(f_fwd, lambda d, g: (g * d,))\n"
             "    return f(x)\n"),
            ("y and s from two forward kernels, each reading x again",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + "    def value_kernel(x_ref, y_ref):\n"
             "        v = x_ref[...]\n"
             "        y_ref[...] = v * jax.nn.sigmoid(v)\n"
             "    def sigmoid_kernel(x_ref, s_ref):\n"
             "        s_ref[...] = jax.nn.sigmoid(x_ref[...])\n"
             "    def backward_kernel(x_ref, s_ref, g_ref, o_ref):\n"
             "        v, s = x_ref[...], s_ref[...]\n"
             "        o_ref[...] = g_ref[...] * s * (1.0 + v * (1.0 - s))\n"
             "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(value_kernel, 1, v)[0]\n"
             "    def f_fwd(v):\n"
             "        return call(value_kernel, 1, v)[0], (v, call(sigmoid_kernel, 1, v)[0])\n"
             "    f.defvjp(f_fwd, lambda res, g: call(backward_kernel, 1, *res, g))\n"
             "    return f(x)\n"),
            ("the backward pass in jnp (jax.vjp of jax.nn.silu): right gradient, no second "
             "kernel",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    @jax.custom_vjp\n"
             "    def f(v):\n"
             "        return call(forward_kernel, 2, v)[0]\n"
             "    def f_fwd(v):\n"
             "        y, s = call(forward_kernel, 2, v)\n"
             "        return y, (v, s)\n"
             "    f.defvjp(f_fwd, lambda res, g: jax.vjp(jax.nn.silu, res[0])[1](g))\n"
             "    return f(x)\n"),
            ("no custom_vjp: jax.grad cannot differentiate a pallas_call",
             "def silu_vjp(x):\n"
             + _SILU_CALL
             + _SILU_FORWARD
             + "    return call(forward_kernel, 2, x)[0]\n"),
            ("1-D blocks of 100: right values and kernels, but a block a TPU refuses",
             "def silu_vjp(x):\n"
             "    spec = pl.BlockSpec((100,), lambda i: (i,))\n"
             "    def call(kernel, outputs, *arrays):\n"
             "        out = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
             "        return pl.pallas_call(kernel, out_shape=(out,) * outputs,\n"
             "                              grid=(pl.cdiv(x.shape[0], 100),),\n"
             "                              in_specs=[spec] * len(arrays),\n"
             "                              out_specs=(spec,) * outputs,\n"
             "                              interpret=INTERPRET)(*arrays)\n"
             + _SILU_VJP_KERNELS),
        ],
    },
    "10_pallas_softmax_weighted_sum": _SOFTMAX_WEIGHTED_SUM,
}
