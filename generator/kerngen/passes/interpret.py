"""The machine model: a kernel run on concrete inputs by the instruction table alone.

The interpreter runs the stream the verifier proves (`ir.stream.executed`:
loops unrolled, register-addressed memory resolved, spills and reloads as
written) on many inputs at once, each instruction by the semantics the
verifier reads (`passes.model_steps`). Nothing here knows an instruction, an
ISA or a width: a row added to the table runs as soon as it has semantics,
and one without any is refused.

A kernel is compiled once (`compile_kernel`): each instruction becomes the
places it reads and writes, each register write a value of its own, so
that only true dependences order the instructions. `Program.run` lays the
program out once for each aliasing of its arguments (`model_waves.lay_out`:
the instructions in waves, each wave's alike ones one numpy step) and runs
any number of batches.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from math import gcd

import numpy as np

from ..ir.instr import Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from ..ir.stream import executed
from ..machine.ops import spec
from ..machine.registers import VECTOR
from .model_steps import blockwise, elementwise, gather, indexed, masked, transfer, widened
from .model_waves import WORD, Instruction, ModelError, Place, Plan, lay_out, words

__all__ = ["ModelError", "Program", "compile_kernel"]


@dataclass(frozen=True)
class Program:
    """A kernel compiled for the model: its executed instructions as places read and written."""

    kernel: Kernel
    instructions: tuple[Instruction, ...]
    values: tuple[int, ...]  # bytes of each register value
    stack_bytes: int
    plans: dict[tuple, Plan] = field(default_factory=dict, compare=False)  # by aliasing, laid out when first run

    def run(self, inputs: dict[int, np.ndarray], aliases: dict[int, int] | None = None) -> dict[int, np.ndarray]:
        """The kernel called once per row of `inputs` (argument index -> array
        of shape (rows, count) of integers of the argument's element width,
        signed or unsigned, for every in/inout argument); `aliases` maps an
        argument to the one whose buffer it shares (a kernel of no inputs runs
        once). Returns every argument's elements after the calls as unsigned
        arrays of the same shape."""
        kernel, aliases = self.kernel, aliases or {}
        rows = len(next(iter(inputs.values()))) if inputs else 1
        data: dict[int, np.ndarray] = {}
        for i, a in enumerate(kernel.args):
            if i in aliases or (i not in inputs and a.role == "out"):
                continue
            if i not in inputs:
                raise ModelError(f"{kernel.symbol}: no input for argument {a.name}")
            x = np.asarray(inputs[i])
            if x.shape != (rows, a.count) or x.dtype.itemsize != a.elem_bytes:
                raise ModelError(f"{kernel.symbol}: argument {a.name} needs {rows} rows of {a.count} "
                                 f"{8 * a.elem_bytes}-bit integers, got {x.dtype} of shape {x.shape}")
            data[i] = _words(x)
        key = tuple(sorted(aliases.items()))
        if key not in self.plans:
            tables = {("table", t.label): _words(np.array([[v % (1 << 8 * t.elem_bytes) for v in t.values]],
                                                          f"<u{t.elem_bytes}"))[0] for t in kernel.tables}
            buffers = {("arg", i): a.count * a.elem_bytes for i, a in enumerate(kernel.args)} | \
                {("stack",): self.stack_bytes}
            self.plans[key] = lay_out(self.instructions, self.values, tables, buffers,
                                      {i: aliases.get(i, i) for i in range(len(kernel.args))})
        out = {i: np.empty((rows, words(a.count * a.elem_bytes)), np.uint64) for i, a in enumerate(kernel.args)}
        self.plans[key].run(rows, data, out, kernel.symbol)
        return {i: out[i].view(np.uint8)[:, :a.count * a.elem_bytes].view(f"<u{a.elem_bytes}")
                for i, a in enumerate(kernel.args)}


def _words(rows: np.ndarray) -> np.ndarray:
    """Rows of integers as rows of little-endian words (the last one completed with zero bytes)."""
    raw = np.ascontiguousarray(rows).view(np.uint8).reshape(len(rows), -1)
    if raw.shape[1] % WORD:
        raw = np.concatenate([raw, np.zeros((len(rows), -raw.shape[1] % WORD), np.uint8)], axis=1)
    return raw.view(np.uint64)


def compile_kernel(kernel: Kernel) -> Program:
    """The kernel's executed stream read for the model; ModelError for an
    instruction the table gives no semantics, a register read before it is
    written or an access outside its buffers."""
    reader = _Reader(kernel)
    collecting = gc.isenabled()
    gc.disable()  # the many small tuples made here would have the collector walk them again and again
    try:
        instructions = []
        for index, ins in enumerate(executed(kernel)):
            try:
                instructions.append(reader.instruction(index, ins))
            except ModelError as e:
                raise ModelError(f"{kernel.symbol}: instruction {index} ({ins.op}): {e}") from None
    finally:
        if collecting:
            gc.enable()
    return Program(kernel, tuple(instructions), tuple(reader.values), reader.stack_bytes)


class _Reader:
    """Each instruction's operands as places, each register write a new value."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        isa = kernel.target.isa
        self.vector_bytes, self.zeroes_upper = isa.vector_bits // 8, isa.encoding.zeroes_upper
        self.tables = {t.label: t.elem_bytes * len(t.values) for t in kernel.tables}
        self.registers: dict[tuple[str, int], int] = {}  # the value each register holds
        self.values: list[int] = []
        self.stack_bytes = 0

    @staticmethod
    def width(op) -> int:
        """Bytes an operand names."""
        return op.size if isinstance(op, Mem) else op.bits // 8

    def held(self, op: PhysReg) -> int:
        """Bytes a register is kept at: a vector register at the ISA's widest."""
        return max(self.vector_bytes, op.bits // 8) if op.kind == VECTOR else op.bits // 8

    def place(self, op, size: int | None = None) -> Place:
        """Where `size` bytes of an operand (all it names, by default) are read from."""
        size = self.width(op) if size is None else size
        if isinstance(op, PhysReg):
            value = self.registers.get((op.kind, op.number))
            if value is None:
                raise ModelError(f"reads {op.kind} register {op.number} before writing it")
            if size > self.values[value]:
                raise ModelError(f"reads {size} bytes of {op.kind} register {op.number}, which holds "
                                 f"{self.values[value]}")
            return Place(("value", value), 0, size)
        element = op.size if op.broadcast else size  # one element into each of the instruction's elements
        self.check(op, element)
        return Place(op.buffer, op.offset, element, size // element)

    def check(self, m: Mem, size: int, writing: bool = False) -> None:
        """ModelError unless the bytes are inside their buffer (the stack is as large as its accesses)."""
        if isinstance(m.base, TableBase):
            if writing:
                raise ModelError(f"writes into the constant table {m.base.label}")
            end = self.tables[m.base.label]
        elif isinstance(m.base, StackBase):
            end, self.stack_bytes = None, max(self.stack_bytes, m.offset + size)
        else:
            a = self.kernel.args[m.base.index]
            end = a.count * a.elem_bytes
        if m.offset < 0 or end is not None and m.offset + size > end:
            raise ModelError(f"{'writes' if writing else 'reads'} bytes {m.offset}..{m.offset + size - 1} of "
                             f"{m.buffer}, which has {end}")

    def instruction(self, index: int, ins: Instr) -> Instruction:
        """The instruction as the places it reads and writes, and the shape of the steps it can run in:
        its kind of row, the bytes of the units its places are read in, and what instructions run
        together must share (a movement's route apart, which `transfer` gathers for each)."""
        s = spec(ins.op)
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        operands = [op for op in reads if not isinstance(op, Imm)]
        dst = ins.operands[s.written[0]]
        size = self.width(dst)
        route, unit = None, None  # unit: bytes of the units a movement takes whole
        if s.cls == "store" and imm is not None and s.move is None:  # one element, chosen by the immediate
            sources, unit = (self.place(operands[0]),), s.elem // 8
            if (imm + 1) * unit > sources[0].size:
                raise ModelError(f"the immediate {imm} names no element of its source")
            size, route, kind = unit, (("element", imm), unit, np.array([imm])), (transfer,)
        elif s.arith is not None or s.widen is not None or s.blocks is not None:
            sources = tuple(self.place(op, size) for op in operands)
            maker = elementwise if s.arith is not None else widened if s.widen is not None else blockwise
            kind = (maker, s.name, imm, tuple(p.times for p in sources))
        elif s.move is not None:
            sources = tuple(self.place(op) for op in operands)
            bits = s.move.unit or 8 * gcd(size, *(p.size for p in sources))
            unit, counts = bits // 8, tuple(p.size * 8 // bits for p in sources)
            moves = (s.name, bits, size * 8 // bits, counts)
            if s.masking is not None:  # the mask's bits, all set or none: each unit moved or kept
                sources += (self.place(operands[1], size),)
                route = tuple(_route(*moves, mask) for mask in ((1 << size * 8 // s.elem) - 1, 0))
                kind = (masked, s.name, s.elem, unit)
            elif s.move.indices is not None:  # the route of the index register's contents, known only running
                sources += (self.place(operands[s.move.indices], size),)
                kind = (indexed, unit) + moves
            else:
                route, kind = ((s.name, imm), unit, _route(*moves, imm)), (transfer,)
        else:
            raise ModelError("the instruction table gives this row no semantics")
        dest, upper = self.written(index, dst, size)
        places = (dest,) + sources
        grain = gcd(WORD, unit or WORD, *(p.offset for p in places), *(p.size for p in places))
        shape = kind[:1] + (grain,) + kind[1:] + (() if kind[0] is transfer else tuple(p.size for p in places))
        return Instruction(index, shape, sources, dest, route, upper)

    def written(self, index: int, dst, size: int) -> tuple[Place, Instruction | None]:
        """Where an instruction writes, and how the rest of a register it writes in part is filled: a
        narrower write keeps the old upper part (legacy) or zeroes it (VEX)."""
        if isinstance(dst, Mem):
            self.check(dst, size, writing=True)
            return Place(dst.buffer, dst.offset, size), None
        full, old = self.held(dst), self.registers.get((dst.kind, dst.number))
        self.registers[dst.kind, dst.number] = value = len(self.values)
        self.values.append(full)
        if size == full:
            return Place(("value", value), 0, size), None
        kept = () if self.zeroes_upper or old is None or self.values[old] < full else \
            (Place(("value", old), size, full - size),)
        rest = full - size
        upper = Instruction(index, (transfer, gcd(WORD, size, rest)), kept, Place(("value", value), size, rest),
                            (("upper", bool(kept)), rest, np.array([0])))
        return Place(("value", value), 0, size), upper


def _route(name: str, unit: int, dest_units: int, counts: tuple[int, ...], imm: int | None) -> np.ndarray:
    index = gather(name, imm, unit, dest_units, counts)
    if index is None:
        raise ModelError(f"the immediate {imm} makes this row no movement")
    return index
