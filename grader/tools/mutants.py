"""``python -m autograder mutants ASSIGNMENT [--exercise GRADE_ID]``: how strong the checks are.

Mutants of each exercise's solution (``grader.mutation``) are graded through the
trusted checks, in parallel sandboxes (``grader.candidates``), and a table says per
exercise how many were killed (their exercise failed) and which survived, with the
surviving code. A survivor is a hole in the checks, unless it is equivalent: then
its test cell says so (``# equivalent mutant <id>: <reason>``) and it is left out of
the score. The instructor's tool for new exercises; ``make test`` runs it on every
module and fails below the threshold.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import difflib
import json
import os
import sys
from pathlib import Path

THRESHOLD = 0.9


@dataclasses.dataclass
class Row:
    exercise: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list = dataclasses.field(default_factory=list)  # (id, description, diff)
    kernel_disagrees: list = dataclasses.field(default_factory=list)

    @property
    def score(self) -> float | None:
        """Killed / mutants not declared equivalent; None (no score, never 100 %) when
        there are none: nothing shows that the checks would catch a mistake."""
        counted = self.mutants - self.equivalent
        return None if counted <= 0 else self.killed / counted

    @property
    def weak(self) -> bool:
        return self.score is None or self.score < THRESHOLD


def _diff(a: str, b: str) -> str:
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
    return "\n".join(line for line in list(lines)[2:] if not line.startswith("@@"))


def _chunks(items: dict[str, list], parts: int) -> list[dict[str, list]]:
    """Splits ``{exercise: [mutants]}`` into ``parts`` groups of similar size."""
    groups: list[dict[str, list]] = [{} for _ in range(max(1, parts))]
    sizes = [0] * len(groups)
    for gid, ms in sorted(items.items(), key=lambda kv: -len(kv[1])):
        i = sizes.index(min(sizes))
        groups[i][gid] = ms
        sizes[i] += len(ms)
    return [g for g in groups if g]


def _grade_group(args) -> dict:
    source_nb, group, reference_hex, limits_dict, cache = args
    from grader import candidates, sandbox
    from grader.tasks import _decoded_reference
    from grader import notebook as _nb

    reference, derived = _decoded_reference(reference_hex, _nb.test_ids(source_nb))
    results = candidates.grade(source_nb, group, reference, derived,
                               sandbox.Limits(**limits_dict),
                               cache=Path(cache) if cache else None,
                               kernel_too={g: set() for g in group})
    return {f"{g}#{k}": dataclasses.asdict(r) for (g, k), r in results.items()}


def run(course: Path, assignment: str, *, exercise: str | None = None, limit: int = 12,
        workers: int | None = None, show=print) -> list[Row]:
    """Grades the mutants of an assignment's exercises; returns one row per exercise."""
    import multiprocessing

    from grader import config, mutation
    from grader import notebook as _nb
    from grader.ledger import _notebook_names, cache_dir
    from grader.tasks import _reference

    cfg = config.settings(course)
    # The instructor's own solution and its mutants: trusted, so they run wherever
    # grading could (sandboxed where bubblewrap works).
    limits = dataclasses.replace(cfg.limits(), allow_unsandboxed=True)
    rows = []
    for name in _notebook_names(course, assignment):
        source = json.loads((Path(course) / "source" / assignment / name).read_text())
        reference = _reference(course, assignment, limits)[name]
        tests = _nb.test_sources(source)
        chosen: dict[str, list] = {}
        for gid, src in mutation.iter_solution_cells(source):
            if exercise and gid != exercise:
                continue
            chosen[gid] = mutation.mutants(src, limit=limit, seed=gid)
        groups = _chunks(chosen, workers or cfg.workers or os.cpu_count() or 1)
        jobs = [(source, {g: [m.source for m in ms] for g, ms in group.items()}, reference,
                 dataclasses.asdict(limits), str(cache_dir(course, assignment)))
                for group in groups]
        results: dict = {}
        with cf.ProcessPoolExecutor(max_workers=len(jobs) or 1,
                                    mp_context=multiprocessing.get_context("spawn")) as pool:
            for part in pool.map(_grade_group, jobs):
                results.update(part)
        solutions = dict(mutation.iter_solution_cells(source))
        for gid, ms in chosen.items():
            equivalent = mutation.equivalent_ids(tests.get(f"test_{gid}", ""))
            row = Row(gid, mutants=len(ms))
            original = mutation.strip_markers(solutions[gid])
            for k, m in enumerate(ms):
                res = results.get(f"{gid}#{k}")
                if m.id in equivalent:
                    row.equivalent += 1
                    continue
                killed = res is not None and not res["trusted"]["passed"]
                if killed:
                    row.killed += 1
                else:
                    row.survivors.append((m.id, m.description, _diff(original, m.source)))
            rows.append(row)
    print_table(assignment, rows, show)
    return rows


def print_table(assignment: str, rows: list[Row], show=print) -> None:
    show(f"{assignment}: mutation score per exercise (threshold {THRESHOLD:.0%})")
    show(f"  {'exercise':<40} {'mutants':>7} {'equiv.':>6} {'killed':>6} {'survived':>8} {'score':>6}")
    for r in rows:
        show(f"  {r.exercise:<40} {r.mutants:>7} {r.equivalent:>6} {r.killed:>6} "
             f"{len(r.survivors):>8} {'none' if r.score is None else f'{r.score:.0%}':>6}")
    for r in rows:
        for mid, what, diff in r.survivors:
            show(f"\n  SURVIVED {r.exercise} {mid} ({what}):")
            show("    " + diff.replace("\n", "\n    "))
        if r.kernel_disagrees:
            show(f"\n  KERNEL AND GRADER DISAGREE on {r.exercise}: {', '.join(r.kernel_disagrees)}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder mutants")
    parser.add_argument("assignment")
    parser.add_argument("--exercise", default=None, help="one solution grade_id")
    parser.add_argument("--limit", type=int, default=12, help="mutants per exercise")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    rows = run(Path.cwd(), args.assignment, exercise=args.exercise, limit=args.limit,
               workers=args.workers)
    return 1 if any(r.weak for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
