"""Checks a module's exercises, judged as the grader judges them, against its variants.

    .venv/bin/python -m tests.exercise_check 02_vmap [--all-wrong]

Runs in the sandbox, without nbgrader: the source notebook (the reference run: it
must pass every one of its own checks), a blank submission (every exercise must
fail), and for variant index 0 and 1 all correct variants together (all pass) and all
wrong variants together (every exercise that has one fails, the others pass).
``--all-wrong`` adds the other wrong variants (index 2 and up), one submission per
index. Prints a table and exits 1 on any disagreement.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def check(assignment: str, *, all_wrong: bool = False, show=print) -> list[str]:
    """Returns the disagreements."""
    from grader import judge as _judge
    from grader import notebook as _nb
    from grader import programs as _programs
    from grader import runner as _runner
    from grader import sandbox as _sandbox

    source = json.loads((ROOT / "source" / assignment / f"{assignment}.ipynb").read_text())
    tests = _nb.test_ids(source)
    # The course's own notebooks and variants: trusted, so they also run (unsandboxed)
    # where bubblewrap is missing; where it works, they run in the sandbox as always.
    limits = _sandbox.Limits(cell_timeout=120, notebook_timeout=600, allow_unsandboxed=True)
    start = time.monotonic()
    result = _runner.reference_results(source, limits)
    reference = _runner.decode_all(result["files"], tests)
    ref_derived = _programs.judge(_programs.to_judge(reference, reference, with_expected=True),
                                  limits)
    problems = [p for t in tests for p in _judge.reference_problems(reference[t], t, ref_derived)]
    show(f"reference: {time.monotonic() - start:.1f} s"
         + ("" if not problems else f"  FAILS ITS OWN CHECKS ({len(problems)})"))
    solutions = _nb.submitted_solutions(source)
    stubs = {g: _nb.stub_source(s) for g, s in solutions.items()}
    variants = importlib.import_module(f"tests.variants.{assignment}").VARIANTS
    tests_of = {g: f"test_{g}" for g in solutions}

    def run(label: str, chosen: dict[str, str], expect_fail: set[str]) -> None:
        t = time.monotonic()
        rebuilt = _nb.rebuild(source, chosen, stubs)
        bundle = _runner.run_rebuilt(rebuilt, limits)
        student = _runner.decode_all(bundle["files"], tests)
        derived = _programs.judge(_programs.to_judge(student, reference), limits)
        verdicts = _runner.judge_bundle(bundle, tests, reference, derived=derived,
                                        reference_derived=ref_derived)
        bad = []
        for test_id, verdict in verdicts.items():
            should_fail = test_id in expect_fail
            if verdict["passed"] == should_fail:
                bad.append(test_id)
                problems.append(f"{label}: {test_id} {'passed' if verdict['passed'] else 'failed'}"
                                f" but should have {'failed' if should_fail else 'passed'}:\n"
                                f"{verdict['message']}")
        show(f"{label:<12} {time.monotonic() - t:6.1f} s  incidents={bundle['incidents']} "
             f"{'OK' if not bad else 'DISAGREES: ' + ', '.join(bad)}")

    run("blank", {}, set(tests))
    for index in (0, 1):
        chosen = dict(solutions)
        chosen.update({g: v["correct"][index] for g, v in variants.items()
                       if len(v["correct"]) > index})
        run(f"correct[{index}]", chosen, set())
    most = max(len(v["wrong"]) for v in variants.values())
    for index in range(most if all_wrong else min(2, most)):
        chosen = dict(solutions)
        wrong = {g: v["wrong"][index][1] for g, v in variants.items() if len(v["wrong"]) > index}
        chosen.update(wrong)
        run(f"wrong[{index}]", chosen, {tests_of[g] for g in wrong})
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("assignment")
    parser.add_argument("--all-wrong", action="store_true")
    args = parser.parse_args()
    problems = check(args.assignment, all_wrong=args.all_wrong)
    for p in problems:
        print("\n" + p)
    print(f"\n{len(problems)} disagreement(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
