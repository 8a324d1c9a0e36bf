"""Instruction encodings and the forms of an instruction, as data.

An `Encoding` (legacy SSE, VEX, EVEX) carries what differs between them for
the passes: how many register operands a form names, which registers and
widths it reaches, whether its memory operands may be unaligned, whether a
narrower write clears the register above it. A `Form` is one way an
instruction of the table is encoded (avo's instruction forms): its
encoding, the register widths it exists at, its mnemonic and the CPU
extensions it needs. Each row of `machine.ops` lists its forms; an ISA
encodes its vector instructions in one encoding (`Isa.encoding`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Encoding:
    name: str  # as messages name it
    # register operands a form of a three-operand operation names: with two, the destination is also the
    # first source (`paddw x, y` is x = x + y), so the legalisation pass ties them
    operands: int
    registers: int  # vector registers an operand can name
    widths: tuple[int, ...]  # vector register widths it encodes
    # whether a vector form's memory operand may be unaligned (legacy forms fault unless it is 16-byte
    # aligned), so that an argument's vector can be read in the instruction using it (`fold_loads`)
    unaligned_memory: bool
    # whether writing a register narrower than the widest zeroes the bits above it (VEX.128 clears the
    # upper half of the ymm register) or keeps them (legacy)
    zeroes_upper: bool
    # whether a shorter prefix exists only where the last source (the r/m operand) is a register below 8:
    # a commutative operation's sources are then swapped to get it (VEX's two-byte prefix)
    short_prefix_low_rm: bool
    # element widths a memory source may be broadcast from into every lane, in the instruction itself
    # (EVEX's {1toN} on 32- and 64-bit elements); () where a broadcast is a load of its own
    broadcast_elems: tuple[int, ...] = ()


LEGACY = Encoding("legacy", 2, 16, (128,), unaligned_memory=False, zeroes_upper=False, short_prefix_low_rm=False)
VEX = Encoding("VEX", 3, 16, (128, 256), unaligned_memory=True, zeroes_upper=True, short_prefix_low_rm=True)
EVEX = Encoding("EVEX", 3, 32, (128, 256, 512), unaligned_memory=True, zeroes_upper=True, short_prefix_low_rm=False,
                broadcast_elems=(32, 64))


@dataclass(frozen=True)
class Form:
    """One encoding of an instruction. A general-register instruction has one
    form whatever the ISA (its `widths` are the general registers' 64 bits)."""

    encoding: Encoding
    widths: tuple[int, ...]  # register widths it exists at
    mnemonic: str
    extensions: frozenset[str]  # what a CPU needs to run it
    registers: int  # registers of its operands' file it can name

    def exists(self, encoding: Encoding, bits: int) -> bool:
        return self.encoding == encoding and bits in self.widths
