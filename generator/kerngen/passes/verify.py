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
instructions do in between. A Montgomery product (a tagged group of four
instructions) is checked the same way: the same x in both products, q itself
as the modulus operand, and w' = w * q^-1 mod 2^bits — for constant w lane by
lane from the tables, for a variable w as the product the kernel computed.
Then the SMT-proven Montgomery lemma makes its result congruent to x*w/R, and
a kernel whose outputs have a linear form is a linear map mod q: its values on
the basis vectors determine it for every input (the basis-vector proof).

GF(2) lanes (binary fields): nothing can overflow; forms are followed through
xors, masks, shifts, shuffles and carry-less products (a square of a value
stays linear), so linear and bilinear kernels get basis-vector proofs too.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from ..core.errors import VerifyError
from ..ir.instr import ArgBase, Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from ..ir.lanes import SPLIT, move_lanes
from ..ir.ops import Arith, generic_name, lane_range, lane_value, spec, wrap
from ..ir.stream import executed
from ..target.printer import instr_text
from . import wide
from .lemmas import LemmaError, ScalarIdiom, prove, prove_montgomery, prove_pair_montgomery, prove_shoup

Interval = tuple[int, int]
Form = frozenset  # of sorted tuples of argument indices; None: not a sum of such products
ZERO: Interval = (0, 0)
PRODUCT = "montgomery"  # the tag kind of a Montgomery product group
PAIR = "pair_montgomery"  # ... of a pair reduction: sums of vpmaddwd products, reduced from their halves
SHOUP = "shoup"  # ... of a Shoup product: lo(x*w) - lo(hi(x*w')*q) on unsigned lanes
KARATSUBA = "karatsuba"  # ... of a cross term: Montgomery products (x0+x1)(w0+w1) - x0*w0 - x1*w1


@dataclass(frozen=True)
class Verification:
    """What a kernel is proven against: the interval of every input element
    (by argument index) and, for lanes mod q, the modulus; modulus None means
    GF(2) lanes (no overflow to prove, forms only). `signed`: how lane
    values are read (int32 or uint32 intervals). `shoup_pairs`: (w, w')
    argument pairs whose elements the contract relates by w' = floor(w*2^bits/q)."""

    inputs: dict[int, tuple[int, int]]
    modulus: int | None
    signed: bool = True
    shoup_pairs: tuple[tuple[int, int], ...] = ()


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


@dataclass(frozen=True)
class _Def:
    """The instruction that made a value, as the checks of tagged groups read it."""

    op: str
    generic: str | None
    elem: int | None
    imm: int | None
    sources: tuple  # of Value
    lanes: int  # the lanes the instruction wrote (a narrower write's upper lanes are zeroed or kept, not moved)


@dataclass(frozen=True)
class Value:
    vid: int
    lanes: tuple[Interval, ...]
    deps: tuple[int, ...]
    form: Form | None

    @property
    def constant(self) -> tuple[int, ...] | None:
        """The lanes' values when they are exact and depend on no input."""
        if self.form in (frozenset({()}), frozenset()) and all(lo == hi for lo, hi in self.lanes):
            return tuple(lo for lo, _ in self.lanes)
        return None


def _union(*forms):
    if any(f is None for f in forms):
        return None
    return frozenset().union(*forms)


def _product(a, b):
    if a is None or b is None:
        return None
    return frozenset(tuple(sorted(x + y)) for x in a for y in b)


