"""Plans of large transforms: stages of loops over verified codelets.

An NTT of n = 2^L coefficients (a column of a row-major n x C matrix when
C > 1: element (i, c) at i*C + c, every column transformed alike) runs L
layers; forward layer l pairs row i with i + n/2^(l+1) inside the blocks of
n/2^l rows, block b = i >> (L - l) multiplying by the twiddle of (l, b)
(Cooley–Tukey; the inverse runs the layers backwards, Gentleman–Sande).

A stage does layers [first, last) on tiles: the rows sharing the block at
`first` and their low L - last index bits, 2^(last - first) rows at a stride
of 2^(L - last) rows, each tile a transform of its own. A stage whose last
layer is L on one polynomial is a leaf: contiguous blocks of 2^(L - first)
coefficients, each transformed by an unrolled kernel whose twiddles are its
block's (`Leaf`). Every other stage runs its layers in sub-passes of at most
a codelet's radix (`Rows`): a call takes 2^r rows at a fixed stride and
`width` contiguous elements of each (vectors across columns, or across the
tiles' low bits on one polynomial), and one twiddle per (layer, block) its
rows meet, read from the sub-pass's table (`Tables`). A stage's tiles are
independent: they are the unit of threads, and a tile's rows are chosen to
stay in the L2 cache while its sub-passes run, so every element crosses
memory once per stage.

Everything here is data: the planner (`plan_transform`) chooses stages from
the sizes alone; the codelets are built and verified elsewhere (`codelets`),
the C driver is rendered from this data, and `run_plan` executes a plan with
exact modular butterflies, the oracle of the planner's tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

# bytes a tile's rows may take: half an L2 cache of the CPUs of the figures (512 KiB on AMD Zen 3, 1-2 MiB on
# Zen 4/5 and Intel servers), so that a tile's sub-passes read it from L2 after the first
TILE_BYTES = 256 * 1024
# the widest leaf: the unrolled kernels of today at n = 2048 fit the decoded-µop cache once rolled, and their
# 2048 coefficients (and twiddles) fit L1
LEAF_MAX = 2048
CACHE_LINE = 64


@dataclass(frozen=True)
class Rows:
    """A codelet of `radix_bits` layers on 2^radix_bits rows `stride` elements apart, `width` contiguous
    elements of each: forward, layer t (0-based inside the codelet) pairs rows k and k + 2^(r-1-t) of block
    k >> (r - t), twiddle number 2^t - 1 + block of its table row."""

    radix_bits: int
    stride: int  # elements between its rows
    width: int  # elements of each row it takes

    @property
    def layers(self) -> int:
        return self.radix_bits

    @property
    def twiddles(self) -> int:
        """Entries of the twiddle table one call reads: 2^r - 1."""
        return (1 << self.radix_bits) - 1

    @property
    def footprint(self) -> int:
        """Elements from its first to one past its last."""
        return ((1 << self.radix_bits) - 1) * self.stride + self.width


@dataclass(frozen=True)
class Leaf:
    """A codelet doing the last `layers` layers of one contiguous block of 2^layers coefficients."""

    layers: int

    @property
    def size(self) -> int:
        return 1 << self.layers


@dataclass(frozen=True)
class Block:
    """A codelet on `size` contiguous elements of each of its arrays (element-wise: base multiplication)."""

    size: int
    layers = 0


@dataclass(frozen=True)
class Permute:
    """Bit reversal of the row order of 2^bits rows of `row` elements: row i and row brv(i) exchanged in place,
    or (`out_of_place`) row i of the source written to row brv(i). With i = (hi, mid, lo), lo and hi of
    `low_bits` bits, tile `mid` moves the rows of its middle bits (and of brv(mid)): 2^low_bits runs of
    2^low_bits contiguous rows each side, which stay in the L1 cache while it runs (no data-dependent address:
    the exchange is a fixed permutation)."""

    bits: int
    low_bits: int
    row: int
    out_of_place: bool = False
    layers = 0

    @property
    def tiles(self) -> int:
        return 1 << (self.bits - 2 * self.low_bits)

    def target(self, i: int) -> int:
        return int(format(i, f"0{self.bits}b")[::-1], 2) if self.bits else 0


@dataclass(frozen=True)
class SubPass:
    """Layers [first, first + codelet.radix_bits) of a `Rows` stage, or the whole of a leaf stage.

    Call k of tile t (`calls` per tile) starts at element `call_offset(t, k)` and reads the twiddles of
    table row `twiddle_row(t, k)` (`codelet.twiddles` entries a row)."""

    first: int
    codelet: Rows | Leaf | Block | Permute
    calls: int
    # call k: (block at `first` inside the tile, offset between the tile's rows) = divmod(k, spread)
    spread: int
    block_elements: int  # elements from one of the tile's blocks at `first` to the next
    offset_elements: int  # elements from one call to the next of a block
    tile_blocks: int  # blocks at `first` in one tile

    @property
    def layers(self) -> range:
        return range(self.first, self.first + self.codelet.layers)


@dataclass(frozen=True)
class Fill:
    """Where a tile's rows come from before its sub-passes run (the rows it then transforms in place): argument
    `array` of the transform at the same element offsets, or, `from_block_zero`, the same array's rows of block
    0 at the stage's first layer (a coset extension: every block starts as a copy of the coefficients)."""

    array: int = 0
    from_block_zero: bool = False


