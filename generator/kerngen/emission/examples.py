"""What the README's C, C++ and Rust examples need beyond the function data:
each lane type as the three languages spell it, the header's macro for each
argument's element count (the prototypes take plain pointers), the input
contracts in words, the Shoup product where its lanes differ from the
NTT's, and the shipped sets in the standard order that a bundle in another
order can be replaced with.

The examples compute values a test recomputes independently (tests/
test_examples.py): the NTT example prints c[0], c[1], c[n-1] of c = a*b mod
(x^n + 1, q) for a[i] = i mod q and b[i] = (7i + 1) mod q (negated on
signed lanes, which take negative inputs), then, where it shows a Shoup
product, c[i]*w[i] mod q for w[i] = (5i + 3) mod q at the same indices.

The shipped sets are read once per process (`_standard_sets`, a registered
memo of no arguments: `core.compile_cache.memo`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.resources import files

from ..core.compile_cache import memo


def length_macro(fn, arg_name: str) -> str:
    """The header's macro for the element count of one argument of `fn` (a
    `Function`), shared by its variants: its name without the ISA suffix."""
    return f"{fn.symbol.removesuffix('_' + fn.isa)}_{arg_name}_len".upper()


@dataclass(frozen=True)
class Lane:
    """One element type as C, C++ and Rust spell it."""

    ctype: str  # int16_t ... uint64_t
    signed: bool
    bits: int

    @staticmethod
    def of(ctype: str) -> Lane:
        m = re.fullmatch(r"(u?)int(8|16|32|64)_t", ctype)
        if m is None:
            raise ValueError(f"no lane type for the C type {ctype}")
        return Lane(ctype, not m.group(1), int(m.group(2)))

    @property
    def rust(self) -> str:
        return ("i" if self.signed else "u") + str(self.bits)

    @property
    def printf(self) -> str:
        """The <inttypes.h> macro that prints it."""
        return ("PRId" if self.signed else "PRIu") + str(self.bits)

    @property
    def wide(self) -> str:
        """A C type that holds a lane value shifted left by the lane's width (Shoup's w')."""
        return "unsigned __int128" if self.bits == 64 else f"uint{2 * self.bits}_t"

    def context(self) -> dict:
        return {"c": self.ctype, "rust": self.rust, "signed": self.signed, "bits": self.bits,
                "printf": self.printf, "wide": self.wide}


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


def ntt_example(forward: dict, shoup, q: int) -> dict:
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
        "lane": lane.context(),
        "negative_b": lane.signed and lo <= -(q - 1),  # signed lanes: show that negative inputs are fine
        "contract": contract_text(forward["input"]["bound"], q),
        "shoup": shown,
    }


def lanes_by_type(functions) -> list[dict]:
    """The bundle's functions grouped by element type (a kind once, in the bundle's order)."""
    out: dict[str, dict] = {}
    for f in functions:
        for a in f.kernel.args:
            lane = Lane.of(a.ctype)
            e = out.setdefault(lane.ctype, {**lane.context(), "kinds": []})
            if f.kind not in e["kinds"]:
                e["kinds"].append(f.kind)
    return list(out.values())


@memo(maxsize=1)
def _standard_sets() -> tuple[tuple[str, int, int], ...]:
    """(name, n, q) of every shipped NTT set (the package's params/) in the standard order,
    from the files' keys (validating them would choose each set's multiplication by the
    cost model: seconds)."""
    out = []
    for entry in sorted((files("kerngen") / "params").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            table = tomllib.loads(entry.read_text(encoding="utf-8-sig"))
            if table.get("family") == "ntt" and table.get("order") == "standard":
                out.append((table.get("name", entry.name.removesuffix(".toml")), table["n"], table["q"]))
    return tuple(out)


def standard_twins(name: str, n: int, q: int) -> list[str]:
    """The shipped sets with the same n and q in the standard order, besides `name`."""
    return [other for other, n2, q2 in _standard_sets() if (n2, q2) == (n, q) and other != name]
