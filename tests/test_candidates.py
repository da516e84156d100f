"""The program judge's runs: chunks small enough for its cell timeout, run as the cells of
one sandbox, and a cell that fails is split until only the owner of the program that
failed it fails."""
from types import SimpleNamespace

import pytest

from grader import candidates, programs


def test_judge_chunks_keep_each_candidate_in_one_run():
    todo = {f"gid#{k}#p{i}": (k, i) for k in range(5) for i in range(2)}
    chunks = programs.judge_chunks(todo, candidates._candidate_of, size=3)
    assert [len(c) for c in chunks] == [4, 4, 2]
    for chunk in chunks:
        owners = {key.rsplit("#", 1)[0] for key in chunk}
        assert all(sum(key.startswith(o + "#") for key in chunk) == 2 for o in owners)
    assert {k: v for c in chunks for k, v in c.items()} == todo


def _records(todo: dict[str, str]) -> dict:
    """Program records standing for the values of ``todo`` (the same value, the same
    record: derived once)."""
    from autograder.core import wire

    return {key: wire.Record("program", key, {"v": v}, wire.Observation("facts", facts={"v": v}))
            for key, v in todo.items()}


@pytest.fixture
def runs(monkeypatch):
    """The program judge's sandbox, faked: a chunk holding a "slow" program fails its cell
    (a timeout), and the run stops there. ``seen``: each run's chunks (sorted keys)."""
    seen = []

    def run(chunks, limits, *, cache=None, cache_writable=False):
        seen.append([sorted(chunk) for chunk in chunks])
        out = []
        for chunk in chunks:
            if any(rec.params["v"] == "slow" for rec in chunk.values()):
                return out + [None] * (len(chunks) - len(out)), "timeout"
            out.append({k: f"derived {rec.params['v']}" for k, rec in chunk.items()})
        return out, ""

    monkeypatch.setattr(programs, "_run", run)
    return seen


def test_a_failed_run_is_split_down_to_the_candidate_that_failed_it(runs):
    todo = _records({"g#0#a": "x", "g#0#b": "w", "g#1#a": "y", "g#2#a": "slow",
                     "g#2#b": "v", "g#3#a": "z"})
    out = programs.judge_split(todo, "limits", cache="cache", owner=candidates._candidate_of)
    assert {k: out[k] for k in ("g#0#a", "g#0#b", "g#1#a", "g#3#a")} == {
        "g#0#a": "derived x", "g#0#b": "derived w", "g#1#a": "derived y",
        "g#3#a": "derived z"}
    # The slow program's candidate fails as a whole (its programs ran together).
    assert out["g#2#a"].error_type == out["g#2#b"].error_type == "ProgramJudge"
    assert runs[0] == [sorted(todo)] and [["g#2#a", "g#2#b"]] in runs
    assert programs.judge_failures(out) == [
        "g#2#a: the grader could not judge this program (timeout)",
        "g#2#b: the grader could not judge this program (timeout)"]


def test_one_submissions_programs_are_split_one_by_one(runs):
    todo = _records({"test_a/0": "x", "test_b/0": "slow", "test_b/1": "y"})
    out = programs.judge_split(todo, "limits")
    assert out["test_a/0"] == "derived x" and out["test_b/1"] == "derived y"
    assert programs.judge_failures(out) == [
        "test_b/0: the grader could not judge this program (timeout)"]


def test_a_judge_batch_is_split_by_submission_then_by_program(runs):
    # The pipeline's judge task: programs of three submissions (0, 1, 2) in one run.
    todo = _records({"0#test_a/0": "x", "1#test_a/0": "y", "1#test_b/0": "slow",
                     "1#test_b/1": "z", "2#test_a/0": "w"})
    out = programs.judge_owned(todo, "limits", owner=lambda k: k.split("#", 1)[0],
                               then=lambda k: k)
    assert programs.judge_failures(out) == [
        "1#test_b/0: the grader could not judge this program (timeout)"]
    assert {k: v for k, v in out.items() if k != "1#test_b/0"} == {
        "0#test_a/0": "derived x", "1#test_a/0": "derived y", "1#test_b/1": "derived z",
        "2#test_a/0": "derived w"}
    assert runs[0] == [sorted(todo)]  # one run for the batch while nothing fails


