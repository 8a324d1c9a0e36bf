"""64-bit lanes: products from 32-bit pieces (the templates, their proof and
the verifier's recognition of them), the conditional subtraction without an
unsigned minimum, Montgomery's product on unsigned lanes for base
multiplication, the parameters, and whole bundles against SymPy."""

from __future__ import annotations

import dataclasses
import random

import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

from kerngen.commands.test import test_params as run_kerngen_test
from kerngen.errors import ParamError, VerifyError
from kerngen.families import from_mapping
from kerngen.families.ntt.build import build
from kerngen.families.ntt.csub import conditional_subtraction
from kerngen.ir.instr import Imm
from kerngen.machine.ops import by_width, spec, unsigned
from kerngen.passes import wide
from kerngen.passes.lemmas import LemmaError, prove, prove_shoup
from kerngen.passes.verify import verify_kernel
from kerngen.machine.isa import AVX2, AVX512, SCALAR, SSE

Q62 = 4611686018326724609  # NFLlib's 62-bit prime, 2^62 - 3*2^25 + 1
Q50 = 1125899906826241  # a 50-bit prime = 1 mod 2^14
TOP = (1 << 64) - 1


def _params(n: int, q: int, **keys):
    return from_mapping({"name": f"w{n}-{q}", "family": "ntt", "n": n, "q": q, "width": 64, **keys}, "test")


def _run(template: wide.Template, x: int, y: int) -> int:
    """The template on integers, each step by the instruction table's own lane semantics."""
    env = {"x": x, "y": y, "yh": y >> 32}
    for op, dst, a, c in template.steps:
        arith = spec(by_width(op, 64)).arith
        env[dst] = unsigned(arith.exact((env[a], env[c] if isinstance(c, str) else c), 64), 64)
    return env[template.result]


def test_the_templates_are_proven():
    wide.prove_templates()


@pytest.mark.parametrize("template, broken", [
    (wide.HIGH, ("add", "hi", "hi_t", "t_up")),  # the middle column's second carry left out
    (wide.LOW, ("add", "lo", "ll", "mid")),  # the middle column not moved up
])
def test_a_template_with_a_wrong_step_is_refused(template, broken):
    steps = template.steps[:-1] + (broken,)
    with pytest.raises(wide.WideProductError, match="not proven"):
        wide._prove(wide.Template(template.name, steps))


def test_the_templates_compute_the_halves_of_the_product():
    rng = random.Random(64)
    corners = [0, 1, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, TOP]
    pairs = [(x, y) for x in corners for y in corners] + [(rng.getrandbits(64), rng.getrandbits(64))
                                                          for _ in range(2000)]
    short = set()
    for x, y in pairs:
        assert _run(wide.LOW, x, y) == x * y % (1 << 64)
        assert _run(wide.HIGH, x, y) == x * y >> 64
        short.add((x * y >> 64) - _run(wide.HIGH_SHORT, x, y))
    assert short <= set(range(wide.HIGH_SHORT.slack + 1)) and wide.HIGH_SHORT.slack in short


def test_the_short_high_half_is_not_proven_with_less_slack():
    with pytest.raises(wide.WideProductError, match="not proven"):
        wide._prove(dataclasses.replace(wide.HIGH_SHORT, slack=wide.HIGH_SHORT.slack - 1))


def test_shoups_lemma_with_a_short_quotient_widens_the_range_by_slack_times_q():
    exact, short = prove_shoup(Q62, 64), prove_shoup(Q62, 64, 2)
    assert short.range_for(0, TOP)[1] == exact.range_for(0, TOP)[1] + 2 * Q62 < 1 << 64
    with pytest.raises(LemmaError, match=r"4q > 2\^64"):
        prove_shoup(sympy.prevprime(1 << 63), 64, 2)


def _term(template, x, y):
    """The template as the verifier's lane terms write it, with table constants as leaves."""
    made: dict[int, tuple] = {}  # a subterm read twice stays one object, as the verifier's are

    def leaves(t):
        if id(t) not in made:
            made[id(t)] = ("leaf", f"c{t[1]}", t[1]) if t[0] == "const" else \
                t if t[0] in ("leaf", "imm") else (t[0], *(leaves(s) for s in t[1:]))
        return made[id(t)]
    return leaves(wide._expand(template, x, y))


def test_recognition_takes_a_precomputed_high_half_and_refuses_a_wrong_one():
    leaf = lambda name, value=None: ("leaf", name, value)  # noqa: E731
    value = lambda t: None if t[2] is None else (t[2],)  # noqa: E731: one lane
    x, w = leaf("x"), leaf("w", 123456789012345678)
    term = _term(wide.HIGH, x, w)
    assert wide.recognise(term, value) == ("mulhu", x, w)

    def swap_high(t, to, made=None):
        made = {} if made is None else made
        if id(t) not in made:
            made[id(t)] = to if t == ("srl", w, ("imm", 32)) else \
                t if t[0] in ("leaf", "imm") else (t[0], *(swap_high(s, to, made) for s in t[1:]))
        return made[id(t)]

    assert wide.recognise(swap_high(term, leaf("wh", w[2] >> 32)), value) == ("mulhu", x, w)
    assert wide.recognise(swap_high(term, leaf("wh", (w[2] >> 32) + 1)), value)[0] == "add"  # not a product
    assert wide.recognise(_term(wide.HIGH_SHORT, x, w), value) == ("mulhu_short", x, w)  # no piece x*w to start from


