"""Trusted probes for 06_sharding: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox,
on its 8 simulated CPU devices) and in the instructor's (reference); the values are
compared outside. See grader/trusted.py. Inputs mirror the hidden tests of
source/06_sharding (same seeds, shapes and meshes).

Meshes and shardings are not data: a probe returns facts about them as one JSON string
(axis names, sizes and types, the ids of the devices; for a placed array, the slice
each device holds), and a ``check`` here compares them with the reference's facts.
Facts with no reference to equal (which collective primitives a shard_map body uses,
which collectives the compiled HLO holds) are judged by ``check`` alone
(``compare=False``). Those facts are computed inside the sandbox, with the autograder's
helpers, so a submission that tampers with its interpreter could forge them; the values
(arrays) are always compared with the reference.
"""
import json

from grader.trusted import Probe

# ----------------------------------------------------------------- inside the sandbox

_PRE = """\
import json
import numpy as np
import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from autograder import collect_sharding_devices
_devs = collect_sharding_devices()
_m = 2 if len(_devs) % 2 == 0 else 1
_d = len(_devs) // _m
"""

# Facts about a mesh (anything else: its type only).
_MESH_FACTS = _PRE + """\
def _mesh_facts(mesh):
    from jax.sharding import AbstractMesh, Mesh
    if isinstance(mesh, AbstractMesh) or not isinstance(mesh, Mesh):
        return json.dumps({"type": type(mesh).__name__})
    return json.dumps({
        "type": "Mesh",
        "names": [str(n) for n in mesh.axis_names],
        "sizes": [[str(k), int(v)] for k, v in mesh.shape.items()],
        "types": [getattr(t, "name", str(t)) for t in mesh.axis_types],
        "devices": sorted(int(d.id) for d in mesh.devices.flat),
    })
"""

# Facts about where each named array lives: for every addressable shard, its device id
# and the slice it holds; plus, for messages, a description of the placement and (when
# it is not equivalent to the one asked) the likely cause.
_LAYOUT_FACTS = """\
def _layout_facts(named):
    # named: {name: (array, the sharding it should be equivalent to)}
    from autograder._sharding import _placement_cause, _placement_text
    out = {}
    for name, (arr, expected) in named.items():
        if isinstance(arr, jax.core.Tracer) or not isinstance(arr, jax.Array):
            out[name] = {"error": "is not a placed jax.Array (got " + type(arr).__name__ + ")"}
            continue
        shape = tuple(arr.shape)
        slices = {}
        for shard in arr.addressable_shards:
            bounds = [list(s.indices(n)[:2]) for s, n in zip(shard.index, shape)]
            slices[str(int(shard.device.id))] = bounds
        try:
            same = bool(arr.sharding.is_equivalent_to(expected, len(shape)))
        except Exception:
            same = False
        fact = {"slices": slices, "equivalent": same, "shape": list(shape),
                "placement": _placement_text(arr.sharding, shape)}
        if not same:
            try:
                fact["cause"], fact["fix"] = _placement_cause(arr.sharding, expected, shape)
            except Exception:
                pass
        out[name] = fact
    return json.dumps(out)
"""

# ------------------------------------------------------------------ outside: checks



def _load(raw):
    if not isinstance(raw, str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _ids(ids) -> str:
    ids = sorted(ids)
    return "{" + ", ".join(str(i) for i in ids) + "}" if ids else "{} (none)"


def _check_mesh(got, expected):
    g, e = _load(got), _load(expected)
    if not isinstance(g, dict):
        return "the grader could not read the mesh's facts"
    if g.get("type") != "Mesh":
        return ("did not return a mesh\n  expected: a jax.sharding.Mesh\n"
                f"  got:      {g.get('type')}")
    if g.get("names") != e["names"]:
        return (f"has the wrong axis names\n  expected: {tuple(e['names'])}\n"
                f"  got:      {tuple(g.get('names') or ())}")
    if g.get("sizes") != e["sizes"]:
        want, have = dict(e["sizes"]), dict(g.get("sizes") or [])
        swapped = sorted(want.values()) == sorted(have.values())
        return (f"has the wrong shape\n  expected: {want}\n  got:      {have}\n"
                + ("  (the axis sizes are swapped: the first entry of the shape goes with "
                   "the first axis name, and 'model' gets model_size devices)" if swapped else
                   "  (the mesh shape does not split the devices as asked)"))
    if g.get("types") != e["types"]:
        return (f"has the wrong axis types\n  expected: ({', '.join(e['types'])})\n"
                f"  got:      ({', '.join(g.get('types') or ())})\n"
                "  (jax.make_mesh makes Explicit axes unless told otherwise, while "
                "jax.sharding.Mesh(...) makes Auto axes: pass axis_types=(axis_type,) * 2)")
    if g.get("devices") != e["devices"]:
        return (f"is built on the wrong devices\n  expected: device ids {_ids(e['devices'])}\n"
                f"  got:      device ids {_ids(g.get('devices') or ())}\n"
                "  (the mesh was built from jax.devices() instead of the devices it was "
                "given: pass devices=devices)")
    return None


def _slice_text(bounds) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]"


