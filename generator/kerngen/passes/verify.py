"""The verifier: abstract interpretation of a kernel's final instruction list.

Every lane of every register and every array element carries an interval;
the kernel is run once on intervals covering all inputs in its contract.
Lanes are as wide as the kernel's target says (`Target.lane_bits`), and
what each instruction does to them comes from the instruction table alone:
element-wise arithmetic through its exact semantics (interval corners where
the table says they suffice), data movement through its routes. Additions
and subtractions must stay inside the lane's signed range; wrap-around is
allowed only where it is meant: inside a reduction idiom, whose result
comes from a lemma proven by running the idiom's own instructions on every
input (`lemmas.prove`). A kernel whose lanes could overflow is refused with
the instruction, lane and bound; otherwise the proven bound of every output
element is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import VerifyError
from ..ir.instr import ArgBase, Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from ..ir.lanes import SPLIT, move_lanes
from ..ir.ops import Arith, generic_name, spec
from ..target.printer import instr_text
from .lemmas import LemmaError, ScalarIdiom, prove

Interval = tuple[int, int]
Lanes = list[Interval]
ZERO: Interval = (0, 0)


@dataclass(frozen=True)
class Proof:
    """What the verifier established: per output argument, the interval of each element."""

    outputs: dict[int, tuple[Interval, ...]]
    idioms_checked: int

    def hull(self, arg: int) -> Interval:
        elems = self.outputs[arg]
        return min(lo for lo, _ in elems), max(hi for _, hi in elems)


class _Machine:
    """Registers, memory and stack of one abstract run."""

    def __init__(self, kernel: Kernel, inputs: dict[int, Interval]):
        self.kernel = kernel
        self.bits = kernel.target.lane_bits
        self.lane_bytes = self.bits // 8
        self.lo, self.hi = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        self.top: Interval = (self.lo, self.hi)
        self.model_lanes = kernel.target.isa.vector_bits // self.bits
        self.tables = {t.label: t for t in kernel.tables}
        self.regs: dict[int, Lanes] = {}
        self.stack: dict[int, Lanes] = {}
        self.memory: dict[int, list[Interval | None]] = {}
        for i, a in enumerate(kernel.args):
            if a.elem_bytes != self.lane_bytes:
                raise VerifyError(f"{kernel.symbol}: argument {a.name} has {8 * a.elem_bytes}-bit elements, "
                                  f"the lanes {self.bits} bits")
            self.memory[i] = [inputs.get(i) if a.role != "out" else None] * a.count

    def fail(self, index: int, ins: Instr, message: str):
        raise VerifyError(f"{self.kernel.symbol}: instruction {index} "
                          f"`{instr_text(ins, self.kernel.target).strip()}` {message}")

    def lanes_of(self, op, index: int, ins: Instr, count: int) -> Lanes:
        """The first `count` lanes an operand supplies (a memory operand: as many as it holds)."""
        if isinstance(op, Imm):
            return [(op.value, op.value)] * count
        if isinstance(op, PhysReg):
            if op.number not in self.regs:
                self.fail(index, ins, f"reads register {op.number} before writing it")
            return self.regs[op.number][:count]
        if not isinstance(op, Mem):
            raise TypeError(op)
        n = min(count, op.size // self.lane_bytes)
        if isinstance(op.base, TableBase):
            t = self.tables[op.base.label]
            if t.elem_bytes != self.lane_bytes:
                return [self.top] * n
            first = op.offset // t.elem_bytes
            return [(v, v) for v in t.values[first:first + n]]
        if isinstance(op.base, StackBase):
            return list(self.stack[op.offset][:n])
        elems = self.memory[op.base.index]
        first = op.offset // self.lane_bytes
        if op.offset % self.lane_bytes or first + n > len(elems):
            self.fail(index, ins, f"reads outside argument {op.base.index}")
        vals = elems[first:first + n]
        if any(v is None for v in vals):
            self.fail(index, ins, f"reads elements of argument {op.base.index} that hold no value yet")
        return list(vals)

    def store(self, index: int, ins: Instr) -> None:
        m, src = ins.operands[0], ins.operands[1]
        s = spec(ins.op)
        val = self.lanes_of(src, index, ins, self.model_lanes)
        if len(ins.operands) > 2:  # one element, chosen by the immediate
            if s.elem != self.bits:
                self.fail(index, ins, f"stores a {s.elem}-bit element of {self.bits}-bit lanes")
            val = val[ins.operands[2].value:]
        if isinstance(m.base, StackBase):
            self.stack[m.offset] = val
            return
        if not isinstance(m.base, ArgBase):
            self.fail(index, ins, "stores into constant memory")
        count = m.size // self.lane_bytes
        elems, first = self.memory[m.base.index], m.offset // self.lane_bytes
        if m.offset % self.lane_bytes or first + count > len(elems) or self.kernel.args[m.base.index].role == "in":
            self.fail(index, ins, "writes outside its output buffers")
        elems[first:first + count] = val[:count]

    def arith(self, a: Arith, sources: list[Lanes], lanes: int, index: int, ins: Instr, in_idiom: bool) -> Lanes:
        out = []
        for lane in range(lanes):
            boxes = [src[lane] for src in sources]
            if a.corners:
                corners = [(x, y) for x in boxes[0] for y in boxes[1]]
                vals = [a.value(x, y, self.bits) for x, y in corners]
                lo, hi = min(vals), max(vals)
                if self.lo <= lo and hi <= self.hi:
                    out.append((lo, hi))
                    continue
                if a.checked and not in_idiom:
                    self.fail(index, ins, f"can overflow in lane {lane}: result in [{lo}, {hi}] leaves "
                                          f"int{self.bits}")
            if all(x[0] == x[1] for x in boxes) and not (a.corners and a.checked):
                v = a.exact(boxes[0][0], boxes[1][0], self.bits)
                out.append((v, v))
            else:
                out.append(self.top)
        return out

    def move(self, index: int, ins: Instr, dest_lanes: int) -> Lanes | None:
        s = spec(ins.op)
        srcs, imm = [], None
        for k in s.read:
            op = ins.operands[k]
            if isinstance(op, Imm):
                imm = op.value
            else:
                width = op.bits // self.bits if isinstance(op, PhysReg) else self.model_lanes
                srcs.append(self.lanes_of(op, index, ins, width))
        moved = move_lanes(s, srcs, imm, self.bits, dest_lanes, ZERO)
        if moved is None:
            return None
        return [self.top if v is SPLIT else v for v in moved]


def verify_kernel(kernel: Kernel, inputs: dict[int, Interval], modulus: int) -> Proof:
    """`inputs`: argument index -> interval of every element of that array;
    every reduction idiom must be congruent mod `modulus` on all inputs."""
    mc = _Machine(kernel, inputs)
    idiom_inputs: dict[int, Lanes] = {}
    idiom_instrs: dict[int, list[Instr]] = {}
    checked = 0
    for index, ins in enumerate(kernel.body):
        s = spec(ins.op)
        tag = ins.idiom
        if tag is not None and tag.role == "start":
            idiom_inputs[tag.group] = mc.lanes_of(ins.operands[tag.source], index, ins, mc.model_lanes)
            idiom_instrs[tag.group] = []
        if tag is not None:
            idiom_instrs[tag.group].append(ins)
        if s.cls == "store":
            mc.store(index, ins)
            continue
        dst = ins.operands[0]
        if not isinstance(dst, PhysReg) or dst.kind != "vec":
            mc.fail(index, ins, "writes a general-purpose register; the verifier models vector lanes only")
        lanes = dst.bits // mc.bits
        res = None
        if s.arith is not None and s.elem in (None, mc.bits):
            sources = [mc.lanes_of(ins.operands[k], index, ins, lanes) for k in s.read]
            res = mc.arith(s.arith, sources, lanes, index, ins, tag is not None)
        elif s.move is not None:
            res = mc.move(index, ins, lanes)
        if res is None:
            if s.arith is None and s.move is None:
                mc.fail(index, ins, "has no lane semantics in the instruction table")
            res = [mc.top] * lanes  # not element-wise at this width, nor a movement of whole lanes
        if lanes < mc.model_lanes:  # a VEX.128 write zeroes the upper half; a legacy one keeps it
            upper = [ZERO] * (mc.model_lanes - lanes) if kernel.target.isa.vex else \
                mc.regs.get(dst.number, [mc.top] * mc.model_lanes)[lanes:]
            res = res + upper
        if tag is not None and tag.role == "end":
            res = _apply_lemma(mc, idiom_instrs.pop(tag.group), idiom_inputs.pop(tag.group), modulus)
            checked += 1
        mc.regs[dst.number] = res
    outputs = {}
    for i, a in enumerate(kernel.args):
        if a.role == "in":
            continue
        elems = mc.memory[i]
        if any(v is None for v in elems):
            missing = next(k for k, v in enumerate(elems) if v is None)
            raise VerifyError(f"{kernel.symbol}: output element {missing} of argument {a.name} is never written")
        outputs[i] = tuple(elems)
    return Proof(outputs, checked)


def _apply_lemma(mc: _Machine, instrs: list[Instr], inputs: Lanes, modulus: int) -> Lanes:
    """Rebuild the idiom in lane form from the allocated instructions and prove it."""
    kernel = mc.kernel
    first = instrs[0]
    names: dict[int, str] = {first.operands[first.idiom.source].number: "x"}
    steps = []
    for k, ins in enumerate(instrs):
        s = spec(ins.op)
        srcs = []
        for op in (ins.operands[i] for i in s.read):
            if isinstance(op, Imm):
                srcs.append(op.value)
            elif isinstance(op, Mem) and isinstance(op.base, TableBase):
                t = mc.tables[op.base.label]
                vals = set(t.values[op.offset // t.elem_bytes:(op.offset + op.size) // t.elem_bytes])
                if len(vals) != 1:
                    raise VerifyError(f"{kernel.symbol}: idiom {first.idiom.kind} uses a non-broadcast constant")
                srcs.append(vals.pop())
            elif isinstance(op, PhysReg) and op.number in names:
                srcs.append(names[op.number])
            else:
                raise VerifyError(f"{kernel.symbol}: idiom {first.idiom.kind} reads {op} from outside itself")
        if s.cls == "move":  # a copy: the value keeps its name
            names[ins.operands[0].number] = srcs[0]
            continue
        name = f"v{k}"
        steps.append((generic_name(ins.op), name, *srcs))
        names[ins.operands[0].number] = name
    idiom = ScalarIdiom(first.idiom.kind, modulus, tuple(steps), mc.bits)
    try:
        lemma = prove(idiom)
    except LemmaError as e:
        raise VerifyError(f"{kernel.symbol}: {e}") from None
    return [lemma.range_for(lo, hi) for lo, hi in inputs]
