"""Shoup multiplication and Harvey's lazy butterflies: the lemmas, the
verifier's checks of Shoup products and of their (w, w') pairs, unsigned
lanes, the standalone mulmod_shoup / muladd_shoup kernels and the choice
`mul = "auto"` makes."""

from __future__ import annotations

import dataclasses

import pytest

from kerngen.errors import ParamError, VerifyError
from kerngen.families import load
from kerngen.families.ntt.build import build
from kerngen.families.ntt.planned import LEAF_BITS, leaf_params
from kerngen.families.ntt.design import design
from kerngen.families.ntt.params import strategies
from kerngen.families.ntt.cost import strategy_cost
from kerngen.families.ntt.reducers import lift_idiom
from kerngen.families.ntt.shoup import Shoup
from kerngen.ir.instr import Mem
from kerngen.passes.lemmas import LemmaError, ScalarIdiom, prove, prove_shoup
from kerngen.passes.verify import verify_kernel

from conftest import REPO

KYBER = REPO / "params/kyber-3329-shoup.toml"
NFL = REPO / "params/nfl-1073479681.toml"


@pytest.mark.parametrize("q, bits", [(3329, 16), (12289, 16), (8380417, 32), (1073479681, 32), (16381, 15)])
def test_shoup_lemma_holds_and_bounds_r_by_x(q, bits):
    lemma = prove_shoup(q, bits)
    assert lemma.range_for(0, 0) == (0, q - 1)
    assert lemma.range_for(0, (1 << bits) - 1) == (0, 2 * q - 1)


def test_shoup_lemma_refuses_a_q_whose_2q_leaves_the_lane():
    with pytest.raises(LemmaError, match="2q > 2"):
        prove_shoup(40961, 16)


@pytest.mark.parametrize("q, bits, c", [(3329, 16, 6658), (1073479681, 32, 2 * 1073479681)])
def test_conditional_subtraction_lemma_is_exact(q, bits, c):
    idiom = ScalarIdiom("csub", q, (("sub", "d", "x", c), ("minu", "r", "x", "d")), bits, signed=False)
    lemma = prove(idiom)
    assert lemma.range_for(0, 2 * c - 1) == (0, c - 1)
    assert lemma.range_for(c, c + 5) == (0, 5)
    assert lemma.range_for(0, 10) == (0, 10)


def test_a_conditional_subtraction_of_a_non_multiple_of_q_is_refused():
    idiom = ScalarIdiom("csub", 3329, (("sub", "d", "x", 6657), ("minu", "r", "x", "d")), 16, signed=False)
    with pytest.raises(LemmaError, match="not congruent"):
        prove(idiom)


def _function(path, kind, isa="avx2"):
    bundle = build(load(path))
    return next(f for f in bundle.functions if f.kind == kind and f.isa == isa)


@pytest.mark.parametrize("path, lanes", [(KYBER, 16), (NFL, 8)])
def test_shoup_ntts_are_proven_on_unsigned_lanes(path, lanes):
    p = load(path)
    fwd = _function(path, "ntt_forward")
    proof = verify_kernel(fwd.kernel, {0: (0, p.q - 1)}, p.q, signed=False)
    assert proof.products_checked >= p.layers * p.n // 2 // lanes  # and Shoup reductions, where the output needs one
    assert proof.forms[0] == frozenset({(0,)})
    assert fwd.manifest()["dtype"] == f"uint{p.width}"
    with pytest.raises(VerifyError, match="needs unsigned"):  # Shoup's products read unsigned lanes
        verify_kernel(fwd.kernel, {0: (0, p.q - 1)}, p.q, signed=True)


def test_a_twiddle_with_a_wrong_quotient_is_refused():
    """w' = floor(w*2^W/q) off by one in one lane of one table row: the verifier says which."""
    fwd = _function(KYBER, "ntt_forward")
    [table] = [t for t in fwd.kernel.tables if "twiddles" in t.label]
    values = list(table.values)
    values[16 + 3] += 1  # the second row holds the first w' row (16 lanes of 16 bits)
    mutant = dataclasses.replace(fwd.kernel, tables=tuple(dataclasses.replace(t, values=tuple(values))
                                                          if t is table else t for t in fwd.kernel.tables))
    with pytest.raises(VerifyError, match="not floor"):
        verify_kernel(mutant, {0: (0, 3328)}, 3329, signed=False)


