"""A kernel's frame, from its ABI and the registers it uses.

The prologue loads stack-passed arguments into their home registers,
pushes the callee-saved general registers the kernel uses and, when the
kernel spills or must preserve vector registers, aligns a stack area
(spill slots, then one 16-byte save per callee-saved vector register the
kernel writes, as Win64 requires for xmm6-15); the epilogue undoes it and
ends VEX code with vzeroupper. The frame template renders these fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.instr import SLOT_BYTES, Kernel, PhysReg
from ..ir.ops import spec
from .abi import GPR_NAMES

SAVE_BYTES = 16  # the callee-saved low half of a vector register


@dataclass(frozen=True)
class Frame:
    stack_args: tuple[tuple[str, int], ...]  # (home register, offset from rsp at entry)
    pushes: tuple[str, ...]
    stack_bytes: int  # the aligned area below the frame pointer: spills, then vector saves
    saves: tuple[tuple[str, int], ...]  # (xmm register, offset in the area)
    save_move: str  # the aligned 128-bit move that saves and restores them
    vzeroupper: bool


def registers_used(kernel: Kernel, kind: str) -> list[int]:
    return sorted({op.number for ins in kernel.body for op in ins.operands
                   if isinstance(op, PhysReg) and op.kind == kind})


def frame_of(kernel: Kernel) -> Frame:
    abi = kernel.target.abi
    stack_args = tuple((GPR_NAMES[r], off) for r, off in abi.stack_args(len(kernel.args)))
    pushes = tuple(GPR_NAMES[r] for r in registers_used(kernel, "gpr") if r in abi.callee_saved_gprs)
    spill = SLOT_BYTES * kernel.spill_slots
    saved = [r for r in registers_used(kernel, "vec") if r in abi.callee_saved_vectors]
    saves = tuple((f"xmm{r}", spill + SAVE_BYTES * k) for k, r in enumerate(saved))
    area = spill + SAVE_BYTES * len(saves)
    area += -area % SLOT_BYTES
    return Frame(stack_args, pushes, area, saves, spec("store_aligned").mnemonic(kernel.target.isa.vex), kernel.vex)
