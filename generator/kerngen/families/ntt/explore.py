"""`kerngen explore`: every multiplication strategy that fits q (Montgomery
on signed lanes, Shoup with Harvey's lazy butterflies on unsigned ones),
with every reduction policy and every reduction that applies to it, side by
side — reductions inserted, static figures, llvm-mca throughput,
ticks measured in one interleaved run, the worst bound per layer — and a PNG
heatmap of the bound of every coefficient index through the layers.

Each variant is a bundle built and verified as `kerngen emit` builds it; the
table and the heatmap read the schedules the bundle's kernels were built
with. Timing all variants in a single harness run matters: the machines are
shared and noisy, so only ratios measured under the same noise are comparable.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...core.bundle import Bundle, Function
from ...core.compile_cache import CompileCache
from ...errors import KerngenError, ParamError
from ...harness.cpu import lacks, left_out
from ...harness.protocol import Arg, Case, run_bench
from ...machine.isa import cpuinfo_name
from ...harness.toolchain import bundle_library
from ...emission.figures import mca_throughput, static_figures
from .build import build, schedules
from .design import design
from .schedule import DIRECTIONS
from .layout import NttLayout, layer_pairs, register_key
from .params import MULS, POLICIES, REDUCERS, NttParams, strategies
from .reducers import reducers
from .schedule import ReductionSchedule

MCA_CPU = "znver3"
# rows of a heatmap panel beyond which indices are aggregated, so every row stays visible
MAX_PANEL_ROWS = 256

Say = Callable[[str], None]


@dataclass(frozen=True)
class Variant:
    mul: str
    policy: str
    reduction: str
    params: NttParams
    bundle: Bundle

    @property
    def label(self) -> str:
        return f"{self.mul}-{self.policy}-{self.reduction}"

    @property
    def schedules(self) -> dict[str, ReductionSchedule]:
        return schedules(self.bundle)

    def function(self, direction: str) -> Function:
        return self.bundle.function(f"ntt_{direction}")

    @property
    def lane_limit(self) -> int:
        """Where the lanes overflow: 2^(w-1) for |value| on signed lanes, 2^w for value on unsigned ones."""
        return self.bundle.design.mul.lane_max + 1


def auto_label(p: NttParams) -> str:
    """The variant `mul = "auto"` and `reducer = "auto"` build with p's policy (what emitting with
    both left at auto gives), by the cost model, as Variant.label spells it."""
    ar = design(dataclasses.replace(p, mul=MULS[0], reducer="auto"))
    return f"{ar.mul.name}-{p.policy}-{ar.reducer.kind}"


def reductions_by_strategy(p: NttParams) -> dict[str, tuple[str, ...]]:
    """Every multiplication strategy that fits q, whatever the set names, with
    the reductions its schedules can place (Shoup's lanes are unsigned: Harvey's only)."""
    return {mul: tuple(reducers(p.q, p.width)) if mul == MULS[1] else ("harvey",)
            for mul in strategies(dataclasses.replace(p, mul=MULS[0], reducer=REDUCERS[0]))}


def build_variants(base: NttParams, say: Say) -> list[Variant]:
    """Every (multiplication, policy, reduction kind) for q, each built and verified (a kernel the
    variants share, such as base multiplication under another policy, compiled once)."""
    out, cache = [], CompileCache()
    for mul, kinds in reductions_by_strategy(base).items():
        for policy in POLICIES:
            for kind in kinds:
                say(f"{base.name}: building and verifying {mul} multiplication, policy {policy} with {kind} "
                    "reduction")
                p = dataclasses.replace(base, policy=policy, mul=mul, reducer=kind if mul == MULS[1] else "auto")
                try:
                    out.append(Variant(mul, policy, kind, p, build(p, cache)))
                except ParamError as e:  # no schedule keeps this q in the lanes with this combination
                    say(f"{base.name}: {mul}, policy {policy} with {kind} reduction is not possible: {e.rule}")
    return out


def time_variants(variants: list[Variant], workdir: Path, batches: int, say: Say) -> dict[tuple[str, str], float]:
    """Median ticks of every variant's forward and inverse NTT, all in one interleaved run."""
    libs, cases = [], []
    p0 = variants[0].params
    rng = random.Random(7)
    for k, v in enumerate(variants):
        libs.append(bundle_library(v.bundle, f"kerngen emit {v.params.source}", workdir / v.label / v.params.name,
                                   workdir))
    data: dict[tuple, tuple[int, ...]] = {}  # one input per contract: the strategies' lanes differ
    for k, v in enumerate(variants):
        for d in DIRECTIONS:
            fn = v.function(d)
            [spec] = fn.kernel.args
            bound = tuple(fn.contract.manifest_input()["bound"])
            if (d, bound) not in data:
                data[d, bound] = tuple(rng.randint(*bound) for _ in range(p0.n))
            cases.append(Case(f"{v.label}-{d}", fn.symbol,
                              (Arg(spec.role, spec.elem_bytes, spec.count, spec.preferred_align or spec.align,
                                   data[d, bound]),), lib=k))
    say(f"{p0.name}: timing {len(cases)} kernels ({batches} batches each, interleaved in one run)")
    results = run_bench(libs, cases, batches, workdir=workdir)
    keys = [(v.label, d) for v in variants for d in DIRECTIONS]
    return {key: r.median_ticks for key, r in zip(keys, results)}


