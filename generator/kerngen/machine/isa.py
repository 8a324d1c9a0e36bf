"""Instruction sets a kernel can be emitted for, one row each.

An `Isa` names the widest vector registers, the encoding of its vector
instructions (`machine.encoding`: legacy two-operand forms, VEX, EVEX), how
the vectors builders write become legal on it, its register families
(`machine.registers`) and how the allocator uses them, and the extensions every CPU
running that ISA's code is assumed to have. A kernel needing more (found by
the required-ISA pass from its instructions' forms) says so in its manifest
entry.

The scalar ISA keeps the vector model: builders write the same 256-bit
vectors as for AVX2, and the legalisation pass puts each lane on a general
register of its own (legalisation "onto_gprs"), so the kernels and their
NTT domain are those of AVX2.
"""

from __future__ import annotations

from dataclasses import dataclass

from .encoding import EVEX, LEGACY, VEX, Encoding
from .ops import BLEND_SCRATCH, TABLE, InstructionTable
from .registers import GENERAL, GPR_NAMES, MASK, MASKS, VECTOR, RegisterFamily, general_family, vector_family

MIN_SPILL_SLOT_BYTES = 32  # a ymm register: the spill slots of every ISA up to AVX2 (SSE kernels' frames too)

X86_64_V2 = frozenset({"SSE2", "SSE3", "SSSE3", "SSE4.1", "SSE4.2", "POPCNT"})
# every AVX2 processor also has PCLMULQDQ
X86_64_V3 = X86_64_V2 | frozenset({"AVX", "AVX2", "BMI1", "BMI2", "FMA", "LZCNT", "MOVBE", "PCLMULQDQ"})
X86_64_V4 = X86_64_V3 | frozenset({"AVX512F", "AVX512BW", "AVX512DQ", "AVX512CD", "AVX512VL"})
# the x86-64 micro-architecture levels by name: what a CPU mask (`harness.cpu`, KERNGEN_CPU) may name
LEVELS: dict[str, frozenset[str]] = {"x86-64": frozenset({"SSE2"}), "x86-64-v2": X86_64_V2, "x86-64-v3": X86_64_V3,
                                     "x86-64-v4": X86_64_V4}


@dataclass(frozen=True)
class RegisterUse:
    """How the allocator uses an ISA's register families."""

    lanes: str  # the family a vector's lanes live on: VECTOR, or GENERAL (a lane per register)
    # whether the ABI's callee-saved general registers join every kernel's pool (else only a kernel asking)
    callee_saved_general: bool = False
    # general registers left to the roll pass: a loop's counter and one table pointer (the twiddles') where
    # lanes live on the others, so that NTT passes roll into loops; nfl-62's forward NTT at n = 1024 then
    # takes 74 KB of code instead of 436 KB, for 640 more instructions (spills)
    roll_general: int = 0

    @property
    def spill_general(self) -> bool:
        """Whether a general register's value may go to the stack: where lanes
        live on them; else running out of them is an AllocationError, on which
        a family may retry with more registers or another plan."""
        return self.lanes == GENERAL


ON_VECTORS = RegisterUse(VECTOR)


