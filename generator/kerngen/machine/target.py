"""The `Target`: instruction set, lane width, calling convention and object
format, chosen once from the parameters and the command line and carried
by every kernel through allocation, verification, emission and the file
frame."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .abi import SYSV, WIN64, Abi
from .formats import COFF64, ELF64, MACHO64, ObjectFormat
from .isa import ISAS, Isa
from .registers import GENERAL


@dataclass(frozen=True)
class Platform:
    """A calling convention with the object format it is linked in (the `abi`
    key of a parameter file names one)."""

    name: str
    abi: Abi
    fmt: ObjectFormat
    file_suffix: str  # of the bundle's .asm file for this platform: NAME{suffix}.asm
    c_test: str  # a C preprocessor test for compilers targeting it ("" for the remaining x86-64 systems)

    def asm_file(self, bundle_name: str) -> str:
        return f"{bundle_name}{self.file_suffix}.asm"


PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    Platform("sysv", SYSV, ELF64, "", ""),
    Platform("win64", WIN64, COFF64, "_win64", "defined(_WIN64) || defined(__CYGWIN__)"),
    Platform("macho", SYSV, MACHO64, "_macho", "defined(__APPLE__)"),
)}

# what this machine links and runs (the harness, bench and explore build for it)
NATIVE = PLATFORMS["sysv"]

# of the exported symbols: hidden (the default: callable from the program or
# shared library that links the object, never exported from it) or default
VISIBILITIES = ("hidden", "default")


@dataclass(frozen=True)
class Target:
    isa: Isa
    lane_bits: int  # width of one vector lane or general-purpose word of the data
    platform: Platform
    visibility: str = VISIBILITIES[0]

    @cached_property  # asked for every argument operand the printer spells
    def abi(self) -> Abi:
        """The platform's convention, with the registers the ISA uses implicitly kept from arguments."""
        return self.platform.abi.reserving(self.isa.family(GENERAL).unallocated)

    def pool(self, family: str) -> tuple[int, ...]:
        """The ISA's registers of `family` in the order to hand them out, those
        the ABI lets a callee lose first (none where the ISA has no such family)."""
        if not self.isa.has_family(family):
            return ()
        return self.isa.family(family).pool(self.abi.saved(family))

    @property
    def fmt(self) -> ObjectFormat:
        return self.platform.fmt

    @property
    def lane_bytes(self) -> int:
        return self.lane_bits // 8

    @property
    def vector_bits(self) -> int:
        """The widest vector builders write (the IR's): the ISA's `written_bits`."""
        return self.isa.written_bits

    @property
    def lanes(self) -> int:
        """Lanes of the widest vector builders write."""
        return self.vector_bits // self.lane_bits


def make_target(isa: str, lane_bits: int, platform: str = "sysv", visibility: str = VISIBILITIES[0]) -> Target:
    return Target(ISAS[isa], lane_bits, PLATFORMS[platform], visibility)
