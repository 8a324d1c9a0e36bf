"""The verifier: abstract interpretation of a kernel's final instruction list.

Every register and stack slot holds a `Value`, numbered where it is made and
followed by data flow (a copy, a spill and its reload keep the number). A
value carries, per lane, an interval (for lanes mod q) and the set of input
elements it depends on, and as a whole its *form*: which products of input
arguments it is a sum of, mod q or over GF(2) — {(0,)} for a map linear in
argument 0, {(1, 2)} for one bilinear in arguments 1 and 2, None when no such
statement can be made. What each instruction does to intervals, lanes and
forms comes from the instruction table alone.

Lanes mod q (the NTTs): additions and subtractions must stay inside the
signed lane; wrap-around is allowed only inside a reduction idiom, whose
result comes from a lemma proven on every input (`lemmas.prove`). An idiom
applies only to the values it made itself: every register it reads must hold
its input or a value one of its own instructions produced, whatever other
instructions do in between. The machine records each tagged group as it runs
and, at its end, hands it to the check registered for its tag kind
(`idioms.check_for`: Montgomery, pair and Shoup products, Karatsuba cross
terms, scalar idioms proven by their lemma), which establishes the result's
lanes or refuses the kernel. A kernel whose outputs have a linear form is a
linear map mod q: its values on the basis vectors determine it for every input
(the basis-vector proof).

GF(2) lanes (binary fields): nothing can overflow; forms are followed through
xors, masks, shifts, shuffles and carry-less products (a square of a value
stays linear), so linear and bilinear kernels get basis-vector proofs too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import count
from itertools import product as product_of
from typing import NoReturn

from ..errors import VerifyError
from ..ir.instr import LANED, ArgBase, Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from ..ir.lanes import SPLIT, move_lanes
from ..machine.ops import Arith, lane_range, lane_value, spec, ternary_is_linear
from ..machine.registers import VECTOR
from ..ir.stream import executed
from ..emission.printer import instr_text
from .idioms import check_for
from .idioms.base import Group, Step
from .values import ZERO, Def, Form, Interval, Value, product, union


@dataclass(frozen=True)
class Verification:
    """What a kernel is proven against: the interval of every input element
    (by argument index) and, for lanes mod q, the modulus; modulus None means
    GF(2) lanes (no overflow to prove, forms only). `signed`: how lane
    values are read (int32 or uint32 intervals). `shoup_pairs`: (w, w', W)
    argument pairs whose elements the contract relates by w' = floor(w*2^W/q)."""

    inputs: dict[int, tuple[int, int]]
    modulus: int | None
    signed: bool = True
    shoup_pairs: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class Proof:
    """What the verifier established, per output argument: the interval of
    each element (lanes mod q), the form of the map, and the input elements
    each output element depends on (bit masks over all input elements, the
    elements of argument i after those of arguments 0..i-1)."""

    outputs: dict[int, tuple[Interval, ...]]
    forms: dict[int, Form | None]
    deps: dict[int, tuple[int, ...]]
    bases: tuple[int, ...]  # first global element index of each argument
    idioms_checked: int
    products_checked: int

    def hull(self, arg: int) -> Interval:
        elems = self.outputs[arg]
        return min(lo for lo, _ in elems), max(hi for _, hi in elems)


class _Machine:
    """The abstract machine's state: registers, stack slots and arguments
    holding values, and how each value was made; it is the `MachineView`
    the checks of tagged groups read."""

    def __init__(self, kernel: Kernel, v: Verification):
        self.kernel, self.v = kernel, v
        self.symbol, self.modulus, self.shoup_pairs = kernel.symbol, v.modulus, v.shoup_pairs
        self.gf2 = v.modulus is None
        self.bits = kernel.target.lane_bits
        self.lane_bytes = self.bits // 8
        self.signed = v.signed
        self.lo, self.hi = lane_range(self.bits, self.signed)
        self.lane_type = f"{'' if self.signed else 'u'}int{self.bits}"
        self.top: Interval = (self.lo, self.hi)
        self.model_lanes = kernel.target.isa.vector_bits // self.bits
        self.tables = {t.label: t for t in kernel.tables}
        self.arg_reads: dict[tuple[int, int, int], tuple[list, Value]] = {}  # `value`'s reads of arguments
        self.ids = count(1)
        self.defs: dict[int, Def] = {}  # value -> the instruction that made it
        self.products: dict[int, tuple] = {}  # checked Montgomery product -> its (x, w) leaves lane by lane
        self.regs: dict[tuple[str, int], Value] = {}
        self.stack: dict[int, tuple[int, Value]] = {}  # offset -> (bytes stored, the value)
        self.memory: dict[int, list[tuple[Interval, int, Form | None] | None]] = {}
        bases, at = [], 0
        for i, a in enumerate(kernel.args):
            if a.elem_bytes != self.lane_bytes:
                raise VerifyError(f"{kernel.symbol}: argument {a.name} has {8 * a.elem_bytes}-bit elements, "
                                  f"the lanes {self.bits} bits")
            bases.append(at)
            if a.role == "out":
                self.memory[i] = [None] * a.count
            else:
                iv = v.inputs.get(i, self.top)
                if iv[0] < self.lo or iv[1] > self.hi:
                    raise VerifyError(f"{kernel.symbol}: argument {a.name}'s contract [{iv[0]}, {iv[1]}] leaves the "
                                      f"{self.lane_type} lanes it is read in")
                self.memory[i] = [(iv, 1 << (at + k), frozenset({(i,)})) for k in range(a.count)]
            at += a.count
        self.bases = tuple(bases)

    def read(self, x: int) -> int:
        """A lane's bits as the integer they mean here."""
        return lane_value(x, self.bits, self.signed)

    def new(self, lanes, deps, form) -> Value:
        return Value(next(self.ids), tuple(lanes), tuple(deps), form)

    def fail(self, index: int, ins: Instr, message: str) -> NoReturn:
        raise VerifyError(f"{self.kernel.symbol}: instruction {index} `{self.text(ins)}` {message}")

    def text(self, ins: Instr) -> str:
        return instr_text(ins, self.kernel.target).strip()

    def made(self, vid: int) -> Def | None:
        return self.defs.get(vid)

    def product_leaves(self, vid: int) -> tuple | None:
        return self.products.get(vid)

    # -- operands

    def value(self, op, index: int, ins: Instr, count_: int) -> Value:
        """What an operand supplies: a register's value, or the first `count_`
        lanes (at most as many as it holds) a memory operand loads."""
        if isinstance(op, PhysReg):
            key = (op.kind, op.number)
            if key not in self.regs:
                self.fail(index, ins, f"reads register {op.number} before writing it")
            return self.regs[key]
        if not isinstance(op, Mem):
            raise TypeError(op)
        if op.broadcast:  # one lane's element read into every lane (fold_broadcasts: the lanes' width)
            one = self.value(dataclasses.replace(op, broadcast=False), index, ins, 1)
            return self.new(one.lanes * count_, one.deps * count_, one.form)
        n = max(1, min(count_, op.size // self.lane_bytes))
        if isinstance(op.base, TableBase):
            t = self.tables[op.base.label]
            if t.elem_bytes != self.lane_bytes:
                return self.new([self.top] * n, [0] * n, frozenset({()}))
            first = op.offset // t.elem_bytes
            vals = t.values[first:first + n]
            lanes = [(self.read(x),) * 2 for x in vals]
            # zeros are the zero polynomial: inserting an element into them adds no constant term; so are
            # multiples of q in lanes mod q (Harvey's butterflies add them to stay above zero)
            zero = not any(vals) if self.gf2 else all(lo % self.v.modulus == 0 for lo, _ in lanes)
            return self.new(lanes, [0] * n, frozenset() if zero else frozenset({()}))
        if isinstance(op.base, StackBase):
            size, val = self.stack.get(op.offset, (0, None))
            if size < op.size:
                self.fail(index, ins, f"reads stack bytes {op.offset}..{op.offset + op.size - 1}, which no store "
                                      "wrote whole since")
            return val
        elems = self.memory[op.base.index]
        first = op.offset // self.lane_bytes
        if op.offset % self.lane_bytes or first + n > len(elems):
            self.fail(index, ins, f"reads outside argument {op.base.index}")
        got = elems[first:first + n]
        if any(e is None for e in got):
            self.fail(index, ins, f"reads elements of argument {op.base.index} that hold no value yet")
        # memory nothing has written since is the value read before (a load folded into several
        # instructions reads it in each, and a product's checks need to see one x)
        key = (op.base.index, first, n)
        seen = self.arg_reads.get(key)
        if seen is not None and all(a is b for a, b in zip(seen[0], got)):
            return seen[1]
        val = self.new([e[0] for e in got], [e[1] for e in got], union(*(e[2] for e in got)))
        self.arg_reads[key] = (got, val)
        return val

    def store(self, index: int, ins: Instr) -> None:
        m, src = ins.operands[0], ins.operands[1]
        s = spec(ins.op)
        val = self.value(src, index, ins, self.model_lanes)
        lanes, deps = list(val.lanes), list(val.deps)
        if len(ins.operands) > 2 and s.cls == "store":  # one element, chosen by the immediate
            if s.elem != self.bits:
                self.fail(index, ins, f"stores a {s.elem}-bit element of {self.bits}-bit lanes")
            lanes, deps = lanes[ins.operands[2].value:], deps[ins.operands[2].value:]
        if isinstance(m.base, StackBase):  # a store overwrites every slot whose bytes it touches
            wrote = max(m.size, src.bits // 8 if isinstance(src, PhysReg) and src.kind == VECTOR else 0)
            for offset, (size, _) in list(self.stack.items()):
                if offset < m.offset + wrote and m.offset < offset + size:
                    del self.stack[offset]
            self.stack[m.offset] = (wrote, val)
            return
        if not isinstance(m.base, ArgBase):
            self.fail(index, ins, "stores into constant memory")
        n = max(1, m.size // self.lane_bytes)
        elems, first = self.memory[m.base.index], m.offset // self.lane_bytes
        if m.offset % self.lane_bytes or first + n > len(elems) or self.kernel.args[m.base.index].role == "in":
            self.fail(index, ins, "writes outside its output buffers")
        for k in range(n):
            elems[first + k] = (lanes[k], deps[k], val.form)

    # -- semantics

    def arith(self, a: Arith, sources: list[Value], lanes: int, index: int, ins: Instr, wraps: bool) -> list[Interval]:
        out = []
        for lane in range(lanes):
            boxes = [src.lanes[lane] for src in sources]
            if self.gf2:
                out.append(self.top)
                continue
            if a.corners:
                vals = [a.value(corner, self.bits) for corner in product_of(*boxes)]
                lo, hi = min(vals), max(vals)
                if self.lo <= lo and hi <= self.hi:
                    out.append((lo, hi))
                    continue
                if a.checked and not wraps:
                    self.fail(index, ins, f"can overflow in lane {lane}: result in [{lo}, {hi}] leaves "
                                          f"{self.lane_type}")
            if all(x[0] == x[1] for x in boxes) and not (a.corners and a.checked):
                v = self.read(a.exact(tuple(x[0] for x in boxes), self.bits))
                out.append((v, v))
            else:
                out.append(self.top)
        return out

    def form_of(self, ins: Instr, sources: list[Value]) -> Form | None:
        """The form of an instruction's result outside tagged groups."""
        s = spec(ins.op)
        forms = [src.form for src in sources]
        if s.cls in ("load", "move", "store"):
            return union(*forms)
        g = s.generic
        if not self.gf2:
            if g in ("add", "sub"):
                return union(*forms)
            if s.arith is None and s.move is not None or (s.move is not None and s.elem != self.bits):
                return union(*forms)  # a movement of whole lanes (or of zeros)
            return None
        consts = [src.constant is not None for src in sources]
        if g == "xor" or ins.op in ("xor", "shld", "shrd"):
            return union(*forms)
        if g == "and" or ins.op == "and":
            if any(consts):  # a mask: a linear map
                return union(*(f for f, c in zip(forms, consts) if not c)) if not all(consts) else frozenset({()})
            return product(*forms)
        if ins.op == "vpclmulqdq":
            a, b = sources[0], sources[1]
            imm = ins.operands[3].value
            if a.constant is not None:
                return b.form
            if b.constant is not None:
                return a.form
            if a.vid == b.vid and imm in (0x00, 0x11):  # a square: GF(2)-linear
                return a.form
            return product(a.form, b.form)
        if g == "affine_bytes" and sources[1].constant is not None:  # a constant bit matrix on each byte
            return sources[0].form if ins.operands[3].value == 0 else union(sources[0].form, frozenset({()}))
        if g == "ternary" and ternary_is_linear(ins.operands[-1].value, tuple(consts)):
            return union(*(f for f, c in zip(forms, consts) if not c))
        if g in ("cmpgt", "cmpgt_mask") and sources[0].constant is not None and not any(sources[0].constant):
            return sources[1].form  # 0 > x: the sign bit spread over the element, or one bit of an opmask
        if g in ("xor_merge", "xor_zero"):
            return self._masked_xor_form(sources, zeroing=s.masking == "zero")
        if s.move is not None or g in ("sll", "srl", "sra", "shift_right_pair") or ins.op in ("shl", "shr"):
            return union(*forms)
        return None

    @staticmethod
    def _masked_xor_form(sources: list[Value], zeroing: bool) -> Form | None:
        """An xor under an opmask: the lane kept (the old one, or 0) plus the mask's bit times what the
        xor adds to it, which is the xor's other source where one source is the kept lane itself (an
        accumulator), else the xor and the kept lane together."""
        kept = [] if zeroing else [sources[0]]
        bit, inner = (sources[0], sources[1:]) if zeroing else (sources[1], sources[2:])
        added = list(inner)
        for k in kept:
            same = next((src for src in added if src.vid == k.vid), None)
            if same is None:
                added.append(k)
            else:
                added.remove(same)
        return union(*(k.form for k in kept), product(bit.form, union(*(a.form for a in added))))

    def lanes_deps(self, s, sources: list[Value], imm, lanes: int, elementwise: bool) -> list[int]:
        if elementwise:
            return [self._or(src.deps[lane] for src in sources) for lane in range(lanes)]
        if s.move is not None:
            moved = move_lanes(s, [list(src.deps) for src in sources], imm, self.bits, lanes, 0)
            if moved is not None:
                every = self._or(d for src in sources for d in src.deps)
                return [every if d is SPLIT else d for d in moved]
        every = self._or(d for src in sources for d in src.deps)
        return [every] * lanes

    @staticmethod
    def _or(masks) -> int:
        out = 0
        for m in masks:
            out |= m
        return out


def verify_kernel(kernel: Kernel, inputs: dict[int, tuple[int, int]], modulus: int | None, signed: bool = True,
                  shoup_pairs: tuple[tuple[int, int, int], ...] = ()) -> Proof:
    """Run the kernel on abstract values covering every input in its contract
    (`inputs`: argument index -> interval of every element, signed or
    unsigned as `signed` says); every reduction idiom must be congruent mod
    `modulus`, every Montgomery and Shoup product consistent. With modulus
    None the lanes are GF(2) bit vectors."""
    mc = _Machine(kernel, Verification(inputs, modulus, signed, shoup_pairs))
    groups: dict[int, _Group] = {}
    checked = products = 0
    for index, ins in enumerate(executed(kernel)):
        s = spec(ins.op)
        tag = ins.idiom
        group = None
        if tag is not None:
            if tag.role == "start":
                groups[tag.group] = _Group(tag.kind, mc.value(ins.operands[tag.source], index, ins, mc.model_lanes))
            group = groups[tag.group]
        if s.cls == "store" and isinstance(ins.operands[0], Mem):
            mc.store(index, ins)
            continue
        dst = ins.operands[0]
        if not isinstance(dst, PhysReg):
            mc.fail(index, ins, "writes no register")
        lanes = dst.bits // mc.bits if dst.kind in LANED else 1
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        sources = [mc.value(op, index, ins, lanes if s.move is None else mc.model_lanes) for op in reads
                   if not isinstance(op, Imm)]
        if s.masking is not None and s.move is not None:  # a movement under a mask: its route reads the bits
            imm = _contents(sources[1], lanes, 1) if s.elem == mc.bits else None  # a bit a lane
        if s.move is not None and s.move.indices is not None:  # a permutation: its route reads the indices
            imm = _contents(sources[s.move.indices], lanes, mc.bits)
            if imm is None:
                mc.fail(index, ins, "permutes by an index register whose contents are not a known constant")
        copy = s.cls == "move" and ins.op in ("copy", "mov") and not isinstance(reads[0], Mem)
        reload = s.cls in ("load", "move") and isinstance(reads[0], Mem) and isinstance(reads[0].base, StackBase)
        if copy or reload:
            result = sources[0]  # a copy, or a spilled value reloaded, is the same value
        else:
            result = _evaluate(mc, ins, index, s, sources, imm, lanes, group)
        if dst.kind == VECTOR and lanes < mc.model_lanes:  # a VEX.128 write zeroes the upper half; legacy keeps it
            if kernel.target.isa.encoding.zeroes_upper:
                upper_l, upper_d = [ZERO] * (mc.model_lanes - lanes), [0] * (mc.model_lanes - lanes)
            else:
                old = mc.regs.get((dst.kind, dst.number))
                upper_l = list(old.lanes[lanes:]) if old else [mc.top] * (mc.model_lanes - lanes)
                upper_d = list(old.deps[lanes:]) if old else [0] * (mc.model_lanes - lanes)
            result = Value(result.vid, tuple(result.lanes[:lanes]) + tuple(upper_l),
                           tuple(result.deps[:lanes]) + tuple(upper_d), result.form)
        if group is not None:
            group.record(ins, reads, sources, result)
            if tag.role == "end":
                del groups[tag.group]
                done = group.check.check(mc, group.end(index, ins, result))
                result = done.value
                if done.leaves is not None:
                    mc.products[result.vid] = done.leaves
                if group.check.product:
                    products += 1
                else:
                    checked += 1
        mc.regs[(dst.kind, dst.number)] = result
    outputs, forms, deps = {}, {}, {}
    for i, a in enumerate(kernel.args):
        if a.role == "in":
            continue
        elems = mc.memory[i]
        if any(e is None for e in elems):
            missing = next(k for k, e in enumerate(elems) if e is None)
            raise VerifyError(f"{kernel.symbol}: output element {missing} of argument {a.name} is never written")
        outputs[i] = tuple(e[0] for e in elems)
        deps[i] = tuple(e[1] for e in elems)
        forms[i] = union(*(e[2] for e in elems))
    return Proof(outputs, forms, deps, mc.bases, checked, products)




def _contents(v: Value, lanes: int, bits: int) -> int | None:
    """A register's first `lanes` lanes of `bits` bits (an opmask's of one) as one little-endian integer,
    where each is known and depends on no input (a constant selector or index); else None, and the
    movement it steers is not followed."""
    known = v.lanes[:lanes]
    if any(lo != hi for lo, hi in known) or any(v.deps[:lanes]):
        return None
    return sum((lo & ((1 << bits) - 1)) << (bits * k) for k, (lo, _) in enumerate(known))


def _evaluate(mc: _Machine, ins: Instr, index: int, s, sources: list[Value], imm, lanes: int, group) -> Value:
    """One instruction outside the copy case: intervals, dependences and form."""
    in_lemma = group is not None  # a tagged group's results are established at its end
    elementwise = s.arith is not None and s.elem in (None, mc.bits)
    if elementwise:
        # the semantics' sources in slot order: a row's immediate is its last slot
        operands = list(sources) + ([Value(0, ((imm, imm),) * lanes, (0,) * lanes, frozenset({()}))]
                                    if imm is not None else [])
        intervals = mc.arith(s.arith, operands, lanes, index, ins, wraps=in_lemma)
    elif s.move is not None:
        moved = move_lanes(s, [list(src.lanes) for src in sources], imm, mc.bits, lanes, ZERO)
        intervals = [mc.top if v is SPLIT else v for v in moved] if moved is not None else [mc.top] * lanes
    elif mc.gf2 or (s.arith is not None and s.elem != mc.bits) or \
            (group is not None and group.check.lanes_at_end):
        intervals = [mc.top] * lanes  # inside a product or pair reduction: established at its end
    else:
        mc.fail(index, ins, "has no lane semantics in the instruction table")
    deps = mc.lanes_deps(s, sources, imm, lanes, elementwise)
    form = None if group is not None else mc.form_of(ins, sources)
    made = mc.new(intervals, deps, form)
    mc.defs[made.vid] = Def(ins.op, s.generic, s.elem, imm, tuple(sources), lanes)
    return made




class _Group:
    """The instructions of one tagged group, recorded by value as they run."""

    def __init__(self, kind: str, input_value: Value):
        self.kind = kind
        self.check = check_for(kind)
        self.input = input_value
        self.steps: list[Step] = []

    def record(self, ins: Instr, reads: list, sources: list[Value], result: Value) -> None:
        self.steps.append(Step(ins, tuple(reads), tuple(sources), result))

    def end(self, index: int, ins: Instr, result: Value) -> Group:
        return Group(self.kind, self.input, tuple(self.steps), index, ins, result)
