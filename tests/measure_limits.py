"""Measures the limits by hand (a measurement, not a test): the figures in docs/benchmarks.md.

    .venv/bin/python -m tests.measure_limits bombs [--memory 3072] [--levels ...]
    .venv/bin/python -m tests.measure_limits address-space [--totals 2048 3072 5120]

``bombs``: a fast allocator (numpy's ``ones``: every page written at once) in one
block or in 1 GiB blocks, 4, 10 and 30 GiB, at each level: root with cgroup v1,
the watchdog forced as root, and the watchdog as an unprivileged user (the level an
instructor without cgroups gets). For each: how the run ended, the peak memory the
grader reported, the true peak (the cgroup's own counter at cgroup levels; at the
watchdog levels an accounting cgroup without a limit that the sandbox joins), the
time from the bomb cell's start until the sandbox was gone, and the lowest
available memory of the machine meanwhile. Needs root and cgroup v1 (for exact
peaks), like the project's VM.

``address-space``: every source notebook under the watchdog with ``RLIMIT_AS`` at
several totals: does JAX run under an address-space cap of that size?
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ACCOUNTING = Path("/sys/fs/cgroup/memory/jaxcourse-measure")
BOMBS = {
    "4 GiB, 1 GiB blocks": "b = [np.ones(2**27) for _ in range(4)]",
    "10 GiB, one block": "b = np.ones(10 * 2**27)",
    "10 GiB, 1 GiB blocks": "b = [np.ones(2**27) for _ in range(10)]",
    "30 GiB, one block": "b = np.ones(30 * 2**27)",
    "30 GiB, 1 GiB blocks": "b = [np.ones(2**27) for _ in range(30)]",
}


def _notebook(cells: list[str]) -> dict:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return json.loads(nbformat.writes(nb))


def one_bomb(code: str, memory_mb: int, accounting: str | None) -> dict:
    """Runs in its own process (the level is detected there): one bomb, its figures."""
    from grader import sandbox
    from grader.sandbox import run, watchdog

    if accounting:  # the sandbox joins an accounting group that has no limit
        def wrap(self, command, _path=accounting):
            return ["sh", "-c", f'echo $$ > "{_path}/cgroup.procs"; exec "$@"', "x", *command]

        watchdog.Watchdog.wrap = wrap
    events: list[dict] = []
    original = run._progress

    def progress(job, limit):
        events[:] = original(job, limit)
        return events

    run._progress = progress
    dog_stats: dict = {}
    remove = watchdog.Watchdog.remove

    def remove_and_note(self):
        remove(self)
        dog_stats.update(samples=self.samples, ms_per_sample=round(
            1000 * self.sampling_s / max(1, self.samples), 2))

    watchdog.Watchdog.remove = remove_and_note
    ended: list[float] = []

    class Popen(subprocess.Popen):
        """Notes when the sandbox (the last process started) is first seen gone."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            ended.clear()

        def wait(self, timeout=None):
            code = super().wait(timeout)
            if not ended:
                ended.append(time.time())
            return code

    run.subprocess.Popen = Popen
    floor = [watchdog.host_available_mb()[0]]
    done = threading.Event()

    def sample():
        while not done.wait(0.01):
            floor[0] = min(floor[0], watchdog.host_available_mb()[0])

    threading.Thread(target=sample, daemon=True).start()
    limits = sandbox.Limits(cell_timeout=120, notebook_timeout=300, memory_mb=memory_mb)
    start_available = floor[0]
    result = sandbox.run_notebook(_notebook(["import numpy as np", code]), limits=limits)
    done.set()
    starts = [e["t"] for e in events if e.get("event") == "start" and e.get("cell") == 1]
    return {"level": result.isolation, "failure": result.failure, "detail": result.detail,
            "reported_peak_mb": result.peak_memory_mb,
            "seconds_to_stop": round(ended[0] - starts[0], 2) if starts and ended else None,
            "available_mb": round(start_available), "lowest_available_mb": round(floor[0]),
            "floor_mb": round(watchdog.host_floor_mb()), **dog_stats}


