"""The machine model's steps: one kind of row of the instruction table run on a wave's instructions.

Each maker takes the `shape` the instructions share (`model_waves.Instruction`),
the instructions and where their places are, and gives the step that runs
them on every input of a batch at once, with the table's semantics:
`Arith.exact` for element-wise rows (masked and accumulating forms
included) on the row's own element width, the `widen` products of a
widening row, a `Blocks` function for rows that are neither, and
`Move.route` through `ir.lanes.move_lanes` for movements (under an opmask,
each lane moved or kept by its bit of the mask; by an index register, the
route of its contents). Values are computed in int64 (exact for products of
elements up to 32 bits; on 64-bit elements the table's semantics wrap and
split products themselves). Nothing here knows an instruction, an ISA or a
width.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np

from ..ir.lanes import move_lanes
from ..machine.ops import PRODUCT_HALVES, spec
from .model_waves import UNSIGNED, Access, Address, Instruction, ModelError, State, Step, accesses, index_of, shaped

BITWISE = 64  # the element width a row of no element width (a bitwise one) is computed on
_SIGNED = {bits: np.dtype(f"<i{bits // 8}") for bits in (8, 16, 32, 64)}


@lru_cache(maxsize=None)
def gather(name: str, imm: int | None, unit: int, dest_units: int, counts: tuple[int, ...]) -> np.ndarray | None:
    """Where each destination unit of row `name` comes from, as indices into
    its sources' units laid end to end and then one zero unit (None: this
    immediate makes the row no movement)."""
    labels = [[(i, k) for k in range(n)] for i, n in enumerate(counts)]
    moved = move_lanes(spec(name), labels, imm, unit, dest_units, None)
    if moved is None:
        return None
    starts = np.cumsum((0,) + counts)
    return np.array([starts[-1] if m is None else starts[m[0]] + m[1] for m in moved], dtype=np.intp)


class _Elements:
    """`bits`-bit elements of units of `grain` bytes read as (units, inputs): each word's elements
    side by side, or where a unit is narrower than an element (or than the `whole` an element
    belongs to), the elements of each input in a row. Sources and destination read alike, so an
    element-wise function sees elements in the same order in each."""

    def __init__(self, grain: int, bits: int, whole: int):
        self.kind, self.units, self.across = _SIGNED[bits], UNSIGNED[grain], grain * 8 < whole

    def read(self, units: np.ndarray, wide: bool = True) -> np.ndarray:
        x = (np.ascontiguousarray(units.T) if self.across else units).view(self.kind)
        return x.astype(np.int64) if wide and x.dtype != np.int64 else x

    def write(self, values, shape: tuple[int, ...]) -> np.ndarray:
        if getattr(values, "shape", None) != shape:  # a value of every lane alike, say
            values = np.ascontiguousarray(np.broadcast_to(values, shape))
        x = values.astype(self.kind, copy=False)  # its axes in any order (numpy keeps its sources'), but
        if x.strides[-1] != x.itemsize:  # each input's elements side by side
            x = np.ascontiguousarray(x)
        x = x.view(self.units)
        return x.T if self.across else x


def elementwise(shape: tuple, members: list[Instruction], at: Address) -> Step:
    _, grain, name, imm, *_ = shape
    s = spec(name)
    bits = s.elem or BITWISE
    sources, dest = accesses(members, at, grain)
    elements, exact, tail = _Elements(grain, bits, bits), s.arith.exact, (imm,) if imm is not None else ()

    def step(state: State) -> None:
        values = [elements.read(a.read(state)) for a in sources]
        dest.write(state, elements.write(exact(tuple(values) + tail, bits), values[0].shape))
    return step


def widened(shape: tuple, members: list[Instruction], at: Address) -> Step:
    """Products of the low halves of `elem`-bit units: the low half their low product, the high half the
    row's `widen` product."""
    _, grain, name, *_ = shape
    s = spec(name)
    half = s.elem // 2
    low, high = PRODUCT_HALVES["mullo"].exact, PRODUCT_HALVES[s.widen].exact
    sources, dest = accesses(members, at, grain)
    elements = _Elements(grain, half, s.elem)

    def step(state: State) -> None:
        a, b = (elements.read(source.read(state))[..., 0::2] for source in sources)
        out = np.empty(a.shape[:-1] + (2 * a.shape[-1],), dtype=np.int64)
        out[..., 0::2], out[..., 1::2] = low((a, b), half), high((a, b), half)
        dest.write(state, elements.write(out, out.shape))
    return step


