"""What the README's C, C++ and Rust examples need beyond the function data,
whatever the family: each lane type as the three languages spell it, the
header's macro for each argument's element count (the prototypes take plain
pointers), and the names the examples call (`ExampleCalls`). The families
add their own examples' inputs (`Family.vendoring`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .dispatch import dispatch


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


@dataclass(frozen=True)
class ExampleCalls:
    """How the examples call a bundle's functions: through the dispatch unit where it dispatches every one of
    them (the ISA chosen at run time, so the example runs on any CPU that has one of the bundle's ISAs), else
    by the preferred ISA's own names after testing the CPU features they need."""

    names: tuple[tuple[str, str], ...]  # (kernel symbol, the name the example calls)
    cpu: tuple[str, ...]  # the features the example tests first (none where the unit chooses)
    isa_function: str | None  # the unit's function naming the ISA it chose (None: no unit)
    isas: tuple[str, ...]  # the ISAs the unit chooses among

    def name(self, symbol: str) -> str:
        return dict(self.names)[symbol]

    def context(self) -> dict:
        return {"cpu": list(self.cpu), "isa_function": self.isa_function, "isas": list(self.isas)}


def example_calls(bundle, functions) -> ExampleCalls:
    """The calls of `functions` (the preferred ISA's `Function`s an example uses) in `bundle`."""
    unit = dispatch(bundle)
    dispatched = {e.symbol for e in unit.entries} if unit is not None else set()
    bases = {f.symbol: f.symbol.removesuffix("_" + f.isa) for f in functions}
    if unit is not None and set(bases.values()) <= dispatched:
        return ExampleCalls(tuple(bases.items()), (), f"{unit.prefix}_isa", tuple(t.name for t in unit.isas))
    return ExampleCalls(tuple((f.symbol, f.symbol) for f in functions),
                        tuple(sorted({c for f in functions for c in f.cpu})), None, ())
