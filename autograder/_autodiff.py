"""Facts about differentiated programs, derived from exported programs (08_autodiff).

Each check has three parts, so that the student's kernel and the trusted grader
share one judgement and one message:

- ``export_*`` runs the student's function once, under ``jax.jit``, and returns a
  ``jax.export.Exported``: serialized StableHLO that no longer holds student Python;
- ``collect_*`` takes that program (an ``Exported`` or its serialized bytes) and
  returns plain data: array sizes, the shapes of saved residuals, compiled memory;
- ``explain_*`` is pure: it compares plain data and returns the teaching message
  (or ``None``); it works on data that went through JSON.

``assert_*`` chains the three. Memory is read from ``compiled.memory_analysis()`` of
the exported program compiled on its own (never from wall-clock time), and only as a
ratio to a baseline compiled the same way on the same backend.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import numpy as np

from autograder._feedback import CheckFailure, call_signature, describe_value, format_failure
from autograder._numeric import call_student, collect_tree_mismatches

# A ranked tensor type in StableHLO text: tensor<4x400xf32>, tensor<f32>, tensor<3xi1>.
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z][a-z0-9]*)>")


# ---------------------------------------------------------------- exporting


def export_program(fn: Callable, args: Sequence = (), *, name: str | None = None,
                   section: str | None = None):
    """``jax.export.export(jax.jit(fn))(*args)``, with errors turned into feedback.

    >>> import jax.numpy as jnp
    >>> export_program(jnp.sin, (jnp.ones(3),)).out_avals
    (ShapedArray(float32[3]),)
    """
    __tracebackhide__ = True
    import jax

    label = name or call_signature(fn, args)

    def export(*a):
        return jax.export.export(jax.jit(fn))(*a)

    exported, _ = call_student(export, tuple(args), name=f"exporting {label}", section=section)
    return exported


def export_residuals(fn: Callable, args: Sequence = (), *, name: str | None = None,
                     section: str | None = None):
    """Exports the forward half of reverse mode: ``args -> residuals of jax.vjp(fn)``.

    The outputs of this program are exactly the arrays that ``jax.vjp(fn, *args)``
    keeps for the backward pass (the leaves of the returned VJP function), so their
    shapes are a fact of the exported program.
    """
    __tracebackhide__ = True
    import jax

    def residuals(*a):
        return jax.tree.leaves(jax.vjp(fn, *a)[1])

    residuals.__name__ = f"residuals of {getattr(fn, '__name__', 'fn')}"
    return export_program(residuals, args, name=name or f"the residuals of "
                          f"{call_signature(fn, args)}", section=section)


def _exported(program):
    """An ``Exported`` from an ``Exported`` or its serialized bytes."""
    if isinstance(program, (bytes, bytearray, memoryview)):
        import jax

        return jax.export.deserialize(bytearray(program))
    return program


def _text(program) -> str:
    if isinstance(program, str):
        return program
    return _exported(program).mlir_module()


# ---------------------------------------------------------------- array sizes


def collect_array_sizes(program) -> dict:
    """The largest array in a program: ``{"largest_elements", "largest_type", "arrays"}``.

    Args:
      program: an ``Exported``, its serialized bytes, or StableHLO text.

    >>> import jax, jax.numpy as jnp
    >>> f = lambda x: jnp.sin(x) * 2
    >>> facts = collect_array_sizes(jax.export.export(jax.jit(jax.jacrev(f)))(jnp.ones(5)))
    >>> facts["largest_elements"], facts["largest_type"]
    (25, 'tensor<5x5xf32>')
    """
    largest, largest_type, count = 0, "", 0
    for match in _TENSOR.finditer(_text(program)):
        dims = [int(d) for d in match.group(1).split("x") if d]
        n = math.prod(dims)
        count += 1
        if n > largest:
            largest, largest_type = n, match.group(0)
    return {"largest_elements": int(largest), "largest_type": largest_type, "arrays": count}


def explain_array_sizes(observed: dict, *, at_most: int, name: str, what: str,
                        section: str | None = None, hint: str | None = None,
                        fix: str | None = None) -> str | None:
    """The message when the program holds an array of more than ``at_most`` elements.

    >>> explain_array_sizes({"largest_elements": 10, "largest_type": "tensor<10xf32>"},
    ...                     at_most=99, name="hvp", what="as many as the Hessian") is None
    True
    >>> print(explain_array_sizes({"largest_elements": 10000,
    ...                            "largest_type": "tensor<100x100xf32>"},
    ...                           at_most=9999, name="hvp",
    ...                           what="as many as the 100 x 100 Hessian"))
    the program of hvp builds an array of 10000 entries, as many as the 100 x 100 Hessian
      expected: no array with more than 9999 elements
      got:      tensor<100x100xf32> (10000 elements)
      likely cause: the matrix was formed (jax.hessian, jax.jacfwd or jax.jacrev build it column by column) instead of applied to a vector
    """
    n = int(observed["largest_elements"])
    if n <= at_most:
        return None
    return format_failure(
        f"the program of {name} builds an array of {n} entries, {what}",
        expected=f"no array with more than {at_most} elements",
        got=f"{observed['largest_type']} ({n} elements)",
        cause=hint or "the matrix was formed (jax.hessian, jax.jacfwd or jax.jacrev build it "
                      "column by column) instead of applied to a vector",
        fix=fix, section=section)


def assert_arrays_at_most(fn: Callable, args: Sequence, at_most: int, *, what: str,
                          name: str | None = None, section: str | None = None,
                          hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that no array in the exported program of ``fn`` has more than ``at_most`` elements.

    This is how "without forming the Jacobian (or Hessian)" is checked: a Jacobian
    built by ``jacfwd``/``jacrev`` needs an identity matrix and a batch of tangents
    (or cotangents) the size of the matrix; products with a vector do not.

    Args:
      fn: the function to export (with ``jax.jit``) for ``args``.
      at_most: the largest number of elements an array may hold.
      what: completes the message "builds an array of N entries, ...", e.g.
        "as many as the 300 x 300 Jacobian".

    >>> import jax, jax.numpy as jnp
    >>> def hvp(x, v):
    ...     return jax.jvp(jax.grad(lambda z: jnp.sum(z ** 4)), (x,), (v,))[1]
    >>> assert_arrays_at_most(hvp, (jnp.ones(50), jnp.ones(50)), 50 * 50 - 1,
    ...                       what="as many as the 50 x 50 Hessian")
    """
    __tracebackhide__ = True
    label = name or call_signature(fn, args)
    program = export_program(fn, args, name=label, section=section)
    message = explain_array_sizes(collect_array_sizes(program), at_most=at_most, name=label,
                                  what=what, section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")


# ---------------------------------------------------------------- saved residuals


def collect_saved_residuals(program) -> list[dict]:
    """The outputs of an exported residual program: ``[{"shape", "dtype", "bytes"}]``.

    >>> import jax, jax.numpy as jnp
    >>> prog = export_residuals(lambda x: jnp.sum(jnp.sin(x)), (jnp.ones(3),))
    >>> collect_saved_residuals(prog)
    [{'shape': [3], 'dtype': 'float32', 'bytes': 12}]
    """
    out = []
    for aval in _exported(program).out_avals:
        shape = [int(d) for d in aval.shape]
        dtype = np.dtype(aval.dtype)
        out.append({"shape": shape, "dtype": str(dtype),
                    "bytes": int(math.prod(shape) * dtype.itemsize)})
    return out


def _shape_text(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def explain_saved_residuals(observed: list[dict], expected: list[dict], *,
                            shapes: Sequence[Sequence[int]], name: str,
                            section: str | None = None, hint: str | None = None,
                            fix: str | None = None) -> str | None:
    """Compares how many residuals of each tracked shape are saved.

    Only the ``shapes`` listed are compared (the activations whose saving the
    exercise is about); parameters and inputs saved as residuals are not.

    >>> act = {"shape": [4, 8, 32], "dtype": "float32", "bytes": 4096}
    >>> print(explain_saved_residuals([act, act, act], [act], shapes=[(4, 8, 32)],
    ...                               name="loss", section="5.3"))
    the backward pass of loss saves the wrong residuals
      expected: 1 saved array(s) of shape [4,8,32]
      got:      3 saved array(s) of shape [4,8,32]
      all residuals saved: 3 x float32[4,8,32]
      likely cause: the checkpoint policy saves more (or fewer) intermediate values than asked
      fix: print them with jax.ad_checkpoint.print_saved_residuals(loss, params, x) and compare with the policy
      reread: section 5.3
    """
    def count(residuals, shape):
        return sum(1 for r in residuals if list(r["shape"]) == [int(d) for d in shape])

    wrong = [(s, count(expected, s), count(observed, s)) for s in shapes
             if count(expected, s) != count(observed, s)]
    if not wrong:
        return None
    tally: dict[str, int] = {}
    for r in observed:
        key = f"{r['dtype']}{_shape_text(r['shape'])}"
        tally[key] = tally.get(key, 0) + 1
    listing = ", ".join(f"{n} x {k}" for k, n in tally.items()) or "none"
    return format_failure(
        f"the backward pass of {name} saves the wrong residuals",
        expected="; ".join(f"{e} saved array(s) of shape {_shape_text(s)}" for s, e, _ in wrong),
        got="; ".join(f"{g} saved array(s) of shape {_shape_text(s)}" for s, _, g in wrong),
        details=[f"all residuals saved: {listing}"],
        cause=hint or "the checkpoint policy saves more (or fewer) intermediate values than asked",
        fix=fix or f"print them with jax.ad_checkpoint.print_saved_residuals({name}, params, x) "
                   "and compare with the policy",
        section=section)


def assert_saved_residuals(fn: Callable, reference: Callable, args: Sequence, *,
                           shapes: Sequence[Sequence[int]], name: str | None = None,
                           section: str | None = None, hint: str | None = None,
                           fix: str | None = None) -> None:
    """Asserts that reverse mode saves as many arrays of each of ``shapes`` as the reference.

    Both sides are facts of exported programs (:func:`export_residuals`).

    >>> import jax, jax.numpy as jnp
    >>> def f(x):
    ...     return jnp.sum(jnp.sin(jnp.sin(x)))
    >>> assert_saved_residuals(jax.checkpoint(f), jax.checkpoint(f), (jnp.ones(3),), shapes=[(3,)])
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    expected = collect_saved_residuals(export_residuals(reference, args))
    observed = collect_saved_residuals(export_residuals(fn, args, section=section))
    message = explain_saved_residuals(observed, expected, shapes=shapes, name=label,
                                      section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")


# ---------------------------------------------------------------- compiled memory


def collect_memory(program) -> dict:
    """Compiles an exported program on its own and reads ``memory_analysis()``.

    Returns ``{"temp_bytes", "argument_bytes", "output_bytes", "platform"}`` (``None``
    for sizes the backend does not report).

    >>> import jax, jax.numpy as jnp
    >>> prog = jax.export.export(jax.jit(lambda x: jnp.sin(x) @ x))(jnp.ones((8, 8)))
    >>> collect_memory(prog)["argument_bytes"]
    256
    """
    import jax

    exp = _exported(program)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exp.in_avals]
    args, kwargs = jax.tree.unflatten(exp.in_tree, specs)
    compiled = jax.jit(exp.call).lower(*args, **kwargs).compile()
    stats = compiled.memory_analysis()

    def size(attr):
        value = getattr(stats, attr, None) if stats is not None else None
        return None if value is None else int(value)

    return {"temp_bytes": size("temp_size_in_bytes"),
            "argument_bytes": size("argument_size_in_bytes"),
            "output_bytes": size("output_size_in_bytes"),
            "platform": jax.default_backend()}


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**16 else f"{n} bytes"


def explain_memory_reduction(observed: dict, baseline: dict, *, factor: float, name: str,
                             baseline_name: str, section: str | None = None,
                             hint: str | None = None, fix: str | None = None) -> str | None:
    """The message when ``observed`` temporary memory is not ``factor`` x below ``baseline``.

    >>> base = {"temp_bytes": 4_000_000}
    >>> explain_memory_reduction({"temp_bytes": 500_000}, base, factor=4, name="a",
    ...                          baseline_name="b") is None
    True
    >>> print(explain_memory_reduction({"temp_bytes": 3_900_000}, base, factor=4,
    ...                                name="jax.grad(remat_loss)",
    ...                                baseline_name="jax.grad(stack_loss)"))
    the compiled jax.grad(remat_loss) needs too much temporary memory
      expected: at most 1/4 of jax.grad(stack_loss)'s 3.81 MiB, i.e. 0.95 MiB
      got:      3.72 MiB (1.03x less than without checkpointing)
      likely cause: every layer's activations are still kept for the backward pass: the checkpoint is missing, wraps the whole loss (which recomputes everything and then saves it all again), or sits inside an unrolled Python loop that XLA is free to reschedule
      fix: checkpoint the body of the lax.scan over layers: lax.scan(jax.checkpoint(block), h, params)
    """
    temp, base = observed.get("temp_bytes"), baseline.get("temp_bytes")
    if temp is None or base is None:
        return format_failure(
            f"the memory of the compiled {name} cannot be measured on this backend",
            expected="compiled.memory_analysis() with temp_size_in_bytes",
            got=f"{temp!r} (and {base!r} for {baseline_name})", section=section)
    limit = base / factor
    if temp <= limit:
        return None
    ratio = base / temp if temp else float("inf")
    return format_failure(
        f"the compiled {name} needs too much temporary memory",
        expected=f"at most 1/{factor:g} of {baseline_name}'s {_mib(base)}, i.e. {_mib(int(limit))}",
        got=f"{_mib(temp)} ({ratio:.2f}x less than without checkpointing)",
        cause=hint or "every layer's activations are still kept for the backward pass: the "
                      "checkpoint is missing, wraps the whole loss (which recomputes "
                      "everything and then saves it all again), or sits inside an unrolled "
                      "Python loop that XLA is free to reschedule",
        fix=fix or "checkpoint the body of the lax.scan over layers: "
                   "lax.scan(jax.checkpoint(block), h, params)",
        section=section)


def assert_memory_reduced(fn: Callable, baseline: Callable, args: Sequence, *, factor: float,
                          name: str | None = None, baseline_name: str | None = None,
                          section: str | None = None, hint: str | None = None,
                          fix: str | None = None) -> None:
    """Asserts that the compiled ``fn`` needs ``factor`` x less temporary memory than ``baseline``.

    Both are exported (``jax.export``) and compiled on their own for the same
    arguments; ``fn`` is usually ``jax.grad`` of the student's checkpointed loss and
    ``baseline`` the gradient of the same loss without checkpointing.
    """
    __tracebackhide__ = True
    label = name or getattr(fn, "__name__", "fn")
    base_label = baseline_name or getattr(baseline, "__name__", "the baseline")
    base_facts = collect_memory(export_program(baseline, args))
    facts = collect_memory(export_program(fn, args, name=label, section=section))
    message = explain_memory_reduction(facts, base_facts, factor=factor, name=label,
                                       baseline_name=base_label, section=section, hint=hint,
                                       fix=fix)
    if message:
        raise CheckFailure(message, rung="structure")


# ---------------------------------------------------------------- pytree nodes


def _plain(value: Any):
    if isinstance(value, (str, bool, int, float, type(None))):
        return value
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return np.asarray(value)
    return {"unsupported": describe_value(value)}


def collect_node(obj: Any, fields: Sequence[str]) -> dict:
    """The class name of ``obj`` and the named attributes, as plain data.

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Point:
    ...     x: float
    ...     label: str
    >>> collect_node(Point(1.5, "a"), ["x", "label"])
    {'type': 'Point', 'fields': {'x': 1.5, 'label': 'a'}}
    """
    missing = {"missing": True}
    return {"type": type(obj).__name__,
            "fields": {f: _plain(getattr(obj, f)) if hasattr(obj, f) else missing
                       for f in fields}}


def explain_node(observed: dict, expected: dict, *, name: str, rtol: float = 1e-5,
                 atol: float = 1e-6, section: str | None = None, hint: str | None = None,
                 fix: str | None = None) -> str | None:
    """Compares a :func:`collect_node` record with the expected one: type, then each field.

    >>> print(explain_node({"type": "dict", "fields": {}}, {"type": "Linear", "fields": {}},
    ...                    name="jax.grad(loss)(layer, x)"))
    jax.grad(loss)(layer, x) is not a Linear
      expected: an instance of Linear
      got:      dict
      likely cause: the class is not registered as a pytree node, or its unflatten function builds another type
      fix: register it with jax.tree_util.register_dataclass (or register_pytree_node with an unflatten that calls the class)
    """
    if observed["type"] != expected["type"]:
        return format_failure(
            f"{name} is not a {expected['type']}", expected=f"an instance of {expected['type']}",
            got=observed["type"],
            cause=hint or "the class is not registered as a pytree node, or its unflatten "
                          "function builds another type",
            fix=fix or "register it with jax.tree_util.register_dataclass (or "
                       "register_pytree_node with an unflatten that calls the class)",
            section=section)
    problems = []
    for field, want in expected["fields"].items():
        got = observed["fields"].get(field, {"missing": True})
        if isinstance(got, dict) and got.get("missing"):
            problems.append(f".{field}: missing")
        elif isinstance(want, (np.ndarray, list)) or isinstance(got, (np.ndarray, list)):
            # Arrays (lists after JSON) on either side: compare as arrays.
            if isinstance(got, (str, dict, type(None))) or isinstance(want, (str, dict, type(None))):
                problems.append(f".{field}: expected {describe_value(want)}, got "
                                f"{describe_value(got) if not isinstance(got, dict) else got}")
                continue
            for _, _, text in collect_tree_mismatches(np.asarray(got), np.asarray(want),
                                                      rtol=rtol, atol=atol):
                problems.append(f".{field}: {text}")
        elif got != want:
            problems.append(f".{field}: expected {want!r}, got {got!r}")
    if not problems:
        return None
    return format_failure(
        f"{name} has wrong fields", details=problems,
        cause=hint or "a metadata field was lost or became a leaf, or the fields were "
                      "rebuilt in another order",
        fix=fix or "flatten the data fields in their declared order and keep the metadata "
                   "fields in the auxiliary data",
        section=section)


def assert_node(obj: Any, expected_type: str, fields: dict, *, name: str = "result",
                rtol: float = 1e-5, atol: float = 1e-6, section: str | None = None,
                hint: str | None = None, fix: str | None = None) -> None:
    """Asserts that ``obj`` is an instance of a class named ``expected_type`` with ``fields``.

    ``fields`` maps attribute names to expected values: arrays are compared with
    tolerances, strings and numbers exactly.

    >>> import dataclasses, jax.numpy as jnp
    >>> @dataclasses.dataclass
    ... class Linear:
    ...     w: object
    ...     activation: str
    >>> assert_node(Linear(jnp.ones(2), "tanh"), "Linear", {"w": jnp.ones(2), "activation": "tanh"})
    """
    __tracebackhide__ = True
    expected = {"type": expected_type, "fields": {k: _plain(v) for k, v in fields.items()}}
    message = explain_node(collect_node(obj, list(fields)), expected, name=name, rtol=rtol,
                           atol=atol, section=section, hint=hint, fix=fix)
    if message:
        raise CheckFailure(message, rung="values")
