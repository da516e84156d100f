"""Tests for autograder.sharding: meshes, placement, device sets and collectives.

Placements are built with `jax.device_put` on simulated CPU devices, so every
expected value comes from the layout itself (which mesh rows hold which block);
collectives come from programs whose communication is forced by their layout (a
sum over a split dimension needs an all-reduce, an elementwise op needs nothing).
Messages are asserted on, since they are what a student reads.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax

from course._env import _backends_initialized

# Sharding needs several devices: simulate 8 CPU devices, as course.setup() does,
# when JAX has not started its backends yet (it cannot change afterwards).
if not _backends_initialized():
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

from autograder import (CheckFailure, assert_collective_in_hlo, assert_collective_set,  # noqa: E402
                        assert_device_set, assert_mesh, assert_shard_map_uses,
                        assert_shard_shapes, assert_sharded_as, collect_collectives,
                        collect_shard_map_primitives, collect_sharding_devices,
                        collect_slice_devices)
from tests.judging import judge_programs, recorded  # noqa: E402


def _enough_devices() -> bool:
    n = len(collect_sharding_devices())
    return n >= 4 and n % 2 == 0


@pytest.fixture(scope="module")
def devs():
    if not _enough_devices():
        pytest.skip("JAX started with too few devices before this module could ask for 8: "
                    "test_sharding_checks_in_a_fresh_process runs these tests instead")
    return collect_sharding_devices()


def test_sharding_checks_in_a_fresh_process():
    """When another test module started JAX first (with one CPU device), the
    device-dependent tests above skip: run this module again in a process with 8."""
    if _enough_devices():
        pytest.skip("this process has enough devices: the tests above ran here")
    env = dict(os.environ, JAX_NUM_CPU_DEVICES="8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-k", "not in_a_fresh_process", __file__],
                          cwd=Path(__file__).resolve().parent.parent, env=env,
                          capture_output=True, text=True, timeout=900)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    assert " passed" in summary and "skipped" not in summary, proc.stdout[-1000:]


@pytest.fixture(scope="module")
def mesh(devs):
    return jax.make_mesh((len(devs) // 2, 2), ("data", "model"), devices=devs)


def place(mesh, spec, shape=None):
    shape = shape or (2 * mesh.shape["data"], 2 * mesh.shape["model"])
    return jax.device_put(jnp.arange(float(np.prod(shape))).reshape(shape),
                          NamedSharding(mesh, spec))


def message(excinfo) -> str:
    return str(excinfo.value)


# --- collect_sharding_devices ------------------------------------------------------

def test_collect_sharding_devices_gives_the_default_backend_when_it_has_enough(devs):
    assert collect_sharding_devices() == jax.devices()
    assert collect_sharding_devices(minimum=1) == jax.devices()


def test_collect_sharding_devices_falls_back_to_cpu_devices(devs):
    # Asking for more than the default backend has: the CPU list, never fewer devices.
    got = collect_sharding_devices(minimum=len(jax.devices()) + 1)
    assert len(got) >= len(jax.devices())
    assert all(d.platform == "cpu" for d in got) or got == jax.devices()


# --- assert_mesh -------------------------------------------------------------------

def test_assert_mesh_passes_in_any_device_order(devs):
    m = jax.make_mesh((2, 2), ("data", "model"), devices=devs[-4:])
    assert_mesh(m, axis_sizes={"data": 2, "model": 2}, axis_types=AxisType.Explicit,
                devices=list(reversed(devs[-4:])))
    assert_mesh(m, axis_sizes={"data": 2, "model": 2},
                axis_types=(AxisType.Explicit, AxisType.Explicit),
                devices=[d.id for d in devs[-4:]])


def test_assert_mesh_names_swapped_sizes(devs):
    m = jax.make_mesh((2, len(devs) // 2), ("data", "model"), devices=devs)
    with pytest.raises(CheckFailure) as e:
        assert_mesh(m, axis_sizes={"data": len(devs) // 2, "model": 2}, name="build_mesh(d, 2)",
                    section="1.2 Meshes")
    text = message(e)
    assert "build_mesh(d, 2) has the wrong shape" in text
    assert f"expected: {{'data': {len(devs) // 2}, 'model': 2}}" in text
    assert "the axis sizes are swapped" in text
    assert "reread: section 1.2 Meshes" in text


def test_assert_mesh_explains_default_axis_types(devs):
    m = jax.sharding.Mesh(np.array(devs).reshape(-1, 2), ("data", "model"))  # Auto by default
    with pytest.raises(CheckFailure) as e:
        assert_mesh(m, axis_sizes={"data": len(devs) // 2, "model": 2},
                    axis_types=AxisType.Explicit)
    text = message(e)
    assert "has the wrong axis types" in text
    assert "expected: (Explicit, Explicit)" in text and "got:      (Auto, Auto)" in text
    assert "jax.sharding.Mesh(...) makes Auto axes" in text


def test_assert_mesh_reports_other_devices_by_id(devs):
    m = jax.make_mesh((2, 2), ("data", "model"), devices=devs[:4])
    with pytest.raises(CheckFailure) as e:
        assert_mesh(m, axis_sizes={"data": 2, "model": 2}, devices=devs[-4:])
    text = message(e)
    want = "{" + ", ".join(str(d.id) for d in devs[-4:]) + "}"
    got = "{" + ", ".join(str(d.id) for d in devs[:4]) + "}"
    assert "is built on the wrong devices" in text
    assert f"expected: device ids {want}" in text and f"got:      device ids {got}" in text
    assert "instead of the devices you were given" in text


def test_assert_mesh_wrong_axis_names_and_types(mesh):
    with pytest.raises(CheckFailure) as e:
        assert_mesh(mesh, axis_sizes={"model": 2, "data": mesh.shape["data"]})
    assert "has the wrong axis names" in message(e)
    assert "expected: ('model', 'data')" in message(e)
    with pytest.raises(CheckFailure) as e:
        assert_mesh((2, 2), axis_sizes={"data": 2})
    assert "is not a mesh" in message(e) and "got:      (int 2, int 2)" in message(e)
    with pytest.raises(CheckFailure) as e:
        assert_mesh(mesh.abstract_mesh, axis_sizes=dict(mesh.shape))
    assert "is an AbstractMesh, which has no devices" in message(e)


# --- collect_slice_devices, assert_sharded_as --------------------------------------

def test_collect_slice_devices_groups_copies(mesh):
    x = place(mesh, P("data", None))
    groups = collect_slice_devices(x)
    # Row block k is held by the k-th row of the mesh's device grid, one copy per 'model'.
    rows = x.shape[0] // mesh.shape["data"]
    want = {((k * rows, (k + 1) * rows), (0, x.shape[1])): frozenset(d.id for d in mesh.devices[k])
            for k in range(mesh.shape["data"])}
    assert groups == want


def test_assert_sharded_as_compares_placements_not_spellings(mesh):
    x = place(mesh, P("data"))
    assert x.sharding.spec != P("data", None)  # the trap the check avoids
    assert_sharded_as(x, NamedSharding(mesh, P("data", None)))
    y = place(mesh, P(None, None))
    assert_sharded_as(y, NamedSharding(mesh, P()))


def test_assert_sharded_as_explains_a_replicated_array(mesh):
    x = place(mesh, P())
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(x, NamedSharding(mesh, P("data", None)), name="x_placed",
                          section="2.1 PartitionSpec")
    text = message(e)
    d = mesh.shape["data"]
    assert text.startswith("x_placed is placed differently than asked")
    assert (f"expected placement: P('data', None) on mesh {dict(mesh.shape)}: {d} slice(s) of "
            f"shape (2, 4), each on 2 device(s)") in text
    assert f"got placement:      P() on mesh {dict(mesh.shape)}: 1 slice(s) of shape" in text
    assert "the array is replicated: every device holds a full copy" in text
    assert "should be on devices" in text and "here its first element [0, 0] is on devices" in text
    assert "reread: section 2.1 PartitionSpec" in text


def test_assert_sharded_as_names_the_wrong_mesh_axis(mesh):
    x = place(mesh, P(None, "data"), shape=(4, 2 * mesh.shape["data"]))
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(x, NamedSharding(mesh, P(None, "model")))
    text = message(e)
    assert "dimension 1 is split over 'data' where 'model' was expected" in text
    assert "PartitionSpec entries go with array dimensions" in text
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(place(mesh, P("data", "model")), NamedSharding(mesh, P("data", None)))
    assert "dimension 1 is split over 'model' where it should be whole" in message(e)
    assert "fix: put None for dimension 1 in the PartitionSpec" in message(e)


def test_assert_sharded_as_a_split_array_where_a_copy_is_needed(mesh):
    x = place(mesh, P("data", "model"))
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(x, NamedSharding(mesh, P()))
    assert "the array is split, but every device should hold a full copy" in message(e)
    assert "use P() (replicated)" in message(e)


def test_assert_sharded_as_other_mesh_and_single_device(devs, mesh):
    other = jax.make_mesh((2, 2), ("data", "model"), devices=devs[-4:])
    x = jax.device_put(jnp.zeros((4, 4)), NamedSharding(other, P("data")))
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(x, NamedSharding(mesh, P("data")))
    assert "it was placed with another mesh" in message(e)
    one = jax.device_put(jnp.zeros((8, 4)), devs[0])
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(one, NamedSharding(mesh, P("data")))
    assert f"got placement:      one device (cpu:{devs[0].id})" in message(e)
    assert "the array sits on one device: it was never placed on the mesh" in message(e)


def test_assert_sharded_as_type_rung_and_overrides(mesh):
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(np.zeros((4, 4)), NamedSharding(mesh, P("data")), name="f(x)")
    assert "f(x) is not a jax.Array" in message(e)
    assert "a NumPy array has no device placement" in message(e)

    seen = []

    @jax.jit
    def inspect(x):
        try:
            assert_sharded_as(x, NamedSharding(mesh, P("data")))
        except CheckFailure as err:
            seen.append(str(err))
        return x

    inspect(jnp.zeros((8, 4)))
    assert "is a tracer, not a placed array" in seen[0]
    with pytest.raises(CheckFailure) as e:
        assert_sharded_as(place(mesh, P()), NamedSharding(mesh, P("data")), hint="my cause",
                          fix="my fix")
    assert "likely cause: my cause" in message(e) and "fix: my fix" in message(e)


# --- assert_shard_shapes -----------------------------------------------------------

def test_assert_shard_shapes(mesh):
    x = place(mesh, P("data", "model"))
    assert_shard_shapes(x, (2, 2))
    with pytest.raises(CheckFailure) as e:
        assert_shard_shapes(place(mesh, P()), (2, 4), name="x_placed")
    text = message(e)
    assert "x_placed has shards of the wrong shape" in text
    assert "expected: every shard (2, 4)" in text
    assert f"shards {(2 * mesh.shape['data'], 4)} on {mesh.size} device(s)" in text
    assert "the array is not split: each device holds all of it" in text
    with pytest.raises(CheckFailure) as e:
        assert_shard_shapes(x, (2, 4))
    assert "split over other mesh axes, or other dimensions" in message(e)


# --- assert_device_set -------------------------------------------------------------

def test_assert_device_set_accepts_ids_and_devices(devs):
    assert_device_set({devs[0].id, devs[1].id}, [devs[1], devs[0]])
    assert_device_set([devs[1], devs[0].id], {devs[0].id, devs[1].id})


def test_assert_device_set_lists_missing_and_unexpected(devs):
    with pytest.raises(CheckFailure) as e:
        assert_device_set({devs[0].id, devs[2].id}, {devs[0].id, devs[1].id},
                          name="devices_holding(x, (0, 0))", hint="copies count too")
    text = message(e)
    assert "devices_holding(x, (0, 0)) returned the wrong device set" in text
    assert f"missing:    {{{devs[1].id}}}" in text
    assert f"unexpected: {{{devs[2].id}}}" in text
    assert "likely cause: copies count too" in text


def test_assert_device_set_rejects_non_sets(devs):
    for bad in (3, "01", ["cpu:0"]):
        with pytest.raises(CheckFailure) as e:
            assert_device_set(bad, {0})
        assert "did not return a set of device ids" in message(e)


def test_assert_device_set_exact_asks_for_a_set_of_int_ids(devs):
    assert_device_set({devs[0].id, devs[1].id}, [devs[1], devs[0]], exact=True)
    assert_device_set(frozenset({devs[0].id}), {devs[0].id}, exact=True)
    # Loose by default: a list, or Device objects, name the same devices.
    assert_device_set([devs[0].id, devs[0].id], {devs[0].id})
    for bad, got in (([devs[0].id, devs[0].id], "a sequence of 2 ints"),
                     ({devs[0]}, "not all of them ints (devices?)")):
        with pytest.raises(CheckFailure) as e:
            assert_device_set(bad, {devs[0].id}, name="devices_holding(x, (0, 0))", exact=True)
        assert "devices_holding(x, (0, 0)) did not return a set of device ids" in message(e)
        assert got in message(e)


# --- collectives in HLO ------------------------------------------------------------

SYNTHETIC_HLO = """
HloModule jit_f
%region (a: f32[], b: f32[]) -> f32[] {
  ROOT %add.1 = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (p: f32[8]) -> f32[8] {
  %all-reduce.7 = f32[] add(f32[] %x, f32[] %y)
  %ars = f32[8]{0} all-reduce-start(f32[8]{0} %p), to_apply=%region
  %ard = f32[8]{0} all-reduce-done(f32[8]{0} %ars)
  %cp = (f32[2], f32[2]) collective-permute(f32[2]{0} %q), source_target_pairs={{0,1}}
  %rs = f32[1]{0} reduce-scatter(f32[8]{0} %ard), dimensions={0}
  ROOT %t = f32[8]{0} all-to-all(f32[8]{0} %rs), dimensions={0}, metadata={op_name="all_gather"}
}
"""


def test_collect_collectives_reads_opcodes_not_names():
    # `%all-reduce.7` is only a name (its op is `add`), the async pair counts once,
    # and the jax primitive name in metadata is not an op.
    assert collect_collectives(SYNTHETIC_HLO) == {
        "all-reduce", "collective-permute", "reduce-scatter", "all-to-all"}
    assert collect_collectives("ROOT %add = f32[] add(f32[] %a, f32[] %b)") == set()


def test_assert_collective_in_hlo_finds_the_all_reduce_of_a_split_sum(mesh):
    with jax.set_mesh(mesh):
        x = place(mesh, P("data", None))
        # Judged from the exported program, compiled where it is judged: nothing returned.
        assert assert_collective_in_hlo(lambda a: a.sum(axis=0), (x,), "all-reduce") is None
        assert_collective_in_hlo(lambda a: a.sum(axis=0), (x,), ("reduce-scatter", "all-reduce"))
        assert_collective_in_hlo(lambda a: jnp.sin(a), (x,), "all-reduce", present=False)
        with pytest.raises(CheckFailure) as e:
            assert_collective_in_hlo(lambda a: a.sum(axis=0), (x,), "all-reduce", present=False,
                                     name="row_sums(x)", section="7.2")
    text = message(e)
    assert "row_sums(x) compiles to `all-reduce`" in text
    assert "expected: no `all-reduce` in the compiled HLO" in text
    assert "XLA had to move data between devices" in text
    assert "reread: section 7.2" in text


def test_assert_collective_in_hlo_missing_collective_message(mesh):
    with jax.set_mesh(mesh):
        x = place(mesh, P("data", None))
        with pytest.raises(CheckFailure) as e:
            assert_collective_in_hlo(lambda a: a * 2, (x,), ("all-reduce", "reduce-scatter"),
                                     name="step(x)", hint="gradients not reduced")
    text = message(e)
    assert "step(x) compiles to no `all-reduce` or `reduce-scatter`" in text
    assert "got:      collectives in the compiled HLO: none" in text
    assert "likely cause: gradients not reduced" in text


def test_assert_collective_in_hlo_reports_student_errors_and_bad_names(mesh):
    def broken(a):
        raise NotImplementedError()

    with pytest.raises(CheckFailure) as e:
        assert_collective_in_hlo(broken, (jnp.ones(4),), "all-reduce")
    assert "is not implemented yet" in message(e)

    def typo(a):
        return a.sume()

    with pytest.raises(CheckFailure) as e:
        assert_collective_in_hlo(typo, (jnp.ones(4),), "all-gather")
    assert "typo(a=f32[4]) raised AttributeError" in message(e)
    with pytest.raises(ValueError, match="unknown collective"):
        assert_collective_in_hlo(jnp.sin, (jnp.ones(4),), "all_reduce")


def test_passing_checks_write_nothing_to_stderr(mesh, capfd):
    with jax.set_mesh(mesh):
        x = place(mesh, P("data", None))
        assert_collective_in_hlo(lambda a: a.sum(axis=0), (x,), "all-reduce")
        assert_sharded_as(x, NamedSharding(mesh, P("data")))
    assert capfd.readouterr().err == ""


def test_assert_collective_set():
    assert_collective_set(["all-reduce", "all-reduce"], {"all-reduce"})
    with pytest.raises(CheckFailure) as e:
        assert_collective_set({"all-reduce"}, {"all-reduce", "all-to-all"}, name="c(f, x)")
    text = message(e)
    assert "c(f, x) returned the wrong collectives" in text
    assert "missing:    {'all-to-all'}" in text
    with pytest.raises(CheckFailure) as e:
        assert_collective_set("all-reduce", {"all-reduce"})
    assert "did not return a set of collective names" in message(e)


# --- shard_map primitives ----------------------------------------------------------

def _smap(body, mesh, out_specs=P()):
    def run(x):
        return jax.shard_map(body, mesh=mesh, in_specs=P("data", None), out_specs=out_specs)(x)
    return run


def test_assert_collective_set_exact_asks_for_a_set():
    assert_collective_set(["all-reduce", "all-reduce"], {"all-reduce"})
    assert_collective_set(frozenset({"all-reduce"}), {"all-reduce"}, exact=True)
    with pytest.raises(CheckFailure) as e:
        assert_collective_set(["all-reduce", "all-reduce"], {"all-reduce"}, name="c(f, x)",
                              exact=True)
    assert "c(f, x) did not return a set of collective names" in message(e)
    assert "a sequence of 2 names" in message(e)


def test_collect_shard_map_primitives_sees_psum_invariant(mesh):
    x = place(mesh, P("data", None))
    counts = collect_shard_map_primitives(
        _smap(lambda b: jax.lax.psum(b.sum(axis=0), "data"), mesh), (x,))
    assert counts["shard_map"] == 1
    assert counts["psum_invariant"] == 1  # psum with check_vma=True
    assert counts["reduce_sum"] == 1
    outside = collect_shard_map_primitives(lambda a: a.sum(axis=0), (x,))
    assert outside["shard_map"] == 0 and outside["reduce_sum"] == 0


@pytest.mark.parametrize("body, names", [
    (lambda b: jax.lax.psum(b.sum(axis=0), "data"), "psum"),
    (lambda b: jax.lax.pmean(b.mean(axis=0), "data"), ("pmean",)),
    (lambda b: jax.lax.all_gather(b, "data", tiled=True).sum(axis=0, keepdims=True),
     ("psum", "all_gather")),
])
def test_assert_shard_map_uses_accepts_each_collective(mesh, body, names):
    x = place(mesh, P("data", None))
    out = P() if names != ("psum", "all_gather") else P("data", None)
    assert_shard_map_uses(_smap(body, mesh, out), (x,), names)


def test_assert_shard_map_uses_without_collective(mesh):
    x = place(mesh, P("data", None))

    def center(a):
        return _smap(lambda b: b - b.mean(axis=0), mesh, P("data", None))(a)

    with pytest.raises(CheckFailure) as e:
        assert_shard_map_uses(center, (x,), ("psum", "pmean"), section="5.2 Collectives")
    text = message(e)
    assert text.startswith("the shard_map in center(a=f32[")
    assert "uses no collective" in text
    assert "expected: `psum` or `pmean` inside the shard_map body" in text
    # The body's ops as the exported program names them (psum would be all_reduce).
    assert "got:      StableHLO ops in the body: broadcast_in_dim, divide, reduce, subtract" in text
    assert "each device only sees its own shard" in text
    assert "reread: section 5.2 Collectives" in text


def test_assert_shard_map_uses_without_shard_map(mesh):
    x = place(mesh, P("data", None))
    with pytest.raises(CheckFailure) as e:
        assert_shard_map_uses(lambda a: a - a.mean(axis=0), (x,), "psum", name="center(x)")
    text = message(e)
    assert "center(x) does not use jax.shard_map" in text
    assert "expected: a jax.shard_map whose body uses `psum`" in text
    assert "got:      StableHLO ops used:" in text and "reduce" in text
    with pytest.raises(ValueError, match="unknown collective primitive"):
        assert_shard_map_uses(lambda a: a, (x,), "all-reduce")


# --- judged as the grader judges: exported programs, derived outside ----------------

def test_collectives_are_judged_from_the_exported_program(mesh):
    # Explicit axes and a Python float argument: the judge rebuilds the mesh with the
    # program's axis types and records the float as a scalar input.
    from autograder.core.check import REFERENCE, STUDENT

    def row_sums(a, scale):
        return a.sum(axis=0) * scale

    def gathered(a, scale):     # same values, but the rows are gathered, not reduced
        return jax.sharding.reshard(a, P()).sum(axis=0) * scale

    def doubled(a, scale):      # an all-reduce, but not the function that was asked for
        return 2 * a.sum(axis=0) * scale

    with jax.set_mesh(mesh):
        x = place(mesh, P("data", None))
        with recorded(REFERENCE) as ref:
            assert_collective_in_hlo(row_sums, (x, 0.5), "all-reduce", name="row_sums(x)")
        assert ref[0].expected is not None  # the reference's own program, to compare values
        outcomes = {}
        for fn in (row_sums, gathered, doubled):
            with recorded(STUDENT) as student:
                assert_collective_in_hlo(fn, (x, 0.5), "all-reduce", name="row_sums(x)")
            assert student[0].expected is None
            outcomes[fn.__name__] = judge_programs(ref, student)
    assert outcomes["row_sums"].passed
    assert "row_sums(x) compiles to no `all-reduce`" in outcomes["gathered"].message
    assert "all-gather" in outcomes["gathered"].message
    assert "does not compute the reference's values" in outcomes["doubled"].message


def test_the_judge_reads_the_export_mesh_where_jax_needs_a_mesh_for_shardings(mesh,
                                                                              monkeypatch):
    # jax 0.10 (a TPU machine's) builds Exported.in_shardings_jax only on a given mesh;
    # called without one it raised TypeError and 06's four sharded exercises could not
    # be judged there. The judge then reads the abstract shardings kept beside, with
    # their Explicit axis types (a mesh of Auto axes does not match the export's).
    from jax import export

    real = export.Exported.in_shardings_jax

    def needs_mesh(self, mesh=None):
        if mesh is None:
            raise TypeError("Exported.in_shardings_jax() missing 1 required positional "
                            "argument: 'mesh'")
        return real(self, mesh)

    monkeypatch.setattr(export.Exported, "in_shardings_jax", needs_mesh)
    test_collectives_are_judged_from_the_exported_program(mesh)


def test_shard_map_collectives_are_judged_from_the_exported_program(mesh):
    from autograder.core.check import REFERENCE, STUDENT

    def center(body):
        def run(a):
            return jax.shard_map(body, mesh=mesh, in_specs=P("data", None),
                                 out_specs=P("data", None))(a)
        run.__name__ = "center"
        return run

    good = center(lambda b: b - jax.lax.pmean(b.mean(axis=0), "data"))
    local = center(lambda b: b - b.mean(axis=0))
    x = place(mesh, P("data", None))
    with recorded(REFERENCE) as ref:
        assert_shard_map_uses(good, (x,), ("psum", "pmean"))
    with recorded(STUDENT) as mine:
        assert_shard_map_uses(good, (x,), ("psum", "pmean"))
    assert judge_programs(ref, mine).passed
    with recorded(STUDENT) as mine:
        assert_shard_map_uses(local, (x,), ("psum", "pmean"))
    # The local mean gives other values: the program is not the reference's.
    assert "does not compute the reference's values" in judge_programs(ref, mine).message
