"""Operands, instructions and kernels as plain data.

Builders create instructions over virtual registers (`VReg`, `GReg`); the
passes legalise and allocate them onto physical registers (`PhysReg`); the
verifier and the printers read the result. Nothing here formats assembly
text, and nothing here knows an ISA or an ABI: a `Kernel` carries the
`Target` it was compiled for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from ..machine.ops import spec
from ..machine.registers import MASK, VECTOR

if TYPE_CHECKING:
    from ..machine.encoding import Encoding, Form
    from ..machine.target import Target


@dataclass(frozen=True)
class VReg:
    """A virtual vector register; `bits` is 512 (zmm), 256 (ymm) or 128 (xmm)."""

    index: int
    bits: int


@dataclass(frozen=True)
class GReg:
    """A virtual 64-bit general-purpose register."""

    index: int


@dataclass(frozen=True)
class PhysReg:
    """A machine register: number `number` of the register family named `kind`
    (`machine.registers`: VECTOR, GENERAL, MASK), used at `bits`. The family
    is named rather than held, so that comparing and hashing registers, which
    the passes do millions of times, stays that of three plain fields; the
    target's ISA has the family (its spelling, its count)."""

    kind: str
    number: int
    bits: int


@dataclass(frozen=True)
class ArgBase:
    """The buffer passed as pointer argument `index` (C argument order)."""

    index: int


@dataclass(frozen=True)
class TableBase:
    """A constant table in .rodata."""

    label: str


@dataclass(frozen=True)
class StackBase:
    """The kernel's stack area (32-byte aligned): spill slots, then saved registers."""


@dataclass(frozen=True)
class Pointer:
    """A general register holding the address of byte `bias` of a table: an
    access within a signed byte of it is encoded as [register + disp8], three
    bytes shorter than a RIP-relative disp32."""

    register: int  # GPR number
    bias: int


@dataclass(frozen=True)
class Mem:
    base: ArgBase | TableBase | StackBase
    offset: int
    size: int  # bytes accessed
    pointer: Pointer | None = None  # how a table access is encoded (None: RIP-relative); the address is the same
    # one element of `size` bytes read into every lane of the instruction's vector (EVEX's {1toN}): a
    # memory source of rows whose encoding broadcasts it (`passes.encoding.fold_broadcasts`)
    broadcast: bool = False

    @property
    def buffer(self) -> tuple:
        """Which buffer the access is into: ("arg", index), ("table", label) or ("stack",)."""
        b = self.base
        return ("arg", b.index) if isinstance(b, ArgBase) else ("table", b.label) if isinstance(b, TableBase) \
            else ("stack",)


def registers_in(body, kind: str) -> set[int]:
    """The machine registers of family `kind` an instruction list names."""
    return {op.number for ins in body for op in ins.operands if isinstance(op, PhysReg) and op.kind == kind}


@dataclass(frozen=True)
class Imm:
    value: int


@dataclass(frozen=True)
class KReg:
    """A virtual opmask register: one bit per lane of the `bits`-wide vectors
    it masks (a row with a "k" slot: merge- or zero-masking, the row's)."""

    index: int
    bits: int


LANED = (VECTOR, MASK)  # register families holding one entry per lane of `bits`-wide vectors

Operand = VReg | GReg | KReg | PhysReg | Mem | Imm


@dataclass(frozen=True)
class IdiomTag:
    """Marks the instructions of one reduction idiom for the verifier.

    The verifier evaluates the tagged instructions exactly, lane by lane, for
    every input value the lane can hold (`passes.lemmas`), instead of through
    interval arithmetic that cannot see through the idiom's intended wrap-around.
    `role` is "start" on the first instruction, "end" on the one producing the
    result and "body" in between; `source` is the slot of the start
    instruction that reads the value being reduced.
    """

    group: int
    kind: str
    role: str
    source: int = 1


@dataclass(frozen=True)
class Instr:
    op: str
    operands: tuple[Operand, ...]
    comment: str = ""
    idiom: IdiomTag | None = None

    def __post_init__(self) -> None:
        s = spec(self.op)
        if len(s.slots) != len(self.operands):
            raise ValueError(f"{self.op}: expected {len(s.slots)} operands, got {len(self.operands)}")

    @cached_property  # asked again and again by the passes
    def written(self) -> tuple[Operand, ...]:
        return tuple(self.operands[i] for i in spec(self.op).written)

    @cached_property
    def read(self) -> tuple[Operand, ...]:
        return tuple(self.operands[i] for i in spec(self.op).read)

    @property
    def register_bits(self) -> int | None:
        """The width of its widest vector register (None: it names none)."""
        return max((op.bits for op in self.operands
                    if isinstance(op, VReg) or isinstance(op, PhysReg) and op.kind == VECTOR), default=None)

    def form(self, encoding: Encoding) -> Form:
        """The table's form this instruction is encoded in under `encoding`: at
        the width of its widest vector register (a general-register
        instruction has one form)."""
        return spec(self.op).form(encoding, self.register_bits)


@dataclass(frozen=True)
class Table:
    """Constant data: `elem_bytes`-wide little-endian integers."""

    label: str
    elem_bytes: int
    values: tuple[int, ...]
    align: int = 32
    comment: str = ""


def shared_table(old: Table | None, new: Table) -> Table:
    """The table serving two kernels that define one label: kernels of a wider ISA may define a longer table
    (a constant broadcast over wider vectors), and where one begins with the other the longer serves both,
    since each kernel reads only its own table's length (`passes.check`)."""
    if old is None:
        return new
    short, long = sorted((old, new), key=lambda x: len(x.values))
    if short.elem_bytes != long.elem_bytes or long.values[:len(short.values)] != short.values:
        raise ValueError(f"two kernels define table {new.label} differently")
    return long


