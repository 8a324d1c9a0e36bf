"""SymPy references for the GF(2^m) kernels.

They use SymPy's dense GF(p)[x] routines with p = 2 (products, remainders,
inverses) on the field polynomial read from each function's manifest;
nothing from the family's own plan or kernels is used, so a wrong fold
plan cannot hide behind a reference computed the same way. Products,
remainders and inverses are memoised: each ISA's twin of a kernel is checked
on the same inputs, so every ISA after the first costs SymPy nothing.
"""

from __future__ import annotations

from sympy.polys.domains import ZZ
from sympy.polys.galoistools import gf_add, gf_gcdex, gf_lshift, gf_mul, gf_rem

from ...core.compile_cache import memo

_REFERENCES = 8192  # results kept per reference function: a bundle's checks, all its ISAs

def _dense(x: int) -> list:
    """Integer whose bit i is the coefficient of x^i -> SymPy dense list (highest first)."""
    if x == 0:
        return []
    return [ZZ(int(c)) for c in bin(x)[2:]]


def _int(p: list) -> int:
    return int("".join(str(int(c)) for c in p), 2) if p else 0


def _fpoly(poly) -> list:
    return _dense(sum(1 << e for e in poly))


@memo(maxsize=_REFERENCES)
def ref_mul(a: int, b: int) -> int:
    return _int(gf_mul(_dense(a), _dense(b), 2, ZZ))


def ref_rem(c: int, poly) -> int:
    return _rem(c, tuple(poly))


@memo(maxsize=_REFERENCES)
def _rem(c: int, poly: tuple[int, ...]) -> int:
    return _int(gf_rem(_dense(c), _fpoly(poly), 2, ZZ))


def ref_mulmod(a: int, b: int, poly) -> int:
    return ref_rem(ref_mul(a, b), poly)


def ref_muladd(a: int, b: int, c: int, d: int, poly) -> int:
    s = gf_add(gf_mul(_dense(a), _dense(b), 2, ZZ), gf_mul(_dense(c), _dense(d), 2, ZZ), 2, ZZ)
    return ref_rem(_int(s), poly)


def ref_ladder_step(st: tuple[int, int, int, int], x: int, c: int, swap: bool, poly):
    """The López–Dahab step from its textbook form (b = c^2, X0^4 + b Z0^4),
    not the sqrt(b) form the kernel uses."""
    X0, Z0, X1, Z1 = st
    if swap:
        X0, Z0, X1, Z1 = X1, Z1, X0, Z0

    def mm(a, b):
        return ref_mulmod(a, b, poly)
    t1, t2 = mm(X0, Z1), mm(X1, Z0)
    z1 = mm(t1 ^ t2, t1 ^ t2)
    x1 = mm(x, z1) ^ mm(t1, t2)
    a, zz = mm(X0, X0), mm(Z0, Z0)
    b = mm(c, c)
    x0 = mm(a, a) ^ mm(b, mm(zz, zz))
    z0 = mm(a, zz)
    return x0, z0, x1, z1


def ref_inv(a: int, poly) -> int:
    return _inv(a, tuple(poly))


@memo(maxsize=_REFERENCES)
def _inv(a: int, poly: tuple[int, ...]) -> int:
    if a == 0:
        return 0
    s, _, g = gf_gcdex(_dense(a), _fpoly(poly), 2, ZZ)
    assert g == [ZZ(1)], "the field polynomial must be irreducible"
    return _int(s)


def monomial_remainders(poly, count: int) -> list[int]:
    """x^s mod f for s < count, one multiplication by x (a shift) and one
    remainder each, with SymPy's dense GF(2)[x] arithmetic."""
    f = _fpoly(poly)
    out, cur = [], [ZZ(1)]
    for _ in range(count):
        out.append(_int(cur))
        cur = gf_rem(gf_lshift(cur, 1, ZZ), f, 2, ZZ)
    return out
