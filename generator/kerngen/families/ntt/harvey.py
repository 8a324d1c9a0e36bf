"""The reductions Harvey's schedules place on unsigned lanes, chosen by a
register's bound: a conditional subtraction, Shoup's product by 1 beyond
4q, and the chains a freeze to [0, q) takes."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.instr import Builder, VReg
from ...machine.isa import AVX2, Isa
from .csub import ConditionalSubtraction, conditional_subtraction
from .montgomery import broadcast_operands
from .reducers import broadcast_const
from .shoup import Shoup


@dataclass(frozen=True)
class ShoupReduction:
    """Any unsigned lane value to [0, 2q): Shoup's product by 1, x - hi(x*floor(2^W/q))*q."""

    q: int
    bits: int
    isa: Isa = AVX2

    kind = "shoup"

    @property
    def strategy(self) -> Shoup:
        return Shoup(self.q, self.bits, self.isa)

    def reduced_bound(self, bound: int) -> int:
        return self.strategy.bound(bound)

    def emit(self, b: Builder, x: VReg, comment: str) -> VReg:
        s = self.strategy
        one = broadcast_operands(s, b, 1, self.bits)
        return s.multiply(b, x, one, broadcast_const(b, self.q, self.bits), comment)

    def describe(self) -> str:
        return "Shoup's product by 1: x - hi(x*floor(2^W/q))*q"


@dataclass(frozen=True)
class HarveyReducer:
    """The reduction the Harvey schedules place: for a register whose lanes
    stay below 4q, one conditional subtraction of 2q (two instructions, to
    [0, 2q)); above that, Shoup's product by 1 (to [0, 2q) from anything)."""

    q: int
    bits: int
    isa: Isa = AVX2  # which instructions do it (`conditional_subtraction`)
    reach: int = Shoup.reach  # the strategy's lazy values stay below reach*q (`ShoupBelowQ`: 2)

    kind = "harvey"
    multiplications = 0

    @property
    def instructions(self) -> int:
        """The common case, for the cost model."""
        return len(conditional_subtraction(self.q, self.reach // 2 * self.q, self.bits, self.isa).steps)

    def choose(self, register_bound: int) -> ConditionalSubtraction | ShoupReduction | ReductionChain:
        """Below reach*q, one conditional subtraction of half that; above,
        at Harvey's reach, Shoup's product by 1, at half of it the
        conditional subtractions of a freeze (4q leaves the lane)."""
        if register_bound < self.reach * self.q:
            return ConditionalSubtraction(self.q, self.reach // 2 * self.q, self.bits, self.isa)
        if self.reach == Shoup.reach:
            return ShoupReduction(self.q, self.bits, self.isa)
        return UnsignedFreeze(self.q, self.bits, self.isa).choose(register_bound)

    def reduced_bound(self, bound: int) -> int:
        return self.choose(bound).reduced_bound(bound)

    def describe(self) -> str:
        if self.reach == Shoup.reach:
            return "Harvey: conditional subtraction of 2q below 4q, Shoup's product by 1 above"
        return "Harvey's at half reach: conditional subtraction of q below 2q, of 2q first above"


@dataclass(frozen=True)
class ReductionChain:
    """Reductions one after another, as one."""

    kind: str
    steps: tuple[ConditionalSubtraction | ShoupReduction, ...]

    def reduced_bound(self, bound: int) -> int:
        for r in self.steps:
            bound = r.reduced_bound(bound)
        return bound

    def emit(self, b: Builder, x: VReg, comment: str) -> VReg:
        for r in self.steps:
            x = r.emit(b, x, comment)
        return x

    def describe(self) -> str:
        return ", then ".join(r.describe() for r in self.steps)


@dataclass(frozen=True)
class UnsignedFreeze:
    """Unsigned lanes to [0, q): for lanes that may reach 4q, Shoup's product
    by 1 first (to [0, 2q)); then conditional subtractions of multiples of
    q, each halving the range, down to one of q."""

    q: int
    bits: int
    isa: Isa = AVX2  # which instructions do it (`conditional_subtraction`)

    kind = "freeze"

    def choose(self, register_bound: int) -> ReductionChain:
        steps: list[ConditionalSubtraction | ShoupReduction] = []
        bound = register_bound
        if bound >= 4 * self.q:
            steps.append(ShoupReduction(self.q, self.bits, self.isa))
            bound = steps[-1].reduced_bound(bound)
        while bound >= self.q:
            steps.append(ConditionalSubtraction(self.q, self.q * -(-(bound + 1) // (2 * self.q)), self.bits,
                                                self.isa))
            bound = steps[-1].reduced_bound(bound)
        return ReductionChain(self.kind, tuple(steps))
