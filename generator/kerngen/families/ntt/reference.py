"""Test references for the NTT family, computed without kerngen's own maths.

Everything here works from what a user has: the manifest (q, n, the output
layout with its zetas and positions) and the inputs. Each result is computed
straight from its definition -- a remainder by x^d - zeta, a schoolbook
product of two polynomials, the product of the layout's binomials -- with
plain integer arithmetic in numpy. None of the generator's machinery is
involved (no butterflies, twiddle tables, bit-reversal, Montgomery or Barrett
constants, layout planner), and nothing here imports from kerngen, so a
mistake there cannot hide behind a reference computed the same way.
tests/test_reference.py checks every function against SymPy's GF(p)
polynomial arithmetic (sympy.polys.galoistools) on random inputs.

Whole-array entry points (one numpy computation for every block at once):
`reduce_blocks`, `block_products`, `blocks_of`. The single-block functions
`reduce_block`, `block_product`, `ring_product` are the same code applied
to one block. The ring is Z_q[x]/(x^n - c), c = `ring_constant` of the
manifest's params: -1 (negacyclic, x^n + 1), 1 (cyclic, x^n - 1), times g^n
for an NTT on the coset g.

Exactness. Every input is first reduced to a residue in [0, q), and every
step reduces again: its largest intermediate is a product of two residues
plus a residue, (q-1)^2 + (q-1) < q^2. For q < 2^31 that is below 2^62:
int64 is exact. Above it residues are uint64 and each product is reduced at
once (`mulmod`, see there; a sum of two residues stays below 2^63): for
q < 2^52 by float64, for q < 2^62 where the platform's long double has a
64-bit significand (x86); elsewhere Python integers (dtype object: exact,
only slower).
`residue_dtype` picks.
"""

from __future__ import annotations

import numpy as np

_LONG_DOUBLE_EXACT = np.finfo(np.longdouble).nmant >= 63  # x87's 80-bit format: a 64-bit significand


def residue_dtype(q: int):
    """int64 when a product of two residues mod q plus one cannot reach 2^63
    (q < 2^31); else uint64 residues, each product reduced at once by
    `mulmod`, where that is exact; else object (Python integers)."""
    if q * q < 1 << 62:
        return np.int64
    return np.uint64 if q < 1 << 52 or q < 1 << 62 and _LONG_DOUBLE_EXACT else object


def _estimate_type(q: int):
    """The float type the quotient of `mulmod` is estimated in: float64
    (numpy's vectorised arithmetic) while q < 2^52, where a residue is exact
    in its 53-bit significand; above it long double (x87, several times
    slower)."""
    return np.float64 if q < 1 << 52 else np.longdouble


def mulmod(a: np.ndarray, b: np.ndarray | np.uint64, q: int) -> np.ndarray:
    """a * b mod q element-wise for uint64 residues, exactly: below q < 2^62 as follows, above by Python
    integers.
    The quotient a*b/q (< q) is estimated in `_estimate_type(q)`, whose
    significand holds a and b exactly (53 bits below 2^52, 64 bits below
    2^62): the product and the division each round by at most one unit of
    its last place relatively, so the estimate is within q * 2^-52 <= 1
    (float64) or 2^62 * 2^-63 < 1 (long double) of a*b/q, and its floor
    within 1 of floor(a*b/q). Then a*b - floor*q lies in [-q, 2q), so it is
    computed exactly by wrapping uint64 arithmetic read as int64 (|.| <
    2^63), and one correction either way brings it into [0, q)."""
    if q >= 1 << 62:  # beyond the estimate's exactness: Python integers
        return (np.asarray(a).astype(object) * np.asarray(b).astype(object) % q).astype(np.uint64)
    ft = _estimate_type(q)
    quotient = (np.asarray(a).astype(ft) * np.asarray(b).astype(ft) / ft(q)).astype(np.uint64)  # floor: >= 0
    r = (a * b - quotient * np.uint64(q)).astype(np.int64)
    r = np.where(r < 0, r + q, r)
    return np.where(r >= q, r - q, r).astype(np.uint64)