def test_the_chunks_of_a_batch_are_cells_of_one_run_and_a_failed_cell_costs_its_owners(runs):
    # Five candidates of two programs each, chunks of four programs: [0, 1], [2, 3], [4].
    todo = _records({f"g#{k}#p{i}": ("slow" if (k, i) == (2, 1) else f"{k}{i}")
                     for k in range(5) for i in range(2)})
    out = programs.judge_owned(todo, "limits", owner=candidates._candidate_of, size=3)
    chunks = [sorted(c) for c in programs.judge_chunks(todo, candidates._candidate_of, 3)]
    assert runs[0] == chunks  # one run, a cell per chunk
    # The second chunk's cell failed: its owners judged again in halves (candidate 2's
    # run fails alone, candidate 3's passes); the chunk after it, in a run of its own.
    assert runs[1:] == [[["g#2#p0", "g#2#p1"]], [["g#3#p0", "g#3#p1"]], [chunks[2]]]
    assert sorted(programs.judge_failures(out)) == [
        "g#2#p0: the grader could not judge this program (timeout)",
        "g#2#p1: the grader could not judge this program (timeout)"]
    assert all(out[k] == f"derived {rec.params['v']}" for k, rec in todo.items()
               if not k.startswith("g#2#"))


def test_the_same_program_of_two_owners_is_judged_once_in_a_batch(runs):
    todo = _records({"0#t/0": "x", "1#t/0": "x", "2#t/0": "y"})
    out = programs.judge_owned(todo, "limits", owner=lambda k: k.split("#", 1)[0])
    assert runs == [[["0#t/0", "2#t/0"]]]
    assert out == {"0#t/0": "derived x", "1#t/0": "derived x", "2#t/0": "derived y"}


def test_a_program_sent_twice_is_derived_once_and_both_get_its_facts(monkeypatch):
    import dataclasses

    import numpy as np

    from autograder.core import wire

    sent = []

    def run_notebook(nb, *, limits, collect, extra_files, cache, cache_writable):
        cell = wire.loads(extra_files["programs-0.json"], extra_files["programs-0.npz"])
        sent.extend(rec.label for rec in cell.records)
        out = wire.CellResult("derived", tuple(
            wire.Record("derived", rec.label, {}, wire.Observation(
                "facts", facts={"bytes": len(rec.observed.artifacts[0])}))
            for rec in cell.records))
        raw_json, raw_npz = wire.dumps(out)
        return SimpleNamespace(files={"derived-0.json": raw_json, "derived-0.npz": raw_npz},
                               failure="")

    def program(code: bytes, x: float) -> wire.Record:
        inputs = wire.Observation("tree", tree="*", leaves=(
            wire.Leaf("", "array", "float32", np.array([x], np.float32)),))
        return wire.Record("program", "k", {"check": "c"},
                           wire.Observation("artifact", artifacts=(code,), inputs=(inputs,)))

    monkeypatch.setattr(programs._sandbox, "run_notebook", run_notebook)
    todo = {"0#t/0": program(b"abc", 1.0), "1#t/0": program(b"abc", 1.0),
            "2#t/0": program(b"abc", 2.0), "3#t/0": program(b"abcd", 1.0)}
    todo = {k: dataclasses.replace(r, label=k) for k, r in todo.items()}  # as callers label
    out = programs.judge(todo, "limits")
    # The same bytes on other inputs, or other bytes, are other programs.
    assert sent == ["0#t/0", "2#t/0", "3#t/0"]
    assert {k: o.facts for k, o in out.items()} == {
        "0#t/0": {"bytes": 3}, "1#t/0": {"bytes": 3}, "2#t/0": {"bytes": 3},
        "3#t/0": {"bytes": 4}}


def test_candidate_cells_get_their_own_limit_and_the_judge_keeps_the_grading_one(monkeypatch):
    from grader.sandbox.limits import Limits

    seen = {}

    def run_notebook(nb, *, limits, collect, cache, cache_writable):
        seen["candidates"] = limits.cell_timeout
        seen["writable"] = cache_writable  # the grading cache: read-only unless asked
        return SimpleNamespace(files={}, failure="", failed_cell=None)

    def judge_owned(todo, limits, **kwargs):
        seen["judge"] = limits.cell_timeout
        return {}

    monkeypatch.setattr(candidates._sandbox, "run_notebook", run_notebook)
    monkeypatch.setattr(candidates._programs, "judge_owned", judge_owned)
    source = {"cells": [
        {"cell_type": "code", "source": "def f():\n    return 1\n",
         "metadata": {"nbgrader": {"solution": True, "grade_id": "a"}}},
        {"cell_type": "code", "source": "assert f() == 1\n",
         "metadata": {"nbgrader": {"grade": True, "grade_id": "test_a", "points": 1}}}]}
    out = candidates.grade(source, {"a": ["def f():\n    return 2\n"]}, {}, {},
                           Limits(cell_timeout=60.0), cell_timeout=5.0)
    assert seen == {"candidates": 5.0, "judge": 60.0, "writable": False}
    assert out[("a", 0)].kernel == {"passed": False, "message": "no verdict came back"}


