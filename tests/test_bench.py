"""``make bench``'s own pieces: the class it grades and the chapter speed claims it checks.

The benchmark itself is ``make bench`` (minutes of measurements, not a test); these
tests make sure that what it reports is computed from what it claims to measure.
"""
from __future__ import annotations

import collections

import nbformat
import pytest

from grader.tools import bench as _bench
from grader.tools import bench_grading as _bench_grading
from grader.course import generate_release, make_scratch_course
from grader.pipeline import preflight


def _jit_values(**changes):
    values = {"sizes": [1_000, 30_000, 1_000_000], "eager_ms": [0.5, 0.9, 20.0],
              "jit_ms": [0.05, 0.08, 2.0], "steps": [10, 40, 160],
              "compile_s": {"Python for loop": [0.02, 0.08, 0.3],
                            "lax.fori_loop": [0.02, 0.02, 0.021]},
              "first_step_s": 0.2, "step_median_ms": 0.4, "dispatched_s": 1e-5,
              "finished_s": 2e-3, "benchmark": {"speedup": 9.0}}
    values.update(changes)
    return values


def test_jit_claims_hold_on_the_shape_the_chapter_describes():
    claims = _bench._jit_claims(_jit_values())
    assert [c["section"] for c in claims] == ["4.1", "4.2", "4.2", "5.3", "7"]
    assert all(c["holds"] for c in claims), claims
    assert claims[1]["measured"] == "1,000: 10.0x, 30,000: 11.2x, 1,000,000: 10.0x"


@pytest.mark.parametrize("change, section", [
    ({"jit_ms": [0.05, 1.0, 2.0]}, "4.2"),  # jit slower than eager at 30,000
    ({"compile_s": {"Python for loop": [0.02, 0.02, 0.02],
                    "lax.fori_loop": [0.02, 0.02, 0.02]}}, "5.3"),  # nothing grows
    ({"first_step_s": 0.001}, "7"),  # the first step compiled nothing
    ({"finished_s": 1e-5, "dispatched_s": 1e-5}, "4.1"),
])
def test_a_broken_jit_claim_is_reported(change, section):
    failed = [c["section"] for c in _bench._jit_claims(_jit_values(**change)) if not c["holds"]]
    assert failed == [section]


def test_vmap_claims():
    timings = {"Python loop of jit(predict)": [1.0, 8.0, 60.0], "vmap(predict)": [0.5, 0.6, 1.0],
               "jit(vmap(predict))": [0.05, 0.06, 0.1]}
    claims = _bench._vmap_claims({"batch_sizes": [8, 64, 512], "timings_ms": timings})
    assert all(c["holds"] for c in claims), claims
    timings["jit(vmap(predict))"] = [0.05, 5.0, 70.0]  # slower than the loop, and growing
    assert [c["holds"] for c in _bench._vmap_claims(
        {"batch_sizes": [8, 64, 512], "timings_ms": timings})] == [False, True, False]


def test_run_notebook_reads_the_kernel_after_the_last_cell(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import time\nstart = time.perf_counter()\ntime.sleep(0.3)"),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("speed = {'a': [1.5, 2]}\nelapsed = time.perf_counter() - start"),
    ])
    wall, cells, errors, values = _bench.run_notebook(
        nb, tmp_path, reads={"speed": "speed", "elapsed": "elapsed", "n": "len(speed['a'])"})
    assert errors == []
    assert values["speed"] == {"a": [1.5, 2]} and values["n"] == 2
    assert 0.3 <= values["elapsed"] <= wall
    assert len(cells) == 3 and cells[1] == 0.0 and cells[0] >= 0.3  # the read is not a cell
    assert len(nb.cells) == 3


def test_the_class_mixes_full_partial_blank_and_broken(tmp_path):
    course = make_scratch_course(tmp_path / "c", ["01_grad"])
    generate_release(course, "01_grad")
    kinds = _bench_grading.build_class(course, "01_grad", 24)
    counts = collections.Counter(k.split(":")[0] for k in kinds.values())
    assert counts == {"full": 6, "partial": 6, "blank": 6, "broken": 6}
    broken = collections.Counter(k for k in kinds.values() if k.startswith("broken"))
    assert broken == {"broken:truncated": 2, "broken:crash": 2, "broken:syntax": 2}
    for student, kind in kinds.items():
        problem = preflight(course, "01_grad", student)
        assert (problem is not None) == (kind == "broken:truncated"), (student, kind, problem)
