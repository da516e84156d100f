"""Grading a batch: parallel, sandboxed, scored by trusted code, nothing lost.

``python -m autograder grade A [--workers N] [--scheduler ADDRESS]``

1. **Preflight** (here): every submitted notebook must be readable JSON, a valid
   notebook and under the size limit; otherwise the submission needs attention
   (``malformed``) and the rest of the batch goes on.
2. **Reference** (once per assignment, cached): the instructor's source notebook
   runs in the sandbox with the spec's probes (``grader/specs/A.py``).
3. **Run and judge** (one task per submission, on a concurrent.futures executor: a
   local process pool, or a Dask cluster with ``--scheduler``): the notebook is
   rebuilt from the instructor's copy with only the submission's solution sources,
   runs in a sandbox (``_sandbox``), and its probe values are judged against the
   reference outside the sandbox (``_trusted``). Tasks never touch the gradebook.
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

from grader.course import run_nbgrader

REASONS = {
    "malformed": "a notebook is missing, unreadable, not a notebook or too large",
    "timeout": "a cell ran past the time limit and was stopped",
    "notebook_timeout": "the whole notebook ran past its time limit",
    "out_of_memory": "the notebook used more memory than allowed",
    "kernel_died": "the kernel crashed (os._exit, a segfault, a killed process)",
    "output_flood": "a cell printed far more output than allowed",
    "tampering_suspected": "a solution reaches for the grader, the kernel or the system",
    "grading_failed": "the grader itself failed on this submission (a bug: report it)",
}
MAX_NOTEBOOK_BYTES = 20_000_000


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


def preflight(course: Path, assignment: str, student: str) -> str | None:
    """Returns why a submission cannot be graded, or None when it can."""
    import nbformat

    folder = Path(course) / "submitted" / student / assignment
    for name in _notebook_names(course, assignment):
        path = folder / name
        if path.is_symlink() or not path.is_file():
            return f"{name} is missing from the submission"
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            return (f"{name} is {size / 1e6:.0f} MB, over the limit of "
                    f"{MAX_NOTEBOOK_BYTES / 1e6:.0f} MB (clear the outputs and submit again)")
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


def fingerprint(course: Path, assignment: str, student: str) -> str:
    """A digest of the submission's notebooks and timestamp: what grading depends on."""
    from grader.runner import digest

    folder = Path(course) / "submitted" / student / assignment
    parts: list[bytes | str] = []
    for name in _notebook_names(course, assignment) + ["timestamp.txt"]:
        path = folder / name
        parts.append(name)
        try:
            parts.append(path.read_bytes() if path.stat().st_size <= MAX_NOTEBOOK_BYTES
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
    reference: dict  # notebook name -> {probe file: hex}
    limits: dict
    specs_dir: str | None = None
    cache: str | None = None  # JAX compilation cache the reference run filled


def _test_ids(nb: dict) -> set[str]:
    from grader import trusted as _trusted

    return {_trusted._meta(c).get("grade_id") for c in nb["cells"] if _trusted.is_test(c)}


def grade_task(job: Job) -> dict:
    """Runs one submission in the sandbox and judges it. Never touches the gradebook."""
    from grader import runner as _runner
    from grader import sandbox as _sandbox
    from grader import trusted as _trusted

    start = time.monotonic()
    spec = _trusted.load_spec(job.assignment, job.specs_dir)
    limits = _sandbox.Limits(**job.limits)
    bundles, solutions_seen = {}, {}
    for name, source in job.sources.items():
        tests_here = _test_ids(source)
        nb_spec = {t: p for t, p in spec.items() if t in tests_here}
        files = {k: bytes.fromhex(v) for k, v in job.reference[name].items()}
        reference = {t: _trusted.decode(files, t) for t in nb_spec}
        own = _trusted.submitted_solutions(source)
        stubs = {g: _runner.stub_source(s) for g, s in own.items()}
        solutions = _trusted.submitted_solutions(job.submissions[name], wanted=set(own))
        solutions_seen.update(solutions)
        rebuilt = _trusted.rebuild(source, solutions, stubs)
        cache = Path(job.cache) if job.cache and Path(job.cache).is_dir() else None
        bundle = _runner.run_rebuilt(rebuilt, nb_spec, limits, cache=cache)
        bundle["verdicts"] = _runner.judge_bundle(bundle, nb_spec, reference)
        missing = [t for t in tests_here if t not in nb_spec]
        for t in missing:
            bundle["verdicts"][t] = {"passed": False,
                                     "message": f"no trusted check for {t} (the spec lacks it)"}
        del bundle["files"]
        bundle["rebuilt"] = rebuilt
        bundles[name] = bundle
    return {"student": job.student, "bundles": bundles,
            "tampering": _runner.tampering_signs(solutions_seen),
            "seconds": time.monotonic() - start}


def _reference(course: Path, assignment: str, limits, specs_dir=None) -> dict[str, dict]:
    """Probe results of the source notebooks, computed once and cached on disk."""
    from autograder import _probe
    from grader import runner as _runner
    from grader import trusted as _trusted

    spec = _trusted.load_spec(assignment, specs_dir)
    out = {}
    for name in _notebook_names(course, assignment):
        path = Path(course) / "source" / assignment / name
        key = _runner.digest(path.read_bytes(),
                             _trusted.spec_path(assignment, specs_dir).read_bytes(),
                             Path(_probe.__file__).read_bytes(),
                             Path(_trusted.__file__).read_bytes(),
                             json.dumps(dataclasses.asdict(limits)))
        cache = grading_dir(course, assignment) / "reference" / f"{name}.{key}.json"
        cached = _runner.read_json(cache)
        if cached is not None:
            out[name] = cached
            continue
        source = json.loads(path.read_text())
        nb_spec = {t: p for t, p in spec.items() if t in _test_ids(source)}
        rebuilt = _trusted.rebuild(source, _trusted.submitted_solutions(source), {})
        compile_cache = cache_dir(course, assignment)
        compile_cache.mkdir(parents=True, exist_ok=True)
        compile_cache.chmod(0o700)
        bundle = _runner.run_rebuilt(rebuilt, nb_spec, limits, cache=compile_cache,
                                     cache_writable=True)
        if bundle["incidents"]:
            raise RuntimeError(f"source/{assignment}/{name} does not run cleanly in the sandbox: "
                               f"{bundle['incidents']}")
        files = {k: bytes.fromhex(v) for k, v in bundle["files"].items()}
        _runner.reference_check(nb_spec, files)
        cache.parent.mkdir(parents=True, exist_ok=True)
        for old in cache.parent.glob(f"{name}.*.json"):
            old.unlink()
        cache.write_text(json.dumps(bundle["files"]))
        out[name] = bundle["files"]
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

    A chunk is one ``nbgrader autograde`` over its own staging folder, with the
    ``TrustedReplay`` preprocessor in place of execution (nbgrader_config.py selects
    it when ``JAXCOURSE_BUNDLES`` is set). Chunks run one after another (nbgrader
    keeps the gradebook; SQLite has one writer). The process of the next chunk starts
    ahead and imports nbgrader while other work goes on (the reference run, the
    submissions still running, the previous chunk), and a chunk starts as soon as a
    worker is idle at the batch's end, or when ``CHUNK`` submissions wait: a large
    class never ends with one long recording.
    """

    CHUNK = 25

    def __init__(self, course: Path, assignment: str, run_dir: Path, on_recorded):
        self.course, self.assignment, self.run_dir = course, assignment, run_dir
        self.on_recorded = on_recorded  # (student, (score, max score) or None)
        bundles = grading_dir(course, assignment) / "bundles"
        self.env = {"JAXCOURSE_BUNDLES": str(bundles.resolve())}
        self.staged: list[str] = []
        self.chunk = 0
        self.running: tuple | None = None  # (process, students, folder)
        self.ready = self._start()

    def _start(self):
        from grader.course import start_nbgrader

        self.run_dir.mkdir(parents=True, exist_ok=True)
        return start_nbgrader(self.course, self.run_dir / "nbgrader.log", env=self.env)

    def stage(self, student: str, result: dict | None = None) -> None:
        result = result or _bundles_of(self.course, self.assignment, student)
        _stage(self.course, self.assignment, self.run_dir / f"chunk{self.chunk}", student, result)
        self.staged.append(student)

    def poll(self, tail: bool) -> None:
        """Collects a finished chunk; starts the next one when it is worth it."""
        if self.running and self.running[0].poll() is not None:
            self._collect()
        if self.running is None and self.staged and (tail or len(self.staged) >= self.CHUNK):
            from grader.course import give_nbgrader_args

            folder = self.run_dir / f"chunk{self.chunk}"
            rel = os.path.relpath(folder / "submitted", self.course)
            give_nbgrader_args(self.ready, ["autograde", self.assignment, "--force",
                                            f"--CourseDirectory.submitted_directory={rel}"])
            self.running = (self.ready, self.staged, folder)
            self.staged, self.chunk = [], self.chunk + 1
            self.ready = self._start()

    def _collect(self) -> None:
        proc, students, folder = self.running
        self.running = None
        recorded = _scores(self.course, self.assignment, students)
        missing = [s for s in students if s not in recorded]
        if missing and len(students) > 1:
            rel = os.path.relpath(folder / "submitted", self.course)
            for s in missing:  # one bad apple must not cost the chunk: retry alone
                run_nbgrader(["autograde", self.assignment, "--force", "--student", s,
                              f"--CourseDirectory.submitted_directory={rel}"],
                             cwd=self.course, check=False, env=self.env)
            recorded.update(_scores(self.course, self.assignment, missing))
        for s in students:
            self.on_recorded(s, recorded.get(s))

    def finish(self) -> None:
        """Records everything staged; returns when the gradebook has it all (then close())."""
        while self.running or self.staged:
            if self.running:
                self.running[0].wait()
            self.poll(tail=True)

    def close(self) -> None:
        """Lets the spare process exit; kills a chunk still running (interrupted batch)."""
        from grader.course import give_nbgrader_args

        give_nbgrader_args(self.ready, None)
        if self.running:  # an interrupted batch: those stay judged and are recorded next run
            self.running[0].kill()
        for proc in filter(None, [self.ready, self.running and self.running[0]]):
            try:
                proc.wait(timeout=30)
            except Exception:  # noqa: BLE001 - never leave a process behind
                proc.kill()
                proc.wait()


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
         specs_dir=None) -> Job:
    folder = Path(course) / "submitted" / student / assignment
    names = _notebook_names(course, assignment)
    return Job(
        assignment=assignment, student=student,
        sources={n: json.loads((Path(course) / "source" / assignment / n).read_text())
                 for n in names},
        submissions={n: json.loads((folder / n).read_text(encoding="utf-8")) for n in names},
        reference=reference, limits=dataclasses.asdict(limits),
        specs_dir=str(specs_dir) if specs_dir else None,
        cache=str(cache_dir(course, assignment)))


def _judged_outcome(student: str, result: dict, fp: str) -> Outcome:
    incidents = [i for b in result["bundles"].values() for i in b["incidents"]]
    iso = {b["isolation"] for b in result["bundles"].values()}
    peak = max((b["peak_memory_mb"] or 0 for b in result["bundles"].values()), default=0) or None
    reason, detail, stopped_by = "", "", ""
    if incidents:
        reason, stopped_by = incidents[0]["reason"], incidents[0]["detail"]
        detail = "; ".join(f"{i['reason']} in cell {i['cell']}" for i in incidents)[:500]
    elif result["tampering"]:
        reason, detail = "tampering_suspected", "; ".join(result["tampering"])[:500]
    return Outcome(student, "attention" if reason else "graded", reason, detail,
                   seconds=result["seconds"], fingerprint=fp, phase="judged",
                   peak_memory_mb=peak, isolation="+".join(sorted(iso)), stopped_by=stopped_by)


def grade_assignment(course: Path, assignment: str, *, workers: int | None = None,
                     scheduler: str | None = None, students: list[str] | None = None,
                     force: bool = False, show: bool = True, limits=None,
                     specs_dir: str | Path | None = None,
                     allow_unsandboxed: bool = False) -> dict[str, Outcome]:
    """Grades every submission of an assignment; returns ``{student: Outcome}``.

    Raises ``grader.sandbox.SandboxUnavailable`` (one line) where there is no sandbox,
    unless ``allow_unsandboxed`` (for notebooks you trust).
    """
    from rich.console import Console
    from rich.progress import Progress

    from grader import sandbox as _sandbox

    course = Path(course).resolve()
    limits = limits or _sandbox.Limits()
    workers = workers or os.cpu_count() or 1
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
        fp = fingerprint(course, assignment, s)
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
        problem = preflight(course, assignment, s)
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

        recorder = _Recorder(course, assignment, run_dir, recorded) if to_run or to_record else None
        try:
            for s in to_record:  # resumed: judged before, recorded from their bundles
                recorder.stage(s)
            if to_run:
                _run_batch(course, assignment, to_run, outcomes, recorder, progress,
                           workers=workers, scheduler=scheduler, limits=limits,
                           specs_dir=specs_dir)
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
               scheduler: str | None, limits, specs_dir) -> None:
    """Runs and judges the submissions in parallel; hands each to the recorder."""
    reference = _reference(course, assignment, limits, specs_dir)
    task = progress.add_task(f"grading {assignment}", total=len(to_run))
    pool, client = _executor(workers, scheduler)
    try:
        futures = {pool.submit(grade_task, _job(course, assignment, s, reference, limits,
                                                specs_dir)): (s, fp) for s, fp in to_run}
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
