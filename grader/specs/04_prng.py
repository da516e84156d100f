"""Trusted probes for 04_prng: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are judged outside. See
grader/trusted.py. Inputs mirror the hidden tests of source/04_prng.

Random results are never compared with the reference's numbers: correct answers may
derive their keys differently (split, fold_in, a chain) and draw different samples.
The probes return the samples or key data themselves, and the checks below compute,
outside the sandbox, what the hidden tests compute: distinct keys, equal keys,
determinism, dependence on the key, sample moments with 5-standard-error tolerances.
Only the key-reuse facts (JAX's key-reuse checker) and the PRNG-operation counts of
the key tree (a jaxpr walk) are computed inside the sandbox.
"""
import math

import numpy as np

from autograder._feedback import format_failure
from grader.trusted import Probe

# ---------------------------------------------------------------- inside the sandbox

# Helpers every probe's set-up defines in its own copy of the student's namespace.
_PRE = '''import jax
import jax.numpy as jnp
import numpy as np
from autograder._random import _is_key, _student_line

def _clone(tree):
    # Fresh copies of typed keys: keys the grader used before never count against fn.
    return jax.tree.map(lambda v: jax.random.clone(v) if _is_key(v) else v, tree)

def _call(fn, *args):
    # Key reuse is the reuse probe's question alone (the notebook turns the checker on).
    with jax.debug_key_reuse(False):
        return _clone(fn(*_clone(args)))

def _reuse(fn, *args):
    # None when fn(*args) uses no key twice (JAX's key-reuse checker), else what it said.
    # Other errors are left to the probes that call fn on the same inputs without the
    # checker, so that each failure comes with its own explanation.
    from jax.errors import KeyReuseError
    try:
        with jax.debug_key_reuse(True):
            fn(*_clone(args))
    except KeyReuseError as err:
        first = (str(err).strip().splitlines() or [""])[0][:160]
        where = _student_line(err)
        return "KeyReuseError: " + first + (" [" + where[:200] + "]" if where else "")
    except Exception:
        return None
    return None

def _other(key):
    # A key that differs from `key` whatever the seed (as assert_varies_with_key uses).
    return jax.random.fold_in(jax.random.clone(key), 0x5EED)
'''

# ---------------------------------------------------------------- outside: helpers

_K = 5.0  # standard errors allowed by every statistical check, as in the notebook



def _items(value, n: int) -> list:
    """The n leaves of a probe that returned a flat list/tuple, in order."""
    if n == 1:
        return [value]
    if not isinstance(value, dict):
        raise ValueError(f"expected {n} results, got one")
    out = [value[f"[{i}]"] for i in range(n)]
    return out


def _rows(data) -> np.ndarray:
    """Key data as one row per key (threefry keys: two uint32 words each)."""
    a = np.asarray(data)
    if a.ndim < 2:
        raise ValueError(f"expected key data of shape (..., 2), got shape {a.shape}")
    return a.reshape(-1, a.shape[-1])


def _duplicates(rows: np.ndarray) -> list[tuple[int, int]]:
    first: dict[bytes, int] = {}
    dups = []
    for i, row in enumerate(rows):
        j = first.setdefault(row.tobytes(), i)
        if j != i:
            dups.append((i, j))
    return dups


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _msg(what, **parts) -> str:
    return format_failure(what, **parts)


def _no_reuse(got, _expected):
    found = [v for v in (got.values() if isinstance(got, dict) else [got]) if v is not None]
    if found:
        return _msg("a PRNG key was used twice",
                    got=str(found[0])[:400] + (f" (and in {len(found) - 1} more call(s))"
                                               if len(found) > 1 else ""),
                    expected="every key passed to exactly one sampler or split")
    return None


def _distinct_rows(n_expected: int, what: str):
    def check(got, _expected):
        rows = _rows(got)
        dups = _duplicates(rows)
        if len(rows) != n_expected:
            return _msg(f"{what} has the wrong number of keys", expected=n_expected, got=len(rows))
        if dups:
            shown = ", ".join(f"key {i} equals key {j}" for i, j in dups[:4])
            return _msg(f"{what} contains equal keys", expected=f"{n_expected} different keys",
                        got=f"only {n_expected - len(dups)} distinct: {shown}")
        return None
    return check


def _deterministic(got, _expected):
    a, b = _items(got, 2)
    if not _same(a, b):
        return _msg("two calls with equal keys gave different results",
                    expected="identical results from equal keys", got="different results")
    return None


def _varies_with(what: str):
    def check(got, _expected):
        a, b = _items(got, 2)
        if _same(a, b):
            return _msg(f"two different {what}s gave the same result",
                        expected=f"a different result for a different {what}",
                        got="identical results")
        return None
    return check


