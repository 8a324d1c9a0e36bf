"""No wrong kernel gets through the verifier and `kerngen test` (see mutation.py)."""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter

import pytest

from kerngen.families import load
from kerngen.families.ntt.build import build
from kerngen.target.files import write
from kerngen.target.render import render

from conftest import REPO
from mutation import OPERATORS, run_mutant

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


@needs_tools
def test_no_wrong_mutant_survives(tmp_path):
    """Every operator on the three kyber-3329 NTT kernels, two mutants each on
    AVX2 and one on SSE (the legalised code)."""
    p = load(REPO / "params/kyber-3329.toml")
    original = tmp_path / "original"
    write(render(build(p), "original"), original)
    outcomes = []
    for kind in ("ntt_forward", "ntt_inverse", "basemul"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 1), ("avx2", 2), ("sse", 3)):
                outcomes.append(run_mutant(p, f"kg_kyber3329_{kind}_{isa}", operator, seed, tmp_path, original))
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts["wrong"] == 0, [o for o in outcomes if o.verdict == "wrong"]
    assert verdicts["rejected"] >= 12 and verdicts["caught"] >= 18, verdicts


@needs_tools
def test_no_wrong_mutant_survives_the_pair_base_multiplication(tmp_path):
    """The same operators on mlkem-3329's base multiplication and its sum of
    three products (pairs of coefficients in adjacent lanes, 32-bit sums of
    products, the pair reduction), on AVX2 and SSE."""
    p = load(REPO / "params/mlkem-3329.toml")
    original = tmp_path / "original"
    write(render(build(p), "original"), original)
    outcomes = []
    for kind in ("basemul", "basemul_acc3"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 4), ("sse", 5)):
                outcomes.append(run_mutant(p, f"kg_mlkem3329_{kind}_{isa}", operator, seed, tmp_path, original))
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts["wrong"] == 0, [o for o in outcomes if o.verdict == "wrong"]
    assert verdicts["rejected"] + verdicts["caught"] >= 10, verdicts


@needs_tools
@pytest.mark.parametrize("mul", ["montgomery", "shoup"])
def test_no_wrong_mutant_survives_32_bit_lanes(tmp_path, mul):
    """The same operators on dilithium-8380417's kernels (32-bit lanes: even/odd
    widening products, no reduction in either NTT), on AVX2 and SSE, with
    signed Montgomery and with Shoup's products on unsigned lanes."""
    p = dataclasses.replace(load(REPO / "params/dilithium-8380417.toml"), mul=mul)
    original = tmp_path / "original"
    write(render(build(p), "original"), original)
    outcomes = []
    for kind in ("ntt_forward", "ntt_inverse", "basemul"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 6), ("sse", 7)):
                outcomes.append(run_mutant(p, f"kg_dilithium8380417_{kind}_{isa}", operator, seed, tmp_path,
                                           original))
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts["wrong"] == 0, [o for o in outcomes if o.verdict == "wrong"]
    assert verdicts["rejected"] + verdicts["caught"] >= 20, verdicts
