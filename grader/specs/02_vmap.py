"""Trusted probes for 02_vmap: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are compared outside. See
grader/trusted.py. Inputs mirror the hidden tests of source/02_vmap.

Two kinds of probe per batched exercise, as in ``assert_batched_without_loop``:
- the value on the hidden test's largest batch, compared with the reference solution;
- a structure fact: the jaxpr equation count at two batch sizes and the number of
  ``scan`` equations whose length is the batch size. A Python loop unrolls (the count
  grows by at least one equation per extra example); ``lax.map`` / ``fori_loop`` show
  as a batch-length scan. These counts are computed inside the sandbox (by tracing
  the student's function) and judged here; they have no reference to equal, since
  correct solutions trace to different programs.
"""
from grader.trusted import Probe

_PRE = "import numpy as np\nimport jax\nimport jax.numpy as jnp\n"

# Defines _loop_facts(fn, make_args, sizes) -> (eqns at size 0, eqns at size 1,
# batch-length scans at size 0, batch-length scans at size 1), all ints.
_FACTS = _PRE + (
    "from autograder._jaxpr import iter_eqns as _iter_eqns\n"
    "def _loop_facts(fn, make, sizes):\n"
    "    counts, scans = [], []\n"
    "    for n in sizes:\n"
    "        eqns = list(_iter_eqns(jax.make_jaxpr(fn)(*make(n))))\n"
    "        counts.append(len(eqns))\n"
    "        scans.append(sum(1 for e in eqns if e.primitive.name == 'scan'\n"
    "                         and e.params.get('length') == n))\n"
    "    return tuple(counts) + tuple(scans)\n"
)

_LOOP_HINT = ("a Python loop (for, a list comprehension, map) over the batch unrolls when JAX "
              "traces it, one copy of the body per example; lax.map / fori_loop run the "
              "examples one after another")


def _ints(got, n):
    """The ``n`` ints of a tuple-valued fact, or None when the fact is malformed."""
    if not isinstance(got, dict) or len(got) != n:
        return None
    vals = [got.get(f"[{i}]") for i in range(n)]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return None
    return vals


def _no_loop(sizes, example):
    """``check`` for a ``_loop_facts`` probe traced at batch sizes ``sizes``."""
    small, large = sizes
    extra = large - small

    def check(got, expected):
        del expected  # no reference: correct solutions trace to different programs
        vals = _ints(got, 4)
        if vals is None:
            return "the grader could not read how your function traces (unexpected result)"
        c_small, c_large, s_small, s_large = vals
        growth = c_large - c_small
        if growth >= extra:
            per = growth / extra
            per_text = str(int(per)) if per == int(per) else f"{per:g}"
            return (f"it repeats the per-example work once per example: {c_small} jaxpr "
                    f"equations at batch {small}, {c_large} at batch {large} (+{per_text} per "
                    f"extra example), where vmap traces the body once whatever the batch "
                    f"size; replace the loop with jax.vmap({example}, in_axes=...)")
        if s_small and s_large:
            return (f"it runs the examples one at a time in a `scan` whose length is the "
                    f"batch size ({large} at batch {large}): correct values, but a sequential "
                    f"loop; use jax.vmap({example}, in_axes=...), which runs every example in "
                    f"one batched operation")
        return None

    return check


def _values(fn, gen, n_hidden, n_visible, setup, unit="examples", **kw):
    """The value at the hidden test's largest batch, and at the visible test's (lesson data)."""
    return [Probe(f"{fn}(*{gen}_hidden({n_hidden}))", setup,
                  name=f"{fn} on {n_hidden} {unit}", **kw),
            Probe(f"{fn}(*{gen}({n_visible}))", setup,
                  name=f"{fn} on {n_visible} {unit} (the lesson's data)", **kw)]


def _loop_probe(call, setup, sizes, example, section, fix):
    return Probe(f"_loop_facts({call}, {sizes!r})", setup,
                 name=f"{call.split(',')[0]} traced at batch sizes {sizes[0]} and {sizes[1]}",
                 compare=False,
                 check=_no_loop(sizes, example), hint=_LOOP_HINT, fix=fix, section=section)


