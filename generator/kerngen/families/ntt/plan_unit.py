"""The C unit of a planned transform (NAME_plan.c): what templates/ntt_plan.j2
is rendered from.

Per ISA and direction it holds the driver (each stage a loop over its tiles,
each tile its sub-passes' codelet calls, `plan`), the stage API that lets a
caller's threads run a stage's tiles in ranges, and the builder of the
twiddle tables, run once at the first call (or by the init function): every
entry's value computed from the transform's maths in closed form
(`planned.twiddle`) and stored as the multiplication strategy stores it, so
the tables the tests recompute in Python (`planned.table_values`) are the
ones the C code makes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.bundle import Bundle, CPrototype, Function
from .codelets import twiddle_args
from .maths import RING_CONSTANT
from .plan import Leaf, Rows
from .planned import Call, Driver


@dataclass(frozen=True)
class SubPassUnit:
    codelet: str
    calls: int
    spread: int
    block_elements: int
    offset_elements: int
    tile_blocks: int
    table: int  # offset of its table in the direction's tables, in entries
    entries: int  # per table row
    rows: int
    first: int  # its first layer
    radix_bits: int  # Rows: layers it does; 0 for a leaf (its entries listed in `leaf_entries`)
    scale_layer: int  # the layer whose twiddles carry the inverse's scale, or -1
    arrays: tuple[str, ...]  # the transform's argument each array argument of the codelet is a part of
    stride: int  # Rows: elements between its rows (it takes `width` of each); 0: it takes its whole span
    width: int

@dataclass(frozen=True)
class StageUnit:
    tiles: int
    low_groups: int
    block_elements: int
    low_elements: int
    subpasses: tuple[SubPassUnit, ...]


@dataclass(frozen=True)
class DirectionUnit:
    name: str  # the transform's symbol
    direction: str  # "forward", "inverse", or "basemul"
    c_args: str  # its parameters, as C declares them
    arg_names: tuple[str, ...]
    stages: tuple[StageUnit, ...]
    entries: int  # the direction's table entries (each of w, and wp where paired)
    leaf_entries: tuple[tuple[int, int], ...]  # the leaf's (layer, block) of row 0, where it has a leaf
    codelets: tuple[str, ...]  # the codelets' prototypes
    table: int  # which of its ISA's tables it reads (-1: none)


@dataclass(frozen=True)
class IsaUnit:
    isa: str
    ctype: str  # the data's element type
    wtype: str  # the twiddles' element type
    form: str  # how a twiddle s is stored: "montgomery" (s*R mod q, centred), "shoup" (s, floor(s*2^W/q)), "plain"
    companion_bits: int  # W of Shoup's w'
    directions: tuple[DirectionUnit, ...]

    @property
    def tabled(self) -> tuple[DirectionUnit, ...]:
        """The directions that read twiddle tables, in the order of their `table` numbers."""
        return tuple(d for d in self.directions if d.table >= 0)


def _stages(driver: Driver, names: tuple[str, ...]) -> tuple[tuple[StageUnit, ...], int, tuple[tuple[int, int], ...]]:
    """The driver's calls grouped by stage, in the order they run, their tables laid end to end."""
    stages: list[tuple[object, list]] = []
    offset, leaf = 0, ()
    for call in driver.calls:
        if not stages or stages[-1][0] is not call.stage:
            stages.append((call.stage, []))
        c = call.sub.codelet
        stages[-1][1].append(SubPassUnit(call.function.symbol, call.sub.calls, call.sub.spread,
                                         call.sub.block_elements, call.sub.offset_elements, call.sub.tile_blocks,
                                         offset, len(call.entries), call.rows, call.sub.first,
                                         c.radix_bits if isinstance(c, Rows) else 0,
                                         -1 if call.scale_layer is None else call.scale_layer,
                                         tuple(names[k] for k in call.arrays),
                                         c.stride if isinstance(c, Rows) else 0, c.width if isinstance(c, Rows) else 0))
        if isinstance(c, Leaf):
            leaf = tuple((layer - call.sub.first, block) for layer, block in call.entries)
        offset += call.rows * len(call.entries)
    units = tuple(StageUnit(st.tiles, st.low_groups, st.block_elements, st.low_elements, tuple(subs))
                  for st, subs in stages)
    return units, offset, leaf


def _prototype(fn: Function) -> str:
    return f"void {fn.symbol}({', '.join(a.c_declaration for a in fn.kernel.args)});"


def context(bundle: Bundle) -> dict | None:
    """The template's variables, or None for a bundle without planned transforms."""
    drivers = [f for f in bundle.functions if f.driver is not None]
    if not drivers:
        return None
    p = bundle.params
    isas = []
    for isa in dict.fromkeys(f.isa for f in drivers):
        directions = []
        for fn in (f for f in drivers if f.isa == isa):
            names = tuple(a.name for a in fn.kernel.args)
            stages, entries, leaf = _stages(fn.driver, names)
            codelets = tuple(dict.fromkeys(_prototype(c.function) for c in fn.driver.calls))
            table = sum(1 for d in directions if d.table >= 0) if entries else -1
            directions.append(DirectionUnit(fn.symbol, fn.driver.direction,
                                            ", ".join(a.c_declaration for a in fn.kernel.args), names, stages, entries,
                                            leaf, codelets, table))
        ar = drivers[0].driver.ar if drivers[0].isa == isa else next(f.driver.ar for f in drivers if f.isa == isa)
        args = twiddle_args(ar)
        signed = ar.mul.signed
        form = "montgomery" if signed else "shoup" if args.paired else "plain"
        isas.append(IsaUnit(isa, f"{'' if signed else 'u'}int{p.width}_t", f"{'' if signed else 'u'}int{p.width}_t",
                            form, args.companion_bits or 0, tuple(directions)))
    math = drivers[0].driver.math
    ar = drivers[0].driver.ar
    return {
        "prefix": p.prefix, "q": p.q, "n": p.n, "layers": p.layers, "width": p.width,
        "root_bits": math.root_bits, "psi": math.psi, "coset": math.coset,
        "negacyclic": RING_CONSTANT[p.ring] == -1,
        "r_mod_q": (1 << p.width) % p.q, "scale": math.inverse_scale(ar.mul.r),
        "isas": isas,
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
        if fn.driver.calls[0].entries:
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


def plan_manifest(fn: Function) -> dict:
    """A driver's plan as the manifest records it: what the C unit runs, enough to run it again without it
    (the machine model) and to rebuild its twiddle tables (`table_values`'s rule: entry (layer, block) of a
    table row is the twiddle g^(n/2^(layer+1)) psi^(e/2) of that block, or its inverse in the inverse, times
    the scale on the scaled layer, stored in `form`)."""
    names = tuple(a.name for a in fn.kernel.args)
    stages, entries, leaf = _stages(fn.driver, names)
    ar = fn.driver.ar
    args = twiddle_args(ar)
    return {
        "direction": fn.driver.direction,
        "stages": [dataclasses.asdict(st) for st in stages],
        "entries": entries,
        "leaf_entries": [list(e) for e in leaf],
        "twiddles": {"form": "montgomery" if ar.mul.signed else "shoup" if args.paired else "plain",
                     "companion_bits": args.companion_bits, "scale": fn.driver.math.inverse_scale(ar.mul.r)},
    }
