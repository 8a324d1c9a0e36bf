"""Structural checks of an instruction list, before and after allocation.

Before: every operand fits its slot in the instruction table and names an
argument that exists. After: registers are physical, and every memory
operand lies inside its buffer (an argument, a constant table or the stack
area) and writes only to buffers that are outputs. Addresses in the
kernels are static, so this is a complete check of memory safety.
"""

from __future__ import annotations

from ..errors import CheckError
from ..ir.instr import (ArgBase, ArgSpec, GReg, Imm, Instr, KReg, Mem, PhysReg, StackBase, Table, TableBase,
                        VReg)
from ..machine.ops import spec
from ..ir.stream import run_stream
from ..machine.abi import Abi
from ..machine.registers import GENERAL, MASK, VECTOR


# what each slot kind of the table accepts, by the operand's own kind (`_operand_kind`)
_ACCEPTS = {"v": {"v"}, "vm": {"v", "m"}, "m": {"m"}, "i": {"i"}, "g": {"g"}, "gm": {"g", "m"}, "k": {"k"}}
_VIRTUAL = {VReg: "v", GReg: "g", KReg: "k"}
_PHYSICAL = {VECTOR: "v", GENERAL: "g", MASK: "k"}


def _operand_kind(op) -> str | None:
    """"v", "g" or "k" for a register of that family (virtual or physical), "m" memory, "i" an immediate."""
    if isinstance(op, PhysReg):
        return _PHYSICAL.get(op.kind)
    if isinstance(op, Mem):
        return "m"
    if isinstance(op, Imm):
        return "i"
    return next((kind for cls, kind in _VIRTUAL.items() if isinstance(op, cls)), None)


def check_operands(body: tuple[Instr, ...] | list[Instr], nargs: int, allocated: bool) -> None:
    """Every operand fits its slot kind; virtual registers only before allocation."""
    for i, ins in enumerate(body):
        for slot, op in zip(spec(ins.op).slots, ins.operands):
            kind = _operand_kind(op)
            if kind not in _ACCEPTS[slot.kind]:
                raise CheckError(f"{_where(i, ins)}: operand {op!r} does not fit slot kind {slot.kind!r}")
            if kind == "m":
                if isinstance(op.base, ArgBase) and op.base.index >= nargs:
                    raise CheckError(f"{_where(i, ins)}: argument {op.base.index} does not exist")
            elif kind != "i" and isinstance(op, PhysReg) != allocated:
                state = "virtual register after" if allocated else "physical register before"
                raise CheckError(f"{_where(i, ins)}: {state} allocation")


def _where(i: int, ins: Instr) -> str:
    return f"instruction {i} ({ins.op} {ins.comment})"


def check_encoding(encoded: list[Instr], verified: tuple[Instr, ...], abi: Abi, nargs: int) -> None:
    """The encoded body runs exactly the verified stream: rolling
    (`passes.roll`) and addressing through registers (`passes.encoding`)
    change how the kernel is written, never what it runs."""
    ran = run_stream(encoded, abi, nargs)
    bad = next((i for i, (a, b) in enumerate(zip(ran, verified)) if (a.op, a.operands) != (b.op, b.operands)), None)
    if bad is not None:
        raise CheckError(f"the encoded body's instruction {bad} as it runs differs from verified instruction {bad}")
    if len(ran) != len(verified):
        raise CheckError(f"the encoded body runs {len(ran)} instructions, the verified stream has {len(verified)}")


def check_memory(body: tuple[Instr, ...], args: tuple[ArgSpec, ...], tables: tuple[Table, ...],
                 spill_slots: int, slot_bytes: int) -> None:
    """Every access inside its buffer; stores only into out/inout arguments and the stack, where each
    access starts a slot of `slot_bytes` and stays inside it, whatever register it moves."""
    sizes = {t.label: t.elem_bytes * len(t.values) for t in tables}
    for i, ins in enumerate(body):
        s = spec(ins.op)
        for k, op in enumerate(ins.operands):
            if not isinstance(op, Mem):
                continue
            writes = k in s.written
            if isinstance(op.base, ArgBase):
                a = args[op.base.index]
                limit, name = a.count * a.elem_bytes, f"argument {a.name}"
                if writes and a.role == "in":
                    raise CheckError(f"{_where(i, ins)}: writes input-only {name}")
            elif isinstance(op.base, TableBase):
                limit, name = sizes[op.base.label], f"table {op.base.label}"
                if writes:
                    raise CheckError(f"{_where(i, ins)}: writes constant {name}")
            elif isinstance(op.base, StackBase):
                limit, name = slot_bytes * spill_slots, "the spill area"
                moved = max((r.bits // 8 for r in ins.operands if isinstance(r, PhysReg) and r.kind == VECTOR),
                            default=0)
                if op.offset % slot_bytes or op.size > slot_bytes or moved > slot_bytes:
                    raise CheckError(f"{_where(i, ins)}: moves {moved} bytes through bytes {op.offset}.."
                                     f"{op.offset + op.size - 1} of the spill area, whose slots are {slot_bytes}")
            else:  # pragma: no cover - the IR has no other bases
                raise TypeError(op.base)
            if op.offset < 0 or op.offset + op.size > limit:
                raise CheckError(f"{_where(i, ins)}: bytes {op.offset}..{op.offset + op.size - 1} are outside "
                                      f"{name} ({limit} bytes)")
