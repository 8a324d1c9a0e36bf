"""Two-source permutations by an index register (vpermi2q, vpermt2q): the lane moves of 512-bit
registers swap 128-bit units at distance 128 with one a result, their index a constant the kernel
holds; the verifier and the model follow them by that register's contents, the verifier refuses
contents it does not know, and the selfcheck tells the two rows apart on the CPU."""

from __future__ import annotations

import dataclasses
import re

import pytest

from kerngen.errors import VerifyError
from kerngen.harness.cpu import cpu_flags
from kerngen.harness.selfcheck import selfcheck
from kerngen.ir.instr import ArgBase, ArgSpec, Builder, Instr, Kernel, Mem, PhysReg, Table, TableBase, VReg
from kerngen.machine.ops import InstructionTable, spec
from kerngen.machine.registers import VECTOR
from kerngen.machine.target import make_target
from kerngen.families.ntt.shuffles import Swap, lane_moves
from kerngen.passes.interpret import compile_kernel
from kerngen.passes.verify import verify_kernel

from test_avx512 import _params
from conftest import STORE

LANES, Q = 16, 8380417  # 32-bit lanes of a zmm register
X = [1000 * k + 7 for k in range(LANES)]
Y = [3 * k + 1 << 20 for k in range(LANES)]


def _zmm(n: int) -> PhysReg:
    return PhysReg(VECTOR, n, 512)


def _picked(indices: list[int]) -> list[int]:
    """The 32-bit lanes vpermi2q leaves: 64-bit unit k of X : Y laid end to end, by the low four bits of
    index k (the CPU ignores the others)."""
    both = X + Y
    return [both[2 * (indices[k // 2] & 15) + k % 2] for k in range(LANES)]


def _kernel(indices: list[int] | None) -> Kernel:
    """out = vpermi2q(index, X, Y), the index a constant table, or (None) the kernel's input."""
    index = Mem(TableBase("I"), 0, 64) if indices is not None else Mem(ArgBase(1), 0, 64)
    body = (Instr("load", (_zmm(0), Mem(TableBase("X"), 0, 64))), Instr("load", (_zmm(1), Mem(TableBase("Y"), 0, 64))),
            Instr("load", (_zmm(2), index)), Instr("vpermi2q", (_zmm(2), _zmm(0), _zmm(1))),
            Instr("store", (Mem(ArgBase(0), 0, 64), _zmm(2))))
    halves = [] if indices is None else [v >> 32 * h & 0xFFFFFFFF for v in indices for h in (0, 1)]
    tables = {"X": X, "Y": Y} | ({"I": halves} if indices is not None else {})
    args = (ArgSpec("out", "out", "uint32_t", 4, LANES, 64),) + \
        ((ArgSpec("index", "in", "uint32_t", 4, LANES, 64),) if indices is None else ())
    return Kernel("permuted", args, body, tuple(Table(label, 4, tuple(v)) for label, v in tables.items()),
                  make_target("avx512", 32), frozenset())


@pytest.mark.parametrize("indices", [[0, 1, 8, 9, 4, 5, 12, 13], [15, 0, 7, 8, 3, 3, 12, 1],
                                     [0x30 | k for k in range(8, 16)]])  # bits above the fourth ignored
def test_the_verifier_and_the_model_follow_the_index_register(indices):
    want = _picked(indices)
    proof = verify_kernel(_kernel(indices), {}, Q, signed=False)
    assert proof.outputs[0] == tuple((v, v) for v in want)
    assert compile_kernel(_kernel(indices)).run({})[0][0].tolist() == want


def test_an_index_register_of_unknown_contents_is_refused():
    with pytest.raises(VerifyError, match="index register whose contents are not a known constant"):
        verify_kernel(_kernel(None), {1: (0, 15)}, Q, signed=False)


@pytest.mark.parametrize("lane_bits", [16, 32, 64])
def test_128_bit_units_at_distance_128_take_one_permutation_a_result(lane_bits):
    moves = lane_moves(lane_bits, 512)
    step = Swap(lane_bit=(128 // lane_bits).bit_length() - 1, slot_bit=0)
    assert [op for _, op, *_ in moves.recipe(step)] == ["vpermi2q", "vpermi2q"]
    assert moves.cost(step) == 4  # with the copies of the index register each overwrites
    lanes = 512 // lane_bits
    lo, hi = moves.simulate(step, list(range(lanes)), list(range(lanes, 2 * lanes)))
    per = 128 // lane_bits  # lo: the even 128-bit units of both, hi the odd ones
    units = [(k // per, k % per) for k in range(lanes)]
    assert lo == [lanes + (u - 1) * per + w if u % 2 else u * per + w for u, w in units]
    assert hi == [lanes + u * per + w if u % 2 else (u + 1) * per + w for u, w in units]
    # ymm registers keep vperm2i128, zmm ones at distance 256 vshufi64x2: one instruction a result by an immediate
    assert {op for _, op, *_ in lane_moves(lane_bits, 256).recipe(step)} == {"vperm2i128"}
    far = Swap(lane_bit=step.lane_bit + 1, slot_bit=0)
    assert {op for _, op, *_ in moves.recipe(far)} == {"vshufi64x2"} and moves.cost(far) == 2


def test_the_index_is_loaded_once_into_a_held_register():
    moves, b = lane_moves(32, 512), Builder(512)
    step = Swap(lane_bit=2, slot_bit=0)
    for _ in range(3):
        moves.emit(b, b.vreg(512), b.vreg(512), step)
    assert [ins.op for ins in b.prelude] == ["load", "load"]
    assert [ins.op for ins in b.instrs] == ["copy", "vpermi2q"] * 6
    held = {ins.operands[0] for ins in b.prelude}
    assert {ins.operands[1] for ins in b.instrs if ins.op == "copy"} == held
    assert all(isinstance(op, VReg) for ins in b.instrs for op in ins.operands)


@pytest.mark.skipif("avx512f" not in cpu_flags(), reason="this CPU has no AVX-512")
def test_the_selfcheck_tells_the_two_rows_apart(tmp_path):
    """vpermt2q given vpermi2q's route (the index where its first table is) fails with a witness on the CPU."""
    rows = {"vpermi2q": spec("vpermi2q"), "vpermt2q": dataclasses.replace(spec("vpermt2q"), move=spec("vpermi2q").move)}
    report = selfcheck(tmp_path, cpu_flags(), InstructionTable(rows))
    assert report.passed and all(entry.startswith("vpermi2q (") for entry in report.passed)
    assert report.failed and all(entry.startswith("vpermt2q (") and "CPU 0x" in entry for entry in report.failed)


def test_zmm_ntts_permute_by_held_index_registers():
    bundle = STORE.bundle(_params("kyber"))
    from kerngen.emission.printer import body_text
    found = False
    for f in bundle.functions:
        text = "\n".join(body_text(f.kernel.body, f.kernel.target))
        permutes = re.findall(r"vpermi2q\s+(zmm\d+)", text)
        if f.isa != "avx512":
            assert not permutes and "vpermt2q" not in text
            continue
        indices = re.findall(r"vmovdqu64\s+(zmm\d+), \[rel \w*index64", text)
        assert len(indices) == len(set(indices)) <= 2, f.symbol  # each index loaded once, and held
        found = found or bool(permutes)
    assert found
