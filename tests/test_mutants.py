"""No wrong kernel gets through the verifier and `kerngen test` (see mutation.py),
whichever ISA of a bundle it is for."""

from __future__ import annotations

import re
import shutil
import tomllib
from collections import Counter

import pytest

from kerngen.commands.test import test_bundle as run_bundle_test
from kerngen.core.compile_cache import CompileCache
from kerngen.core.params import Overrides
from kerngen.families import from_mapping, load
from kerngen.families.ntt.build import build
from kerngen.emission.files import write
from kerngen.emission.render import render

from conftest import REPO
from mutation import (OPERATORS, copied_with, escaping_mutants, instruction_mutants, run_mutant,
                      shoup_quotient_entries, table_entry_mutant)

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


@needs_tools
def test_no_wrong_mutant_survives(tmp_path):
    """Every operator on the three kyber-3329 NTT kernels of the AVX2 + SSE
    bundle, two mutants each on AVX2 and one on SSE (the legalised code,
    judged beside its AVX2 twin)."""
    p = load(REPO / "params/kyber-3329.toml", Overrides(isa="avx2,sse"))
    original = tmp_path / "original"
    cache = CompileCache()
    write(render(build(p, cache), "original"), original)
    outcomes = []
    for kind in ("ntt_forward", "ntt_inverse", "basemul"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 1), ("avx2", 2), ("sse", 3)):
                outcomes.append(run_mutant(p, f"kg_kyber3329_{kind}_{isa}", operator, seed, tmp_path, original,
                                           cache))
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
    cache = CompileCache()
    write(render(build(p, cache), "original"), original)
    outcomes = []
    for kind in ("basemul", "basemul_acc3"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 4), ("sse", 5)):
                outcomes.append(run_mutant(p, f"kg_mlkem3329_{kind}_{isa}", operator, seed, tmp_path, original,
                                           cache))
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts["wrong"] == 0, [o for o in outcomes if o.verdict == "wrong"]
    assert verdicts["rejected"] + verdicts["caught"] >= 10, verdicts


@needs_tools
@pytest.mark.parametrize("mul", ["montgomery", "shoup"])
def test_no_wrong_mutant_survives_32_bit_lanes(tmp_path, mul):
    """The same operators on dilithium-8380417's kernels (32-bit lanes: even/odd
    widening products, no reduction in either NTT), on AVX2 and SSE, with
    signed Montgomery and with Shoup's products on unsigned lanes; at n = 64,
    whose kernels have every kind of instruction n = 256 has in a quarter of
    the code (the mutants are drawn from it, the checks run over it)."""
    table = tomllib.loads((REPO / "params/dilithium-8380417.toml").read_text())
    p = from_mapping({**table, "n": 64, "mul": mul}, "dilithium-8380417.toml at n = 64")
    original = tmp_path / "original"
    cache = CompileCache()
    write(render(build(p, cache), "original"), original)
    outcomes = []
    for kind in ("ntt_forward", "ntt_inverse", "basemul"):
        for operator in OPERATORS:
            for isa, seed in (("avx2", 6), ("sse", 7)):
                outcomes.append(run_mutant(p, f"kg_dilithium8380417_{kind}_{isa}", operator, seed, tmp_path,
                                           original, cache))
    verdicts = Counter(o.verdict for o in outcomes)
    assert verdicts["wrong"] == 0, [o for o in outcomes if o.verdict == "wrong"]
    assert verdicts["rejected"] + verdicts["caught"] >= 20, verdicts


def _quotients_plus_one(asm: str, label: str, q: int, start: float):
    """Mutants of each Shoup quotient w' of the table `label` in turn, +1, from the fraction `start` on."""
    entries = shoup_quotient_entries(asm, label, q, 32)
    for k in entries[int(start * len(entries)):]:
        yield table_entry_mutant(asm, label, k, 1)


