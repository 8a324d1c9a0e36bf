"""The 16-bit NTT family: parameters -> maths -> layout -> bounds -> kernels ->
allocation -> verification, as a `Bundle` of forward NTT, inverse NTT and base
multiplication."""

from __future__ import annotations

from .bounds import ReductionSchedule, schedule
from .family import Bundle, Function
from .isa.abi import SYSV
from .isa.ir import ArgSpec, Builder, Kernel
from .isa.pipeline import compile_kernel
from .kernels.ntt16 import build_basemul, build_ntt, build_reduce, kernel_builder
from .kernels.ntt_layout import NttLayout, plan
from .kernels.reductions import Reducer, montgomery_bound, reducers
from .numtheory import R, NttMath
from .params import NttParams
from .lemmas import prove_montgomery
from .verify import Proof, verify_kernel

# the inverse adds pairs before its first multiplication (which carries the scaling)
INVERSE_INPUT = (-16383, 16383)


def input_bound(math: NttMath, direction: str) -> int:
    """Largest |input| the forward or inverse NTT accepts (its contract)."""
    return math.q - 1 if direction == "forward" else INVERSE_INPUT[1]


def _arg(name: str, role: str, n: int) -> ArgSpec:
    return ArgSpec(name, role, "int16_t", 2, n, 32)


