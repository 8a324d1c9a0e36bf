"""The machine model: a kernel run on concrete inputs by the instruction table alone.

The interpreter runs the stream the verifier proves (`ir.stream.executed`:
loops unrolled, register-addressed memory resolved, spills and reloads as
written) on many inputs at once. Each register, buffer and stack area is an
array of bytes with one row per input; an instruction takes the semantics
the verifier reads: `Arith.exact` for element-wise rows (masked and
accumulating forms included) on the row's own element width, the `widen`
products of a widening row, a `Blocks` function for rows that are neither,
and `Move.route` through `ir.lanes.move_lanes` for movements (under an
opmask, each lane moved or kept by its bit of the mask; by an index
register, the route of its contents). Values are
computed in int64 (exact for products of elements up to 32 bits; on 64-bit
elements the table's semantics wrap and split products themselves), so
nothing here knows an instruction, an ISA or a width: a row added to the
table runs as soon as it has semantics, and one without any is refused.

A kernel is compiled once into a `Program` (one closure per instruction,
operands resolved), which then runs any number of batches.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from dataclasses import dataclass
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
_SIGNED = {bits: np.dtype(f"<i{bits // 8}") for bits in (8, 16, 32, 64)}


class ModelError(CheckError):
    """The kernel does what the model cannot follow: reads a register never
    written or memory outside its buffers, or runs a row without semantics."""


class _State:
    """One batch's registers, buffers and stack, `rows` inputs deep."""

    def __init__(self, rows: int, buffers: dict[int, np.ndarray], stack_bytes: int):
        self.rows = rows
        self.regs: dict[tuple[str, int], np.ndarray] = {}
        self.buffers = buffers
        self.stack = np.zeros((rows, stack_bytes), dtype=np.uint8)


Step = Callable[[_State], None]
Read = Callable[[_State], np.ndarray]


@dataclass(frozen=True)
class Program:
    """A kernel compiled for the model: one step per executed instruction."""

    kernel: Kernel
    steps: tuple[Step, ...]
    stack_bytes: int

    def run(self, inputs: dict[int, np.ndarray], aliases: dict[int, int] | None = None) -> dict[int, np.ndarray]:
        """The kernel called once per row of `inputs` (argument index -> array
        of shape (rows, count) of integers of the argument's element width,
        signed or unsigned, for every in/inout argument); `aliases` maps an
        argument to the one whose buffer it shares (a kernel of no inputs runs
        once). Returns every argument's elements after the calls as unsigned
        arrays of the same shape."""
        kernel, aliases = self.kernel, aliases or {}
        rows = len(next(iter(inputs.values()))) if inputs else 1
        buffers: dict[int, np.ndarray] = {}
        for i, a in enumerate(kernel.args):
            if i in aliases:
                continue
            data = inputs.get(i)
            if data is None:
                if a.role != "out":
                    raise ModelError(f"{kernel.symbol}: no input for argument {a.name}")
                data = np.zeros((rows, a.count), dtype=f"<u{a.elem_bytes}")
            data = np.asarray(data)
            if data.shape != (rows, a.count) or data.dtype.itemsize != a.elem_bytes:
                raise ModelError(f"{kernel.symbol}: argument {a.name} needs {rows} rows of {a.count} "
                                 f"{8 * a.elem_bytes}-bit integers, got {data.dtype} of shape {data.shape}")
            buffers[i] = np.ascontiguousarray(data).view(np.uint8).copy()
        for i, j in aliases.items():
            buffers[i] = buffers[j]
        state = _State(rows, buffers, self.stack_bytes)
        for index, step in enumerate(self.steps):
            try:
                step(state)
            except ModelError as e:
                raise ModelError(f"{kernel.symbol}: instruction {index}: {e}") from None
        return {i: buffers[i][:, :a.count * a.elem_bytes].view(f"<u{a.elem_bytes}") for i, a in enumerate(kernel.args)}


