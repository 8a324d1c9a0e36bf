"""The maths of the NTT family: roots of unity, block zetas and twiddles,
derived from (n, q, L, ring, coset) alone.

Zetas are kept as exponents of one primitive 2^K-th root of unity psi, K the
ring's `root_bits`: the root block is x^n - psi^r, r = 2^(K-1) for the
negacyclic ring x^n + 1 (K = L + 1) and r = 0 for the cyclic ring x^n - 1
(K = L), and a block x^(2m) - psi^e splits into x^m - psi^(e/2) (lower half,
a + s*b) and x^m - psi^(e/2 + 2^(K-1)) (upper half, a - s*b), as
psi^(2^(K-1)) = -1. Every twiddle and block zeta follows from that rule. In
the cyclic ring every exponent is even until the last split (its blocks
before layer l lie on multiples of 2^(L-l+1)), so a 2^L-th root suffices:
2^L | q - 1, where the negacyclic ring needs 2^(L+1).

A coset g evaluates on g times those points: the root block is x^n - g^n psi^r,
and a block x^(2m) - g^(2m) psi^e splits with twiddle s = g^m psi^(e/2) into
x^m - g^m psi^(e/2) and x^m + g^m psi^(e/2); g = 1 is no coset. How a
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


RINGS = ("negacyclic", "cyclic")  # the first is the default
RING_CONSTANT = {"negacyclic": -1, "cyclic": 1}  # the ring is Z_q[x]/(x^n - c)
# how many more bits of two-adicity than layers each ring's root of unity takes (K - L): a
# square root of -1 for x^n + 1
EXTRA_ROOT_BITS = {"negacyclic": 1, "cyclic": 0}


def max_layers(n: int, q: int, ring: str = RINGS[0]) -> int:
    """Largest L with 2^(L + EXTRA_ROOT_BITS[ring]) | q-1, capped at log2 n."""
    two_adicity = ((q - 1) & -(q - 1)).bit_length() - 1
    return min(two_adicity - EXTRA_ROOT_BITS[ring], n.bit_length() - 1)


def modulus_text(n: int, ring: str, coset: int = 1) -> str:
    """The polynomial the NTT reduces by, x^n - c g^n, as text: x^256+1, x^256-1, x^256-7^256."""
    sign = "+" if RING_CONSTANT[ring] == -1 else "-"
    return f"x^{n}{sign}{1 if coset == 1 else f'{coset}^{n}'}"


def ring_words(ring: str, coset: int = 1) -> str:
    """The NTT's name in summaries: negacyclic, cyclic, cyclic coset (g = 7)."""
    return ring if coset == 1 else f"{ring} coset (g = {coset})"


ROOT_NAMES = {"negacyclic": "psi", "cyclic": "omega"}  # what texts call each ring's psi
# the exponent of block j's root in the standard order and of block i in the natural one
ORDER_EXPONENTS = {"negacyclic": ("(2 brv(j) + 1)", "(2i + 1)"), "cyclic": ("brv(j)", "i")}


@memo(maxsize=128)
def _block_exponents(root_bits: int, root: int, layer: int) -> tuple[int, ...]:
    half = 1 << (root_bits - 1)  # psi^half = -1
    exps = [root]
    for _ in range(layer):
        exps = [c for e in exps for c in (e // 2, e // 2 + half)]
    return tuple(exps)


@memo(maxsize=64)
def smallest_root(q: int, bits: int) -> int:
    """The smallest primitive 2^bits-th root of unity mod q (2^bits | q - 1)."""
    order = 1 << bits
    g = sympy.primitive_root(q)
    return min(pow(g, (q - 1) // order * k, q) for k in range(1, order, 2))


@dataclass(frozen=True)
class NttMath:
    n: int
    q: int
    layers: int
    ring: str = RINGS[0]
    coset: int = 1  # g: the NTT evaluates on g times the ring's points (1: no coset)
    root: int | None = None  # psi, a primitive 2^K-th root of unity the set chose (None: the smallest)

    @property
    def d(self) -> int:
        return self.n >> self.layers

    @property
    def root_bits(self) -> int:
        """K: psi is a primitive 2^K-th root of unity."""
        return self.layers + EXTRA_ROOT_BITS[self.ring]

    @cached_property
    def psi(self) -> int:
        """The primitive 2^K-th root of unity the set chose, else the smallest mod q."""
        return self.root if self.root is not None else smallest_root(self.q, self.root_bits)

    def root_power(self, exponent: int) -> int:
        return pow(self.psi, exponent % (1 << self.root_bits), self.q)

    def block_exponents(self, layer: int) -> tuple[int, ...]:
        """Exponents e of the blocks x^(n>>layer) - g^(n>>layer) psi^e before `layer`, in array order."""
        root = 1 << (self.root_bits - 1) if RING_CONSTANT[self.ring] == -1 else 0
        return _block_exponents(self.root_bits, root, layer)

    def _coset_power(self, degree: int) -> int:
        return pow(self.coset, degree, self.q)

    @cached_property
    def final_zetas(self) -> tuple[int, ...]:
        """zeta_j of the output blocks x^d - zeta_j, j in natural block order."""
        g_d = self._coset_power(self.d)
        return tuple(g_d * self.root_power(e) % self.q for e in self.block_exponents(self.layers))

    def twiddles(self, layer: int, bit: int, indices, inverse: bool, factor: int = 1) -> list[int]:
        """The twiddle of each lower-half coefficient index of a butterfly of
        `layer` (partner distance 2^bit), times `factor`: the forward NTT
        multiplies by the block's root s, the inverse by s^-1."""
        exps = self.block_exponents(layer)
        g_m = self._coset_power(self.n >> (layer + 1))  # the half block's degree
        out = []
        for i in indices:
            s = g_m * self.root_power(exps[i >> (bit + 1)] // 2) % self.q
            out.append((pow(s, -1, self.q) if inverse else s) * factor % self.q)
        return out

    def inverse_scale(self, r: int) -> int:
        """The inverse NTT's first layer multiplies every coefficient by
        2^-L * r: the butterflies' halvings, and r to undo the multiplication
        strategy's scale 1/r in base multiplication."""
        return (pow(2, -self.layers, self.q) * r) % self.q
