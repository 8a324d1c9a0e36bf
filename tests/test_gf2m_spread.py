"""Squares by spreading bits (GFNI): the byte affine row's semantics, the
spreading matrices against carry-less squares, the verifier's reading of
the row, and which ISAs' kernels square that way."""

from __future__ import annotations

import numpy as np

from kerngen.families import load
from kerngen.families.gf2m.build import build as gf2m_build
from kerngen.families.gf2m.vec import _spread
from kerngen.ir.instr import ArgBase, ArgSpec, Imm, Instr, Kernel, Mem, PhysReg, Table, TableBase
from kerngen.machine.ops import OPS, clmul
from kerngen.machine.target import make_target
from kerngen.passes.verify import verify_kernel

from test_gf2m import ROOT

AFFINE = OPS["vgf2p8affineqb"].blocks


def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def test_the_byte_affine_row_multiplies_each_byte_by_a_bit_matrix():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (64, 8), dtype=np.uint8)
    matrix = rng.integers(0, 256, (64, 8), dtype=np.uint8)
    x[0], matrix[0] = 0xFF, 0xFF
    for imm in (0x00, 0x5A, 0xFF):
        got = AFFINE.value((x, matrix), imm)
        for block in range(len(x)):
            for j in range(8):
                want = sum((_parity(int(matrix[block, 7 - i]) & int(x[block, j])) ^ (imm >> i & 1)) << i
                           for i in range(8))
                assert int(got[block, j]) == want


def test_the_spreading_matrices_and_a_byte_interleave_give_the_carry_less_square():
    rng = np.random.default_rng(8)
    words = np.concatenate([np.array([0, 2**64 - 1, 1, 2**63], dtype=np.uint64),
                            rng.integers(0, 2**64 - 1, 256, dtype=np.uint64, endpoint=True)])
    as_bytes = words.view(np.uint8).reshape(-1, 8)
    low, high = (AFFINE.value((as_bytes, np.broadcast_to(np.array([_spread(k)], dtype=np.uint64).view(np.uint8),
                                                           as_bytes.shape)), 0) for k in (0, 1))
    interleaved = np.stack([low, high], axis=-1).reshape(-1, 16).copy().view(np.uint64)
    square_low, square_high = clmul(words, words)
    assert interleaved[:, 0].tolist() == square_low.tolist()
    assert interleaved[:, 1].tolist() == square_high.tolist()


def _xmm(n: int) -> PhysReg:
    return PhysReg("vec", n, 128)


def _affine_kernel(matrix_is_input: bool, imm: int) -> Kernel:
    matrix = _xmm(0) if matrix_is_input else Mem(TableBase("spread"), 0, 16)
    body = [Instr("load", (_xmm(0), Mem(ArgBase(0), 0, 16))),
            Instr("vgf2p8affineqb", (_xmm(1), _xmm(0), matrix, Imm(imm))),
            Instr("store", (Mem(ArgBase(1), 0, 16), _xmm(1)))]
    args = (ArgSpec("x", "in", "uint64_t", 8, 2, 16), ArgSpec("out", "out", "uint64_t", 8, 2, 16))
    return Kernel("affine", args, tuple(body), (Table("spread", 8, (_spread(0),) * 2),), make_target("avx512", 64),
                  frozenset())


def test_the_verifier_reads_a_constant_matrix_as_linear_and_nothing_else_as_such():
    assert verify_kernel(_affine_kernel(False, 0), {}, None).forms[1] == frozenset({(0,)})
    assert verify_kernel(_affine_kernel(False, 1), {}, None).forms[1] == frozenset({(0,), ()})  # affine
    assert verify_kernel(_affine_kernel(True, 0), {}, None).forms[1] is None


def test_evex_kernels_square_by_spreading_and_avx2_ones_by_carry_less_products():
    p = load(ROOT / "params/gf2m-233.toml")
    squares = {f.kernel.target.isa.name: f for f in gf2m_build(p, msqr_steps=()).functions if f.kind == "gf2m_sqr"}
    ops = {isa: [ins.op for ins in f.kernel.body] for isa, f in squares.items()}
    assert "vpclmulqdq" not in ops["avx512"] and ops["avx512"].count("vgf2p8affineqb") == 4
    assert "gfni" in squares["avx512"].cpu
    assert ops["avx2"].count("vpclmulqdq") == 4 and "gfni" not in squares["avx2"].cpu
