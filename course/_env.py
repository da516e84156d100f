"""Environment set-up and reports: the first cell of every notebook."""
from __future__ import annotations

import dataclasses
import os
import platform
import sys
from typing import Any

DEFAULT_CPU_DEVICES = 8


@dataclasses.dataclass(frozen=True)
class EnvironmentReport:
    """What produced a notebook's numbers: versions, backend and devices."""

    python: str
    jax: str
    jaxlib: str
    backend: str
    device_count: int
    devices: tuple[str, ...]
    cpu_cores: int | None
    x64: bool
    matmul_precision: str = "default"
    sharding: str = ""  # where the sharding chapter's meshes live, on an accelerator host

    def lines(self) -> list[str]:
        shown = ", ".join(self.devices[:4]) + (" ..." if len(self.devices) > 4 else "")
        lines = [
            f"python   {self.python}",
            f"jax      {self.jax} (jaxlib {self.jaxlib})",
            f"backend  {self.backend}: {self.device_count} device(s): {shown}",
            f"host     {self.cpu_cores} CPU core(s), x64 {'on' if self.x64 else 'off'}",
        ]
        if self.sharding:
            lines.append(f"sharding {self.sharding}")
        if self.matmul_precision != "default":
            lines.append(f"matmul   float32 products at {self.matmul_precision!r} precision "
                         "(the course compares values with a CPU's)")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


class _AlreadyPrinted:
    """Mixin: the object was printed when it was made, so a notebook cell that ends
    with the call does not show it a second time as the cell's value."""

    def _ipython_display_(self) -> None:
        pass


class SetupReport(_AlreadyPrinted, EnvironmentReport):
    """The report that :func:`setup` printed."""


class RunRecord(_AlreadyPrinted, dict):
    """The record that :func:`record_run` printed: a plain dict of facts."""


def _backends_initialized() -> bool:
    # A private helper, so guard it: if JAX moves it, assume the worst (initialized)
    # only when jax has already been used in this process.
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # pragma: no cover - depends on JAX internals
        return "jax" in sys.modules


def setup(cpu_devices: int | None = DEFAULT_CPU_DEVICES, *, typed_keys: bool = True,
          matmul_precision: str | None = "highest",
          quiet: bool = False) -> EnvironmentReport:
    """Configures JAX for the course and prints an environment report.

    Call it in a notebook's first cell, before any JAX operation: the number of
    simulated CPU devices can only be set before JAX starts its backends. Calling it
    again later is harmless; it then only reports.

    Args:
      cpu_devices: how many CPU devices JAX simulates (the sharding chapter needs 8).
        On a GPU or TPU host the accelerators are used as they are; this only shapes
        the CPU backend. ``None`` leaves JAX's default.
      typed_keys: make legacy raw ``uint32`` PRNG keys an error, so that every key is
        a typed ``jax.random.key`` (the key-reuse checker tracks typed keys only).
      matmul_precision: on an accelerator, the precision of float32 matrix products
        (``jax_default_matmul_precision``). A TPU multiplies float32 matrices in
        bfloat16 passes by default (about three digits: a Newton step 1.5 % off), and
        the course compares values with a CPU's, so ``"highest"`` (about seven
        digits). A CPU always computes them in float32: nothing is set there. ``None``
        leaves JAX's default everywhere.
      quiet: skip the printed report.

    Returns:
      The :class:`EnvironmentReport` that was printed.

    >>> report = setup(quiet=True)
    >>> report.device_count >= 1
    True
    """
    # Keep XLA's C++ logging (absl) off stderr: nbgrader scores stderr as a failure.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import jax

    if not _backends_initialized():
        if cpu_devices is not None:
            jax.config.update("jax_num_cpu_devices", int(cpu_devices))
        if typed_keys:
            jax.config.update("jax_legacy_prng_key", "error")
    elif cpu_devices is not None and jax.config.jax_num_cpu_devices not in (-1, cpu_devices):
        print(f"note: JAX was already running with {jax.config.jax_num_cpu_devices} CPU "
              f"devices; restart the kernel to get {cpu_devices}.")
    # The autograder's jaxpr checks import jax.extend, and importing it the first
    # time clears JAX's compilation caches: do it now, before anything compiles.
    import jax.extend.core  # noqa: F401

    facts = dataclasses.asdict(environment_report())
    if facts["backend"] != "cpu":
        facts["sharding"] = sharding_devices(facts["backend"], facts["device_count"])
    if matmul_precision is not None and facts["backend"] != "cpu":
        jax.config.update("jax_default_matmul_precision", matmul_precision)
        facts["matmul_precision"] = matmul_precision
    report = SetupReport(**facts)
    if not quiet:
        print(report)
    return report


def sharding_devices(backend: str, count: int) -> str:
    """Where the sharding chapter's meshes live on a GPU or TPU host, as one line: the
    accelerators where there are two or more, else the simulated CPU devices (the same
    choice as ``autograder.collect_sharding_devices``)."""
    import jax

    if count >= 2:
        return f"meshes of the {count} {backend} devices"
    try:
        cpus = len(jax.devices("cpu"))
    except RuntimeError:
        return f"only 1 {backend} device and no CPU backend: the sharding chapter cannot run"
    return (f"meshes of the {cpus} simulated CPU devices (this host has 1 {backend} "
            "device; sharding needs several)")


def environment_report() -> EnvironmentReport:
    """Reads the versions, backend and devices of this process (initializes JAX)."""
    import jax
    import jaxlib

    devices = jax.devices()
    return EnvironmentReport(
        python=platform.python_version(),
        jax=jax.__version__,
        jaxlib=jaxlib.__version__,
        backend=jax.default_backend(),
        device_count=len(devices),
        devices=tuple(f"{d.platform}:{d.id}" for d in devices),
        cpu_cores=os.cpu_count(),
        x64=bool(jax.config.jax_enable_x64),
    )


def record_run(**facts: Any) -> RunRecord:
    """Prints and returns a record of a run: the environment plus your own facts.

    Record what a reader needs to trust a number: warm-up and steady-state times,
    shapes, dtypes, sharding rules. Values are printed with ``repr`` unless they are
    strings.

    >>> rec = record_run(batch=(32, 3), step_ms=1.25)
    ... # doctest: +ELLIPSIS
    run record
    ...
    >>> rec["batch"]
    (32, 3)
    """
    report = environment_report()
    record = RunRecord(dataclasses.asdict(report))
    record.update(facts)
    width = max([len(k) for k in facts] + [8])
    print("run record")
    for line in report.lines():
        print("  " + line)
    for key, value in facts.items():
        shown = value if isinstance(value, str) else repr(value)
        print(f"  {key:<{width}} {shown}")
    return record