@pytest.mark.parametrize("isa, last", [(AVX2, "select_negative"), (SSE, "add")])
def test_the_conditional_subtraction_without_an_unsigned_minimum(isa, last):
    """x - 2q where x >= 2q, as x - 2q reads non-negative: exact below 2q + 2^63, x kept above."""
    c = 2 * Q62
    idiom = conditional_subtraction(Q62, c, 64, isa)
    assert [s[0] for s in idiom.steps][-1] == last
    lemma = prove(idiom)
    assert lemma.range_for(0, 2 * c - 1) == (0, c - 1)
    assert lemma.range_for(c, c + 5) == (0, 5)
    edge = c + (1 << 63)
    assert lemma.range_for(edge - 1, edge - 1) == ((1 << 63) - 1,) * 2
    assert lemma.range_for(edge, TOP) == (edge, TOP)


def test_the_scalar_conditional_subtraction_is_an_unsigned_minimum():
    """On general registers (cmp, cmovb): exact for every x below 2c, x kept above."""
    c = 2 * Q62
    idiom = conditional_subtraction(Q62, c, 64, SCALAR)
    assert [s[0] for s in idiom.steps] == ["sub", "minu"]
    lemma = prove(idiom)
    assert lemma.range_for(0, 2 * c - 1) == (0, c - 1)
    assert lemma.range_for(c + (1 << 63), c + (1 << 63)) == ((1 << 63),) * 2


def test_a_conditional_subtraction_of_a_non_multiple_of_q_is_refused():
    idiom = conditional_subtraction(Q62, 2 * Q62 - 1, 64)
    with pytest.raises(LemmaError, match="not congruent"):
        prove(idiom)


def test_parameters_of_64_bit_lanes():
    with pytest.raises(ParamError, match=r"below 2\^62"):
        _params(16, sympy.nextprime(1 << 62))
    with pytest.raises(ParamError, match="needs 16 or 32-bit lanes"):
        _params(16, Q62, mul="montgomery")
    with pytest.raises(ParamError, match="width"):
        from_mapping({"name": "w", "family": "ntt", "n": 16, "q": Q62, "width": 128}, "test")
    p = _params(16, Q62)
    assert p.width == 64 and p.mul == "auto"


@pytest.fixture(scope="module")
def small():
    return build(_params(16, Q62, isa=["avx2", "sse"]))


def _function(bundle, kind, isa="avx2"):
    return next(f for f in bundle.functions if f.kind == kind and f.isa == isa)


def _with_body(kernel, index, **changes):
    body = list(kernel.body)
    body[index] = dataclasses.replace(body[index], **changes)
    return dataclasses.replace(kernel, body=tuple(body))


def test_the_ntts_are_shoup_products_from_pieces_and_proven(small):
    fwd = _function(small, "ntt_forward")
    proof = verify_kernel(fwd.kernel, {0: (0, Q62 - 1)}, Q62, signed=False)
    assert proof.products_checked >= 4 * 16 // 2 // 4  # layers x butterflies per layer / lanes
    assert proof.forms[0] == frozenset({(0,)})
    muls = [ins for ins in fwd.kernel.body if ins.op == "vpmuludq"]
    assert muls and fwd.manifest()["dtype"] == "uint64"


def test_a_piece_shifted_by_the_wrong_count_is_refused(small):
    fwd = _function(small, "ntt_forward")
    at = next(i for i, ins in enumerate(fwd.kernel.body) if ins.op == "vpsrlq" and ins.idiom is not None)
    mutant = _with_body(fwd.kernel, at, operands=fwd.kernel.body[at].operands[:2] + (Imm(31),))
    with pytest.raises(VerifyError, match="not lo"):
        verify_kernel(mutant, {0: (0, Q62 - 1)}, Q62, signed=False)


def test_a_lane_move_inside_a_product_of_64_bit_lanes_is_refused(small):
    """The verifier matches the templates once for all lanes, which holds only
    while each lane stays in its lane: a sum inside a Shoup product turned into
    an interleave of the same registers is refused, not followed."""
    fwd = _function(small, "ntt_forward")
    at = next(i for i, ins in enumerate(fwd.kernel.body)
              if ins.op == "vpaddq" and ins.idiom is not None and ins.idiom.kind == "shoup")
    mutant = _with_body(fwd.kernel, at, op="vpunpcklqdq")
    with pytest.raises(VerifyError, match="every lane must stay in its lane"):
        verify_kernel(mutant, {0: (0, Q62 - 1)}, Q62, signed=False)


