"""Legalisation: the three-operand IR made encodable on the target's ISA.

Builders write every instruction in its three-operand VEX form. For a VEX
target that is already legal. For a legacy (SSE) target, an instruction
whose legacy form ties the destination to the first source becomes
`op d, d, b` (printed `op d, b`):

- if the first source dies here, the destination takes its register (the
  result is renamed to it from here on): no copy;
- else, if the operation commutes and the second source is a register that
  dies here, the sources swap and the same happens with the second;
- else a copy of the first source into the destination comes first.

Instructions without a legacy form are rewritten into ones that have one
(`vpblendd` into `pblendw`, a 64-bit broadcast from memory into a load and
a `pshufd`); any other is refused, as is a 256-bit register.
"""

from __future__ import annotations

from ..core.errors import CheckError
from ..ir.instr import IdiomTag, Imm, Instr, Mem, Operand, VReg
from ..ir.ops import by_width, spec
from ..target.target import Target


def legalise(body: list[Instr], target: Target, fresh) -> list[Instr]:
    """`fresh(bits)` returns a new virtual vector register (the builder's)."""
    if target.isa.vex:
        return list(body)
    expanded: list[Instr] = []
    for ins in body:
        expanded += _expand(ins, fresh)
    return _tie(expanded)


def _expand(ins: Instr, fresh) -> list[Instr]:
    s = spec(ins.op)
    for op in ins.operands:
        if isinstance(op, VReg) and op.bits > 128:
            raise CheckError(f"{ins.op}: a {op.bits}-bit register has no legacy encoding")
    if s.legacy is not None:
        return [ins]
    if ins.op == by_width("blend", 32):  # each dword selector bit becomes two word selector bits
        imm = ins.operands[3].value
        words = sum(3 << (2 * k) for k in range(4) if imm >> k & 1)
        return [Instr(by_width("blend", 16), ins.operands[:3] + (Imm(words),), ins.comment, ins.idiom)]
    if ins.op == by_width("broadcast", 64) and isinstance(ins.operands[1], Mem):  # load, then copy to both halves
        low = fresh(128)
        return [Instr("load64", (low, ins.operands[1]), ins.comment),
                Instr("vpshufd", (ins.operands[0], low, Imm(0x44)))]
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
