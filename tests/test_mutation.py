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


EFFECTS = '''def report(fn, calls):
    """Runs fn on every call with a handler attached; leaves the logger as it was."""
    ### BEGIN SOLUTION
    messages = []
    handler = Collect(messages)
    logger.addHandler(handler)
    try:
        with jax.explain_cache_misses(True):
            for args in calls:
                fn(*args)
    finally:
        logger.removeHandler(handler)
    return messages, lowered.compile().as_text()
    ### END SOLUTION
'''


def test_mistakes_of_code_with_effects():
    made = {m.description: m.source for m in mutation.mutants(EFFECTS)}
    # State not restored when the call raises: the finally block runs on success only.
    flat = made["run the finally block only when nothing raised"]
    assert "finally" not in flat and flat.index("fn(*args)") < flat.index("removeHandler")
    # State not restored at all, and the effect itself forgotten.
    assert "removeHandler" not in made["leave out the call removeHandler(...)"]
    assert "addHandler" not in made["leave out the call addHandler(...)"]
    assert "explain_cache_misses(False)" in made["True -> False"]
    assert made["return the first two results in the other order"].endswith(
        "return (lowered.compile().as_text(), messages)")
    assert made["skip .compile() in a method chain"].endswith("return (messages, lowered.as_text())")


def test_keyword_values_swapped_and_membership_inverted():
    solution = ("def f(cls, meta, total, warm):\n    ### BEGIN SOLUTION\n"
                "    data = [n for n in names if n not in meta]\n"
                "    return sched(init_value=0.0, warmup_steps=warm, decay_steps=total, meta=list(meta))\n"
                "    ### END SOLUTION\n")
    made = {m.description: m.source for m in mutation.mutants(solution)}
    assert "warmup_steps=total, decay_steps=warm" in made[
        "swap the values of warmup_steps= and decay_steps="]
    assert "warmup_steps=list(meta)" in made["swap the values of warmup_steps= and meta="]
    assert not any("init_value=warm" in src for src in made.values())  # a constant stays
    assert "if n in meta" in made["NotIn -> In"]


def test_an_exercise_with_no_counted_mutant_has_no_score():
    from grader.tools.mutants import Row, print_table

    rows = [Row("e_none"), Row("e_equivalent", mutants=2, equivalent=2),
            Row("e_strong", mutants=10, killed=9), Row("e_weak", mutants=10, killed=8)]
    assert [r.score for r in rows[:2]] == [None, None] and rows[2].score == 0.9
    assert [r.weak for r in rows] == [True, True, False, True]
    lines = []
    print_table("m", rows, lines.append)
    assert lines[2].split()[-1] == "none" and lines[4].split()[-1] == "90%"
