import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from kerngen.commands.test import constants_differ, test_bundle as run_kerngen_bundle, test_params as run_kerngen_test
from kerngen.core.compile_cache import CompileCache
from kerngen.core.manifest import read_bundle
from kerngen.errors import VerifyError
from kerngen.core.params import Overrides
from kerngen.families import FAMILIES, from_mapping, load
from kerngen.families.ntt import schedule as schedule_module
from kerngen.families.ntt.build import build
from kerngen.families.ntt.design import design
from kerngen.families.ntt.kernels import build_ntt, kernel_builder
from kerngen.families.ntt.layout import block_units, plan, unit_pairs
from kerngen.families.ntt.reducers import reducers
from kerngen.families.ntt.schedule import DIRECTIONS, ScheduleError, input_bound, schedule
from kerngen.passes.pipeline import compile_kernel
from kerngen.passes.verify import verify_kernel
from kerngen.machine.target import make_target

from conftest import REPO, STORE

NTT_SETS = sorted(p for p in (REPO / "params").glob("*.toml") if load(p).family == "ntt")


# the n = 4096 set's checks take half a minute: test_adoption runs them through the command line
LARGE_NTT = "he-1125899906826241"


@pytest.mark.parametrize("path", [p for p in NTT_SETS if p.stem != LARGE_NTT], ids=lambda p: p.stem)
def test_shipped_set_passes_against_sympy(path, tmp_path):
    """The committed bundle, which test_generated_bundle_is_current shows to be
    this kerngen's emission of the set, through every check."""
    outcome = run_kerngen_bundle(REPO / "generated" / path.stem, 3, lambda s: None, tmp_path, reemit=False)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 20


def _scaled_on_last_layer(name: str) -> bool:
    manifest = json.loads((REPO / "generated" / name / "manifest.json").read_text())
    return any(isinstance(f.get("reduction"), dict) and f["reduction"].get("scale_on_last_layer")
               for f in manifest["functions"])


# the shortcut's tables for one set cost what building its kernels' IR costs (up to 13 s at n = 4096): a set
# scaled on the first layer, every shipped set whose build chose the last, and every one whose ISAs broadcast
# constants over vectors of different widths (avx512 beside others: the files keep the longer table)
SHORTCUT_SETS = sorted({"kyber-3329"} | {p.stem for p in NTT_SETS if _scaled_on_last_layer(p.stem)} |
                       {p.stem for p in NTT_SETS if "avx512" in load(p).isas and len(load(p).isas) > 1})


@pytest.mark.parametrize("name", SHORTCUT_SETS)
def test_the_constants_shortcut_agrees_with_the_shipped_bundle(name):
    """`kerngen test` of a bundle compares its constant tables with the ones the
    family makes from the manifest's parameters without the passes; that
    shortcut must make what the build made, the inverse's scaling on its
    first or its last layer as the build chose."""
    directory, manifest = read_bundle(REPO / "generated" / name)
    assert constants_differ(directory, manifest, FAMILIES["ntt"].constants) is None


@pytest.mark.parametrize("policy", ["eager", "layer", "index"])
@pytest.mark.parametrize("reducer", ["barrett", "special"])
def test_every_policy_and_reducer_passes(policy, reducer):
    p = load(REPO / "params/kyber-r1-7681.toml", Overrides.of(policy=policy, reducer=reducer))
    outcome = run_kerngen_test(p, seed=5, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


def _usable(n: int, q: int) -> bool:
    from kerngen.errors import ParamError
    try:
        from_mapping({"name": "r", "family": "ntt", "n": n, "q": q}, "random")
        return True
    except ParamError:
        return False


MULS = st.sampled_from(["auto", "montgomery", "shoup"])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([2, 8, 16, 32, 64, 128, 256]), st.integers(min_value=3, max_value=32767),
       st.sampled_from(["eager", "layer", "index", "minimal"]), st.sampled_from(["auto", "barrett"]), MULS)
