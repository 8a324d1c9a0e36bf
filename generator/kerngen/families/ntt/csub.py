"""The conditional subtraction of a multiple of q on unsigned lanes: the
reduction Harvey's butterflies and the Shoup products rest on, one
instruction pair where the ISA has an unsigned minimum at the lane width."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ...ir.instr import Builder, VReg
from ...machine.isa import AVX2, Isa
from ...passes.lemmas import ScalarIdiom, prove
from .reducers import emit_idiom


def conditional_subtraction(q: int, c: int, bits: int, isa: Isa = AVX2) -> ScalarIdiom:
    """x - c where x >= c, else x, for c a multiple of q: the subtraction
    wraps below zero exactly where x < c, and the unsigned minimum keeps x
    there. Without an unsigned minimum at this width (64 bits), x is kept
    where x - c reads negative (the same for x < c + 2^(W-1), which the
    lemma's ranges take into account): a blend selected by the signs where
    the ISA encodes one (the legacy blend reads its selector from xmm0
    alone: the table has no such form), else c added back under a mask of
    the negative lanes."""
    if isa.has("minu", bits):
        steps = (("sub", "d", "x", c), ("minu", "r", "x", "d"))
    elif isa.has("select_negative", bits):
        steps = (("sub", "d", "x", c), ("select_negative", "r", "d", "x"))
    else:
        steps = (("sub", "d", "x", c), ("cmpgt", "m", 0, "d"), ("and", "k", "m", c), ("add", "r", "d", "k"))
    return ScalarIdiom("csub", q, steps, bits, signed=False)


@dataclass(frozen=True)
class ConditionalSubtraction:
    """A reduction of unsigned lanes by one conditional subtraction of c."""

    q: int
    c: int
    bits: int
    isa: Isa = AVX2  # which instructions do it (`conditional_subtraction`)

    kind = "csub"

    @cached_property
    def idiom(self) -> ScalarIdiom:
        return conditional_subtraction(self.q, self.c, self.bits, self.isa)

    def reduced_bound(self, bound: int) -> int:
        return prove(self.idiom).range_for(0, bound)[1]

    def emit(self, b: Builder, x: VReg, comment: str) -> VReg:
        return emit_idiom(b, self.idiom, x, comment=comment)

    def describe(self) -> str:
        how = (f"min(x, x - {self.c}) unsigned" if self.isa.has("minu", self.bits)
               else f"x - {self.c} where x >= {self.c}")
        return f"conditional subtraction of {self.c // self.q}q: {how}"
