"""What this machine can run and check: its CPU's feature flags as a CPU mask
leaves them, and which ABI breaks the checked call can detect on it.

The mask (`KERNGEN_CPU` in the environment) makes kerngen behave as on a CPU
without some of this one's extensions: every layer that asks what the CPU
runs asks `cpu_flags()`, so the commands, the library, the harness programs
and the tests choose alike, and the dispatch unit a bundle ships reads the
same variable (templates/dispatch.j2). Its value is a list separated by
commas of an x86-64 level (`machine.isa.LEVELS`: the CPU keeps only that
level's extensions), extensions with a minus (hidden) and extensions with a
plus (kept beside the level): `x86-64-v3,+vpclmulqdq` is an AMD Zen 3,
`-avx512f` any CPU without AVX-512. A mask never adds what the CPU lacks.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import HarnessError, UsageError
from ..machine.isa import CPUID, LEVELS, cpuinfo_name
from .protocol import describe_exit
from .toolchain import build_runner

__all__ = ["AbiCapabilities", "CpuMask", "MASK_VARIABLE", "abi_capabilities", "cpu_flags", "cpu_mask", "host_flags",
           "lacks", "march_flags", "parse_capabilities"]

MASK_VARIABLE = "KERNGEN_CPU"
# the extensions a mask may name, as /proc/cpuinfo names them (sse4_1, avx512f, ...)
MASKABLE = frozenset(cpuinfo_name(e) for e in CPUID)
LEVEL_FLAGS = {name: frozenset(cpuinfo_name(e) for e in extensions) for name, extensions in LEVELS.items()}


@dataclass(frozen=True)
class CpuMask:
    """What a CPU mask keeps of a CPU's extensions."""

    text: str  # as the variable spelt it
    levels: frozenset[str] = frozenset()  # the extensions of the levels it names (all: keep only these)
    added: frozenset[str] = frozenset()  # kept beside the levels
    hidden: frozenset[str] = frozenset()

    @staticmethod
    def parse(text: str) -> CpuMask:
        """The mask a value of KERNGEN_CPU spells; UsageError naming a term that is no level or extension."""
        levels: set[str] = set()
        added: set[str] = set()
        hidden: set[str] = set()
        named_level = False
        for term in (t.strip() for t in text.split(",")):
            if not term:
                continue
            if term.lower() in LEVEL_FLAGS:
                levels |= LEVEL_FLAGS[term.lower()]
                named_level = True
                continue
            sign, name = term[0], cpuinfo_name(term[1:])
            if sign not in "+-" or name not in MASKABLE:
                raise UsageError(f"{MASK_VARIABLE}={text}: {term!r} is neither a level ({', '.join(LEVEL_FLAGS)}) nor "
                                 f"an extension with + or - ({', '.join(sorted(MASKABLE))})")
            (added if sign == "+" else hidden).add(name)
        if added and not named_level:
            raise UsageError(f"{MASK_VARIABLE}={text}: an extension with + keeps it beside a level; name the level "
                             f"(e.g. x86-64-v3,{'+' + min(added)})")
        return CpuMask(text, frozenset(levels | added) if named_level else frozenset(), frozenset(added),
                       frozenset(hidden))

    def keeps(self, flag: str) -> bool:
        """Whether a CPU under this mask still shows `flag` (where it has it)."""
        if flag in self.hidden:
            return False
        return not self.levels or flag in self.levels or flag not in MASKABLE

    def apply(self, flags: frozenset[str] | set[str]) -> frozenset[str]:
        return frozenset(f for f in flags if self.keeps(f))


def cpu_mask() -> CpuMask | None:
    """The mask KERNGEN_CPU sets (None: no mask)."""
    text = os.environ.get(MASK_VARIABLE, "").strip()
    return CpuMask.parse(text) if text else None


@lru_cache(maxsize=1)
def host_flags() -> frozenset[str]:
    """This machine's CPU feature flags, as /proc/cpuinfo names them (avx2, pclmulqdq, sse4_1, ...), unmasked."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return frozenset(_CPUINFO_ALIASES.get(f, f) for f in line.split(":", 1)[-1].split())


# /proc/cpuinfo's names that differ from the extensions' own (LZCNT is "abm", advanced bit manipulation)
_CPUINFO_ALIASES = {"pni": "sse3", "avx512_vbmi2": "avx512vbmi2", "abm": "lzcnt"}


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags kerngen runs by: this machine's, less what the mask hides."""
    mask = cpu_mask()
    return host_flags() if mask is None else mask.apply(host_flags())


def lacks(cpu: list[str] | tuple[str, ...] | set[str]) -> list[str]:
    """Which of the features `cpu` (a manifest's `cpu` list) the CPU, as masked, lacks."""
    return sorted(set(cpu) - cpu_flags())


# the GCC option that turns off each extension a mask may hide (the others are named as GCC names them)
_GCC_NO = {"pclmulqdq": "pclmul", "sse4_1": "sse4.1", "sse4_2": "sse4.2", "bmi1": "bmi", "avx512vbmi2": "avx512vbmi2"}


def march_flags(march: str = "native") -> list[str]:
    """GCC's options for C built to run here: `-march=MARCH`, and with `native`, minus every extension the
    mask hides (plain C compared with the kernels must not use what the masked CPU lacks)."""
    mask = cpu_mask()
    if march != "native" or mask is None:
        return [f"-march={march}"]
    return ["-march=native"] + [f"-mno-{_GCC_NO.get(f, f)}" for f in sorted(host_flags() & MASKABLE)
                                if not mask.keeps(f)]


@dataclass(frozen=True)
class AbiCapabilities:
    """What the checked call can detect on this machine."""

    avx: bool
    xinuse: bool  # missing-vzeroupper detection works only when True


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



def runnable_isas(functions) -> list[str]:
    """The ISAs, in the order `functions` (a bundle's, or a manifest's entries: `isa` and `cpu` each) first
    name them, whose every function the CPU, as masked, runs."""
    isas = list(dict.fromkeys(f.isa for f in functions))
    return [isa for isa in isas if not any(lacks(f.cpu) for f in functions if f.isa == isa)]


def left_out(functions) -> str | None:
    """One line naming the ISAs of `functions` the CPU does not run and why (None: it runs them all)."""
    host, flags, mask = host_flags(), cpu_flags(), cpu_mask()
    parts = []
    for isa in dict.fromkeys(f.isa for f in functions):
        missing = sorted(set().union(*(set(f.cpu) for f in functions if f.isa == isa)) - flags)
        if missing:
            hidden = [m for m in missing if m in host]
            why = f"this CPU lacks {', '.join(missing)}" if not hidden else \
                f"{MASK_VARIABLE}={mask.text} hides {', '.join(hidden)}" + \
                (f" and this CPU lacks {', '.join(sorted(set(missing) - set(hidden)))}" if len(hidden) < len(missing)
                 else "")
            parts.append(f"{isa} ({why})")
    return f"left out {'; '.join(parts)}" if parts else None
