"""The program judge: facts from exported programs, derived in a sandbox of their own.

Structure checks (op counts, loops, donation, collectives, memory) record the
student's function exported with ``jax.export``. Those bytes are judged here: in a
second sandbox that runs no student Python, ``autograder.programs.artifacts.judge_main``
deserializes each program, refuses ops outside the allowlist, runs it on the
*grader's* inputs (the reference run's, never the ones the submission recorded) and
derives the facts. The facts and outputs come back as typed data.
"""
from __future__ import annotations

from autograder.core import wire as _wire
from grader import judge as _judge
from grader import sandbox as _sandbox

def _setup_cell() -> dict:
    return {"cell_type": "code", "execution_count": None, "outputs": [], "metadata": {},
            "source": "import course\ncourse.setup(quiet=True)\n"}


def to_judge(student: dict[str, _wire.CellResult | None],
             reference: dict[str, _wire.CellResult | None], *,
             with_expected: bool = False) -> dict[str, _wire.Record]:
    """``{key: record}`` of every program to judge, each with the grader's inputs.

    A student's program is paired with the reference record at the same position:
    its inputs and its derive parameters come from there.
    """
    out = {}
    for test_id, cell in student.items():
        ref = reference.get(test_id)
        if cell is None or ref is None:
            continue
        for key, rec in _judge.artifacts_of(cell, expected=with_expected).items():
            index = int(key.split("/")[1])
            if index >= len(ref.records):
                continue
            ref_rec = ref.records[index]
            ref_obs = ref_rec.observed if not key.endswith("/expected") else ref_rec.expected
            if ref_obs is None or ref_obs.kind != "artifact":
                continue
            obs = rec.observed if not key.endswith("/expected") else rec.expected
            trusted = _wire.Observation("artifact", artifacts=obs.artifacts,
                                        inputs=ref_obs.inputs)
            out[key] = _wire.Record("program", key, dict(ref_rec.params), trusted)
    return out


def judge(programs: dict[str, _wire.Record], limits, *, cache=None,
          cache_writable: bool = False) -> dict[str, _wire.Observation]:
    """Runs the program judge on ``programs`` (one run); ``{key: derived observation}``.

    A program the judge could not finish (it crashed, or ran out of time or memory)
    gets an error observation, so its check fails with that reason. ``cache`` is JAX's
    compilation cache of the assignment (the reference's programs fill it; most
    students' programs are the same and load from it).
    """
    if not programs:
        return {}
    same, unique = _same(programs)
    (found,), reason = _run([unique], limits, cache=cache, cache_writable=cache_writable)
    return _spread(programs, same, found or {}, reason)


def _same(programs: dict[str, _wire.Record]) -> tuple[dict[str, str], dict]:
    """``({key: the first key whose record is the same}, {first key: record})``. Programs
    that hold the same bytes, inputs and parameters (candidates or submissions whose code
    exported the same program) are derived once: what the judge derives is a function of
    the record alone."""
    first: dict[str, str] = {}
    same = {key: first.setdefault(_wire.digest(rec), key) for key, rec in programs.items()}
    return same, {key: programs[key] for key in first.values()}


def _failed(reason: str) -> _wire.Observation:
    return _wire.Observation("error", error_type="ProgramJudge",
                             error=f"the grader could not judge this program ({reason})")


def _spread(programs, same, found, reason) -> dict[str, _wire.Observation]:
    """Each key of ``programs`` gets what was found for its first same program (or the
    judge's error, with ``reason``)."""
    failed = _failed(reason or "the program judge gave no result")
    return {key: found.get(same[key], failed) for key in programs}


_DRIVER = ("from autograder.programs.artifacts import judge_main\n"
           "judge_main('.', {part!r})\n"
           "import jax\n"
           "jax.clear_caches()  # the next cell's programs start with this one's freed\n")


