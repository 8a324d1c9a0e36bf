"""The lemma checker: exhaustive proofs for 16-bit idioms, SMT proofs for products."""

import pytest

from kerngen.families.ntt.reducers import barrett_idiom, reducers, special_form_candidates
from kerngen.passes.lemmas import LemmaError, ScalarIdiom, prove, prove_montgomery


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


def test_montgomery_lemma_with_a_wrong_inverse_fails():
    with pytest.raises(LemmaError, match="low halves differ"):
        prove_montgomery(3329, 16, qinv=-3325)
