"""Bounds: the largest |value| of every coefficient index through every layer,
and the reductions a policy inserts to keep each one inside int16.

Reductions act on registers (all lanes of a vector), so decisions are made per register
pair of each layer, as the layout places indices; a register is named by the
smallest coefficient index it holds at that layer. The verifier later re-derives
every bound from the final instructions; this stage only decides.

Policies: `eager` reduces every register after every layer; `layer` reduces a
whole layer when any index could overflow; `index` reduces only the registers
whose lanes could overflow (for the inverse, the larger of the pair first);
`minimal` searches the per-layer choices for the fewest reductions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import VerifyError
from .kernels.ntt_layout import LayerPairs, NttLayout, layer_pairs, register_key
from .kernels.reductions import Reducer, montgomery_bound
from .lemmas import prove
from .numtheory import NttMath

INT16_MAX = 32767

@dataclass(frozen=True)
class ReductionSchedule:
    """Registers (by smallest index) to reduce before each layer, and before storing."""

    policy: str
    reduction: str
    direction: str  # "forward" or "inverse"
    before: tuple[tuple[int, frozenset[int]], ...]  # (layer, register keys), in execution order
    at_end: bool  # reduce every register after the last layer
    max_bound: tuple[int, ...]  # worst |value| after each executed layer
    input_bound: int
    output_bound: int
    per_index: tuple[tuple[int, ...], ...]  # |value| bound of every index after each executed layer
    registers: int  # vectors the array occupies

    def reduced_before(self, layer: int) -> frozenset[int]:
        return dict(self.before).get(layer, frozenset())

    @property
    def count(self) -> int:
        """Vector reductions inserted (one per register and occasion)."""
        return sum(len(s) for _, s in self.before) + (self.registers if self.at_end else 0)

    def describe(self) -> tuple[str, ...]:
        lines = [f"policy {self.policy}, {self.reduction} reduction, {self.count} vector reductions"]
        for (layer, regs) in self.before:
            if regs:
                lines.append(f"before layer {layer}: {len(regs)} register(s), smallest indices "
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
    """The policy's schedule. `index` never inserts more reductions than `layer`,
    whose whole-layer placements are also register placements; `minimal`
    searches (a beam over per-layer choices) and never inserts more than `index`."""
    if policy in ("index", "minimal"):
        options = [_schedule(math, layout, "larger", direction, input_bound, reducer),
                   _schedule(math, layout, "layer", direction, input_bound, reducer)]
        if policy == "minimal":  # the search, never worse than what index would do
            options.insert(0, _schedule(math, layout, "minimal", direction, input_bound, reducer))
        best = min(options, key=lambda s: s.count)
        return dataclasses.replace(best, policy=policy)
    return _schedule(math, layout, policy, direction, input_bound, reducer)

_STRATEGIES = ("larger", "lo", "hi", "both")
_BEAM = 16


def _schedule(math: NttMath, layout: NttLayout, policy: str, direction: str, input_bound: int,
              reducer: Reducer) -> ReductionSchedule:
    layers = layer_pairs(layout)
    if direction == "inverse":
        layers = layers[::-1]
    start = _State(0, tuple([input_bound] * math.n), (), (), ())
    if policy == "minimal":
        beam = [start]
        for step, lp in enumerate(layers):
            grown: dict[tuple[int, ...], _State] = {}
            for state in beam:
                for strategy in _STRATEGIES:
                    nxt = _layer(math, direction, reducer, step, lp, state, strategy)
                    if nxt is not None and (nxt.bounds not in grown or nxt.count < grown[nxt.bounds].count):
                        grown[nxt.bounds] = nxt
            if not grown:
                raise VerifyError(f"{direction} layer {lp.layer}: no reduction keeps every index inside int16")
            beam = sorted(grown.values(), key=lambda st: (st.count, sum(st.bounds)))[:_BEAM]
        final = beam[0]
    else:
        final = start
        for step, lp in enumerate(layers):
            nxt = _layer(math, direction, reducer, step, lp, final, policy)
            if nxt is None:
                raise VerifyError(f"{direction} layer {lp.layer}: no reduction keeps every index inside int16")
            final = nxt
    at_end = policy == "eager"
    out = [_reduce(x, reducer) for x in final.bounds] if at_end else final.bounds
    return ReductionSchedule(policy, reducer.kind, direction, final.before, at_end, final.max_bound,
                             input_bound, max(out), final.per_index, layout.vectors)


@dataclass(frozen=True)
class _State:
    count: int
    bounds: tuple[int, ...]
    before: tuple[tuple[int, frozenset[int]], ...]
    max_bound: tuple[int, ...]
    per_index: tuple[tuple[int, ...], ...]


def _layer(math: NttMath, direction: str, reducer: Reducer, step: int, lp: LayerPairs, state: _State,
           strategy: str) -> _State | None:
    """One layer under `strategy` ("eager", "layer", or how to pick within an
    overflowing pair: "larger", "lo", "hi", "both"); None if it cannot be kept safe."""
    q = math.q
    b = list(state.bounds)
    scale = math.inverse_scale()
    first_inverse = direction == "inverse" and step == 0  # carries the inverse's scaling
    w = _twiddle_magnitudes(math, lp, direction == "inverse", scale if first_inverse else 1)
    reduced: set[int] = set()

    def overflow(lo, hi, row) -> bool:
        if direction == "forward":
            return any(b[x] + montgomery_bound(b[y], wl, q) > INT16_MAX for x, y, wl in zip(lo, hi, row))
        return any(b[x] + b[y] > INT16_MAX for x, y in zip(lo, hi))

    def reduce_reg(reg) -> None:
        reduced.add(register_key(reg))
        for i in reg:
            b[i] = _reduce(b[i], reducer)

    if strategy == "eager":
        if step > 0:
            for lo, hi in lp.pairs:
                reduce_reg(lo)
                reduce_reg(hi)
    elif strategy == "layer":
        if any(overflow(lo, hi, row) for (lo, hi), row in zip(lp.pairs, w)):
            for lo, hi in lp.pairs:
                reduce_reg(lo)
                reduce_reg(hi)
    else:
        for (lo, hi), row in zip(lp.pairs, w):
            if not overflow(lo, hi, row):
                continue
            if strategy == "both":
                order = (lo, hi)
            elif strategy == "hi":
                order = (hi, lo)
            elif strategy == "lo" or direction == "forward":
                order = (lo, hi)
            else:  # larger first: the register that has been accumulating sums
                order = (lo, hi) if max(b[i] for i in lo) >= max(b[i] for i in hi) else (hi, lo)
            reduce_reg(order[0])
            if strategy == "both" or overflow(lo, hi, row):
                reduce_reg(order[1])
    scale_w = abs(math.montgomery(scale).w)
    for (lo, hi), row in zip(lp.pairs, w):
        if overflow(lo, hi, row):
            return None
        for x, y, wl in zip(lo, hi, row):
            if direction == "forward":
                m = montgomery_bound(b[y], wl, q)
                b[x] = b[y] = b[x] + m
            else:
                s_ = b[x] + b[y]
                b[x], b[y] = (montgomery_bound(s_, scale_w, q) if first_inverse else s_), montgomery_bound(s_, wl, q)
    return _State(state.count + len(reduced), tuple(b), state.before + ((lp.layer, frozenset(reduced)),),
                  state.max_bound + (max(b),), state.per_index + (tuple(b),))
