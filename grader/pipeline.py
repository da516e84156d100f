"""Grading a batch: parallel, sandboxed, scored by trusted code, nothing lost.

``python -m autograder grade A [--workers N] [--scheduler ADDRESS]``

1. **Preflight** (here): every submitted notebook must be readable JSON, a valid
   notebook and under the size limit; otherwise the submission needs attention
   (``malformed``) and the rest of the batch goes on.
2. **Reference** (once per assignment, cached): the instructor's source notebook
   runs in the sandbox, its test cells recording what every check observed and
   expected (``grader.runner.reference_results``); programs are judged
   (``grader.programs``); a check the instructor's own solution fails stops grading.
3. **Run and judge** (one task per submission, on a concurrent.futures executor: a
   local process pool, or a Dask cluster with ``--scheduler``): the notebook is
   rebuilt from the instructor's copy with only the submission's solution sources,
   runs in a sandbox (``grader.sandbox``) with its test cells recording, and the
   records are judged against the reference's outside the sandbox (``grader.judge``),
   after the tampering policy (``grader.policy``). Tasks never touch the gradebook.
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
import os
import shutil
import time
import uuid
from pathlib import Path

from grader.config import settings, solution_stub
from grader.course import run_nbgrader

REASONS = {
    "malformed": "a notebook is missing, unreadable, not a notebook or too large",
    "timeout": "a cell ran past the time limit and was stopped",
    "notebook_timeout": "the whole notebook ran past its time limit",
    "out_of_memory": "the notebook used more memory than allowed",
    "kernel_died": "the kernel crashed (os._exit, a segfault, a killed process)",
    "output_flood": "a cell printed far more output than allowed",
    "held_for_review": "a solution reaches around the language: its exercise waits for a person",
    "grading_failed": "the grader itself failed on this submission (a bug: report it)",
}


@dataclasses.dataclass
class Outcome:
    student: str
    status: str  # "graded" or "attention"
    reason: str = ""
    detail: str = ""
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0
    fingerprint: str = ""
    phase: str = ""  # "judged" (bundle on disk) or "recorded" (in the gradebook)
    peak_memory_mb: float | None = None
    isolation: str = ""
    seed: int | None = None  # the grader's seed of drawn inputs (c.Grading.seed)
    stopped_by: str = ""  # the limit that stopped a run, with its numbers (grader.sandbox.Stop)


# ---------------------------------------------------------------- ledger

def grading_dir(course: Path, assignment: str) -> Path:
    return Path(course) / "autograded" / ".grading" / assignment


def cache_dir(course: Path, assignment: str) -> Path:
    """JAX's persistent compilation cache: written by the reference run only."""
    return grading_dir(course, assignment) / "jaxcache"


def ledger_path(course: Path, assignment: str) -> Path:
    return grading_dir(course, assignment) / "ledger.json"


def read_ledger(course: Path, assignment: str) -> dict[str, dict]:
    path = ledger_path(course, assignment)
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:
        return {}


