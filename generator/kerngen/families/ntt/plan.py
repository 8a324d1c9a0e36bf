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

from dataclasses import dataclass
from functools import cached_property

# bytes a tile's rows may take: half an L2 cache of the CPUs of the figures (512 KiB on AMD Zen 3, 1-2 MiB on
# Zen 4/5 and Intel servers), so that a tile's sub-passes read it from L2 after the first
TILE_BYTES = 256 * 1024
# the widest leaf: the unrolled kernels of today at n = 2048 fit the decoded-µop cache once rolled, and their
# 2048 coefficients (and twiddles) fit L1
LEAF_MAX = 2048
CACHE_LINE = 64
# bytes of each row a Rows call takes at least: a call's fixed costs (the C loop's, the twiddles' broadcasts)
# spread over several vectors of each row
ROW_BYTES = 4 * CACHE_LINE


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
class SubPass:
    """Layers [first, first + codelet.radix_bits) of a `Rows` stage, or the whole of a leaf stage.

    Call k of tile t (`calls` per tile) starts at element `call_offset(t, k)` and reads the twiddles of
    table row `twiddle_row(t, k)` (`codelet.twiddles` entries a row)."""

    first: int
    codelet: Rows | Leaf | Block
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
class Stage:
    """Layers [first, last) on `tiles` tiles: tile t = (block at `first`, low group) = divmod(t, low_groups)."""

    first: int
    last: int
    tiles: int
    low_groups: int
    block_elements: int  # elements from the first row of one block at `first` to the next
    low_elements: int  # elements from one low group to the next
    subpasses: tuple[SubPass, ...]

    def tile_offset(self, tile: int) -> int:
        block, low = divmod(tile, self.low_groups)
        return block * self.block_elements + low * self.low_elements

    def call_offset(self, sub: SubPass, tile: int, k: int) -> int:
        block, offset = divmod(k, sub.spread)
        return self.tile_offset(tile) + block * sub.block_elements + offset * sub.offset_elements

    def twiddle_row(self, sub: SubPass, tile: int, k: int) -> int:
        """The block at `sub.first` of call k: which row of the sub-pass's table it reads."""
        return (tile // self.low_groups) * sub.tile_blocks + k // sub.spread


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


def _rows_stage(n_bits: int, columns: int, lanes: int, first: int, last: int, radix: int, elem_bytes: int) -> Stage:
    """A stage of `Rows` codelets on layers [first, last): tiles of 2^(last - first) rows, the low bits grouped
    so that a call's rows are whole vectors (and at least a cache line where the rows allow)."""
    low_rows = 1 << (n_bits - last)  # rows of distinct low bits inside a block at `first`
    group = max(1, lanes // columns, ROW_BYTES // (columns * elem_bytes))
    group = min(group, low_rows)
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
                 width, tuple(subs))


def block_stage(n: int, size: int) -> Stage:
    """An element-wise stage: n / size tiles, each one call on `size` contiguous elements."""
    return Stage(0, 0, n // size, 1, size, 0, (SubPass(0, Block(size), 1, 1, size, 0, 1),))


def _leaf_stage(n_bits: int, first: int) -> Stage:
    size = 1 << (n_bits - first)
    return Stage(first, n_bits, 1 << first, 1, size, 0, (SubPass(first, Leaf(n_bits - first), 1, 1, size, 0, 1),))


def plan_transform(n: int, columns: int, lanes: int, elem_bytes: int, radix: int,
                   leaf_max: int = LEAF_MAX, tile_bytes: int = TILE_BYTES) -> Plan:
    """The stages of a transform of n rows of `columns` elements on `lanes`-lane vectors of `elem_bytes`-byte
    elements, codelets of at most `radix` layers: on one polynomial, a leaf of at most `leaf_max`
    coefficients and before it stages of tiles of at most `tile_bytes` (their rows at least a vector wide);
    on columns (at least a vector of them), stages of such tiles only."""
    if n < 2 or n & (n - 1):
        raise ValueError(f"n must be a power of two, got {n}")
    n_bits = n.bit_length() - 1
    if columns > 1 and columns % lanes:
        raise ValueError(f"{columns} columns are no whole number of {lanes}-lane vectors")
    stages = []
    if columns == 1:
        leaf_bits = min(n_bits, leaf_max.bit_length() - 1)
        last = n_bits - leaf_bits
    else:
        last = n_bits
    # layers [0, last) in stages whose tiles fit `tile_bytes`, from the top
    first = 0
    while first < last:
        low_rows = max(1, lanes // columns, ROW_BYTES // (columns * elem_bytes))
        row_bytes = low_rows * columns * elem_bytes
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


def run_plan(plan: Plan, a, q: int, twiddle, inverse: bool = False):
    """`a` (a numpy array of n * columns integers in [0, q)) transformed by `plan` with exact butterflies:
    forward x + w*y, x - w*y with w = twiddle(layer, block); inverse (x + y, (x - y)*w) with the same
    twiddle(layer, block), which the caller gives inverted. The oracle of the planner's tests."""
    a = a.copy()
    subs = plan.subpasses[::-1] if inverse else plan.subpasses
    for stage, sub in subs:
        first, layers = sub.first, list(sub.layers)
        for tile in range(stage.tiles):
            for k in range(sub.calls):
                rows, width = call_rows(plan, stage, sub, tile, k)
                block0 = stage.twiddle_row(sub, tile, k)
                for layer in (layers[::-1] if inverse else layers):
                    t = layer - first
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
    return a
