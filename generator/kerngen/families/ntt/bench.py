"""What `kerngen bench` times for an NTT bundle, each kernel beside what it
is compared with in the same run: the plain-C baseline, its twin of the
widest ISA, the bundle with one choice undone (order, output ranges), k
base multiplications for a fused sum of products, Barrett for another
reduction."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

from ...core.bundle import BenchItem, Bundle, Comparison, Function
from ...core.family import native
from ...errors import ParamError
from ...harness import toolchain
from ...harness.cpu import march_flags, runnable_isas
from ...harness.protocol import Case
from .baseline import FLAGS, build as build_baseline, constants_sympy
from .build import build
from .inputs import harness_args
from .maths import RINGS
from .params import ORDERS, OUTPUTS


def bench_items(bundle: Bundle, library: Path, workdir: Path) -> list[BenchItem]:
    """Each kernel of each ISA beside the plain-C baseline for the same
    parameters, compiled for that ISA's CPU level (the ISA's `c_march`:
    -march=native for AVX2, x86-64-v2 for SSE); a kernel of a narrower ISA
    also beside its twin of the widest, all in one run. A bundle in another
    order than the fastest is timed beside its fastest-order twin, one with
    output ranges beside its lazy twin (the cost of each choice); a fused
    basemul_acc beside k base multiplications and k - 1 additions.
    Standalone reductions are timed beside Barrett. Only the ISAs this CPU
    (as masked: `harness.cpu`) runs are timed, "widest" among them."""
    p = bundle.params
    consts, bases = None, {}
    try:
        if (p.ring, p.coset) != (RINGS[0], 1):
            raise ValueError(f"it computes the {RINGS[0]} NTT without a coset")
        consts = constants_sympy(p.n, p.q, p.layers, p.width)
    except ValueError as e:  # the baseline's own limits (q < 2^14 on 16-bit lanes, 2^30 on 32-bit ones)
        print(f"{p.name}: timed without the plain-C baseline: {e}", file=sys.stderr)
    twins = _twins(p, workdir)
    rng = random.Random(7)
    items = []
    runs = runnable_isas(bundle.functions)
    targets = [t for t in p.targets if t.isa.name in runs]
    widest = max(targets, key=lambda t: t.isa.vector_bits).isa.name if targets else None
    for t in targets:
        isa, march = t.isa.name, t.isa.c_march
        if consts is not None and march not in bases:
            bases[march] = build_baseline(consts, workdir, march)
        base = bases.get(march)
        label = "baseline" if march == "native" else f"baseline_{march}"
        kernels = [(kind, bundle.function(kind, isa=isa), sym) for kind, sym in (
            ("ntt_forward", "kg_baseline_ntt_forward"), ("ntt_inverse", "kg_baseline_ntt_inverse"),
            ("basemul", "kg_baseline_basemul"))]
        kernels += [(f"basemul_acc{f.fact('k')}", f, None) for f in bundle.functions
                    if f.kind == "basemul_acc" and f.isa == isa]
        for kind, f, base_sym in kernels:
            fn = f.manifest()
            lo, hi = fn["input"]["bound"]
            data = [[rng.randint(lo, hi) for _ in range(a["count"])] for a in fn["args"] if a["role"] != "out"]
            comps = (Comparison(label, base, base_sym),) if base and base_sym else ()
            if isa != widest:  # the same kernel on the widest vectors, same run
                comps += (Comparison(widest, None, bundle.function(f.kind, f"{f.symbol[:-len(isa)]}{widest}").symbol),)
            if f.kind == "basemul_acc":
                comps += (Comparison("calls", _calls_library(bundle, f, library, workdir), "kg_calls_basemul_acc"),)
            for twin, (prefix, lib) in twins.items():
                comps += (Comparison(twin, lib, prefix + f.symbol[len(p.prefix):]),)
            items.append(BenchItem(kind, fn["symbol"], Case(f"{kind}-{isa}", fn["symbol"],
                                                            harness_args(fn, *data, fastest=True)), comps))
        # standalone reductions: each other form timed beside Barrett, in the same library and run
        reduces = {f.fact("reduction"): f.manifest() for f in bundle.functions if f.kind == "reduce" and f.isa == isa}
        for kind, fn in reduces.items():
            if kind == "barrett" or "barrett" not in reduces:  # (unsigned lanes have Shoup's reduction alone)
                continue
            lo, hi = fn["input"]["bound"]
            args = harness_args(fn, [rng.randint(lo, hi) for _ in range(p.n)], fastest=True)
            items.append(BenchItem(f"reduce_{kind}", fn["symbol"], Case(f"reduce_{kind}-{isa}", fn["symbol"], args),
                                   (Comparison("barrett", None, reduces["barrett"]["symbol"]),)))
    return items


def _twins(p, workdir: Path) -> dict[str, tuple[str, Path]]:
    """The bundle with one choice undone, by what it undoes: (symbol prefix, library).
    Twins take prefixes of their own, so no symbol is defined twice in a run."""
    changes = {}
    if p.order != ORDERS[0]:
        changes["fastest"] = {"order": ORDERS[0]}
    if any(v != OUTPUTS[0] for _, v in p.output):
        changes["lazy"] = {"output": tuple((k, OUTPUTS[0]) for k, _ in p.output)}
    out = {}
    for label, change in changes.items():
        twin = dataclasses.replace(native(p), prefix=f"{p.prefix}_{label}", **change)
        try:
            bundle = build(twin)
        except ParamError:  # no such twin: ISAs of several widths leave several fastest orders
            continue
        out[label] = (twin.prefix, toolchain.bundle_library(bundle, f"kerngen emit {p.source} (twin)",
                                                         workdir / f"{p.name}-{label}", workdir))
    return out


def _calls_library(bundle: Bundle, acc: Function, library: Path, workdir: Path) -> Path:
    """`kg_calls_basemul_acc`: k calls of the bundle's base multiplication of
    the same ISA and k - 1 additions (harness/basemul_calls.c), linked with it."""
    bm = bundle.function("basemul", isa=acc.isa)
    header = f"#define KG_BASEMUL {bm.symbol}\n#define KG_N {bundle.params.n}\n#define KG_K {acc.fact('k')}\n"
    return toolchain.build_shared_c("basemul_calls.c", f"basemul-calls-{acc.symbol}", (*FLAGS, *march_flags()),
                                 workdir, f"the {acc.fact('k')} base multiplications timed beside {acc.symbol}",
                                 link=(library, f"-Wl,-rpath,{Path(library).parent}"), headers={"kg_acc.h": header})
