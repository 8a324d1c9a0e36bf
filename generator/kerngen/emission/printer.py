"""Assembly text for allocated instructions: the only place that spells them.

Two dialects share the operand logic: NASM, for the emitted files, and the
Intel syntax llvm-mca reads, for static throughput figures (there constant
tables are addressed through a base register: only the instruction mix
matters to the model). Mnemonics come from the instruction table: the form
of each instruction in the target ISA's encoding; a two-operand form, whose
destination is its first source, is printed with two operands. An emitted
file is read back (`reader`, `body_reader`) by printing the instructions a
line could be and keeping the one printed as that line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..ir.instr import ArgBase, Imm, Instr, Mem, PhysReg, StackBase, TableBase
from ..machine.encoding import Form
from ..machine.ops import spec
from ..machine.registers import GPR_NAMES, VECTOR
from ..machine.target import Target


@dataclass(frozen=True)
class Dialect:
    name: str
    sizes: dict[int, str]  # memory operand size keyword by bytes
    table_base: str | None  # register standing in for constant tables; None: RIP-relative by label


NASM = Dialect("nasm", {1: "byte", 2: "word", 4: "dword", 8: "qword", 16: "oword", 32: "yword"}, None)
INTEL = Dialect("intel", {1: "byte ptr", 2: "word ptr", 4: "dword ptr", 8: "qword ptr", 16: "xmmword ptr",
                          32: "ymmword ptr"}, "r11")

# a memory operand narrower than this many bytes has its size spelt (broadcasts, 64-bit moves); a wider one
# is as wide as the instruction's registers, or as the unit its row moves (an insert, a broadcast of 128 bits)
SPELT_SIZE_BELOW = 16


def register_text(op: PhysReg, target: Target) -> str:
    """The register as its family (of the target's ISA) spells it at its width."""
    return target.isa.family(op.kind).spell(op.number, op.bits)


def operand_text(op, target: Target, explicit_size: bool, dialect: Dialect = NASM) -> str:
    if isinstance(op, PhysReg):
        return register_text(op, target)
    if isinstance(op, Imm):
        return str(op.value) if op.value < 256 else hex(op.value)
    if isinstance(op, Mem):
        offset = op.offset
        if isinstance(op.base, ArgBase):
            inner = GPR_NAMES[target.abi.arg_home(op.base.index)]
        elif isinstance(op.base, TableBase) and op.pointer is not None:
            inner, offset = GPR_NAMES[op.pointer.register], op.offset - op.pointer.bias
        elif isinstance(op.base, TableBase):
            inner = dialect.table_base or "rel " + op.base.label
        elif isinstance(op.base, StackBase):
            inner = "rsp"
        else:  # pragma: no cover - the IR has no other bases
            raise TypeError(op.base)
        text = f"[{inner} {'-' if offset < 0 else '+'} {abs(offset)}]" if offset else f"[{inner}]"
        return f"{dialect.sizes[op.size]} {text}" if explicit_size else text
    raise TypeError(f"unallocated operand {op!r} reached the printer")


def _high(op) -> bool:
    return isinstance(op, PhysReg) and op.kind == VECTOR and op.number >= 8


# a rolled loop's top (its counter set, its label) and bottom (the count down, the branch back), as format
# strings over the counter's name and the immediates' values, as a spelt row's `lines` are over its operands
CONTROL_LINES = {"repeat": ("mov {0}, {1}", ".repeat{2}:"), "repeat_end": ("dec {0}", "jnz .repeat{1}")}


def _line(text: str) -> str:
    """An instruction with its mnemonic in a column of its own (a label alone)."""
    first, _, rest = text.partition(" ")
    return f"{first:<12} {rest}" if rest else first


def _control_text(ins: Instr, target: Target) -> str:
    texts = [register_text(ins.operands[0], target)] + [str(op.value) for op in ins.operands[1:]]
    return "\n".join(_line(line.format(*texts)) for line in CONTROL_LINES[ins.op])


def _spelt_lines(ins: Instr, target: Target, dialect: Dialect) -> list[str]:
    """The lines of an operation its row spells as several instructions."""
    texts = [operand_text(o, target, isinstance(o, Mem), dialect) for o in ins.operands]
    # half{k}: vector operand k spelt at half its width (a zmm register's ymm name)
    halves = {f"half{k}": register_text(dataclasses.replace(o, bits=o.bits // 2), target)
              for k, o in enumerate(ins.operands) if isinstance(o, PhysReg) and o.kind == VECTOR}
    return [_line(line.format(*texts, **halves)) for line in spec(ins.op).lines]


def _broadcast_text(op, dst, form: Form) -> str:
    """EVEX's {1toN} after a memory source broadcast into the destination's N elements."""
    if not isinstance(op, Mem) or not op.broadcast:
        return ""
    if op.size * 8 not in form.encoding.broadcast_elems:
        raise AssertionError(f"{form.mnemonic}: {form.encoding.name} broadcasts no {op.size * 8}-bit element")
    return f"{{1to{dst.bits // (8 * op.size)}}}"


def instr_text(ins: Instr, target: Target, dialect: Dialect = NASM) -> str:
    s = spec(ins.op)
    if s.cls == "control":
        return _control_text(ins, target)
    form = ins.form(target.isa.encoding)
    operands = ins.operands
    if s.lines is not None:  # one operation spelt as several instructions
        return "\n".join(_spelt_lines(ins, target, dialect))
    if s.ties(form):
        if operands[0] != operands[1]:
            raise AssertionError(f"{ins.op}: {form.encoding.name} form with destination {operands[0]} != first "
                                 f"source {operands[1]}")
        operands = operands[:1] + operands[2:]
    elif form.encoding.short_prefix_low_rm and s.commutative and _high(operands[2]) and not _high(operands[1]):
        # the short prefix cannot name a high register in the r/m slot; the first source can
        operands = (operands[0], operands[2], operands[1]) + operands[3:]
    if s.selector_first:
        operands = operands + (operands[1],)
    sized = [isinstance(o, Mem) and o.size < SPELT_SIZE_BELOW and s.cls != "address" for o in operands]
    parts = s.spelt([operand_text(o, target, size, dialect) + _broadcast_text(o, operands[0], form)
                     for o, size in zip(operands, sized)])
    line = f"{form.mnemonic:<12} " + ", ".join(parts)
    if ins.comment and dialect is NASM:
        line = f"{line:<48} ; {ins.comment}"
    return line


def body_text(body: tuple[Instr, ...], target: Target, dialect: Dialect = NASM) -> list[str]:
    """The body's lines. A row's scratch loads (`scratch_lines`) are left out where the scratch registers
    still hold what they would load: set by the last such loads and nothing since but straight-line code
    (a loop's top may be reached from before the loop or from its end, so it forgets what they hold)."""
    out, held = [], None
    for ins in body:
        s = spec(ins.op)
        if s.cls == "control":
            held = None
        elif s.scratch_lines:
            lines = _spelt_lines(ins, target, dialect)
            loads = lines[:s.scratch_lines]
            out += ([] if loads == held else loads) + lines[s.scratch_lines:]
            held = loads
            continue
        out += instr_text(ins, target, dialect).split("\n")
    return out
