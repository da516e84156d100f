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
# --- 02_vmap checks ---
from autograder._vmap import assert_batched_without_loop
from autograder._vmap import assert_vmap_matches_loop
from autograder._vmap import collect_loop_outputs
from autograder._vmap import count_jaxpr_eqns
# --- 03_jit checks ---
from autograder._compile import assert_compiles_at_most
from autograder._compile import assert_jitted
from autograder._compile import collect_compilations
from autograder._compile import Compilations
from autograder._hlo import assert_donated
from autograder._hlo import assert_is_optimized_hlo
from autograder._hlo import assert_is_stablehlo
from autograder._hlo import assert_stablehlo_op_count
from autograder._hlo import collect_aliased_parameters
from autograder._timing import assert_benchmark_honest
from autograder._timing import SimulatedDevice
from autograder._timing import time_call
from autograder._timing import Timing
# --- 04_prng checks ---
from autograder._random import assert_deterministic
from autograder._random import assert_distinct_keys
from autograder._random import assert_key_discipline
from autograder._random import assert_keys_match
from autograder._random import assert_no_key_reuse
from autograder._random import assert_sample_fraction
from autograder._random import assert_sample_mean
from autograder._random import assert_sample_variance
from autograder._random import assert_typed_keys
from autograder._random import assert_uncorrelated
from autograder._random import assert_varies_with_key
from autograder._random import assert_wide_key_tree
from autograder._random import collect_key_carrying_loops
from autograder._random import collect_key_data
from autograder._random import count_prng_ops
# --- 05_control_flow checks ---
from autograder._loops import assert_compiled_as_loop
from autograder._loops import assert_jitted_with_static
from autograder._loops import assert_loop_grads_match_numeric
from autograder._loops import assert_works_under_jit
from autograder._loops import collect_loop_facts
# --- 06_sharding checks ---
from autograder._sharding import COLLECTIVES
from autograder._sharding import assert_collective_in_hlo
from autograder._sharding import assert_collective_set
from autograder._sharding import assert_device_set
from autograder._sharding import assert_mesh
from autograder._sharding import assert_shard_map_uses
from autograder._sharding import assert_shard_shapes
from autograder._sharding import assert_sharded_as
from autograder._sharding import collect_collectives
from autograder._sharding import collect_shard_map_primitives
from autograder._sharding import collect_sharding_devices
from autograder._sharding import collect_slice_devices
# --- 07_capstone checks ---
from autograder._training import assert_epoch_samples_fresh_batches
from autograder._training import assert_keeps_shapes_and_dtypes
from autograder._training import assert_loss_falls_below
from autograder._training import assert_state_changes
from autograder._training import assert_step_is_data_parallel
from autograder._training import assert_train_step_compiles_once
from autograder._training import collect_epoch_batches
from autograder._training import collect_step_placement
from autograder._training import collect_training_run

# --- 10_pallas checks ---
from autograder._pallas import assert_kernel_structure
from autograder._pallas_program import collect_kernel_facts
from autograder._pallas import explain_kernel_structure
from autograder._pallas import export_program

__all__ = [name for name in dir() if not name.startswith("_")]
