"""What the vendoring files say of an NTT bundle: the README's section on
the NTT domain (the header's names for it, the bounds that chain the
preferred ISA's kernels, the shipped sets in the standard order that a
bundle in another order can be replaced with) and the examples' lanes and
inputs.

The examples compute values a test recomputes independently (tests/
test_examples.py): c[0], c[1], c[n-1] of c = a*b mod (x^n - c, q) (the ring's) for
a[i] = i mod q and b[i] = (7i + 1) mod q (negated on signed lanes, which
take negative inputs), then, where they show a Shoup product, c[i]*w[i] mod
q for w[i] = (5i + 3) mod q at the same indices.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files
from typing import Any

from ...core.bundle import Bundle, CDefine, CTable, Function
from ...core.compile_cache import memo
from ...emission.examples import Lane, example_calls
from .maths import ORDER_EXPONENTS, RING_CONSTANT, RINGS, ROOT_NAMES, modulus_text
from .params import UNROLLED_MAX
from .plonky3 import batch_context

_CHAIN = ("ntt_forward", "basemul", "ntt_inverse")  # the kernels of a product in the NTT domain


def _named(header: tuple[CDefine | CTable, ...], prefix: str, suffix: str) -> str | None:
    """The header's name `prefix` + `suffix` (in either case), if it has it."""
    found = [item.name for item in header if item.name.lower() == (prefix + suffix).lower()]
    return found[0] if len(found) == 1 else None


