"""The codelets of planned transforms (`plan`): kernels whose twiddles are
arguments, verified once for every twiddle of the table's range.

A `Rows` codelet loads 2^r rows of `width` elements at a fixed stride, runs
r layers of butterflies on them (Cooley–Tukey forward, Gentleman–Sande
inverse) and stores them back: the rows are vectors of the same lanes, so
no lane moves. Its twiddles are one table row of 2^r - 1 entries, each read
once and broadcast to every lane; the products take them as variables (the
multiplication strategy's `variable`: Montgomery's w' made in the kernel
from w, Shoup's w' a second argument related to the first, which the
verifier is told). Each layer's butterflies reduce a register first where
the strategy's bounds say the butterfly could leave the lane; the verifier
proves the whole kernel for every input in [lo, hi] and every twiddle in
its range, and gives the output bound the next codelet of the plan requires.

The inverse's scale 2^-L (times the strategy's factor) rides on its last
layer, layer 0, as in the unrolled kernels: the difference's twiddle is
stored times the scale (`Tables`), the sum is multiplied by the constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.contract import ArgContract, Bound, BoundOf, Contract, Values
from ...ir.instr import ArgBase, ArgSpec, Builder, Mem, VReg
from ...machine.ops import by_width, lane_range
from ...machine.target import Target
from .kernels import reduce_bounded
from .vectors import load_vector, store_vector
from .montgomery import broadcast_operands
from .plan import Rows
from .reducers import broadcast_const
from .schedule import Arithmetic

A_REQUIRES, A_ENSURES = BoundOf("a", "requires"), BoundOf("a", "ensures")


@dataclass(frozen=True)
class TwiddleArgs:
    """How a codelet reads its twiddles: argument 1 holds w, and where the strategy's product needs its
    companion stored (Shoup's w' = floor(w*2^W/q)), argument 2 holds it, entry for entry."""

    signed: bool  # how w is read (Montgomery's centred w)
    companion_bits: int | None = None  # W of Shoup's w' in argument 2 (None: the product makes what it needs)

    @property
    def paired(self) -> bool:
        return self.companion_bits is not None

    @property
    def shoup_pairs(self) -> tuple[tuple[int, int, int], ...]:
        """What the verifier is told of the arguments (`passes.verify.Verification`)."""
        return ((1, 2, self.companion_bits),) if self.paired else ()

    def specs(self, t: Target, count: int) -> tuple[ArgSpec, ...]:
        ctype = f"{'' if self.signed else 'u'}int{t.lane_bits}_t"
        names = ("w", "wp") if self.paired else ("w",)
        return tuple(ArgSpec(name, "in", ctype, t.lane_bytes, count, t.lane_bytes) for name in names)


def twiddle_args(ar: Arithmetic) -> TwiddleArgs:
    """Montgomery's products make w' from w (signed lanes, w centred), the special form's take w alone;
    Shoup's read w' (unsigned lanes), of the product's width (52 bits for multiply-adds)."""
    return TwiddleArgs(ar.mul.signed, ar.mul.companion_bits)


