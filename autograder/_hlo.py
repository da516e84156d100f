"""StableHLO and optimized-HLO inspection, on stable facts only.

Op presence and counts in StableHLO (to detect unrolling: a ``stablehlo.while`` with
one copy of the body, not N copies), and the presence or absence of a class of
collective in compiled HLO. Never fusion counts, FLOPs or exact text: those change
with backend and version.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Sequence

_STABLEHLO_OP = re.compile(r"\b(stablehlo|chlo|sdy|mhlo)\.([a-z_][a-z0-9_]*)\b")


def stablehlo_text(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> str:
    """The StableHLO module of ``jax.jit(fn)`` lowered for these arguments."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **(kwargs or {})).as_text()


def count_stablehlo_ops(text: str) -> Counter:
    """Counts ops by name (``while``, ``sine``, ``dot_general`` ...) in StableHLO text.

    >>> import jax.numpy as jnp
    >>> count_stablehlo_ops(stablehlo_text(lambda x: jnp.sin(x) * 2, (jnp.ones(2),)))["sine"]
    1
    """
    return Counter(m.group(2) for m in _STABLEHLO_OP.finditer(text))


def compiled_hlo_text(fn: Callable, args: Sequence = (), kwargs: dict | None = None) -> str:
    """The optimized HLO that XLA compiled ``jax.jit(fn)`` to, for these arguments."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **(kwargs or {})).compile().as_text()
