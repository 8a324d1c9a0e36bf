from kerngen.errors import AllocationError
from kerngen.ir.instr import ArgBase, Builder, Mem, PhysReg, StackBase, TableBase
from kerngen.passes.allocate import RegisterPools, allocate
from kerngen.emission.printer import body_text
from kerngen.machine.target import make_target

import pytest

from conftest import register_pressure


def test_no_spill_when_values_fit():
    a = allocate(register_pressure(15).instrs, RegisterPools())
    assert a.spill_slots == 0
    assert not any(isinstance(o, Mem) and o.base == StackBase() for i in a.body for o in i.operands)


def test_spills_when_more_values_than_registers_live():
    a = allocate(register_pressure(20).instrs, RegisterPools())
    assert a.spill_slots > 0
    text = "\n".join(body_text(a.body, make_target("avx2", 16)))
    assert "[rsp" in text
    assert all(not isinstance(o, PhysReg) or o.number < 16 for i in a.body for o in i.operands)


def test_an_evicted_constant_in_steady_use_comes_back_into_a_register():
    """A constant evicted while sixteen values are live (its first read is the
    furthest away) and then read by a run of instructions is reloaded once,
    not folded into every read."""
    b = Builder(256)
    c = b.op("load", Mem(b.table("c", 2, [7] * 16), 0, 32))
    vs = [b.op("load", Mem(ArgBase(0), 32 * i, 32)) for i in range(16)]
    acc = vs[0]
    for v in vs[1:]:
        acc = b.op("vpaddw", acc, v)
    sums = [b.op("vpaddw", v, c) for v in vs]
    for i, v in enumerate([acc] + sums + vs):
        b.emit("store", Mem(ArgBase(1), 32 * i, 32), v)
    body = allocate(b.instrs, RegisterPools()).body
    reads_of_c = [ins for ins in body if any(isinstance(o, Mem) and o.base == TableBase("c") for o in ins.operands)]
    assert len(reads_of_c) <= 3, [ins.op for ins in reads_of_c]


def test_reading_an_undefined_register_is_an_allocation_error():
    b = Builder(256)
    ghost = b.vreg()
    b.emit("store", Mem(ArgBase(0), 0, 32), ghost)
    with pytest.raises(AllocationError):
        allocate(b.instrs, RegisterPools())


def test_a_dying_folded_slot_is_not_reused_by_the_same_instruction():
    """A spilled value read from its slot by its last use must not have that slot
    overwritten by a spill made for the same instruction's destination."""
    b = Builder(256)
    vs = [b.op("load", Mem(ArgBase(0), 32 * i, 32)) for i in range(24)]
    acc = b.op("vpaddw", vs[0], vs[1])
    for v in vs[2:]:
        acc = b.op("vpaddw", acc, v)
        b.emit("store", Mem(ArgBase(1), 0, 32), acc)
    for v in vs[::-1]:
        b.emit("store", Mem(ArgBase(1), 32, 32), v)
    a = allocate(b.instrs, RegisterPools(vector=tuple(range(4))))
    for prev, ins in zip(a.body, a.body[1:]):
        if prev.comment == "spill":
            read_slots = [o for k, o in enumerate(ins.operands) if isinstance(o, Mem) and o.base == StackBase() and k > 0]
            assert prev.operands[0] not in read_slots
