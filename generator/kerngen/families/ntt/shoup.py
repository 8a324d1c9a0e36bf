"""Shoup multiplication and Harvey's lazy butterflies, the NTT family's
multiplication strategy on unsigned lanes.

A product by a constant w in [0, q) stored with w' = floor(w*2^W/q)
(W = the lane width) needs no reduction afterwards:

    Q = hi(x*w');  r = lo(x*w) - lo(Q*q)  =  x*w mod q,  0 <= r < 2q  for any x < 2^W

(`lemmas.prove_shoup`). Lanes with an unsigned high-half multiplication
(16 bits: vpmulhuw) take Q in one instruction; 32-bit lanes take it from
widening products of the even lanes (vpmuludq), the odd lanes moved down and
the odd w' stored moved down, the odd high halves blended over the even ones
(on AVX-512 the even ones moved down over the odd ones under an opmask,
one instruction: `montgomery.high_halves`);
64-bit vector lanes have no high-half multiplication and assemble Q (and,
below AVX-512, which has vpmullq, the low halves too) from 32-bit pieces
(`passes.wide`), w and w' stored with the high halves the pieces read,
while lanes on general registers (the scalar ISA) take Q from `mulx` and the
low halves from `imul`, as 16-bit lanes do from their instructions. Where
the ISA has 52-bit multiply-adds (IFMA) and 4q < 2^52, 64-bit lanes keep
every value below 2^52 and take the product from them (`passes.ifma`),
w' = floor(w*2^52/q).

Values stay unsigned and lazily reduced (Harvey): the forward butterfly
gives (x + t, x + c - t) for t = w*y reduced as above and c the multiple of q
at or above t's bound, the inverse (x + y, w*(x + c - y)) for c at or above
y's; the bound analysis adds a reduction only where a register could leave
the lane: a conditional subtraction of 2q (minu(x, x - 2q): exact where
x < 4q), or beyond 4q a Shoup product by 1 (`harvey.HarveyReducer`).

Where 4q leaves the lane but 2q does not (q up to 2^31 on 32-bit lanes:
BabyBear, KoalaBear), `ShoupBelowQ` keeps Harvey's butterflies at half the
reach: each product reduced below q by one conditional subtraction of q, so
c = q, and the values below 2q, a butterfly's inputs brought below q by one
conditional subtraction of q where the bound analysis finds x + q leaving the
lane.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from ...ir.instr import Builder, IdiomTag, Mem, VReg
from ...machine.ops import by_width, lane_range, spec
from ...passes import ifma, wide
from ...core.compile_cache import memo
from ...passes.lemmas import ConditionalSubtractionLemma, LemmaError, ShoupLemma, prove, prove_shoup
from ...passes.idioms.shoup import SHOUP
from ...passes.idioms.shoup52 import SHOUP52
from ...machine.isa import AVX2, Isa
from .csub import ConditionalSubtraction, conditional_subtraction
from .montgomery import even_lanes, high_halves, odd_down
from .params import shoup_fits
from .reducers import broadcast_const


# the products of w and w' (the rows of `Shoup.operands`): lo(x*w), hi(x*w')
_PRODUCTS = (wide.LOW, wide.HIGH)


@dataclass(frozen=True)
class ShoupConstant:
    """A constant as stored for multiplication: w = c mod q and w' = floor(w*2^W/q)."""

    value: int
    w: int
    wp: int


