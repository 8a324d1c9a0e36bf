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
the C driver is rendered from this data, and `plan_oracle` executes a plan
with exact modular butterflies, the oracle of the planner's tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

# bytes a tile's rows may take: half an L2 cache of the CPUs of the figures (512 KiB on AMD Zen 3, 1-2 MiB on
# Zen 4/5 and Intel servers), so that a tile's sub-passes read it from L2 after the first
TILE_BYTES = 256 * 1024
# the bytes of each row of a tile (adjacent rows grouped): what one memory access of a strided stage moves,
# at least a few cache lines (the next line's prefetch pays), and what a call takes of each row where the rows
# lie apart in place (its fixed costs, the C loop's and the twiddles' broadcasts, spread over several vectors:
# he at n = 2^16 on Zen 4, AVX-512: 424k -> 164k ticks for the Rows stage against a cache line)
CHUNK_BYTES = 256
CALL_BYTES = 128
# arrays above this (twice the L2 cache of the Zen 4 of the figures) have their strided stages copy tiles to a
# buffer: a tile in place, its rows a power of two apart, holds more lines per cache set than the L2 cache's
# ways. Measured (BabyBear, AVX2, same-process medians): 2^20 x 8 columns forward 109 -> 69 M ticks, 2^16 x
# 16 and 2^18 x 8 extensions 12-18% faster; at 2 MiB (2^16 x 8) the copies cost 20% more than the L3 cache's
# conflict misses
BUFFER_ABOVE = 2 << 20
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
    repeat: int = 1  # blocks one call does, each 2^r rows further and its twiddles the next table row

    @property
    def layers(self) -> int:
        return self.radix_bits

    @property
    def row_twiddles(self) -> int:
        """Entries of one block's table row: 2^r - 1."""
        return (1 << self.radix_bits) - 1

    @property
    def twiddles(self) -> int:
        """Entries of the twiddle table one call reads: its blocks' rows."""
        return self.repeat * self.row_twiddles

    @property
    def block(self) -> int:
        """Elements from one of its blocks to the next."""
        return self.stride << self.radix_bits

    @property
    def footprint(self) -> int:
        """Elements from its first to one past its last."""
        return (self.repeat - 1) * self.block + ((1 << self.radix_bits) - 1) * self.stride + self.width


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
class Spread:
    """Row m of a matrix of n rows (`width` elements each, a source of their own) times each of its table
    row's 2^bits factors into rows m 2^bits .. m 2^bits + 2^bits - 1 (`pitch` elements apart): the first
    `bits` Gentleman–Sande layers of a coset extension's transform on bit-reversed coefficients with zero
    rows between, with the coset's twist and 1/n (`planned.Expansion`)."""

    bits: int
    pitch: int
    width: int
    source_origin: int  # call k reads its row (argument `src`, after the twiddles) from source_origin + m * width
    layers = 0

    @property
    def twiddles(self) -> int:
        return 1 << self.bits

    @property
    def footprint(self) -> int:
        return ((1 << self.bits) - 1) * self.pitch + self.width


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
    codelet: Rows | Leaf | Block | Permute | Spread
    calls: int
    # call k: (block at `first` inside the tile, offset between the tile's rows) = divmod(k, spread)
    spread: int
    block_elements: int  # elements from one of the tile's blocks at `first` to the next
    offset_elements: int  # elements from one call to the next of a block
    tile_blocks: int  # blocks at `first` in one tile

    @property
    def layers(self) -> range:
        return range(self.first, self.first + self.codelet.layers)

    @property
    def repeat(self) -> int:
        """Blocks at `first` one call does (each its own twiddle row)."""
        return getattr(self.codelet, "repeat", 1)


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
    buffered: bool = False  # its sub-passes run on a copy of each tile, its rows adjacent (`extent`'s)
    origin: int = 0  # where its rows start in the array (a fill from another array reads from its start)

    def tile_offset(self, tile: int) -> int:
        block, low = divmod(tile + self.tile_base, self.low_groups)
        return self.origin + block * self.block_elements + low * self.low_elements

    def fill_offset(self, tile: int) -> int:
        """Where the fill reads the tile's first row from."""
        at = self.tile_offset(tile)
        if self.fill is not None and self.fill.from_block_zero:
            at -= (tile + self.tile_base) // self.low_groups * self.block_elements
        return at - self.origin if self.fill is not None and self.fill.array else at

    def local_offset(self, sub: SubPass, k: int) -> int:
        """Where call k starts inside its tile (its rows adjacent)."""
        block, offset = divmod(k, sub.spread)
        return block * sub.repeat * sub.block_elements + offset * sub.offset_elements

    def call_offset(self, sub: SubPass, tile: int, k: int) -> int:
        """Where call k of `tile` starts: in the array, or in the tile's buffer."""
        return (0 if self.buffered else self.tile_offset(tile)) + self.local_offset(sub, k)

    def twiddle_row(self, sub: SubPass, tile: int, k: int) -> int:
        """The block at `sub.first` of call k: which row of the sub-pass's table it reads."""
        return (tile + self.tile_base) // self.low_groups * sub.tile_blocks + k // sub.spread * sub.repeat

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


