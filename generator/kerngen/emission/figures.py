"""Static figures of a compiled kernel, repeatable on any machine:
instructions (frame included), multiplications, memory operands, spills,
and llvm-mca's block reciprocal throughput."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache

from ..ir.instr import Kernel, Mem
from ..machine.ops import spec
from ..ir.stream import executed
from .frame import frame_of
from .printer import INTEL, body_text
from .render import frame_lines

# the models bench reports: AVX2 machines (Zen 3, Skylake) and AVX-512 ones (Ice Lake server, Zen 4); a
# model without the kernel's extensions gives no figure
MCA_CPUS = ("znver3", "skylake", "icelake-server", "znver4")
# Debian's default llvm-mca (14) has no znver4; the set-up adds llvm-19's beside it
MCA_TOOLS = ("llvm-mca", "llvm-mca-19")


def static_figures(kernel: Kernel) -> dict:
    """Counts over what one call runs (a rolled loop counts each iteration)."""
    body = executed(kernel)
    frame = frame_of(kernel)
    return {
        "instructions": len(body) + len(frame_lines("prologue", frame)) + len(frame_lines("epilogue", frame)) + 1,
        "multiplications": sum(1 for i in body if spec(i.op).cls in ("mul", "clmul")),
        "loads": sum(1 for i in body for k in spec(i.op).read if isinstance(i.operands[k], Mem)),
        "stores": sum(1 for i in body for k in spec(i.op).written if isinstance(i.operands[k], Mem)),
        "spills": kernel.spill_slots,
    }


def mca_text(kernel: Kernel) -> str:
    """The body in the Intel syntax llvm-mca reads."""
    return "\n".join([".intel_syntax noprefix"] + body_text(executed(kernel), kernel.target, INTEL)) + "\n"


@cache  # one `-mcpu=help` per tool and model in a process; the installed tools do not change under it
def mca_tool(cpu: str) -> str | None:
    """The first installed llvm-mca of `MCA_TOOLS` that models `cpu`."""
    for name in MCA_TOOLS:
        tool = shutil.which(name)
        if tool is None:
            continue
        listed = subprocess.run([tool, "-mcpu=help"], input="", capture_output=True, text=True, check=False)
        if re.search(rf"^\s*{re.escape(cpu)}\s", listed.stdout + listed.stderr, re.MULTILINE):
            return tool
    return None


def mca_throughput(kernel: Kernel, cpu: str) -> float | None:
    """llvm-mca's block reciprocal throughput on `cpu`; None without an llvm-mca modelling it."""
    tool = mca_tool(cpu)
    if tool is None:
        return None
    proc = subprocess.run([tool, f"-mcpu={cpu}", "-iterations=100"], input=mca_text(kernel),
                          capture_output=True, text=True, check=False)
    found = re.search(r"Block RThroughput:\s*([0-9.]+)", proc.stdout)
    return float(found.group(1)) if found else None
