"""The lemma checker: exhaustive proofs for 16-bit idioms, proofs by shape and SMT proofs for wider ones."""

import random

import pytest

from kerngen.families.ntt.reducers import barrett_idiom, freeze_idiom, reducers, special_form_candidates
from kerngen.passes.lemmas import LemmaError, ScalarIdiom, prove, prove_montgomery
from kerngen.passes.shapes import quotient_lemma, split_lemma


def test_barrett_lemma_is_exact_and_centred():
    lemma = prove(barrett_idiom(3329, 16))
    assert lemma.range_for(-32768, 32767) == (-1664, 1664)
    assert lemma.range_for(0, 0) == (0, 0)


def test_a_wrong_constant_is_caught():
    wrong = ScalarIdiom("barrett", 3329, (("mulhi", "t", "x", 20159), ("add", "t", "t", 512),
                                          ("sra", "t", "t", 10), ("mullo", "t", "t", 3331),
                                          ("sub", "r", "x", "t")), 16)
    with pytest.raises(LemmaError, match="not congruent"):
        prove(wrong)


def test_special_form_for_7681_is_shifts_and_adds():
    red = reducers(7681, 16)["special"]
    assert red.multiplications == 0 and red.instructions == 5
    assert red.out_abs < 2 * 7681
    # x = h*2^13 + l and 2^13 = 2^9 - 1 mod 7681: the seed's shape
    assert ("sra", "h", "x", 13) in red.idiom.steps and ("sll", "t1", "h", 9) in red.idiom.steps


def test_special_form_candidates_that_wrap_are_refused():
    # shifting h far enough to wrap breaks congruence, which the lemma sees
    refused = 0
    for idiom in special_form_candidates(12289, 16):
        try:
            prove(idiom)
        except LemmaError:
            refused += 1
    assert refused > 0
    assert "special" not in reducers(12289, 16)


@pytest.mark.parametrize("q", [3329, 7681, 12289, 257])
def test_montgomery_lemma_holds(q):
    assert prove_montgomery(q, 16).q == q


def test_montgomery_lemma_over_a_sum_of_products():
    """A double-width sum S reduced as one product is: proven over S's range while S stays inside int64 and
    hi(S) - hi(t*q) inside int32; refused beyond either."""
    q, top = 8380417, 7 * 42035255 ** 2  # ML-DSA's L = 7 products of the forward's outputs
    assert prove_montgomery(q, 32, products=(-top, top)).q == q
    with pytest.raises(LemmaError, match="leaves the signed 64-bit lane"):
        prove_montgomery(q, 32, products=(0, 1 << 63))
    with pytest.raises(LemmaError, match="high-half subtraction wraps"):
        prove_montgomery(q, 32, products=(0, (1 << 63) - 1))


def test_montgomery_lemma_with_a_wrong_inverse_fails():
    with pytest.raises(LemmaError, match="low halves differ"):
        prove_montgomery(3329, 16, qinv=-3325)


@pytest.mark.parametrize("q", [7681, 12289, 3329, 257])
def test_proofs_by_shape_agree_with_running_every_input(q):
    """On 16-bit lanes, where every input can be run: a quotient's or a
    split's shape (what wider lanes are proven by) holds exactly where
    running every input finds the idiom congruent, with the same ranges."""
    rng = random.Random(q)
    shaped = 0
    for idiom in [barrett_idiom(q, 16), freeze_idiom(q, 16), *special_form_candidates(q, 16)]:
        try:
            exhaustive = prove(idiom, "exhaustive")
        except LemmaError:
            exhaustive = None
        quotient = quotient_lemma(idiom)
        lemma = quotient if quotient is not None and quotient.leaving_input() is None else split_lemma(idiom)
        if lemma is None:
            assert quotient is None or exhaustive is None, idiom.steps  # a quotient that wraps is not congruent
            continue
        assert exhaustive is not None, idiom.steps
        shaped += 1
        for _ in range(20):
            lo = rng.randint(-32768, 32767)
            box = (lo, rng.randint(lo, 32767))
            assert lemma.range_for(*box) == exhaustive.range_for(*box), (idiom.steps, box)
    assert shaped >= 2  # Barrett's at least, and a special form where q has one
