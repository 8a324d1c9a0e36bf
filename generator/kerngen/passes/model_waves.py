"""The machine model's schedule: a kernel's instructions run in waves, each wave's alike ones at once.

`passes.interpret` reads a kernel's executed stream as `Instruction`s: the
places each reads and writes, each register write a value of its own, and
the `shape` that says which instructions can run as one numpy operation (one
row, immediate and operand sizes). `lay_out` puts every instruction in a wave
one after the last it depends on (through a value, or through memory: the
writer of what it reads, the readers and writer before it of what it
writes), lays the state out as 64-bit words (zeros, constant tables,
buffers, stack, then the values, a wave's new ones side by side and their
room taken again once read for the last time) and makes one step per wave
and shape. A step reads its sources through views of the state where their
words lie in nested runs of even steps (the common case: values side by
side, buffers in strides), else gathers them, and runs the table's
semantics once over all its instructions and all inputs: a stream of tens
of thousands of instructions becomes some hundreds of steps
(`passes.model_steps` makes them, one kind of row each).

The state holds its words word-major, (words, inputs): a word's inputs side
by side, so a step's elements for every input are one array. Nothing here
knows an instruction, an ISA or a width.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import CheckError

WORD = 8  # bytes of the state's words
BATCH_BYTES = 1 << 25  # inputs run together are cut into batches whose state is about this large
_DEPTH = 6  # the most nested runs a view of the state follows
_FEW = 64  # indices looked at one by one rather than by numpy
UNSIGNED = {size: np.dtype(f"<u{size}") for size in (1, 2, 4, 8)}


class ModelError(CheckError):
    """The kernel does what the model cannot follow: reads a register never
    written or memory outside its buffers, or runs a row without semantics."""


class Place(NamedTuple):
    """`size` bytes at `offset` of a region (`Mem.buffer`, or ("value", n): register value n), read
    `times` times over (an EVEX broadcast of one element)."""

    region: tuple
    offset: int
    size: int
    times: int = 1


class Instruction(NamedTuple):
    """An executed instruction as the places it reads and writes. `shape` says how it runs: its first
    item makes the step of a wave's instructions of that shape, its second is the bytes of the units
    its places are read in (a divisor of the word), the others what those instructions share;
    `route` is what each has apart (a movement's)."""

    index: int  # in the executed stream
    shape: tuple
    sources: tuple[Place, ...]
    dest: Place
    route: object = None
    upper: Instruction | None = None  # the bytes of a register past those written: kept or zeroed


Step = Callable[["State"], None]
Address = Callable[[Place], int]


def words(size: int) -> int:
    """Words that hold `size` bytes."""
    return -(-size // WORD)


@dataclass(frozen=True)
class Plan:
    """A program laid out for one aliasing of its arguments: the state's words, where the buffers,
    the stack and the constant tables are in it, and the steps, wave by wave."""

    words: int
    buffers: dict[int, int]  # argument -> its first word (aliases share theirs)
    stack: tuple[int, int]  # its first word, and its words
    tables: tuple[int, np.ndarray]  # the first word of the constant tables, and their words
    steps: tuple[Step, ...]

    def run(self, rows: int, data: dict[int, np.ndarray], outputs: dict[int, np.ndarray], symbol: str) -> None:
        """The steps on each of `rows` inputs (`data`: argument -> its words, (rows, words)), in
        batches; each argument's words after them into `outputs` (argument -> (rows, words))."""
        cleared = [(self.buffers[i], out.shape[1]) for i, out in outputs.items() if i not in data] + [self.stack]
        batch, state = max(1, BATCH_BYTES // (WORD * self.words)), None
        for start in range(0, rows, batch):
            part = slice(start, min(rows, start + batch))
            if state is None or state.inputs != part.stop - part.start:
                state = State(self.words, part.stop - part.start)
                first, tables = self.tables
                state.units[WORD][first:first + len(tables)] = tables[:, None]
            else:
                for first, count in cleared:  # what the last batch left: on the stack, and the outputs it wrote
                    state.units[WORD][first:first + count] = 0
            for i, x in data.items():
                _transpose(x[part], state.units[WORD][self.buffers[i]:][:x.shape[1]])
            for step in self.steps:
                try:
                    step(state)
                except ModelError as e:
                    raise ModelError(f"{symbol}: {e}") from None
            for i, out in outputs.items():
                _transpose(state.units[WORD][self.buffers[i]:][:out.shape[1]], out[part])


def _transpose(source: np.ndarray, target: np.ndarray, tile: int = 256) -> None:
    """target = source transposed, a tile at a time (a whole transposition of many rows misses the
    caches at every word)."""
    for i in range(0, source.shape[0], tile):
        for j in range(0, source.shape[1], tile):
            target[j:j + tile, i:i + tile] = source[i:i + tile, j:j + tile].T


def lay_out(instructions: tuple[Instruction, ...], values: tuple[int, ...], tables: dict[tuple, np.ndarray],
            buffers: dict[tuple, int], arguments: dict[int, int]) -> Plan:
    """The plan of `instructions` whose `values` take these bytes each. The state's words are zeros
    (as many as the widest value or write), the constant `tables` (region ("table", label) -> its
    words), the `buffers` (region -> bytes: the arguments', each where `arguments` maps it to
    itself, the others sharing that of the one they map to; the stack's), then the values."""
    first = words(max(values + tuple(i.dest.size for i in instructions), default=WORD))
    bases: dict[tuple, int] = {}
    top = WORD * first
    for region, size in [(r, WORD * len(x)) for r, x in tables.items()] + list(buffers.items()):
        if region[0] != "arg" or arguments[region[1]] == region[1]:
            bases[region], top = top, top + WORD * words(size)
    for i, j in arguments.items():
        bases["arg", i] = bases["arg", j]
    levels, last = _waves(instructions, bases, top, len(values))
    waves: dict[int, dict[tuple, list[Instruction]]] = defaultdict(lambda: defaultdict(list))
    for ins, level in zip(instructions, levels):
        waves[level][ins.shape].append(ins)
        if ins.upper is not None:
            waves[level][ins.upper.shape].append(ins.upper)
    rooms = _Rooms(top, values, last)

    def at(p: Place) -> int:
        return rooms.slots[p.region[1]] + p.offset if p.region[0] == "value" else bases[p.region] + p.offset

    steps = []
    for level in sorted(waves):
        rooms.free(level)
        groups = {shape: sorted(members, key=lambda m: at(m.sources[0]) if m.sources else 0)
                  for shape, members in waves[level].items()}
        for members in groups.values():  # each wave's new values side by side, in the order of their sources
            rooms.take([m.dest.region[1] for m in members if m.dest.region[0] == "value" and not m.dest.offset])
        steps += [shape[0](shape, members, at) for shape, members in groups.items()]
    constants = np.concatenate([np.zeros(0, np.uint64), *tables.values()])
    return Plan(rooms.most // WORD, {i: bases["arg", i] // WORD for i in arguments},
                (bases["stack",] // WORD, words(buffers["stack",])), (first, constants), tuple(steps))


def _waves(instructions: tuple[Instruction, ...], bases: dict[tuple, int], fixed: int, count: int
           ) -> tuple[list[int], list[int]]:
    """Each instruction's wave (one after every instruction it depends on: the writer of what it reads,
    the readers and writer before it of the memory it writes, word by word), and the last wave that
    reads each value. An instruction reading only constants runs in the wave before its first reader,
    where its value starts taking room."""
    written, read = [0] * words(fixed), [0] * words(fixed)  # by word of the regions before the values
    defined, first, last = [0] * count, [0] * count, [0] * count
    levels, constant = [], []
    for n, ins in enumerate(instructions):
        reads = ins.sources if ins.upper is None else ins.sources + ins.upper.sources
        level, memory, values = 0, [], []
        for p in reads:
            if p.region[0] == "value":
                values.append(p.region[1])
                level = max(level, defined[p.region[1]])
            elif p.region[0] != "table":
                start = bases[p.region] + p.offset
                memory.append((start // WORD, words(start + p.size)))
                level = max(level, *written[memory[-1][0]:memory[-1][1]])
        d = ins.dest
        if d.region[0] != "value":
            start = bases[d.region] + d.offset
            low, high = start // WORD, words(start + d.size)
            level = max(level, *written[low:high], *read[low:high])
        level += 1
        for v in values:
            first[v], last[v] = min(first[v] or level, level), max(last[v], level)
        for low, high in memory:
            read[low:high] = [max(level, r) for r in read[low:high]]
        if d.region[0] == "value":
            defined[d.region[1]] = last[d.region[1]] = level
            if not memory and not values:
                constant.append(n)
        else:
            written[low:high] = [level] * (high - low)
        levels.append(level)
    for n in constant:
        v = instructions[n].dest.region[1]
        if first[v]:
            levels[n] = first[v] - 1
    return levels, last


class _Rooms:
    """The room of register values among the state's words: the new values of a wave side by side (so
    a wave reading them in that order reads one run of words), the run free again once every value
    in it was read for the last time in an earlier wave, and taken again by the best fitting need."""

    def __init__(self, start: int, sizes: tuple[int, ...], last: list[int]):
        self.top = self.most = start
        self.sizes, self.last, self.slots = sizes, last, [0] * len(sizes)
        self.busy: list[tuple[int, int, int]] = []  # (last wave reading it, first byte, bytes), a heap
        self.spare: list[list[int]] = []  # free runs below the top, [first byte, bytes], by first byte

    def free(self, wave: int) -> None:
        while self.busy and self.busy[0][0] < wave:
            _, start, size = heapq.heappop(self.busy)
            k = bisect.bisect(self.spare, [start, size])
            self.spare.insert(k, [start, size])
            if k + 1 < len(self.spare) and start + size == self.spare[k + 1][0]:  # joined with the next run
                self.spare[k][1] += self.spare.pop(k + 1)[1]
            if k and sum(self.spare[k - 1]) == start:  # and with the one before
                self.spare[k - 1][1] += self.spare.pop(k)[1]
                k -= 1
            if sum(self.spare[k]) == self.top:
                self.top = self.spare.pop(k)[0]

    def take(self, values: list[int]) -> None:
        if not values:
            return
        size = WORD * sum(words(self.sizes[v]) for v in values)
        fits = [k for k, (_, room) in enumerate(self.spare) if room >= size]
        if fits:
            k = min(fits, key=lambda k: self.spare[k][1])
            start = self.spare[k][0]
            self.spare[k] = [start + size, self.spare[k][1] - size]
            if not self.spare[k][1]:
                del self.spare[k]
        else:
            start, self.top = self.top, self.top + size
            self.most = max(self.most, self.top)
        heapq.heappush(self.busy, (max(self.last[v] for v in values), start, size))
        for v in values:
            self.slots[v], start = start, start + WORD * words(self.sizes[v])


class State:
    """One batch's words, (words, inputs, 1), their views in smaller units (a view's unit k of word w
    at [w, :, k]) and its words as (words, inputs)."""

    def __init__(self, count: int, inputs: int):
        self.inputs, self.array = inputs, np.zeros((count, inputs, 1), np.uint64)
        self.units = {size: self.array.view(UNSIGNED[size]) for size in (1, 2, 4)} | {WORD: self.array[:, :, 0]}
        self.views: dict[Access, np.ndarray] = {}  # the batches of one size share a state, and so its views


def index_of(places: list[Place], at: Address, grain: int) -> np.ndarray:
    """The units of `grain` bytes of places of one size and repetition, one after another."""
    pattern = np.tile(np.arange(places[0].size // grain), places[0].times)
    starts = np.fromiter((at(p) for p in places), np.intp, len(places)) // grain
    return (starts[:, None] + pattern).reshape(-1)


def _strides(index: np.ndarray) -> list[tuple[int, int]] | None:
    """Word indices as nested runs of even steps, outermost first ([(count, step), ...]: index k is
    index 0 plus digit j of k times step j), or None where they are not."""
    if len(index) <= _FEW:
        return _strides_of_few(index.tolist())
    dims, rest = [], index
    while len(rest) > 1 and len(dims) < _DEPTH:
        step = rest[1] - rest[0]
        uneven = np.flatnonzero(np.diff(rest) != step)
        run = len(rest) if not len(uneven) else int(uneven[0]) + 1
        if len(rest) % run:
            return None
        runs = rest.reshape(-1, run)
        if ((runs - runs[:, :1]) != np.arange(run) * step).any():
            return None
        dims.append((run, int(step)))
        rest = runs[:, 0]
    return None if len(rest) > 1 else dims[::-1] or [(len(index), 1)]


def _strides_of_few(index: list[int]) -> list[tuple[int, int]] | None:
    """`_strides` of a short list, without numpy's cost of a call."""
    dims, rest = [], index
    while len(rest) > 1 and len(dims) < _DEPTH:
        step, run = rest[1] - rest[0], 2
        while run < len(rest) and rest[run] - rest[run - 1] == step:
            run += 1
        if len(rest) % run or any(rest[k] != rest[k - k % run] + k % run * step for k in range(run, len(rest))):
            return None
        dims.append((run, step))
        rest = rest[::run]
    return None if len(rest) > 1 else dims[::-1] or [(len(index), 1)]


def _refined(patterns: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]] | None:
    """The patterns (of one length) split into dimensions of the same counts, or None where their
    runs do not nest."""
    def extents(dims):
        inner = 1
        for count, _ in reversed(dims):
            inner *= count
            yield inner
    cuts = sorted({e for dims in patterns for e in extents(dims)})
    if any(b % a for a, b in zip(cuts, cuts[1:])):
        return None
    out = []
    for dims in patterns:
        split, inner = [], 1
        for count, step in reversed(dims):
            low = inner
            for edge in [c for c in cuts if inner < c < inner * count] + [inner * count]:
                split.append((edge // low, step * (low // inner)))
                low = edge
            inner *= count
        out.append(split[::-1])
    return out


class Access:
    """Units of `grain` bytes of the state a step reads or writes: words in nested runs of even steps
    (read and written through a view of the state), else unit by unit (gathered and scattered)."""

    def __init__(self, index: np.ndarray, grain: int):
        self.grain, self.index = grain, index
        self.dims = _strides(index) if grain == WORD else None
        if grain != WORD:
            self.key = (index // (WORD // grain), index % (WORD // grain))  # word, and unit in it

    def shape(self, dims: list[tuple[int, int]] | None) -> None:
        """Read and write these units with the counts of `dims` (None: gathered, as one dimension)."""
        self.dims, self.counts = dims, tuple(c for c, _ in dims) if dims else (len(self.index),)
        self.steps = tuple(step * WORD for _, step in dims) if dims else ()

    def view(self, state: State) -> np.ndarray:
        view = state.views.get(self)
        if view is None:
            inputs = state.inputs
            view = state.views[self] = np.ndarray(self.counts + (inputs,), np.uint64, state.array,
                                                  int(self.index[0]) * WORD * inputs,
                                                  tuple(step * inputs for step in self.steps) + (WORD,))
        return view

    def read(self, state: State) -> np.ndarray:
        if self.dims:
            return self.view(state)
        if self.grain == WORD:
            return state.units[WORD][self.index]
        return state.units[self.grain][self.key[0], :, self.key[1]]

    def write(self, state: State, values: np.ndarray) -> None:
        if self.dims:
            view = self.view(state)
            view[...] = values if values.shape == view.shape else values.reshape(view.shape)
        elif self.grain == WORD:
            state.units[WORD][self.index] = values.reshape(-1, state.inputs)
        else:
            state.units[self.grain][self.key[0], :, self.key[1]] = values


def shaped(*indices: np.ndarray, grain: int) -> list[Access]:
    """The accesses of one step, shaped alike: the common refinement of their runs (views), else all
    gathered."""
    made = [Access(index, grain) for index in indices]
    common = _refined([a.dims for a in made]) if all(a.dims for a in made) else None
    for a, dims in zip(made, common or [None] * len(made)):
        a.shape(dims)
    return made


def accesses(members: list[Instruction], at: Address, grain: int) -> tuple[list[Access], Access]:
    """How a wave's instructions of one shape read each source, and write their destination."""
    *sources, dest = shaped(*(index_of([m.sources[k] for m in members], at, grain)
                               for k in range(len(members[0].sources))),
                             index_of([m.dest for m in members], at, grain), grain=grain)
    return sources, dest
