"""The verifier: abstract interpretation of a kernel's final instruction list.

Every 16-bit lane of every register and every array element carries an
interval; the kernel is run once on intervals covering all inputs in its
contract. Additions and subtractions must stay inside int16; wrap-around is
allowed only where it is meant: inside a reduction idiom, whose result comes
from a lemma proven by running the idiom's own instructions on every input
(`lemmas.prove`). Shuffles move lanes; table loads give exact constants.
A kernel whose lanes could overflow is refused with the instruction, lane and
bound; otherwise the proven bound of every output element is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import VerifyError
from .isa.ir import ArgBase, Imm, Instr, Kernel, Mem, PhysReg, StackBase, TableBase
from .isa.printer import instr_text
from .isa.abi import SYSV
from .lemmas import ScalarIdiom, LemmaError, prove

LO, HI = -32768, 32767
TOP = (LO, HI)
_STORES = ("store", "store_aligned", "store64", "store32", "store16")
Lanes = list[tuple[int, int]]


@dataclass(frozen=True)
class Proof:
    """What the verifier established: per output argument, the interval of each element."""

    outputs: dict[int, tuple[tuple[int, int], ...]]
    idioms_checked: int

    def hull(self, arg: int) -> tuple[int, int]:
        elems = self.outputs[arg]
        return min(lo for lo, _ in elems), max(hi for _, hi in elems)


def _clamp_check(lo: int, hi: int, ctx) -> tuple[int, int]:
    if lo < LO or hi > HI:
        ctx.fail(lo, hi)
    return lo, hi


def _mulhi(a, b):
    cands = [x * y >> 16 for x in a for y in b]
    return min(cands), max(cands)


def _mulhrs(a, b):
    cands = [((x * y >> 14) + 1) >> 1 for x in a for y in b]
    return min(cands), max(cands)


def _exact(iv) -> bool:
    return iv[0] == iv[1]


def _wrap(x: int) -> int:
    x &= 0xFFFF
    return x - 0x10000 if x & 0x8000 else x


class _Ctx:
    def __init__(self, kernel: Kernel, index: int, ins: Instr):
        self.kernel, self.index, self.ins, self.lane = kernel, index, ins, 0

    def fail(self, lo, hi):
        raise VerifyError(
            f"{self.kernel.symbol}: instruction {self.index} `{instr_text(self.ins, SYSV).strip()}`"
            f" can overflow in lane {self.lane}: result in [{lo}, {hi}] leaves int16")


def _shift_lanes(src: Lanes, group: int, by: int) -> Lanes:
    """Move 16-bit lanes by `by` positions (positive: up) inside groups of `group` lanes, zero-filling."""
    out = []
    for i in range(16):
        base, pos = i - i % group, i % group
        j = pos - by
        out.append(src[base + j] if 0 <= j < group else (0, 0))
    return out


def verify_kernel(kernel: Kernel, inputs: dict[int, tuple[int, int]], modulus: int) -> Proof:
    """`inputs`: argument index -> interval of every element of that int16 array;
    every reduction idiom must be congruent mod `modulus` on all inputs."""
    tables = {t.label: t for t in kernel.tables}
    regs: dict[int, Lanes] = {}
    memory: dict[int, list[tuple[int, int] | None]] = {}
    for i, a in enumerate(kernel.args):
        init = inputs.get(i) if a.role != "out" else None
        memory[i] = [init] * a.count
    stack: dict[int, Lanes] = {}
    idiom_inputs: dict[int, Lanes] = {}
    idiom_instrs: dict[int, list[Instr]] = {}
    checked = 0

    def read(op, ctx) -> Lanes:
        if isinstance(op, PhysReg):
            if op.number not in regs:
                raise VerifyError(f"{kernel.symbol}: instruction {ctx.index} reads ymm{op.number} before writing it")
            return regs[op.number]
        if isinstance(op, Mem):
            return load(op, ctx)
        raise TypeError(op)

    def load(m: Mem, ctx) -> Lanes:
        """The lanes a memory operand supplies; a narrow move zero-fills the rest."""
        count = min(16, m.size // 2)
        if isinstance(m.base, TableBase):
            t = tables[m.base.label]
            vals = t.values[m.offset // 2:m.offset // 2 + count]
            return [(v, v) for v in vals] + [(0, 0)] * (16 - count)
        if isinstance(m.base, StackBase):
            return list(stack[m.offset])
        elems = memory[m.base.index]
        first = m.offset // 2
        if m.offset % 2 or first + count > len(elems):
            raise VerifyError(f"{kernel.symbol}: instruction {ctx.index} reads outside argument {m.base.index}")
        vals = elems[first:first + count]
        if any(v is None for v in vals):
            raise VerifyError(f"{kernel.symbol}: instruction {ctx.index} reads elements of argument "
                              f"{m.base.index} that hold no value yet")
        return list(vals) + [(0, 0)] * (16 - count)

    for index, ins in enumerate(kernel.body):
        ctx = _Ctx(kernel, index, ins)
        op, ops = ins.op, ins.operands
        in_idiom = ins.idiom is not None
        if in_idiom and ins.idiom.role == "start":
            idiom_inputs[ins.idiom.group] = read(ops[ins.idiom.source], ctx)
            idiom_instrs[ins.idiom.group] = []
        if in_idiom:
            idiom_instrs[ins.idiom.group].append(ins)
        if op in _STORES:
            m, val = ops[0], read(ops[1], ctx)
            if isinstance(m.base, StackBase):
                stack[m.offset] = list(val)
                continue
            if not isinstance(m.base, ArgBase):
                raise VerifyError(f"{kernel.symbol}: instruction {index} stores into constant memory")
            count = min(16, m.size // 2)
            if op == "store16":  # one lane, chosen by the immediate
                val = val[ops[2].value:]
            elems, first = memory[m.base.index], m.offset // 2
            if m.offset % 2 or first + count > len(elems) or kernel.args[m.base.index].role == "in":
                raise VerifyError(f"{kernel.symbol}: instruction {index} writes outside its output buffers")
            elems[first:first + count] = val[:count]
            continue
        dst = ops[0]
        if op in ("load", "load_aligned", "load64", "load32", "copy"):
            res = read(ops[1], ctx)
        elif op == "vpbroadcastw":
            res = [read(ops[1], ctx)[0]] * 16
        elif op in ("vpaddw", "vpsubw", "vpmulhw", "vpmulhrsw", "vpmullw"):
            a, b = read(ops[1], ctx), read(ops[2], ctx)
            res = []
            for lane, (x, y) in enumerate(zip(a, b)):
                ctx.lane = lane
                if op in ("vpaddw", "vpsubw"):
                    lo, hi = (x[0] + y[0], x[1] + y[1]) if op == "vpaddw" else (x[0] - y[1], x[1] - y[0])
                    # inside an idiom wrap-around is intended; its lemma gives the result
                    res.append(TOP if in_idiom and (lo < LO or hi > HI) else _clamp_check(lo, hi, ctx))
                elif op == "vpmulhw":
                    res.append(_mulhi(x, y))
                elif op == "vpmulhrsw":
                    r = _mulhrs(x, y)
                    res.append(TOP if r[1] > HI else r)
                else:
                    res.append((_wrap(x[0] * y[0]),) * 2 if _exact(x) and _exact(y) else TOP)
        elif op in ("vpand", "vpor", "vpxor", "vpsllw", "vpsrlw") and in_idiom:
            # bit operations appear only inside reduction idioms, whose lemma gives the result
            res = [TOP] * 16
        elif op == "vpsraw":
            k = ops[2].value
            res = [(lo >> k, hi >> k) for lo, hi in read(ops[1], ctx)]
        elif op in ("vpsllq", "vpsrlq", "vpslld", "vpsrld"):
            k = ops[2].value
            group = 4 if op.endswith("q") else 2
            src = read(ops[1], ctx)
            if k % 16:
                res = [TOP] * 16
            else:
                res = _shift_lanes(src, group, k // 16 if op.startswith("vpsll") else -(k // 16))
        elif op == "vpblendw":
            a, b, imm = read(ops[1], ctx), read(ops[2], ctx), ops[3].value
            res = [b[i] if imm >> (i % 8) & 1 else a[i] for i in range(16)]
        elif op == "vpblendd":
            a, b, imm = read(ops[1], ctx), read(ops[2], ctx), ops[3].value
            res = [b[i] if imm >> (i // 2) & 1 else a[i] for i in range(16)]
        elif op == "vperm2i128":
            a, b, imm = read(ops[1], ctx), read(ops[2], ctx), ops[3].value
            halves = [a[:8], a[8:], b[:8], b[8:]]
            res = []
            for sel in (imm & 0xF, imm >> 4):
                res += [(0, 0)] * 8 if sel & 8 else halves[sel & 3]
        elif op in ("vpunpcklwd", "vpunpckhwd", "vpunpcklqdq", "vpunpckhqdq"):
            a, b = read(ops[1], ctx), read(ops[2], ctx)
            unit = 1 if op.endswith("wd") else 4  # lanes interleaved at a time
            off = 0 if op.startswith("vpunpckl") else 4
            res = []
            for base in (0, 8):
                for u in range(base + off, base + off + 4, unit):
                    res += a[u:u + unit] + b[u:u + unit]
        else:
            raise VerifyError(f"{kernel.symbol}: the verifier has no 16-bit lane semantics for {op}")
        if dst.bits == 128:  # a VEX.128 instruction zeroes the upper half
            res = res[:8] + [(0, 0)] * 8
        if in_idiom and ins.idiom.role == "end":
            res = _apply_lemma(kernel, idiom_instrs.pop(ins.idiom.group), idiom_inputs.pop(ins.idiom.group), tables, modulus)
            checked += 1
        regs[dst.number] = res
    outputs = {}
    for i, a in enumerate(kernel.args):
        if a.role == "in":
            continue
        elems = memory[i]
        if any(v is None for v in elems):
            missing = next(k for k, v in enumerate(elems) if v is None)
            raise VerifyError(f"{kernel.symbol}: output element {missing} of argument {a.name} is never written")
        outputs[i] = tuple(elems)
    return Proof(outputs, checked)


def _apply_lemma(kernel: Kernel, instrs: list[Instr], inputs: Lanes, tables, modulus: int) -> Lanes:
    """Rebuild the idiom in lane form from the allocated instructions and prove it."""
    names: dict[int, str] = {}
    first = instrs[0]
    src = first.operands[first.idiom.source]
    names[src.number] = "x"
    steps = []
    for k, ins in enumerate(instrs):
        srcs = []
        for op in ins.operands[1:]:
            if isinstance(op, Imm):
                srcs.append(op.value)
            elif isinstance(op, Mem) and isinstance(op.base, TableBase):
                vals = set(tables[op.base.label].values[op.offset // 2:op.offset // 2 + 16])
                if len(vals) != 1:
                    raise VerifyError(f"{kernel.symbol}: idiom {first.idiom.kind} uses a non-broadcast constant")
                srcs.append(vals.pop())
            elif isinstance(op, PhysReg) and op.number in names:
                srcs.append(names[op.number])
            else:
                raise VerifyError(f"{kernel.symbol}: idiom {first.idiom.kind} reads {op} from outside itself")
        name = f"v{k}"
        steps.append((ins.op, name, *srcs))
        names[ins.operands[0].number] = name
    idiom = ScalarIdiom(first.idiom.kind, modulus, tuple(steps))
    try:
        lemma = prove(idiom)
    except LemmaError as e:
        raise VerifyError(f"{kernel.symbol}: {e}") from None
    return [lemma.range_for(lo, hi) for lo, hi in inputs]
