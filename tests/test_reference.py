"""The NTT family's numpy references against SymPy's GF(p) polynomial arithmetic.

The references in kerngen.families.ntt.reference judge every NTT kernel; here
they are judged in turn by sympy.polys.galoistools (dense polynomials over
GF(q), high degree first), on random inputs and on layouts whose binomials
x^d - zeta_j really multiply to x^n + 1.
"""

import itertools
import math
import random
import time

import numpy as np
import pytest
from sympy import ZZ, nextprime, prevprime, primitive_root
from sympy.polys.galoistools import gf_from_int_poly, gf_mul, gf_rem, gf_to_int_poly

from kerngen.families.ntt import reference as ref

# ---- the SymPy side -------------------------------------------------------


def _gf(coeffs_low_first, q):
    return gf_from_int_poly([c % q for c in reversed(coeffs_low_first)], q)


def _low_first(p, q, length):
    low = [c % q for c in reversed(gf_to_int_poly(p, q, symmetric=False))]
    return (low + [0] * length)[:length]


def _binomial(d, zeta, q):
    return gf_from_int_poly([1] + [0] * (d - 1) + [(-zeta) % q], q)


def sympy_reduce(a, d, zeta, q):
    return _low_first(gf_rem(_gf(a, q), _binomial(d, zeta, q), q, ZZ), q, d)


def sympy_block_product(a, b, zeta, q):
    d = len(a)
    return _low_first(gf_rem(gf_mul(_gf(a, q), _gf(b, q), q, ZZ), _binomial(d, zeta, q), q, ZZ), q, d)


def sympy_negacyclic(a, b, q):
    n = len(a)
    modulus = gf_from_int_poly([1] + [0] * (n - 1) + [1], q)
    return _low_first(gf_rem(gf_mul(_gf(a, q), _gf(b, q), q, ZZ), modulus, q, ZZ), q, n)


def sympy_binomials_product(d, zetas, q):
    prod = gf_from_int_poly([1], q)
    for z in zetas:
        prod = gf_mul(prod, _binomial(d, z, q), q, ZZ)
    return _low_first(prod, q, len(zetas) * d + 1)


# ---- layouts whose blocks are the CRT factors of x^n + 1 -----------------


