"""What a bundle of column transforms says of itself next to Plonky3 (the
README's section on batches): which of Plonky3's DFT calls each function
computes, in which memory order, and how the values relate.

Plonky3 (crates 0.6) evaluates each column of a row-major matrix on the
subgroup of its two_adic_generator(k) = GENERATOR^((p-1)/2^k), unscaled
(`dft_batch`), inverts with the factor 1/n (`idft_batch`), and extends to
the coset shift * <g_(k+b)> (`coset_lde_batch`); its implementations return
natural rows (Radix2Dit, Radix2Bowers, Radix2DFTSmallBatch) or bit-reversed
ones behind a view (Radix2DitParallel, RecursiveDft). Its 31-bit fields
store x * 2^32 mod p (Montgomery form), Goldilocks the value itself (any
representative). A set built with `generator` = the field's GENERATOR on the
cyclic ring computes the same points in the same order.
"""

from __future__ import annotations

from typing import Any

from ...core.bundle import Bundle
from .roots import PLONKY3_GENERATORS

# the in-memory words of Plonky3's fields: Montgomery form (factor 2^32) for the 31-bit ones
MONTGOMERY_FIELDS = ("BabyBear", "KoalaBear")


def _roots_match(params: dict, layout: dict) -> bool:
    """Whether the layout's root is Plonky3's two_adic_generator of its size (cyclic ring, no coset)."""
    q, planned = params["q"], layout["planned"]
    field = PLONKY3_GENERATORS.get(q)
    if field is None or planned["ring"] != "cyclic" or planned["coset"] != 1:
        return False
    bits = planned["n"].bit_length() - 1
    return planned["root"] == pow(field[1], (q - 1) >> bits, q)


def batch_context(bundle: Bundle, names, calls) -> dict[str, Any] | None:
    """The README's `ntt.batch` variable: the columns, the orders, the extension and Plonky3's calls; None
    for a bundle of one polynomial without an extension. `names`: the preferred ISA's functions by kind;
    `calls`: the examples' names for them."""
    params = bundle.params_manifest
    columns = params.get("columns", 1)
    lde = names.get("lde")
    if columns == 1 and lde is None:
        return None
    q = params["q"]
    fwd = names["ntt_forward"].manifest()
    layout = fwd["output"]["layout"]
    field = PLONKY3_GENERATORS.get(q)
    natural = layout["order"] == "natural"
    out: dict[str, Any] = {
        "columns": columns,
        "natural": natural,
        "root": layout["planned"]["root"],
        "inverse_scale": names["ntt_inverse"].manifest()["output"]["scale"],
        "field": field[0] if field else None,
        "generator": field[1] if field else None,
        "plonky3": _roots_match(params, layout),
        "montgomery": field is not None and field[0] in MONTGOMERY_FIELDS,
        "forward": calls.name(names["ntt_forward"].symbol),
        "inverse": calls.name(names["ntt_inverse"].symbol),
        "lde": None,
    }
    if lde is not None:
        entry = lde.manifest()
        planned = entry["output"]["layout"]["planned"]
        out["lde"] = {"symbol": lde.symbol, "rows": planned["n"], "shift": planned["coset"],
                      "root": planned["root"], "added_bits": lde.fact("added_bits"),
                      "natural": entry["output"]["layout"]["order"] == "natural",
                      "in": entry["input"]["bound"], "out": entry["output"]["bound"]}
    return out
