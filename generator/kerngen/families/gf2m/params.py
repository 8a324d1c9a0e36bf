"""The GF(2^m) family's parameter schema: the field degree and polynomial."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ParamError, toml_value
from ...core.params import COMMON_KEYS, Common, Overrides, check_keys, choose_isas, require
from ...machine.isa import AVX2, AVX512, SSE
from ...machine.target import Target
from .gf2x import is_irreducible, poly_text

ISAS = (AVX2.name, SSE.name, AVX512.name)  # the first is the default
LIMB_BITS = 64
KEYS = COMMON_KEYS | {"m", "poly"}
# the kinds of the family's functions (each a manifest entry's `kind`)
KINDS = frozenset({"gf2m_mul", "gf2m_sqr", "gf2m_mul_lazy", "gf2m_sqr_lazy", "gf2m_freeze", "gf2m_reduce",
                   "gf2m_mulwide", "gf2m_muladd", "gf2m_msqr", "gf2m_ladder_step", "gf2m_inv"})


@dataclass(frozen=True)
class Gf2mParams:
    """Binary field GF(2^m) = GF(2)[x]/(f), f given by its exponents."""

    name: str
    m: int
    poly: tuple[int, ...]  # exponents, strictly decreasing, poly[0] == m, poly[-1] == 0
    isas: tuple[str, ...]  # every kernel is built for each, the first preferred
    prefix: str
    source: str
    targets: tuple[Target, ...]  # one per ISA, for the first ABI
    abis: tuple[str, ...]  # calling conventions (object files) the bundle is emitted for

    family = "gf2m"

    @property
    def target(self) -> Target:
        return self.targets[0]

    @property
    def limbs(self) -> int:
        return (self.m + LIMB_BITS - 1) // LIMB_BITS


def parse(table: dict, c: Common, overrides: Overrides) -> Gf2mParams:
    src = c.source
    check_keys(src, table, KEYS, "gf2m")
    isas = choose_isas(src, table, overrides, ISAS, "gf2m")
    m = require(src, table, "m", int, "the field degree, an integer")
    if not 2 <= m <= 1024:
        raise ParamError(src, "m", f"must be between 2 and 1024, got {m}")
    poly = require(src, table, "poly", list, "the list of exponents of the field polynomial, e.g. [233, 74, 0]")
    if not poly or any(isinstance(e, bool) or not isinstance(e, int) for e in poly):
        raise ParamError(src, "poly", f"must be a non-empty list of integer exponents, got {toml_value(poly)}")
    if sorted(set(poly), reverse=True) != list(poly):
        raise ParamError(src, "poly", f"exponents must be distinct and in decreasing order, got {toml_value(poly)}")
    if poly[0] != m:
        raise ParamError(src, "poly", f"the first exponent must be m = {m}, got {poly[0]}")
    if poly[-1] != 0:
        raise ParamError(src, "poly", f"must contain the constant term 0 (an irreducible polynomial of degree > 1 "
                                      f"has one), got {toml_value(poly)}")
    if len(poly) > 2 and poly[1] > m // 2:
        raise ParamError(
            src, "poly",
            f"the second-highest exponent must be at most m/2 = {m // 2} so that two folds reduce any product, "
            f"got {poly[1]} (the reciprocal polynomial, exponents m - e, is irreducible too and may qualify)")
    if not is_irreducible(poly):
        raise ParamError(src, "poly", f"{poly_text(poly)} is reducible over GF(2); the field polynomial must be "
                                      "irreducible")
    return Gf2mParams(c.name, m, tuple(poly), isas, c.prefix, src, c.targets(isas, LIMB_BITS), c.abis)
