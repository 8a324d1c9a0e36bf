"""Calling conventions: the one place that knows which register holds what.

Builders refer to arguments as `ArgBase(i)`; the allocator, the printer and
the file frame ask the `Abi` where argument i lives, which registers are
free and what a kernel must preserve. An argument passed on the stack is
loaded into a caller-saved register at entry and lives there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .registers import GENERAL, VECTOR, CalleeSaved

RSP, RBP = 4, 5


@dataclass(frozen=True)
class Abi:
    name: str
    title: str
    arg_registers: tuple[int, ...]  # GPR numbers of the register arguments, in C order
    callee_saved: tuple[CalleeSaved, ...]  # per register family; a family not listed is volatile
    first_stack_arg: int  # offset from rsp at entry of the first argument passed on the stack
    stack_arg_homes: tuple[int, ...]  # caller-saved registers the stack arguments are loaded into
    reserved: tuple[int, ...] = ()  # registers the ISA's instructions use implicitly: no argument lives there
    moved_args: tuple[tuple[int, int], ...] = ()  # (arrival, home) of register arguments moved at entry

    def saved(self, family: str) -> tuple[int, ...]:
        """The registers of `family` a callee preserves."""
        return next((c.registers for c in self.callee_saved if c.family == family), ())

    def reserving(self, registers: tuple[int, ...]) -> Abi:
        """This convention on an ISA whose instructions use `registers`
        implicitly (mulx reads rdx): a register argument arriving in one of
        them is moved at entry to a caller-saved register no argument uses."""
        if not registers:
            return self
        spare = [r for r in range(16) if r not in self.saved(GENERAL) and r not in self.arg_registers
                 and r not in self.stack_arg_homes and r not in registers and r not in (RSP, RBP)]
        moved = tuple(zip((r for r in self.arg_registers if r in registers), spare))
        return replace(self, reserved=registers, moved_args=moved)

    def entry_moves(self, nargs: int) -> tuple[tuple[int, int], ...]:
        """(home, arrival) of the first `nargs` arguments that are moved at entry."""
        arrivals = self.arg_registers[:nargs]
        return tuple((home, arrival) for arrival, home in self.moved_args if arrival in arrivals)

    def arg_home(self, index: int) -> int:
        """The GPR holding pointer argument `index` throughout the kernel."""
        if index < len(self.arg_registers):
            arrival = self.arg_registers[index]
            return dict(self.moved_args).get(arrival, arrival)
        k = index - len(self.arg_registers)
        if k >= len(self.stack_arg_homes):
            raise ValueError(f"{self.name}: argument {index} has no register to be loaded into")
        return self.stack_arg_homes[k]

    def stack_args(self, nargs: int) -> tuple[tuple[int, int], ...]:
        """(home register, offset from rsp at entry) of each argument passed on the stack."""
        first = len(self.arg_registers)
        return tuple((self.arg_home(i), self.first_stack_arg + 8 * (i - first)) for i in range(first, nargs))

    def scratch_gprs(self, nargs: int) -> tuple[int, ...]:
        """Caller-saved registers free for the kernel once `nargs` pointers are live."""
        taken = {self.arg_home(i) for i in range(nargs)} | {RSP, RBP} | set(self.reserved)
        return tuple(r for r in range(16) if r not in self.saved(GENERAL) and r not in taken)


SYSV = Abi("sysv", "System V AMD64", (7, 6, 2, 1, 8, 9), (CalleeSaved(GENERAL, (3, 5, 12, 13, 14, 15), 64),),
           8, (10, 11))
# four register arguments, then the stack above the caller's 32-byte shadow space; of the vector registers
# xmm6-15 keep their low 128 bits (16-31, where there are, are volatile), and no opmask register is kept
WIN64 = Abi("win64", "Microsoft x64", (1, 2, 8, 9),
            (CalleeSaved(GENERAL, (3, 5, 6, 7, 12, 13, 14, 15), 64), CalleeSaved(VECTOR, tuple(range(6, 16)), 128)),
            8 + 32, (10, 11))
