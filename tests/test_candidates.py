"""The candidates' programs are judged in runs small enough for the judge's cell timeout,
and a run that fails as a whole is split until only the candidate that failed it fails."""
from types import SimpleNamespace

from grader import candidates


def test_judge_chunks_keep_each_candidate_in_one_run():
    programs = {f"gid#{k}#p{i}": (k, i) for k in range(5) for i in range(2)}
    chunks = candidates.judge_chunks(programs, size=3)
    assert [len(c) for c in chunks] == [4, 4, 2]
    for chunk in chunks:
        owners = {key.rsplit("#", 1)[0] for key in chunk}
        assert all(sum(key.startswith(o + "#") for key in chunk) == 2 for o in owners)
    assert {k: v for c in chunks for k, v in c.items()} == programs


def test_a_failed_run_is_split_down_to_the_candidate_that_failed_it(monkeypatch):
    runs = []

    def judge(chunk, limits, *, cache=None):
        runs.append(sorted(chunk))
        if any(v == "slow" for v in chunk.values()):  # the whole run times out
            return {k: SimpleNamespace(error_type="ProgramJudge") for k in chunk}
        return {k: f"derived {v}" for k, v in chunk.items()}

    monkeypatch.setattr(candidates._programs, "judge", judge)
    programs = {"g#0#a": "x", "g#1#a": "y", "g#2#a": "slow", "g#3#a": "z"}
    out = candidates._judge_split(programs, "limits", "cache")
    assert out["g#0#a"] == "derived x" and out["g#1#a"] == "derived y"
    assert out["g#3#a"] == "derived z"
    assert out["g#2#a"].error_type == "ProgramJudge"
    assert runs[0] == sorted(programs) and ["g#2#a"] in runs
