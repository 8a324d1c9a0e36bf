"""The machine model's waves (passes.interpret) against the instruction table's semantics applied one
instruction at a time, input by input: every row with semantics, in kernels of several instances of it
side by side and in chains, on registers and memory of every width its forms have, masked and not,
on random inputs; a kernel aliasing its buffers, spilling to the stack and reading parts of words;
inputs run in many batches."""

from __future__ import annotations

import itertools
import random
from math import gcd

import numpy as np
import pytest

from kerngen.harness.selfcheck import forms, operand_widths
from kerngen.ir.instr import ArgBase, ArgSpec, Imm, Instr, Kernel, Mem, PhysReg, StackBase, Table, TableBase
from kerngen.ir.stream import executed
from kerngen.machine.ops import OPS, PRODUCT_HALVES, TABLE, Op, spec
from kerngen.machine.registers import GENERAL, MASK, VECTOR
from kerngen.machine.target import make_target
from kerngen.passes import model_waves
from kerngen.passes.interpret import ModelError, compile_kernel

TARGETS = {isa: make_target(isa, 64) for isa in ("avx512", "sse", "scalar")}
ROWS = 7  # inputs of each kernel
SOURCE_BYTES = 1024  # the input buffer registers are loaded from and memory operands read


# -- the oracle: one instruction at a time, each input's route its own


