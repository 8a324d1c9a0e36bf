"""What the README's C, C++ and Rust examples need beyond the function data,
whatever the family: each lane type as the three languages spell it, and the
header's macro for each argument's element count (the prototypes take plain
pointers). The families add their own examples' inputs (`Family.vendoring`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass



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
