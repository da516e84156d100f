"""``make bench``, grading half: plain serial nbgrader against the pipeline, side by side.

For each module, one class of ``size`` submissions (a quarter each: full marks,
partial, blank, broken) is graded twice on this machine, in one run:

- **plain**: ``nbgrader autograde A`` in a scratch course, one process, serially,
  each notebook in a fresh kernel (nbgrader's own Execute);
- **pipeline**: ``python -m autograder grade A`` semantics (``grade_assignment``)
  with the sandbox on, in another scratch course, reference run included.

Reported: wall time of each and their ratio, per-submission latency (plain: the
gaps between nbgrader's successive autograded notebooks; pipeline: each task's
time), peak memory (plain: the largest process nbgrader started, from rusage;
pipeline: the largest sandbox's cgroup peak), and whether the honest submissions'
scores are equal. Scale: the same class with 1 and 2 local workers and on a
2-worker Dask cluster on loopback, and the arithmetic for a class of 1,000. Growth:
the pipeline alone on classes of 24, 48 and 96 submissions of one module, and whether
its time grows linearly with the class (:func:`linearity`).
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.course import generate_release, make_scratch_course
from grader.tools.submission import build_submission, read_notebook, solution_ids, write_notebook

BROKEN = ["truncated", "crash", "syntax"]


def build_class(course: Path, assignment: str, size: int) -> dict[str, str]:
    """Writes ``size`` submissions; returns ``{student: kind}``."""
    kinds = {}
    for nb_path in sorted((course / "release" / assignment).glob("*.ipynb")):
        release = read_notebook(nb_path)
        source = read_notebook(course / "source" / assignment / nb_path.name)
        ids = solution_ids(release)
        full = build_submission(release, source_nb=source)
        solved = {c.metadata["nbgrader"]["grade_id"]: c.source for c in full.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") in ids}
        for i in range(size):
            kind = ("full", "partial", "blank", "broken")[i % 4]
            student = f"s{i:03d}"
            out = course / "submitted" / student / assignment / nb_path.name
            if kind == "full":
                nb = full
            elif kind == "partial":
                keep = {g: solved[g] for g in ids[i % 2::2]}
                nb = build_submission(release, replacements=keep)
            elif kind == "blank":
                nb = release
            else:
                broken = BROKEN[(i // 4) % len(BROKEN)]
                kind = f"broken:{broken}"
                code = {"crash": "import os\nos._exit(1)\n",
                        "syntax": "def (:\n"}.get(broken, "")
                nb = build_submission(release, replacements={**solved, ids[0]: code} if code
                                      else solved)
            write_notebook(nb, out)
            if kind == "broken:truncated":
                text = out.read_text()
                out.write_text(text[: len(text) // 2])
            kinds[student] = kind
    return kinds


def _scores(course: Path, assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook, MissingEntry

    from grader.course import nbgrader_db_url

    out = {}
    with Gradebook(nbgrader_db_url(course)) as gb:
        for student in gb.students:
            try:
                out[student.id] = float(gb.find_submission(assignment, student.id).score)
            except MissingEntry:
                pass
    return out


def _course(tmp: Path, name: str, assignment: str, size: int) -> tuple[Path, dict]:
    course = make_scratch_course(tmp / name, [assignment])
    generate_release(course, assignment)
    return course, build_class(course, assignment, size)


def plain(tmp: Path, assignment: str, size: int) -> dict:
    """Plain serial ``nbgrader autograde`` in a child process (for its rusage)."""
    course, kinds = _course(tmp, "plain", assignment, size)
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "p = subprocess.run([sys.executable, '-m', 'nbgrader', 'autograde', sys.argv[1]], "
            "capture_output=True, text=True); "
            "print(time.perf_counter() - t, p.returncode, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    from grader.course import nbgrader_env

    out = subprocess.run([sys.executable, "-c", code, assignment], cwd=course,
                         env=nbgrader_env(), capture_output=True, text=True, check=True)
    wall, rc, maxrss_kb = out.stdout.split()
    stamps = sorted(p.stat().st_mtime for p in (course / "autograded").glob(f"*/{assignment}/*.ipynb"))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"wall_s": float(wall), "exit_code": int(rc), "peak_rss_mb": int(maxrss_kb) / 1024,
            "latency_s": _stats(gaps), "scores": _scores(course, assignment), "kinds": kinds,
            "graded": len(stamps)}


def pipeline(tmp: Path, assignment: str, size: int, *, workers: int | None,
             name: str = "pipeline", scheduler: str | None = None) -> dict:
    from grader.config import settings
    from grader.pipeline import grade_assignment

    course, kinds = _course(tmp, name, assignment, size)
    workers = workers or settings(course).sandboxes()
    start = time.perf_counter()
    outcomes = grade_assignment(course, assignment, workers=workers, scheduler=scheduler,
                                show=False)
    wall = time.perf_counter() - start
    peaks = [o.peak_memory_mb for o in outcomes.values() if o.peak_memory_mb]
    return {"wall_s": wall, "workers": workers, "scheduler": bool(scheduler),
            "phases_s": phases(course, assignment),
            "latency_s": _stats([o.seconds for o in outcomes.values() if o.reason != "malformed"]),
            "peak_sandbox_mb": max(peaks) if peaks else None,
            "grader_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "scores": {s: o.score for s, o in outcomes.items() if o.score is not None},
            "attention": {s: o.reason for s, o in outcomes.items() if o.status != "graded"},
            "isolation": sorted({o.isolation for o in outcomes.values() if o.isolation})}


PHASES = ("start", "setup", "lessons", "solutions", "checks", "end", "reruns", "judge")


def phases(course: Path, assignment: str) -> dict[str, float]:
    """Where a graded submission's time went, the mean over the class's judged bundles
    (``grader.runner.time_phases``, plus its share of the judge): sandbox and kernel
    start, the setup cell (imports), lessons, the student's cells, the checks (JAX's
    compilations happen inside these cells), writing out, runs again after a crash or a
    hang, and judging the programs outside."""
    import json

    from grader.ledger import grading_dir

    rows = []
    for path in sorted((grading_dir(course, assignment) / "bundles").glob("*/*.json")):
        try:
            found = json.loads(path.read_text()).get("phases")
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            rows.append(found)
    return {k: round(statistics.fmean(float(r.get(k, 0.0)) for r in rows), 2)
            for k in PHASES} if rows else {}


def _stats(values: list[float]) -> dict:
    if not values:
        return {}
    values = sorted(values)
    return {"n": len(values), "median": round(statistics.median(values), 2),
            "p90": round(values[min(len(values) - 1, int(0.9 * len(values)))], 2),
            "max": round(values[-1], 2)}


def throughput(assignment: str, size: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        base = plain(Path(tmp), assignment, size)
        fast = pipeline(Path(tmp), assignment, size, workers=None)  # the grader's default
    honest = [s for s, k in base["kinds"].items() if not k.startswith("broken")]
    mismatches = {s: (base["scores"].get(s), fast["scores"].get(s)) for s in honest
                  if base["scores"].get(s) != fast["scores"].get(s)}
    row = {"assignment": assignment, "submissions": size, "plain": base, "pipeline": fast,
           "speedup": round(base["wall_s"] / fast["wall_s"], 2),
           "honest_submissions": len(honest), "honest_score_mismatches": mismatches}
    print(f"{assignment:16s} plain {base['wall_s']:7.1f} s   pipeline {fast['wall_s']:7.1f} s   "
          f"ratio {row['speedup']:.2f}x   latency median plain {base['latency_s'].get('median')} s"
          f" / pipeline {fast['latency_s'].get('median')} s   peak MB plain "
          f"{base['peak_rss_mb']:.0f} / sandbox {fast['peak_sandbox_mb'] or 0:.0f}   "
          f"honest mismatches {len(mismatches)}")
    if fast["phases_s"]:
        print(f"{'':16s} where a submission's time goes (mean s): " + ", ".join(
            f"{k} {v:.2f}" for k, v in fast["phases_s"].items()))
    return row


def _dask_cluster(tmp: Path, workers: int):
    """A real scheduler and ``workers`` single-threaded workers on 127.0.0.1."""
    from grader.course import nbgrader_env

    env = nbgrader_env()
    bindir = Path(sys.executable).parent
    sched_file = tmp / "scheduler.json"
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    for _ in range(300):
        if sched_file.exists() and sched_file.stat().st_size:
            break
        time.sleep(0.1)
    for _ in range(workers):
        procs.append(subprocess.Popen([str(bindir / "dask"), "worker", "--nworkers", "1",
                                       "--nthreads", "1", "--host", "127.0.0.1",
                                       "--no-dashboard", "--scheduler-file", str(sched_file)],
                                      env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    import json

    from distributed import Client

    address = json.loads(sched_file.read_text())["address"]
    with Client(address, timeout="60s") as client:
        client.wait_for_workers(workers, timeout=120)
    return address, procs


def scale(assignment: str, size: int) -> dict:
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        tmp = Path(tmp)
        for workers in (1, 2):
            rows[f"local_{workers}"] = pipeline(tmp, assignment, size, workers=workers,
                                                name=f"local{workers}")
        address, procs = _dask_cluster(tmp, 2)
        try:
            rows["dask_2"] = pipeline(tmp, assignment, size, workers=2, name="dask2",
                                      scheduler=address)
        finally:
            for p in procs:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
    one, two = rows["local_1"]["wall_s"], rows["local_2"]["wall_s"]
    per_sub = one / size
    efficiency = (one / two) / 2
    arithmetic = {
        "seconds_per_submission_one_worker": round(per_sub, 2),
        "parallel_efficiency_2_workers": round(efficiency, 2),
        "formula": "T(1000, N machines x C cores) ~ 1000 * s_per_sub / (N * C * efficiency)",
        "examples_min": {f"{n}x{c}": round(1000 * per_sub / (n * c * efficiency) / 60, 1)
                         for n, c in ((1, 2), (1, 16), (4, 16), (16, 16))},
    }
    for key, r in rows.items():
        print(f"{assignment:16s} {key:8s} {r['wall_s']:7.1f} s for {size} submissions")
    print(f"class of 1,000: {per_sub:.1f} s per submission on one worker, efficiency "
          f"{efficiency:.2f} at 2 workers: " + ", ".join(
              f"{k} machines x cores -> {v} min" for k, v in arithmetic["examples_min"].items()))
    return {"assignment": assignment, "submissions": size, "runs": rows,
            "class_of_1000": arithmetic}


def linearity(walls: dict[int, float], tolerance: float = 0.25) -> dict:
    """Whether grading time grows linearly with the class: a straight line
    ``T(n) = fixed + per_submission * n`` fitted to ``{class size: wall seconds}``
    (least squares), the marginal cost of each step between successive sizes, and
    ``linear``: every marginal cost within ``tolerance`` of the fitted slope (a cost per
    submission that grows with the class, from a cache or a queue that fills, breaks it).

    >>> linearity({24: 70.0, 48: 130.0, 96: 250.0})["linear"]
    True
    >>> r = linearity({24: 70.0, 48: 130.0, 96: 400.0})
    >>> r["linear"], r["marginal_s"]
    (False, [2.5, 5.625])
    """
    sizes = sorted(walls)
    mean_n = statistics.fmean(sizes)
    mean_t = statistics.fmean(walls[n] for n in sizes)
    slope = (sum((n - mean_n) * (walls[n] - mean_t) for n in sizes)
             / sum((n - mean_n) ** 2 for n in sizes))
    marginal = [(walls[b] - walls[a]) / (b - a) for a, b in zip(sizes, sizes[1:])]
    return {"sizes": sizes, "wall_s": [round(walls[n], 1) for n in sizes],
            "per_submission_s": round(slope, 3), "fixed_s": round(mean_t - slope * mean_n, 1),
            "marginal_s": [round(m, 3) for m in marginal],
            "linear": slope > 0 and all(abs(m - slope) <= tolerance * slope for m in marginal)}


def growth(assignment: str, sizes: tuple[int, ...] = (24, 48, 96)) -> dict:
    """The pipeline (the grader's defaults, sandbox on, reference run included) on
    classes of each size, each in a scratch course of its own, and :func:`linearity`."""
    walls, runs = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        for size in sizes:
            run = pipeline(Path(tmp), assignment, size, workers=None, name=f"class{size}")
            walls[size] = run["wall_s"]
            runs[size] = {k: run[k] for k in ("wall_s", "workers", "latency_s", "phases_s",
                                              "attention")}
            print(f"{assignment:16s} {size:4d} submissions {run['wall_s']:7.1f} s "
                  f"({run['wall_s'] / size:.2f} s each)")
    fit = linearity(walls)
    print(f"{assignment:16s} T(n) = {fit['fixed_s']} s + {fit['per_submission_s']} s * n; "
          f"marginal s per submission {fit['marginal_s']}: "
          f"{'linear' if fit['linear'] else 'NOT linear'}")
    return {"assignment": assignment, "runs": runs, **fit}
