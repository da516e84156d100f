"""course.setup(): what it configures, on the CPU and on an accelerator (issue 30)."""
from __future__ import annotations

import dataclasses

import jax
import pytest

import course
from course import _env


@pytest.fixture
def precision_restored():
    before = jax.config.jax_default_matmul_precision
    yield
    jax.config.update("jax_default_matmul_precision", before)


def test_on_the_cpu_matmul_precision_is_left_alone(precision_restored, capsys):
    report = course.setup()
    assert report.backend == "cpu" and report.matmul_precision == "default"
    assert report.sharding == ""  # the device line already names the CPU devices
    assert jax.config.jax_default_matmul_precision is None
    assert "matmul" not in capsys.readouterr().out


def test_on_an_accelerator_float32_products_run_at_highest_precision(
        precision_restored, monkeypatch, capsys):
    tpu = dataclasses.replace(_env.environment_report(), backend="tpu", devices=("tpu:0",),
                              device_count=1)
    monkeypatch.setattr(_env, "environment_report", lambda: tpu)
    report = course.setup()
    assert report.matmul_precision == "highest"
    assert jax.config.jax_default_matmul_precision == "highest"
    out = capsys.readouterr().out
    assert "matmul   float32 products at 'highest' precision" in out
    # One TPU: the sharding chapter runs on the simulated CPU devices, and says so.
    assert report.sharding == (f"meshes of the {len(jax.devices('cpu'))} simulated CPU "
                               "devices (this host has 1 tpu device; sharding needs several)")
    assert "sharding meshes of the" in out
    jax.config.update("jax_default_matmul_precision", None)
    course.setup(matmul_precision=None, quiet=True)  # the course's default can be declined
    assert jax.config.jax_default_matmul_precision is None


def test_float32_tolerances_have_a_floor_only_where_jax_computes_on_an_accelerator(monkeypatch):
    """A TPU's transcendental functions and reductions agree with a CPU's to four or
    five digits: a float32 value computed there is judged with rtol >= 5e-4 (issue 30);
    on a CPU, and for other dtypes, the test cell's tolerance stands."""
    import numpy as np

    from autograder.core.numeric import collect_tree_mismatches

    got, ref = np.float32([0.0600098]), np.float32([0.06])  # 07's schedule on a TPU
    assert collect_tree_mismatches(got, ref, rtol=1e-5)  # on this CPU: a mismatch
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert collect_tree_mismatches(got, ref, rtol=1e-5) == []
    assert collect_tree_mismatches(np.float32([0.061]), ref, rtol=1e-5)  # 1.7 %: still wrong
    assert collect_tree_mismatches(np.float64([0.0600098]), np.float64([0.06]), rtol=1e-5)


def test_the_sharding_line_names_the_accelerators_where_there_are_several():
    assert _env.sharding_devices("tpu", 8) == "meshes of the 8 tpu devices"
    assert "simulated CPU devices" in _env.sharding_devices("gpu", 1)