def rows_for(variants: list[Variant], ticks: dict[tuple[str, str], float] | None, picked: str = "") -> list[dict]:
    # llvm-mca runs are independent processes; running them side by side keeps explore interactive
    with ThreadPoolExecutor() as pool:
        jobs = {(v.label, d): pool.submit(mca_throughput, v.function(d).kernel, MCA_CPU)
                for v in variants for d in DIRECTIONS}
        mca = {k: job.result() for k, job in jobs.items()}
    rows = []
    for v in variants:
        q = v.params.q
        row: dict = {"name": v.params.name, "n": v.params.n, "q": q, "width": v.params.width,
                     "isa": v.params.isas[0], "mul": v.mul, "policy": v.policy, "reduction": v.reduction,
                     "auto": v.label == picked}
        per: dict[str, dict] = {}
        for d in DIRECTIONS:
            fn, s = v.function(d), v.schedules[d]
            figures = static_figures(fn.kernel)
            per[d] = {
                "reductions": s.count,
                "instructions": figures["instructions"],
                "multiplications": figures["multiplications"],
                "mca_rthroughput": mca[(v.label, d)],
                "ticks": round(ticks[(v.label, d)], 1) if ticks else None,
                "output_bound": fn.contract.arg("a").ensures.bound.magnitude,
            }
        for key in ("reductions", "instructions", "multiplications", "mca_rthroughput", "ticks"):
            vals = [per[d][key] for d in DIRECTIONS]
            row[key] = None if None in vals else round(sum(vals), 1) if isinstance(vals[0], float) else sum(vals)
            for d in DIRECTIONS:
                row[f"{key}_{d}"] = per[d][key]
        row["max_bound"] = {d: list(v.schedules[d].max_bound) for d in DIRECTIONS}
        row["max_bound_over_q"] = {d: [round(b / q, 2) for b in v.schedules[d].max_bound] for d in DIRECTIONS}
        row["output_bound"] = {d: per[d]["output_bound"] for d in DIRECTIONS}
        row["layer_order"] = {d: [layer for layer, _ in v.schedules[d].before] for d in DIRECTIONS}
        rows.append(row)
    timed = [r["ticks"] for r in rows if r["ticks"]]
    for r in rows:
        r["ticks_vs_fastest"] = round(r["ticks"] / min(timed), 3) if r["ticks"] and timed else None
    return rows


def explore(p: NttParams, batches: int, png: Path | None, say: Say, tester=None,
            seed: int = 1) -> tuple[list[dict], list[str]]:
    """Rows (one per variant) and the failures of `tester(params, seed, say)`
    run on every variant (`--check`; none without a tester)."""
    if batches < 1:
        raise KerngenError(f"--batches must be at least 1, got {batches}")
    if len(p.isas) > 1:  # schedules are compared on one ISA: the file's first this CPU runs unless --isa names one
        runs = [k for k, t in enumerate(p.targets) if not lacks([cpuinfo_name(e) for e in t.isa.extensions])]
        k = runs[0] if runs else 0
        say(f"{p.name}: exploring on {p.isas[k]} (the set lists {', '.join(p.isas)}; --isa picks one)")
        p = dataclasses.replace(p, isas=p.isas[k:k + 1], targets=p.targets[k:k + 1])
    variants = build_variants(p, say)
    missing = lacks(set().union(*(v.function(d).cpu for v in variants for d in DIRECTIONS)))
    picked = auto_label(p)
    failures: list[str] = []
    checked: dict[str, str] = {}
    if tester is not None:
        for v in variants:
            say(f"{v.params.name}: testing {v.label} against SymPy")
            outcome = tester(v.params, seed, say)
            failures += [f"{v.label}: {f}" for f in outcome.failures]
            checked[v.label] = f"{outcome.passed} passed, {outcome.failed} failed"
    ticks = None
    if missing:
        say(f"{p.name}: not timed: {left_out([v.function(d) for v in variants for d in DIRECTIONS])}")
    else:
        with tempfile.TemporaryDirectory(prefix="kerngen-explore-") as tmp:
            ticks = time_variants(variants, Path(tmp), batches, say)
    say(f"{variants[0].params.name}: static figures and llvm-mca (-mcpu={MCA_CPU})")
    rows = rows_for(variants, ticks, picked)
    for v, row in zip(variants, rows):
        if v.label in checked:
            row["checks"] = checked[v.label]
    if png is not None:
        say(f"{variants[0].params.name}: drawing the bounds heatmap")
        render_png(variants, png, picked)
    return rows, failures


