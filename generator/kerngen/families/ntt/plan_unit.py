"""The C unit of a planned transform (NAME_plan.c): what templates/ntt_plan.j2
is rendered from.

Per ISA and function it holds the driver (each stage a loop over its tiles,
each tile its rows copied in where the stage fills them, then its
sub-passes' codelet calls, `plan`; a permutation's tiles exchange rows), the
stage API that lets a caller's threads run a stage's tiles in ranges, and
the builder of the twiddle tables, run once at the first call (or by the
init function): every entry's value computed from its transform's maths in
closed form (`planned.twiddle`) and stored as the multiplication strategy
stores it, so the tables the tests recompute in Python
(`planned.table_values`) are the ones the C code makes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.bundle import Bundle, CPrototype, Function
from .codelets import twiddle_args
from .maths import RING_CONSTANT, NttMath
from .plan import Leaf, Permute, Rows, Spread, Stage
from .planned import Driver, Expansion


# how many rows ahead a buffered stage's copy asks the memory for its rows: enough misses in flight to cover
# the latency of rows each in a page of its own
PREFETCH_ROWS = 8


@dataclass(frozen=True)
class SubPassUnit:
    codelet: str  # its symbol ("" for a permutation)
    calls: int
    spread: int
    repeat: int  # blocks (table rows) per call
    block_elements: int  # from one call's blocks to the next's
    offset_elements: int
    tile_blocks: int
    table: int  # offset of its table in the direction's tables, in entries
    entries: int  # per table row
    rows: int
    first: int  # its first layer
    radix_bits: int  # Rows: layers it does; 0 for a leaf (its entries listed in the table `leaf` names)
    scale_layer: int  # the layer whose twiddles carry `scale`, or -1
    scale: int
    math: int  # which of the unit's maths its twiddles come from
    inverse: int  # 1: its twiddles inverted
    arrays: tuple[str, ...]  # the transform's argument each array argument of the codelet is a part of
    permute: dict | None = None  # a permutation's geometry (bits, low, mid, row, out_of_place)
    leaf: str = ""  # a leaf's: the name of its entries' (layer, block) table
    expansion: dict | None = None  # a Spread's factors: bits, the rows' index bits, 1/n, the shift's powers' maths
    source: dict | None = None  # a Spread's rows: where they start (origin) and their elements (pitch)
    stride: int = 0  # Rows: elements between its rows (it takes `width` of each); 0: it takes its whole span
    width: int = 0


@dataclass(frozen=True)
class StageUnit:
    tiles: int
    tile_base: int
    origin: int  # elements before its rows in the array
    low_groups: int
    block_elements: int
    low_elements: int
    subpasses: tuple[SubPassUnit, ...]
    fill: dict | None  # where the tiles' rows come from: source, from_block_zero
    extent: dict  # a tile's rows: how many, elements apart, elements of each
    buffered: bool  # its sub-passes run on a copy of each tile, its rows adjacent


@dataclass(frozen=True)
class DirectionUnit:
    name: str  # the function's symbol
    direction: str  # "forward", "inverse", "basemul" or "lde"
    c_args: str  # its parameters, as C declares them
    arg_names: tuple[str, ...]
    stages: tuple[StageUnit, ...]
    entries: int  # the direction's table entries (each of w, and wp where paired)
    codelets: tuple[str, ...]  # the codelets' prototypes
    table: int  # which of its ISA's tables it reads (-1: none)
    permutes: bool  # whether a stage is a permutation
    buffered: bool  # whether a stage copies its tiles to a buffer


@dataclass(frozen=True)
class IsaUnit:
    isa: str
    ctype: str  # the data's element type
    wtype: str  # the twiddles' element type
    form: str  # how a twiddle s is stored: "montgomery" (s*R mod q, centred), "shoup" (s, floor(s*2^W/q)), "plain"
    companion_bits: int  # W of Shoup's w'
    directions: tuple[DirectionUnit, ...]
    leaves: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]  # per leaf codelet: its row's (layer, block)

    @property
    def tabled(self) -> tuple[DirectionUnit, ...]:
        """The directions that read twiddle tables, in the order of their `table` numbers."""
        return tuple(d for d in self.directions if d.table >= 0)


def _math(math: NttMath) -> dict:
    """A transform's maths as the table builder takes it."""
    return {"psi": math.psi, "root_bits": math.root_bits, "coset": math.coset, "n": math.n, "layers": math.layers,
            "negacyclic": int(RING_CONSTANT[math.ring] == -1)}