_varies = _varies_with("key")


def _about(what):
    return f"{what}: " if what else ""


def _mean_problem(x, mean, std, what=None):
    x = np.asarray(x, np.float64).ravel()
    n = x.size
    got = float(x.mean())
    se = std / math.sqrt(n)
    if not abs(got - mean) <= _K * se:
        return _msg(f"{_about(what)}the sample mean is too far from {mean:.4g}",
                    expected=f"{mean:.4g} +- {_K * se:.3g} ({_K:g} standard errors of "
                             f"{std:.4g}/sqrt({n}))",
                    got=f"{got:.4g} ({abs(got - mean) / se:.1f} standard errors away)")
    return None


def _variance_problem(x, variance, what=None):
    x = np.asarray(x, np.float64).ravel()
    n = x.size
    got = float(x.var(ddof=1)) if n > 1 else 0.0
    se = variance * math.sqrt(2.0 / max(n - 1, 1))
    if not abs(got - variance) <= _K * se:
        return _msg(f"{_about(what)}the sample variance is too far from {variance:.4g}",
                    expected=f"{variance:.4g} +- {_K * se:.3g} ({_K:g} standard errors of "
                             f"{variance:.4g}*sqrt(2/(n-1)), n={n})",
                    got=f"{got:.4g} ({abs(got - variance) / se:.1f} standard errors away)")
    return None


def _fraction_problem(hits, p, what="draws"):
    hits = np.asarray(hits).ravel().astype(bool)
    n = hits.size
    got = float(hits.mean())
    se = math.sqrt(p * (1 - p) / n)
    if not abs(got - p) <= _K * se + 1e-12:
        return _msg(f"a fraction {got:.4g} of {n} {what}, expected {p:.4g}",
                    expected=f"{p:.4g} +- {_K * se:.3g} ({_K:g} standard errors of sqrt(p(1-p)/n))",
                    got=f"{got:.4g} ({abs(got - p) / se:.1f} standard errors away)")
    return None


def _correlation_problem(a, b, what="the two samples"):
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if x.size != y.size:
        return _msg(f"{what} have different sizes", expected="two samples of the same size",
                    got=f"{x.size} and {y.size}")
    n = x.size
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return _msg(f"{what}: one of them is constant", expected="random values",
                    got=f"std {sx:.3g} and {sy:.3g}")
    r = float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))
    tol = _K / math.sqrt(max(n - 1, 1))
    if not abs(r) <= tol:
        return _msg(f"{what} are correlated: r = {r:.3f}",
                    expected=f"|r| <= {tol:.3g} ({_K:g} standard errors of 1/sqrt(n-1), n={n})",
                    got=f"r = {r:.4g}")
    return None


# ---------------------------------------------------------------- make_keys

_S_KEYS = "2.1 split: one key in, many out"


def _seeds_apart(got, _expected):
    k3, k4 = (_rows(k) for k in _items(got, 2))
    both = np.concatenate([k3, k4])
    dups = _duplicates(both)
    if dups:
        i, j = dups[0]
        name = lambda m: f"seed {3 if m < len(k3) else 4}'s key {m if m < len(k3) else m - len(k3)}"
        return _msg("the keys of two different seeds coincide",
                    expected=f"{len(both)} different keys",
                    got=f"{len(dups)} repeated, e.g. {name(i)} equals {name(j)}")
    return None


def _independent_draws(got, _expected):
    a, b = _items(got, 2)
    return _correlation_problem(a, b, "the two samples")


# ---------------------------------------------------------------- example_keys

_S_FOLD = "2.3 fold_in: keys from data"
_PERM = "_perm = jnp.asarray(np.random.default_rng(404).permutation(64))\n"


def _by_id_not_position(got, _expected):
    alone, batch = (_rows(k) for k in _items(got, 2))
    if alone.shape[0] != 1 or batch.shape[0] != 3:
        return _msg("wrong number of keys", expected="1 key for [5] and 3 keys for [3, 5, 7]",
                    got=f"{alone.shape[0]} and {batch.shape[0]}")
    if not np.array_equal(alone[0], batch[1]):
        return _msg("the key of id 5 changes with its position in the batch",
                    expected="example_keys(key, [5])[0] equal to example_keys(key, [3, 5, 7])[1]",
                    got="different keys")
    return None


