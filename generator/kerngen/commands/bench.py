"""`kerngen bench`: ticks per call beside comparisons measured in the same run,
with static figures (instructions, bytes, multiplications, memory operands,
llvm-mca throughput) that do not depend on machine noise."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from ..core.bundle import BenchItem, Bundle
from ..harness import driver
from ..target.figures import MCA_CPUS, mca_throughput, static_figures


def symbol_sizes(lib: Path) -> dict[str, int]:
    out = subprocess.run(["nm", "-S", "--defined-only", str(lib)], capture_output=True, text=True, check=False).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def bench_bundle(bundle: Bundle, lib: Path, items: list[BenchItem], workdir: Path, batches: int) -> list[dict]:
    libs = [lib]
    cases = []
    for item in items:
        cases.append(item.case)
        for cmp in item.comparisons:
            library = cmp.library or lib
            if library not in libs:
                libs.append(library)
            cases.append(dataclasses.replace(item.case, case_id=f"{cmp.label}-{item.case.case_id}",
                                             symbol=cmp.symbol, lib=libs.index(library)))
    results = {r.case_id: r for r in driver.run_bench(libs, cases, batches, workdir=workdir)}
    sizes = symbol_sizes(lib)
    by_symbol = {f.symbol: f for f in bundle.functions}
    rows = []
    for item in items:
        fn = by_symbol[item.symbol]
        row = {"name": bundle.name, "kind": item.kind, "symbol": item.symbol,
               "ticks": round(results[item.case.case_id].median_ticks, 1)}
        for cmp in item.comparisons:
            other = results[f"{cmp.label}-{item.case.case_id}"].median_ticks
            row[f"{cmp.label}_ticks"] = round(other, 1)
            row[f"{cmp.label}_ratio"] = round(other / row["ticks"], 2) if row["ticks"] else None
        row.update(static_figures(fn.kernel))
        row["bytes"] = sizes.get(item.symbol)
        for cpu in MCA_CPUS:
            key = "mca_rthroughput" if cpu == MCA_CPUS[0] else f"mca_rthroughput_{cpu}"
            row[key] = mca_throughput(fn.kernel, cpu)
        rows.append(row)
    return rows
