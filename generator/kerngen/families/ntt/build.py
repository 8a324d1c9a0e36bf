"""The NTT bundle assembled: for each ISA, the kernels its design
(`design.py`) calls for — forward NTT, base multiplication, inverse NTT, the
standalone reductions and Shoup's products — built, compiled and verified
through the build-verify-accept search, each with its contract
(`contracts.py`) and the check of its proven map; and the NTT domain's
tables for C users."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

from ...core.bundle import Bundle, CDefine, CTable, CUnit, Function
from ...core.compile_cache import CompileCache
from ...core.contract import Bound, Values
from ...core.params import names_manifest
from ...errors import VerifyError
from ...ir.stream import executed
from ...machine.ops import lane_range
from ...machine.registers import VECTOR
from ...machine.target import Target
from ...passes.pipeline import Compiled, compile_kernel
from .contracts import (SHOUP_KERNELS, BlockLayout, basemul_contract, basemul_summary, block_layout,
                        forward_contract, inverse_contract, map_proof, reduce_contract, shoup_contract)
from .cost import basemul_cost
from .design import Finishers, IsaDesign, design, isa_design, montgomery_basemul
from .kernels import basemul_variants, build_basemul, build_mulmod_shoup, build_ntt, build_reduce, kernel_builder
from .layout import NttLayout
from .macc import reduce_once_fits
from .maths import RINGS, ROOT_NAMES, modulus_text, ring_words
from .params import NttParams, output_range
from .plan_unit import context as plan_unit_context, plan_manifest, prototypes as plan_prototypes
from .planned import leaf_design, transform_math, unit_file
from .planned_functions import planned_basemul, planned_functions
from .reducers import Reducer, freezer
from .schedule import DIRECTIONS, ReductionSchedule, ScheduleError, forward_input, inverse_input, schedule
from .harvey import ShoupReduction, UnsignedFreeze
from .shoup import Shoup
from .special64 import SpecialForm64
from .standard_order import order_text, standard_order_tables


def build(p: NttParams, cache: CompileCache | None = None) -> Bundle:
    """Every kernel for every ISA of `p` (one IR and one layout: the same NTT domain for all), compiled
    through `cache` (a fresh one if none is given)."""
    cache = CompileCache() if cache is None else cache
    if p.planned:
        return planned_bundle(p, cache)
    ar = design(p)
    math, mul, red = ar.math, ar.mul, ar.reducer
    mul.prove()
    bm_mul = montgomery_basemul(p, ar).mul
    lay = block_layout(math, ar.layout.output_order, p.order)
    fns = []
    scale_last: dict[str, bool] = {}  # the first ISA's choice of where the inverse scales, kept by the others
    designs = []
    for t in p.targets:
        own = design(p, t)
        if own.layout.output_order != ar.layout.output_order:  # one NTT domain for every ISA (design.py)
            raise AssertionError(f"{t.isa.name}'s NTT domain is not {p.target.isa.name}'s")
        designs.append((t, isa_design(p, t, own)))
    forwards = [_forward(p, t, d, lay, scale_last, cache) for t, d in designs]
    # every ISA's base multiplication takes what any ISA's forward NTT leaves (one contract per function)
    forward_out = _hull(fc.contract.arg("a").ensures.bound for _, fc in forwards)
    for (t, d), forward in zip(designs, forwards, strict=True):
        fns += _kernels(p, t, d, lay, forward, forward_out, scale_last, cache)
    fns = _common_contracts(fns)
    r_bits = f"2^{p.width}"
    params_manifest = manifest_params(p, red.kind, mul.name)
    special = isinstance(mul, SpecialForm64)
    notes = (f"{ROOT_NAMES[p.ring]} = {math.psi}: primitive 2^{math.root_bits}-th root of unity mod {p.q}",
             *(() if mul.signed or special else
               (f"Shoup multiplication on unsigned lanes: w' = floor(w*{r_bits}/q), values "
                f"kept lazily below {mul.reach}q (Harvey); base multiplication is Montgomery's",)),
             *((f"q = 2^64 - 2^b + 1: every value kept in [0, q), sums, differences and products reduced by "
                f"the lane's wrap (2^64 = 2^b - 1 mod q); no Shoup kernels (2q exceeds the lane)",
                f"inverse scale constant = {math.inverse_scale(mul.r)}") if special else
               (f"Montgomery R = {r_bits}, q^-1 mod {r_bits} = {bm_mul.qinv}; inverse scale constant = "
                f"{math.inverse_scale(mul.r)}",)))
    lanes = "unsigned " if not mul.signed else ""
    title = (f"{ring_words(p.ring, p.coset)} NTT kernels over Z_{p.q}[x]/({modulus_text(p.n, p.ring, p.coset)}), "
             f"{p.width}-bit {lanes}lanes, {', '.join(p.isas)}")
    return Bundle(p.name, p, p.target, title, params_manifest, tuple(fns), notes,
                  header_constants(p, lay, fns), design=ar)


def manifest_params(p: NttParams, reducer: str, mul: str) -> dict:
    """The parameters as the manifest records them, with the reducer and multiplication the design chose."""
    return {"name": p.name, "family": "ntt", "n": p.n, "q": p.q, "width": p.width,
            "isa": names_manifest(p.isas), "layers": p.layers, "d": p.d, "reduction": p.policy,
            "reducer": p.reducer, "reducer_used": reducer, "mul": p.mul, "mul_used": mul,
            "order": p.order, **({"ring": p.ring} if p.ring != RINGS[0] else {}),
            **({"coset": p.coset} if p.coset != 1 else {}),
            **({"order_isa": p.order_isa} if p.order_isa is not None else {}),
            **({"root": p.root} if p.root is not None else {}),
            **({"generator": p.generator} if p.generator is not None else {}),
            **({"columns": p.columns} if p.columns != 1 else {}),
            **({"lde": {"added_bits": p.lde.added_bits, "shift": p.lde.shift}} if p.lde is not None else {}),
            "basemul_acc": list(p.basemul_acc), "output": dict(p.output), "prefix": p.prefix}


def _compile(b, symbol: str, contract, p: NttParams, t: Target, cache: CompileCache, signed: bool = True,
             shoup_pairs: tuple[tuple[int, int, int], ...] = ()) -> Compiled:
    return compile_kernel(b, symbol, contract, t, modulus=p.q, signed=signed, shoup_pairs=shoup_pairs, cache=cache)


def build_verify_accept(output: str | int, q: int, make: Callable[[Reducer | None], Compiled], arg: str,
                        tries: Finishers, fits: Callable[[Bound], bool] = lambda out: True) -> Compiled:
    """The search a kernel's final reduction is chosen by: build and verify
    the kernel (`make(finish)`) with each final reduction `tries` holds for
    the output range asked for, cheapest first, and accept the first whose
    proven bound of `arg` has that range and `fits` (a bound asked as a number
    tries what a centred output tries: it is at least Barrett's). Unverified
    kernels (a dry build, `CompileCache.through`) prove nothing: each is built,
    and the last taken."""
    want = output_range(output, q)
    for finish in tries["centred" if isinstance(output, int) else output]:
        c = make(finish)
        out = c.contract.arg(arg).ensures.bound
        if (want is None or want.lo <= out.lo and out.hi <= want.hi) and fits(out):
            return c
    if c.proof is None:
        return c
    asked = f"|value| <= {output}" if isinstance(output, int) else output
    raise VerifyError(f"{c.kernel.symbol}: no final reduction gives the {asked} output (proven {out})")


def _forward(p: NttParams, t: Target, d: IsaDesign, lay: BlockLayout, scale_last: dict[str, bool],
             cache: CompileCache) -> tuple[Function, Compiled]:
    math, signed = d.ar.math, d.ar.mul.signed
    return _ntt(p, t, d, "forward", forward_contract(p, t, math.d, lay, forward_input(p.q, signed), signed),
                f"forward {ring_words(p.ring, p.coset)} NTT of a[{p.n}] in place ({p.layers} layers, blocks of "
                f"degree {math.d})",
                scale_last, cache, fits=d.basemul_takes_as_it_is)


def _hull(bounds) -> Bound:
    bounds = list(bounds)
    return Bound(min(b.lo for b in bounds), max(b.hi for b in bounds))


def _common_contracts(fns: list[Function]) -> list[Function]:
    """Each function's ISA variants with one contract (the dispatch unit calls
    any of them): every `ensures` bound widened to the widest any variant
    proves, which holds for each (ISAs whose products differ, such as 52-bit
    multiply-adds and 64-bit products from pieces, prove different bounds)."""
    variants: dict[str, list[Function]] = {}
    for fn in fns:
        variants.setdefault(fn.symbol.removesuffix("_" + fn.isa), []).append(fn)

    def common(fn: Function) -> Function:
        others = variants[fn.symbol.removesuffix("_" + fn.isa)]
        widest = {i: _hull(o.contract.args[i].ensures.bound for o in others)
                  for i, a in enumerate(fn.contract.args) if a.ensures is not None and a.ensures.bound is not None}
        return dataclasses.replace(fn, contract=fn.contract.proven(widest))
    return [common(fn) for fn in fns]


def _kernels(p: NttParams, t: Target, d: IsaDesign, lay: BlockLayout, forward: tuple[Function, Compiled],
             forward_out: Bound, scale_last: dict[str, bool], cache: CompileCache) -> list[Function]:
    """Base multiplication (of the forward NTTs' output, `forward_out`), inverse NTT, reductions and freeze
    for one ISA, after its `forward` NTT; `scale_last` holds, per direction, whether the first ISA built
    scales on the last layer (every ISA's kernel must have the same contract, and the shorter choice could
    differ between ISAs)."""
    mul, signed = d.ar.mul, d.ar.mul.signed
    inverse_in = inverse_input(p.width, p.q, signed)
    basemuls = _basemuls(p, t, d, lay, forward_out, inverse_in, cache)
    inverse, _ = _ntt(p, t, d, "inverse", inverse_contract(p, t, inverse_in, mul.r, signed),
                      f"inverse {ring_words(p.ring, p.coset)} NTT of a[{p.n}] in place, natural order out",
                      scale_last, cache)
    shoup = () if isinstance(mul, SpecialForm64) else _shoup_kernels(p, t, d.ar.layout, d.unsigned_freeze, cache)
    return [forward[0], *basemuls, inverse, *_reductions(p, t, d, cache), *shoup]


# Groups of a pass interleaved two at a time where the register file holds four groups (two live, their
# products' temporaries and the constants): measured faster for the 64-bit NTTs on zmm, where three or four
# groups spill and run up to twice as long (docs/performance.md, "Measurements behind design choices"); a
# build that spills all the same is built again one group at a time
NTT_INTERLEAVE = 2
_GROUPS_HELD = 4


def ntt_interleave(layout: NttLayout, t: Target) -> int:
    """How many groups of a pass `build_ntt` interleaves for `t` (before a spill sends it back to one)."""
    widest = max(len(g) for ps in (layout.passes, layout.inverse_passes) for pass_ in ps for g in pass_.groups)
    registers = widest * t.isa.registers_per_vector(layout.lanes, layout.lane_bits)
    return NTT_INTERLEAVE if len(t.pool(VECTOR)) >= _GROUPS_HELD * registers else 1


def _build_ntt(p: NttParams, t: Target, d: IsaDesign, direction: str, s: ReductionSchedule, contract,
               cache: CompileCache, finish: Reducer | None) -> Compiled:
    def build(interleave: int) -> Compiled:
        b = kernel_builder(d.ar.layout)
        build_ntt(b, d.ar, s, f"{p.prefix}_ntt_{direction}_twiddles_{t.isa.name}", finish, interleave)
        return _compile(b, f"{p.prefix}_ntt_{direction}_{t.isa.name}", contract, p, t, cache, d.ar.mul.signed)
    interleave = ntt_interleave(d.ar.layout, t)
    c = build(interleave)
    return build(1) if interleave > 1 and c.kernel.spill_slots else c


def _ntt(p: NttParams, t: Target, d: IsaDesign, direction: str, contract, summary: str, scale_last: dict[str, bool],
         cache: CompileCache, fits: Callable[[Bound], bool] = lambda out: True) -> tuple[Function, Compiled]:
    """One NTT; the inverse with its scaling on the first layer and on the last: the shorter kernel."""
    output = dict(p.output)[direction]
    builds = []
    options = (False, True) if direction == "inverse" and d.ar.mul.signed else (False,)
    for last in (scale_last[direction],) if direction in scale_last else options:
        try:
            bound = contract.arg("a").requires.bound.hi  # (the first-layer schedule under its cache key)
            s = schedule(d.ar, p.policy, direction, bound, True) if last else \
                schedule(d.ar, p.policy, direction, bound)
            c = build_verify_accept(output, p.q, partial(_build_ntt, p, t, d, direction, s, contract, cache), "a",
                                    d.ntt_finishers, fits)
            builds.append((len(c.kernel.body), last, s, c))
        except (ScheduleError, VerifyError):
            if not last or direction in scale_last:
                raise
    _, scale_last[direction], s, c = min(builds, key=lambda x: x[:2])
    return Function(c.kernel, f"ntt_{direction}", c.contract, summary, (("n", p.n), ("q", p.q)),
                    (("reduction", s.manifest()), ("output_range", output)),
                    s.describe(), s, map_proof(c, (("a",),))), c


def _build_basemul(p: NttParams, t: Target, d: IsaDesign, kind: str, k: int, magnitude: int, contract,
                   cache: CompileCache, variant: tuple[bool, bool, int, bool], finish: Reducer | None) -> Compiled:
    karatsuba, summed, interleave, once = variant
    b = kernel_builder(d.ar.layout)
    build_basemul(b, d.basemul, d.basemul_reducer, f"{p.prefix}_{kind}_zetas_{t.isa.name}", magnitude, finish, k,
                  karatsuba, summed, interleave, qinv_in_register=t.isa.encoding.unaligned_memory, reduce_once=once)
    return _compile(b, f"{p.prefix}_{kind}_{t.isa.name}", contract, p, t, cache, signed=d.basemul.mul.signed)


def _basemuls(p: NttParams, t: Target, d: IsaDesign, lay: BlockLayout, forward_out: Bound, inverse_in: Bound,
              cache: CompileCache) -> list[Function]:
    """Base multiplication and its multiply-accumulates: reduced at the end only if the output could
    exceed the range asked for, or the inverse's input; blocks of degree 1 by Karatsuba where that,
    with its looser bound, costs less or as much with fewer multiplications; a sum of pointwise
    products reduced once where it fits (`macc`) and costs less; two units of blocks interleaved
    unless that spills (a tie goes to the interleaved build: shorter chains)."""
    layout, signed = d.ar.layout, d.ar.mul.signed
    output, finishers = d.basemul_finishers(p, forward_out)
    inputs = Values(forward_out, layout="ntt_forward output")
    fns = []
    for k in (1, *p.basemul_acc):
        kind = "basemul" if k == 1 else f"basemul_acc{k}"
        contract = basemul_contract(p, t, d.ar.math.d, k, inputs, output, d.ar.mul.r, signed)
        once_fits = reduce_once_fits(d.basemul.mul, layout, k, forward_out.magnitude)
        builds = {v: build_verify_accept(output, p.q, partial(_build_basemul, p, t, d, kind, k, forward_out.magnitude,
                                                              contract, cache, v), "r", finishers,
                                         lambda out: inverse_in.lo <= out.lo and out.hi <= inverse_in.hi)
                  for v in basemul_variants(layout, once_fits)}
        (kara, summed, il, once), bc = min(builds.items(), key=lambda kv: basemul_cost(executed(kv[1].kernel)))
        facts = (("output_range", output),
                 *((("karatsuba", kara),) if layout.d == 2 else ()), *((("summed_factors", summed),) if kara else ()),
                 ("interleaved_units", il), *((("reduce_once", once),) if once_fits else ()))
        fns.append(Function(bc.kernel, "basemul" if k == 1 else "basemul_acc", bc.contract,
                            basemul_summary(d.ar.math.d, k), (("n", p.n), ("q", p.q)),
                            facts if k == 1 else (("k", k), *facts),
                            proof=map_proof(bc, (("a", "b"),), blocks=lay, copies=k)))
    return fns


def _reductions(p: NttParams, t: Target, d: IsaDesign, cache: CompileCache) -> list[Function]:
    """The standalone reductions of any lane value and the freeze to canonical form."""
    q, bits, n, signed = p.q, p.width, p.n, d.ar.mul.signed
    lane = Bound(*lane_range(bits, signed))
    standalone = ([*d.available.items(), ("freeze", freezer(q, bits))] if signed else
                  [*(() if isinstance(d.ar.mul, SpecialForm64) else (("shoup", ShoupReduction(q, bits, t.isa)),)),
                   ("freeze", d.unsigned_freeze.choose(lane.hi))])
    fns = []
    for kind, r in standalone:
        b = kernel_builder(d.ar.layout)
        build_reduce(b, d.ar.layout, r)
        canonical = kind == "freeze"
        rc = _compile(b, f"{p.prefix}_{'freeze' if canonical else 'reduce_' + kind}_{t.isa.name}",
                      reduce_contract(p, t, lane, canonical, signed), p, t, cache, signed)
        congruent = map_proof(rc, (("a",),), element=True)
        if canonical:
            fns.append(Function(rc.kernel, "freeze", rc.contract,
                                f"a[{n}] in place to canonical form in [0, {q}) ({r.describe()})", (("n", n), ("q", q)),
                                proof=congruent))
        else:
            fns.append(Function(rc.kernel, "reduce", rc.contract, f"reduce a[{n}] in place mod {q} ({r.describe()})",
                                (("n", n), ("q", q)), (("reduction", kind),), proof=congruent))
    return fns


def _shoup_kernels(p: NttParams, t: Target, layout, freeze: UnsignedFreeze, cache: CompileCache) -> list[Function]:
    """mulmod_shoup(r, a, w, wp) and muladd_shoup(r, a, w, wp, b) on unsigned
    lanes, wp[i] = floor(w[i]*2^W/q) precomputed by the caller: any a[i],
    w[i] and b[i] in [0, q), r[i] canonical; r may alias a or b."""
    fns = []
    for kind, what in SHOUP_KERNELS.items():
        accumulate = kind == "muladd_shoup"
        b = kernel_builder(layout)
        build_mulmod_shoup(b, layout, Shoup(p.q, p.width, t.isa), freeze, accumulate)
        c = _compile(b, f"{p.prefix}_{kind}_{t.isa.name}", shoup_contract(p, t, kind), p, t, cache, signed=False,
                     shoup_pairs=((2, 3, p.width),))
        expect = (("a", "w"), ("b",)) if accumulate else (("a", "w"),)
        fns.append(Function(c.kernel, kind, c.contract, f"{what} by Shoup's multiplication, element-wise",
                            (("n", p.n), ("q", p.q)),
                            (("shoup_pair", ("w", "wp")),),
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
                                         + order_text(p.order, p.ring, p.coset)),
        CDefine(f"{macro}_NTT_BLOCKS", blocks, "NTT domain: the number of blocks (N / D)"),
        CDefine(f"{macro}_BASEMUL_SCALE", scales["basemul"], "base multiplication gives scale * a*b mod q"),
        CDefine(f"{macro}_INVERSE_SCALE", scales["ntt_inverse"], "the inverse NTT gives scale * INTT(a) mod q"),
        CTable(f"{name}_ntt_zetas", f"{'u' if p.q > 1 << (p.width - 1) else ''}int{p.width}_t", (blocks,),
               lay.zetas, "zeta of each block"),
        CTable(f"{name}_ntt_positions", "uint16_t", (blocks, lay.d), tuple(x for row in lay.positions for x in row),
               "after the forward NTT, coefficient k of block j is a[positions[j][k]]"),
    ) + standard_order_tables(name, lay.order, lay.positions)


def schedules(bundle: Bundle) -> dict[str, ReductionSchedule]:
    """The reduction schedule each NTT kernel of the bundle was built with, by direction."""
    return {d: bundle.function(f"ntt_{d}").schedule for d in DIRECTIONS}


def _block_basemul(p: NttParams, t: Target, forward_out: Bound, cache: CompileCache) -> Function:
    """The base multiplication of a block of a planned transform (`p`: the block's parameters), built as the
    unrolled sets' is."""
    d = isa_design(p, t, design(p, t))
    lay = block_layout(d.ar.math, d.ar.layout.output_order, p.order)
    return _basemuls(p, t, d, lay, forward_out, inverse_input(p.width, p.q, d.ar.mul.signed), cache)[0]


def planned_header_constants(p: NttParams, fns) -> tuple[CDefine, ...]:
    """A planned transform's constants for C users (its NTT domain is the manifest's compact layout)."""
    macro = p.prefix.upper()
    scales = {f.kind: f.contract.manifest_output()["scale"] for f in fns if f.kind in ("basemul", "ntt_inverse")}
    lde = p.lde
    return (CDefine(f"{macro}_N", p.n, "degree: the arrays hold N coefficients (of each column)"),
            CDefine(f"{macro}_Q", p.q, "the modulus"),
            CDefine(f"{macro}_BASEMUL_SCALE", scales["basemul"], "base multiplication gives scale * a*b mod q"),
            CDefine(f"{macro}_INVERSE_SCALE", scales["ntt_inverse"], "the inverse NTT gives scale * INTT(a) mod q"),
            *((CDefine(f"{macro}_COLUMNS", p.columns, "the polynomials: columns of row-major N x COLUMNS arrays, "
                                                      "element (i, c) at i * COLUMNS + c"),
               CDefine(f"{macro}_ARRAY_N", p.n * p.columns, "the elements of each array: N * COLUMNS"))
              if p.columns > 1 else ()),
            *((CDefine(f"{macro}_LDE_N", p.n << lde.added_bits, "the coset extension's rows (N * 2^added_bits)"),
               CDefine(f"{macro}_LDE_SHIFT", lde.shift, "the coset extension evaluates on LDE_SHIFT times the "
                                                        "LDE_N-th roots of unity")) if lde is not None else ()))


def planned_bundle(p: NttParams, cache: CompileCache) -> Bundle:
    """A planned transform's bundle: per ISA the forward and inverse transforms (C drivers) and their codelets."""
    transforms = [f for t in p.targets for f in planned_functions(p, t, cache)]
    # every ISA's base multiplication takes what any ISA's forward transform leaves (one contract per function)
    forward_out = _hull(f.contract.arg("a").ensures.bound for f in transforms if f.kind == "ntt_forward")
    fns = _common_contracts(transforms + [f for t in p.targets
                                          for f in planned_basemul(p, t, forward_out, _block_basemul, cache)])
    ar = leaf_design(p, p.target)
    math = transform_math(p)
    notes = (f"{ROOT_NAMES[p.ring]} = {math.psi}: primitive 2^{math.root_bits}-th root of unity mod {p.q}",
             f"planned: the transforms run stages of codelets, their twiddles built at load time ({p.name}_plan.c)")
    title = (f"{ring_words(p.ring, p.coset)} NTT kernels over Z_{p.q}[x]/({modulus_text(p.n, p.ring, p.coset)}), "
             f"{p.width}-bit {'' if ar.mul.signed else 'unsigned '}lanes, {', '.join(p.isas)} (planned)")
    header = planned_header_constants(p, fns)
    fns = [dataclasses.replace(f, facts=f.facts + (("plan", plan_manifest(f)),)) if f.driver else f
           for f in fns]
    bundle = Bundle(p.name, p, p.target, title, manifest_params(p, ar.reducer.kind, ar.mul.name), tuple(fns),
                    notes, header, design=ar)
    return dataclasses.replace(bundle, prototypes=plan_prototypes(bundle),
                               units=(CUnit(unit_file(p), "ntt_plan.j2", plan_unit_context(bundle),
                                            "C: the planned transforms (stages of the codelets in the .asm, their "
                                            "twiddle tables built at the first call) and their stage API"),))
