"""The NTT bundle: parameters -> maths -> layout -> schedule -> kernels ->
passes, as forward NTT, base multiplication, inverse NTT and the standalone
reductions, each with its typed contract."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

from ...core.bundle import Bundle, CDefine, CTable, Function
from ...core.contract import ArgContract, Bound, BoundOf, Contract, Values
from ...errors import ParamError, VerifyError, toml_value
from ...core.params import names_manifest
from ...core.proof import MapProof, monomials
from ...ir.instr import ArgSpec
from ...machine.ops import lane_range
from ...ir.stream import executed
from ...passes.pipeline import Compiled, compile_kernel
from ...machine.target import Target
from .kernels import (WhereAbove, basemul_variants, build_basemul, build_mulmod_shoup, build_ntt, build_reduce,
                      kernel_builder)
from .layout import plan
from .maths import NttMath
from .montgomery import Montgomery, UnsignedMontgomery
from .params import (MONTGOMERY_WIDTHS, NttParams, output_range, output_representation,
                     output_words, strategies)
from .reducers import Reducer, freezer, lifter, reducers
from .cost import basemul_cost, choose_reducer, strategy_cost
from .schedule import (DIRECTIONS, Arithmetic, ReductionSchedule, ScheduleError, forward_input,
                       inverse_input, schedule)
from .shoup import HarveyReducer, Shoup, ShoupReduction, UnsignedFreeze
from .standard_order import standard_order_tables

ORDER_TEXT = {
    "fastest": "fastest order (positions below)",
    "standard": "standard order: block j at D*j..D*j+D-1, zetas[j] = psi^(2 brv(j) + 1) (FIPS 203 and 204)",
    "natural": "natural order: the block of psi^(2i + 1) at D*i..D*i+D-1",
}


@dataclass(frozen=True)
class BlockLayout:
    """The forward NTT's output order: block j holds coefficient k of
    a mod (x^d - zeta_j) at array position positions[j][k]."""

    d: int
    zetas: tuple[int, ...]
    positions: tuple[tuple[int, ...], ...]
    order: str  # the order parameter that chose the positions

    def manifest(self) -> dict:
        return {"order": self.order, "d": self.d,
                "blocks": [{"zeta": z, "positions": list(p)} for z, p in zip(self.zetas, self.positions)]}


def block_layout(math: NttMath, output_order: tuple[int, ...], order: str) -> BlockLayout:
    d = math.d
    positions = [[0] * d for _ in range(math.n // d)]
    for pos, idx in enumerate(output_order):
        positions[idx // d][idx % d] = pos
    return BlockLayout(d, math.final_zetas, tuple(tuple(p) for p in positions), order)


def _arg(p: NttParams, t: Target, name: str, role: str, polys: int = 1, unsigned: bool = False) -> ArgSpec:
    """An array of `polys` polynomials of n coefficients, signed or `unsigned`. Arrays are moved
    with unaligned vector moves, so any element-aligned array works;
    register-aligned ones are fastest (no vector access then crosses a page:
    measured up to 9% on an NTT, 1% for other offsets)."""
    return ArgSpec(name, role, f"{'u' if unsigned else ''}int{t.lane_bits}_t", t.lane_bytes, p.n * polys, t.lane_bytes,
                   t.isa.vector_bits // 8)


def _sum_text(k: int) -> str:
    terms = [f"a_{i}*b_{i}" for i in range(k)]
    return " + ".join(terms) if k <= 3 else f"{terms[0]} + ... + {terms[-1]}"


def _compile(b, symbol: str, contract: Contract, p: NttParams, t: Target, signed: bool = True,
             shoup_pairs: tuple[tuple[int, int], ...] = ()) -> Compiled:
    return compile_kernel(b, symbol, contract, t, modulus=p.q, signed=signed, shoup_pairs=shoup_pairs)


def map_proof(c: Compiled, expect: tuple[tuple[str, ...], ...], blocks: BlockLayout | None = None,
              element: bool = False, copies: int = 1) -> MapProof:
    """What the verifier proved of the map, checked against what the kernel
    must be: linear (or bilinear) mod q in the `expect`ed arguments, and, for
    base multiplication, each output block from the same block of its inputs
    (of each of its `copies` polynomials);
    for a reduction, each element from its own. Anything else is a generator bug."""
    k, proof = c.kernel, c.proof
    [(out, form)] = proof.forms.items()
    found = monomials(form, [a.name for a in k.args])
    if found != expect:
        raise VerifyError(f"{k.symbol}: the verifier finds the map {found} mod q, not {expect}")
    deps = proof.deps[out]
    if element:
        ins = [i for i, a in enumerate(k.args) if a.role != "out"]
        own = [sum(1 << (proof.bases[i] + p) for i in ins) for p in range(len(deps))]
        bad = next((p for p, d in enumerate(deps) if not d or d & ~own[p]), None)
        if bad is not None:
            raise VerifyError(f"{k.symbol}: output element {bad} depends on other input elements")
    if blocks is not None:
        ins = [i for i, a in enumerate(k.args) if a.role != "out"]
        for j, positions in enumerate(blocks.positions):
            allowed = sum(1 << (proof.bases[i] + copy * k.args[0].count + p) for i in ins for p in positions
                          for copy in range(copies))
            if any(deps[p] & ~allowed for p in positions):
                raise VerifyError(f"{k.symbol}: output block {j} depends on inputs outside its block")
    return MapProof("q", found, "element" if element else "block" if blocks is not None else None)


@lru_cache(maxsize=64)
def design(p: NttParams, target: Target | None = None) -> Arithmetic:
    """What the kernels for `target` (default: the first ISA's) are derived
    from: maths, layout, multiplication and the reducer the schedules use.
    The multiplication strategy is the one named, or for "auto" the cheaper
    by the cost model (`strategy_cost`) of those that fit q; Montgomery on a tie.
    Raises ParamError when no schedule keeps the lanes in range (validation
    calls it, so a valid set always emits)."""
    math = NttMath(p.n, p.q, p.layers)
    t = target or p.target
    try:
        layout = plan(p.n, p.layers, t, p.order)
    except ValueError as e:
        raise ParamError(p.source, "order", f"{toml_value(p.order)} is out of reach on {t.isa.name}: {e}; choose "
                                            "another order or leave that ISA out") from None
    kinds = strategies(p)
    options, failure = [], None
    for kind in kinds:
        if kind == "shoup":
            ar = Arithmetic(math, layout, Shoup(p.q, p.width, t.isa), HarveyReducer(p.q, p.width, t.isa))
        else:
            mul = Montgomery(p.q, p.width)
            try:
                ar = Arithmetic(math, layout, mul, choose_reducer(p, math, mul, layout, reducers(p.q, p.width)))
            except ParamError as e:
                failure = e
                continue
        try:
            options.append((strategy_cost(ar, p) if len(kinds) > 1 else 0, kind != "montgomery", ar))
        except ScheduleError as e:
            failure = failure or ParamError(p.source, "q", f"q = {p.q} is too large for n = {p.n} with {kind} "
                                                           f"multiplication: {e}")
    if not options:
        raise failure
    return min(options, key=lambda o: o[:2])[2]


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
    on 64-bit lanes, with no signed products, on unsigned ones."""
    if ar.mul.signed:
        return ar
    if p.width not in MONTGOMERY_WIDTHS:  # no signed products: Montgomery's on unsigned lanes, from pieces
        return Arithmetic(ar.math, ar.layout, UnsignedMontgomery(p.q, p.width, ar.mul.isa), ar.reducer)
    return Arithmetic(ar.math, ar.layout, Montgomery(p.q, p.width), reducers(p.q, p.width)["barrett"])


def build(p: NttParams) -> Bundle:
    """Every kernel for every ISA of `p` (one IR and one layout: the same NTT domain for all)."""
    ar = design(p)
    math, mul, red = ar.math, ar.mul, ar.reducer
    mul.prove()
    bm_mul = montgomery_basemul(p, ar).mul
    lay = block_layout(math, ar.layout.output_order, p.order)
    fns = []
    scale_last: dict[str, bool] = {}  # the first ISA's choice of where the inverse scales, kept by the others
    for t in p.targets:
        own = design(p, t)
        if own.layout.output_order != ar.layout.output_order:  # one NTT domain for every ISA
            raise AssertionError(f"{t.isa.name}: the layout leaves another order than {p.target.isa.name}'s")
        fns += _kernels(p, t, own, lay, scale_last)
    r_bits = f"2^{p.width}"
    params_manifest = {"name": p.name, "family": "ntt", "n": p.n, "q": p.q, "width": p.width,
                       "isa": names_manifest(p.isas), "layers": p.layers, "d": math.d, "reduction": p.policy,
                       "reducer": p.reducer, "reducer_used": red.kind, "mul": p.mul, "mul_used": mul.name,
                       "order": p.order,
                       "basemul_acc": list(p.basemul_acc), "output": dict(p.output), "prefix": p.prefix}
    notes = (f"psi = {math.psi}: primitive 2^{p.layers + 1}-th root of unity mod {p.q}",
             *(() if mul.signed else (f"Shoup multiplication on unsigned lanes: w' = floor(w*{r_bits}/q), values "
                                      f"kept lazily below 4q (Harvey); base multiplication is Montgomery's",)),
             f"Montgomery R = {r_bits}, q^-1 mod {r_bits} = {bm_mul.qinv}; inverse scale constant = "
             f"{math.inverse_scale(mul.r)}")
    lanes = "unsigned " if not mul.signed else ""
    title = f"negacyclic NTT kernels over Z_{p.q}[x]/(x^{p.n}+1), {p.width}-bit {lanes}lanes, {', '.join(p.isas)}"
    return Bundle(p.name, p, p.target, title, params_manifest, tuple(fns), notes,
                  header_constants(p, lay, fns), design=ar)


def _kernels(p: NttParams, t: Target, ar: Arithmetic, lay: BlockLayout, scale_last: dict[str, bool]
             ) -> list[Function]:
    """Forward NTT, base multiplication, inverse NTT, reductions and freeze for one ISA; `scale_last`
    holds, per direction, whether the first ISA built scales on the last layer (every ISA's kernel
    must have the same contract, and the shorter choice could differ between ISAs)."""
    math, layout, mul = ar.math, ar.layout, ar.mul
    bits, isa, signed = p.width, t.isa.name, mul.signed
    available = reducers(p.q, bits) if bits in MONTGOMERY_WIDTHS else {}  # signed lanes' reductions
    q, n, d, r_bits = p.q, p.n, math.d, f"2^{bits}"
    head = (("n", n), ("q", q))
    a_req, a_ens = BoundOf("a", "requires"), BoundOf("a", "ensures")
    fns = []

    outputs = dict(p.output)
    barrett = available.get("barrett")
    # per output range: the final reductions to try, cheapest first (none: the bounds may already
    # suffice; a lazy output is reduced only when it must be, e.g. to meet the inverse's input)
    signed_finishers = {"lazy": (None, barrett), "centred": (None, barrett),
                        "canonical": (freezer(q, bits),)} if available else {}
    unsigned_freeze = UnsignedFreeze(q, bits, t.isa)
    finishers = signed_finishers if signed else {"lazy": (None, ar.reducer),
                                                 "centred": (None, ar.reducer, unsigned_freeze),
                                                 "canonical": (unsigned_freeze,)}
    # the NTTs try a signed centred reduction first where the schedule's bounds say it is needed
    ntt_finishers = {kind: tuple(option for f in tries for option in
                                 ((WhereAbove(f, q), f) if signed and f is not None and f.kind != "freeze" else (f,)))
                     for kind, tries in finishers.items()}
    lane_top = lane_range(bits)[1]  # base multiplication's signed lanes (32-bit Shoup bundles' too)
    bm_ar = montgomery_basemul(p, ar)
    bm_unsigned = not bm_ar.mul.signed
    bm_reducer = barrett or ShoupReduction(q, bits, t.isa)  # for its inputs and sums, where they could leave the lane

    def bm_takes_as_it_is(out: Bound) -> bool:
        """Whether base multiplication takes the forward's output unreduced:
        below 2^(W-1) for the signed products of Shoup bundles, and for
        unsigned ones where their bound stays in the lane (a reduction of
        every output is cheaper than two products by 1 in base multiplication)."""
        if signed:
            return True
        if bm_unsigned:
            return bm_ar.mul.bound(out.hi, out.hi) <= bm_ar.mul.lane_max
        return out.hi <= lane_top

    def first_fitting(output: str | int, make, arg: str, fits=lambda out: True, tries=finishers) -> Compiled:
        """The first build (by `make(finish)`) whose proven output has the range asked for and `fits`
        (a bound asked as a number tries what a centred output tries: it is at least Barrett's)."""
        want = output_range(output, q)
        for finish in tries["centred" if isinstance(output, int) else output]:
            c = make(finish)
            out = c.contract.arg(arg).ensures.bound
            if (want is None or want.lo <= out.lo and out.hi <= want.hi) and fits(out):
                return c
        asked = f"|value| <= {output}" if isinstance(output, int) else output
        raise VerifyError(f"{c.kernel.symbol}: no final reduction gives the {asked} output (proven {out})")

    def ntt(direction: str, contract: Contract, summary: str, fits=lambda out: True) -> tuple[Function, Compiled]:
        def build_with(s: ReductionSchedule) -> Compiled:
            def make(finish) -> Compiled:
                b = kernel_builder(layout)
                build_ntt(b, ar, s, f"{p.prefix}_ntt_{direction}_twiddles_{isa}", finish)
                return _compile(b, f"{p.prefix}_ntt_{direction}_{isa}", contract, p, t, signed)
            return first_fitting(outputs[direction], make, "a", fits, ntt_finishers)

        # the inverse with its scaling on the first layer and on the last: the shorter kernel
        builds = []
        options = (False, True) if direction == "inverse" and signed else (False,)
        for last in (scale_last[direction],) if direction in scale_last else options:
            try:
                bound = contract.arg("a").requires.bound.hi  # (the first-layer schedule under its cache key)
                s = schedule(ar, p.policy, direction, bound, True) if last else \
                    schedule(ar, p.policy, direction, bound)
                c = build_with(s)
                builds.append((len(c.kernel.body), last, s, c))
            except (ScheduleError, VerifyError):
                if not last or direction in scale_last:
                    raise
        _, scale_last[direction], s, c = min(builds, key=lambda x: x[:2])
        return Function(c.kernel, f"ntt_{direction}", c.contract, summary, head,
                        (("reduction", s.manifest()), ("output_range", outputs[direction])),
                        s.describe(), s, map_proof(c, (("a",),))), c

    fwd_in = forward_input(q, signed)
    forward, fc = ntt("forward", Contract(
        (ArgContract(_arg(p, t, "a", "inout", unsigned=not signed),
                     Values(fwd_in, representation="signed" if signed else "unsigned"),
                     Values(None, scale=1, layout=lay, representation=output_representation(outputs["forward"], q))),),
        (("requires: every a[i] in ", a_req),
         ("ensures:  every a[i] in ", a_ens,
          f"{output_words(outputs['forward'], 'a')}, block j at {p.prefix}_ntt_positions[j] (manifest: layout),"),
         (f"          a[pos_j[k]] = (a mod (x^{d} - zeta_j))_k mod {q} (scale 1)",))),
        f"forward negacyclic NTT of a[{n}] in place ({p.layers} layers, blocks of degree {d})",
        fits=bm_takes_as_it_is)
    fns.append(forward)

    fwd_out = fc.contract.arg("a").ensures.bound
    inv_in = inverse_input(bits, q, signed)
    bm_in = Values(fwd_out, layout="ntt_forward output")
    if signed:
        bm_output, bm_finishers = outputs["basemul"], signed_finishers
    elif bm_unsigned:  # finishes chosen for one product's bound first, then for any lane (sums of products)
        bm_output = "lazy" if outputs["basemul"] == "lazy" else "canonical"
        bm_top = bm_ar.mul.bound(fwd_out.hi, fwd_out.hi)
        bm_finishers = {"lazy": (None, ar.reducer.choose(bm_top), ar.reducer.choose(bm_ar.mul.lane_max)),
                        "canonical": (unsigned_freeze.choose(bm_top), unsigned_freeze.choose(bm_ar.mul.lane_max))}
    else:  # the unsigned inverse takes no negative value: its input range [0, 2q), else [0, q)
        bm_output = "lazy" if outputs["basemul"] == "lazy" else "canonical"
        bm_finishers = {"lazy": (lifter(q, bits), freezer(q, bits)), "canonical": (freezer(q, bits),)}
    representation = output_representation(bm_output, q)
    for k in (1, *p.basemul_acc):
        kind = "basemul" if k == 1 else f"basemul_acc{k}"
        per = "" if k == 1 else f", in each of the {k} polynomials"
        bm_contract = Contract(
            (ArgContract(_arg(p, t, "r", "out", unsigned=not signed), None,
                         Values(None, scale=pow(mul.r, -1, q), layout="ntt_forward output", representation=representation)),
             ArgContract(_arg(p, t, "a", "in", k, not signed), bm_in),
             ArgContract(_arg(p, t, "b", "in", k, not signed), bm_in)),
            (("requires: every a[i], b[i] in ", a_req, f" (the forward NTT's output), in its layout{per}"),
             ("ensures:  every r[i] in ", BoundOf("r", "ensures"),
              f"{output_words(bm_output, 'r')}; r_j = a_j*b_j*2^-{bits} mod (x^{d} - zeta_j, {q})" if k == 1 else
              f"{output_words(bm_output, 'r')}; r_j = sum over i < {k} of a_i_j*b_i_j*2^-{bits} "
              f"mod (x^{d} - zeta_j, {q}),"),
             *(() if k == 1 else ((f"          a_i = a[{n}*i .. {n}*i+{n - 1}], b_i likewise",),)),
             (f"          (scale 2^-{bits} mod q, undone by the inverse NTT); r may alias a or b",)))
        def make(finish: Reducer | None, variant: tuple[bool, bool, int]) -> Compiled:
            karatsuba, summed, interleave = variant
            b = kernel_builder(layout)
            build_basemul(b, bm_ar, bm_reducer, f"{p.prefix}_{kind}_zetas_{isa}", fwd_out.magnitude, finish, k,
                          karatsuba, summed, interleave, qinv_in_register=t.isa.encoding.unaligned_memory)
            return _compile(b, f"{p.prefix}_{kind}_{isa}", bm_contract, p, t, signed=not bm_unsigned)

        # reduced at the end only if the output could exceed the range asked for, or the inverse's input;
        # blocks of degree 1 by Karatsuba where that, with its looser bound, costs less or as much with
        # fewer multiplications; two units of blocks interleaved unless that spills (a tie goes to the
        # interleaved build: shorter chains)
        builds = {v: first_fitting(bm_output, partial(make, variant=v), "r",
                                   lambda out: inv_in.lo <= out.lo and out.hi <= inv_in.hi, bm_finishers)
                  for v in basemul_variants(layout)}
        (kara, summed, il), bc = min(builds.items(), key=lambda kv: basemul_cost(executed(kv[1].kernel)))
        facts = (("aliasing", "r may be the same array as a or b"), ("output_range", bm_output),
                 *((("karatsuba", kara),) if layout.d == 2 else ()), *((("summed_factors", summed),) if kara else ()),
                 ("interleaved_units", il))
        fns.append(Function(bc.kernel, "basemul" if k == 1 else "basemul_acc", bc.contract,
                            f"base multiplication r = a*b blockwise mod (x^{d} - zeta_j), NTT domain" if k == 1 else
                            f"base multiply-accumulate r = {_sum_text(k)} blockwise, NTT domain",
                            head, facts if k == 1 else (("k", k), *facts),
                            proof=map_proof(bc, (("a", "b"),), blocks=lay, copies=k)))

    inverse, _ = ntt("inverse", Contract(
        (ArgContract(_arg(p, t, "a", "inout", unsigned=not signed), Values(inv_in, layout="ntt_forward output"),
                     Values(None, scale=mul.r % q, layout="natural",
                            representation=output_representation(outputs["inverse"], q))),),
        (("requires: every a[i] in ", a_req, " (base multiplication's output is), in the forward NTT's layout"),
         ("ensures:  every a[i] in ", a_ens, f"{output_words(outputs['inverse'], 'a')}, natural order,"),
         (f"          a = {r_bits} * INTT(a) mod {q}: forward, basemul, inverse give a*b mod (x^{n}+1, {q})",))),
        f"inverse negacyclic NTT of a[{n}] in place, natural order out")
    fns.append(inverse)

    lane = Bound(*lane_range(bits, signed))
    lane_type = f"{'' if signed else 'u'}int{bits}"
    standalone = ([*available.items(), ("freeze", freezer(q, bits))] if signed else
                  [("shoup", ShoupReduction(q, bits, t.isa)), ("freeze", unsigned_freeze.choose(lane.hi))])
    for kind, r in standalone:
        b = kernel_builder(layout)
        build_reduce(b, layout, r)
        canonical = kind == "freeze"
        rc = _compile(b, f"{p.prefix}_{'freeze' if canonical else 'reduce_' + kind}_{isa}", Contract(
            (ArgContract(_arg(p, t, "a", "inout", unsigned=not signed), Values(lane),
                         Values(None, representation="canonical" if canonical else None, scale=1, layout="natural")),),
            ((f"requires: any {lane_type} a[i]",),
             ("ensures:  every a[i] in ", a_ens, f" (proven over all {r_bits} inputs), congruent to the input mod {q}"
              + (": the canonical representative" if canonical else "")))),
            p, t, signed)
        congruent = map_proof(rc, (("a",),), element=True)
        if canonical:
            fns.append(Function(rc.kernel, "freeze", rc.contract,
                                f"a[{n}] in place to canonical form in [0, {q}) ({r.describe()})", head,
                                proof=congruent))
        else:
            fns.append(Function(rc.kernel, "reduce", rc.contract, f"reduce a[{n}] in place mod {q} ({r.describe()})",
                                head, (("reduction", kind),), proof=congruent))
    fns += _shoup_kernels(p, t, layout, unsigned_freeze)
    return fns


SHOUP_KERNELS = {"mulmod_shoup": "r[i] = a[i]*w[i] mod q", "muladd_shoup": "r[i] = a[i]*w[i] + b[i] mod q"}


def _shoup_kernels(p: NttParams, t: Target, layout, freeze: UnsignedFreeze) -> list[Function]:
    """mulmod_shoup(r, a, w, wp) and muladd_shoup(r, a, w, wp, b) on unsigned
    lanes, wp[i] = floor(w[i]*2^W/q) precomputed by the caller: any a[i],
    w[i] and b[i] in [0, q), r[i] canonical; r may alias a or b."""
    q, bits, n, isa = p.q, p.width, p.n, t.isa.name
    top = (1 << bits) - 1
    fns = []
    for kind, what in SHOUP_KERNELS.items():
        accumulate = kind == "muladd_shoup"
        args = [ArgContract(_arg(p, t, "r", "out", unsigned=True), None,
                            Values(None, representation="canonical", scale=1, layout="natural")),
                ArgContract(_arg(p, t, "a", "in", unsigned=True), Values(Bound(0, top))),
                ArgContract(_arg(p, t, "w", "in", unsigned=True), Values(Bound(0, q - 1))),
                ArgContract(_arg(p, t, "wp", "in", unsigned=True),
                            Values(Bound(0, top), representation=f"floor(w*2^{bits}/q)"))]
        if accumulate:
            args.append(ArgContract(_arg(p, t, "b", "in", unsigned=True), Values(Bound(0, q - 1))))
        contract = Contract(tuple(args), (
            (f"requires: any uint{bits} a[i]; w[i] in [0, {q - 1}] with wp[i] = floor(w[i]*2^{bits}/{q})"
             + (f"; b[i] in [0, {q - 1}]" if accumulate else ""),),
            ("ensures:  every r[i] in ", BoundOf("r", "ensures"), f" (proven), {what}; r may alias a"
             + (" or b" if accumulate else ""),)))
        b = kernel_builder(layout)
        build_mulmod_shoup(b, layout, Shoup(q, bits, t.isa), freeze, accumulate)
        c = _compile(b, f"{p.prefix}_{kind}_{isa}", contract, p, t, signed=False, shoup_pairs=((2, 3),))
        expect = (("a", "w"), ("b",)) if accumulate else (("a", "w"),)
        fns.append(Function(c.kernel, kind, c.contract, f"{what} by Shoup's multiplication, element-wise",
                            (("n", n), ("q", q)),
                            (("aliasing", "r may be the same array as a" + (" or b" if accumulate else "")),
                             ("shoup_pair", ("w", "wp"))),
                            proof=map_proof(c, expect, element=True)))
    return fns


def header_constants(p: NttParams, lay: BlockLayout, fns: list[Function]) -> tuple[CDefine | CTable, ...]:
    """The NTT domain for C users: what the manifest's layout says, as tables."""
    macro, name = p.prefix.upper(), p.prefix
    scales = {f.kind: f.contract.manifest_output()["scale"] for f in fns}
    blocks = len(lay.zetas)
    return (
        CDefine(f"{macro}_N", p.n, "degree: the arrays hold N coefficients"),
        CDefine(f"{macro}_Q", p.q, "the modulus"),
        CDefine(f"{macro}_NTT_D", lay.d, "NTT domain: blocks a mod (x^D - zetas[j]) of D coefficients, in the "
                                         + ORDER_TEXT[p.order]),
        CDefine(f"{macro}_NTT_BLOCKS", blocks, "NTT domain: the number of blocks (N / D)"),
        CDefine(f"{macro}_BASEMUL_SCALE", scales["basemul"], "base multiplication gives scale * a*b mod q"),
        CDefine(f"{macro}_INVERSE_SCALE", scales["ntt_inverse"], "the inverse NTT gives scale * INTT(a) mod q"),
        CTable(f"{name}_ntt_zetas", f"int{p.width}_t", (blocks,), lay.zetas, "zeta of each block"),
        CTable(f"{name}_ntt_positions", "uint16_t", (blocks, lay.d), tuple(x for row in lay.positions for x in row),
               "after the forward NTT, coefficient k of block j is a[positions[j][k]]"),
    ) + standard_order_tables(name, lay.order, lay.positions)


def schedules(bundle: Bundle) -> dict[str, ReductionSchedule]:
    """The reduction schedule each NTT kernel of the bundle was built with, by direction."""
    return {d: bundle.function(f"ntt_{d}").schedule for d in DIRECTIONS}
