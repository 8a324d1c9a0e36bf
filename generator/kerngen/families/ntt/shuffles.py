"""The in-register lane moves of the NTT layout, as instructions.

A `Swap` exchanges a lane bit with a register-pair bit; an `Interleave`
interleaves the elements of a register pair. Each is a short recipe of
instruction-table opcodes, chosen by the distance the lanes travel and the
register's width:

    128, 256 bits   pick 128-bit units of the pair: the first table row that
                    does it at the register's width by an immediate
                    (vperm2i128 0x20 / 0x31 on 256 bits; vshufi64x2 0x44 /
                    0xEE at distance 256 on 512 bits), else a permutation of
                    the pair by an index register (vpermi2q at distance 128
                    on 512 bits), else a row by an immediate twice a
                    result, found by running the rows' lane routes
     64 bits        interleave 64-bit units (vpunpck[lh]qdq)
     32, 16 bits    shift inside units twice as wide, blend odd units; where
                    the blends have no form (512 bits): gather each source's
                    even units (vpshufd, and vpshuf[lh]w for 16 bits), interleave
    interleave      interleave elements of the lane width (vpunpck[lh]wd for 16-bit lanes)

Below 128 bits the rows work within each 128-bit lane. Of the recipes for a
distance, a register width takes the first whose rows' lane routes make the
swap at that width. A permutation's index register is a constant the kernel
loads once and holds (`Builder.held_constant`); a row that overwrites a source
(vpermi2q its index) takes a copy of it. A recipe's price is the instructions
it takes per move, those copies included, the held constant's load not. The
builder emits a recipe; the layout planner runs the same recipe on
coefficient indices through the table's lane routes (`ir.lanes`), so the
order the planner predicts is the order the instructions make.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.instr import Builder, Imm, Mem, VReg
from ...ir.lanes import SPLIT, move_lanes
from ...machine.ops import LANE_BLOCK_BITS, OPS, TABLE, Op, Route, by_width, spec
from .reducers import CONST_PREFIX


@dataclass(frozen=True)
class Swap:
    """Exchange lane bit `lane_bit` with slot bit `slot_bit` in every register pair."""

    lane_bit: int
    slot_bit: int


@dataclass(frozen=True)
class Interleave:
    """Element interleave of every register pair on `slot_bit`: within each
    128-bit lane, the top lane bit goes to the slot bit, the lower lane bits
    move up one and the slot bit comes down to lane bit 0."""

    slot_bit: int


# a recipe line: (result name, opcode, first source, second source or None, immediate or None);
# sources "x" and "y" are the pair, results "lo" and "hi" its new contents; of a row permuting by an index
# register (`Move.indices`), the immediate is that register's contents as one integer
Recipe = tuple[tuple[str, str, str, str | None, int | None], ...]

ODD_UNITS = 0xAA
# four units reordered 0, 2, 1, 3 (pshufd, pshuflw, pshufhw): applied from the narrowest units up, the
# even units of each 128-bit lane come first
EVENS_FIRST = 0xD8
# the rows picking 128-bit units of two sources by an immediate (vperm2i128, vshufi64x2)
_UNIT_PICKS = "permute_halves"
_INDEXED_PICKS = "permute_pair"  # the rows permuting the units of two sources by an index register
_IMMEDIATES = range(256)


@dataclass(frozen=True)
class LaneMoves:
    """The recipes of lane moves on registers of `register_bits` holding
    `lane_bits`-bit lanes (vectors of fewer lanes live in the low ones)."""

    lane_bits: int
    register_bits: int
    swaps: tuple[tuple[int, Recipe], ...]  # (distance, recipe) for every distance a lane can travel

    @property
    def register_lanes(self) -> int:
        return self.register_bits // self.lane_bits

    def recipe(self, step: Swap | Interleave) -> Recipe:
        if isinstance(step, Interleave):
            return (("lo", by_width("interleave_low", self.lane_bits), "x", "y", None),
                    ("hi", by_width("interleave_high", self.lane_bits), "x", "y", None))
        return dict(self.swaps)[self.lane_bits << step.lane_bit]

    def cost(self, step: Swap | Interleave) -> int:
        """The price of `step`: the instructions its recipe takes, with the copies before rows that
        overwrite a source."""
        return sum(1 + _overwrites(op) for _, op, *_ in self.recipe(step))

    def emit(self, b: Builder, x: VReg, y: VReg, step: Swap | Interleave) -> tuple[VReg, VReg]:
        """The lane movement of `step` on the pair (x, y), as instructions."""
        env = {"x": x, "y": y}
        for dst, op, a, c, imm in self.recipe(step):
            sources = [env[a]] + ([env[c]] if c else [])
            indices = spec(op).move.indices
            if indices is not None:
                sources.insert(indices, _index_register(b, op, imm, self.lane_bits, self.register_bits))
            elif imm is not None:
                sources.append(Imm(imm))
            if _overwrites(op):  # into a copy of its first source, which stays as it was for later reads
                env[dst] = b.op("copy", sources[0])
                b.emit(op, env[dst], *sources[1:])
            else:
                env[dst] = b.op(op, *sources)
        return env["lo"], env["hi"]

    def simulate(self, step: Swap | Interleave, lo: list, hi: list) -> tuple[list, list]:
        """The same movement on lists of payloads (one per lane of a vector of
        len(lo) lanes, living in the low lanes of the register)."""
        lanes = len(lo)
        pad = [None] * (self.register_lanes - lanes)
        moved = _run(self.recipe(step), list(lo) + pad, list(hi) + pad, self.lane_bits, self.register_lanes)
        if moved is None:
            raise AssertionError(f"layout step {step}: its recipe does not move whole lanes")
        for out in moved:
            if any(v is None for v in out[:lanes]) or any(v is not None for v in out[lanes:]):
                raise AssertionError(f"layout step {step} moves data across the vector's {lanes} lanes")
        return moved[0][:lanes], moved[1][:lanes]


def _overwrites(op: str) -> bool:
    """Whether row `op` writes over its first source (vpermi2q its index register)."""
    return "r" in spec(op).slots[0].access


def _index_register(b: Builder, op: str, contents: int, lane_bits: int, register_bits: int) -> VReg:
    """The index register of permutation row `op` holding `contents`: a constant table loaded once per
    kernel and held (`Builder.held_constant`), its elements as wide as the lanes, as the verifier
    reads a table."""
    unit = spec(op).move.unit

    def fields(bits: int) -> list[int]:
        return [contents >> (bits * k) & ((1 << bits) - 1) for k in range(register_bits // bits)]

    def load() -> VReg:
        label = f"{CONST_PREFIX[lane_bits]}_index{unit}_" + "_".join(map(str, fields(unit)))
        table = b.table(label, lane_bits // 8, fields(lane_bits))
        return b.op("load", Mem(table, 0, register_bits // 8), bits=register_bits)
    return b.held_constant(("lane index", contents, lane_bits, register_bits), load)


def _run(recipe: Recipe, x: list, y: list, lane_bits: int, register_lanes: int) -> tuple[list, list] | None:
    """The pair after `recipe`, through the table's lane routes; None if a row
    does not move whole lanes (or has no form) at this register width."""
    env = {"x": x, "y": y}
    for dst, op, a, c, imm in recipe:
        sources = [env[a]] + ([env[c]] if c else [])
        indices = spec(op).move.indices
        if indices is not None:  # the index register's lanes: its contents are the route's `imm`
            sources.insert(indices, [None] * register_lanes)
        out = move_lanes(spec(op), sources, imm, lane_bits, register_lanes, None)
        if out is None or any(v is SPLIT for v in out):
            return None
        env[dst] = out
    return env["lo"], env["hi"]


def lane_moves(lane_bits: int, register_bits: int) -> LaneMoves:
    """The lane moves of one register width: for each distance inside a
    128-bit lane the cheapest recipe whose rows do the swap at this width, for
    each distance across them the table's rows picking 128-bit units."""
    swaps = []
    distance = lane_bits
    while distance < register_bits:
        if distance >= LANE_BLOCK_BITS:
            swaps.append((distance, _unit_picks(distance, register_bits)))
        else:
            fits = [r for r in _in_lane_recipes(distance, register_bits) if _swaps(r, distance, lane_bits, register_bits)]
            if not fits:
                raise ValueError(f"no recipe swaps lanes {distance} bits apart in {register_bits}-bit registers")
            swaps.append((distance, min(fits, key=len)))  # the first of the cheapest
        distance *= 2
    return LaneMoves(lane_bits, register_bits, tuple(swaps))


