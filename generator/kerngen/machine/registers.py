"""Register families as data: vector, general and opmask registers.

A `RegisterFamily` is one file of registers an ISA has: how many, the widths
they are written at, how each is spelt at each width, and the numbers never
handed out (k0, which as a mask operand means "no mask"; a general register
the ISA's instructions use implicitly, as mulx reads rdx). A `PhysReg` names
its family by `name` (the IR's register kind), the allocator hands out each
family's registers, the printer spells them from here and the frame saves
what the ABI's `CalleeSaved` rows say for each family.
"""

from __future__ import annotations

from dataclasses import dataclass

# the families' names: the `kind` of an allocated register (`ir.instr.PhysReg`)
VECTOR, GENERAL, MASK = "vec", "gpr", "mask"

GPR_NAMES = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


@dataclass(frozen=True)
class RegisterFamily:
    name: str  # VECTOR, GENERAL or MASK
    count: int  # registers numbered 0..count-1
    # the widths it is written at and the spelling at each: (bits, prefix) rows for numbered registers
    # (xmm3, ymm3, zmm3), or else the registers' names at every width (the general registers, the opmasks)
    prefixes: tuple[tuple[int, str], ...] = ()
    names: tuple[str, ...] = ()
    unallocated: tuple[int, ...] = ()  # numbers never handed out (k0: "no mask"; the ISA's implicit operands)
    # writing a register wider than this leaves upper state that legacy instructions would pay to preserve,
    # so code that did ends with vzeroupper (None: the family has no such state)
    clean_bits: int | None = None

    def spell(self, number: int, bits: int) -> str:
        return self.names[number] if self.names else f"{self.prefix(bits)}{number}"

    def prefix(self, bits: int) -> str:
        """The name of the numbered registers at `bits` bits (xmm, ymm, zmm)."""
        for width, prefix in self.prefixes:
            if width == bits:
                return prefix
        raise ValueError(f"{self.name} registers have no {bits}-bit form")

    def dirties_upper(self, bits: int) -> bool:
        return self.clean_bits is not None and bits > self.clean_bits

    def pool(self, saved: tuple[int, ...] = ()) -> tuple[int, ...]:
        """The numbers to hand out, in the order to try them: those a callee may
        lose first, then the `saved` ones a kernel must save and restore (with
        32 vector registers on Win64: 0-5, 16-31, then 6-15, as x86inc orders them)."""
        free = [r for r in range(self.count) if r not in self.unallocated]
        return tuple(sorted(free, key=lambda r: r in saved))


def vector_family(count: int, widths: tuple[int, ...]) -> RegisterFamily:
    """`count` vector registers written at `widths` (128: xmm, 256: ymm, 512: zmm)."""
    prefixes = {128: "xmm", 256: "ymm", 512: "zmm"}
    return RegisterFamily(VECTOR, count, tuple((bits, prefixes[bits]) for bits in widths), clean_bits=128)


def general_family(implicit: tuple[int, ...] = ()) -> RegisterFamily:
    """The 16 general registers; `implicit`: those the ISA's instructions use
    implicitly (mulx reads rdx), never allocated and kept from arguments."""
    return RegisterFamily(GENERAL, len(GPR_NAMES), names=GPR_NAMES, unallocated=implicit)


# AVX-512's opmask registers k0-k7: k0 as a mask operand means "no mask", so it is never allocated; named,
# as the general registers are, whatever the width of the vectors whose lanes they select
MASKS = RegisterFamily(MASK, 8, names=tuple(f"k{n}" for n in range(8)), unallocated=(0,))


@dataclass(frozen=True)
class CalleeSaved:
    """The registers of one family a callee must preserve, and how many bits
    of each (Win64 preserves the low 128 bits of xmm6-15)."""

    family: str
    registers: tuple[int, ...]
    bits: int
