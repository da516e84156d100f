"""A JAX-aware autograder for nbgrader test cells: the one namespace notebooks import.

``assert_*`` checks raise :class:`CheckFailure` with a message that teaches;
``collect_*`` and ``count_*`` helpers return facts. Test cells call these checks
with the student's function and its inputs, e.g.::

    from autograder import assert_matches_reference
    assert_matches_reference(loss_grad, reference_grad, (w, x, y), section="1.3")

The checks live in subpackages (docs/architecture.md): ``core`` (how every check
observes, expects and explains; the wire format between the student's kernel and the
grader), ``programs`` (exporting a student's function and the facts read from
programs), and one package per topic (``autodiff``, ``batching``, ``jit``, ``random``,
``control_flow``, ``sharding``, ``training``, ``debugging``, ``pallas``). Layers point
down: ``core`` imports nothing else of the package, ``programs`` only ``core``
(tests/test_imports.py). Importing this package imports every check, which registers
its explainer with ``core`` (the grader explains a failure by the check's name).
Submodules are the grader's own: students import from here only.
"""
import types as _types

# core: the check vocabulary: failures, values and pytrees, drawn inputs, quiet output
from autograder.core.feedback import CheckFailure, format_failure
from autograder.core.quiet import quiet
from autograder.core.draws import draw
from autograder.core.numeric import (
    assert_matches_reference, assert_tree_matches, call_student, collect_tree_mismatches)

# programs: compiled output: jaxprs, StableHLO, optimized HLO, exported programs
from autograder.programs.jaxpr import (
    assert_no_primitive, assert_uses_primitive, count_primitives, iter_eqns, trace_jaxpr)
from autograder.programs.hlo import (
    compiled_hlo_text, count_stablehlo_ops, stablehlo_text, assert_donated,
    assert_stablehlo_op_count, collect_aliased_parameters)
from autograder.programs.hlo_text import assert_is_optimized_hlo, assert_is_stablehlo
from autograder.programs.artifacts import COLLECTIVES
from autograder.programs.exported import (
    assert_dot_dtypes, assert_named_scopes, exported_text)
from autograder.programs.text import dot_facts, scope_facts
from autograder.programs.pallas_kernels import collect_kernel_facts

# autodiff: gradients checked numerically; differentiated programs (01, 08)
from autograder.autodiff.grads import (
    assert_grad_matches_numeric, assert_grads_match_numeric, collect_grad_errors)
from autograder.autodiff.facts import (
    assert_arrays_at_most, assert_saved_residuals, assert_work_at_most, collect_array_sizes,
    collect_saved_residuals, explain_array_sizes, explain_saved_residuals, explain_work,
    export_residuals, residuals_of)
from autograder.autodiff.memory import (
    assert_memory_reduced, collect_memory, explain_memory_reduction)
from autograder.autodiff.pytree_node import assert_node, collect_node, explain_node

# batching: batching (02, 05)
from autograder.batching.vmap import (
    assert_batched_without_loop, assert_vmap_matches_loop, collect_loop_outputs,
    count_jaxpr_eqns)
from autograder.batching.mapping import (
    assert_maps_in_chunks, collect_scan_facts, explain_map_chunks)

# jit: compilation, donation and timing (03)
from autograder.jit.compile import (
    assert_compiles_at_most, assert_jitted, collect_compilations, Compilations)
from autograder.jit.timing import (
    assert_benchmark_honest, SimulatedDevice, time_call, Timing)
from autograder.jit.donation import (
    assert_donates_nothing, collect_donated_inputs, explain_donated_inputs)
from autograder.jit.recompiles import assert_no_retraces, collect_retraces

# random: PRNG keys and distributions (04)
from autograder.random.discipline import (
    assert_deterministic, assert_key_discipline, assert_no_key_reuse,
    assert_varies_with_key)
from autograder.random.keys import (
    assert_distinct_keys, assert_keys_match, assert_typed_keys, collect_key_data)
from autograder.random.stats import (
    assert_sample_fraction, assert_sample_mean, assert_sample_variance,
    assert_uncorrelated)
from autograder.random.tree import (
    assert_wide_key_tree, collect_key_carrying_loops, count_prng_ops)

# control_flow: control flow and loops (05)
from autograder.control_flow.loop_facts import (
    assert_compiled_as_loop, assert_loops_until_settled, collect_loop_facts)
from autograder.control_flow.loop_grads import assert_loop_grads_match_numeric
from autograder.control_flow.jit_compat import (
    assert_jitted_with_static, assert_works_under_jit)

# sharding: meshes, placement and collectives (06)
from autograder.sharding.collectives import (
    assert_collective_in_hlo, assert_collective_set, assert_shard_map_uses,
    collect_collectives, collect_shard_map_primitives)
from autograder.sharding.mesh import (
    assert_device_set, assert_mesh, collect_sharding_devices)
from autograder.sharding.placement import (
    assert_shard_shapes, assert_sharded_as, collect_slice_devices)
from autograder.sharding.data_parallel import (
    assert_step_is_data_parallel, collect_step_placement)
from autograder.sharding.parallel import (
    assert_collective_counts, assert_tree_placed_as, collect_collective_counts,
    collect_tree_placement, explain_collective_counts, explain_tree_placement)

# training: train steps and epochs (07)
from autograder.training.epoch import (
    assert_epoch_samples_fresh_batches, collect_epoch_batches)
from autograder.training.train_step import (
    assert_keeps_shapes_and_dtypes, assert_loss_falls_below, assert_state_changes,
    assert_train_step_compiles_once, collect_training_run)

# debugging: the debugging chapter (09)
from autograder.debugging.checkify import assert_checkify_errors, collect_checkify_errors
from autograder.debugging.callbacks import (
    assert_callback_log, assert_plain_result, collect_callback_log)
from autograder.debugging.flags import (
    COURSE_FLAGS, assert_flags_at_defaults, assert_flags_restored, collect_flags)
from autograder.debugging.cache_misses import (
    assert_cache_miss_report, collect_cache_miss_report)
from autograder.debugging.transfers import assert_no_implicit_transfers
from autograder.debugging.traces import (
    assert_profile_written, collect_profile, read_trace_events, trace_facts)

# pallas: Pallas kernels (10)
from autograder.pallas.checks import assert_kernel_structure, export_program
from autograder.pallas.blocks import assert_blocks_in_bounds, collect_block_bounds
from autograder.pallas.tpu import assert_tpu_blocks, collect_tpu_blocks, tpu_block_problems
from autograder.pallas.rules import explain_kernel_structure

__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and not isinstance(value, _types.ModuleType))