def test_random_primes_emit_verify_and_pass(n, seed, policy, reducer, mul):
    """16-bit lanes: a prime, a policy, a reduction and a multiplication
    strategy drawn (Shoup: q below 2^14, Harvey's reductions)."""
    top = 1 << 14 if mul == "shoup" else 1 << 15
    q = sympy.nextprime(seed % (top - 768))
    while q >= top or not _usable(n, q):
        q = sympy.nextprime(q) if q < top - 768 else 257
    p = from_mapping({"name": f"r{n}-{q}", "family": "ntt", "n": n, "q": q, "reduction": policy, "mul": mul,
                      "reducer": "auto" if mul == "shoup" else reducer, "isa": ["avx2", "sse"]}, "random")
    outcome = run_kerngen_test(p, seed=seed, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([16, 64, 256, 512]), st.integers(min_value=1 << 20, max_value=(1 << 31) - 1),
       st.sampled_from(["index", "minimal", "eager"]), st.sampled_from(["fastest", "standard"]), MULS)
def test_random_32_bit_primes_emit_verify_and_pass(n, seed, policy, order, mul):
    """32-bit lanes: a prime drawn from [2^20, 2^31) (2^30 for Shoup) with
    2n | q - 1, both ISAs, a policy, an order and a multiplication strategy
    drawn with it; every kernel verified (SMT lemmas for the reductions, the
    32-bit Montgomery and Shoup products) and passing against SymPy."""
    step, top = 2 * n, 1 << (30 if mul == "shoup" else 31)
    q = seed % top // step * step + 1
    while not sympy.isprime(q) or q >= top or q < 1 << 20:
        q = q + step if q + step < top else (1 << 20) // step * step + step + 1
    p = from_mapping({"name": f"w{n}-{q}", "family": "ntt", "n": n, "q": q, "width": 32, "reduction": policy,
                      "order": order, "mul": mul, "isa": ["avx2", "sse"]}, "random")
    outcome = run_kerngen_test(p, seed=seed, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


OUTPUTS = st.sampled_from(["lazy", "centred", "canonical"])


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([4, 16, 64, 256, 512]), st.integers(min_value=3, max_value=32767),
       st.sampled_from(["fastest", "standard"]), OUTPUTS, OUTPUTS, OUTPUTS,
       st.sampled_from([[], [2], [3, 4]]))