def _order_free(got, _expected):
    shuffled, ordered = (_rows(k) for k in _items(got, 2))
    perm = np.random.default_rng(404).permutation(64)
    if ordered.shape[0] != 64 or shuffled.shape[0] != 64:
        return _msg("wrong number of keys", expected="64 keys", 
                    got=f"{shuffled.shape[0]} and {ordered.shape[0]}")
    bad = [i for i in range(64) if not np.array_equal(shuffled[i], ordered[perm[i]])]
    if bad:
        return _msg("the same ids in another order got other keys",
                    expected="example_keys(key, ids[perm]) equal to example_keys(key, ids)[perm]",
                    got=f"{len(bad)} of 64 positions differ (first: position {bad[0]})")
    return None


# ---------------------------------------------------------------- init_mlp

_S_INIT = "4.1 Initialising parameters from one key"
_SIZES = [32, 64, 64, 64, 8]
_MLP = _PRE + (
    f"_sizes = {_SIZES!r}\n"
    "def _weights(key):\n"
    "    return [p['w'] for p in _call(init_mlp, key, _sizes)]\n")


def _every_layer_varies(got, _expected):
    n = len(_SIZES) - 1
    a = [got[f"[0][{i}]"] for i in range(n)]
    b = [got[f"[1][{i}]"] for i in range(n)]
    same = [i for i in range(n) if _same(a[i], b[i])]
    if same:
        return _msg("some layers' weights do not change with the key",
                    expected="different weights in every layer for a different key",
                    got="identical weights in layer(s) " + ", ".join(map(str, same)))
    return None


def _deterministic_layers(got, _expected):
    n = len(_SIZES) - 1
    diff = [i for i in range(n) if not _same(got[f"[0][{i}]"], got[f"[1][{i}]"])]
    if diff:
        return _msg("two calls with equal keys gave different weights",
                    expected="identical results from equal keys",
                    got="different weights in layer(s) " + ", ".join(map(str, diff)))
    return None


def _layer_moments(got, _expected):
    layers = _items(got, len(_SIZES) - 1)
    for i, (m, w) in enumerate(zip(_SIZES[:-1], layers)):
        problem = (_mean_problem(w, 0.0, 1.0 / m ** 0.5, f"layer {i} weights")
                   or _variance_problem(w, 1.0 / m, f"layer {i} weights (fan_in {m})"))
        if problem:
            return problem
    return None


def _layers_independent(got, _expected):
    layers = _items(got, len(_SIZES) - 1)
    return _correlation_problem(layers[1], layers[2], "the two layers")


# ---------------------------------------------------------------- dropout

_S_DROP = "4.2 Dropout"
_DROP = _PRE + (
    "_ones = jnp.ones((64, 32))\n"
    "_x = jnp.asarray(1.0 + np.abs(np.random.default_rng(405).normal(size=(64, 32))), jnp.float32)\n")


def _dropout_x() -> np.ndarray:
    x = 1.0 + np.abs(np.random.default_rng(405).normal(size=(64, 32)))
    return x.astype(np.float32).astype(np.float64)


def _kept_values(x_of, rate: float, rtol: float):
    def check(got, _expected):
        out = np.asarray(got, np.float64)
        x = x_of()
        if out.shape != x.shape:
            return _msg("wrong shape", expected=x.shape, got=out.shape)
        kept = out != 0
        want = x / (1.0 - rate)
        bad = kept & ~(np.abs(out - want) <= 1e-6 + rtol * np.abs(want))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return _msg(f"kept entries are not x / (1 - rate) = x / {1 - rate:g}",
                        expected=f"{want[idx]:.6g} at index {idx}", got=f"{out[idx]:.6g}")
        return None
    return check


def _kept_fraction(x_shape, p: float):
    def check(got, _expected):
        out = np.asarray(got)
        if out.shape != x_shape:
            return _msg("wrong shape", expected=x_shape, got=out.shape)
        return _fraction_problem(out != 0, p, "entries kept")
    return check


# ---------------------------------------------------------------- epoch_batches

_S_EPOCH = "4.3 Shuffling data each epoch"
_EPOCH = _PRE + "_x = jnp.arange(16.0)[:, None] * jnp.ones((1, 3))\n"


def _every_row_once(got, _expected):
    ids = np.sort(np.asarray(got, np.float64)[..., 0].ravel())
    if ids.shape != (16,) or not np.array_equal(ids, np.arange(16.0)):
        missing = sorted(set(range(16)) - {int(v) for v in ids if float(v).is_integer()})
        return _msg("rows are repeated or missing",
                    expected="the row numbers 0 .. 15, each once",
                    got=f"sorted row numbers {ids.astype(int).tolist()[:16]}"
                        + (f" (missing {missing[:6]})" if missing else ""))
    return None


