"""The reductions of the NTT family, each defined in one place.

Every reduction is an idiom in lane form (`ScalarIdiom`, written in the
instruction table's width-neutral names); `emit_idiom` turns that
definition into instructions, and `lemmas.prove` runs the same definition
on every input to find its exact output range and check its congruence.
Constants are broadcast tables named by element type and value (pw_3329,
pw_m3327 for 16-bit lanes).

The searches for a q's reductions (`reducers`, `shifted_barrett_idiom`,
`barrett_reducer`) are pure functions of (q, bits), asked by validation, the
design and every build: registered memos (`core.compile_cache.memo`), bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.compile_cache import memo
from ...ir.instr import Builder, IdiomTag, Imm, Mem, VReg
from ...machine.ops import by_width, has, spec
from ...passes.lemmas import EXHAUSTIVE_BITS, LemmaError, ScalarIdiom, prove

CONST_PREFIX = {16: "pw", 32: "pd", 64: "pq"}
SHARED_CONST_BITS = 256  # the least a broadcast constant fills (`broadcast_const`)
SMT_CANDIDATES = 3  # special forms proven on lanes too wide to run (one its shape does not settle: solver seconds)


def const_label(value: int, bits: int) -> str:
    p = CONST_PREFIX[bits]
    return f"{p}_{value}" if value >= 0 else f"{p}_m{-value}"


def broadcast_const(b: Builder, value: int, bits: int) -> Mem:
    """A table holding `value` in every `bits`-bit lane of the vectors the builder writes, and of at least
    256 bits (what the AVX2 kernels read; SSE and scalar kernels, and builders of narrower vectors, share the
    table and read its start), as a memory operand (kernels of several ISAs share it: `render` keeps the
    longest)."""
    size = max(b.vector_bits, SHARED_CONST_BITS) // 8
    t = b.table(const_label(value, bits), bits // 8, [value] * (8 * size // bits))
    return Mem(t, 0, size)


@dataclass(frozen=True)
class BarrettConstant:
    """t = round(a*v / 2^(bits+shift)), a - t*q a centred representative;
    v = round(2^(bits+shift)/q) < 2^(bits-1) with the largest such shift."""

    v: int
    shift: int


def barrett_constant(q: int, bits: int) -> BarrettConstant:
    shift = 0
    while round((1 << (bits + shift + 1)) / q) < (1 << (bits - 1)) and shift < bits - 2:
        shift += 1
    return BarrettConstant(round((1 << (bits + shift)) / q), shift)


def barrett_idiom(q: int, bits: int) -> ScalarIdiom:
    """Centred Barrett: t = round(x*v / 2^(bits+s)) as (mulhi(x, v) + 2^(s-1)) >> s,
    then x - t*q, about [-(q-1)/2, (q-1)/2] (the lemma gives the exact range).
    Rounding by add and shift keeps the idiom at two multiplications: the NTTs
    are bound by the multiplier ports, not by the simple-integer ones. Lanes
    without a high-half multiplication (32 bits) take the quotient from low
    products instead (`shifted_barrett_idiom`)."""
    if not has("mulhi", bits):
        return shifted_barrett_idiom(q, bits)
    c = barrett_constant(q, bits)
    return ScalarIdiom("barrett", q, (
        ("mulhi", "t", "x", c.v),
        ("add", "t", "t", 1 << (c.shift - 1)),
        ("sra", "t", "t", c.shift),
        ("mullo", "t", "t", q),
        ("sub", "r", "x", "t"),
    ), bits)


@memo(maxsize=256)
def shifted_barrett_idiom(q: int, bits: int) -> ScalarIdiom:
    """Barrett from low products: t = round((x >> a) * v / 2^c) with v =
    round(2^(a+c) / q) small enough that (x >> a) * v stays in the lane,
    then x - t*q. Of the shifts a, c that allow it, the one whose quotient
    errs least over the lane's extremes (v = 1 is a rounding shift alone:
    8380417 = 2^23 - 2^13 + 1 gives t = round(x / 2^23))."""
    top = (1 << (bits - 1)) - 1
    best = None
    for a in range(bits - 1):
        for c in range(1, bits - 1):
            v = round((1 << (a + c)) / q)
            if v < 1 or (top >> a) * v > top - (1 << (c - 1)):
                continue
            steps, src = [], "x"
            if a:
                steps.append(("sra", "s", src, a))
                src = "s"
            if v != 1:
                steps.append(("mullo", "s", src, v))
                src = "s"
            idiom = ScalarIdiom("barrett", q, tuple(steps) + (
                ("add", "t", src, 1 << (c - 1)),
                ("sra", "t", "t", c),
                ("mullo", "t", "t", q),
                ("sub", "r", "x", "t"),
            ), bits)
            worst = _sample_worst(idiom)
            if best is None or (worst, len(idiom.steps)) < best[0]:
                best = ((worst, len(idiom.steps)), idiom)
    return best[1]


def freeze_idiom(q: int, bits: int) -> ScalarIdiom:
    """Any lane value to its canonical representative in [0, q), the shorter
    of two forms that the lemma proves (it gives the range; a form whose
    range is not [0, q) is not taken):

    - where the lane has a high-half multiplication: Barrett with a floor
      quotient, t = mulhi(x, v) >> s (no rounding add), whose r = x - t*q
      lies in [0, q] (q = 3329 on int16) or in [-q, q); then r - q (or
      r + q) and the unsigned minimum of the two: of r and r -/+ q, the one
      outside [0, q) is negative, a large unsigned value (six instructions,
      where the next form is eight);
    - centred Barrett, then q added where the result is negative (the sign,
      spread over the lane by an arithmetic shift, masks q)."""
    barrett = barrett_idiom(q, bits)
    centred = ScalarIdiom("freeze", q, barrett.steps + _plus_where_negative(barrett.steps[-1][1], q, bits), bits)
    if not (has("mulhi", bits) and has("minu", bits)):
        return centred
    floor_steps = tuple(step for step in barrett.steps if step[0] != "add")
    floor = ScalarIdiom("barrett", q, floor_steps, bits)
    lo, hi = prove(floor).range_for(*floor.lane)
    shift = "sub" if 0 <= lo and hi <= q else "add" if -q <= lo and hi < q else None
    if shift is None:
        return centred
    minimum = ScalarIdiom("freeze", q, floor_steps + ((shift, "u", "r", q), ("minu", "f", "r", "u")), bits)
    return minimum if prove(minimum).range_for(*minimum.lane) == (0, q - 1) else centred


def lift_idiom(q: int, bits: int) -> ScalarIdiom:
    """2q added where the lane is negative: (-2q, 2q) into [0, 2q), what a
    Shoup bundle's unsigned inverse NTT takes from base multiplication's
    signed Montgomery products (three instructions, where a freeze is nine on
    32-bit lanes). Congruent for every input: a negative lane takes 2q without
    wrapping. Where 2q leaves the signed lane (q above 2^(W-2)), q is added:
    (-q, q) into [0, q), the products' range for such q."""
    c = 2 * q if 2 * q < 1 << (bits - 1) else q
    return ScalarIdiom("lift", q, _plus_where_negative("x", c, bits), bits)


