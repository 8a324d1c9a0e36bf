"""The design of an NTT bundle: the choices the cost model (`cost.py`) and
the lanes make before any kernel is built — the multiplication strategy and
the reducer of the schedules, what base multiplication multiplies with, and
for each output range the final reductions to try, cheapest first.

`design` is a registered memo (`core.compile_cache.memo`): a pure function
of frozen parameters and a target, asked again by validation, the build, the
tables' check and exploration; bounded, so a long session keeps only the
designs of its latest sets."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.compile_cache import memo
from ...core.contract import Bound
from ...errors import ParamError, toml_value
from ...machine.ops import lane_range
from ...machine.target import Target
from .cost import choose_reducer, strategy_cost
from .kernels import WhereAbove
from .layout import plan
from .maths import NttMath
from .montgomery import Montgomery, UnsignedMontgomery
from .params import MONTGOMERY_WIDTHS, ORDERS, NttParams, strategies
from .reducers import Reducer, freezer, lifter, reducers
from .schedule import Arithmetic, ScheduleError
from .harvey import HarveyReducer, ShoupReduction, UnsignedFreeze
from .shoup import Shoup
from .special64 import NAME as SPECIAL, CanonicalReducer, SpecialForm64

Finishers = dict[str, tuple]  # output range -> the final reductions to try (None: none), cheapest first


@memo(maxsize=64)
def design(p: NttParams, target: Target | None = None) -> Arithmetic:
    """What the kernels for `target` (default: the first ISA's) are derived
    from: maths, layout, multiplication and the reducer the schedules use.
    The multiplication strategy is the one named, or for "auto" the cheaper
    by the cost model (`strategy_cost`) of those that fit q; Montgomery on a tie.
    Raises ParamError when no schedule keeps the lanes in range (validation
    calls it, so a valid set always emits)."""
    math = NttMath(p.n, p.q, p.layers, p.ring, p.coset, p.psi)
    t = target or p.target
    try:
        layout = plan(p.n, p.layers, t, p.order, fastest_arrangement(p, t))
    except ValueError as e:
        raise ParamError(p.source, "order", f"{toml_value(p.order)} is out of reach on {t.isa.name}: {e}; choose "
                                            "another order or leave that ISA out") from None
    # Shoup's products: on the lane width, and from 52-bit multiply-adds where the ISA and q allow them
    muls = [mul for kind in strategies(p) for mul in
            (Shoup.candidates(p.q, p.width, t.isa) if kind == "shoup" else
             (SpecialForm64(p.q, p.width, t.isa),) if kind == SPECIAL else (Montgomery(p.q, p.width, t.isa),))]
    options, failure = [], None
    for mul in muls:
        kind = mul.name
        if kind == "shoup":
            ar = Arithmetic(math, layout, mul, HarveyReducer(p.q, p.width, t.isa, mul.reach))
        elif kind == SPECIAL:
            ar = Arithmetic(math, layout, mul, CanonicalReducer(p.q, p.width, t.isa))
        else:
            try:
                ar = Arithmetic(math, layout, mul, choose_reducer(p, math, mul, layout, reducers(p.q, p.width)))
            except ParamError as e:
                failure = e
                continue
        try:
            options.append((strategy_cost(ar, p) if len(muls) > 1 else 0, kind != "montgomery", ar))
        except ScheduleError as e:
            failure = failure or ParamError(p.source, "q", f"q = {p.q} is too large for n = {p.n} with {kind} "
                                                           f"multiplication: {e}")
    if not options:
        raise failure
    return min(options, key=lambda o: o[:2])[2]


def fastest_arrangement(p: NttParams, t: Target) -> tuple[int, ...] | None:
    """The fastest order `t`'s kernels leave, as an arrangement of index bits
    (None: whatever its passes leave). Where the set's ISAs write vectors of
    several widths, one NTT domain for all is the fastest order of the ISA
    `order_isa` names, by default the narrowest vectors': a wider ISA's final
    pass holds every index bit a narrower one's does and more, so it reaches
    that order with a few more lane moves at its end (and as many at the
    inverse's start), while the narrower kernels, the ones a CPU without the
    wider vectors runs, pay nothing. Naming the widest ISA moves those lane
    moves into the narrower kernels instead."""
    chosen = (next(u for u in p.targets if u.isa.name == p.order_isa) if p.order_isa is not None
              else min(p.targets, key=lambda u: u.vector_bits))
    if p.order != ORDERS[0] or chosen.vector_bits == t.vector_bits:
        return None
    return design(p, chosen).layout.arrangement


def prove_lemmas(p: NttParams, ar: Arithmetic) -> None:
    """Prove (once per process) the lemmas the kernels of a design rest on:
    its multiplications', and on signed lanes the reductions' (the freeze's
    range over the whole lane is the hardest the SMT solver is asked).
    Validation calls it, so that a q whose proofs the solver cannot settle
    in its time limit is refused before any kernel is built."""
    ar.mul.prove()
    montgomery_basemul(p, ar).mul.prove()
    if p.width in MONTGOMERY_WIDTHS:
        reducers(p.q, p.width)
        freezer(p.q, p.width)
        if not ar.mul.signed:
            lifter(p.q, p.width)


def montgomery_basemul(p: NttParams, ar: Arithmetic) -> Arithmetic:
    """What base multiplication is built with: products of two variables
    need Montgomery's (Shoup's needs w' precomputed for a constant), so a
    Shoup bundle multiplies there on signed lanes, its inputs below 2^(W-1);
    on 64-bit lanes, with no signed products, on unsigned ones; the
    special-form products take two variables as they are."""
    if ar.mul.signed or isinstance(ar.mul, SpecialForm64):
        return ar
    if p.width not in MONTGOMERY_WIDTHS:  # no signed products: Montgomery's on unsigned lanes, from pieces
        return Arithmetic(ar.math, ar.layout, UnsignedMontgomery(p.q, p.width, ar.mul.isa), ar.reducer)
    bm = Arithmetic(ar.math, ar.layout, Montgomery(p.q, p.width, ar.mul.isa), reducers(p.q, p.width)["barrett"])
    # sums of products (blocks of degree d > 1, basemul_acc) are reduced term by term: two reduced terms must fit
    if (ar.math.d > 1 or p.basemul_acc) and 2 * bm.reducer.out_abs > bm.lane_max:
        key, what = ("layers", f"blocks of degree {ar.math.d} sum") if ar.math.d > 1 else \
            ("basemul_acc", f"{toml_value(list(p.basemul_acc))} sums")
        raise ParamError(p.source, key, f"{what} products on {p.width}-bit signed lanes, where two reduced "
                                        f"ones reach 2*{bm.reducer.out_abs} > 2^{p.width - 1} - 1 for q = {p.q}: "
                                        "base multiplication here takes blocks of degree 1 (layers at their "
                                        "default) and no basemul_acc")
    return bm


@dataclass(frozen=True)
class IsaDesign:
    """One ISA's kernels' choices beyond the arithmetic: the signed lanes'
    reductions (`available`, by kind), the final reductions to try per output
    range (`finishers`; the NTTs' own, `ntt_finishers`, try a centred
    reduction first where the schedule's bounds say it is needed), and what
    base multiplication multiplies with (`basemul`) and reduces its inputs
    and sums with where they could leave the lane (`basemul_reducer`);
    `lane_top`: the top of base multiplication's signed lanes (32-bit Shoup
    bundles' too)."""

    ar: Arithmetic
    available: dict[str, Reducer]
    signed_finishers: Finishers
    finishers: Finishers
    ntt_finishers: Finishers
    unsigned_freeze: UnsignedFreeze | CanonicalReducer
    basemul: Arithmetic
    basemul_reducer: Reducer
    lane_top: int

    def basemul_takes_as_it_is(self, out: Bound) -> bool:
        """Whether base multiplication takes the forward's output unreduced:
        below 2^(W-1) for the signed products of Shoup bundles, and for
        unsigned ones where their bound stays in the lane (a reduction of
        every output is cheaper than two products by 1 in base multiplication)."""
        if self.ar.mul.signed:
            return True
        if not self.basemul.mul.signed:
            return self.basemul.mul.bound(out.hi, out.hi) <= self.basemul.mul.lane_max
        return out.hi <= self.lane_top

    def basemul_finishers(self, p: NttParams, forward_out: Bound) -> tuple[str, Finishers]:
        """Base multiplication's output range and the final reductions to try
        for it, given the forward NTT's proven output."""
        q, bits, ar, bm = p.q, p.width, self.ar, self.basemul
        asked = dict(p.output)["basemul"]
        if ar.mul.signed:
            return asked, self.signed_finishers
        output = "lazy" if asked == "lazy" else "canonical"
        if not bm.mul.signed:  # finishes chosen for one product's bound first, then for any lane (sums of products)
            top = bm.mul.bound(forward_out.hi, forward_out.hi)
            return output, {"lazy": (None, ar.reducer.choose(top), ar.reducer.choose(bm.mul.lane_max)),
                            "canonical": (self.unsigned_freeze.choose(top),
                                          self.unsigned_freeze.choose(bm.mul.lane_max))}
        # the unsigned inverse takes no negative value: its input range [0, 2q), else [0, q)
        return output, {"lazy": (lifter(q, bits), freezer(q, bits)), "canonical": (freezer(q, bits),)}


def isa_design(p: NttParams, t: Target, ar: Arithmetic) -> IsaDesign:
    q, bits, signed = p.q, p.width, ar.mul.signed
    available = reducers(q, bits) if bits in MONTGOMERY_WIDTHS else {}  # signed lanes' reductions
    barrett = available.get("barrett")
    # per output range: the final reductions to try, cheapest first (none: the bounds may already
    # suffice; a lazy output is reduced only when it must be, e.g. to meet the inverse's input)
    signed_finishers = {"lazy": (None, barrett), "centred": (None, barrett),
                        "canonical": (freezer(q, bits),)} if available else {}
    # any lane value to [0, q): the special form's own conditional subtraction where 4q leaves the lane
    unsigned_freeze = ar.reducer if isinstance(ar.mul, SpecialForm64) else UnsignedFreeze(q, bits, t.isa)
    finishers = signed_finishers if signed else {"lazy": (None, ar.reducer),
                                                 "centred": (None, ar.reducer, unsigned_freeze),
                                                 "canonical": (unsigned_freeze,)}
    ntt_finishers = {kind: tuple(option for f in tries for option in
                                 ((WhereAbove(f, q), f) if signed and f is not None and f.kind != "freeze" else (f,)))
                     for kind, tries in finishers.items()}
    return IsaDesign(ar, available, signed_finishers, finishers, ntt_finishers, unsigned_freeze,
                     montgomery_basemul(p, ar), barrett or (ar.reducer if isinstance(ar.mul, SpecialForm64) else
                                                            ShoupReduction(q, bits, t.isa)), lane_range(bits)[1])
