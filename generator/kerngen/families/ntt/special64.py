"""The NTT family's multiplication strategy for primes q = 2^64 - 2^b + 1
on 64-bit lanes (Goldilocks, 2^64 - 2^32 + 1), where Harvey's lazy values
(up to 4q) cannot fit the lane: every value stays canonical, in [0, q), so
the bound analysis needs no reduction anywhere. Sums, differences and
products are the templates of `passes.special64` (the wrap of the lane is
their reduction: 2^64 = 2^b - 1 mod q), each a tagged group the verifier
checks against its proven template. Products need no precomputed
constant, so twiddles are stored as they are and base multiplication
multiplies two variables the same way, with no scale (r = 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from ...ir.instr import Builder, Mem, VReg
from ...machine.isa import AVX2, Isa
from ...machine.ops import lane_range
from ...passes import special64
from .reducers import broadcast_const
from .shoup import ConditionalSubtraction

NAME = "special"


@dataclass(frozen=True)
class SpecialConstant:
    """A constant as stored: its canonical representative."""

    value: int
    w: int


@dataclass(frozen=True)
class SpecialForm64:
    q: int
    bits: int
    isa: Isa = AVX2

    name = NAME
    signed = False  # lanes hold unsigned values
    r = 1  # base multiplication's products carry no scale

    @cached_property
    def lane_max(self) -> int:
        return lane_range(self.bits, signed=False)[1]

    @cached_property
    def templates(self) -> dict[str, special64.Template]:
        lowering = special64.Lowering(self.isa.has("cmpgtu", self.bits), self.isa.has("minu", self.bits))
        return special64.templates(self.q, lowering)

    @property
    def native(self) -> bool:
        """Both halves of a 64-bit product one instruction each (general registers)."""
        return self.isa.has("mullo", self.bits) and self.isa.has("mulhu", self.bits)

    def constant(self, c: int) -> SpecialConstant:
        return SpecialConstant(c % self.q, c % self.q)

    def operands(self, values: Sequence[int], vector: Callable[[list[int]], Mem]) -> tuple[Mem, ...]:
        """The one memory operand `multiply` takes for constants `values` (one per lane): w itself."""
        return (vector([self.constant(v).w for v in values]),)

    def qinv_register(self, b: Builder) -> None:
        """No constant beside the factor: no register."""
        return None

    def variable(self, b: Builder, w: VReg, qinv: None = None) -> tuple[VReg, ...]:
        """A variable w is its own factor."""
        return (w,)

    def _emit(self, b: Builder, kind: str, x, y, comment: str = "") -> VReg:
        return special64.emit(b, self.templates[kind], x, y, lambda v: broadcast_const(b, v, self.bits),
                              self.native, b.new_group(), comment)

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg | None = None,
                 comment: str = "") -> VReg:
        """x*w mod q in [0, q) for any x and w (the factor from `operands` or `variable`)."""
        return self._emit(b, special64.MUL, x, factor[0], comment)

    def add(self, b: Builder, x: VReg, y: VReg, comment: str = "") -> VReg:
        return self._emit(b, special64.ADD, x, y, comment)

    def sub(self, b: Builder, x: VReg, y: VReg, comment: str = "") -> VReg:
        return self._emit(b, special64.SUB, x, y, comment)

    def bound(self, x_max: int, w_max: int | None = None) -> int:
        """Largest product, whatever its factors: canonical."""
        return self.q - 1

    def forward_bounds(self, x: int, y: int, w_abs: int, y_register: int) -> tuple[int, int] | None:
        """Cooley–Tukey (x + w*y, x - w*y) mod q: canonical, where x and y are."""
        return None if max(x, y) >= self.q else (self.q - 1, self.q - 1)

    def inverse_bounds(self, x: int, y: int, w_abs: int, scale_abs: int | None,
                       y_register: int) -> tuple[int, int] | None:
        """Gentleman–Sande (x + y, w*(x - y)) mod q: canonical, where x and y are."""
        return None if max(x, y) >= self.q else (self.q - 1, self.q - 1)

    def butterfly(self, b: Builder, x: VReg, y: VReg, factor: tuple[Mem, ...], q: VReg, inverse: bool,
                  scale: tuple[Mem, ...] | None, y_register: int, comment: str) -> tuple[VReg, VReg]:
        if not inverse:
            t = self.multiply(b, y, factor, comment=comment)
            return self.add(b, x, t), self.sub(b, x, t)
        total = self.add(b, x, y, comment)
        diff = self.multiply(b, self.sub(b, x, y), factor)
        if scale is not None:
            total = self.multiply(b, total, scale)
        return total, diff

    def prove(self) -> None:
        for template in self.templates.values():
            special64.prove(template)


@dataclass(frozen=True)
class CanonicalReducer:
    """Any lane value to [0, q) by one conditional subtraction of q (2^64 < 2q):
    what the schedules, base multiplication and the standalone freeze use."""

    q: int
    bits: int
    isa: Isa = AVX2

    kind = "csub"
    multiplications = 0

    @cached_property
    def step(self) -> ConditionalSubtraction:
        return ConditionalSubtraction(self.q, self.q, self.bits, self.isa)

    @property
    def instructions(self) -> int:
        return len(self.step.idiom.steps)

    def choose(self, register_bound: int) -> ConditionalSubtraction:
        return self.step

    def reduced_bound(self, bound: int) -> int:
        return self.step.reduced_bound(bound)

    def describe(self) -> str:
        return self.step.describe()
