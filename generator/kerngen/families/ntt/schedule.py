"""Bounds: the largest |value| of every coefficient index through every layer,
and the reductions a policy inserts to keep each one inside the signed lane.

Reductions act on registers (all lanes of a vector), so decisions are made per register
pair of each layer, as the layout places indices; a register is named by the
smallest coefficient index it holds at that layer. The verifier later re-derives
every bound from the final instructions; this stage only decides.

Policies: `eager` reduces every register after every layer; `layer` reduces a
whole layer when any index could overflow; `index` reduces only the registers
whose lanes could overflow (for the inverse, the larger of the pair first);
`minimal` searches the per-layer choices for the fewest reductions.

An inverse's sums may instead be reduced right after the layer that made
them, in that layer's registers (`ReductionSchedule.after`), where that
keeps the next layer safe with no more reductions: the reduction then runs
beside the same layer's multiplications of the differences, where before
the next layer it waits for them and for the lane moves between the layers
(`index` and `minimal` take it on a tie).

A schedule is a pure function of its arithmetic, policy, direction and
input bound, asked by the cost model, the build and the tables' check: a
registered memo (`core.compile_cache.memo`), bounded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.compile_cache import memo
from ...core.contract import Bound
from ...errors import VerifyError
from .layout import LayerPairs, NttLayout, layer_pairs, register_key
from .maths import NttMath
from .montgomery import Montgomery, UnsignedMontgomery
from .params import inverse_input_top
from .reducers import Reducer
from .harvey import HarveyReducer
from .shoup import Shoup


class ScheduleError(VerifyError):
    """No placement of reductions keeps a layer inside the signed lane: the
    sums and products of even fully reduced values can leave it."""

    def __init__(self, direction: str, layer: int, bits: int):
        self.direction, self.layer, self.bits = direction, layer, bits
        super().__init__(f"{direction} layer {layer}: no reduction keeps every index inside int{bits}")


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
    scale_last: bool = False  # the inverse's scaling rides on its last layer, not its first
    # (layer, register keys in that layer's registers) reduced right after the layer's butterflies
    after: tuple[tuple[int, frozenset[int]], ...] = ()
    # the bound of every index as each executed layer starts (after the previous layer's `after` reductions)
    entering: tuple[tuple[int, ...], ...] = ()

    def reduced_before(self, layer: int) -> frozenset[int]:
        return dict(self.before).get(layer, frozenset())

    def reduced_after(self, layer: int) -> frozenset[int]:
        return dict(self.after).get(layer, frozenset())

    def bounds_before(self, layer: int) -> tuple[int, ...]:
        """The bound of every index as `layer` starts, before its reductions."""
        return self.entering[[l for l, _ in self.before].index(layer)]

    def bounds_after(self, layer: int) -> tuple[int, ...]:
        """The bound of every index after `layer`'s butterflies, before its `after` reductions."""
        return self.per_index[[l for l, _ in self.before].index(layer)]

    @property
    def count(self) -> int:
        """Vector reductions inserted (one per register and occasion)."""
        return sum(len(s) for _, s in self.before + self.after) + (self.registers if self.at_end else 0)

    def describe(self) -> tuple[str, ...]:
        lines = [f"policy {self.policy}, {self.reduction} reduction, {self.count} vector reductions"]
        after = dict(self.after)
        for (layer, regs) in self.before:
            if regs:
                lines.append(f"before layer {layer}: {len(regs)} register(s), smallest indices "
                             + ",".join(str(r) for r in sorted(regs)))
            if after.get(layer):
                lines.append(f"after layer {layer} (its sums, for the next layer): {len(after[layer])} register(s), "
                             "smallest indices " + ",".join(str(r) for r in sorted(after[layer])))
        if self.at_end:
            lines.append("after the last layer: every register")
        lines.append("worst |value| after each layer: " + ", ".join(str(b) for b in self.max_bound))
        return tuple(lines)

    def manifest(self) -> dict:
        return {"policy": self.policy, "reduction": self.reduction, "reductions": self.count,
                "max_bound": list(self.max_bound),
                "before_layer": [{"layer": l, "registers": sorted(r)} for l, r in self.before if r],
                "after_layer": [{"layer": l, "registers": sorted(r)} for l, r in self.after if r],
                "after_last_layer": self.at_end, "scale_on_last_layer": self.scale_last}


@dataclass(frozen=True)
class Arithmetic:
    """What a schedule is computed for: the maths, the layout, the
    multiplication strategy (Montgomery on signed lanes, Shoup on unsigned
    ones: bounds are of |value| or of value) and the reduction."""

    math: NttMath
    layout: NttLayout
    mul: Montgomery | Shoup | UnsignedMontgomery  # the last: base multiplication of 64-bit Shoup bundles
    reducer: Reducer | HarveyReducer

    @property
    def lane_max(self) -> int:
        return self.mul.lane_max