def _write_ledger(course: Path, assignment: str, outcomes: dict[str, Outcome]) -> None:
    path = ledger_path(course, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = read_ledger(course, assignment)
    data.update({s: dataclasses.asdict(o) for s, o in outcomes.items()})
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


# ---------------------------------------------------------------- preflight

def _notebook_names(course: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (Path(course) / "source" / assignment).glob("*.ipynb"))


def preflight(course: Path, assignment: str, student: str,
              max_bytes: int = 20_000_000) -> str | None:
    """Returns why a submission cannot be graded, or None when it can."""
    import nbformat

    folder = Path(course) / "submitted" / student / assignment
    for name in _notebook_names(course, assignment):
        path = folder / name
        if path.is_symlink() or not path.is_file():
            return f"{name} is missing from the submission"
        size = path.stat().st_size
        if size > max_bytes:
            return (f"{name} is {size / 1e6:.0f} MB, over the limit of "
                    f"{max_bytes / 1e6:.0f} MB (clear the outputs and submit again)")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            return f"{name} cannot be read: {err}"
        try:
            json.loads(text)
        except json.JSONDecodeError as err:
            return (f"{name} is not valid JSON ({err.msg} at line {err.lineno}, "
                    f"column {err.colno}): a truncated or corrupted upload")
        try:
            nb = nbformat.reads(text, as_version=4)
            nbformat.validate(nb)
        except Exception as err:  # noqa: BLE001 - any schema problem means malformed
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            return f"{name} is not a valid notebook: {first[:200]}"
    return None


def fingerprint(course: Path, assignment: str, student: str,
                max_bytes: int = 20_000_000) -> str:
    """A digest of the submission's notebooks and timestamp: what grading depends on."""
    from grader.runner import digest

    folder = Path(course) / "submitted" / student / assignment
    parts: list[bytes | str] = []
    for name in _notebook_names(course, assignment) + ["timestamp.txt"]:
        path = folder / name
        parts.append(name)
        try:
            parts.append(path.read_bytes() if path.stat().st_size <= max_bytes
                         else f"size:{path.stat().st_size}")
        except OSError:
            parts.append("missing")
    return digest(*parts)


# ---------------------------------------------------------------- tasks

@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a worker needs, as plain data (it may run on another machine)."""

    assignment: str
    student: str
    sources: dict  # notebook name -> source notebook JSON
    submissions: dict  # notebook name -> submitted notebook JSON
    reference: dict  # notebook name -> {"files": {result file: hex}, "derived": hex}
    limits: dict
    cache: str | None = None  # JAX compilation cache the reference run filled
    stub: str = ""  # what replaces a missing solution (ClearSolutions.code_stub)
    max_runs: int = 5
    text_limit: int = 100_000
    seed: int | None = None  # c.Grading.seed: the inputs hidden checks draw


def _decoded_reference(ref: dict, tests: list[str]):
    from grader import runner as _runner

    cells = _runner.decode_all(ref["files"], tests)
    derived = _derived_from_hex(ref.get("derived"))
    return cells, derived


def _derived_to_hex(derived: dict) -> str:
    from autograder import _wire

    records = tuple(_wire.Record("derived", k, {}, v) for k, v in derived.items())
    raw_json, raw_npz = _wire.dumps(_wire.CellResult("derived", records))
    return json.dumps({"json": raw_json.hex(), "npz": raw_npz.hex()})


def _derived_from_hex(text: str | None) -> dict:
    from autograder import _wire

    if not text:
        return {}
    doc = json.loads(text)
    cell = _wire.loads(bytes.fromhex(doc["json"]), bytes.fromhex(doc["npz"]))
    return {rec.label: rec.observed for rec in cell.records}


def grade_task(job: Job) -> dict:
    """Runs one submission in the sandbox and judges it. Never touches the gradebook."""
    from grader import notebook as _nb
    from grader import policy as _policy
    from grader import programs as _programs
    from grader import runner as _runner
    from grader import sandbox as _sandbox

    start = time.monotonic()
    limits = _sandbox.Limits(**job.limits)
    bundles, held_all = {}, {}
    for name, source in job.sources.items():
        tests = _nb.test_ids(source)
        reference, reference_derived = _decoded_reference(job.reference[name], tests)
        own = _nb.submitted_solutions(source)
        stubs = {g: _nb.stub_source(s, job.stub or _nb.DEFAULT_STUB) for g, s in own.items()}
        solutions = _nb.submitted_solutions(job.submissions[name], wanted=set(own))
        held = _policy.held_tests(source, solutions)
        held_all.update(held)
        held_solutions = {g: "; ".join(r[:5])
                          for g, r in _policy.held_exercises(source, solutions).items()}
        rebuilt = _nb.rebuild(source, solutions, stubs)
        cache = Path(job.cache) if job.cache and Path(job.cache).is_dir() else None
        bundle = _runner.run_rebuilt(rebuilt, limits, cache=cache, max_runs=job.max_runs,
                                     text_limit=job.text_limit, seed=job.seed)
        bundle["seed"] = job.seed
        student = _runner.decode_all(bundle["files"], tests)
        derived = _programs.judge(_programs.to_judge(student, reference), limits, cache=cache)
        bundle["verdicts"] = _runner.judge_bundle(bundle, tests, reference, derived=derived,
                                                  reference_derived=reference_derived,
                                                  held=held)
        bundle["held_solutions"] = held_solutions
        del bundle["files"]
        bundle["rebuilt"] = rebuilt
        bundles[name] = bundle
    return {"student": job.student, "bundles": bundles, "held": held_all,
            "seconds": time.monotonic() - start}


def reference_key(course: Path, assignment: str, name: str, limits, seed=None) -> str:
    """What the reference results depend on: the source notebook, the check library,
    the grader's judging code and the limits."""
    import autograder
    from grader import runner as _runner

    lib = Path(autograder.__file__).parent
    parts = [(Path(course) / "source" / assignment / name).read_bytes(),
             json.dumps(dataclasses.asdict(limits)), str(seed)]
    parts += [p.read_bytes() for p in sorted(lib.glob("*.py"))]
    return _runner.digest(*parts)


def _reference(course: Path, assignment: str, limits, seed: int | None = None
               ) -> dict[str, dict]:
    """The reference run of every source notebook, computed once and cached on disk.

    Stops with the list of checks the instructor's own solution fails: an exercise
    whose definition is broken must not grade anyone.
    """
    from grader import judge as _judge
    from grader import notebook as _nb
    from grader import programs as _programs
    from grader import runner as _runner

    out = {}
    for name in _notebook_names(course, assignment):
        path = Path(course) / "source" / assignment / name
        key = reference_key(course, assignment, name, limits, seed)
        cache = grading_dir(course, assignment) / "reference" / f"{name}.{key}.json"
        cached = _runner.read_json(cache)
        if cached is not None:
            out[name] = cached
            continue
        source = json.loads(path.read_text())
        tests = _nb.test_ids(source)
        compile_cache = cache_dir(course, assignment)
        compile_cache.mkdir(parents=True, exist_ok=True)
        compile_cache.chmod(0o700)
        result = _runner.reference_results(source, limits, cache=compile_cache, seed=seed)
        cells = _runner.decode_all(result["files"], tests)
        derived = _programs.judge(_programs.to_judge(cells, cells, with_expected=True), limits,
                                  cache=compile_cache, cache_writable=True)
        problems = [p for t in tests for p in _judge.reference_problems(cells.get(t), t, derived)]
        if problems:
            raise RuntimeError(f"source/{assignment}/{name} fails its own checks, so nothing "
                               "was graded:\n" + "\n".join(problems))
        result["derived"] = _derived_to_hex(derived)
        cache.parent.mkdir(parents=True, exist_ok=True)
        for old in cache.parent.glob(f"{name}.*.json"):
            old.unlink()
        cache.write_text(json.dumps(result))
        out[name] = result
    return out


# ---------------------------------------------------------------- recording

def _stage(course: Path, assignment: str, folder: Path, student: str, result: dict) -> None:
    """Writes the rebuilt notebooks (for nbgrader) and the bundles (for TrustedReplay)."""
    folder = folder / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    stamp = Path(course) / "submitted" / student / assignment / "timestamp.txt"
    if stamp.is_file() and stamp.stat().st_size < 200:
        shutil.copyfile(stamp, folder / "timestamp.txt")
    bundle_dir = grading_dir(course, assignment) / "bundles" / student
    bundle_dir.mkdir(parents=True, exist_ok=True)
    for name, bundle in result["bundles"].items():
        (folder / name).write_text(json.dumps(bundle["rebuilt"]))
        (bundle_dir / f"{Path(name).stem}.json").write_text(json.dumps(bundle))


def _bundles_of(course: Path, assignment: str, student: str) -> dict:
    """A judged submission's result, read back from its bundles (to resume)."""
    bundle_dir = grading_dir(course, assignment) / "bundles" / student
    return {"bundles": {name: json.loads((bundle_dir / f"{Path(name).stem}.json").read_text())
                        for name in _notebook_names(course, assignment)}}


class _Recorder:
    """Writes judged submissions into the gradebook in chunks, while the batch runs.

    One ``python -m grader.recorder`` process for the whole batch calls nbgrader's
    API (``NbGraderAPI.autograde``) on each staged submission, with the
    ``TrustedReplay`` preprocessor in place of execution (nbgrader_config.py selects
    it when ``JAXCOURSE_BUNDLES`` is set). It starts with the batch, so importing
    nbgrader overlaps the reference run; it is the gradebook's one writer. A chunk is
    sent as soon as a worker is idle at the batch's end, or when ``chunk``
    submissions wait: a large class never ends with one long recording.
    """

    def __init__(self, course: Path, assignment: str, run_dir: Path, on_recorded,
                 chunk: int = 25):
        import queue
        import subprocess
        import sys
        import threading

        from grader.course import nbgrader_env

        self.course, self.assignment, self.run_dir = course, assignment, run_dir
        self.on_recorded = on_recorded  # (student, (score, max score) or None)
        self.chunk_size = chunk
        bundles = grading_dir(course, assignment) / "bundles"
        run_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(run_dir / "nbgrader.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.recorder"], cwd=course,
            env={**nbgrader_env(), "JAXCOURSE_BUNDLES": str(bundles.resolve())},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.staged: list[str] = []
        self.chunk = 0
        self.running: list[str] | None = None
        self.results: dict[str, dict] = {}

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                continue
        self.answers.put(None)  # the process ended

    def stage(self, student: str, result: dict | None = None) -> None:
        result = result or _bundles_of(self.course, self.assignment, student)
        _stage(self.course, self.assignment, self.run_dir / f"chunk{self.chunk}", student, result)
        self.staged.append(student)

    def poll(self, tail: bool, wait: float = 0.0) -> None:
        """Collects answers; sends the next chunk when it is worth it."""
        import queue

        while self.running is not None:
            try:
                answer = self.answers.get(timeout=wait) if wait else self.answers.get_nowait()
            except queue.Empty:
                break
            if answer is None or answer.get("done"):
                self._collect()
            elif "student" in answer:
                self.results[answer["student"]] = answer
        if self.running is None and self.staged and (tail or len(self.staged) >= self.chunk_size):
            folder = self.run_dir / f"chunk{self.chunk}" / "submitted"
            request = {"assignment": self.assignment, "submitted": str(folder),
                       "students": self.staged}
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the recorder died: its students are reported as not recorded
            self.running, self.staged, self.chunk = self.staged, [], self.chunk + 1

    def _collect(self) -> None:
        students, self.running = self.running, None
        recorded = _scores(self.course, self.assignment,
                           [s for s in students if self.results.get(s, {}).get("success")])
        for s in students:
            self.on_recorded(s, recorded.get(s))

    def finish(self) -> None:
        """Records everything staged; returns when the gradebook has it all (then close())."""
        while self.running is not None or self.staged:
            if self.running is None:
                self.poll(tail=True)
            elif self.proc.poll() is not None and self.answers.empty():
                self._collect()  # the recorder died mid-chunk
            else:
                self.poll(tail=True, wait=0.5)

    def close(self) -> None:
        """Lets the process exit; kills it if a chunk is still running (interrupted batch)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.running is not None:  # interrupted: those stay judged, recorded next run
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - never leave a process behind
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _scores(course: Path, assignment: str, students: list[str]) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook, MissingEntry

    from grader.course import nbgrader_db_url

    out = {}
    with Gradebook(nbgrader_db_url(course)) as gb:
        for s in students:
            try:
                sub = gb.find_submission(assignment, s)
            except MissingEntry:
                continue
            autograded = Path(course) / "autograded" / s / assignment
            if autograded.is_dir():
                out[s] = (float(sub.score), float(sub.max_score))
    return out


def ensure_in_gradebook(course: Path, assignment: str) -> None:
    """Registers the assignment's source notebooks in the gradebook when missing.

    nbgrader autograde restores locked cells and hidden tests from the gradebook,
    which ``nbgrader generate_assignment`` fills. After a fresh clone the gradebook
    does not exist yet: run it once, writing its release copy to a scratch folder
    so that the committed release/ is left as it is.
    """
    import tempfile

    from nbgrader.api import Gradebook, MissingEntry

    from grader.course import nbgrader_db_url

    with Gradebook(nbgrader_db_url(course)) as gb:
        try:
            gb.find_assignment(assignment)
            return
        except MissingEntry:
            pass
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        run_nbgrader(["generate_assignment", assignment, "--force",
                      f"--CourseDirectory.release_directory={tmp}"], cwd=course)


def submitted_students(course: Path, assignment: str) -> list[str]:
    base = Path(course) / "submitted"
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


# ---------------------------------------------------------------- the batch

def _executor(workers: int, scheduler: str | None):
    if scheduler:
        from distributed import Client

        client = Client(scheduler, timeout="30s")
        return client.get_executor(pure=False), client
    import multiprocessing

    # spawn: the grader holds threads (progress bar, executors); forking it is unsafe.
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context("spawn")), None


def _job(course: Path, assignment: str, student: str, reference: dict, limits,
         cfg) -> Job:
    folder = Path(course) / "submitted" / student / assignment
    names = _notebook_names(course, assignment)
    return Job(
        assignment=assignment, student=student,
        sources={n: json.loads((Path(course) / "source" / assignment / n).read_text())
                 for n in names},
        submissions={n: json.loads((folder / n).read_text(encoding="utf-8")) for n in names},
        reference=reference, limits=dataclasses.asdict(limits),
        cache=str(cache_dir(course, assignment)), stub=solution_stub(course),
        max_runs=cfg.max_runs, text_limit=cfg.text_limit, seed=cfg.seed)


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
    workers = workers or cfg.workers or os.cpu_count() or 1
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
            if entry.get("phase") == "recorded" or entry.get("reason") == "malformed":
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
                o.score, o.max_score = score
            else:
                o.status, o.reason = "attention", "grading_failed"
                o.detail = "nbgrader could not record this submission's grades"
            o.phase = "recorded"
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


def _run_batch(course: Path, assignment: str, to_run: list[tuple[str, str]],
               outcomes: dict[str, Outcome], recorder: _Recorder, progress, *, workers: int,
               scheduler: str | None, limits, cfg) -> None:
    """Runs and judges the submissions in parallel; hands each to the recorder."""
    reference = _reference(course, assignment, limits, cfg.seed)
    task = progress.add_task(f"grading {assignment}", total=len(to_run))
    pool, client = _executor(workers, scheduler)
    try:
        futures = {pool.submit(grade_task, _job(course, assignment, s, reference, limits, cfg)):
                   (s, fp) for s, fp in to_run}
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                s, fp = futures[fut]
                try:
                    result = fut.result()
                    outcomes[s] = _judged_outcome(s, result, fp)
                    recorder.stage(s, result)
                except Exception as err:  # noqa: BLE001 - a grader bug must not lose the batch
                    outcomes[s] = Outcome(s, "attention", "grading_failed", repr(err)[:500],
                                          fingerprint=fp, phase="recorded")
                _write_ledger(course, assignment, {s: outcomes[s]})
                progress.advance(task)
            # Record as soon as a worker is idle (the batch's tail), or a chunk is full.
            recorder.poll(tail=len(pending) < workers)
    finally:
        if client is None:
            pool.shutdown(wait=True, cancel_futures=True)
        else:  # distributed's ClientExecutor.shutdown() takes only `wait`
            try:
                pool.shutdown(wait=True)
            finally:
                client.close()


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