def _check_layout(got, expected):
    """Each named array must put the reference's slices on the reference's devices."""
    g, e = _load(got), _load(expected)
    if not isinstance(g, dict):
        return "the grader could not read where the arrays live"
    problems = []
    for name, want in e.items():
        have = g.get(name)
        if not isinstance(have, dict):
            problems.append(f"{name}: no placement came back")
            continue
        if "error" in have:
            problems.append(f"{name} {have['error']}")
            continue
        if have.get("shape") != want["shape"]:
            problems.append(f"{name} has shape {tuple(have.get('shape') or ())}, "
                            f"expected {tuple(want['shape'])}")
            continue
        if have.get("slices") == want["slices"] and have.get("equivalent") is True:
            continue
        lines = [f"{name} is placed differently than asked",
                 f"  expected placement: {want['placement']}",
                 f"  got placement:      {have.get('placement')}"]
        got_slices = have.get("slices") or {}
        for dev in sorted(want["slices"], key=int):
            if got_slices.get(dev) != want["slices"][dev]:
                held = got_slices.get(dev)
                lines.append(f"  device {dev} should hold {_slice_text(want['slices'][dev])}, "
                             + (f"it holds {_slice_text(held)}" if held else "it holds nothing"))
                break
        if have.get("cause"):
            lines.append(f"  why: {have['cause']}")
        if have.get("fix"):
            lines.append(f"  try: {have['fix']}")
        problems.append("\n".join(lines))
    return "\n".join(problems) or None


def _check_device_sets(got, expected):
    g, e = _load(got), _load(expected)
    if not isinstance(g, dict):
        return "the grader could not read the device sets"
    for index, want in e.items():
        have = g.get(index)
        if not isinstance(have, list):
            return (f"at index {index} did not return a set of device ids\n"
                    f"  expected: a set of ints such as {_ids(want)}\n  got:      {have}")
        if set(have) != set(want):
            lines = [f"at index {index} returned the wrong device set",
                     f"  expected: {_ids(want)}", f"  got:      {_ids(have)}"]
            if set(want) - set(have):
                lines.append(f"  missing:    {_ids(set(want) - set(have))}")
            if set(have) - set(want):
                lines.append(f"  unexpected: {_ids(set(have) - set(want))}")
            return "\n".join(lines)
    return None


def _shown(names) -> str:
    return "{" + ", ".join(repr(n) for n in sorted(names)) + "}" if names else "set()"


def _check_collective_set(got, expected):
    g, e = _load(got), _load(expected)
    if not isinstance(g, dict):
        return "the grader could not read the result"
    have, want = g.get("got"), e["got"]
    if not isinstance(have, list):
        return ("did not return a set of collective names\n"
                f"  expected: a set of str such as {_shown(want)}\n  got:      {have}")
    if set(have) == set(want):
        return None
    lines = ["returned the wrong collectives", f"  expected: {_shown(want)}",
             f"  got:      {_shown(have)}"]
    if set(want) - set(have):
        lines.append(f"  missing:    {_shown(set(want) - set(have))}")
    if set(have) - set(want):
        lines.append(f"  unexpected: {_shown(set(have) - set(want))}")
    return "\n".join(lines)


_SHARD_MAP_COLLECTIVES = {"psum", "psum_invariant", "psum2", "all_gather",
                          "all_gather_invariant"}


