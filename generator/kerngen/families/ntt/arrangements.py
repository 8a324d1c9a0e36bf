"""The cheapest lane moves between two arrangements of index bits.

A register group of the NTT's final pass holds some index bits in its lanes
and the others in which register of the group a value is (its slots); a lane
move (`Swap`, `Interleave`) permutes those positions, priced by the
instructions its recipe takes. `Moves.cheapest` searches the arrangements
(Dijkstra) for the fewest instructions from one to any that a test accepts:
how the layout plan reaches the NTT domain's order and how base
multiplication separates block coefficients.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from .shuffles import Interleave, LaneMoves, Swap


@dataclass(frozen=True)
class Moves:
    """The lane moves of the final pass as permutations of the index bits its
    registers hold: positions 0..lane_bits-1 are lane bits, the next
    slot_bits the register's index in its group."""

    lane_index_bits: int
    slot_bits: int
    half_bits: int  # lane bits an Interleave rotates (0: none fits)
    shuffles: LaneMoves  # the moves' instructions, which price them

    def steps(self, swaps_only: bool) -> list[tuple[Swap | Interleave, int]]:
        """Every move, with its price: the instructions its recipe takes."""
        out: list[Swap | Interleave] = [Swap(l, s) for l in range(self.lane_index_bits) for s in range(self.slot_bits)]
        if self.half_bits and not swaps_only:
            out += [Interleave(s) for s in range(self.slot_bits)]
        return [(st, self.shuffles.cost(st)) for st in out]

    def apply(self, st: Swap | Interleave, a: tuple[int, ...]) -> tuple[int, ...]:
        x = list(a)
        L = self.lane_index_bits
        if isinstance(st, Swap):
            x[st.lane_bit], x[L + st.slot_bit] = x[L + st.slot_bit], x[st.lane_bit]
        else:
            top = self.half_bits - 1
            x[0], x[1:top + 1], x[L + st.slot_bit] = a[L + st.slot_bit], a[0:top], a[top]
        return tuple(x)

    def run(self, steps, a: tuple[int, ...]) -> tuple[int, ...]:
        """The arrangement after the lane moves among `steps` (other steps move nothing)."""
        for st in steps:
            if isinstance(st, (Swap, Interleave)):
                a = self.apply(st, a)
        return a

    def cheapest(self, start: tuple[int, ...], done: Callable[[tuple[int, ...]], bool],
                 swaps_only: bool = False) -> tuple[Swap | Interleave, ...]:
        return cheapest(self, start, done, swaps_only)


def cheapest(moves: Moves, start: tuple[int, ...], done, swaps_only: bool) -> tuple[Swap | Interleave, ...]:
    """The fewest instructions that take arrangement `start` to one `done`
    accepts (Dijkstra over arrangements; ties broken by fewer steps)."""
    steps = moves.steps(swaps_only)
    seen = {start: 0}
    queue: list = [(0, 0, start, ())]
    while queue:
        cost, count, a, path = heapq.heappop(queue)
        if done(a):
            return path
        if seen.get(a, cost) < cost:
            continue
        for st, c in steps:
            b = moves.apply(st, a)
            if cost + c < seen.get(b, cost + c + 1):
                seen[b] = cost + c
                heapq.heappush(queue, (cost + c, count + 1, b, path + (st,)))
    raise ValueError("layout plan: no lane moves reach the order asked for")
