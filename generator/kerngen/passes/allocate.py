"""Register allocation for straight-line code.

Kernels are straight-line code when they are allocated (the roll pass makes
loops of repeated groups afterwards), so the whole future is known: when a
register is needed and none is free, the value whose next use is furthest away
is evicted (Belady's rule). Values that are copies of constant memory are
rematerialised by reloading them instead of being spilled; others go to stack
slots as wide as the widest vector register the kernel may spill
(`Isa.spill_slot_bytes`: 64 bytes on AVX-512, 32 below; a general register's
value goes to the first 8 bytes of one). Opmasks are never
spilled: a kernel holds a few constant selectors and comparisons that the next
masked operation reads; running out of them is an AllocationError.
Reads from a slot that accepts memory are folded into the instruction, except
a constant that is read again soon.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..errors import AllocationError
from ..ir.instr import GReg, Instr, KReg, Mem, Operand, PhysReg, StackBase, TableBase, VReg
from ..machine.ops import spec
from ..machine.registers import GENERAL, MASK, VECTOR

# An evicted constant read again within this many instructions is reloaded
# into a register instead of folded: once folded it is never resident again
# and costs a load at every use (the modulus in a run of butterflies is read
# every few instructions); a reload costs one load and, at worst, the spill
# of a value needed later. Spilled values are always folded where they can be.
_FOLD_DISTANCE = 8
_RELOADS = ("load", "load_aligned", "load64_gpr")  # loads that reread a value's whole home


@dataclass(frozen=True)
class Allocation:
    body: tuple[Instr, ...]
    spill_slots: int
    vector_registers: tuple[int, ...]  # physical numbers used
    gpr_registers: tuple[int, ...]


@dataclass(frozen=True)
class RegisterPools:
    vector: tuple[int, ...] = tuple(range(16))
    gpr: tuple[int, ...] = ()
    mask: tuple[int, ...] = ()  # opmasks: never spilled (constant selectors, and comparisons read soon)
    # whether a general register's value may go to the stack (lanes on general registers); else running
    # out of them is an AllocationError, on which a family may retry with more registers or another plan
    spill_gprs: bool = False
    slot_bytes: int = 32  # one spill slot: the widest vector register the kernel may spill (`Isa.spill_slot_bytes`)


def _virtual(op: Operand) -> bool:
    return isinstance(op, (VReg, GReg, KReg))


def allocate(body: tuple[Instr, ...] | list[Instr], pools: RegisterPools) -> Allocation:
    body = list(body)
    uses: dict[Operand, list[int]] = defaultdict(list)
    for i, ins in enumerate(body):
        for op in ins.read:
            if _virtual(op):
                uses[op].append(i)
    use_ptr: dict[Operand, int] = defaultdict(int)

    def next_use(v: Operand, now: int) -> int:
        lst = uses.get(v, ())
        p = use_ptr[v]
        while p < len(lst) and lst[p] < now:
            p += 1
        use_ptr[v] = p
        return lst[p] if p < len(lst) else 1 << 60

    reg_of: dict[Operand, int] = {}
    holder: dict[tuple[str, int], Operand] = {}
    home: dict[Operand, tuple[str, Mem]] = {}  # value also held in memory: (reload op, location)
    free_slots: list[int] = []
    n_slots = 0
    used_vec: set[int] = set()
    used_gpr: set[int] = set()
    out: list[Instr] = []

    def kind(v: Operand) -> str:
        return VECTOR if isinstance(v, VReg) else MASK if isinstance(v, KReg) else GENERAL

    def pool(k: str) -> tuple[int, ...]:
        return {VECTOR: pools.vector, MASK: pools.mask}.get(k, pools.gpr)

    def phys(v: Operand) -> PhysReg:
        k = kind(v)
        bits = 64 if isinstance(v, GReg) else v.bits
        return PhysReg(k, reg_of[v], bits)

    def release(v: Operand) -> None:
        r = reg_of.pop(v, None)
        if r is not None:
            del holder[(kind(v), r)]

    def spill_slot() -> Mem:
        nonlocal n_slots
        if free_slots:
            s = free_slots.pop()
        else:
            s = n_slots
            n_slots += 1
        return Mem(StackBase(), pools.slot_bytes * s, pools.slot_bytes)

    def evict(k: str, now: int, pinned: set[Operand]) -> int:
        best, best_use = None, -1
        for r in pool(k):
            v = holder.get((k, r))
            if v is None or v in pinned:
                continue
            nu = next_use(v, now)
            if nu > best_use:
                best, best_use = v, nu
        if best is None:
            raise AllocationError(f"no {k} register can be freed at instruction {now}")
        r = reg_of[best]
        if best not in home and best_use < (1 << 60):
            if k == MASK or (k == GENERAL and not pools.spill_gprs):
                family = "opmask" if k == MASK else "general"
                raise AllocationError(f"no {family} register can be freed without a spill, and none is allowed")
            slot = spill_slot()
            if k == VECTOR:
                out.append(Instr("store_aligned", (slot, phys(best)), "spill"))
                home[best] = ("load_aligned", slot)
            else:
                slot = Mem(slot.base, slot.offset, 8)
                out.append(Instr("mov_store", (slot, phys(best)), "spill"))
                home[best] = ("load64_gpr", slot)
        release(best)
        return r

    def take(v: Operand, now: int, pinned: set[Operand]) -> int:
        k = kind(v)
        for r in pool(k):
            if (k, r) not in holder:
                break
        else:
            r = evict(k, now, pinned)
        reg_of[v] = r
        holder[(k, r)] = v
        if k != MASK:
            (used_vec if k == VECTOR else used_gpr).add(r)
        return r

    for i, ins in enumerate(body):
        s = spec(ins.op)
        if _loads_constant(ins, s) and next_use(ins.operands[0], i + 1) == 1 << 60:
            continue  # a table's constant nobody reads (a modulus where the products take other constants)
        pinned = {op for op in ins.operands if _virtual(op)}
        new_ops: list[Operand] = list(ins.operands)
        # sources: fold a non-resident value into a memory-capable slot, else reload it
        for idx in s.read:
            v = ins.operands[idx]
            if not _virtual(v) or v in reg_of:
                continue
            if v not in home:
                raise AllocationError(f"instruction {i} ({ins.op}) reads {v} before it is defined")
            reload_op, mem = home[v]
            foldable = s.slots[idx].kind in ("vm", "gm") and "w" not in s.slots[idx].access
            soon = mem.base != StackBase() and next_use(v, i + 1) - i < _FOLD_DISTANCE
            if foldable and not soon and reload_op in _RELOADS and not _read_twice(ins, v):
                new_ops[idx] = mem
                continue
            take(v, i, pinned)
            out.append(Instr(reload_op, (phys(v), mem), "reload"))
        for idx in s.read:
            v = ins.operands[idx]
            if _virtual(v) and v in reg_of:
                new_ops[idx] = phys(v)
        # values whose last use is this instruction free their registers for the
        # destination; their spill slots only once it is emitted, since it may read them
        dying_slots = []
        for idx in s.read:
            v = ins.operands[idx]
            if _virtual(v) and next_use(v, i + 1) == 1 << 60 and v not in ins.written:
                release(v)
                if v in home and home[v][1].base == StackBase():
                    dying_slots.append(home[v][1].offset // pools.slot_bytes)
                home.pop(v, None)
        for idx in s.written:
            v = ins.operands[idx]
            if not _virtual(v):
                continue
            if v not in reg_of:
                take(v, i, pinned)
            if v in home:
                _, mem = home.pop(v)
                if mem.base == StackBase():
                    free_slots.append(mem.offset // pools.slot_bytes)
            new_ops[idx] = phys(v)
            if _loads_constant(ins, s):
                home[v] = (ins.op, ins.operands[1])
        if not (ins.op == "mov" and new_ops[0] == new_ops[1]):  # a copy into its own register: nothing to do
            out.append(Instr(ins.op, tuple(new_ops), ins.comment, ins.idiom))
        free_slots.extend(dying_slots)
        # a value written but never read is dead at once
        for v in ins.written:
            if _virtual(v) and next_use(v, i + 1) == 1 << 60:
                release(v)
                home.pop(v, None)
    return Allocation(tuple(out), n_slots, tuple(sorted(used_vec)), tuple(sorted(used_gpr)))


def _loads_constant(ins: Instr, s) -> bool:
    """Whether `ins` loads a table's constant into a value (which need not be loaded where nobody reads it)."""
    return (s.cls == "load" and _virtual(ins.operands[0]) and isinstance(ins.operands[1], Mem)
            and isinstance(ins.operands[1].base, TableBase))


def _read_twice(ins: Instr, v: Operand) -> bool:
    return sum(1 for op in ins.read if op == v) > 1