def _check_shard_map_collective(got, expected):
    del expected  # the reference's primitives are one correct choice among several
    g = _load(got)
    if not isinstance(g, dict):
        return "the grader could not read the traced program"
    body = g.get("body") or []
    if not g.get("shard_maps"):
        return ("does not use jax.shard_map\n"
                "  expected: a jax.shard_map whose body uses psum, pmean or all_gather\n"
                f"  got:      primitives used: {', '.join(g.get('used') or []) or 'none'}\n"
                "  (the computation was written with jnp on the global array: right values, "
                "but no per-device code)")
    if not _SHARD_MAP_COLLECTIVES & set(body):
        return ("uses a jax.shard_map whose body has no collective\n"
                "  expected: psum, pmean or all_gather inside the shard_map body\n"
                f"  got:      primitives in the body: {', '.join(body) or 'none'}")
    return None


def _check_dp_collectives(got, expected):
    del expected
    g = _load(got)
    if not isinstance(g, dict) or not isinstance(g.get("found"), list):
        return "the grader could not read the compiled program"
    if {"all-reduce", "reduce-scatter"} & set(g["found"]):
        return None
    return ("compiles to no `all-reduce` or `reduce-scatter`\n"
            "  expected: `all-reduce` or `reduce-scatter` in the compiled HLO\n"
            f"  got:      collectives in the compiled HLO: {', '.join(g['found']) or 'none'}")


# ------------------------------------------------------------------ exercise 1: build_mesh

_S12 = "1.2 A mesh names your devices"
_S13 = "1.3 Explicit and Auto axes"
_MESH_FIX = ("return jax.make_mesh((len(devices) // model_size, model_size), ('data', 'model'), "
             "axis_types=(axis_type, axis_type), devices=devices)")


def _mesh_probe(args: str, name: str, section: str) -> Probe:
    return Probe(f"_mesh_facts(build_mesh({args}))",
                 _MESH_FACTS + "_sub = _devs[len(_devs) // 2:]\n",
                 name=name, compare=False, check=_check_mesh, section=section,
                 fix=_MESH_FIX)


# ------------------------------------------------------ exercise 2: place_batch_and_weights

_S21 = "2.1 A PartitionSpec says which mesh axis splits which dimension"
_PLACE_SETUP = _PRE + _LAYOUT_FACTS + """\
def _place_case(k):
    # k = 0: the visible test; 1..3: the hidden tests (rng 602, drawn in order).
    if k == 0:
        mesh = jax.make_mesh((_d, _m), ("data", "model"), devices=_devs)
        x = jnp.arange(2 * _d * 4, dtype=jnp.float32).reshape(2 * _d, 4)
        w = jnp.arange(4 * 2 * _m, dtype=jnp.float32).reshape(4, 2 * _m)
        return mesh, x, w
    rng = np.random.default_rng(602)
    sub = _devs[len(_devs) // 2:]
    cases = [
        jax.make_mesh((_m, _d), ("data", "model"), devices=_devs),
        jax.make_mesh((_d, _m), ("data", "model"), axis_types=(AxisType.Auto,) * 2, devices=_devs),
        jax.make_mesh((len(sub), 1), ("data", "model"), devices=sub),
    ]
    for i, mesh in enumerate(cases, start=1):
        dd, mm = mesh.shape["data"], mesh.shape["model"]
        x = jnp.asarray(rng.normal(size=(3 * dd, 2 * mm)), jnp.float32)
        w = jnp.asarray(rng.normal(size=(2 * mm, 2 * mm)), jnp.float32)
        if i == k:
            return mesh, x, w

def _placed_values(k):
    mesh, x, w = _place_case(k)
    xp, wp = place_batch_and_weights(x, w, mesh)
    return np.asarray(xp), np.asarray(wp)

def _placed_layout(k):
    mesh, x, w = _place_case(k)
    xp, wp = place_batch_and_weights(x, w, mesh)
    return _layout_facts({"x_placed (rows over 'data')": (xp, NamedSharding(mesh, P("data", None))),
                          "w_placed (columns over 'model')": (wp, NamedSharding(mesh, P(None, "model")))})
"""
_PLACE_CASES = ["the ('data', 'model') mesh", "a mesh with the axis sizes swapped",
                "a mesh with Auto axes", "a mesh on the last half of the devices"]
_PLACE_FIX = ("x_placed = jax.device_put(x, NamedSharding(mesh, P('data', None))); "
              "w_placed = jax.device_put(w, NamedSharding(mesh, P(None, 'model')))")