def _fifteen_rows(got, _expected):
    ids = np.asarray(got, np.float64)[..., 0].ravel()
    n = np.unique(ids).size
    if n != 15:
        return _msg("the batches do not hold 15 different rows",
                    expected="15 different rows (3 batches of 5; 1 row dropped)",
                    got=f"{n} different rows among {ids.size}")
    return None


def _orders(got) -> np.ndarray:
    orders = np.asarray(got, np.float64)
    if orders.shape != (64, 16):
        raise ValueError(f"expected 64 orders of 16 rows, got shape {orders.shape}")
    return orders


def _row0_position(got, _expected):
    orders = _orders(got)
    pos = []
    for e, order in enumerate(orders):
        where = np.flatnonzero(order == 0)
        if where.size == 0:
            return _msg(f"row 0 is missing in epoch {e}", expected="every row once", got=order.tolist())
        pos.append(int(where[0]))
    return _mean_problem(pos, 7.5, ((16 ** 2 - 1) / 12) ** 0.5)


def _row1_after_row0(got, _expected):
    orders = _orders(got)
    follows = []
    for e, order in enumerate(orders):
        where = np.flatnonzero(order == 0)
        if where.size == 0:
            return _msg(f"row 0 is missing in epoch {e}", expected="every row once", got=order.tolist())
        p0 = int(where[0])
        follows.append(p0 + 1 < 16 and order[p0 + 1] == 1)
    return _fraction_problem(follows, 1 / 16, "epochs with row 1 right after row 0")


# ---------------------------------------------------------------- bootstrap_means

_S_BOOT = "5.2 vmap over keys"
_BOOT = _PRE + "_x = jnp.linspace(0.0, 1.0, 100) ** 2\n"
_TREE = _BOOT + '''from autograder._random import collect_key_carrying_loops, count_prng_ops

def _tree_facts():
    facts = {}
    carrying = []
    for n in (4, 16):
        jaxpr = jax.make_jaxpr(bootstrap_means, static_argnums=(2,))(jax.random.key(0), _x, n)
        counts = count_prng_ops(jaxpr)
        facts[f"ops_{n}"] = int(sum(counts.values()))
        facts[f"detail_{n}"] = ", ".join(f"{p} {c}" for p, c in sorted(counts.items()))
        carrying += collect_key_carrying_loops(jaxpr)
    facts["carrying"] = ", ".join(sorted(set(carrying)))
    return facts
'''


def _boot_x() -> np.ndarray:
    return np.asarray(np.linspace(0.0, 1.0, 100, dtype=np.float32) ** 2, np.float64)


def _wide_tree(got, _expected):
    facts = {str(k).strip("[]'\""): v for k, v in got.items()}
    if facts["carrying"]:
        return _msg("bootstrap_means carries a key from one loop iteration to the next: "
                    "a key chain n deep",
                    expected="keys made before the loop, none handed from iteration to iteration",
                    got=f"a {facts['carrying']} loop whose body returns a key")
    if int(facts["ops_16"]) > int(facts["ops_4"]):
        return _msg("bootstrap_means makes its random draws one resample at a time: its PRNG "
                    "work grows with n_boot",
                    expected="the same PRNG operations for every n_boot",
                    got=f"n_boot=4: {facts['ops_4']} PRNG operations ({facts['detail_4']}); "
                        f"n_boot=16: {facts['ops_16']} ({facts['detail_16']})")
    return None


def _boot_variance(got, _expected):
    means = np.asarray(got, np.float64).ravel()
    if means.size != 1000:
        return _msg("wrong number of means", expected=1000, got=means.size)
    sigma2 = float(np.var(_boot_x())) / 100
    return _variance_problem(means, sigma2)


def _boot_mean(got, _expected):
    means = np.asarray(got, np.float64).ravel()
    if means.size != 1000:
        return _msg("wrong number of means", expected=1000, got=means.size)
    x = _boot_x()
    return _mean_problem(means, float(np.mean(x)), (float(np.var(x)) / 100) ** 0.5)


# ---------------------------------------------------------------- the probes

_REUSE_FIX = ("split before every use: `k1, k2 = jax.random.split(key)`, and pass each key to "
              "exactly one random function")

