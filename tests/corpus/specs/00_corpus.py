"""Trusted probes of the corpus assignment (tests/corpus/assignment.py)."""
from grader.trusted import Probe

_INPUTS = "import numpy as np\nimport jax.numpy as jnp\n_rng = np.random.default_rng(7)\n"

PROBES = {
    "test_corpus_add": [
        Probe("add(_a, _b)", _INPUTS + "_a = jnp.asarray(_rng.normal(size=6), jnp.float32)\n"
                                      "_b = jnp.asarray(_rng.normal(size=6), jnp.float32)\n"),
    ],
    "test_corpus_norm2": [
        Probe("norm2(_x)", _INPUTS + "_x = jnp.asarray(_rng.normal(size=(3, 4)), jnp.float32)\n"),
    ],
}
