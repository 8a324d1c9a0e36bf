"""One element of up to four limbs in one 512-bit register: products,
squares and the reduction without leaving it.

A zmm register holds eight 64-bit limbs, a whole product of two elements of
n <= 4 limbs. Multiplication loads b into both 256-bit halves and a as
(a01, a01, a23, a23), so that four `vpclmulqdq` (one per pair of 64-bit
halves) form the four 128 x 128-bit block products a_i b_j at once, one per
128-bit lane; squaring spreads the limbs one per lane and squares them with
one. The lanes' products are summed into place with two cross-lane moves,
and the reduction folds the limbs above 64 n with whole-register shifts:
a term x^e of the lazy plan's g moves the high limbs down by
n - floor(e / 64) limbs (`valignq` against zero) and shifts them by
e mod 64 bits, so every limb of one fold is done by the same few
instructions. The fully reduced form is one short fold further, as for the
pairs (`reduce.freeze_pairs`).
"""

from __future__ import annotations

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from .plan import FieldPlan, folds

BITS = 512
LIMBS = BITS // 64
MASK64 = (1 << 64) - 1


def fits(plan: FieldPlan) -> bool:
    """Whether an element is four limbs (loaded as 32 bytes; its product
    fills one zmm register)."""
    return 2 * plan.limbs == LIMBS


