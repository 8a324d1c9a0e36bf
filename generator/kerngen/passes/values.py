"""The verifier's abstract values: per lane an interval and the input
elements the lane depends on, as a whole a form (which products of input
arguments the value is a sum of), the algebra of forms, and the record of the
instruction that made a value, as the checks of tagged groups read it."""

from __future__ import annotations

from dataclasses import dataclass

Interval = tuple[int, int]
Form = frozenset  # of sorted tuples of argument indices; None: not a sum of such products
ZERO: Interval = (0, 0)


@dataclass(frozen=True)
class Value:
    vid: int
    lanes: tuple[Interval, ...]
    deps: tuple[int, ...]
    form: Form | None

    @property
    def constant(self) -> tuple[int, ...] | None:
        """The lanes' values when they are exact and depend on no input."""
        if self.form in (frozenset({()}), frozenset()) and all(lo == hi for lo, hi in self.lanes):
            return tuple(lo for lo, _ in self.lanes)
        return None


@dataclass(frozen=True)
class Def:
    """The instruction that made a value, as the checks of tagged groups read it."""

    op: str
    generic: str | None
    elem: int | None
    imm: int | None
    sources: tuple  # of Value
    lanes: int  # the lanes the instruction wrote (a narrower write's upper lanes are zeroed or kept, not moved)


def union(*forms):
    """The form of a sum (or a movement) of values of these forms."""
    if any(f is None for f in forms):
        return None
    return frozenset().union(*forms)


def product(a, b):
    """The form of a product of values of forms a and b."""
    if a is None or b is None:
        return None
    return frozenset(tuple(sorted(x + y)) for x in a for y in b)