def context(bundle: Bundle) -> dict[str, Any]:
    """The README's and the examples' `ntt` variable: the NTT domain, the
    header's names for it, and the bounds that chain the preferred ISA's
    kernels; nothing for a bundle without the three kernels of a product."""
    preferred = bundle.preferred
    first = {f.kind: f for f in reversed(preferred)}
    if not set(_CHAIN) <= first.keys():
        return {}
    layout = fwd_layout = first["ntt_forward"].manifest()["output"]["layout"]
    planned = fwd_layout.get("planned")  # a planned transform's compact layout: no block tables in the header
    wanted = (("n", "_N"), ("q", "_Q"), ("basemul_scale", "_BASEMUL_SCALE"), ("inverse_scale", "_INVERSE_SCALE"))
    if planned is None:
        wanted += (("d", "_NTT_D"), ("blocks", "_NTT_BLOCKS"), ("zetas", "_ntt_zetas"), ("positions", "_ntt_positions"))
    prefix = bundle.params_manifest["prefix"]
    names = {key: _named(bundle.header, prefix, suffix) for key, suffix in wanted}
    if None in names.values():
        return {}
    permutation = {key: _named(bundle.header, prefix, suffix) for key, suffix in (
        ("to_standard", "_ntt_to_standard"), ("from_standard", "_ntt_from_standard"))}
    fwd, mul, inv = (first[k].manifest() for k in _CHAIN)
    layouts = [f.manifest()["output"]["layout"] for f in bundle.functions if f.kind == "ntt_forward"]
    if planned is not None:  # one block of degree 1 per coefficient, its zeta by the compact rule
        layout = {**layout, "blocks": [{"zeta": planned["root"] if planned["ring"] == "negacyclic" else 1,
                                        "positions": [0]}] * 2}
    (mul_lo, mul_hi), (inv_lo, inv_hi) = mul["output"]["bound"], inv["input"]["bound"]
    sums = min(inv_hi // mul_hi if mul_hi > 0 else inv_hi, inv_lo // mul_lo if mul_lo < 0 else -inv_lo)
    n, q = bundle.params_manifest["n"], bundle.params_manifest["q"]
    # the examples' arrays: every column's coefficients
    length = _named(bundle.header, prefix, "_ARRAY_N") or names["n"]
    shoup = first.get("mulmod_shoup")
    shown = example(fwd, shoup, q)
    called = [first[k] for k in (*_CHAIN, "freeze") if k in first] + ([shoup] if shown["shoup"] else [])
    calls = example_calls(bundle, called)
    if shown["shoup"]:
        shown["shoup"]["symbol"] = calls.name(shoup.symbol)
    return {"ntt": {
        **names,
        **ring_context(bundle.params_manifest, layout),
        "permutation": permutation if None not in permutation.values() else None,
        "twins": standard_twins(bundle.name, bundle.params_manifest),
        "example": shown,
        "calls": calls.context(),
        "planned": planned,
        "batch": batch_context(bundle, first, calls),
        "length": length,
        "n_value": n,
        "q_value": q,
        "d_value": layout["d"],
        "blocks_value": n if planned is not None else len(layout["blocks"]),
        "first_block": layout["blocks"][0],
        "one_layout": all(x == layout for x in layouts),
        "forward": calls.name(first["ntt_forward"].symbol),
        "basemul": calls.name(first["basemul"].symbol),
        "inverse": calls.name(first["ntt_inverse"].symbol),
        "freeze": calls.name(first["freeze"].symbol) if "freeze" in first else None,
        "align": max(a.preferred_align or a.align for a in first["ntt_forward"].kernel.args),
        "reducers": [{"symbol": f.symbol, "bound": f.manifest()["output"]["bound"]}
                     for f in preferred if f.kind == "reduce"],
        "accumulators": [{"symbol": f.symbol, "k": f.fact("k"), "bound": f.manifest()["output"]["bound"]}
                         for f in preferred if f.kind == "basemul_acc"],
        "order": layout.get("order", "fastest"),
        "forward_in": fwd["input"]["bound"],
        "forward_out": fwd["output"]["bound"],
        "basemul_out": mul["output"]["bound"],
        "basemul_scale_value": mul["output"]["scale"],
        "inverse_in": inv["input"]["bound"],
        "inverse_out": inv["output"]["bound"],
        "inverse_scale_value": inv["output"]["scale"],
        "sums": max(sums, 1),
        "scales_cancel": mul["output"]["scale"] * inv["output"]["scale"] % q == 1,
    }}


def ring_context(params: dict, layout: dict) -> dict[str, Any]:
    """The README's words for the ring, the coset and the zetas of the
    standard and natural orders, with the root of unity read off the layout:
    psi = zetas[0] / g^d in the negacyclic ring (zetas[j] = g^d psi^(2 brv(j) + 1)),
    omega = zetas[blocks/2] / g^d in the cyclic one (zetas[j] = g^d omega^brv(j))."""
    ring, coset, n, q, d = params.get("ring", RINGS[0]), params.get("coset", 1), params["n"], params["q"], layout["d"]
    (standard, natural), name = ORDER_EXPONENTS[ring], ROOT_NAMES[ring]
    negacyclic = RING_CONSTANT[ring] == -1
    blocks = layout["blocks"]
    root = blocks[0 if negacyclic else len(blocks) // 2]["zeta"] * pow(coset, -d, q) % q
    g = "" if coset == 1 else f"{coset}^{d}·"
    return {
        "ring": ring,
        "modulus": modulus_text(n, ring, coset),
        "ring_modulus": modulus_text(n, ring),
        "coset": coset if coset != 1 else None,
        "fips": negacyclic and coset == 1,  # FIPS 203's and 204's order where q and n are theirs
        "standard_zeta": f"{g}{name}^{standard}".replace(" brv", "·brv"),
        "natural_zeta": f"{g}{name}^{natural}",
        "root": f"{name} = {root}",
    }


def contract_text(bound: list[int], q: int) -> str:
    """An input range in words, with what it means for representatives mod q."""
    lo, hi = bound
    if (lo, hi) == (-(q - 1), q - 1):
        return f"[{lo}, {hi}]: any representative within ±(q − 1), canonical [0, q) values included"
    if (lo, hi) == (0, q - 1):
        return f"[0, {hi}]: the canonical representatives [0, q) only (unsigned lanes take no negative values)"
    if lo <= 0 and hi >= q - 1:
        return f"[{lo}, {hi}] (canonical [0, q) values included)"
    return f"[{lo}, {hi}]"


def example(forward: dict, shoup: Function | None, q: int) -> dict:
    """The NTT example's lanes and inputs. `forward`: the forward NTT's
    manifest entry; `shoup`: the preferred ISA's mulmod_shoup function, or
    None; it is shown where its lanes are not the NTT's (so that every lane
    type of the bundle appears)."""
    lane = Lane.of(forward["dtype"] + "_t")
    lo = forward["input"]["bound"][0]
    shown = None
    if shoup is not None:
        shoup_lane = Lane.of(shoup.kernel.args[0].ctype)
        if shoup_lane != lane:
            shown = {"symbol": shoup.symbol, "lane": shoup_lane.context(),
                     "contract": f"a[i] any {shoup_lane.ctype}, w[i] in [0, q), "
                                 f"wp[i] = floor(w[i]·2^{shoup_lane.bits}/q)"}
    return {
        # arrays of a planned transform's sizes live in static storage, not on a thread's stack (megabytes)
        "storage": "static " if forward["args"][0]["count"] > UNROLLED_MAX else "",
        "lane": lane.context(),
        "negative_b": lane.signed and lo <= -(q - 1),  # signed lanes: show that negative inputs are fine
        "contract": contract_text(forward["input"]["bound"], q),
        "shoup": shown,
    }


@memo(maxsize=1)
def _standard_sets() -> tuple[tuple[str, tuple], ...]:
    """(name, `_domain` of its keys) of every shipped NTT set (the package's params/) in the standard order,
    from the files' keys (validating them would choose each set's multiplication by the
    cost model: seconds)."""
    out = []
    for entry in sorted((files("kerngen") / "params").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            table = tomllib.loads(entry.read_text(encoding="utf-8-sig"))
            if table.get("family") == "ntt" and table.get("order") == "standard":
                out.append((table.get("name", entry.name.removesuffix(".toml")), _domain(table)))
    return tuple(out)


def _domain(params: dict) -> tuple:
    """What makes two sets' NTT domains one up to the order: n, q, the ring and the coset."""
    return params["n"], params["q"], params.get("ring", RINGS[0]), params.get("coset", 1)


def standard_twins(name: str, params: dict) -> list[str]:
    """The shipped sets of the same NTT domain as `params` (a manifest's) in the standard order, besides `name`."""
    return [other for other, domain in _standard_sets() if domain == _domain(params) and other != name]