class Zmm:
    """Operations on whole 512-bit registers of limbs."""

    def __init__(self, b: Builder):
        self.b = b
        self._zero: VReg | None = None

    def _op(self, op: str, *operands, bits: int = BITS) -> VReg:
        return self.b.op(op, *operands, bits=bits)

    def const(self, label: str, limbs: tuple[int, ...], comment: str) -> Mem:
        return Mem(self.b.table(label, 8, limbs, comment=comment), 0, BITS // 8)

    def limb_mask(self, first: int, last: int) -> Mem:
        """Ones in limbs first..last-1."""
        limbs = tuple(MASK64 if first <= k < last else 0 for k in range(LIMBS))
        return self.const(f"gf2m_zmask_{first}_{last}", limbs, f"limbs {first}..{last - 1} of a zmm register")

    def zero(self) -> VReg:
        """A register of zeros, loaded once per kernel."""
        if self._zero is None:
            self._zero = self._op("load", self.const("gf2m_zero8", (0,) * LIMBS, "zero zmm"))
        return self._zero

    def xor(self, a, c) -> VReg:
        return self._op("vpxor", a, c)

    def and_(self, a, c) -> VReg:
        return self._op("vpand", a, c)

    def sll(self, a, r: int) -> VReg:
        return self._op("vpsllq", a, Imm(r))

    def srl(self, a, r: int) -> VReg:
        return self._op("vpsrlq", a, Imm(r))

    def clmul(self, a, c, imm: int) -> VReg:
        return self._op("vpclmulqdq", a, c, Imm(imm))

    def down(self, a, zero: VReg, k: int) -> VReg:
        """Limbs k.. moved to 0.., zeros above."""
        return self._op("valignq", zero, a, Imm(k))

    def tree(self, regs: list) -> VReg:
        while len(regs) > 1:
            regs = [self.xor(regs[i], regs[i + 1]) for i in range(0, len(regs) - 1, 2)] + \
                   ([regs[-1]] if len(regs) % 2 else [])
        return regs[0]

    def broadcast256(self, arg: int) -> VReg:
        """Argument `arg`'s four limbs in both 256-bit halves."""
        return self._op("vbroadcasti64x4", Mem(ArgBase(arg), 0, 32))

    def store_low(self, arg: int, r: VReg, nwords: int) -> None:
        low = self._op("vextracti64x4", r, Imm(0), bits=256)
        self.b.emit("store", Mem(ArgBase(arg), 0, 8 * nwords), low)


def product(z: Zmm, a: VReg, b: VReg) -> VReg:
    """a * b for a, b of four limbs given in both halves (`broadcast256`).

    Lane (i, j) of the products holds a_i b_j (128-bit blocks i, j), at
    block offset i + j: lanes (00, 01, 10, 11) with a as (a0, a0, a1, a1).
    Each lane's 256-bit product is L + H x^128; the sum is
    (L0, L1 + L2 + H0, L3 + H1 + H2, H3) by 128-bit block.
    """
    a2 = z._op("vshufi64x2", a, a, Imm(0x50))  # (a0, a0, a1, a1)
    lo, hi = z.clmul(a2, b, 0x00), z.clmul(a2, b, 0x11)
    mid = z.xor(z.clmul(a2, b, 0x01), z.clmul(a2, b, 0x10))
    low = z.xor(lo, z._op("vpslldq", mid, Imm(8)))
    high = z.xor(hi, z._op("vpsrldq", mid, Imm(8)))
    zero = z.zero()
    ends = z._op("vshufi64x2", low, high, Imm(0xE4))  # (L0, L1, H2, H3)
    lows = z._op("valignq", high, low, Imm(2))  # (L1, L2, L3, H0): L2, L3 in blocks 1, 2
    highs = z._op("valignq", high, zero, Imm(6))  # (0, H0, H1, H2): H0, H1 in blocks 1, 2
    middle = z.and_(z.xor(lows, highs), z.limb_mask(2, 6))
    return z.xor(ends, middle)


def square(z: Zmm, a: VReg) -> VReg:
    """a^2 for a of four limbs in both halves: limb k into lane k, squared
    there (squares land on even limb offsets, so the lanes are the result)."""
    a2 = z._op("vshufi64x2", a, a, Imm(0x50))  # (a0, a0, a1, a1) by 128-bit block
    spread = z._op("vpermq", a2, Imm(0x50))  # limb k in the low half of lane k
    return z.clmul(spread, spread, 0x00)


def _fold(z: Zmm, plan: FieldPlan, c: VReg, zero: VReg) -> VReg:
    """c mod (x^(64 n) + x^s g) by one fold: the limbs from n up, times x^s g."""
    n = plan.limbs
    assert plan.slack == 0, "folds at a limb boundary (the lazy plan)"
    high = z.and_(c, z.limb_mask(n, LIMBS))
    moved: dict[int, VReg] = {}  # limb offset d -> the high limbs starting at limb d

    def at(d: int) -> VReg:
        if d not in moved:
            moved[d] = z.down(high, zero, n - d)
        return moved[d]

    terms = [z.xor(c, high)]
    for e in plan.poly[1:]:
        q, r = divmod(e, 64)
        terms.append(z.sll(at(q), r) if r else at(q))
        if r:
            terms.append(z.srl(at(q + 1), 64 - r))
    return z.tree(terms)


def reduce(z: Zmm, lazy: FieldPlan, c: VReg, bound: int) -> VReg:
    """c (degree <= bound) mod x^s f, degree < 64 n."""
    zero = z.zero()
    for _ in folds(lazy, bound):
        c = _fold(z, lazy, c, zero)
    return c


def freeze(z: Zmm, plan: FieldPlan, c: VReg) -> VReg:
    """A lazy element (degree < 64 n, limbs n.. zero) in its reduced form:
    its s bits above x^m, H, times f - x^m added in. The terms of f - x^m
    below x^(128) (a trinomial's or a pentanomial's, for the fields this
    holds) need H in limb 0 and limb 1 alone."""
    n, s = plan.limbs, plan.slack
    zero = z.zero()
    for _ in folds(plan, 64 * n - 1):
        h = z.down(z.srl(c, 64 - s), zero, n - 1)  # H in limb 0, zeros above
        terms = [z.and_(c, z.const(f"gf2m_zmask_m{plan.m}", (MASK64,) * (n - 1) + (plan.low_mask,)
                                   + (0,) * (LIMBS - n), f"bits of a zmm register below x^{plan.m}"))]
        for e in plan.poly[1:]:
            q, r = divmod(e, 64)
            assert q + (r + s > 64) <= 1, "terms of f - x^m below x^128"
            for limb, t in ((q, z.sll(h, r) if r else h), (q + 1, z.srl(h, 64 - r) if r + s > 64 else None)):
                if t is not None:
                    terms.append(z._op("vpslldq", t, Imm(8)) if limb else t)  # limb 0 alone moves
        c = z.tree(terms)
    return c


def k_mul(z: Zmm, plan: FieldPlan, lazy: FieldPlan, reduced: bool) -> None:
    """out = a * b mod f; `reduced`: inputs and output fully reduced, else lazy."""
    bound = 2 * (plan.m - 1 if reduced else 64 * plan.limbs - 1)
    c = reduce(z, lazy, product(z, z.broadcast256(1), z.broadcast256(2)), bound)
    z.store_low(0, freeze(z, plan, c) if reduced else c, plan.limbs)


def k_sqr(z: Zmm, plan: FieldPlan, lazy: FieldPlan, reduced: bool) -> None:
    bound = 2 * (plan.m - 1 if reduced else 64 * plan.limbs - 1)
    c = reduce(z, lazy, square(z, z.broadcast256(1)), bound)
    z.store_low(0, freeze(z, plan, c) if reduced else c, plan.limbs)
