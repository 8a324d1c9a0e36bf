"""What the verifier proved about a function's map, in manifest form.

`MapProof` says over which field the outputs are a sum of products of which
arguments (linear in a, bilinear in a and b, ...), and how local the map is
(each output element from its own input element, or from its own block).
`kerngen test` reads it to choose the basis-vector proof that completes the
argument: a linear map is determined by its values on the basis vectors.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MapProof:
    field: str  # "q": lanes mod q; "gf2": GF(2) bit vectors
    monomials: tuple[tuple[str, ...], ...] | None  # argument names of each product; None: no such form proven
    locality: str | None = None  # "element", "block" or None (any output may depend on any input)

    def manifest(self) -> dict:
        return {"field": self.field, "monomials": None if self.monomials is None else [list(m) for m in self.monomials],
                "locality": self.locality}


def monomials(form, names: list[str]) -> tuple[tuple[str, ...], ...] | None:
    """A verifier form (products of argument indices) as argument names,
    sorted; None unless the map is multilinear (no argument twice in a
    product), the only maps a basis determines."""
    if form is None or any(len(set(m)) != len(m) for m in form):
        return None
    return tuple(sorted(tuple(names[i] for i in m) for m in form if m))
