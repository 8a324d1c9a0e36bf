"""Bounds: the largest |value| of every coefficient index through every layer,
and the reductions a policy inserts to keep each one inside int16.

Reductions act on registers (16 lanes), so decisions are made per register
pair of each layer, as the layout places indices; a register is named by the
coefficient index in its lane 0 at that layer. The verifier later re-derives
every bound from the final instructions; this stage only decides.

Policies: `eager` reduces every register after every layer; `layer` reduces a
whole layer when any index could overflow; `index` reduces only the registers
whose lanes could overflow (for the inverse, the larger of the pair first).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import VerifyError
from .kernels.ntt_layout import LayerPairs, NttLayout, layer_pairs
from .kernels.reductions import Reducer, montgomery_bound
from .lemmas import prove
from .numtheory import NttMath

INT16_MAX = 32767

@dataclass(frozen=True)
class ReductionSchedule:
    """Registers (by lane-0 index) to reduce before each layer, and before storing."""

    policy: str
    reduction: str
    direction: str  # "forward" or "inverse"
    before: tuple[tuple[int, frozenset[int]], ...]  # (layer, register keys), in execution order
    at_end: bool  # reduce every register after the last layer
    max_bound: tuple[int, ...]  # worst |value| after each executed layer
    input_bound: int
    output_bound: int
    per_index: tuple[tuple[int, ...], ...]  # |value| bound of every index after each executed layer

    def reduced_before(self, layer: int) -> frozenset[int]:
        return dict(self.before).get(layer, frozenset())

    @property
    def count(self) -> int:
        """Vector reductions inserted (one per register and occasion)."""
        return sum(len(s) for _, s in self.before) + (self.n_registers if self.at_end else 0)

    @property
    def n_registers(self) -> int:
        return len(self.per_index[0]) // 16 if self.per_index else 0

    def describe(self) -> tuple[str, ...]:
        lines = [f"policy {self.policy}, {self.reduction} reduction, {self.count} vector reductions"]
        for (layer, regs) in self.before:
            if regs:
                lines.append(f"before layer {layer}: {len(regs)} register(s), lane-0 indices "
                             + ",".join(str(r) for r in sorted(regs)))
        if self.at_end:
            lines.append("after the last layer: every register")
        lines.append("worst |value| after each layer: " + ", ".join(str(b) for b in self.max_bound))
        return tuple(lines)

def _reduce(bound: int, reducer: Reducer) -> int:
    lo, hi = prove(reducer.idiom).range_for(-bound, bound)
    return max(-lo, hi)

def _twiddle_magnitudes(math: NttMath, lp: LayerPairs, inverse: bool, factor: int) -> list[list[int]]:
    exps = math.block_exponents(lp.layer)
    out = []
    for lo, _ in lp.pairs:
        row = []
        for i in lo:
            s = math.root_power(exps[i >> (lp.bit + 1)] // 2)
            c = pow(s, -1, math.q) if inverse else s
            row.append(abs(math.montgomery(c * factor).w))
        out.append(row)
    return out

def schedule(math: NttMath, layout: NttLayout, policy: str, direction: str, input_bound: int,
             reducer: Reducer) -> ReductionSchedule:
    """The policy's schedule; `index` never inserts more reductions than `layer`,
    whose whole-layer placements are also register placements."""
    if policy == "index":
        greedy = _schedule(math, layout, "index", direction, input_bound, reducer)
        by_layer = _schedule(math, layout, "layer", direction, input_bound, reducer)
        if by_layer.count < greedy.count:
            return dataclasses.replace(by_layer, policy="index")
        return greedy
    return _schedule(math, layout, policy, direction, input_bound, reducer)

def _schedule(math: NttMath, layout: NttLayout, policy: str, direction: str, input_bound: int,
              reducer: Reducer) -> ReductionSchedule:
    q, n = math.q, math.n
    layers = layer_pairs(layout)
    if direction == "inverse":
        layers = layers[::-1]
    b = [input_bound] * n
    scale = math.inverse_scale()
    before, max_bound, per_index = [], [], []
    for step, lp in enumerate(layers):
        first_inverse = direction == "inverse" and step == 0  # carries the inverse's scaling
        w = _twiddle_magnitudes(math, lp, direction == "inverse", scale if first_inverse else 1)
        reduced: set[int] = set()

        def overflow(pair, row) -> tuple[bool, bool]:
            lo, hi = pair
            if direction == "forward":
                bad = any(b[x] + montgomery_bound(b[y], wl, q) > INT16_MAX for x, y, wl in zip(lo, hi, row))
                return bad, False
            bad = any(b[x] + b[y] > INT16_MAX for x, y in zip(lo, hi))
            return bad, bad

        def reduce_reg(reg) -> None:
            reduced.add(reg[0])
            for i in reg:
                b[i] = _reduce(b[i], reducer)

        if policy == "eager" and step > 0:
            for lo, hi in lp.pairs:
                reduce_reg(lo)
                reduce_reg(hi)
        elif policy == "layer":
            if any(overflow(p, r)[0] for p, r in zip(lp.pairs, w)):
                for lo, hi in lp.pairs:
                    reduce_reg(lo)
                    reduce_reg(hi)
        elif policy == "index":
            for (lo, hi), row in zip(lp.pairs, w):
                if not overflow((lo, hi), row)[0]:
                    continue
                if direction == "forward":
                    reduce_reg(lo)
                    continue
                first, second = (lo, hi) if max(b[i] for i in lo) >= max(b[i] for i in hi) else (hi, lo)
                reduce_reg(first)
                if overflow((lo, hi), row)[0]:
                    reduce_reg(second)
        for (lo, hi), row in zip(lp.pairs, w):
            if overflow((lo, hi), row)[0]:
                raise VerifyError(f"{direction} layer {lp.layer}: no reduction keeps indices {lo[0]}.. inside int16")
            for x, y, wl in zip(lo, hi, row):
                if direction == "forward":
                    m = montgomery_bound(b[y], wl, q)
                    b[x] = b[y] = b[x] + m
                else:
                    s = b[x] + b[y]
                    sx = montgomery_bound(s, abs(math.montgomery(scale).w), q) if first_inverse else s
                    b[x], b[y] = sx, montgomery_bound(s, wl, q)
        before.append((lp.layer, frozenset(reduced)))
        max_bound.append(max(b))
        per_index.append(tuple(b))
    at_end = policy == "eager"
    if at_end:
        b = [_reduce(x, reducer) for x in b]
    return ReductionSchedule(policy, reducer.kind, direction, tuple(before), at_end, tuple(max_bound),
                             input_bound, max(b), tuple(per_index))
