"""The instruction table checked against this CPU: every form of every row
with lane semantics, run on random and edge inputs and compared with the
semantics the verifier reads.

One NASM function per (row, form, register width, immediate) loads its
sources from a buffer, runs the one instruction and stores its destination;
all of them go into one file, assembled and linked by the harness toolchain
and called through ctypes. The expected results come from the table alone:
`Arith.exact` for element-wise rows (on numpy arrays of Python integers, so
lanes wrap as the verifier's do), `ir.lanes.move_lanes` applied to the
row's `Move` for movement rows, the widening rows' products on the
halves of their units from the rows doing those operations, and `Blocks`
block by block (carry-less products, byte look-ups and affine maps, the
model's semantics of them, as it runs kernels). Rows with none
of these (the verifier follows them only inside a tagged idiom, or not at
all) are listed as not modelled; forms needing an extension this CPU lacks
are skipped, by name.
"""

from __future__ import annotations

import ctypes
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..ir.lanes import SPLIT, move_lanes
from ..machine.encoding import EVEX, LEGACY, Form
from ..machine.isa import cpuinfo_name
from ..machine.ops import TABLE, Arith, InstructionTable, Op, lane_range, unsigned
from ..errors import HarnessError
from .toolchain import assemble_shared

SLOT_BYTES = 64  # one input slot: the widest register
VECTORS = 48  # input vectors per function: the edge rows, then random ones
RANDOM_IMMEDIATES = 4  # immediates drawn per form beside the edges and the shipped kernels' ones
_VECTOR_KINDS = ("v", "vm")
_RUNNABLE_KINDS = ("v", "vm", "i", "k", "g", "gm")
_GPRS = ("r8", "r9", "r10", "r11")  # caller-saved, and none of them rdx (mulx's implicit source)
_SIZE = {128: "xmm", 256: "ymm", 512: "zmm"}


@dataclass(frozen=True)
class Case:
    """One form at one register width with one immediate (None: the row has none)."""

    op: Op
    form: Form
    bits: int
    imm: int | None
    widths: tuple[int, ...]  # each slot's register width (`operand_widths`)


@dataclass(frozen=True)
class Report:
    """The forms by outcome, each named by row, mnemonic, encoding and width (a failure with its
    witnesses, a skipped form with the extensions this CPU lacks, a form not modelled with why)."""

    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one line per failing form, its witness after it
    skipped: list[str] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=list)
    per_encoding: dict[str, list[int]] = field(default_factory=dict)  # encoding -> [passed, failed, skipped]

    def count(self, form: Form, status: int) -> None:
        self.per_encoding.setdefault(form.encoding.name, [0, 0, 0])[status] += 1

    def summary(self) -> str:
        return f"{len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"


def _form_label(op: Op, form: Form, bits: int) -> str:
    return f"{op.name} ({form.mnemonic}, {form.encoding.name}, {bits} bits)"


def why_not_modelled(op: Op) -> str | None:
    """Why the selfcheck cannot compare `op` with the table (None: it can)."""
    if op.arith is None and op.move is None and op.widen is None and op.blocks is None:
        return "no lane semantics in the table"
    if any(s.kind not in _RUNNABLE_KINDS for s in op.slots):
        return "a memory-only operand"
    return None


def shipped_immediates(kernels: Path | None) -> dict[str, set[int]]:
    """The immediates each mnemonic has in the assembly under `kernels` (the shipped bundles)."""
    found: dict[str, set[int]] = {}
    if kernels is None:
        return found
    pattern = re.compile(r"^[ \t]+([a-z0-9]+)[ \t]+[^;\n]*,[ \t]*(0x[0-9a-f]+|\d+)[ \t]*(?:;|$)", re.M)
    for path in sorted(Path(kernels).rglob("*.asm")):
        for mnemonic, value in pattern.findall(path.read_text()):
            found.setdefault(mnemonic, set()).add(int(value, 0))
    return found


