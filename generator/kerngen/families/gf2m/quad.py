"""One element of four limbs in one 256-bit register: the product and its
reduction on whole registers, without register pairs.

a_i arrives in every limb of its own register (`vpbroadcastq` from memory)
and b as one register (b0, b1 | b2, b3). Each `vpclmulqdq` then forms two
64 x 64-bit products, a_i b_k and a_i b_(k+2), one per 128-bit lane: lane 0
lands at limb i + k of the product and lane 1 two limbs higher, so the
register is the product's limbs i + k .. i + k + 3 as they stand. Eight such
registers, summed by their limb offset (0..4), give the 512-bit product in
two registers after one `valignq` against zero per offset and half. The
reduction is one pass of independent terms (`plan.shift_terms`): each is a
window of four limbs of the masked product (one `valignq`) shifted right
together with the next window by a `vpshrdq`, so no fold waits for another.

Measured on AMD Zen 5 it is faster than c-xs233's multiplication with
`gf_norm`, both in a chain of calls and in independent calls, and than the
former form (a's and b's 128-bit blocks multiplied in the four lanes of one
zmm register), whose cross-lane moves cost five cycles each there, where
`valignq` on ymm costs three and 128-bit operations two (docs/performance.md,
"Measurements behind design choices").
"""

from __future__ import annotations

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from ...machine.ops import truth_table
from .plan import FieldPlan, limb_from, shift_terms, term_sources
from .reduce import shift_term

BITS = 256
LIMBS = BITS // 64
# the kernels done on one element in whole registers, measured faster than on pairs of limbs. Squaring
# stays on pairs: two `vpclmulqdq` on ymm and two `vshufi64x2` to regroup their lanes made independent
# calls faster but a chain of calls slower (Zen 5: docs/performance.md, "Measurements behind design choices")
WHOLE = frozenset({"mul", "mul_lazy"})
MASK64 = (1 << 64) - 1

XOR3 = truth_table(lambda a, c, d: a ^ c ^ d)
XOR_AND = truth_table(lambda a, c, d: (a ^ c) & d)


def fits(plan: FieldPlan) -> bool:
    """Whether an element is four limbs (one register; its product two)."""
    return plan.limbs == LIMBS


