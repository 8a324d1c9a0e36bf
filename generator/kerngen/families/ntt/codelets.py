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

from dataclasses import dataclass, replace

from ...core.contract import ArgContract, Bound, BoundOf, Contract, Values
from ...ir.instr import ArgBase, ArgSpec, Builder, Instr, Mem, VReg
from ...machine.ops import by_width, lane_range
from ...machine.target import Target
from .kernels import WhereAbove, reduce_bounded
from .vectors import load_vector, store_vector
from .montgomery import broadcast_operands
from .plan import Rows, Spread
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
    def specs_names(self) -> tuple[str, ...]:
        return ("w", "wp") if self.paired else ("w",)

    @property
    def shoup_pairs(self) -> tuple[tuple[int, int, int], ...]:
        """What the verifier is told of the arguments (`passes.verify.Verification`)."""
        return ((1, 2, self.companion_bits),) if self.paired else ()

    def specs(self, t: Target, count: int) -> tuple[ArgSpec, ...]:
        ctype = f"{'' if self.signed else 'u'}int{t.lane_bits}_t"
        return tuple(ArgSpec(name, "in", ctype, t.lane_bytes, count, t.lane_bytes) for name in self.specs_names)


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
    wp = b.op(broadcast, Mem(ArgBase(2), entry * bits // 8, bits // 8))
    # products from even lanes take w' of the odd lanes moved down: a broadcast is its own
    return (w, wp, wp) if getattr(ar.mul, "even_odd", False) else (w, wp)


def build_rows(b: Builder, ar: Arithmetic, codelet: Rows, lanes: int, inverse: bool, in_bound: int,
               scale: int | None = None, finish=None) -> None:
    """The codelet's instructions on argument 0 (its rows), twiddles from arguments 1 (and 2). `in_bound`:
    what the inputs reach (|value| on signed lanes, value on unsigned ones); `scale`: the inverse's constant
    the sums of layer 0 are multiplied by (the differences' twiddles carry it); `finish`: a reducer of every
    output (or, as `kernels.WhereAbove`, of those bounded at its limit or above)."""
    finish, finish_limit = (finish.reducer, finish.limit) if isinstance(finish, WhereAbove) else (finish, 0)
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
    for block, column in ((j, c) for j in range(codelet.repeat) for c in range(0, codelet.width, lanes)):
        at, entry = block * codelet.block + column, block * codelet.row_twiddles
        regs = [load_vector(b, Mem(ArgBase(0), (k * codelet.stride + at) * elem, vector)) for k in range(rows)]
        bounds = [in_bound] * rows
        for t in order:
            half = rows >> (t + 1)
            for j in range(1 << t):
                factor = _twiddle(b, ar, args, entry + (1 << t) - 1 + j, qinv)
                scaled = by_scale if scale is not None and t == 0 else None
                for lo in range(2 * j * half, 2 * j * half + half):
                    hi = lo + half
                    regs[lo], regs[hi], bounds[lo], bounds[hi] = _butterfly(
                        b, ar, regs[lo], regs[hi], bounds[lo], bounds[hi], factor, qv, inverse, scaled, w_abs,
                        f"layer {t} of {r}")
        for k in range(rows):
            if finish is not None and bounds[k] >= finish_limit:
                regs[k], bounds[k] = reduce_bounded(b, regs[k], finish, bounds[k], "the output range asked for")
            store_vector(b, Mem(ArgBase(0), (k * codelet.stride + at) * elem, vector), regs[k])


def build_spread(b: Builder, ar: Arithmetic, codelet: Spread, lanes: int, in_bound: int) -> None:
    """The row of argument `src` (the last) times each of the 2^bits twiddles of arguments 1 (and 2) into rows
    0, pitch, ... of argument 0 (a product each, its input reduced first where the strategy's bounds need
    it; each column of the row read before any is written, so the row may be the last one written)."""
    source = len(twiddle_args(ar).specs_names) + 1
    mul, bits = ar.mul, ar.layout.lane_bits
    elem = bits // 8
    vector = lanes * elem
    args = twiddle_args(ar)
    qv = b.op("load", broadcast_const(b, ar.math.q, bits), comment=f"q = {ar.math.q}")
    qinv = mul.qinv_register(b) if mul.signed else None
    w_abs = twiddle_bound(ar).magnitude
    for column in range(0, codelet.width, lanes):
        x, bound = load_vector(b, Mem(ArgBase(source), column * elem, vector)), in_bound
        while mul.forward_bounds(0, bound, w_abs, bound) is None:  # what a butterfly's product would take
            x, bound = reduce_bounded(b, x, ar.reducer, bound, "before the products")
        for t in range(codelet.twiddles):
            product = mul.multiply(b, x, _twiddle(b, ar, args, t, qinv), qv)
            store_vector(b, Mem(ArgBase(0), (t * codelet.pitch + column) * elem, vector), product)


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


def rows_contract(t: Target, ar: Arithmetic, codelet: Rows | Spread, in_bound: Bound) -> Contract:
    """Argument a: the rows (its footprint of elements), w (and wp): the twiddle row; a Spread's src: the row
    it reads (a's rows written whatever they held)."""
    signed = ar.mul.signed
    ctype = f"{'' if signed else 'u'}int{t.lane_bits}_t"
    spread = isinstance(codelet, Spread)
    a = ArgSpec("a", "out" if spread else "inout", ctype, t.lane_bytes, codelet.footprint, t.lane_bytes)
    tw = twiddle_args(ar).specs(t, codelet.twiddles)
    w_values = Values(twiddle_bound(ar), representation="signed" if signed else "unsigned")
    src = (ArgContract(ArgSpec("src", "in", ctype, t.lane_bytes, codelet.width, t.lane_bytes), Values(in_bound)),)
    return Contract(
        (ArgContract(a, None if spread else Values(in_bound), Values(None)),
         *(ArgContract(s, w_values if s.name == "w" else Values(Bound(0, lane_range(t.lane_bits, False)[1])))
           for s in tw), *(src if spread else ())),
        (("requires: every src[i] in " if spread else "requires: every a[i] of the rows in ",
          BoundOf("src" if spread else "a", "requires")),
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


def compact_twin(codelet: Rows) -> Rows:
    """The codelet with its rows adjacent: the same instructions but for the rows' addresses, and a footprint
    of 2^r * width elements (the verifier tracks every element of an argument, so a codelet whose rows lie
    megabytes apart is proven as this twin, `moved_rows` relating the two)."""
    return Rows(codelet.radix_bits, codelet.width, codelet.width, codelet.repeat)


def moved_rows(real: tuple[Instr, ...], twin: tuple[Instr, ...], codelet: Rows, elem_bytes: int) -> str | None:
    """Why the instruction stream `real` is not `twin`'s (of `compact_twin(codelet)`) with every access to
    argument 0 at element k * width + c of block j (row k, c < width) moved to k * stride + c of block j,
    everything else equal;
    None where it is. Rows that do not overlap (stride >= width) make the move a one-to-one renaming of the
    elements read and written: each value, bound and dependence the verifier proved of the twin holds of
    the real stream."""
    if codelet.stride < codelet.width:
        return f"rows {codelet.stride} elements apart overlap their {codelet.width} elements"
    if len(real) != len(twin):
        return f"{len(real)} instructions, the twin {len(twin)}"
    row_bytes, block_bytes = codelet.width * elem_bytes, compact_twin(codelet).block * elem_bytes
    for k, (x, y) in enumerate(zip(real, twin)):
        if x.op != y.op or len(x.operands) != len(y.operands):
            return f"instruction {k}: {x.op}, the twin's {y.op}"
        for a, b in zip(x.operands, y.operands):
            if isinstance(a, Mem) and isinstance(b, Mem) and b.base == ArgBase(0):
                block, inside = divmod(b.offset, block_bytes)
                row, within = divmod(inside, row_bytes)
                moved = block * codelet.block * elem_bytes + row * codelet.stride * elem_bytes + within
                if a != replace(b, offset=moved):
                    return f"instruction {k}: {a}, the twin's {b} moved to row {row} of block {block}"
            elif a != b:
                return f"instruction {k}: operand {a}, the twin's {b}"
    return None
