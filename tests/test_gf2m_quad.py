"""GF(2^m) on whole EVEX registers: the one-pass reduction's terms against
polynomial arithmetic, the table rows' movements, and the multiplication
and squaring kernels through the passes (verified as GF(2)-bilinear and
linear maps) for an ISA of 512-bit EVEX registers built here."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kerngen.core.compile_cache import CompileCache
from kerngen.families.gf2m import build as gf2m_build, quad
from kerngen.families.gf2m.params import Gf2mParams
from kerngen.families.gf2m.plan import field_plan, lazy_plan, shift_terms
from kerngen.families.gf2m.reduce import one_pass_pays
from kerngen.ir.lanes import move_lanes
from kerngen.machine.encoding import EVEX
from kerngen.machine.isa import AVX2
from kerngen.machine.ops import spec
from kerngen.machine.registers import MASKS, general_family, vector_family
from kerngen.machine.target import PLATFORMS, Target

FIELDS = [(233, (233, 74, 0)), (193, (193, 15, 0)), (251, (251, 7, 4, 2, 0)), (256, (256, 10, 5, 2, 0))]


def _rem(c: int, f: int, m: int) -> int:
    while c.bit_length() > m:
        c ^= f << (c.bit_length() - 1 - m)
    return c


def _by_terms(plan, c: int, bound: int) -> int:
    out = c
    for b, t in shift_terms(plan, bound):
        out ^= (c >> b << b) >> t
    return out & ((1 << plan.m) - 1)


@pytest.mark.parametrize("m,poly", FIELDS, ids=lambda x: str(x))
def test_shift_terms_reduce_like_division(m, poly):
    rng = random.Random(m)
    for plan, deg in ((field_plan(m, poly), m), (lazy_plan(field_plan(m, poly)), 64 * ((m + 63) // 64))):
        f = sum(1 << e for e in plan.poly)
        bound = 2 * deg - 2
        for c in [(1 << (bound + 1)) - 1] + [rng.getrandbits(bound + 1) for _ in range(200)]:
            assert _by_terms(plan, c, bound) == _rem(c, f, plan.m)


def test_shift_terms_of_233_need_two_masks():
    # x^233 + x^74 + 1: one fold brings degree 464 to 305, the second to 146; four shifted copies in all
    assert shift_terms(field_plan(233, (233, 74, 0)), 464) == ((233, 159), (233, 233), (392, 318), (392, 392))


def test_valignq_and_256_bit_moves():
    lanes = list(range(8))
    high = [10 + k for k in range(8)]
    # (first : second) >> 3 limbs, the second source the lower
    assert move_lanes(spec("valignq"), [high, lanes], 3, 64, 8, None) == [3, 4, 5, 6, 7, 10, 11, 12]
    assert move_lanes(spec("vbroadcasti64x4"), [lanes[:4]], None, 64, 8, None) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert move_lanes(spec("vextracti64x4"), [lanes], 1, 64, 4, None) == [4, 5, 6, 7]
    assert move_lanes(spec("vbroadcasti128"), [lanes[:2]], None, 64, 4, None) == [0, 1, 0, 1]


def _evex_target() -> Target:
    isa = dataclasses.replace(AVX2, name="avx512", vector_bits=512, encoding=EVEX,
                              families=(vector_family(32, EVEX.widths), general_family(), MASKS),
                              extensions=AVX2.extensions | {"AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ"})
    return Target(isa, 64, PLATFORMS["sysv"])


def test_whole_register_kernels_verify_and_count():
    """mul and sqr, reduced and lazy, on an EVEX ISA: the verifier finds the
    bilinear and linear maps (`build` raises otherwise); multiplication on
    whole ymm registers with eight carry-less products of two lanes each,
    squaring on xmm pairs by spreading bits."""
    t = _evex_target()
    p = Gf2mParams("gf2m-233", 233, (233, 74, 0), ("avx512",), "kg_gf2m233", "<test>", (t,), ("sysv",))
    compiled = {}
    real = gf2m_build.compile_kernel

    def only_products(b, symbol, *args, **kwargs):
        if not any(f"_{k}_" in symbol for k in ("mul", "sqr", "mul_lazy", "sqr_lazy")):
            raise gf2m_build.AllocationError("not built here")  # a GPR kernel's way out of `_kernels`
        compiled[symbol] = c = real(b, symbol, *args, **kwargs)
        return c

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gf2m_build, "compile_kernel", only_products)
        with pytest.raises(gf2m_build.AllocationError):
            gf2m_build._kernels(p, t, None, (), CompileCache())
    assert set(compiled) == {f"kg_gf2m233_{k}_avx512" for k in ("mul", "sqr", "mul_lazy", "sqr_lazy")}
    assert {"mul", "mul_lazy"} <= quad.WHOLE
    for symbol, c in compiled.items():
        body = c.kernel.body
        clmuls = [ins for ins in body if ins.op == "vpclmulqdq"]
        if symbol.removeprefix("kg_gf2m233_").removesuffix("_avx512") not in quad.WHOLE:  # squares on pairs of limbs
            assert not clmuls and {ins.operands[0].bits for ins in body if ins.op == "vgf2p8affineqb"} == {128}
            continue
        assert [ins.operands[0].bits for ins in clmuls] == [256] * 8
        assert {"AVX512F", "AVX512VL", "AVX512VBMI2", "VPCLMULQDQ"} <= c.kernel.extensions
        assert "valignq" in {ins.op for ins in body} and "vpshrdq" in {ins.op for ins in body}
        assert "vpternlogq" in {ins.op for ins in body}  # the reduction's xors, three at a time
        assert not any(ins.op == "copy" for ins in body)  # every vpternlogq overwrites a source read no more
    # the reduced squaring folds in one pass (`reduce_one_pass`): per output pair three of its four terms
    # are a shift of two limbs at once; the lazy one streams from the top pair down, with none
    shifts = {s: sum(ins.op == "vpshrdq" for ins in c.kernel.body) for s, c in compiled.items()}
    assert shifts["kg_gf2m233_sqr_avx512"] == 6 and shifts["kg_gf2m233_sqr_lazy_avx512"] == 0


def test_ternary_linearity_and_destructive_printing():
    from kerngen.emission.printer import instr_text
    from kerngen.ir.instr import Imm, Instr, PhysReg
    from kerngen.machine.ops import ternary_is_linear

    assert ternary_is_linear(quad.XOR3, (False, False, False))
    assert ternary_is_linear(quad.XOR_AND, (False, False, True))  # (a ^ b) & mask
    assert not ternary_is_linear(quad.XOR_AND, (False, False, False))  # and of two variables
    assert not ternary_is_linear(quad.truth_table(lambda a, b, c: a ^ b ^ c ^ 1), (False, False, False))
    z = [PhysReg("vec", k, 512) for k in range(3)]
    assert instr_text(Instr("vpternlogq", (z[0], z[0], z[1], z[2], Imm(quad.XOR3))), _evex_target()).split() == \
        ["vpternlogq", "zmm0,", "zmm1,", "zmm2,", "150"]
    with pytest.raises(AssertionError, match="destination"):
        instr_text(Instr("vpternlogq", (z[0], z[1], z[1], z[2], Imm(quad.XOR3))), _evex_target())


def test_vpshrdq_semantics_exact_and_smt_agree():
    z3 = pytest.importorskip("z3")
    row = spec("vpshrdq")
    rng = random.Random(5)
    for r in (1, 31, 41, 62, 63):
        for _ in range(20):
            a, b = rng.getrandbits(64), rng.getrandbits(64)
            want = ((b << 64 | a) >> r) & ((1 << 64) - 1)
            assert row.arith.exact((a, b, r), 64) % (1 << 64) == want
            got = z3.simplify(row.arith.smt(z3, (z3.BitVecVal(a, 64), z3.BitVecVal(b, 64), r), 64)).as_long()
            assert got == want


def test_one_pass_reduction_chosen_for_trinomials_needing_a_second_full_fold():
    """`one_pass_pays`: the one pass where its terms are no more than the
    folds' (233, 409), not for the pentanomials whose terms multiply."""
    fields = {163: (163, 7, 6, 3, 0), 233: (233, 74, 0), 283: (283, 12, 7, 5, 0), 409: (409, 87, 0),
              571: (571, 10, 5, 2, 0)}
    chosen = {m: one_pass_pays(field_plan(m, poly), 2 * m - 2) for m, poly in fields.items()}
    assert chosen == {163: False, 233: True, 283: False, 409: True, 571: False}

