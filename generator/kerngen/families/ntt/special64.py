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
from ...passes import special64, wide
from ...passes.lemmas import ScalarIdiom, prove
from .reducers import broadcast_const, emit_idiom
from .harvey import ReductionChain

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
    companion_bits = None  # a variable factor is multiplied as it is
    r = 1  # base multiplication's products carry no scale

    @cached_property
    def lane_max(self) -> int:
        return lane_range(self.bits, signed=False)[1]

    @cached_property
    def templates(self) -> dict[str, special64.Template]:
        return special64.templates(self.q, special64.Lowering.of(self.isa, self.bits))

    @property
    def native(self) -> bool:
        """Both halves of a 64-bit product one instruction each (general registers)."""
        return self.isa.has("mullo", self.bits) and self.isa.has("mulhu", self.bits)

    def constant(self, c: int) -> SpecialConstant:
        return SpecialConstant(c % self.q, c % self.q)

    def operands(self, values: Sequence[int], vector: Callable[[list[int]], Mem]) -> tuple[Mem, ...]:
        """The memory operands `multiply` takes for constants `values` (one per lane): w itself, and
        for products from pieces its high halves (w >> 32)."""
        row = [self.constant(v).w for v in values]
        return (vector(row),) + (() if self.native else (vector([w >> wide.HALF for w in row]),))

    def qinv_register(self, b: Builder) -> None:
        """No constant beside the factor: no register."""
        return None

    def variable(self, b: Builder, w: VReg, qinv: None = None) -> tuple[VReg, ...]:
        """A variable w is its own factor."""
        return (w,)

    def _emit(self, b: Builder, kind: str, x, y, comment: str = "", y_high: Mem | None = None) -> VReg:
        return special64.emit(b, self.templates[kind], x, y, lambda v: broadcast_const(b, v, self.bits),
                              self.native, b.new_group(), comment, y_high)

    def multiply(self, b: Builder, x: VReg, factor: tuple[Mem | VReg, ...], q: Mem | VReg | None = None,
                 comment: str = "") -> VReg:
        """x*w mod q in [0, q) for any x and w (the factor from `operands` or `variable`)."""
        return self._emit(b, special64.MUL, x, factor[0], comment, factor[1] if len(factor) > 1 else None)

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
class Canonical:
    """Any lane value to [0, q): one conditional subtraction of q (2^64 < 2q), the
    templates' own last steps (`special64.canonical`), as a scalar idiom."""

    q: int
    bits: int
    lowering: special64.Lowering

    kind = "csub"

    @cached_property
    def idiom(self) -> ScalarIdiom:
        return ScalarIdiom(self.kind, self.q, special64.canonical(self.lowering, self.q), self.bits, signed=False)

    def reduced_bound(self, bound: int) -> int:
        return prove(self.idiom).range_for(0, bound)[1]

    def emit(self, b: Builder, x: VReg, comment: str) -> VReg:
        return emit_idiom(b, self.idiom, x, comment=comment)

    def describe(self) -> str:
        return f"conditional subtraction of q: x - {self.q} where x >= {self.q}"


@dataclass(frozen=True)
class CanonicalReducer:
    """The reduction the special form's kernels place, where a register could
    hold q or more (a standalone freeze; the bound analysis never needs one):
    `Canonical`, and nothing for a register already below q."""

    q: int
    bits: int
    isa: Isa = AVX2

    kind = "freeze"
    multiplications = 0

    @cached_property
    def step(self) -> Canonical:
        return Canonical(self.q, self.bits, special64.Lowering.of(self.isa, self.bits))

    @property
    def instructions(self) -> int:
        return len(self.step.idiom.steps)

    def choose(self, register_bound: int) -> Canonical | ReductionChain:
        return self.step if register_bound >= self.q else ReductionChain(self.kind, ())

    def reduced_bound(self, bound: int) -> int:
        return self.choose(bound).reduced_bound(bound)

    def describe(self) -> str:
        return self.step.describe()