def test_random_scheme_shaped_sets_emit_verify_and_pass(n, seed, order, forward, basemul, inverse, acc):
    """Orders, output ranges and sums of products drawn with the prime: every
    valid set emits, verifies and passes (the order's positions, the ranges
    promised, the sums against SymPy, basis proofs)."""
    q = sympy.nextprime(seed % 32000)
    while q >= 32768 or not _usable(n, q):
        q = sympy.nextprime(q) if q < 32000 else 257
    p = from_mapping({"name": f"s{n}-{q}", "family": "ntt", "n": n, "q": q, "order": order, "basemul_acc": acc,
                      "output": {"forward": forward, "basemul": basemul, "inverse": inverse},
                      "isa": ["avx2", "sse"]}, "random")
    outcome = run_kerngen_test(p, seed=seed, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


def test_a_bundle_searches_each_schedule_once(monkeypatch):
    """The choice of reducer and of multiplication asks for the schedules the
    kernels are then built with; each is searched once (newhope's minimal
    policy under both strategies took 40 s when they were searched again)."""
    searched = []

    def counted(*args):
        searched.append(args)
        return search(*args)

    search = schedule_module._schedule
    monkeypatch.setattr(schedule_module, "_schedule", counted)
    schedule.cache_clear()
    design.cache_clear()
    p = load(REPO / "params/newhope-12289.toml", Overrides.of(policy="minimal"))
    build(p)
    assert searched and len(set(searched)) == len(searched)


@pytest.mark.parametrize("path", [p for p in NTT_SETS if load(p).n <= 512], ids=lambda p: p.stem)
def test_reduction_counts_are_ordered(path):
    """eager >= layer >= index >= minimal, for every reduction kind and both directions."""
    p = load(path)
    base = STORE.bundle(p).design
    signed = base.mul.signed
    for direction in ("forward", "inverse"):
        bound = input_bound(base.math, direction, p.width, signed)
        for red in reducers(p.q, p.width).values() if signed else [base.reducer]:
            ar = dataclasses.replace(base, reducer=red)
            counts = [schedule(ar, pol, direction, bound).count for pol in ("eager", "layer", "index", "minimal")]
            assert counts == sorted(counts, reverse=True), (p.name, direction, red.kind, counts)


def _what_a_build_takes_from_its_policy(p) -> list:
    """Each ISA's design (the cost model weighs the policy's schedules) and every schedule its NTT kernels
    can be built from (the inverse's on signed lanes scaled on its first and on its last layer: the build
    keeps the shorter kernel), the policy's name aside: all a build reads from the policy but the name."""
    out = []
    for t in p.targets:
        ar = design(p, t)
        for direction in DIRECTIONS:
            bound = input_bound(ar.math, direction, p.width, ar.mul.signed)
            for last in (False, True) if direction == "inverse" and ar.mul.signed else (False,):
                try:
                    s = dataclasses.replace(schedule(ar, p.policy, direction, bound, last), policy="")
                except ScheduleError as e:
                    s = str(e)
                out.append((t.isa.name, ar, direction, last, s))
    return out


def _one_isa_each(paths: list[Path]) -> dict[Path, str]:
    """The ISA each set's policies are built for: of the set's ISAs, the one taken least often by the sets
    before it (the first of them on a tie), so that every ISA is built with every policy, on several sets.
    (The policy decides where reductions go, from the design's bounds; each ISA's lowering of the default
    policy is the shipped bundle's, tested in full.)"""
    taken: Counter[str] = Counter()
    chosen = {}
    for path in paths:
        chosen[path] = min(load(path).isas, key=lambda isa: taken[isa])
        taken[chosen[path]] += 1
    return chosen


# KoalaBear's set is BabyBear's but for q (31 bits, Shoup's products below q, the same reductions placed): one of
# the twins builds the policies
POLICY_TWINS = {"koalabear-2130706433"}
POLICY_ISA = _one_isa_each([p for p in NTT_SETS if load(p).width < 64 and p.stem not in POLICY_TWINS])


@pytest.mark.parametrize("path", list(POLICY_ISA), ids=lambda p: f"{p.stem}-{POLICY_ISA[p]}")
def test_every_policy_passes_on_shipped_sets(path):
    """eager, layer and minimal (index, the default, is the shipped bundle's, which
    test_shipped_set_passes_against_sympy tests), on one of the set's ISAs (`POLICY_ISA`). A policy whose
    design and schedules are the default's builds the default's kernels instruction for instruction: those
    of the shipped bundle, whose manifest records these schedules; any other is built, verified and tested
    here, the policies of one set through one compile cache (their reductions and Shoup products are the
    same kernels, and base multiplication is wherever the forward NTTs prove the same output bound).
    (On 64-bit lanes, whose shipped set takes a minute a build, tests/test_wide.py draws the policy.)"""
    isa = POLICY_ISA[path]
    default = _what_a_build_takes_from_its_policy(load(path, Overrides(isa=isa)))
    shipped = json.loads((REPO / "generated" / path.stem / "manifest.json").read_text())
    cache = CompileCache()
    for policy in ("eager", "layer", "minimal"):
        p = load(path, Overrides.of(policy=policy, isa=isa))
        taken = _what_a_build_takes_from_its_policy(p)
        if taken == default:
            built = {(direction, last): s for _, _, direction, last, s in taken}
            for f in shipped["functions"]:
                if f["kind"] in ("ntt_forward", "ntt_inverse") and f["isa"] == isa:
                    recorded = f["reduction"]
                    s = built[f["kind"].removeprefix("ntt_"), recorded["scale_on_last_layer"]]
                    assert {**s.manifest(), "policy": "index"} == recorded, (f["symbol"], policy)
        else:
            outcome = run_kerngen_test(p, seed=9, say=lambda s: None, cache=cache)
            assert outcome.failed == 0, (policy, outcome.failures)


@pytest.mark.parametrize("path, mul", [(REPO / "params/newhope-12289.toml", "montgomery"),
                                       (REPO / "params/nfl-1073479681.toml", "shoup")], ids=["newhope", "nfl"])
def test_verifier_refuses_a_schedule_without_its_reductions(path, mul):
    """Both need reductions in their forward NTT (Barrett on signed lanes,
    Harvey's on unsigned ones); drop them and the verifier must say where."""
    p = dataclasses.replace(load(path), mul=mul)
    bundle = STORE.bundle(p)
    ar = bundle.design if mul == "shoup" else dataclasses.replace(bundle.design, reducer=reducers(p.q, 16)["barrett"])
    good = schedule(ar, "index", "forward", p.q - 1)
    assert good.count > 0
    bad = dataclasses.replace(good, before=tuple((layer, frozenset()) for layer, _ in good.before))
    contract = bundle.function("ntt_forward").contract
    lanes = (-(p.q - 1), p.q - 1) if mul == "montgomery" else (0, p.q - 1)
    b = kernel_builder(ar.layout)
    build_ntt(b, ar, bad, "t_twiddles")
    kernel = compile_kernel(b, "t_forward", contract, p.target).kernel  # allocated, not verified
    with pytest.raises(VerifyError, match=r"instruction \d+ `vp(add|sub)[wd] .*` can overflow in lane \d+: "
                                          r"result in \[-?\d+, -?\d+\] leaves u?int"):
        verify_kernel(kernel, {0: lanes}, p.q, signed=mul == "montgomery")
    # the same instructions with the reductions kept are accepted
    b = kernel_builder(ar.layout)
    build_ntt(b, ar, good, "t_twiddles")
    compiled = compile_kernel(b, "t_forward", contract, p.target, modulus=p.q, signed=mul == "montgomery")
    assert compiled.proof.idioms_checked == good.count


def _kyber_avx512_inverse():
    p = load(REPO / "params/kyber-3329.toml")
    target = next(t for t in p.targets if t.isa.name == "avx512")
    ar = design(p, target)
    return p, target, ar, schedule(ar, p.policy, "inverse", input_bound(ar.math, "inverse", p.width))


def test_an_inverse_reduces_its_sums_after_the_layer_that_made_them():
    """kyber-3329's zmm inverse: the sums of layer 3 reduced in layer 3's registers (four of them) keep
    layers 2 to 0 inside int16, where reductions before layer 2 (in its registers, after the lane moves
    between) took eight; in the kernel they come before the lane moves."""
    p, _, ar, s = _kyber_avx512_inverse()
    assert s.after == ((3, frozenset({0, 64, 128, 192})),) and s.count == 4 and not any(r for _, r in s.before)
    assert any("after layer 3" in line for line in s.describe())
    assert s.manifest()["after_layer"] == [{"layer": 3, "registers": [0, 64, 128, 192]}]
    body = STORE.bundle(p).function("ntt_inverse", isa="avx512").kernel.body
    reduced = [i for i, ins in enumerate(body) if ins.comment.endswith("after layer 3")]
    layer_2 = next(i for i, ins in enumerate(body) if ins.comment.endswith("layer 2"))
    moves = [i for i, ins in enumerate(body) if ins.op == "vshufi64x2" and i < layer_2]
    assert len(reduced) == 4 and moves and max(reduced) < min(moves)


def test_verifier_refuses_an_inverse_without_its_reductions_after_a_layer():
    p, target, ar, good = _kyber_avx512_inverse()
    bad = dataclasses.replace(good, after=())
    contract = STORE.bundle(p).function("ntt_inverse", isa="avx512").contract
    top = input_bound(ar.math, "inverse", p.width)
    b = kernel_builder(ar.layout)
    build_ntt(b, ar, bad, "t_twiddles")
    kernel = compile_kernel(b, "t_inverse", contract, target).kernel  # allocated, not verified
    with pytest.raises(VerifyError, match=r"can overflow in lane \d+"):
        verify_kernel(kernel, {0: (-top, top)}, p.q)
    b = kernel_builder(ar.layout)
    build_ntt(b, ar, good, "t_twiddles")
    compiled = compile_kernel(b, "t_inverse", contract, target, modulus=p.q)
    assert compiled.proof is not None


def _natural(n: int, d: int) -> list[int]:
    """Block j (zeta psi^(2j+1)) at positions d*j..: the bit-reversed block index."""
    bits = (n // d).bit_length() - 1
    return [d * int(f"{p // d:0{bits}b}"[::-1] or "0", 2) + p % d for p in range(n)]


@pytest.mark.parametrize("isa, bits", [("avx2", 16), ("sse", 16), ("avx2", 32), ("avx2", 64)])
def test_layout_plan_pairs_partners_for_every_size_and_order(isa, bits):
    """Every n from 2 to 4096 with every block degree up to 8, in every order:
    the plan pairs partners (plan() checks it, and that the inverse comes back
    to the natural order), leaves the order asked for (standard: the in-place
    order, position = index; natural: blocks in natural zeta order), uses 16
    lanes whenever the array allows, and after base multiplication's swaps each
    register holds coefficient k of the same blocks as its unit's partners. The
    natural order is refused only where it would move coefficients between the
    final pass's groups of registers. Where blocks of degree 2 keep their
    coefficients side by side, 16-bit base multiplication takes them there
    (pairs of products summed by `vpmaddwd`); wider lanes split them too."""
    target = make_target(isa, bits)
    for log_n in range(1, 13):
        n = 1 << log_n
        for layers in range(max(1, log_n - 3), log_n + 1):
            for order in ("fastest", "standard", "natural"):
                try:
                    layout = plan(n, layers, target, order)
                except ValueError as e:
                    assert order == "natural" and "between the final pass's groups" in str(e), (n, layers, order, e)
                    continue
                d = layout.d
                assert sorted(layout.output_order) == list(range(n))
                if order == "standard":
                    assert list(layout.output_order) == list(range(n))
                if order == "natural":
                    assert list(layout.output_order) == _natural(n, d)
                assert layout.lanes == min(256 // bits, n // max(2, d))
                vectors = layout.vector_indices(layout.output_order)
                assert layout.pair_basemul == (layout.pairs_in_lanes and bits == 16)
                if layout.pair_basemul:  # the pair base multiplication: each block's two coefficients side by side
                    assert order != "fastest" and not layout.block_steps and d == 2
                    assert all(v[k + 1] == v[k] + 1 and v[k] % 2 == 0 for v in vectors for k in range(0, len(v), 2))
                    continue
                for unit in block_units(layout):
                    idx = [vectors[v] for v in unit]
                    for step in layout.block_steps:
                        for lo, hi in unit_pairs(unit, step.slot_bit):
                            idx[lo], idx[hi] = layout.move(step, idx[lo], idx[hi])
                    by_blocks = {}
                    for lanes in idx:
                        assert len({i % d for i in lanes}) == 1, (n, layers, order)
                        by_blocks.setdefault(tuple(i // d for i in lanes), set()).add(lanes[0] % d)
                    assert all(ks == set(range(d)) for ks in by_blocks.values()), (n, layers, order)
                    assert all(len(set(blocks)) == layout.lanes for blocks in by_blocks)


# n below 32, and blocks too large for 16 lanes: vectors of 8, 4, 2 and 1 lanes
SMALL = [(2, 13), (4, 13), (4, 17), (8, 13), (8, 41), (8, 17), (16, 13), (16, 41), (16, 17), (16, 97),
         (32, 41), (64, 17)]


@pytest.mark.parametrize("n, q", SMALL, ids=[f"n{n}-q{q}" for n, q in SMALL])
def test_small_vectors_pass_against_sympy(n, q):
    p = from_mapping({"name": f"s{n}-{q}", "family": "ntt", "n": n, "q": q, "isa": ["avx2", "sse"]}, "small")
    layout = plan(p.n, p.layers, p.target)
    assert layout.lanes < 16
    outcome = run_kerngen_test(p, seed=n + q, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed > 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=2000),
       st.sampled_from(["eager", "layer", "index", "minimal"]), st.sampled_from(["auto", "barrett", "special"]))
def test_every_validated_set_emits(log_n, k, policy, reducer):
    """Any (n, q, policy, reducer) that validation accepts builds and verifies:
    q of the NTT-friendly shape k * 2^(log2 n + 1) + 1, up to the lanes' limit."""
    from kerngen.errors import ParamError
    n = 1 << log_n
    q = k * (2 * n) + 1
    assume(q < 32768 and sympy.isprime(q))
    try:
        p = from_mapping({"name": "v", "family": "ntt", "n": n, "q": q, "reduction": policy, "reducer": reducer,
                          "isa": ["avx2", "sse"]}, "v")
    except ParamError as e:
        assert e.key in ("q", "reducer"), e
        return
    bundle = build(p)
    for isa in ("avx2", "sse"):
        assert {f.kind for f in bundle.functions if f.isa == isa} >= {"ntt_forward", "ntt_inverse", "basemul", "freeze"}


@pytest.mark.parametrize("q, karatsuba", [(3329, True), (7937, False)])
def test_degree_one_blocks_by_karatsuba_where_it_costs_less(q, karatsuba):
    """Three products per block of degree 1 instead of four where the sums
    a0 + a1 fit the lanes and the cross term (a0 + a1)(b0 + b1) - a0 b0 -
    a1 b1, bounded by the verifier's Karatsuba check, needs no final
    reduction: Kyber's inputs up to 4.9q; not q = 7937's up to 19179, whose
    sums would leave int16. Either way the kernel passes the harness (sums
    against SymPy, basis proofs)."""
    p = from_mapping({"name": f"k256-{q}", "family": "ntt", "n": 256, "q": q, "isa": ["avx2", "sse"]}, "t")
    for fn in build(p).functions:
        if fn.kind == "basemul":
            assert dict(fn.facts)["karatsuba"] is karatsuba
            if karatsuba:  # per register of blocks: 3 products, 3 factors w' (2 where the third is their
                # sum), the zeta's product: 15 (14) in all
                per = 14 if dict(fn.facts)["summed_factors"] else 15
                muls = sum(1 for ins in fn.kernel.body if ins.op in ("vpmulhw", "vpmullw", "pmulhw", "pmullw"))
                assert muls == per * 256 // 2 // (fn.kernel.target.isa.vector_bits // 16)
    outcome = run_kerngen_test(p, seed=7, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


def test_a_karatsuba_cross_term_is_bounded_only_from_the_sums_of_its_factors():
    """kyber-3329's cross terms are proven in [-12986, 12986], not the ±28975
    that intervals give; a cross term whose big product is not of the other
    two products' summed factors (here its first subtraction's sources
    swapped, or a sum of its factors made a difference) is refused."""
    import dataclasses
    from kerngen.passes.idioms.karatsuba import KARATSUBA
    p = load(REPO / "params/kyber-3329.toml")
    fn = next(f for f in STORE.bundle(p).functions if f.kind == "basemul" and f.kernel.target.isa.name == "avx2")
    inputs = {1: (-16184, 16184), 2: (-16184, 16184)}
    assert verify_kernel(fn.kernel, inputs, p.q).hull(0) == (-12986, 12986)
    body = list(fn.kernel.body)
    start = next(i for i, ins in enumerate(body) if ins.idiom and ins.idiom.kind == KARATSUBA)
    ins = body[start]
    swapped = dataclasses.replace(ins, operands=(ins.operands[0], ins.operands[2], ins.operands[1]))
    with pytest.raises(VerifyError, match="Karatsuba cross term that in lane 0 does not multiply the sums"):
        verify_kernel(dataclasses.replace(fn.kernel, body=tuple(body[:start] + [swapped] + body[start + 1:])),
                      inputs, p.q)
    add = next(i for i, ins in enumerate(body) if ins.op == "vpaddw")
    difference = dataclasses.replace(body[add], op="vpsubw")
    # (a difference for the factors' sum: the sum's w' no longer matches it, caught first)
    with pytest.raises(VerifyError, match="does not multiply the sums|w' not computed as mullo"):
        verify_kernel(dataclasses.replace(fn.kernel, body=tuple(body[:add] + [difference] + body[add + 1:])),
                      inputs, p.q)


def test_a_centred_32_bit_inverse_scales_on_its_last_layer_and_takes_no_vpmulld(tmp_path, kerngen_cli):
    """ML-DSA's parameters on signed Montgomery lanes: eight layers of sums stay
    inside int32 from centred inputs, so with the scaling on the last layer
    every output is a product by a constant, below q, and the centred output
    needs no final reduction (scaled on the first layer, the last sums would
    need one each); the proven range is still centred."""
    path = tmp_path / "p.toml"
    path.write_text('name = "ml-dsa-like"\nfamily = "ntt"\nn = 256\nq = 8380417\nwidth = 32\nisa = "avx2"\n'
                    'order = "standard"\nmul = "montgomery"\n'
                    'output = { basemul = "centred", inverse = "centred" }\n')
    r = kerngen_cli("emit", path, "--out", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    asm = (tmp_path / "b" / "ml-dsa-like.asm").read_text()
    inverse = asm.split("kg_mldsalike_ntt_inverse_avx2:\n", 1)[1].split(".end:", 1)[0]
    assert inverse.count("layer 0") > 0 and "the output range asked for" not in inverse
    # t = lo(x*w') by two widening products, not vpmulld (two µops, ten cycles on Intel)
    forward = asm.split("kg_mldsalike_ntt_forward_avx2:\n", 1)[1].split(".end:", 1)[0]
    assert "vpmuldq" in forward and "vpmulld" not in forward + inverse
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    fn = next(f for f in manifest["functions"] if f["kind"] == "ntt_inverse")
    lo, hi = fn["output"]["bound"]
    assert -8380416 <= lo and hi <= 8380416