def _place_probes(k: int) -> list:
    return [
        Probe(f"_placed_values({k})", _PLACE_SETUP,
              name=f"place_batch_and_weights(x, w, mesh) on {_PLACE_CASES[k]}: values",
              rtol=0, atol=0, section=_S21,
              hint="placing an array must not change its values",
              fix="return (x_placed, w_placed) made with jax.device_put from x and w"),
        Probe(f"_placed_layout({k})", _PLACE_SETUP,
              name=f"place_batch_and_weights(x, w, mesh) on {_PLACE_CASES[k]}: placement",
              compare=False, check=_check_layout, section=_S21, fix=_PLACE_FIX),
    ]


# --------------------------------------------------------- exercise 3: devices_holding

_S31 = "3.1 addressable_shards"
_HOLD_SETUP = _PRE + """\
from autograder._sharding import _device_ids

def _hold_layouts():
    mesh = jax.make_mesh((_d, _m), ("data", "model"), devices=_devs)
    auto = jax.make_mesh((_m, _d), ("data", "model"), axis_types=(AxisType.Auto,) * 2,
                         devices=_devs)
    rng = np.random.default_rng(603)
    layouts = [(mesh, (2 * _d, 4), P("data", None), [(1, 3)])]   # the visible test
    for mm, shape, spec in [
        (mesh, (2 * _d, 4 * _m), P("data", "model")),
        (mesh, (2 * _d, 4 * _m), P(None, "model")),
        (mesh, (2 * _d, 4 * _m), P()),
        (mesh, (2 * len(_devs),), P(("data", "model"))),
        (auto, (3, 2 * _d, 2 * _m), P(None, "model", "data")),
        (auto, (2 * _m, 5), P("data")),
    ]:
        idx = [tuple(int(rng.integers(0, n)) for n in shape) for _ in range(3)]
        layouts.append((mm, shape, spec, idx))
    return layouts

def _holding(k):
    mesh, shape, spec, indices = _hold_layouts()[k]
    arr = jax.device_put(jnp.zeros(shape), NamedSharding(mesh, spec))
    out = {}
    for idx in indices:
        got = devices_holding(arr, idx)
        ids = _device_ids(got)
        out[str(idx)] = sorted(ids) if ids is not None else (
            type(got).__name__ + " " + repr(got)[:80])
    return json.dumps(out)
"""
_HOLD_CASES = ["x placed as P('data', None)", "x placed as P('data', 'model')",
               "x placed as P(None, 'model')", "x placed as P() (replicated)",
               "a vector placed as P(('data', 'model'))",
               "a 3-D array placed as P(None, 'model', 'data') on Auto axes",
               "x placed as P('data') on a mesh with the axis sizes swapped"]
_HOLD_HINT = ("a device holds x[index] when every slice of its shard.index contains the "
              "coordinate; copies (replica_id > 0) count too, and slice(None) covers the whole "
              "dimension (use s.indices(size) to get its bounds)")


def _hold_probe(k: int) -> Probe:
    return Probe(f"_holding({k})", _HOLD_SETUP, name=f"devices_holding({_HOLD_CASES[k]}, index)",
                 compare=False, check=_check_device_sets, section=_S31,
                 hint=_HOLD_HINT,
                 fix="loop over x.addressable_shards and keep shard.device.id of every shard "
                     "whose slices all contain the index")


# ------------------------------------------------------------ exercise 4: dense_full_rows

_S43 = "4.3 Constraining a sharding"
_DENSE_SETUP = _PRE + _LAYOUT_FACTS + """\
def _dense_case(k):
    rng = np.random.default_rng(604)
    cases = [((_d, _m), AxisType.Explicit, 2 * _d, 4, 2 * _m),
             ((_d, _m), AxisType.Auto, 2 * _d, 4, 2 * _m),
             ((_m, _d), AxisType.Explicit, 3 * _m, 5, 2 * _d),
             ((_m, _d), AxisType.Auto, 3 * _m, 5, 2 * _d)]
    for i, (sizes, kind, rows, d_in, cols) in enumerate(cases):
        xv = rng.normal(size=(rows, d_in)).astype(np.float32)
        wv = rng.normal(size=(d_in, cols)).astype(np.float32)
        if i == k:
            mesh = jax.make_mesh(sizes, ("data", "model"), axis_types=(kind,) * 2, devices=_devs)
            with jax.set_mesh(mesh):
                xi = jax.device_put(xv, P("data", None))
                wi = jax.device_put(wv, P(None, "model"))
            return mesh, xi, wi

def _dense(k):
    mesh, xi, wi = _dense_case(k)
    with jax.set_mesh(mesh):
        return jax.jit(dense_full_rows)(xi, wi)

def _dense_layout(k):
    mesh = _dense_case(k)[0]
    return _layout_facts({"the result": (_dense(k), NamedSharding(mesh, P("data", None)))})
"""
_DENSE_CASES = ["Explicit axes", "Auto axes", "Explicit axes, sizes swapped",
                "Auto axes, sizes swapped"]
