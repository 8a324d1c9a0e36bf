"""Two bitwise operations as one where the ISA has a ternary logic row.

AVX-512's `vpternlogq` computes any bitwise function of three sources, so
`t = x ^ y; d = t ^ z` is `d = x ^ y ^ z`, and `t = x & m; d = t ^ z` is
`d = (x & m) ^ z`: one µop and one cycle of latency instead of two, where
`t` is read nowhere else. GF(2) kernels are chains of such operations (the
folds of a reduction, the sums of Karatsuba's products, masked columns);
lanes mod q take no bitwise arithmetic the verifier follows, and the pass
leaves instructions of a tagged idiom alone.

The pass runs before allocation, on the IR's values: a bitwise operation
whose source is a single-use bitwise operation takes that one's two sources
in its place, the truth table of the pair as its immediate, and the inner
instruction goes, provided neither of its sources is written in between (an
accumulating or merge-masked row writes its destination in place). The
ternary instruction's destination is its first source, so one of the three
sources must die there; it is overwritten and stands for the result after.
"""

from __future__ import annotations

from collections import Counter

from ..ir.instr import Imm, Instr, Mem, VReg
from ..machine.isa import Isa
from ..machine.ops import spec, truth_table

BITWISE = frozenset({"xor", "and", "or", "andn"})  # the generic names of two-source bitwise rows
_ANY_ELEMENT = 64  # the element width the ternary row is asked for at (a bitwise function has none)


def fuses(isa: Isa) -> bool:
    """Whether the ISA has a ternary logic row, so that `fuse_bitwise` makes pairs of bitwise operations one."""
    return bool(isa.candidates("ternary", _ANY_ELEMENT))


def fuse_bitwise(body: list[Instr], isa: Isa) -> list[Instr]:
    """`body` with every fusable pair of bitwise operations one ternary instruction (unchanged where
    the ISA has no ternary row)."""
    rows = isa.candidates("ternary", _ANY_ELEMENT)
    if not rows:
        return body
    reads = Counter(op for ins in body for op in ins.read if isinstance(op, VReg))
    written_at: dict[VReg, int] = {}  # where each value was last written
    renamed: dict[VReg, VReg] = {}  # a fused result: the register its ternary instruction overwrote
    out: list[Instr | None] = []
    for ins in body:
        if renamed:
            ins = Instr(ins.op, tuple(renamed.get(op, op) for op in ins.operands), ins.comment, ins.idiom)
        fused = _fused(ins, out, written_at, reads, rows[0]) if _bitwise(ins) else None
        if fused is not None:
            inner_at, ternary = fused
            out[inner_at] = None
            tied, result = ternary.operands[0], ins.operands[0]
            renamed[result] = tied
            reads[tied] = reads[result]
            ins = ternary
        for op in ins.written:
            if isinstance(op, VReg):
                written_at[op] = len(out)
        out.append(ins)
    return [ins for ins in out if ins is not None]


def _bitwise(ins: Instr) -> bool:
    return spec(ins.op).generic in BITWISE and ins.idiom is None and isinstance(ins.operands[0], VReg)


def _bit(ins: Instr, a: int, b: int) -> int:
    return spec(ins.op).arith.value((a, b), 1) & 1


def _fused(ins: Instr, out: list[Instr | None], written_at: dict[VReg, int], reads: Counter,
           ternary: str) -> tuple[int, Instr] | None:
    """(where the inner operation stands, the ternary instruction replacing `ins`) if a source of `ins`
    is a bitwise operation read nowhere else whose sources still hold what it read, one of the three
    sources dying here."""
    _, *sources = ins.operands
    for k, src in enumerate(sources):
        if not isinstance(src, VReg) or reads[src] != 1 or src not in written_at:
            continue
        inner_at = written_at[src]
        inner = out[inner_at]
        if inner is None or not _bitwise(inner) or inner.register_bits != ins.register_bits:
            continue
        if any(isinstance(op, VReg) and written_at.get(op, -1) > inner_at for op in inner.operands[1:]):
            continue  # a source of the inner operation written again after it read it
        three = [*inner.operands[1:], sources[1 - k]]  # x, y of the inner operation; z of the outer
        dying = next((i for i, op in enumerate(three) if isinstance(op, VReg) and reads[op] == 1), None)
        if dying is None or sum(isinstance(op, Mem) for op in three) > 1:
            continue
        # operand order: the dying register first (overwritten), a memory operand last
        order = sorted(range(3), key=lambda i: (i != dying, isinstance(three[i], Mem)))

        def pair(*bits: int) -> int:
            v = dict(zip(order, bits))
            t = _bit(inner, v[0], v[1])
            return _bit(ins, t, v[2]) if k == 0 else _bit(ins, v[2], t)
        operands = [three[i] for i in order]
        return inner_at, Instr(ternary, (operands[0], *operands, Imm(truth_table(pair))), ins.comment)
    return None