def _plus_where_negative(r: str, c: int, bits: int) -> tuple[tuple[str, str, str | int, str | int], ...]:
    """Steps adding c to r where r is negative: the sign, spread over the lane by an arithmetic shift, masks c."""
    return (("sra", "s", r, bits - 1), ("and", "m", "s", c), ("add", "f", r, "m"))


def signed_digits(value: int) -> tuple[tuple[int, int], ...]:
    """Non-adjacent form of `value`: (sign, exponent) pairs, fewest non-zero digits."""
    out, e = [], 0
    while value:
        if value & 1:
            digit = 2 - (value & 3)
            out.append((digit, e))
            value -= digit
        value >>= 1
        e += 1
    return tuple(out)


def special_form_candidates(q: int, bits: int, max_terms: int = 3) -> list[ScalarIdiom]:
    """Reductions by shifts and adds for q of sparse signed-binary shape.

    Split x = h*2^a + l (h = x >> a arithmetic, l = x & (2^a - 1)); since
    2^a = sum of s_i 2^(e_i) mod q with few terms (7681: 2^13 = 2^9 - 1), x is
    congruent to l + sum of s_i (h << e_i): no multiplication at all. Every
    split a whose residue 2^a mod q (or 2^a mod q - q) has at most `max_terms`
    signed digits is a candidate; `lemmas.prove` rejects any that can wrap.
    """
    out = []
    for a in range(2, bits - 1):
        r = pow(2, a, q)
        for residue in (r, r - q):
            digits = signed_digits(residue)
            if not digits or len(digits) > max_terms or max(e for _, e in digits) >= a:
                continue
            steps = [("sra", "h", "x", a), ("and", "l", "x", (1 << a) - 1)]
            acc = "l"
            for k, (sign, e) in enumerate(digits):
                term = "h"
                if e:
                    steps.append(("sll", f"t{k}", "h", e))
                    term = f"t{k}"
                steps.append(("add" if sign > 0 else "sub", f"r{k}", acc, term))
                acc = f"r{k}"
            out.append(ScalarIdiom("special", q, tuple(steps), bits))
    return out