_DENSE_FIX = ("constrain the result inside the function: jax.sharding.reshard(h, P('data', None)) "
              "under Explicit axes, jax.lax.with_sharding_constraint(h, P('data', None)) under "
              "Auto axes (jax.sharding.get_abstract_mesh().axis_types tells which)")


def _dense_probes(k: int) -> list:
    label = f"jax.jit(dense_full_rows)(x, w) under {_DENSE_CASES[k]}"
    return [
        Probe(f"_dense({k})", _DENSE_SETUP, name=f"{label}: values", rtol=1e-4, atol=1e-5,
              section=_S43, hint="the values must be tanh(x @ w)", fix=_DENSE_FIX),
        Probe(f"_dense_layout({k})", _DENSE_SETUP, name=f"{label}: placement", compare=False,
              check=_check_layout, section=_S43, fix=_DENSE_FIX),
    ]


# ------------------------------------------------------------ exercise 5: center_columns

_S52 = "5.2 Collectives"
_S51 = "5.1 A function of one shard"
_CENTER_SETUP = _PRE + _LAYOUT_FACTS + """\
def _center_case(k):
    rng = np.random.default_rng(605)
    cases = [((_d, _m), ("data", "model"), AxisType.Explicit, 2 * _d, 3),
             ((len(_devs),), ("data",), AxisType.Auto, 3 * len(_devs), 4),
             ((_m, _d), ("data", "model"), AxisType.Explicit, 5 * _m, 2),
             ((len(_devs),), ("data",), AxisType.Explicit, len(_devs), 6)]
    for i, (sizes, names, kind, rows, cols) in enumerate(cases):
        xv = (rng.normal(size=(rows, cols)) + 5.0 * np.arange(rows)[:, None]).astype(np.float32)
        if i == k:
            mesh = jax.make_mesh(sizes, names, axis_types=(kind,) * len(names), devices=_devs)
            with jax.set_mesh(mesh):
                xi = jax.device_put(xv, P("data", None))
            return mesh, xi

def _center(k):
    mesh, xi = _center_case(k)
    with jax.set_mesh(mesh):
        return jax.jit(center_columns)(xi)

def _center_layout(k):
    mesh = _center_case(k)[0]
    return _layout_facts({"the result": (_center(k), NamedSharding(mesh, P("data", None)))})

def _center_structure(k):
    from autograder._jaxpr import count_primitives, trace_jaxpr
    from autograder._sharding import collect_shard_map_primitives
    mesh, xi = _center_case(k)
    with jax.set_mesh(mesh):
        counts = collect_shard_map_primitives(center_columns, (xi,))
        used = [] if counts["shard_map"] else sorted(count_primitives(trace_jaxpr(center_columns, (xi,))))
    return json.dumps({"shard_maps": int(counts["shard_map"]),
                       "body": sorted(n for n in counts if n != "shard_map"), "used": used})
"""
_CENTER_CASES = ["the ('data', 'model') mesh", "a 1-D mesh with Auto axes",
                 "a mesh with the axis sizes swapped", "a 1-D mesh, one row per device"]
_CENTER_HINT = ("the column mean must cover the rows of every device: each device sums its own "
                "rows, then a psum (or pmean, all_gather) over 'data' combines them. Without it, "
                "or over another mesh axis, each device subtracts the mean of its own rows only")