# ---------------------------------------------------------------- 2.1 batched_predict

_S_PREDICT = "2.1 None: arguments shared by every example"
_ROWS = _FACTS + (
    "def _rows(n):\n"
    "    rng = np.random.default_rng(200 + n)\n"
    "    x = rng.normal(size=(n, 4)) + 3.0 * np.arange(n)[:, None]\n"
    "    return params, jnp.asarray(x, jnp.float32)\n"
    "def _rows_hidden(n):\n"
    "    rng = np.random.default_rng(210 + n)\n"
    "    p = {'w': jnp.asarray(rng.normal(size=6), jnp.float32), 'b': jnp.float32(-0.4)}\n"
    "    x = rng.normal(size=(n, 6)) * np.arange(1, n + 1)[:, None] - 2.0 * np.arange(n)[:, None]\n"
    "    return p, jnp.asarray(x, jnp.float32)\n"
)

# ---------------------------------------------------------------- 2.2 embed_columns

_S_EMBED = "2.2 A batch along another axis, and out_axes"
_COLS = _FACTS + (
    "def _cols(n):\n"
    "    rng = np.random.default_rng(220 + n)\n"
    "    x = rng.normal(size=(4, n)) + 2.0 * np.arange(n)[None, :]\n"
    "    return W, jnp.asarray(x, jnp.float32)\n"
    "def _cols_hidden(n):\n"
    "    rng = np.random.default_rng(230 + n)\n"
    "    w = jnp.asarray(rng.normal(size=(5, 3)) * 0.7, jnp.float32)\n"
    "    x = rng.normal(size=(3, n)) * np.arange(1, n + 1)[None, :] + np.arange(n)[None, :]\n"
    "    return w, jnp.asarray(x, jnp.float32)\n"
)

# ---------------------------------------------------------------- 2.3 batched_weighted_xent

_S_XENT = "2.3 Pytrees in in_axes"
_BATCH = _FACTS + (
    "def _batch(n):\n"
    "    rng = np.random.default_rng(240 + n)\n"
    "    return clf_params, {'x': jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),\n"
    "                        'y': jnp.asarray(rng.integers(0, 3, size=n), jnp.int32),\n"
    "                        'class_weights': jnp.array([1.0, 2.0, 0.5])}\n"
    "def _batch_hidden(n):\n"
    "    rng = np.random.default_rng(250 + n)\n"
    "    p = {'W': jnp.asarray(rng.normal(size=(5, 3)), jnp.float32),\n"
    "         'b': jnp.asarray(rng.normal(size=5), jnp.float32)}\n"
    "    x = rng.normal(size=(n, 3)) + np.arange(n)[:, None]\n"
    "    return p, {'x': jnp.asarray(x, jnp.float32),\n"
    "               'y': jnp.asarray(rng.integers(0, 5, size=n), jnp.int32),\n"
    "               'class_weights': jnp.asarray(rng.uniform(0.5, 3.0, size=5), jnp.float32)}\n"
)

# ---------------------------------------------------------------- 3 pairwise_distances

_S_PAIRS = "3 All pairs: nesting vmap"
_POINTS = _FACTS + (
    "def _points(n):\n"
    "    rng = np.random.default_rng(260 + n)\n"
    "    return (jnp.asarray(rng.normal(size=(n, 2)), jnp.float32),\n"
    "            jnp.asarray(rng.normal(size=(n + 2, 2)), jnp.float32))\n"
    "def _points_hidden(n):\n"
    "    rng = np.random.default_rng(270 + n)\n"
    "    return (jnp.asarray(rng.normal(size=(n, 5)), jnp.float32),\n"
    "            jnp.asarray(rng.normal(size=(2 * n + 1, 5)) + 0.5, jnp.float32))\n"
)

# ---------------------------------------------------------------- 4 per_example_grads

