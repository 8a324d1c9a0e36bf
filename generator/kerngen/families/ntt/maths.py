"""The maths of the NTT family: roots of unity, block zetas and twiddles,
derived from (n, q, L) alone.

Zetas are kept as exponents of one primitive 2^(L+1)-th root of unity psi:
the root block is x^n + 1 = x^n - psi^(2^L), and a block x^(2m) - psi^e splits
into x^m - psi^(e/2) (lower half, a + s*b) and x^m - psi^(e/2 + 2^L) (upper
half, a - s*b). Every twiddle and block zeta follows from that rule. How a
twiddle is stored for multiplication (Montgomery form, Shoup pair) is the
multiplication strategy's business, not this module's.

The block exponents of a layer depend on (layers, layer) alone: a registered
memo (`core.compile_cache.memo`), bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import sympy

from ...core.compile_cache import memo


def centred(x: int, q: int) -> int:
    """Representative of x mod q in [-(q-1)/2, (q-1)/2]."""
    x %= q
    return x - q if x > q // 2 else x


def max_layers(n: int, q: int) -> int:
    """Largest L with 2^(L+1) | q-1, capped at log2 n."""
    two_adicity = ((q - 1) & -(q - 1)).bit_length() - 1
    return min(two_adicity - 1, n.bit_length() - 1)


@memo(maxsize=128)
def _block_exponents(layers: int, layer: int) -> tuple[int, ...]:
    exps = [1 << layers]
    for _ in range(layer):
        exps = [c for e in exps for c in (e // 2, e // 2 + (1 << layers))]
    return tuple(exps)


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

    def root_power(self, exponent: int) -> int:
        return pow(self.psi, exponent % (1 << (self.layers + 1)), self.q)

    def block_exponents(self, layer: int) -> tuple[int, ...]:
        """Exponents e of the blocks x^(n>>layer) - psi^e before `layer`, in array order."""
        return _block_exponents(self.layers, layer)

    @cached_property
    def final_zetas(self) -> tuple[int, ...]:
        """zeta_j of the output blocks x^d - zeta_j, j in natural block order."""
        return tuple(self.root_power(e) for e in self.block_exponents(self.layers))

    def twiddles(self, layer: int, bit: int, indices, inverse: bool, factor: int = 1) -> list[int]:
        """The twiddle of each lower-half coefficient index of a butterfly of
        `layer` (partner distance 2^bit), times `factor`: the forward NTT
        multiplies by the block's root s, the inverse by s^-1."""
        exps = self.block_exponents(layer)
        out = []
        for i in indices:
            s = self.root_power(exps[i >> (bit + 1)] // 2)
            out.append((pow(s, -1, self.q) if inverse else s) * factor % self.q)
        return out

    def inverse_scale(self, r: int) -> int:
        """The inverse NTT's first layer multiplies every coefficient by
        2^-L * r: the butterflies' halvings, and r to undo the multiplication
        strategy's scale 1/r in base multiplication."""
        return (pow(2, -self.layers, self.q) * r) % self.q
