"""Instruction sets a kernel can be emitted for, one row each.

An `Isa` names the widest vector registers, whether instructions take their
VEX (three-operand) or legacy (two-operand) encoding, and the extensions
every CPU running that ISA's code is assumed to have. A kernel needing more
(found by the required-ISA pass) says so in its manifest entry.

The scalar ISA keeps the vector model: builders write the same 256-bit
vectors as for AVX2, and the legalisation pass puts each lane on a general
register of its own (`lanes_on_gpr`), so the kernels and their NTT domain
are those of AVX2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..machine.ops import has

X86_64_V2 = frozenset({"SSE2", "SSE3", "SSSE3", "SSE4.1", "SSE4.2", "POPCNT"})
# every AVX2 processor also has PCLMULQDQ
X86_64_V3 = X86_64_V2 | frozenset({"AVX", "AVX2", "BMI1", "BMI2", "FMA", "LZCNT", "MOVBE", "PCLMULQDQ"})


@dataclass(frozen=True)
class Isa:
    name: str  # as written in parameter files and symbol suffixes
    vector_bits: int  # widest vector register: 256 (ymm) or 128 (xmm)
    vex: bool  # VEX encodings; else legacy ones, after the legalisation pass
    extensions: frozenset[str]  # what a CPU running this ISA's kernels has
    c_march: str  # what plain C is compiled for (-march) when compared with this ISA's kernels
    vector_registers: int = 16
    lanes_on_gpr: bool = False  # each lane of a vector on a general register of its own (the scalar ISA)
    reserved_gprs: tuple[int, ...] = ()  # general registers instructions use implicitly: never allocated
    preference: int = 0  # where several ISAs' kernels can run, the lowest is called (`dispatch`)
    # the width builders write vectors in; where registers are narrower (SSE) or lanes live on general
    # registers (scalar), legalisation splits or lowers them, so those kernels are the widest ISA's twins
    written_bits: int = 256

    def has(self, generic: str, bits: int) -> bool:
        """Whether kernels for this ISA can do `generic` on `bits`-bit lanes."""
        return has(generic, bits, self.lanes_on_gpr)

    def registers_per_vector(self, lanes: int, lane_bits: int) -> int:
        """How many registers hold one vector of `lanes` lanes: a general
        register per lane, or enough vector registers for its bits."""
        return lanes if self.lanes_on_gpr else max(1, lanes * lane_bits // self.vector_bits)


AVX2 = Isa("avx2", 256, True, X86_64_V3, "native")
# preferred where several run: AVX2, then scalar (64-bit lanes only, where SSE's two lanes are level
# with plain C and general registers beat them: README, "64-bit lanes"), then SSE
SSE = Isa("sse", 128, False, X86_64_V2, "x86-64-v2", preference=2)
# mulx's implicit source rdx (2) is reserved for it
SCALAR = Isa("scalar", 256, False, frozenset({"BMI2"}), "native", vector_registers=0, lanes_on_gpr=True,
             reserved_gprs=(2,), preference=1)

ISAS: dict[str, Isa] = {isa.name: isa for isa in (AVX2, SSE, SCALAR)}


def cpuinfo_name(extension: str) -> str:
    """An extension as /proc/cpuinfo (and the manifest) names it: SSE4.1 -> sse4_1."""
    return extension.lower().replace(".", "_")


@dataclass(frozen=True)
class CpuidBit:
    """Where CPUID reports an extension, and the register state the OS must
    have enabled (XCR0, read by XGETBV) before its instructions may run."""

    leaf: int
    subleaf: int
    register: str  # "eax", "ebx", "ecx" or "edx"
    bit: int
    xcr0: int = 0


_YMM_STATE = 0x6  # XCR0 bits 1 and 2: the OS saves xmm and the ymm upper halves

CPUID: dict[str, CpuidBit] = {
    "SSE2": CpuidBit(1, 0, "edx", 26),
    "SSE3": CpuidBit(1, 0, "ecx", 0),
    "PCLMULQDQ": CpuidBit(1, 0, "ecx", 1),
    "SSSE3": CpuidBit(1, 0, "ecx", 9),
    "FMA": CpuidBit(1, 0, "ecx", 12, _YMM_STATE),
    "SSE4.1": CpuidBit(1, 0, "ecx", 19),
    "SSE4.2": CpuidBit(1, 0, "ecx", 20),
    "MOVBE": CpuidBit(1, 0, "ecx", 22),
    "POPCNT": CpuidBit(1, 0, "ecx", 23),
    "AVX": CpuidBit(1, 0, "ecx", 28, _YMM_STATE),
    "BMI1": CpuidBit(7, 0, "ebx", 3),
    "AVX2": CpuidBit(7, 0, "ebx", 5, _YMM_STATE),
    "BMI2": CpuidBit(7, 0, "ebx", 8),
    "VPCLMULQDQ": CpuidBit(7, 0, "ecx", 10, _YMM_STATE),
    "LZCNT": CpuidBit(0x80000001, 0, "ecx", 5),
}