def _center_probes(k: int) -> list:
    label = f"jax.jit(center_columns)(x) on {_CENTER_CASES[k]}"
    return [
        Probe(f"_center({k})", _CENTER_SETUP, name=f"{label}: values", rtol=1e-4, atol=1e-3,
              section=_S52, hint=_CENTER_HINT,
              fix="psum the per-device column sums and row counts over 'data' inside the "
                  "shard_map body"),
        Probe(f"_center_structure({k})", _CENTER_SETUP,
              name=f"center_columns(x) on {_CENTER_CASES[k]}: per-device code", compare=False,
              check=_check_shard_map_collective, section=_S51,
              fix="wrap the per-device computation: jax.shard_map(body, in_specs=P('data', None), "
                  "out_specs=P('data', None))(x), and combine the column sums in body with "
                  "jax.lax.psum(..., 'data')"),
        Probe(f"_center_layout({k})", _CENTER_SETUP, name=f"{label}: placement", compare=False,
              check=_check_layout, section=_S51,
              fix="return the blocks with out_specs=P('data', None)"),
    ]


# ------------------------------------------------------------- exercise 6: dp_train_step

_S61 = "6.1 The recipe"
_S62 = "6.2 By hand with shard_map, and its sharp bit"
_DP_SETUP = _PRE + _LAYOUT_FACTS + """\
def _dp_case(k):
    n = len(_devs)
    rng = np.random.default_rng(606)
    cases = [((n,), ("data",), AxisType.Explicit, 4 * n, 3, 0.1),
             ((n,), ("data",), AxisType.Auto, 2 * n, 5, 0.05),
             ((n // _m, _m), ("data", "model"), AxisType.Explicit, 3 * n, 2, 0.2),
             ((n // _m, _m), ("data", "model"), AxisType.Auto, 2 * n, 4, 0.1)]
    for i, (sizes, names, kind, rows, d, lr) in enumerate(cases):
        xv = rng.normal(size=(rows, d)).astype(np.float32)
        yv = (xv @ np.arange(1.0, d + 1.0) + 0.5 + 0.1 * rng.normal(size=rows)).astype(np.float32)
        pv = {"w": rng.normal(size=d).astype(np.float32), "b": np.float32(rng.normal())}
        if i == k:
            mesh = jax.make_mesh(sizes, names, axis_types=(kind,) * len(names), devices=_devs)
            with jax.set_mesh(mesh):
                xi = jax.device_put(xv, P("data", None))
                yi = jax.device_put(yv, P("data"))
                pi = jax.device_put(pv, P())
            return mesh, (pi, xi, yi, lr)

def _dp(k):
    mesh, args = _dp_case(k)
    with jax.set_mesh(mesh):
        return jax.jit(dp_train_step)(*args)

def _dp_layout(k):
    mesh = _dp_case(k)[0]
    out = _dp(k)
    return _layout_facts({f"new params['{name}']": (out[name], NamedSharding(mesh, P()))
                          for name in ("w", "b")})

def _dp_collectives(k):
    from autograder._hlo import compiled_hlo_text
    from autograder._sharding import collect_collectives
    mesh, args = _dp_case(k)
    with jax.set_mesh(mesh):
        text = compiled_hlo_text(jax.jit(dp_train_step), args)
    return json.dumps({"found": sorted(collect_collectives(text))})
"""
_DP_CASES = ["a 1-D Explicit mesh", "a 1-D Auto mesh", "a ('data', 'model') Explicit mesh",
             "a ('data', 'model') Auto mesh"]
_DP_HINT = ("the update differs from the single-device step: were the per-device gradients "
            "averaged over 'data'? Without a reduction each device keeps its own update; with a "
            "pmean of gradients that shard_map already summed, the step is n times too large")


def _dp_probes(k: int) -> list:
    label = f"jax.jit(dp_train_step)(params, x, y, lr) on {_DP_CASES[k]}"
    return [
        Probe(f"_dp({k})", _DP_SETUP, name=f"{label}: new params", rtol=1e-4, atol=1e-5,
              section=_S62, hint=_DP_HINT,
              fix="average the gradients over 'data' exactly once: jit does it for you; in a "
                  "shard_map, differentiate pmean(loss, 'data') or divide the summed gradient "
                  "by jax.lax.axis_size('data')"),
        Probe(f"_dp_collectives({k})", _DP_SETUP, name=f"{label}: compiled collectives",
              compare=False, check=_check_dp_collectives, section=_S61,
              hint="no all-reduce: the per-device gradients were never combined, or the batch "
                   "was gathered onto every device first (then nothing is data-parallel)",
              fix="keep x and y split over 'data' and reduce the gradients (jit does it, or "
                  "pmean)"),
        Probe(f"_dp_layout({k})", _DP_SETUP, name=f"{label}: placement of the new params",
              compare=False, check=_check_layout, section=_S61,
              hint="the new parameters must be replicated: a full copy on every device",
              fix="return them with out_specs=P() (shard_map), or keep them replicated"),
    ]