@dataclass(frozen=True)
class _Step:
    """One executed layer as every state of a search sees it: its register
    pairs, the |twiddle| of each butterfly, and the |scale| it multiplies by
    (the inverse's first layer; None elsewhere)."""

    index: int
    pairs: LayerPairs
    twiddles: tuple[tuple[int, ...], ...]
    scale: int | None


def _steps(ar: Arithmetic, direction: str, scale_last: bool = False,
           twiddles: TwiddleRange | None = None) -> tuple[_Step, ...]:
    inverse = direction == "inverse"
    layers = layer_pairs(ar.layout)[::-1] if inverse else layer_pairs(ar.layout)
    scale = ar.math.inverse_scale(ar.mul.r)
    out = []
    for index, lp in enumerate(layers):
        # the inverse's first layer carries its scaling (its inputs then leave it below q), or its last
        # (then every output is a product by a constant, below q: no final reduction for a centred output)
        scaled = inverse and index == (len(layers) - 1 if scale_last else 0) and twiddles is None
        factor = scale if scaled else 1
        rows = tuple((twiddles.magnitude,) * len(lo) if twiddles is not None else
                     tuple(abs(ar.mul.constant(c).w) for c in ar.math.twiddles(lp.layer, lp.bit, lo, inverse, factor))
                     for lo, _ in lp.pairs)
        out.append(_Step(index, lp, rows, abs(ar.mul.constant(scale).w) if scaled else None))
    return tuple(out)


@dataclass(frozen=True)
class TwiddleRange:
    """Twiddles known by their range only (a leaf of a planned transform reads them from an argument):
    every butterfly's |w| is taken at `magnitude`, and an inverse does not scale (the plan's layer 0 does)."""

    magnitude: int


@memo(maxsize=256)
def schedule(ar: Arithmetic, policy: str, direction: str, input_bound: int, scale_last: bool = False,
             twiddles: TwiddleRange | None = None) -> ReductionSchedule:
    """The policy's schedule. `index` never inserts more reductions than `layer`,
    whose whole-layer placements are also register placements; `minimal`
    searches (a beam over per-layer choices) and never inserts more than `index`.
    Memoised: the choice of reducer and of multiplication asks for the
    schedules that the kernels are then built with. `twiddles`: the range of
    twiddles read from an argument (None: the constants of the kernel's table)."""
    steps = _steps(ar, direction, scale_last, twiddles)
    if policy in ("index", "minimal"):
        options = [_schedule(ar, steps, "larger", direction, input_bound),
                   _schedule(ar, steps, "layer", direction, input_bound)]
        if direction == "inverse":  # first: a tie takes it
            options.insert(0, _schedule(ar, steps, "sums", direction, input_bound))
        if policy == "minimal":  # the search, never worse than what index would do
            options.insert(0, _schedule(ar, steps, "minimal", direction, input_bound))
        best = min(options, key=lambda s: s.count)
        return dataclasses.replace(best, policy=policy, scale_last=scale_last)
    return dataclasses.replace(_schedule(ar, steps, policy, direction, input_bound), scale_last=scale_last)

_STRATEGIES = ("larger", "lo", "hi", "both")
_INVERSE_STRATEGIES = _STRATEGIES + ("sums",)  # "sums" is "larger" in a forward NTT
_BEAM = 16


def _schedule(ar: Arithmetic, steps: tuple[_Step, ...], policy: str, direction: str,
              input_bound: int) -> ReductionSchedule:
    start = _State(0, tuple([input_bound] * ar.math.n), (), (), (), (), ())
    previous = (None,) + steps[:-1]
    if policy == "minimal":
        beam = [start]
        for step, prev in zip(steps, previous):
            grown: dict[tuple[int, ...], _State] = {}
            for state in beam:
                for strategy in _INVERSE_STRATEGIES if direction == "inverse" else _STRATEGIES:
                    nxt = _layer(ar, direction, step, state, strategy, prev)
                    if nxt is not None and (nxt.bounds not in grown or nxt.count < grown[nxt.bounds].count):
                        grown[nxt.bounds] = nxt
            if not grown:
                raise ScheduleError(direction, step.pairs.layer, ar.layout.lane_bits)
            beam = sorted(grown.values(), key=lambda st: (st.count, sum(st.bounds)))[:_BEAM]
        final = beam[0]
    else:
        final = start
        for step, prev in zip(steps, previous):
            nxt = _layer(ar, direction, step, final, policy, prev)
            if nxt is None:
                raise ScheduleError(direction, step.pairs.layer, ar.layout.lane_bits)
            final = nxt
    at_end = policy == "eager"
    out = [ar.reducer.reduced_bound(x) for x in final.bounds] if at_end else final.bounds
    return ReductionSchedule(policy, ar.reducer.kind, direction, final.before, at_end, final.max_bound,
                             input_bound, max(out), final.per_index, ar.layout.vectors,
                             after=final.after, entering=final.entering)


