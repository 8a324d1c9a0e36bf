"""`kerngen bench`: ticks per call beside comparisons measured in the same run,
with static figures (instructions, bytes, multiplications, memory operands,
llvm-mca throughput) that do not depend on machine noise."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

from . import harness
from .family import BenchItem, Bundle, Function
from .isa.abi import SYSV
from .isa.ir import Mem
from .isa.ops import spec
from .isa.printer import body_text

MCA_CPUS = ("znver3", "skylake")


def static_figures(fn: Function) -> dict:
    body = fn.kernel.body
    return {
        "instructions": len(body) + _frame_instructions(fn),
        "multiplications": sum(1 for i in body if spec(i.op).cls in ("mul", "clmul")),
        "loads": sum(1 for i in body for k in spec(i.op).read if isinstance(i.operands[k], Mem)),
        "stores": sum(1 for i in body for k in spec(i.op).written if isinstance(i.operands[k], Mem)),
        "spills": fn.kernel.spill_slots,
    }


def _frame_instructions(fn: Function) -> int:
    from .emit import _frame_lines, frame_of
    frame = frame_of(fn, SYSV)
    return len(_frame_lines("prologue", frame)) + len(_frame_lines("epilogue", frame)) + 1  # + ret


def mca_text(fn: Function) -> str:
    """The body in the Intel syntax llvm-mca reads; constant addresses become a base register."""
    lines = [".intel_syntax noprefix"]
    for line in body_text(fn.kernel.body, SYSV):
        line = line.split(";")[0]
        line = re.sub(r"\[rel [A-Za-z0-9_]+", "[r11", line)
        line = re.sub(r"\b(yword|oword|qword|dword|word|byte) \[", lambda m: {
            "yword": "ymmword", "oword": "xmmword"}.get(m.group(1), m.group(1)) + " ptr [", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def mca_throughput(fn: Function, cpu: str) -> float | None:
    tool = shutil.which("llvm-mca")
    if tool is None:
        return None
    proc = subprocess.run([tool, f"-mcpu={cpu}", "-iterations=100"], input=mca_text(fn),
                          capture_output=True, text=True, check=False)
    found = re.search(r"Block RThroughput:\s*([0-9.]+)", proc.stdout)
    return float(found.group(1)) if found else None


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
    results = {r.case_id: r for r in harness.run_bench(libs, cases, batches, workdir=workdir)}
    sizes = symbol_sizes(lib)
    by_symbol = {f.kernel.symbol: f for f in bundle.functions}
    rows = []
    for item in items:
        fn = by_symbol[item.symbol]
        row = {"name": bundle.name, "kind": item.kind, "symbol": item.symbol,
               "ticks": round(results[item.case.case_id].median_ticks, 1)}
        for cmp in item.comparisons:
            other = results[f"{cmp.label}-{item.case.case_id}"].median_ticks
            row[f"{cmp.label}_ticks"] = round(other, 1)
            row[f"{cmp.label}_ratio"] = round(other / row["ticks"], 2) if row["ticks"] else None
        row.update(static_figures(fn))
        row["bytes"] = sizes.get(item.symbol)
        for cpu in MCA_CPUS:
            key = "mca_rthroughput" if cpu == "znver3" else f"mca_rthroughput_{cpu}"
            row[key] = mca_throughput(fn, cpu)
        rows.append(row)
    return rows