def crt_layout(n, d, q, rng):
    """n/d blocks with zeta_j = psi^(2j+1), psi a primitive (2n/d)-th root of
    unity mod q: the zeta_j are the n/d roots of y^(n/d) + 1, so the x^d - zeta_j
    multiply to x^n + 1. Positions: a random permutation of range(n) in blocks of d."""
    blocks = n // d
    assert (q - 1) % (2 * blocks) == 0
    psi = pow(primitive_root(q), (q - 1) // (2 * blocks), q)
    assert pow(psi, blocks, q) == q - 1  # order exactly 2 * blocks (a power of two)
    perm = list(range(n))
    rng.shuffle(perm)
    return {"d": d, "blocks": [{"zeta": pow(psi, 2 * j + 1, q), "positions": perm[j * d:(j + 1) * d]}
                               for j in range(blocks)]}


QS = (257, 3329, 7681, 12289, 17)
CASES = [(n, d, q) for n, d, q in itertools.product((8, 64, 256), (1, 2, 4, 8), QS)
         if (q - 1) % (2 * n // d) == 0]


def _signed(rng, n, bits=16):
    """Like kernel outputs: signed values, most outside [0, q)."""
    return [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for _ in range(n)]


def test_cases_cover_every_n_d_and_q():
    assert {n for n, _, _ in CASES} == {8, 64, 256}
    assert {d for _, d, _ in CASES} == {1, 2, 4, 8}
    assert {q for _, _, q in CASES} == set(QS)


@pytest.mark.parametrize("n,d,q", CASES)
def test_layout_binomials_multiply_to_x_n_plus_1(n, d, q):
    """The test's own layouts are what they claim, by SymPy."""
    layout = crt_layout(n, d, q, random.Random(n * d + q))
    zetas = [blk["zeta"] for blk in layout["blocks"]]
    assert sympy_binomials_product(d, zetas, q) == [1] + [0] * (n - 1) + [1]


@pytest.mark.parametrize("n,d,q", CASES)
def test_reduce_blocks_matches_sympy(n, d, q):
    rng = random.Random(1000 * n + 10 * d + q)
    layout = crt_layout(n, d, q, rng)
    for a in (_signed(rng, n), [rng.randrange(q) for _ in range(n)], [q - 1] * n):
        want = [sympy_reduce(a, d, blk["zeta"], q) for blk in layout["blocks"]]
        assert ref.reduce_blocks(a, layout, q) == want
        assert [ref.reduce_block(a, d, blk["zeta"], q) for blk in layout["blocks"]] == want


@pytest.mark.parametrize("n,d,q", CASES)
def test_block_products_match_sympy(n, d, q):
    rng = random.Random(2000 * n + 10 * d + q)
    layout = crt_layout(n, d, q, rng)
    zetas = [blk["zeta"] for blk in layout["blocks"]]
    a, b = _signed(rng, n), _signed(rng, n)
    a_blocks, b_blocks = ref.blocks_of(a, layout), ref.blocks_of(b, layout)
    assert a_blocks == [[a[p] for p in blk["positions"]] for blk in layout["blocks"]]
    want = [sympy_block_product(x, y, z, q) for x, y, z in zip(a_blocks, b_blocks, zetas)]
    assert ref.block_products(a_blocks, b_blocks, zetas, q) == want
    assert [ref.block_product(x, y, z, q) for x, y, z in zip(a_blocks, b_blocks, zetas)] == want


@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize("n", (8, 64, 256))
def test_negacyclic_product_matches_sympy(n, q):
    rng = random.Random(3000 * n + q)
    for a, b in ((_signed(rng, n), _signed(rng, n)), ([q - 1] * n, [q - 1] * n)):
        assert ref.negacyclic_product(a, b, q) == sympy_negacyclic(a, b, q)


def test_negacyclic_product_by_x_rotates_and_negates():
    n, q = 8, 17
    a = list(range(1, n + 1))
    x = [0, 1] + [0] * (n - 2)
    assert ref.negacyclic_product(a, x, q) == [(-a[-1]) % q] + a[:-1]


def test_arbitrary_zetas_and_lengths_match_sympy():
    """Any zeta, not only roots of x^n + 1; lengths not a multiple of d; short and empty inputs."""
    rng = random.Random(4)
    for q in QS:
        for d in (1, 2, 3, 4, 5, 8):
            for length in (0, 1, d - 1, d, d + 1, 3 * d + 2, 37):
                a, z = _signed(rng, length), rng.randint(-q, 2 * q)
                assert ref.reduce_block(a, d, z, q) == sympy_reduce(a, d, z, q), (q, d, length)
            a, b, z = _signed(rng, d), _signed(rng, d), rng.randrange(q)
            assert ref.block_product(a, b, z, q) == sympy_block_product(a, b, z, q)


def test_int64_uint64_or_python_integers_by_the_size_of_q(monkeypatch):
    """int64 below 2^31; above it uint64 residues reduced product by product
    below 2^52 (float64 estimates) and 2^62 (where long double is exact),
    Python integers above it (and where it is not); each against SymPy."""
    rng = random.Random(5)
    a = [rng.randint(-(1 << 80), 1 << 80) for _ in range(16)]
    assert ref.reduce_block(a, 4, 3, 12289) == sympy_reduce(a, 4, 3, 12289)
    above = int(nextprime(1 << 62))
    below = int(prevprime(1 << 52))
    cases = [((1 << 31) - 1, True), (below, False), ((1 << 61) - 1, True), ((1 << 61) - 1, False), (above, True)]
    for q, exact in cases:  # Mersenne primes, the last prime below 2^52, and the first above 2^62
        monkeypatch.setattr(ref, "_LONG_DOUBLE_EXACT", exact and ref._LONG_DOUBLE_EXACT)
        assert ref.residue_dtype(q) is (np.int64 if q < 1 << 31 else
                                 np.uint64 if q < 1 << 52 or q < 1 << 62 and ref._LONG_DOUBLE_EXACT else object)
        a, b = [rng.randrange(q) for _ in range(16)], [rng.randrange(q) for _ in range(16)]
        z = rng.randrange(q)
        assert ref.reduce_block(a, 4, z, q) == sympy_reduce(a, 4, z, q)
        assert ref.reduce_block([x - q for x in a], 1, z, q) == sympy_reduce(a, 1, z, q)  # signed inputs
        assert ref.block_product(a[:4], b[:4], z, q) == sympy_block_product(a[:4], b[:4], z, q)
        assert ref.negacyclic_product(a, b, q) == sympy_negacyclic(a, b, q)


def test_int64_is_used_for_16_and_32_bit_lanes():
    """q < 2^31: a product of two residues plus one stays below 2^62."""
    assert ref.residue_dtype((1 << 15) - 1) is np.int64
    assert ref.residue_dtype((1 << 31) - 1) is np.int64
    assert ref.residue_dtype(4294967311) is not np.int64  # the first prime above 2^32


@pytest.mark.skipif(not ref._LONG_DOUBLE_EXACT, reason="long double has no 64-bit significand here")
@pytest.mark.parametrize("q", [(1 << 32) + 15, 1125899906826241, int(prevprime(1 << 52)), (1 << 52) + 21,
                               4611686018326724609, int(prevprime(1 << 62))])
def test_mulmod_is_exact_below_2_62(q):
    """Random residues and the extremes (0, 1, q - 1, around sqrt(q)) against Python's integers."""
    rng = random.Random(q)
    edges = [0, 1, 2, q - 1, q - 2, math.isqrt(q), math.isqrt(q) + 1, q // 2, q // 2 + 1]
    pairs = [(x, y) for x in edges for y in edges] + [(rng.randrange(q), rng.randrange(q)) for _ in range(20000)]
    a, b = (np.array(v, dtype=np.uint64) for v in zip(*pairs))
    assert ref.mulmod(a, b, q).tolist() == [x * y % q for x, y in pairs]


@pytest.mark.parametrize("n,d,q", CASES)
def test_layout_is_crt_basis(n, d, q):
    rng = random.Random(6000 * n + 10 * d + q)
    layout = crt_layout(n, d, q, rng)
    assert ref.layout_is_crt_basis(n, q, layout) is None
    # congruent zetas are the same layout
    shifted = {"d": d, "blocks": [dict(blk, zeta=blk["zeta"] - q) for blk in layout["blocks"]]}
    assert ref.layout_is_crt_basis(n, q, shifted) is None

    j = rng.randrange(n // d)
    wrong_zeta = {"d": d, "blocks": [dict(blk) for blk in layout["blocks"]]}
    wrong_zeta["blocks"][j]["zeta"] = (layout["blocks"][j]["zeta"] + 1) % q
    assert "not x^n + 1" in ref.layout_is_crt_basis(n, q, wrong_zeta)

    missing_block = {"d": d, "blocks": layout["blocks"][1:]}
    assert "not x^n + 1" in ref.layout_is_crt_basis(n, q, missing_block)

    repeated = {"d": d, "blocks": [dict(blk, positions=list(blk["positions"])) for blk in layout["blocks"]]}
    k = next(i for i in range(n) if i != repeated["blocks"][0]["positions"][0])
    repeated["blocks"][0]["positions"][0] = k  # k now twice, the old position nowhere
    assert "exactly once" in ref.layout_is_crt_basis(n, q, repeated)


def test_layout_is_crt_basis_at_n_4096():
    """12289 - 1 = 2^12 * 3: x^4096 + 1 splits into 2048 binomials x^2 - zeta_j."""
    layout = crt_layout(4096, 2, 12289, random.Random(7))
    assert ref.layout_is_crt_basis(4096, 12289, layout) is None


@pytest.mark.parametrize("d", (1, 2))
def test_reduce_blocks_is_fast_at_n_4096(d):
    """n = 4096, q = 12289 in one go: well under a second (5 s keeps a loaded
    machine from failing it). d = 2 is the split of x^4096 + 1 mod 12289 into
    binomials (2048 blocks), the layout kerngen's checks see at this size. x^4096 + 1 has no linear factors mod 12289
    (8192 does not divide 12288), so d = 1 uses the 4096 roots of x^4096 - 1
    as zetas: 4096 evaluations of a degree-4095 polynomial, the most blocks."""
    n, q = 4096, 12289
    rng = random.Random(8 + d)
    if d == 1:
        omega = pow(primitive_root(q), (q - 1) // n, q)
        layout = {"d": 1, "blocks": [{"zeta": pow(omega, j, q), "positions": [j]} for j in range(n)]}
    else:
        layout = crt_layout(n, d, q, rng)
    a = _signed(rng, n)
    start = time.perf_counter()
    got = ref.reduce_blocks(a, layout, q)
    elapsed = time.perf_counter() - start
    assert elapsed < 5, f"reduce_blocks took {elapsed:.2f} s"
    assert len(got) == n // d
    for j in (0, 1, rng.randrange(n // d), n // d - 1):  # spot checks: SymPy for every block is slow
        assert got[j] == sympy_reduce(a, d, layout["blocks"][j]["zeta"], q)