def _accounting_group() -> Path:
    ACCOUNTING.mkdir(exist_ok=True)
    for name in ("cgroup.procs", "tasks"):  # an unprivileged sandbox joins it itself
        os.chmod(ACCOUNTING / name, 0o666)
    (ACCOUNTING / "memory.max_usage_in_bytes").write_text("0")
    return ACCOUNTING


def bombs(levels: list[str], memory_mb: int, names: list[str]) -> list[dict]:
    from tests import unprivileged

    rows = []
    for level in levels:
        for name in names:
            accounting = str(_accounting_group()) if "watchdog" in level else None
            cmd = [sys.executable, "-m", "tests.measure_limits", "_one", BOMBS[name],
                   str(memory_mb), accounting or ""]
            env = {**os.environ, "PYTHONPATH": str(REPO),
                   "JAXCOURSE_LIMITS": "watchdog" if "watchdog" in level else level}
            base = None
            if level == "unprivileged-watchdog":
                uid = unprivileged.spare_uid()
                base = unprivileged.scratch_base()
                (base / "stage").mkdir()
                env.update(HOME=str(base), USER="grader")
                cmd = unprivileged.command(cmd, uid, base / "stage")
            proc = subprocess.run(cmd, cwd=REPO if base is None else base, env=env,
                                  capture_output=True, text=True, timeout=900)
            if base is not None:
                import shutil

                shutil.rmtree(base, ignore_errors=True)
            try:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                row = {"error": (proc.stdout + proc.stderr)[-800:]}
            if accounting:
                row["true_peak_mb"] = round(
                    int((ACCOUNTING / "memory.max_usage_in_bytes").read_text()) / 2**20)
            row.update(case=name, asked=level, memory_mb=memory_mb)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if ACCOUNTING.exists():
        ACCOUNTING.rmdir()
    return rows


def address_space(totals: list[int], notebooks: list[str]) -> list[dict]:
    """Each source notebook under the watchdog with RLIMIT_AS = ``total`` MiB."""
    import nbformat

    from grader import sandbox
    from grader.sandbox import watchdog

    os.environ["JAXCOURSE_LIMITS"] = "watchdog"
    rows = []
    for total in totals:
        memory = 1024
        watchdog.AS_MARGIN_MB = total - memory
        limits = sandbox.Limits(cell_timeout=300, notebook_timeout=900, memory_mb=memory)
        for name in notebooks:
            nb = nbformat.read(str(REPO / "source" / name / f"{name}.ipynb"), as_version=4)
            result = sandbox.run_notebook(json.loads(nbformat.writes(nb)), limits=limits)
            errors = [o.get("ename") for c in (result.notebook or {}).get("cells", [])
                      for o in c.get("outputs", []) if o.get("output_type") == "error"]
            row = {"address_space_mb": total, "notebook": name, "failure": result.failure,
                   "detail": result.detail, "errors": errors,
                   "seconds": round(result.seconds, 1), "peak_mb": result.peak_memory_mb}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> int:
    if sys.argv[1:2] == ["_one"]:
        print(json.dumps(one_bomb(sys.argv[2], int(sys.argv[3]), sys.argv[4] or None)))
        return 0
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bombs")
    b.add_argument("--memory", type=int, default=3072)
    b.add_argument("--levels", nargs="+",
                   default=["cgroup-v1", "watchdog", "unprivileged-watchdog"])
    b.add_argument("--cases", nargs="+", default=list(BOMBS), choices=list(BOMBS))
    a = sub.add_parser("address-space")
    a.add_argument("--totals", nargs="+", type=int, default=[2048, 3072, 5120])
    a.add_argument("--notebooks", nargs="+",
                   default=sorted(p.name for p in (REPO / "source").glob("[0-9][0-9]_*")))
    args = parser.parse_args()
    if args.what == "bombs":
        bombs(args.levels, args.memory, args.cases)
    else:
        address_space(args.totals, args.notebooks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
