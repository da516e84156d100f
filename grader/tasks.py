"""One submission's task (run sandboxed, judge outside) and the reference run.

A task is plain data (:class:`Job`): it may run on another machine (a Dask worker).
It never touches the gradebook.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from grader.ledger import _notebook_names, cache_dir, digest, grading_dir

# ---------------------------------------------------------------- tasks

@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a worker needs, as plain data (it may run on another machine)."""

    assignment: str
    student: str
    sources: dict  # notebook name -> source notebook JSON
    submissions: dict  # notebook name -> submitted notebook JSON
    limits: dict
    cache: str | None = None  # JAX compilation cache the reference run filled (read-only)
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
    from autograder.core import wire as _wire

    records = tuple(_wire.Record("derived", k, {}, v) for k, v in derived.items())
    raw_json, raw_npz = _wire.dumps(_wire.CellResult("derived", records))
    return json.dumps({"json": raw_json.hex(), "npz": raw_npz.hex()})


def _derived_from_hex(text: str | None) -> dict:
    from autograder.core import wire as _wire

    if not text:
        return {}
    doc = json.loads(text)
    cell = _wire.loads(bytes.fromhex(doc["json"]), bytes.fromhex(doc["npz"]))
    return {rec.label: rec.observed for rec in cell.records}


@dataclasses.dataclass(frozen=True)
class JudgeBatch:
    """Runs of several submissions of one assignment, judged together: their programs
    in as few program-judge sandboxes as possible (each such sandbox starts JAX, about
    as long as judging one submission's programs takes)."""

    reference: dict  # notebook name -> {"files": {result file: hex}, "derived": hex}
    tests: dict  # notebook name -> [test id, ...]
    limits: dict
    runs: list  # run_task results
    cache: str | None = None


def run_task(job: Job) -> dict:
    """Runs one submission in the sandbox (and applies the tampering policy); its
    records are judged by :func:`judge_task`. Never touches the gradebook."""
    from grader import notebook as _nb
    from grader import policy as _policy
    from grader import runner as _runner
    from grader import sandbox as _sandbox

    start = time.monotonic()
    limits = _sandbox.Limits(**job.limits)
    bundles, held_all = {}, {}
    for name, source in job.sources.items():
        own = _nb.submitted_solutions(source)
        stubs = {g: _nb.stub_source(s, job.stub or _nb.DEFAULT_STUB) for g, s in own.items()}
        solutions = _nb.submitted_solutions(job.submissions[name], wanted=set(own))
        held = _policy.held_tests(source, solutions)
        held_all.update(held)
        rebuilt = _nb.rebuild(source, solutions, stubs)
        cache = Path(job.cache) if job.cache and Path(job.cache).is_dir() else None
        bundle = _runner.run_rebuilt(rebuilt, limits, cache=cache, max_runs=job.max_runs,
                                     text_limit=job.text_limit, seed=job.seed)
        bundle["seed"] = job.seed
        bundle["held_tests"] = held
        bundle["held_solutions"] = {g: "; ".join(r[:5])
                                    for g, r in _policy.held_exercises(source, solutions).items()}
        bundle["rebuilt"] = rebuilt
        bundle["added_names"] = _nb.added_definitions(source, job.submissions[name])
        bundles[name] = bundle
    return {"student": job.student, "bundles": bundles, "held": held_all,
            "seconds": time.monotonic() - start}


def judge_task(batch: JudgeBatch) -> list[dict]:
    """Judges the runs of :class:`JudgeBatch` outside their sandboxes: every run's
    programs in shared program-judge runs (a run that fails as a whole is split down to
    the submission that failed it), then each test cell's records against the
    reference's. Returns the runs, graded, in order."""
    from grader import programs as _programs
    from grader import runner as _runner
    from grader import sandbox as _sandbox

    start = time.monotonic()
    limits = _sandbox.Limits(**batch.limits)
    cache = Path(batch.cache) if batch.cache and Path(batch.cache).is_dir() else None
    runs = [dict(run, bundles=dict(run["bundles"])) for run in batch.runs]
    for name, tests in batch.tests.items():
        reference, reference_derived = _decoded_reference(batch.reference[name], tests)
        programs = {}
        for i, run in enumerate(runs):
            student = _runner.decode_all(run["bundles"][name]["files"], tests)
            for key, rec in _programs.to_judge(student, reference).items():
                programs[f"{i}#{key}"] = dataclasses.replace(rec, label=f"{i}#{key}")
        # Split by submission, then by program: a program that crashes or outlasts the
        # judge costs only its own checks.
        derived_all = _programs.judge_owned(programs, limits, cache=cache,
                                            owner=lambda key: key.split("#", 1)[0],
                                            then=lambda key: key)
        for i, run in enumerate(runs):
            bundle = dict(run["bundles"][name])
            derived = {key.split("#", 1)[1]: obs for key, obs in derived_all.items()
                       if key.split("#", 1)[0] == str(i)}
            # The judge itself failed (a program that compiles past the limit, a crash):
            # the checks on those programs fail, and the submission is listed for
            # attention, as a cell that timed out is, never graded quietly.
            failures = _programs.judge_failures(derived)
            bundle["incidents"] = list(bundle["incidents"])
            if failures:
                bundle["incidents"].append({"reason": "program_judge", "cell": None,
                                            "detail": "; ".join(failures)[:500]})
            bundle["verdicts"] = _runner.judge_bundle(bundle, tests, reference,
                                                      derived=derived,
                                                      reference_derived=reference_derived,
                                                      held=bundle.pop("held_tests"))
            del bundle["files"]
            run["bundles"][name] = bundle
    judged = time.monotonic() - start
    for run in runs:
        run["seconds"] += judged  # each waited for the whole judge run
        for bundle in run["bundles"].values():  # its share of the judge's time (make bench)
            bundle["phases"] = {**bundle.get("phases", {}), "judge": round(judged / len(runs), 3)}
    return runs


def judge_batch(job: Job, runs: list[dict], reference: dict, cache: str | None) -> JudgeBatch:
    """The :class:`JudgeBatch` of ``runs`` (run_task results of jobs like ``job``)
    against ``reference`` (:func:`_reference`'s), with the compilation cache it filled."""
    from grader import notebook as _nb

    return JudgeBatch(reference=reference, limits=job.limits, runs=runs, cache=cache,
                      tests={name: _nb.test_ids(source) for name, source in job.sources.items()})


def grade_task(job: Job, reference: dict) -> dict:
    """Runs one submission in the sandbox and judges it. Never touches the gradebook."""
    return judge_task(judge_batch(job, [run_task(job)], reference, job.cache))[0]


def reference_key(course: Path, assignment: str, name: str, limits, seed=None) -> str:
    """What the reference results depend on: the source notebook, the check library,
    the grader's judging code and the limits."""
    import autograder
    from grader import runner as _runner

    lib = Path(autograder.__file__).parent
    parts = [(Path(course) / "source" / assignment / name).read_bytes(),
             json.dumps(dataclasses.asdict(limits)), str(seed)]
    parts += [str(p.relative_to(lib)).encode() + p.read_bytes()
              for p in sorted(lib.rglob("*.py"))]
    return digest(*parts)


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


