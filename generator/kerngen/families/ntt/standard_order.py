"""The permutation between a bundle's NTT order and the standard one, as two
header tables, for bundles emitted in another order.

The standard order (`order = "standard"`, `layout._goal_arrangement`) puts
coefficient k of block j, a mod (x^d - zetas[j]), at position d*j + k, with
the blocks in the order of `maths.NttMath.final_zetas` (zetas[j] =
psi^(2 brv(j) + 1)): for q = 3329, n = 256 FIPS 203's NTT order, for
q = 8380417 FIPS 204's; in the cyclic ring zetas[j] = omega^brv(j), the
in-place output of a radix-2 decimation-in-time NTT (on a coset g, times
g^d). Every order keeps the zetas in that order and moves only the
positions (`BlockLayout.positions`), so the permutation is read off the
positions: standard position d*j + k holds what the kernels leave at
positions[j][k].
"""

from __future__ import annotations

from ...core.bundle import CTable
from .maths import ORDER_EXPONENTS, RING_CONSTANT, ROOT_NAMES


def standard_permutation(positions: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(to_standard, from_standard), both gathers: standard[i] =
    kernels[to_standard[i]] and kernels[i] = standard[from_standard[i]]."""
    to_standard = tuple(p for block in positions for p in block)
    from_standard = [0] * len(to_standard)
    for i, p in enumerate(to_standard):
        from_standard[p] = i
    return to_standard, tuple(from_standard)


def standard_order_tables(prefix: str, order: str, positions: tuple[tuple[int, ...], ...]) -> tuple[CTable, ...]:
    """The header tables of the permutation, none for a bundle in the standard order."""
    if order == "standard":
        return ()
    to_standard, from_standard = standard_permutation(positions)
    n = len(to_standard)
    return (
        CTable(f"{prefix}_ntt_to_standard", "uint16_t", (n,), to_standard,
               "NTT domain to the standard order (FIPS 203/204 for their n, q): standard[i] = a[to_standard[i]]"),
        CTable(f"{prefix}_ntt_from_standard", "uint16_t", (n,), from_standard,
               "standard order to this NTT domain: a[i] = standard[from_standard[i]]"),
    )


def order_text(order: str, ring: str, coset: int) -> str:
    """The header's words for the NTT domain's order."""
    if order == "fastest":
        return "fastest order (positions below)"
    (standard, natural), root = ORDER_EXPONENTS[ring], ROOT_NAMES[ring]
    g = "" if coset == 1 else f"{coset}^D "
    if order == "natural":
        return f"natural order: the block of {g}{root}^{natural} at D*i..D*i+D-1"
    source = ("FIPS 203 and 204" if RING_CONSTANT[ring] == -1 and coset == 1 else
              "the in-place order of a radix-2 Cooley-Tukey NTT")
    return f"standard order: block j at D*j..D*j+D-1, zetas[j] = {g}{root}^{standard} ({source})"
