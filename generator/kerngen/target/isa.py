"""Instruction sets a kernel can be emitted for, one row each.

An `Isa` names the widest vector registers, whether instructions take their
VEX (three-operand) or legacy (two-operand) encoding, and the extensions
every CPU running that ISA's code is assumed to have. A kernel needing more
(found by the required-ISA pass) says so in its manifest entry.
"""

from __future__ import annotations

from dataclasses import dataclass

X86_64_V2 = frozenset({"SSE2", "SSE3", "SSSE3", "SSE4.1", "SSE4.2", "POPCNT"})
# every AVX2 processor also has PCLMULQDQ
X86_64_V3 = X86_64_V2 | frozenset({"AVX", "AVX2", "BMI1", "BMI2", "FMA", "LZCNT", "MOVBE", "PCLMULQDQ"})


@dataclass(frozen=True)
class Isa:
    name: str  # as written in parameter files and symbol suffixes
    vector_bits: int  # widest vector register: 256 (ymm) or 128 (xmm)
    vex: bool  # VEX encodings; else legacy ones, after the legalisation pass
    extensions: frozenset[str]  # what a CPU running this ISA's kernels has
    vector_registers: int = 16

    def vector_bits_for(self, bits: int) -> int:
        """The register width that holds `bits` bits of data: xmm for up to
        128, else the widest."""
        return 128 if bits <= 128 else self.vector_bits


AVX2 = Isa("avx2", 256, True, X86_64_V3)
SSE = Isa("sse", 128, False, X86_64_V2)

ISAS: dict[str, Isa] = {isa.name: isa for isa in (AVX2, SSE)}


def cpuinfo_name(extension: str) -> str:
    """An extension as /proc/cpuinfo (and the manifest) names it: SSE4.1 -> sse4_1."""
    return extension.lower().replace(".", "_")