def twiddle_bound(ar: Arithmetic) -> Bound:
    """The range every stored w lies in: centred (Montgomery), or [0, q) (Shoup)."""
    q = ar.math.q
    return Bound(-(q // 2), q // 2) if ar.mul.signed else Bound(0, q - 1)


def _twiddle(b: Builder, ar: Arithmetic, args: TwiddleArgs, entry: int, qinv: VReg | None) -> tuple:
    """Entry `entry` of the call's twiddle row, broadcast, as the product's variable factor."""
    bits = ar.layout.lane_bits
    broadcast = by_width("broadcast", bits)
    w = b.op(broadcast, Mem(ArgBase(1), entry * bits // 8, bits // 8))
    if not args.paired:
        return ar.mul.variable(b, w, qinv)
    return w, b.op(broadcast, Mem(ArgBase(2), entry * bits // 8, bits // 8))


def build_rows(b: Builder, ar: Arithmetic, codelet: Rows, lanes: int, inverse: bool, in_bound: int,
               scale: int | None = None) -> None:
    """The codelet's instructions on argument 0 (its rows), twiddles from arguments 1 (and 2). `in_bound`:
    what the inputs reach (|value| on signed lanes, value on unsigned ones); `scale`: the inverse's constant
    the sums of layer 0 are multiplied by (the differences' twiddles carry it)."""
    mul, bits = ar.mul, ar.layout.lane_bits
    elem = bits // 8
    rows, r = 1 << codelet.radix_bits, codelet.radix_bits
    args = twiddle_args(ar)
    q = ar.math.q
    qv = b.op("load", broadcast_const(b, q, bits), comment=f"q = {q}")
    qinv = mul.qinv_register(b) if mul.signed else None
    w_abs = twiddle_bound(ar).magnitude
    by_scale = broadcast_operands(mul, b, scale, bits) if scale is not None else None
    vector = lanes * elem
    order = range(r - 1, -1, -1) if inverse else range(r)
    for column in range(0, codelet.width, lanes):
        regs = [load_vector(b, Mem(ArgBase(0), (k * codelet.stride + column) * elem, vector)) for k in range(rows)]
        bounds = [in_bound] * rows
        for t in order:
            half = rows >> (t + 1)
            for j in range(1 << t):
                factor = _twiddle(b, ar, args, (1 << t) - 1 + j, qinv)
                scaled = by_scale if scale is not None and t == 0 else None
                for lo in range(2 * j * half, 2 * j * half + half):
                    hi = lo + half
                    regs[lo], regs[hi], bounds[lo], bounds[hi] = _butterfly(
                        b, ar, regs[lo], regs[hi], bounds[lo], bounds[hi], factor, qv, inverse, scaled, w_abs,
                        f"layer {t} of {r}")
        for k in range(rows):
            store_vector(b, Mem(ArgBase(0), (k * codelet.stride + column) * elem, vector), regs[k])


def _butterfly(b: Builder, ar: Arithmetic, x: VReg, y: VReg, x_bound: int, y_bound: int, factor, qv, inverse: bool,
               scale, w_abs: int, comment: str) -> tuple[VReg, VReg, int, int]:
    """One butterfly, its inputs reduced first where its bounds could leave the lane (the larger first)."""
    mul = ar.mul
    scale_abs = w_abs if scale is not None else None

    def after(xb: int, yb: int):
        return mul.inverse_bounds(xb, yb, w_abs, scale_abs, yb) if inverse else mul.forward_bounds(xb, yb, w_abs, yb)

    while after(x_bound, y_bound) is None:
        if max(x_bound, y_bound) <= ar.reducer.reduced_bound(max(x_bound, y_bound)):
            raise ValueError(f"a butterfly on inputs below {max(x_bound, y_bound)} overflows even reduced")
        if x_bound >= y_bound:
            x, x_bound = reduce_bounded(b, x, ar.reducer, x_bound, "before the butterfly")
        else:
            y, y_bound = reduce_bounded(b, y, ar.reducer, y_bound, "before the butterfly")
    lo_bound, hi_bound = after(x_bound, y_bound)
    x, y = mul.butterfly(b, x, y, factor, qv, inverse, scale, y_bound, comment)
    return x, y, lo_bound, hi_bound


def rows_contract(t: Target, ar: Arithmetic, codelet: Rows, in_bound: Bound) -> Contract:
    """Argument a: the rows (its footprint of elements), w (and wp): the twiddle row."""
    signed = ar.mul.signed
    a = ArgSpec("a", "inout", f"{'' if signed else 'u'}int{t.lane_bits}_t", t.lane_bytes, codelet.footprint,
                t.lane_bytes)
    tw = twiddle_args(ar).specs(t, codelet.twiddles)
    w_values = Values(twiddle_bound(ar), representation="signed" if signed else "unsigned")
    return Contract(
        (ArgContract(a, Values(in_bound), Values(None)),
         *(ArgContract(s, w_values if s.name == "w" else Values(Bound(0, lane_range(t.lane_bits, False)[1])))
           for s in tw)),
        (("requires: every a[i] of the rows in ", A_REQUIRES),
         ("ensures:  every a[i] of the rows in ", A_ENSURES)))


class ArgumentTwiddles:
    """A leaf's twiddles, read from its arguments (`kernels.build_ntt`'s twiddle source): each row of lanes
    the kernel multiplies by is stored once, in first-use order, as one entry where every lane shares it
    (broadcast) or an entry per lane; `entries` names each by (layer, block) inside the leaf, which the
    table builder evaluates for every leaf of the plan (`tables`)."""

    def __init__(self, b: Builder, ar: Arithmetic):
        self.b, self.ar, self.args = b, ar, twiddle_args(ar)
        self.bits = ar.layout.lane_bits
        self.entries: list[tuple[int, int]] = []
        self._rows: dict[tuple[tuple[int, int], ...], int] = {}
        self._qinv: VReg | None = None

    def factor(self, layer: int, bit: int, indices, inverse: bool, scale: int) -> tuple:
        if scale != 1:
            raise ValueError("a leaf of a planned transform does not hold the inverse's first layer")
        ids = tuple((layer, i >> (bit + 1)) for i in indices)
        key = ids[:1] if len(set(ids)) == 1 else ids
        if key not in self._rows:
            self._rows[key] = len(self.entries)
            self.entries.extend(key)
        at, size = self._rows[key] * self.bits // 8, len(key) * self.bits // 8

        def read(arg: int) -> VReg:
            m = Mem(ArgBase(arg), at, size)
            return self.b.op(by_width("broadcast", self.bits), m) if len(key) == 1 else load_vector(self.b, m)
        if self.args.paired:
            return read(1), read(2)
        if self.ar.mul.signed and self._qinv is None:
            self._qinv = self.ar.mul.qinv_register(self.b)
        return self.ar.mul.variable(self.b, read(1), self._qinv)

    def finish(self, direction: str) -> None:
        """Nothing to write: the tables are the plan's (`tables`)."""


def leaf_contract(t: Target, ar: Arithmetic, size: int, twiddles: int, in_bound: Bound, output_bound=None) -> Contract:
    signed = ar.mul.signed
    a = ArgSpec("a", "inout", f"{'' if signed else 'u'}int{t.lane_bits}_t", t.lane_bytes, size, t.lane_bytes,
                t.isa.vector_bits // 8)
    w_values = Values(twiddle_bound(ar), representation="signed" if signed else "unsigned")
    return Contract(
        (ArgContract(a, Values(in_bound), Values(None)),
         *(ArgContract(s, w_values if s.name == "w" else Values(Bound(0, lane_range(t.lane_bits, False)[1])))
           for s in twiddle_args(ar).specs(t, twiddles))),
        (("requires: every a[i] in ", A_REQUIRES),
         ("ensures:  every a[i] in ", A_ENSURES)))
