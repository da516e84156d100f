"""The candidates' programs are judged in runs small enough for the judge's cell timeout."""
from grader.candidates import judge_in_batches


def test_judge_in_batches_splits_and_merges():
    runs = []

    def fake_judge(chunk, limits, *, cache=None):
        runs.append((list(chunk), limits, cache))
        return {key: f"derived {value}" for key, value in chunk.items()}

    programs = {f"gid#{k}#p": k for k in range(7)}
    out = judge_in_batches(programs, "limits", cache="cache", batch=3, judge=fake_judge)
    assert [keys for keys, _, _ in runs] == [["gid#0#p", "gid#1#p", "gid#2#p"],
                                             ["gid#3#p", "gid#4#p", "gid#5#p"], ["gid#6#p"]]
    assert all(limits == "limits" and cache == "cache" for _, limits, cache in runs)
    assert out == {key: f"derived {value}" for key, value in programs.items()}


def test_judge_in_batches_without_programs_runs_no_judge():
    runs = []
    assert judge_in_batches({}, None, judge=lambda *a, **k: runs.append(a)) == {}
    assert runs == []
