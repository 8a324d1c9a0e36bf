"""The root of unity a set's transforms are built on, as the parameters choose it.

By default psi is the smallest primitive 2^K-th root of unity mod q (K the
ring's `root_bits`: layers + 1 negacyclic, layers cyclic). `root = w` names
psi itself; `generator = g` derives it as g^((q-1)/2^K), the convention of
Plonky3's `two_adic_generator` (its fields' generators: BabyBear 31,
KoalaBear 3, Goldilocks 7), under which the roots of two sizes are powers of
one another (g_(K+1)^2 = g_K): a coset extension (`lde`) takes its larger
root from the same g. Every table, layout and check follows from psi, so
choosing it changes the NTT domain's points, not the kernels' structure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ParamError, toml_value
from .maths import smallest_root

# the generators Plonky3 names `GENERATOR` for its fields (what `generator` reproduces its roots with)
PLONKY3_GENERATORS = {2013265921: ("BabyBear", 31), 2130706433: ("KoalaBear", 3),
                      (1 << 64) - (1 << 32) + 1: ("Goldilocks", 7)}


def two_adicity(q: int) -> int:
    """The largest k with 2^k | q - 1."""
    return ((q - 1) & -(q - 1)).bit_length() - 1


def order_bits(w: int, q: int) -> int | None:
    """j where w has multiplicative order 2^j mod q, or None where its order is no power of two."""
    for j in range(two_adicity(q) + 1):
        if pow(w, 1 << j, q) == 1:
            return j
    return None


@dataclass(frozen=True)
class RootChoice:
    """What the parameters chose: psi (None: the smallest primitive root) and the generator it came from."""

    root: int | None = None
    generator: int | None = None

    def of_order(self, q: int, bits: int) -> int:
        """A primitive 2^bits-th root from the same choice: from the generator, g^((q-1)/2^bits); from a named
        root of larger order, its power; by default the smallest."""
        if self.generator is not None:
            return pow(self.generator, (q - 1) >> bits, q)
        if self.root is not None:
            return pow(self.root, 1 << (order_bits(self.root, q) - bits), q)
        return smallest_root(q, bits)


def _generator_hint(q: int) -> str:
    known = PLONKY3_GENERATORS.get(q)
    return f" (Plonky3's {known[0]} GENERATOR is {known[1]})" if known else ""


def parse_root(src: str, table: dict, q: int, bits: int, what: str) -> RootChoice:
    """`root` or `generator` (at most one) for transforms needing a primitive 2^bits-th root; `what` names
    them in messages (e.g. "the cyclic NTT of n = 1024")."""
    if "root" in table and "generator" in table:
        raise ParamError(src, "root", "root and generator both choose the root of unity: give one of them")
    need = f"{what} needs a primitive 2^{bits}-th root of unity mod {q}"
    if "root" in table:
        w = table["root"]
        if isinstance(w, bool) or not isinstance(w, int) or not 1 < w < q:
            raise ParamError(src, "root", f"must be an integer w with 1 < w < q = {q}: {need}, got {toml_value(w)}")
        j = order_bits(w, q)
        if j != bits:
            has = "an order that is no power of two" if j is None else f"order 2^{j}"
            raise ParamError(src, "root", f"w = {w} has {has} mod {q}: {need} (w^(2^{bits - 1}) = q - 1), e.g. "
                                          f"{smallest_root(q, bits)}; or give generator{_generator_hint(q)}")
        return RootChoice(root=w)
    if "generator" in table:
        g = table["generator"]
        if isinstance(g, bool) or not isinstance(g, int) or not 1 < g < q:
            raise ParamError(src, "generator", f"must be an integer g with 1 < g < q = {q} (the root is "
                                               f"g^((q-1)/2^{bits})), got {toml_value(g)}")
        w = pow(g, (q - 1) >> bits, q)
        j = order_bits(w, q)
        if j != bits:
            raise ParamError(src, "generator", f"g = {g} gives g^((q-1)/2^{bits}) = {w} of order 2^{j}, not 2^{bits}: "
                                               f"{need}, and g must generate the 2-part of the nonzero residues (a "
                                               f"non-square; a generator of them all does){_generator_hint(q)}")
        return RootChoice(root=w, generator=g)
    return RootChoice()
