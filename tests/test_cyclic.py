"""The cyclic ring x^n - 1 and cosets: the maths (the zetas are the
evaluation points; a product in the NTT domain is the product mod x^n - 1,
or mod x^n - c g^n on the coset g, by SymPy), the parameters' refusals, and
one small bundle per lane width passing `kerngen test` (round trips,
basis-vector proofs and the layout check, all read from the manifest)."""

from __future__ import annotations

import copy
import json
import random

import pytest
from sympy import ZZ
from sympy.polys.galoistools import gf_from_int_poly, gf_mul, gf_rem, gf_to_int_poly

from kerngen.commands.test import test_bundle as run_kerngen_bundle
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import ParamError
from kerngen.families import from_mapping
from kerngen.families.ntt import checks
from kerngen.families.ntt.maths import NttMath, max_layers
from kerngen.families.ntt.reference import block_products

from conftest import STORE

Q = 7681  # q - 1 = 2^9 * 15


def _butterflies(m: NttMath, a: list[int]) -> list[int]:
    """The forward NTT by its definition in `m`: Cooley-Tukey butterflies
    (a + s b, a - s b) on partners 2^bit apart, layer by layer, in place."""
    a, n, q = list(a), m.n, m.q
    for layer in range(m.layers):
        half = n >> (layer + 1)
        bit = half.bit_length() - 1
        for i in (i for i in range(n) if not i & half):
            s = m.twiddles(layer, bit, [i], inverse=False)[0]
            a[i], a[i + half] = (a[i] + s * a[i + half]) % q, (a[i] - s * a[i + half]) % q
    return a


def _inverse_butterflies(m: NttMath, a: list[int]) -> list[int]:
    """The inverse: Gentleman-Sande butterflies ((a + b), (a - b) s^-1) from
    the last layer back, then the halvings' 2^-L."""
    a, n, q = list(a), m.n, m.q
    for layer in reversed(range(m.layers)):
        half = n >> (layer + 1)
        bit = half.bit_length() - 1
        for i in (i for i in range(n) if not i & half):
            s_inv = m.twiddles(layer, bit, [i], inverse=True)[0]
            a[i], a[i + half] = (a[i] + a[i + half]) % q, (a[i] - a[i + half]) * s_inv % q
    return [x * m.inverse_scale(1) % q for x in a]


def _sympy_product(a: list[int], b: list[int], q: int, c: int) -> list[int]:
    """a * b mod (x^n - c) over GF(q), low degree first, by SymPy's dense GF(q) polynomials."""
    n = len(a)

    def gf(coeffs):
        return gf_from_int_poly([x % q for x in reversed(coeffs)], q)

    rem = gf_rem(gf_mul(gf(a), gf(b), q, ZZ), gf([-c] + [0] * (n - 1) + [1]), q, ZZ)
    low = [x % q for x in reversed(gf_to_int_poly(rem, q, symmetric=False))]
    return (low + [0] * n)[:n]


def _brv(j: int, bits: int) -> int:
    return int(format(j, f"0{bits}b")[::-1], 2)


