"""Builders of the 16-bit AVX2 NTT kernels: forward (Cooley–Tukey), inverse
(Gentleman–Sande) and base multiplication, as instruction lists.

They follow the layout plan (ntt_layout) and the reduction schedule (bounds):
load a group of registers, run its steps (butterflies, in-register swaps,
scheduled reductions), store. Twiddles are register-wide rows in one table per
kernel, in consumption order; inter-vector twiddles are stored pre-broadcast
so every multiplication by a twiddle reads memory directly.

Vectors are 16-lane ymm registers; the small arrays whose layout has fewer
lanes per vector (at most 8: n < 32, or blocks too large for 16 lanes) run on
xmm registers, moved to and from memory with a move of exactly the vector's
size, so no kernel touches a byte outside its arrays.
"""

from __future__ import annotations

from ..bounds import ReductionSchedule
from ..isa.ir import ArgBase, Builder, Imm, Mem, TableBase, VReg
from .ntt_layout import Butterflies, Interleave, NttLayout, Swap, move_lanes, pairs, register_key
from .reductions import Reducer, broadcast_const, emit_idiom, montgomery_by_constant
from ..numtheory import NttMath


def kernel_builder(layout: NttLayout) -> Builder:
    """A builder whose vectors are ymm, or xmm when the layout's vectors fit in one."""
    return Builder(vector_bits=256 if layout.lanes > 8 else 128)


class TwiddleTable:
    """Collects register-wide rows in first-use order, each stored once; a
    vector narrower than the register is padded with zeros (lanes that hold
    zeros, or copies of lane 0 after a broadcast load, and stay bounded)."""

    def __init__(self, b: Builder, label: str):
        self.b, self.label = b, label
        self.width = b.vector_bits // 16
        self.rows: list[tuple[int, ...]] = []
        self.offsets: dict[tuple[int, ...], int] = {}

    def vector(self, lanes: list[int] | tuple[int, ...]) -> Mem:
        key = tuple(lanes) + (0,) * (self.width - len(lanes))
        if key not in self.offsets:
            self.offsets[key] = 2 * self.width * len(self.rows)
            self.rows.append(key)
        return Mem(TableBase(self.label), self.offsets[key], 2 * self.width)

    def finish(self, comment: str) -> None:
        self.b.table(self.label, 2, [v for row in self.rows for v in row],
                     comment=f"{comment}, {self.width} lanes per row")


def emit_lane_move(b: Builder, x: VReg, y: VReg, step: Swap | Interleave) -> tuple[VReg, VReg]:
    """The lane movement of `step` on the pair (x, y) (ntt_layout.move_lanes is
    the same movement on index lists): a word interleave, or an exchange of
    lane bit `step.lane_bit` with the register bit."""
    if isinstance(step, Interleave):
        return b.op("vpunpcklwd", x, y), b.op("vpunpckhwd", x, y)
    lane_bit = step.lane_bit
    if lane_bit == 3:
        return b.op("vperm2i128", x, y, Imm(0x20)), b.op("vperm2i128", x, y, Imm(0x31))
    if lane_bit == 2:
        return b.op("vpunpcklqdq", x, y), b.op("vpunpckhqdq", x, y)
    if lane_bit == 1:
        lo = b.op("vpblendd", x, b.op("vpsllq", y, Imm(32)), Imm(0xAA))
        hi = b.op("vpblendd", b.op("vpsrlq", x, Imm(32)), y, Imm(0xAA))
        return lo, hi
    lo = b.op("vpblendw", x, b.op("vpslld", y, Imm(16)), Imm(0xAA))
    hi = b.op("vpblendw", b.op("vpsrld", x, Imm(16)), y, Imm(0xAA))
    return lo, hi


def _vector(layout: NttLayout, v: int, arg: int = 0) -> Mem:
    """Vector `v` of int16 array argument `arg`: exactly its bytes."""
    size = 2 * layout.lanes
    return Mem(ArgBase(arg), size * v, size)