@dataclass(frozen=True)
class Stage:
    """Layers [first, last) on `tiles` tiles: tile t = (block at `first`, low group) = divmod(t + tile_base,
    low_groups). A tile holds `extent` = (rows, elements between them, elements of each): what `fill` copies
    in before its sub-passes, where given."""

    first: int
    last: int
    tiles: int
    low_groups: int
    block_elements: int  # elements from the first row of one block at `first` to the next
    low_elements: int  # elements from one low group to the next
    subpasses: tuple[SubPass, ...]
    extent: tuple[int, int, int] = (1, 0, 0)
    tile_base: int = 0  # the number of the stage's first tile among its layers' (a stage split by blocks)
    fill: Fill | None = None

    def tile_offset(self, tile: int) -> int:
        block, low = divmod(tile + self.tile_base, self.low_groups)
        return block * self.block_elements + low * self.low_elements

    def fill_offset(self, tile: int) -> int:
        """Where the fill reads the tile's first row from."""
        at = self.tile_offset(tile)
        if self.fill is not None and self.fill.from_block_zero:
            at -= (tile + self.tile_base) // self.low_groups * self.block_elements
        return at

    def call_offset(self, sub: SubPass, tile: int, k: int) -> int:
        block, offset = divmod(k, sub.spread)
        return self.tile_offset(tile) + block * sub.block_elements + offset * sub.offset_elements

    def twiddle_row(self, sub: SubPass, tile: int, k: int) -> int:
        """The block at `sub.first` of call k: which row of the sub-pass's table it reads."""
        return (tile + self.tile_base) // self.low_groups * sub.tile_blocks + k // sub.spread

    @property
    def blocks(self) -> int:
        """Blocks at `first` whose tiles the stage's twiddle rows must reach (from block 0)."""
        return (self.tiles + self.tile_base) // self.low_groups

    def split(self, blocks: int) -> tuple[Stage, Stage]:
        """The stage as two: the tiles of blocks 1 .. blocks - 1, filled from block 0, then block 0's (in place):
        the second must not run before the first has read block 0."""
        later = replace(self, tiles=(blocks - 1) * self.low_groups, tile_base=self.low_groups,
                        fill=Fill(0, True))
        return later, replace(self, tiles=self.low_groups)


@dataclass(frozen=True)
class Plan:
    """The stages of a forward transform of `n` rows of `columns` elements (the inverse runs them backwards,
    each sub-pass's layers too)."""

    n: int
    columns: int
    lanes: int
    stages: tuple[Stage, ...]

    @property
    def layers(self) -> int:
        return self.n.bit_length() - 1

    @cached_property
    def subpasses(self) -> tuple[tuple[Stage, SubPass], ...]:
        return tuple((st, sub) for st in self.stages for sub in st.subpasses)


