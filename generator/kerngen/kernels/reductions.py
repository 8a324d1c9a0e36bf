"""The reduction and modular-multiplication idioms on 16-bit lanes, each in one place.

Every idiom is defined once in lane form (`ScalarIdiom`); `emit_idiom` turns
that definition into vector instructions, and `lemmas.prove` runs the same
definition on all inputs to find its exact output range. Constants are
broadcast tables named by type and value (pw_3329, pw_m3327).
"""

from __future__ import annotations

from ..isa.ir import Builder, IdiomTag, Mem, VReg
from ..lemmas import ScalarIdiom
from ..isa.ir import Imm
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
        elif op in ("vpsraw", "vpsrlw", "vpsllw"):
            src2 = s2
        else:
            src2 = broadcast_const(b, s2)
        operands = (src1, Imm(src2)) if isinstance(src2, int) else (src1, src2)
        env[dst] = b.op(op, *operands, idiom=IdiomTag(group, idiom.kind, role, 1),
                        comment=comment if i == 0 else "")
    return env[idiom.steps[-1][1]]


def montgomery_by_constant(b: Builder, x: VReg, w: Mem | VReg, w_qinv: Mem | VReg, q: Mem | VReg) -> VReg:
    """x*c*R^-1 mod q for a constant c given as (w, w') = (c*R, c*R*q^-1 mod 2^16):
    result = mulhi(x, w) - mulhi(mullo(x, w'), q), |result| <= |x|*|w|/2^16 + (q+1)/2."""
    t = b.op("vpmullw", x, w_qinv)
    hi = b.op("vpmulhw", x, w)
    tq = b.op("vpmulhw", t, q)
    return b.op("vpsubw", hi, tq)


def montgomery_product(b: Builder, x: VReg, y: VReg, y_qinv: VReg, q: Mem | VReg) -> VReg:
    """x*y*R^-1 mod q for two variables, y' = y*q^-1 mod 2^16 computed by the caller."""
    return montgomery_by_constant(b, x, y, y_qinv, q)


def montgomery_bound(x_abs: int, w_abs: int, q: int) -> int:
    """Upper bound of |montgomery_by_constant(x, w)| for |x| <= x_abs (see its docstring)."""
    return -(-x_abs * w_abs // 65536) + (q + 1) // 2