def test_a_wrong_high_half_of_a_twiddle_quotient_is_refused(small):
    """w' >> 32 stored one too large in one lane of the forward's table: no product is recognised there."""
    fwd = _function(small, "ntt_forward")
    [table] = [t for t in fwd.kernel.tables if "twiddles" in t.label]
    values = list(table.values)
    values[3 * 4 + 1] += 1  # the fourth row of the first twiddle: w' >> 32
    mutant = dataclasses.replace(fwd.kernel, tables=tuple(dataclasses.replace(t, values=tuple(values))
                                                          if t is table else t for t in fwd.kernel.tables))
    with pytest.raises(VerifyError, match="Shoup product"):
        verify_kernel(mutant, {0: (0, Q62 - 1)}, Q62, signed=False)


@pytest.fixture(scope="module")
def small512():
    return build(_params(16, Q62, isa=["avx512"]))


def test_avx512_products_take_the_low_halves_from_vpmullq_and_a_short_quotient(small512):
    """Per Shoup product: vpmullq for lo(x*w) and lo(Q*q), three pieces for Q, a conditional subtraction
    of 2q after it; the verifier recognises the short quotient and bounds the lanes as for the exact one."""
    fwd = _function(small512, "ntt_forward", "avx512")
    proof = verify_kernel(fwd.kernel, {0: (0, Q62 - 1)}, Q62, signed=False)
    ops = [ins.op for ins in fwd.kernel.body]
    products = proof.products_checked
    assert products >= 4 * 16 // 2 // 8
    assert ops.count("mullo64") == 2 * products and ops.count("vpmuludq") == 3 * products
    assert ops.count("minu64") >= products


def test_base_multiplication_is_montgomery_on_unsigned_lanes(small):
    bm = _function(small, "basemul")
    fwd_hi = _function(small, "ntt_forward").contract.arg("a").ensures.bound.hi
    inputs = {1: (0, fwd_hi), 2: (0, fwd_hi)}
    proof = verify_kernel(bm.kernel, inputs, Q62, signed=False)
    assert proof.forms[0] == frozenset({(1, 2)})
    assert proof.hull(0)[0] >= 0 and proof.hull(0)[1] < 2 * Q62  # the inverse's input
    with pytest.raises(VerifyError, match="runs on int64 lanes"):
        verify_kernel(bm.kernel, inputs, Q62, signed=True)


def test_the_lifted_sum_of_a_montgomery_product_must_add_q(small):
    """(hi(x*w) + q) - hi(t*q): the sum's q replaced by its other source is refused."""
    bm = _function(small, "basemul")
    body = bm.kernel.body
    fwd_hi = _function(small, "ntt_forward").contract.arg("a").ensures.bound.hi
    end = next(i for i, ins in enumerate(body) if ins.idiom is not None and ins.idiom.kind == "montgomery"
               and ins.idiom.role == "end")
    at = max(i for i in range(end) if body[i].operands[0] == body[end].operands[1])  # what made hi(x*w) + q
    assert body[at].op == "vpaddq"
    for keep in (1, 2):
        source = body[at].operands[keep]
        mutant = _with_body(bm.kernel, at, operands=(body[at].operands[0], source, source))
        with pytest.raises(VerifyError, match=r"not \(hi\(x\*w\) \+ q\)"):
            verify_kernel(mutant, {1: (0, fwd_hi), 2: (0, fwd_hi)}, Q62, signed=False)


def test_a_64_bit_bundle_passes_against_sympy():
    p = _params(32, Q50, isa=["avx2", "sse"])
    outcome = run_kerngen_test(p, seed=7, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 40


def test_sums_of_products_and_canonical_outputs_on_64_bit_lanes():
    """basemul_acc's sums of up to 8 products reach beyond 4q: the final reduction is chosen for the lane."""
    p = _params(16, Q62, basemul_acc=[2, 8], output="canonical", isa=["avx2", "sse"])
    outcome = run_kerngen_test(p, seed=11, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 100


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([4, 16, 64]), st.integers(min_value=50, max_value=62), st.integers(min_value=0, max_value=1 << 30),
       st.sampled_from(["index", "eager", "layer", "minimal"]))
def test_random_50_to_62_bit_primes_emit_verify_and_pass(n, bits, seed, policy):
    """A prime of `bits` bits with 2n | q - 1 drawn, every ISA: every kernel
    verified (the templates, the Shoup and Montgomery products on 64-bit
    lanes, and on general registers) and passing against SymPy."""
    step = 2 * n
    q = ((1 << (bits - 1)) + seed * step) // step * step + 1
    while not sympy.isprime(q):
        q += step
    assert q.bit_length() == bits
    p = _params(n, q, reduction=policy, isa=["avx2", "sse", "scalar"])
    outcome = run_kerngen_test(p, seed=seed, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
