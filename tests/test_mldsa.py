"""The shipped ML-DSA bundle (params/mldsa-8380417.toml) called as the
reference implementation of ML-DSA calls its ntt, invntt_tomont and
pointwise_montgomery: no permutation, no extra reduction, the reference's
scales (the inverse gives 2^32 * NTT^-1, base multiplication a*b*2^-32). The
references are written here from FIPS 204's pseudocode (Algorithms 41, 42
and 45: NTT, NTT^-1, MultiplyNTT, with zeta = 1753 and BitRev8), not from
kerngen's maths; caddq is the reference implementation's. The kernels are
called through ctypes on the assembled bundle (tests/fips.py).

Also here: `output = { kernel = B }`, a bound on |value| asked as a number,
which is how the set asks for the inverse's room below q."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import numpy as np
import pytest

from conftest import REPO, STORE, error_lines
from fips import NEEDS_TOOLS, Kernels, bitrev, load_kernels, of_isa, schoolbook

from kerngen.core.compile_cache import CompileCache
from kerngen.core.params import Overrides
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import VerifyError
from kerngen.families import load
from kerngen.families.ntt.build import build
from kerngen.families.ntt.montgomery import Montgomery
from kerngen.ir.instr import Mem
from kerngen.ir.stream import executed
from kerngen.machine.ops import wrap
from kerngen.passes.idioms.montgomery import MONTGOMERY
from kerngen.passes.idioms.montgomery_sum import MONTGOMERY_SUM

Q, N, ZETA = 8380417, 256, 1753
BUNDLE = REPO / "generated" / "mldsa-8380417"
MONT = pow(2, 32, Q)  # invntt_tomont's output scale; pointwise_montgomery's is its inverse
MONT_INV = pow(2, -32, Q)
# the inverse's output strictly inside (-(q - ROOM), q - ROOM): t + s2 with |s2| <= eta <= 4 then stays
# inside (-q, q), where caddq makes it canonical for power2round and decompose
ROOM = 8
ISAS = ["avx512", "avx2", "sse"]
ACC = [4, 5, 7]  # L of ML-DSA-44, -65, -87
pytestmark = NEEDS_TOOLS

ZETAS = [pow(ZETA, bitrev(k, 8), Q) for k in range(256)]


def fips_ntt(w: list[int]) -> list[int]:
    """Algorithm 41."""
    w_hat = [x % Q for x in w]
    m, length = 0, 128
    while length >= 1:
        for start in range(0, 256, 2 * length):
            m += 1
            z = ZETAS[m]
            for j in range(start, start + length):
                t = z * w_hat[j + length] % Q
                w_hat[j + length] = (w_hat[j] - t) % Q
                w_hat[j] = (w_hat[j] + t) % Q
        length //= 2
    return w_hat


def fips_ntt_inverse(w_hat: list[int]) -> list[int]:
    """Algorithm 42."""
    w = [x % Q for x in w_hat]
    m, length = 256, 1
    while length < 256:
        for start in range(0, 256, 2 * length):
            m -= 1
            z = -ZETAS[m]
            for j in range(start, start + length):
                t = w[j]
                w[j] = (t + w[j + length]) % Q
                w[j + length] = z * (t - w[j + length]) % Q
        length *= 2
    f = 8347681  # 256^-1 mod q, as the standard gives it
    return [f * x % Q for x in w]


def fips_multiply_ntt(a_hat: list[int], b_hat: list[int]) -> list[int]:
    """Algorithm 45."""
    return [x * y % Q for x, y in zip(a_hat, b_hat)]


def ref_caddq(a: np.ndarray) -> np.ndarray:
    """The reference implementation's caddq on int32 lanes: q added where negative."""
    return a + ((a >> 31) & Q)


def _residues(a: np.ndarray) -> list[int]:
    return [int(x) % Q for x in a]


def _inside_room(a: np.ndarray) -> bool:
    return -(Q - ROOM) < int(a.min()) and int(a.max()) < Q - ROOM


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> dict[str, Kernels]:
    return load_kernels(BUNDLE, tmp_path_factory.mktemp("mldsa"))