class _Machine:
    def __init__(self, kernel: Kernel, v: Verification):
        self.kernel, self.v = kernel, v
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
        self.defs: dict[int, _Def] = {}  # value -> the instruction that made it
        self.products: dict[int, tuple] = {}  # checked Montgomery product -> its (x, w) leaves lane by lane
        self.regs: dict[tuple[str, int], Value] = {}
        self.stack: dict[int, Value] = {}
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
                self.memory[i] = [(iv, 1 << (at + k), frozenset({(i,)})) for k in range(a.count)]
            at += a.count
        self.bases = tuple(bases)

    def read(self, x: int) -> int:
        """A lane's bits as the integer they mean here."""
        return lane_value(x, self.bits, self.signed)

    def new(self, lanes, deps, form) -> Value:
        return Value(next(self.ids), tuple(lanes), tuple(deps), form)

    def fail(self, index: int, ins: Instr, message: str):
        raise VerifyError(f"{self.kernel.symbol}: instruction {index} "
                          f"`{instr_text(ins, self.kernel.target).strip()}` {message}")

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
            return self.stack[op.offset]
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
        val = self.new([e[0] for e in got], [e[1] for e in got], _union(*(e[2] for e in got)))
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
        if isinstance(m.base, StackBase):
            self.stack[m.offset] = val
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
                vals = [a.value(x, y, self.bits) for x in boxes[0] for y in boxes[1]]
                lo, hi = min(vals), max(vals)
                if self.lo <= lo and hi <= self.hi:
                    out.append((lo, hi))
                    continue
                if a.checked and not wraps:
                    self.fail(index, ins, f"can overflow in lane {lane}: result in [{lo}, {hi}] leaves "
                                          f"{self.lane_type}")
            if all(x[0] == x[1] for x in boxes) and not (a.corners and a.checked):
                v = self.read(a.exact(boxes[0][0], boxes[1][0], self.bits))
                out.append((v, v))
            else:
                out.append(self.top)
        return out

    def form_of(self, ins: Instr, sources: list[Value]) -> Form | None:
        """The form of an instruction's result outside tagged groups."""
        s = spec(ins.op)
        forms = [src.form for src in sources]
        if s.cls in ("load", "move", "store"):
            return _union(*forms)
        g = s.generic
        if not self.gf2:
            if g in ("add", "sub"):
                return _union(*forms)
            if s.arith is None and s.move is not None or (s.move is not None and s.elem != self.bits):
                return _union(*forms)  # a movement of whole lanes (or of zeros)
            return None
        consts = [src.constant is not None for src in sources]
        if g == "xor" or ins.op in ("xor", "shld", "shrd"):
            return _union(*forms)
        if g == "and" or ins.op == "and":
            if any(consts):  # a mask: a linear map
                return _union(*(f for f, c in zip(forms, consts) if not c)) if not all(consts) else frozenset({()})
            return _product(*forms)
        if ins.op == "vpclmulqdq":
            a, b = sources[0], sources[1]
            imm = ins.operands[3].value
            if a.constant is not None:
                return b.form
            if b.constant is not None:
                return a.form
            if a.vid == b.vid and imm in (0x00, 0x11):  # a square: GF(2)-linear
                return a.form
            return _product(a.form, b.form)
        if g == "cmpgt" and sources[0].constant is not None and not any(sources[0].constant):
            return sources[1].form  # 0 > x: the sign bit spread over the element
        if s.move is not None or g in ("sll", "srl") or ins.op in ("shl", "shr"):
            return _union(*forms)
        return None

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
                  shoup_pairs: tuple[tuple[int, int], ...] = ()) -> Proof:
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
        lanes = dst.bits // mc.bits if dst.kind == "vec" else 1
        reads = [ins.operands[k] for k in s.read]
        imm = next((op.value for op in reads if isinstance(op, Imm)), None)
        sources = [mc.value(op, index, ins, lanes if s.move is None else mc.model_lanes) for op in reads
                   if not isinstance(op, Imm)]
        copy = s.cls == "move" and ins.op in ("copy", "mov") and not isinstance(reads[0], Mem)
        reload = s.cls in ("load", "move") and isinstance(reads[0], Mem) and isinstance(reads[0].base, StackBase)
        if copy or reload:
            result = sources[0]  # a copy, or a spilled value reloaded, is the same value
        else:
            result = _evaluate(mc, ins, index, s, sources, imm, lanes, group)
        if dst.kind == "vec" and lanes < mc.model_lanes:  # a VEX.128 write zeroes the upper half; legacy keeps it
            if kernel.target.isa.vex:
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
                if group.kind == PRODUCT:
                    result = group.check_product(mc, index, ins, result)
                    products += 1
                elif group.kind == PAIR:
                    result = group.check_pair(mc, index, ins, result)
                    products += 1
                elif group.kind == SHOUP:
                    result = group.check_shoup(mc, index, ins, result)
                    products += 1
                elif group.kind == KARATSUBA:
                    result = group.check_karatsuba(mc, index, ins, result)
                    checked += 1
                else:
                    result = group.apply_lemma(mc, index, ins, result)
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
        forms[i] = _union(*(e[2] for e in elems))
    return Proof(outputs, forms, deps, mc.bases, checked, products)