PROBES = {
    "test_04_prng_make_keys": [
        Probe("_call(make_keys, 3, 8)", _PRE, name="make_keys(3, 8)",
              values=False, check=_distinct_rows(8, "make_keys(3, 8)"), section=_S_KEYS,
              hint="the result must be a typed key array of shape (n,) (dtype key<fry>): "
                   "jax.random.key, not the legacy raw uint32 jax.random.PRNGKey; all n keys "
                   "different",
              fix="return jax.random.split(jax.random.key(seed), n)"),
        Probe("[_reuse(make_keys, s, 8) for s in (0, 3, 4)]", _PRE,
              name="make_keys(0, 8), make_keys(3, 8), make_keys(4, 8) with JAX's key-reuse checker",
              compare=False, check=_no_reuse, section=_S_KEYS,
              hint="a key that was already split or sampled from was used again",
              fix=_REUSE_FIX),
        Probe("(_call(make_keys, 3, 8), _call(make_keys, 3, 8))", _PRE,
              name="make_keys(3, 8) called twice", compare=False, check=_deterministic,
              section=_S_KEYS,
              hint="randomness that does not come from the seed: np.random, Python's random, "
                   "time, or a counter kept outside the function",
              fix="make every key from jax.random.key(seed)"),
        Probe("(_call(make_keys, 3, 8), _call(make_keys, 4, 8))", _PRE,
              name="make_keys(3, 8) and make_keys(4, 8) together", compare=False,
              check=_seeds_apart, section=_S_KEYS,
              hint="the keys of seeds 3 and 4 overlap: the seed is ignored, or key i is "
                   "jax.random.key(seed + i), so seed 3's second key is seed 4's first",
              fix="make one key with jax.random.key(seed) and split it: jax.random.split(key, n)"),
        Probe("(jax.random.normal(_k[0], (4000,)), jax.random.normal(_k[1], (4000,)))",
              _PRE + "_k = _call(make_keys, 3, 8)\n",
              name="4000 draws from make_keys(3, 8)[0] and from make_keys(3, 8)[1]",
              compare=False, check=_independent_draws, section=_S_KEYS,
              hint="different keys must be independent streams: these keys are not",
              fix="derive the keys with jax.random.split(jax.random.key(seed), n)"),
    ],
    "test_04_prng_example_keys": [
        Probe("_call(example_keys, jax.random.key(7), jnp.arange(100, 164))", _PRE,
              name="example_keys(key, 64 ids)", values=False,
              check=_distinct_rows(64, "example_keys(key, 64 different ids)"), section=_S_FOLD,
              hint="the result must be a typed key array of shape (b,), one different key per "
                   "id (different ids must give different keys)",
              fix="jax.vmap(lambda i: jax.random.fold_in(key, i))(ids)"),
        Probe("[_reuse(example_keys, jax.random.key(42), jnp.array([3, 5, 7])),\n"
              " _reuse(example_keys, jax.random.key(42), jnp.array([5])),\n"
              " _reuse(example_keys, jax.random.key(7), _ids),\n"
              " _reuse(example_keys, jax.random.key(7), _ids[_perm])]",
              _PRE + _PERM + "_ids = jnp.arange(100, 164)\n",
              name="example_keys with JAX's key-reuse checker", compare=False, check=_no_reuse,
              section=_S_FOLD, hint="a key that was already split or sampled from was used again",
              fix="fold each id into the key: jax.random.fold_in(key, ids[j]) (fold_in does not "
                  "consume the key)"),
        Probe("(_call(example_keys, _key, jnp.array([5])), _call(example_keys, _key, jnp.array([3, 5, 7])))",
              _PRE + "_key = jax.random.key(42)\n",
              name="example_keys(key, [5]) against entry 1 of example_keys(key, [3, 5, 7])",
              compare=False, check=_by_id_not_position, section=_S_FOLD,
              hint="the key depends on the position in the batch (a split, or a fold_in of the "
                   "position), not on the id",
              fix="fold the id itself into the key: jax.random.fold_in(key, ids[j])"),
        Probe("(_call(example_keys, jax.random.key(7), _ids[_perm]), _call(example_keys, jax.random.key(7), _ids))",
              _PRE + _PERM + "_ids = jnp.arange(100, 164)\n",
              name="example_keys on the same 64 ids in another order", compare=False,
              check=_order_free, section=_S_FOLD,
              hint="the key depends on the position in the batch, not on the id",
              fix="fold the id itself into the key: jax.random.fold_in(key, ids[j])"),
        Probe("(_call(example_keys, _k, _ids), _call(example_keys, _k, _ids))",
              _PRE + "_k = jax.random.key(7)\n_ids = jnp.arange(100, 164)\n",
              name="example_keys(key, 64 ids) called twice", compare=False, check=_deterministic,
              section=_S_FOLD,
              hint="randomness that does not come from the key: np.random, Python's random, "
                   "time, or a counter kept outside the function",
              fix="derive every key from the key argument"),
        Probe("(_call(example_keys, _k, _ids), _call(example_keys, _other(_k), _ids))",
              _PRE + "_k = jax.random.key(7)\n_ids = jnp.arange(100, 164)\n",
              name="example_keys(key, 64 ids) for two different keys", compare=False,
              check=_varies, section=_S_FOLD,
              hint="the keys ignore the key argument (jax.random.key(id) gives every run the "
                   "same keys)",
              fix="fold the id into the key you are given: jax.random.fold_in(key, ids[j])"),
    ],
    "test_04_prng_init_mlp": [
        Probe("_call(init_mlp, jax.random.key(0), _sizes)", _MLP,
              name="init_mlp(key, [32, 64, 64, 64, 8])", values=False, section=_S_INIT,
              hint="a list with one {'w': (sizes[i], sizes[i+1]), 'b': (sizes[i+1],)} dict per "
                   "layer, float arrays"),
        Probe("[_reuse(init_mlp, jax.random.key(s), _sizes) for s in (0, 11)]", _MLP,
              name="init_mlp(key, [32, 64, 64, 64, 8]) with JAX's key-reuse checker",
              compare=False, check=_no_reuse, section=_S_INIT,
              hint="the same key was passed to several samplers (one per layer): those layers "
                   "are drawn from the same numbers",
              fix="one key per layer: keys = jax.random.split(key, len(sizes) - 1)"),
        Probe("[p['b'] for p in _call(init_mlp, jax.random.key(0), _sizes)]", _MLP,
              name="the biases of init_mlp(key, [32, 64, 64, 64, 8])", section=_S_INIT,
              hint="biases start at zero", fix="'b': jnp.zeros(n)"),
        Probe("(_weights(jax.random.key(0)), _weights(jax.random.key(0)))", _MLP,
              name="init_mlp(key, [32, 64, 64, 64, 8]) called twice", compare=False,
              check=_deterministic_layers, section=_S_INIT,
              hint="randomness that does not come from the key: np.random, Python's random, "
                   "time, or a counter kept outside the function",
              fix="draw every weight with jax.random from keys split from the key argument"),
        Probe("(_weights(_k), _weights(_other(_k)))", _MLP + "_k = jax.random.key(0)\n",
              name="the weights of init_mlp for two different keys", compare=False,
              check=_every_layer_varies, section=_S_INIT,
              hint="the weights ignore the key argument: a hard-coded jax.random.key(...) "
                   "inside, or a key from outside the function",
              fix="split the key you are given: keys = jax.random.split(key, len(sizes) - 1)"),
        Probe("_weights(jax.random.key(11))", _MLP,
              name="the weights of init_mlp(key(11), [32, 64, 64, 64, 8]): mean and variance",
              compare=False, check=_layer_moments, section=_S_INIT,
              hint="the weights' variance must be 1/fan_in: scale N(0, 1) draws by "
                   "1/sqrt(fan_in) (dividing by fan_in gives variance 1/fan_in**2)",
              fix="w = jax.random.normal(k, (m, n)) / jnp.sqrt(m)"),
        Probe("_weights(jax.random.key(11))", _MLP,
              name="layers 1 and 2 of init_mlp(key(11), [32, 64, 64, 64, 8])",
              compare=False, check=_layers_independent, section=_S_INIT,
              hint="the two layers were drawn from the same key: a key derived from something "
                   "they share (their width?) rather than the layer index",
              fix="one key per layer: keys = jax.random.split(key, len(sizes) - 1)"),
    ],
    "test_04_prng_dropout": [
        Probe("_call(dropout, jax.random.key(0), _ones, 0.25)", _DROP,
              name="dropout(key, ones((64, 32)), rate=0.25)", values=False,
              check=_kept_values(lambda: np.ones((64, 32)), 0.25, 1e-5), section=_S_DROP,
              hint="kept entries must be divided by 1 - rate = 0.75 (inverted dropout keeps the "
                   "expected value)",
              fix="return jnp.where(keep, x / (1 - rate), 0.0)"),
        Probe("[_reuse(dropout, jax.random.key(0), _ones, 0.25), _reuse(dropout, jax.random.key(1), _x, 0.5),\n"
              " _reuse(dropout, jax.random.key(2), _x, 0.9), _reuse(dropout, jax.random.key(3), _x, 0.0)]",
              _DROP, name="dropout with JAX's key-reuse checker", compare=False, check=_no_reuse,
              section=_S_DROP, hint="a key that was already split or sampled from was used again",
              fix=_REUSE_FIX),
        Probe("_call(dropout, jax.random.key(0), _ones, 0.25)", _DROP,
              name="the fraction of entries dropout(key, ones((64, 32)), rate=0.25) keeps",
              compare=False,
              check=_kept_fraction((64, 32), 0.75),
              section=_S_DROP,
              hint="entries must be kept with probability 1 - rate, dropped with probability rate",
              fix="keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)"),
        Probe("_call(dropout, jax.random.key(1), _x, 0.5)", _DROP,
              name="dropout(key, x, rate=0.5)", values=False,
              check=_kept_values(_dropout_x, 0.5, 1e-6), section=_S_DROP,
              hint="kept entries must be divided by 1 - rate = 0.5",
              fix="return jnp.where(keep, x / (1 - rate), 0.0)"),
        Probe("_call(dropout, jax.random.key(1), _x, 0.5)", _DROP,
              name="the fraction of entries dropout(key, x, rate=0.5) keeps", compare=False,
              check=_kept_fraction((64, 32), 0.5),
              section=_S_DROP,
              hint="entries must be kept with probability 1 - rate, dropped with probability rate",
              fix="keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)"),
        Probe("_call(dropout, jax.random.key(2), _x, 0.9)", _DROP,
              name="the fraction of entries dropout(key, x, rate=0.9) keeps", compare=False,
              check=_kept_fraction((64, 32), 0.1),
              section=_S_DROP, hint="entries must be kept with probability 1 - rate = 0.1",
              fix="keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)"),
        Probe("_call(dropout, jax.random.key(3), _x, 0.0)", _DROP,
              name="dropout(key, x, rate=0.0)", section=_S_DROP,
              hint="with rate 0 nothing is dropped and nothing is scaled"),
        Probe("(_call(dropout, _k, _x, 0.5), _call(dropout, _k, _x, 0.5))",
              _DROP + "_k = jax.random.key(1)\n", name="dropout(key, x, rate=0.5) called twice",
              compare=False, check=_deterministic, section=_S_DROP,
              hint="randomness that does not come from the key: np.random, Python's random, "
                   "time, or a counter kept outside the function",
              fix="draw the mask with jax.random from the key argument"),
        Probe("(_call(dropout, _k, _x, 0.5), _call(dropout, _other(_k), _x, 0.5))",
              _DROP + "_k = jax.random.key(1)\n",
              name="dropout(key, x, rate=0.5) for two different keys", compare=False,
              check=_varies, section=_S_DROP,
              hint="the mask ignores the key argument: a hard-coded jax.random.key(...) inside, "
                   "or a key from outside the function",
              fix="draw the mask from the key you are given"),
    ],
    "test_04_prng_epoch_batches": [
        Probe("_call(epoch_batches, jax.random.key(0), _x, 0, 4)", _EPOCH,
              name="epoch_batches(key, x of 16 rows, epoch=0, batch_size=4)", values=False,
              check=_every_row_once, section=_S_EPOCH,
              hint="shape (n // batch_size, batch_size, ...) holding every row once: drawing "
                   "indices with replacement (randint, choice) is not a shuffle",
              fix="index x with jax.random.permutation(epoch_key, n)"),
        Probe("[_reuse(epoch_batches, jax.random.key(0), _x, 0, 4),\n"
              " _reuse(epoch_batches, jax.random.key(1), _x, 5, 4),\n"
              " _reuse(epoch_batches, jax.random.key(2), _x, 0, 5),\n"
              " *[_reuse(epoch_batches, jax.random.key(3), _x, e, 4) for e in range(64)]]",
              _EPOCH, name="epoch_batches with JAX's key-reuse checker", compare=False,
              check=_no_reuse, section=_S_EPOCH,
              hint="a key that was already split or sampled from was used again",
              fix="derive the epoch's key with jax.random.fold_in(key, epoch) and use it once"),
        Probe("(_call(epoch_batches, _k, _x, 0, 4), _call(epoch_batches, _k, _x, 1, 4))",
              _EPOCH + "_k = jax.random.key(0)\n",
              name="epoch_batches(key, x of 16 rows, epoch 0 and epoch 1, batch_size=4)",
              compare=False, check=_varies_with("epoch"), section=_S_EPOCH,
              hint="the order does not change with the epoch: the same batches every epoch",
              fix="shuffle with the epoch's key: jax.random.fold_in(key, epoch)"),
        Probe("(_call(epoch_batches, _k, _x, 5, 4), _call(epoch_batches, _other(_k), _x, 5, 4))",
              _EPOCH + "_k = jax.random.key(1)\n",
              name="epoch_batches(key, x of 16 rows, epoch=5, 4) for two different keys",
              compare=False, check=_varies, section=_S_EPOCH,
              hint="the order ignores the key argument (a key from the epoch alone): every run "
                   "shuffles the same way",
              fix="shuffle with jax.random.fold_in(key, epoch), the key you are given"),
        Probe("(_call(epoch_batches, _k, _x, 5, 4), _call(epoch_batches, _k, _x, 5, 4))",
              _EPOCH + "_k = jax.random.key(1)\n",
              name="epoch_batches(key, x of 16 rows, epoch=5, 4) called twice", compare=False,
              check=_deterministic, section=_S_EPOCH,
              hint="randomness that does not come from the key and the epoch",
              fix="shuffle with jax.random.fold_in(key, epoch)"),
        Probe("_call(epoch_batches, jax.random.key(2), _x, 0, 5)", _EPOCH,
              name="epoch_batches(key, x of 16 rows, 0, 5)", values=False, check=_fifteen_rows,
              section=_S_EPOCH,
              hint="16 rows make 3 full batches of 5; the row left over is dropped, and no row "
                   "appears twice",
              fix="take the first n_batches * batch_size rows of a permutation, then reshape"),
        Probe("jnp.stack([_call(epoch_batches, _k, _x, e, 4)[..., 0].ravel() for e in range(64)])",
              _EPOCH + "_k = jax.random.key(3)\n",
              name="the position of row 0 over 64 epochs", compare=False, check=_row0_position,
              section=_S_EPOCH,
              hint="the order is not uniformly random (rows stay near their place)",
              fix="use jax.random.permutation"),
        Probe("jnp.stack([_call(epoch_batches, _k, _x, e, 4)[..., 0].ravel() for e in range(64)])",
              _EPOCH + "_k = jax.random.key(3)\n",
              name="how often row 1 follows row 0 over 64 epochs", compare=False,
              check=_row1_after_row0, section=_S_EPOCH,
              hint="the order is not uniformly random (a rotation or a reversal keeps "
                   "neighbours together)",
              fix="use jax.random.permutation"),
    ],
    "test_04_prng_bootstrap_means": [
        Probe("_call(bootstrap_means, jax.random.key(0), _x, 1000)", _BOOT,
              name="bootstrap_means(key, x of 100 values, 1000)", values=False, section=_S_BOOT,
              hint="one float mean per resample: shape (n_boot,)"),
        Probe("[_reuse(bootstrap_means, jax.random.key(s), _x, 1000) for s in (0, 1, 2)]", _BOOT,
              name="bootstrap_means with JAX's key-reuse checker", compare=False,
              check=_no_reuse, section=_S_BOOT,
              hint="a key that was already split or sampled from was used again",
              fix="keys = jax.random.split(key, n_boot), one per resample"),
        Probe("_tree_facts()", _TREE,
              name="the PRNG operations of bootstrap_means for n_boot = 4 and 16",
              compare=False, check=_wide_tree, section="5.1 Wide, not deep",
              hint="a chain `key, sub = jax.random.split(key)` in a Python loop or a scan: every "
                   "key waits for the one before it",
              fix="derive all n_boot keys at once with `keys = jax.random.split(key, n_boot)` "
                  "and `jax.vmap` the per-resample work over them"),
        Probe("(_call(bootstrap_means, _k, _x, 1000), _call(bootstrap_means, _k, _x, 1000))",
              _BOOT + "_k = jax.random.key(1)\n",
              name="bootstrap_means(key, x, 1000) called twice", compare=False,
              check=_deterministic, section=_S_BOOT,
              hint="randomness that does not come from the key: np.random, Python's random, "
                   "time, or a counter kept outside the function",
              fix="draw every index with jax.random from keys split from the key argument"),
        Probe("(_call(bootstrap_means, _k, _x, 1000), _call(bootstrap_means, _other(_k), _x, 1000))",
              _BOOT + "_k = jax.random.key(1)\n",
              name="bootstrap_means(key, x, 1000) for two different keys", compare=False,
              check=_varies, section=_S_BOOT,
              hint="the resamples ignore the key argument",
              fix="split the key you are given: jax.random.split(key, n_boot)"),
        Probe("_call(bootstrap_means, jax.random.key(2), _x, 1000)", _BOOT,
              name="the variance of 1000 bootstrap means", compare=False, check=_boot_variance,
              section=_S_BOOT,
              hint="the resamples are identical (the same key for every resample: vmap over "
                   "split keys, not over a copied key), or drawn without replacement (a "
                   "permutation has the mean of x every time)",
              fix="keys = jax.random.split(key, n_boot); vmap a function that draws len(x) "
                  "indices with jax.random.randint (or choice with replace=True)"),
        Probe("_call(bootstrap_means, jax.random.key(2), _x, 1000)", _BOOT,
              name="the mean of 1000 bootstrap means", compare=False, check=_boot_mean,
              section=_S_BOOT,
              hint="the resample means are not centred on mean(x): the indices do not cover "
                   "0 .. len(x) - 1 uniformly",
              fix="draw indices with jax.random.randint(k, (m,), 0, m)"),
    ],
}
