"""Grading a batch: parallel, sandboxed, scored by trusted code, nothing lost.

``python -m autograder grade A [--workers N] [--scheduler ADDRESS]``

1. **Preflight** (here): every submitted notebook must be readable JSON, a valid
   notebook and under the size limit; otherwise the submission needs attention
   (``malformed``) and the rest of the batch goes on.
2. **Reference** (once per assignment, cached): the instructor's source notebook
   runs in the sandbox, its test cells recording what every check observed and
   expected (``grader.runner.reference_results``); programs are judged
   (``grader.programs``); a check the instructor's own solution fails stops grading.
3. **Run, then judge** (tasks on a concurrent.futures executor: a local process
   pool, or a Dask cluster with ``--scheduler``): one run task per submission rebuilds
   the notebook from the instructor's copy with only the submission's solution
   sources and runs it in a sandbox (``grader.sandbox``) with its test cells
   recording, after the tampering policy (``grader.policy``); one judge task per
   ``c.Grading.judge_batch`` runs (4) judges their exported programs together in the
   program judge's sandbox (``grader.programs``: each such sandbox starts JAX, about as
   long as judging one submission's programs takes) and their records against the
   reference's outside any sandbox (``grader.judge``). Tasks never touch the gradebook.
   A task that fails (a killed worker, a broken pool) is no verdict on its
   submissions: each is graded again alone, in a fresh process (``_Pool``).
4. **Record** (here, in chunks while the batch runs, one nbgrader process at a
   time): ``nbgrader autograde`` with the ``TrustedReplay`` preprocessor in place of
   execution writes the verdicts into the gradebook, so nbgrader keeps the gradebook,
   locked cells, feedback and export (``_Recorder``).

A ledger (``autograded/.grading/A/ledger.json``) records every submission by the
fingerprint of its files: a re-run skips what is done, a killed batch resumes
(judged bundles are kept on disk), and a changed submission is graded again.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import shutil
import time
import uuid
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from grader.config import settings, solution_stub
from grader.ledger import (REASONS, Outcome, _notebook_names, _write_ledger,  # noqa: F401
                           cache_dir, fingerprint, grading_dir, preflight, read_ledger)
from grader.recording import _Recorder, ensure_in_gradebook, submitted_students
from grader.tasks import Job, _reference, grade_task, judge_batch, judge_task, run_task

# ---------------------------------------------------------------- the batch

def _local_pool(workers: int) -> cf.ProcessPoolExecutor:
    import multiprocessing

    # spawn: the grader holds threads (progress bar, executors); forking it is unsafe.
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context("spawn"))


def _executor(workers: int, scheduler: str | None):
    if scheduler:
        from distributed import Client

        client = Client(scheduler, timeout="30s")
        return client.get_executor(pure=False), client
    return _local_pool(workers), None


class _Pool:
    """The batch's executor, and the retries of tasks that failed on it.

    A local process pool whose worker died (SIGKILL, the OOM killer) is broken: it
    fails every task it holds, and every later submit. It is replaced by a fresh one
    for the rest of the batch. A failed task's submissions are graded again one by one
    (:meth:`solo`), each alone in a fresh process: the one that fails again is the one
    that broke it, and its batch-mates are graded as if nothing happened.
    """

    def __init__(self, workers: int, scheduler: str | None):
        self.workers = workers
        self.executor, self.client = _executor(workers, scheduler)
        self.private: dict = {}  # solo future -> its own single-worker pool
        self.broke = False

    def submit(self, fn, *args):
        try:
            return self.executor.submit(fn, *args)
        except BrokenProcessPool:  # only a local pool breaks
            self.broke = True
            self.executor.shutdown(wait=True)  # its workers are terminated already
            self.executor = _local_pool(self.workers)
            return self.executor.submit(fn, *args)

    def solo(self, job: Job, reference: dict):
        """Runs and judges one submission alone: locally in a private process (its
        failure breaks nothing else, so several may run at once); on Dask, on the
        cluster again (a dead Dask worker's tasks go to the others)."""
        if self.client is not None:
            return self.executor.submit(grade_task, job, reference)
        private = _local_pool(1)
        future = private.submit(grade_task, job, reference)
        self.private[future] = private
        return future

    def ended(self, future) -> None:
        """Lets a solo's private pool go with its task."""
        private = self.private.pop(future, None)
        if private is not None:
            self.broke = self.broke or future.exception() is not None
            private.shutdown(wait=True)

    def shutdown(self) -> None:
        from grader import sandbox as _sandbox

        if self.client is None:
            for executor in [self.executor, *self.private.values()]:
                executor.shutdown(wait=True, cancel_futures=True)
            if self.broke:  # the job folders and cgroups of the sandboxes of dead workers
                _sandbox.clean_orphans()
            return
        try:  # distributed's ClientExecutor.shutdown() takes only `wait`
            self.executor.shutdown(wait=True)
        finally:
            self.client.close()


def _job(course: Path, assignment: str, student: str, limits, cfg) -> Job:
    folder = Path(course) / "submitted" / student / assignment
    names = _notebook_names(course, assignment)
    return Job(
        assignment=assignment, student=student,
        sources={n: json.loads((Path(course) / "source" / assignment / n).read_text())
                 for n in names},
        submissions={n: json.loads((folder / n).read_text(encoding="utf-8")) for n in names},
        limits=dataclasses.asdict(limits),
        cache=str(cache_dir(course, assignment)),
        stub=solution_stub(course), max_runs=cfg.max_runs, text_limit=cfg.text_limit,
        seed=cfg.seed)


def _judged_outcome(student: str, result: dict, fp: str) -> Outcome:
    incidents = [i for b in result["bundles"].values() for i in b["incidents"]]
    iso = {b["isolation"] for b in result["bundles"].values()}
    peak = max((b["peak_memory_mb"] or 0 for b in result["bundles"].values()), default=0) or None
    reason, detail, stopped_by = "", "", ""
    if incidents:
        reason, stopped_by = incidents[0]["reason"], incidents[0]["detail"]
        detail = "; ".join(f"{i['reason']} in cell {i['cell']}" for i in incidents)[:500]
    elif result["held"]:
        reason = "held_for_review"
        detail = "; ".join(f"{t}: {m}" for t, m in result["held"].items())[:500]
    seeds = {b.get("seed") for b in result["bundles"].values()}
    return Outcome(student, "attention" if reason else "graded", reason, detail,
                   seconds=result["seconds"], fingerprint=fp, phase="judged",
                   peak_memory_mb=peak, isolation="+".join(sorted(iso)), stopped_by=stopped_by,
                   seed=seeds.pop() if len(seeds) == 1 else None)


def grade_assignment(course: Path, assignment: str, *, workers: int | None = None,
                     scheduler: str | None = None, students: list[str] | None = None,
                     force: bool = False, show: bool = True, limits=None,
                     cfg=None, allow_unsandboxed: bool = False) -> dict[str, Outcome]:
    """Grades every submission of an assignment; returns ``{student: Outcome}``.

    ``cfg`` (a :class:`grader.config.Grading`) defaults to the course's
    nbgrader_config.py; ``limits`` and ``workers`` override it. Raises
    ``grader.sandbox.SandboxUnavailable`` (one line) where there is no sandbox, unless
    ``allow_unsandboxed`` (for notebooks you trust).
    """
    from rich.console import Console
    from rich.progress import Progress

    from grader import sandbox as _sandbox

    course = Path(course).resolve()
    cfg = cfg or settings(course)
    limits = limits or cfg.limits()
    workers = workers or cfg.sandboxes()
    console = Console()
    started = time.monotonic()
    if allow_unsandboxed:
        limits = dataclasses.replace(limits, allow_unsandboxed=True)
    # Stops here, before anything runs, where there is no sandbox and none was waived.
    for line in _sandbox.require(limits, 1 if scheduler else workers):
        if show:
            console.print(line, style="bold red" if line.startswith("WARNING") else "yellow",
                          markup=False, soft_wrap=True)
    level = _sandbox.isolation()
    ensure_in_gradebook(course, assignment)
    _sandbox.clean_orphans()
    shutil.rmtree(grading_dir(course, assignment) / "staged", ignore_errors=True)
    students = students if students is not None else submitted_students(course, assignment)
    ledger = read_ledger(course, assignment)
    outcomes: dict[str, Outcome] = {}
    to_run, to_record, done_before = [], [], 0
    for s in students:
        fp = fingerprint(course, assignment, s, cfg.max_notebook_bytes)
        entry = ledger.get(s)
        if not force and entry and entry.get("fingerprint") == fp:
            known = Outcome(**{k: v for k, v in entry.items() if k in Outcome.__dataclass_fields__})
            # grading_failed is never final (a ledger of an older grader has it "recorded").
            final = entry.get("phase") == "recorded" and entry.get("reason") != "grading_failed"
            if final or entry.get("reason") == "malformed":
                outcomes[s] = known
                done_before += 1
                continue
            bundles = grading_dir(course, assignment) / "bundles" / s
            if entry.get("phase") == "judged" and bundles.is_dir():
                to_record.append(s)
                outcomes[s] = known
                continue
        problem = preflight(course, assignment, s, cfg.max_notebook_bytes)
        if problem:
            outcomes[s] = Outcome(s, "attention", "malformed", problem, fingerprint=fp,
                                  phase="recorded")
            _write_ledger(course, assignment, {s: outcomes[s]})
            continue
        to_run.append((s, fp))
    run_dir = grading_dir(course, assignment) / "staged" / uuid.uuid4().hex[:8]
    with Progress(console=console, disable=not show, transient=False) as progress:
        recording = progress.add_task("recording in the gradebook",
                                      total=len(to_run) + len(to_record), visible=False)

        def recorded(s: str, score) -> None:
            o = outcomes[s]
            if score is not None:
                o.score, o.max_score, o.phase = *score, "recorded"
            else:
                # Not final, and not "judged" either: re-recorded from its bundles, it
                # would keep this status and reason beside the score. Run again.
                o.status, o.reason, o.phase = "attention", "grading_failed", "failed"
                o.detail = "nbgrader could not record this submission's grades"
            _write_ledger(course, assignment, {s: o})
            progress.update(recording, advance=1, visible=True)

        recorder = (_Recorder(course, assignment, run_dir, recorded, chunk=cfg.record_chunk)
                    if to_run or to_record else None)
        try:
            for s in to_record:  # resumed: judged before, recorded from their bundles
                recorder.stage(s)
            if to_run:
                _run_batch(course, assignment, to_run, outcomes, recorder, progress,
                           workers=workers, scheduler=scheduler, limits=limits, cfg=cfg)
            if recorder:
                recorder.finish()
        finally:
            if recorder:
                recorder.close()
            progress.update(recording, total=progress.tasks[recording].completed)
    shutil.rmtree(run_dir, ignore_errors=True)
    if show:
        print_summary(console, assignment, outcomes, time.monotonic() - started, level,
                      resumed=done_before)
    return outcomes


def _capacity(workers: int, client) -> int:
    """Tasks in flight: one more than the executor can run at once, so that no worker
    waits for this loop; the rest wait here, where judge batches can go before them."""
    if client is not None:
        try:
            workers = sum(client.nthreads().values()) or 1
        except Exception:  # noqa: BLE001 - the scheduler is busy or gone: keep the last count
            pass
    return workers + 1


def _run_batch(course: Path, assignment: str, to_run: list[tuple[str, str]],
               outcomes: dict[str, Outcome], recorder: _Recorder, progress, *, workers: int,
               scheduler: str | None, limits, cfg) -> None:
    """Runs the submissions in parallel, judges them in batches, hands each to the
    recorder. Runs are submitted a few at a time (``_capacity``), so that a judge batch
    is not queued behind every run of the class.

    The reference runs first, alone: run beside the first runs (which need it only to
    be judged) it made 03_jit's class of 24 slower on two cores (99 s against 86 s): it
    slowed down, and the runs that started before it had filled the compilation cache
    compiled everything themselves.

    A task that raises is the grader's failure, not its submissions' (theirs end as
    incidents in their results): a killed worker, a broken pool, a bug. Its
    submissions are graded again, each alone (``_Pool.solo``); only one that fails
    alone too is listed as ``grading_failed``, and graded again by the next run.
    """
    reference = _reference(course, assignment, limits, cfg.seed)
    cache = str(cache_dir(course, assignment))
    task = progress.add_task(f"grading {assignment}", total=len(to_run))
    pool = _Pool(workers, scheduler)
    queue = list(to_run)
    fingerprints = dict(to_run)
    running: dict = {}  # future -> ("run" | "judge" | "solo", [student, ...])
    waiting: list[dict] = []  # runs that wait for a judge batch
    retry: list[str] = []  # submissions of failed tasks, to be graded again alone
    first_job = None

    def finished(s: str, outcome: Outcome, result: dict | None = None) -> None:
        outcomes[s] = outcome
        if result is not None:
            recorder.stage(s, result)
        _write_ledger(course, assignment, {s: outcome})
        progress.advance(task)

    def judged(s: str, result: dict) -> None:
        finished(s, _judged_outcome(s, result, fingerprints[s]), result)

    try:
        while queue or running or waiting or retry:
            runs_left = bool(queue) or any(kind == "run" for kind, _ in running.values())
            if waiting and (len(waiting) >= cfg.judge_batch or not runs_left):
                batch, waiting = waiting[:cfg.judge_batch], waiting[cfg.judge_batch:]
                future = pool.submit(judge_task, judge_batch(first_job, batch, reference, cache))
                running[future] = ("judge", [r["student"] for r in batch])
            capacity = _capacity(workers, pool.client)
            solos = sum(kind == "solo" for kind, _ in running.values())
            while retry and len(running) < capacity and solos < workers:
                s = retry.pop(0)
                running[pool.solo(_job(course, assignment, s, limits, cfg), reference)] = (
                    "solo", [s])
                solos += 1
            while queue and len(running) < capacity:
                s, _ = queue.pop(0)
                job = _job(course, assignment, s, limits, cfg)
                first_job = first_job or job
                running[pool.submit(run_task, job)] = ("run", [s])
            done, _ = cf.wait(set(running), timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for future in done:
                kind, students = running.pop(future)
                pool.ended(future)
                try:
                    result = future.result()
                except Exception as err:  # noqa: BLE001 - the grader's failure, not theirs
                    if kind == "solo":
                        finished(students[0], _failed_twice(students[0], err,
                                                            fingerprints[students[0]]))
                    else:
                        retry += students
                    continue
                if kind == "run":
                    waiting.append(result)
                else:
                    for run in [result] if kind == "solo" else result:
                        judged(run["student"], run)
            # Record as soon as a worker is idle (the batch's tail), or a chunk is full.
            recorder.poll(tail=not queue and not retry and len(running) < workers)
    finally:
        pool.shutdown()


def _failed_twice(student: str, err: Exception, fp: str) -> Outcome:
    """A submission whose task failed in a shared worker and again alone in its own.

    Not final (phase "failed", never "recorded"): a grader failure is no verdict on
    the submission, so the next run without --force grades it again.
    """
    return Outcome(student, "attention", "grading_failed",
                   "the grader's worker failed on it twice, alone the second time: "
                   f"{repr(err)[:400]}", fingerprint=fp, phase="failed")


def print_summary(console, assignment: str, outcomes: dict[str, Outcome], seconds: float,
                  isolation: str = "", resumed: int = 0) -> None:
    from rich.table import Table

    table = Table(title=f"{assignment}: {len(outcomes)} submission(s) in {seconds:.1f} s")
    for col in ("student", "score", "status", "reason", "peak MiB"):
        table.add_column(col)
    for s in sorted(outcomes):
        o = outcomes[s]
        score = f"{o.score:g} / {o.max_score:g}" if o.score is not None else "-"
        peak = f"{o.peak_memory_mb:.0f}" if o.peak_memory_mb else "-"
        table.add_row(s, score, o.status, f"{o.reason}: {o.detail}" if o.reason else "", peak)
    console.print(table)
    attention = [o for o in outcomes.values() if o.status != "graded"]
    graded = len(outcomes) - len(attention)
    console.print(f"graded: {graded}   needs attention: {len(attention)}   "
                  f"already done: {resumed}   time: {seconds:.1f} s   isolation: {isolation}")
    for o in sorted(attention, key=lambda o: o.student):
        stopped = f": {o.stopped_by}" if o.stopped_by else ""
        console.print(f"  NEEDS ATTENTION {o.student}: {o.reason} ({REASONS.get(o.reason, '')})"
                      f"{stopped}", markup=False, soft_wrap=True)
