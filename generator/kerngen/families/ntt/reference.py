"""SymPy references, computed without kerngen's own maths module.

Everything here works from what a user has: the manifest (q, n, the output
layout with its zetas and positions) and the inputs. SymPy's dense GF(p)
polynomial arithmetic does the work.
"""

from __future__ import annotations

from sympy import ZZ
from sympy.polys.galoistools import gf_eval, gf_from_int_poly, gf_mul, gf_rem, gf_to_int_poly


def _poly(coeffs_low_first: list[int], q: int):
    return gf_from_int_poly([c % q for c in reversed(coeffs_low_first)], q)


def _coeffs(p, q: int, length: int) -> list[int]:
    high_first = [c % q for c in gf_to_int_poly(p, q, symmetric=False)]
    low_first = list(reversed(high_first))
    return (low_first + [0] * length)[:length]


def _binomial(d: int, zeta: int, q: int):
    """x^d - zeta, high-degree-first GF(q) list."""
    return gf_from_int_poly([1] + [0] * (d - 1) + [(-zeta) % q], q)


def reduce_block(a: list[int], d: int, zeta: int, q: int) -> list[int]:
    """Coefficients of a mod (x^d - zeta) over GF(q), lowest degree first."""
    if d == 1:  # the remainder by x - zeta is the value at zeta
        return [gf_eval(_poly(a, q), zeta % q, q, ZZ) % q]
    return _coeffs(gf_rem(_poly(a, q), _binomial(d, zeta, q), q, ZZ), q, d)


def block_product(a: list[int], b: list[int], zeta: int, q: int) -> list[int]:
    d = len(a)
    prod = gf_mul(_poly(a, q), _poly(b, q), q, ZZ)
    return _coeffs(gf_rem(prod, _binomial(d, zeta, q), q, ZZ), q, d)


def negacyclic_product(a: list[int], b: list[int], q: int) -> list[int]:
    n = len(a)
    modulus = gf_from_int_poly([1] + [0] * (n - 1) + [1], q)
    return _coeffs(gf_rem(gf_mul(_poly(a, q), _poly(b, q), q, ZZ), modulus, q, ZZ), q, n)


def layout_is_crt_basis(n: int, q: int, layout: dict) -> str | None:
    """None when the blocks' x^d - zeta_j multiply to x^n + 1 and the positions
    cover the array exactly once; else what is wrong."""
    d = layout["d"]
    prod = gf_from_int_poly([1], q)
    for blk in layout["blocks"]:
        prod = gf_mul(prod, _binomial(d, blk["zeta"], q), q, ZZ)
    if _coeffs(prod, q, n + 1) != [1] + [0] * (n - 1) + [1]:
        return "the product of x^d - zeta_j over all blocks is not x^n + 1"
    positions = sorted(p for blk in layout["blocks"] for p in blk["positions"])
    if positions != list(range(n)):
        return "block positions do not cover the array exactly once"
    return None