def test_the_cyclic_zetas_are_the_points_omega_brv_j_and_the_forward_ntt_evaluates_there():
    n = 16
    m = NttMath(n, Q, 4, "cyclic")
    omega = m.final_zetas[_brv(1, 4)]
    assert pow(omega, n // 2, Q) == Q - 1  # a primitive 16th root of unity
    assert m.final_zetas == tuple(pow(omega, _brv(j, 4), Q) for j in range(n))  # the in-place DIT order
    a = [random.Random(1).randrange(Q) for _ in range(n)]
    evaluations = [sum(c * pow(z, i, Q) for i, c in enumerate(a)) % Q for z in m.final_zetas]
    assert _butterflies(m, a) == evaluations
    g = 3
    coset = NttMath(n, Q, 4, "cyclic", g)
    assert coset.final_zetas == tuple(g * z % Q for z in m.final_zetas)  # g times the same points
    assert _butterflies(coset, a) == [sum(c * pow(g * z, i, Q) for i, c in enumerate(a)) % Q for z in m.final_zetas]


@pytest.mark.parametrize("ring, coset, layers", [("cyclic", 1, 4), ("cyclic", 1, 3), ("cyclic", 3, 4),
                                                 ("cyclic", 3, 2), ("negacyclic", 1, 3), ("negacyclic", 5, 3)])
def test_a_product_in_the_ntt_domain_is_the_product_in_the_ring(ring, coset, layers):
    """forward, blockwise products mod x^d - zeta_j, inverse == a*b mod (x^n - c g^n), c = +-1."""
    n = 16
    m = NttMath(n, Q, layers, ring, coset)
    rng = random.Random(layers * 10 + coset)
    a, b = ([rng.randrange(Q) for _ in range(n)] for _ in range(2))
    blocks = [list(range(j * m.d, (j + 1) * m.d)) for j in range(n // m.d)]
    fa, fb = _butterflies(m, a), _butterflies(m, b)
    products = block_products([[fa[i] for i in blk] for blk in blocks], [[fb[i] for i in blk] for blk in blocks],
                              list(m.final_zetas), Q)
    c = (1 if ring == "cyclic" else -1) * pow(coset, n, Q)
    assert _inverse_butterflies(m, [x for p in products for x in p]) == _sympy_product(a, b, Q, c)
    if coset != 1 or ring != "cyclic":  # the other ring gives another product: the check can fail
        assert _sympy_product(a, b, Q, 1) != _sympy_product(a, b, Q, c)


def test_the_cyclic_ring_needs_one_bit_of_two_adicity_less():
    assert (max_layers(512, Q, "cyclic"), max_layers(512, Q, "negacyclic")) == (9, 8)
    zetas = NttMath(512, Q, 9, "cyclic").final_zetas
    assert len(set(zetas)) == 512 and all(pow(z, 512, Q) == 1 for z in zetas)


BASE = {"name": "c", "family": "ntt", "n": 16, "q": Q, "width": 16, "ring": "cyclic"}


@pytest.mark.parametrize("change, key, words", [
    ({"ring": "anticyclic"}, "ring", "must be one of"),
    ({"coset": 0}, "coset", "1 < g < q"),
    ({"coset": Q}, "coset", "1 < g < q"),
    ({"coset": True}, "coset", "1 < g < q"),
    ({"coset": "3"}, "coset", "1 < g < q"),
    ({"coset": NttMath(16, Q, 4, "cyclic").final_zetas[1]}, "coset", "g^16 = 1"),  # -1: on the points again
    ({"n": 1024, "layers": 10}, "layers", "2^layers must divide"),
])
def test_bad_rings_and_cosets_are_refused(change, key, words):
    with pytest.raises(ParamError) as e:
        from_mapping({**BASE, **change}, "test_cyclic")
    assert e.value.key == key and words in str(e.value), str(e.value)


# one bundle per lane width: 16-bit signed Montgomery lanes in the standard order with a fused sum, 32-bit
# lanes on a coset in the natural order with blocks of degree 2, 64-bit Shoup lanes on AVX2 and general
# registers with canonical output
SETS = {
    "cyclic16": {"n": 16, "q": Q, "width": 16, "isa": ["avx2", "sse"], "order": "standard", "basemul_acc": [2]},
    "coset32": {"n": 32, "q": 1073479681, "width": 32, "isa": ["avx2", "sse"], "order": "natural", "layers": 4,
                "coset": 7},
    "cyclic64": {"n": 16, "q": 1125899906826241, "width": 64, "isa": ["avx2", "scalar"], "layers": 3,
                 "output": "canonical"},
}


def _params(name: str):
    return from_mapping({"name": name, "family": "ntt", "ring": "cyclic", **SETS[name]}, "test_cyclic")


@pytest.mark.parametrize("name", SETS)
def test_a_cyclic_bundle_states_its_ring_and_passes_kerngen_test(name, tmp_path):
    p = _params(name)
    files = render(STORE.bundles(p), "test")
    manifest = json.loads(files["manifest.json"])
    g = SETS[name].get("coset")
    assert manifest["params"]["ring"] == "cyclic" and manifest["params"].get("coset") == g
    modulus = f"x^{p.n}-{f'{g}^{p.n}' if g else 1}"
    assert f"NTT kernels over Z_{p.q}[x]/({modulus})" in files[f"{name}.h"]
    write(files, tmp_path / name)
    outcome = run_kerngen_bundle(tmp_path / name, 3, lambda s: None, tmp_path, reemit=False)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 2 * 20  # both ISAs' kernels ran
    assert checks.layout_check(manifest) is None
    swapped = copy.deepcopy(manifest)  # the layout check reads the ring: the negacyclic one's is refused
    for key in ("ring", "coset"):
        swapped["params"].pop(key, None)
    assert "is not x^n + 1" in checks.layout_check(swapped)
