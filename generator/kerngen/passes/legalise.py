"""Legalisation: the IR made encodable on the target's ISA.

Builders write every instruction in its three-operand VEX form, on vectors
up to 256 bits. For a VEX target that is already legal. For a legacy (SSE)
target, three steps:

1. Split: a 256-bit value becomes a pair of 128-bit ones, and every
   instruction on it that works on each 128-bit half alone (the table's
   `halves`) becomes two; a permutation of whole halves (`vperm2i128`,
   inserting or extracting a half) becomes a renaming, no instruction at all.
   The kernels and their layouts stay the same, so an SSE kernel computes
   exactly what its AVX2 twin does, in the same order.
2. Rewrite instructions without a legacy form into ones that have one:
   `vpblendd` into `pblendw`, a 64-bit broadcast from memory into a load and
   a `pshufd`, a 16-bit one into an insert into a zero register.
3. Tie: a legacy form that ties the destination to its first source becomes
   `op d, d, b` (printed `op d, b`): if the first source dies here, the
   destination takes its register (the result is renamed to it): no copy;
   else, if the operation commutes and the second source dies, the sources
   swap; else a copy of the first source comes first.
"""

from __future__ import annotations

from ..core.errors import CheckError
from ..ir.instr import VECTOR_BITS, Builder, IdiomTag, Imm, Instr, Mem, Operand, TableBase, VReg
from ..ir.ops import by_width, spec
from ..target.target import Target

WIDE, HALF = VECTOR_BITS, VECTOR_BITS // 2


