"""The interface between the verifier's abstract machine and the checks of
tagged instruction groups (reduction idioms, products): what a check may
read of the machine (`MachineView`), the group it is given (`Group`), what
it returns (`Checked`) and how it is registered (`IdiomCheck`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NoReturn, Protocol

from ...ir.instr import Instr
from ..values import Def, Value


class MachineView(Protocol):
    """What a check reads of the machine: the lanes (`bits` wide, read
    `signed` or not, [lo, hi] as integers), the contract (modulus, the
    argument pairs related as Shoup's w and w', the first element index of
    each argument), how values were made, and the checked Montgomery
    products; and how it refuses the kernel."""

    symbol: str
    modulus: int
    bits: int
    signed: bool
    lo: int
    hi: int
    lane_type: str
    shoup_pairs: tuple[tuple[int, int, int], ...]
    bases: tuple[int, ...]

    def made(self, vid: int) -> Def | None:
        """The instruction that made value `vid`; None for one read from memory."""

    def product_leaves(self, vid: int) -> tuple | None:
        """The (x, w) leaves, lane by lane, of the checked Montgomery product `vid`."""

    def text(self, ins: Instr) -> str:
        """An instruction as the kernel's assembly spells it."""

    def fail(self, index: int, ins: Instr, message: str) -> NoReturn:
        """Refuse the kernel at instruction `index`."""


@dataclass(frozen=True)
class Step:
    """One instruction of a group: its read operands, the values it read
    (immediates aside) and the value it left."""

    instr: Instr
    reads: tuple
    sources: tuple[Value, ...]
    result: Value


@dataclass(frozen=True)
class Group:
    """A tagged group at its end: its kind, the value its start read as its
    input, its steps, and the last instruction (number `index`) with the
    value it made, which the check replaces."""

    kind: str
    input: Value
    steps: tuple[Step, ...]
    index: int
    instr: Instr
    result: Value

    def made_inside(self) -> set[int]:
        """The values the group's instructions made (not the ones they copied)."""
        return {st.result.vid for st in self.steps if st.result.vid not in {v.vid for v in st.sources}}


@dataclass(frozen=True)
class Checked:
    """A group's result as its check establishes it; `leaves`: for a
    Montgomery product, its (x, w) leaves lane by lane (read by the checks
    of later groups through `MachineView.product_leaves`)."""

    value: Value
    leaves: tuple | None = None


@dataclass(frozen=True)
class IdiomCheck:
    """The check of the tag kinds `kinds`. `product`: counted among the
    products checked (else among the idioms); `lanes_at_end`: the group's
    instructions may have no lane semantics of their own, the check
    establishing the result's lanes."""

    kinds: tuple[str, ...]
    check: Callable[[MachineView, Group], Checked]
    product: bool
    lanes_at_end: bool