@dataclass(frozen=True)
class Reducer:
    """A reduction kind usable by the NTT schedules, with its proven facts."""

    kind: str  # "barrett" or "special"
    idiom: ScalarIdiom
    out_abs: int  # largest |output| over all inputs
    multiplications: int
    instructions: int

    def choose(self, register_bound: int) -> Reducer:
        """The reduction for a register whose lanes reach `register_bound`: always this one."""
        return self

    def emit(self, b: Builder, x: VReg, comment: str) -> VReg:
        return emit_idiom(b, self.idiom, x, comment=comment)

    def reduced_bound(self, bound: int) -> int:
        """Largest |output| for inputs of |value| <= bound (from the lemma).
        Where ranges are the solver's (wide lanes), one call each, the bound is
        first rounded up to 7 significant bits: a wider input range gives a
        sound output bound, and the schedules ask about few distinct ones."""
        if self.idiom.bits > EXHAUSTIVE_BITS:
            step = 1 << max(0, bound.bit_length() - 7)
            bound = min(-(-bound // step) * step, self.idiom.lane[1])
        lo, hi = prove(self.idiom).range_for(-bound, bound)
        return max(-lo, hi)

    def describe(self) -> str:
        """The reduction in words, from the idiom's own steps."""
        if self.kind == "barrett":
            if not has("mulhi", self.idiom.bits):
                shift = next(c for op, dst, _, c in self.idiom.steps if op == "sra" and dst == "t")
                return f"centred Barrett with the quotient from low products: t = round(x*v / 2^{shift})" \
                    if any(op == "mullo" and dst == "s" for op, dst, *_ in self.idiom.steps) else \
                    f"centred rounding shift: t = round(x / 2^{shift}), x - t*q"
            return "centred Barrett, two multiplications"
        if self.kind == "freeze":
            if any(op == "minu" for op, *_ in self.idiom.steps):
                return "Barrett with a floor quotient, then the unsigned minimum of r and r -/+ q"
            return "centred Barrett, then q added where negative"
        steps = self.idiom.steps
        split = next(s for s in steps if s[0] == "sra")[3]
        terms = []
        for op, _dst, a, b in steps:
            if op in ("add", "sub"):
                term = b if isinstance(b, str) else a
                shift = next((s[3] for s in steps if s[1] == term and s[0] == "sll"), 0)
                terms.append(("+ " if op == "add" else "- ") + (f"(h << {shift})" if shift else "h"))
        return f"shifts, masks and adds: x = h*2^{split} + l, x = l {' '.join(terms)} mod q"


@memo(maxsize=256)
def reducers(q: int, bits: int) -> dict[str, Reducer]:
    """The reductions that apply to q; "special" only if q has a shape that gives
    a real reduction (output below 2^(bits-2) in absolute value for every input)."""
    found = {"barrett": barrett_reducer(q, bits)}
    best = None
    # a cheap screen; only survivors get the full proof (where proofs are SMT's, the first few: fewest terms)
    survivors = [i for i in special_form_candidates(q, bits) if _passes_sample(i)]
    for idiom in survivors[:None if bits <= EXHAUSTIVE_BITS else SMT_CANDIDATES]:
        try:
            r = _reducer("special", idiom)
        except LemmaError:
            continue
        if r.out_abs < 1 << (bits - 2) and (best is None or (r.out_abs, r.instructions) < (best.out_abs, best.instructions)):
            best = r
    if best is not None:
        found["special"] = best
    return found


@memo(maxsize=256)
def barrett_reducer(q: int, bits: int) -> Reducer:
    """Centred Barrett as a Reducer, with no search for special forms (what validation asks of it)."""
    return _reducer("barrett", barrett_idiom(q, bits))


def freezer(q: int, bits: int) -> Reducer:
    """The reduction to [0, q), as a Reducer (for the freeze kernel, not for schedules)."""
    return _reducer("freeze", freeze_idiom(q, bits))


def lifter(q: int, bits: int) -> Reducer:
    """`lift_idiom` as a Reducer (a final step of base multiplication in Shoup bundles)."""
    return _reducer("lift", lift_idiom(q, bits))


@memo(maxsize=8)
def _sample(bits: int) -> tuple[int, ...]:
    """The extremes, and the powers of two and their neighbours: where wrap-around shows first."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    near = {sign * (1 << k) + d for k in range(bits - 1) for sign in (1, -1) for d in (-1, 0, 1)}
    return tuple(sorted(x for x in {lo, hi, -1, 0, 1} | near if lo <= x <= hi))


def _sample_worst(idiom: ScalarIdiom) -> int:
    return int(np.abs(idiom.run(np.array(_sample(idiom.bits), dtype=np.int64))).max())


def _passes_sample(idiom: ScalarIdiom) -> bool:
    """Congruent and below 2^(bits-2) on the sample inputs."""
    for x in _sample(idiom.bits):
        y = idiom.run(x)
        if (y - x) % idiom.q or abs(y) >= 1 << (idiom.bits - 2):
            return False
    return True


def _reducer(kind: str, idiom: ScalarIdiom) -> Reducer:
    half = 1 << (idiom.bits - 1)
    lo, hi = prove(idiom).range_for(-half, half - 1)
    muls = sum(1 for op, *_ in idiom.steps if spec(by_width(op, idiom.bits)).cls == "mul")
    return Reducer(kind, idiom, max(-lo, hi), muls, len(idiom.steps))


def emit_idiom(b: Builder, idiom: ScalarIdiom, x: VReg, comment: str = "") -> VReg:
    """Emit an idiom on vector `x`; its instructions are tagged for the verifier."""
    group = b.new_group()
    env: dict[str, VReg] = {"x": x}
    last = len(idiom.steps) - 1
    for i, (op, dst, s1, s2) in enumerate(idiom.steps):
        name = by_width(op, idiom.bits)
        role = "start" if i == 0 else "end" if i == last else "body"
        if last == 0:
            role = "start"
        src1 = env[s1] if isinstance(s1, str) else b.op("load", broadcast_const(b, s1, idiom.bits))
        if isinstance(s2, str):
            src2 = env[s2]
        elif spec(name).slots[2].kind == "i":  # shift counts are immediates
            src2 = Imm(s2)
        else:
            src2 = broadcast_const(b, s2, idiom.bits)
        env[dst] = b.op(name, src1, src2, idiom=IdiomTag(group, idiom.kind, role, 1),
                        comment=comment if i == 0 else "")
    return env[idiom.steps[-1][1]]