def _fill(stage: Stage, names: tuple[str, ...]) -> dict | None:
    if stage.fill is None:
        return None
    return {"source": names[stage.fill.array], "from_block_zero": stage.fill.from_block_zero,
            "origin": stage.origin if stage.fill.array else 0}


def _index(maths: list[dict], math: dict) -> int:
    if math not in maths:
        maths.append(math)
    return maths.index(math)


def _spread(e: Expansion, maths: list[dict]) -> dict:
    """What the table builder computes a Spread's factors from (`planned.Expansion.factor`)."""
    n_bits = e.math.layers - e.bits
    shift = {"psi": e.shift, "root_bits": n_bits, "coset": 1, "n": 1, "layers": 0, "negacyclic": 0}
    return {"bits": e.bits, "row_bits": n_bits, "layers": e.math.layers, "n_inverse": pow(1 << n_bits, -1, e.math.q),
            "math": _index(maths, _math(e.math)), "shift": _index(maths, shift)}


def _permute(c: Permute) -> dict:
    return {"bits": c.bits, "low": c.low_bits, "mid": c.bits - 2 * c.low_bits, "row": c.row,
            "out_of_place": c.out_of_place}


def _stages(driver: Driver, names: tuple[str, ...], maths: list[dict], leaves: dict):
    """The driver's calls grouped by stage, in the order they run, their tables laid end to end; the maths
    and the leaves' entries they read added to `maths` and `leaves`."""
    stages: list[tuple[Stage, list]] = []
    offset = 0
    for call in driver.calls:
        if not stages or stages[-1][0] is not call.stage:
            stages.append((call.stage, []))
        c = call.sub.codelet
        math = -1 if call.math is None else _index(maths, _math(call.math))
        leaf = ""
        if isinstance(c, Leaf):
            leaf = f"{call.function.symbol}_entries"
            leaves[leaf] = tuple((layer - call.sub.first, block) for layer, block in call.entries)
        stages[-1][1].append(SubPassUnit(
            "" if call.function is None else call.function.symbol, call.sub.calls, call.sub.spread, call.sub.repeat,
            call.sub.block_elements * call.sub.repeat, call.sub.offset_elements, call.sub.tile_blocks, offset, len(call.entries),
            call.rows, call.sub.first, c.radix_bits if isinstance(c, Rows) else 0,
            -1 if call.scale_layer is None else call.scale_layer, call.scale, math, int(call.inverse),
            tuple(names[k] for k in call.arrays), _permute(c) if isinstance(c, Permute) else None, leaf,
            _spread(call.expansion, maths) if call.expansion is not None else None,
            {"origin": c.source_origin, "pitch": c.width} if isinstance(c, Spread) else None,
            c.stride if isinstance(c, Rows) else 0, c.width if isinstance(c, Rows) else 0))
        offset += call.rows * len(call.entries)
    units = tuple(StageUnit(st.tiles, st.tile_base, st.origin, st.low_groups, st.block_elements, st.low_elements, tuple(subs),
                            _fill(st, names), dict(zip(("rows", "apart", "width"), st.extent)), st.buffered)
                  for st, subs in stages)
    return units, offset


def _prototype(fn: Function) -> str:
    return f"void {fn.symbol}({', '.join(a.c_declaration for a in fn.kernel.args)});"


