"""Spill slots as wide as the ISA's widest register (zmm: 64 bytes, the
spill area aligned to them), checked by the memory check and the verifier,
and the NTT builds that interleave two groups where the registers hold them."""

from __future__ import annotations

import numpy as np
import pytest

from kerngen.emission.frame import frame_of
from kerngen.errors import CheckError, VerifyError
from kerngen.families import load
from kerngen.families.ntt.build import ntt_interleave
from kerngen.families.ntt.design import design
from kerngen.ir.instr import ArgBase, ArgSpec, Instr, Kernel, Mem, PhysReg, StackBase
from kerngen.machine.isa import AVX2, AVX512
from kerngen.machine.registers import VECTOR
from kerngen.machine.target import make_target
from kerngen.passes.allocate import RegisterPools, allocate
from kerngen.passes.check import check_memory
from kerngen.passes.interpret import compile_kernel
from kerngen.passes.verify import verify_kernel

from conftest import REPO, register_pressure

LIVE = 40  # zmm values live at once: more than the 32 registers
TARGET = make_target("avx512", 64)
ARGS = (ArgSpec("x", "in", "uint64_t", 8, 8 * LIVE, 64), ArgSpec("out", "out", "uint64_t", 8, 8 * (LIVE + 1), 64))


def _pressure() -> Kernel:
    """out = (the sum of 40 vectors of x, then each of them), every vector live to the end."""
    pools = RegisterPools(vector=TARGET.pool(VECTOR), slot_bytes=AVX512.spill_slot_bytes)
    result = allocate(register_pressure(LIVE, 512, "vpaddq").instrs, pools)
    return Kernel("pressure", ARGS, result.body, (), TARGET, frozenset(), result.spill_slots)


def test_zmm_registers_spill_to_64_byte_slots_in_a_64_byte_aligned_area():
    assert AVX512.spill_slot_bytes == 64 and AVX2.spill_slot_bytes == 32
    kernel = _pressure()
    stack = [op for ins in kernel.body for op in ins.operands if isinstance(op, Mem) and op.base == StackBase()]
    assert kernel.spill_slots > 0 and stack
    assert all(m.offset % 64 == 0 and m.size == 64 for m in stack)
    frame = frame_of(kernel)
    assert frame.align == 64 and frame.stack_bytes == 64 * kernel.spill_slots
    check_memory(kernel.body, ARGS, (), kernel.spill_slots, 64)
    # the model, whose stack is bytes, computes the sums and copies: no slot overlaps another
    x = np.arange(8 * LIVE, dtype=np.uint64).reshape(1, -1) * np.uint64(0x9E3779B97F4A7C15)
    out = compile_kernel(kernel).run({0: x})[1][0]
    vectors = x.reshape(LIVE, 8)
    assert out[:8].tolist() == [int(v) % 2**64 for v in vectors.astype(object).sum(axis=0)]
    assert out[8:].tolist() == x[0].tolist()


def test_a_zmm_register_through_a_32_byte_slot_is_refused():
    body = (Instr("store_aligned", (Mem(StackBase(), 0, 32), PhysReg(VECTOR, 1, 512))),)
    with pytest.raises(CheckError, match="moves 64 bytes .* slots are 32"):
        check_memory(body, ARGS, (), 2, 32)


def test_the_verifier_refuses_a_reload_of_a_slot_a_later_store_overlapped():
    zmm = [PhysReg(VECTOR, k, 512) for k in range(3)]
    body = (Instr("load", (zmm[0], Mem(ArgBase(0), 0, 64))), Instr("load", (zmm[1], Mem(ArgBase(0), 64, 64))),
            Instr("store_aligned", (Mem(StackBase(), 0, 32), zmm[0])),
            Instr("store_aligned", (Mem(StackBase(), 32, 32), zmm[1])),  # writes 64 bytes: the first's upper half
            Instr("load_aligned", (zmm[2], Mem(StackBase(), 0, 32))),
            Instr("store", (Mem(ArgBase(1), 0, 64), zmm[2])))
    kernel = Kernel("overlap", ARGS, body, (), TARGET, frozenset(), 2)
    with pytest.raises(VerifyError, match="no store wrote whole"):
        verify_kernel(kernel, {0: (0, 100)}, (1 << 61) - 1)


def test_two_groups_interleave_where_the_registers_hold_four():
    name = "he-1125899906826241"
    p = load(REPO / f"params/{name}.toml")
    interleave = {t.isa.name: ntt_interleave(design(p, t).layout, t) for t in p.targets}
    assert interleave == {"avx512": 2, "avx2": 1}  # groups of 8 vectors: 32 zmm registers, 16 ymm
    # the shipped NTTs (generated/ is what the generator emits: test_generated_bundle_is_current) spill nothing
    text = (REPO / "generated" / name / f"{name}.asm").read_text()
    for direction in ("forward", "inverse"):
        for isa in interleave:
            body = text.split(f"\nkg_he1125899906826241_ntt_{direction}_{isa}:\n", 1)[1].split("\n.end:", 1)[0]
            assert "vpaddq" in body and "; spill" not in body, (direction, isa)
