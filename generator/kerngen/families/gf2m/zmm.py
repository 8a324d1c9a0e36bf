"""One element of four limbs in one 512-bit register: products, squares
and the reduction without leaving it.

A zmm register holds eight 64-bit limbs, a whole product of two elements.
Multiplication loads b into both 256-bit halves and a as (a01, a01, a23,
a23), so that four `vpclmulqdq` (one per pair of 64-bit halves) form the
four 128 x 128-bit block products a_i b_j at once, one per 128-bit lane;
squaring spreads the limbs one per lane and squares them with one. The
lanes' products are summed into place with three cross-lane moves. The
reduction is one pass of independent terms (`shift_terms`): each is c,
masked from some bit up, shifted right by whole limbs (`valignq` against
zero) and bits, so no fold waits for another and no freeze follows.

Measured on an Intel Xeon (family 6 model 167, one call at a time) these
kernels are slower than the avx2 ones on pairs of limbs: there 512-bit
operations issue on two ports where 128-bit ones issue on three, and the
kernels are bound by their operation count, not by carry-less products.
"""

from __future__ import annotations

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from ...machine.ops import truth_table
from .plan import FieldPlan, shift_terms

BITS = 512
# The kernels done on one element in one zmm register. Measured on an Intel Xeon (family 6 model 167),
# ticks per call, `kerngen bench` (and a loop of independent calls): multiplication 13.3 against 13.6 on
# pairs of limbs (11.8 against 13.8), four carry-less products where the pairs take twelve; squaring 7.7
# against 6.7 and the lazy multiplication 15.3 against 12.4 (its reduction has six terms in place of
# four): one product in place of four saves too little where the reduction's limb moves, all on one
# port, bound the kernel, and 512-bit operations issue on two ports where 128-bit ones issue on three.
WHOLE = frozenset({"mul"})
LIMBS = BITS // 64
MASK64 = (1 << 64) - 1


XOR3 = truth_table(lambda a, c, d: a ^ c ^ d)
XOR_AND = truth_table(lambda a, c, d: (a ^ c) & d)


def fits(plan: FieldPlan) -> bool:
    """Whether an element is four limbs (loaded as 32 bytes; its product
    fills one zmm register)."""
    return 2 * plan.limbs == LIMBS


