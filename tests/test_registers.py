"""Register families as data: an ISA's families are what the allocator hands
out, the printer spells and the frame saves (as the ABI says per family)."""

from __future__ import annotations

import dataclasses

import pytest

from kerngen.emission.frame import frame_of
from kerngen.emission.printer import body_text, register_text
from kerngen.ir.instr import ArgBase, Instr, Kernel, Mem, PhysReg
from kerngen.machine.encoding import EVEX
from kerngen.machine.isa import AVX2, AVX512VL
from kerngen.machine.registers import MASK, MASKS, VECTOR, general_family, vector_family
from kerngen.machine.target import PLATFORMS, Target
from kerngen.passes.allocate import RegisterPools, allocate

from conftest import register_pressure

# AVX2 with AVX-512's register files: 32 vector registers up to zmm, and the opmask registers
WIDE = dataclasses.replace(AVX2, name="wide", families=(vector_family(32, EVEX.widths), general_family(), MASKS))


def _target(isa, platform: str = "sysv") -> Target:
    return Target(isa, 16, PLATFORMS[platform])


def _kernel(target: Target, count: int) -> Kernel:
    result = allocate(register_pressure(count).instrs, RegisterPools(vector=target.pool(VECTOR)))
    return Kernel("k", (), result.body, (), target, frozenset(), result.spill_slots)


def _vectors(kernel: Kernel) -> set[int]:
    return {op.number for ins in kernel.body for op in ins.operands if isinstance(op, PhysReg) and op.kind == VECTOR}


def test_a_32_register_family_is_allocated_without_spills_and_printed():
    kernel = _kernel(_target(WIDE), 28)
    assert kernel.spill_slots == 0
    assert max(_vectors(kernel)) >= 16
    assert any("ymm27" in line for line in body_text(kernel.body, kernel.target))
    # the same pressure on AVX2's 16 registers spills
    assert _kernel(_target(AVX2), 28).spill_slots > 0


def test_each_family_is_spelt_by_its_width():
    target = _target(WIDE)
    assert register_text(PhysReg(VECTOR, 16, 512), target) == "zmm16"
    assert register_text(PhysReg(VECTOR, 16, 256), target) == "ymm16"
    assert register_text(PhysReg(VECTOR, 3, 128), target) == "xmm3"
    assert register_text(PhysReg(MASK, 1, 64), target) == "k1"
    with pytest.raises(ValueError, match="512-bit"):  # AVX2's vector registers stop at ymm
        register_text(PhysReg(VECTOR, 1, 512), _target(AVX2))
    with pytest.raises(KeyError):  # and it has no opmask registers
        register_text(PhysReg(MASK, 1, 64), _target(AVX2))


def test_win64_prefers_volatile_registers_and_saves_xmm6_to_15_only_when_used():
    wide = _target(WIDE, "win64")
    assert wide.pool(VECTOR) == tuple(range(6)) + tuple(range(16, 32)) + tuple(range(6, 16))
    assert _target(WIDE).pool(VECTOR) == tuple(range(32))  # System V saves no vector register
    # 21 values fit in 0-5 and 16-31: nothing to save
    kernel = _kernel(wide, 20)
    assert _vectors(kernel).isdisjoint(range(6, 16)) and frame_of(kernel).saves == ()
    # 24 take two of the callee-saved ones, which the frame saves, and only those
    kernel = _kernel(wide, 23)
    saved = sorted(_vectors(kernel) & set(range(6, 16)))
    assert saved and [x for x, _ in frame_of(kernel).saves] == [f"xmm{r}" for r in saved]
    # AVX2's 16: 0-5 first, then 6-15, saved as used
    assert frame_of(_kernel(_target(AVX2, "win64"), 4)).saves == ()
    assert [x for x, _ in frame_of(_kernel(_target(AVX2, "win64"), 8)).saves] == ["xmm6", "xmm7", "xmm8"]
    assert frame_of(_kernel(_target(AVX2, "sysv"), 8)).saves == ()
    # 256-bit EVEX takes ymm16-31 before the callee-saved ones, as zmm does
    vl = _target(AVX512VL, "win64")
    assert vl.pool(VECTOR) == wide.pool(VECTOR) and frame_of(_kernel(vl, 20)).saves == ()
    text = "\n".join(body_text(_kernel(vl, 20).body, vl))
    assert "ymm16" in text and "zmm" not in text


def test_k0_is_never_allocated():
    assert 0 not in MASKS.pool() and MASKS.pool() == tuple(range(1, 8))
    assert _target(WIDE, "win64").pool(MASK) == tuple(range(1, 8))
    assert _target(AVX2).pool(MASK) == ()  # no opmask registers on AVX2


def test_the_upper_state_is_dirty_only_after_a_write_wider_than_128_bits():
    def kernel(*written: PhysReg) -> Kernel:
        body = tuple(Instr("load", (reg, Mem(ArgBase(0), 0, reg.bits // 8))) for reg in written)
        return Kernel("k", (), body, (), _target(WIDE), frozenset())

    assert not kernel(PhysReg(VECTOR, 17, 128)).dirty_upper
    assert kernel(PhysReg(VECTOR, 17, 128), PhysReg(VECTOR, 20, 256)).dirty_upper
    assert kernel(PhysReg(VECTOR, 20, 512)).dirty_upper
    assert not MASKS.dirties_upper(64)
