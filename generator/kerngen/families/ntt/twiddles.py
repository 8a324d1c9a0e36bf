"""Twiddle tables in consumption order: register-wide rows, each stored once,
and where the distinct twiddles alone would fill L1, a twiddle every lane of
its vector shares stored once in a second table and broadcast."""

from __future__ import annotations

from ...ir.instr import Builder, Mem, TableBase, VReg
from ...machine.ops import by_width

# Twiddles whose distinct values alone exceed this many bytes (the smallest L1 data cache of the cores of
# the figures) are not stored register-wide where every lane of a vector shares one: a kernel would stream
# the copies from L2 on every call (he-1125899906826241 at n = 4096: 164 KiB of rows against 107 KiB)
L1_BYTES = 32 * 1024
# A broadcast from memory of elements this wide or wider is a load µop alone (of 16-bit ones, a load and
# a shuffle on port 5)
BROADCAST_LOAD_BYTES = 4


class TwiddleTable:
    """Collects register-wide rows in first-use order, each stored once; a
    vector narrower than the register is padded with zeros (lanes that hold
    zeros, or copies of lane 0 after a broadcast load, and stay bounded).
    With `shared_once`, a row whose lanes are all one value is that value
    once, in a second table (`label_shared`), which the kernel broadcasts."""

    def __init__(self, b: Builder, label: str, lane_bits: int, shared_once: bool = False):
        self.b, self.label = b, label
        self.elem_bytes = lane_bits // 8
        self.width = b.vector_bits // lane_bits
        self.rows: list[tuple[int, ...]] = []
        self.offsets: dict[tuple[int, ...], int] = {}
        self.shared_once = shared_once and self.width > 1 and self.elem_bytes >= BROADCAST_LOAD_BYTES
        self.shared: dict[int, int] = {}  # value -> its offset in the second table

    def vector(self, lanes: list[int] | tuple[int, ...]) -> Mem:
        if self.shared_once and len(lanes) == self.width and len(set(lanes)) == 1:
            offset = self.shared.setdefault(lanes[0], self.elem_bytes * len(self.shared))
            return Mem(TableBase(self.label + "_shared"), offset, self.elem_bytes)
        key = tuple(lanes) + (0,) * (self.width - len(lanes))
        row_bytes = self.elem_bytes * self.width
        if key not in self.offsets:
            self.offsets[key] = row_bytes * len(self.rows)
            self.rows.append(key)
        return Mem(TableBase(self.label), self.offsets[key], row_bytes)

    def finish(self, comment: str) -> None:
        self.b.table(self.label, self.elem_bytes, [v for row in self.rows for v in row],
                     comment=f"{comment}, {self.width} lanes per row")
        if self.shared:
            self.b.table(self.label + "_shared", self.elem_bytes, list(self.shared),
                         comment=f"{comment}, those every lane of a vector shares, once each")

    def operand(self, m: Mem) -> Mem | VReg:
        """A memory operand `vector` returned, as the multiplications read it: a shared value broadcast."""
        if m.size == self.elem_bytes < self.elem_bytes * self.width:
            return self.b.op(by_width("broadcast", 8 * self.elem_bytes), m)
        return m