def _edges(lo: int, hi: int, rng: random.Random, randoms: int) -> list[list[int]]:
    """All at the top, all at the bottom, both alternations, then random ones, in [lo, hi]."""
    return ([[hi] * N, [lo] * N, [hi, lo] * (N // 2), [lo, hi] * (N // 2)]
            + [[rng.randint(lo, hi) for _ in range(N)] for _ in range(randoms)])


# --- what the manifest promises -------------------------------------------------------

def test_the_manifest_promises_fips_204_order_and_the_references_scales():
    """Block j at position j with zeta^(2 BitRev8(j) + 1), signed 32-bit lanes,
    scales 2^32 (inverse) and 2^-32 (base multiplications), L = 4, 5, 7, and
    an inverse whose proven bound leaves the room ML-DSA's next addition needs."""
    manifest = json.loads((BUNDLE / "manifest.json").read_text())
    params = manifest["params"]
    assert params["order"] == "standard" and params["mul_used"] == "montgomery"
    assert params["output"]["inverse"] == Q - ROOM - 1
    for isa in ISAS:
        fns = {f["kind"] + str(f.get("k", "")): f for f in manifest["functions"] if f["isa"] == isa}
        assert {f"basemul_acc{k}" for k in ACC} <= set(fns)
        kinds = ["ntt_forward", "ntt_inverse", "basemul", *(f"basemul_acc{k}" for k in ACC)]
        assert all(fns[kind]["dtype"] == "int32" for kind in kinds)  # the reference's int32_t coeffs[N]
        layout = fns["ntt_forward"]["output"]["layout"]
        assert [b["positions"] for b in layout["blocks"]] == [[j] for j in range(N)]
        assert [b["zeta"] for b in layout["blocks"]] == [pow(ZETA, 2 * bitrev(j, 8) + 1, Q) for j in range(N)]
        assert fns["ntt_forward"]["output"]["scale"] == 1
        assert fns["ntt_inverse"]["output"]["scale"] == MONT
        assert all(fns[k]["output"]["scale"] == MONT_INV for k in ["basemul", *(f"basemul_acc{k}" for k in ACC)])
        lo, hi = fns["ntt_inverse"]["output"]["bound"]
        assert -(Q - ROOM) < lo and hi < Q - ROOM
        assert fns["ntt_inverse"]["output"]["representation"] == "centred"
        for kind in ["basemul", *(f"basemul_acc{k}" for k in ACC)]:
            lo, hi = fns[kind]["output"]["bound"]
            assert -(Q - 1) <= lo and hi <= Q - 1  # centred: what the inverse takes
    header = (BUNDLE / "mldsa-8380417.h").read_text()
    assert f"inside the |a[i]| <= {Q - ROOM - 1} asked" in header


# --- the kernels against FIPS 204 -----------------------------------------------------

@pytest.mark.parametrize("isa", ISAS)
def test_the_kernels_are_fips_204_position_by_position(kernels, isa):
    """forward = NTT, basemul = 2^-32 * MultiplyNTT, inverse = 2^32 * NTT^-1,
    each element at the position the standard gives it, on inputs at the
    forward's contract edges, random and unit ones; each output inside its
    promised range, the inverse's inside (-(q - 8), q - 8)."""
    k = of_isa(kernels, isa)
    lo, hi = k.requires("ntt_forward")
    assert (lo, hi) == (-(Q - 1), Q - 1)
    rng = random.Random(204)
    polys = _edges(lo, hi, rng, 4) + [[1] + [0] * (N - 1), [0, 1] + [0] * (N - 2), [0] * (N - 1) + [-1]]
    for a, b in zip(polys, polys[1:] + polys[:1]):
        fa, fb = k.array(a), k.array(b)
        k.call("ntt_forward", fa)
        k.call("ntt_forward", fb)
        assert _residues(fa) == fips_ntt(a)
        out_lo, out_hi = k.bound("ntt_forward")
        assert out_lo <= fa.min() and fa.max() <= out_hi
        r = k.array([0] * N)
        k.call("basemul", r, fa, fb)
        assert _residues(r) == [MONT_INV * x % Q for x in fips_multiply_ntt(fips_ntt(a), fips_ntt(b))]
        assert -(Q - 1) <= r.min() and r.max() <= Q - 1
        inv_in = [int(x) for x in r]
        k.call("ntt_inverse", r)
        assert _residues(r) == [MONT * x % Q for x in fips_ntt_inverse(inv_in)]
        assert _inside_room(r)
        # forward, basemul, inverse: the negacyclic product (2^-32 and 2^32 cancel)
        assert _residues(r) == schoolbook(a, b, Q)


@pytest.mark.parametrize("isa", ISAS)
def test_the_inverse_at_its_contracts_edges(kernels, isa):
    """The inverse on every input its contract allows at the extremes (and
    random ones): 2^32 * NTT^-1, strictly inside (-(q - 8), q - 8) however large the input."""
    k = of_isa(kernels, isa)
    lo, hi = k.requires("ntt_inverse")
    rng = random.Random(42)
    for a in _edges(lo, hi, rng, 6):
        r = k.array(a)
        k.call("ntt_inverse", r)
        assert _residues(r) == [MONT * x % Q for x in fips_ntt_inverse(a)]
        assert _inside_room(r), (int(r.min()), int(r.max()))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("l", ACC)
def test_basemul_acc_sums_l_pointwise_products(kernels, isa, l):
    """basemul_acc for L polynomials: 2^-32 * sum of MultiplyNTT, on inputs at
    the edges of what it takes (the forward's output bound: sums of products at
    their largest) and random ones; centred output (what the inverse takes)."""
    _check_acc(of_isa(kernels, isa), l)


def _check_acc(k: Kernels, l: int) -> None:
    """basemul_acc{l} of `k` against the sum of MultiplyNTT, on the edges of its input contract and random inputs."""
    lo, hi = k.requires(f"basemul_acc{l}")
    assert (lo, hi) == tuple(k.bound("ntt_forward"))
    rng = random.Random(l)
    edges = _edges(lo, hi, rng, 2)
    cases = [(edges[0] * l, edges[0] * l), (edges[0] * l, edges[1] * l), (edges[2] * l, edges[3] * l)]
    cases += [(sum((rng.choice(edges) for _ in range(l)), []), sum((rng.choice(edges) for _ in range(l)), []))
              for _ in range(3)]
    for a, b in cases:
        r = k.array([0] * N)
        k.call(f"basemul_acc{l}", r, k.array(a), k.array(b))
        want = [0] * N
        for i in range(l):
            part = fips_multiply_ntt(a[i * N:(i + 1) * N], b[i * N:(i + 1) * N])
            want = [(x + y) % Q for x, y in zip(want, part)]
        assert _residues(r) == [MONT_INV * x % Q for x in want]
        assert -(Q - 1) <= r.min() and r.max() <= Q - 1


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("rows, cols, top, eta", [
    pytest.param(4, 4, 2, 2, id="ML-DSA-44 keygen"),
    pytest.param(6, 5, 4, 4, id="ML-DSA-65 keygen"),
    pytest.param(8, 7, 2, 2, id="ML-DSA-87 keygen"),
    pytest.param(8, 7, 1 << 19, 0, id="ML-DSA-87 sign, w = A y"),
])
def test_a_matrix_vector_product_as_ml_dsa_computes_it(kernels, isa, rows, cols, top, eta):
    """t = NTT^-1(A_hat o NTT(s1)) + s2 as ML-DSA's key generation computes it
    (A_hat uniform in [0, q), sampled in the NTT domain; s1 in [-eta, eta], or
    y in [-gamma1, gamma1] for signing): the forward of each s1 entry, one
    basemul_acc per row, the inverse, s2 added and the reference's caddq.
    Compared with schoolbook products of FIPS 204's NTT^-1 of A_hat's entries
    and s1. s2 takes the sign of t at every coefficient (the worst case for
    the range): caddq must still give the canonical value."""
    k = of_isa(kernels, isa)
    rng = random.Random(rows * 10 + cols + top)
    a_hat = [[[rng.randrange(Q) for _ in range(N)] for _ in range(cols)] for _ in range(rows)]
    s1 = [[rng.randint(-top, top) for _ in range(N)] for _ in range(cols)]
    s1_hat = np.concatenate([k.array(p) for p in s1])
    for i in range(cols):
        k.call("ntt_forward", s1_hat[i * N:(i + 1) * N])
    for row in range(rows):
        t = k.array([0] * N)
        k.call(f"basemul_acc{cols}", t, np.concatenate([k.array(p) for p in a_hat[row]]), s1_hat)
        k.call("ntt_inverse", t)
        assert _inside_room(t)
        s2 = np.where(t >= 0, eta, -eta).astype(np.int32)
        got = ref_caddq(t + s2)
        want = [0] * N
        for col in range(cols):
            want = [(x + y) % Q for x, y in zip(want, schoolbook(fips_ntt_inverse(a_hat[row][col]), s1[col], Q))]
        assert [int(x) for x in got] == [(x + int(e)) % Q for x, e in zip(want, s2)], (row, rows, cols)


# --- a bound on |value| asked as a number ----------------------------------------------

def _emit(kerngen_cli, tmp_path, body: str, name: str = "p"):
    src = tmp_path / f"{name}.toml"
    src.write_text(f'name = "{name}"\nfamily = "ntt"\n{body}\n')
    return kerngen_cli("emit", src, "--out", tmp_path / name), tmp_path / name


TINY = 'n = 64\nq = 257\nwidth = 16\nisa = "avx2"\nmul = "montgomery"\n'


@pytest.mark.parametrize("body, words", [
    (TINY + "output = { inverse = 1 }", r"output: inverse = 1: a bound on \|value\| must be from \d+ \(what a final "
                                        r"Barrett reduction guarantees for q = 257\) to 32767 \(the lane's top\)"),
    (TINY + "output = { basemul = 32768 }", r"output: basemul = 32768: a bound on \|value\| must be from \d+"),
    (TINY.replace('mul = "montgomery"\n', "") + "output = { inverse = 200 }",
     r'output: inverse = 200 \(a bound on \|value\|\) needs mul = "montgomery" \(signed lanes\), got mul = "auto"'),
    (TINY + "output = { inverse = true }", r"output: must be one of lazy, centred, canonical .* for inverse"),
    (TINY + "output = 200", r"output: must be one of lazy, centred, canonical for every kernel, or a table"),
])
def test_a_bound_that_cannot_be_asked_exits_2_and_writes_nothing(tmp_path, body, words, kerngen_cli):
    r, out = _emit(kerngen_cli, tmp_path, body)
    assert r.returncode == 2, r.stderr
    assert re.search(words, r.stderr) and len(error_lines(r.stderr)) == 1, r.stderr
    assert not out.exists()


def test_the_least_bound_the_message_names_is_met_where_lazy_is_wider(tmp_path, kerngen_cli):
    """The smallest B the refusal names, asked of every kernel, emits: each
    proven bound inside [-B, B] (a final reduction added where the lazy
    bound was wider), the manifest and the contract saying so."""
    r, _ = _emit(kerngen_cli, tmp_path, TINY + "output = { inverse = 1 }", "refused")
    least = int(re.search(r"must be from (\d+)", r.stderr).group(1))
    r, lazy_dir = _emit(kerngen_cli, tmp_path, TINY, "lazy")
    assert r.returncode == 0, r.stderr
    asked = f"output = {{ forward = {least}, basemul = {least}, inverse = {least} }}"
    r, bound_dir = _emit(kerngen_cli, tmp_path, TINY + asked, "bounded")
    assert r.returncode == 0, r.stderr
    lazy, bounded = (json.loads((d / "manifest.json").read_text()) for d in (lazy_dir, bound_dir))
    kinds = ("ntt_forward", "basemul", "ntt_inverse")
    widths = {f["kind"]: max(-f["output"]["bound"][0], f["output"]["bound"][1]) for f in lazy["functions"]}
    assert all(widths[kind] > least for kind in kinds)  # each one needs the reduction the number asks for
    for f in bounded["functions"]:
        if f["kind"] in kinds:
            lo, hi = f["output"]["bound"]
            assert -least <= lo and hi <= least, f["symbol"]
            assert f["output"]["representation"] == "centred" and f["output_range"] == least
    assert bounded["params"]["output"] == {"forward": least, "basemul": least, "inverse": least}
    assert f"inside the |a[i]| <= {least} asked" in (bound_dir / "bounded.h").read_text()


# --- multiply-accumulate that reduces once -------------------------------------------

PARAMS = REPO / "params" / "mldsa-8380417.toml"
LANES = {"avx512": 16, "avx2": 8, "sse": 4}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The bundle as this generator builds it now (generated/ is rewritten by hand; the store's entry is the
    build of this generator's sources), and its kernels."""
    [bundle] = STORE.bundles(load(PARAMS))
    out = tmp_path_factory.mktemp("fresh") / "mldsa-8380417"
    write(render(bundle, "mldsa-8380417"), out)
    return bundle, load_kernels(out, tmp_path_factory.mktemp("fresh_kernels"))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("l", ACC)
def test_basemul_acc_reduces_once_per_coefficient(fresh, isa, l):
    """Each vector of coefficients: 2L widening products summed in 64 bits
    (even and odd lanes apart) and one Montgomery reduction of each sum (two
    more products per half); no product reduced on its own. Its results
    match the sum of MultiplyNTT at the edges of the contract (every product
    at its largest, of either sign) and on random inputs."""
    bundle, kernels = fresh
    [fn] = [f for f in bundle.functions if f.kernel.symbol == f"kg_mldsa8380417_basemul_acc{l}_{isa}"]
    assert dict(fn.facts)["reduce_once"] is True
    body = list(executed(fn.kernel))
    vectors = N // LANES[isa]
    kinds = [ins.idiom.kind for ins in body if ins.idiom is not None and ins.idiom.role == "end"]
    assert kinds == [MONTGOMERY_SUM] * vectors and MONTGOMERY not in kinds
    assert sum(ins.op == "vpmuldq" for ins in body) == vectors * (2 * l + 4)
    assert sum(ins.op in ("vpaddq", "vpaddq_evex") for ins in body) == vectors * 2 * (l - 1)
    _check_acc(of_isa(kernels, isa), l)


def test_pointwise_products_alone_are_reduced_as_before(fresh):
    """L = 1 (pointwise) is one Montgomery product per vector, as before: nothing to sum."""
    bundle, _ = fresh
    for fn in bundle.functions:
        if fn.kind == "basemul":
            kinds = {ins.idiom.kind for ins in executed(fn.kernel) if ins.idiom is not None}
            assert kinds == {MONTGOMERY}, fn.kernel.symbol
            assert "reduce_once" not in dict(fn.facts)


def test_reduce_once_only_where_the_sums_fit():
    """The double-width sum must stay inside int64 and its reduction inside
    int32; 16-bit lanes (a lane-wise high half, no double-width products) keep
    the reduced sums."""
    mul = Montgomery(Q, 32)
    x = 42035255  # the forward's output bound
    assert mul.sum_bound(x, x, 7) == -(-7 * x * x // 2 ** 32) + (Q + 1) // 2
    top = 2 ** 31 - 1
    assert mul.sum_bound(top, top, 3) is None  # S leaves int64
    assert 2 * top * top < 2 ** 63 and mul.sum_bound(top, top, 2) is None  # S fits, S/2^32 + (q+1)/2 leaves int32
    assert Montgomery(3329, 16).sum_bound(3328, 3328, 2) is None


@pytest.mark.parametrize("mutant, words", [
    ("a term left out", "does not depend on every element of its block"),
    ("a wrong q^-1", "multiplies lo\\(S\\) by something other than q\\^-1"),
    ("the odd sum's t from the even sum", "takes t in lane 1 from another value than the sum it reduces"),
])
def test_a_wrong_reduce_once_kernel_is_refused(monkeypatch, mutant, words):
    """Mutants of the reduce-once sum, built through the real build (AVX2):
    the verifier refuses a wrong q^-1 and a t taken from another sum (the
    Montgomery-sum check), and a left-out term (the map proof: every output
    must read every input element of its block)."""
    real = Montgomery.multiply_sum

    def left_out(self, b, pairs, q):
        return real(self, b, pairs[:-1], q)

    def wrong_qinv(self, b, pairs, q):
        with monkeypatch.context() as m:
            m.setattr(Montgomery, "qinv", property(lambda s: wrap(pow(s.q, -1, s.r) + 2, s.bits)))
            return real(self, b, pairs, q)

    def crossed(self, b, pairs, q):
        start = len(b.instrs)
        r = real(self, b, pairs, q)
        # t = lo(lo(S)*q^-1), the products by the table's q^-1: the even half's, then the odd half's
        even, odd = [i for i in range(start, len(b.instrs))
                     if b.instrs[i].op == "vpmuldq" and isinstance(b.instrs[i].operands[2], Mem)]
        ins = b.instrs[odd]
        b.instrs[odd] = dataclasses.replace(ins, operands=(ins.operands[0], b.instrs[even].operands[1],
                                                           ins.operands[2]))
        return r

    monkeypatch.setattr(Montgomery, "multiply_sum", {"a term left out": left_out, "a wrong q^-1": wrong_qinv,
                                                     "the odd sum's t from the even sum": crossed}[mutant])
    with pytest.raises(VerifyError, match="basemul_acc4_avx2: .*" + words):
        build(load(PARAMS, Overrides(isa="avx2")), CompileCache())
