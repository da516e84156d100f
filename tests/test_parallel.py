"""Tests for autograder.sharding.parallel: collective counts and pytree placements.

Programs are built so that their communication is forced by the layout: a Megatron
MLP block (column- then row-split weights) needs exactly one all-reduce; gathering a
split weight needs an all-gather; the gradient of an all_gather in shard_map is a
reduce-scatter. Placements come from jax.device_put on simulated CPU devices.
Messages are asserted on: they are what a student reads. The explain functions are
also fed plain data that went through JSON, as the trusted grader will.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax

from course._env import _backends_initialized

if not _backends_initialized():
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

from autograder import (CheckFailure, assert_collective_counts, assert_tree_placed_as,  # noqa: E402
                        collect_collective_counts, collect_sharding_devices,
                        collect_tree_placement, explain_collective_counts,
                        explain_tree_placement)


def _enough_devices() -> bool:
    n = len(collect_sharding_devices())
    return n >= 4 and n % 2 == 0


@pytest.fixture(scope="module")
def devs():
    if not _enough_devices():
        pytest.skip("JAX started with too few devices: test_in_a_fresh_process runs these")
    return collect_sharding_devices()


def test_parallel_checks_in_a_fresh_process():
    """Runs this module again with 8 devices when another module started JAX with one."""
    if _enough_devices():
        pytest.skip("this process has enough devices: the tests above ran here")
    env = dict(os.environ, JAX_NUM_CPU_DEVICES="8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-k", "not in_a_fresh_process", __file__],
                          cwd=Path(__file__).resolve().parent.parent, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"


SPECS = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": P()}


def _mlp_inputs(mesh):
    rng = np.random.default_rng(0)
    m = mesh.shape["model"]
    p = {"w1": rng.normal(size=(4, 4 * m)), "b1": rng.normal(size=4 * m),
         "w2": rng.normal(size=(4 * m, 3)), "b2": rng.normal(size=3)}
    p = {k: jnp.asarray(v, jnp.float32) for k, v in p.items()}
    with jax.set_mesh(mesh):
        pp = jax.device_put(p, {k: NamedSharding(mesh, s) for k, s in SPECS.items()})
        x = jax.device_put(jnp.ones((2 * mesh.shape["data"], 4)), P("data", None))
    return pp, x


def _megatron(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jax.lax.psum(h @ p["w2"], "model") + p["b2"]
    return jax.shard_map(block, in_specs=(SPECS, P("data", None)),
                         out_specs=P("data", None))(params, x)


def _gathered(params, x):
    # Every weight gathered first: right values, the layout thrown away.
    full = {k: jax.sharding.reshard(v, P()) for k, v in params.items()}
    return jax.nn.relu(x @ full["w1"] + full["b1"]) @ full["w2"] + full["b2"]


def _twice(params, x):
    def block(p, x):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        out = jax.lax.psum(h @ p["w2"], "model")
        return jax.lax.pmean(out, "model") + p["b2"]
    return jax.shard_map(block, in_specs=(SPECS, P("data", None)), out_specs=P("data", None),
                         check_vma=False)(params, x)


# --- collect_collective_counts -------------------------------------------------------

def test_collect_collective_counts_counts_start_forms_once():
    hlo = """
    %ars = f32[8] all-reduce-start(f32[8] %p), replica_groups={{0,1}}
    %ard = f32[8] all-reduce-done(f32[8] %ars)
    %all-gather.2 = f32[8] all-gather(f32[4] %q), dimensions={0}
    %rs = f32[2] reduce-scatter(f32[8] %r), dimensions={0}
    %rs2 = f32[2] reduce-scatter(f32[8] %s), dimensions={0}
    """
    assert collect_collective_counts(hlo) == {"all-gather": 1, "all-reduce": 1,
                                              "reduce-scatter": 2}


def test_megatron_block_compiles_to_exactly_one_all_reduce(devs):
    mesh = jax.make_mesh((len(devs) // 2, 2), ("data", "model"), devices=devs)
    pp, x = _mlp_inputs(mesh)
    with jax.set_mesh(mesh):
        assert_collective_counts(_megatron, (pp, x), at_least={"all-reduce": 1},
                                 at_most={"all-reduce": 1}, absent=("all-gather", "all-to-all"))
        text = jax.jit(_megatron).lower(pp, x).compile().as_text()
    assert collect_collective_counts(text) == {"all-reduce": 1}


def test_gathered_weights_are_reported_as_an_all_gather(devs):
    mesh = jax.make_mesh((len(devs) // 2, 2), ("data", "model"), devices=devs)
    pp, x = _mlp_inputs(mesh)
    with jax.set_mesh(mesh), pytest.raises(CheckFailure) as e:
        assert_collective_counts(_gathered, (pp, x), at_least={"all-reduce": 1},
                                 absent=("all-gather",), name="mlp(params, x)", section="8.1")
    text = str(e.value)
    assert "mlp(params, x) compiles to no all-reduce" in text
    assert "collectives in the compiled HLO: " in text and "all-gather" in text
    assert "reread: section 8.1" in text


def test_a_second_all_reduce_is_too_many(devs):
    mesh = jax.make_mesh((len(devs) // 2, 2), ("data", "model"), devices=devs)
    pp, x = _mlp_inputs(mesh)
    with jax.set_mesh(mesh), pytest.raises(CheckFailure) as e:
        assert_collective_counts(_twice, (pp, x), at_least={"all-reduce": 1},
                                 at_most={"all-reduce": 1}, name="block")
    assert "block runs too many collectives" in str(e.value)
    assert "expected: at most 1 all-reduce in the compiled HLO" in str(e.value)
    assert "got:      2 all-reduce" in str(e.value)


def test_gradient_of_all_gather_is_a_reduce_scatter(devs):
    mesh = jax.make_mesh((len(devs),), ("data",), devices=devs)
    with jax.set_mesh(mesh):
        w = jax.device_put(jnp.ones((2 * len(devs), 3)), P("data"))
        x = jax.device_put(jnp.ones((2 * len(devs), 2 * len(devs))), P("data"))

        def loss(w, x):
            full = jax.lax.all_gather(w, "data", tiled=True)
            return jax.lax.pmean(jnp.mean((x @ full) ** 2), "data")

        grad = jax.shard_map(jax.grad(loss), in_specs=(P("data"), P("data")), out_specs=P("data"))
        assert_collective_counts(grad, (w, x), at_least={"all-gather": 1, "reduce-scatter": 1})
        text = jax.jit(grad).lower(w, x).compile().as_text()
    assert collect_collective_counts(text)["reduce-scatter"] >= 1


def test_explain_collective_counts_works_on_json_data():
    observed = json.loads(json.dumps({"all-gather": 2, "all-reduce": 1}))
    assert explain_collective_counts(observed, at_least={"all-gather": 1}) is None
    text = explain_collective_counts(observed, name="step", at_least={"reduce-scatter": 1},
                                     hint="FSDP reduce-scatters", fix="gather in the loss")
    assert text.splitlines() == [
        "step compiles to no reduce-scatter",
        "  expected: at least 1 reduce-scatter in the compiled HLO (a sum over devices of "
        "which each device keeps only its own slice)",
        "  got:      collectives in the compiled HLO: 2 all-gather, 1 all-reduce",
        "  likely cause: FSDP reduce-scatters",
        "  fix: gather in the loss"]
    assert "compiles to all-gather" in explain_collective_counts(observed, absent=["all-gather"])


# --- placements ------------------------------------------------------------------------

def test_tree_placement_passes_for_equivalent_specs(devs):
    mesh = jax.make_mesh((len(devs),), ("data",), devices=devs)
    tree = {"w": jax.device_put(jnp.ones((len(devs), 2)), NamedSharding(mesh, P("data"))),
            "n": jax.device_put(jnp.zeros(()), NamedSharding(mesh, P()))}
    # P('data', None) places a matrix like P('data'): no failure.
    assert_tree_placed_as(tree, {"w": NamedSharding(mesh, P("data", None)),
                                 "n": NamedSharding(mesh, P())})


def test_tree_placement_lists_every_misplaced_leaf(devs):
    mesh = jax.make_mesh((len(devs),), ("data",), devices=devs)
    whole = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P("data"))
    tree = {"mu": {"w1": jax.device_put(jnp.ones((len(devs), 2)), whole),
                   "w2": jax.device_put(jnp.ones((len(devs), 2)), whole)},
            "count": jax.device_put(jnp.zeros((), jnp.int32), whole)}
    with pytest.raises(CheckFailure) as e:
        assert_tree_placed_as(tree, {"mu": {"w1": split, "w2": split}, "count": whole},
                              name="opt_state", section="8.2", hint="keep the moments split")
    text = str(e.value)
    assert "opt_state is not placed as expected (2 of 3 leaves)" in text
    assert f"['mu']['w1']: expected {len(devs)} slices of shape (1, 2), split along axis 0" in text
    assert f"['mu']['w2']: got      a full copy on each of {len(devs)} devices (replicated)" in text
    assert "['count']" not in text
    assert "likely cause: keep the moments split" in text
    assert "reread: section 8.2" in text


def test_tree_placement_reports_a_different_structure(devs):
    mesh = jax.make_mesh((len(devs),), ("data",), devices=devs)
    with pytest.raises(CheckFailure) as e:
        assert_tree_placed_as({"w": jnp.ones(2)}, {"w": NamedSharding(mesh, P()),
                                                   "b": NamedSharding(mesh, P())}, name="params")
    assert "params has the wrong structure" in str(e.value)


def test_explain_tree_placement_works_on_json_data(devs):
    mesh = jax.make_mesh((len(devs),), ("data",), devices=devs)
    w = jax.device_put(jnp.ones((len(devs), 2)), NamedSharding(mesh, P("data")))
    observed = json.loads(json.dumps(collect_tree_placement({"w": w})))
    expected = json.loads(json.dumps(collect_tree_placement(
        {"w": w}, {"w": NamedSharding(mesh, P("data", None))})))
    assert explain_tree_placement(observed, expected) is None
    replicated = json.loads(json.dumps(collect_tree_placement(
        {"w": w}, {"w": NamedSharding(mesh, P())})))
    assert "1 of 1 leaves" in explain_tree_placement(observed, replicated)


def test_a_non_array_leaf_is_named():
    got = collect_tree_placement({"lr": 0.1})
    assert got == {"['lr']": {"kind": "not a JAX array", "shape": None}}


def test_a_sharded_program_on_cpu_devices_is_judged_where_the_default_backend_is_a_tpu(
        devs, monkeypatch):
    # A one-TPU host runs the sharding chapter on the 8 simulated CPU devices: the
    # program is exported for the CPU (where its inputs live) and the judge places it
    # on the CPU devices, instead of refusing "a program for 8 devices" (measured on a
    # TPU v5e before this). The backend's name is faked: this machine has only a CPU.
    from autograder.programs import artifacts as _artifacts
    from autograder.core import wire as _wire

    mesh = jax.make_mesh((len(devs) // 2, 2), ("data", "model"), devices=devs)
    params, x = _mlp_inputs(mesh)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with jax.set_mesh(mesh):
        exported, flat = _artifacts.export_program(jax.jit(_megatron), (params, x))
        expected = np.asarray(_megatron(params, x))
    assert _artifacts._input_platforms(jax.tree.leaves((params, x))) == ("cpu",)
    assert exported.platforms == ("cpu",) and exported.nr_devices == len(devs)
    facts, outputs = _artifacts.derive_one(bytes(exported.serialize()),
                                           _wire.observe_tree(list(flat)), compile=True)
    assert not facts["refused"], facts["refused"]
    assert facts["collective_counts"].get("all-reduce") == 1
    np.testing.assert_allclose(outputs.leaves[0].value, expected, rtol=1e-5)
    assert _artifacts.program_devices(("cpu",)) == list(jax.devices("cpu"))
