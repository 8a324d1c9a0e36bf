"""What the vendoring files say of a GF(2^m) bundle: the README's section on
field elements and the examples' multiplication."""

from __future__ import annotations

from typing import Any

from ...core.bundle import Bundle
from ...emission.examples import example_calls


def context(bundle: Bundle) -> dict[str, Any]:
    """The README's and the examples' `gf2m` variable: the field, its
    elements' limbs, the preferred ISA's multiplication; nothing for a bundle
    without one."""
    mul = next((f for f in bundle.preferred if f.kind == "gf2m_mul"), None)
    if mul is None:
        return {}
    m, poly = bundle.params_manifest["m"], bundle.params_manifest["poly"]
    limbs = mul.manifest()["input"]["limbs"]
    calls = example_calls(bundle, [mul])
    terms = ["1" if e == 0 else "x" if e == 1 else f"x^{e}" for e in poly]
    return {"gf2m": {
        "m": m,
        "poly": poly,
        "poly_text": " + ".join(terms),
        "rest_text": " + ".join(terms[1:]),  # f - x^m
        "limbs": limbs,
        "top_bits": m - 64 * (limbs - 1),
        "mul": calls.name(mul.symbol),
        "calls": calls.context(),
    }}
