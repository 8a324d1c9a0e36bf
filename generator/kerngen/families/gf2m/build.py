"""The GF(2^m) bundle: every kernel of a field, compiled, with its contract."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...core.bundle import Bundle, Function
from ...core.compile_cache import CompileCache
from ...core.contract import ArgContract, Bound, Contract, Values
from ...errors import AllocationError, VerifyError
from ...core.params import names_manifest
from ...core.proof import MapProof, monomials
from ...ir.instr import ArgSpec
from ...machine.ops import spec
from ...ir.stream import executed
from ...passes.pipeline import compile_kernel
from ...machine.target import Target
from .gf2x import poly_text
from .kernels import Field
from .mul import MulConfig
from .params import Gf2mParams
from .plan import FieldPlan, folds, itoh_tsujii_chain
from .reduce import gpr_reduce_streams, reduce_gpr, streams_by_pairs
from .vec import Pairs

MSQR_STEPS = (2, 4, 8, 16)


@dataclass(frozen=True)
class KernelSpec:
    kind: str
    short: str  # symbol part: prefix_short_isa
    body: Callable[[Pairs], None]
    args: tuple[ArgContract, ...]
    summary: str
    text: tuple[str, ...]  # contract lines
    facts: tuple[tuple[str, object], ...] = ()
    gpr: bool = False  # general-purpose registers only
    expect: tuple[tuple[str, ...], ...] | None = None  # the GF(2)-multilinear map it must be


def _arg(name: str, role: str, count: int) -> ArgSpec:
    return ArgSpec(name, role, "uint64_t", 8, count, 8)


def build(params: Gf2mParams, cfg: MulConfig | None = None, msqr_steps=MSQR_STEPS,
          cache: CompileCache | None = None) -> Bundle:
    """Every GF(2^m) kernel for every ISA of `params`, compiled (through `cache`, a fresh one if none is
    given), with its manifest facts."""
    cache = CompileCache() if cache is None else cache
    functions = [fn for t in params.targets for fn in _kernels(params, t, cfg, msqr_steps, cache)]
    f = Field(params, params.target, cfg)
    m, n, plan = params.m, params.limbs, f.plan
    poly_s = poly_text(params.poly)
    pm = {"name": params.name, "family": "gf2m", "m": m, "poly": list(params.poly), "isa": names_manifest(params.isas),
          "prefix": params.prefix}
    fields = [Field(params, t, cfg) for t in params.targets]
    notes = (f"f = {poly_s}, {n} limbs of 64 bits, slack s = {plan.slack} bits", *_plan_lines(f),
             "sse bundles are legacy-encoded (no VEX); avx2 bundles use VEX-encoded pclmulqdq on xmm "
             "(needs AVX and PCLMULQDQ, not VPCLMULQDQ)",
             *(("512-bit kernels multiply one element in one zmm register: four vpclmulqdq and a one-pass "
                "reduction by valignq, vpshrdq and vpternlogq (needs AVX512F, AVX512VBMI2, VPCLMULQDQ)",)
               if any(f.whole for f in fields) else ()),
             *(("EVEX kernels square without carry-less products: vgf2p8affineqb spreads each byte's nibbles "
                "to every other bit and vpunpcklbw/vpunpckhbw interleave them (needs GFNI)",)
               if any(f.spread for f in fields) else ()))
    return Bundle(params.name, params, params.target, f"GF(2^{m}) arithmetic, f = {poly_s}", pm, tuple(functions),
                  notes)


def _chunk_lines(f: Field, plan: FieldPlan, g: str) -> list[str]:
    return [f"{g} chunk {c.q}: 0x{c.bits:x}"
            + (" (plain xor)" if c.bits == 1 else
               " (two shifts per pair)" if f.cfg.single_shift and c.single_shift is not None
               else " (one carry-less product per word)") for c in plan.chunks]


def _plan_lines(f: Field) -> tuple[str, ...]:
    """The products' configuration, g's chunks and the folds, in words."""
    m, n, s, plan, lazy = f.p.m, f.n, f.plan.slack, f.plan, f.lazy_plan
    cfg_line = (f"products: {f.cfg.base} blocks of 128 bits, "
                + (f"Karatsuba split from {f.cfg.karatsuba_min} blocks" if f.cfg.karatsuba_min
                   else "schoolbook over blocks"))
    lazy_line = f"lazy form (degree < {64 * n}): remainders modulo x^{s} f = {poly_text(lazy.poly)}"
    if streams_by_pairs(lazy):
        return (cfg_line, lazy_line + ", in one pass from the top pair down, each word folded once",
                *_chunk_lines(f, lazy, f"x^{s}(f - x^{m})"),
                f"reduced form: the lazy form with its {s} bits above x^{m} folded once more (gf2m_freeze)")
    return (cfg_line, *_chunk_lines(f, plan, f"f - x^{m}"),
            *[f"fold {i + 1}: degree <= {fd.bound_in} -> <= {fd.bound_out} "
              f"({fd.hi_words} words above x^{m} times f - x^{m})" for i, fd in enumerate(folds(plan, 2 * m - 2))],
            lazy_line + ", by folds at x^" + str(64 * n))


def _kernels(params: Gf2mParams, target: Target, cfg: MulConfig | None, msqr_steps, cache: CompileCache
             ) -> list[Function]:
    f = Field(params, target, cfg)
    m, n, isa = params.m, params.limbs, target.isa.name
    poly_s = poly_text(params.poly)
    elem = Values(Bound(0, (1 << m) - 1), representation="reduced", bits=m, limbs=n)
    wide = Values(Bound(0, (1 << (2 * m - 1)) - 1), representation="unreduced", bits=2 * m - 1, limbs=2 * n)
    degree = f"degree < {m} (fully reduced mod f)"
    lazy = Values(Bound(0, (1 << (64 * n)) - 1), representation="lazy", bits=64 * n, limbs=n)
    lazy_text = (f"{n} little-endian uint64 limbs, any {64 * n} bits (lazy form: degree < {64 * n}, "
                 "the element is its remainder mod f)")
    red = f"{n} little-endian uint64 limbs, {degree}"
    alias = "out may be the same buffer as any input (all inputs are read before out is written)"

    def args(out_count: int, out: Values, *ins: tuple[str, int, Values | None],
             may_alias: tuple[str, ...] | None = None) -> tuple[ArgContract, ...]:
        """out, then the inputs; out may be any input unless `may_alias` names fewer."""
        aliased = tuple(name for name, _, _ in ins) if may_alias is None else may_alias
        return (ArgContract(_arg("out", "out", out_count), None, out, aliased),) + tuple(
            ArgContract(_arg(name, "in", count), values) for name, count, values in ins)

    plan = f.plan
    plan_lines = _plan_lines(f)
    reduce_args = args(n, elem, ("c", 2 * n, wide))
    reduce_text = (f"requires: c: {2 * n} little-endian uint64 limbs, degree <= {2 * m - 2} (below 2^{2 * m - 1}); "
                   f"limbs above {(2 * m - 2) // 64} are not read", "ensures: out = c mod f: " + red, alias)
    specs = [
        KernelSpec("gf2m_mul", "mul", f.k_mul, args(n, elem, ("a", n, elem), ("b", n, elem)),
                   f"out = a * b mod f in GF(2^{m})", ("requires: a, b: " + red, "ensures: out = a*b mod f: " + red,
                                                       alias), expect=(("a", "b"),)),
        KernelSpec("gf2m_sqr", "sqr", f.k_sqr, args(n, elem, ("a", n, elem)), f"out = a^2 mod f in GF(2^{m})",
                   ("requires: a: " + red, "ensures: out = a^2 mod f: " + red, alias), expect=(("a",),)),
        KernelSpec("gf2m_mul_lazy", "mul_lazy", f.k_mul_lazy, args(n, lazy, ("a", n, lazy), ("b", n, lazy)),
                   f"out = a * b mod f in GF(2^{m}), lazy form (degree < {64 * n}; gf2m_freeze reduces it)",
                   ("requires: a, b: " + lazy_text, "ensures: out ≡ a*b (mod f): " + lazy_text, alias),
                   expect=(("a", "b"),)),
        KernelSpec("gf2m_sqr_lazy", "sqr_lazy", f.k_sqr_lazy, args(n, lazy, ("a", n, lazy)),
                   f"out = a^2 mod f in GF(2^{m}), lazy form (degree < {64 * n}; gf2m_freeze reduces it)",
                   ("requires: a: " + lazy_text, "ensures: out ≡ a^2 (mod f): " + lazy_text, alias),
                   expect=(("a",),)),
        KernelSpec("gf2m_freeze", "freeze", f.k_freeze, args(n, elem, ("a", n, lazy)),
                   "out = a mod f: a lazy element in its reduced form",
                   ("requires: a: " + lazy_text, "ensures: out = a mod f: " + red, alias), expect=(("a",),)),
        KernelSpec("gf2m_reduce", "reduce", f.k_reduce, reduce_args,
                   f"out = c mod f for an unreduced c of degree <= {2 * m - 2}", reduce_text, (("registers", "xmm"),),
                   expect=(("c",),)),
        KernelSpec("gf2m_mulwide", "mulwide", f.k_mulwide, args(2 * n, wide, ("a", n, elem), ("b", n, elem)),
                   "out = a * b in GF(2)[x], not reduced (xor such products, then gf2m_reduce once)",
                   ("requires: a, b: " + red, f"ensures: out = a*b: {2 * n} limbs, degree <= {2 * m - 2}, not reduced",
                    alias), expect=(("a", "b"),)),
        KernelSpec("gf2m_muladd", "muladd", f.k_muladd,
                   args(n, elem, ("a", n, elem), ("b", n, elem), ("c", n, elem), ("d", n, elem)),
                   f"out = a*b + c*d mod f in GF(2^{m}), one reduction",
                   ("requires: a, b, c, d: " + red, "ensures: out = a*b + c*d mod f: " + red, alias),
                   expect=(("a", "b"), ("c", "d"))),
    ]
    if gpr_reduce_streams(plan):  # the same reduction on 64-bit registers, to measure beside the xmm one
        specs.append(KernelSpec("gf2m_reduce", "reduce_gpr", lambda v: reduce_gpr(v.b, plan, 2 * m - 2),
                                reduce_args, f"out = c mod f for an unreduced c of degree <= {2 * m - 2} "
                                "(64-bit general registers, one pass from the top word down)", reduce_text,
                                (("registers", "gpr"),), gpr=True, expect=(("c",),)))
    for k in msqr_steps:
        how = "one precomputed linear map, applied under masks" if f.uses_map(k) else f"{k} squarings"
        specs.append(KernelSpec("gf2m_msqr", f"msqr{k}", (lambda v, k=k: f.k_msqr(v, k)), args(n, elem, ("a", n, elem)),
                                f"out = a^(2^{k}) mod f in GF(2^{m}) ({how})",
                                ("requires: a: " + red, f"ensures: out = a^(2^{k}) mod f: " + red, alias),
                                (("k", k),), expect=(("a",),)))
    step_args = args(4 * n, elem, ("st", 4 * n, elem), ("x", n, elem), ("c", n, elem), ("swap", 1, None),
                     may_alias=("st",))
    step_summary = f"one Montgomery-ladder step in López–Dahab x-only coordinates over GF(2^{m})"
    step_text = (f"requires: st = (X0, Z0, X1, Z1), four elements of {n} limbs each, {degree}",
                 "requires: x = x-coordinate of P, c = sqrt(b) for the curve y^2 + xy = x^3 + a x^2 + b "
                 f"(both {degree}); swap[0] = 0 or all ones",
                 "ensures: with (R0, R1) = (R1, R0) when swap[0] is all ones: out = (X(2 R0), Z(2 R0), "
                 "X(R0 + R1), Z(R0 + R1)) given R1 - R0 = P; X(2R) = X^4 + b Z^4, Z(2R) = X^2 Z^2, "
                 f"Z(R0 + R1) = (X0 Z1 + X1 Z0)^2, X(R0 + R1) = x Z(R0 + R1) + X0 Z1 X1 Z0; all {degree}",
                 "out may be the same buffer as st (all inputs are read before out is written)")
    specs.append(KernelSpec("gf2m_ladder_step", "ladder_step", f.k_ladder_step, step_args, step_summary, step_text))
    if f.wide:
        specs.append(KernelSpec("gf2m_ladder_step", "ladder_step2", f.k_ladder_step2, step_args,
                                step_summary + " (two operations per ymm lane pair; needs VPCLMULQDQ)", step_text))
    chain = itoh_tsujii_chain(m)
    maps = sorted({k for s_, k in chain if s_ == "double" and f.uses_map(k)})
    specs.append(KernelSpec(
        "gf2m_inv", "inv", f.k_inv, args(n, elem, ("a", n, elem)),
        f"out = a^-1 mod f in GF(2^{m}) (Itoh-Tsujii: {len(chain)} multiplications; "
        + (f"a^(2^k) as a linear map for k in {maps}, squarings otherwise)" if maps else f"{m - 1} squarings)"),
        ("requires: a: " + red, "ensures: out = a^(2^m - 2) mod f, the inverse of a when a != 0, "
         "and 0 when a = 0: " + red, alias),
        (("chain", [f"{s} {k}" for s, k in chain]), ("msqr_maps", maps))))

    functions = []
    for s in specs:
        v = f.new()
        s.body(v)
        symbol = f"{params.prefix}_{s.short}_{isa}"
        contract = Contract(s.args, tuple((line,) for line in s.text + (f"f = {poly_s}; limbs 8-byte aligned; "
                                                                          "constant time",)))
        try:
            compiled = compile_kernel(v.b, symbol, contract, target, gf2=True, cache=cache)
        except AllocationError:
            if not s.gpr:
                raise
            # GPRs are never spilled: words waiting to be folded (about n of
            # them for g with a middle chunk above the first) may need the
            # callee-saved registers too, at the price of their push and pop;
            # beyond those, the field gets the xmm reduction only
            try:
                compiled = compile_kernel(v.b, symbol, contract, target, gf2=True, callee_saved=True,
                                          cache=cache)
            except AllocationError:
                continue
        kernel = compiled.kernel
        proof = None  # (a dry build, `CompileCache.through`, derives no map)
        if compiled.proof is not None:
            [form] = compiled.proof.forms.values()
            found = monomials(form, [a.name for a in kernel.args])
            if s.expect is not None and found != s.expect:
                raise VerifyError(f"{symbol}: the verifier finds the map {found} over GF(2), not {s.expect}")
            proof = MapProof("gf2", found)
        run = executed(kernel)
        facts = s.facts + (("static", {"instructions": len(run),
                              "pclmulqdq": sum(1 for ins in run if spec(ins.op).cls == "clmul"),
                              "spill_slots": kernel.spill_slots}),)
        notes = plan_lines if s.kind in ("gf2m_mul", "gf2m_reduce") else ()
        functions.append(Function(kernel, s.kind, contract, s.summary, (("m", m), ("poly", list(params.poly))),
                                  facts, notes, proof=proof))
    return functions
