import dataclasses

import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

from kerngen.bounds import schedule
from kerngen.errors import VerifyError
from kerngen.isa.abi import SYSV
from kerngen.isa.ir import ArgSpec, Builder
from kerngen.isa.pipeline import compile_kernel
from kerngen.kernels.ntt16 import block_registers, build_ntt
from kerngen.kernels.ntt_layout import plan
from kerngen.kernels.reductions import reducers
from kerngen.numtheory import NttMath
from kerngen.params import from_mapping, load
from kerngen.testing import test_params as run_kerngen_test
from kerngen.verify import verify_kernel

from conftest import REPO

NTT_SETS = sorted(p for p in (REPO / "params").glob("*.toml") if load(p).family == "ntt")


@pytest.mark.parametrize("path", NTT_SETS, ids=lambda p: p.stem)
def test_shipped_set_passes_against_sympy(path):
    outcome = run_kerngen_test(load(path), seed=3, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 20


@pytest.mark.parametrize("policy", ["eager", "layer", "index"])
@pytest.mark.parametrize("reducer", ["barrett", "special"])
def test_every_policy_and_reducer_passes(policy, reducer):
    p = load(REPO / "params/kyber-r1-7681.toml", policy=policy, reducer=reducer)
    outcome = run_kerngen_test(p, seed=5, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


def _usable(n: int, q: int) -> bool:
    from kerngen.errors import ParamError
    try:
        from_mapping({"name": "r", "family": "ntt", "n": n, "q": q}, "random")
        return True
    except ParamError:
        return False


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([2, 8, 16, 32, 64, 128, 256]), st.integers(min_value=3, max_value=32767),
       st.sampled_from(["eager", "layer", "index", "minimal"]), st.sampled_from(["auto", "barrett"]))
def test_random_primes_emit_verify_and_pass(n, seed, policy, reducer):
    q = sympy.nextprime(seed % 32000)
    while q >= 32768 or not _usable(n, q):
        q = sympy.nextprime(q) if q < 32000 else 257
    p = from_mapping({"name": f"r{n}-{q}", "family": "ntt", "n": n, "q": q, "reduction": policy,
                      "reducer": reducer}, "random")
    outcome = run_kerngen_test(p, seed=seed, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


@pytest.mark.parametrize("path", [p for p in NTT_SETS if load(p).n <= 512], ids=lambda p: p.stem)
def test_reduction_counts_are_ordered(path):
    """eager >= layer >= index >= minimal, for every reduction kind and both directions."""
    p = load(path)
    math, layout = NttMath(p.n, p.q, p.layers), plan(p.n, p.layers)
    for direction, bound in (("forward", p.q - 1), ("inverse", 16383)):
        for red in reducers(p.q).values():
            counts = [schedule(math, layout, pol, direction, bound, red).count
                      for pol in ("eager", "layer", "index", "minimal")]
            assert counts == sorted(counts, reverse=True), (p.name, direction, red.kind, counts)


@pytest.mark.parametrize("policy", ["eager", "layer", "minimal"])
@pytest.mark.parametrize("path", NTT_SETS, ids=lambda p: p.stem)
def test_every_policy_passes_on_shipped_sets(path, policy):
    """(index, the default, is covered by test_shipped_set_passes_against_sympy)"""
    outcome = run_kerngen_test(load(path, policy=policy), seed=9, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures


def test_verifier_refuses_a_schedule_without_its_reductions():
    """newhope-12289 needs reductions in its forward NTT; drop them and the verifier must say where."""
    p = load(REPO / "params/newhope-12289.toml")
    math, layout = NttMath(p.n, p.q, p.layers), plan(p.n, p.layers)
    red = reducers(p.q)["barrett"]
    good = schedule(math, layout, "index", "forward", p.q - 1, red)
    assert good.count > 0
    bad = dataclasses.replace(good, before=tuple((layer, frozenset()) for layer, _ in good.before))
    b = Builder()
    build_ntt(b, math, layout, bad, red, "t_twiddles")
    kernel = compile_kernel(b, "t_forward", (ArgSpec("a", "inout", "int16_t", 2, p.n, 32),), SYSV)
    with pytest.raises(VerifyError, match=r"instruction \d+ `vp(add|sub)w .*` can overflow in lane \d+: result in \[-?\d+, -?\d+\]"):
        verify_kernel(kernel, {0: (-(p.q - 1), p.q - 1)}, p.q)
    # the same instructions with the reductions kept are accepted
    b = Builder()
    build_ntt(b, math, layout, good, red, "t_twiddles")
    kernel = compile_kernel(b, "t_forward", (ArgSpec("a", "inout", "int16_t", 2, p.n, 32),), SYSV)
    proof = verify_kernel(kernel, {0: (-(p.q - 1), p.q - 1)}, p.q)
    assert proof.idioms_checked == good.count


def test_layout_plan_pairs_partners_for_every_size():
    """Every n from 2 to 4096 with every block degree up to 8: the plan pairs
    partners (plan() checks it), is a permutation, uses 16 lanes whenever the
    array allows, and leaves each base block's coefficient k in one register."""
    for log_n in range(1, 13):
        n = 1 << log_n
        for layers in range(max(1, log_n - 3), log_n + 1):
            layout = plan(n, layers)
            assert sorted(layout.output_order) == list(range(n))
            assert layout.lanes == min(16, n // max(2, layout.d))
            for blocks, vecs in block_registers(layout):
                assert len(set(blocks)) == layout.lanes and len(vecs) == layout.d


# n below 32, and blocks too large for 16 lanes: vectors of 8, 4, 2 and 1 lanes
SMALL = [(2, 13), (4, 13), (4, 17), (8, 13), (8, 41), (8, 17), (16, 13), (16, 41), (16, 17), (16, 97),
         (32, 41), (64, 17)]


@pytest.mark.parametrize("n, q", SMALL, ids=[f"n{n}-q{q}" for n, q in SMALL])
def test_small_vectors_pass_against_sympy(n, q):
    p = from_mapping({"name": f"s{n}-{q}", "family": "ntt", "n": n, "q": q}, "small")
    layout = plan(p.n, p.layers)
    assert layout.lanes < 16
    outcome = run_kerngen_test(p, seed=n + q, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed > 0
