"""The binary-curve demonstrator: `harness/ladder.c` (a constant-time
Montgomery ladder in López–Dahab x-only coordinates on the emitted field
kernels) built per curve, checked against OpenSSL's EC_POINT_mul and timed
beside it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from ...core.bundle import BenchItem, Bundle, Comparison
from ...errors import HarnessError
from ...harness import protocol, toolchain
from ...harness.cpu import lacks, left_out, runnable_isas
from ...harness.protocol import Arg, Case
from .checks import limbs_of, value_of


@dataclass(frozen=True)
class Curve:
    name: str  # short label
    nid: str  # OpenSSL's NID macro
    m: int
    poly: tuple[int, ...]
    order_bits: int


CURVES = (
    Curve("b233", "NID_sect233r1", 233, (233, 74, 0), 233),
    Curve("k233", "NID_sect233k1", 233, (233, 74, 0), 232),
    Curve("b409", "NID_sect409r1", 409, (409, 87, 0), 409),
)


def curves_for(bundle: Bundle) -> list[Curve]:
    p = bundle.params
    return [c for c in CURVES if c.m == p.m and c.poly == tuple(p.poly)]


def ladder_isa(bundle: Bundle) -> str:
    """The first of the bundle's ISAs whose kernels the ladder calls (all but the two-lane step) this CPU runs."""
    called = [f for f in bundle.functions if "_ladder_step2_" not in f.symbol]
    runs = runnable_isas(called)
    if not runs:
        raise HarnessError(f"{bundle.name}: the ladder needs kernels this CPU runs; " + left_out(called))
    return runs[0]


def build_ladder(curve: Curve, bundle: Bundle, kernel_lib: Path, workdir: Path) -> Path:
    """ladder.c for `curve`, linked against the assembled bundle (cached)."""
    p = bundle.params
    kernel_lib = Path(kernel_lib).resolve()
    isa = ladder_isa(bundle)
    flags = ["-O2", f"-DKG_PREFIX={p.prefix}", f"-DKG_ISA={isa}",
             f"-DKG_LIMBS={p.limbs}", f"-DKG_CURVE={curve.nid}"]
    if any(f.symbol.endswith(f"_ladder_step2_{isa}") and not lacks(f.cpu) for f in bundle.functions):
        flags.append("-DKG_HAVE_STEP2=1")
    return toolchain.build_shared_c("ladder.c", f"ladder-{curve.name}", flags, workdir,
                                  f"building the ladder for {curve.name} (it needs libssl-dev)",
                                  link=[kernel_lib, "-lcrypto"])


def _out(n: int) -> Arg:
    return Arg("out", 8, n, 8)


def _in(x: int, n: int) -> Arg:
    return Arg("in", 8, n, 8, limbs_of(x, n))


def _run(lib: Path, cases: list[Case], workdir: Path) -> dict[str, list[int]]:
    res = protocol.run_runner(lib, cases, workdir=workdir)
    bad = [f"{r.case_id}: {r.status} {r.reason}" for r in res if not r.ok]
    if bad:
        raise HarnessError("; ".join(bad))
    return {r.case_id: r.outputs[0] for r in res}


def base_points(curve: Curve, lib: Path, n: int, workdir: Path, rng: random.Random) -> list[int]:
    """x of the generator G and of a random multiple of it (from OpenSSL)."""
    gx = value_of(_run(lib, [Case("gen", "kg_ladder_gen", (_out(n),))], workdir)["gen"])
    r = rng.getrandbits(curve.order_bits - 1)
    qx = value_of(_run(lib, [Case("q", "kg_ossl_ladder", (_out(n), _in(r, n), _in(gx, n)))],
                       workdir)["q"])
    return [gx, qx]


def ladder_failures(curve: Curve, bundle: Bundle, kernel_lib: Path, workdir: Path,
                    seed: int = 1, nscalars: int = 6) -> list[str]:
    """Runs the ladder and EC_POINT_mul on the same random scalars and points;
    returns one message per disagreement."""
    n = bundle.params.limbs
    lib = build_ladder(curve, bundle, kernel_lib, workdir)
    rng = random.Random(seed)
    points = base_points(curve, lib, n, workdir, rng)
    scalars = [0, 1, 2, 3, (1 << (curve.order_bits - 1)) - 1] + [
        rng.getrandbits(curve.order_bits - 1) for _ in range(nscalars)]
    cases = []
    for pi, x in enumerate(points):
        for si, k in enumerate(scalars):
            for sym in ("kg_ladder", "kg_ossl_ladder"):
                cases.append(Case(f"{sym}.{pi}.{si}", sym, (_out(n), _in(k, n), _in(x, n))))
    out = _run(lib, cases, workdir)
    failures = []
    for pi in range(len(points)):
        for si, k in enumerate(scalars):
            ours, theirs = out[f"kg_ladder.{pi}.{si}"], out[f"kg_ossl_ladder.{pi}.{si}"]
            if ours != theirs:
                failures.append(f"{curve.name}: point {pi}, k = {k:#x}: ladder x = {value_of(ours):#x}, "
                                f"EC_POINT_mul x = {value_of(theirs):#x}")
    return failures


def bench_cases(curve: Curve, bundle: Bundle, kernel_lib: Path, workdir: Path) -> tuple[Path, Case, Case]:
    """The ladder and EC_POINT_mul on one random scalar and the generator."""
    n = bundle.params.limbs
    lib = build_ladder(curve, bundle, kernel_lib, workdir)
    rng = random.Random(99)
    gx = base_points(curve, lib, n, workdir, rng)[0]
    k = rng.getrandbits(curve.order_bits - 1) | 1 << (curve.order_bits - 2)
    args = (_out(n), _in(k, n), _in(gx, n))
    return lib, Case(f"ladder-{curve.name}", "kg_ladder", args), Case(f"ossl-{curve.name}", "kg_ossl_ladder", args)


def bench_items(bundle: Bundle, kernel_lib: Path, workdir: Path) -> list[BenchItem]:
    """BenchItems for the curves over this bundle's field; their symbols live in
    the ladder library (`Case.lib` 0 of the item refers to it)."""
    items = []
    for curve in curves_for(bundle):
        lib, ours, theirs = bench_cases(curve, bundle, kernel_lib, workdir)
        items.append(BenchItem(f"ecladder_{curve.name}", ours.symbol, ours,
                               (Comparison("openssl", lib, theirs.symbol),)))
    return items


def bench_rows(bundle: Bundle, kernel_lib: Path, workdir: Path, batches: int = 21) -> list[dict]:
    """Rows in `kerngen bench --json` form for the ladder beside EC_POINT_mul."""
    rows = []
    for curve in curves_for(bundle):
        lib, ours, theirs = bench_cases(curve, bundle, kernel_lib, workdir)
        res = protocol.run_bench([lib], [ours, theirs], batches, workdir=workdir)
        t, o = res[0].median_ticks, res[1].median_ticks
        rows.append({"name": bundle.name, "kind": f"ecladder_{curve.name}", "symbol": f"kg_ladder ({curve.name})",
                     "ticks": round(t, 1), "openssl_ticks": round(o, 1),
                     "openssl_ratio": round(o / t, 2) if t else None})
    return rows