def _immediates(op: Op, form: Form, shipped: dict[str, set[int]], rng: random.Random) -> list[int | None]:
    if not any(s.kind == "i" for s in op.slots):
        return [None]
    width = op.elem or 64
    edges = {0, 1, 255} | ({width - 1, width, width + 1} if op.arith is not None else set())
    drawn = {rng.randrange(256) for _ in range(RANDOM_IMMEDIATES)}
    return sorted(edges | drawn | shipped.get(form.mnemonic, set()))


def forms(table: InstructionTable) -> Iterable[tuple[Op, Form, int]]:
    """Every (row, form, width) of the table a kernel can contain."""
    for op in table.ops.values():
        for form in op.forms:
            for bits in form.widths:
                yield op, form, bits


def operand_widths(op: Op, bits: int, imms: list[int | None]) -> tuple[int, ...]:
    """Each slot's register width in the form of `bits` bits: where a movement's route writes (or
    reads) the same low part of an operand whatever the immediate, the operand is as wide as that
    part, at least 128 bits (vextracti128 writes an xmm register, vinserti128 reads one); any other
    slot is `bits` wide."""
    widths = [bits] * len(op.slots)
    if op.move is None:
        return tuple(widths)
    slots = [i for i in op.read if op.slots[i].kind in _VECTOR_KINDS]
    reaches: dict[int, set[int]] = {i: set() for i in [0, *slots]}  # bytes of each operand a route touches
    for imm in imms:
        reach = {i: 0 for i in reaches}
        labels = [[(n, b) for b in range(bits // 8)] for n in range(len(slots))]
        try:
            moved = move_lanes(op, labels, imm, 8, bits // 8, None)
        except IndexError:  # reported when the case runs
            continue
        for k, m in enumerate(moved or ()):
            if m is not None and m is not SPLIT:
                reach[0] = max(reach[0], k + 1)
                reach[slots[m[0]]] = max(reach[slots[m[0]]], m[1] + 1)
        if moved is not None:
            for i, used in reach.items():
                reaches[i].add(used)
    for i, found in reaches.items():
        used = found.pop() if len(found) == 1 else 0
        if used and op.slots[i].kind in _VECTOR_KINDS:
            widths[i] = min(bits, max(128, 1 << (8 * used - 1).bit_length()))
    return tuple(widths)


def _register(kind: str, number: int, bits: int) -> str:
    if kind in ("g", "gm"):
        return _GPRS[number]
    if kind == "k":
        return f"k{number + 1}"
    return f"{_SIZE[bits]}{number}"


def _vector_move(form: Form) -> str:
    if form.encoding == EVEX:
        return "vmovdqu64"
    return "movdqu" if form.encoding == LEGACY else "vmovdqu"


def _mask_move(lanes: int) -> str:
    return "kmovw" if lanes <= 16 else "kmovq"  # kmovw needs AVX512F alone; wider masks need AVX512BW


def _lanes(case: Case) -> int:
    return case.bits // (case.op.elem or 64)


def function_text(case: Case, symbol: str) -> str:
    """A function (in: rdi, out: rsi, count: rdx) running the case's instruction on `count` inputs."""
    op, form, bits = case.op, case.form, case.bits
    base = 16 if form.encoding == EVEX else 0  # registers only EVEX names: its encoding whatever NASM prefers
    texts, loads = [], []
    for i, slot in enumerate(op.slots):
        width = case.widths[i]
        if slot.kind == "i":
            texts.append(str(case.imm))
            continue
        reg = _register(slot.kind, i + (0 if slot.kind in ("g", "gm", "k") else base), width)
        texts.append(reg)
        if "r" not in slot.access:
            continue
        src = f"[rdi + {SLOT_BYTES * i}]"
        if slot.kind in ("g", "gm"):
            loads.append(f"mov {reg}, qword {src}")
        elif slot.kind == "k":
            loads.append(f"{_mask_move(_lanes(case))} {reg}, {'word' if _lanes(case) <= 16 else 'qword'} {src}")
        else:
            loads.append(f"{_vector_move(form)} {reg}, {src}")
    dest_kind, dest = op.slots[0].kind, texts[0]
    if op.ties(form):  # a two-operand form: the destination starts as the first source
        loads.append(f"{'mov' if dest_kind == 'g' else _vector_move(form).replace('dqu', 'dqa')} "
                     f"{dest}, {texts[1]}")
    if op.lines is not None:
        body = [line.format(*texts) for line in op.lines]
    else:
        spelt = op.spelt(texts)
        if op.ties(form):
            del spelt[1]
        if op.selector_first:
            spelt.append(spelt[1])
        body = [f"{form.mnemonic} " + ", ".join(spelt)]
    if dest_kind in ("g", "gm"):
        store = f"mov [rsi], {dest}"
    elif dest_kind == "k":
        store = f"{_mask_move(_lanes(case))} [rsi], {dest}"
    else:
        store = f"{_vector_move(form)} [rsi], {_register(dest_kind, base, bits)}"
    stride = SLOT_BYTES * len(op.slots)
    # the count leaves rdx, which a general-register row may read implicitly (mulx)
    lines = [f"global {symbol}:function", f"{symbol}:", "mov rax, rdx", ".top:", *loads, *body, store,
             f"add rdi, {stride}", f"add rsi, {SLOT_BYTES}", "dec rax", "jnz .top"]
    if form.encoding != LEGACY:
        lines.append("vzeroupper")
    return "\n    ".join(lines) + "\n    ret\n"


def _edges(bits: int) -> list[int]:
    """Signed and unsigned extremes of a `bits`-bit lane and their neighbours, as signed values."""
    lo, hi = lane_range(bits)
    return [0, 1, 2, -1, -2, lo, lo + 1, hi, hi - 1, 1 << (bits // 2), -(1 << (bits // 2))]


def inputs(op: Op, rng: np.random.Generator) -> np.ndarray:
    """VECTORS rows of slot buffers: random bytes, the first rows edge values in every lane (each
    pair of edges meeting in some lane of two sources), a mask slot all zeros, all ones or mixed."""
    buf = rng.integers(0, 256, size=(VECTORS, len(op.slots), SLOT_BYTES), dtype=np.uint8)
    width = min(op.elem or 64, 64)  # units of 128 bits (whole halves moved) get 64-bit edges
    edges = _edges(width)
    lanes = SLOT_BYTES * 8 // width
    view = buf.view(f"<i{width // 8}")
    for r in range(len(edges)):
        for s, slot in enumerate(op.slots):
            if slot.kind == "k":
                view[r, s, :] = (0, -1, view[r, s, 0])[r % 3]
            else:
                view[r, s, :] = [edges[(k + r * (s + 1)) % len(edges)] for k in range(lanes)]
    return buf


def _lane_values(buf: np.ndarray, slot: int, width: int, count: int) -> np.ndarray:
    """A slot's first `count` lanes of `width` bits, as signed Python integers (wrapping exactly)."""
    return buf[:, slot, :].copy().view(f"<i{width // 8}")[:, :count].astype(object)


def _lane_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """Lanes (Python integers, any sign) back to their little-endian bytes."""
    low = np.vectorize(lambda v: int(unsigned(v, width)), otypes=[object])(values)
    return low.astype(np.uint64).astype(f"<u{width // 8}").view(np.uint8).reshape(values.shape[0], -1)


def _mask_bits(buf: np.ndarray, slot: int, lanes: int) -> np.ndarray:
    word = buf[:, slot, :8].copy().view("<u8")[:, 0]
    return np.array([[int(w) >> k & 1 for k in range(lanes)] for w in word], dtype=object)


def _out_bytes(case: Case) -> int:
    kind = case.op.slots[0].kind
    if kind == "k":
        return 2 if _lanes(case) <= 16 else 8
    return 8 if kind in ("g", "gm") else case.bits // 8


def _operand_bytes(case: Case, slot: int) -> int:
    kind = case.op.slots[slot].kind
    if kind in ("g", "gm"):
        return 8
    return case.widths[slot] // 8


def _arith_model(case: Case, arith: Arith, buf: np.ndarray) -> np.ndarray:
    op, width = case.op, case.op.elem or 64
    lanes = _out_bytes(case) * 8 // width if op.slots[0].kind not in ("k",) else _lanes(case)
    sources = []
    for i in op.read:
        kind = op.slots[i].kind
        if kind == "i":
            sources.append(case.imm)
        elif kind == "k":
            sources.append(_mask_bits(buf, i, lanes))
        else:
            sources.append(_lane_values(buf, i, width, lanes))
    result = np.broadcast_to(np.asarray(arith.exact(tuple(sources), width), dtype=object), (len(buf), lanes))
    if op.slots[0].kind == "k":  # one bit a lane, packed into the mask register's bytes
        words = np.array([sum(int(b) << k for k, b in enumerate(row)) for row in result], dtype=object)
        return _lane_bytes(words[:, None], _out_bytes(case) * 8)
    return _lane_bytes(result, width)


def _move_model(case: Case, buf: np.ndarray) -> np.ndarray | None:
    """The destination's bytes as the row's route moves them; None where the table says this
    immediate or width is no movement of the instruction."""
    op = case.op
    slots = [i for i in op.read if op.slots[i].kind != "i"]
    labels = [[(n, b) for b in range(_operand_bytes(case, i))] for n, i in enumerate(slots)]
    if op.move.indices is not None:  # the route takes the index register's contents: row by row
        index = slots[op.move.indices]
        rows = [(r, int.from_bytes(bytes(buf[r, index, :_operand_bytes(case, index)]), "little"))
                for r in range(len(buf))]
    elif op.masking is None:
        rows = [(slice(None), case.imm)]
    else:  # the route takes the mask's bits in place of an immediate: row by row
        mask = next(i for i in op.read if op.slots[i].kind == "k")
        words = buf[:, mask, :8].copy().view("<u8")[:, 0]
        rows = [(r, int(words[r]) & ((1 << _lanes(case)) - 1)) for r in range(len(buf))]
    out = np.zeros((len(buf), _out_bytes(case)), dtype=np.uint8)
    for r, imm in rows:
        moved = move_lanes(op, labels, imm, 8, _out_bytes(case), None)
        if moved is None or any(m is SPLIT for m in moved):
            return None
        for k, m in enumerate(moved):
            if m is not None:
                out[r, k] = buf[r, slots[m[0]], m[1]]
    return out


def _widen_model(case: Case, table: InstructionTable, buf: np.ndarray) -> np.ndarray:
    """A widening product on lanes of half the unit: the even lane the low product, the odd one the
    row's `widen` operation, both as the rows doing those operations compute them."""
    op, half = case.op, case.op.elem // 2
    doing = {o.generic: o.arith for o in table.ops.values() if o.arith is not None and o.generic}
    lanes = case.bits // half
    a, b = (_lane_values(buf, i, half, lanes)[:, 0::2] for i in op.read)
    result = np.empty((len(buf), lanes), dtype=object)
    result[:, 0::2] = doing["mullo"].exact((a, b), half)
    result[:, 1::2] = doing[op.widen].exact((a, b), half)
    return _lane_bytes(result, half)


def models(case: Case, table: InstructionTable, buf: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(which semantics, the destination's expected bytes) for each semantics the row has."""
    op, out = case.op, []
    if op.arith is not None:
        out.append(("arith", _arith_model(case, op.arith, buf)))
    if op.move is not None:
        moved = _move_model(case, buf)
        if moved is not None:
            out.append(("move", moved))
    if op.widen is not None:
        out.append(("widen", _widen_model(case, table, buf)))
    if op.blocks is not None:
        sources = [buf[:, i, :case.bits // 8] for i in op.read if op.slots[i].kind != "i"]
        out.append(("blocks", op.blocks.on_bytes(sources, case.imm, case.bits // 8)))
    return out


def _at(case: Case) -> str:
    return "\n  " + (f"imm={case.imm}: " if case.imm is not None else "")


def _hex(row: np.ndarray) -> str:
    return bytes(row)[::-1].hex()  # most significant byte first, as lanes read


def _witness(case: Case, buf: np.ndarray, got: np.ndarray, want: np.ndarray, which: str) -> str:
    r = int(np.nonzero((got != want).any(axis=1))[0][0])
    ins = ", ".join(f"slot {i} = 0x{_hex(buf[r, i, :_operand_bytes(case, i)])}" for i in case.op.read
                    if case.op.slots[i].kind != "i")
    return f"{which} semantics: inputs {ins}; CPU 0x{_hex(got[r])}, model 0x{_hex(want[r])}"


def _symbol(case: Case) -> str:
    imm = "" if case.imm is None else f"_{case.imm}"
    return f"kg_sc_{case.op.name}_{case.form.encoding.name}_{case.bits}{imm}"


def _library(workdir: Path, every: list[Case]) -> tuple[ctypes.CDLL, dict[Case, str]]:
    """The cases' functions assembled into one shared object, and the cases NASM rejects (with its
    message): those are left out and the rest assembled again."""
    rejected: dict[Case, str] = {}
    while True:
        texts = [function_text(c, _symbol(c)) for c in every if c not in rejected]
        kept = [c for c in every if c not in rejected]
        asm = workdir / "kg_selfcheck.asm"
        asm.write_text(_PROLOGUE + "".join(texts))
        try:
            return ctypes.CDLL(str(assemble_shared(asm, workdir))), rejected
        except HarnessError as exc:
            errors = [(int(line), message) for line, message in _NASM_ERROR.findall(str(exc))]
            if not errors:
                raise
            starts = np.cumsum([_PROLOGUE.count("\n")] + [t.count("\n") for t in texts])
            for line, message in errors:
                rejected.setdefault(kept[int(np.searchsorted(starts, line, side="left")) - 1], message)


_PROLOGUE = "default rel\nsection .text\n"
_NASM_ERROR = re.compile(r"\.asm:(\d+): error: (.*)")


def selfcheck(workdir: Path, cpu: set[str], table: InstructionTable = TABLE, kernels: Path | None = None,
              seed: int = 1) -> Report:
    """Runs every runnable form of `table` on this CPU (its /proc/cpuinfo flags `cpu`) and compares
    it with the table's semantics; `kernels`: a directory of shipped bundles whose immediates join
    the edge and random ones."""
    report, shipped, rng = Report(), shipped_immediates(kernels), random.Random(seed)
    runnable: list[tuple[tuple[Op, Form, int], list[Case]]] = []
    for op, form, bits in forms(table):
        label = _form_label(op, form, bits)
        why = why_not_modelled(op)
        if why is not None:
            report.not_modelled.append(f"{label}: {why}")
        elif not all(cpuinfo_name(e) in cpu for e in form.extensions):
            missing = sorted(e for e in form.extensions if cpuinfo_name(e) not in cpu)
            report.skipped.append(f"{label}: this CPU lacks {', '.join(missing)}")
            report.count(form, 2)
        else:
            imms = _immediates(op, form, shipped, rng)
            widths = operand_widths(op, bits, imms)
            runnable.append(((op, form, bits), [Case(op, form, bits, imm, widths) for imm in imms]))
    lib, rejected = _library(Path(workdir), [case for _, group in runnable for case in group])
    data = np.random.default_rng(seed)
    for (op, form, bits), group in runnable:
        label, failures, checked = _form_label(op, form, bits), [], 0
        for case in group:
            if case in rejected:
                failures.append(f"{_at(case)}does not assemble as the table spells it: {rejected[case]}")
                continue
            buf = inputs(op, data)
            got = np.zeros((VECTORS, SLOT_BYTES), dtype=np.uint8)
            getattr(lib, _symbol(case))(buf.ctypes.data_as(ctypes.c_void_p), got.ctypes.data_as(ctypes.c_void_p),
                                       ctypes.c_uint64(VECTORS))
            got = got[:, :_out_bytes(case)]
            try:
                expected = models(case, table, buf)
            except IndexError:  # a route naming a unit its sources do not have
                failures.append(f"{_at(case)}the table's route reaches outside the sources")
                continue
            for which, want in expected:
                checked += 1
                if not np.array_equal(got, want) and len(failures) < 3:
                    failures.append(_at(case) + _witness(case, buf, got, want, which))
        if failures:
            report.failed.append(label + "".join(failures[:3]))
            report.count(form, 1)
        elif checked:
            report.passed.append(label)
            report.count(form, 0)
        else:
            report.not_modelled.append(f"{label}: no immediate tried is a movement in the table")
    return report
