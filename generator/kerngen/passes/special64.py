"""Modular arithmetic on 64-bit lanes for primes of the form q = 2^64 - 2^b + 1.

Such a q (Goldilocks, 2^64 - 2^32 + 1; 2^64 - 2^40 + 1) leaves no room in
the lane for lazy values: every lane value stays canonical, in [0, q), and
the wrap of a 64-bit sum is the reduction itself, since 2^64 = e mod q for
e = 2^b - 1 (`special_form` finds b from q). Three templates, as data:

- `MUL`: x*w mod q for any x, w. The 128-bit product H*2^64 + L (two
  products) is folded while H can exceed 1: H*2^64 + L = H*e + L, whose own
  high half is hi(H*e) plus the carry out of lo(H*e) + L (a fold whose
  product fits 64 bits leaves only that carry); then the carry c (0 or 1)
  once more, c*2^64 + s = s + c*e, which cannot carry again (where c is
  set, s < top*e for the last H's bound top, and (top + 1)*e <= 2^64 for
  every b up to MAX_B); then a conditional subtraction of q. Where 64-bit
  products are not one instruction (vector lanes), H*e is H*2^b - H from
  shifts.
- `ADD`: a + b, e added where the sum carried out, then a conditional subtraction of q;
  with opmasks, a + b - q (= a + b + e) where it is below a, else a + b.
- `SUB`: a - b, e subtracted where it borrowed (2^64 - e = q).

A carry is an unsigned comparison into a mask (a subtraction with borrow on
general registers; on AVX2's lanes a signed comparison of the values with
their sign bits flipped, all ones where it holds; on AVX-512 a comparison
into an opmask, one bit a lane), a correction where it is set the mask
and-ed with the constant and added, or one addition under the opmask, and
the conditional subtraction is an unsigned minimum where the ISA has one,
else q masked by that comparison. Builders
emit a template (`emit`), products through `wide.Product` (one instruction
each on general registers, templates of 32-bit pieces on vector lanes), the
verifier finds it in a lane's term (`match`), and `prove` shows, by an SMT
solver over the integers (each wrapping step a division with remainder, each
product by a constant linear, each fold an exact identity proven before the
next is asked about), that it computes its operation mod q, canonical, for
every input (any H and L, or a and b in [0, q)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.compile_cache import memo
from ..ir.instr import Builder, Imm, Mem, VReg
from ..machine.isa import ISAS, Isa
from ..machine.ops import by_width, spec
from . import smt, wide
from .lemmas import SMT_TIMEOUT_MS, LemmaError

BITS = 64
LANE = 1 << BITS
SIGN = 1 << (BITS - 1)
MAX_B = 40  # 2^64 - 2^b + 1 with b at most this: H folded at most twice, each template proven in seconds
MUL, ADD, SUB = "special_mul", "special_add", "special_sub"  # the tag kinds
KINDS = (MUL, ADD, SUB)

Step = tuple  # (op, dst, *sources): sources in the row's order, names or constants (shift counts: immediates)


class SpecialFormError(LemmaError):
    pass


def special_form(q: int, bits: int = BITS) -> int | None:
    """b where q = 2^bits - 2^b + 1 with 1 <= b <= MAX_B (the fold's e = 2^b - 1), else None."""
    e = (1 << bits) - q
    b = (e + 1).bit_length() - 1
    return b if 1 <= b <= MAX_B and e == (1 << b) - 1 else None


@dataclass(frozen=True)
class Lowering:
    """How an ISA does the templates' unsigned comparison and minimum, and their products by e."""

    unsigned_compare: bool  # one instruction (else the signs flipped, then a signed comparison)
    unsigned_min: bool  # one instruction (else q masked by a comparison)
    # 64-bit products one instruction each (else H*e = H*2^b - H by shifts: products from pieces cost more)
    native_products: bool = True
    # comparisons into opmasks, and additions under them (AVX-512): a correction where a carry is set is
    # one merge-masked addition (else the comparison's all-ones lanes, and-ed with the constant and added)
    masks: bool = False

    @classmethod
    def of(cls, isa: Isa, bits: int = BITS) -> Lowering:
        """What `isa` has of these on `bits`-bit lanes."""
        return cls(isa.has("cmpgtu", bits), isa.has("minu", bits), isa.has("mullo", bits) and isa.has("mulhu", bits),
                   isa.has("cmpgtu_mask", bits) and isa.has("add_merge", bits))


@dataclass(frozen=True)
class Template:
    kind: str
    q: int
    inputs: tuple[str, str]
    steps: tuple[Step, ...]  # (op, dst, a, b): ints are constants (shift counts: immediates)
    # the multiple of q taken off before the last conditional subtraction, as signed summands: each
    # folded H (H*2^64 = H*q + H*e), each carry (a mask: 1 where set), each borrow (added back)
    quotient: tuple[tuple[int, str], ...] = ()
    # the folds, each proven before the next is asked about: (hi', lo', hi, lo) for hi'*2^64 + lo' =
    # hi*e + lo exactly (a mask read as its bit, None as 0)
    folds: tuple[tuple[str | None, str, str, str | None], ...] = ()

    @property
    def result(self) -> str:
        return self.steps[-1][1]


def _less(lw: Lowering, dst: str, a: str | int, b: str | int) -> tuple[Step, ...]:
    """dst = all ones where a < b unsigned (an opmask's bit, with masks)."""
    if lw.masks:
        return (("cmpgtu_mask", dst, b, a),)
    if lw.unsigned_compare:
        return (("cmpgtu", dst, b, a),)
    flip = [(v ^ SIGN, ()) if isinstance(v, int) else (f"{dst}_{v}", (("xor", f"{dst}_{v}", v, SIGN),))
            for v in (b, a)]
    return flip[0][1] + flip[1][1] + (("cmpgt", dst, flip[0][0], flip[1][0]),)


def canonical(lw: Lowering, q: int, dst: str = "r", s: str = "x") -> tuple[Step, ...]:
    """dst = s - q where s >= q, else s, for any lane value s (s - q wraps exactly where s < q)."""
    if lw.unsigned_min:
        return (("sub", f"{dst}_d", s, q), ("minu", dst, s, f"{dst}_d"))
    return (("sub", f"{dst}_d", s, q), *_less(lw, f"{dst}_m", s, q), *_add_where(lw, dst, f"{dst}_d", f"{dst}_m", q))


def _add_where(lw: Lowering, dst: str, s: str, c: str, value: int) -> tuple[Step, ...]:
    """dst = s + value where the mask c (of `_less`) is set, else s (wrapping). An all-ones mask is
    2^64 - 1 itself: value 2^64 - 1 adds it, value 1 subtracts it."""
    if lw.masks:
        return (("add_merge", dst, s, c, s, value),)
    if value in (LANE - 1, 1):
        return (("add" if value > 1 else "sub", dst, s, c),)
    return (("and", f"{dst}_k", c, value), ("add", dst, s, f"{dst}_k"))


def _times_e(lw: Lowering, k: int, h: str, b: int, high: bool) -> tuple[Step, ...]:
    """p{k} = lo(h*e) and, if `high`, g{k} = hi(h*e), for e = 2^b - 1: products, or h*2^b - h from
    shifts, its high half h >> (64 - b) less the borrow of the low half's subtraction."""
    e = (1 << b) - 1
    if lw.native_products:
        return (("mullo", f"p{k}", h, e), *((("mulhu", f"g{k}", h, e),) if high else ()))
    low = (("sll", f"t{k}", h, b), ("sub", f"p{k}", f"t{k}", h))
    return low + ((("srl", f"u{k}", h, BITS - b), *_less(lw, f"v{k}", f"t{k}", h),
                   *_add_where(lw, f"g{k}", f"u{k}", f"v{k}", LANE - 1)) if high else ())


@memo(maxsize=64)
def templates(q: int, lw: Lowering) -> dict[str, Template]:
    b = special_form(q)
    if b is None:
        raise SpecialFormError(f"q = {q} is not of the form 2^64 - 2^b + 1 with 1 <= b <= {MAX_B}")
    e = (1 << b) - 1
    steps: list[Step] = [("mulhu", "h0", "x", "w"), ("mullo", "l0", "x", "w")]
    h, low, top, k, folded, folds = "h0", "l0", LANE - 1, 0, ["h0"], []
    while True:  # H*2^64 + L = H*e + L: fold until H*e fits the lane
        k += 1
        full = top * e >= LANE  # else H*e fits the lane: the fold leaves only a carry
        steps += [*_times_e(lw, k, h, b, full), ("add", f"l{k}", low, f"p{k}"), *_less(lw, f"c{k}", f"l{k}", f"p{k}")]
        folds.append((f"g{k}" if full else None, f"p{k}", h, None))  # the product by e, proven first
        if not full:
            folds.append((f"c{k}", f"l{k}", h, low))
            low = f"l{k}"
            break
        steps += _add_where(lw, f"h{k}", f"g{k}", f"c{k}", 1)  # the carry added
        folds.append((f"h{k}", f"l{k}", h, low))
        h, low, top = f"h{k}", f"l{k}", (top * e + LANE - 1) >> BITS
        folded.append(h)
    carry = f"c{k}"
    steps += [*_add_where(lw, "s", low, carry, e), *canonical(lw, q, "r", "s")]
    folds.append((None, "s", carry, low))
    mul = Template(MUL, q, ("x", "w"), tuple(steps), tuple((1, v) for v in (*folded, carry)), tuple(folds))
    if lw.masks:  # a + b - q (its sum with e, wrapping) is below a exactly where a + b >= q
        add_steps = (("add", "s", "a", "b"), ("add", "t", "s", e), *_less(lw, "c", "t", "a"),
                     *_add_where(lw, "r", "s", "c", e))
        sub_steps = (("sub", "d", "a", "b"), *_less(lw, "m", "a", "b"), *_add_where(lw, "r", "d", "m", q))
    else:
        add_steps = (("add", "s", "a", "b"), *_less(lw, "c", "s", "a"), *_add_where(lw, "t", "s", "c", e),
                     *canonical(lw, q, "r", "t"))
        sub_steps = (("sub", "d", "a", "b"), *_less(lw, "m", "a", "b"), ("and", "k", "m", e), ("sub", "r", "d", "k"))
    add = Template(ADD, q, ("a", "b"), add_steps, ((1, "c"),))
    sub = Template(SUB, q, ("a", "b"), sub_steps, ((-1, "m"),))
    return {t.kind: t for t in (mul, add, sub)}


# the lowerings kernels are built in: those of the ISAs (the verifier matches a group against each)
LOWERINGS = tuple(dict.fromkeys(Lowering.of(isa) for isa in ISAS.values()))


# -- emission


def emit(b: Builder, template: Template, a, c, const: Callable[[int], Mem], native: bool, group: int,
         comment: str = "", c_high: Mem | None = None) -> VReg:
    """The template on a and c (registers, or memory for the second), tagged as one group of its kind;
    products one instruction each where `native`, else from 32-bit pieces (`c_high`: c >> 32 from a
    table, else computed where a product needs it)."""
    p = wide.Product(b, group, template.kind, const, {t.name for t in wide.TEMPLATES} if native else ())
    env = dict(zip(template.inputs, (a, c)))
    last = len(template.steps) - 1
    notes = iter((comment,))

    def value(v, register: bool = False):
        """A source: a constant is a memory operand unless it must be a `register` (a first source,
        or a masked row's: a masked row reads no memory, `ops._masked_row`)."""
        if isinstance(v, str):
            return env[v]
        return b.op("load", const(v)) if register else const(v)

    for i, (op, dst, x, *rest) in enumerate(template.steps):
        if op in ("mulhu", "mullo"):
            y = rest[0]
            prod = wide.HIGH if op == "mulhu" else wide.LOW
            high = p.high_half(prod, y) if isinstance(y, int) else c_high if y == template.inputs[1] else None
            env[dst] = p.emit(prod, value(x), value(y), high, next(notes, ""))
            continue
        name = by_width(op, BITS)
        if wide.in_place(name) and (x in template.inputs or any(x in later[2:] for later in template.steps[i + 1:])):
            raise SpecialFormError(f"{template.kind} mod {template.q}: {op} writes {x} in place, which is read again")
        masked = spec(name).masking is not None
        sources = (value(x, register=True), *(Imm(v) if op in ("srl", "sll") else value(v, register=masked)
                                              for v in rest))
        env[dst] = p.end(name, *sources) if i == last else p.op(name, *sources, notes=notes)
    return env[template.result]


# -- recognition in the verifier's lane terms (`wide.recognise`'s): ("leaf", value, lane) or (op, term, ...)


def expand(template: Template, x: tuple, y: tuple) -> tuple:
    """The template's result as a term over the leaves x and y."""
    env = dict(zip(template.inputs, (x, y)))
    for op, dst, *sources in template.steps:
        env[dst] = (op, *(env[v] if isinstance(v, str) else ("imm", v) if op in ("srl", "sll") else ("const", v)
                          for v in sources))
    return env[template.result]


def match(template: Template, term: tuple, constant: Callable[[tuple], tuple[int, ...] | None]
          ) -> tuple[tuple, tuple] | None:
    """The leaves (x, y) the template computes `term` of, if it does: tried among the operand pairs of
    the subterms doing its first step."""
    first = template.steps[0][0]
    found, stack, seen = set(), [term], set()
    while stack:
        t = stack.pop()
        if t[0] in ("leaf", "imm", "const") or id(t) in seen:
            continue
        seen.add(id(t))
        if t[0] == first and t[1][0] == "leaf" and t[2][0] == "leaf":
            found.update({(t[1], t[2]), (t[2], t[1])})
        stack.extend(t[1:])
    return next((xy for xy in found if wide.same_term(term, expand(template, *xy), constant)), None)


# -- the proof


@memo(maxsize=1)
def _prove_flipped_comparison() -> None:
    """For all 64-bit a, b: a > b unsigned exactly where (a ^ 2^63) > (b ^ 2^63) signed."""
    import z3

    a, b = z3.BitVecs("a b", BITS)
    solver = z3.Solver()
    solver.add(z3.UGT(a, b) != (a ^ SIGN > b ^ SIGN))
    if smt.check(solver) != z3.unsat:
        raise SpecialFormError("the comparison of values with their signs flipped is not the unsigned one")


@memo(maxsize=256)
def prove(template: Template) -> None:
    """MUL: for every H, L in [0, 2^64) the steps after the product leave (H*2^64 + L) mod q; ADD, SUB:
    for every a, b in [0, q), (a +/- b) mod q. Raises SpecialFormError otherwise. The result r is shown
    in [0, q) and equal to the operation's value V less K*q or (K + 1)*q, K the template's `quotient`:
    an identity of integers, linear, where a remainder by q would leave the solver a search over K."""
    import z3

    solver = z3.Solver()
    solver.set("timeout", SMT_TIMEOUT_MS)
    fresh = iter(range(1 << 30))

    def var(lo: int, hi: int):
        v = z3.Int(f"s{next(fresh)}")
        solver.add(v >= lo, v <= hi)
        return v

    def wrapped(value):
        out, k = var(0, LANE - 1), z3.Int(f"k{next(fresh)}")
        solver.add(out == value - k * LANE)
        return out, k

    def signed(v):
        read, k = var(-SIGN, SIGN - 1), var(0, 1)
        solver.add(read == v - k * LANE)
        return read

    q, masks, flipped = template.q, set(), {}
    steps = template.steps
    if template.kind == MUL:
        if [s[:2] for s in steps[:2]] != [("mulhu", "h0"), ("mullo", "l0")] or \
                {tuple(sorted(s[2:])) for s in steps[:2]} != {("w", "x")}:
            raise SpecialFormError(f"{template.kind} mod {q}: does not start with the product x*w")
        h, low = var(0, LANE - 1), var(0, LANE - 1)
        env, steps, want = {"h0": h, "l0": low}, steps[2:], h * LANE + low
    else:
        a, b = var(0, q - 1), var(0, q - 1)
        env, want = {"a": a, "b": b}, (a + b if template.kind == ADD else a - b)
    for op, dst, *sources in steps:
        if op == "add_merge":  # where the mask is set, the sum (wrapping); else the old value
            old, mask, *sources = sources
        x, y = sources
        vx, vy = (env[v] if isinstance(v, str) else z3.IntVal(v) for v in (x, y))
        if op in ("add", "sub", "add_merge"):
            out, k = wrapped(vx - vy if op == "sub" else vx + vy)
            solver.add(z3.Or(k == 0, k == (-1 if op == "sub" else 1)))
            if op == "add_merge" and mask in masks:
                out = z3.If(env[mask] == 0, env[old], out)
            elif op == "add_merge":
                raise SpecialFormError(f"{template.kind} mod {q}: {dst} is added under {mask}, which is no mask")
        elif op in ("mullo", "mulhu") and isinstance(y, int):
            high, low_half = var(0, LANE - 1), var(0, LANE - 1)
            solver.add(vx * y == high * LANE + low_half)
            out = high if op == "mulhu" else low_half
        elif op == "sll" and isinstance(y, int):
            out, above = var(0, LANE - 1), var(0, (1 << y) - 1)
            solver.add(vx * (1 << y) == above * LANE + out)
        elif op == "srl" and isinstance(y, int):
            out, below = var(0, (LANE >> y) - 1), var(0, (1 << y) - 1)
            solver.add(vx == out * (1 << y) + below)
        elif op == "cmpgtu":
            out = z3.If(vx > vy, LANE - 1, 0)
        elif op == "cmpgtu_mask":  # an opmask's bit
            out = z3.If(vx > vy, 1, 0)
        elif op == "cmpgt" and all(isinstance(v, int) or v in flipped for v in (x, y)):
            _prove_flipped_comparison()  # of values with their signs flipped: the unsigned comparison
            ux, uy = (z3.IntVal(v ^ SIGN) if isinstance(v, int) else flipped[v] for v in (x, y))
            out = z3.If(ux > uy, LANE - 1, 0)
        elif op == "cmpgt":  # signed: values of SIGN and above are negative (read less 2^64)
            out = z3.If(signed(vx) > signed(vy), LANE - 1, 0)
        elif op == "xor" and y == SIGN:  # the sign bit flipped: SIGN added, wrapping
            out, k = wrapped(vx + SIGN)
            solver.add(z3.Or(k == 0, k == 1))
            flipped[dst] = vx
        elif op == "and" and isinstance(y, int) and x in masks:
            out = z3.If(vx == 0, 0, y)
        elif op == "minu":
            out = z3.If(vx <= vy, vx, vy)
        else:
            raise SpecialFormError(f"{template.kind} mod {q}: no proof rule for {op} of {x} and {y}")
        if op in ("cmpgtu", "cmpgt", "cmpgtu_mask"):
            masks.add(dst)
        env[dst] = out
    r = env[template.result]
    bit = lambda v: 0 if v is None else z3.If(env[v] == 0, 0, 1) if v in masks else env[v]  # noqa: E731
    for new_hi, new_lo, old_hi, old_lo in template.folds:
        claim = bit(new_hi) * LANE + bit(new_lo) == bit(old_hi) * (LANE - q) + bit(old_lo)
        solver.push()
        solver.add(z3.Not(claim))
        if smt.check(solver) != z3.unsat:
            raise SpecialFormError(f"{template.kind} mod {q} on 64-bit lanes: the fold into {new_lo} is not "
                                   "proven")
        solver.pop()
        solver.add(claim)
    taken = z3.Sum([sign * bit(v) for sign, v in template.quotient]) if template.quotient else 0
    solver.add(z3.Or(r < 0, r >= q, z3.And(r != want - taken * q, r != want - (taken + 1) * q)))
    verdict = smt.check(solver)
    if verdict != z3.unsat:
        why = "not proven within the time limit" if verdict == z3.unknown else "fails"
        raise SpecialFormError(f"{template.kind} mod {q} on 64-bit lanes: {why}")
