"""The cost model behind a design's choices: a butterfly, a reduction and a
strategy counted (every instruction once, multiplications twice: the NTTs
wait on the multiplier ports), the reducer chosen by it, and when none
keeps the lanes in range, what q does: from the bound analysis's worst
case, bisected over q (no walk over the primes, each a reducer search and
schedules)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy

from ...errors import ParamError
from ...ir.instr import ArgBase, Mem
from ...machine.ops import spec
from .kernels import kernel_builder
from .maths import NttMath
from .montgomery import Montgomery
from .params import MIN_Q, NttParams
from .reducers import Reducer, barrett_reducer, reducers
from .schedule import DIRECTIONS, Arithmetic, ReductionSchedule, ScheduleError, input_bound, schedule

CONFIRMATIONS = 3  # primes the full analysis checks before a too-large q's message gives the limit alone
PRIME_CANDIDATES = 4096  # q = 1 mod 2^(L+1) tested for primality below that limit


def ntt_schedules(ar: Arithmetic, p: NttParams) -> dict[str, ReductionSchedule]:
    return {d: schedule(ar, p.policy, d, input_bound(ar.math, d, p.width, ar.mul.signed)) for d in DIRECTIONS}


def butterfly_cost(ar: Arithmetic, direction: str) -> int:
    """One butterfly of the strategy as the builder emits it, counted: every
    instruction once, every multiplication twice (the NTTs are bound by the
    multiplier ports)."""
    bits, size = ar.layout.lane_bits, ar.layout.vector_bytes
    b = kernel_builder(ar.layout)
    x, y, q = (b.op("load", Mem(ArgBase(0), size * k, size)) for k in range(3))
    factor = ar.mul.operands([1] * (size * 8 // bits), lambda row: Mem(ArgBase(0), 0, size))
    start = len(b.instrs)
    ar.mul.butterfly(b, x, y, factor, q, direction == "inverse", None, 2 * ar.math.q, "")
    return instructions_cost(b.instrs[start:])


def instructions_cost(body) -> int:
    """Instructions by the cost model: every one once, multiplications twice."""
    return sum(2 if spec(ins.op).cls == "mul" else 1 for ins in body)


def basemul_cost(body) -> tuple[int, int]:
    """A base multiplication's cost, ties going to fewer multiplications (the
    multiplier ports are what it waits on)."""
    return instructions_cost(body), sum(spec(ins.op).cls == "mul" for ins in body)


def reduction_cost(r) -> int:
    """One vector reduction by the cost model: instructions, multiplications counted twice."""
    return r.instructions + 2 * r.multiplications


def strategy_cost(ar: Arithmetic, p: NttParams) -> int:
    """Both NTTs' butterflies and scheduled reductions by the cost model (`butterfly_cost`)."""
    butterflies = ar.math.layers * ar.layout.vectors // 2
    return sum(butterflies * butterfly_cost(ar, d) + s.count * reduction_cost(ar.reducer)
               for d, s in ntt_schedules(ar, p).items())


def choose_reducer(p: NttParams, math: NttMath, mul: Montgomery, layout, available: dict[str, Reducer]) -> Reducer:
    """The named reducer, or for "auto" the cheapest by the cost model: every
    multiplication counts twice (the NTTs are bound by the multiplier ports).
    A reducer with which no schedule keeps the lanes in range is not a choice;
    when none is left, q is too large for the lanes, and the message says
    which q would do."""
    if p.reducer != "auto" and p.reducer not in available:
        raise ParamError(p.source, "reducer", f"q = {p.q} has no special form: no 2^a mod q with at most three "
                                              f"signed binary digits gives a reduction below 2^{p.width - 2}; "
                                              "use barrett or auto")
    kinds = list(available) if p.reducer == "auto" else [p.reducer]
    costs, failure = {}, None
    for kind in kinds:
        r = available[kind]
        try:
            count = sum(s.count for s in ntt_schedules(Arithmetic(math, layout, mul, r), p).values())
        except ScheduleError as e:
            failure = e
            continue
        costs[kind] = count * reduction_cost(r)
    if not costs:
        raise ParamError(p.source, "q", f"q = {p.q} is too large for n = {p.n} on {p.width}-bit lanes with "
                                        f"{' or '.join(kinds)} reduction: the {failure.direction} NTT's layer "
                                        f"{failure.layer} can leave int{p.width} however its inputs are reduced; "
                                        + q_limit(p, mul, layout, [available[k] for k in kinds]).describe(p))
    return available[min(costs, key=lambda k: (costs[k], k != "barrett"))]


