"""The keys of transforms over batches of polynomials: `columns` (a row-major
n x C matrix whose columns are the polynomials, the layout STARK provers
keep their traces in) and `lde` (a coset low-degree extension of such a
matrix, Plonky3's `coset_lde_batch`).

Columns are transformed by vertical butterflies only: every vector holds C
columns' elements of one row, so C must fill whole vectors of the widest
ISA. The extension's larger transform needs a primitive 2^(K+k)-th root of
unity whose 2^k-th power is the set's own root: derived from the same
generator (or the smallest such root by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ParamError, toml_value
from ...machine.isa import AVX512, AVX512VL
from ...machine.target import Target
from .maths import smallest_root
from .roots import PLONKY3_GENERATORS, RootChoice, two_adicity

LDE_KEYS = {"added_bits", "shift"}
MAX_ADDED_BITS = 4  # extensions to at most 16 times the rows (blowups of STARK provers: 2 to 16)


@dataclass(frozen=True)
class Lde:
    """n x C evaluations to (n 2^added_bits) x C evaluations on the coset shift * <root> (Plonky3's
    `coset_lde_batch(m, added_bits, shift)`)."""

    added_bits: int
    shift: int
    root: int  # a primitive 2^(K + added_bits)-th root of unity: the extension's points are shift * root^i

    def manifest(self) -> dict:
        return {"added_bits": self.added_bits, "shift": self.shift, "root": self.root}


def parse_columns(src: str, table: dict, targets: tuple[Target, ...]) -> int:
    """`columns` (default 1): at least one vector of the widest ISA's lanes, a whole number of them."""
    if "columns" not in table:
        return 1
    c = table["columns"]
    if isinstance(c, bool) or not isinstance(c, int) or c < 1:
        raise ParamError(src, "columns", f"must be a positive integer (the polynomials of a row-major n x C matrix), "
                                         f"got {toml_value(c)}")
    widest = max(targets, key=lambda t: t.lanes)
    if c > 1 and c % widest.lanes:
        narrower = sorted({t.isa.name for t in targets if t.lanes < widest.lanes and c % t.lanes == 0})
        hint = f"; or leave {widest.isa.name} out ({', '.join(narrower)} take {c})" if narrower else ""
        if widest.isa.name == AVX512.name and c % (widest.lanes // 2) == 0:
            hint += f"; {AVX512VL.name} runs AVX-512's instructions on {widest.lanes // 2}-lane vectors"
        raise ParamError(src, "columns", f"must be a multiple of {widest.lanes}, the {widest.lane_bits}-bit lanes of "
                                         f"{widest.isa.name} (every butterfly is vertical: a vector holds one row's "
                                         f"elements of {widest.lanes} columns), got {c}{hint}")
    return c


def lde_root(q: int, bits: int, added: int, roots: RootChoice) -> tuple[int, int]:
    """(the extension's primitive 2^(bits + added)-th root, its 2^added-th power: the set's own root)."""
    if roots.generator is not None:
        big = roots.of_order(q, bits + added)
    else:
        big = smallest_root(q, bits + added)
    return big, pow(big, 1 << added, q)


def parse_lde(src: str, table: dict, n: int, q: int, ring: str, coset: int, bits: int, roots: RootChoice,
              planned_max: int) -> Lde | None:
    """`lde = { added_bits = k, shift = g }`: on the cyclic ring without a coset of its own, 2^(K+k) | q - 1,
    n 2^k rows at most `planned_max`, g outside the extension's points (g^(n 2^k) != 1)."""
    if "lde" not in table:
        return None
    given = table["lde"]
    rule = "must be a table { added_bits = k, shift = g } (k from 1 to 4, g a unit outside the extension's points)"
    if not isinstance(given, dict) or set(given) - LDE_KEYS or "added_bits" not in given:
        raise ParamError(src, "lde", f"{rule}, got {toml_value(given)}")
    k = given["added_bits"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_ADDED_BITS:
        raise ParamError(src, "lde", f"added_bits must be an integer from 1 to {MAX_ADDED_BITS}, got {toml_value(k)}")
    if ring != "cyclic" or coset != 1:
        raise ParamError(src, "lde", "a coset extension evaluates polynomials on a subgroup's coset: it needs "
                                     f"ring = \"cyclic\" and no coset key, got ring = {toml_value(ring)}"
                                     + (f", coset = {coset}" if coset != 1 else ""))
    big = n << k
    if big > planned_max:
        raise ParamError(src, "lde", f"n * 2^added_bits = {big} exceeds the largest transform, "
                                     f"2^{planned_max.bit_length() - 1}")
    if bits + k > two_adicity(q):
        raise ParamError(src, "lde", f"the extension to {big} rows needs 2^{bits + k} | q - 1 = {q - 1}, and q - 1 "
                                     f"has 2^{two_adicity(q)}")
    if roots.root is not None and roots.generator is None:
        raise ParamError(src, "lde", "root = w fixes the points of n rows, not of the extension's n 2^added_bits "
                                     "(several roots square to w): give generator instead")
    known = PLONKY3_GENERATORS.get(q)
    shift = given.get("shift", known[1] if known else None)
    if isinstance(shift, bool) or not isinstance(shift, int) or not 1 < shift < q:
        raise ParamError(src, "lde", f"shift must be an integer g with 1 < g < q = {q}, got {toml_value(shift)}"
                                     + ("" if known else " (no default for this q)"))
    if pow(shift, big, q) == 1:
        raise ParamError(src, "lde", f"shift = {shift} has shift^{big} = 1 mod {q}: the coset is the extension's "
                                     "points themselves; choose a g outside them (Plonky3 passes its field's "
                                     "GENERATOR)")
    root, _ = lde_root(q, bits, k, roots)
    return Lde(k, shift, root)
