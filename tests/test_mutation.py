"""Mutants of a solution's syntax tree (grader/mutation.py)."""
from grader import mutation

SOLUTION = (
    "def binarize(x):\n"
    "    ### BEGIN SOLUTION\n"
    "    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)\n"
    "    ### END SOLUTION\n"
)


def test_a_site_inside_a_call_that_starts_at_the_same_place():
    # `jnp.where(...)` and the `.astype(...)` called on its result start at the same
    # column: the where mutants apply to the inner call instead of failing on the outer.
    made = {m.id: m.source for m in mutation.mutants(SOLUTION)}
    assert made["where@2:11"].endswith("return 1.0.astype(x.dtype)")
    assert made["argswap@2:11"].endswith("return jnp.where(1.0, x >= 0, -1.0).astype(x.dtype)")


def test_candidate_programs_are_judged_in_batches(monkeypatch):
    from grader import candidates

    sizes = []

    def fake_judge(batch, limits, cache=None):
        sizes.append(len(batch))
        return {k: f"derived {k}" for k in batch}

    monkeypatch.setattr(candidates._programs, "judge", fake_judge)
    programs = {f"p{i}": i for i in range(30)}
    derived = candidates.judge_in_batches(programs, None, size=12)
    assert sizes == [12, 12, 6]
    assert derived == {f"p{i}": f"derived p{i}" for i in range(30)}
    assert candidates.judge_in_batches({}, None) == {}
