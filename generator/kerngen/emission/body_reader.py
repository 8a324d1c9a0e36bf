"""A function's body read back, line after line, into the instructions the printer prints it from.

The printer is the only place that spells instructions, so a line is read by proposing the rows whose
forms in the target ISA's encoding have its mnemonic (or whose spelling as several lines, `Op.lines`,
or as a loop's control, `CONTROL_LINES`, starts with it), with the operands its text names, and keeping
the first that the printer prints as that line, comments and whitespace aside. What the text leaves
implicit comes from the row: a two-operand form's first source (its destination), a commutative row's
order of sources, an opmask's width (its vectors'), the size of a memory operand spelt without one.
A memory operand is on the buffer it reaches: an argument by the ABI's home register of it, a constant
table by its label or by the register a `lea` pointed into it (`Pointer`), the stack area by rsp.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from ..errors import BundleError
from ..ir.instr import ArgBase, Imm, Instr, Mem, PhysReg, Pointer, StackBase, Table, TableBase
from ..machine.isa import Isa
from ..machine.ops import OPS, Op, spec
from ..machine.registers import GENERAL, MASK, VECTOR
from ..machine.target import Target
from .printer import CONTROL_LINES, NASM, SPELT_SIZE_BELOW, instr_text

GENERAL_BITS = 64  # the width the IR names a general register at, whichever of its names a line spells


class ReadError(BundleError):
    """A line of an assembly file that no row of the instruction table prints, or a frame not the body's."""


@dataclass(frozen=True)
class Line:
    number: int  # in the file, from 1
    text: str  # as written
    code: str  # without its comment, whitespace runs made one space
    comment: str


def fail(path: Path, line: Line, why: str) -> ReadError:
    return ReadError(f"{path.name} line {line.number} ({line.text.strip()!r}): {why}")


@dataclass(frozen=True)
class _Spelling:
    """A row spelt as several lines (`Op.lines`, a loop's `CONTROL_LINES`): each line as a pattern over the
    texts of its fields, which name the operands ("0") or a vector operand at half its width ("half0")."""

    row: str
    pattern: re.Pattern  # over the lines joined by newlines
    lines: int
    scratch: int  # leading lines that only load scratch registers, left out where they hold that already


@dataclass(frozen=True)
class _Syntax:
    """What an ISA's lines can be: registers by name, and rows by their first mnemonic."""

    registers: dict[str, tuple[str, int, int]]  # name -> (family, number, bits; 0: the vectors' it masks)
    rows: dict[str, tuple[str, ...]]  # mnemonic -> rows of one line with a form of it, in table order
    spellings: dict[str, tuple[_Spelling, ...]]  # first mnemonic -> rows spelt as several lines


def _pattern(lines: Sequence[str]) -> re.Pattern:
    """The lines of a spelling (format strings) as one pattern: a field's text where it first appears, the
    same text where it appears again."""
    text, seen = "", set()
    for literal, field, _, _ in string.Formatter().parse("\n".join(lines)):
        text += re.escape(literal)
        if field is not None:
            text += f"(?P=f{field})" if field in seen else f"(?P<f{field}>[^\n]+?)"
            seen.add(field)
    return re.compile(text)


@lru_cache(maxsize=None)
def _syntax(isa: Isa) -> _Syntax:
    registers = {}
    for family in isa.families:
        for bits, prefix in family.prefixes:
            registers.update({f"{prefix}{n}": (family.name, n, bits) for n in range(family.count)})
        registers.update({name: (family.name, n, GENERAL_BITS if family.name == GENERAL else 0)
                          for n, name in enumerate(family.names)})
    rows: dict[str, tuple[str, ...]] = {}
    spellings: dict[str, tuple[_Spelling, ...]] = {}
    for op in OPS.values():
        lines = CONTROL_LINES.get(op.name, op.lines)
        if not op.forms or not (op.gpr_only or op.encoded_in(isa.encoding)):
            continue
        if lines is not None:
            spelling = _Spelling(op.name, _pattern(lines), len(lines), op.scratch_lines)
            for first in dict.fromkeys((lines[0].split()[0], lines[op.scratch_lines].split()[0])):
                spellings[first] = spellings.get(first, ()) + (spelling,)
            continue
        for form in op.forms[:1] if op.gpr_only else [f for f in op.forms if f.encoding == isa.encoding]:
            if op.name not in rows.get(form.mnemonic, ()):
                rows[form.mnemonic] = rows.get(form.mnemonic, ()) + (op.name,)
    return _Syntax(registers, rows, spellings)