@pytest.mark.parametrize("path", [KYBER, NFL, REPO / "params/dilithium-8380417.toml"])
def test_mulmod_shoup_needs_its_pairs_from_the_contract(path):
    """(w, wp) are arguments 2 and 3: without the contract's pairing, or
    paired with another argument, the products have no lemma to rely on."""
    p = load(path)
    fn = _function(path, "mulmod_shoup")
    top = (1 << p.width) - 1
    inputs = {1: (0, top), 2: (0, p.q - 1), 3: (0, top)}
    proof = verify_kernel(fn.kernel, inputs, p.q, signed=False, shoup_pairs=((2, 3, p.width),))
    assert proof.hull(0) == (0, p.q - 1) and proof.forms[0] == frozenset({(1, 2)})
    # unpaired, paired the other way round or with another argument, or as w' of another product width
    for pairs in ((), ((3, 2, p.width),), ((2, 1, p.width),), ((2, 3, 52),)):
        with pytest.raises(VerifyError, match="pairs a variable w"):
            verify_kernel(fn.kernel, inputs, p.q, signed=False, shoup_pairs=pairs)


def test_mulmod_shoup_reading_another_elements_quotient_is_refused():
    """wp loaded one vector further on: element k's w paired with element k+16's w'."""
    fn = _function(KYBER, "mulmod_shoup")
    body = list(fn.kernel.body)
    at = next(i for i, ins in enumerate(body) if any(isinstance(o, Mem) and getattr(o.base, "index", None) == 3
                                                      for o in ins.operands))
    ins = body[at]
    body[at] = dataclasses.replace(ins, operands=tuple(dataclasses.replace(o, offset=o.offset + 32)
                                                      if isinstance(o, Mem) else o for o in ins.operands))
    mutant = dataclasses.replace(fn.kernel, body=tuple(body))
    with pytest.raises(VerifyError, match="pairs a variable w"):
        verify_kernel(mutant, {1: (0, 65535), 2: (0, 3328), 3: (0, 65535)}, 3329, signed=False, shoup_pairs=((2, 3, 16),))


def test_muladd_shoup_is_affine_in_b_and_may_alias():
    fn = _function(NFL, "muladd_shoup")
    m = fn.manifest()
    assert [a["name"] for a in m["args"]] == ["r", "a", "w", "wp", "b"]
    assert m["args"][2]["requires"]["bound"] == [0, 1073479680]
    assert m["args"][3]["requires"]["representation"] == "floor(w*2^32/q)"
    assert m["proof"]["monomials"] == [["a", "w"], ["b"]] and m["proof"]["locality"] == "element"
    assert m["args"][0]["may_alias"] == ["a", "b"] and "may_alias" not in m["args"][1]
    assert m["output"]["bound"] == [0, 1073479680]


def test_auto_takes_the_cheaper_strategy_by_the_cost_model():
    """For each shipped set that leaves mul to auto, the strategy it uses costs no more than the other (a
    planned set's is its leaves', chosen as an unrolled set's of that size)."""
    for path in sorted((REPO / "params").glob("*.toml")):
        p = load(path)
        if p.family != "ntt" or p.mul != "auto":
            continue
        if p.planned:
            p = leaf_params(p, 1 << LEAF_BITS)
        chosen = design(p)
        for mul in strategies(p):  # every strategy that fits q
            other = dataclasses.replace(p, mul=mul)
            try:
                alternative = design(other)
            except ParamError:  # no schedule keeps its lanes in range
                continue
            assert strategy_cost(chosen, p) <= strategy_cost(alternative, other), (p.name, mul)


def test_shoup_products_bound_what_they_are_given():
    s = Shoup(3329, 16)
    assert s.bound(0) == 3328 and s.bound(3328) == 3328 + 170 and s.bound(65535) == 6657  # q - 1 + ceil(q*x/2^16)
    assert s.offset(True, 6657) == 6658 and s.offset(True, 3329) == 3329
    assert s.offset(False, 3328) == 2 * 3329  # forward: above the product's bound q - 1 + ceil(q*x/2^16)


def test_lift_takes_signed_products_into_the_unsigned_inverse_input():
    """2q added where negative: congruent for every input, (-2q, 2q) into [0, 2q)."""
    lemma = prove(lift_idiom(3329, 16))
    assert lemma.range_for(-3328, 3328) == (0, 6657)
    assert lemma.range_for(-6657, -1) == (1, 6657)


def test_shoup_base_multiplication_is_lifted_not_frozen():
    """Dilithium's base multiplication (Montgomery, signed) ends in three
    instructions per vector into the inverse's [0, 2q), not in a Barrett freeze."""
    p = load(REPO / "params/dilithium-8380417.toml")
    fn = _function(REPO / "params/dilithium-8380417.toml", "basemul")
    lo, hi = fn.manifest()["output"]["bound"]
    assert 0 <= lo and hi < 2 * p.q and fn.manifest()["output_range"] == "lazy"
    kinds = {ins.idiom.kind for ins in fn.kernel.body if ins.idiom is not None}
    assert "lift" in kinds and "freeze" not in kinds