# --- the table -------------------------------------------------------------

def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def format_table(rows: list[dict]) -> str:
    cols = [("mul", 11), ("policy", 9), ("reduction", 10), ("reductions", 11), ("fwd+inv", 9), ("instructions", 13),
            ("multiplications", 16), ("mca_rthroughput", 16), ("ticks_forward", 14), ("ticks_inverse", 14),
            ("ticks_vs_fastest", 17), ("auto", 6)]

    def cell(r, c):
        if c == "reductions":
            return f"{r['reductions_forward']}+{r['reductions_inverse']}"
        if c == "fwd+inv":
            return str(r["reductions"])
        if c == "auto":
            return "yes" if r.get("auto") else ""
        return _num(r.get(c))

    first = rows[0]
    top = (1 << (first["width"] - 1)) - 1
    lines = [f"{first['name']}: n = {first['n']}, q = {first['q']}, {first['isa']} kernels; lane limit int"
             f"{first['width']} {top} = {top / first['q']:.2f} q (montgomery, |value|), uint{first['width']} "
             f"{2 * top + 1} = {(2 * top + 1) / first['q']:.2f} q (shoup, value)"]
    lines.append("".join(f"{c:>{w}}" for c, w in cols))
    for r in rows:
        lines.append("".join(f"{cell(r, c):>{w}}" for c, w in cols))
    lines.append("")
    lines.append("worst |value| (montgomery) or value (shoup) after each layer, in execution order (in multiples "
                 "of q):")
    for r in rows:
        for d in DIRECTIONS:
            bounds = " ".join(f"{b:5.2f}" for b in r["max_bound_over_q"][d])
            lines.append(f"  {r['mul']:>10} {r['policy']:>8} {r['reduction']:<8} {d:<8} {bounds}   "
                         f"(max {max(r['max_bound'][d])})")
    lines.append("")
    lines.append("reductions: vector reductions inserted, forward+inverse; instructions, multiplications and "
                 f"mca_rthroughput (llvm-mca -mcpu={MCA_CPU}, block reciprocal throughput) are forward + inverse; "
                 "ticks: TSC ticks per call, median over batches, all variants interleaved in one run; auto: the "
                 "variant emitting builds with mul and reducer left at auto")
    return "\n".join(lines)


# --- the heatmap -----------------------------------------------------------

def _register_members(layout: NttLayout) -> dict[int, dict[int, tuple[int, ...]]]:
    """layer -> register key (layout.register_key) -> the indices the register holds at that layer."""
    out: dict[int, dict[int, tuple[int, ...]]] = {}
    for lp in layer_pairs(layout):
        regs = out.setdefault(lp.layer, {})
        for lo, hi in lp.pairs:
            regs[register_key(lo)], regs[register_key(hi)] = lo, hi
    return out


def panel_data(s: ReductionSchedule, members: dict[int, dict[int, tuple[int, ...]]], n: int):
    """(bounds, reduced, column labels): columns are the input then each executed layer;
    reduced[i][c] says index i was reduced right after column c, before the next layer."""
    bounds = [[s.input_bound] * n] + [list(b) for b in s.per_index]
    reduced = [[False] * n for _ in bounds]
    steps = {layer: step for step, (layer, _) in enumerate(s.before)}
    for step, (layer, regs) in enumerate(s.before):
        for key in regs:
            for i in members[layer][key]:
                reduced[step][i] = True
    for layer, regs in s.after:  # reduced in that layer's registers: after its column, before the next layer
        for key in regs:
            for i in members[layer][key]:
                reduced[steps[layer] + 1][i] = True
    if s.at_end:
        reduced[-1] = [True] * n
    labels = ["in"] + [f"L{layer}" for layer, _ in s.before]
    return bounds, reduced, labels


