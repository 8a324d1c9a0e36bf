"""A kernel's frame, from its ABI and the registers it uses.

The prologue loads stack-passed arguments into their home registers and
pushes the callee-saved general registers the kernel uses. The epilogue
undoes the frame and ends code that wrote a ymm register with vzeroupper. The frame template
renders these fields, in one of two layouts.

System V (no unwind tables): when the kernel spills, rbp is pushed and
becomes the frame pointer, and rsp is aligned down to the slot size (32
bytes, 64 where the slots hold zmm registers) to hold the spill slots.

Win64 (`ObjectFormat.unwind_tables`): the frame must be one the unwind codes
of its .pdata/.xdata entry describe, so after the pushes a fixed allocation
(`alloc`) holds the 16-byte saves of the callee-saved xmm6-15 the kernel
writes (plus 8 bytes of padding when the pushes leave rsp 8 mod 16: it is 8
mod 16 at entry), then the saves themselves; only a kernel that spills also
pushes rbp and sets it to rsp (UWOP_SET_FPREG, offset 0), after which the
body aligns rsp down to the slot size and allocates the spill slots, which the
unwinder need not know about. The epilogue restores the xmm registers
(relative to rbp when there is a frame pointer), then takes the canonical
Win64 form `lea rsp, [rbp + alloc]` or `add rsp, alloc`, pops, ret.
Each prologue instruction an unwind code describes is followed by a local
label `.uwK`, which the codes use as their prologue offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.instr import Kernel, registers_in
from ..machine.ops import spec
from ..machine.abi import RBP
from ..machine.registers import GENERAL, GPR_NAMES, VECTOR

SAVE_BYTES = 16  # the callee-saved low half of a vector register
PAGE_BYTES = 4096  # a larger Win64 frame would need stack probes (__chkstk)

# UNWIND_CODE operations (Microsoft x64 exception handling)
UWOP_PUSH_NONVOL = 0
UWOP_ALLOC_LARGE = 1
UWOP_ALLOC_SMALL = 2
UWOP_SET_FPREG = 3
UWOP_SAVE_XMM128 = 8


@dataclass(frozen=True)
class UnwindCode:
    """One prologue operation: the label after its instruction, the UNWIND_CODE
    operation and info, and the extra 16-bit slots it takes."""

    label: int  # K of the `.uwK` label that ends the instruction
    op: int
    info: int
    extra: tuple[int, ...] = ()


@dataclass(frozen=True)
class Frame:
    stack_args: tuple[tuple[str, int], ...]  # (home register, offset from rsp at entry)
    entry_moves: tuple[tuple[str, str], ...]  # (home, arrival) of register arguments moved at entry
    pushes: tuple[str, ...]  # in push order (Win64: rbp last when it is the frame pointer)
    stack_bytes: int  # System V: the aligned area below the frame pointer: spills, then vector saves
    saves: tuple[tuple[str, int], ...]  # (xmm register, offset in the area; Win64: in the fixed allocation)
    save_move: str  # the aligned 128-bit move that saves and restores them
    vzeroupper: bool
    unwind: bool = False  # Win64: the frame is described by unwind codes (the fields below)
    alloc: int = 0  # Win64: the fixed allocation below the pushes: xmm saves and alignment padding
    frame_pointer: bool = False  # Win64: rbp = rsp after the fixed allocation (the kernel spills)
    spill_bytes: int = 0  # Win64: the spill slots below the frame pointer, aligned down to `align`
    align: int = 32  # the alignment of the spill area (a slot's bytes)

    @property
    def has_frame(self) -> bool:
        """Whether the prologue moves rsp or saves a register (a leaf function
        that does neither needs no unwind data)."""
        return bool(self.pushes or self.saves or self.alloc or self.frame_pointer)

    @property
    def unwind_codes(self) -> tuple[UnwindCode, ...]:
        """The UNWIND_CODEs of the prologue, in prologue order."""
        codes = [UnwindCode(0, UWOP_PUSH_NONVOL, GPR_NAMES.index(r)) for r in self.pushes]
        if self.alloc:
            if self.alloc <= 128:
                codes.append(UnwindCode(0, UWOP_ALLOC_SMALL, self.alloc // 8 - 1))
            else:
                codes.append(UnwindCode(0, UWOP_ALLOC_LARGE, 0, (self.alloc // 8,)))
        codes += [UnwindCode(0, UWOP_SAVE_XMM128, int(x[3:]), (off // SAVE_BYTES,)) for x, off in self.saves]
        if self.frame_pointer:
            codes.append(UnwindCode(0, UWOP_SET_FPREG, 0))
        return tuple(UnwindCode(k, c.op, c.info, c.extra) for k, c in enumerate(codes))

    @property
    def unwind_slots(self) -> int:
        """UNWIND_INFO's count of code slots (before padding to an even count)."""
        return sum(1 + len(c.extra) for c in self.unwind_codes)

    @property
    def frame_register(self) -> int:
        """UNWIND_INFO's frame register (0: none): rbp, when the kernel spills."""
        return RBP if self.frame_pointer else 0

    @property
    def frame_offset(self) -> int:
        """UNWIND_INFO's scaled frame register offset: rbp is rsp after the fixed allocation."""
        return 0