def _evaluate(mc: _Machine, ins: Instr, index: int, s, sources: list[Value], imm, lanes: int, group) -> Value:
    """One instruction outside the copy case: intervals, dependences and form."""
    in_lemma = group is not None  # a tagged group's results are established at its end
    elementwise = s.arith is not None and s.elem in (None, mc.bits)
    if elementwise:
        operands = list(sources) + ([Value(0, ((imm, imm),) * lanes, (0,) * lanes, frozenset({()}))]
                                    if imm is not None else [])
        intervals = mc.arith(s.arith, operands, lanes, index, ins, wraps=in_lemma)
    elif s.move is not None:
        moved = move_lanes(s, [list(src.lanes) for src in sources], imm, mc.bits, lanes, ZERO)
        intervals = [mc.top if v is SPLIT else v for v in moved] if moved is not None else [mc.top] * lanes
    elif mc.gf2 or (s.arith is not None and s.elem != mc.bits) or \
            (group is not None and group.kind in (PRODUCT, PAIR, SHOUP)):
        intervals = [mc.top] * lanes  # inside a product or pair reduction: established at its end
    else:
        mc.fail(index, ins, "has no lane semantics in the instruction table")
    deps = mc.lanes_deps(s, sources, imm, lanes, elementwise)
    form = None if group is not None else mc.form_of(ins, sources)
    made = mc.new(intervals, deps, form)
    mc.defs[made.vid] = _Def(ins.op, s.generic, s.elem, imm, tuple(sources), lanes)
    return made


