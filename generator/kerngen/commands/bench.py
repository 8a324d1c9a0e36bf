"""`kerngen bench`: ticks per call beside comparisons measured in the same run,
with static figures (instructions, bytes, multiplications, memory operands,
llvm-mca throughput) that do not depend on machine noise.

The JSON rows hold every figure; the table, one row per kernel within 100
columns, shows the comparison that matters: the first a kernel is timed
beside (the plain-C baseline, OpenSSL, Barrett's reduction)."""

from __future__ import annotations

import dataclasses
import subprocess
import textwrap
from pathlib import Path

from ..core.bundle import BenchItem, Bundle
from ..harness import protocol
from ..emission.figures import MCA_CPUS, mca_throughput, static_figures
from .columns import Column, number, table

TABLE_WIDTH = 100
TABLE_COLUMNS = [Column("kernel"), Column("ticks", numeric=True), Column("against"),
                 Column("their ticks", numeric=True), Column("ratio", numeric=True),
                 Column("instructions", numeric=True)]
TICKS = "_ticks"


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
    results = {r.case_id: r for r in protocol.run_bench(libs, cases, batches, workdir=workdir)}
    sizes = symbol_sizes(lib)
    by_symbol = {f.symbol: f for f in bundle.functions}
    rows = []
    for item in items:  # a row's comparisons keep the item's order: the first is the one the table shows
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


def comparisons(row: dict) -> list[str]:
    """The labels of what a row's kernel was timed beside, in the order its BenchItem lists them."""
    return [k[:-len(TICKS)] for k in row if k.endswith(TICKS) and k != "ticks"]


def format_table(sections: list[tuple[str, str, list[dict]]]) -> list[str]:
    """The table for (set name, symbol prefix, rows) of each parameter set: one
    line per kernel, named without the set's prefix, beside its first comparison."""
    lines: list[str] = []
    hidden: set[str] = set()
    for name, prefix, rows in sections:
        cells = []
        for r in rows:
            labels = comparisons(r)
            hidden.update(labels[1:])
            first = labels[0] if labels else None
            kernel = r["symbol"].removeprefix(f"{prefix}_")
            cells.append([kernel, number(r["ticks"], 1), first or "-", number(r.get(f"{first}{TICKS}"), 1),
                          number(r.get(f"{first}_ratio")), number(r.get("instructions"))])
        lines += [f"{name} (symbols {prefix}_KERNEL)"] + table(TABLE_COLUMNS, cells) + [""]
    also = f"the other comparisons ({', '.join(sorted(hidden))}), " if hidden else ""
    notes = ("ticks: TSC ticks per call, median over batches of back-to-back calls, every kernel of a set and "
             "what it is timed beside interleaved in one run; ratio = their ticks / kerngen's (above 1: "
             f"kerngen is faster). --json adds {also}bytes, multiplications, loads, stores, spills and llvm-mca's "
             f"block reciprocal throughput ({', '.join(MCA_CPUS)}).")
    return lines + textwrap.wrap(notes, TABLE_WIDTH)
