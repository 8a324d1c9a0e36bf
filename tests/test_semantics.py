"""Instruction semantics of any arity, read from the table: three sources
(ternary logic, its truth table the immediate), accumulating forms (the
destination also a source: IFMA's 52-bit multiply-add) and merge- and
zero-masking, on each evaluator — ints, numpy arrays, z3 — and in the
verifier's interval and exact evaluation of a kernel body."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import z3

from kerngen.errors import VerifyError
from kerngen.ir.instr import ArgBase, ArgSpec, Builder, Imm, Instr, Kernel, KReg, Mem, PhysReg, TableBase, Table
from kerngen.machine.encoding import EVEX
from kerngen.machine.isa import ISAS
from kerngen.machine.ops import OPS, TERNARY, Arith, by_width, spec, unsigned, wrap
from kerngen.machine.registers import GENERAL, MASK, MASKS, general_family, vector_family
from kerngen.machine.target import make_target
from kerngen.passes.lemmas import ScalarIdiom
from kerngen.passes.verify import verify_kernel

RNG = random.Random(33)
W = 64
LOW52 = (1 << 52) - 1


def _ternary_reference(a: int, b: int, c: int, table: int, bits: int) -> int:
    """Bit i of the result is bit ((a_i << 2) | (b_i << 1) | c_i) of the truth table."""
    out = 0
    for i in range(bits):
        index = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)
        out |= (table >> index & 1) << i
    return out


def _lanes(count: int) -> list[int]:
    return [wrap(RNG.getrandbits(W), W) for _ in range(count)]


# --- ternary logic -----------------------------------------------------------

@pytest.mark.parametrize("name,bits", [("vpternlogd", 32), ("vpternlogq", 64)])
def test_ternary_logic_is_the_truth_table_of_the_immediate_on_ints_and_arrays(name, bits):
    row = spec(name)
    assert by_width("ternary", bits) == name and [row.slots[k].kind for k in row.read] == ["v", "v", "vm", "i"]
    for _ in range(40):
        table = RNG.getrandbits(8)
        a, b, c = (wrap(RNG.getrandbits(bits), bits) for _ in range(3))
        expected = wrap(_ternary_reference(unsigned(a, bits), unsigned(b, bits), unsigned(c, bits), table, bits),
                        bits)
        assert row.arith.exact((a, b, c, table), bits) == expected, hex(table)
    # numpy: every combination of three 8-bit values at once, for every truth table
    grid = np.arange(1 << 24, dtype=np.int64)[::4099]
    a, b, c = grid & 0xFF, grid >> 8 & 0xFF, grid >> 16 & 0xFF
    for table in range(256):
        got = row.arith.exact((a, b, c, table), bits) & 0xFF
        want = [_ternary_reference(int(x), int(y), int(z), table, 8) for x, y, z in zip(a[:64], b[:64], c[:64])]
        assert list(got[:64]) == want, hex(table)


def test_ternary_logic_on_z3_is_the_bitwise_truth_table():
    row = spec("vpternlogd")
    a, b, c = (z3.BitVec(n, 32) for n in "abc")
    for table in [0x00, 0xFF, 0x96, 0xCA, 0xE8] + [RNG.getrandbits(8) for _ in range(5)]:
        got = row.arith.smt(z3, (a, b, c, table), 32)
        table_bits = z3.BitVecVal(table, 8)
        per_bit = [z3.Extract(i, i, got) == z3.Extract(0, 0, z3.LShR(table_bits, z3.ZeroExt(5, z3.Concat(
            z3.Extract(i, i, a), z3.Extract(i, i, b), z3.Extract(i, i, c))))) for i in range(32)]
        solver = z3.Solver()
        solver.add(z3.Not(z3.And(per_bit)))
        assert solver.check() == z3.unsat, hex(table)


def test_lemmas_run_a_three_source_step_with_its_immediate():
    # y = x ? 0x0F0F0F0F : 0x33333333, bit by bit (0xCA: a ? b : c), on 32-bit lanes
    idiom = ScalarIdiom("select", 3, (("ternary", "y", "x", 0x0F0F0F0F, 0x33333333, 0xCA),), 32)
    xs = [RNG.getrandbits(32) for _ in range(20)]
    for x in xs:
        want = wrap(x & 0x0F0F0F0F | ~x & 0x33333333, 32)
        assert idiom.run(wrap(x, 32)) == want
    x = z3.BitVec("x", 32)
    solver = z3.Solver()
    solver.add(idiom.symbolic(z3, x) != (x & 0x0F0F0F0F | ~x & 0x33333333))
    assert solver.check() == z3.unsat


# --- accumulating 52-bit multiply-add ----------------------------------------

def _madd52(d: int, a: int, b: int, high: bool) -> int:
    product = (unsigned(a, W) & LOW52) * (unsigned(b, W) & LOW52)
    return wrap(unsigned(d, W) + (product >> 52 if high else product & LOW52), W)


@pytest.mark.parametrize("name,high", [("vpmadd52luq", False), ("vpmadd52huq", True)])
def test_multiply_add_52_accumulates_into_the_destination(name, high):
    row = spec(name)
    assert row.slots[0].access == "rw" and row.read == (0, 1, 2)  # the destination is the first source
    samples = [tuple(_lanes(3)) for _ in range(200)] + [(-1, -1, -1), (0, LOW52, LOW52), ((1 << 63) - 1, -1, -1)]
    for d, a, b in samples:
        assert row.arith.exact((d, a, b), W) == _madd52(d, a, b, high)
    d, a, b = (np.array(column, dtype=np.int64) for column in zip(*samples))
    assert list(row.arith.exact((d, a, b), W)) == [_madd52(*s, high) for s in samples]
    vd, va, vb = (z3.BitVec(n, W) for n in ("d", "a", "b"))
    for d, a, b in samples[:20]:
        got = z3.simplify(row.arith.smt(z3, tuple(z3.BitVecVal(v, W) for v in (d, a, b)), W))
        assert wrap(got.as_long(), W) == _madd52(d, a, b, high)
    low = lambda x: z3.ZeroExt(52, z3.Extract(51, 0, x))  # noqa: E731
    product = low(va) * low(vb)
    added = z3.Extract(103, 52, product) if high else z3.Extract(51, 0, product)
    solver = z3.Solver()
    solver.add(row.arith.smt(z3, (vd, va, vb), W) != vd + z3.ZeroExt(12, added))
    assert solver.check() == z3.unsat


# --- masking -----------------------------------------------------------------

def _masked_reference(inner, old, bits, a, b, zeroing):
    return [inner(o, x, y) if m else 0 if zeroing else o for o, m, x, y in zip(old, bits, a, b)]


def _add(o, x, y):
    return wrap(x + y, W)


def _madd52_low(o, x, y):
    return _madd52(o, x, y, high=False)


def _xor(o, x, y):
    return x ^ y


@pytest.mark.parametrize("masking", ["merge", "zero"])
@pytest.mark.parametrize("name,inner", [("vpaddq_evex", _add), ("vpmadd52luq", _madd52_low), ("vpxorq_evex", _xor)])
def test_masking_on_ints_arrays_and_z3(name, inner, masking):
    row = spec(f"{name}_{masking}")
    zeroing = masking == "zero"
    accumulating = spec(name).slots[0].access == "rw"
    assert row.masking == masking and row.slots[1].kind == "k"
    # merging keeps, so reads, the old lanes; so does an accumulating form, whatever the masking
    assert row.slots[0].access == ("w" if zeroing and not accumulating else "rw")
    old, a, b = _lanes(16), _lanes(16), _lanes(16)
    bits = [RNG.getrandbits(1) for _ in range(16)]
    want = _masked_reference(inner, old, bits, a, b, zeroing)

    def sources(o, m, x, y):
        return (o, m, x, y) if row.slots[0].access == "rw" else (m, x, y)

    assert [row.arith.exact(sources(*s), W) for s in zip(old, bits, a, b)] == want
    arrays = [np.array(v, dtype=np.int64) for v in (old, bits, a, b)]
    assert list(row.arith.exact(sources(*arrays), W)) == want
    vo, vm, vx, vy = (z3.BitVec(n, W) for n in ("o", "m", "x", "y"))
    unmasked = spec(name).arith.smt(z3, (vo, vx, vy) if accumulating else (vx, vy), W)
    expected = z3.If(vm == 0, z3.BitVecVal(0, W) if zeroing else vo, unmasked)
    solver = z3.Solver()
    solver.add(row.arith.smt(z3, sources(vo, vm, vx, vy), W) != expected)
    assert solver.check() == z3.unsat
    for (o, m, x, y), w in list(zip(zip(old, bits, a, b), want))[:4]:
        got = z3.simplify(row.arith.smt(z3, sources(*(z3.BitVecVal(v, W) for v in (o, m, x, y))), W))
        assert wrap(got.as_long(), W) == w


def test_a_masked_instruction_names_its_mask_in_the_ir():
    b = Builder(256)
    k, x, y = b.kreg(), b.vreg(), b.vreg()
    ins = Instr("vpaddq_evex_merge", (x, k, x, y))
    assert isinstance(k, KReg) and ins.read == (x, k, x, y) and ins.written == (x,)
    with pytest.raises(ValueError):
        Instr("vpaddq_evex_merge", (x, x, y))


# --- the verifier ------------------------------------------------------------

_AVX2 = make_target("avx2", 64)
# the AVX2 target's registers with EVEX forms (no ISA of the table encodes them yet), as the verifier's
# messages spell instructions in the target's forms
TARGET = dataclasses.replace(_AVX2, isa=dataclasses.replace(_AVX2.isa, encoding=EVEX, families=(
    vector_family(32, EVEX.widths), general_family(), MASKS)))


def _ymm(n: int) -> PhysReg:
    return PhysReg("vec", n, 256)


def _kernel(tables: dict[str, list[int]], body: list[Instr], inputs: int, outputs: int) -> Kernel:
    args = tuple(ArgSpec(f"a{i}", "in" if i < inputs else "out", "int64_t", 8, 4, 32) for i in range(inputs + outputs))
    return Kernel("semantics", args, tuple(body), tuple(Table(label, 8, tuple(unsigned(v, W) for v in values))
                                                        for label, values in tables.items()), TARGET, frozenset())


def _load(reg: int, label: str) -> Instr:
    return Instr("load", (_ymm(reg), Mem(TableBase(label), 0, 32)))


def _store(arg: int, reg: int) -> Instr:
    return Instr("store", (Mem(ArgBase(arg), 0, 32), _ymm(reg)))


A, B, C = [5, -3, 7, 1 << 40], [1, 2, 3, 4], [100, 200, 300, 400]


def _ternary_body() -> tuple[Kernel, list[int]]:
    """vpternlogq with truth table 0xD8 over three constant vectors, and the result its lanes should have."""
    body = [_load(0, "A"), _load(1, "B"), _load(2, "C"),
            Instr("vpternlogq", (_ymm(3), _ymm(0), _ymm(1), _ymm(2), Imm(0xD8))), _store(0, 3)]
    expected = [wrap(_ternary_reference(unsigned(x, W), unsigned(y, W), unsigned(z, W), 0xD8, W), W)
                for x, y, z in zip(A, B, C)]
    return _kernel({"A": A, "B": B, "C": C}, body, 0, 1), expected


def _reversed(arith: Arith) -> Arith:
    """Ternary logic with the truth table's index bits reversed: (c << 2) | (b << 1) | a."""
    return Arith(lambda s, w: arith.value((s[2], s[1], s[0], s[3]), w),
                 lambda z3_, s, w: arith.smt(z3_, (s[2], s[1], s[0], s[3]), w))


