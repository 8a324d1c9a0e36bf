"""The shipped ML-KEM bundle (params/mlkem-3329.toml, order = "standard")
called as an ML-KEM implementation calls it: no permutation, no extra
reduction. The references are written here from FIPS 203's pseudocode
(Algorithms 9, 10, 11 and 12: NTT, NTT^-1, MultiplyNTTs, BaseCaseMultiply,
with zeta = 17 and BitRev7), not from kerngen's maths; the kernels are
called through ctypes on the assembled bundle, as a C caller would
(tests/fips.py, shared with the FIPS 204 tests)."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from kerngen.core.contract import ArgContract, Bound, Contract, Values
from kerngen.errors import VerifyError
from kerngen.families import load
from kerngen.families.ntt.contracts import array_arg
from kerngen.families.ntt.design import design
from kerngen.families.ntt.kernels import build_basemul, kernel_builder
from kerngen.families.ntt.reducers import reducers
from kerngen.ir.instr import Imm
from kerngen.passes.lemmas import LemmaError, prove_pair_montgomery
from kerngen.passes.pipeline import compile_kernel

from conftest import REPO, error_lines
from fips import NEEDS_TOOLS, Kernels, bitrev, load_kernels, of_isa, schoolbook

Q, N, ZETA = 3329, 256, 17
BUNDLE = REPO / "generated" / "mlkem-3329"
pytestmark = NEEDS_TOOLS


ZETAS = [pow(ZETA, bitrev(i, 7), Q) for i in range(128)]


def fips_ntt(f: list[int]) -> list[int]:
    """Algorithm 9."""
    f = [x % Q for x in f]
    i, length = 1, 128
    while length >= 2:
        for start in range(0, 256, 2 * length):
            zeta = ZETAS[i]
            i += 1
            for j in range(start, start + length):
                t = zeta * f[j + length] % Q
                f[j + length] = (f[j] - t) % Q
                f[j] = (f[j] + t) % Q
        length //= 2
    return f


def fips_ntt_inverse(f: list[int]) -> list[int]:
    """Algorithm 10."""
    f = [x % Q for x in f]
    i, length = 127, 2
    while length <= 128:
        for start in range(0, 256, 2 * length):
            zeta = ZETAS[i]
            i -= 1
            for j in range(start, start + length):
                t = f[j]
                f[j] = (t + f[j + length]) % Q
                f[j + length] = zeta * (f[j + length] - t) % Q
        length *= 2
    return [x * 3303 % Q for x in f]


def fips_multiply_ntts(f: list[int], g: list[int]) -> list[int]:
    """Algorithms 11 and 12."""
    h = [0] * 256
    for i in range(128):
        gamma = pow(ZETA, 2 * bitrev(i, 7) + 1, Q)
        a0, a1, b0, b1 = f[2 * i], f[2 * i + 1], g[2 * i], g[2 * i + 1]
        h[2 * i] = (a0 * b0 + a1 * b1 * gamma) % Q
        h[2 * i + 1] = (a0 * b1 + a1 * b0) % Q
    return h


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> dict[str, Kernels]:
    assert json.loads((BUNDLE / "manifest.json").read_text())["params"]["order"] == "standard"
    return load_kernels(BUNDLE, tmp_path_factory.mktemp("mlkem"))


def _random_poly(rng: random.Random, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(N)]


@pytest.mark.parametrize("isa", ["avx512", "avx2", "sse"])
def test_the_kernels_are_fips_203_position_by_position(kernels, isa):
    """forward = NTT, basemul = MultiplyNTTs, inverse = NTT^-1, each element
    at the position the standard gives it (times the manifest's scale), on
    random, extreme and unit inputs; outputs inside the promised ranges."""
    k = of_isa(kernels, isa)
    rng = random.Random(203)
    polys = [_random_poly(rng, -(Q - 1), Q - 1) for _ in range(4)]
    polys += [[Q - 1] * N, [-(Q - 1)] * N, [1] + [0] * (N - 1), [0, 1] + [0] * (N - 2)]
    for a, b in zip(polys, polys[1:] + polys[:1]):
        fa, fb = k.array(a), k.array(b)
        k.call("ntt_forward", fa)
        k.call("ntt_forward", fb)
        assert [int(x) % Q for x in fa] == fips_ntt(a)
        lo, hi = k.bound("ntt_forward")
        assert lo <= fa.min() and fa.max() <= hi
        r = k.array([0] * N)
        k.call("basemul", r, fa, fb)
        want = fips_multiply_ntts(fips_ntt(a), fips_ntt(b))
        assert [int(x) % Q for x in r] == [k.scale("basemul") * w % Q for w in want]
        assert -(Q - 1) <= r.min() and r.max() <= Q - 1  # output = "centred"
        inv_in = [int(x) for x in r]
        k.call("ntt_inverse", r)
        assert [int(x) % Q for x in r] == [k.scale("ntt_inverse") * w % Q for w in fips_ntt_inverse(inv_in)]
        assert -(Q - 1) <= r.min() and r.max() <= Q - 1
        # forward, basemul, inverse: the negacyclic product (the two scales cancel)
        assert [int(x) % Q for x in r] == schoolbook(a, b, Q)


@pytest.mark.parametrize("isa", ["avx512", "avx2", "sse"])
@pytest.mark.parametrize("rank", [2, 3, 4])
def test_a_module_lattice_matrix_vector_product(kernels, isa, rank):
    """ML-KEM's t = A s: A sampled uniformly in [0, q) directly in the NTT
    domain (as ML-KEM samples it), s small, forward NTT of s, one
    basemul_acc per row, inverse; compared with schoolbook products of the
    FIPS 203 inverse NTT of A's entries and s. Each row's output may take
    ML-KEM's next addition (a message or error polynomial) without leaving int16."""
    k = of_isa(kernels, isa)
    rng = random.Random(768 + rank)
    a_hat = [[[rng.randrange(Q) for _ in range(N)] for _ in range(rank)] for _ in range(rank)]
    s = [[rng.randint(-3, 3) for _ in range(N)] for _ in range(rank)]
    s_hat = np.concatenate([k.array(p) for p in s])
    for i in range(rank):
        k.call("ntt_forward", s_hat[i * N:(i + 1) * N])
    for row in range(rank):
        t = k.array([0] * N)
        k.call(f"basemul_acc{rank}", t, np.concatenate([k.array(p) for p in a_hat[row]]), s_hat)
        assert -(Q - 1) <= t.min() and t.max() <= Q - 1
        k.call("ntt_inverse", t)
        assert -(Q - 1) <= t.min() and t.max() <= Q - 1
        want = [0] * N
        for col in range(rank):
            a_poly = fips_ntt_inverse(a_hat[row][col])
            want = [(x + y) % Q for x, y in zip(want, schoolbook(a_poly, s[col], Q))]
        assert [int(x) % Q for x in t] == want, (row, rank)


# --- the keys, and bad input --------------------------------------------------------

@pytest.mark.parametrize("line, words", [
    ('order = "bitreversed"', 'order: must be one of fastest, standard, natural, got "bitreversed"'),
    ('order = "natural"\nisa = ["avx2", "sse"]', 'order: "natural" is out of reach on sse'),
    ("basemul_acc = [1]", "basemul_acc: must be a list of sums to fuse, each k from 2 to 8"),
    ("basemul_acc = [2, 9]", "basemul_acc: must be a list of sums to fuse, each k from 2 to 8"),
    ('basemul_acc = ["3"]', "basemul_acc: must be a list of sums to fuse"),
    ("basemul_acc = [3, 3]", "basemul_acc: names a k twice: [3, 3]"),
    ('output = "reduced"', "output: must be one of lazy, centred, canonical for every kernel"),
    ('output = { freeze = "centred" }', "output: must be one of lazy, centred, canonical for every kernel, or a "
                                        "table choosing per kernel (forward, basemul, inverse)"),
    ('output = { inverse = "tight" }', 'got "tight" for inverse'),
    ('q = 18433\noutput = { basemul = "canonical" }', 'output: basemul = "canonical" needs q - 1 <= 16383'),
])
def test_bad_order_accumulation_or_output_exits_2_and_writes_nothing(tmp_path, line, words, kerngen_cli):
    src = tmp_path / "p.toml"
    head = 'name = "p"\nfamily = "ntt"\nn = 256\n' + ("" if line.startswith("q =") else "q = 3329\n")
    src.write_text(f"{head}{line}\n")
    r = kerngen_cli("emit", src, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and len(error_lines(r.stderr)) == 1, r.stderr
    assert not (tmp_path / "out").exists()


def test_order_option_and_what_the_manifest_and_header_say(tmp_path, kerngen_cli):
    r = kerngen_cli("emit", "kyber-3329", "--order", "standard", "--out", tmp_path / "k")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "k" / "manifest.json").read_text())
    layout = next(f for f in manifest["functions"] if f["kind"] == "ntt_forward")["output"]["layout"]
    assert layout["order"] == "standard" and manifest["params"]["order"] == "standard"
    assert [b["positions"] for b in layout["blocks"]] == [[2 * j, 2 * j + 1] for j in range(128)]
    assert [b["zeta"] for b in layout["blocks"]] == [pow(ZETA, 2 * bitrev(j, 7) + 1, Q) for j in range(128)]
    assert "standard order: block j at D*j..D*j+D-1" in (tmp_path / "k" / "kyber-3329.h").read_text()
    r = kerngen_cli("emit", "kyber-3329", "--order", "sideways", "--out", tmp_path / "x")
    assert r.returncode == 2 and "--order: invalid choice: 'sideways'" in r.stderr


