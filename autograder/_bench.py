"""``make bench``: student run time and grading throughput, measured on this machine.

The grading half (plain nbgrader against the pipeline, scale) is in
``_bench_grading``; this module runs the parts and writes the report.

Each release notebook, with the instructor's solutions filled in (what a student
who solved everything runs), is executed top to bottom in a fresh kernel. The
report gives each notebook's wall time and its slowest cell, and is written to
``artifacts/bench/student_runtime.json`` with the machine and versions.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from autograder._course import REPO, generate_release, make_scratch_course
from autograder._submission import build_submission, read_notebook

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


def run_notebook(nb, cwd: Path, timeout: int = 300) -> tuple[float, list[float], list[str]]:
    """Executes a notebook; returns (wall seconds, per-cell seconds, error names)."""
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}}, record_timing=True)
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    cells = [_cell_seconds(c) if c.cell_type == "code" else 0.0 for c in nb.cells]
    errors = [o.get("ename", "") for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    return wall, cells, errors


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
                wall, cells, errors = run_notebook(nb, release_dir)
                slowest = max(range(len(cells)), key=cells.__getitem__)
                rows.append({"assignment": name, "notebook": path.name, "wall_s": round(wall, 2),
                             "slowest_cell_s": round(cells[slowest], 2),
                             "slowest_cell_index": slowest,
                             "slowest_cell_start": nb.cells[slowest].source.split("\n")[0][:60],
                             "errors": errors})
                print(f"{name:18s} {wall:7.1f} s   slowest cell {cells[slowest]:5.1f} s "
                      f"(cell {slowest}: {rows[-1]['slowest_cell_start']!r})"
                      + (f"   ERRORS: {errors}" if errors else ""))
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
    }


def main(assignments: list[str], out: Path = REPO / "artifacts" / "bench", *,
         parts: tuple[str, ...] = ("student", "grading", "scale"), size: int = 24,
         scale_module: str = "01_grad") -> int:
    """Runs the chosen parts and writes ``artifacts/bench/bench.json``."""
    from autograder import _bench_grading
    from autograder._sandbox import isolation

    out.mkdir(parents=True, exist_ok=True)
    report = {"parts": list(parts), "isolation": isolation()}
    if "student" in parts:
        print("== student run time (fresh kernel, solutions filled in)")
        report["student"] = student_runtime(assignments)
        print(f"whole course: {report['student']['course_total_s']} s (target "
              f"{COURSE_LIMIT_S:.0f} s); within targets: {report['student']['within_targets']}")
        report.update(machine=report["student"]["machine"], date=report["student"]["date"])
    if "grading" in parts:
        print(f"== grading throughput: plain serial nbgrader vs the pipeline, {size} submissions")
        report["grading"] = [_bench_grading.throughput(a, size) for a in assignments]
    if "scale" in parts:
        print(f"== scale: {scale_module}, 1 and 2 local workers, 2-worker Dask on loopback")
        report["scale"] = _bench_grading.scale(scale_module, size)
    if "machine" not in report:
        import jax

        report["machine"] = {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                             "python": platform.python_version(), "jax": jax.__version__}
        report["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    path = out / "bench.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")
    return 0
