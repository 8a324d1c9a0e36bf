"""32-bit lanes with q up to 2^31 (BabyBear, KoalaBear, 2^31 - 2^19 + 1),
where Harvey's lazy values (4q) leave the lane: Shoup's products reduced
below q, the values below 2q; the lemma that rests on, the bundles against
the references, and what is refused."""

from __future__ import annotations

import dataclasses

import pytest

from kerngen.commands.test import test_bundle as run_kerngen_bundle
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import ParamError
from kerngen.families import from_mapping
from kerngen.families.ntt.cost import strategy_cost
from kerngen.families.ntt.design import design
from kerngen.families.ntt.shoup import ShoupBelowQ, prove_shoup_below_q
from kerngen.passes.lemmas import LemmaError

from conftest import STORE

BABYBEAR, KOALABEAR, Q19 = 2**31 - 2**27 + 1, 2**31 - 2**24 + 1, 2**31 - 2**19 + 1
# each set beside n = 16 something more for its kernels to show: blocks of degree 2 with a sum of two base
# products (BabyBear), canonical outputs (KoalaBear), the largest of the three with defaults
SETS = {
    "babybear": {"q": BABYBEAR, "layers": 3, "basemul_acc": [2]},
    "koalabear": {"q": KOALABEAR, "output": "canonical"},
    "q19": {"q": Q19},
}


def _params(name: str, **more):
    return from_mapping({"name": name, "family": "ntt", "n": 16, "width": 32, "mul": "shoup",
                         "isa": ["avx2", "sse"], **SETS[name], **more}, "test_bigq32")


@pytest.mark.parametrize("q", [BABYBEAR, KOALABEAR, Q19])
def test_shoup_then_a_subtraction_of_q_is_proven_below_q(q):
    lemma = prove_shoup_below_q(q, 32)
    assert lemma.range_for(0, 2**32 - 1) == (0, q - 1)
    assert lemma.product.range_for(0, 2**32 - 1) == (0, 2 * q - 1)  # what the subtraction is needed for


@pytest.mark.parametrize("c, words", [(2 * BABYBEAR, "not \\[0, 2013265920\\]"), (BABYBEAR + 1, "not congruent")])
def test_the_lemma_refuses_another_constant(c, words):
    with pytest.raises(LemmaError, match=words):
        prove_shoup_below_q(BABYBEAR, 32, c=c)


@pytest.mark.parametrize("name", SETS)
def test_bundles_pass_against_the_references_on_avx2_and_sse(name, tmp_path):
    p = _params(name)
    bundle = STORE.bundle(p)
    assert isinstance(bundle.design.mul, ShoupBelowQ) and bundle.design.reducer.reach == 2
    write(render(STORE.bundles(p), "test"), tmp_path / p.name)
    outcome = run_kerngen_bundle(tmp_path / p.name, 3, lambda s: None, tmp_path, reemit=False)
    assert outcome.failed == 0, outcome.failures
    kinds = {f.kind for f in bundle.functions}
    assert {"ntt_forward", "ntt_inverse", "basemul", "freeze", "mulmod_shoup", "muladd_shoup"} <= kinds
    assert outcome.passed >= 2 * len(bundle.functions)  # every kernel of both ISAs ran


def test_auto_weighs_the_strategies_by_the_cost_model_where_montgomery_fits_too():
    """q = 2^30 + 2^25 + 1 (2^30.05): Montgomery's signed sums still fit at n = 16, Harvey's 4q does not."""
    p = from_mapping({"name": "mid", "family": "ntt", "n": 16, "q": 1107296257, "width": 32}, "test_bigq32")
    chosen = design(p)
    montgomery = design(dataclasses.replace(p, mul="montgomery"))
    assert isinstance(chosen.mul, ShoupBelowQ) and strategy_cost(chosen, p) < strategy_cost(montgomery, p)


def test_sums_of_base_products_that_leave_the_signed_lane_are_refused_by_validation():
    """2^31 - 2^19 + 1: two Barrett-reduced terms reach 2^31."""
    for more, key in (({"layers": 3}, "layers"), ({"basemul_acc": [2]}, "basemul_acc")):
        with pytest.raises(ParamError, match=f"{key}: .* products on 32-bit signed lanes"):
            _params("q19", **more)


def test_a_q_below_2_31_without_the_roots_is_refused():
    with pytest.raises(ParamError, match="q-1 = 2147483646 must be divisible by 4"):
        from_mapping({"name": "m31", "family": "ntt", "n": 16, "width": 32, "q": 2**31 - 1}, "test_bigq32")