def legalise(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    """`builder` supplies fresh registers, groups and constant tables."""
    if target.isa.vex:
        return list(body)
    expanded: list[Instr] = []
    for ins in _split(body, builder):
        expanded += _rewrite(ins, builder)
    return _tie(expanded)


def _split(body: list[Instr], b: Builder) -> list[Instr]:
    halves: dict[VReg, tuple[VReg, VReg]] = {}
    groups: dict[tuple[int, int], int] = {}

    def half(op, h: int):
        if isinstance(op, VReg) and op.bits == WIDE:
            if op not in halves:
                halves[op] = (b.vreg(HALF), b.vreg(HALF))
            return halves[op][h]
        if isinstance(op, Mem) and op.size == WIDE // 8:
            return Mem(op.base, op.offset + HALF // 8 * h, HALF // 8)
        return op

    out: list[Instr] = []
    for ins in body:
        if not any(isinstance(op, VReg) and op.bits == WIDE for op in ins.operands):
            out.append(ins)
            continue
        s = spec(ins.op)
        ops = ins.operands
        if ins.op == "vperm2i128":  # each result half is a source half: a renaming
            picked = []
            for h in (0, 1):
                sel = ops[3].value >> (4 * h) & 0xF
                if sel & 8:
                    raise CheckError(f"{ins.op} zeroing a half has no rewrite into 128-bit halves")
                picked.append(half(ops[1 + (sel >> 1 & 1)], sel & 1))
            halves[ops[0]] = (picked[0], picked[1])
            continue
        if not s.halves:
            raise CheckError(f"{ins.op} on 256-bit registers moves data between halves and cannot be split")
        if s.cls == "load" and _same_halves(ops[1], b):  # a broadcast constant: one register serves both halves
            one = b.vreg(HALF)
            halves[ops[0]] = (one, one)
            out.append(Instr(ins.op, (one, half(ops[1], 0)), ins.comment, ins.idiom))
            continue
        for h in (0, 1):
            operands = tuple(half(op, h) for op in ops)
            if ins.op == by_width("blend", 32):  # one selector bit per dword of the whole register
                operands = operands[:3] + (Imm(ops[3].value >> (4 * h) & 0xF),)
            tag = ins.idiom
            if tag is not None:  # each half is its own idiom
                key = (tag.group, h)
                if key not in groups:
                    groups[key] = b.new_group()
                tag = IdiomTag(groups[key], tag.kind, tag.role, tag.source)
            out.append(Instr(ins.op, operands, ins.comment if h == 0 else "", tag))
    return out


def _same_halves(op, b: Builder) -> bool:
    """Whether a 256-bit memory operand is a constant whose two halves are equal."""
    if not isinstance(op, Mem) or not isinstance(op.base, TableBase) or op.size != WIDE // 8:
        return False
    t = b.tables[op.base.label]
    first, half_elems = op.offset // t.elem_bytes, HALF // 8 // t.elem_bytes
    return t.values[first:first + half_elems] == t.values[first + half_elems:first + 2 * half_elems]


def _rewrite(ins: Instr, b: Builder) -> list[Instr]:
    s = spec(ins.op)
    if s.legacy is not None:
        return [ins]
    if ins.op == by_width("blend", 32):  # each dword selector bit becomes two word selector bits
        imm = ins.operands[3].value
        words = sum(3 << (2 * k) for k in range(4) if imm >> k & 1)
        return [Instr(by_width("blend", 16), ins.operands[:3] + (Imm(words),), ins.comment, ins.idiom)]
    if ins.op == by_width("broadcast", 64) and isinstance(ins.operands[1], Mem):  # load, then copy to both halves
        low = b.vreg(HALF)
        return [Instr("load64", (low, ins.operands[1]), ins.comment),
                Instr("vpshufd", (ins.operands[0], low, Imm(0x44)))]
    if ins.op == by_width("broadcast", 16) and isinstance(ins.operands[1], Mem) and ins.operands[1].size == 2:
        # a one-element vector: its element into a zero register (no byte beyond it is read)
        zero = b.vreg(HALF)
        table = b.table("pw_0", 2, [0] * 16)
        return [Instr("load", (zero, Mem(table, 0, HALF // 8)), ins.comment),
                Instr("pinsrw", (ins.operands[0], zero, ins.operands[1], Imm(0)))]
    raise CheckError(f"{ins.op} has no legacy encoding and no legacy rewrite")


def _tie(body: list[Instr]) -> list[Instr]:
    last: dict[Operand, int] = {}
    for i, ins in enumerate(body):
        for op in ins.read:
            if isinstance(op, VReg):
                last[op] = i
    rename: dict[Operand, Operand] = {}
    out: list[Instr] = []
    for i, ins in enumerate(body):
        ops = tuple(rename.get(op, op) for op in ins.operands)
        s = spec(ins.op)
        if not s.tied or ops[0] == ops[1]:
            out.append(Instr(ins.op, ops, ins.comment, ins.idiom))
            continue
        dst, a, b = ops[0], ops[1], ops[2]

        def dies(v) -> bool:
            return isinstance(v, VReg) and last.get(v, -1) <= i

        if dies(a) or (s.commutative and dies(b) and b != a):
            tag = ins.idiom
            if not dies(a):
                a, b = b, a
                if tag is not None and tag.role == "start":  # the idiom's input moved to the other slot
                    tag = IdiomTag(tag.group, tag.kind, tag.role, 3 - tag.source)
            rename[dst] = a
            last[a] = last.get(dst, i)
            out.append(Instr(ins.op, (a, a, b) + ops[3:], ins.comment, tag))
            continue
        copy_tag = op_tag = ins.idiom
        if ins.idiom is not None and ins.idiom.role == "start":  # the copy now reads the idiom's input
            op_tag = IdiomTag(ins.idiom.group, ins.idiom.kind, "body")
            copy_tag = IdiomTag(ins.idiom.group, ins.idiom.kind, "start", 1)
        elif ins.idiom is not None:
            copy_tag = IdiomTag(ins.idiom.group, ins.idiom.kind, "body")
        out.append(Instr("copy", (dst, a), ins.comment, copy_tag))
        out.append(Instr(ins.op, (dst, dst, b) + ops[3:], "", op_tag))
    return out