def test_the_centred_inverse_reduces_its_sums_only(tmp_path, kerngen_cli):
    """The inverse's last layer leaves 8 of the 16 AVX2 registers as Montgomery
    products, below q whatever their input: only the 8 sums need the final
    Barrett for the centred output, and the proven range is still centred."""
    r = kerngen_cli("emit", REPO / "params" / "mlkem-3329.toml", "--out", tmp_path / "m")
    assert r.returncode == 0, r.stderr
    asm = (tmp_path / "m" / "mlkem-3329.asm").read_text()
    body = asm.split("kg_mlkem3329_ntt_inverse_avx2:\n", 1)[1].split(".end:", 1)[0]
    assert body.count("barrett: the output range asked for") == 8
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    inverse = next(f for f in manifest["functions"] if f["symbol"] == "kg_mlkem3329_ntt_inverse_avx2")
    lo, hi = inverse["output"]["bound"]
    assert -(Q - 1) <= lo and hi <= Q - 1


# --- the pair reduction: the verifier's controls ----------------------------------

def _pair_kernel(copies: int, in_abs: int):
    """The mlkem-3329 AVX2 base multiplication of `copies` products, as a builder, and a compile of it."""
    p = load(REPO / "params" / "mlkem-3329.toml")
    t = p.targets[0]
    ar = design(p, t)
    b = kernel_builder(ar.layout)
    build_basemul(b, ar, reducers(Q, 16)["barrett"], "t_zetas", in_abs, None, copies)

    def compile_with(builder, claim: int = in_abs):
        contract = Contract((ArgContract(array_arg(p, t, "r", "out"), None, Values(None)),
                             ArgContract(array_arg(p, t, "a", "in", copies), Values(Bound(0, claim))),
                             ArgContract(array_arg(p, t, "b", "in", copies), Values(Bound(0, claim)))), ())
        return compile_kernel(builder, "t_pair", contract, t, modulus=Q)

    return b, compile_with