@dataclass(frozen=True)
class Shoup:
    q: int
    bits: int  # lane width W
    isa: Isa = AVX2  # what multiplies lanes of this width
    # W in w' = floor(w*2^W/q): the lane width (None), or the 52 bits of multiply-adds (`candidates`)
    product_bits: int | None = None
    # Q = hi(x*w') from pieces: exact, or short by up to 2 and the remainder then below 4q brought below 2q
    # by a conditional subtraction of 2q (`candidates`)
    quotient: wide.Template = wide.HIGH

    name = "shoup"
    signed = False  # lanes hold unsigned values
    reach = 4  # Harvey's lazy values stay below reach*q

    @property
    def r(self) -> int:
        """The scale base multiplication leaves (its Montgomery radix 2^W), which the inverse NTT undoes."""
        return 1 << self.bits

    @cached_property
    def lane_max(self) -> int:
        """The largest lane value: below 2^52 where products are 52-bit multiply-adds (they read 52 bits)."""
        return ifma.MASK if self.ifma else lane_range(self.bits, signed=False)[1]

    @classmethod
    def candidates(cls, q: int, bits: int, isa: Isa) -> tuple[Shoup, ...]:
        """The products `isa` has for q: on the lane width, and from 52-bit
        multiply-adds where it has them on 64-bit lanes and Harvey's lazy
        values stay below 2^52 (4q < 2^52); the cost model chooses. Those
        keep every lane value below 2^52, so kernels taking any 64-bit
        value (the standalone ones) use the product on the lane width.
        Where 4q leaves the lane, the products reduced below q (`ShoupBelowQ`).
        Where the ISA multiplies the low halves of 64-bit lanes in one
        instruction and the high half from pieces (AVX-512: the pieces are
        then most of the product), Q from three pieces (`wide.HIGH_SHORT`:
        five instructions fewer, two more for the conditional subtraction;
        measured faster there, AVX2's kernels keep the exact quotient)."""
        if not shoup_fits(bits, q):
            return (ShoupBelowQ(q, bits, isa),)
        fits = bits == wide.BITS and 4 * q <= ifma.MASK and all(isa.has(op, bits) for op in ifma.OPERATIONS)
        short = bits == wide.BITS and wide.one_instruction(isa) == {wide.LOW.name}
        return (cls(q, bits, isa, quotient=wide.HIGH_SHORT if short else wide.HIGH),
                *((cls(q, bits, isa, ifma.BITS),) if fits else ()))

    @property
    def shoup_bits(self) -> int:
        return self.product_bits or self.bits

    @property
    def companion_bits(self) -> int:
        """W of the w' = floor(w*2^W/q) a variable factor comes with (it cannot be made from w in the kernel)."""
        return self.shoup_bits

    @property
    def ifma(self) -> bool:
        """Products from 52-bit multiply-adds (`passes.ifma`)."""
        return self.shoup_bits == ifma.BITS

    def constant(self, c: int) -> ShoupConstant:
        w = c % self.q
        return ShoupConstant(w, w, (w << self.shoup_bits) // self.q)

    @property
    def wide(self) -> bool:
        """Products assembled from 32-bit pieces (`passes.wide`): neither a lane-wise unsigned high half at
        this width nor a widening product of half-width lanes to take it from (64 bits)."""
        return not self.ifma and not (self.isa.has("mullo", self.bits) and
                                      (self.isa.has("mulhu", self.bits) or self.isa.has("mul32", 2 * self.bits)))

    @property
    def even_odd(self) -> bool:
        """High halves from products of even lanes only (no lane-wise unsigned high half at this width)."""
        return not self.wide and not self.ifma and not self.isa.has("mulhu", self.bits)

    def operands(self, values: Sequence[int], vector: Callable[[list[int]], Mem]) -> tuple[Mem, ...]:
        """The memory operands `multiply` takes for constants `values` (one per
        lane), each row made by `vector`: w and w', for even/odd products
        also the odd lanes' w' moved down to the even ones, for products from
        pieces also the high halves of w and w' (w >> 32, w' >> 32) that
        their templates read (`pieces`)."""
        consts = [self.constant(v) for v in values]
        rows = [[c.w for c in consts], [c.wp for c in consts]]
        if self.even_odd:
            rows.append(odd_down(rows[1]))
        if self.wide:
            rows += [[v >> wide.HALF for v in rows[i]] for i in self.pieces]
        return tuple(vector(r) for r in rows)

    @property
    def pieces(self) -> tuple[int, ...]:
        """Which of w (0, in lo(x*w)) and w' (1, in hi(x*w')) are multiplied from 32-bit pieces."""
        return wide.from_pieces(_PRODUCTS, wide.one_instruction(self.isa))

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg, comment: str = "") -> VReg:
        """x*w mod q in [0, 2q) for (w, w') given by `operands`, or as two
        registers (variable w with its w'). Tagged as one Shoup product, which
        the verifier checks before relying on the lemma."""
        group = b.new_group()

        def op(name: str, *sources, role: str = "body") -> VReg:
            return b.op(name, *sources, idiom=IdiomTag(group, SHOUP, role, 1),
                        comment=comment if role == "start" else "")

        if self.wide:
            return self._multiply_wide(b, group, x, factor, q, comment)
        if self.ifma:
            return self._multiply_ifma(b, group, x, factor, comment)
        mullo = by_width("mullo", self.bits)
        if not self.even_odd:
            w, wp = factor
            quotient = op(by_width("mulhu", self.bits), x, wp, role="start")
        else:
            mask = even_lanes(b, self.isa, self.bits, x.bits)
            widen, odd = "vpmuludq", by_width("duplicate_odd", self.bits)
            w, wp = factor[:2]
            x_odd = op(odd, x, role="start")
            wp_odd = factor[2] if len(factor) == 3 else op(odd, wp)
            quotient = high_halves(b, self.bits, op(widen, x, wp), lambda: op(widen, x_odd, wp_odd), mask, group,
                                   SHOUP, "body")
        return op(by_width("sub", self.bits), op(mullo, x, w), op(mullo, quotient, q), role="end")

    def _multiply_wide(self, b: Builder, group: int, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg,
                       comment: str) -> VReg:
        """The same product with each multiplication a template of 32-bit
        pieces or the ISA's one instruction: Q = HIGH(x, w'), then LOW(x, w) -
        LOW(Q, q), x's halves shared. A variable w comes without high halves."""
        highs = dict(zip(self.pieces, factor[2:]))
        p = wide.Product(b, group, SHOUP, lambda v: broadcast_const(b, v, self.bits), wide.one_instruction(self.isa))
        quotient = p.emit(self.quotient, x, factor[1], highs.get(1), comment)
        xw = p.emit(wide.LOW, x, factor[0], highs.get(0))
        r = p.end(by_width("sub", self.bits), xw, p.emit(wide.LOW, quotient, q, p.high_half(wide.LOW, self.q)))
        return self.short_fix.emit(b, r, "short quotient: below 2q") if self.quotient.slack else r

    @property
    def short_fix(self) -> ConditionalSubtraction:
        """What brings the remainder of a short quotient (below 4q) below 2q."""
        return ConditionalSubtraction(self.q, 2 * self.q, self.bits, self.isa)

    def _multiply_ifma(self, b: Builder, group: int, x: VReg, factor: tuple[Mem | VReg, ...], comment: str) -> VReg:
        """The same product from 52-bit multiply-adds (`ifma.SHOUP52`), each
        accumulating into a register zeroed before the group (a zeroing idiom:
        no load, no execution port)."""
        const = lambda v: broadcast_const(b, v, self.bits)  # noqa: E731
        w, wp = factor
        env = {"x": x, "w": w, "wp": wp, "negq": const((1 << ifma.BITS) - self.q), "mask": const(ifma.MASK)}
        zeros = [b.op("zero") for step in ifma.SHOUP52 if step[2] == "zero"]
        last = len(ifma.SHOUP52) - 1
        for i, (op, dst, acc, *sources) in enumerate(ifma.SHOUP52):
            tag = IdiomTag(group, SHOUP52, "start" if i == 0 else "end" if i == last else "body", 1)
            name, operands = by_width(op, self.bits), [env[v] for v in sources]
            if "r" in spec(name).slots[0].access:  # accumulates into its destination
                env[dst] = zeros.pop(0) if acc == "zero" else env[acc]
                b.emit(name, env[dst], *operands, comment=comment if i == 0 else "", idiom=tag)
            else:
                env[dst] = b.op(name, env[acc], *operands, idiom=tag)
        return env[ifma.SHOUP52[-1][1]]

    def bound(self, x_max: int) -> int:
        """Largest multiply(x, w) for 0 <= x <= x_max, any w (Shoup's lemma)."""
        return self.prove().range_for(0, x_max)[1]

    def offset(self, inverse: bool, y_register: int) -> int:
        """c, the multiple of q added before a subtraction so nothing goes
        below zero: at or above what is subtracted, the product w*y (forward)
        or y itself (inverse), for a register y whose lanes reach `y_register`."""
        subtracted = y_register if inverse else self.bound(y_register)
        return -(-subtracted // self.q) * self.q

    def forward_bounds(self, x: int, y: int, w_abs: int, y_register: int) -> tuple[int, int] | None:
        """Cooley–Tukey (x + t, x + c - t), t = w*y; None where a lane could overflow."""
        c = self.offset(False, y_register)
        return None if x + c > self.lane_max else (x + self.bound(y), x + c)

    def inverse_bounds(self, x: int, y: int, w_abs: int, scale_abs: int | None,
                       y_register: int) -> tuple[int, int] | None:
        """Gentleman–Sande (x + y, w*(x + c - y)), the sum times the scale where asked."""
        c = self.offset(True, y_register)
        if x + y > self.lane_max or x + c > self.lane_max:
            return None
        return (x + y if scale_abs is None else self.bound(x + y)), self.bound(x + c)

    def butterfly(self, b: Builder, x: VReg, y: VReg, factor: tuple[Mem, ...], q: VReg, inverse: bool,
                  scale: tuple[Mem, ...] | None, y_register: int, comment: str) -> tuple[VReg, VReg]:
        add, sub = by_width("add", self.bits), by_width("sub", self.bits)
        c = broadcast_const(b, self.offset(inverse, y_register), self.bits)
        if not inverse:
            t = self.multiply(b, y, factor, q)
            return b.op(add, x, t, comment=comment), b.op(sub, b.op(add, x, c), t)
        total = b.op(add, x, y, comment=comment)
        diff = self.multiply(b, b.op(sub, b.op(add, x, c), y), factor, q)
        if scale is not None:
            total = self.multiply(b, total, scale, q)
        return total, diff

    def prove(self) -> ShoupLemma | ShoupBelowQLemma:
        if self.quotient.slack:
            return prove_short_quotient(self.q, self.bits, self.quotient.slack, self.isa)
        return prove_shoup(self.q, self.shoup_bits)


@dataclass(frozen=True)
class ShoupBelowQ(Shoup):
    """Shoup's product followed by a conditional subtraction of q: every
    product below q, for q whose Harvey's 4q leaves the lane (2q must not:
    Shoup's remainders reach it). The butterflies are Harvey's with c = q
    (`offset`, from the bound), their values below 2q."""

    reach = 2

    @property
    def below_q(self) -> ConditionalSubtraction:
        return ConditionalSubtraction(self.q, self.q, self.bits, self.isa)

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg, comment: str = "") -> VReg:
        """x*w mod q in [0, q): Shoup's product, then minu(r, r - q)."""
        return self.below_q.emit(b, super().multiply(b, x, factor, q, comment), "product below q")

    def prove(self) -> ShoupBelowQLemma:
        return prove_shoup_below_q(self.q, self.bits, self.isa)


