"""The reduction and modular-multiplication idioms on 16-bit lanes, each in one place.

Every idiom is defined once in lane form (`ScalarIdiom`); `emit_idiom` turns
that definition into vector instructions, and `lemmas.prove` runs the same
definition on all inputs to find its exact output range. Constants are
broadcast tables named by type and value (pw_3329, pw_m3327).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..isa.ir import Builder, IdiomTag, Imm, Mem, VReg
from ..lemmas import LemmaError, ScalarIdiom, prove
from ..numtheory import barrett_constant


def const_label(value: int) -> str:
    return f"pw_{value}" if value >= 0 else f"pw_m{-value}"


def broadcast_const(b: Builder, value: int) -> Mem:
    """A 32-byte table holding `value` in all 16 lanes, as a memory operand."""
    return Mem(b.table(const_label(value), 2, [value] * 16), 0, 32)


def barrett_idiom(q: int) -> ScalarIdiom:
    """Centred Barrett: t = round(x*v / 2^(16+s)) as (mulhi(x, v) + 2^(s-1)) >> s,
    then x - t*q, about [-(q-1)/2, (q-1)/2] (the lemma gives the exact range).
    Rounding by add and shift keeps the idiom at two multiplications: the NTTs
    are bound by the multiplier ports, not by the simple-integer ones."""
    c = barrett_constant(q)
    return ScalarIdiom("barrett", q, (
        ("vpmulhw", "t", "x", c.v),
        ("vpaddw", "t", "t", 1 << (c.shift - 1)),
        ("vpsraw", "t", "t", c.shift),
        ("vpmullw", "t", "t", q),
        ("vpsubw", "r", "x", "t"),
    ))


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


def special_form_candidates(q: int, max_terms: int = 3) -> list[ScalarIdiom]:
    """Reductions by shifts and adds for q of sparse signed-binary shape.

    Split x = h*2^a + l (h = x >> a arithmetic, l = x & (2^a - 1)); since
    2^a = sum of s_i 2^(e_i) mod q with few terms (7681: 2^13 = 2^9 - 1), x is
    congruent to l + sum of s_i (h << e_i): no multiplication at all. Every
    split a whose residue 2^a mod q (or 2^a mod q - q) has at most `max_terms`
    signed digits is a candidate; `lemmas.prove` rejects any that can wrap.
    """
    out = []
    for a in range(2, 15):
        r = pow(2, a, q)
        for residue in (r, r - q):
            digits = signed_digits(residue)
            if not digits or len(digits) > max_terms or max(e for _, e in digits) >= a:
                continue
            steps = [("vpsraw", "h", "x", a), ("vpand", "l", "x", (1 << a) - 1)]
            acc = "l"
            for k, (sign, e) in enumerate(digits):
                term = "h"
                if e:
                    steps.append(("vpsllw", f"t{k}", "h", e))
                    term = f"t{k}"
                steps.append(("vpaddw" if sign > 0 else "vpsubw", f"r{k}", acc, term))
                acc = f"r{k}"
            out.append(ScalarIdiom("special", q, tuple(steps)))
    return out


@dataclass(frozen=True)
class Reducer:
    """A reduction kind usable by the NTT schedules, with its proven facts."""

    kind: str  # "barrett" or "special"
    idiom: ScalarIdiom
    out_abs: int  # largest |output| over all int16 inputs
    multiplications: int
    instructions: int


def reducers(q: int) -> dict[str, Reducer]:
    """The reductions that apply to q; "special" only if q has a shape that gives
    a real reduction (output below 2^14 in absolute value for every int16 input)."""
    found = {"barrett": _reducer("barrett", barrett_idiom(q))}
    best = None
    for idiom in special_form_candidates(q):
        if not _passes_sample(idiom):
            continue  # cheap screen; only survivors get the exhaustive proof
        try:
            r = _reducer("special", idiom)
        except LemmaError:
            continue
        if r.out_abs < 1 << 14 and (best is None or (r.out_abs, r.instructions) < (best.out_abs, best.instructions)):
            best = r
    if best is not None:
        found["special"] = best
    return found


_SAMPLE = tuple(sorted({-32768, 32767, -1, 0, 1} | {sign * (1 << k) + d for k in range(15)
                                                     for sign in (1, -1) for d in (-1, 0, 1)}))


def _passes_sample(idiom: ScalarIdiom) -> bool:
    """Congruent and below 2^14 on the inputs where wrap-around and extremes show first."""
    for x in _SAMPLE:
        if not -32768 <= x <= 32767:
            continue
        y = idiom.run(x)
        if (y - x) % idiom.q or abs(y) >= 1 << 14:
            return False
    return True


def _reducer(kind: str, idiom: ScalarIdiom) -> Reducer:
    lemma = prove(idiom)
    lo, hi = min(lemma.outputs), max(lemma.outputs)
    muls = sum(1 for op, *_ in idiom.steps if op.startswith("vpmul"))
    return Reducer(kind, idiom, max(-lo, hi), muls, len(idiom.steps))


def emit_idiom(b: Builder, idiom: ScalarIdiom, x: VReg, comment: str = "") -> VReg:
    """Emit an idiom on vector `x`; its instructions are tagged for the verifier."""
    group = b.new_group()
    env: dict[str, VReg] = {"x": x}
    last = len(idiom.steps) - 1
    for i, (op, dst, s1, s2) in enumerate(idiom.steps):
        role = "start" if i == 0 else "end" if i == last else "body"
        if last == 0:
            role = "start"
        src1 = env[s1] if isinstance(s1, str) else b.op("load", broadcast_const(b, s1))
        if isinstance(s2, str):
            src2 = env[s2]
        elif op in ("vpsraw", "vpsrlw", "vpsllw"):  # shift counts are immediates
            src2 = s2
        else:
            src2 = broadcast_const(b, s2)
        operands = (src1, Imm(src2)) if isinstance(src2, int) else (src1, src2)
        env[dst] = b.op(op, *operands, idiom=IdiomTag(group, idiom.kind, role, 1),
                        comment=comment if i == 0 else "")
    return env[idiom.steps[-1][1]]


def montgomery_by_constant(b: Builder, x: VReg, w: Mem | VReg, w_qinv: Mem | VReg, q: Mem | VReg) -> VReg:
    """x*c*R^-1 mod q for a constant c given as (w, w') = (c*R, c*R*q^-1 mod 2^16):
    result = mulhi(x, w) - mulhi(mullo(x, w'), q), |result| <= |x|*|w|/2^16 + (q+1)/2.
    A variable w works the same way (x*w*R^-1), with w' = mullo(w, q^-1) computed first."""
    t = b.op("vpmullw", x, w_qinv)
    hi = b.op("vpmulhw", x, w)
    tq = b.op("vpmulhw", t, q)
    return b.op("vpsubw", hi, tq)


def montgomery_bound(x_abs: int, w_abs: int, q: int) -> int:
    """Upper bound of |montgomery_by_constant(x, w)| for |x| <= x_abs (see its docstring)."""
    return -(-x_abs * w_abs // 65536) + (q + 1) // 2