_MEMORY = re.compile(r"(?:(\w+) )?\[(rel )?([\w.$@?]+)(?: ([+-]) (\d+))?\]")
_SIZES = {word: size for size, word in NASM.sizes.items()}
_DECORATIONS = re.compile(r"((?:\{[^{}]*\})*)$")
_FITS = {"v": lambda o: _family(o) == VECTOR, "vm": lambda o: _family(o) == VECTOR or isinstance(o, Mem),
         "m": lambda o: isinstance(o, Mem), "i": lambda o: isinstance(o, Imm), "g": lambda o: _family(o) == GENERAL,
         "gm": lambda o: _family(o) == GENERAL or isinstance(o, Mem), "k": lambda o: _family(o) == MASK}


def _family(op) -> str | None:
    return op.kind if isinstance(op, PhysReg) else None


@lru_cache(maxsize=None)
def _unit_bytes(row: str, bits: int, source: int) -> int | None:
    """The bytes of a memory source whose size the printer does not spell (position `source` among the row's
    sources) where the row's movement reads one unit of it alone whatever its immediate (a broadcast, an
    insert of a 128- or 256-bit unit). None: the registers' width."""
    s = spec(row)
    move = s.move
    if move is None or move.unit < 8 * SPELT_SIZE_BELOW or move.indices is not None or bits < move.unit:
        return None
    sources = sum(1 for k in s.read if s.slots[k].kind != "i")
    units = tuple([bits // move.unit] * sources)
    immediates = range(256) if any(slot.kind == "i" for slot in s.slots) else (None,)
    routes = [r for r in (move.route(units[0], units, imm, move.unit) for imm in immediates) if r is not None]
    read = {r[1] for route in routes for r in route if r is not None and r[0] == source}
    return move.unit // 8 if read == {0} else None


class BodyReader:
    """Reads a function's body, line after line, keeping what its address registers hold and which
    scratch loads the printer would leave out (`printer.body_text`)."""

    def __init__(self, path: Path, target: Target, nargs: int, tables: dict[str, Table], known: dict):
        self.path, self.target, self.tables = path, target, tables
        self.syntax = _syntax(target.isa)
        self.homes = {target.abi.arg_home(i): i for i in range(nargs)}
        self.pointers: dict[int, tuple[str, int]] = {}  # register -> (table, byte) a `lea` pointed it at
        self.held: list[str] | None = None  # the scratch loads the printer would leave out now
        # (lines, what the address registers hold) -> (row, operands, the CPU extensions its form needs, and the
        # scratch loads of a spelt row) of the lines read already for this target and arguments: most lines of a
        # file repeat (NTT layers, unrolled blocks, the same kernel on another ISA's width)
        self.known = known
        self.extensions: frozenset[str] = frozenset()

    def read(self, lines: list[Line]) -> tuple[Instr, ...]:
        out: list[Instr] = []
        at = 0
        while at < len(lines):
            ins, taken = self.instruction(lines, at)
            out.append(ins)
            self.after(ins)
            at += taken
        return tuple(out)

    def instruction(self, lines: list[Line], at: int) -> tuple[Instr, int]:
        line = lines[at]
        mnemonic, _, rest = line.code.partition(" ")
        for spelling in self.syntax.spellings.get(mnemonic, ()):
            found = self.spelt(spelling, lines, at)
            if found is not None:
                return found
        key = (line.code, tuple(self.pointers.items()))
        if key in self.known:
            row, ops, extensions = self.known[key]
            self.extensions |= extensions
            return Instr(row, ops, line.comment), 1
        try:
            operands = [self.operand(text.strip()) for text in rest.split(",")] if rest else []
        except ReadError as e:
            raise fail(self.path, line, str(e)) from None
        for row in self.syntax.rows.get(mnemonic, ()):
            found = self.single(row, operands, line)
            if found is not None:
                self.known[key] = (found[0].op, found[0].operands, self.form_extensions(found[0]))
                return found
        known = mnemonic in self.syntax.rows or mnemonic in self.syntax.spellings
        raise fail(self.path, line, f"no row of the instruction table on {self.target.isa.name} prints this line"
                    + ("" if known else f" (none has the mnemonic {mnemonic!r})"))

    def after(self, ins: Instr) -> None:
        s = spec(ins.op)
        if s.cls == "control":
            self.held = None  # a loop's top is reached from before the loop and from its end
        if ins.op == "lea":  # the address of a table's byte (an argument's is none a kernel's operand can name)
            register, source = ins.operands[0].number, ins.operands[1]
            self.pointers.pop(register, None)
            if isinstance(source.base, TableBase):
                self.pointers[register] = (source.base.label, source.offset)
        elif self.pointers and s.cls != "address":  # another write to a register ends what it points at
            for op in ins.written:
                if _family(op) == GENERAL:
                    self.pointers.pop(op.number, None)

    # -- operands

    def operand(self, text: str):
        """The operand a text names; a register's bits 0 where they are the instruction's vectors'."""
        body, decorations = text, ""
        if text.endswith("}"):
            decorations = _DECORATIONS.search(text).group(1)
            body = text[:len(text) - len(decorations)]
        if body in self.syntax.registers:
            kind, number, bits = self.syntax.registers[body]
            reg = PhysReg(kind, number, bits)
            return (reg, decorations) if decorations else reg
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", body):
            return Imm(int(body, 0))
        m = _MEMORY.fullmatch(body)
        if m is None:
            raise ReadError(f"{text!r} is no register of {self.target.isa.name}, no integer and no memory operand")
        word, rel, base, sign, disp = m.groups()
        if word is not None and word not in _SIZES:
            raise ReadError(f"{word!r} is no size of a memory operand")
        offset = (-1 if sign == "-" else 1) * int(disp or 0)
        size = _SIZES[word] if word else 0
        broadcast = decorations.startswith("{1to")
        if rel:
            if base not in self.tables:
                raise ReadError(f"{base} is no table of the file")
            mem = Mem(TableBase(base), offset, size)
        elif base == "rsp":
            mem = Mem(StackBase(), offset, size)
        elif base in self.syntax.registers and self.syntax.registers[base][0] == GENERAL:
            number = self.syntax.registers[base][1]
            if number in self.pointers:
                label, bias = self.pointers[number]
                mem = Mem(TableBase(label), bias + offset, size, Pointer(number, bias))
            elif number in self.homes:
                mem = Mem(ArgBase(self.homes[number]), offset, size)
            else:
                raise ReadError(f"{base} holds no argument's address and no table's here")
        else:
            raise ReadError(f"{base} is no base of a memory operand")
        if decorations and not broadcast:
            raise ReadError(f"a memory operand decorated {decorations}")
        return replace(mem, broadcast=True) if broadcast else mem

    def completed(self, row: str, operands: list) -> tuple | None:
        """The operands with what the text leaves implicit: an opmask's bits (its vectors'), the size of a memory
        operand spelt without one (`_unit_bytes`, else its registers'); None where they do not fit the row."""
        s = spec(row)
        bits = max((o.bits for o in operands if _family(o) == VECTOR), default=0)
        done = []
        for k, o in enumerate(operands):
            if isinstance(o, PhysReg) and o.bits == 0:
                o = replace(o, bits=bits)
            elif isinstance(o, Mem) and o.size == 0:
                sources = [j for j in s.read if s.slots[j].kind != "i"]
                unit = _unit_bytes(row, bits, sources.index(k)) if k in sources else None
                o = replace(o, size=1 if s.cls == "address" else unit or bits // 8)
                if o.size == 0:
                    return None
            done.append(o)
        if len(done) != len(s.slots) or not all(_FITS[slot.kind](o) and (not isinstance(o, PhysReg) or o.bits)
                                                for slot, o in zip(s.slots, done)):
            return None
        # lane semantics are computed at one width (as the model computes them): vector registers of two
        # widths are no such instruction, which the assembler refuses too
        if (s.arith or s.widen or s.blocks) and any(_family(o) == VECTOR and o.bits != bits for o in done):
            return None
        return tuple(done)

    def printed(self, row: str, operands: list, comment: str = "") -> tuple[Instr, list[str]] | None:
        """The instruction of `row` on these operands and its lines as the printer spells them, normalised."""
        ops = self.completed(row, operands)
        if ops is None:
            return None
        ins = Instr(row, ops)
        try:
            text = instr_text(ins, self.target)
        except (KeyError, AssertionError):  # no form at these widths, or operands no form names so
            return None
        return Instr(row, ops, comment), [" ".join(line.split()) for line in text.split("\n")]

    def form_extensions(self, ins: Instr) -> frozenset[str]:
        """What the CPU needs to run the instruction (its form's extensions), joined to the kernel's."""
        extensions = ins.form(self.target.isa.encoding).extensions
        self.extensions |= extensions
        return extensions

    # -- a row of one line, and a row spelt as several

    def single(self, row: str, operands: list, line: Line) -> tuple[Instr, int] | None:
        s: Op = spec(row)
        first = operands[0] if operands else None
        if isinstance(first, tuple):  # decorated: an opmask, and {z} where it zeroes
            if s.masking is None:
                return None
            reg, decorations = first
            mask = re.match(r"\{(k\d)\}", decorations)
            if mask is None or mask.group(1) not in self.syntax.registers:
                return None
            operands = [reg, self.operand(mask.group(1))] + operands[1:]
        if s.selector_first:
            operands = operands[:-1]
        if len(operands) == len(s.slots) - 1 and operands:  # a two-operand form: the destination is the first source
            operands = operands[:1] + operands[:1] + operands[1:]
        candidates = [operands]
        if s.commutative and len(operands) >= 3:
            candidates.append([operands[0], operands[2], operands[1]] + operands[3:])
        for ops in candidates:
            found = self.printed(row, ops, line.comment)
            if found is not None and found[1] == [line.code]:
                return found[0], 1
        return None

    def spelt(self, spelling: _Spelling, lines: list[Line], at: int) -> tuple[Instr, int] | None:
        s = spec(spelling.row)
        tries = [([], spelling.lines)]
        if spelling.scratch and self.held is not None:
            tries.append((self.held, spelling.lines - spelling.scratch))
        for held, taken in tries:
            codes = held + [line.code for line in lines[at:at + taken]]
            key = (spelling.row, "\n".join(codes), tuple(self.pointers.items()))
            if key in self.known:
                row, ops, extensions, loads = self.known[key]
                self.extensions |= extensions
                self.held = loads or self.held
                return Instr(row, ops), taken
            m = spelling.pattern.fullmatch(key[1])
            if m is None:
                continue
            fields = {name[1:]: text for name, text in m.groupdict().items()}
            if "1" not in fields and s.destination_apart:
                fields["1"] = fields["0"]  # the destination is the first source: one name for both
            try:
                ops = [self.operand(fields[str(k)]) for k in range(len(s.slots))]
            except (KeyError, ReadError):
                continue
            found = self.printed(spelling.row, ops)
            if found is not None and found[1] == codes:
                loads = found[1][:spelling.scratch]
                self.held = loads or self.held
                self.known[key] = (found[0].op, found[0].operands, self.form_extensions(found[0]), loads)
                return found[0], taken
        return None
