"""Bitwise pairs fused into ternary instructions, movements rewritten into
the encoding's rows, and the verifier's GF(2) forms of masked xors."""

from __future__ import annotations

import random

from kerngen.ir.instr import ArgBase, ArgSpec, Builder, Imm, Instr, Kernel, Mem, PhysReg, Table, TableBase, VReg
from kerngen.ir.lanes import move_lanes
from kerngen.machine.isa import AVX2, AVX512
from kerngen.machine.ops import spec, unsigned
from kerngen.machine.registers import MASK
from kerngen.machine.target import make_target
from kerngen.passes.fuse import fuse_bitwise
from kerngen.passes.legalise import legalise
from kerngen.passes.verify import verify_kernel

W = 64
RNG = random.Random(7)
TABLE = TableBase("column")
COLUMN = [RNG.getrandbits(W) for _ in range(4)]


def _run(body: list[Instr], inputs: dict[VReg, int]) -> dict[VReg, int]:
    """Every value the body computes, on one 64-bit lane, from the table's rows alone (no verifier)."""
    env = dict(inputs)
    for ins in body:
        sources = [op.value if isinstance(op, Imm) else COLUMN[op.offset // 8] if isinstance(op, Mem) else env[op]
                   for op in ins.read]
        env[ins.operands[0]] = unsigned(spec(ins.op).arith.value(tuple(sources), W), W)
    return env


def _chain(b: Builder) -> tuple[list[VReg], list[Instr], VReg]:
    """((x ^ y) & m) ^ (z | w) ^ column, each intermediate read once."""
    x, y, z, w, m = (b.vreg(256) for _ in range(5))
    t, u, v, d, e = (b.vreg(256) for _ in range(5))
    body = [Instr("vpxor", (t, x, y)), Instr("vpand", (u, t, m)), Instr("vpor", (v, z, w)),
            Instr("vpxor", (d, u, v)), Instr("vpxor", (e, d, Mem(TABLE, 8, 32)))]
    return [x, y, z, w, m], body, e


def test_bitwise_pairs_become_ternary_instructions_computing_the_same():
    b = Builder(256)
    inputs, body, result = _chain(b)
    fused = fuse_bitwise(body, AVX512)
    # (x ^ y) & m as one; (z | w) ^ that as another; the xor of the memory operand reads a ternary result
    assert [ins.op for ins in fused] == ["vpternlogq", "vpternlogq", "vpxor"]
    for ins in fused:
        if ins.op == "vpternlogq":
            assert ins.operands[0] is ins.operands[1]  # the destination is its first source, which dies there
    final = fused[-1].operands[0]
    for _ in range(50):
        values = {r: RNG.getrandbits(W) for r in inputs}
        assert _run(fused, values)[final] == _run(body, values)[result]


def test_a_fused_pair_keeps_its_operands_meaning_whatever_their_order():
    """~x & column, then z | that: the dying x goes first, z second, the memory operand last."""
    b = Builder(256)
    x, z, t, d = (b.vreg(256) for _ in range(4))
    body = [Instr("vpandn", (t, x, Mem(TABLE, 16, 32))), Instr("vpor", (d, z, t))]
    (fused,) = fuse_bitwise(body, AVX512)
    assert fused.op == "vpternlogq" and fused.operands[1:4] == (x, z, Mem(TABLE, 16, 32))
    for _ in range(50):
        values = {x: RNG.getrandbits(W), z: RNG.getrandbits(W)}
        assert _run([fused], values)[x] == _run(body, values)[d]


def test_nothing_is_fused_without_a_ternary_row_or_where_a_value_is_needed_twice():
    b = Builder(256)
    _, body, _ = _chain(b)
    assert fuse_bitwise(body, AVX2) == body
    x, y, z, t, d = (b.vreg(256) for _ in range(5))
    twice = [Instr("vpxor", (t, x, y)), Instr("vpxor", (d, t, z)), Instr("store", (Mem(ArgBase(0), 0, 32), t))]
    assert fuse_bitwise(twice, AVX512) == twice
    # a source of the inner xor written in place before the outer one reads: the pair stays apart
    k = b.kreg(256)
    rewritten = [Instr("vpxor", (t, x, y)), Instr("vpxorq_evex_merge", (x, k, x, z)),
                 Instr("vpxor", (d, t, x))]
    assert fuse_bitwise(rewritten, AVX512) == rewritten


def test_a_halves_permutation_without_an_evex_form_becomes_the_same_movement():
    b = Builder(256)
    p, q, d = (b.vreg(256) for _ in range(3))
    target = make_target("avx512", 64)
    for imm in (0x20, 0x13, 0x11, 0x30, 0x21, 0x02):
        (out,) = legalise([Instr("vperm2i128", (d, p, q, Imm(imm)))], target, b)
        assert out.op == "vshufi64x2" and out.operands[0] is d
        lanes = {p: ["p0", "p1"], q: ["q0", "q1"]}
        want = move_lanes(spec("vperm2i128"), [lanes[p], lanes[q]], imm, 128, 2, None)
        got = move_lanes(spec(out.op), [lanes[r] for r in out.operands[1:3]], out.operands[3].value, 128, 2, None)
        assert got == want, hex(imm)


def _ymm(n: int) -> PhysReg:
    return PhysReg("vec", n, 256)


def _masked_columns(old_is_source: bool) -> Kernel:
    """acc = column where bit 63 of x is set (else 0), then acc += column under the same mask: with the
    accumulator as the xor's source a linear map of x; with another register (a constant) there, the
    old lane is replaced where the bit is set, which the verifier reads as a product of the bit and it."""
    mask = PhysReg(MASK, 1, 256)
    column = Mem(TableBase("column"), 0, 32)
    body = [Instr("load", (_ymm(0), Mem(ArgBase(0), 0, 32))), Instr("zero", (_ymm(1),)), Instr("load", (_ymm(3), column)),
            Instr("vpcmpgtq_k", (mask, _ymm(1), _ymm(0))),
            Instr("vpxorq_evex_zero", (_ymm(2), mask, _ymm(1), column)),
            Instr("vpxorq_evex_merge", (_ymm(2), mask, _ymm(2) if old_is_source else _ymm(3), column)),
            Instr("store", (Mem(ArgBase(1), 0, 32), _ymm(2)))]
    args = (ArgSpec("x", "in", "uint64_t", 8, 4, 32), ArgSpec("out", "out", "uint64_t", 8, 4, 32))
    return Kernel("masked", args, tuple(body), (Table("column", 8, tuple(COLUMN)),), make_target("avx512", 64),
                  frozenset())


def test_the_verifier_reads_masked_xors_of_columns_as_linear_maps():
    assert verify_kernel(_masked_columns(old_is_source=True), {}, None).forms[1] == frozenset({(0,)})
    assert verify_kernel(_masked_columns(old_is_source=False), {}, None).forms[1] == frozenset({(0,), (0, 0)})