# the frame of the variant auto picks; reductions are outlined in blue
AUTO_FRAME = "#1a9641"
REDUCED_OUTLINE = "#1f4fbf"


def render_png(variants: list[Variant], path: Path, picked: str = "") -> None:
    fig = heatmap(variants, picked)
    import matplotlib.pyplot as plt  # after heatmap has chosen the backend that needs no display
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def heatmap(variants: list[Variant], picked: str = ""):
    """The figure: panels of every variant (columns) and direction (rows). A cell's colour
    is its bound's share of the variant's lane limit (Variant.lane_limit), so that signed
    and unsigned lanes equally close to overflowing look equally full; `picked`, the label
    of the variant auto builds, is framed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    p = variants[0].params
    q, n = p.q, p.n
    members = _register_members(variants[0].bundle.design.layout)
    group = max(1, n // MAX_PANEL_ROWS)
    rows = n // group
    cols = len(variants)
    fig, axes = plt.subplots(len(DIRECTIONS), cols, figsize=(max(9.0, 1.9 * cols + 1.6), 13.5), squeeze=False,
                             constrained_layout=True)
    image = None
    for c, v in enumerate(variants):
        for r, d in enumerate(DIRECTIONS):
            ax = axes[r][c]
            bounds, reduced, labels = panel_data(v.schedules[d], members, n)
            share = np.array(bounds, dtype=float).T / v.lane_limit  # index x column
            m = np.array(reduced, dtype=bool).T
            if group > 1:  # worst bound of each run of `group` indices; reduced if any of them is
                share = share.reshape(rows, group, -1).max(axis=1)
                m = m.reshape(rows, group, -1).any(axis=1)
            image = ax.imshow(share, aspect="auto", interpolation="nearest", cmap="YlOrRd", vmin=0, vmax=1,
                              origin="upper")
            for col in range(m.shape[1]):
                start = None
                for i in range(rows + 1):
                    on = i < rows and m[i, col]
                    if on and start is None:
                        start = i
                    elif not on and start is not None:
                        ax.add_patch(Rectangle((col - 0.5, start - 0.5), 1, i - start, fill=False,
                                               edgecolor=REDUCED_OUTLINE, linewidth=1.1))
                        start = None
            s = v.schedules[d]
            lane = f"{'' if v.bundle.design.mul.signed else 'u'}int{p.width}"
            title = (f"{v.mul}{' (auto)' if v.label == picked else ''}\n{v.policy} / {v.reduction}\n"
                     f"{d}: {s.count} reductions\npeak {100 * share.max():.0f} % of {lane}")
            ax.set_title(title, fontsize=9, fontweight="bold" if v.label == picked else "normal")
            if v.label == picked:
                for spine in ax.spines.values():
                    spine.set_edgecolor(AUTO_FRAME)
                    spine.set_linewidth(4)
            ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=90)
            ticks = list(range(0, rows, max(1, rows // 8)))
            ax.set_yticks(ticks, [str(t * group) for t in ticks], fontsize=7)
            if c == 0:
                ax.set_ylabel("coefficient index" + (f" (max over {group} consecutive)" if group > 1 else ""),
                              fontsize=8)
            if r == len(DIRECTIONS) - 1:
                ax.set_xlabel("layer, execution order", fontsize=8)
    bar = fig.colorbar(image, ax=axes, shrink=0.6, pad=0.01)
    bar.set_label(f"share of the lane's limit: |value| / 2^{p.width - 1} on signed lanes (montgomery), "
                  f"value / 2^{p.width} on unsigned ones (shoup)", fontsize=9)
    title = [f"{p.name} (n = {n}, q = {q}): bound of every coefficient index after each layer",
             "blue outline: reduced before the next layer"
             + ("; green frame, (auto): the variant `kerngen emit` builds with mul and reducer left at auto"
                if any(v.label == picked for v in variants) else "")]
    if group > 1:
        title.append(f"each row aggregates {group} consecutive indices (worst bound; outlined if any is reduced)")
    fig.suptitle("\n".join(title), fontsize=11)
    return fig


class _Explorer:
    """The family's explore capability, as the command line calls it."""

    explore = staticmethod(explore)
    format_table = staticmethod(format_table)


EXPLORER = _Explorer()