def test_a_ternary_semantics_with_its_bit_order_reversed_is_caught(monkeypatch):
    kernel, expected = _ternary_body()
    assert verify_kernel(kernel, {}, (1 << 61) - 1).outputs[0] == tuple((v, v) for v in expected)
    monkeypatch.setitem(OPS, "vpternlogq", dataclasses.replace(spec("vpternlogq"), arith=_reversed(TERNARY)))
    assert verify_kernel(kernel, {}, (1 << 61) - 1).outputs[0] != tuple((v, v) for v in expected)
    # and z3 finds the inputs that tell the two apart
    a, b, c = (z3.BitVec(n, 64) for n in "abc")
    solver = z3.Solver()
    solver.add(spec("vpternlogq").arith.smt(z3, (a, b, c, 0xD8), 64) != TERNARY.smt(z3, (a, b, c, 0xD8), 64))
    assert solver.check() == z3.sat


def test_the_verifier_evaluates_ternary_accumulating_and_masked_rows_exactly():
    a, b, c = A, B, C
    mask = PhysReg(MASK, 1, 256)
    body = [_load(0, "A"), _load(1, "B"), _load(2, "C"), _load(3, "C"), _load(4, "C"), _load(7, "C"),
            Instr("vpcmpgtq_k", (mask, _ymm(0), _ymm(1))),
            Instr("vpaddq_evex_merge", (_ymm(2), mask, _ymm(0), _ymm(1))),
            Instr("vpaddq_evex_zero", (_ymm(5), mask, _ymm(0), _ymm(1))),
            Instr("vpternlogq", (_ymm(6), _ymm(0), _ymm(1), _ymm(4), Imm(0xD8))),
            Instr("vpmadd52luq", (_ymm(3), _ymm(0), _ymm(0))),
            Instr("vpmadd52huq", (_ymm(4), _ymm(0), _ymm(0))),
            Instr("vpmadd52luq_zero", (_ymm(7), mask, _ymm(0), _ymm(1))),
            _store(0, 2), _store(1, 5), _store(2, 6), _store(3, 3), _store(4, 4), _store(5, 7)]
    proof = verify_kernel(_kernel({"A": a, "B": b, "C": c}, body, 0, 6), {}, (1 << 61) - 1)
    bits = [int(x > y) for x, y in zip(a, b)]
    assert bits == [1, 0, 1, 1]
    expected = {
        0: _masked_reference(_add, c, bits, a, b, zeroing=False),
        1: _masked_reference(_add, c, bits, a, b, zeroing=True),
        2: [wrap(_ternary_reference(unsigned(x, W), unsigned(y, W), unsigned(z, W), 0xD8, W), W)
            for x, y, z in zip(a, b, c)],
        3: [_madd52(z, x, x, high=False) for x, z in zip(a, c)],
        4: [_madd52(z, x, x, high=True) for x, z in zip(a, c)],
        5: _masked_reference(_madd52_low, c, bits, a, b, zeroing=True),
    }
    for arg, values in expected.items():
        assert proof.outputs[arg] == tuple((v, v) for v in values), arg


