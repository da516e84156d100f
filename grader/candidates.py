"""Grading many candidate answers of a module in one sandboxed run.

The mutation tool (``python -m autograder mutants``) and the variant tests need
verdicts on dozens of answers per exercise; a notebook run per answer would take an
hour per module. Here the instructor's notebook runs once, in a sandbox; right after
each exercise's solution cell, one cell per candidate answer runs
``autograder.core.check.run_candidate``: the candidate is defined in a copy of the
notebook's namespace and the exercise's test cell runs on it, once as the student's
kernel runs it (a verdict) and once as the grading sandbox runs it (records). The
records are judged here against the reference run's, exactly as a submission's are
(programs in the program judge's sandbox). A candidate that hangs or crashes the
kernel fails with that reason and the notebook runs again without it (and without
the candidates judged before it, whose results came back).
"""
from __future__ import annotations

import copy
import dataclasses
import json

from autograder.core import wire as _wire
from grader import judge as _judge
from grader import notebook as _nb
from grader import programs as _programs
from grader import sandbox as _sandbox


@dataclasses.dataclass
class Result:
    kernel: dict   # {"passed": bool, "message": str}: the student's own test cell
    trusted: dict  # the grader's verdict


def _candidate_cell(gid: str, index: int, source: str, test_id: str, test_source: str,
                    kernel: bool) -> dict:
    return {"cell_type": "code", "execution_count": None, "outputs": [],
            "metadata": {"jaxcourse_candidate": [gid, index]},
            "source": ("from autograder.core.check import run_candidate as _jaxcourse_candidate\n"
                       f"_jaxcourse_candidate({gid!r}, {index}, {source!r}, {test_id!r}, "
                       f"{test_source!r}, globals(), kernel={kernel!r})\n")}


def candidate_notebook(source_nb: dict, candidates: dict[str, list[str]],
                       skipped: set[tuple[str, int]] = frozenset(),
                       kernel_too: dict[str, set[int]] | None = None) -> dict:
    """The instructor's notebook with candidate cells after each solution cell.

    Lesson cells that nothing graded reads are left empty, as in a submission's graded
    run (:func:`needed_lessons`): a notebook whose candidates hang runs again after
    each hang, and its lessons were most of every rerun. In a rerun, the solution cells
    of exercises with no candidate left run only when a later cell reads them.
    """
    nb = copy.deepcopy(source_nb)
    tests = _nb.test_sources(source_nb)
    remaining = {gid: [src for k, src in enumerate(sources) if (gid, k) not in skipped]
                 for gid, sources in candidates.items()}
    needed = needed_lessons(source_nb, {gid: s for gid, s in remaining.items() if s},
                            finished={gid for gid, s in remaining.items() if not s})
    cells = []
    for index, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if (_nb.is_test(cell) or _nb.is_try_it(nb["cells"], index)
                or (cell.get("cell_type") == "code" and index not in needed)):
            cell["source"] = ""
        cells.append(cell)
        gid = _nb.meta(cell).get("grade_id")
        if _nb.is_solution(cell) and gid in candidates:
            test_id = f"test_{gid}"
            for k, source in enumerate(candidates[gid]):
                if (gid, k) not in skipped:
                    kernel = kernel_too is None or k in kernel_too.get(gid, set())
                    cells.append(_candidate_cell(gid, k, source, test_id, tests[test_id],
                                                 kernel))
    for cell in cells:
        if cell.get("cell_type") == "code":
            cell["source"] = ("import autograder, autograder.core.check\n"
                              "autograder.core.check.configure('student')\n"
                              + _nb.text(cell["source"]))
            break
    nb["cells"] = cells
    return nb


def needed_lessons(source_nb: dict, candidates: dict[str, list[str]],
                   finished: set[str] = frozenset()) -> set[int]:
    """The code cells of ``source_nb`` that its candidates' runs need: what
    :func:`grader.lessons.needed_cells` keeps for the notebook with every candidate
    as a solution cell of its own after its exercise's (a candidate may read a lesson's
    name that the instructor's solution does not). Every code cell where the analysis
    gives up.

    ``finished``: the grade ids of exercises whose candidates all have results (a rerun
    after a hang). Their test cells do not run, and their solution cells count as
    lessons: kept only when a later cell reads what they bind or they change state.
    """
    from grader.lessons import needed_cells

    cells, where = [], {}
    for index, cell in enumerate(source_nb["cells"]):
        where[len(cells)] = index
        gid = _nb.meta(cell).get("grade_id")
        if gid in finished or (gid and gid.startswith("test_") and gid[5:] in finished):
            # A plain cell for the analysis; a test cell never runs in a candidates' run.
            cell = {**cell, "metadata": {},
                    "source": "" if _nb.is_test(cell) else cell.get("source", "")}
        elif _nb.is_try_it(source_nb["cells"], index):
            cell = {**cell, "source": ""}  # never runs (and follows a solution cell)
        cells.append(cell)
        if _nb.is_solution(cell) and gid in candidates:
            for source in candidates[gid]:
                cells.append({**copy.deepcopy(cell), "source": source})
    keep, gave_up = needed_cells({**source_nb, "cells": cells})
    if gave_up:
        return {i for i, c in enumerate(source_nb["cells"]) if c.get("cell_type") == "code"}
    return {where[i] for i in keep if i in where}


