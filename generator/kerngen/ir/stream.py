"""The instruction stream a body runs, one call's worth.

An encoded body may hold loops (`repeat` ... `repeat_end`, from
`passes.roll`) and address registers (`lea` and `add`, from `passes.roll`
and `passes.encoding`). Running those, and only those, gives the stream of
every other instruction in the order it executes, each memory operand
resolved to the buffer and offset it reaches: the straight-line form that
the verifier proves and the figures count.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..errors import CheckError
from ..machine.registers import GENERAL
from .instr import ArgBase, Instr, Kernel, Mem, PhysReg
from ..machine.ops import spec

if TYPE_CHECKING:
    from ..machine.abi import Abi

# the control rows a body may hold, which `run_stream` runs: a rolled loop's counter set from an immediate
# and counted down to zero (no other branch exists in a kernel: `passes.constant_time`)
LOOP_ROWS = frozenset({"repeat", "repeat_end"})
_RUN_ROWS = LOOP_ROWS | {"lea", "add"}  # the rows `run_stream` runs rather than passes on


def run_stream(body: tuple[Instr, ...] | list[Instr], abi: Abi, nargs: int) -> tuple[Instr, ...]:
    """The instructions `body` runs, addresses resolved; CheckError where an
    address register holds no address of the buffer an operand names, or a
    loop counter is written inside its loop."""
    holds: dict[int, tuple[tuple, int]] = {abi.arg_home(i): (("arg", i), 0) for i in range(nargs)}
    counters: dict[int, int] = {}
    tops: dict[int, int] = {}
    out: list[Instr] = []
    pc = 0
    # of each instruction of the body, which a loop runs again and again: the general registers it
    # writes, and where its memory operands addressed through a register (an argument's, a table
    # pointer) are
    writes = [tuple(op.number for op in ins.written if isinstance(op, PhysReg) and op.kind == GENERAL)
              for ins in body]
    addressed = [tuple(k for k, op in enumerate(ins.operands)
                       if isinstance(op, Mem) and (isinstance(op.base, ArgBase) or op.pointer is not None))
                 for ins in body]

    def fail(message: str):
        raise CheckError(f"encoded instruction {pc} ({body[pc].op} {body[pc].comment}): {message}")

    def address(op: Mem) -> Mem:
        if isinstance(op.base, ArgBase):
            register, bias = abi.arg_home(op.base.index), 0
            wrong = f"the home register of argument {op.base.index} holds no address in it"
        elif op.pointer is not None:
            register, bias = op.pointer.register, op.pointer.bias
            wrong = f"register {register} does not point into {op.base.label}"
        else:
            return op  # RIP- or stack-relative: a fixed address
        key, disp = holds.get(register, (None, 0))
        if key != op.buffer:
            fail(wrong)
        return dataclasses.replace(op, offset=disp + op.offset - bias, pointer=None)

    while pc < len(body):
        ins = body[pc]
        if ins.op not in _RUN_ROWS:  # most: the instruction, its addresses resolved
            for number in writes[pc]:
                if number in counters:
                    fail("writes a loop counter")
                holds.pop(number, None)
            if addressed[pc]:
                ops = list(ins.operands)
                for k in addressed[pc]:
                    ops[k] = address(ops[k])
                ins = ins if tuple(ops) == ins.operands else Instr(ins.op, tuple(ops), ins.comment, ins.idiom)
            out.append(ins)
        elif ins.op == "repeat":
            counters[ins.operands[0].number], tops[ins.operands[2].value] = ins.operands[1].value, pc + 1
        elif ins.op == "repeat_end":
            reg = ins.operands[0].number
            if reg not in counters:
                fail("counts down a register that is not a loop counter")
            counters[reg] -= 1
            if counters[reg]:
                pc = tops[ins.operands[1].value]
                continue
        elif ins.op == "lea":
            source = address(ins.operands[1])  # a table's address, or one an outer loop's pointer holds
            holds[ins.operands[0].number] = (source.buffer, source.offset)
        else:  # add: an address register moved along
            reg = ins.operands[0].number
            if reg not in holds:
                fail("moves a register that holds no address")
            key, disp = holds[reg]
            holds[reg] = (key, disp + ins.operands[1].value)
        pc += 1
    return tuple(out)


def executed(kernel: Kernel) -> tuple[Instr, ...]:
    """The instructions one call of `kernel` runs, in order: the stream the
    verifier proves and the figures count (the body itself where it holds
    no loop and no address register)."""
    if not any(spec(ins.op).cls in ("address", "control") for ins in kernel.body):
        return kernel.body
    return run_stream(kernel.body, kernel.target.abi, len(kernel.args))