def test_the_verifier_carries_intervals_through_an_undecided_mask():
    mask = PhysReg(MASK, 1, 256)
    body = [Instr("load", (_ymm(0), Mem(ArgBase(0), 0, 32))), _load(1, "TEN"), _load(2, "OLD"),
            Instr("vpcmpgtq_k", (mask, _ymm(0), _ymm(1))),  # x > 10: some inputs yes, some no
            Instr("vpaddq_evex_zero", (_ymm(3), mask, _ymm(0), _ymm(1))),
            Instr("vpaddq_evex_merge", (_ymm(2), mask, _ymm(0), _ymm(1))),
            _store(1, 3), _store(2, 2)]
    kernel = _kernel({"TEN": [10] * 4, "OLD": [1000] * 4}, body, 1, 2)
    proof = verify_kernel(kernel, {0: (0, 100)}, (1 << 61) - 1)
    assert proof.outputs[1] == ((0, 110),) * 4  # zero, or x + 10
    assert proof.outputs[2] == ((10, 1000),) * 4  # the old 1000, or x + 10
    # a masked addition is checked for overflow as the addition is
    with pytest.raises(VerifyError, match="overflow"):
        verify_kernel(kernel, {0: (0, (1 << 63) - 5)}, (1 << 61) - 1)


def test_the_evex_rows_are_only_the_evex_isas_choice():
    evex_only = {name for name, op in OPS.items() if op.forms and all(f.encoding is EVEX for f in op.forms)}
    assert evex_only == {"vpternlogd", "vpternlogq", "vpmadd52luq", "vpmadd52huq", "vpcmpgtq_k", "vpcmpuq_k",
                         "vpaddq_evex", "vpaddq_evex_merge", "vpaddq_evex_zero", "vpmadd52luq_merge", "vpmadd52luq_zero",
                         "vpxorq_evex", "vpxorq_evex_merge", "vpxorq_evex_zero",
                         "vshufi64x2", "valignq", "vbroadcasti64x4", "vextracti64x4", "vpshrdq", "vpsraq", "mullo64",
                         "minu64", "vpblendmw_imm", "vpblendmd_imm", "zero", "vptestmd_k", "vmovshdup_merge",
                         "vpermi2q", "vpermt2q", "vpermi2d", "vpermt2d", "vgf2p8affineqb", "load_halves"}
    generics = {(op.generic, op.elem or 0) for op in OPS.values() if op.generic}
    for isa in ISAS.values():
        chosen = {name for generic, bits in generics for name in isa.candidates(generic, bits)} & evex_only
        if isa.encoding is EVEX:
            assert {"minu64", "mullo64", "vpblendmw_imm", "vpblendmd_imm", "vpternlogq", "vpcmpuq_k",
                    "vpaddq_evex_merge", "vgf2p8affineqb"} <= chosen
        elif isa.register_use.lanes == GENERAL:  # 64-bit rows lowered onto general registers, not their EVEX form
            assert chosen <= {"minu64", "mullo64"}, isa.name
        else:
            assert not chosen, (isa.name, chosen)
    assert all(f.encoding is EVEX and "AVX512IFMA" in f.extensions for f in spec("vpmadd52luq_merge").forms)