def compile_kernel(kernel: Kernel) -> Program:
    """The kernel's executed stream as model steps; ModelError for an
    instruction the table gives no semantics or an access outside its buffers."""
    stream = executed(kernel)
    stack = max((op.offset + op.size for ins in stream for op in ins.operands
                 if isinstance(op, Mem) and isinstance(op.base, StackBase)), default=0)
    compiler = _Compiler(kernel)
    compiled: dict[int, Step] = {}  # by instruction object: a rolled loop's body runs the same ones again
    collecting = gc.isenabled()
    gc.disable()  # the many closures made here would have the collector walk the whole stream again and again
    try:
        for index, ins in enumerate(stream):
            if id(ins) not in compiled:
                try:
                    compiled[id(ins)] = compiler.step(ins)
                except ModelError as e:
                    raise ModelError(f"{kernel.symbol}: instruction {index} ({ins.op}): {e}") from None
    finally:
        if collecting:
            gc.enable()
    return Program(kernel, tuple(compiled[id(ins)] for ins in stream), stack)


class _Compiler:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        isa = kernel.target.isa
        self.vector_bytes, self.zeroes_upper = isa.vector_bits // 8, isa.encoding.zeroes_upper
        self.tables = {t.label: np.array([v & ((1 << 8 * t.elem_bytes) - 1) for v in t.values],
                                         dtype=f"<u{t.elem_bytes}").view(np.uint8)[None, :] for t in kernel.tables}

    # -- operands: arrays of bytes, one row per input (or one row for all: a constant table)

    @staticmethod
    def width(op) -> int:
        """Bytes an operand names."""
        return op.size if isinstance(op, Mem) else op.bits // 8

    def held(self, op: PhysReg) -> int:
        """Bytes a register is kept at: a vector register at the ISA's widest."""
        return max(self.vector_bytes, op.bits // 8) if op.kind == VECTOR else op.bits // 8

    def reader(self, op, size: int | None = None) -> tuple[Read, bool]:
        """How to read `size` bytes of an operand, and whether what it gives is contiguous."""
        size = self.width(op) if size is None else size
        if isinstance(op, Mem) and op.broadcast:  # one element into each of the instruction's elements
            element, _ = self.reader(dataclasses.replace(op, broadcast=False))
            times = size // op.size
            return (lambda state: np.tile(element(state), (1, times))), True
        if isinstance(op, PhysReg):
            key, whole = (op.kind, op.number), size == self.held(op)

            def register(state: _State) -> np.ndarray:
                held = state.regs.get(key)
                if held is None:
                    raise ModelError(f"reads {op.kind} register {op.number} before writing it")
                return held if whole else held[:, :size]
            return register, whole
        start, end = op.offset, op.offset + size
        if isinstance(op.base, TableBase):
            table = self.tables[op.base.label][:, start:end]
            self.check(op, size, self.tables[op.base.label].shape[1])
            return (lambda state: table), True
        self.check(op, size, self.limit(op))
        if isinstance(op.base, StackBase):
            return (lambda state: state.stack[:, start:end]), False
        index = op.base.index
        return (lambda state: state.buffers[index][:, start:end]), False

    def limit(self, m: Mem) -> int | None:
        """Bytes of the buffer an access is into (None: the stack, sized to its accesses)."""
        if isinstance(m.base, ArgBase):
            a = self.kernel.args[m.base.index]
            return a.count * a.elem_bytes
        if isinstance(m.base, StackBase):
            return None
        raise ModelError(f"addresses memory the model does not know: {m}")

    @staticmethod
    def check(m: Mem, size: int, end: int | None, writing: bool = False) -> None:
        if m.offset < 0 or end is not None and m.offset + size > end:
            raise ModelError(f"{'writes' if writing else 'reads'} bytes {m.offset}..{m.offset + size - 1} of "
                             f"{m.buffer}, which has {end}")

    def writer(self, op, size: int) -> Callable[[_State, np.ndarray], None]:
        if isinstance(op, Mem):
            if isinstance(op.base, TableBase):
                raise ModelError(f"writes into the constant table {op.base.label}")
            self.check(op, size, self.limit(op), writing=True)
            start, end = op.offset, op.offset + size
            if isinstance(op.base, StackBase):
                def to_stack(state: _State, data: np.ndarray) -> None:
                    state.stack[:, start:end] = data
                return to_stack
            index = op.base.index

            def to_buffer(state: _State, data: np.ndarray) -> None:
                state.buffers[index][:, start:end] = data
            return to_buffer
        key, full = (op.kind, op.number), self.held(op)
        keep = not self.zeroes_upper  # a narrower write: the upper part kept (legacy) or zeroed (VEX)

        def to_register(state: _State, data: np.ndarray) -> None:
            if data.shape[0] != state.rows:
                data = np.broadcast_to(data, (state.rows, data.shape[1]))
            if size < full:
                old = state.regs.get(key)
                upper = old[:, size:full] if keep and old is not None else \
                    np.zeros((state.rows, full - size), dtype=np.uint8)
                data = np.concatenate([data, upper], axis=1)
            state.regs[key] = np.ascontiguousarray(data)
        return to_register

    # -- one instruction

    def step(self, ins: Instr) -> Step:
        s = spec(ins.op)
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        sources = [op for op in reads if not isinstance(op, Imm)]
        dst = ins.operands[s.written[0]]
        size = self.width(dst)
        if s.cls == "store" and imm is not None and s.move is None:  # one element, chosen by the immediate
            compute = self.element_store(s, sources, imm)
            size = s.elem // 8
        elif s.arith is not None:
            compute = self.elementwise(s, sources, imm, size)
        elif s.widen is not None:
            compute = self.widened(s, sources, size)
        elif s.blocks is not None:
            compute = self.blockwise(s, sources, imm, size)
        elif s.move is not None and s.masking is not None:
            compute = self.masked_move(s, sources, size)
        elif s.move is not None and s.move.indices is not None:
            compute = self.indexed_move(s, sources, size)
        elif s.move is not None:
            compute = self.moved(s, sources, imm, size)
        else:
            raise ModelError("the instruction table gives this row no semantics")
        write = self.writer(dst, size)

        def run(state: _State) -> None:
            write(state, compute(state))
        return run

    def element_store(self, s: Op, sources: list, imm: int) -> Read:
        read, _ = self.reader(sources[0])
        start, end = imm * s.elem // 8, (imm + 1) * s.elem // 8
        return lambda state: read(state)[:, start:end]

    def elements(self, op, bits: int, size: int) -> Read:
        """An operand's `bits`-bit elements, signed, as the integers values are computed in."""
        read, contiguous = self.reader(op, size)
        kind = _SIGNED[bits]
        if bits == WIDEST:
            return (lambda state: read(state).view(kind)) if contiguous else \
                (lambda state: np.ascontiguousarray(read(state)).view(kind))
        return lambda state: np.ascontiguousarray(read(state)).view(kind).astype(np.int64)

    def elementwise(self, s: Op, sources: list, imm: int | None, size: int) -> Read:
        bits = s.elem or BITWISE
        reads, exact, kind = [self.elements(op, bits, size) for op in sources], s.arith.exact, _SIGNED[bits]
        tail = (imm,) if imm is not None else ()
        if len(reads) == 2:  # most rows: spelt out, as this runs for nearly every instruction
            first, second = reads
            return lambda state: _packed(exact((first(state), second(state)) + tail, bits), kind)
        return lambda state: _packed(exact(tuple(r(state) for r in reads) + tail, bits), kind)

    def widened(self, s: Op, sources: list, size: int) -> Read:
        """Products of the low halves of `elem`-bit units: the low half their low product, the high half the
        row's `widen` product."""
        half = s.elem // 2
        low, high, kind = PRODUCT_HALVES["mullo"].exact, PRODUCT_HALVES[s.widen].exact, _SIGNED[half]
        first, second = (self.elements(op, half, size) for op in sources)

        def compute(state: _State) -> np.ndarray:
            a, b = first(state)[:, 0::2], second(state)[:, 0::2]
            out = np.empty((a.shape[0], 2 * a.shape[1]), dtype=np.int64)
            out[:, 0::2], out[:, 1::2] = low((a, b), half), high((a, b), half)
            return _packed(out, kind)
        return compute

    def blockwise(self, s: Op, sources: list, imm: int | None, size: int) -> Read:
        reads = [self.reader(op, size)[0] for op in sources]
        return lambda state: s.blocks.on_bytes([r(state) for r in reads], imm, size)

    def masked_move(self, s: Op, sources: list, size: int) -> Read:
        """A movement under an opmask (sources: the old destination, the mask, the moved ones): the route
        with every mask bit set where the lane's bit is, with none where it is not (merging or zeroing)."""
        elements = size * 8 // s.elem
        taken, kept = (self.moved(s, sources, bits, size) for bits in ((1 << elements) - 1, 0))
        mask = self.elements(sources[1], s.elem, size)

        def compute(state: _State) -> np.ndarray:
            chosen = np.repeat(mask(state) != 0, s.elem // 8, axis=1)
            return np.ascontiguousarray(np.where(chosen, taken(state), kept(state)))
        return compute

    def indexed_move(self, s: Op, sources: list, size: int) -> Read:
        """A permutation by an index register (`Move.indices`): the route of each content that register
        has among the inputs (one, where it holds a constant), read as one integer."""
        index = self.reader(sources[s.move.indices], size)[0]
        routes: dict[bytes, Read] = {}

        def route(contents: np.ndarray) -> Read:
            key = contents.tobytes()
            if key not in routes:
                routes[key] = self.moved(s, sources, int.from_bytes(key, "little"), size)
            return routes[key]

        def compute(state: _State) -> np.ndarray:
            held = np.broadcast_to(index(state), (state.rows, size))
            if (held == held[0]).all():  # a constant index (every kernel's): one route for every input
                return route(held[0])(state)
            contents, which = np.unique(held, axis=0, return_inverse=True)
            out = np.empty((state.rows, size), dtype=np.uint8)
            for k, row in enumerate(contents):
                chosen = which.reshape(-1) == k
                out[chosen] = np.broadcast_to(route(row)(state), (state.rows, size))[chosen]
            return out
        return compute

    def moved(self, s: Op, sources: list, imm: int | None, size: int) -> Read:
        # the identity (a unit of the data's own width) moves any unit alike: the widest all operands hold
        unit = s.move.unit or 8 * gcd(size, *(self.width(op) for op in sources))
        counts = tuple(self.width(op) * 8 // unit for op in sources)
        index = _gather(s.name, imm, unit, size * 8 // unit, counts)
        if index is None:
            raise ModelError(f"the immediate {imm} makes this row no movement")
        kind = np.dtype(f"V{unit // 8}")
        reads, widths = [self.reader(op)[0] for op in sources], [self.width(op) for op in sources]
        if counts == (size * 8 // unit,) and np.array_equal(index, np.arange(counts[0])):  # a copy
            read = reads[0]  # registers are replaced, never changed in place: only memory is copied
            return (lambda state: np.array(read(state))) if isinstance(sources[0], Mem) else read

        def compute(state: _State) -> np.ndarray:
            parts = [np.ascontiguousarray(np.broadcast_to(r(state), (state.rows, w))) for r, w in zip(reads, widths)]
            parts.append(np.zeros((state.rows, unit // 8), dtype=np.uint8))
            return np.ascontiguousarray(np.concatenate(parts, axis=1).view(kind)[:, index]).view(np.uint8)
        return compute


def _packed(values, kind: np.dtype) -> np.ndarray:
    """Values of elements of type `kind` (already wrapped to its width) as bytes."""
    values = np.asarray(values)
    return np.ascontiguousarray(values if values.dtype == kind else values.astype(kind)).view(np.uint8)


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
