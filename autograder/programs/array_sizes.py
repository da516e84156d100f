"""The largest array a StableHLO program holds: a pure function of its text.

A fact of exported programs (:func:`autograder.programs.artifacts.static_facts`), so that
"without forming the Jacobian (or Hessian)" is judged outside the student's process.
Types are read by MLIR's own parser (jaxlib's bindings), so every element type counts:
``complex<f32>``, ``f8E4M3FN``, ``i1``, a type with an encoding. Where the parser is
missing or refuses the text, a permissive reading of the ``tensor<...>`` types stands
in (a type it cannot size counts as one byte per element).
"""
from __future__ import annotations

import math
import re

# A ranked tensor type: dims then the element type, which may itself hold <...>
# (complex<f32>), then an optional encoding after a comma.
_TENSOR = re.compile(r"tensor<([^<>]*(?:<[^<>]*>)?[^<>]*)>")
_BITS = re.compile(r"^(?:[a-z]*?)(\d+)")
_CONTEXT: list = []


def _bits(element: str) -> int:
    """Bits of an element type named in text: f32 -> 32, complex<f64> -> 128, i1 -> 1."""
    if element.startswith("complex<"):
        return 2 * _bits(element[len("complex<"):-1])
    small = re.match(r"f([468])E", element)  # f8E4M3FN, f4E2M1FN, f6E3M2FN
    if small:
        return int(small.group(1))
    match = _BITS.match(element)
    return int(match.group(1)) if match else 8


def _from_text(text: str) -> list[tuple[tuple[int, ...], str, int]]:
    found = []
    for match in _TENSOR.finditer(text):
        body = match.group(1).split(",")[0].strip()
        parts = body.split("x")
        dims = []
        while parts and (parts[0].isdigit() or parts[0] == "?") and len(parts) > 1:
            dims.append(int(parts.pop(0)) if parts[0] != "?" else 0)
        element = "x".join(parts)
        found.append((tuple(dims), element, _bits(element)))
    return found


def _element_bits(element) -> int:
    from jax._src.lib.mlir import ir

    if isinstance(element, ir.ComplexType):
        return 2 * _element_bits(element.element_type)
    width = getattr(element, "width", None)
    return int(width) if isinstance(width, int) else 8


def _from_parser(text: str) -> list[tuple[tuple[int, ...], str, int]] | None:
    """Every ranked tensor type an op of the module takes or returns, nested regions
    included; None where MLIR's parser is not available or refuses the text."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir

        if not _CONTEXT:
            _CONTEXT.append(mlir.make_ir_context())
        found = []
        with _CONTEXT[0]:
            module = ir.Module.parse(text)

            def visit(op):
                for value in list(op.results) + list(op.operands):
                    t = value.type
                    if isinstance(t, ir.RankedTensorType) and t.has_static_shape:
                        found.append((tuple(t.shape), str(t.element_type),
                                      _element_bits(t.element_type)))
                return ir.WalkResult.ADVANCE

            module.operation.walk(visit)
        return found
    except Exception:  # noqa: BLE001 - no jaxlib here, or text MLIR refuses
        return None


def largest_array(text: str) -> dict:
    """``{"elements", "bytes", "type", "arrays"}``: the most elements of an array the
    program's ops take or return (and its type), the most bytes of one, and how many
    tensor values it has.

    >>> facts = largest_array("%0 = stablehlo.add %a, %b : tensor<3x4xf32>\\n%1 : tensor<f32>")
    >>> facts["elements"], facts["bytes"], facts["type"]
    (12, 48, 'tensor<3x4xf32>')
    >>> largest_array("%h : tensor<50x50xcomplex<f32>>")["elements"]
    2500
    """
    found = _from_parser(text) if "module" in text else None
    if not found:
        found = _from_text(text)
    if not found:
        return {"elements": 0, "bytes": 0, "type": "", "arrays": 0}
    sizes = [(math.prod(dims), (math.prod(dims) * bits + 7) // 8, dims, element)
             for dims, element, bits in found]
    # Ties go to the most bytes, then to a floating type (the matrix, not its index).
    elements, _, dims, element = max(sizes, key=lambda s: (s[0], s[1], not s[3].startswith(
        ("i", "ui", "si"))))
    shape = "x".join(map(str, dims))
    return {"elements": int(elements), "bytes": int(max(s[1] for s in sizes)),
            "type": f"tensor<{shape + 'x' if shape else ''}{element}>", "arrays": len(found)}
