"""Calling conventions: the one place that knows which register holds what.

Builders refer to arguments as `ArgBase(i)`; the printer and the file frame
ask the ABI for the register behind it and for what must be preserved.
"""

from __future__ import annotations

from dataclasses import dataclass

GPR_NAMES = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


@dataclass(frozen=True)
class Abi:
    name: str
    arg_registers: tuple[int, ...]  # GPR numbers, in C argument order
    callee_saved_gprs: tuple[int, ...]

    def arg_register(self, index: int) -> str:
        if index >= len(self.arg_registers):
            raise ValueError(f"{self.name}: argument {index} is not passed in a register")
        return GPR_NAMES[self.arg_registers[index]]

    def scratch_gprs(self, nargs: int) -> tuple[int, ...]:
        """Caller-saved registers free for the kernel once `nargs` pointers are live."""
        taken = set(self.arg_registers[:nargs]) | {4, 5}
        caller_saved = [r for r in range(16) if r not in self.callee_saved_gprs and r not in taken]
        return tuple(caller_saved)


SYSV = Abi("sysv", (7, 6, 2, 1, 8, 9), (3, 5, 12, 13, 14, 15))
