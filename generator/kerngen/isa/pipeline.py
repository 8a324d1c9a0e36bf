"""The passes from a builder's instruction list to a printable kernel:
check operands against the op table, allocate registers, re-check the result."""

from __future__ import annotations

from .abi import Abi
from .alloc import RegisterPools, allocate
from .ir import ArgBase, ArgSpec, Builder, GReg, Imm, Instr, Kernel, Mem, PhysReg, VReg
from .ops import spec


def check_operands(body: tuple[Instr, ...] | list[Instr], nargs: int, allocated: bool) -> None:
    """Every operand fits its slot kind; virtual registers only before allocation."""
    for i, ins in enumerate(body):
        s = spec(ins.op)
        for slot, op in zip(s.slots, ins.operands):
            where = f"instruction {i} ({ins.op} {ins.comment})"
            if isinstance(op, (VReg, GReg)) and allocated:
                raise AssertionError(f"{where}: virtual register after allocation")
            if isinstance(op, PhysReg) and not allocated:
                raise AssertionError(f"{where}: physical register before allocation")
            ok = {
                "v": isinstance(op, (VReg, PhysReg)) and getattr(op, "kind", "vec") == "vec",
                "vm": isinstance(op, (VReg, Mem)) or (isinstance(op, PhysReg) and op.kind == "vec"),
                "m": isinstance(op, Mem),
                "i": isinstance(op, Imm),
                "g": isinstance(op, GReg) or (isinstance(op, PhysReg) and op.kind == "gpr"),
                "gm": isinstance(op, (GReg, Mem)) or (isinstance(op, PhysReg) and op.kind == "gpr"),
            }[slot.kind]
            if not ok:
                raise AssertionError(f"{where}: operand {op!r} does not fit slot kind {slot.kind!r}")
            if isinstance(op, Mem) and isinstance(op.base, ArgBase) and op.base.index >= nargs:
                raise AssertionError(f"{where}: argument {op.base.index} does not exist")


def compile_kernel(builder: Builder, symbol: str, args: tuple[ArgSpec, ...], abi: Abi, uses_avx: bool = True,
                   callee_saved: bool = False) -> Kernel:
    """callee_saved: also allocate the ABI's callee-saved GPRs (not rbp, the
    frame pointer of kernels with spills); the emitted frame pushes and pops
    those a kernel uses (`emit.frame_of`)."""
    check_operands(builder.instrs, len(args), allocated=False)
    extra = tuple(r for r in abi.callee_saved_gprs if r != 5) if callee_saved else ()
    pools = RegisterPools(vector=tuple(range(16)), gpr=abi.scratch_gprs(len(args)) + extra)
    result = allocate(builder.instrs, pools)
    check_operands(result.body, len(args), allocated=True)
    return Kernel(symbol, args, result.body, tuple(builder.tables.values()), result.spill_slots, uses_avx)
