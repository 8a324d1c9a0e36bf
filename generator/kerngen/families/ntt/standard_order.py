"""The permutation between a bundle's NTT order and the standard one, as two
header tables, for bundles emitted in another order.

The standard order (`order = "standard"`, `layout._goal_arrangement`) puts
coefficient k of block j, a mod (x^d - zetas[j]), at position d*j + k, with
the blocks in the order of `maths.NttMath.final_zetas` (zetas[j] =
psi^(2 brv(j) + 1)): for q = 3329, n = 256 FIPS 203's NTT order, for
q = 8380417 FIPS 204's. Every order keeps the zetas in that order and moves
only the positions (`BlockLayout.positions`), so the permutation is read off
the positions: standard position d*j + k holds what the kernels leave at
positions[j][k].
"""

from __future__ import annotations

from ...core.bundle import CTable


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