def blockwise(shape: tuple, members: list[Instruction], at: Address) -> Step:
    """A `Blocks` row on each instruction's bytes, one row of bytes per instruction and input."""
    _, grain, name, imm, *_ = shape
    blocks, size, count = spec(name).blocks, members[0].dest.size, len(members)
    sources, dest = accesses(members, at, grain)

    def step(state: State) -> None:
        inputs = state.inputs
        rows = [np.ascontiguousarray(a.read(state).reshape(count, -1, inputs).transpose(0, 2, 1)).view(np.uint8)
                .reshape(count * inputs, size) for a in sources]
        out = np.ascontiguousarray(blocks.on_bytes(rows, imm, size)).view(UNSIGNED[grain])
        dest.write(state, out.reshape(count, inputs, -1).transpose(0, 2, 1).reshape(-1, inputs))
    return step


def _composite(members: list[Instruction], route: np.ndarray, unit: int, at: Address, grain: int,
               sources: int) -> np.ndarray:
    """The units of `grain` bytes each instruction's destination takes: the units of `unit` bytes of
    its first `sources` sources end to end, then a zero unit (the state's first bytes), picked by the
    route their movement shares."""
    count, per = len(members), unit // grain
    parts = [index_of([m.sources[k] for m in members], at, grain).reshape(count, -1) for k in range(sources)]
    parts.append(np.broadcast_to(np.arange(per), (count, per)))
    return np.concatenate(parts, axis=1).reshape(count, -1, per)[:, route].reshape(-1)


def transfer(shape: tuple, members: list[Instruction], at: Address) -> Step:
    """Movements by a known route (`route`: what picks the same route, the bytes of its units, the
    route), stores of one element and the filling of a register's upper part: each unit of the
    destinations a unit of the state, all in one copy."""
    grain = shape[1]
    alike: dict[tuple, list[Instruction]] = defaultdict(list)
    for m in members:
        alike[m.route[0], tuple((p.size, p.times) for p in m.sources), m.dest.size].append(m)
    sources, dests = [], []
    for group in alike.values():
        _, unit, route = group[0].route
        sources.append(_composite(group, route, unit, at, grain, len(group[0].sources)))
        dests.append(index_of([m.dest for m in group], at, grain))
    source, dest = shaped(np.concatenate(sources), np.concatenate(dests), grain=grain)

    def step(state: State) -> None:
        dest.write(state, source.read(state))
    return step


def masked(shape: tuple, members: list[Instruction], at: Address) -> Step:
    """A movement under an opmask (sources: the old destination, the mask, the moved ones, then the mask
    again as elements; `route`: the routes of every mask bit set and of none): each element moved where
    its mask element is set, kept where it is not."""
    _, grain, _name, elem, unit, *_ = shape
    moved = len(members[0].sources) - 1
    taken, kept, mask, dest = shaped(*(_composite(members, members[0].route[k], unit, at, grain, moved) for k in (0, 1)),
                                     index_of([m.sources[-1] for m in members], at, grain),
                                     index_of([m.dest for m in members], at, grain), grain=grain)
    elements = _Elements(grain, elem, elem)

    def step(state: State) -> None:
        chosen = elements.read(mask.read(state), wide=False) != 0
        picked = np.where(chosen, elements.read(taken.read(state), wide=False),
                          elements.read(kept.read(state), wide=False))
        dest.write(state, elements.write(picked, picked.shape))
    return step


def indexed(shape: tuple, members: list[Instruction], at: Address) -> Step:
    """A permutation by an index register (`Move.indices`; sources: the moved ones, then the index
    register): the route of each content that register has among the inputs (one, where it holds a
    constant), read as one integer."""
    _, grain, unit, name, bits, dest_units, counts, *_ = shape
    count, per = len(members), members[0].sources[-1].size // grain
    index, dest = (Access(index_of(places, at, grain), grain)
                   for places in ([m.sources[-1] for m in members], [m.dest for m in members]))
    for access in (index, dest):
        access.shape(None)  # gathered, as every route is: one shape for all
    units = _composite(members, np.arange(sum(counts) + 1), unit, at, grain, len(counts)).reshape(count, -1,
                                                                                                   unit // grain)
    routes: dict[bytes, Access] = {}

    def composite(contents: np.ndarray) -> Access:
        key = contents.tobytes()
        if key not in routes:
            picked = []
            for k, m in enumerate(members):
                route = gather(name, int.from_bytes(contents[k * per:(k + 1) * per].tobytes(), "little"), bits,
                               dest_units, counts)
                if route is None:
                    raise ModelError(f"instruction {m.index}: its index register's contents make this row no movement")
                picked.append(units[k][route].reshape(-1))
            routes[key] = Access(np.concatenate(picked), grain)
            routes[key].shape(None)
        return routes[key]

    def step(state: State) -> None:
        held = index.read(state)
        if (held == held[:, :1]).all():  # a constant index (every kernel's): one route for every input
            dest.write(state, composite(held[:, 0]).read(state))
            return
        contents, which = np.unique(held.T, axis=0, return_inverse=True)
        out = np.empty_like(dest.read(state))
        for k, row in enumerate(contents):
            chosen = which.reshape(-1) == k
            out[:, chosen] = composite(row).read(state)[:, chosen]
        dest.write(state, out)
    return step
