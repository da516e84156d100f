"""``python -m grader.tools.pallas_matmul``: module 10's blocked matmul against XLA's, on
the accelerator this runs on, the numbers quoted in its section 8.3.

The kernel is section 8.3's ``matmul_acc`` (bfloat16 blocks, a float32 VMEM scratch
accumulator, ``("parallel", "parallel", "arbitrary")``), compiled with Mosaic, so it
needs a TPU: on a CPU it says so and exits 2. Each case is the median of 20 calls of
the jitted function, each blocked, after one warm-up call (compilation excluded).
Run it as docs/course.md's "The course on a GPU or TPU" runs the notebooks, with the
repository on ``PYTHONPATH``.
"""
from __future__ import annotations

import argparse
import sys
import time

BLOCKS = ((128, 128, 128), (256, 256, 256), (512, 512, 512), (512, 1024, 1024))


def matmul_acc(x, y, bm: int, bn: int, bk: int):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _init():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32,
                                precision=jax.lax.Precision.DEFAULT)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _write():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=32 * 2**20))(x, y)


def median_seconds(fn, *args, calls: int = 20) -> float:
    fn(*args).block_until_ready()  # compiled and warm
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    if jax.default_backend() != "tpu":
        print(f"needs a TPU (this backend: {jax.default_backend()})", file=sys.stderr)
        return 2
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}; bfloat16 n x n @ n x n, "
          "float32 sums, median of 20 calls (ms)\n")
    print("| n | XLA | " + " | ".join("x".join(map(str, b)) for b in BLOCKS) + " |")
    print("|---:|---:|" + "---:|" * len(BLOCKS))
    xla = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32,
                                       precision=jax.lax.Precision.DEFAULT).astype(a.dtype))
    for n in args.sizes:
        x = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
        y = jax.random.normal(jax.random.key(2), (n, n), jnp.bfloat16)
        row = [f"{median_seconds(xla, x, y) * 1e3:.3f}"]
        for bm, bn, bk in BLOCKS:
            if n % bm or n % bn or n % bk:
                row.append("-")
                continue
            fn = jax.jit(lambda a, b, blocks=(bm, bn, bk): matmul_acc(a, b, *blocks))
            row.append(f"{median_seconds(fn, x, y) * 1e3:.3f}")
        print(f"| {n} | " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