def context(bundle: Bundle) -> dict | None:
    """The template's variables, or None for a bundle without planned transforms."""
    drivers = [f for f in bundle.functions if f.driver is not None]
    if not drivers:
        return None
    p = bundle.params
    isas, maths = [], []
    for isa in dict.fromkeys(f.isa for f in drivers):
        directions, leaves = [], {}
        for fn in (f for f in drivers if f.isa == isa):
            names = tuple(a.name for a in fn.kernel.args)
            stages, entries = _stages(fn.driver, names, maths, leaves)
            codelets = tuple(dict.fromkeys(_prototype(c.function) for c in fn.driver.calls if c.function))
            table = sum(1 for d in directions if d.table >= 0) if entries else -1
            directions.append(DirectionUnit(fn.symbol, fn.driver.direction,
                                            ", ".join(a.c_declaration for a in fn.kernel.args), names, stages, entries,
                                            codelets, table, fn.driver.permutes,
                                            any(st.buffered for st in stages)))
        ar = next(f.driver.ar for f in drivers if f.isa == isa)
        ctype = f"{'' if ar.mul.signed else 'u'}int{p.width}_t"
        isas.append(IsaUnit(isa, ctype, ctype, _form(ar), twiddle_args(ar).companion_bits or 0, tuple(directions),
                            tuple(leaves.items())))
    subpasses = [s for i in isas for d in i.directions for st in d.stages for s in st.subpasses]
    spreads = any(s.expansion for s in subpasses)
    return {
        "prefix": p.prefix, "q": p.q, "width": p.width, "maths": maths,
        "max_layers": max([m["layers"] for m in maths] or [1]),
        "r_mod_q": (1 << p.width) % p.q, "isas": isas, "prefetch_rows": PREFETCH_ROWS,
        # the helpers a unit defines only where it calls them (compilers warn of unused static functions)
        "needs_power": spreads,
        "needs_reverse": spreads or any(d.permutes for i in isas for d in i.directions),
    }


def prototypes(bundle: Bundle) -> tuple[CPrototype, ...]:
    """What the header declares of the C unit beyond the transforms: per ISA the tables' builder, per
    transform its stages' tile counts and the stage API."""
    out = []
    for fn in (f for f in bundle.functions if f.driver is not None):
        if fn.driver.direction == "forward":
            out.append(CPrototype(f"int {bundle.params.prefix}_ntt_tables_{fn.isa}(void);",
                                  f"builds the {fn.isa} transforms' twiddle tables (the first call of a transform "
                                  "does otherwise): 0, or -1 where they cannot be allocated"))
        args = ", ".join(a.c_declaration for a in fn.kernel.args)
        if any(c.entries for c in fn.driver.calls):
            out.append(CPrototype(f"size_t {fn.symbol}_table(int64_t *out);",
                                  f"{fn.symbol}: its twiddle table (w of every entry, then each w' where stored), "
                                  "built if it is not, copied into out unless NULL (each word as int64_t); the "
                                  "count of words, 0 where it cannot be built"))
        out.append(CPrototype(f"size_t {fn.symbol}_tiles(unsigned stage);",
                              f"{fn.symbol}: the tiles of stage `stage` (0 past the last stage)"))
        out.append(CPrototype(f"void {fn.symbol}_stage({args}, unsigned stage, size_t first, size_t count);",
                              f"{fn.symbol}: tiles first .. first + count - 1 of stage `stage`; the stages in "
                              "order, each wholly before the next, are the transform (its tiles may run on "
                              "threads of their own)"))
    return tuple(out)


def _form(ar) -> str:
    """How a twiddle s is stored: "montgomery" (s*R mod q, centred), "shoup" (s, then w'), "plain"."""
    return "montgomery" if ar.mul.signed else "shoup" if twiddle_args(ar).paired else "plain"


def plan_manifest(fn: Function) -> dict:
    """A driver's plan as the manifest records it: what the C unit runs, enough to run it again without it
    (`plan_model`, the machine model's) and to rebuild its twiddle tables by the C unit's rule: its stages
    (tiles, fills, buffers, sub-passes: codelet, call geometry, table rows and how their entries are made),
    the maths its twiddles come from (indices of `maths`), the leaves' entries (by `leaf` name), the stored
    form (R = 2^width for Montgomery's)."""
    names = tuple(a.name for a in fn.kernel.args)
    maths, leaves = [], {}
    stages, entries = _stages(fn.driver, names, maths, leaves)
    return {
        "direction": fn.driver.direction,
        "stages": [dataclasses.asdict(st) for st in stages],
        "entries": entries,
        "maths": maths,
        "leaves": {name: [list(e) for e in row] for name, row in leaves.items()},
        "twiddles": {"form": _form(fn.driver.ar), "companion_bits": twiddle_args(fn.driver.ar).companion_bits},
    }
