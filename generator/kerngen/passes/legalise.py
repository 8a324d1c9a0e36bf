"""Legalisation: the IR made encodable on the target's ISA.

Builders write every instruction in its three-operand VEX form, on vectors
of the Target's width. How that becomes legal is the ISA's `legalisation`,
the name of one of the strategies below (`STRATEGIES`). "none": a VEX
target encodes it as written. "rewrite", for an EVEX target (AVX-512),
whose registers are as wide as the vectors written: only step 2 below, for
the rows EVEX lacks (a blend by an immediate becomes the EVEX blend under an
opmask, its immediate a bit per unit; `vperm2i128` the `vshufi64x2` moving
the same halves). "split", for a target whose registers are
narrower (SSE, legacy encoding), three steps:

1. Split: a 256-bit value becomes a pair of 128-bit ones, and every
   instruction on it that works on each 128-bit half alone (the table's
   `halves`) becomes two; a permutation of whole halves (`vperm2i128`,
   inserting or extracting a half) becomes a renaming, no instruction at all.
   The kernels and their layouts stay the same, so an SSE kernel computes
   exactly what its AVX2 twin does, in the same order.
2. Rewrite instructions without a form in the encoding into ones that have
   one: `vpblendd` into `pblendw`, a 64-bit broadcast from memory into a
   load and a `pshufd`, a 16-bit one into an insert into a zero register,
   any other movement by an immediate into a row of the same operation
   whose route, for some immediate and order of the sources, is the same.
3. Tie: where the form has two operands (the encoding's `operands`), the
   destination is the first source: `op d, a, b` becomes `op d, d, b`
   (printed `op d, b`): if the first source dies here, the destination
   takes its register (the result is renamed to it): no copy; else, if the
   operation commutes and the second source dies, the sources swap; else a
   copy of the first source comes first.

"onto_gprs", for the scalar ISA (lanes on general registers), one step
replaces the first two: each lane of a vector becomes a general register of its own,
an element-wise operation one general-register operation per lane (the
table's `on_gpr`), a movement of whole lanes a renaming, a load or store
one `mov` per lane (one for a broadcast constant). The kernel is still its
AVX2 twin, lane by lane, in an order that finishes one lane's chain before
the next (`schedule`), since general registers are few; then the tie.
"""

from __future__ import annotations

from itertools import product as product_of

from ..errors import CheckError
from ..ir.instr import Builder, GReg, IdiomTag, Imm, Instr, Mem, Operand, TableBase, VReg
from ..ir.lanes import move_lanes
from ..machine.encoding import Encoding
from ..machine.ops import LANE_BLOCK_BITS, TABLE, Op, by_width, sized_load, spec
from ..machine.target import Target
from .schedule import stores_first_depth