def _run(chunks: list[dict[str, _wire.Record]], limits, *, cache=None,
         cache_writable: bool = False) -> tuple[list[dict | None], str]:
    """One program-judge sandbox for ``chunks``, a cell each (each cell has the cell
    limit; the run, the notebook limit): ``([{label: observation} or None per chunk],
    the run's failure or "")``. None: the chunk's cell did not finish (it failed, or a
    cell before it did)."""
    files, cells = {}, [_setup_cell()]
    for i, chunk in enumerate(chunks):
        raw_json, raw_npz = _wire.dumps(_wire.CellResult("programs", tuple(chunk.values())))
        files[f"programs-{i}.json"], files[f"programs-{i}.npz"] = raw_json, raw_npz
        cells.append({"cell_type": "code", "execution_count": None, "outputs": [],
                      "metadata": {}, "source": _DRIVER.format(part=f"-{i}")})
    nb = {"cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    collect = tuple(f"derived-{i}.{ext}" for i in range(len(chunks)) for ext in ("json", "npz"))
    result = _sandbox.run_notebook(nb, limits=limits, collect=collect, extra_files=files,
                                   cache=cache, cache_writable=cache_writable)
    out: list[dict | None] = []
    for i in range(len(chunks)):
        try:
            cell = _wire.loads(result.files[f"derived-{i}.json"],
                               result.files[f"derived-{i}.npz"])
            out.append({rec.label: rec.observed for rec in cell.records})
        except (KeyError, _wire.WireError):
            out.append(None)
    return out, result.failure or ("" if None not in out
                                   else "the program judge gave no result")


def judge_split(programs: dict[str, _wire.Record], limits, *, cache=None,
                owner=lambda key: key, then=None) -> dict[str, _wire.Observation]:
    """:func:`judge`, and when its run fails as a whole (a timeout, a crash: every
    program gets the judge's error), each half of the owners' programs again, down to one
    owner: a slow or crashing program costs only its owner's checks, not every program
    judged beside it. ``owner(key)`` groups the programs that must stay together (one
    candidate's programs in the mutation harness; each program on its own by default).
    ``then``: how one owner's programs are split further when they fail alone (the
    pipeline splits by submission, then by program).
    """
    derived = judge(programs, limits, cache=cache)
    if not all(getattr(o, "error_type", None) == "ProgramJudge" for o in derived.values()):
        return derived
    return _split(programs, derived, limits, cache=cache, owner=owner, then=then)


def _split(programs, derived, limits, *, cache, owner, then) -> dict[str, _wire.Observation]:
    """``programs``, whose run failed as a whole (``derived``: its errors), judged again
    in halves by owner, as :func:`judge_split` says."""
    owners = list(dict.fromkeys(owner(k) for k in programs))
    if len(owners) < 2:
        if then is not None and len(programs) > 1:
            return _split(programs, derived, limits, cache=cache, owner=then, then=None)
        return derived
    half = set(owners[:len(owners) // 2])
    first = {k: v for k, v in programs.items() if owner(k) in half}
    rest = {k: v for k, v in programs.items() if k not in first}
    return {**judge_split(first, limits, cache=cache, owner=owner, then=then),
            **judge_split(rest, limits, cache=cache, owner=owner, then=then)}


# Programs per cell of a program-judge run. One cell for every candidate of a module
# (some hundred sharded programs to compile) outlasts the judge's cell timeout on a
# small machine, and then every program of every candidate fails alike, correct ones
# too. 24 programs took 3-10 s (10_pallas's candidates, the slowest), so 48 stays far
# inside the 60 s cell limit. The cells share a run: a run starts a sandbox, a kernel
# and JAX (3-4 s on 2 cores) once, not once per cell.
JUDGE_CHUNK = 48


def judge_chunks(programs: dict, owner, size: int = JUDGE_CHUNK) -> list[dict]:
    """``programs`` in chunks of at most ``size`` programs, each owner's programs in one
    chunk (an owner with more gets a chunk of its own).

    >>> owner = lambda key: key.split("#")[0]
    >>> [list(c) for c in judge_chunks({"a#x": 1, "a#y": 2, "b#x": 3}, owner, size=2)]
    [['a#x', 'a#y'], ['b#x']]
    """
    chunks: list[dict] = []
    current: dict = {}
    last = None
    for key, value in programs.items():
        if owner(key) != last and len(current) >= size:
            chunks.append(current)
            current = {}
        last = owner(key)
        current[key] = value
    if current:
        chunks.append(current)
    return chunks


def judge_owned(programs: dict[str, _wire.Record], limits, *, owner, then=None, cache=None,
                size: int = JUDGE_CHUNK) -> dict[str, _wire.Observation]:
    """The programs of many owners (candidates, submissions), each distinct program once,
    in the chunks of :func:`judge_chunks`, each chunk a cell of one program-judge run.
    A chunk whose cell fails (a program in it crashed the judge or outlasted its limit)
    is judged again in halves by owner (and ``then``, see :func:`judge_split`), in runs
    of its own; the chunks after it go on in a new run, as do the chunks that a run's
    notebook limit left undone."""
    same, unique = _same(programs)
    found: dict[str, _wire.Observation] = {}
    pending = judge_chunks(unique, owner, size)
    while pending:
        results, reason = _run(pending, limits, cache=cache)
        for result in results:
            found.update(result or {})
        undone = [chunk for chunk, result in zip(pending, results) if result is None]
        if undone and not (reason == "notebook_timeout" and len(undone) < len(pending)):
            # The first chunk that did not finish failed its cell: its owners pay for it.
            culprit, undone = undone[0], undone[1:]
            found.update(_split(culprit, {key: _failed(reason) for key in culprit}, limits,
                                cache=cache, owner=owner, then=then))
        pending = undone
    return _spread(programs, same, found, "the program judge gave no result")


def judge_failures(derived: dict[str, _wire.Observation]) -> list[str]:
    """The judge's own failures among ``derived``: ``["key: reason", ...]``."""
    return [f"{key}: {obs.error}" for key, obs in derived.items()
            if getattr(obs, "error_type", None) == "ProgramJudge"]