def _rows_stage(n_bits: int, columns: int, lanes: int, first: int, last: int, radix: int, elem_bytes: int,
                buffered: bool) -> Stage:
    """A stage of `Rows` codelets on layers [first, last): tiles of 2^(last - first) rows of `chunk` elements
    each (adjacent rows of distinct low bits grouped: whole vectors, CHUNK_BYTES where the rows allow), the
    rows 2^(L - last) apart. `buffered`: a tile's rows are copied to a buffer, adjacent, while its layers run:
    a tile of rows megabytes apart, their addresses a power of two apart, of which the caches' sets hold a
    few, then works in the L2 cache. Where a tile's rows are adjacent (in the buffer, or the last layers'), a
    call takes up to CALL_BYTES of each row, several blocks where a block's rows are narrower."""
    low_rows = 1 << (n_bits - last)  # rows of distinct low bits inside a block at `first`
    row_bytes = columns * elem_bytes
    vector_rows = _group(lanes, columns, elem_bytes)
    chunk_rows = min(_power(max(vector_rows, CHUNK_BYTES // row_bytes)), low_rows)
    chunk = chunk_rows * columns
    apart = columns << (n_bits - last)
    buffered = buffered and apart != chunk
    local = chunk if buffered else apart  # between the tile's rows where its codelets run
    call_rows = _power(max(vector_rows, CALL_BYTES // row_bytes))
    subs = []
    layer = first
    count = -(-(last - first) // radix)  # sub-passes of layers as even as they come
    for k in range(count):
        r = (last - first) // count + (k < (last - first) % count)
        stride = local << (last - layer - r)  # between the codelet's rows
        if local == chunk:  # a block's rows at the codelet's distance are contiguous: calls along them
            width = columns * min(stride // columns, call_rows)
            spread, offset = stride // width, width
        else:
            width, spread, offset = chunk, 1 << (last - layer - r), local
        if width % lanes:
            raise ValueError(f"a call of {width} elements is no whole number of {lanes}-lane vectors")
        # where a block's rows are narrower than a call, a call does several blocks
        repeat = min(call_rows * columns // width, 1 << (layer - first)) if spread == 1 and local == chunk else 1
        subs.append(SubPass(layer, Rows(r, stride, width, repeat), (1 << (layer - first)) * spread // repeat,
                            spread, local << (last - layer), offset, 1 << (layer - first)))
        layer += r
    return Stage(first, last, (1 << first) * (low_rows // chunk_rows), low_rows // chunk_rows,
                 columns << (n_bits - first), chunk, tuple(subs), (1 << (last - first), apart, chunk), buffered=buffered)


def _power(x: int) -> int:
    """The largest power of two at most x (at least 1)."""
    return 1 << (max(1, x).bit_length() - 1)


def block_stage(n: int, size: int) -> Stage:
    """An element-wise stage: n / size tiles, each one call on `size` contiguous elements."""
    return Stage(0, 0, n // size, 1, size, 0, (SubPass(0, Block(size), 1, 1, size, 0, 1),), (1, 0, size))


def _leaf_stage(n_bits: int, first: int) -> Stage:
    size = 1 << (n_bits - first)
    return Stage(first, n_bits, 1 << first, 1, size, 0, (SubPass(first, Leaf(n_bits - first), 1, 1, size, 0, 1),),
                 (1, 0, size))


def spread_stage(n: int, bits: int, columns: int, source_origin: int) -> Stage:
    """A `Spread` of n rows of `columns` elements from `source_origin` to rows 2^bits apart from the start, as
    one tile: its calls in row order, as only they may run where the source lies in the rows written (row
    m is read before any row of m + 1 is written, and the rows of m end below row m + 1 of the source where
    the source is the last n rows: m 2^bits + 2^bits - 1 < n (2^bits - 1) + m + 1)."""
    step = columns << bits
    return Stage(0, 0, 1, 1, n * step, 0, (SubPass(0, Spread(bits, columns, columns, source_origin), n, 1, step, 0,
                                                   n),), (n << bits, columns, columns))


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
                   leaf_max: int = LEAF_MAX, tile_bytes: int | None = None, first: int = 0,
                   buffer_above: int | None = None) -> Plan:
    """The stages of a transform of n rows of `columns` elements on `lanes`-lane vectors of `elem_bytes`-byte
    elements, codelets of at most `radix` layers: on one polynomial, a leaf of at most `leaf_max`
    coefficients and before it stages of tiles of at most `tile_bytes` (their rows at least a vector wide);
    on columns (at least a vector of them), stages of such tiles only. Layers from `first` (the ones before
    it left to the caller: a coset extension's copies); stages of arrays above `buffer_above` bytes copy
    their tiles to a buffer where the rows lie apart."""
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
    # layers [first, last) in as few stages as tiles of at most `tile_bytes` allow: buffered, the spans
    # balanced; in place, the first as long as they come (its tile's rows then closest, in fewer of the
    # caches' sets: measured 1.8 times faster at 2^16 rows of 32 bytes than two stages of eight layers)
    buffered = n * columns * elem_bytes > (BUFFER_ABOVE if buffer_above is None else buffer_above)
    tile_bytes = TILE_BYTES if tile_bytes is None else tile_bytes
    chunk_bytes = _group(lanes, columns, elem_bytes) * columns * elem_bytes
    most = max(1, (tile_bytes // max(chunk_bytes, CHUNK_BYTES)).bit_length() - 1)
    total = last - first
    count = -(-total // most)
    for k in range(count):
        span = total // count + (k < total % count) if buffered else min(most, last - first)
        stages.append(_rows_stage(n_bits, columns, lanes, first, first + span, radix, elem_bytes, buffered))
        first += span
    if columns == 1:
        stages.append(_leaf_stage(n_bits, last))
    return Plan(n, columns, lanes, tuple(stages))
