"""GF(2)[x] polynomials as Python integers (bit i = coefficient of x^i), for
checks on field polynomials that must be fast at degree ~600."""

from __future__ import annotations

import sympy


def mulmod(a: int, b: int, f: int) -> int:
    deg = f.bit_length() - 1
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if a >> deg & 1:
            a ^= f
    return out


def _gcd(a: int, b: int) -> int:
    while b:
        while a and a.bit_length() >= b.bit_length():
            a ^= b << (a.bit_length() - b.bit_length())
        a, b = b, a
    return a


def _frobenius(f: int, k: int) -> int:
    """x^(2^k) mod f."""
    r = 2
    for _ in range(k):
        r = mulmod(r, r, f)
    return r


def is_irreducible(exponents: tuple[int, ...] | list[int]) -> bool:
    """Rabin's test: x^(2^m) = x mod f, and gcd(x^(2^(m/p)) - x, f) = 1 for every prime p | m."""
    f = sum(1 << e for e in exponents)
    m = f.bit_length() - 1
    if m <= 1:
        return m == 1
    if _frobenius(f, m) != 2:
        return False
    for p in sympy.primefactors(m):
        if _gcd(f, _frobenius(f, m // p) ^ 2) != 1:
            return False
    return True


def poly_text(poly) -> str:
    """x^233 + x^74 + 1."""
    return " + ".join("1" if e == 0 else "x" if e == 1 else f"x^{e}" for e in poly)
