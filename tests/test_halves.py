"""`passes.halves`: a lane move of whole 256-bit halves of loaded argument
vectors becomes a ymm load and an insert from memory, and only where the
loads can go and memory still holds what they loaded."""

from __future__ import annotations

import numpy as np

from kerngen.ir.instr import ArgBase, ArgSpec, Imm, Instr, Kernel, Mem, PhysReg, VReg
from kerngen.machine.encoding import EVEX, VEX
from kerngen.machine.ops import LOAD_HALVES
from kerngen.machine.target import make_target
from kerngen.passes.halves import load_halves
from kerngen.passes.interpret import compile_kernel

A, B, LOW, HIGH = VReg(0, 512), VReg(1, 512), VReg(2, 512), VReg(3, 512)
LOWS, HIGHS = 0x44, 0xEE  # vshufi64x2: the low halves of both sources, the high halves


def _body(between: list[Instr] = ()) -> list[Instr]:
    return [Instr("load", (A, Mem(ArgBase(0), 0, 64))), Instr("load", (B, Mem(ArgBase(0), 64, 64))),
            *between,
            Instr("vshufi64x2", (LOW, A, B, Imm(LOWS))), Instr("vshufi64x2", (HIGH, A, B, Imm(HIGHS))),
            Instr("store", (Mem(ArgBase(0), 0, 64), LOW)), Instr("store", (Mem(ArgBase(0), 64, 64), HIGH))]


def test_halves_of_two_loaded_vectors_are_loaded_as_halves():
    out = load_halves(_body(), EVEX)
    assert [ins.op for ins in out] == [LOAD_HALVES, LOAD_HALVES, "store", "store"]
    assert out[0].operands == (LOW, Mem(ArgBase(0), 0, 32), Mem(ArgBase(0), 64, 32))
    assert out[1].operands == (HIGH, Mem(ArgBase(0), 32, 32), Mem(ArgBase(0), 96, 32))


def test_nothing_changes_where_a_load_must_stay_or_memory_changed_or_the_encoding_has_no_form():
    other_reader = [Instr("vpaddq", (VReg(4, 512), A, A)), Instr("store", (Mem(ArgBase(1), 0, 64), VReg(4, 512)))]
    overwritten = [Instr("store", (Mem(ArgBase(0), 0, 64), B))]
    for body in (_body(other_reader), _body(overwritten)):
        assert load_halves(body, EVEX) == body
    assert load_halves(_body(), VEX) == _body()


def test_the_model_runs_the_rewritten_kernel_as_the_moves():
    """Both bodies, allocated by hand, give the same bytes on the model: the halves regrouped."""
    def allocated(body):
        regs = {A: 0, B: 1, LOW: 2, HIGH: 3}
        return tuple(Instr(ins.op, tuple(PhysReg("vec", regs[op], 512) if isinstance(op, VReg) else op
                                         for op in ins.operands)) for ins in body)
    data = np.arange(32, dtype=np.uint32)[None] * 0x01010101
    outs = []
    for body in (_body(), load_halves(_body(), EVEX)):
        kernel = Kernel("halves", (ArgSpec("a", "inout", "uint32_t", 4, 32, 128),), allocated(body), (),
                        make_target("avx512", 32), frozenset())
        outs.append(compile_kernel(kernel).run({0: data})[0])
    words = data[0].reshape(4, 8)  # 256-bit quarters of the two vectors: A.lo, A.hi, B.lo, B.hi
    assert np.array_equal(outs[0], outs[1])
    assert outs[1][0].tolist() == np.concatenate([words[0], words[2], words[1], words[3]]).tolist()
