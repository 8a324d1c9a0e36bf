"""The proof that a kernel runs in constant time: no branch, no memory
address and no instruction's time depends on the data.

The data are the lanes: every value in a vector register, and every general
register that holds no address and no loop counter. An encoded body (after
`passes.roll` and `passes.encoding`) reaches memory only at a buffer (an
argument, a constant table, the stack area) plus a displacement fixed in the
instruction, either from the argument's home register, RIP or the frame, or
from a register that `ir.stream.run_stream` proves holds an address of that
buffer on every pass through every loop: set by `lea` and moved by `add`
of an immediate, nothing else, so pointer arithmetic alone. The same run
proves that every `repeat_end` counts down a counter that a `repeat` set to
an immediate and that nothing in the loop writes; a control row other than
those two (a branch on anything else) is refused, and so is a row whose time
depends on its operands (`Op.variable_time`). The frame (`emission.frame`) adds
no branch; the dispatch unit (`emission.dispatch`) branches only on the ISA
it chose, outside the kernels.
"""

from __future__ import annotations

from ..errors import CheckError
from ..ir.instr import Instr
from ..ir.stream import LOOP_ROWS, run_stream
from ..machine.abi import Abi
from ..machine.ops import spec
from .check import check_operands


def prove_constant_time(body: tuple[Instr, ...] | list[Instr], abi: Abi, nargs: int) -> None:
    """Return where `body` runs in constant time; CheckError naming the first
    instruction that branches on, addresses by or takes a time from the data."""
    check_operands(body, nargs, allocated=True)  # a loop's trip count among them: an immediate
    for i, ins in enumerate(body):
        row = spec(ins.op)
        where = f"instruction {i} ({ins.op} {ins.comment})"
        if row.variable_time:
            raise CheckError(f"{where}: its time depends on its operands' values: not constant time")
        if row.cls == "control" and ins.op not in LOOP_ROWS:
            raise CheckError(f"{where}: a branch other than a rolled loop's counter: not constant time")
    try:
        run_stream(body, abi, nargs)
    except CheckError as e:
        raise CheckError(f"not constant time: {e}") from None