@dataclass(frozen=True)
class _State:
    count: int
    bounds: tuple[int, ...]
    before: tuple[tuple[int, frozenset[int]], ...]
    max_bound: tuple[int, ...]
    per_index: tuple[tuple[int, ...], ...]
    after: tuple[tuple[int, frozenset[int]], ...]  # (layer, keys) of the layers whose sums were reduced
    entering: tuple[tuple[int, ...], ...]


def _layer(ar: Arithmetic, direction: str, step: _Step, state: _State, strategy: str,
           prev: _Step | None = None) -> _State | None:
    """One layer under `strategy` ("eager", "layer", or how to pick within an
    overflowing pair: "larger", "lo", "hi", "both"; "sums": the previous
    layer's sums reduced after it where that keeps this layer safe at no
    more reductions than "larger", else "larger"); None if it cannot be kept safe."""
    b = list(state.bounds)
    lp, w, scale_w = step.pairs, step.twiddles, step.scale
    reduced: set[int] = set()
    mul = ar.mul

    def transfer(lo, hi, row) -> list[tuple[int, int]] | None:
        """The pair's bounds after the butterflies, or None where a lane could overflow."""
        y_register = max(b[i] for i in hi)
        out = []
        for x, y, wl in zip(lo, hi, row):
            got = (mul.forward_bounds(b[x], b[y], wl, y_register) if direction == "forward" else
                   mul.inverse_bounds(b[x], b[y], wl, scale_w, y_register))
            if got is None:
                return None
            out.append(got)
        return out

    def overflow(lo, hi, row) -> bool:
        return transfer(lo, hi, row) is None

    def reduce_reg(reg, into: set[int] | None = None) -> None:
        (reduced if into is None else into).add(register_key(reg))
        r = ar.reducer.choose(max(b[i] for i in reg))
        for i in reg:
            b[i] = r.reduced_bound(b[i])

    keys: set[int] = set()  # the previous layer's sum registers reduced after it
    if strategy == "sums" and prev is not None and direction == "inverse":
        overflowing = [(lo, hi) for (lo, hi), row in zip(lp.pairs, w) if overflow(lo, hi, row)]
        lanes = {i for lo, hi in overflowing for i in lo + hi}
        kept = list(b)
        for reg in (lo for lo, _ in prev.pairs.pairs if lanes.intersection(lo)):
            reduce_reg(reg, keys)
        if not overflowing or len(keys) > len(overflowing) or \
                any(overflow(lo, hi, row) for (lo, hi), row in zip(lp.pairs, w)):
            b[:], keys = kept, set()
    entering = tuple(b)

    if strategy == "eager":  # after every layer; before the first only where inputs could overflow (as `layer`)
        if step.index > 0 or any(overflow(lo, hi, row) for (lo, hi), row in zip(lp.pairs, w)):
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
    for (lo, hi), row in zip(lp.pairs, w):
        got = transfer(lo, hi, row)
        if got is None:
            return None
        for x, y, (bx, by) in zip(lo, hi, got):
            b[x], b[y] = bx, by
    after = state.after + (((prev.pairs.layer, frozenset(keys)),) if keys else ())
    return _State(state.count + len(keys) + len(reduced), tuple(b), state.before + ((lp.layer, frozenset(reduced)),),
                  state.max_bound + (max(b),), state.per_index + (tuple(b),), after, state.entering + (entering,))


DIRECTIONS = ("forward", "inverse")


def inverse_input(bits: int, q: int, signed: bool = True) -> Bound:
    """What the inverse NTT accepts: signed lanes as `inverse_input_top`
    says; unsigned (Shoup) lanes [0, 2q), what Shoup's products leave, or
    [0, q) where 2q leaves the lane (the special form's canonical values)."""
    if not signed:
        return Bound(0, (2 * q if 2 * q <= 1 << bits else q) - 1)
    top = inverse_input_top(bits, q)
    return Bound(-top, top)


def forward_input(q: int, signed: bool = True) -> Bound:
    return Bound(-(q - 1) if signed else 0, q - 1)


def input_bound(math: NttMath, direction: str, bits: int, signed: bool = True) -> int:
    """Largest |input| (signed lanes) or input (unsigned) the forward or inverse NTT accepts (its contract)."""
    return (forward_input(math.q, signed) if direction == "forward" else inverse_input(bits, math.q, signed)).hi