_S_GRADS = "4 Per-example gradients: vmap of grad"
_DATA = _FACTS + (
    "def _data(n):\n"
    "    rng = np.random.default_rng(280 + n)\n"
    "    return (params, jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),\n"
    "            jnp.asarray(rng.normal(size=n), jnp.float32))\n"
    "def _data_hidden(n):\n"
    "    rng = np.random.default_rng(290 + n)\n"
    "    p = {'w': jnp.asarray(rng.normal(size=5), jnp.float32), 'b': jnp.float32(0.7)}\n"
    "    return (p, jnp.asarray(rng.normal(size=(n, 5)) * 2.0 + 1.0, jnp.float32),\n"
    "            jnp.asarray(rng.normal(size=n), jnp.float32))\n"
)

# ---------------------------------------------------------------- 5 ensemble_sgd_step

_S_ENSEMBLE = "5 Batching parameters: many models at once"
_MODELS = _FACTS + (
    "def _models(k):\n"
    "    rng = np.random.default_rng(300 + k)\n"
    "    return ({'w': jnp.asarray(rng.normal(size=(k, 4)), jnp.float32),\n"
    "             'b': jnp.asarray(rng.normal(size=k), jnp.float32)}, x_reg, y_reg, 0.1)\n"
    "def _models_hidden(k):\n"
    "    rng = np.random.default_rng(310 + k)\n"
    "    return ({'w': jnp.asarray(rng.normal(size=(k, 3)), jnp.float32),\n"
    "             'b': jnp.asarray(rng.normal(size=k), jnp.float32)},\n"
    "            jnp.asarray(rng.normal(size=(10, 3)), jnp.float32),\n"
    "            jnp.asarray(rng.normal(size=10), jnp.float32), 0.05)\n"
)

# ---------------------------------------------------------------- 6.2 huber

_S_HUBER = "6.2 The fix: compute both branches, select per element"
_RESID = _PRE + (
    "_rng = np.random.default_rng(320)\n"
    "_r = jnp.asarray(_rng.normal(size=12) * 3.0, jnp.float32)\n"
    "_d = jnp.asarray(_rng.uniform(0.5, 2.5, size=12), jnp.float32)\n"
)
_HUBER_HINT = ("the quadratic branch 0.5 r^2 applies when |r| <= delta, the linear one "
               "delta (|r| - delta / 2) beyond it; under vmap r (and delta) are tracers, so a "
               "Python if, float() or bool() on them fails")
_HUBER_FIX = ("compute both branches and choose per element with jnp.where(condition, a, b) "
              "(or lax.cond / lax.select)")

