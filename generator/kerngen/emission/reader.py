"""A bundle's assembly read back into kernels: the inverse of the printer and of the file frame.

The machine model runs a bundle's own code, whatever kerngen version wrote it and whatever was edited
in it since, by reading each exported function of an .asm file back into a `Kernel`: its body's
instructions (`body_reader`), the constant tables it reads from the file's data lines, its arguments
and ISA from its manifest entry, its ABI from the object's. The frame (frame.j2) around the body is
recognised by its lines and confirmed to be the one the body needs (`frame.frame_of`). A line no row
of the instruction table prints, or a frame that is not the body's, is a `ReadError` naming the file,
the line and its text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.manifest import FunctionEntry, ObjectEntry
from ..ir.instr import ArgSpec, Instr, Kernel, Mem, StackBase, Table, TableBase
from ..machine.formats import ObjectFormat
from ..machine.isa import ISAS
from ..machine.target import PLATFORMS, VISIBILITIES, Target
from .body_reader import BodyReader, Line, ReadError, fail
from .frame import Frame, frame_of
from .render import frame_lines


@dataclass(frozen=True)
class Reading:
    """An object file's functions: the kernels read, and why the others could not be, by manifest symbol."""

    kernels: dict[str, Kernel]
    errors: dict[str, str]


def _lines(text: str) -> list[Line]:
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        code, _, comment = raw.partition(";")
        out.append(Line(number, raw, " ".join(code.split()), comment.strip()))
    return out


_LABEL = re.compile(r"[A-Za-z_.$?][\w.$@?]*:")
_DATA_BYTES = {"db": 1, "dw": 2, "dd": 4, "dq": 8}


def _section_pattern(template: str) -> re.Pattern:
    """A section line of the format's `template`, whatever table, function or alignment it names."""
    pattern = re.escape(template)
    for field, value in (("{align}", r"\d+"), ("{name}", r"[\w.$@?]+")):
        pattern = pattern.replace(re.escape(field), value)
    return re.compile(pattern)


def _tables(path: Path, lines: list[Line], fmt: ObjectFormat) -> dict[str, Table]:
    """The constant tables: the labels of the data section and the data lines under each."""
    data = _section_pattern(fmt.table_section or fmt.rodata)
    code = _section_pattern(fmt.function_section or fmt.text)
    start = next((k for k, line in enumerate(lines) if data.fullmatch(line.code)), len(lines))
    rows: dict[str, tuple[int, list[int], int, str]] = {}
    label, align, comment = None, 1, ""
    for line in lines[start:]:
        directive, _, rest = line.code.partition(" ")
        if code.fullmatch(line.code):
            break
        if data.fullmatch(line.code):
            continue
        if not line.code:
            comment = line.comment or comment
        elif directive == "align":
            align = int(rest) if rest.isdigit() else 0
        elif _LABEL.fullmatch(line.code):
            label = line.code[:-1]
            rows[label] = (0, [], align, comment)
        elif directive in _DATA_BYTES and label is not None:
            size, values, at, said = rows[label]
            if size not in (0, _DATA_BYTES[directive]):
                raise fail(path, line, f"{directive} in table {label} of {size}-byte elements")
            try:
                values += [int(v, 0) for v in rest.split(",")]
            except ValueError:
                raise fail(path, line, "a data line of integers was expected") from None
            rows[label] = (_DATA_BYTES[directive], values, at, said)
            comment = ""
        else:
            raise fail(path, line, "neither a table's label, its alignment nor a data line")
    return {lab: Table(lab, size, tuple(values), at, said) for lab, (size, values, at, said) in rows.items()}


# the lines of a frame (frame.j2) beside the entry's argument moves, which the ABI fixes: `save` the target's
# move of a callee-saved xmm register
_PROLOGUE = r"push \w+|mov rbp, rsp|and rsp, -\d+|sub rsp, \d+|\.uw\d+:|{save} \[rsp \+ \d+\], xmm\d+"
_EPILOGUE = r"pop \w+|mov rsp, rbp|vzeroupper|lea rsp, \[rbp \+ \d+\]|add rsp, \d+|{save} xmm\d+, \[r[sb]p \+ \d+\]"


