"""Every exercise, judged both ways, against its variants and its mutants.

For each module, the instructor's notebook runs once in the grading sandbox with every
variant (tests/variants/<module>.py) and up to ``MUTANTS`` mutants of each solution
(grader/mutation.py) defined after its solution cell (grader/candidates.py). Each
candidate is judged as the student's own test cell judges it (in the kernel) and as
the grader judges it (records compared with the reference run's, outside the sandbox):

- every correct variant passes both ways;
- every wrong variant fails both ways (and the two verdicts agree on every candidate);
- the mutation score of every exercise (killed / mutants that are not declared
  equivalent in its test cell) is at least 90 %; an exercise with no such mutant has
  no score and fails; the table is printed and written to
  artifacts/mutation/<module>.txt.
"""
from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from grader import candidates, mutation
from grader import notebook as _nb
from grader.config import settings
from grader.course import make_scratch_course
from grader.ledger import cache_dir
from grader.tasks import _decoded_reference, _reference
from grader.tools.mutants import Row, _diff, print_table
from tests.conftest import REPO, modules

MUTANTS = 12
# Seconds one candidate's cell may run. The grading limit (60 s) is for students' slow
# honest answers; here the slowest correct candidate took 5.9 s (08_autodiff, two
# modules judged at once on 2 cores), and every designed hang (05_control_flow's wrong
# fixed_point, a loop that never stops) cost the whole limit plus a rerun.
CANDIDATE_CELL_TIMEOUT = 20.0
pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def judged(request, tmp_path_factory):
    module = request.param
    course = make_scratch_course(tmp_path_factory.mktemp(module), [module])
    source = json.loads((REPO / "source" / module / f"{module}.ipynb").read_text())
    # The course's own solutions, variants and mutants: trusted code, so it also runs
    # where bubblewrap is missing (sandboxed wherever it works).
    limits = dataclasses.replace(settings(course).limits(), allow_unsandboxed=True)
    reference_hex = _reference(course, module, limits)[f"{module}.ipynb"]
    reference, derived = _decoded_reference(reference_hex, _nb.test_ids(source))
    variants = importlib.import_module(f"tests.variants.{module}").VARIANTS
    chosen, kinds = {}, {}
    for gid, src in mutation.iter_solution_cells(source):
        v = variants.get(gid, {"correct": [], "wrong": []})
        entries = ([("correct", c, None) for c in v["correct"]]
                   + [("wrong", code, why) for why, code in v["wrong"]]
                   + [("mutant", m.source, m) for m in mutation.mutants(src, limit=MUTANTS,
                                                                        seed=gid)])
        chosen[gid] = [code for _, code, _ in entries]
        kinds[gid] = entries
    # Variants are judged both ways; mutants by the grader only (the mutation score).
    kernel_too = {gid: {k for k, (kind, _, _) in enumerate(entries) if kind != "mutant"}
                  for gid, entries in kinds.items()}
    # The scratch course's cache is this test's own: the candidates' run may add to it
    # (08_autodiff's candidates' run: 137 s read-only, 116 s writable).
    results = candidates.grade(source, chosen, reference, derived, limits,
                               cache=cache_dir(course, module), kernel_too=kernel_too,
                               cell_timeout=CANDIDATE_CELL_TIMEOUT, cache_writable=True)
    return {"module": module, "source": source, "kinds": kinds, "results": results}


PARAMS = [pytest.param(m, marks=pytest.mark.xdist_group(m)) for m in modules()]


@pytest.mark.parametrize("judged", PARAMS, indirect=True)
def test_variants_are_judged_right_both_ways(judged):
    problems = []
    for gid, entries in judged["kinds"].items():
        for k, (kind, code, why) in enumerate(entries):
            if kind == "mutant":
                continue
            res = judged["results"][(gid, k)]
            want = kind == "correct"
            for where, verdict in (("the student's test cell", res.kernel),
                                   ("the grader", res.trusted)):
                if verdict["passed"] != want:
                    problems.append(f"{gid} {kind} #{k}{f' ({why})' if why else ''}: "
                                    f"{where} says {'pass' if verdict['passed'] else 'fail'}\n"
                                    f"    {verdict['message'][:600]}\n    code: {code[:300]!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("judged", PARAMS, indirect=True)
def test_mutation_score(judged):
    rows = []
    tests = _nb.test_sources(judged["source"])
    solutions = dict(mutation.iter_solution_cells(judged["source"]))
    for gid, entries in judged["kinds"].items():
        equivalent = mutation.equivalent_ids(tests.get(f"test_{gid}", ""))
        row = Row(gid)
        for k, (kind, code, m) in enumerate(entries):
            if kind != "mutant":
                continue
            row.mutants += 1
            if m.id in equivalent:
                row.equivalent += 1
                continue
            res = judged["results"][(gid, k)]
            if not res.trusted["passed"]:
                row.killed += 1
            else:
                row.survivors.append((m.id, m.description,
                                      _diff(mutation.strip_markers(solutions[gid]), code)))
        rows.append(row)
    lines: list[str] = []
    print_table(judged["module"], rows, lines.append)
    out = REPO / "artifacts" / "mutation"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{judged['module']}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    weak = [r for r in rows if r.weak]
    assert not weak, "\n".join(lines)
