"""Shoup's product from 52-bit multiply-adds (AVX-512 IFMA): the template's
proof, its steps on integers by the table's semantics, the verifier's check
of the NTT butterflies that use it, and a bundle against SymPy."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kerngen.commands.test import test_params as run_kerngen_test
from kerngen.errors import VerifyError
from kerngen.families import from_mapping
from kerngen.families.ntt.build import build
from kerngen.families.ntt.design import design
from kerngen.families.ntt.shoup import Shoup
from kerngen.families.ntt.reducers import const_label
from kerngen.harness.cpu import cpu_flags
from kerngen.ir.instr import Mem, TableBase
from kerngen.machine.isa import AVX2, AVX512
from kerngen.machine.ops import by_width, spec, unsigned
from kerngen.passes import ifma
from kerngen.passes.verify import verify_kernel

Q50 = 1125899906826241  # 2^50 - 2^14 + 1 (he-1125899906826241)
Q62 = 4611686018326724609


def _params(n: int, q: int, **keys):
    return from_mapping({"name": f"i{n}-{q}", "family": "ntt", "n": n, "q": q, "width": 64, **keys}, "test")


def _run(steps, x: int, w: int, q: int) -> int:
    """The steps on integers, each by the instruction table's own lane semantics."""
    env = {"x": x, "w": w, "wp": (w << ifma.BITS) // q, "zero": 0, "negq": (1 << ifma.BITS) - q, "mask": ifma.MASK}
    for op, dst, *sources in steps:
        env[dst] = unsigned(spec(by_width(op, 64)).arith.exact(tuple(env[s] for s in sources), 64), 64)
    return env[steps[-1][1]]


def test_the_template_is_proven():
    ifma._prove(ifma.SHOUP52)


@pytest.mark.parametrize("at, broken", [
    (2, ("madd52hi", "u", "t", "quotient", "negq")),  # the high half of Q*(2^52 - q)
    (2, ("madd52lo", "u", "zero", "quotient", "negq")),  # x*w's low half left out
    (3, ("and", "r", "u", "x")),  # masked by something else
])
def test_a_template_with_a_wrong_step_is_refused(at, broken):
    steps = ifma.SHOUP52[:at] + (broken,) + ifma.SHOUP52[at + 1:]
    with pytest.raises(ifma.Shoup52Error, match="not proven|no proof rule"):
        ifma._prove(steps)


def test_the_steps_compute_shoups_product():
    rng = random.Random(52)
    for _ in range(2000):
        x, w = rng.randrange(4 * Q50), rng.randrange(Q50)
        r = _run(ifma.SHOUP52, x, w, Q50)
        assert r % Q50 == x * w % Q50 and r < 2 * Q50
    assert _run(ifma.SHOUP52, 4 * Q50 - 1, Q50 - 1, Q50) < 2 * Q50


def test_the_product_is_a_candidate_where_the_isa_has_it_and_q_fits_and_the_cost_model_takes_it():
    assert [m.ifma for m in Shoup.candidates(Q50, 64, AVX512)] == [False, True]
    assert [m.ifma for m in Shoup.candidates(Q62, 64, AVX512)] == [False]  # 4q beyond 2^52
    assert [m.ifma for m in Shoup.candidates(Q50, 64, AVX2)] == [False]  # no multiply-adds
    assert Shoup.candidates(Q50, 64, AVX512)[1].constant(3).wp == (3 << 52) // Q50
    p = _params(16, Q50, isa=["avx512"])
    assert design(p).mul.ifma and not design(_params(16, Q62, isa=["avx512"])).mul.ifma


@pytest.fixture(scope="module")
def small():
    return build(_params(16, Q50, isa=["avx512"]))


def _forward(bundle):
    return next(f for f in bundle.functions if f.kind == "ntt_forward")


def test_the_forward_ntt_is_proven_from_multiply_adds(small):
    fwd = _forward(small)
    proof = verify_kernel(fwd.kernel, {0: (0, Q50 - 1)}, Q50, signed=False)
    assert proof.products_checked >= 4 * 16 // 2 // 8  # layers x butterflies per layer / lanes
    assert any(ins.op == "vpmadd52huq" for ins in fwd.kernel.body)
    assert not any(ins.op == "vpmuludq" for ins in fwd.kernel.body)
    assert "avx512ifma" in fwd.manifest()["cpu"]


def test_an_input_beyond_52_bits_is_refused(small):
    """The multiply-adds read 52 bits of x: an input bound of 2^52 is refused, not wrapped."""
    with pytest.raises(VerifyError, match="read 52 bits"):
        verify_kernel(_forward(small).kernel, {0: (0, 1 << ifma.BITS)}, Q50, signed=False)


def test_a_wrong_52_bit_quotient_in_the_tables_is_refused(small):
    fwd = _forward(small)
    [table] = [t for t in fwd.kernel.tables if "twiddles" in t.label]
    values = list(table.values)
    at = next(i for i, v in enumerate(values) if v >= Q50)  # the first w' stored
    values[at] += 1
    mutant = dataclasses.replace(fwd.kernel, tables=tuple(dataclasses.replace(t, values=tuple(values))
                                                          if t is table else t for t in fwd.kernel.tables))
    with pytest.raises(VerifyError, match="52-bit Shoup product"):
        verify_kernel(mutant, {0: (0, Q50 - 1)}, Q50, signed=False)


def test_a_high_half_in_place_of_the_low_one_is_refused(small):
    fwd = _forward(small)
    body = list(fwd.kernel.body)
    at = next(i for i, ins in enumerate(body) if ins.op == "vpmadd52luq")
    body[at] = dataclasses.replace(body[at], op="vpmadd52huq")
    with pytest.raises(VerifyError, match="not the steps"):
        verify_kernel(dataclasses.replace(fwd.kernel, body=tuple(body)), {0: (0, Q50 - 1)}, Q50, signed=False)


def test_the_accumulators_start_from_zeroed_registers_and_no_constant_is_loaded_unread(small):
    body = _forward(small).kernel.body
    assert sum(ins.op == "zero" for ins in body) == 2 * sum(ins.op == "vpmadd52huq" for ins in body)
    loaded = [ins.operands[1].base.label for ins in body if ins.op == "load" and isinstance(ins.operands[1].base,
                                                                                            TableBase)]
    assert const_label(0, 64) not in loaded and const_label(Q50, 64) not in loaded  # the products take 2^52 - q


def test_an_accumulator_not_zeroed_is_refused(small):
    """The verifier follows the zeroing idiom as the value 0: another constant in its place is caught."""
    fwd = _forward(small)
    body = list(fwd.kernel.body)
    at = next(i for i, ins in enumerate(body) if ins.op == "zero")
    mask = next(op for ins in body for op in ins.operands
                if isinstance(op, Mem) and op.base == TableBase(const_label(ifma.MASK, 64)))
    body[at] = dataclasses.replace(body[at], op="load", operands=(body[at].operands[0], mask))
    with pytest.raises(VerifyError, match="takes zero"):
        verify_kernel(dataclasses.replace(fwd.kernel, body=tuple(body)), {0: (0, Q50 - 1)}, Q50, signed=False)


def test_the_ifma_kernels_pass_against_sympy_on_the_model():
    """What a CPU without AVX-512 runs: the multiply-adds and the zeroing idiom by the table's semantics."""
    outcome = run_kerngen_test(_params(16, Q50, isa=["avx512"]), seed=3, say=lambda s: None, on_model=True)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 20


def test_a_bundle_with_avx2_twins_passes_against_sympy():
    """Multiply-adds beside 64-bit products from pieces: one contract per function (each ensures bound the
    wider of the two), one dispatch unit; the standard order, as the ISAs' fastest orders differ."""
    if not {"avx512f", "avx512ifma"} <= cpu_flags():
        pytest.skip("runs on the model once `kerngen test` has it")
    outcome = run_kerngen_test(_params(16, Q50, isa=["avx512", "avx2"], order="standard"), seed=5,
                               say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 80
