"""``python -m autograder run-notebooks [MODULE...] [--out DIR]``: every source notebook,
top to bottom, on the machine this runs on, and a table of what failed.

Each module runs in a process of its own (one program at a time may hold a TPU), in a
scratch copy of its folder: the instructor's notebook, solutions and hidden tests
included, cell by cell in an IPython shell (magics work; plots go to a file-less
backend). A cell that raises is recorded and the run goes on, so one failure does not
hide the next; a cell past ``--cell-timeout`` is stopped. The table says, per module,
the backend, the cells run, those that failed and the time, then each failure with its
cell, its kind (lesson, solution or test, with its grade_id) and the error's first
line; the JSON keeps each error's whole message and its last frames. It is written as ``notebook_runs.md`` and ``notebook_runs.json`` in ``--out``.

It needs no Jupyter server, so it runs where only JAX and IPython are installed: on an
accelerator machine, with the course's packages on ``PYTHONPATH`` (see docs/course.md,
"The course on a GPU or TPU"). Grading stays on the instructor's CPU; this script
shows what a student who works on an accelerator meets.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class CellTimeout(Exception):
    """A cell ran past the time the run gives each cell."""


def _kind(cell: dict) -> tuple[str, str]:
    from grader import notebook

    if notebook.is_test(cell):
        return "test", notebook.meta(cell).get("grade_id", "")
    if notebook.is_solution(cell):
        return "solution", notebook.meta(cell).get("grade_id", "")
    return "lesson", ""


def run_one(notebook: Path, cell_timeout: float) -> dict:
    """Runs one notebook's code cells in this process; returns its record."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cells = json.loads(notebook.read_text())["cells"]

    def stop(signum, frame):
        raise CellTimeout(f"the cell ran past {cell_timeout:g} s")

    signal.signal(signal.SIGALRM, stop)
    record = {"notebook": notebook.name, "cells": 0, "failed": [], "seconds": 0.0}
    start = time.perf_counter()
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source") or [])
        if not source.strip():
            continue
        kind, grade_id = _kind(cell)
        record["cells"] += 1
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, cell_timeout)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                result = shell.run_cell(source, store_history=True)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            first = (str(error).strip().splitlines() or [""])[0]
            frames = traceback.extract_tb(error.__traceback__)[-3:]
            record["failed"].append({"cell": index, "kind": kind, "grade_id": grade_id,
                                     "error": f"{type(error).__name__}: {first}"[:300],
                                     # the whole message: a check's got/cause/fix lines
                                     "message": str(error).strip()[:3000],
                                     "where": [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} "
                                               f"{(f.line or '')[:120]}" for f in frames],
                                     "seconds": round(time.perf_counter() - t0, 2)})
    record["seconds"] = round(time.perf_counter() - start, 2)
    try:
        import jax

        record.update(backend=jax.default_backend(), devices=len(jax.devices()),
                      jax=jax.__version__, python=sys.version.split()[0])
    except Exception as err:  # noqa: BLE001 - a record without JAX still says why
        record.update(backend=f"unknown ({type(err).__name__})")
    return record


def _run_module(module: str, source: Path, cell_timeout: float, timeout: float) -> dict:
    notebooks = sorted((source / module).glob("*.ipynb"))
    if len(notebooks) != 1:
        return {"module": module, "error": f"expected one notebook, found {len(notebooks)}"}
    with tempfile.TemporaryDirectory(prefix=f"run-{module}-") as scratch:
        work = Path(scratch) / module
        shutil.copytree(source / module, work)
        out = Path(scratch) / "record.json"
        env = dict(os.environ, MPLBACKEND="Agg",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        command = [sys.executable, "-m", "grader.tools.run_notebooks", "--one",
                   str(work / notebooks[0].name), "--record", str(out),
                   "--cell-timeout", str(cell_timeout)]
        try:
            proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"module": module, "error": f"the notebook ran past {timeout:g} s"}
        if not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return {"module": module, "error": f"the run ended with code {proc.returncode}: "
                                               + " | ".join(tail)[:500]}
        return {"module": module, **json.loads(out.read_text())}


def table(records: list[dict]) -> str:
    """The Markdown table of a run (pure)."""
    lines = ["| module | backend | cells | failed | seconds |", "|---|---|---:|---:|---:|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['module']} | - | - | - | {r['error']} |")
            continue
        lines.append(f"| {r['module']} | {r.get('backend', '?')} ({r.get('devices', '?')}) | "
                     f"{r['cells']} | {len(r['failed'])} | {r['seconds']:.1f} |")
    versions = {(r.get("jax"), r.get("python")) for r in records if r.get("jax")}
    for jax_version, python in sorted(versions, key=str):
        lines.append(f"\njax {jax_version}, Python {python}")
    failures = [(r["module"], f) for r in records for f in r.get("failed", [])]
    if failures:
        lines += ["", "| module | cell | kind | error |", "|---|---:|---|---|"]
        for module, f in failures:
            what = f["kind"] + (f" `{f['grade_id']}`" if f["grade_id"] else "")
            error = f["error"].replace("|", "\\|")
            lines.append(f"| {module} | {f['cell']} | {what} | {error} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder run-notebooks")
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--source", default=str(REPO / "source"))
    parser.add_argument("--out", default="artifacts/notebook_runs")
    parser.add_argument("--cell-timeout", type=float, default=300.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per notebook")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--record", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # the child: one notebook, in this process
        record = run_one(Path(args.one), args.cell_timeout)
        Path(args.record).write_text(json.dumps(record, indent=1))
        return 0
    source = Path(args.source)
    modules = args.modules or sorted(p.name for p in source.glob("[0-9][0-9]_*") if p.is_dir())
    records = []
    for module in modules:
        record = _run_module(module, source, args.cell_timeout, args.timeout)
        records.append(record)
        failed = record.get("error") or f"{len(record['failed'])} of {record['cells']} cells failed"
        print(f"{module}: {failed}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "notebook_runs.json").write_text(json.dumps(records, indent=1))
    (out / "notebook_runs.md").write_text(table(records))
    print(table(records))
    return 1 if any(r.get("error") or r.get("failed") for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