def read_object(path: Path, obj: ObjectEntry, functions: Sequence[FunctionEntry]) -> Reading:
    """The kernels of `functions` (manifest entries) in the object file `path` of the manifest's `obj`."""
    kernels, errors = {}, {}
    lines = _lines(path.read_text())
    labels = {line.code[:-1]: k for k, line in enumerate(lines) if line.text[:1].strip() and line.code.endswith(":")}
    try:
        tables = _tables(path, lines, PLATFORMS[obj.abi].fmt) if obj.abi in PLATFORMS else {}
    except ReadError as e:
        return Reading({}, {fn.symbol: str(e) for fn in functions})
    known: dict = {}  # lines read already, shared by the functions of one file (`BodyReader.known`)
    for fn in functions:
        try:
            target = _target(fn, obj)
            start = labels.get(fn.symbols.get(obj.abi, ""))
            if start is None:
                raise ReadError(f"{path.name} has no label {fn.symbols.get(obj.abi)!r} for {fn.symbol}")
            end = next((k for k in range(start + 1, len(lines)) if lines[k].code == ".end:"), len(lines))
            kernels[fn.symbol] = _Function(path, fn, target, tables).read(lines[start + 1:end], known)
        except ReadError as e:
            errors[fn.symbol] = str(e)
    return Reading(kernels, errors)


def _target(fn: FunctionEntry, obj: ObjectEntry) -> Target:
    if fn.isa not in ISAS or obj.abi not in PLATFORMS:
        raise ReadError(f"{fn.symbol}: no ISA {fn.isa!r} or no ABI {obj.abi!r} in this kerngen")
    bits = re.fullmatch(r"u?int(8|16|32|64)", fn.dtype)
    if bits is None:
        raise ReadError(f"{fn.symbol}: elements of type {fn.dtype!r} are no integers of 8 to 64 bits")
    return Target(ISAS[fn.isa], int(bits.group(1)), PLATFORMS[obj.abi], obj.visibility or VISIBILITIES[0])


class _Function:
    """One function's lines: the entry, the prologue, the body, the epilogue and `ret`."""

    def __init__(self, path: Path, fn: FunctionEntry, target: Target, tables: dict[str, Table]):
        self.path, self.fn, self.target, self.tables = path, fn, target, tables
        elem_bytes = int(fn.dtype.removeprefix("u").removeprefix("int")) // 8
        self.args = tuple(ArgSpec(a.name, a.role, f"{fn.dtype}_t", elem_bytes, a.count, a.align, a.preferred_align)
                          for a in fn.args)

    def read(self, lines: list[Line], known: dict) -> Kernel:
        code = [line for line in lines if line.code]
        if not code or code[-1].code != "ret":
            raise ReadError(f"{self.path.name}: {self.fn.symbol} does not end with ret before its .end label")
        # what every frame of these arguments begins with: endbr64 where the format has CET, the stack arguments
        # loaded and the register arguments the ISA's implicit registers need moved
        bare = frame_of(self.kernel((), frozenset()))
        save = re.escape(bare.save_move)
        head = len(self.frame("prologue", bare))
        while head < len(code) - 1 and re.fullmatch(_PROLOGUE.format(save=save), code[head].code):
            head += 1
        tail = len(code) - 1
        while tail > head and re.fullmatch(_EPILOGUE.format(save=save), code[tail - 1].code):
            tail -= 1
        reader = BodyReader(self.path, self.target, len(self.args), self.tables, known.setdefault(
            (self.target, len(self.args)), {}))
        kernel = self.kernel(reader.read(code[head:tail]), reader.extensions)
        frame = frame_of(kernel)
        self.confirm(code[:head], self.frame("prologue", frame), code[head] if head < len(code) else code[-1])
        self.confirm(code[tail:], self.frame("epilogue", frame) + ["ret"], code[-1])
        return kernel

    def kernel(self, body: tuple[Instr, ...], extensions: frozenset[str]) -> Kernel:
        labels = {op.base.label for ins in body for op in ins.operands
                  if isinstance(op, Mem) and isinstance(op.base, TableBase)}
        stack = max((op.offset + op.size for ins in body for op in ins.operands
                     if isinstance(op, Mem) and isinstance(op.base, StackBase)), default=0)
        slot = self.target.isa.spill_slot_bytes
        return Kernel(self.fn.symbol, self.args, body, tuple(t for t in self.tables.values() if t.label in labels),
                      self.target, extensions, -(-stack // slot))

    def frame(self, part: str, frame: Frame) -> list[str]:
        """The lines of the frame's prologue or epilogue (frame.j2), whitespace-normalised; the prologue
        after the entry's endbr64 where the format has CET (asm.j2)."""
        lines = [" ".join(x.split()) for x in frame_lines(part, frame)]
        return (["endbr64"] if part == "prologue" and self.target.fmt.cet else []) + lines

    def confirm(self, lines: list[Line], expected: list[str], after: Line) -> None:
        for k, want in enumerate(expected):
            if k >= len(lines) or lines[k].code != want:
                raise fail(self.path, lines[k] if k < len(lines) else after,
                            f"the frame of {self.fn.symbol} must be {'; '.join(expected)} for its body, "
                            f"and {want!r} is not at this line")
        if len(lines) > len(expected):
            raise fail(self.path, lines[len(expected)], f"is no line of the frame of {self.fn.symbol}, "
                        f"which must be {'; '.join(expected)} for its body")