# moves of exactly one vector, by its size in bytes; two bytes (n = 2) are
# broadcast in and the lane-0 word extracted out
_LOADS = {32: "load", 16: "load", 8: "load64", 4: "load32", 2: "vpbroadcastw"}
_STORES = {32: "store", 16: "store", 8: "store64", 4: "store32"}


def _load(b: Builder, m: Mem) -> VReg:
    return b.op(_LOADS[m.size], m)


def _store(b: Builder, m: Mem, x: VReg) -> None:
    if m.size == 2:
        b.emit("store16", m, x, Imm(0))
    else:
        b.emit(_STORES[m.size], m, x)


def _twiddle_rows(math: NttMath, layer: int, bit: int, lanes: list[int], inverse: bool, factor: int = 1):
    exps = math.block_exponents(layer)
    consts = []
    for i in lanes:
        s = math.root_power(exps[i >> (bit + 1)] // 2)
        consts.append(math.montgomery((pow(s, -1, math.q) if inverse else s) * factor))
    return [c.w for c in consts], [c.w_qinv for c in consts]


def _reduce(b: Builder, x: VReg, reducer: Reducer, why: str) -> VReg:
    return emit_idiom(b, reducer.idiom, x, comment=f"{reducer.kind}: {why}" if why else reducer.kind)


def build_ntt(b: Builder, math: NttMath, layout: NttLayout, sched: ReductionSchedule, reducer: Reducer,
              table_label: str) -> None:
    """Forward (sched.direction == "forward") or inverse NTT on argument 0, in place."""
    inverse = sched.direction == "inverse"
    q = math.q
    table = TwiddleTable(b, table_label)
    qv = b.op("load", broadcast_const(b, q), comment=f"q = {q}")
    passes = layout.inverse_passes if inverse else layout.passes
    memory = layout.vector_indices(layout.output_order if inverse else range(layout.n))
    # the inverse's scaling rides on its first layer: the difference branch takes it
    # in its twiddle, the sum branch in one multiplication by the constant itself
    scale = math.inverse_scale()
    first_layer = next(st.layer for st in passes[0].steps if isinstance(st, Butterflies)) if inverse else None
    for pass_no, p in enumerate(passes):
        for group in p.groups:
            regs = [_load(b, _vector(layout, v)) for v in group]
            idx = [memory[v] for v in group]
            for st in p.steps:
                for lo, hi in pairs(len(regs), st.slot_bit):
                    if not isinstance(st, Butterflies):
                        regs[lo], regs[hi] = emit_lane_move(b, regs[lo], regs[hi], st)
                        idx[lo], idx[hi] = move_lanes(st, idx[lo], idx[hi])
                        continue
                    due = sched.reduced_before(st.layer)
                    for s in (lo, hi):
                        if register_key(idx[s]) in due:
                            regs[s] = _reduce(b, regs[s], reducer, f"before layer {st.layer}")
                    scaled = st.layer == first_layer
                    w, wq = _twiddle_rows(math, st.layer, st.bit, idx[lo], inverse, scale if scaled else 1)
                    wm, wqm = table.vector(w), table.vector(wq)
                    x, y = regs[lo], regs[hi]
                    regs[lo], regs[hi] = _butterfly(b, math, st.layer, x, y, wm, wqm, qv, inverse,
                                                    scale if scaled else None)
            if sched.at_end and pass_no == len(passes) - 1:
                regs = [_reduce(b, r, reducer, "eager, after the last layer") for r in regs]
            for v, r, ix in zip(group, regs, idx):
                _store(b, _vector(layout, v), r)
                memory[v] = ix
    expect = list(range(layout.n)) if inverse else list(layout.output_order)
    if [i for reg in memory for i in reg] != expect:
        raise AssertionError("NTT builder left coefficients where the layout does not say")
    table.finish(f"{sched.direction} NTT twiddles (w, w*q^-1 mod 2^16) in consumption order")


def _butterfly(b: Builder, math: NttMath, layer: int, x: VReg, y: VReg, wm: Mem, wqm: Mem, qv: VReg, inverse: bool,
               scale: int | None) -> tuple[VReg, VReg]:
    """Cooley–Tukey (x + w*y, x - w*y) or Gentleman–Sande (x + y, w*(x - y)),
    the products Montgomery multiplications by a twiddle from the table; the
    inverse's first layer also multiplies the sum by `scale`."""
    if not inverse:
        m = montgomery_by_constant(b, y, wm, wqm, qv)
        return b.op("vpaddw", x, m, comment=f"layer {layer}"), b.op("vpsubw", x, m)
    total = b.op("vpaddw", x, y, comment=f"layer {layer}")
    diff = montgomery_by_constant(b, b.op("vpsubw", x, y), wm, wqm, qv)
    if scale is not None:
        c = math.montgomery(scale)
        total = montgomery_by_constant(b, total, broadcast_const(b, c.w), broadcast_const(b, c.w_qinv), qv)
    return total, diff


def block_registers(layout: NttLayout) -> list[tuple[tuple[int, ...], list[int]]]:
    """Vectors holding coefficient k (list index) of the same blocks, one per lane, after the forward NTT."""
    d = layout.d
    found: dict[tuple[int, ...], dict[int, int]] = {}
    for v, lanes in enumerate(layout.vector_indices(layout.output_order)):
        ks = {i % d for i in lanes}
        if len(ks) != 1:
            raise AssertionError("base blocks are not split across registers")
        found.setdefault(tuple(i // d for i in lanes), {})[ks.pop()] = v
    return [(blocks, [vs[k] for k in range(d)]) for blocks, vs in found.items()]


def build_basemul(b: Builder, math: NttMath, layout: NttLayout, barrett: Reducer, reduce_inputs: bool,
                  table_label: str, reduce_outputs: bool = False) -> None:
    """r = a*b*R^-1 blockwise mod (x^d - zeta_j): args (r, a, b), r may alias a or b."""
    q, d = math.q, layout.d
    table = TwiddleTable(b, table_label)
    qv = b.op("load", broadcast_const(b, q), comment=f"q = {q}")
    qinv = broadcast_const(b, math.qinv)
    for blocks, vecs in block_registers(layout):
        a = [_load(b, _vector(layout, v, 1)) for v in vecs]
        c = [_load(b, _vector(layout, v, 2)) for v in vecs]
        if reduce_inputs:
            a = [_reduce(b, r, barrett, "bring inputs below q") for r in a]
            c = [_reduce(b, r, barrett, "") for r in c]
        c_qinv = [b.op("vpmullw", r, qinv) for r in c]
        prod = {}
        for i in range(d):
            for j in range(d):
                prod[i, j] = montgomery_by_constant(b, a[i], c[j], c_qinv[j], qv)
        zc = [math.montgomery(math.final_zetas[blk]) for blk in blocks]
        zw, zq = table.vector([z.w for z in zc]), table.vector([z.w_qinv for z in zc])
        for k in range(d):
            low = [prod[i, k - i] for i in range(k + 1)]
            wrap = [prod[i, k + d - i] for i in range(k + 1, d)]
            acc = _sum(b, low)
            if wrap:
                acc = b.op("vpaddw", acc, montgomery_by_constant(b, _sum(b, wrap), zw, zq, qv))
            if reduce_outputs:
                acc = _reduce(b, acc, barrett, "into the inverse NTT's input range")
            _store(b, _vector(layout, vecs[k]), acc)
    if table.rows:
        table.finish("block zetas (w, w*q^-1 mod 2^16) for base multiplication")


def _sum(b: Builder, terms: list[VReg]) -> VReg:
    acc = terms[0]
    for t in terms[1:]:
        acc = b.op("vpaddw", acc, t)
    return acc


def build_reduce(b: Builder, layout: NttLayout, reducer: Reducer) -> None:
    """Reduce every element of argument 0 (n int16) in place with `reducer`."""
    for v in range(layout.vectors):
        _store(b, _vector(layout, v), _reduce(b, _load(b, _vector(layout, v)), reducer, ""))
