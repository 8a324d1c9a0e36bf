"""The cost model behind a design's choices: a butterfly, a reduction and a
strategy counted (every instruction once, multiplications twice: the NTTs
wait on the multiplier ports), the reducer chosen by it, and the largest q
that works when none does."""

from __future__ import annotations

import sympy

from ...errors import ParamError
from ...ir.instr import ArgBase, Mem
from ...machine.ops import spec
from .kernels import kernel_builder
from .maths import NttMath
from .montgomery import Montgomery
from .params import NttParams
from .reducers import Reducer, reducers
from .schedule import DIRECTIONS, Arithmetic, ReductionSchedule, ScheduleError, input_bound, schedule


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
        best = largest_feasible_q(p, layout, kinds)
        raise ParamError(p.source, "q", f"q = {p.q} is too large for n = {p.n} on {p.width}-bit lanes with "
                                        f"{' or '.join(kinds)} reduction: the {failure.direction} NTT's layer "
                                        f"{failure.layer} can leave int{p.width} however its inputs are reduced; "
                                        + (f"the largest prime that works here is q = {best}" if best else
                                           "no smaller prime with the same layers works either"))
    return available[min(costs, key=lambda k: (costs[k], k != "barrett"))]


def largest_feasible_q(p: NttParams, layout, kinds: list[str]) -> int | None:
    """The largest prime q' < q with 2^(layers+1) | q'-1 for which a schedule
    exists with one of the reduction `kinds` (the bound analysis decides)."""
    step = 1 << (p.layers + 1)
    cand = (p.q - 2) // step * step + 1
    while cand > step:
        if sympy.isprime(cand):
            math, mul = NttMath(p.n, cand, p.layers), Montgomery(cand, p.width)
            available = reducers(cand, p.width)
            for kind in kinds:
                if kind in available:
                    try:
                        ntt_schedules(Arithmetic(math, layout, mul, available[kind]), p)
                        return cand
                    except ScheduleError:
                        pass
        cand -= step
    return None
