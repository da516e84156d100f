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
# Inputs drawn reproducibly from hypothesis strategies (edges included)
from autograder._draws import draw
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
from autograder._hlo_text import assert_is_optimized_hlo
from autograder._hlo_text import assert_is_stablehlo
from autograder._hlo import assert_stablehlo_op_count
from autograder._hlo import collect_aliased_parameters
from autograder._timing import assert_benchmark_honest
from autograder._timing import SimulatedDevice
from autograder._timing import time_call
from autograder._timing import Timing
# --- 04_prng checks ---
from autograder._random_discipline import assert_deterministic
from autograder._random_keys import assert_distinct_keys
from autograder._random_discipline import assert_key_discipline
from autograder._random_keys import assert_keys_match
from autograder._random_discipline import assert_no_key_reuse
from autograder._random_stats import assert_sample_fraction
from autograder._random_stats import assert_sample_mean
from autograder._random_stats import assert_sample_variance
from autograder._random_keys import assert_typed_keys
from autograder._random_stats import assert_uncorrelated
from autograder._random_discipline import assert_varies_with_key
from autograder._random_tree import assert_wide_key_tree
from autograder._random_tree import collect_key_carrying_loops
from autograder._random_keys import collect_key_data
from autograder._random_tree import count_prng_ops
# --- 05_control_flow checks ---
from autograder._loop_facts import assert_compiled_as_loop
from autograder._loop_facts import collect_loop_facts
from autograder._loop_grads import assert_loop_grads_match_numeric
from autograder._loops import assert_jitted_with_static
from autograder._loops import assert_works_under_jit
# --- 06_sharding checks ---
from autograder._artifacts import COLLECTIVES
from autograder._collectives import assert_collective_in_hlo
from autograder._collectives import assert_collective_set
from autograder._collectives import assert_shard_map_uses
from autograder._collectives import collect_collectives
from autograder._collectives import collect_shard_map_primitives
from autograder._mesh import assert_device_set
from autograder._mesh import assert_mesh
from autograder._mesh import collect_sharding_devices
from autograder._placement import assert_shard_shapes
from autograder._placement import assert_sharded_as
from autograder._placement import collect_slice_devices
# --- 07_capstone checks ---
from autograder._data_parallel import assert_step_is_data_parallel
from autograder._data_parallel import collect_step_placement
from autograder._epoch import assert_epoch_samples_fresh_batches
from autograder._epoch import collect_epoch_batches
from autograder._train_step import assert_keeps_shapes_and_dtypes
from autograder._train_step import assert_loss_falls_below
from autograder._train_step import assert_state_changes
from autograder._train_step import assert_train_step_compiles_once
from autograder._train_step import collect_training_run

# --- 05_control_flow checks (issue 17: lax.map in chunks) ---
from autograder._mapping import assert_maps_in_chunks
from autograder._mapping import collect_scan_facts
from autograder._mapping import explain_map_chunks
# --- 06_sharding checks (issue 17: model parallelism) ---
from autograder._parallel import assert_collective_counts
from autograder._parallel import assert_tree_placed_as
from autograder._parallel import collect_collective_counts
from autograder._parallel import collect_tree_placement
from autograder._parallel import explain_collective_counts
from autograder._parallel import explain_tree_placement
# --- 07_capstone checks (issue 17: a step that must not donate) ---
from autograder._donation import assert_donates_nothing
from autograder._donation import collect_donated_inputs
from autograder._donation import explain_donated_inputs
# --- 08_autodiff checks ---
from autograder._autodiff import assert_arrays_at_most
from autograder._autodiff import assert_saved_residuals
from autograder._autodiff import collect_array_sizes
from autograder._autodiff import collect_saved_residuals
from autograder._autodiff import explain_array_sizes
from autograder._autodiff import explain_saved_residuals
from autograder._autodiff import export_residuals
from autograder._autodiff import residuals_of
from autograder._autodiff_memory import assert_memory_reduced
from autograder._autodiff_memory import collect_memory
from autograder._autodiff_memory import explain_memory_reduction
from autograder._pytree_node import assert_node
from autograder._pytree_node import collect_node
from autograder._pytree_node import explain_node
# --- 09_debugging checks ---
from autograder._checkify import assert_checkify_errors
from autograder._checkify import collect_checkify_errors
from autograder._debugging import assert_callback_log
from autograder._debugging import assert_plain_result
from autograder._transfers import assert_no_implicit_transfers
from autograder._debugging import collect_callback_log
from autograder._flags import COURSE_FLAGS
from autograder._flags import assert_flags_at_defaults
from autograder._flags import assert_flags_restored
from autograder._flags import collect_flags
from autograder._exported import assert_dot_dtypes
from autograder._exported import assert_named_scopes
from autograder._exported import exported_text
from autograder._program_text import dot_facts
from autograder._program_text import scope_facts
from autograder._cache_misses import assert_cache_miss_report
from autograder._cache_misses import collect_cache_miss_report
from autograder._recompiles import assert_no_retraces
from autograder._recompiles import collect_retraces
from autograder._traces import assert_profile_written
from autograder._traces import collect_profile
from autograder._traces import read_trace_events
from autograder._traces import trace_facts
# --- 10_pallas checks ---
from autograder._pallas import assert_kernel_structure
from autograder._pallas_blocks import assert_blocks_in_bounds
from autograder._pallas_blocks import collect_block_bounds
from autograder._pallas_program import collect_kernel_facts
from autograder._pallas_tpu import assert_tpu_blocks
from autograder._pallas_tpu import collect_tpu_blocks
from autograder._pallas_tpu import tpu_block_problems
from autograder._pallas_rules import explain_kernel_structure
from autograder._pallas import export_program

__all__ = [name for name in dir() if not name.startswith("_")]