def _reference(kernel: Kernel, inputs: dict[int, np.ndarray], aliases: dict[int, int] | None = None
               ) -> dict[int, np.ndarray]:
    aliases, rows = aliases or {}, len(next(iter(inputs.values())))
    memory: dict[tuple, np.ndarray] = {("stack",): np.zeros((rows, 1 << 12), np.uint8)}
    for i, a in enumerate(kernel.args):
        if i not in aliases:
            data = inputs.get(i, np.zeros((rows, a.count), f"<u{a.elem_bytes}"))
            memory["arg", i] = np.ascontiguousarray(data).view(np.uint8).reshape(rows, -1).copy()
    for i, j in aliases.items():
        memory["arg", i] = memory["arg", j]
    for t in kernel.tables:
        words = np.array([v % (1 << 8 * t.elem_bytes) for v in t.values], f"<u{t.elem_bytes}").view(np.uint8)
        memory["table", t.label] = np.tile(words, (rows, 1))
    registers: dict[tuple, np.ndarray] = {}
    isa = kernel.target.isa

    def read(op, size: int | None = None) -> np.ndarray:
        size = (op.size if isinstance(op, Mem) else op.bits // 8) if size is None else size
        if isinstance(op, PhysReg):
            return registers[op.kind, op.number][:, :size]
        if op.broadcast:
            return np.tile(memory[op.buffer][:, op.offset:op.offset + op.size], (1, size // op.size))
        return memory[op.buffer][:, op.offset:op.offset + size]

    def write(op, data: np.ndarray) -> None:
        if isinstance(op, Mem):
            memory[op.buffer][:, op.offset:op.offset + data.shape[1]] = data
            return
        full = max(isa.vector_bits // 8, op.bits // 8) if op.kind == VECTOR else op.bits // 8
        old = registers.get((op.kind, op.number))
        upper = old[:, data.shape[1]:full] if old is not None and not isa.encoding.zeroes_upper else \
            np.zeros((rows, full - data.shape[1]), np.uint8)
        registers[op.kind, op.number] = np.concatenate([data, upper], axis=1)

    def elements(data: np.ndarray, bits: int) -> np.ndarray:
        return np.ascontiguousarray(data).view(f"<i{bits // 8}").astype(np.int64)

    def packed(values, bits: int) -> np.ndarray:
        return np.asarray(values).astype(f"<i{bits // 8}").view(np.uint8)

    def moved(s: Op, sources: list[np.ndarray], immediates: list[int | None], size: int) -> np.ndarray:
        unit = s.move.unit or 8 * gcd(size, *(x.shape[1] for x in sources))
        step, out = unit // 8, np.zeros((rows, size), np.uint8)
        for r, imm in enumerate(immediates):
            route = s.move.route(size // step, tuple(x.shape[1] // step for x in sources), imm, unit)
            assert route is not None
            for k, pick in enumerate(route):
                if pick is not None:
                    out[r, k * step:(k + 1) * step] = sources[pick[0]][r, pick[1] * step:(pick[1] + 1) * step]
        return out

    for ins in executed(kernel):
        s = spec(ins.op)
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        operands = [op for op in reads if not isinstance(op, Imm)]
        dst = ins.operands[s.written[0]]
        size = dst.size if isinstance(dst, Mem) else dst.bits // 8
        if s.cls == "store" and imm is not None and s.move is None:
            out = read(operands[0])[:, imm * s.elem // 8:(imm + 1) * s.elem // 8]
        elif s.arith is not None:
            bits = s.elem or 64
            values = s.arith.exact(tuple(elements(read(op, size), bits) for op in operands) + (imm,) * (imm is not None),
                                   bits)
            out = packed(np.broadcast_to(values, (rows, size * 8 // bits)), bits)
        elif s.widen is not None:
            half = s.elem // 2
            a, b = (elements(read(op, size), half)[:, 0::2] for op in operands)
            values = np.empty((rows, 2 * a.shape[1]), np.int64)
            values[:, 0::2] = PRODUCT_HALVES["mullo"].exact((a, b), half)
            values[:, 1::2] = PRODUCT_HALVES[s.widen].exact((a, b), half)
            out = packed(values, half)
        elif s.blocks is not None:
            out = s.blocks.on_bytes([read(op, size) for op in operands], imm, size)
        elif s.masking is not None:  # each input's mask bits are the route's immediate
            mask = elements(read(operands[1], size), s.elem) != 0
            bits = [sum(1 << k for k in np.flatnonzero(row)) for row in mask]
            out = moved(s, [read(op) for op in operands], bits, size)
        elif s.move.indices is not None:  # each input's index register, as one integer
            held = read(operands[s.move.indices], size)
            out = moved(s, [read(op) for op in operands], [int.from_bytes(row.tobytes(), "little") for row in held],
                        size)
        else:
            out = moved(s, [read(op) for op in operands], [imm] * rows, size)
        write(dst, np.ascontiguousarray(out))
    return {i: memory["arg", aliases.get(i, i)].view(f"<u{a.elem_bytes}") for i, a in enumerate(kernel.args)}


# -- kernels of one row: its instances side by side and in chains


def _kernel(body: list[Instr], target, constants: list[int]) -> Kernel:
    args = (ArgSpec("x", "in", "uint64_t", 8, SOURCE_BYTES // 8, 64), ArgSpec("y", "out", "uint64_t", 8, 512, 64))
    return Kernel("row", args, tuple(body), (Table("T", 8, tuple(constants)),), target, frozenset())


class _Writer:
    """A kernel's body: registers loaded from the input, instances of one row, every result stored."""

    def __init__(self, target, rng: random.Random):
        self.target, self.rng, self.body, self.stored = target, rng, [], 0
        self.numbers = itertools.count()  # the model keeps a register by its number, any number
        self.constants = [rng.getrandbits(64) for _ in range(SOURCE_BYTES // 8)]

    def memory(self, size: int, broadcast: int = 0) -> Mem:
        """Bytes of the input (or of the constant table, the same for every input) at an offset a
        whole number of their elements (of words, for the wider), or now and then at any even one
        (elements across words)."""
        width = broadcast or size
        offset = self.rng.randrange(0, SOURCE_BYTES - width, min(width, 8) if self.rng.random() < 0.8 else 2)
        base = TableBase("T") if self.rng.random() < 0.25 else ArgBase(0)
        return Mem(base, offset, width, broadcast=bool(broadcast))

    def register(self, kind: str, bits: int) -> PhysReg:
        """A register of `kind` holding random data (a mask: the comparison of two such)."""
        reg = PhysReg(kind, next(self.numbers), bits)
        if kind == MASK:
            self.body.append(Instr("vpcmpgtq_k", (reg, self.register(VECTOR, bits), self.register(VECTOR, bits))))
        elif kind == GENERAL:
            self.body.append(Instr("load64_gpr", (reg, self.memory(8))))
        else:  # loaded whole, as wide as the ISA keeps a register: data in its upper part too
            whole = max(bits, self.target.isa.vector_bits)
            self.body.append(Instr("load", (PhysReg(kind, reg.number, whole), self.memory(whole // 8))))
        return reg

    def store(self, op) -> None:
        """The register a result is in, as wide as the ISA keeps it (or the memory it is in)."""
        if isinstance(op, PhysReg) and op.kind == VECTOR:
            op = PhysReg(VECTOR, op.number, max(op.bits, self.target.isa.vector_bits))
        size = op.size if isinstance(op, Mem) else op.bits // 8
        source = op
        if isinstance(op, Mem):  # memory written: copied out through a register
            source = PhysReg(VECTOR, next(self.numbers), max(128, size * 8))
            self.body.append(Instr("load", (source, Mem(ArgBase(1), op.offset, source.bits // 8))))
            size = source.bits // 8
        self.body.append(Instr("mov_store" if source.kind == GENERAL else "store",
                               (Mem(ArgBase(1), self.stored, size), source)))
        self.stored += size


def _row_kernel(op: Op, bits: int, target, imm: int | None, rng: random.Random) -> Kernel:
    """Instances of row `op` on `bits`-bit registers: three side by side, each with fresh sources
    (registers, memory, a broadcast element), then two reading the results before them."""
    widths = operand_widths(op, bits, [imm])
    w = _Writer(target, rng)
    results = []
    for instance in range(5):
        operands = []
        for k, (slot, width) in enumerate(zip(op.slots, widths)):
            kind = {"g": GENERAL, "gm": GENERAL, "k": MASK}.get(slot.kind, VECTOR)
            width = 64 if kind == GENERAL else width
            if slot.kind == "i":
                operands.append(Imm(imm))
            elif "w" in slot.access and slot.kind == "m":
                size = op.elem // 8 if any(s.kind == "i" for s in op.slots) and op.move is None else \
                    rng.choice([n for n in (2, 4, 8, 16, 32, 64) if n <= bits // 8])
                operands.append(Mem(ArgBase(1), 2048 + 128 * instance, size))
            elif slot.access == "w":  # a register written before, half the time: what a narrower write keeps of it
                loaded = [i.operands[0].number for i in w.body if i.op == "load" and kind == VECTOR
                          and i.operands[0].number not in [r.number for r in results if isinstance(r, PhysReg)]]
                number = rng.choice(loaded) if loaded and rng.random() < 0.5 else next(w.numbers)
                operands.append(PhysReg(kind, number, width))
            elif slot.kind == "m" or slot.kind in ("vm", "gm") and rng.random() < 0.4:
                unit = op.move.unit // 8 if op.move is not None else 1  # a memory-only source holds whole units
                size = width // 8 if slot.kind != "m" else rng.choice([n for n in (2, 4, 8, 16, 32, 64)
                                                                       if unit <= n <= width // 8])
                element = op.elem // 8 if op.arith is not None and op.elem in (32, 64) and rng.random() < 0.5 else 0
                operands.append(w.memory(size, element))
            elif instance >= 3 and kind == VECTOR and any(isinstance(r, PhysReg) and r.kind == VECTOR
                                                          and r.bits >= width for r in results):
                chained = [r for r in results if isinstance(r, PhysReg) and r.kind == VECTOR and r.bits >= width]
                operands.append(PhysReg(VECTOR, chained[-1 - k % len(chained)].number, width))
            else:
                operands.append(w.register(kind, width))
        w.body.append(Instr(op.name, tuple(operands)))
        results.append(operands[op.written[0]])
    for dest in results:
        w.store(dest)
    return _kernel(w.body, target, w.constants)


def _cases() -> list[tuple[str, int, str]]:
    """(row, width, ISA) of every row the model runs: each width of its forms on AVX-512 (whose
    narrower writes zero the rest of a register), and 128 bits on SSE and on the scalar ISA (whose
    legacy encoding keeps the rest of a wider register)."""
    cases = set()
    for op, form, bits in forms(TABLE):
        if op.cls in ("address", "control"):
            continue
        cases.add((op.name, min(bits, 512), "avx512"))
        if bits == 128 and op.masking is None:
            cases |= {(op.name, 128, "sse"), (op.name, 128, "scalar")}
    return sorted(cases)


def _inputs(kernel: Kernel, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """Random words, with edges (all zeros, all ones, the extremes) in the first inputs."""
    words = rng.integers(0, 1 << 64, (ROWS, SOURCE_BYTES // 8), dtype=np.uint64, endpoint=False)
    words[0], words[1], words[2] = 0, ~np.uint64(0), np.uint64(1 << 63)
    return {0: words}


def _compared(kernel: Kernel, rng: np.random.Generator, aliases: dict[int, int] | None = None) -> None:
    inputs = _inputs(kernel, rng)
    want = _reference(kernel, inputs, aliases)
    got = compile_kernel(kernel).run(inputs, aliases)
    for i in want:
        assert np.array_equal(got[i], want[i]), (i, np.argwhere(got[i] != want[i])[:4].tolist())


@pytest.mark.parametrize("name,bits,isa", _cases())
def test_the_waves_compute_what_the_table_does_instruction_by_instruction(name, bits, isa):
    """Each row's instances, side by side (one step of a wave) and chained, on the widths of its forms:
    the model's outputs are the oracle's, word for word."""
    op, rng, target = OPS[name], random.Random(name + isa + str(bits)), TARGETS[isa]
    imms = [None] if not any(s.kind == "i" for s in op.slots) else rng.sample(range(256), 12) + [0, 1, 8]
    ran = 0
    for imm in imms:
        kernel = _row_kernel(op, bits, target, imm, rng)
        try:
            compile_kernel(kernel)
        except ModelError as e:  # an immediate that makes this row no movement, or names no element
            assert "no movement" in str(e) or "names no element" in str(e), e
            continue
        _compared(kernel, np.random.default_rng(ran))
        ran += 1
        if ran == 3:
            break
    assert ran, f"{name}: no immediate the model runs"


def _zmm(n: int) -> PhysReg:
    return PhysReg(VECTOR, n, 512)


def _memory_kernel() -> Kernel:
    """Memory read and written in place: an addition reads x[0:64] late (at the end of a chain) and a
    store overwrites it early (from a plain load), so only the order of memory keeps the addition's
    operand; then y[0:64] read before it is written, and a spill and reload through the stack."""
    x, y = (lambda offset, size=64: Mem(ArgBase(0), offset, size)), (lambda offset, size=64: Mem(ArgBase(1), offset, size))
    body = [Instr("load", (_zmm(0), x(128))),
            Instr("vpaddq", (_zmm(1), _zmm(0), _zmm(0))),
            Instr("vpaddq", (_zmm(2), _zmm(1), _zmm(1))),
            Instr("vpaddq", (_zmm(3), _zmm(2), x(0))),
            Instr("load", (_zmm(4), x(256))),
            Instr("store", (x(0), _zmm(4))),
            Instr("load", (_zmm(5), y(0))),
            Instr("vpsubq", (_zmm(5), _zmm(5), _zmm(3))),
            Instr("store", (Mem(StackBase(), 8, 64), _zmm(5))),
            Instr("load", (_zmm(6), x(4, 16))),  # within words: bytes 4..19
            Instr("store", (y(0), _zmm(4))),
            Instr("load", (_zmm(7), Mem(StackBase(), 8, 64))),
            Instr("vpxor", (_zmm(7), _zmm(7), _zmm(6))),
            Instr("store", (y(64), _zmm(7))),
            Instr("store", (y(130, 16), PhysReg(VECTOR, 6, 128))),
            Instr("load", (_zmm(8), x(0))),
            Instr("store", (y(192), _zmm(8)))]
    args = (ArgSpec("x", "inout", "uint64_t", 8, 64, 64), ArgSpec("y", "inout", "uint64_t", 8, 64, 64))
    return Kernel("memory", args, tuple(body), (), TARGETS["avx512"], frozenset())


@pytest.mark.parametrize("aliases", [None, {1: 0}])
def test_memory_read_and_written_in_place_and_aliased_buffers_keep_their_order(aliases):
    kernel, rng = _memory_kernel(), np.random.default_rng(5)
    inputs = {i: rng.integers(0, 1 << 64, (ROWS, 64), dtype=np.uint64, endpoint=False) for i in (0, 1)}
    want = _reference(kernel, inputs, aliases)
    got = compile_kernel(kernel).run(inputs, aliases)
    assert all(np.array_equal(got[i], want[i]) for i in want)


def test_inputs_run_in_many_batches_each_start_afresh(monkeypatch):
    """A state of few inputs, used again batch after batch (the last one smaller): what a batch leaves
    on the stack and in an output it reads before writing is not what the next one reads."""
    kernel = _memory_kernel()
    kernel = Kernel(kernel.symbol, (kernel.args[0], ArgSpec("y", "out", "uint64_t", 8, 64, 64)), kernel.body, (),
                    kernel.target, frozenset())
    inputs = {0: np.random.default_rng(6).integers(0, 1 << 64, (ROWS, 64), dtype=np.uint64, endpoint=False)}
    program = compile_kernel(kernel)
    program.run({0: inputs[0][:1]})
    monkeypatch.setattr(model_waves, "BATCH_BYTES", 3 * model_waves.WORD * next(iter(program.plans.values())).words)
    want, got = _reference(kernel, inputs), program.run(inputs)
    assert all(np.array_equal(got[i], want[i]) for i in want)