def _candidate_of(key: str) -> str:
    return "#".join(key.split("#")[:2])  # gid#k#label -> gid#k


def _files(candidates: dict[str, list[str]]) -> tuple[str, ...]:
    out = []
    for gid, sources in candidates.items():
        for k in range(len(sources)):
            base = f"candidates/{gid}/{k}"
            out += [f"{base}/kernel.json", f"{base}/test_{gid}.json", f"{base}/test_{gid}.npz",
                    f"{base}/done"]
    return tuple(out)



def grade(source_nb: dict, candidates: dict[str, list[str]], reference: dict,
          reference_derived: dict, limits, *, max_runs: int = 8, cache=None,
          kernel_too: dict[str, set[int]] | None = None,
          cell_timeout: float | None = None,
          cache_writable: bool = False) -> dict[tuple[str, int], Result]:
    """Verdicts, kernel and trusted, on every candidate: ``{(grade_id, index): Result}``.

    ``reference``/``reference_derived``: the decoded reference run and its programs, as
    the pipeline computes them (``grader.tasks._reference``). ``kernel_too``: the
    candidates also judged as the student's kernel judges them (default: all); the
    others get ``kernel = {"passed": None}``. ``cell_timeout``: seconds one cell of the
    candidates' notebook may run (default: ``limits.cell_timeout``, the grading limit);
    a candidate that runs past it fails as a timeout. The program judge keeps
    ``limits``. ``cache_writable``: the candidates' run adds what it compiles to
    ``cache`` (JAX's compilation cache), so that a candidate's second run (the grader's
    side, after the kernel's) and the program judge load what its first compiled. Only
    for a cache that no student's run reads: candidates are the course's own code, but a
    course's grading cache holds what its reference run wrote and nothing else.
    """
    run_limits = limits if cell_timeout is None else dataclasses.replace(
        limits, cell_timeout=cell_timeout)
    skipped: dict[tuple[str, int], str] = {}
    files: dict[str, bytes] = {}
    done: set[tuple[str, int]] = set()
    for _ in range(max_runs):
        # A rerun runs the notebook again but only the candidates with no results yet.
        nb = candidate_notebook(source_nb, candidates, set(skipped) | done, kernel_too)
        result = _sandbox.run_notebook(nb, limits=run_limits, collect=_files(candidates),
                                       cache=cache, cache_writable=cache_writable)
        files.update(result.files)
        done |= {(gid, k) for gid, sources in candidates.items() for k in range(len(sources))
                 if f"candidates/{gid}/{k}/done" in files}
        if not result.failure or result.failed_cell is None:
            break
        tag = nb["cells"][result.failed_cell].get("metadata", {}).get("jaxcourse_candidate")
        if not tag:
            raise RuntimeError(f"the instructor's notebook failed ({result.failure}) in cell "
                               f"{result.failed_cell}: {result.detail}")
        skipped[(tag[0], tag[1])] = f"the candidate {result.failure.replace('_', ' ')}"
    out: dict[tuple[str, int], Result] = {}
    cells: dict[tuple[str, int], _wire.CellResult | None] = {}
    for gid, sources in candidates.items():
        for k in range(len(sources)):
            base = f"candidates/{gid}/{k}"
            cells[(gid, k)] = _judge.decode({f"probe/test_{gid}.json": files.get(f"{base}/test_{gid}.json"),
                                             f"probe/test_{gid}.npz": files.get(f"{base}/test_{gid}.npz")}
                                            if f"{base}/test_{gid}.json" in files else {},
                                            f"test_{gid}")
    programs = {}
    for (gid, k), cell in cells.items():
        for key, rec in _programs.to_judge({f"test_{gid}": cell}, reference).items():
            programs[f"{gid}#{k}#{key}"] = dataclasses.replace(rec, label=f"{gid}#{k}#{key}")
    derived_all = _programs.judge_owned(programs, limits, cache=cache, owner=_candidate_of)
    for (gid, k), cell in cells.items():
        prefix = f"{gid}#{k}#"
        derived = {key[len(prefix):]: obs for key, obs in derived_all.items()
                   if key.startswith(prefix)}
        base = f"candidates/{gid}/{k}"
        if (gid, k) in skipped:
            why = skipped[(gid, k)]
            out[(gid, k)] = Result({"passed": False, "message": why},
                                   {"passed": False, "message": why})
            continue
        try:
            kernel = json.loads(files[f"{base}/kernel.json"])
        except (KeyError, ValueError):
            kernel = {"passed": False, "message": "no verdict came back"}
        ref = reference.get(f"test_{gid}")
        trusted = (_judge.judge_cell(ref, cell, derived=derived,
                                     reference_derived=reference_derived)
                   if ref is not None else _judge.Verdict(False, "no reference"))
        passed = kernel.get("passed")
        out[(gid, k)] = Result({"passed": None if passed is None else bool(passed),
                                "message": str(kernel.get("message", ""))},
                               dataclasses.asdict(trusted))
    return out