def _in_lane_recipes(distance: int, register_bits: int) -> list[Recipe]:
    """Recipes swapping the units `distance` bits apart inside each 128-bit
    lane of a pair, in order of preference where they cost the same: 64-bit
    units interleaved; narrower ones shifted into place in units twice as wide
    and blended (VEX blends, their immediate repeating every 8 units), or each
    source's even units gathered first, then interleaved, or shifted and
    blended under an opmask of a bit per unit of the register (EVEX: at 512
    bits the gathering takes twice its instructions for 16-bit units, as many
    for 32-bit ones, whose gathering keeps port 0 free of shifts)."""
    low, high = by_width("interleave_low", distance), by_width("interleave_high", distance)
    if distance == 64:
        return [(("lo", low, "x", "y", None), ("hi", high, "x", "y", None))]
    sll, srl = by_width("sll", 2 * distance), by_width("srl", 2 * distance)
    every_odd_unit = sum(1 << k for k in range(1, register_bits // distance, 2))
    shift_blends = [(("s", sll, "y", None, distance), ("lo", blend, "x", "s", odd),
                     ("t", srl, "x", None, distance), ("hi", blend, "t", "y", odd))
                    for odd in dict.fromkeys((ODD_UNITS, every_odd_unit)) for blend in TABLE.doing("blend", distance)]
    chain = ([by_width("shuffle_low", 16), by_width("shuffle_high", 16)] if distance == 16 else []) + ["vpshufd"]
    gather: list = []
    for src in ("x", "y"):
        gather += [(f"{src}{k}", op, f"{src}{k - 1}" if k else src, None, EVENS_FIRST) for k, op in enumerate(chain)]
    last = len(chain) - 1
    gather += [("lo", low, f"x{last}", f"y{last}", None), ("hi", high, f"x{last}", f"y{last}", None)]
    return [shift_blends[0], tuple(gather), *shift_blends[1:]]


def _swaps(recipe: Recipe, distance: int, lane_bits: int, register_bits: int) -> bool:
    """Whether `recipe` swaps the lanes `distance` bits apart of a register pair."""
    lanes, bit = register_bits // lane_bits, distance // lane_bits
    x, y = list(range(lanes)), list(range(lanes, 2 * lanes))
    lo = [y[i & ~bit] if i & bit else x[i] for i in range(lanes)]
    hi = [y[i] if i & bit else x[i | bit] for i in range(lanes)]
    return _run(recipe, x, y, lane_bits, lanes) == (lo, hi)


def _unit_picks(distance: int, register_bits: int) -> Recipe:
    """A swap of the 128-bit units `distance` bits apart between a register pair
    (x, y): lo takes the units with that bit of their position clear from both,
    in place of x's set ones, hi the set ones. Done by the first row of the
    table picking units (in table order, so a VEX row before an EVEX one) that
    makes each result in one instruction, else the first row permuting by an
    index register that does (`_indexed_picks`), else the first row by an
    immediate making it in two: the row on the pair, then on that result alone."""
    units = register_bits // LANE_BLOCK_BITS
    bit = distance // LANE_BLOCK_BITS
    want = {"lo": tuple((int(k & bit != 0), k & ~bit) for k in range(units)),
            "hi": tuple((int(k & bit != 0), k | bit) for k in range(units))}
    rows = [op for op in OPS.values() if op.generic == _UNIT_PICKS and op.move is not None]
    for op in rows:
        routes = _whole_routes(op, units)
        found = {name: next((imm for imm, r in routes if r == w), None) for name, w in want.items()}
        if None not in found.values():
            return tuple((name, op.name, "x", "y", imm) for name, imm in found.items())
    indexed = _indexed_picks(distance, register_bits)
    if indexed is not None:
        return indexed
    for op in rows:
        routes = _whole_routes(op, units)
        lines: list = []
        for name, w in want.items():
            pick = next(((first, then) for first, r in routes if set(w) <= set(r)
                         for then, r2 in routes if tuple(r[j] for _, j in r2) == w), None)
            if pick is None:
                break
            lines += [(f"{name}_units", op.name, "x", "y", pick[0]),
                      (name, op.name, f"{name}_units", f"{name}_units", pick[1])]
        else:
            return tuple(lines)
    raise ValueError(f"no row of the table swaps 128-bit units {distance} bits apart in {register_bits}-bit registers")


def _indexed_picks(distance: int, register_bits: int) -> Recipe | None:
    """The swap of `_unit_picks` by the first row permuting the units of two sources by an index
    register whose route makes it at this width, each result in one instruction; None if none does.
    Unit k of a result takes unit j of the pair's source s by index s * n + j (n units a source)."""
    for name in TABLE.doing(_INDEXED_PICKS, 64) + TABLE.doing(_INDEXED_PICKS, 32):
        unit = spec(name).move.unit
        n, bit = register_bits // unit, distance // unit
        picks = {"lo": [(k & bit != 0) * n + (k & ~bit) for k in range(n)],
                 "hi": [(k & bit != 0) * n + (k | bit) for k in range(n)]}
        recipe = tuple((result, name, "x", "y", sum(p << (unit * k) for k, p in enumerate(units)))
                       for result, units in picks.items())
        if _swaps(recipe, distance, unit, register_bits):
            return recipe
    return None


def _whole_routes(op: Op, units: int) -> list[tuple[int, Route]]:
    """The routes of a row on `units` 128-bit units for every immediate that moves no zero unit."""
    out = []
    for imm in _IMMEDIATES:
        r = op.move.route(units, (units, units), imm, LANE_BLOCK_BITS)
        if r is not None and None not in r:
            out.append((imm, r))
    return out

