"""What this machine can run and check: its CPU's feature flags, and which
ABI breaks the checked call can detect on it."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import HarnessError
from .protocol import describe_exit
from .toolchain import build_runner

__all__ = ["AbiCapabilities", "abi_capabilities", "cpu_flags", "parse_capabilities"]


@dataclass(frozen=True)
class AbiCapabilities:
    """What the checked call can detect on this machine."""

    avx: bool
    xinuse: bool  # missing-vzeroupper detection works only when True


def cpu_flags() -> set[str]:
    """This machine's CPU feature flags, as /proc/cpuinfo names them (avx2, pclmulqdq, sse4_1, ...)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return {_CPUINFO_ALIASES.get(f, f) for f in line.split(":", 1)[-1].split()}


_CPUINFO_ALIASES = {"pni": "sse3", "avx512_vbmi2": "avx512vbmi2"}  # /proc/cpuinfo's names that differ from the extensions' own


def abi_capabilities(workdir: Path) -> AbiCapabilities:
    """Asks the runner which checks this CPU supports."""
    runner = build_runner(Path(workdir))
    proc = subprocess.run([str(runner), "--caps"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise HarnessError(f"kg_runner --caps {describe_exit(proc.returncode)}: {proc.stderr}")
    return parse_capabilities(proc.stdout)


def parse_capabilities(text: str) -> AbiCapabilities:
    """The capabilities a runner's ``--caps`` printed ("avx 1", "xinuse 0", one a line; the Win64 runner's too)."""
    caps = dict(line.split() for line in text.splitlines() if line.strip())
    return AbiCapabilities(avx=caps.get("avx") == "1", xinuse=caps.get("xinuse") == "1")