class _Group:
    """The instructions of one tagged idiom or Montgomery product, followed by value."""

    def __init__(self, kind: str, input_value: Value):
        self.kind = kind
        self.input = input_value
        self.steps: list[tuple[Instr, list, list[Value], Value]] = []

    def record(self, ins: Instr, reads: list, sources: list[Value], result: Value) -> None:
        self.steps.append((ins, reads, sources, result))

    def made_inside(self) -> set[int]:
        """The values the group's instructions made (not the ones they copied)."""
        return {made.vid for _, _, sources, made in self.steps if made.vid not in {v.vid for v in sources}}

    def apply_lemma(self, mc: _Machine, index: int, ins: Instr, result: Value) -> Value:
        """Rebuild the idiom in lane form from the values its instructions read
        and made, prove it, and take its result from the lemma."""
        names: dict[int, str] = {self.input.vid: "x"}
        steps = []
        for k, (step, reads, sources, made) in enumerate(self.steps):
            if spec(step.op).cls == "move":  # a copy: the same value under the same name
                continue
            srcs: list[str | int] = []
            values = iter(sources)
            for op in reads:
                if isinstance(op, Imm):
                    srcs.append(op.value)
                    continue
                v = next(values)
                if v.vid in names:
                    srcs.append(names[v.vid])
                elif v.constant is not None and len(set(v.constant)) == 1:
                    srcs.append(v.constant[0])
                else:
                    mc.fail(index, ins, f"ends a {self.kind} idiom that reads a value from outside itself "
                                        f"(at `{instr_text(step, mc.kernel.target).strip()}`)")
            name = f"v{k}"
            steps.append((generic_name(step.op), name, *srcs))
            names[made.vid] = name
        if names.get(result.vid) != steps[-1][1]:
            mc.fail(index, ins, f"ends a {self.kind} idiom whose result is not its last step's")
        idiom = ScalarIdiom(self.kind, mc.v.modulus, tuple(steps), mc.bits, mc.signed)
        try:
            lemma = prove(idiom)
        except LemmaError as e:
            raise VerifyError(f"{mc.kernel.symbol}: {e}") from None
        n = len(result.lanes)
        lanes = [lemma.range_for(lo, hi) for lo, hi in self.input.lanes[:n]]
        return Value(result.vid, tuple(lanes), self.input.deps[:n], self.input.form)

    def check_product(self, mc: _Machine, index: int, ins: Instr, result: Value) -> Value:
        """Every lane r of the result must be hi(x*w) - hi(lo(x*w')*q) of one
        lane x, w, w' of values made outside the product, followed back lane
        by lane through its instructions (element-wise ones, the widening
        products of even lanes and the lane moves between them), with q
        itself as the modulus and w' = w*q^-1 mod 2^bits: for a constant w
        lane by lane from the tables, for a variable w as the product the
        kernel computed. Then the SMT-proven Montgomery lemma makes r
        congruent to x*w/2^bits mod q; its interval follows from x's and w's."""
        def bad(why: str):
            mc.fail(index, ins, f"ends a Montgomery product that {why}")

        q, bits = mc.v.modulus, mc.bits
        pieces = bits == wide.BITS  # products from 32-bit pieces, on unsigned lanes: (hi(x*w) + q) - hi(t*q)
        if mc.signed == pieces:
            bad(f"runs on {mc.lane_type} lanes (it is {'unsigned' if pieces else 'signed'})")
        high_op = "mulhu" if pieces else "mulhi"
        qinv = pow(q, -1, 1 << bits)
        inside = self.made_inside()
        active = ins.operands[0].bits // bits  # the lanes the product computes
        half = 1 << (bits - 1)
        # hi(t*q) for any t; on unsigned lanes, q is added to hi(x*w) first
        (u_lo, u_hi), lift = ((0, q - 1), q) if pieces else (((-half * q) >> bits, ((half - 1) * q) >> bits), 0)
        if pieces:
            _prove_wide(mc)
        lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
        leaves = []
        for lane, term in enumerate(_product_terms(mc, result, active, inside, bad)):
            if pieces:
                lifted = term[1] if term[0] == "sub" else ("leaf",)
                summands = [t for t in lifted[1:] if t[0] == "leaf" and _leaf_constant(t) == q]
                if lifted[0] != "add" or len(summands) != 1:
                    bad(f"computes lane {lane} as {_show(term)}, not (hi(x*w) + q) - hi(lo(x*w')*q)")
                term = ("sub", lifted[2] if lifted[1] is summands[0] else lifted[1], term[2])
            if term[0] != "sub" or term[1][0] != high_op or term[2][0] != high_op:
                bad(f"computes lane {lane} as {_show(term)}, not hi(x*w) - hi(lo(x*w')*q)")
            (_, a, b), (_, c, d) = term[1], term[2]
            low, qv = (c, d) if c[0] == "mullo" else (d, c)
            factors = _factors(low)
            if low[0] != "mullo" or qv[0] != "leaf" or a[0] != "leaf" or b[0] != "leaf" or factors is None:
                bad(f"computes lane {lane} as {_show(term)}, not hi(x*w) - hi(lo(x*w')*q)")
            if _leaf_constant(qv) != wrap(q, bits):
                bad(f"does not reduce by q = {q}")
            if len(factors) == 3:  # lo(lo(x*w)*q^-1): the product itself times q^-1
                rest = list(factors)
                for t in (a, b):
                    if t not in rest:
                        bad("does not multiply the same x and w in both products")
                    rest.remove(t)
                if (_leaf_constant(rest[0]) or 0) % (1 << bits) != qinv:
                    bad("multiplies lo(x*w) by something other than q^-1")
                x, w = (b, a) if _leaf_constant(b) is None else (a, b)
            else:
                shared = [t for t in (a, b) if t in factors]
                if len(factors) != 2 or len(shared) != 1 or a == b:
                    bad("does not multiply one x in both products")
                x = shared[0]
                w = b if a == x else a
                wq = factors[1] if factors[0] == x else factors[0]
                if _leaf_constant(w) is not None:
                    if _leaf_constant(wq) is None or (_leaf_constant(wq) - _leaf_constant(w) * qinv) % (1 << bits):
                        bad("pairs a constant w with a w' that is not w*q^-1 mod 2^bits")
                elif not _times_qinv(mc, wq, w, qinv):
                    bad("pairs a variable w with a w' not computed as mullo(w, q^-1) or a sum of such")
            form = _union(form, x[1].form if _leaf_constant(w) is not None else _product(x[1].form, w[1].form))
            (x_lo, x_hi), (w_lo, w_hi) = x[1].lanes[x[2]], w[1].lanes[w[2]]
            corners = [i * j for i in (x_lo, x_hi) for j in (w_lo, w_hi)]
            r_lo, r_hi = (min(corners) >> bits) + lift - u_hi, (max(corners) >> bits) + lift - u_lo
            if r_lo < mc.lo or r_hi > mc.hi:  # (unsigned: hi(x*w) + q, the largest value made, is r_hi)
                bad(f"can leave {mc.lane_type} in lane {lane}: [{r_lo}, {r_hi}]")
            lanes[lane] = (r_lo, r_hi)
            deps[lane] = x[1].deps[x[2]] | w[1].deps[w[2]]
            leaves.append((x, w))
        prove_montgomery(q, bits, signed=not pieces)
        mc.products[result.vid] = tuple(leaves)
        return Value(result.vid, tuple(lanes), tuple(deps), form)

    def check_karatsuba(self, mc: _Machine, index: int, ins: Instr, result: Value) -> Value:
        """r = (pm - p00) - p11 for checked Montgomery products p00 = x0*w0/R,
        p11 = x1*w1/R and pm = (x0 + x1)(w0 + w1)/R, the sums made lane by
        lane by additions: then r*R = x0*w1 + x1*w0 - (tm - t0 - t1)*q
        exactly, each t in [-2^(bits-1), 2^(bits-1)), which bounds r far
        tighter than pm's interval minus the others' (those forget that pm's
        factors are the others' sums). Wrapping subtractions give r itself
        when that bound lies inside the lane."""
        def bad(why: str):
            mc.fail(index, ins, f"ends a Karatsuba cross term that {why}")

        q, bits = mc.v.modulus, mc.bits
        if len(self.steps) != 2 or any(spec(st.op).generic != "sub" for st, *_ in self.steps):
            bad("is not two subtractions")
        (_, _, (pm, p00), first), (_, _, (rest, p11), _) = self.steps
        if rest.vid != first.vid:
            bad("does not subtract from the first difference")
        made = [mc.products.get(v.vid) for v in (pm, p00, p11)]
        if None in made:
            bad("subtracts something other than checked Montgomery products")

        def sum_of(leaf: tuple, a: tuple, c: tuple) -> bool:
            parts = _sum_parts(mc, leaf)
            return parts is not None and leaf[2] == a[2] == c[2] and \
                {p[1].vid for p in parts} == {a[1].vid, c[1].vid}

        half = 1 << (bits - 1)
        lanes, deps = list(result.lanes), list(result.deps)
        for lane in range(len(made[0])):
            (xs, ws), p0, p1 = (m[lane] for m in made)
            # a product of two variables names its factors in either order (x*w = w*x): the sums
            # must take one factor of each product, and the other sum the other two
            found = next(((x0, w0, x1, w1) for x0, w0 in (p0, p0[::-1]) for x1, w1 in (p1, p1[::-1])
                          if sum_of(xs, x0, x1) and sum_of(ws, w0, w1)), None)
            if found is None:
                bad(f"in lane {lane} does not multiply the sums of the other products' factors")
            x0, w0, x1, w1 = found

            def box(t):
                return t[1].lanes[t[2]]

            lo_c = min(i * j for i in box(x0) for j in box(w1)) + min(i * j for i in box(x1) for j in box(w0))
            hi_c = max(i * j for i in box(x0) for j in box(w1)) + max(i * j for i in box(x1) for j in box(w0))
            t_lo, t_hi = -half - 2 * (half - 1), (half - 1) + 2 * half  # tm - t0 - t1
            r_lo, r_hi = -((t_hi * q - lo_c) >> bits), (hi_c - t_lo * q) >> bits
            if r_lo < mc.lo or r_hi > mc.hi:
                bad(f"can leave int{bits} in lane {lane}: [{r_lo}, {r_hi}]")
            lanes[lane] = (r_lo, r_hi)
            deps[lane] = pm.deps[lane] | p00.deps[lane] | p11.deps[lane]
        return Value(result.vid, tuple(lanes), tuple(deps), _union(pm.form, p00.form, p11.form))

    def check_pair(self, mc: _Machine, index: int, ins: Instr, result: Value) -> Value:
        """r = hi - mulhi(mullo(lo, q^-1), q), where lo and hi interleave the
        halves of two sums of vpmaddwd products: lo = blend(X0, X1 << bits),
        hi = blend(X0 >> bits, X1) (odd lanes from the second source). Then
        lane 2m of r is X0's unit m times 2^-bits mod q and lane 2m+1 is X1's
        (the pair Montgomery lemma), each unit's X the sum over its terms of
        a[2m]*b[2m] + a[2m+1]*b[2m+1]; its interval comes from theirs."""
        bits, q = mc.bits, mc.v.modulus

        def bad(why: str):
            mc.fail(index, ins, f"ends a pair reduction that {why}")

        if not mc.signed:
            bad(f"runs on {mc.lane_type} lanes (it is signed)")

        def made(v: Value, generic: str, width: int, imm: int | None = None) -> list[Value]:
            got = mc.defs.get(v.vid)
            if got is None or got.generic != generic or (got.elem or bits) != width or \
                    (imm is not None and got.imm != imm):
                bad(f"does not compute {generic} on {width}-bit units{'' if imm is None else f' by {imm}'} "
                    f"where it should (found {got})")
            return list(got.sources)

        def constant(vs: list[Value], want: int) -> Value:
            others = [v for v in vs if v.constant is None or set(v.constant[:active]) != {wrap(want, bits)}]
            if len(others) != 1:
                bad(f"does not use the constant {want} where it should")
            return others[0]

        active = ins.operands[0].bits // bits
        h, u = made(result, "sub", bits)
        t = constant(made(u, "mulhi", bits), q)
        lo = constant(made(t, "mullo", bits), pow(q, -1, 1 << bits))
        x0, shifted = made(lo, "blend", bits, 0xAA)
        [x1] = made(shifted, "sll", 2 * bits, bits)
        high, x1_again = made(h, "blend", bits, 0xAA)
        [x0_again] = made(high, "srl", 2 * bits, bits)
        if x0.vid != x0_again.vid or x1.vid != x1_again.vid:
            bad("does not take both halves from the same two sums")

        def terms(x: Value) -> list[tuple[Value, Value]]:
            got = mc.defs.get(x.vid)
            if got is not None and got.generic == "madd":
                return [got.sources]
            return [term for src in made(x, "add", 2 * bits) for term in terms(src)]

        limit = 1 << (2 * bits - 1)
        lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
        for parity, x in ((0, x0), (1, x1)):
            parts = terms(x)
            for a, b in parts:
                form = _union(form, _product(a.form, b.form))
            for m in range(active // 2):
                lo_sum = hi_sum = magnitude = 0
                dep = 0
                for a, b in parts:
                    for k in (2 * m, 2 * m + 1):
                        corners = [i * j for i in a.lanes[k] for j in b.lanes[k]]
                        lo_sum, hi_sum = lo_sum + min(corners), hi_sum + max(corners)
                        magnitude += max(abs(c) for c in corners)
                        dep |= a.deps[k] | b.deps[k]
                if magnitude >= limit:
                    bad(f"can overflow its {2 * bits}-bit sums in unit {m}: up to {magnitude}")
                r_lo = -((-(lo_sum - ((1 << (bits - 1)) - 1) * q)) // (1 << bits))
                r_hi = (hi_sum + (1 << (bits - 1)) * q) // (1 << bits)
                if r_lo < mc.lo or r_hi > mc.hi:
                    bad(f"can leave int{bits} in lane {2 * m + parity}: [{r_lo}, {r_hi}]")
                lanes[2 * m + parity] = (r_lo, r_hi)
                deps[2 * m + parity] = dep
        try:
            prove_pair_montgomery(q, bits)
        except LemmaError as e:
            raise VerifyError(f"{mc.kernel.symbol}: {e}") from None
        return Value(result.vid, tuple(lanes), tuple(deps), form)

    def check_shoup(self, mc: _Machine, index: int, ins: Instr, result: Value) -> Value:
        """Every lane r of the result must be lo(x*w) - lo(hi(x*w')*q) of one
        lane x, w, w' of values made outside the product (followed back lane
        by lane as for Montgomery; the high half hi(x*w') unsigned), on
        unsigned lanes, with q itself and w' = floor(w*2^bits/q): for a
        constant w in [0, q) lane by lane from the tables, for a variable w
        the element of an argument the contract pairs with the same element
        of w''s argument, both as loaded. Then Shoup's lemma makes r = x*w
        mod q, in [0, q - 1 + ceil(q*x/2^bits)]."""
        def bad(why: str):
            mc.fail(index, ins, f"ends a Shoup product that {why}")

        q, bits = mc.v.modulus, mc.bits
        if mc.signed:
            bad(f"runs on {mc.lane_type} lanes (it needs unsigned ones)")
        lemma = prove_shoup(q, bits)
        if bits == wide.BITS:
            _prove_wide(mc)
        inside = self.made_inside()
        lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
        shape = "not lo(x*w) - lo(hi(x*w')*q)"
        for lane, term in enumerate(_product_terms(mc, result, ins.operands[0].bits // bits, inside, bad)):
            if term[0] != "sub" or term[1][0] != "mullo" or term[2][0] != "mullo":
                bad(f"computes lane {lane} as {_show(term)}, {shape}")
            (_, a, b), (_, c, d) = term[1], term[2]
            high, qv = (c, d) if c[0] == "mulhu" else (d, c)
            if high[0] != "mulhu" or qv[0] != "leaf" or a[0] != "leaf" or b[0] != "leaf":
                bad(f"computes lane {lane} as {_show(term)}, {shape}")
            if _leaf_constant(qv) != q:
                bad(f"does not reduce by q = {q}")
            shared = [t for t in high[1:] if t in (a, b)]
            if len(shared) != 1 or high[1][0] != "leaf" or high[2][0] != "leaf" or a == b:
                bad(f"does not multiply one x in both products (lane {lane}: {_show(term)})")
            x = shared[0]
            w, wp = (b if a == x else a), (high[2] if high[1] == x else high[1])
            wc = _lane_constant(w)
            if wc is not None:  # from a table, or the zeros a short load leaves in the upper lanes
                wpc = _lane_constant(wp)
                if not 0 <= wc < q or wpc != (wc << bits) // q:
                    bad(f"pairs w = {wc} with w' = {wpc}, not floor(w*2^{bits}/q) for w in [0, q)")
            elif not _shoup_pair(mc, w, wp):
                bad("pairs a variable w with a w' that is not its element of an argument the contract pairs with w's")
            (x_lo, x_hi), (w_lo, w_hi) = x[1].lanes[x[2]], w[1].lanes[w[2]]
            if w_lo < 0 or w_hi >= q:
                bad(f"takes w in [{w_lo}, {w_hi}] in lane {lane}, not in [0, q)")
            if wc != 0:  # (a zero w adds nothing)
                form = _union(form, x[1].form if wc is not None else _product(x[1].form, w[1].form))
            lanes[lane] = lemma.range_for(x_lo, x_hi)
            deps[lane] = x[1].deps[x[2]] | w[1].deps[w[2]] | wp[1].deps[wp[2]]
        return Value(result.vid, tuple(lanes), tuple(deps), form)


def _prove_wide(mc: _Machine) -> None:
    """The templates of 64-bit products proven (once), before a check relies on them."""
    try:
        wide.prove_templates()
    except wide.WideProductError as e:
        raise VerifyError(f"{mc.kernel.symbol}: {e}") from None


def _shoup_pair(mc: _Machine, w: tuple, wp: tuple) -> bool:
    """Lanes w and w' are elements k of arguments i and j that the contract
    pairs, each moved unchanged from its argument (so the contract's relation holds)."""
    found = [_input_element(mc, v, lane) for _, v, lane in (w, wp)]
    if None in found:
        return False
    (i, k), (j, m) = found
    return (i, j) in mc.v.shoup_pairs and k == m


def _input_element(mc: _Machine, v: Value, lane: int) -> tuple[int, int] | None:
    """(argument, element) whose value lane `lane` of v holds unchanged: followed
    through loads and lane moves to memory; None where anything else made it."""
    made = mc.defs.get(v.vid)
    if made is None:  # read from memory: one element of an argument, as its form and dependence say
        dep = v.deps[lane]
        arg = next((i for i in range(len(mc.bases)) if v.form == frozenset({(i,)})), None)
        if arg is None or not dep or dep & (dep - 1) or dep.bit_length() - 1 < mc.bases[arg]:
            return None
        return arg, dep.bit_length() - 1 - mc.bases[arg]
    moved = _moved_from(mc, made, v, lane)
    return None if moved is None else _input_element(mc, *moved)


def _moved_from(mc: _Machine, made: _Def, v: Value, lane: int) -> tuple[Value, int] | None:
    """The source value and lane whose content lane `lane` of v takes, where
    the instruction that made v moves whole lanes; None otherwise."""
    s = spec(made.op)
    if s.move is None or lane >= made.lanes:
        return None
    labels = [[(i, k) for k in range(len(src.lanes))] for i, src in enumerate(made.sources)]
    got = move_lanes(s, labels, made.imm, mc.bits, made.lanes, None)
    if got is None or got[lane] is None or got[lane] is SPLIT:
        return None
    i, k = got[lane]
    return made.sources[i], k


def _times_qinv(mc: _Machine, wq: tuple, w: tuple, qinv: int) -> bool:
    """Term wq = w*q^-1 mod 2^bits for the leaf w, as the kernel made it:
    mullo(w, q^-1) in the same lane, or u' + v' (added inside the product,
    or before it) for w = u + v with u', v' such multiples of u and v:
    multiplication mod 2^bits distributes over wrapping addition."""
    if wq[0] == "leaf":
        made = mc.defs.get(wq[1].vid)
        if made is not None and made.generic == "mullo" and wq[2] == w[2]:
            mates = [v for v in made.sources if v.vid != w[1].vid]
            return len(mates) == 1 and mates[0].constant is not None and \
                (mates[0].constant[w[2]] - qinv) % (1 << mc.bits) == 0
        parts = _sum_parts(mc, wq)
    else:
        parts = wq[1:] if wq[0] == "add" else None
    w_parts = _sum_parts(mc, w)
    if parts is None or w_parts is None:
        return False
    (u, v), (uq, vq) = w_parts, parts
    return (_times_qinv(mc, uq, u, qinv) and _times_qinv(mc, vq, v, qinv)) or \
        (_times_qinv(mc, vq, u, qinv) and _times_qinv(mc, uq, v, qinv))


def _sum_parts(mc: _Machine, leaf: tuple) -> tuple[tuple, tuple] | None:
    """The two leaves a leaf lane was added from lane-wise, if an addition made it."""
    d = mc.defs.get(leaf[1].vid)
    if d is None or d.generic != "add" or d.elem not in (None, mc.bits) or d.imm is not None:
        return None
    return tuple(("leaf", v, leaf[2]) for v in d.sources)


# the lane of a term built for every lane at once: each leaf's lane is the lane the term is read in
EVERY_LANE = None


def _product_terms(mc: _Machine, result: Value, active: int, inside: set[int], bad) -> list[tuple]:
    """The term of each of the `active` lanes of a product's result
    (`_lane_term`). On 64-bit lanes the products are assembled from 32-bit
    pieces, which no instruction moves across lanes: every lane's term is
    then one term over its own lane of the same values, built and matched
    against the templates (`wide.recognise`) once, each constant compared
    in every lane at once, and then read in each lane."""
    if mc.bits != wide.BITS:
        return [_lane_term(mc, result, lane, inside, bad) for lane in range(active)]

    known: dict[int, tuple[Value, tuple[int, ...] | None]] = {}

    def constants(leaf: tuple) -> tuple[int, ...] | None:
        v = leaf[1]
        if id(v) not in known:
            values = [_lane_constant(("leaf", v, lane)) for lane in range(active)]
            known[id(v)] = (v, None if None in values else tuple(values))
        return known[id(v)][1]

    term = wide.recognise(_lane_term(mc, result, EVERY_LANE, inside, bad), constants)
    return [_in_lane(term, lane, {}) for lane in range(active)]


def _in_lane(term: tuple, lane: int, seen: dict) -> tuple:
    """A term built for EVERY_LANE, read in `lane` (a subterm read twice stays one object)."""
    if term[0] == "leaf":
        return ("leaf", term[1], lane)
    if term[0] == "imm":
        return term
    if id(term) not in seen:
        seen[id(term)] = (term, (term[0], *(_in_lane(t, lane, seen) for t in term[1:])))
    return seen[id(term)][1]


def _lane_term(mc: _Machine, v: Value, lane: int | None, inside: set[int], bad, seen: dict | None = None) -> tuple:
    """Lane `lane` of v as a term over lanes of values made outside a group
    (`inside`: the values it made): ("leaf", value, lane), or (generic
    operation, term, term) through element-wise instructions and widening
    products, following lane moves to the lane they take; for EVERY_LANE
    through element-wise instructions only. A value read twice is one term
    object, read twice (`seen`)."""
    seen = {} if seen is None else seen
    key = (v.vid, lane)
    if key not in seen:
        seen[key] = _made_term(mc, v, lane, inside, bad, seen)
    return seen[key]


def _made_term(mc: _Machine, v: Value, lane: int | None, inside: set[int], bad, seen: dict) -> tuple:
    if v.vid not in inside:
        return ("leaf", v, lane)
    d = mc.defs[v.vid]
    s = spec(d.op)
    elementwise = s.arith is not None and s.elem in (None, mc.bits)
    if lane is EVERY_LANE and not elementwise:
        bad(f"has a `{d.op}` inside a product of {mc.bits}-bit lanes: every lane must stay in its lane")
    if s.widen is not None and s.elem != mc.bits:  # a product of the low lanes of wider units: low, high half
        per = s.elem // mc.bits
        first, part = lane - lane % per, lane % per
        if per != 2:
            bad(f"widens {s.elem // 2}-bit lanes where the lanes are {mc.bits} bits")
        a, b = d.sources
        return (s.widen if part else "mullo", _lane_term(mc, a, first, inside, bad, seen),
                _lane_term(mc, b, first, inside, bad, seen))
    if elementwise:
        a = _lane_term(mc, d.sources[0], lane, inside, bad, seen)
        if d.imm is not None:  # a shift by a count
            return (d.generic, a, ("imm", d.imm))
        return (d.generic, a, _lane_term(mc, d.sources[1], lane, inside, bad, seen))
    moved = _moved_from(mc, d, v, lane)
    if moved is not None:
        return _lane_term(mc, *moved, inside, bad, seen)
    bad(f"has a `{d.op}` that cannot be followed lane by lane")


def _factors(term: tuple) -> list[tuple] | None:
    """The leaves a low product multiplies (mod 2^bits the grouping does not matter)."""
    if term[0] in ("leaf", "add"):  # an addition inside: a factor w' given as a sum (`_times_qinv`)
        return [term]
    if term[0] != "mullo":
        return None
    parts = [_factors(t) for t in term[1:]]
    return None if None in parts else parts[0] + parts[1]


def _lane_constant(term: tuple) -> int | None:
    """A leaf lane's value where it is exact and depends on no input (a table's, or a zeroed lane)."""
    _, v, lane = term
    (lo, hi), dep = v.lanes[lane], v.deps[lane]
    return lo if lo == hi and not dep else None


def _leaf_constant(term: tuple) -> int | None:
    _, v, lane = term
    return None if v.constant is None else v.constant[lane]


def _show(term: tuple) -> str:
    if term[0] == "leaf":
        return f"v{term[1].vid}[{term[2]}]"
    if term[0] == "imm":
        return str(term[1])
    return f"{term[0]}({_show(term[1])}, {_show(term[2])})"