def registers_used(kernel: Kernel, kind: str) -> list[int]:
    """The registers of family `kind` the kernel writes or reads: its operands', and those the ISA keeps from
    allocation for the rows spelt as several instructions that name them (mulx's rdx, a blend's opmask)."""
    isa = kernel.target.isa
    implicit: set[int] = set()
    if isa.has_family(kind) and isa.family(kind).names:
        family = isa.family(kind)
        spelt = " ".join(line for op in {ins.op for ins in kernel.body} for line in spec(op).lines or ())
        implicit = {r for r in family.unallocated if family.names[r] in spelt}
    return sorted(registers_in(kernel.body, kind) | implicit)


def frame_of(kernel: Kernel) -> Frame:
    abi = kernel.target.abi
    stack_args = tuple((GPR_NAMES[r], off) for r, off in abi.stack_args(len(kernel.args)))
    moves = tuple((GPR_NAMES[h], GPR_NAMES[a]) for h, a in abi.entry_moves(len(kernel.args)))
    pushes = tuple(GPR_NAMES[r] for r in registers_used(kernel, GENERAL) if r in abi.saved(GENERAL))
    slot = kernel.target.isa.spill_slot_bytes
    spill = slot * kernel.spill_slots
    saved = [r for r in registers_used(kernel, VECTOR) if r in abi.saved(VECTOR)]
    save_move = spec("store_aligned").form(kernel.target.isa.encoding, SAVE_BYTES * 8).mnemonic
    if kernel.target.fmt.unwind_tables:
        return _win64_frame(kernel, stack_args, moves, pushes, spill, saved, save_move, slot)
    saves = tuple((f"xmm{r}", spill + SAVE_BYTES * k) for k, r in enumerate(saved))
    area = spill + SAVE_BYTES * len(saves)
    area += -area % slot
    return Frame(stack_args, moves, pushes, area, saves, save_move, kernel.dirty_upper, align=slot)


def _win64_frame(kernel: Kernel, stack_args: tuple[tuple[str, int], ...], moves: tuple[tuple[str, str], ...],
                 pushes: tuple[str, ...], spill: int, saved: list[int], save_move: str, slot: int) -> Frame:
    frame_pointer = spill > 0
    if frame_pointer and "rbp" not in pushes:
        pushes += ("rbp",)
    saves = tuple((f"xmm{r}", SAVE_BYTES * k) for k, r in enumerate(saved))
    alloc = SAVE_BYTES * len(saves)
    # rsp is 8 mod 16 at entry; after an even number of pushes it still is
    if alloc and len(pushes) % 2 == 0:
        alloc += 8
    # the worst case below the return address: pushes, the fixed allocation,
    # then the spill slots after rsp (8-aligned there) is aligned down to a slot
    size = 8 * len(pushes) + alloc + (spill + slot - 8 if spill else 0)
    if size >= PAGE_BYTES:
        raise ValueError(f"{kernel.symbol}: a Win64 frame of {size} bytes (4 KiB or more) would need stack "
                         "probes (__chkstk), which kerngen does not emit")
    return Frame(stack_args, moves, pushes, 0, saves, save_move, kernel.dirty_upper, unwind=True, alloc=alloc,
                 frame_pointer=frame_pointer, spill_bytes=spill, align=slot)
