"""``make bench``: student run time and grading throughput, measured on this machine.

The grading half (plain nbgrader against the pipeline, scale) is in
``_bench_grading``; this module runs the parts and writes the report.

Each release notebook, with the instructor's solutions filled in (what a student
who solved everything runs), is executed top to bottom in a fresh kernel. The
report gives each notebook's wall time and its slowest cell. The speed claims of a
chapter's text (``CLAIMS``: jit against eager, a Python loop's compile time, ...)
are checked on the numbers that chapter's own cells measured in that same run.
Everything goes to ``artifacts/bench/bench.json`` with the machine and versions.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from grader.course import REPO, generate_release, make_scratch_course
from grader.tools.submission import build_submission, read_notebook

NOTEBOOK_LIMIT_S = 60.0
CELL_LIMIT_S = 15.0
COURSE_LIMIT_S = 300.0


def _cell_seconds(cell) -> float:
    ex = cell.get("metadata", {}).get("execution", {})
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


# ---------------------------------------------------------------- speed claims

def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("inf")


def _vmap_claims(v: dict) -> list[dict]:
    loop, jv = v["timings_ms"]["Python loop of jit(predict)"], v["timings_ms"]["jit(vmap(predict))"]
    sizes = v["batch_sizes"]
    grow = sizes[-1] / sizes[0]
    return [
        {"section": "1.4", "claim": f"jit(vmap) is faster than a Python loop of jit calls "
                                    f"(batch {sizes[-1]})",
         "measured": f"{_ratio(loop[-1], jv[-1])}x", "holds": loop[-1] > jv[-1]},
        {"section": "1.4", "claim": f"the loop's time grows with the batch ({grow:g}x more "
                                    "examples): linearly, one dispatch per example",
         "measured": f"{_ratio(loop[-1], loop[0])}x", "holds": loop[-1] / loop[0] > grow / 4},
        {"section": "1.4", "claim": "jit(vmap) barely moves at these sizes",
         "measured": f"{_ratio(jv[-1], jv[0])}x", "holds": jv[-1] / jv[0] < grow / 4},
    ]


def _jit_claims(v: dict) -> list[dict]:
    speedups = [e / j for e, j in zip(v["eager_ms"], v["jit_ms"])]
    py, fori = v["compile_s"]["Python for loop"], v["compile_s"]["lax.fori_loop"]
    steps = v["steps"]
    return [
        {"section": "4.1", "claim": "a jitted call returns before its result is ready "
                                    "(asynchronous dispatch)",
         "measured": f"ready after {_ratio(v['finished_s'], v['dispatched_s'])}x the time "
                     "the call took to return",
         "holds": v["finished_s"] > v["dispatched_s"]},
        {"section": "4.2", "claim": "jax.jit (one fused loop) is faster than eager, op by op, "
                                    "at every size of the plot",
         "measured": ", ".join(f"{n:,}: {s:.1f}x" for n, s in zip(v["sizes"], speedups)),
         "holds": min(speedups) > 1},
        {"section": "4.2", "claim": "the student's benchmark() finds the same speed-up",
         "measured": f"{v['benchmark']['speedup']:.1f}x at 30,000",
         "holds": v["benchmark"]["speedup"] > 1},
        {"section": "5.3", "claim": f"a Python loop's compile time grows with its length "
                                    f"({steps[0]} -> {steps[-1]} steps); fori_loop's does not",
         "measured": f"Python loop {_ratio(py[-1], py[0])}x, fori_loop "
                     f"{_ratio(fori[-1], fori[0])}x; at {steps[-1]} steps the Python loop "
                     f"compiles {_ratio(py[-1], fori[-1])}x slower",
         "holds": py[-1] / py[0] > 2 * fori[-1] / fori[0] and py[-1] > fori[-1]},
        {"section": "7", "claim": "the first training step pays for compilation; the next "
                                  "ones reuse the program",
         "measured": f"first step {_ratio(1e3 * v['first_step_s'], v['step_median_ms'])}x "
                     "the median step",
         "holds": 1e3 * v["first_step_s"] > 5 * v["step_median_ms"]},
    ]


# The numbers each chapter's cells leave in the kernel (read after its last cell),
# and the check of what its text says about them.
CLAIMS = {
    "02_vmap": ({"batch_sizes": "batch_sizes", "timings_ms": "timings"}, _vmap_claims),
    "03_jit": ({"sizes": "sizes", "eager_ms": "eager_ms", "jit_ms": "jit_ms",
                "steps": "steps_list", "compile_s": "compile_s",
                "first_step_s": "first_step_s", "step_median_ms": "step_timing.median_ms",
                "dispatched_s": "dispatched", "finished_s": "finished",
                "benchmark": "bench"}, _jit_claims),
}
_CLAIMS_MARK = "JAXCOURSE-CLAIMS "


def _claims_cell(reads: dict[str, str]):
    import nbformat

    body = ", ".join(f"{k!r}: {expr}" for k, expr in reads.items())
    return nbformat.v4.new_code_cell(
        f"import json as _json\nprint({_CLAIMS_MARK!r} + _json.dumps({{{body}}}, default=float))")


def _read_claims(cell) -> dict | None:
    for out in cell.get("outputs", []):
        for line in out.get("text", "").splitlines() if out.get("output_type") == "stream" else []:
            if line.startswith(_CLAIMS_MARK):
                return json.loads(line[len(_CLAIMS_MARK):])
    return None


# ---------------------------------------------------------------- run time

def run_notebook(nb, cwd: Path, timeout: int = 300,
                 reads: dict[str, str] | None = None) -> tuple[float, list[float], list[str], dict | None]:
    """Executes a notebook; returns (wall seconds, per-cell seconds, error names, reads).

    ``reads`` (name -> expression) are evaluated after the last cell, untimed.
    """
    from nbclient import NotebookClient

    from grader.kernels import private_sockets

    values = None
    with private_sockets() as sockets:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", config=sockets,
                                allow_errors=True, record_timing=True,
                                resources={"metadata": {"path": str(cwd)}})
        with client.setup_kernel():
            start = time.perf_counter()
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            wall = time.perf_counter() - start
            if reads:
                extra = _claims_cell(reads)
                nb.cells.append(extra)  # nbclient files outputs by index into nb.cells
                try:
                    client.execute_cell(extra, len(nb.cells) - 1)
                finally:
                    nb.cells.pop()
                values = _read_claims(extra)
    cells = [_cell_seconds(c) if c.cell_type == "code" else 0.0 for c in nb.cells]
    errors = [o.get("ename", "") for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    return wall, cells, errors, values


def student_runtime(assignments: list[str]) -> dict:
    import jax

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        course = make_scratch_course(tmp, assignments)
        for name in assignments:
            release_dir = generate_release(course, name)
            for path in sorted(release_dir.glob("*.ipynb")):
                nb = build_submission(read_notebook(path),
                                      source_nb=read_notebook(course / "source" / name / path.name))
                reads, check = CLAIMS.get(name, (None, None))
                wall, cells, errors, values = run_notebook(nb, release_dir, reads=reads)
                slowest = max(range(len(cells)), key=cells.__getitem__)
                rows.append({"assignment": name, "notebook": path.name, "wall_s": round(wall, 2),
                             "slowest_cell_s": round(cells[slowest], 2),
                             "slowest_cell_index": slowest,
                             "slowest_cell_start": nb.cells[slowest].source.split("\n")[0][:60],
                             "errors": errors})
                print(f"{name:18s} {wall:7.1f} s   slowest cell {cells[slowest]:5.1f} s "
                      f"(cell {slowest}: {rows[-1]['slowest_cell_start']!r})"
                      + (f"   ERRORS: {errors}" if errors else ""))
                if check:
                    claims = check(values) if values else [
                        {"section": "", "claim": "the chapter's measurements", "holds": False,
                         "measured": "not found after the last cell"}]
                    rows[-1]["claims"] = claims
                    for c in claims:
                        print(f"    {'holds ' if c['holds'] else 'FAILS '} \u00a7{c['section']} "
                              f"{c['claim']}: {c['measured']}")
    total = sum(r["wall_s"] for r in rows)
    return {
        "machine": {"platform": platform.platform(), "processor": platform.machine(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "jax": jax.__version__},
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "targets": {"notebook_s": NOTEBOOK_LIMIT_S, "cell_s": CELL_LIMIT_S,
                    "course_s": COURSE_LIMIT_S},
        "notebooks": rows, "course_total_s": round(total, 1),
        "within_targets": all(r["wall_s"] <= NOTEBOOK_LIMIT_S and r["slowest_cell_s"] <= CELL_LIMIT_S
                              and not r["errors"] for r in rows) and total <= COURSE_LIMIT_S,
        "claims_hold": all(c["holds"] for r in rows for c in r.get("claims", [])),
    }


def main(assignments: list[str], out: Path = REPO / "artifacts" / "bench", *,
         parts: tuple[str, ...] = ("student", "grading", "scale"), size: int = 24,
         scale_module: str = "01_grad") -> int:
    """Runs the chosen parts and writes ``artifacts/bench/bench.json``."""
    from grader.tools import bench_grading as _bench_grading
    from grader.sandbox import isolation

    out.mkdir(parents=True, exist_ok=True)
    report = {"parts": list(parts), "isolation": isolation()}
    if "student" in parts:
        print("== student run time (fresh kernel, solutions filled in)")
        report["student"] = student_runtime(assignments)
        print(f"whole course: {report['student']['course_total_s']} s (target "
              f"{COURSE_LIMIT_S:.0f} s); within targets: {report['student']['within_targets']}; "
              f"the chapters' speed claims hold: {report['student']['claims_hold']}")
        report.update(machine=report["student"]["machine"], date=report["student"]["date"])
    if "grading" in parts:
        print(f"== grading throughput: plain serial nbgrader vs the pipeline, {size} submissions")
        report["grading"] = [_bench_grading.throughput(a, size) for a in assignments]
    if "scale" in parts:
        print(f"== scale: {scale_module}, 1 and 2 local workers, 2-worker Dask on loopback")
        report["scale"] = _bench_grading.scale(scale_module, size)
    if "growth" in parts:
        print(f"== growth: {scale_module}, the pipeline on 24, 48 and 96 submissions")
        report["growth"] = _bench_grading.growth(scale_module)
    if "machine" not in report:
        import jax

        report["machine"] = {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                             "python": platform.python_version(), "jax": jax.__version__}
        report["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    path = out / "bench.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")
    return 0
