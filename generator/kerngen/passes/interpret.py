"""The machine model: a kernel run on concrete inputs by the instruction table alone.

The interpreter runs the stream the verifier proves (`ir.stream.executed`:
loops unrolled, register-addressed memory resolved, spills and reloads as
written) on many inputs at once. Each register, buffer and stack area is an
array of bytes with one row per input; an instruction takes the same
semantics the verifier reads: `Arith.exact` for element-wise rows (masked
and accumulating forms included) on the row's own element width, the
`widen` products of a widening row, a `Blocks` function for rows that are
neither, and `Move.route` through `ir.lanes.move_lanes` for movements. Values
are computed in int64 (exact for products of elements up to 32 bits; on
64-bit elements the table's semantics wrap and split products themselves),
so nothing here knows an instruction, an ISA or a width: a row added to the
table runs as soon as it has semantics, and one without any is refused.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np

from ..errors import CheckError
from ..ir.instr import ArgBase, Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from ..ir.lanes import move_lanes
from ..ir.stream import executed
from ..machine.ops import PRODUCT_HALVES, Op, spec
from ..machine.registers import VECTOR

WIDEST = 64  # bits of the integers values are computed in
BITWISE = 64  # the element width a row of no element width (a bitwise one) is computed on


class ModelError(CheckError):
    """The kernel does what the model cannot follow: reads a register never
    written or memory outside its buffers, or runs a row without semantics."""


def run_kernel(kernel: Kernel, inputs: dict[int, np.ndarray], aliases: dict[int, int] | None = None
               ) -> dict[int, np.ndarray]:
    """The kernel called once per row of `inputs` (argument index -> array of
    shape (rows, count) of integers of the argument's element width, signed or
    unsigned, for every in/inout argument); `aliases` maps an argument to the
    one whose buffer it shares. Returns every argument's buffer after the
    calls as an unsigned array of the same shape, by index."""
    machine = _Machine(kernel, inputs, aliases or {})
    for index, ins in enumerate(executed(kernel)):
        try:
            machine.step(ins)
        except ModelError as e:
            raise ModelError(f"{kernel.symbol}: instruction {index} ({ins.op}): {e}") from None
    return {i: machine.buffers[i][:, :a.count * a.elem_bytes].view(f"<u{a.elem_bytes}")
            for i, a in enumerate(kernel.args)}


def _signed(bits: int) -> np.dtype:
    return np.dtype(f"<i{bits // 8}")


class _Machine:
    def __init__(self, kernel: Kernel, inputs: dict[int, np.ndarray], aliases: dict[int, int]):
        self.kernel = kernel
        isa = kernel.target.isa
        self.vector_bytes, self.zeroes_upper = isa.vector_bits // 8, isa.encoding.zeroes_upper
        self.rows = len(next(iter(inputs.values())))
        self.regs: dict[tuple[str, int], np.ndarray] = {}
        self.buffers: dict[int, np.ndarray] = {}
        for i, a in enumerate(kernel.args):
            if i in aliases:
                continue
            data = inputs.get(i)
            if data is None:
                if a.role != "out":
                    raise ModelError(f"{kernel.symbol}: no input for argument {a.name}")
                data = np.zeros((self.rows, a.count), dtype=f"<u{a.elem_bytes}")
            data = np.asarray(data)
            if data.shape != (self.rows, a.count) or data.dtype.itemsize != a.elem_bytes:
                raise ModelError(f"{kernel.symbol}: argument {a.name} needs {self.rows} rows of {a.count} "
                                 f"{8 * a.elem_bytes}-bit integers, got {data.dtype} of shape {data.shape}")
            self.buffers[i] = np.ascontiguousarray(data).view(np.uint8).copy()
        for i, j in aliases.items():
            self.buffers[i] = self.buffers[j]
        self.tables = {t.label: np.array([v & ((1 << 8 * t.elem_bytes) - 1) for v in t.values],
                                         dtype=f"<u{t.elem_bytes}").view(np.uint8)[None, :] for t in kernel.tables}
        self.stack = np.zeros((self.rows, 0), dtype=np.uint8)

    # -- operands: arrays of bytes, one row per input (or one row for all: a constant table)

    def width(self, op) -> int:
        """Bytes an operand names."""
        return op.size if isinstance(op, Mem) else op.bits // 8

    def read(self, op, size: int | None = None) -> np.ndarray:
        size = self.width(op) if size is None else size
        if isinstance(op, PhysReg):
            held = self.regs.get((op.kind, op.number))
            if held is None:
                raise ModelError(f"reads {op.kind} register {op.number} before writing it")
            return held[:, :size]
        buffer = self.memory(op, size)
        return buffer[:, op.offset:op.offset + size]

    def memory(self, m: Mem, size: int, writing: bool = False) -> np.ndarray:
        if isinstance(m.base, TableBase):
            if writing:
                raise ModelError(f"writes into the constant table {m.base.label}")
            buffer = self.tables[m.base.label]
        elif isinstance(m.base, StackBase):
            if m.offset + size > self.stack.shape[1]:
                grown = np.zeros((self.rows, m.offset + size), dtype=np.uint8)
                grown[:, :self.stack.shape[1]] = self.stack
                self.stack = grown
            buffer = self.stack
        elif isinstance(m.base, ArgBase):
            buffer = self.buffers[m.base.index]
        else:
            raise ModelError(f"addresses memory the model does not know: {m}")
        end = buffer.shape[1]
        if isinstance(m.base, ArgBase):  # an argument sharing a longer one's buffer ends where its own does
            end = self.kernel.args[m.base.index].count * self.kernel.args[m.base.index].elem_bytes
        if m.offset < 0 or m.offset + size > end:
            raise ModelError(f"{'writes' if writing else 'reads'} bytes {m.offset}..{m.offset + size - 1} of "
                             f"{m.buffer}, which has {end}")
        return buffer

    def write(self, op, data: np.ndarray) -> None:
        data = np.broadcast_to(data, (self.rows, data.shape[1]))
        if isinstance(op, Mem):
            self.memory(op, data.shape[1], writing=True)[:, op.offset:op.offset + data.shape[1]] = data
            return
        key = (op.kind, op.number)
        full = max(self.vector_bytes, data.shape[1]) if op.kind == VECTOR else data.shape[1]
        if data.shape[1] < full:  # a narrower write: the upper part zeroed (VEX) or kept (legacy)
            old = self.regs.get(key)
            upper = old[:, data.shape[1]:full] if old is not None and not self.zeroes_upper else \
                np.zeros((self.rows, full - data.shape[1]), dtype=np.uint8)
            data = np.concatenate([data, upper], axis=1)
        self.regs[key] = np.ascontiguousarray(data)

    # -- one instruction

    def step(self, ins: Instr) -> None:
        s = spec(ins.op)
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        sources = [op for op in reads if not isinstance(op, Imm)]
        dst = ins.operands[s.written[0]]
        size = self.width(dst)
        if s.cls == "store" and imm is not None and s.move is None:  # one element, chosen by the immediate
            self.write(dst, self.read(sources[0])[:, imm * s.elem // 8:(imm + 1) * s.elem // 8])
        elif s.arith is not None:
            self.write(dst, self.elementwise(s, sources, imm, size))
        elif s.widen is not None:
            self.write(dst, self.widened(s, sources, size))
        elif s.blocks is not None:
            self.write(dst, self.blockwise(s, sources, imm, size))
        elif s.move is not None:
            self.write(dst, self.moved(s, sources, imm, size))
        else:
            raise ModelError("the instruction table gives this row no semantics")

    def elements(self, op, bits: int, size: int) -> np.ndarray:
        """An operand's `bits`-bit elements, signed, as the integers values are computed in."""
        raw = np.ascontiguousarray(self.read(op, size)).view(_signed(bits))
        return raw if bits == WIDEST else raw.astype(np.int64)

    def packed(self, values, bits: int) -> np.ndarray:
        """Values of `bits`-bit elements (already wrapped) as bytes."""
        return np.ascontiguousarray(np.asarray(values).astype(_signed(bits))).view(np.uint8)

    def elementwise(self, s: Op, sources: list, imm: int | None, size: int) -> np.ndarray:
        bits = s.elem or BITWISE
        operands = tuple(self.elements(op, bits, size) for op in sources) + ((imm,) if imm is not None else ())
        return self.packed(s.arith.exact(operands, bits), bits)

    def widened(self, s: Op, sources: list, size: int) -> np.ndarray:
        """Products of the low halves of `elem`-bit units: the low half their low product, the high half the
        row's `widen` product."""
        half = s.elem // 2
        a, b = (self.elements(op, half, size)[:, 0::2] for op in sources)
        out = np.empty((a.shape[0], 2 * a.shape[1]), dtype=np.int64)
        out[:, 0::2] = PRODUCT_HALVES["mullo"].exact((a, b), half)
        out[:, 1::2] = PRODUCT_HALVES[s.widen].exact((a, b), half)
        return self.packed(out, half)

    def blockwise(self, s: Op, sources: list, imm: int | None, size: int) -> np.ndarray:
        blocks, part = s.blocks, np.dtype(f"<u{s.blocks.part // 8}")
        shape = (-1, size * 8 // blocks.block, blocks.block // blocks.part)
        parts = tuple(np.ascontiguousarray(self.read(op, size)).view(part).reshape(shape) for op in sources)
        rows = max(p.shape[0] for p in parts)
        out = np.asarray(blocks.value(parts, imm)).astype(part).reshape(rows, -1)
        return np.ascontiguousarray(out).view(np.uint8)

    def moved(self, s: Op, sources: list, imm: int | None, size: int) -> np.ndarray:
        # the identity (a unit of the data's own width) moves any unit alike: the widest all operands hold
        unit = s.move.unit or 8 * gcd(size, *(self.width(op) for op in sources))
        counts = tuple(self.width(op) * 8 // unit for op in sources)
        index = _gather(s.name, imm, unit, size * 8 // unit, counts)
        if index is None:
            raise ModelError(f"the immediate {imm} makes this row no movement")
        kind = np.dtype(f"V{unit // 8}")
        parts = [np.broadcast_to(np.ascontiguousarray(self.read(op)), (self.rows, self.width(op))).view(kind)
                 for op in sources]
        parts.append(np.zeros((self.rows, 1), dtype=kind))
        return np.ascontiguousarray(np.concatenate(parts, axis=1)[:, index]).view(np.uint8)


@lru_cache(maxsize=None)
def _gather(name: str, imm: int | None, unit: int, dest_units: int, counts: tuple[int, ...]) -> np.ndarray | None:
    """Where each destination unit of row `name` comes from, as indices into
    its sources' units laid end to end and then one zero unit."""
    labels = [[(i, k) for k in range(n)] for i, n in enumerate(counts)]
    moved = move_lanes(spec(name), labels, imm, unit, dest_units, None)
    if moved is None:
        return None
    starts = np.cumsum((0,) + counts)
    return np.array([starts[-1] if m is None else starts[m[0]] + m[1] for m in moved], dtype=np.intp)

