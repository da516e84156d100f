"""Facts read from a program's StableHLO text alone: pure functions of the text.

The program judge (:func:`autograder._artifacts.static_facts`) calls them on an
exported program's text, outside the student's process; the checks of
:mod:`autograder._exported` read what they derived.
"""
from __future__ import annotations

import re

_LOC = re.compile(r'loc\("((?:jit|pjit)\([^"]*)"')
_TRANSFORM = re.compile(r"^[\w.]+\(.*\)$")  # jit(f), jvp(), transpose(jvp()), vmap(...)
_DOT = re.compile(r"stablehlo\.dot_general\b.*:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)"
                  r"\s*->\s*(tensor<[^>]*>)")


def scope_facts(text: str) -> dict[str, list[str]]:
    """``{primitive: sorted scope paths}`` from the op locations of an exported program
    (its text, or its ``locations`` fact joined as ``loc("...")`` entries).

    A scope path joins the ``jax.named_scope`` labels around the op (``""`` when none).

    >>> scope_facts('loc("jit(step)/grad/transpose(jvp())/dot_general") '
    ...             'loc("jit(step)/update/sub") loc("jit(step)/sub") loc("w")')
    {'dot_general': ['grad'], 'sub': ['', 'update']}
    """
    facts: dict[str, set] = {}
    for name in _LOC.findall(text):
        parts = name.split("/")
        if len(parts) < 2:
            continue
        scopes = [p for p in parts[1:-1] if not _TRANSFORM.match(p)]
        facts.setdefault(parts[-1], set()).add("/".join(scopes))
    return {prim: sorted(paths) for prim, paths in sorted(facts.items())}


def _element_type(tensor: str) -> str:
    # tensor<256x64xbf16> -> bf16; tensor<f32> -> f32
    return tensor[len("tensor<"):-1].split("x")[-1]


def dot_facts(text: str) -> list[tuple[str, str, str]]:
    """``[(lhs dtype, rhs dtype, result dtype), ...]`` for each ``dot_general``.

    >>> dot_facts("%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
    ...           "(tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xf32> loc(#loc9)")
    [('bf16', 'bf16', 'f32')]
    """
    return [tuple(_element_type(t) for t in m.groups()) for m in _DOT.finditer(text)]