def mul_residues(a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
    """a * b mod q element-wise, residues of any of `residue_dtype`'s types."""
    return mulmod(a, b, q) if a.dtype == np.uint64 else a * b % q


def residues(values, q: int, dtype) -> np.ndarray:
    """`values` (a list, or a list of equal-length lists) mod q, in [0, q).
    Python integers of any size and sign are accepted, as kernels' signed
    outputs are; numpy's % takes the divisor's sign, as Python's does."""
    if dtype is np.int64:
        try:
            return np.array(values, dtype=np.int64) % q
        except OverflowError:  # some value beyond int64: reduce it as a Python int
            pass
    return (np.array(values, dtype=object) % q).astype(dtype)


def powers(zetas: np.ndarray, m: int, q: int, dtype) -> np.ndarray:
    """V[j, i] = zetas[j]^i mod q for i < m, by cumulative products mod q
    (doubling: columns [f, 2f) are columns [0, f) times zeta^f). Every
    intermediate is one product of two residues, at most (q-1)^2."""
    v = np.empty((len(zetas), m), dtype=dtype)
    v[:, 0] = 1
    step = zetas.copy()  # zeta^filled
    filled = 1
    while filled < m:
        take = min(filled, m - filled)
        v[:, filled:filled + take] = mul_residues(v[:, :take], step[:, None], q)
        step = mul_residues(step, step, q)
        filled += take
    return v


def _remainders(coeffs: np.ndarray, d: int, zetas: np.ndarray, q: int, dtype) -> np.ndarray:
    """Row j: the coefficients of a mod (x^d - zetas[j]), lowest degree first,
    where a is `coeffs` (one polynomial shared by every row, shape (L,)) or
    row j of `coeffs` (shape (rows, L)); all entries residues mod q.

    From the definition: write a = sum_i A_i(x) x^(d i) with deg A_i < d.
    Modulo x^d - zeta, x^d = zeta, so a = sum_i A_i(x) zeta^i, a polynomial of
    degree < d and therefore the remainder: coefficient k is
    sum_i a[d i + k] zeta^i mod q, taken by Horner's rule from the top chunk
    down, acc = acc * zeta + A_i, every step reduced."""
    length = coeffs.shape[-1]
    m = max(1, -(-length // d))  # number of chunks A_i
    pad = np.zeros(coeffs.shape[:-1] + (m * d - length,), dtype=dtype)
    chunks = np.concatenate([coeffs.astype(dtype), pad], axis=-1).reshape(coeffs.shape[:-1] + (m, d))
    acc = np.zeros((len(zetas), d), dtype=dtype)
    for i in reversed(range(m)):
        acc = (mul_residues(acc, zetas[:, None], q) + chunks[..., i, :]) % q
    return acc


def _products(a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
    """Row j: the schoolbook product of polynomials a[j] and b[j] mod q
    (coefficients lowest first, residues): one numpy step per coefficient of
    a, for every row at once, each product and each sum reduced."""
    rows, da = a.shape
    out = np.zeros((rows, da + b.shape[1] - 1), dtype=a.dtype)
    for i in range(da):
        out[:, i:i + b.shape[1]] = (out[:, i:i + b.shape[1]] + mul_residues(a[:, i:i + 1], b, q)) % q
    return out


def _reduce(a: list[int], d: int, zetas: list[int], q: int) -> np.ndarray:
    dtype = residue_dtype(q)
    return _remainders(residues(a, q, dtype), d, residues(zetas, q, dtype), q, dtype)


def reduce_blocks(a: list[int], layout: dict, q: int) -> list[list[int]]:
    """For every block j of `layout` ({"d": d, "blocks": [{"zeta": zeta_j, ...}]}),
    in the layout's order: the coefficients of a mod (x^d - zeta_j) over GF(q),
    lowest degree first. All blocks at once (see `_remainders`)."""
    if not layout["blocks"]:
        return []
    return _reduce(a, layout["d"], [blk["zeta"] for blk in layout["blocks"]], q).tolist()


def reduce_block(a: list[int], d: int, zeta: int, q: int) -> list[int]:
    """Coefficients of a mod (x^d - zeta) over GF(q), lowest degree first."""
    return _reduce(a, d, [zeta], q)[0].tolist()


def blocks_of(values: list[int], layout: dict) -> list[list[int]]:
    """values[p] for p in each block's positions, block by block in the
    layout's order: the array a kernel lays out, split into its blocks."""
    return [[values[p] for p in blk["positions"]] for blk in layout["blocks"]]


def block_products(a_blocks: list[list[int]], b_blocks: list[list[int]], zetas: list[int],
                   q: int) -> list[list[int]]:
    """Row j: a_j * b_j mod (x^d - zetas[j]) over GF(q), d = len(a_j), lowest
    degree first; all a_j have one length, all b_j another (normally d).
    Schoolbook products for every block at once, then the remainder by
    definition (`_remainders`)."""
    if len(a_blocks) != len(b_blocks) or len(a_blocks) != len(zetas):
        raise ValueError("a_blocks, b_blocks and zetas must have one entry per block")
    if not a_blocks:
        return []
    da, db = len(a_blocks[0]), len(b_blocks[0])
    if da == 0 or db == 0:
        raise ValueError("blocks must not be empty")
    dtype = residue_dtype(q)
    a, b = residues(a_blocks, q, dtype), residues(b_blocks, q, dtype)
    if a.shape != (len(zetas), da) or b.shape != (len(zetas), db):
        raise ValueError("all a blocks must have one length, all b blocks one length")
    return _remainders(_products(a, b, q), da, residues(zetas, q, dtype), q, dtype).tolist()


def block_product(a: list[int], b: list[int], zeta: int, q: int) -> list[int]:
    """a * b mod (x^d - zeta) over GF(q), d = len(a), lowest degree first."""
    return block_products([a], [b], [zeta], q)[0]


def ring_constant(params: dict, q: int) -> int:
    """c of the ring Z_q[x]/(x^n - c) a manifest's `params` name, in [0, q):
    -1 for "negacyclic" (x^n + 1, the default when `ring` is absent), 1 for
    "cyclic" (x^n - 1); times g^n for a `coset` g (evaluation on g times the
    ring's points is the CRT of x^n - c g^n)."""
    sign = {"negacyclic": -1, "cyclic": 1}[params.get("ring", "negacyclic")]
    return sign * pow(params.get("coset", 1), params["n"], q) % q


def ring_product(a: list[int], b: list[int], q: int, c: int) -> list[int]:
    """a * b mod (x^n - c) over GF(q), n = len(a), lowest degree first: the
    product in the ring the NTT works in, the one-block case of
    `block_products` with zeta = c: the O(n^2) schoolbook product, then x^n
    folded back as c."""
    return block_products([a], [b], [c], q)[0]


def negacyclic_product(a: list[int], b: list[int], q: int) -> list[int]:
    """a * b mod (x^n + 1) over GF(q): `ring_product` with c = -1."""
    return ring_product(a, b, q, -1)


def layout_is_crt_basis(n: int, q: int, layout: dict, c: int = -1) -> str | None:
    """None when the blocks' x^d - zeta_j multiply to x^n - c over GF(q)
    (default x^n + 1; so the blocks are the CRT factors of the ring) and the
    positions cover the array exactly once; else what is wrong. The product
    is expanded one binomial at a time: times (x^d - zeta) is a shift by d
    minus zeta times the coefficients, each step one product of residues."""
    d = layout["d"]
    dtype = residue_dtype(q)
    zetas = residues([blk["zeta"] for blk in layout["blocks"]], q, dtype)
    prod = np.zeros(len(zetas) * d + 1, dtype=dtype)
    prod[0] = 1
    for k, z in enumerate(zetas):
        top = k * d  # degree of the product so far
        low = prod[:top + 1].copy()
        prod[:top + 1] = mul_residues(low, (q - z) % q, q)  # -z * low
        prod[d:top + d + 1] = (prod[d:top + d + 1] + low) % q
    c %= q
    if prod.tolist() != [(q - c) % q] + [0] * (n - 1) + [1]:
        ring = "x^n + 1" if c == q - 1 else f"x^n - {c}"
        return f"the product of x^d - zeta_j over all blocks is not {ring}"
    positions = sorted(p for blk in layout["blocks"] for p in blk["positions"])
    if positions != list(range(n)):
        return "block positions do not cover the array exactly once"
    return None


# --- images of basis vectors (the basis-vector proofs) -----------------------
#
# A kernel proven linear mod q (forward and inverse NTT, the reductions) or
# bilinear (base multiplication) is determined by its values on basis
# vectors. These give those values from the definitions, as arrays: row r is
# the array a kernel must write for basis input r.


def _powers_of(zetas: np.ndarray, m: int, q: int) -> np.ndarray:
    return powers(zetas, m, q, residue_dtype(q))


def unit_images(layout: dict, n: int, q: int) -> np.ndarray:
    """Row i: where x^i lands in the NTT domain. x^i mod (x^d - zeta_j) is
    zeta_j^(i div d) x^(i mod d), so block j's coefficient i mod d is
    zeta_j^(i div d), written at positions[j][i mod d]; all else is zero."""
    d = layout["d"]
    dtype = residue_dtype(q)
    zetas = residues([blk["zeta"] for blk in layout["blocks"]], q, dtype)
    pos = np.array([blk["positions"] for blk in layout["blocks"]], dtype=np.int64)  # (blocks, d)
    powers = _powers_of(zetas, n // d, q)  # (blocks, n/d): zeta_j^t
    out = np.zeros((n, n), dtype=dtype)
    i = np.arange(n)
    for j in range(len(zetas)):
        out[i, pos[j, i % d]] = powers[j, i // d]
    return out


def lagrange_images(layout: dict, n: int, q: int) -> np.ndarray:
    """Row p: the polynomial whose NTT domain is the unit vector at array
    position p. For p = positions[j][k] it is x^k L_j(x^d), where, with
    y = x^d and m = n/d blocks, x^n - c = prod_j (y - zeta_j) (any of the
    rings: every zeta_j^m = c) and the Lagrange polynomial L_j(y) =
    m^-1 sum_t zeta_j^-t y^t is 1 at zeta_j and 0 at the other roots: so
    x^k L_j(x^d) leaves x^k in block j and nothing in the others. Its
    coefficient at x^(k + d t) is m^-1 zeta_j^-t."""
    d = layout["d"]
    m = n // d
    inv_m = pow(m, -1, q)
    dtype = residue_dtype(q)
    zinv = residues([pow(blk["zeta"], -1, q) for blk in layout["blocks"]], q, dtype)
    powers = mul_residues(_powers_of(zinv, m, q), np.array(inv_m, dtype=zinv.dtype), q)  # (blocks, m)
    out = np.zeros((n, n), dtype=dtype)
    t = np.arange(m)
    for j, blk in enumerate(layout["blocks"]):
        for k, p in enumerate(blk["positions"]):
            out[p, k + d * t] = powers[j]
    return out


def unit_block_products(layout: dict, n: int, q: int, k: int, l: int) -> np.ndarray:
    """The NTT-domain array of x^k * x^l in every block: x^(k+l) when k + l < d,
    else zeta_j x^(k+l-d) (x^d = zeta_j in block j)."""
    d = layout["d"]
    out = np.zeros(n, dtype=residue_dtype(q))
    for blk in layout["blocks"]:
        s = k + l
        out[blk["positions"][s % d]] = 1 if s < d else blk["zeta"] % q
    return out