class Quad:
    """Operations on whole 256-bit registers of limbs."""

    def __init__(self, b: Builder):
        self.b = b
        self._zero: VReg | None = None

    def op(self, op: str, *operands) -> VReg:
        return self.b.op(op, *operands, bits=BITS)

    def const(self, limbs: tuple[int, ...], comment: str) -> Mem:
        label = "gf2m_q_" + "_".join(f"{x:x}" for x in limbs)
        return Mem(self.b.table(label, 8, limbs, comment=comment, align=BITS // 8), 0, BITS // 8)

    def zero(self) -> VReg:
        """A register of zeros, loaded once per kernel."""
        if self._zero is None:
            self._zero = self.op("load", self.const((0,) * LIMBS, "zero ymm"))
        return self._zero

    def srl(self, a, r: int) -> VReg:
        return self.op("vpsrlq", a, Imm(r))

    def sll(self, a, r: int) -> VReg:
        return self.op("vpsllq", a, Imm(r))

    def shift_right_pair(self, lo, hi, r: int) -> VReg:
        """Each limb of lo shifted right by r, its top bits the bottom of hi's (`vpshrdq`)."""
        return self.op("vpshrdq", lo, hi, Imm(r))

    def align(self, hi: VReg, lo: VReg, k: int) -> VReg:
        """Limbs k.. of lo followed by limbs 0.. of hi (`valignq`)."""
        return self.op("valignq", hi, lo, Imm(k))

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
                regs.append(self.op("vpxor", *take))
        return regs[0]


def product(q: Quad, a: int, b: int) -> list[VReg]:
    """a * b for elements of four limbs in arguments a and b, as its limbs
    0..3 and 4..7 in two registers."""
    # b's halves loaded apart: a 32-byte load waits some ten cycles more for the two 16-byte stores a pair
    # kernel leaves its result with (the store cannot forward to it), a 16-byte one does not
    bs = q.op("vinserti128", q.op("vbroadcasti128", Mem(ArgBase(b), 0, 16)), Mem(ArgBase(b), 16, 16), Imm(1))
    by_offset: dict[int, list[VReg]] = {}
    for i in range(LIMBS):
        ai = q.op("vpbroadcastq", Mem(ArgBase(a), 8 * i, 8))
        for k in range(2):  # (b0 | b2) with k = 0, (b1 | b3) with k = 1
            by_offset.setdefault(i + k, []).append(q.op("vpclmulqdq", ai, bs, Imm(k << 4)))
    zero = q.zero()
    low, high = [], []
    for o, regs in sorted(by_offset.items()):
        g = q.tree(regs)  # limbs o .. o + 3
        if o == 0:
            low.append(g)
        elif o == LIMBS:
            high.append(g)
        else:
            low.append(q.align(g, zero, LIMBS - o))
            high.append(q.align(zero, g, LIMBS - o))
    return [q.tree(low), q.tree(high)]


def reduce(q: Quad, plan: FieldPlan, c: list[VReg], bound: int) -> VReg:
    """c (degree <= bound, limbs in registers of four) mod f, in one pass:
    each term (b, t) of `shift_terms` is the window of limbs t // 64.. of
    c & bits >= b shifted right by t mod 64 together with the next window."""
    zero = q.zero()
    masked: dict[tuple[int, int], VReg | None] = {}
    windows: dict[tuple[int, int], VReg | None] = {}

    def register(b: int, k: int) -> VReg | None:
        """Register k of c & bits >= b; None where it is zero."""
        if k >= len(c) or BITS * (k + 1) <= b:
            return None
        if BITS * k >= b:
            return c[k]
        if (b, k) not in masked:
            limbs = tuple(limb_from(b, LIMBS * k + j) for j in range(LIMBS))
            masked[b, k] = q.op("vpand", c[k], q.const(limbs, f"bits from x^{b} up in limbs {LIMBS * k}.."))
        return masked[b, k]

    def window(b: int, first: int) -> VReg | None:
        """Limbs first .. first + 3 of c & bits >= b; None where zero."""
        if (b, first) not in windows:
            k, r = divmod(first, LIMBS)
            lo, hi = register(b, k), register(b, k + 1)
            if r == 0:
                windows[b, first] = lo
            elif lo is None and hi is None:
                windows[b, first] = None
            else:
                windows[b, first] = q.align(zero if hi is None else hi, zero if lo is None else lo, r)
        return windows[b, first]

    terms = [c[0]]
    for b, t in shift_terms(plan, bound):
        r = t % 64
        src_lo, src_hi = term_sources(b, t, 0)
        lo, hi = window(*src_lo), window(*src_hi) if src_hi else None
        term = shift_term(q, lo, hi, r)
        if term is not None:
            terms.append(term)
    if not plan.m % 64:
        return q.tree(terms)
    # the cut below x^m in the last xor: one (x ^ y) & mask
    below = q.const((MASK64,) * (plan.limbs - 1) + (plan.low_mask,), f"bits below x^{plan.m}")
    return q.ternary(q.tree(terms[:-1]), terms[-1], below, XOR_AND, consume=True)


def k_mul(q: Quad, plan: FieldPlan, lazy: FieldPlan, reduced: bool) -> None:
    """out = a * b mod f; `reduced`: inputs and output fully reduced, else
    lazy (reduced modulo x^s f, whose folds need no mask)."""
    bound = 2 * (plan.m - 1 if reduced else 64 * plan.limbs - 1)
    out = reduce(q, plan if reduced else lazy, product(q, 1, 2), bound)
    q.b.emit("store", Mem(ArgBase(0), 0, BITS // 8), out)