PROBES = {
    "test_02_vmap_batched_predict": [
        *_values("batched_predict", "_rows", 9, 7, _ROWS, rtol=1e-4, atol=1e-5,
                 section=_S_PREDICT,
                 hint="each example must be normalized with its own mean and std: did you call "
                      "predict on the whole batch instead of mapping it over the rows?",
                 fix="jax.vmap(predict, in_axes=(None, 0))(params, xs): params shared, rows "
                     "mapped"),
        _loop_probe("batched_predict, _rows_hidden", _ROWS, (4, 9), "predict", _S_PREDICT,
                    "jax.vmap(predict, in_axes=(None, 0))(params, xs)"),
    ],
    "test_02_vmap_embed_columns": [
        *_values("embed_columns", "_cols", 6, 7, _COLS, rtol=1e-4, atol=1e-5,
                 section=_S_EMBED,
                 hint="a wrong shape: the examples must stay along axis 1 of the result, (k, n), "
                      "so set out_axes=1; wrong values: each column must be normalized on its "
                      "own, so map embed over axis 1 (in_axes) instead of calling it on the whole "
                      "matrix",
                 fix="jax.vmap(embed, in_axes=(None, 1), out_axes=1)(W, xs_cols)"),
        _loop_probe("embed_columns, _cols_hidden", _COLS, (2, 6), "embed", _S_EMBED,
                    "jax.vmap(embed, in_axes=(None, 1), out_axes=1)(W, xs_cols)"),
    ],
    "test_02_vmap_batched_weighted_xent": [
        *_values("batched_weighted_xent", "_batch", 7, 8, _BATCH, rtol=1e-4, atol=1e-5,
                 section=_S_XENT,
                 hint="x and y are batched, class_weights is shared by every example (its axis "
                      "is the classes, not the batch), and each loss is weighted by the weight "
                      "of its own class",
                 fix="in_axes=(None, {'x': 0, 'y': 0, 'class_weights': None})"),
        _loop_probe("batched_weighted_xent, _batch_hidden", _BATCH, (3, 7), "weighted_xent",
                    _S_XENT, "jax.vmap(weighted_xent, in_axes=(None, {'x': 0, 'y': 0, "
                             "'class_weights': None}))(params, batch)"),
    ],
    "test_02_vmap_pairwise_distances": [
        *_values("pairwise_distances", "_points", 5, 7, _POINTS, unit="points of a",
                 rtol=1e-4, atol=1e-5,
                 section=_S_PAIRS,
                 hint="a wrong shape: rows must follow a and columns b, (n, m), so the outer vmap "
                      "maps over a; wrong values: entry [i, j] is the Euclidean distance, the "
                      "square root of the summed squared differences",
                 fix="jax.vmap(jax.vmap(distance, in_axes=(None, 0)), in_axes=(0, None))(a, b)"),
        _loop_probe("pairwise_distances, _points_hidden", _POINTS, (2, 5), "distance",
                    _S_PAIRS, "nest two vmaps: the inner one over b (in_axes=(None, 0)), the "
                              "outer one over a (in_axes=(0, None))"),
    ],
    "test_02_vmap_per_example_grads": [
        *_values("per_example_grads", "_data", 8, 7, _DATA, rtol=1e-4, atol=1e-5,
                 section=_S_GRADS,
                 hint="return the gradient with respect to params (a dict with the keys of "
                      "params), each leaf with a leading batch axis: jax.grad of a batch loss "
                      "averages the examples, and argnums=1 differentiates x instead",
                 fix="jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)"),
        _loop_probe("per_example_grads, _data_hidden", _DATA, (3, 8),
                    "jax.grad(example_loss)", _S_GRADS,
                    "jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)"),
    ],
    "test_02_vmap_ensemble_sgd_step": [
        *_values("ensemble_sgd_step", "_models", 6, 7, _MODELS, unit="models",
                 rtol=1e-4, atol=1e-5,
                 section=_S_ENSEMBLE,
                 hint="each model must take its own gradient step, as sgd_step does alone: the "
                      "models must not be averaged or mixed, and x, y, lr are shared",
                 fix="jax.vmap(sgd_step, in_axes=(0, None, None, None))(params, x, y, lr)"),
        _loop_probe("ensemble_sgd_step, _models_hidden", _MODELS, (2, 6), "sgd_step",
                    _S_ENSEMBLE,
                    "jax.vmap(sgd_step, in_axes=(0, None, None, None))(params, x, y, lr)"),
    ],
    "test_02_vmap_huber": [
        Probe("jax.vmap(huber, in_axes=(0, None))(jnp.array([-3.0, -0.5, 0.0, 0.8, 2.0]), 1.0)",
              _PRE, name="jax.vmap(huber, in_axes=(0, None))(residuals, 1.0)",
              section=_S_HUBER, hint=_HUBER_HINT, fix=_HUBER_FIX),
        Probe("jax.vmap(huber, in_axes=(0, None))(_r, 1.5)", _RESID,
              name="jax.vmap(huber, in_axes=(0, None))(r, 1.5)", rtol=1e-5, atol=1e-6,
              section=_S_HUBER, hint=_HUBER_HINT, fix=_HUBER_FIX),
        Probe("jax.vmap(huber, in_axes=(0, 0))(_r, _d)", _RESID, rtol=1e-5, atol=1e-6,
              name="jax.vmap(huber, in_axes=(0, 0))(r, delta) (delta batched too)",
              section=_S_HUBER, hint=_HUBER_HINT, fix=_HUBER_FIX),
    ],
}