@needs_tools
def test_no_wrong_mutant_of_a_second_isa_passes_kerngen_test(tmp_path):
    """Copied avx2 + sse bundles, an SSE NTT edited (the manifest's hash fixed
    up) and tested as a bundle written by another kerngen version is, with no
    fresh emission to compare with: psubw -> paddw in kyber-3329-shoup's
    inverse; in nfl-1073479681's forward a conditional subtraction (pminud)
    dropped, one forced (replaced by a move of the subtracted value), and a
    w' +1. Of each kind, the first mutants from the kernel's start and from its
    middle that are wrong (beside the original on random and extreme inputs)
    and that unit vectors alone pass — all that the second ISA's NTTs were
    checked with before — must fail `kerngen test`."""
    kinds = []
    shoup = REPO / "generated/kyber-3329-shoup"
    asm = (shoup / "kyber-3329-shoup.asm").read_text()
    inverse = "kg_kyber3329shoup_ntt_inverse_sse"
    kinds += [(shoup, inverse, instruction_mutants(asm, inverse, "psubw", "paddw", start)) for start in (0, 0.5)]
    nfl = REPO / "generated/nfl-1073479681"
    asm = (nfl / "nfl-1073479681.asm").read_text()
    forward = "kg_nfl1073479681_ntt_forward_sse"
    for start in (0, 0.5):
        kinds += [(nfl, forward, instruction_mutants(asm, forward, "pminud", None, start)),
                  (nfl, forward, instruction_mutants(asm, forward, "pminud", "movdqa", start)),
                  (nfl, forward, _quotients_plus_one(asm, "kg_nfl1073479681_ntt_forward_twiddles_sse", 1073479681,
                                                     start))]
    passed = []
    for k, (bundle, symbol, candidates) in enumerate(kinds):
        found = escaping_mutants(bundle, symbol, candidates, tmp_path, 3, 1)
        assert found, f"{symbol}: no wrong mutant of this kind that unit vectors pass"
        [(text, what)] = found
        copy = copied_with(bundle, {f"{bundle.name}.asm": text}, tmp_path / f"copy{k}")
        outcome = run_bundle_test(copy, 3, lambda s: None, tmp_path, reemit=False)
        if not any(symbol in f for f in outcome.failures):
            passed.append(what)
    assert not passed, passed


def test_a_copied_bundle_s_constants_are_compared_with_its_parameters(tmp_path):
    """`kerngen test DIR` of a bundle this version wrote makes its constants
    again from the manifest's parameters: unedited, they agree; an SSE w' + 1,
    a broadcast constant changed, or a zeta of the header changed (each with
    its hash fixed up) is named."""
    from kerngen.commands.test import compare_with_parameters
    from kerngen.core.manifest import read_manifest

    bundle = REPO / "generated/kyber-3329-shoup"
    asm = (bundle / "kyber-3329-shoup.asm").read_text()
    header = (bundle / "kyber-3329-shoup.h").read_text()
    label = "kg_kyber3329shoup_ntt_forward_twiddles_sse"
    quotient = shoup_quotient_entries(asm, label, 3329, 16)[0]
    first_zeta = re.compile(r"(kg_kyber3329shoup_ntt_zetas\[\d+\] = \{\s*)(\d+)")
    edits = {
        "unedited": ({}, None),
        "w'": ({"kyber-3329-shoup.asm": table_entry_mutant(asm, label, quotient, 1)[0]}, f"{label}[{quotient}]"),
        "broadcast": ({"kyber-3329-shoup.asm": table_entry_mutant(asm, "pw_3329", 3, 2)[0]}, "pw_3329[3]"),
        "header zeta": ({"kyber-3329-shoup.h": first_zeta.sub(lambda m: m[1] + str(int(m[2]) + 1), header, 1)},
                        "kyber-3329-shoup.h"),
    }
    for name, (changed, named) in edits.items():
        copy = copied_with(bundle, changed, tmp_path / name.replace(" ", "-").replace("'", "p"))
        compared, differs = compare_with_parameters(copy, read_manifest(copy / "manifest.json"))
        assert compared == "fresh emission of the constant tables"
        assert (differs is None) if named is None else (differs is not None and named in differs), (name, differs)


@needs_tools
def test_a_freeze_missing_its_conditional_subtraction_fails_kerngen_test(tmp_path):
    """A copied kyber-3329 bundle with the first vpminuw of the AVX2 freeze
    deleted (its hash fixed up) leaves 3329 where the input is a multiple of
    q in the first vector (freeze(-26632) = 3329, outside [0, 3328]); random
    inputs and a few runs of consecutive ones missed every such input. Unary
    kernels of 16-bit lanes are checked on all 2^16 inputs, so it fails."""
    bundle = REPO / "generated/kyber-3329"
    symbol = "kg_kyber3329_freeze_avx2"
    text, what = next(instruction_mutants((bundle / "kyber-3329.asm").read_text(), symbol, "vpminuw", None))
    assert "#0 (vpminuw      ymm0, ymm0, ymm1)" in what, what
    copy = copied_with(bundle, {"kyber-3329.asm": text}, tmp_path / "k2")
    outcome = run_bundle_test(copy, 3, lambda s: None, tmp_path)
    failed = [f for f in outcome.failures if symbol in f]
    assert failed and all("3329" in f for f in failed), outcome.failures
    assert len(failed) == len(outcome.failures), outcome.failures  # nothing else of the bundle fails