@dataclass(frozen=True)
class ArgSpec:
    name: str
    role: str  # "in", "out", "inout"
    ctype: str  # element C type, e.g. "uint64_t"
    elem_bytes: int
    count: int
    align: int  # the alignment the kernel requires
    preferred_align: int | None = None  # an alignment that is faster, where there is one

    @property
    def c_declaration(self) -> str:
        """The parameter as a C prototype declares it: a plain pointer (its
        element count is a macro of the header and a line of its comment). An
        array parameter, `T a[N]` or `T a[static N]`, makes GCC 11 and later
        check every call against N (-Wstringop-overread, -Wstringop-overflow
        under -Wall): a call on a polynomial of a polyvec struct, or on a
        pointer into a larger buffer, warns where it is right; and C++ has no
        `[static N]`."""
        return f"{'const ' if self.role == 'in' else ''}{self.ctype} *{self.name}"


@dataclass(frozen=True)
class Kernel:
    """One exported function after the passes: its allocated body, the target
    it was compiled for and the CPU extensions its instructions need."""

    symbol: str
    args: tuple[ArgSpec, ...]
    body: tuple[Instr, ...]
    tables: tuple[Table, ...]
    target: Target
    extensions: frozenset[str]
    spill_slots: int = 0
    constant_time: bool = False  # proven by `passes.constant_time` (the pipeline's last pass)

    @property
    def loops(self) -> tuple[tuple, ...]:
        """(iterations, instructions, the loops inside it) of each loop the body
        was rolled into, outermost first; an inner loop's instructions are counted once."""
        open_loops: list[tuple[int, list]] = [(0, [])]  # where each open loop starts, and the loops found inside
        for i, ins in enumerate(self.body):
            if ins.op == "repeat":
                open_loops.append((i, []))
            elif ins.op == "repeat_end":
                head, inner = open_loops.pop()
                open_loops[-1][1].append((self.body[head].operands[1].value, i - head - 1, tuple(inner)))
        return tuple(open_loops[0][1])

    @property
    def dirty_upper(self) -> bool:
        """Whether a register is written wider than its family keeps clean (a
        ymm register: a VEX.128 write zeroes the upper half), so that only
        then can the upper state be dirty and the epilogue need vzeroupper."""
        families = {f.name: f for f in self.target.isa.families}
        return any(isinstance(o, PhysReg) and families[o.kind].dirties_upper(o.bits)
                   for ins in self.body for o in ins.written)


@dataclass
class Builder:
    """Collects instructions over fresh virtual registers for one kernel;
    vector registers are `vector_bits` wide unless an op says otherwise."""

    vector_bits: int
    instrs: list[Instr] = field(default_factory=list)
    tables: dict[str, Table] = field(default_factory=dict)
    _next_reg: int = 0
    _next_group: int = 0
    # the instructions of the constants held for the whole kernel (`held_constant`), which run first
    prelude: list[Instr] = field(default_factory=list)
    _held: dict = field(default_factory=dict)  # `held_constant`: key -> the register made

    @property
    def body(self) -> list[Instr]:
        """The kernel's instructions: the prelude, then those emitted."""
        return self.prelude + self.instrs

    def held_constant(self, key: tuple, make: Callable[[], Operand]) -> Operand:
        """The register `make` fills from constant tables alone (a constant opmask), made at the
        first call with `key` and the same register at every later one: its instructions, read by
        the whole kernel, go to the prelude, so that the groups of instructions emitted (a pass's
        butterflies) stay alike, as `passes.roll` needs them, and a group counted or interleaved
        by itself holds its own instructions only."""
        if key not in self._held:
            at = len(self.instrs)
            self._held[key] = make()
            self.prelude += self.instrs[at:]
            del self.instrs[at:]
        return self._held[key]

    def vreg(self, bits: int | None = None) -> VReg:
        self._next_reg += 1
        return VReg(self._next_reg, bits or self.vector_bits)

    def greg(self) -> GReg:
        self._next_reg += 1
        return GReg(self._next_reg)

    def kreg(self, bits: int | None = None) -> KReg:
        self._next_reg += 1
        return KReg(self._next_reg, bits or self.vector_bits)

    def emit(self, op: str, *operands: Operand, comment: str = "", idiom: IdiomTag | None = None) -> None:
        self.instrs.append(Instr(op, tuple(operands), comment, idiom))

    def op(self, op: str, *sources: Operand, comment: str = "", idiom: IdiomTag | None = None,
           bits: int | None = None) -> VReg | KReg:
        """Emit `op` with a fresh destination of its row's kind (a vector register, or an opmask for a
        comparison into one) and return it."""
        dst = self.kreg(bits) if spec(op).slots[0].kind == "k" else self.vreg(bits)
        self.emit(op, dst, *sources, comment=comment, idiom=idiom)
        return dst

    def table(self, label: str, elem_bytes: int, values: tuple[int, ...] | list[int], comment: str = "",
              align: int = 32) -> TableBase:
        """A constant table; `align`: its address's alignment (64 where whole zmm registers are loaded
        from it, so that no load splits across cache lines)."""
        values = tuple(values)
        old = self.tables.get(label)
        if old is not None and old.values != values:
            raise ValueError(f"table {label} defined twice with different contents")
        self.tables[label] = Table(label, elem_bytes, values, align, comment)
        return TableBase(label)

    def new_group(self) -> int:
        self._next_group += 1
        return self._next_group

