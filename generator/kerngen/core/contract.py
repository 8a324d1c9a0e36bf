"""Typed contracts: what each argument of a kernel requires and ensures.

A `Contract` holds, per argument, the `Values` its elements must hold on
entry (`requires`) and hold on return (`ensures`): an inclusive bound and
the facts the manifest states (representation, scale, layout, ...). The
verifier fills in each proven `ensures` bound. The .asm comment block, the
C header comment and the manifest entry are all rendered from this one
object: its text lines quote bounds by reference (`BoundOf`), never by
copies of their digits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..ir.instr import ArgSpec


@dataclass(frozen=True)
class Bound:
    lo: int
    hi: int

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"

    @property
    def magnitude(self) -> int:
        """The largest |value| inside."""
        return max(-self.lo, self.hi)


@dataclass(frozen=True)
class Values:
    """What the elements of an argument hold. `bound` is None until the
    verifier proves it; `layout` is a word ("natural") or an object with a
    `manifest()` (the NTT's block layout)."""

    bound: Bound | None
    representation: str | None = None
    scale: int | None = None
    layout: Any = None
    bits: int | None = None
    limbs: int | None = None

    def manifest(self) -> dict:
        if self.bound is None:
            raise ValueError("a bound is still to be proven")
        out: dict[str, Any] = {"bound": [self.bound.lo, self.bound.hi]}
        for key in ("representation", "scale", "layout", "bits", "limbs"):
            v = getattr(self, key)
            if v is not None:
                out[key] = v.manifest() if hasattr(v, "manifest") else v
        return out


@dataclass(frozen=True)
class ArgContract:
    spec: ArgSpec
    requires: Values | None = None
    ensures: Values | None = None
    may_alias: tuple[str, ...] = ()  # (a written argument) the arguments it may be the same array as


@dataclass(frozen=True)
class BoundOf:
    """In a contract's text: the bound argument `arg` requires or ensures."""

    arg: str
    side: str  # "requires" or "ensures"


Line = tuple[str | BoundOf, ...]


@dataclass(frozen=True)
class Contract:
    args: tuple[ArgContract, ...]
    text: tuple[Line, ...]  # the requires / ensures lines of the comment blocks

    @property
    def specs(self) -> tuple[ArgSpec, ...]:
        return tuple(a.spec for a in self.args)

    def arg(self, name: str) -> ArgContract:
        return next(a for a in self.args if a.spec.name == name)

    def lines(self) -> tuple[str, ...]:
        def part(p) -> str:
            return p if isinstance(p, str) else str(getattr(self.arg(p.arg), p.side).bound)
        return tuple("".join(part(p) for p in line) for line in self.text)

    def inputs(self) -> dict[int, Bound]:
        """The required bound of every argument that has one, by index."""
        return {i: a.requires.bound for i, a in enumerate(self.args) if a.requires is not None}

    def proven(self, bounds: dict[int, Bound]) -> Contract:
        """This contract with the `ensures` bounds the verifier proved, by argument index."""
        args = tuple(dataclasses.replace(a, ensures=dataclasses.replace(a.ensures, bound=bounds[i]))
                     if a.ensures is not None and i in bounds else a for i, a in enumerate(self.args))
        return dataclasses.replace(self, args=args)

    def _shared(self, side: str) -> Values:
        found = {getattr(a, side) for a in self.args if getattr(a, side) is not None}
        if len(found) != 1:
            raise ValueError(f"the arguments' {side} differ; the manifest states one")
        return found.pop()

    @property
    def inputs_shared(self) -> bool:
        """Whether every input argument requires the same (the manifest then states it once)."""
        return len({a.requires for a in self.args if a.requires is not None}) == 1

    def manifest_input(self) -> dict:
        return self._shared("requires").manifest()

    def manifest_output(self) -> dict:
        return self._shared("ensures").manifest()
