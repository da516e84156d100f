"""A JAX-aware autograder for nbgrader test cells.

``assert_*`` checks raise :class:`CheckFailure` with a message that teaches;
``collect_*`` and ``count_*`` helpers return facts. Test cells call these checks
with the student's function and its inputs, e.g.::

    from autograder import assert_matches_reference
    assert_matches_reference(loss_grad, reference_grad, (w, x, y), section="1.3")
"""
# Feedback and output hygiene
from autograder._feedback import CheckFailure
from autograder._feedback import format_failure
from autograder._quiet import quiet
# Values: the ladder type, shape, dtype, finite, values
from autograder._numeric import assert_matches_reference
from autograder._numeric import assert_tree_matches
from autograder._numeric import call_student
from autograder._numeric import collect_tree_mismatches
# Gradients
from autograder._grads import assert_grad_matches_numeric
from autograder._grads import assert_grads_match_numeric
from autograder._grads import collect_grad_errors
# Compiled output: jaxprs, StableHLO, HLO, compilations
from autograder._jaxpr import assert_no_primitive
from autograder._jaxpr import assert_uses_primitive
from autograder._jaxpr import count_primitives
from autograder._jaxpr import iter_eqns
from autograder._jaxpr import trace_jaxpr
from autograder._hlo import compiled_hlo_text
from autograder._hlo import count_stablehlo_ops
from autograder._hlo import stablehlo_text
# PRNG keys (module 04)
# Sharding (module 06)

__all__ = [name for name in dir() if not name.startswith("_")]
