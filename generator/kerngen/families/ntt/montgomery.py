"""Signed Montgomery multiplication, the NTT family's multiplication strategy.

For lanes that have a signed high-half product (16-bit lanes: R = 2^16), a
product by a constant c stored as the pair w = c*R mod q (centred) and
w' = w*q^-1 mod R is four instructions, with no reduction afterwards:

    t = mullo(x, w');  r = mulhi(x, w) - mulhi(t, q)  =  x*c mod q, |r| <= |x|*|w|/R + (q+1)/2

The strategy gives its stored constants, its instruction sequence, its
bound and its lemma (`prove`); the NTT kernels and schedules ask it and
nothing else about multiplication.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.instr import Builder, IdiomTag, Mem, VReg
from ...ir.ops import by_width, wrap
from ...passes.lemmas import MontgomeryLemma, prove_montgomery
from .maths import centred


@dataclass(frozen=True)
class MontgomeryConstant:
    """A constant c as stored for multiplication: w = c*R mod q and w' = w*q^-1 mod R."""

    value: int  # c mod q
    w: int
    w_qinv: int


@dataclass(frozen=True)
class Montgomery:
    q: int
    bits: int  # lane width; R = 2^bits

    name = "montgomery"

    @property
    def r(self) -> int:
        return 1 << self.bits

    @property
    def qinv(self) -> int:
        """q^-1 mod R, signed."""
        return wrap(pow(self.q, -1, self.r), self.bits)

    def constant(self, c: int) -> MontgomeryConstant:
        w = centred(c * self.r, self.q)
        return MontgomeryConstant(c % self.q, w, wrap(w * self.qinv, self.bits))

    def multiply(self, b: Builder, x: VReg, w: Mem | VReg, w_qinv: Mem | VReg, q: Mem | VReg) -> VReg:
        """x*c*R^-1 mod q for c given as (w, w'); a variable w works the same
        way (x*w*R^-1), with w' = mullo(w, q^-1) computed first. The four
        instructions are tagged as one product, which the verifier checks
        (same x, q itself, w' consistent with w) before relying on the lemma."""
        group = b.new_group()

        def tag(role: str) -> IdiomTag:
            return IdiomTag(group, "montgomery", role, 1)

        t = b.op(by_width("mullo", self.bits), x, w_qinv, idiom=tag("start"))
        hi = b.op(by_width("mulhi", self.bits), x, w, idiom=tag("body"))
        tq = b.op(by_width("mulhi", self.bits), t, q, idiom=tag("body"))
        return b.op(by_width("sub", self.bits), hi, tq, idiom=tag("end"))

    def bound(self, x_abs: int, w_abs: int) -> int:
        """Upper bound of |multiply(x, w)| for |x| <= x_abs, |w| <= w_abs."""
        return -(-x_abs * w_abs // self.r) + (self.q + 1) // 2

    def prove(self) -> MontgomeryLemma:
        """The lemma every butterfly and product relies on (the verifier checks ranges only)."""
        return prove_montgomery(self.q, self.bits)
