"""The product-term algebra of the product checks: a lane of a product's
result written as a term over lanes of values made outside the product
("leaf"), followed back through element-wise instructions (of any number of
sources: an accumulating multiply-add's accumulator first), widening products,
double-width sums of them (read as their "low" or "high" half) and lane
moves; on 64-bit lanes one term for every lane, matched against the
templates of products assembled from 32-bit pieces (`wide.recognise`)."""

from __future__ import annotations

from ...errors import VerifyError
from ...ir.lanes import SPLIT, move_lanes
from ...machine.ops import spec
from .. import wide
from ..values import Def, Value
from .base import MachineView


def prove_wide(mc: MachineView) -> None:
    """The templates of 64-bit products proven (once), before a check relies on them."""
    try:
        wide.prove_templates()
    except wide.WideProductError as e:
        raise VerifyError(f"{mc.symbol}: {e}") from None



def moved_from(mc: MachineView, made: Def, v: Value, lane: int) -> tuple[Value, int] | None:
    """The source value and lane whose content lane `lane` of v takes, where
    the instruction that made v moves whole lanes (under an opmask the
    verifier knows, whose bits it recorded as the immediate); None otherwise."""
    s = spec(made.op)
    if s.move is None or lane >= made.lanes:
        return None
    labels = [[(i, k) for k in range(len(src.lanes))] for i, src in enumerate(made.sources)]
    got = move_lanes(s, labels, made.imm, mc.bits, made.lanes, None)
    if got is None or got[lane] is None or got[lane] is SPLIT:
        return None
    i, k = got[lane]
    return made.sources[i], k



def sum_parts(mc: MachineView, leaf: tuple) -> tuple[tuple, tuple] | None:
    """The two leaves a leaf lane was added from lane-wise, if an addition made it."""
    d = mc.made(leaf[1].vid)
    if d is None or d.generic != "add" or d.elem not in (None, mc.bits) or d.imm is not None:
        return None
    return tuple(("leaf", v, leaf[2]) for v in d.sources)


# the lane of a term built for every lane at once: each leaf's lane is the lane the term is read in
EVERY_LANE = None


def product_terms(mc: MachineView, result: Value, active: int, inside: set[int], bad) -> list[tuple]:
    """The term of each of the `active` lanes of a product's result
    (`_lane_term`). On 64-bit lanes the products are assembled from 32-bit
    pieces, which no instruction moves across lanes: every lane's term is
    then one term over its own lane of the same values, built and matched
    against the templates (`wide.recognise`) once, each constant compared
    in every lane at once, and then read in each lane."""
    if mc.bits != wide.BITS:
        return [_lane_term(mc, result, lane, inside, bad) for lane in range(active)]

    known: dict[int, tuple[Value, tuple[int, ...] | None]] = {}

    def constants(leaf: tuple) -> tuple[int, ...] | None:
        v = leaf[1]
        if id(v) not in known:
            values = [lane_constant(("leaf", v, lane)) for lane in range(active)]
            known[id(v)] = (v, None if None in values else tuple(values))
        return known[id(v)][1]

    term = wide.recognise(_lane_term(mc, result, EVERY_LANE, inside, bad), constants)
    return [_in_lane(term, lane, {}) for lane in range(active)]


def _in_lane(term: tuple, lane: int, seen: dict) -> tuple:
    """A term built for EVERY_LANE, read in `lane` (a subterm read twice stays one object)."""
    if term[0] == "leaf":
        return ("leaf", term[1], lane)
    if term[0] == "imm":
        return term
    if id(term) not in seen:
        seen[id(term)] = (term, (term[0], *(_in_lane(t, lane, seen) for t in term[1:])))
    return seen[id(term)][1]


def _lane_term(mc: MachineView, v: Value, lane: int | None, inside: set[int], bad, seen: dict | None = None) -> tuple:
    """Lane `lane` of v as a term over lanes of values made outside a group
    (`inside`: the values it made): ("leaf", value, lane), or (generic
    operation, term, term) through element-wise instructions and widening
    products, following lane moves to the lane they take; for EVERY_LANE
    through element-wise instructions only. A value read twice is one term
    object, read twice (`seen`)."""
    seen = {} if seen is None else seen
    key = (v.vid, lane)
    if key not in seen:
        seen[key] = _made_term(mc, v, lane, inside, bad, seen)
    return seen[key]


