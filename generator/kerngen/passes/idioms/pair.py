"""The check of a pair reduction (tag kind "pair_montgomery"): two sums of
vpmaddwd products reduced from their interleaved halves by one Montgomery
reduction, each lane proven by the pair Montgomery lemma."""

from __future__ import annotations

from ...errors import VerifyError
from ...machine.ops import spec, wrap
from ..lemmas import LemmaError, prove_pair_montgomery
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView

PAIR = "pair_montgomery"  # the tag kind of a pair reduction: sums of vpmaddwd products, reduced from their halves


def check(mc: MachineView, group: Group) -> Checked:
    """r = hi - mulhi(mullo(lo, q^-1), q), where lo and hi interleave the
    halves of two sums of vpmaddwd products: lo = blend(X0, X1 << bits),
    hi = blend(X0 >> bits, X1) (odd lanes from the second source). Then
    lane 2m of r is X0's unit m times 2^-bits mod q and lane 2m+1 is X1's
    (the pair Montgomery lemma), each unit's X the sum over its terms of
    a[2m]*b[2m] + a[2m+1]*b[2m+1]; its interval comes from theirs."""
    index, ins, result = group.index, group.instr, group.result
    bits, q = mc.bits, mc.modulus

    def bad(why: str):
        mc.fail(index, ins, f"ends a pair reduction that {why}")

    if not mc.signed:
        bad(f"runs on {mc.lane_type} lanes (it is signed)")

    def made(v: Value, generic: str, width: int, amount: int | None = None) -> list[Value]:
        got = mc.made(v.vid)
        if got is None or got.generic != generic or (got.elem or bits) != width or \
                (amount is not None and got.imm != amount):
            bad(f"does not compute {generic} on {width}-bit units{'' if amount is None else f' by {amount}'} "
                f"where it should (found {got})")
        return list(got.sources)

    def interleaved(v: Value) -> list[Value]:
        """The sources of a blend taking even lanes from the first and odd ones from the second (its
        immediate is the row's: a bit per unit of eight, or of the register)."""
        sources = made(v, "blend", bits)
        got = mc.made(v.vid)
        if spec(got.op).move.route(active, (active, active), got.imm, bits) != tuple((k % 2, k) for k in range(active)):
            bad(f"does not take odd lanes from its second source where it should (found {got})")
        return sources

    def constant(vs: list[Value], want: int) -> Value:
        others = [v for v in vs if v.constant is None or set(v.constant[:active]) != {wrap(want, bits)}]
        if len(others) != 1:
            bad(f"does not use the constant {want} where it should")
        return others[0]

    active = ins.operands[0].bits // bits
    h, u = made(result, "sub", bits)
    t = constant(made(u, "mulhi", bits), q)
    lo = constant(made(t, "mullo", bits), pow(q, -1, 1 << bits))
    x0, shifted = interleaved(lo)
    [x1] = made(shifted, "sll", 2 * bits, bits)
    high, x1_again = interleaved(h)
    [x0_again] = made(high, "srl", 2 * bits, bits)
    if x0.vid != x0_again.vid or x1.vid != x1_again.vid:
        bad("does not take both halves from the same two sums")

    def terms(x: Value) -> list[tuple[Value, Value]]:
        got = mc.made(x.vid)
        if got is not None and got.generic == "madd":
            return [got.sources]
        return [term for src in made(x, "add", 2 * bits) for term in terms(src)]

    limit = 1 << (2 * bits - 1)
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    for parity, x in ((0, x0), (1, x1)):
        parts = terms(x)
        for a, b in parts:
            form = union(form, product(a.form, b.form))
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
        raise VerifyError(f"{mc.symbol}: {e}") from None
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form))


CHECK = IdiomCheck((PAIR,), check, product=True, lanes_at_end=True)
