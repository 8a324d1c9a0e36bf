"""GF(2^m) family: every shipped field through the C harness against SymPy,
random irreducible polynomials, the sse (legacy-encoded) path, bad parameters."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerngen.commands import on_model
from kerngen.commands.test import test_bundle as run_bundle_tests
from kerngen.core.family import Calls, native
from kerngen.errors import HarnessError, ParamError
from kerngen.core.params import Overrides
from kerngen.families import from_mapping, load
from kerngen.families.gf2m import checks as gf2m_checks, ladder as gf2m_ladder, reference
from kerngen.families.gf2m.build import build as gf2m_build
from kerngen.families.gf2m.gf2x import is_irreducible
from kerngen.harness import protocol, toolchain
from kerngen.harness.cpu import MASK_VARIABLE
from kerngen.emission.files import write
from kerngen.emission.render import render

from conftest import STORE, under_valgrind

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(ROOT.glob("params/gf2m-*.toml"))

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gf2m")


def _run_checks(bundle, work: Path, seed: int = 7) -> list[str]:
    """Everything `kerngen test` does to a bundle: sampled checks and basis-vector proofs."""
    out = work / bundle.name
    write(render(bundle, f"kerngen emit {bundle.name}"), out)
    return list(run_bundle_tests(out, seed, lambda s: None, work, reemit=False).failures)


def _params(m: int, poly, isa: str | list[str] = "avx2", name: str | None = None):
    table = {"name": name or f"t{m}-{'-'.join(map(str, poly[1:-1]))}-{isa}", "family": "gf2m",
             "m": m, "poly": list(poly), "isa": isa}
    return from_mapping(table, "<test>")


# ---------------------------------------------------------------------------
# shipped fields


@needs_tools
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_field_passes_all_checks(path, work):
    p = load(path)
    bundle = STORE.bundle(p)
    kinds = {f.kind for f in bundle.functions}
    assert kinds == {"gf2m_mul", "gf2m_sqr", "gf2m_reduce", "gf2m_mulwide", "gf2m_muladd",
                     "gf2m_msqr", "gf2m_inv", "gf2m_ladder_step", "gf2m_mul_lazy", "gf2m_sqr_lazy",
                     "gf2m_freeze"}
    assert {f.kernel.symbol.rpartition("_")[2] for f in bundle.functions} == set(p.isas)
    for f in bundle.functions:
        assert f.kernel.symbol.startswith(p.prefix + "_")
        assert f.manifest()["m"] == p.m and f.manifest()["poly"] == list(p.poly)
        assert f.manifest()["output"]["bound"][0] == 0
    assert _run_checks(bundle, work) == []


def test_shipped_set_is_the_nist_fields():
    polys = {load(p).m: load(p).poly for p in SHIPPED}
    assert polys == {163: (163, 7, 6, 3, 0), 233: (233, 74, 0), 283: (283, 12, 7, 5, 0),
                     409: (409, 87, 0), 571: (571, 10, 5, 2, 0)}


def test_manifest_states_contracts():
    p = load(ROOT / "params/gf2m-233.toml", Overrides(isa="avx2"))  # every ISA's kernels state the same contracts
    files = render(gf2m_build(p, msqr_steps=(4,)), "kerngen emit params/gf2m-233.toml")
    import json
    man = json.loads(files["manifest.json"])
    by_kind = {f["kind"]: f for f in man["functions"]}
    assert by_kind["gf2m_mul"]["input"]["bound"] == [0, 2**233 - 1]
    assert by_kind["gf2m_reduce"]["input"]["bound"] == [0, 2**465 - 1]
    assert by_kind["gf2m_mulwide"]["output"]["representation"] == "unreduced"
    for kind in ("gf2m_mul_lazy", "gf2m_sqr_lazy"):
        assert by_kind[kind]["input"] == by_kind[kind]["output"]
        assert by_kind[kind]["output"]["bound"] == [0, 2**256 - 1]
        assert by_kind[kind]["output"]["representation"] == "lazy"
    assert by_kind["gf2m_freeze"]["input"]["representation"] == "lazy"
    assert by_kind["gf2m_freeze"]["output"] == by_kind["gf2m_mul"]["output"]
    assert by_kind["gf2m_msqr"]["k"] == 4
    assert [a["role"] for a in by_kind["gf2m_muladd"]["args"]] == ["out", "in", "in", "in", "in"]
    assert "fully reduced" in files["gf2m-233.h"]


# ---------------------------------------------------------------------------
# the sse path: legacy encoding only, same results


@needs_tools
def test_sse_bundle_is_legacy_encoded_and_correct(work):
    p = _params(233, (233, 74, 0), "sse", "gf2m-233-sse")
    bundle = gf2m_build(p, msqr_steps=(2,))
    asm = render(bundle, "test")["gf2m-233-sse.asm"]
    body = [ln.split(";")[0].strip() for ln in asm.splitlines()]
    mnemonics = {ln.split()[0] for ln in body if ln and not ln.endswith(":") and
                 not ln.startswith(("global", "section", "default", "align", "dq", "dd", "db", "dw"))}
    assert not {mn for mn in mnemonics if mn.startswith("v")}, mnemonics
    assert "pclmulqdq" in mnemonics
    assert _run_checks(bundle, work) == []


# ---------------------------------------------------------------------------
# random irreducible trinomials and pentanomials


def _has_small_factor(poly) -> bool:
    """Ben-Or: f has a factor of degree i iff gcd(x^(2^i) - x, f) != 1. Most
    random candidates fail at a small i, which keeps the search fast; the
    survivor is confirmed by the parameter loader's own test."""
    m = poly[0]
    f = sum(1 << e for e in poly)

    def mod(c):
        while c.bit_length() > m:
            c ^= f << (c.bit_length() - 1 - m)
        return c

    def gcd(a, b):
        while b:
            while a.bit_length() >= b.bit_length():
                a ^= b << (a.bit_length() - b.bit_length())
            a, b = b, a
        return a

    t = 2
    for _ in range(m // 2):
        t = mod(int(bin(t)[2:].replace("", "0")[1:-1] or "0", 2))  # square: spread the bits
        if gcd(f, t ^ 2) != 1:
            return True
    return False


def _irreducible(m: int, terms: int, rng: random.Random):
    for _ in range(4000):
        if m // 2 < terms - 2:
            return None
        mids = sorted(rng.sample(range(1, m // 2 + 1), terms - 2), reverse=True)
        poly = (m, *mids, 0)
        if not _has_small_factor(poly):
            assert is_irreducible(poly)
            return poly
    return None


@needs_tools
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(min_value=16, max_value=300), pentanomial=st.booleans(),
       seed=st.integers(min_value=0, max_value=2**32))
def test_random_field_polynomials(m, pentanomial, seed, work):
    rng = random.Random(seed)
    poly = _irreducible(m, 5 if pentanomial else 3, rng)
    if poly is None:  # some degrees have no irreducible trinomial
        poly = _irreducible(m, 5, rng)
    assert poly is not None
    bundle = gf2m_build(_params(m, poly), msqr_steps=(3,))
    assert _run_checks(bundle, work, seed=seed % 1000) == []


@needs_tools
@pytest.mark.parametrize("m, poly", [(2, (2, 1, 0)), (64, (64, 4, 3, 1, 0)), (127, (127, 1, 0)),
                                     (128, (128, 7, 2, 1, 0)), (129, (129, 5, 0))])
def test_word_boundary_fields(m, poly, work):
    bundle = gf2m_build(_params(m, poly), msqr_steps=(2,))
    assert _run_checks(bundle, work) == []


# ---------------------------------------------------------------------------
# bad parameters


@pytest.mark.parametrize("change, key, words", [
    ({"poly": [233, 73, 0]}, "poly", "reducible"),
    ({"poly": [233, 74]}, "poly", "constant term"),
    ({"poly": "233,74,0"}, "poly", "list"),
    ({"poly": [233, "74", 0]}, "poly", "integer"),
    ({"poly": [233, 0, 74]}, "poly", "decreasing"),
    ({"poly": [233, 74, 74, 0]}, "poly", "distinct"),
    ({"poly": [232, 74, 0]}, "poly", "first exponent"),
    ({"poly": []}, "poly", "non-empty"),
    ({"poly": [233, 159, 0]}, "poly", "m/2"),
    ({"m": 1, "poly": [1, 0]}, "m", "between"),
    ({"m": 4096, "poly": [4096, 1, 0]}, "m", "between"),
    ({"m": 233.0}, "m", "integer"),
    ({"isa": "avx10"}, "isa", "avx512"),
    ({"extra": 1}, "extra", "unknown key"),
])
def test_bad_parameters_name_the_key(change, key, words):
    table = {"name": "bad", "family": "gf2m", "m": 233, "poly": [233, 74, 0]}
    table.update(change)
    with pytest.raises(ParamError) as info:
        from_mapping(table, "bad.toml")
    assert info.value.key == key
    assert f": {key}:" in str(info.value)
    assert words in str(info.value)


def test_missing_m_names_the_key():
    with pytest.raises(ParamError, match=r": m: missing"):
        from_mapping({"name": "bad", "family": "gf2m", "poly": [233, 74, 0]}, "bad.toml")


# ---------------------------------------------------------------------------
# plan facts the kernels rely on


def test_fold_plan_and_chain():
    from kerngen.families.gf2m.plan import field_plan, folds, itoh_tsujii_chain
    plan = field_plan(233, (233, 74, 0))
    assert plan.limbs == 4 and plan.slack == 23
    assert [(c.q, c.bits) for c in plan.chunks] == [(0, 1), (1, 1 << 10)]
    assert [(f.bound_in, f.bound_out) for f in folds(plan, 464)] == [(464, 305), (305, 232)]
    for m in (2, 3, 163, 233, 409, 571):
        k, squarings = 1, 0
        for step, j in itoh_tsujii_chain(m):
            squarings += j if step == "double" else 1
            k = 2 * j if step == "double" else j + 1
        assert k == m - 1 and squarings == m - 2


# ---------------------------------------------------------------------------
# OpenSSL comparisons: same signatures, same answers


@needs_tools
def test_openssl_comparisons_agree_with_kernels(work):
    import dataclasses
    p = load(ROOT / "params/gf2m-233.toml")
    bundle = STORE.bundle(p)
    out = work / "bench-233"
    write(render(bundle, "test"), out)
    lib = toolchain.assemble_shared(out / "gf2m-233.asm", work)
    try:
        items = gf2m_checks.bench_items(bundle, work)
    except HarnessError as e:
        pytest.skip(f"OpenSSL development files missing: {e}")
    cases = []
    for it in items:
        cases.append(it.case)
        cmp = next(c for c in it.comparisons if c.label == "openssl")
        cases.append(dataclasses.replace(it.case, case_id="ossl-" + it.case.case_id, symbol=cmp.symbol, lib=1))
    results = protocol.run_runner([lib, items[0].comparisons[0].library], cases, workdir=work)
    for ours, theirs, it in zip(results[::2], results[1::2], items):
        assert ours.ok and theirs.ok
        n = p.limbs
        if it.kind in ("gf2m_mulwide", "gf2m_mul_lazy", "gf2m_sqr_lazy"):  # OpenSSL's result is reduced
            assert gf2m_checks.value_of(theirs.outputs[0]) == reference.ref_rem(
                gf2m_checks.value_of(ours.outputs[0]), p.poly)
        else:
            assert ours.outputs[0][:n] == theirs.outputs[0][:n], it.kind


# ---------------------------------------------------------------------------
# the demonstrator: Montgomery ladder on B-233, K-233, B-409 against EC_POINT_mul


@needs_tools
@pytest.mark.parametrize("field, mask", [("233", None), ("409", None), ("233", "x86-64-v3,+vpclmulqdq"),
                                         ("233", "x86-64-v3")], ids=["233", "409", "233-zen3", "233-avx2"])
def test_ladder_matches_openssl(field, mask, work, monkeypatch):
    """On this CPU, and as on CPUs without AVX-512 (an AMD Zen 3; one without VPCLMULQDQ, where the
    ladder takes the one-lane step): the ladder calls the kernels of the first ISA the CPU runs."""
    if mask:
        monkeypatch.setenv(MASK_VARIABLE, mask)
    p = load(ROOT / f"params/gf2m-{field}.toml")
    bundle = STORE.bundle(p)
    if mask:
        assert gf2m_ladder.ladder_isa(bundle) == "avx2"
    if mask == "x86-64-v3" and shutil.which("valgrind"):  # valgrind stops at any AVX-512 or 256-bit VPCLMULQDQ
        under_valgrind(monkeypatch)
    out = work / f"ladder-{field}"
    write(render(bundle, "test"), out)
    lib = toolchain.assemble_shared(out / f"gf2m-{field}.asm", work)
    curves = gf2m_ladder.curves_for(bundle)
    assert [c.name for c in curves] == (["b233", "k233"] if field == "233" else ["b409"])
    for curve in curves:
        try:
            failures = gf2m_ladder.ladder_failures(curve, bundle, lib, work, seed=3)
        except HarnessError as e:
            if "libssl-dev" in str(e):
                pytest.skip(str(e))
            raise
        assert failures == []


# ---------------------------------------------------------------------------
# multi-squaring as a precomputed linear map, and the fused ladder step


@needs_tools
@pytest.mark.parametrize("m, poly", [(233, (233, 74, 0)), (129, (129, 5, 0)), (283, (283, 12, 7, 5, 0))])
def test_msqr_linear_map_matches_sympy(m, poly, work):
    bundle = gf2m_build(_params(m, poly, name=f"map{m}"), msqr_steps=(60,))
    by_kind = {f.kind: f for f in bundle.functions}
    assert "linear map" in by_kind["gf2m_msqr"].summary
    assert by_kind["gf2m_inv"].fact("msqr_maps")
    assert _run_checks(bundle, work) == []


def test_ladder_step_kernels_present():
    p = load(ROOT / "params/gf2m-233.toml")
    functions = gf2m_build(p, msqr_steps=()).functions
    assert p.isas == ("avx512", "avx2")
    for isa in p.isas:
        steps = [f for f in functions if f.kind == "gf2m_ladder_step" and f.kernel.target.isa.name == isa]
        assert [f.kernel.symbol for f in steps] == [f"kg_gf2m233_ladder_step_{isa}", f"kg_gf2m233_ladder_step2_{isa}"]
        assert "vpclmulqdq" in steps[1].cpu
        # the two-lane step does the same work in fewer instructions
        assert len(steps[1].kernel.body) < 0.75 * len(steps[0].kernel.body)
    avx2_step, avx2_step2 = (f for f in functions if f.kind == "gf2m_ladder_step" and f.symbol.endswith("_avx2"))
    assert "avx2" in avx2_step2.cpu and "vpclmulqdq" not in avx2_step.cpu


def test_reduce_has_xmm_and_gpr_forms():
    # both forms of the reduction ship so that bench can measure them side by side;
    # the checks pick up the GPR one by kind like every other function
    for field in ("233", "409"):
        p = load(ROOT / f"params/gf2m-{field}.toml")
        bundle = STORE.bundle(p)
        red = {f.fact("registers"): f for f in bundle.functions if f.kind == "gf2m_reduce" and f.isa == "avx2"}
        assert set(red) == {"xmm", "gpr"}
        assert red["gpr"].kernel.symbol == f"{p.prefix}_reduce_gpr_avx2"
        assert not any(getattr(op, "kind", None) == "vec" for ins in red["gpr"].kernel.body for op in ins.operands)
        cases = gf2m_checks.checks(json.loads(render(bundle, "test")["manifest.json"]), seed=1)
        assert any(c.case.symbol == red["gpr"].kernel.symbol for c in cases)


def test_a_wrong_pair_of_basis_monomials_is_named_from_its_row():
    """A product's basis proof runs every pair of monomials in one batch and,
    where an image is wrong, names the product and the pair of that row."""
    bundle = STORE.bundle(native(load(ROOT / "params/gf2m-163.toml")))
    mul = bundle.function("gf2m_mul")
    fn = mul.manifest()
    calls = on_model.Model({fn["symbol"]: mul.kernel}).calls()
    bits = fn["input"]["bits"]

    def one_bit_off(function: dict, inputs: dict) -> dict:
        out = dict(calls.batch(function, inputs))
        out[0] = out[0].copy()
        out[0][5 * bits + 7, 0] ^= 1  # the image of the pair (x^5, x^7)
        return out

    manifest = {"params": bundle.params_manifest, "functions": [fn]}
    assert [msg for _, msg in gf2m_checks.basis_proofs(manifest, Calls(calls.run, calls.batch))] == [None]
    [(name, message)] = gf2m_checks.basis_proofs(manifest, Calls(calls.run, one_bit_off))
    assert f"{bits * bits} pairs" in name and message.startswith(f"basis input ({fn['proof']['monomials'][0]}, 5, 7)")
