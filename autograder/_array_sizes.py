"""The largest array a StableHLO program holds: a pure function of its text.

A fact of exported programs (:func:`autograder._artifacts.static_facts`), so that
"without forming the Jacobian (or Hessian)" is judged outside the student's process.
"""
from __future__ import annotations

import math
import re

# A ranked tensor type in StableHLO text: tensor<4x400xf32>, tensor<f32>, tensor<3xi1>.
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z][a-z0-9]*)>")


def largest_array(text: str) -> dict:
    """``{"elements", "type", "arrays"}``: the largest tensor type in ``text`` and how many
    tensor types it names.

    >>> largest_array("%0 = stablehlo.add %a, %b : tensor<3x4xf32>\\n%1 : tensor<f32>")
    {'elements': 12, 'type': 'tensor<3x4xf32>', 'arrays': 2}
    """
    largest, largest_type, count = 0, "", 0
    for match in _TENSOR.finditer(text):
        n = math.prod(int(d) for d in match.group(1).split("x") if d)
        count += 1
        if n > largest:
            largest, largest_type = n, match.group(0)
    return {"elements": int(largest), "type": largest_type, "arrays": count}