def layout_manifest(math: NttMath, layout: NttLayout) -> dict:
    d = math.d
    positions: list[list[int]] = [[0] * d for _ in range(math.n // d)]
    for pos, idx in enumerate(layout.output_order):
        positions[idx // d][idx % d] = pos
    return {"d": d, "blocks": [{"zeta": z, "positions": p} for z, p in zip(math.final_zetas, positions)]}


def _bound_text(b: tuple[int, int]) -> str:
    return f"[{b[0]}, {b[1]}]"


def _compile_verify(b: Builder, symbol: str, args, inputs, q) -> tuple[Kernel, Proof]:
    kernel = compile_kernel(b, symbol, args, SYSV)
    return kernel, verify_kernel(kernel, inputs, q)


def choose_reducer(math: NttMath, layout: NttLayout, policy: str, kind: str) -> Reducer:
    """The named reducer, or for "auto" the cheapest by the cost model: every
    multiplication counts twice (the NTTs are bound by the multiplier ports)."""
    available = reducers(math.q)
    if kind != "auto":
        return available[kind]

    def cost(r: Reducer) -> int:
        count = sum(schedule(math, layout, policy, d, input_bound(math, d), r).count
                    for d in ("forward", "inverse"))
        return count * (r.instructions + 2 * r.multiplications)

    return min(available.values(), key=lambda r: (cost(r), r.kind != "barrett"))


def build(p: NttParams) -> Bundle:
    policy = p.policy
    math = NttMath(p.n, p.q, p.layers)
    layout = plan(p.n, p.layers)
    red = choose_reducer(math, layout, policy, p.reducer)
    prove_montgomery(p.q)  # every butterfly and product relies on it; the verifier checks ranges only
    lay = layout_manifest(math, layout)
    q, n = p.q, p.n
    common = {"n": n, "q": q}
    fns = []

    in_fwd = (-input_bound(math, "forward"), input_bound(math, "forward"))
    sf = schedule(math, layout, policy, "forward", in_fwd[1], red)
    b = kernel_builder(layout)
    build_ntt(b, math, layout, sf, red, f"{p.prefix}_ntt_forward_twiddles")
    sym = f"{p.prefix}_ntt_forward_avx2"
    kf, proof_f = _compile_verify(b, sym, (_arg("a", "inout", n),), {0: in_fwd}, q)
    out_f = proof_f.hull(0)
    fns.append(Function(kf, "ntt_forward", "avx2", "int16", {
        **common,
        "input": {"bound": list(in_fwd), "representation": "signed"},
        "output": {"bound": list(out_f), "scale": 1, "layout": lay},
        "reduction": _schedule_manifest(sf),
    }, f"forward negacyclic NTT of a[{n}] in place ({p.layers} layers, blocks of degree {math.d})", (
        f"requires: every a[i] in {_bound_text(in_fwd)}",
        f"ensures:  every a[i] in {_bound_text(out_f)} (proven), block j at the positions the manifest lists,",
        f"          a[pos_j[k]] = (a mod (x^{math.d} - zeta_j))_k mod {q} (scale 1)",
    ), sf.describe()))

    bm_bound = max(-out_f[0], out_f[1])
    reduce_inputs = math.d * montgomery_bound(bm_bound, bm_bound, q) > 32767
    in_bm = out_f
    sym = f"{p.prefix}_basemul_avx2"
    args = (_arg("r", "out", n), _arg("a", "in", n), _arg("b", "in", n))
    for reduce_outputs in (False, True):  # reduce outputs only if they could exceed the inverse's input
        b = kernel_builder(layout)
        build_basemul(b, math, layout, reducers(q)["barrett"], reduce_inputs, f"{p.prefix}_basemul_zetas",
                      reduce_outputs)
        kb, proof_b = _compile_verify(b, sym, args, {1: in_bm, 2: in_bm}, q)
        out_b = proof_b.hull(0)
        if INVERSE_INPUT[0] <= out_b[0] and out_b[1] <= INVERSE_INPUT[1]:
            break
    r_inv = pow(R, -1, q)
    fns.append(Function(kb, "basemul", "avx2", "int16", {
        **common,
        "input": {"bound": list(in_bm), "layout": "ntt_forward output"},
        "output": {"bound": list(out_b), "scale": r_inv, "layout": "ntt_forward output"},
        "aliasing": "r may be the same array as a or b",
    }, f"base multiplication r = a*b blockwise mod (x^{math.d} - zeta_j), NTT domain", (
        f"requires: every a[i], b[i] in {_bound_text(in_bm)} (the forward NTT's output), in its layout",
        f"ensures:  every r[i] in {_bound_text(out_b)} (proven); r_j = a_j*b_j*2^-16 mod (x^{math.d} - zeta_j, {q})",
        "          (scale 2^-16 mod q, undone by the inverse NTT); r may alias a or b",
    )))

    in_inv = INVERSE_INPUT
    si = schedule(math, layout, policy, "inverse", in_inv[1], red)
    b = kernel_builder(layout)
    build_ntt(b, math, layout, si, red, f"{p.prefix}_ntt_inverse_twiddles")
    sym = f"{p.prefix}_ntt_inverse_avx2"
    ki, proof_i = _compile_verify(b, sym, (_arg("a", "inout", n),), {0: in_inv}, q)
    out_i = proof_i.hull(0)
    fns.append(Function(ki, "ntt_inverse", "avx2", "int16", {
        **common,
        "input": {"bound": list(in_inv), "layout": "ntt_forward output"},
        "output": {"bound": list(out_i), "scale": R % q, "layout": "natural"},
        "reduction": _schedule_manifest(si),
    }, f"inverse negacyclic NTT of a[{n}] in place, natural order out", (
        f"requires: every a[i] in {_bound_text(in_inv)} (base multiplication's output is), in the forward NTT's layout",
        f"ensures:  every a[i] in {_bound_text(out_i)} (proven), natural order,",
        f"          a = 2^16 * INTT(a) mod {q}: forward, basemul, inverse give a*b mod (x^{n}+1, {q})",
    ), si.describe()))

    for kind, r in reducers(q).items():
        b = kernel_builder(layout)
        build_reduce(b, layout, r)
        sym = f"{p.prefix}_reduce_{kind}_avx2"
        kr, proof_r = _compile_verify(b, sym, (_arg("a", "inout", n),), {0: (-32768, 32767)}, q)
        out_r = proof_r.hull(0)
        how = ("shifts, masks and adds: " + _special_text(r) if kind == "special"
               else "centred Barrett, two multiplications")
        fns.append(Function(kr, "reduce", "avx2", "int16", {
            **common,
            "reduction": kind,
            "input": {"bound": [-32768, 32767]},
            "output": {"bound": list(out_r), "scale": 1, "layout": "natural"},
        }, f"reduce a[{n}] in place mod {q} ({how})", (
            "requires: any int16 a[i]",
            f"ensures:  every a[i] in {_bound_text(out_r)} (proven over all 2^16 inputs), congruent to the input mod {q}",
        )))

    params_manifest = {"name": p.name, "family": "ntt", "n": n, "q": q, "width": p.width, "isa": p.isa,
                       "layers": p.layers, "d": math.d, "reduction": policy, "reducer": p.reducer,
                       "reducer_used": red.kind, "prefix": p.prefix}
    notes = (f"psi = {math.psi}: primitive 2^{p.layers + 1}-th root of unity mod {q}",
             f"Montgomery R = 2^16, q^-1 mod 2^16 = {math.qinv}; inverse scale constant = {math.inverse_scale()}")
    return Bundle(p.name, p, params_manifest, tuple(fns), notes)


def _special_text(r: Reducer) -> str:
    """The special-form identity in words, from the idiom's own steps."""
    split = next(step for step in r.idiom.steps if step[0] == "vpsraw")[3]
    terms = []
    for op, dst, a, b in r.idiom.steps:
        if op in ("vpaddw", "vpsubw"):
            term = b if isinstance(b, str) else a
            shift = next((s[3] for s in r.idiom.steps if s[1] == term and s[0] == "vpsllw"), 0)
            terms.append(("+ " if op == "vpaddw" else "- ") + (f"(h << {shift})" if shift else "h"))
    return f"x = h*2^{split} + l, x = l {' '.join(terms)} mod q"


def _schedule_manifest(s: ReductionSchedule) -> dict:
    return {"policy": s.policy, "reduction": s.reduction, "reductions": s.count,
            "max_bound": list(s.max_bound),
            "before_layer": [{"layer": l, "registers": sorted(r)} for l, r in s.before if r],
            "after_last_layer": s.at_end}