def _pair_steps(b) -> list[int]:
    return [i for i, ins in enumerate(b.instrs) if ins.idiom is not None and ins.idiom.kind == "pair_montgomery"]


def test_the_pair_reduction_is_verified_and_its_faults_refused():
    """The kernel as built verifies (a bilinear map, bounds proven); each fault
    in its reduction's structure is refused by the verifier, naming it."""
    b, compile_with = _pair_kernel(1, Q - 1)
    good = compile_with(b)
    assert good.proof.forms and good.proof.products_checked >= 16
    steps = _pair_steps(b)
    blend = next(i for i in steps if b.instrs[i].op == "vpblendw")
    shift = next(i for i in steps if b.instrs[i].op == "vpslld")
    high = [i for i in steps if b.instrs[i].op == "vpblendw"][1]
    faults = {
        "blend immediate": (blend, lambda ins: dataclasses.replace(ins, operands=ins.operands[:-1] + (Imm(0x55),))),
        "shift count": (shift, lambda ins: dataclasses.replace(ins, operands=ins.operands[:-1] + (Imm(8),))),
        "halves of other sums": (high, lambda ins: dataclasses.replace(
            ins, operands=(ins.operands[0], ins.operands[2], ins.operands[1], ins.operands[3]))),
    }
    for what, (i, change) in faults.items():
        original = b.instrs[i]
        b.instrs[i] = change(original)
        try:
            with pytest.raises(VerifyError, match="pair reduction"):
                compile_with(b)
        finally:
            b.instrs[i] = original
    compile_with(b)  # put back: verifies again
    # the lemma itself fails with a wrong q^-1
    with pytest.raises(LemmaError):
        prove_pair_montgomery(Q, 16, qinv=-3325)


def test_the_pair_reduction_refuses_sums_that_could_overflow():
    """Four products built for inputs below q, claimed for inputs up to 2^14:
    the 32-bit sums or the reduced result could overflow, and the verifier says so."""
    b, compile_with = _pair_kernel(4, Q - 1)
    compile_with(b)
    with pytest.raises(VerifyError, match="pair reduction that can"):
        compile_with(b, claim=1 << 14)
