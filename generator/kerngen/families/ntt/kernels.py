"""Builders of the NTT kernels: forward (Cooley–Tukey), inverse
(Gentleman–Sande), base multiplication and standalone reductions, as
instruction lists in the IR.

They follow the layout plan and the reduction schedule: load a group of
registers, run its steps (butterflies, in-register lane moves, scheduled
reductions), store. Multiplications are the multiplication strategy's
(`Arithmetic.mul`), reductions the reducer's idiom; twiddles are
register-wide rows in one table per kernel, in consumption order, so every
multiplication by a twiddle reads memory directly, except where the
distinct twiddles alone would fill L1: there a twiddle every lane of its
vector shares is stored once and broadcast by a load (`TwiddleTable`).

Vectors fill a register whenever the array allows; the small arrays whose
layout has fewer lanes per vector live in xmm registers and are moved to
and from memory with a move of exactly the vector's size, so no kernel
touches a byte outside its arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ...ir.instr import Builder, IdiomTag, Imm, VReg
from ...machine.ops import by_width
from ...passes.idioms.karatsuba import KARATSUBA
from ...passes.idioms.pair import PAIR
from .layout import Butterflies, NttLayout, Pass, block_units, pairs, register_key, unit_pairs
from .macc import build_basemul_once
from .montgomery import broadcast_operands
from .reducers import Reducer, broadcast_const
from .schedule import Arithmetic, ReductionSchedule
from .special64 import NAME as SPECIAL
from .twiddles import L1_BYTES, TwiddleTable
from .vectors import array_vector, interleaved, load_vector, store_vector


@dataclass(frozen=True)
class WhereAbove:
    """A final reduction of the NTT's outputs for the registers whose lanes
    the schedule bounds at `limit` or above only: the others already have
    the range it gives (the inverse's last differences are Montgomery
    products, below q whatever their input; the sums are not)."""

    reducer: Reducer
    limit: int


def kernel_builder(layout: NttLayout) -> Builder:
    return Builder(vector_bits=layout.register_bits)


def _reduce(b: Builder, x: VReg, reducer, why: str) -> VReg:
    return reducer.emit(b, x, f"{reducer.kind}: {why}" if why else reducer.kind)


def reduce_bounded(b: Builder, x: VReg, reducer, bound: int, why: str) -> tuple[VReg, int]:
    """x reduced by what `reducer` chooses for lanes up to `bound`, and the bound after it."""
    r = reducer.choose(bound)
    return _reduce(b, x, r, why), r.reduced_bound(bound)


class ConstantTwiddles:
    """An NTT's twiddles as constants: the strategy's stored forms in the kernel's own table
    (`TwiddleTable`, label `label`), read by the products as memory operands."""

    def __init__(self, b: Builder, ar: Arithmetic, label: str):
        self.ar, bits = ar, ar.layout.lane_bits
        per_twiddle = len(ar.mul.operands([1], lambda row: row))  # w, and w' or w q^-1 where the product needs it
        self.table = TwiddleTable(b, label, bits, shared_once=ar.layout.n * bits // 8 * per_twiddle > L1_BYTES)

    def factor(self, layer: int, bit: int, indices, inverse: bool, scale: int) -> tuple:
        """The product's factor for the butterflies of `layer` (partner distance 2^bit) whose lower halves are
        coefficients `indices`, one per lane, times `scale`."""
        values = self.ar.math.twiddles(layer, bit, indices, inverse, scale)
        return tuple(map(self.table.operand, self.ar.mul.operands(values, self.table.vector)))

    def finish(self, direction: str) -> None:
        mul, bits = self.ar.mul, self.ar.layout.lane_bits
        stored = "w" if mul.name == SPECIAL else "w, floor(w*2^W/q)" if not mul.signed else f"w, w*q^-1 mod 2^{bits}"
        self.table.finish(f"{direction} NTT twiddles ({stored}) in consumption order")


def build_ntt(b: Builder, ar: Arithmetic, sched: ReductionSchedule, table_label: str,
              finish: Reducer | None = None, interleave: int = 1, twiddles=None, scaled: bool = True) -> None:
    """Forward (sched.direction == "forward") or inverse NTT on argument 0, in
    place; `finish` reduces every output (the range the caller asked for), or,
    given as `WhereAbove`, the outputs the schedule bounds at its limit or above.
    `interleave` groups of a pass at a time have their instructions merged
    (`interleaved`): one group's layers are a chain of multiplications as
    deep as the layers, which a second group's independent one fills.
    `twiddles`: where the products' factors come from (default: constants in
    the table `table_label`, `ConstantTwiddles`; a leaf of a planned
    transform reads them from an argument, `codelets.ArgumentTwiddles`);
    `scaled`: whether the inverse multiplies by its scale (a leaf's does not:
    the plan's layer 0, in another codelet, does)."""
    finish, finish_limit = (finish.reducer, finish.limit) if isinstance(finish, WhereAbove) else (finish, 0)
    math, layout, mul = ar.math, ar.layout, ar.mul
    bits = layout.lane_bits
    inverse = sched.direction == "inverse"
    q = math.q
    table = twiddles or ConstantTwiddles(b, ar, table_label)
    qv = b.op("load", broadcast_const(b, q, bits), comment=f"q = {q}")
    passes = layout.inverse_passes if inverse else layout.passes
    memory = layout.vector_indices(layout.output_order if inverse else range(layout.n))
    # the inverse's scaling rides on its first layer (or its last, as the schedule says): the
    # difference branch takes it in its twiddle, the sum branch in one multiplication by the constant
    scale = math.inverse_scale(mul.r)
    ends = passes[-1:] if sched.scale_last else passes[:1]
    scaled_layer = next(st.layer for p in ends for st in (reversed(p.steps) if sched.scale_last else p.steps)
                        if isinstance(st, Butterflies)) if inverse and scaled else None

    def run_group(pass_no: int, p: Pass, group: tuple[int, ...]) -> None:
        regs = [load_vector(b, array_vector(layout, v)) for v in group]
        idx = [memory[v] for v in group]
        for st in p.steps:
            for lo, hi in pairs(len(regs), st.slot_bit):
                if not isinstance(st, Butterflies):
                    regs[lo], regs[hi] = layout.shuffles.emit(b, regs[lo], regs[hi], st)
                    idx[lo], idx[hi] = layout.move(st, idx[lo], idx[hi])
                    continue
                due, before = sched.reduced_before(st.layer), sched.bounds_before(st.layer)
                bounds = [max(before[i] for i in idx[s]) for s in (lo, hi)]
                for k, s in enumerate((lo, hi)):
                    if register_key(idx[s]) in due:
                        regs[s], bounds[k] = reduce_bounded(b, regs[s], ar.reducer, bounds[k],
                                                             f"before layer {st.layer}")
                scaled = st.layer == scaled_layer
                factor = table.factor(st.layer, st.bit, idx[lo], inverse, scale if scaled else 1)
                by_scale = broadcast_operands(mul, b, scale, bits) if scaled else None
                regs[lo], regs[hi] = mul.butterfly(b, regs[lo], regs[hi], factor, qv, inverse, by_scale,
                                                   bounds[1], f"layer {st.layer}")
                due, after = sched.reduced_after(st.layer), sched.bounds_after(st.layer)
                for s in (lo, hi):
                    if register_key(idx[s]) in due:
                        regs[s], _ = reduce_bounded(b, regs[s], ar.reducer, max(after[i] for i in idx[s]),
                                                     f"after layer {st.layer}")
        last = pass_no == len(passes) - 1
        if last and (sched.at_end or finish is not None):
            final = sched.per_index[-1]
            for k, ix in enumerate(idx):
                bound = max(final[i] for i in ix)
                if sched.at_end:
                    regs[k], bound = reduce_bounded(b, regs[k], ar.reducer, bound, "eager, after the last layer")
                if finish is not None and bound >= finish_limit:
                    regs[k], bound = reduce_bounded(b, regs[k], finish, bound, "the output range asked for")
        for v, r, ix in zip(group, regs, idx):
            store_vector(b, array_vector(layout, v), r)
            memory[v] = ix
    for pass_no, p in enumerate(passes):
        for k in range(0, len(p.groups), interleave):
            interleaved(b, [partial(run_group, pass_no, p, g) for g in p.groups[k:k + interleave]])
    expect = list(range(layout.n)) if inverse else list(layout.output_order)
    if [i for reg in memory for i in reg] != expect:
        raise AssertionError("NTT builder left coefficients where the layout does not say")
    table.finish(sched.direction)


def build_basemul(b: Builder, ar: Arithmetic, barrett: Reducer, table_label: str, in_abs: int,
                  finish: Reducer | None = None, copies: int = 1, karatsuba: bool = False,
                  summed_factors: bool = False, interleave: int = 1, qinv_in_register: bool = False,
                  reduce_once: bool = False) -> None:
    """r = sum over i < copies of a_i*b_i/R blockwise mod (x^d - zeta_j): args
    (r, a, b), a and b `copies` arrays of n one after the other, r may alias
    any of them. `in_abs` bounds |a[i]| and |b[i]|; inputs are reduced first
    where the bounds say a product's sums could leave the lane, and a running
    sum is reduced before a term that could take it out of the lane (large q,
    large blocks, many copies); the wrapped terms of all copies are summed
    before their one multiplication by the block's zeta; `finish` reduces
    every output. `karatsuba`: blocks of degree 1 with three products where
    the sums fit the lanes (`_karatsuba_terms`; `summed_factors`: the sum's
    factor w' added from the others'); `interleave` units of
    blocks are emitted at once, their instructions merged (`interleaved`).
    `qinv_in_register`: q^-1 for the variable factors loaded once, so that
    the factor can take an input as its memory operand (where the encoding's
    memory operands may be unaligned, `passes.encoding.fold_loads`); else
    read from the table, a register fewer. `reduce_once`: the products'
    double-width sums reduced once instead (`macc`, where it applies)."""
    if reduce_once:
        build_basemul_once(b, ar, in_abs, finish, copies, interleave)
        return
    math, layout, mul = ar.math, ar.layout, ar.mul
    bits = layout.lane_bits
    q, d = math.q, layout.d
    per_twiddle = len(mul.operands([1], lambda row: row))  # w, and w' or w q^-1 where the product needs it
    table = TwiddleTable(b, table_label, bits, shared_once=layout.n * bits // 8 * per_twiddle > L1_BYTES)
    qv = b.op("load", broadcast_const(b, q, bits), comment=f"q = {q}")
    reduce_inputs = d * mul.bound(in_abs, in_abs) > ar.lane_max
    x_abs = barrett.reduced_bound(in_abs) if reduce_inputs else in_abs
    term = mul.bound(x_abs, x_abs)
    order = layout.vector_indices(layout.output_order)
    if layout.pair_basemul:  # 32-bit sums of pairs of products
        _pair_basemul(b, ar, barrett, in_abs, table, qv, finish, copies, order)
        table.finish(f"block zetas (w, w*q^-1 mod 2^{bits}): R and zeta*R in each block's two lanes")
        return
    qinv = mul.qinv_register(b) if qinv_in_register else None
    acc = _Accumulator(b, by_width("add", bits), barrett, ar.lane_max)
    karatsuba = karatsuba and mul.signed and d == 2 and 2 * x_abs <= ar.lane_max and _karatsuba_bound(mul, x_abs) <= ar.lane_max
    def unit_body(unit: tuple[int, ...]) -> None:
        # running sums, (first register of the blocks, k) -> (value, bound): of the terms without
        # the zeta, and of the terms it multiplies (each copy's terms are added as they come)
        low: dict[tuple[int, int], tuple[VReg, int]] = {}
        wrap: dict[tuple[int, int], tuple[VReg, int]] = {}
        for copy in range(copies):
            ra, rb = ([load_vector(b, array_vector(layout, v + copy * layout.vectors, arg)) for v in unit]
                      for arg in (1, 2))
            if reduce_inputs:
                ra = [_reduce(b, r, barrett, "bring inputs below q") for r in ra]
                rb = [_reduce(b, r, barrett, "") for r in rb]
            idx = [order[v] for v in unit]
            for st in layout.block_steps:  # block coefficients into registers of their own
                for lo, hi in unit_pairs(unit, st.slot_bit):
                    ra[lo], ra[hi] = layout.shuffles.emit(b, ra[lo], ra[hi], st)
                    rb[lo], rb[hi] = layout.shuffles.emit(b, rb[lo], rb[hi], st)
                    idx[lo], idx[hi] = layout.move(st, idx[lo], idx[hi])
            groups = _same_blocks(idx, d)
            for _, at in groups:
                if karatsuba:
                    terms = _karatsuba_terms(b, mul, [ra[i] for i in at], [rb[i] for i in at], qv, qinv, x_abs, bits,
                                             summed_factors)
                else:
                    factors = [mul.variable(b, rb[i], qinv) for i in at]
                    terms = {}
                    for i in range(d):
                        for j in range(d):
                            prod = mul.multiply(b, ra[at[i]], factors[j], qv)
                            terms.setdefault((i + j >= d, (i + j) % d), []).append((prod, term))
                for (wraps, k), ts in terms.items():
                    sums = wrap if wraps else low
                    key = (at[0], k)
                    sums[key] = acc.sum(([sums[key]] if key in sums else []) + ts)
        out: list[VReg | None] = [None] * len(unit)
        for blocks, at in groups:
            zc = [mul.constant(math.final_zetas[blk]) for blk in blocks]
            for k in range(d):
                total = low[at[0], k]
                if (at[0], k) in wrap:  # blocks of degree 1 wrap nothing and need no zeta table
                    z_abs = max(abs(z.w) for z in zc)
                    w_sum, w_abs = wrap[at[0], k]
                    zetas = mul.operands([math.final_zetas[blk] for blk in blocks], table.vector)
                    total = acc.sum([total, (mul.multiply(b, w_sum, zetas, qv), mul.bound(w_abs, z_abs))])
                r = total[0]
                if finish is not None:
                    r = _reduce(b, r, finish, "the output range asked for")
                out[at[k]] = r
        for st in reversed(layout.block_steps):  # and back where the NTT domain keeps them
            for lo, hi in unit_pairs(unit, st.slot_bit):
                out[lo], out[hi] = layout.shuffles.emit(b, out[lo], out[hi], st)
        for v, r in zip(unit, out):
            store_vector(b, array_vector(layout, v), r)
    units = block_units(layout)
    for k in range(0, len(units), interleave):
        interleaved(b, [partial(unit_body, u) for u in units[k:k + interleave]])
    if table.rows:
        table.finish(f"block zetas (w, w*q^-1 mod 2^{bits}) for base multiplication")


def basemul_variants(layout: NttLayout, reduce_once: bool = False) -> list[tuple[bool, bool, int, bool]]:
    """The (karatsuba, summed_factors, interleave, reduce_once) choices
    `build_basemul` has for a layout, in order of preference on a tie of
    cost and multiplications: four products (a Karatsuba build the same in
    both is one where it did not apply), the sum's factor w' multiplied (a
    register fewer held), two units of blocks interleaved (where there are
    two), the reduced sums; with `reduce_once` (where `macc.reduce_once_fits`)
    also the sum reduced once, two vectors or one at a time. The pair form
    has none."""
    if layout.pair_basemul:
        return [(False, False, 1, False)]
    forms = [(False, False), (True, False), (True, True)] if layout.d == 2 else [(False, False)]
    units = (2, 1) if len(block_units(layout)) > 1 else (1,)
    once = [(False, False, il, True) for il in ((2, 1) if layout.vectors > 1 else (1,))] if reduce_once else []
    return [(kara, summed, il, False) for kara, summed in forms for il in units] + once


def _karatsuba_bound(mul, x_abs: int) -> int:
    """|a0 b1 + a1 b0| as (a0 + a1)(b0 + b1) - a0 b0 - a1 b1, each product
    reduced: (a0 b1 + a1 b0 - T q)/R with T the three products' Montgomery
    quotients combined, |T| < 3 * 2^(W-1) (the verifier's Karatsuba check)."""
    return (2 * x_abs * x_abs + 3 * (mul.r // 2) * mul.q) // mul.r + 1


def _karatsuba_terms(b: Builder, mul, a: list[VReg], y: list[VReg], qv: VReg, qinv: VReg | None, x_abs: int,
                     bits: int, summed_factors: bool) -> dict[tuple[bool, int], list[tuple[VReg, int]]]:
    """The terms of (a0 + a1 x)(b0 + b1 x) for blocks of degree 1, keyed like
    the schoolbook's (wraps, k): a0 b0, a1 b1 (wrapping) and the cross term
    (a0 + a1)(b0 + b1) - a0 b0 - a1 b1. Three products and three factors
    w' in place of four and two: two multiplications fewer, the same count
    of instructions; with `summed_factors` the third w' is the sum of the
    others (three fewer, but both held until the third product)."""
    add, sub = by_width("add", bits), by_width("sub", bits)
    f0, f1 = mul.variable(b, y[0], qinv), mul.variable(b, y[1], qinv)
    p00 = mul.multiply(b, a[0], f0, qv)
    p11 = mul.multiply(b, a[1], f1, qv)
    fm = mul.variable_sum(b, f0, f1) if summed_factors else mul.variable(b, b.op(add, y[0], y[1]), qinv)
    pm = mul.multiply(b, b.op(add, a[0], a[1]), fm, qv)
    group = b.new_group()
    cross = b.op(sub, b.op(sub, pm, p00, idiom=IdiomTag(group, KARATSUBA, "start", 1)), p11,
                 idiom=IdiomTag(group, KARATSUBA, "end", 1))
    term = mul.bound(x_abs, x_abs)
    return {(False, 0): [(p00, term)], (True, 0): [(p11, term)], (False, 1): [(cross, _karatsuba_bound(mul, x_abs))]}


def _pair_basemul(b: Builder, ar: Arithmetic, barrett: Reducer, in_abs: int, table: TwiddleTable, qv: VReg,
                  finish: Reducer | None, copies: int, order: list[list[int]]) -> None:
    """Base multiplication of degree-1 blocks held as (c0, c1) pairs in adjacent
    lanes, with 32-bit sums of products (vpmaddwd):

        X0 = sum over copies of a0*b0' + a1*b1',  b' = (b0, zeta*b1)  (a Montgomery product by (R, zeta*R))
        X1 = sum over copies of a0*b1 + a1*b0     (b with its pairs swapped)

    and one Montgomery reduction of each 32-bit sum from its halves (a pair
    reduction): r0 = X0/R, r1 = X1/R, already in place, interleaved. The
    sums are bounded before anything is emitted: inputs are reduced first
    when the 32-bit sums or the reduced result could overflow."""
    math, layout, mul = ar.math, ar.layout, ar.mul
    bits, q = layout.lane_bits, math.q
    madd, add32 = "vpmaddwd", by_width("add", 2 * bits)
    ones = mul.constant(1)
    w_abs = max(ones.w, *(abs(mul.constant(z).w) for z in math.final_zetas))
    half = 1 << (bits - 1)

    def overflows(x_abs: int, y_abs: int) -> bool:
        """Whether the 32-bit sums or the reduced result could leave their lanes."""
        total = copies * 2 * x_abs * max(y_abs, mul.bound(y_abs, w_abs))
        return total >= 1 << (2 * bits - 1) or (total + half * q) >> bits > half - 1

    small = barrett.reduced_bound(in_abs)
    # reduce nothing, else b's elements only, else both: the fewest reductions that keep the sums in range
    reduce_a, reduce_b = next(((ra, rb) for ra, rb in ((False, False), (False, True), (True, True))
                               if not overflows(small if ra else in_abs, small if rb else in_abs)), (None, None))
    if reduce_a is None:
        raise ValueError(f"pair base multiplication of {copies} products overflows even on reduced inputs")
    qinv = broadcast_const(b, mul.qinv, bits)
    for v in range(layout.vectors):
        blocks = [i // 2 for i in order[v][::2]]
        factor = mul.operands([c for blk in blocks for c in (1, math.final_zetas[blk])], table.vector)
        group = b.new_group()
        sums: list[VReg | None] = [None, None]
        for copy in range(copies):
            x = load_vector(b, array_vector(layout, v + copy * layout.vectors, 1))
            y = load_vector(b, array_vector(layout, v + copy * layout.vectors, 2))
            if reduce_a:
                x = _reduce(b, x, barrett, "keep the 32-bit sums in range")
            if reduce_b:
                y = _reduce(b, y, barrett, "keep the 32-bit sums in range")
            zeta_y = mul.multiply(b, y, factor, qv)
            swapped = b.op("vpshufhw", b.op("vpshuflw", y, Imm(0xB1)), Imm(0xB1))
            for k, other in enumerate((zeta_y, swapped)):
                tag = IdiomTag(group, PAIR, "start" if copy == 0 and k == 0 else "body", 1)
                product = b.op(madd, x, other, idiom=tag)
                sums[k] = product if sums[k] is None else b.op(add32, sums[k], product, idiom=tag)
        body = IdiomTag(group, PAIR, "body", 1)
        low = b.op(by_width("blend", bits), sums[0], b.op(by_width("sll", 2 * bits), sums[1], Imm(bits), idiom=body),
                   Imm(0xAA), idiom=body)
        high = b.op(by_width("blend", bits), b.op(by_width("srl", 2 * bits), sums[0], Imm(bits), idiom=body), sums[1],
                    Imm(0xAA), idiom=body)
        t = b.op(by_width("mullo", bits), low, qinv, idiom=body)
        r = b.op(by_width("sub", bits), high, b.op(by_width("mulhi", bits), t, qv, idiom=body),
                 idiom=IdiomTag(group, PAIR, "end", 1))
        if finish is not None:
            r = _reduce(b, r, finish, "the output range asked for")
        store_vector(b, array_vector(layout, v), r)


def _same_blocks(idx: list[list[int]], d: int) -> list[tuple[tuple[int, ...], list[int]]]:
    """Registers (by position) holding coefficient k (list index) of the same blocks, one per lane."""
    found: dict[tuple[int, ...], dict[int, int]] = {}
    for pos, lanes in enumerate(idx):
        ks = {i % d for i in lanes}
        if len(ks) != 1:
            raise AssertionError("base blocks are not split across registers")
        found.setdefault(tuple(i // d for i in lanes), {})[ks.pop()] = pos
    return [(blocks, [at[k] for k in range(d)]) for blocks, at in found.items()]


class _Accumulator:
    """Sums of bounded terms that stay inside the lane: before a term that
    could take the running sum out of it, the sum is reduced."""

    def __init__(self, b: Builder, add: str, reducer: Reducer, limit: int):
        self.b, self.add, self.reducer, self.limit = b, add, reducer, limit

    def sum(self, terms: list[tuple[VReg, int]]) -> tuple[VReg, int]:
        acc, bound = terms[0]
        for t, t_bound in terms[1:]:
            if bound + t_bound > self.limit:
                acc, bound = self._reduced(acc, bound)
            if bound + t_bound > self.limit:
                t, t_bound = self._reduced(t, t_bound)
            acc, bound = self.b.op(self.add, acc, t), bound + t_bound
        return acc, bound

    def _reduced(self, x: VReg, bound: int) -> tuple[VReg, int]:
        return _reduce(self.b, x, self.reducer, "keep the sum inside the lane"), self.reducer.reduced_bound(bound)


def build_mulmod_shoup(b: Builder, layout: NttLayout, shoup, freeze, accumulate: bool) -> None:
    """r = a*w (+ b) mod q element-wise, args (r, a, w, wp[, b]): Shoup's
    product of each vector by its own (w, wp), plus b, then `freeze` (chosen
    for the sum's bound) to [0, q). Each vector is loaded before its own
    result is stored, so r may alias a or b."""
    bits, q, top = layout.lane_bits, shoup.q, (1 << layout.lane_bits) - 1
    qv = b.op("load", broadcast_const(b, q, bits), comment=f"q = {q}")
    for v in range(layout.vectors):
        x, w, wp = (load_vector(b, array_vector(layout, v, arg)) for arg in (1, 2, 3))
        r, bound = shoup.multiply(b, x, (w, wp), qv), shoup.bound(top)
        if accumulate:
            if bound + q - 1 > top:  # the sum could leave the lane: the product below q first
                r, bound = reduce_bounded(b, r, freeze, bound, "below q before the sum")
            r, bound = b.op(by_width("add", bits), r, load_vector(b, array_vector(layout, v, 4))), bound + q - 1
        r, _ = reduce_bounded(b, r, freeze, bound, "to [0, q)")
        store_vector(b, array_vector(layout, v), r)


def build_reduce(b: Builder, layout: NttLayout, reducer: Reducer) -> None:
    """Reduce every element of argument 0 in place with `reducer`."""
    for v in range(layout.vectors):
        store_vector(b, array_vector(layout, v), _reduce(b, load_vector(b, array_vector(layout, v)), reducer, ""))