def _two_exercises(first_solution: str = "def f(x):\n    return x + 1\n") -> dict:
    """setup, a lesson, exercise m_f (solution, try-it, test), a lesson, exercise m_g."""
    import json

    import nbformat

    def exercise(gid, solution, test):
        sol = nbformat.v4.new_code_cell(solution)
        sol.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": gid}
        tc = nbformat.v4.new_code_cell(test)
        tc.metadata["nbgrader"] = {"grade": True, "solution": False,
                                   "grade_id": f"test_{gid}", "points": 1}
        return [sol, nbformat.v4.new_code_cell(f"print({gid[2:]}(3))\n"), tc]

    nb = nbformat.v4.new_notebook()
    nb.cells = ([nbformat.v4.new_code_cell("import course\ncourse.setup()\n"),
                 nbformat.v4.new_code_cell("x_data = 2.0\n")]
                + exercise("m_f", first_solution, "assert f(1) == 2\n")
                + [nbformat.v4.new_code_cell("y_data = 3.0\n")]
                + exercise("m_g", "def g(x):\n    return x * y_data\n",
                           "assert g(x_data) == 6.0\n"))
    return json.loads(nbformat.writes(nb))


def _sources(nb: dict) -> list[str]:
    from grader import notebook as _nb

    return [_nb.text(c["source"]) for c in nb["cells"]]


def test_a_rerun_leaves_out_the_exercises_whose_candidates_all_have_results():
    nb = _two_exercises()
    cands = {"m_f": ["def f(x):\n    return 1 + x\n"],
             "m_g": ["def g(x):\n    return y_data * x\n", "def g(x):\n    return 6.0\n"]}
    first = _sources(candidates.candidate_notebook(nb, cands))
    assert any("return x + 1" in s for s in first)  # every solution runs the first time
    # m_f's candidate and m_g's first have results: only m_g's second candidate is left.
    rerun = _sources(candidates.candidate_notebook(nb, cands, {("m_f", 0), ("m_g", 0)}))
    assert not any("return x + 1" in s for s in rerun)  # m_f's solution: nothing reads it
    assert sum("_jaxcourse_candidate(" in s for s in rerun) == 1
    assert any("y_data = 3.0" in s for s in rerun) and any("x_data = 2.0" in s for s in rerun)
    assert any("return x * y_data" in s for s in rerun)


def test_a_rerun_keeps_a_finished_solution_that_a_later_cell_reads():
    nb = _two_exercises()
    cands = {"m_f": ["def f(x):\n    return 1 + x\n"],
             "m_g": ["def g(x):\n    return f(x) * y_data - 3.0\n"]}  # reads m_f's f
    rerun = _sources(candidates.candidate_notebook(nb, cands, {("m_f", 0)}))
    assert any("return x + 1" in s for s in rerun)


def test_a_program_that_outlasts_its_cell_costs_only_its_owner_in_a_real_judge_run(
        monkeypatch):
    """The judge's sandbox for real: three owners' programs, a chunk (cell) each; the
    second owner's program loops past the cell limit. The first and third get their
    facts and outputs; the second, the judge's error (a timeout). Two runs: the three
    cells, then the third again (the first's result came back from the first run)."""
    import dataclasses

    import jax
    import numpy as np
    from jax import lax

    from autograder.core import wire
    from grader.sandbox.limits import Limits

    x = np.arange(4, dtype=np.float32)

    def record(key, fn):
        blob = bytes(jax.export.export(jax.jit(fn))(x).serialize())
        inputs = wire.Observation("tree", tree="*", leaves=(wire.Leaf("", "array", "float32", x),))
        return wire.Record("program", key, {}, wire.Observation("artifact", artifacts=(blob,),
                                                                inputs=(inputs,)))

    def endless(v):  # about 2**31 steps: far past the cell limit
        return lax.fori_loop(0, 2**31 - 1, lambda i, c: c * 1.0000001 + v, v)

    todo = {"0#t/0": record("0#t/0", lambda v: v * 2.0), "1#t/0": record("1#t/0", endless),
            "2#t/0": record("2#t/0", lambda v: v + 1.0)}
    limits = Limits(cell_timeout=10.0, notebook_timeout=120.0, allow_unsandboxed=True)
    started, run_notebook = [], programs._sandbox.run_notebook
    monkeypatch.setattr(programs._sandbox, "run_notebook",
                        lambda nb, **kw: started.append(len(nb["cells"]) - 1) or run_notebook(nb, **kw))
    out = programs.judge_owned(todo, limits, owner=lambda k: k.split("#", 1)[0], size=1)
    assert programs.judge_failures(out) == [
        "1#t/0: the grader could not judge this program (timeout)"]
    for key, want in (("0#t/0", x * 2.0), ("2#t/0", x + 1.0)):
        (value,) = [leaf.value for leaf in out[key].outputs[0].leaves]
        np.testing.assert_array_equal(value, want)
        assert out[key].facts[0]["refused"] == []
    assert started == [3, 1]  # judge cells per run
