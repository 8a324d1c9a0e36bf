"""Test cases for the NTT family, judged against `reference` (SymPy).

Inputs are random and at the edges of each input contract (all at the
maximum, all at the minimum, alternating). The round trip forward NTT ->
base multiplication -> inverse NTT runs as a chain of harness calls.
"""

from __future__ import annotations

import random
import sys

from ...core.bundle import BenchItem, Bundle, Check, Comparison
from ...core.family import Runner
from ...harness.driver import Arg, Case
from ...ir.instr import ArgSpec
from .baseline import build as build_baseline, constants_sympy
from .reference import block_product, layout_is_crt_basis, negacyclic_product, reduce_block


def _fn(bundle: Bundle, kind: str, symbol: str | None = None) -> dict:
    """A function's manifest entry: the checks judge kernels by what the manifest promises."""
    return bundle.function(kind, symbol).manifest()


def _arg(spec: ArgSpec, data=None, alias_of: int | None = None) -> Arg:
    return Arg(spec.role, spec.elem_bytes, spec.count, spec.align, None if data is None else tuple(data), alias_of)


def _specs(bundle: Bundle, kind: str) -> tuple[ArgSpec, ...]:
    return bundle.function(kind).kernel.args


def edge_inputs(lo: int, hi: int, n: int, rng: random.Random, randoms: int) -> list[tuple[str, list[int]]]:
    out = [("max", [hi] * n), ("min", [lo] * n), ("alternating", [hi if i % 2 else lo for i in range(n)]),
           ("alternating2", [lo if i % 2 else hi for i in range(n)])]
    out += [(f"random{k}", [rng.randint(lo, hi) for _ in range(n)]) for k in range(randoms)]
    return out


def _in_bound(vals: list[int], bound: list[int]) -> str | None:
    for i, v in enumerate(vals):
        if not bound[0] <= v <= bound[1]:
            return f"element {i} = {v} is outside the output bound {bound}"
    return None