@dataclass(frozen=True)
class Isa:
    name: str  # as written in parameter files and symbol suffixes
    vector_bits: int  # widest vector register: 512 (zmm), 256 (ymm) or 128 (xmm)
    encoding: Encoding  # of its vector instructions (the scalar ISA has none: its lanes are lowered)
    extensions: frozenset[str]  # what a CPU running this ISA's kernels has
    c_march: str  # what plain C is compiled for (-march) when compared with this ISA's kernels
    # its register files: vector registers (none where lanes live on general registers), general, opmask
    families: tuple[RegisterFamily, ...] = (vector_family(16, (128, 256)), general_family())
    # how the vectors builders write become legal: the name of a strategy of `passes.legalise`: "none"
    # (they are), "split" (into register-wide parts, in the encoding's forms), "onto_gprs" (each lane on a
    # general register of its own, through the table's `on_gpr` rows)
    legalisation: str = "none"
    register_use: RegisterUse = ON_VECTORS
    preference: int = 0  # where several ISAs' kernels can run, the lowest is called (`dispatch`)
    # the width builders write vectors in; where registers are narrower (SSE) or lanes live on general
    # registers (scalar), legalisation splits or lowers them, so those kernels are the widest ISA's twins
    written_bits: int = 256

    def family(self, name: str) -> RegisterFamily:
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no {name} registers")

    @property
    def spill_slot_bytes(self) -> int:
        """The bytes of one spill slot, and the alignment of the spill area: the widest vector register
        (a zmm register's 64 on AVX-512; 32 below, which the frames of AVX2 and SSE kernels keep)."""
        return max(MIN_SPILL_SLOT_BYTES, self.vector_bits // 8)

    def has_family(self, name: str) -> bool:
        return any(f.name == name for f in self.families)

    def candidates(self, generic: str, bits: int, table: InstructionTable = TABLE) -> tuple[str, ...]:
        """The rows doing `generic` on `bits`-bit lanes that kernels for this
        ISA can hold: with a form in its encoding, or, where lanes live on
        general registers, a lowering onto them. Where several do, which one
        a kernel uses is its builder's (its cost model's) choice."""
        rows = (table.ops[name] for name in table.doing(generic, bits))
        if self.register_use.lanes == GENERAL:
            return tuple(row.name for row in rows if row.on_gpr is not None)
        return tuple(row.name for row in rows if row.encoded_in(self.encoding))

    def has(self, generic: str, bits: int) -> bool:
        """Whether kernels for this ISA can do `generic` on `bits`-bit lanes."""
        return bool(self.candidates(generic, bits))

    def registers_per_vector(self, lanes: int, lane_bits: int) -> int:
        """How many registers hold one vector of `lanes` lanes: a general
        register per lane, or enough vector registers for its bits."""
        return lanes if self.register_use.lanes == GENERAL else max(1, lanes * lane_bits // self.vector_bits)


# AVX-512 F, BW, DQ and VL on zmm registers, 32 of them, and opmasks; a kernel using a further extension (IFMA,
# VPCLMULQDQ on zmm) requires it (the required-ISA pass finds it, the dispatch unit checks it). Preferred over
# AVX2 wherever it runs. Blends by an immediate go through a general register and an opmask it keeps from
# allocation (`ops.BLEND_SCRATCH`); legalisation rewrites the VEX rows EVEX lacks (blends) into EVEX ones
_SCRATCH_GPR, _SCRATCH_MASK = BLEND_SCRATCH
_EVEX_GENERAL = general_family(implicit=(GPR_NAMES.index(_SCRATCH_GPR),))
_EVEX_MASKS = RegisterFamily(MASK, MASKS.count, names=MASKS.names,
                             unallocated=MASKS.unallocated + (MASKS.names.index(_SCRATCH_MASK),))
AVX512 = Isa("avx512", 512, EVEX, X86_64_V4, "x86-64-v4", (vector_family(32, EVEX.widths), _EVEX_GENERAL, _EVEX_MASKS),
             legalisation="rewrite", preference=-2, written_bits=512)
# the same EVEX rows on ymm: AVX-512VL's 32 registers, opmasks and IFMA at AVX2's vector width (the builders
# write 256-bit vectors, so its NTTs are AVX2's twins), for CPUs where 512-bit work has fewer ports than
# 256-bit work; after avx512 where both run (docs/performance.md, "256-bit EVEX": zmm measured faster)
AVX512VL = Isa("avx512vl", 256, EVEX, X86_64_V4, "x86-64-v4",
               (vector_family(32, (128, 256)), _EVEX_GENERAL, _EVEX_MASKS), legalisation="rewrite", preference=-1)
AVX2 = Isa("avx2", 256, VEX, X86_64_V3, "native")
# preferred where several run: AVX2, then scalar (64-bit lanes only, where SSE's two lanes are level
# with plain C and general registers beat them: docs/performance.md, "64-bit lanes against NFLlib and Intel HEXL"), then SSE
SSE = Isa("sse", 128, LEGACY, X86_64_V2, "x86-64-v2", (vector_family(16, (128,)), general_family()),
          legalisation="split", preference=2)
# no vector instruction is encoded (the lanes are lowered onto general registers, whose instructions have one
# form each); LEGACY says no vector form it could meet may assume VEX's unaligned memory operands or three
# operands. mulx's implicit source rdx (2) is reserved for it; the lanes take every general register but the
# roll pass's, the callee-saved ones too
SCALAR = Isa("scalar", 256, LEGACY, frozenset({"BMI2"}), "native", (general_family(implicit=(2,)),),
             legalisation="onto_gprs", register_use=RegisterUse(GENERAL, callee_saved_general=True, roll_general=2),
             preference=1)

ISAS: dict[str, Isa] = {isa.name: isa for isa in (AVX512, AVX512VL, AVX2, SSE, SCALAR)}


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
# bits 5, 6 and 7: the opmasks, the zmm upper halves of registers 0-15, and registers 16-31. macOS turns them
# on for a thread at its first AVX-512 instruction, so XCR0 does not show them before: there the dispatch unit
# asks the OS (sysctl hw.optional.avx512f) instead
AVX512_STATE = 0xE0
_ZMM_STATE = _YMM_STATE | AVX512_STATE
# what the register state in XCR0 is called in messages and the dispatch unit's comments, widest first
XCR0_STATES = ((_ZMM_STATE, "zmm and opmask"), (_YMM_STATE, "ymm"))

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
    "AVX512F": CpuidBit(7, 0, "ebx", 16, _ZMM_STATE),
    "AVX512DQ": CpuidBit(7, 0, "ebx", 17, _ZMM_STATE),
    "AVX512IFMA": CpuidBit(7, 0, "ebx", 21, _ZMM_STATE),
    "AVX512CD": CpuidBit(7, 0, "ebx", 28, _ZMM_STATE),
    "AVX512BW": CpuidBit(7, 0, "ebx", 30, _ZMM_STATE),
    "AVX512VL": CpuidBit(7, 0, "ebx", 31, _ZMM_STATE),
    "AVX512VBMI": CpuidBit(7, 0, "ecx", 1, _ZMM_STATE),
    "AVX512VBMI2": CpuidBit(7, 0, "ecx", 6, _ZMM_STATE),
    "GFNI": CpuidBit(7, 0, "ecx", 8),
    "LZCNT": CpuidBit(0x80000001, 0, "ecx", 5),
}
