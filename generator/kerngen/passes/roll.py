"""Repeated groups of a long kernel as loops.

A fully unrolled kernel of a few thousand instructions is larger than the
decoded-µop cache, and then runs at the rate the legacy decoders deliver,
far below what its instructions need (measured: docs/performance.md,
"Measurements behind design choices"). Its groups
(load registers, butterflies, store) are the same instructions at addresses
a fixed stride apart, so once verified the stream can be emitted shorter:
`roll` finds runs of segments that are equal but for their addresses, and
emits each run once, as a loop that moves the argument registers and a
pointer per table along by the segment's strides. `check.check_encoding`
runs the result and compares it with the verified stream.

A loop's segment is rolled the same way, so that a block of groups (the
layers 3-5 of he's n = 4096 forward: eight blocks of four groups, the
groups equal but 128 bytes apart, the blocks' twiddles differing) is one
group written once in two loops: fewer instructions written, and faster
as measured. An inner loop must repeat at least three times: inner loops of
two (one group saved each, and an exit branch to predict each pass)
measured slower (docs/performance.md, "Measurements behind design choices").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..ir.instr import Imm, Instr, Mem, PhysReg, Pointer, TableBase, registers_in
from ..machine.abi import Abi
from ..machine.registers import GENERAL

# Kernels of more instructions than this are rolled: larger ones overflow the decoded-µop cache and, rolled,
# measured faster; Kyber's and Dilithium's AVX2 NTTs (480-1800 instructions) fit the µop cache and gain
# nothing from it (docs/performance.md, "Measurements behind design choices").
ROLL_ABOVE = 3000
_MIN_SAVED = 64  # a loop must take out at least this many instructions
_LEAST_INNER = 3  # segments of a loop inside another (see above)


def _shape(ins: Instr) -> tuple:
    """An instruction with its addresses left out: segments of equal shapes may differ in those alone."""
    return (ins.op,) + tuple(dataclasses.replace(op, offset=0) if isinstance(op, Mem) else op for op in ins.operands)


@dataclass(frozen=True)
class Run:
    """`count` segments of `length` instructions from `start`, each equal to the
    first but for addresses `strides[base]` bytes further per segment."""

    start: int
    length: int
    count: int
    strides: tuple[tuple[tuple, int], ...]

    @property
    def end(self) -> int:
        return self.start + self.length * self.count


class _Progressions:
    """For memory operand k of instruction i and a segment length: how many
    segments on its address keeps moving by the same step (the address of
    operand k of instructions i, i + length, i + 2*length, ...). One walk
    along such a chain answers for every instruction on it, so the many
    starts tried along a stretch cost one walk, not one per start."""

    def __init__(self, body: list[Instr]):
        self.body = body
        self.known: dict[tuple[int, int, int], int] = {}

    def __call__(self, i: int, k: int, length: int) -> int:
        if (i, k, length) not in self.known:
            offsets, turned = [], False
            for p in range(i, len(self.body), length):
                ops = self.body[p].operands
                if k >= len(ops) or not isinstance(ops[k], Mem):
                    break
                if len(offsets) >= 2 and ops[k].offset - offsets[-1] != offsets[1] - offsets[0]:
                    turned = True  # the last address on the chain may begin a progression of another step
                    break
                offsets.append(ops[k].offset)
            for j in range(len(offsets) - turned):
                self.known[(i + j * length, k, length)] = len(offsets) - 1 - j
        return self.known[(i, k, length)]


def _strides(body: list[Instr], start: int, length: int, count: int,
             progressions: _Progressions) -> dict[tuple, int] | int:
    """Each base's stride if every segment's addresses are the first's moved by
    a whole number of strides (the stack's must be zero); else the first
    instruction that breaks the pattern."""
    strides: dict[tuple, int] = {}
    for i in range(start, start + length):
        for k, op in enumerate(body[i].operands):
            if not isinstance(op, Mem):
                continue
            key = op.buffer
            step = body[i + length].operands[k].offset - op.offset
            if strides.setdefault(key, step) != step or (key == ("stack",) and step) \
                    or progressions(i, k, length) < count - 1:
                return i
    return strides


def find_runs(body: list[Instr], least: int = 2) -> list[Run]:
    """Non-overlapping runs of `least` segments or more, the ones that take out most instructions first.
    Equal shapes from `a` to `e` (each equal to the one `length` further on)
    hold segments from any start in that stretch; an address breaking the
    pattern moves the start past it, as does a run already taken there, and
    one further on ends it."""
    ids: dict[tuple, int] = {}
    shapes = np.array([ids.setdefault(_shape(ins), len(ids)) for ins in body])
    candidates = []
    for length in range(1, len(body) // 2 + 1):
        # a stretch of `need` equal shapes holds two probes `need` // 2 apart: test those first (exact, and
        # the whole comparison, quadratic in the kernel's length over all lengths, only where it can pay)
        need = max(length, _MIN_SAVED)
        probes = shapes[:-length:need // 2] == shapes[length::need // 2]
        if not (probes[:-1] & probes[1:]).any():
            continue
        matches = shapes[:-length] == shapes[length:]
        if np.count_nonzero(matches) < max(length, _MIN_SAVED):  # no stretch long enough: the common case
            continue
        same = np.concatenate(([0], matches.astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(same)).reshape(-1, 2)
        for a, e in edges[edges[:, 1] - edges[:, 0] >= length]:
            if (e - a) // length * length >= _MIN_SAVED:
                candidates.append(((e - a) // length * length, int(a), int(e), length))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    runs: list[Run] = []
    progressions = _Progressions(body)
    for _, start, stretch_end, length in candidates:
        while True:
            inside = next((r for r in runs if r.start <= start < r.end), None)
            if inside is not None:  # begin after a run already taken
                start = inside.end
                continue
            count = (stretch_end - start) // length + 1
            ahead = [r.start for r in runs if start < r.start < start + length * count]
            if ahead:  # end before the first run further on
                count = min(count, (min(ahead) - start) // length)
            if count < least or (count - 1) * length < _MIN_SAVED:
                break
            strides = _strides(body, start, length, count, progressions)
            if isinstance(strides, dict):
                runs.append(Run(start, length, count, tuple(sorted(strides.items()))))
                break
            start = strides + 1
    return sorted(runs, key=lambda r: r.start)


def roll(body: list[Instr], abi: Abi, nargs: int) -> list[Instr]:
    """Emit every run of a kernel longer than `ROLL_ABOVE` as a loop, while free
    scratch registers last: a counter, and a pointer for each table whose
    addresses move (arguments move in their own registers, restored after the
    loop). A loop's segment is rolled the same way, with the registers left."""
    if len(body) <= ROLL_ABOVE:
        return body
    homes = {abi.arg_home(i) for i in range(nargs)}
    if any(isinstance(op, PhysReg) and op.kind == GENERAL and op.number in homes
           for ins in body for op in ins.written):
        return body
    used = registers_in(body, GENERAL)
    free = [r for r in abi.scratch_gprs(nargs) if r not in used]  # ascending: REX-free first
    return _Loops(abi).rolled(body, free)


class _Loops:
    """Numbers the loops of one kernel, nested ones included, in the order they are emitted."""

    def __init__(self, abi: Abi):
        self.abi, self.count = abi, 0

    def rolled(self, body: list[Instr], free: list[int], depth: int = 0) -> list[Instr]:
        out: list[Instr] = []
        at = 0
        for run in find_runs(body, 2 if depth == 0 else _LEAST_INNER):
            strides = dict(run.strides)
            tables = [key for key, step in strides.items() if key[0] == "table" and step]
            if len(free) < 1 + len(tables):
                continue
            self.count += 1
            loop = self.count
            counter, pointers = PhysReg(GENERAL, free[0], 64), dict(zip(tables, free[1:]))
            segment = body[run.start:run.start + run.length]
            bias = {key: min(op.offset for ins in segment for op in ins.operands
                             if isinstance(op, Mem) and op.buffer == key) for key in tables}
            out += body[at:run.start]
            out += [Instr("lea", (PhysReg(GENERAL, r, 64), Mem(TableBase(key[1]), bias[key], 1)),
                          "the loop's table pointer") for key, r in pointers.items()]
            out.append(Instr("repeat", (counter, Imm(run.count), Imm(loop)), f"{run.count} times"))
            # an inner loop's `lea` of a table this loop moves is re-based on this loop's pointer, as is every access
            for ins in self.rolled(segment, free[1 + len(tables):], depth + 1):
                ops = tuple(dataclasses.replace(op, pointer=Pointer(pointers[op.buffer], bias[op.buffer]))
                            if isinstance(op, Mem) and op.buffer in pointers and op.pointer is None else op
                            for op in ins.operands)
                out.append(Instr(ins.op, ops, ins.comment, ins.idiom))
            moved = [(PhysReg(GENERAL, self.abi.arg_home(key[1]), 64), step) for key, step in strides.items()
                     if key[0] == "arg" and step]
            for reg, step in moved:  # an inner loop's last `add` takes the argument back: one `add` does both
                if out[-1].op == "add" and out[-1].operands[0] == reg:
                    step += out.pop().operands[1].value
                if step:
                    out.append(Instr("add", (reg, Imm(step))))
            out += [Instr("add", (PhysReg(GENERAL, r, 64), Imm(strides[key]))) for key, r in pointers.items()]
            out.append(Instr("repeat_end", (counter, Imm(loop))))
            out += [Instr("add", (reg, Imm(-step * run.count)), "back to the argument") for reg, step in moved]
            at = run.end
        return out + body[at:]
