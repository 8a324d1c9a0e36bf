"""Shorter encodings of the same instructions.

Past the decoded-µop cache the front end decodes about 16 bytes and at most
four instructions a cycle, so a large kernel's bytes and instructions are its
time (`passes.roll` says more). Four passes take them out without changing
what any instruction computes:

- `fold_loads` (before allocation, VEX targets): a vector loaded from an
  argument and read a few times only by instructions that can take it as
  their memory operand is not loaded at all; each of them reads it from
  memory (a load µop, no instruction).
- `fold_broadcasts` (before allocation, where the encoding broadcasts a
  memory source: EVEX): a table element broadcast into a register that
  element-wise instructions on elements of its width read is not loaded;
  each of them reads the element itself, broadcast in the instruction
  ({1toN}: a load µop, no instruction).
- `promote_constants` (after allocation, before verification): a table
  vector read many times as a memory operand is loaded once into a vector
  register the allocation left unused, and read from there: a register
  operand is four bytes shorter than a RIP-relative one and costs no load.
- `point_tables` (after verification and rolling): table accesses close
  together are addressed from a general register holding an address near
  them, [reg + disp8] instead of [rip + disp32]; a `lea` sets the register
  where a run of such accesses begins. `check.check_encoding` proves that
  every such operand reaches the address the verified instruction names.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..ir.instr import ArgBase, Instr, Mem, PhysReg, Pointer, TableBase, VReg, registers_in
from ..machine.encoding import Encoding
from ..machine.ops import spec
from ..machine.registers import GENERAL, VECTOR

# A constant read fewer times than this keeps its memory operand: the load
# into a register costs an instruction, and on Win64 a callee-saved register
# costs a save and a restore in the frame.
_MIN_READS = 6

DISP8 = range(-128, 128)
_LEA_BYTES, _SAVED_PER_ACCESS = 7, 3  # lea reg, [rip + disp32]; disp32 -> disp8


# A loaded vector read more often than this stays loaded: each folded read is
# a load µop of its own, and the load ports are shared with everything else.
_MAX_FOLDED_READS = 3


def fold_loads(body: list[Instr]) -> list[Instr]:
    """Drop the loads of argument vectors whose every read can take the
    memory operand instead (a commutative instruction's sources swapped to
    put it last, VEX's memory slot), one memory operand per instruction, no
    store anywhere between the load and its last read (an output may alias
    the input). Loads are taken in order, each as far as the operands the
    earlier ones took leave room: of x*y, x + y the first load gets both."""
    reads = _reads(body)
    stores = [i for i, ins in enumerate(body) if any(isinstance(op, Mem) for op in ins.written)]
    folds = _Folds(body)
    for i, ins in enumerate(body):
        if ins.op != "load" or not isinstance(ins.operands[1].base, ArgBase):
            continue
        dst, mem = ins.operands
        uses = reads.get(dst, [])
        if not uses or len(uses) > _MAX_FOLDED_READS or mem.size * 8 != dst.bits or \
                bisect_right(stores, uses[-1]) > bisect_right(stores, i):  # a store before the last read
            continue
        folds.fold(i, dst, mem, uses)
    return folds.folded()


def fold_broadcasts(body: list[Instr], encoding: Encoding, lane_bits: int) -> list[Instr]:
    """Drop the broadcasts of table elements (one constant in every lane) whose
    every read, at most `_MAX_FOLDED_READS`, is by an element-wise row on
    elements of the broadcast's width, the lanes' (unmasked, with known lane
    semantics), that `encoding` broadcasts memory sources of: each read takes
    the element as its memory operand, broadcast in the instruction."""
    reads = _reads(body)
    folds = _Folds(body)
    for i, ins in enumerate(body):
        s = spec(ins.op)
        if s.generic != "broadcast" or s.elem != lane_bits or s.elem not in encoding.broadcast_elems:
            continue
        dst, mem = ins.operands
        if not isinstance(mem, Mem) or not isinstance(mem.base, TableBase) or mem.size * 8 != s.elem:
            continue
        uses = reads.get(dst, [])
        if not uses or len(uses) > _MAX_FOLDED_READS or not all(_elementwise_on(body[j], s.elem) for j in uses):
            continue
        folds.fold(i, dst, dataclasses.replace(mem, broadcast=True), uses)
    return folds.folded()


def _reads(body: list[Instr]) -> dict[VReg, list[int]]:
    reads: dict[VReg, list[int]] = defaultdict(list)
    for i, ins in enumerate(body):
        for op in ins.read:
            if isinstance(op, VReg):
                reads[op].append(i)
    return reads


def _elementwise_on(ins: Instr, elem: int) -> bool:
    s = spec(ins.op)
    return s.elem == elem and s.cls in ("alu", "mul") and s.arith is not None and s.masking is None


@dataclass
class _Folds:
    """Loads taken out of `body`, and the reads that take their memory operand instead."""

    body: list[Instr]
    taken: dict[int, tuple] = field(default_factory=dict)  # instruction -> its new operands, the register replaced
    dropped: set[int] = field(default_factory=set)

    def fold(self, i: int, dst: VReg, mem: Mem, uses: list[int]) -> None:
        """Instruction i (which loads `dst`) dropped, if every one of `uses` can read `mem` in its place and
        no earlier fold took that instruction's memory slot."""
        placed = {j: _with_memory(self.body[j], dst, mem) if j not in self.taken else None for j in set(uses)}
        if all(ops is not None for ops in placed.values()):
            self.taken.update((j, (ops, dst)) for j, ops in placed.items())
            self.dropped.add(i)

    def folded(self) -> list[Instr]:
        return [_retagged(ins, *self.taken[i]) if i in self.taken else ins
                for i, ins in enumerate(self.body) if i not in self.dropped]


def _with_memory(ins: Instr, reg: VReg, mem: Mem) -> tuple | None:
    """`ins`'s operands with `mem` read in place of `reg`, or None where it
    cannot be: `reg` read once, by the memory-capable source slot (the
    sources of a commutative instruction swapped if that puts it there),
    no other memory operand, the same width as the instruction's register."""
    s, ops = spec(ins.op), list(ins.operands)
    if any(isinstance(op, Mem) for op in ops) or ops.count(reg) != 1 or ops.index(reg) not in s.read:
        return None
    if not isinstance(ops[0], VReg) or ops[0].bits != reg.bits or s.cls in ("store", "move", "address", "control"):
        return None
    memory_slots = [j for j in s.read if s.slots[j].kind == "vm" and "w" not in s.slots[j].access]
    if len(memory_slots) != 1:
        return None
    k, m = ops.index(reg), memory_slots[0]
    if k != m:
        sources = [j for j in s.read if s.slots[j].kind in ("v", "vm")]
        if not s.commutative or len(sources) != 2 or k not in sources:
            return None
        ops[k], ops[m] = ops[m], ops[k]
    ops[m] = mem
    return tuple(ops)


def _retagged(ins: Instr, ops: tuple, reg: VReg) -> Instr:
    """`ins` with operands `ops` (`reg` folded into memory), its idiom's
    source slot following the value it named."""
    tag = ins.idiom
    if tag is not None and tag.role == "start":
        was = ins.operands[tag.source]
        now = next(j for j, op in enumerate(ops) if isinstance(op, Mem)) if was == reg else ops.index(was)
        tag = dataclasses.replace(tag, source=now)
    return Instr(ins.op, ops, ins.comment, tag)


@dataclass(frozen=True)
class _Constant:
    label: str
    offset: int
    size: int


def _whole_vector(dst, op) -> _Constant | None:
    """The table vector `op` is, if it fills the vector register `dst` (a narrower row is padded:
    a register would hold more than it reads)."""
    if isinstance(op, Mem) and isinstance(op.base, TableBase) and isinstance(dst, PhysReg) and dst.kind == VECTOR \
            and op.size == dst.bits // 8:
        return _Constant(op.base.label, op.offset, op.size)
    return None


def _promotable(ins: Instr, k: int) -> _Constant | None:
    """The constant operand k of `ins` reads, if a register could stand in
    for it: a whole-vector table operand of arithmetic or a shuffle (a plain
    load gains nothing from a register)."""
    s = spec(ins.op)
    if s.cls in ("load", "store", "move", "address") or k not in s.read or s.slots[k].kind != "vm":
        return None
    return _whole_vector(ins.operands[0], ins.operands[k])


def _loaded(ins: Instr) -> _Constant | None:
    """The constant a whole-vector load of a table reads into a vector register, if it is one."""
    return _whole_vector(*ins.operands) if ins.op == "load" else None


def _read_in_place_of(body: list[Instr], at: int, home: PhysReg) -> dict[int, Instr] | None:
    """The instructions after load `at` rewritten to read `home` where they read the register it
    loads, up to that register's next write; None where one cannot (the register read in place
    or at another width, or a loop's control first: an iteration must find it as the first did)."""
    loaded = body[at].operands[0]
    rewritten: dict[int, Instr] = {}
    for j in range(at + 1, len(body)):
        ins = body[j]
        s = spec(ins.op)
        if s.cls == "control":
            return None
        same = [k for k, op in enumerate(ins.operands)
                if isinstance(op, PhysReg) and op.kind == VECTOR and op.number == loaded.number]
        reads = [k for k in same if k in s.read]
        writes = any(k in s.written for k in same)
        if any(ins.operands[k] != loaded for k in same) or (reads and writes):
            return None  # read where it is written too: a two-operand form's destination is its first source
        if reads:
            rewritten[j] = Instr(ins.op, tuple(home if k in reads else op for k, op in enumerate(ins.operands)),
                                 ins.comment, ins.idiom)
        if writes:
            return rewritten
    return rewritten


def promote_constants(body: list[Instr], pool: tuple[int, ...]) -> list[Instr]:
    """Load the most-read table vectors into the vector registers of `pool`
    (in its order: caller-saved ones first) the allocation left unused, at the kernel's start,
    and read them from there; one constant per register, so groups that were
    alike stay alike (`passes.roll`). A load of one into a register (a masked row's
    source, which reads no memory) goes too: its readers read the held register."""
    used = registers_in(body, VECTOR)
    free = [r for r in pool if r not in used]
    reads: dict[_Constant, int] = defaultdict(int)
    for ins in body:
        for c in (_loaded(ins), *(_promotable(ins, k) for k in range(len(ins.operands)))):
            if c is not None:
                reads[c] += 1
    chosen = [c for c in sorted(reads, key=lambda c: -reads[c]) if reads[c] >= _MIN_READS][:len(free)]
    home = {c: PhysReg(VECTOR, r, 8 * c.size) for c, r in zip(chosen, free)}
    body = [Instr(ins.op, ops, ins.comment, ins.idiom) if (ops := tuple(
        home.get(_promotable(ins, k), op) for k, op in enumerate(ins.operands))) != ins.operands else ins for ins in body]
    dropped: set[int] = set()
    for i, ins in enumerate(body):
        if (c := _loaded(ins)) in home and (readers := _read_in_place_of(body, i, home[c])) is not None:
            dropped.add(i)
            for j, rewritten in readers.items():
                body[j] = rewritten
    body = [ins for i, ins in enumerate(body) if i not in dropped]
    held = Counter(op for ins in body for op in ins.read if op in home.values())
    loads = [Instr("load", (reg, Mem(TableBase(c.label), c.offset, c.size)), f"held in a register: read {held[reg]} times")
             for c, reg in home.items()]
    return loads + body


def _table_accesses(body: list[Instr]) -> list[tuple[int, int, Mem, int]]:
    """(instruction, operand slot, operand, region) of every table access not
    already addressed through a register, in order; regions are the stretches
    between loop controls, which a pointer does not outlive (an iteration
    must find the register as the first did)."""
    out, region = [], 0
    for i, ins in enumerate(body):
        if spec(ins.op).cls == "control":
            region += 1
        elif spec(ins.op).cls != "address":
            out += [(i, k, op, region) for k, op in enumerate(ins.operands)
                    if isinstance(op, Mem) and isinstance(op.base, TableBase) and op.pointer is None]
    return out


def _another_table_between(accesses: list[tuple[int, int, Mem, int]], first: int, last: int) -> bool:
    """Whether an access to another table comes between accesses `first` and
    `last` (positions in `accesses`): it may re-point the register, so the
    accesses after it are not counted for this window (two tables read in
    turn, as in a reduction of every register, would otherwise take a `lea`
    before nearly every access)."""
    label = accesses[first][2].base.label
    return any(accesses[j][2].base.label != label for j in range(first + 1, last))


def point_tables(body: list[Instr], scratch: tuple[int, ...]) -> list[Instr]:
    """Address runs of nearby table accesses through one free scratch register
    (the lowest: below r8 it needs no REX prefix): where an access
    lies outside the register's reach, the run of accesses to the same table
    that would fit one disp8 window from there is counted, and the register
    is re-pointed at the window when that saves more bytes than the `lea` costs."""
    used = registers_in(body, GENERAL)
    free = [r for r in scratch if r not in used]
    if not free:
        return body
    reg = min(free)
    accesses = _table_accesses(body)
    by_table: dict[tuple[str, int], list[int]] = defaultdict(list)  # positions in `accesses`, per table and region
    for n, (_, _, op, region) in enumerate(accesses):
        by_table[op.base.label, region].append(n)
    rank = {n: j for positions in by_table.values() for j, n in enumerate(positions)}
    rewritten: dict[tuple[int, int], Mem] = {}
    leas: dict[int, Instr] = {}
    at: tuple[str, int, int] | None = None  # (table, bias, region) the register holds
    for n, (i, k, op, region) in enumerate(accesses):
        label = op.base.label
        if at is not None and at[0] == label and at[2] == region and op.offset - at[1] in DISP8:
            rewritten[i, k] = dataclasses.replace(op, pointer=Pointer(reg, at[1]))
            continue
        lo = hi = op.offset
        count = 0
        for m in by_table[label, region][rank[n]:]:
            off = accesses[m][2].offset
            if max(hi, off) - min(lo, off) >= len(DISP8) or _another_table_between(accesses, n, m):
                break
            lo, hi, count = min(lo, off), max(hi, off), count + 1
        if count * _SAVED_PER_ACCESS <= _LEA_BYTES:
            continue
        at = (label, lo - DISP8.start, region)
        leas[i] = Instr("lea", (PhysReg(GENERAL, reg, 64), Mem(op.base, at[1], 1)), f"addresses {label} near byte {lo}")
        rewritten[i, k] = dataclasses.replace(op, pointer=Pointer(reg, at[1]))
    out: list[Instr] = []
    for i, ins in enumerate(body):
        if i in leas:
            out.append(leas[i])
        ops = tuple(rewritten.get((i, k), op) for k, op in enumerate(ins.operands))
        out.append(Instr(ins.op, ops, ins.comment, ins.idiom) if ops != ins.operands else ins)
    return out
