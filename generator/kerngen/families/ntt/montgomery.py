"""Signed Montgomery multiplication, the NTT family's multiplication strategy.

A product by a constant c stored as the pair w = c*R mod q (centred) and
w' = w*q^-1 mod R (R = 2^bits) needs no reduction afterwards:

    t = lo(x*w');  r = hi(x*w) - hi(t*q)  =  x*c/R mod q, |r| <= |x|*|w|/R + (q+1)/2

Where the lanes have high-half multiplications (16-bit lanes) that is four
instructions. 32-bit lanes have none: a widening product of the even lanes
(vpmuldq) gives lo and hi of one 64-bit product, so the even and odd lanes
are multiplied apart (the odd lanes of x moved down, the odd lanes' w and w'
stored moved down; t = lo(x*w') from a widening product as well), and the
odd results blended back over the even ones (where the ISA moves under an
opmask, the even results moved down over the odd ones in one instruction,
`high_halves`).
The strategy gives its stored constants, its instruction sequence, its
bound and its lemma (`prove`); the NTT kernels and schedules ask it and
nothing else about multiplication. On 64-bit lanes, which no vector
instruction multiplies signed, `UnsignedMontgomery` does base
multiplication of Shoup bundles from 32-bit pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from collections.abc import Callable, Sequence

from ...ir.instr import Builder, IdiomTag, Imm, KReg, Mem, VReg
from ...machine.ops import by_width, has, lane_range, wrap
from ...passes import wide
from ...passes.idioms.montgomery import MONTGOMERY
from ...passes.idioms.montgomery_sum import MONTGOMERY_SUM
from ...passes.lemmas import MontgomeryLemma, prove_montgomery
from ...machine.isa import AVX2, Isa
from .maths import centred
from .reducers import CONST_PREFIX, broadcast_const


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
    isa: Isa = AVX2  # which instructions combine the halves of even/odd products (`high_halves`)

    name = "montgomery"
    signed = True  # lanes hold signed values
    companion_bits = None  # a variable factor's w' is made by the product (`variable`), never stored

    @cached_property
    def lane_max(self) -> int:
        return lane_range(self.bits)[1]

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

    @property
    def even_odd(self) -> bool:
        """Products of even lanes only (no lane-wise high half at this width)."""
        return not has("mulhi", self.bits)

    def operands(self, values: Sequence[int], vector: Callable[[list[int]], Mem]) -> tuple[Mem, ...]:
        """The memory operands `multiply` takes for constants `values` (one per
        lane), each row made by `vector`: w and w', and for even/odd products
        also the odd lanes' w and w' moved down to the even ones (the same
        rows when neighbours are equal)."""
        consts = [self.constant(v) for v in values]
        rows = [[c.w for c in consts], [c.w_qinv for c in consts]]
        if self.even_odd:
            rows += [odd_down(rows[0]), odd_down(rows[1])]
        return tuple(vector(r) for r in rows)

    def qinv_register(self, b: Builder) -> VReg | None:
        """q^-1 loaded once for the `variable`s of a kernel (a register, so
        that the factor can be the instruction's memory operand), where they
        need it."""
        return None if self.even_odd else b.op("load", broadcast_const(b, self.qinv, self.bits), comment="q^-1")

    def variable(self, b: Builder, w: VReg, qinv: VReg | None = None) -> tuple[VReg, ...]:
        """A variable w as `multiply`'s factor: with w' = mullo(w, q^-1) where
        products are lane-wise (`qinv` from `qinv_register`, else read from
        the table); alone for even/odd products, which take t from the
        product x*w itself."""
        if self.even_odd:
            return (w,)
        return w, b.op(by_width("mullo", self.bits), w, qinv or broadcast_const(b, self.qinv, self.bits))

    def variable_sum(self, b: Builder, f0: tuple[VReg, ...], f1: tuple[VReg, ...]) -> tuple:
        """The factor of w0 + w1 from the factors of w0 and w1: w' = mullo(w, q^-1)
        is linear mod 2^bits, so (w0 + w1)' = w0' + w1', which `multiply` adds
        (wrapping, inside the product) where `variable` would multiply."""
        w = b.op(by_width("add", self.bits), f0[0], f1[0])
        return (w,) if self.even_odd else (w, (f0[1], f1[1]))

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg) -> VReg:
        """x*c*R^-1 mod q for c given by `operands`, or x*w*R^-1 for a variable
        w given by `variable`.
        The instructions are tagged as one product, which the verifier checks
        (same x, q itself, w' consistent with w) before relying on the lemma."""
        group = b.new_group()

        def op(name: str, *sources, role: str = "body") -> VReg:
            return b.op(name, *sources, idiom=IdiomTag(group, MONTGOMERY, role, 1))

        if not self.even_odd:
            w, wq = factor
            first = "start"
            if isinstance(wq, tuple):  # w' as the parts `variable_sum` left
                wq, first = op(by_width("add", self.bits), *wq, role="start"), "body"
            t = op(by_width("mullo", self.bits), x, wq, role=first)
            hi = op(by_width("mulhi", self.bits), x, w)
            return op(by_width("sub", self.bits), hi, op(by_width("mulhi", self.bits), t, q), role="end")
        mask = even_lanes(b, self.isa, self.bits, x.bits)
        odd_down, widen, sub = by_width("duplicate_odd", self.bits), "vpmuldq", by_width("sub", self.bits)
        x_odd = op(odd_down, x, role="start")
        halves = []
        if len(factor) == 1:  # a variable w: t = lo(lo(x*w) * q^-1) from the product itself
            w = factor[0]
            qinv = broadcast_const(b, self.qinv, self.bits)
            for xs, ws in ((x, w), (x_odd, op(odd_down, w))):
                p = op(widen, xs, ws)
                halves.append(op(sub, p, op(widen, op(widen, p, qinv), q)))
        else:  # t = lo(x*w') from a widening product too: vpmulld is two µops and ten cycles on Intel,
            # and its odd lanes would need moving down; two vpmuldq are two µops, five cycles, no move
            w, wq, w_odd, wq_odd = factor
            for xs, ws, wqs in ((x, w, wq), (x_odd, w_odd, wq_odd)):
                halves.append(op(sub, op(widen, xs, ws), op(widen, op(widen, xs, wqs), q)))  # hi(x*w) - hi(t*q)
        return high_halves(b, self.bits, halves[0], lambda: halves[1], mask, group, MONTGOMERY, "end")

    def multiply_sum(self, b: Builder, pairs: Sequence[tuple[VReg, VReg]], q: VReg) -> VReg:
        """sum of x*w over `pairs` times R^-1 mod q, reduced once (even/odd
        lanes only): the double-width products x*w of the even lanes summed
        (double-width additions), likewise those of the odd lanes moved
        down, and each sum S reduced as one product is, t = lo(lo(S)*q^-1),
        r = hi(S) - hi(t*q) (`sum_bound` says where S and r fit). Tagged as
        one group of kind MONTGOMERY_SUM, which the verifier checks."""
        group = b.new_group()

        def op(name: str, *sources, role: str = "body") -> VReg:
            return b.op(name, *sources, idiom=IdiomTag(group, MONTGOMERY_SUM, role, 1))

        mask = even_lanes(b, self.isa, self.bits, pairs[0][0].bits)
        odd_down, widen, add = by_width("duplicate_odd", self.bits), "vpmuldq", by_width("add", 2 * self.bits)
        qinv = broadcast_const(b, self.qinv, self.bits)
        halves = []
        for odd in (False, True):
            total = None
            for x, w in pairs:
                if odd:
                    x, w = op(odd_down, x), op(odd_down, w)
                p = op(widen, x, w, role="start" if total is None and not odd else "body")
                total = p if total is None else op(add, total, p)
            halves.append(op(by_width("sub", self.bits), total, op(widen, op(widen, total, qinv), q)))
        return high_halves(b, self.bits, halves[0], lambda: halves[1], mask, group, MONTGOMERY_SUM, "end")

    def sum_bound(self, x_abs: int, w_abs: int, terms: int) -> int | None:
        """Upper bound of |multiply_sum| of `terms` products with |x| <= x_abs,
        |w| <= w_abs: |S|/R + (q+1)/2; None where S could leave the signed
        double-width lane or r the lane (or the lanes have a high half of
        their own, where the products are not double-width)."""
        total = terms * x_abs * w_abs
        if not self.even_odd or total >= 1 << (2 * self.bits - 1):
            return None
        r = -(-total // self.r) + (self.q + 1) // 2
        return r if r <= self.lane_max else None

    def bound(self, x_abs: int, w_abs: int) -> int:
        """Upper bound of |multiply(x, w)| for |x| <= x_abs, |w| <= w_abs."""
        return -(-x_abs * w_abs // self.r) + (self.q + 1) // 2

    def forward_bounds(self, x: int, y: int, w_abs: int, y_register: int) -> tuple[int, int] | None:
        """|values| after Cooley–Tukey (x + w*y, x - w*y); None where a lane could overflow."""
        m = self.bound(y, w_abs)
        return None if x + m > self.lane_max else (x + m, x + m)

    def inverse_bounds(self, x: int, y: int, w_abs: int, scale_abs: int | None,
                       y_register: int) -> tuple[int, int] | None:
        """|values| after Gentleman–Sande (x + y, w*(x - y)), the sum times the scale where asked."""
        s = x + y
        if s > self.lane_max:
            return None
        return (s if scale_abs is None else self.bound(s, scale_abs)), self.bound(s, w_abs)

    def butterfly(self, b: Builder, x: VReg, y: VReg, factor: tuple[Mem, ...], q: VReg, inverse: bool,
                  scale: tuple[Mem, ...] | None, y_register: int, comment: str) -> tuple[VReg, VReg]:
        """Cooley–Tukey (x + w*y, x - w*y) or Gentleman–Sande (x + y, w*(x - y)),
        the sum also multiplied by `scale` where given (the inverse's first layer)."""
        add, sub = by_width("add", self.bits), by_width("sub", self.bits)
        if not inverse:
            m = self.multiply(b, y, factor, q)
            return b.op(add, x, m, comment=comment), b.op(sub, x, m)
        total = b.op(add, x, y, comment=comment)
        diff = self.multiply(b, b.op(sub, x, y), factor, q)
        if scale is not None:
            total = self.multiply(b, total, scale, q)
        return total, diff

    def prove(self) -> MontgomeryLemma:
        """The lemma every butterfly and product relies on (the verifier checks ranges only)."""
        return prove_montgomery(self.q, self.bits)


ODD_LANES = 0xAA  # blend selector: the odd lanes from the second source
MERGED_ODD = "duplicate_odd_merge"  # odd units copied over the even ones under an opmask, the others kept


def even_lanes(b: Builder, isa: Isa, bits: int, vector_bits: int) -> KReg | None:
    """The opmask of the even `bits`-bit lanes of `vector_bits`-bit vectors where the ISA moves the
    high halves of widening products under one (`high_halves`), else None: made once per kernel, at
    its start, the lanes of a table whose even lanes are 1 tested against themselves (the products
    read it as a value made outside them)."""
    if not isa.has(MERGED_ODD, bits):
        return None

    def make() -> KReg:
        k = b.kreg(vector_bits)
        table = b.table(f"{CONST_PREFIX[bits]}_even_lanes", bits // 8, [1, 0] * (vector_bits // bits // 2))
        ones = b.op("load", Mem(table, 0, vector_bits // 8), bits=vector_bits)
        b.emit(by_width("test_mask", bits), k, ones, ones, comment="the even lanes")
        return k
    return b.held_constant(("even lanes", bits, vector_bits), make)


def high_halves(b: Builder, bits: int, even: VReg, odd: Callable[[], VReg], mask: KReg | None, group: int,
                kind: str, role: str) -> VReg:
    """The high halves of two widening products in their lanes: those of `even` (of the even lanes)
    moved down over the even lanes of `odd` (of the odd lanes moved down, made by the call after the
    move), tagged as the `role` of product `group` of tag `kind`. Under the even lanes' opmask
    (`even_lanes`) one merging move into the odd product, whose lanes no other instruction reads;
    without one a move and a blend."""
    last = IdiomTag(group, kind, role, 1)
    if mask is not None:
        into = odd()
        b.emit(by_width(MERGED_ODD, bits), into, mask, even, idiom=last)
        return into
    moved = b.op(by_width("duplicate_odd", bits), even, idiom=IdiomTag(group, kind, "body", 1))
    return b.op(by_width("blend", bits), moved, odd(), Imm(ODD_LANES), idiom=last)


def odd_down(lanes: list[int]) -> list[int]:
    """Each odd lane's value in its even neighbour too (where a widening product reads it).
    A vector of one lane has no odd lane: its neighbour is a lane of the
    register's padding, whose constants are zeros (`TwiddleTable`)."""
    return [lanes[k | 1] if (k | 1) < len(lanes) else 0 for k in range(len(lanes))]


def broadcast_operands(mul, b: Builder, value: int, bits: int) -> tuple[Mem, ...]:
    """`mul.operands` for `value` in every lane, each row read from a broadcast
    table: an even lane and its equal odd neighbour stand for all of them
    (the neighbour is what `odd_down` moves into the even lane)."""
    return mul.operands([value] * 2, lambda row: broadcast_const(b, row[0], bits))


# the products of the rows w and w' of `UnsignedMontgomery.operands`: hi(x*w), lo(x*w')
_PRODUCTS = (wide.HIGH, wide.LOW)


@dataclass(frozen=True)
class UnsignedMontgomery:
    """Montgomery's product on unsigned 64-bit lanes, each multiplication a
    template of 32-bit pieces (`passes.wide`), or one instruction where the
    ISA has it (both halves on general registers, the low one on AVX-512): base multiplication
    of 64-bit bundles, whose NTTs multiply by Shoup's (products of two
    variables have no precomputed w'). With t = lo(x*w') (w' = w*q^-1 mod
    R, R = 2^64, or for a variable w t = lo(lo(x*w)*q^-1)),

        r = (hi(x*w) + q) - hi(t*q)  =  x*w/R mod q,  1 <= r <= q + hi(x*w),

    q added before the subtraction so that nothing goes below zero: the low
    halves of x*w and t*q are equal, so hi(x*w) - hi(t*q) = (x*w - t*q)/R
    > -q. The verifier checks the shape and bounds the sum hi(x*w) + q."""

    q: int
    bits: int
    isa: Isa = AVX2  # which halves of 64-bit products it does in one instruction (`wide.one_instruction`)

    name = "montgomery"
    signed = False
    companion_bits = None  # a variable factor's t comes from the product x*w itself

    @property
    def native(self) -> frozenset[str]:
        """The halves of a 64-bit product done in one instruction each: both on general registers, the low
        half on AVX-512 (vpmullq), neither below; the others from the templates."""
        return wide.one_instruction(self.isa)

    @cached_property
    def lane_max(self) -> int:
        return lane_range(self.bits, signed=False)[1]

    @property
    def r(self) -> int:
        return 1 << self.bits

    @property
    def qinv(self) -> int:
        """q^-1 mod R."""
        return pow(self.q, -1, self.r)

    def constant(self, c: int) -> MontgomeryConstant:
        w = c * self.r % self.q
        return MontgomeryConstant(c % self.q, w, w * self.qinv % self.r)

    def operands(self, values: Sequence[int], vector: Callable[[list[int]], Mem]) -> tuple[Mem, ...]:
        """w and w', then the high halves (the pieces' y >> 32) of those whose
        products are templates: w's in hi(x*w), w''s in lo(x*w')."""
        consts = [self.constant(v) for v in values]
        rows = [[c.w for c in consts], [c.w_qinv for c in consts]]
        rows += [[v >> wide.HALF for v in rows[i]] for i in wide.from_pieces(_PRODUCTS, self.native)]
        return tuple(vector(r) for r in rows)

    def qinv_register(self, b: Builder) -> None:
        """q^-1 is a template's table operand: no register."""
        return None

    def variable(self, b: Builder, w: VReg, qinv: None = None) -> tuple[VReg, ...]:
        """A variable w: t comes from the product x*w itself."""
        return (w,)

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg) -> VReg:
        p = wide.Product(b, b.new_group(), "montgomery", lambda v: broadcast_const(b, v, self.bits), self.native)
        if len(factor) == 1:  # t = lo(lo(x*w)*q^-1)
            w, w_hi = factor[0], None
            t = p.emit(wide.LOW, p.emit(wide.LOW, x, w), p.const(self.qinv), p.high_half(wide.LOW, self.qinv))
        else:
            w, wq = factor[:2]
            highs = dict(zip(wide.from_pieces(_PRODUCTS, self.native), factor[2:]))
            w_hi = highs.get(0)
            t = p.emit(wide.LOW, x, wq, highs.get(1))
        lifted = p.op(by_width("add", self.bits), p.emit(wide.HIGH, x, w, w_hi), q)
        return p.end(by_width("sub", self.bits), lifted, p.emit(wide.HIGH, t, q, p.high_half(wide.HIGH, self.q)))

    def bound(self, x_max: int, w_max: int) -> int:
        """Largest multiply(x, w) for 0 <= x <= x_max, 0 <= w <= w_max."""
        return self.q + (x_max * w_max >> self.bits)

    def prove(self) -> MontgomeryLemma:
        return prove_montgomery(self.q, self.bits, signed=False)