class Zmm:
    """Operations on whole 512-bit registers of limbs."""

    def __init__(self, b: Builder):
        self.b = b
        self._zero: VReg | None = None

    def op(self, op: str, *operands, bits: int = BITS) -> VReg:
        return self.b.op(op, *operands, bits=bits)

    def const(self, label: str, limbs: tuple[int, ...], comment: str) -> Mem:
        return Mem(self.b.table(label, 8, limbs, comment=comment, align=BITS // 8), 0, BITS // 8)

    def limb_mask(self, first: int, last: int) -> Mem:
        """Ones in limbs first..last-1."""
        limbs = tuple(MASK64 if first <= k < last else 0 for k in range(LIMBS))
        return self.const(f"gf2m_zmask_{first}_{last}", limbs, f"limbs {first}..{last - 1} of a zmm register")

    def zero(self) -> VReg:
        """A register of zeros, loaded once per kernel."""
        if self._zero is None:
            self._zero = self.op("load", self.const("gf2m_zero8", (0,) * LIMBS, "zero zmm"))
        return self._zero

    def xor(self, a, c) -> VReg:
        return self.op("vpxor", a, c)

    def and_(self, a, c) -> VReg:
        return self.op("vpand", a, c)

    def srl(self, a, r: int) -> VReg:
        return self.op("vpsrlq", a, Imm(r))

    def clmul(self, a, c, imm: int) -> VReg:
        return self.op("vpclmulqdq", a, c, Imm(imm))

    def down(self, a, zero: VReg, k: int) -> VReg:
        """Limbs k.. moved to 0.., zeros above."""
        return self.op("valignq", zero, a, Imm(k))

    def ternary(self, a: VReg, c, d, table: int, consume: bool = False) -> VReg:
        """Bitwise function `table` of a, c, d (`truth_table`). The instruction
        overwrites its first source: a itself where the caller reads it no
        more (`consume`), else a copy of it."""
        out = a if consume else self.op("copy", a)
        self.b.emit("vpternlogq", out, out, c, d, Imm(table))
        return out

    def tree(self, regs: list) -> VReg:
        """The xor of `regs`, three at a time where three are left (the fewest
        instructions), the earliest first; the caller reads none of them
        afterwards."""
        regs = list(regs)
        while len(regs) > 1:
            take, regs = regs[:3], regs[3:]
            if len(take) == 3:
                regs.append(self.ternary(*take, XOR3, consume=take[0] not in take[1:] + regs))
            else:
                regs.append(self.xor(*take))
        return regs[0]

    def broadcast256(self, arg: int) -> VReg:
        """Argument `arg`'s four limbs in both 256-bit halves."""
        return self.op("vbroadcasti64x4", Mem(ArgBase(arg), 0, 32))

    def store_low(self, arg: int, r: VReg, nwords: int) -> None:
        low = self.op("vextracti64x4", r, Imm(0), bits=256)
        self.b.emit("store", Mem(ArgBase(arg), 0, 8 * nwords), low)


def product(z: Zmm, a: VReg, b: VReg) -> VReg:
    """a * b for a, b of four limbs given in both halves (`broadcast256`).

    Lane (i, j) of the products holds a_i b_j (128-bit blocks i, j), at
    block offset i + j: lanes (00, 01, 10, 11) with a as (a0, a0, a1, a1).
    Each lane's 256-bit product is L + H x^128; the sum is
    (L0, L1 + L2 + H0, L3 + H1 + H2, H3) by 128-bit block.
    """
    a2 = z.op("vshufi64x2", a, a, Imm(0x50))  # (a0, a0, a1, a1)
    lo, hi = z.clmul(a2, b, 0x00), z.clmul(a2, b, 0x11)
    mid = z.xor(z.clmul(a2, b, 0x01), z.clmul(a2, b, 0x10))
    low = z.xor(lo, z.op("vpslldq", mid, Imm(8)))
    high = z.xor(hi, z.op("vpsrldq", mid, Imm(8)))
    zero = z.zero()
    ends = z.op("vshufi64x2", low, high, Imm(0xE4))  # (L0, L1, H2, H3)
    lows = z.op("valignq", high, low, Imm(2))  # (L1, L2, L3, H0): L2, L3 in blocks 1, 2
    highs = z.op("valignq", high, zero, Imm(6))  # (0, H0, H1, H2): H0, H1 in blocks 1, 2
    middle = z.ternary(lows, highs, z.limb_mask(2, 6), XOR_AND, consume=True)
    return z.xor(ends, middle)


def square(z: Zmm, a: VReg) -> VReg:
    """a^2 for a of four limbs in both halves: limb k into lane k, squared
    there (squares land on even limb offsets, so the lanes are the result)."""
    a2 = z.op("vshufi64x2", a, a, Imm(0x50))  # (a0, a0, a1, a1) by 128-bit block
    spread = z.op("vpermq", a2, Imm(0x50))  # limb k in the low half of lane k
    return z.clmul(spread, spread, 0x00)


def reduce(z: Zmm, plan: FieldPlan, c: VReg, bound: int) -> VReg:
    """c (degree <= bound) mod f, in one pass: every term of `shift_terms`
    is a right shift of a masked c by whole limbs (`valignq` against zero)
    and bits, all independent of one another."""
    zero = z.zero()
    masked: dict[int, VReg] = {}
    moved: dict[tuple[int, int], VReg] = {}

    def down(b: int, q: int) -> VReg:
        """Limbs q.. of c & bits >= b at limb 0. Bits below b in limbs below
        q never move down into limb 0..3 of the result."""
        if (b, q) not in moved:
            if b % 64 == 0 and q >= b // 64:
                src = c
            else:
                if b not in masked:
                    lo, bit = divmod(b, 64)
                    limbs = (0,) * lo + (MASK64 ^ ((1 << bit) - 1),) + (MASK64,) * (LIMBS - lo - 1)
                    masked[b] = z.and_(c, z.const(f"gf2m_zmask_from{b}", limbs, f"bits from x^{b} up"))
                src = masked[b]
            moved[b, q] = z.down(src, zero, q) if q else src
        return moved[b, q]

    terms = [c]
    for b, t in shift_terms(plan, bound):
        q, r = divmod(t, 64)
        if r and q + 1 < LIMBS:  # the bits of limb q + 1 shifted into limb q's top
            terms.append(z.op("vpshrdq", down(b, q), down(b, q + 1), Imm(r)))
        else:
            terms.append(z.srl(down(b, q), r) if r else down(b, q))
    out = z.tree(terms)
    if plan.m % 64:
        out = z.and_(out, z.const(f"gf2m_zmask_m{plan.m}", (MASK64,) * (plan.limbs - 1) + (plan.low_mask,)
                                  + (0,) * (LIMBS - plan.limbs), f"bits of a zmm register below x^{plan.m}"))
    return out


def k_mul(z: Zmm, plan: FieldPlan, lazy: FieldPlan, reduced: bool) -> None:
    """out = a * b mod f; `reduced`: inputs and output fully reduced, else
    lazy (reduced modulo x^s f, whose folds need no mask)."""
    bound = 2 * (plan.m - 1 if reduced else 64 * plan.limbs - 1)
    c = product(z, z.broadcast256(1), z.broadcast256(2))
    z.store_low(0, reduce(z, plan if reduced else lazy, c, bound), plan.limbs)


def k_sqr(z: Zmm, plan: FieldPlan, lazy: FieldPlan, reduced: bool) -> None:
    bound = 2 * (plan.m - 1 if reduced else 64 * plan.limbs - 1)
    c = square(z, z.broadcast256(1))
    z.store_low(0, reduce(z, plan if reduced else lazy, c, bound), plan.limbs)
