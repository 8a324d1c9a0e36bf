"""Multiply-accumulate that reduces once: r = sum over i < k of a_i*b_i/R
mod q for blocks of degree 1 (pointwise) on even/odd Montgomery lanes (the
32-bit lanes, which have no lane-wise high half): the k double-width
products of the even lanes, and those of the odd lanes, are summed apart
with double-width additions and each sum is reduced once
(`Montgomery.multiply_sum`), where the reduced sums cost k reductions and
k - 1 additions. It applies where the sum of the products' magnitudes stays
inside the signed double-width lane and the reduced result inside the lane
(`reduce_once_fits`); the build chooses it or the reduced sums by cost."""

from __future__ import annotations

from functools import partial

from ...ir.instr import Builder
from .layout import NttLayout
from .montgomery import Montgomery
from .reducers import Reducer, broadcast_const
from .schedule import Arithmetic
from .vectors import array_vector, interleaved, load_vector, store_vector


def reduce_once_fits(mul, layout: NttLayout, copies: int, in_abs: int) -> bool:
    """Whether `build_basemul_once` applies: a sum of several pointwise
    products on even/odd Montgomery lanes whose double-width sum and
    reduced result fit their lanes for inputs up to `in_abs`."""
    return (isinstance(mul, Montgomery) and layout.d == 1 and not layout.pair_basemul and copies > 1
            and mul.sum_bound(in_abs, in_abs, copies) is not None)


def build_basemul_once(b: Builder, ar: Arithmetic, in_abs: int, finish: Reducer | None, copies: int,
                       interleave: int) -> None:
    """r = sum over i < copies of a_i*b_i/R mod q element-wise, reduced once
    per coefficient: args (r, a, b) as `kernels.build_basemul` takes them
    (r may alias any input: each vector's inputs are loaded before its
    result is stored); `finish` reduces every output; `interleave` vectors
    at a time have their instructions merged (`interleaved`)."""
    layout, mul = ar.layout, ar.mul
    if not reduce_once_fits(mul, layout, copies, in_abs):
        raise ValueError(f"a sum of {copies} products of inputs up to {in_abs} cannot be reduced once")
    bits, q = layout.lane_bits, ar.math.q
    qv = b.op("load", broadcast_const(b, q, bits), comment=f"q = {q}")

    def vector_body(v: int) -> None:
        pairs = [tuple(load_vector(b, array_vector(layout, v + copy * layout.vectors, arg)) for arg in (1, 2))
                 for copy in range(copies)]
        r = mul.multiply_sum(b, pairs, qv)
        if finish is not None:
            r = finish.emit(b, r, f"{finish.kind}: the output range asked for")
        store_vector(b, array_vector(layout, v), r)
    for k in range(0, layout.vectors, interleave):
        interleaved(b, [partial(vector_body, v) for v in range(k, min(k + interleave, layout.vectors))])