# -------------------------------------------------------- exercise 7: collectives_in_hlo

_S71 = "7.1 Lowered versus compiled"
_COLL_SETUP = _PRE + """\
def _coll_case(k):
    mesh = jax.make_mesh((_d, _m), ("data", "model"), devices=_devs)
    with jax.set_mesh(mesh):
        xr = jax.device_put(jnp.ones((2 * _d, 4)), P("data", None))
    auto = jax.make_mesh((len(_devs),), ("data",), axis_types=(AxisType.Auto,), devices=_devs)
    with jax.set_mesh(auto):
        xa = jax.device_put(jnp.arange(4.0 * len(_devs)).reshape(2 * len(_devs), 2), P("data", None))
        ya = jax.device_put(jnp.ones((2, 3)), P())
    cases = [
        (mesh, lambda a: a.sum(axis=0), (xr,)),
        (mesh, lambda a: jnp.sin(a) * 2, (xr,)),
        (mesh, lambda a: jax.sharding.reshard(a, P()), (xr,)),
        (mesh, lambda a: jax.sharding.reshard(a, P(None, "data")), (xr,)),
        (auto, lambda a: jnp.roll(a, 1, axis=0), (xa,)),
        (auto, lambda a, b: a.sum(axis=0) @ b, (xa, ya)),
        (auto, lambda a: a * 3.0, (xa,)),
    ]
    return cases[k]

def _colls(k):
    mesh, fn, args = _coll_case(k)
    with jax.set_mesh(mesh):
        got = collectives_in_hlo(fn, *args)
    if isinstance(got, (str, bytes)) or not hasattr(got, "__iter__"):
        return json.dumps({"got": type(got).__name__ + " " + repr(got)[:80]})
    got = list(got)
    if not all(isinstance(g, str) for g in got):
        return json.dumps({"got": "a collection of " + ", ".join(sorted({type(g).__name__ for g in got}))})
    return json.dumps({"got": sorted(set(got))})
"""
_COLL_CASES = ["sum over split rows", "elementwise", "reshard to P()",
               "reshard to P(None, 'data')", "roll over split rows (Auto axes)",
               "two arguments, sum then matmul (Auto axes)", "elementwise (Auto axes)"]
_COLL_HINT = ("collectives are inserted when XLA partitions the program, so read "
              "jax.jit(fn).lower(*args).compile().as_text() (not the lowered text), look for every "
              "class (all-reduce, all-gather, reduce-scatter, collective-permute, all-to-all) and "
              "count -start/-done forms as their class")


def _coll_probe(k: int) -> Probe:
    return Probe(f"_colls({k})", _COLL_SETUP, name=f"collectives_in_hlo({_COLL_CASES[k]}, ...)",
                 compare=False, check=_check_collective_set, section=_S71,
                 hint=_COLL_HINT,
                 fix="match each class followed by '(' (or '-start(' / '-done(') in the compiled "
                     "text, and return the set of class names found")


PROBES = {
    "test_06_sharding_build_mesh": [
        _mesh_probe("_devs, _m", "build_mesh(devices, model_size)", _S12),
        _mesh_probe("_devs, _m, AxisType.Auto", "build_mesh(devices, model_size, AxisType.Auto)",
                    _S13),
        _mesh_probe("_sub, len(_sub)", "build_mesh(last half of the devices, len(that half))",
                    _S12),
        _mesh_probe("_sub, 1, AxisType.Auto",
                    "build_mesh(last half of the devices, 1, AxisType.Auto)", _S13),
    ],
    "test_06_sharding_place_batch_and_weights": [p for k in range(4) for p in _place_probes(k)],
    "test_06_sharding_devices_holding": [_hold_probe(k) for k in range(7)],
    "test_06_sharding_dense_full_rows": [p for k in range(4) for p in _dense_probes(k)],
    "test_06_sharding_center_columns": [p for k in range(4) for p in _center_probes(k)],
    "test_06_sharding_dp_train_step": [p for k in range(4) for p in _dp_probes(k)],
    "test_06_sharding_collectives_in_hlo": [_coll_probe(k) for k in range(7)],
}
