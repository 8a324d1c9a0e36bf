"""Draw the performance page's charts from the measurements in docs/results/.

    python docs/figures.py [OUT_DIR]        # default: docs/figures

One results file (TOML) is one measurement: the CPU, the commit measured, the anchors and how they were
built, the procedure, and per kernel either ratios (`metric = "ratio"`: anchor's time / kerngen's, one key
per series) or ticks (`metric = "ticks"`: the medians of each process per kerngen ISA, `avx512`, `avx2`,
`sse`, or the keys `series` lists, and the anchor's, `anchor_ticks`, or per ISA `anchor_avx512`, ...). Each file becomes one chart,
OUT_DIR/NAME.svg: a horizontal bar per kernel and series of anchor ÷ kerngen (above 1: kerngen faster),
the spread over processes as an error bar. A new measurement is a new results file.
"""

from __future__ import annotations

import statistics
import sys
import textwrap
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ISAS = ("avx512", "avx2", "sse")


def series(data: dict) -> tuple[list[str], dict[str, list[tuple[float, float, float] | None]]]:
    """Kernel names, and per series the (ratio, lowest, highest) of each kernel (None: not measured)."""
    rows = data["rows"]
    kernels = [r["kernel"] for r in rows]
    out: dict[str, list] = {}
    if data["metric"] == "ratio":
        names = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in ("kernel", "anchor")]
        for name in names:
            out[name.replace("_", " ")] = [(r[name], r[name], r[name]) if name in r else None for r in rows]
        return kernels, out
    if data["metric"] != "ticks":
        raise ValueError(f"metric must be ratio or ticks, got {data['metric']!r}")
    for isa in data.get("series", [i for i in ISAS if any(i in r for r in rows)]):
        values = []
        for r in rows:
            anchor = r.get(f"anchor_{isa}", r.get("anchor_ticks"))
            if isa not in r or anchor is None:
                values.append(None)
                continue
            ratio = statistics.median(anchor) / statistics.median(r[isa])
            ratios = [a / k for a in anchor for k in r[isa]]
            values.append((ratio, min(ratios), max(ratios)))
        out[isa if isa.startswith("kerngen") else f"kerngen {isa}"] = values
    return kernels, out


def draw(path: Path, out_dir: Path) -> Path:
    data = tomllib.loads(path.read_text())
    kernels, by_series = series(data)
    plt.rcParams["svg.hashsalt"] = "kerngen"  # the same file from the same data
    height = 0.8 / max(1, len(by_series))
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(kernels) * max(1, len(by_series)) ** 0.5))
    for i, (name, values) in enumerate(by_series.items()):
        ys = [k + i * height for k, v in enumerate(values) if v is not None]
        got = [v for v in values if v is not None]
        ax.barh(ys, [v[0] for v in got], height=height, label=name,
                xerr=[[v[0] - v[1] for v in got], [v[2] - v[0] for v in got]])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([k + height * (len(by_series) - 1) / 2 for k in range(len(kernels))], kernels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("anchor's time ÷ kerngen's (above 1: kerngen faster)")
    ax.set_title(f"{data['title']}\n{textwrap.fill(data['cpu'], 100)}", fontsize=8)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out = out_dir / f"{path.stem}.svg"
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0]) if argv else HERE / "figures"
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(RESULTS.glob("*.toml")):
        print(draw(path, out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