@dataclass(frozen=True)
class Limit:
    """What fits where q is too large: `top`, the largest q whose layers fit
    the lanes with every input reduced and every twiddle at its largest (the
    bound analysis's worst case), and `prime`, the largest prime up to it
    with the layers' roots of unity, which the full analysis accepts (None
    where none was found; `top` None where no q fits)."""

    top: int | None
    prime: int | None

    def describe(self, p: NttParams) -> str:
        roots = f"2^{NttMath(p.n, p.q, p.layers, p.ring).root_bits} | q - 1"
        if self.top is None:
            return "no smaller q with the same layers fits either"
        worst = (f"the largest q whose layers fit int{p.width} with every input reduced and every twiddle at its "
                 "largest")
        if self.prime is None:
            return (f"{worst} is {self.top}, and no prime up to it with {roots} was found to work: choose a "
                    "smaller q or fewer layers")
        return f"q = {self.prime} works here, the largest prime with {roots} up to {self.top}, {worst}"


def worst_layer_fits(mul: Montgomery, q: int, excess: int) -> bool:
    """Whether a layer of either NTT keeps modulus q's lanes in range with
    every input reduced, to |x| <= (q-1)/2 + `excess` (what a reduction
    erring by `excess` leaves), and every twiddle and the inverse's scale at
    their largest |w|, (q-1)/2 (stored centred): a few integer operations,
    and true up to some q and false above (every bound grows with q)."""
    m = dataclasses.replace(mul, q=q)
    w = (q - 1) // 2
    top = w + excess
    return m.forward_bounds(top, top, w, top) is not None and m.inverse_bounds(top, top, w, w, top) is not None


def largest_fitting_q(mul: Montgomery, below: int, excess: int) -> int | None:
    """The largest q < `below` for which `worst_layer_fits`, by bisection
    (about log2(below) evaluations); None if not even q = 3 fits."""
    lo, hi = 3, below - 1
    if hi < lo or not worst_layer_fits(mul, lo, excess):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if worst_layer_fits(mul, mid, excess) else (lo, mid - 1)
    return lo


def prime_up_to(top: int, step: int, least: int) -> int | None:
    """The largest prime q <= top with step | q - 1 and q >= least, among
    the first PRIME_CANDIDATES so formed (about ln(top)/2 are tried on average)."""
    q = (top - 1) // step * step + 1
    for _ in range(PRIME_CANDIDATES):
        if q < least:
            return None
        if sympy.isprime(q):
            return q
        q -= step
    return None


def q_limit(p: NttParams, mul: Montgomery, layout, tried: list[Reducer]) -> Limit:
    """What fits below p.q with the reducers `tried` (p.q's, none keeping
    the lanes in range): the bound analysis's worst case (`worst_layer_fits`)
    with reductions erring as p.q's best does, bisected over q; the prime it
    names is checked by the full analysis (its roots, its reductions). A
    prime whose reduction errs more than assumed may fail: the error is
    then taken as the new assumption, at most CONFIRMATIONS times."""
    excess = min(r.out_abs for r in tried) - (p.q - 1) // 2
    kinds = ["barrett"] if any(r.kind == "barrett" for r in tried) else [r.kind for r in tried]
    top = None
    for _ in range(CONFIRMATIONS):
        top = largest_fitting_q(mul, p.q, excess)
        prime = top and prime_up_to(top, 1 << NttMath(p.n, p.q, p.layers, p.ring).root_bits, MIN_Q[p.width])
        if not prime:
            return Limit(top, None)
        candidates = {"barrett": barrett_reducer(prime, p.width)} if kinds == ["barrett"] else reducers(prime, p.width)
        math, mul_there = NttMath(p.n, prime, p.layers, p.ring), dataclasses.replace(mul, q=prime)
        errs = excess
        for kind in kinds:
            if kind not in candidates:
                continue
            try:
                ntt_schedules(Arithmetic(math, layout, mul_there, candidates[kind]), p)
                return Limit(top, prime)
            except ScheduleError:
                errs = max(errs, candidates[kind].out_abs - (prime - 1) // 2)
        if errs == excess:  # not the reduction's error: the worst case holds no more to learn
            break
        excess = errs
    return Limit(top, None)