def legalise(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    """`builder` supplies fresh registers, groups and constant tables."""
    return STRATEGIES[target.isa.legalisation](body, target, builder)


def _as_written(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    return list(body)


# the shuffle a broadcast from memory becomes, after a load of the element alone, where the encoding has no
# broadcast: two selector bits per unit of its elements
_COPY_SHUFFLE = "vpshufd"


def _split_into_registers(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    expanded: list[Instr] = []
    wide, half, encoding = target.vector_bits, target.isa.vector_bits, target.isa.encoding
    for ins in _split(body, builder, wide, half):
        expanded += _rewrite(ins, builder, half, encoding)
    return _tie(expanded, encoding)


def _rewritten(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    """Registers as wide as the vectors written: only the rows without a form in the encoding, at the width
    each instruction is written at, rewritten."""
    return [out for ins in body
            for out in _rewrite(ins, builder, ins.register_bits or target.vector_bits, target.isa.encoding)]


def _lanes_onto_gprs(body: list[Instr], target: Target, builder: Builder) -> list[Instr]:
    return _tie(stores_first_depth(_onto_gprs(body, builder, target.lane_bits)), target.isa.encoding)


def _lane_tag(tag: IdiomTag | None, part: int, groups: dict[tuple[int, int], int], b: Builder) -> IdiomTag | None:
    """An idiom's tag on one part of a split vector: each part is an idiom of its own."""
    if tag is None:
        return None
    key = (tag.group, part)
    if key not in groups:
        groups[key] = b.new_group()
    return IdiomTag(groups[key], tag.kind, tag.role, tag.source)


def _onto_gprs(body: list[Instr], b: Builder, bits: int) -> list[Instr]:
    size = bits // 8
    lanes: dict[VReg, tuple[GReg, ...]] = {}
    groups: dict[tuple[int, int], int] = {}
    out: list[Instr] = []

    def lane(op, k: int):
        if isinstance(op, VReg):
            return lanes[op][k]
        if isinstance(op, Mem):
            return Mem(op.base, op.offset + size * k, size)
        return op

    def loaded(ins: Instr, dst: VReg, src: Mem, n: int, broadcast: bool) -> None:
        if broadcast or _same_parts(src, n, b):  # a constant one register serves in every lane
            one = b.greg()
            out.append(Instr("load64_gpr", (one, lane(src, 0)), ins.comment))
            lanes[dst] = (one,) * n
            return
        lanes[dst] = tuple(b.greg() for _ in range(n))
        for k in range(n):
            out.append(Instr("load64_gpr", (lanes[dst][k], lane(src, k)), ins.comment if k == 0 else ""))

    for ins in body:
        ops = ins.operands
        if not any(isinstance(op, VReg) for op in ops):
            out.append(ins)
            continue
        s = spec(ins.op)
        n = ops[1 if s.cls == "store" else 0].bits // bits
        if s.cls == "load" and isinstance(ops[1], Mem):
            loaded(ins, ops[0], ops[1], n, s.move is not None and s.move.unit == bits and ops[1].size == size)
        elif s.cls == "store":
            for k in range(n):
                out.append(Instr("mov_store", (lane(ops[0], k), lane(ops[1], k)), ins.comment if k == 0 else ""))
        elif s.on_gpr is not None:
            lanes[ops[0]] = tuple(b.greg() for _ in range(n))
            for k in range(n):
                out.append(Instr(s.on_gpr, tuple(lane(op, k) for op in ops), ins.comment if k == 0 else "",
                                 _lane_tag(ins.idiom, k, groups, b)))
        elif s.move is not None and s.arith is None:  # whole lanes moved: a renaming
            sources = [list(lanes[op]) for op in ops[1:] if isinstance(op, VReg)]
            if len(sources) != sum(1 for op in ops[1:] if not isinstance(op, Imm)):
                raise CheckError(f"{ins.op} moves lanes from memory; the scalar ISA renames registers only")
            imm = next((op.value for op in ops if isinstance(op, Imm)), None)
            moved = move_lanes(s, sources, imm, bits, n, None)
            if moved is None or not all(isinstance(x, GReg) for x in moved):
                raise CheckError(f"{ins.op} moves parts of lanes or zeros; lanes on general registers "
                                 "can only be renamed")
            lanes[ops[0]] = tuple(moved)
        else:
            raise CheckError(f"{ins.op} has no lowering onto general registers (the table's on_gpr)")
    return out


def _split(body: list[Instr], b: Builder, wide: int, half_bits: int) -> list[Instr]:
    """Vectors of `wide` bits as pairs of `half_bits`-bit registers."""
    halves: dict[VReg, tuple[VReg, VReg]] = {}
    groups: dict[tuple[int, int], int] = {}

    def half(op, h: int):
        if isinstance(op, VReg) and op.bits == wide:
            if op not in halves:
                halves[op] = (b.vreg(half_bits), b.vreg(half_bits))
            return halves[op][h]
        if isinstance(op, Mem) and op.size == wide // 8:
            return Mem(op.base, op.offset + half_bits // 8 * h, half_bits // 8)
        return op

    out: list[Instr] = []
    for ins in body:
        if not any(isinstance(op, VReg) and op.bits == wide for op in ins.operands):
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
        if s.cls == "load" and (_same_halves(ops[1], b, wide) or _halves_alike(s, ops[1], wide, half_bits)):
            # a broadcast constant, or a broadcast from memory: one register serves both halves
            one = b.vreg(half_bits)
            halves[ops[0]] = (one, one)
            out.append(Instr(ins.op, (one, half(ops[1], 0)), ins.comment, ins.idiom))
            continue
        if not s.halves:
            raise CheckError(f"{ins.op} on 256-bit registers moves data between halves and cannot be split")
        for h in (0, 1):
            operands = tuple(half(op, h) for op in ops)
            if ins.op == by_width("blend", 32):  # one selector bit per dword of the whole register
                operands = operands[:3] + (Imm(ops[3].value >> (4 * h) & 0xF),)
            out.append(Instr(ins.op, operands, ins.comment if h == 0 else "", _lane_tag(ins.idiom, h, groups, b)))
    return out


def _same_halves(op, b: Builder, wide: int) -> bool:
    """Whether a `wide`-bit memory operand is a constant whose two halves are equal."""
    return _same_parts(op, 2, b) and op.size == wide // 8


def _halves_alike(s: Op, op, wide: int, half_bits: int) -> bool:
    """Whether row `s`, loading from memory operand `op` into a `wide`-bit register, fills each half
    with what it loads into a `half_bits`-bit one (its route on the memory's units: a broadcast of an
    element)."""
    if s.move is None or not isinstance(op, Mem) or 8 * op.size > half_bits:
        return False
    unit = s.move.unit or s.elem or 8
    units = list(range(8 * op.size // unit))
    whole = move_lanes(s, [units], None, unit, wide // unit, None)
    return whole is not None and whole == 2 * move_lanes(s, [units], None, unit, half_bits // unit, None)


def _same_parts(op, parts: int, b: Builder) -> bool:
    """Whether a memory operand is a constant made of `parts` equal parts."""
    if not isinstance(op, Mem) or not isinstance(op.base, TableBase):
        return False
    t = b.tables[op.base.label]
    first, per = op.offset // t.elem_bytes, op.size // parts // t.elem_bytes
    return all(t.values[first:first + per] == t.values[first + k * per:first + (k + 1) * per] for k in range(parts))


def _rewrite(ins: Instr, b: Builder, half_bits: int, encoding: Encoding) -> list[Instr]:
    s = spec(ins.op)
    if s.gpr_only or any(f.exists(encoding, half_bits) for f in s.forms):
        return [ins]
    if s.generic == "blend":
        own = _blend_here(s.elem, encoding, half_bits)
        if own is not None:  # a blend of the encoding whose immediate has a bit per unit of the register
            units, imm = half_bits // s.elem, ins.operands[3].value
            bits = sum(1 << k for k in range(units) if imm >> (k % 8) & 1)  # the VEX immediate repeats every 8
            return [Instr(own, ins.operands[:3] + (Imm(bits),), ins.comment, ins.idiom)]
    if s.move is not None and s.generic is not None and isinstance(ins.operands[-1], Imm):
        same = _same_movement(ins, encoding, half_bits)
        if same is not None:  # a permutation of whole halves (vperm2i128) as EVEX's vshufi64x2, say
            return [same]
    if ins.op == by_width("blend", 32):  # each dword selector bit becomes two word selector bits
        imm = ins.operands[3].value
        words = sum(3 << (2 * k) for k in range(4) if imm >> k & 1)
        return [Instr(by_width("blend", 16), ins.operands[:3] + (Imm(words),), ins.comment, ins.idiom)]
    shuffle = spec(_COPY_SHUFFLE)
    if s.generic == "broadcast" and s.elem >= shuffle.elem and isinstance(ins.operands[1], Mem):
        # the element loaded alone, then copied into every element by a shuffle of its units (a dword's
        # selector 0, a qword's 0x44)
        low, units = b.vreg(half_bits), s.elem // shuffle.elem
        copies = sum(k % units << (2 * k) for k in range(LANE_BLOCK_BITS // shuffle.elem))
        return [Instr(sized_load(s.elem // 8), (low, ins.operands[1]), ins.comment),
                Instr(_COPY_SHUFFLE, (ins.operands[0], low, Imm(copies)))]
    if ins.op == by_width("broadcast", 16) and isinstance(ins.operands[1], Mem) and ins.operands[1].size == 2:
        # a one-element vector: its element into a zero register (no byte beyond it is read)
        zero = b.vreg(half_bits)
        table = b.table("pw_0", 2, [0] * 16)
        return [Instr("load", (zero, Mem(table, 0, half_bits // 8)), ins.comment),
                Instr("pinsrw", (ins.operands[0], zero, ins.operands[1], Imm(0)))]
    raise CheckError(f"{ins.op} has no {encoding.name} encoding and no {encoding.name} rewrite")


def _same_movement(ins: Instr, encoding: Encoding, bits: int) -> Instr | None:
    """`ins`, a movement by an immediate, as a row of its operation the encoding has on `bits`-bit
    registers, moving the same units of the same sources: searched over that row's immediates and
    the orders of the sources (None if none does)."""
    s = spec(ins.op)
    dst, sources, imm = ins.operands[0], ins.operands[1:-1], ins.operands[-1].value
    unit = s.move.unit or s.elem
    units = bits // unit
    lanes = [[(k, j) for j in range(units)] for k in range(len(sources))]
    wanted = move_lanes(s, lanes, imm, unit, units, None)
    if wanted is None:
        return None
    for name in TABLE.doing(s.generic, s.elem or 0):
        row = TABLE.ops[name]
        if row.move is None or not row.form_exists(encoding, bits) or len(row.slots) != len(ins.operands):
            continue
        for picks in product_of(range(len(sources)), repeat=len(sources)):
            if any(isinstance(sources[p], Mem) and "m" not in row.slots[1 + k].kind for k, p in enumerate(picks)):
                continue
            for candidate in range(256):
                if move_lanes(row, [lanes[p] for p in picks], candidate, unit, units, None) == wanted:
                    return Instr(name, (dst, *(sources[p] for p in picks), Imm(candidate)), ins.comment, ins.idiom)
    return None


def _blend_here(elem: int, encoding: Encoding, bits: int) -> str | None:
    """The row blending `elem`-bit units on `bits`-bit registers in `encoding`, if any."""
    return next((name for name in TABLE.doing("blend", elem) if TABLE.ops[name].form_exists(encoding, bits)), None)


def _tie(body: list[Instr], encoding: Encoding) -> list[Instr]:
    last: dict[Operand, int] = {}
    for i, ins in enumerate(body):
        for op in ins.read:
            if isinstance(op, (VReg, GReg)):
                last[op] = i
    rename: dict[Operand, Operand] = {}
    tied: dict[tuple[str, int | None], bool] = {}  # by row and register width (a large body asks again and again)
    out: list[Instr] = []
    for i, ins in enumerate(body):
        ops = tuple(rename.get(op, op) for op in ins.operands)
        s = spec(ins.op)
        shape = (ins.op, ins.register_bits)
        if shape not in tied:
            tied[shape] = s.ties(ins.form(encoding))
        if not tied[shape] or ops[0] == ops[1]:
            out.append(ins if ops == ins.operands else Instr(ins.op, ops, ins.comment, ins.idiom))
            continue
        dst, a, b = ops[0], ops[1], ops[2]

        def dies(v) -> bool:
            return isinstance(v, (VReg, GReg)) and last.get(v, -1) <= i

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
        out.append(Instr("mov" if isinstance(dst, GReg) else "copy", (dst, a), ins.comment, copy_tag))
        out.append(Instr(ins.op, (dst, dst, b) + ops[3:], "", op_tag))
    return out


# by the name an ISA gives (`Isa.legalisation`)
STRATEGIES = {"none": _as_written, "rewrite": _rewritten, "split": _split_into_registers,
              "onto_gprs": _lanes_onto_gprs}