@dataclass(frozen=True)
class ShoupBelowQLemma:
    """Shoup's product then a conditional subtraction of c: both lemmas
    proven, the range the first leaves for x passed through the second
    (below q for `ShoupBelowQ`, below 2q after a short quotient)."""

    product: ShoupLemma
    subtraction: ConditionalSubtractionLemma

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        return self.subtraction.range_for(*self.product.range_for(lo, hi))


@memo(maxsize=256)
def prove_shoup_below_q(q: int, bits: int, isa: Isa = AVX2, c: int | None = None) -> ShoupBelowQLemma:
    """That Shoup's product followed by the conditional subtraction of c
    (default q) leaves every x of the lane in [0, q): what `ShoupBelowQ`'s
    butterflies rely on. `c` lets tests watch another constant fail."""
    idiom = conditional_subtraction(q, q if c is None else c, bits, isa)
    lemma = prove(idiom)
    if not isinstance(lemma, ConditionalSubtractionLemma):
        raise LemmaError(f"Shoup product mod {q} below q: {idiom.steps} is no conditional subtraction of a multiple "
                         "of q")
    found = ShoupBelowQLemma(prove_shoup(q, bits), lemma)
    got = found.range_for(0, (1 << bits) - 1)
    if got != (0, q - 1):
        raise LemmaError(f"Shoup product mod {q} then a conditional subtraction of {lemma.c}: the range over "
                         f"{bits}-bit lanes is {list(got)}, not [0, {q - 1}]")
    return found


@memo(maxsize=256)
def prove_short_quotient(q: int, bits: int, slack: int, isa: Isa) -> ShoupBelowQLemma:
    """That Shoup's product with a quotient short by up to `slack`, then the
    conditional subtraction of 2q, leaves every x of the lane in the range
    the exact product leaves: what the butterflies' bounds assume."""
    product = prove_shoup(q, bits, slack)
    subtraction = prove(conditional_subtraction(q, 2 * q, bits, isa))
    if not isinstance(subtraction, ConditionalSubtractionLemma):
        raise LemmaError(f"Shoup product mod {q} with a short quotient: no conditional subtraction of 2q")
    found = ShoupBelowQLemma(product, subtraction)
    lane = (0, (1 << bits) - 1)
    if found.range_for(*lane) != prove_shoup(q, bits).range_for(*lane):
        raise LemmaError(f"Shoup product mod {q} with a quotient short by up to {slack}: the range over {bits}-bit "
                         f"lanes is {list(found.range_for(*lane))}, wider than the exact quotient's")
    return found