def _group(lanes: int, columns: int, elem_bytes: int) -> int:
    """Adjacent rows a call takes together: whole vectors, and a cache line of each row where one is shorter
    (a power of two)."""
    want = max(1, lanes // columns, CACHE_LINE // (columns * elem_bytes))
    return 1 << (want.bit_length() - 1)


def _rows_stage(n_bits: int, columns: int, lanes: int, first: int, last: int, radix: int, elem_bytes: int) -> Stage:
    """A stage of `Rows` codelets on layers [first, last): tiles of 2^(last - first) rows, the low bits grouped
    so that a call's rows are whole vectors (and at least a cache line where the rows allow)."""
    low_rows = 1 << (n_bits - last)  # rows of distinct low bits inside a block at `first`
    group = min(_group(lanes, columns, elem_bytes), low_rows)
    width = group * columns
    if width % lanes:
        raise ValueError(f"a call of {width} elements is no whole number of {lanes}-lane vectors")
    subs = []
    layer = first
    while layer < last:
        r = min(radix, last - layer)
        # rows of the codelet: 2^(L - layer - 1) apart at its first layer, so 2^(L - layer - r) between rows
        stride = columns << (n_bits - layer - r)
        spread = (1 << (last - layer - r))  # offsets between the tile's rows at the sub-pass's distance
        subs.append(SubPass(layer, Rows(r, stride, width), (1 << (layer - first)) * spread, spread,
                            columns << (n_bits - layer), columns << (n_bits - last), 1 << (layer - first)))
        layer += r
    return Stage(first, last, (1 << first) * (low_rows // group), low_rows // group, columns << (n_bits - first),
                 width, tuple(subs), (1 << (last - first), columns << (n_bits - last), width))


def block_stage(n: int, size: int) -> Stage:
    """An element-wise stage: n / size tiles, each one call on `size` contiguous elements."""
    return Stage(0, 0, n // size, 1, size, 0, (SubPass(0, Block(size), 1, 1, size, 0, 1),), (1, 0, size))


def _leaf_stage(n_bits: int, first: int) -> Stage:
    size = 1 << (n_bits - first)
    return Stage(first, n_bits, 1 << first, 1, size, 0, (SubPass(first, Leaf(n_bits - first), 1, 1, size, 0, 1),),
                 (1, 0, size))


# the bytes of the rows a permutation's tile moves on each side: both sides together in half an L1 cache
PERMUTE_GROUP_BYTES = 8 * 1024


def permute_stage(n: int, columns: int, elem_bytes: int, out_of_place: bool = False) -> Stage:
    """The bit reversal of n rows of `columns` elements as a stage of its own (`Permute`)."""
    bits = n.bit_length() - 1
    row = columns * elem_bytes
    low = 0
    while 2 * (low + 1) <= bits and row << (2 * (low + 1)) <= PERMUTE_GROUP_BYTES:
        low += 1
    codelet = Permute(bits, low, columns, out_of_place)
    return Stage(0, 0, codelet.tiles, 1, 0, 0, (SubPass(0, codelet, 1, 1, 0, 0, 1),), (1, 0, 0))


def plan_transform(n: int, columns: int, lanes: int, elem_bytes: int, radix: int,
                   leaf_max: int = LEAF_MAX, tile_bytes: int = TILE_BYTES, first: int = 0) -> Plan:
    """The stages of a transform of n rows of `columns` elements on `lanes`-lane vectors of `elem_bytes`-byte
    elements, codelets of at most `radix` layers: on one polynomial, a leaf of at most `leaf_max`
    coefficients and before it stages of tiles of at most `tile_bytes` (their rows at least a vector wide);
    on columns (at least a vector of them), stages of such tiles only. Layers from `first` (the ones before
    it left to the caller: a coset extension's copies)."""
    if n < 2 or n & (n - 1):
        raise ValueError(f"n must be a power of two, got {n}")
    n_bits = n.bit_length() - 1
    if columns > 1 and columns % lanes:
        raise ValueError(f"{columns} columns are no whole number of {lanes}-lane vectors")
    stages = []
    if columns == 1:
        leaf_bits = min(n_bits - first, leaf_max.bit_length() - 1)
        last = n_bits - leaf_bits
    else:
        last = n_bits
    # layers [first, last) in stages whose tiles fit `tile_bytes`, from the top
    row_bytes = _group(lanes, columns, elem_bytes) * columns * elem_bytes
    while first < last:
        span = max(1, min(last - first, (tile_bytes // row_bytes).bit_length() - 1))
        stages.append(_rows_stage(n_bits, columns, lanes, first, first + span, radix, elem_bytes))
        first += span
    if columns == 1:
        stages.append(_leaf_stage(n_bits, last))
    return Plan(n, columns, lanes, tuple(stages))


def call_rows(plan: Plan, stage: Stage, sub: SubPass, tile: int, k: int):
    """The rows (element offsets of their first elements) call k of `tile` takes, and how many elements of each."""
    start = stage.call_offset(sub, tile, k)
    c = sub.codelet
    if isinstance(c, Leaf):
        return [start + i * plan.columns for i in range(c.size)], plan.columns
    return [start + j * c.stride for j in range(1 << c.radix_bits)], c.width


def run_stage(plan: Plan, stage: Stage, subs, arrays: list, q: int, twiddle, inverse: bool = False) -> None:
    """`subs` (the stage's sub-passes, in the order they run) on `arrays` (numpy arrays of integers in [0, q),
    the transform's arguments; the codelets' rows in the first) with exact butterflies: forward x + w*y,
    x - w*y with w = twiddle(layer, block); inverse (x + y, (x - y)*w) with the same twiddle(layer, block),
    which the caller gives inverted; a fill copies each tile's rows in first. The oracle of the planner's tests."""
    a = arrays[0]
    for sub in subs:
        if isinstance(sub.codelet, Permute):
            _permute(sub.codelet, a, arrays[1] if sub.codelet.out_of_place else a)
            return
    for tile in range(stage.tiles):
        if stage.fill is not None:
            rows, stride, width = stage.extent
            source = arrays[stage.fill.array]
            for j in range(rows):
                at, src = stage.tile_offset(tile) + j * stride, stage.fill_offset(tile) + j * stride
                a[at:at + width] = source[src:src + width]
        for sub in subs:
            first, layers = sub.first, list(sub.layers)
            for k in range(sub.calls):
                rows, width = call_rows(plan, stage, sub, tile, k)
                block0 = stage.twiddle_row(sub, tile, k)
                for layer in (layers[::-1] if inverse else layers):
                    _layer(a, rows, width, layer - first, twiddle, layer, block0, q, inverse)


def _layer(a, rows, width: int, t: int, twiddle, layer: int, block0: int, q: int, inverse: bool) -> None:
    half = len(rows) >> (t + 1)
    for j in range(1 << t):  # the blocks of this layer among the call's rows
        w = twiddle(layer, (block0 << t) + j)
        for i in range(j * 2 * half, j * 2 * half + half):
            x = a[rows[i]:rows[i] + width]
            y = a[rows[i + half]:rows[i + half] + width]
            if inverse:
                x, y = (x + y) % q, (x - y) * w % q
            else:
                x, y = (x + y * w) % q, (x - y * w) % q
            a[rows[i]:rows[i] + width] = x
            a[rows[i + half]:rows[i + half] + width] = y


def _permute(p: Permute, a, source) -> None:
    rows = a.reshape(-1, p.row)[:1 << p.bits]
    src = source.reshape(-1, p.row)[:1 << p.bits].copy()
    rows[[p.target(i) for i in range(1 << p.bits)]] = src


def run_plan(plan: Plan, a, q: int, twiddle, inverse: bool = False):
    """`a` transformed by every stage of `plan` (`run_stage`; the inverse runs them backwards)."""
    a = a.copy()
    for stage in (plan.stages[::-1] if inverse else plan.stages):
        run_stage(plan, stage, stage.subpasses[::-1] if inverse else stage.subpasses, [a], q, twiddle, inverse)
    return a