def _made_term(mc: MachineView, v: Value, lane: int | None, inside: set[int], bad, seen: dict) -> tuple:
    if v.vid not in inside:
        return ("leaf", v, lane)
    d = mc.made(v.vid)
    s = spec(d.op)
    elementwise = s.arith is not None and s.elem in (None, mc.bits)
    if lane is EVERY_LANE and not elementwise:
        bad(f"has a `{d.op}` inside a product of {mc.bits}-bit lanes: every lane must stay in its lane")
    if s.widen is not None and s.elem != mc.bits:  # a product of the low lanes of wider units: low, high half
        per = s.elem // mc.bits
        first, part = lane - lane % per, lane % per
        if per != 2:
            bad(f"widens {s.elem // 2}-bit lanes where the lanes are {mc.bits} bits")
        a, b = d.sources
        return (s.widen if part else "mullo", _lane_term(mc, a, first, inside, bad, seen),
                _lane_term(mc, b, first, inside, bad, seen))
    if s.generic == "add" and s.elem == 2 * mc.bits and lane is not EVERY_LANE:  # a double-width sum
        first = lane - lane % 2
        return ("high" if lane % 2 else "low", _double_sum(mc, v, first, inside, bad, seen))
    if elementwise:
        if d.imm is not None:  # a shift by a count
            return (d.generic, _lane_term(mc, d.sources[0], lane, inside, bad, seen), ("imm", d.imm))
        return (d.generic, *(_lane_term(mc, src, lane, inside, bad, seen) for src in d.sources))
    moved = moved_from(mc, d, v, lane)
    if moved is not None:
        return _lane_term(mc, *moved, inside, bad, seen)
    bad(f"has a `{d.op}` that cannot be followed lane by lane")


def _double_sum(mc: MachineView, v: Value, first: int, inside: set[int], bad, seen: dict) -> tuple:
    """The double-width unit of v at lanes `first`, `first` + 1 as ("sum", product, ...), each product
    ("product", x, w) a widening product of lanes `first` of x and w, through double-width additions
    (flattened: the order of a sum does not matter). One term object for the unit (`seen`), whichever
    of its halves is read, so that a check can see both halves read the same sum."""
    key = (v.vid, "double", first)
    if key not in seen:
        d = mc.made(v.vid) if v.vid in inside else None
        s = spec(d.op) if d is not None else None
        if s is not None and s.widen is not None and s.elem == 2 * mc.bits:
            factors = (_lane_term(mc, src, first, inside, bad, seen) for src in d.sources)
            seen[key] = ("sum", ("product", *factors))
        elif s is not None and s.generic == "add" and s.elem == 2 * mc.bits:
            parts = (_double_sum(mc, src, first, inside, bad, seen)[1:] for src in d.sources)
            seen[key] = ("sum", *(p for part in parts for p in part))
        else:
            bad(f"adds double-width units of v{v.vid}, which is not a sum of widening products made inside it")
    return seen[key]


def product_factors(term: tuple) -> list[tuple] | None:
    """The leaves a low product multiplies (mod 2^bits the grouping does not matter)."""
    if term[0] in ("leaf", "add"):  # an addition inside: a factor w' given as a sum (`montgomery.times_qinv`)
        return [term]
    if term[0] != "mullo":
        return None
    parts = [product_factors(t) for t in term[1:]]
    return None if None in parts else parts[0] + parts[1]


def lane_constant(term: tuple) -> int | None:
    """A leaf lane's value where it is exact and depends on no input (a table's, or a zeroed lane)."""
    _, v, lane = term
    (lo, hi), dep = v.lanes[lane], v.deps[lane]
    return lo if lo == hi and not dep else None


def leaf_constant(term: tuple) -> int | None:
    _, v, lane = term
    return None if v.constant is None else v.constant[lane]


def show(term: tuple) -> str:
    if term[0] == "leaf":
        return f"v{term[1].vid}[{term[2]}]"
    if term[0] == "imm":
        return str(term[1])
    return f"{term[0]}({', '.join(show(t) for t in term[1:])})"
