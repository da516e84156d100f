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
