"""The maths stage for NTTs: roots of unity, block zetas, twiddles and the
Montgomery and Barrett constants, all derived from (n, q, L).

Zetas are kept as exponents of one primitive 2^(L+1)-th root of unity psi:
the root block is x^n + 1 = x^n - psi^(2^L), and a block x^(2m) - psi^e splits
into x^m - psi^(e/2) (lower half, a + s*b) and x^m - psi^(e/2 + 2^L) (upper
half, a - s*b). Every twiddle and block zeta below follows from that rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import sympy

WORD = 16
R = 1 << WORD


def centred(x: int, q: int) -> int:
    """Representative of x mod q in [-(q-1)/2, (q-1)/2]."""
    x %= q
    return x - q if x > q // 2 else x


def signed_word(x: int, bits: int = WORD) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


@dataclass(frozen=True)
class MontgomeryConstant:
    """w = c*R mod q (centred) and w' = w*q^-1 mod 2^16 (signed): one multiplication
    by c costs vpmullw (by w') + vpmulhw (by w) + vpmulhw (by q) + vpsubw."""

    value: int  # c mod q, the constant being multiplied by
    w: int
    w_qinv: int


@dataclass(frozen=True)
class NttMath:
    n: int
    q: int
    layers: int

    @property
    def d(self) -> int:
        return self.n >> self.layers

    @cached_property
    def psi(self) -> int:
        """The smallest primitive 2^(L+1)-th root of unity mod q."""
        order = 1 << (self.layers + 1)
        g = sympy.primitive_root(self.q)
        candidates = sorted(pow(g, (self.q - 1) // order * k, self.q) for k in range(1, order, 2))
        return candidates[0]

    @property
    def qinv(self) -> int:
        """q^-1 mod 2^16 as a signed 16-bit value."""
        return signed_word(pow(self.q, -1, R))

    def root_power(self, exponent: int) -> int:
        return pow(self.psi, exponent % (1 << (self.layers + 1)), self.q)

    def block_exponents(self, layer: int) -> tuple[int, ...]:
        """Exponents e of the blocks x^(n>>layer) - psi^e before `layer`, in array order."""
        exps = [1 << self.layers]
        for _ in range(layer):
            exps = [c for e in exps for c in (e // 2, e // 2 + (1 << self.layers))]
        return tuple(exps)

    @cached_property
    def final_zetas(self) -> tuple[int, ...]:
        """zeta_j of the output blocks x^d - zeta_j, j in natural block order."""
        return tuple(self.root_power(e) for e in self.block_exponents(self.layers))

    def montgomery(self, c: int) -> MontgomeryConstant:
        w = centred(c * R, self.q)
        return MontgomeryConstant(c % self.q, w, signed_word(w * self.qinv))

    def inverse_scale(self) -> int:
        """The inverse NTT first multiplies every coefficient by 2^-L * R: the
        butterflies' halvings, and R to undo base multiplication's R^-1. As a
        Montgomery multiplication by a constant it also brings any int16 input below q."""
        return (pow(2, -self.layers, self.q) * R) % self.q


@dataclass(frozen=True)
class BarrettConstant:
    """t = round(a*v / 2^(16+shift)), a - t*q a centred representative;
    v = round(2^(16+shift)/q) < 2^15 with the largest such shift."""

    v: int
    shift: int


def barrett_constant(q: int) -> BarrettConstant:
    shift = 0
    while round((1 << (WORD + shift + 1)) / q) < (1 << (WORD - 1)) and shift < 14:
        shift += 1
    v = round((1 << (WORD + shift)) / q)
    return BarrettConstant(v, shift)