def checks(bundle: Bundle, seed: int, randoms: int = 3) -> list[Check]:
    rng = random.Random(seed)
    n, q = bundle.params.n, bundle.params.q
    fwd, inv, bm = _fn(bundle, "ntt_forward"), _fn(bundle, "ntt_inverse"), _fn(bundle, "basemul")
    layout = fwd["output"]["layout"]
    out: list[Check] = []

    def forward_judge(a: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = _in_bound(got, fwd["output"]["bound"])
            if bad:
                return bad
            scale = fwd["output"]["scale"]
            for j, blk in enumerate(layout["blocks"]):
                want = reduce_block(a, layout["d"], blk["zeta"], q)
                have = [got[p] % q for p in blk["positions"]]
                if have != [scale * w % q for w in want]:
                    return f"block {j} (zeta {blk['zeta']}): got {have}, want {[scale * w % q for w in want]}"
            return None
        return judge

    [a_spec] = _specs(bundle, "ntt_forward")
    for name, a in edge_inputs(*fwd["input"]["bound"], n, rng, randoms):
        out.append(Check(Case(f"forward-{name}", fwd["symbol"], (_arg(a_spec, a),)), forward_judge(a)))

    def inverse_judge(y: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = _in_bound(got, inv["output"]["bound"])
            if bad:
                return bad
            scale = inv["output"]["scale"]
            for j, blk in enumerate(layout["blocks"]):
                have = reduce_block(got, layout["d"], blk["zeta"], q)
                want = [scale * y[p] % q for p in blk["positions"]]
                if have != want:
                    return f"block {j}: the output reduces to {have}, want scale*input = {want}"
            return None
        return judge

    [a_spec] = _specs(bundle, "ntt_inverse")
    for name, y in edge_inputs(*inv["input"]["bound"], n, rng, randoms):
        out.append(Check(Case(f"inverse-{name}", inv["symbol"], (_arg(a_spec, y),)), inverse_judge(y)))

    def basemul_judge(a: list[int], b: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = _in_bound(got, bm["output"]["bound"])
            if bad:
                return bad
            scale = bm["output"]["scale"]
            for j, blk in enumerate(layout["blocks"]):
                pa, pb = [a[p] for p in blk["positions"]], [b[p] for p in blk["positions"]]
                want = [scale * w % q for w in block_product(pa, pb, blk["zeta"], q)]
                have = [got[p] % q for p in blk["positions"]]
                if have != want:
                    return f"block {j}: got {have}, want {want}"
            return None
        return judge

    for f in bundle.functions:
        if f.kind != "reduce":
            continue
        red = _fn(bundle, f.kind, f.symbol)

        def reduce_judge(x: list[int], red=red):
            def judge(outputs: dict[int, list[int]]) -> str | None:
                got = outputs[0]
                bad = _in_bound(got, red["output"]["bound"])
                if bad:
                    return bad
                wrong = next((i for i in range(n) if (got[i] - x[i]) % q), None)
                return None if wrong is None else f"element {wrong}: {got[wrong]} is not congruent to {x[wrong]}"
            return judge

        lo, hi = red["input"]["bound"]
        every = list(range(lo, hi + 1))
        total = len(every)
        sweep = [("sweep", every[k:k + n]) for k in range(0, total, n)][:: max(1, total // n // 8)]
        [x_spec] = f.kernel.args
        for name, x in edge_inputs(lo, hi, n, rng, randoms) + sweep:
            out.append(Check(Case(f"{red['symbol']}-{name}-{x[0]}", red["symbol"], (_arg(x_spec, x),)),
                             reduce_judge(x)))

    lo, hi = bm["input"]["bound"]
    ins = edge_inputs(lo, hi, n, rng, randoms)
    r_spec, ia, ib = _specs(bundle, "basemul")
    for k, ((na, a), (_, b)) in enumerate(zip(ins, ins[1:] + ins[:1])):
        args = (_arg(r_spec), _arg(ia, a), _arg(ib, b))
        out.append(Check(Case(f"basemul-{na}", bm["symbol"], args), basemul_judge(a, b)))
        if k == 0:  # in place: r is the same array as a
            args = (_arg(r_spec, alias_of=1), _arg(ia, a), _arg(ib, b))
            out.append(Check(Case(f"basemul-inplace-{na}", bm["symbol"], args), basemul_judge(a, b)))
    return out


def round_trips(bundle: Bundle, run: Runner, seed: int, count: int = 2) -> list[tuple[str, str | None]]:
    """forward(a), forward(b), basemul, inverse == a*b mod (x^n+1, q), through the harness."""
    rng = random.Random(seed ^ 0x5EED)
    n, q = bundle.params.n, bundle.params.q
    fwd, inv, bm = _fn(bundle, "ntt_forward"), _fn(bundle, "ntt_inverse"), _fn(bundle, "basemul")
    [f_spec], [i_spec] = _specs(bundle, "ntt_forward"), _specs(bundle, "ntt_inverse")
    r_spec, ia, ib = _specs(bundle, "basemul")
    lo, hi = fwd["input"]["bound"]
    pairs = [([hi] * n, [lo] * n)] + [([rng.randint(lo, hi) for _ in range(n)],
                                       [rng.randint(lo, hi) for _ in range(n)]) for _ in range(count)]
    results = []
    for k, (a, b) in enumerate(pairs):
        name = f"roundtrip-{k}"
        r1 = run([Case(f"{name}-fa", fwd["symbol"], (_arg(f_spec, a),)),
                  Case(f"{name}-fb", fwd["symbol"], (_arg(f_spec, b),))])
        if any(not r.ok for r in r1):
            results.append((name, "; ".join(f"{r.case_id}: {r.status} {r.reason}" for r in r1 if not r.ok)))
            continue
        fa, fb = r1[0].outputs[0], r1[1].outputs[0]
        r2 = run([Case(f"{name}-bm", bm["symbol"], (_arg(r_spec), _arg(ia, fa), _arg(ib, fb)))])
        if not r2[0].ok:
            results.append((name, f"basemul: {r2[0].status} {r2[0].reason}"))
            continue
        r3 = run([Case(f"{name}-inv", inv["symbol"], (_arg(i_spec, r2[0].outputs[0]),))])
        if not r3[0].ok:
            results.append((name, f"inverse: {r3[0].status} {r3[0].reason}"))
            continue
        got = [v % q for v in r3[0].outputs[0]]
        want = negacyclic_product(a, b, q)
        bad = next((i for i in range(n) if got[i] != want[i]), None)
        results.append((name, None if bad is None else f"coefficient {bad}: got {got[bad]}, want {want[bad]}"))
    return results


def layout_check(bundle: Bundle) -> str | None:
    fwd = _fn(bundle, "ntt_forward")
    return layout_is_crt_basis(bundle.params.n, bundle.params.q, fwd["output"]["layout"])


def bench_items(bundle: Bundle, workdir) -> list[BenchItem]:
    """Each kernel beside the plain-C baseline (-O3 -march=native) for the same parameters."""
    p = bundle.params
    try:
        base = build_baseline(constants_sympy(p.n, p.q, p.layers), workdir)
    except ValueError as e:  # the baseline's own limits (its lazy arithmetic needs q < 2^14)
        print(f"{p.name}: timed without the plain-C baseline: {e}", file=sys.stderr)
        base = None
    rng = random.Random(7)
    items = []
    for kind, base_sym in (("ntt_forward", "kg_baseline_ntt_forward"), ("ntt_inverse", "kg_baseline_ntt_inverse"),
                           ("basemul", "kg_baseline_basemul")):
        fn = bundle.function(kind)
        lo, hi = fn.contract.manifest_input()["bound"]
        args = tuple(_arg(a, None if a.role == "out" else [rng.randint(lo, hi) for _ in range(a.count)])
                     for a in fn.kernel.args)
        items.append(BenchItem(kind, fn.symbol, Case(kind, fn.symbol, args),
                               (Comparison("baseline", base, base_sym),) if base else ()))
    # standalone reductions: each other form timed beside Barrett, in the same library and run
    reduces = {f.fact("reduction"): f for f in bundle.functions if f.kind == "reduce"}
    for kind, fn in reduces.items():
        if kind == "barrett":
            continue
        lo, hi = fn.contract.manifest_input()["bound"]
        [spec] = fn.kernel.args
        args = (_arg(spec, [rng.randint(lo, hi) for _ in range(spec.count)]),)
        items.append(BenchItem(f"reduce_{kind}", fn.symbol, Case(f"reduce_{kind}", fn.symbol, args),
                               (Comparison("barrett", None, reduces["barrett"].symbol),)))
    return items
