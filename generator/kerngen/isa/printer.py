"""NASM syntax for allocated instructions. The only place that spells assembly."""

from __future__ import annotations

from .abi import GPR_NAMES, Abi
from .ir import ArgBase, Imm, Instr, Mem, PhysReg, StackBase, TableBase
from .ops import spec

_SIZE_WORDS = {1: "byte", 2: "word", 4: "dword", 8: "qword", 16: "oword", 32: "yword"}


def operand_text(op, abi: Abi, explicit_size: bool) -> str:
    if isinstance(op, PhysReg):
        if op.kind == "vec":
            return ("ymm" if op.bits == 256 else "xmm") + str(op.number)
        return GPR_NAMES[op.number]
    if isinstance(op, Imm):
        return str(op.value) if op.value < 256 else hex(op.value)
    if isinstance(op, Mem):
        if isinstance(op.base, ArgBase):
            inner = abi.arg_register(op.base.index)
        elif isinstance(op.base, TableBase):
            inner = "rel " + op.base.label
        elif isinstance(op.base, StackBase):
            inner = "rsp"
        else:  # pragma: no cover - the IR has no other bases
            raise TypeError(op.base)
        text = f"[{inner} + {op.offset}]" if op.offset else f"[{inner}]"
        return f"{_SIZE_WORDS[op.size]} {text}" if explicit_size else text
    raise TypeError(f"unallocated operand {op!r} reached the printer")


def instr_text(ins: Instr, abi: Abi) -> str:
    s = spec(ins.op)
    # sub-vector memory operands need a size keyword (broadcasts, 64-bit moves)
    sized = [isinstance(o, Mem) and o.size < 16 for o in ins.operands]
    parts = [operand_text(o, abi, sized[i]) for i, o in enumerate(ins.operands)]
    line = f"{s.mnemonic:<12} " + ", ".join(parts)
    if ins.comment:
        line = f"{line:<48} ; {ins.comment}"
    return line


def body_text(body: tuple[Instr, ...], abi: Abi) -> list[str]:
    return [instr_text(ins, abi) for ins in body]
