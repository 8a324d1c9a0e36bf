"""The check of a Montgomery reduction of a sum of products (tag kind
"montgomery_sum"): a group ending in hi(S) - hi(lo(lo(S)*q^-1)*q), with S a
double-width sum of widening products x*w of values made outside the group,
proven congruent to S/2^bits mod q by the Montgomery lemma over S's range
(the multiply-accumulates that reduce once, `Montgomery.multiply_sum`)."""

from __future__ import annotations

from ...errors import VerifyError
from ...machine.ops import wrap
from ..lemmas import LemmaError, prove_montgomery
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView
from .terms import leaf_constant, product_terms, show

MONTGOMERY_SUM = "montgomery_sum"  # the tag kind of a Montgomery reduction of a sum of products


def check(mc: MachineView, group: Group) -> Checked:
    """Every lane r of the result must be hi(S) - hi(lo(lo(S)*q^-1)*q) of
    one double-width sum S of widening products x*w (x, w lanes of values
    made outside the group), the same S in both halves, followed back lane
    by lane through its instructions, with q itself as the modulus and
    q^-1 mod 2^bits. S's interval is the sum of the products' (every
    corner of x's and w's), which must stay inside the signed double-width
    lane; the lemma over that range makes r = S/2^bits mod q, and r's
    interval is hi(S)'s less hi(t*q)'s over every t."""
    index, ins, result = group.index, group.instr, group.result

    def bad(why: str):
        mc.fail(index, ins, f"ends a Montgomery reduction of a sum that {why}")

    q, bits = mc.modulus, mc.bits
    if not mc.signed:
        bad(f"runs on {mc.lane_type} lanes (it is signed)")
    qinv = pow(q, -1, 1 << bits)
    half = 1 << (bits - 1)
    u_lo, u_hi = (-half * q) >> bits, ((half - 1) * q) >> bits  # hi(t*q) for any t
    active = ins.operands[0].bits // bits
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    sums = []
    for lane, term in enumerate(product_terms(mc, result, active, group.made_inside(), bad)):
        shape = f"computes lane {lane} as {show(term)}, not hi(S) - hi(lo(lo(S)*q^-1)*q)"
        if term[0] != "sub" or term[1][0] != "high" or term[2][0] != "mulhi":
            bad(shape)
        total = term[1][1]
        t, qv = sorted(term[2][1:], key=lambda x: x[0] != "mullo")
        if t[0] != "mullo" or qv[0] != "leaf":
            bad(shape)
        low, qi = sorted(t[1:], key=lambda x: x[0] != "low")
        if low[0] != "low" or low[1] is not total:
            bad(f"takes t in lane {lane} from another value than the sum it reduces")
        if qi[0] != "leaf" or (leaf_constant(qi) or 0) % (1 << bits) != qinv:
            bad("multiplies lo(S) by something other than q^-1")
        if leaf_constant(qv) != wrap(q, bits):
            bad(f"does not reduce by q = {q}")
        s_lo = s_hi = 0
        dep = 0
        for p in total[1:]:
            x, w = p[1:]
            if x[0] != "leaf" or w[0] != "leaf":
                bad(f"sums in lane {lane} a product {show(p)} of values made inside it")
            (x_lo, x_hi), (w_lo, w_hi) = x[1].lanes[x[2]], w[1].lanes[w[2]]
            corners = [i * j for i in (x_lo, x_hi) for j in (w_lo, w_hi)]
            s_lo, s_hi = s_lo + min(corners), s_hi + max(corners)
            dep |= x[1].deps[x[2]] | w[1].deps[w[2]]
            form = union(form, product(x[1].form, w[1].form))
        r_lo, r_hi = (s_lo >> bits) - u_hi, (s_hi >> bits) - u_lo
        if r_lo < mc.lo or r_hi > mc.hi:
            bad(f"can leave {mc.lane_type} in lane {lane}: [{r_lo}, {r_hi}]")
        sums.append((s_lo, s_hi))
        lanes[lane], deps[lane] = (r_lo, r_hi), dep
    try:  # (it refuses an S that could leave the signed double-width lane)
        prove_montgomery(q, bits, products=(min(lo for lo, _ in sums), max(hi for _, hi in sums)))
    except LemmaError as e:
        raise VerifyError(f"{mc.symbol}: {e}") from None
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form))


CHECK = IdiomCheck((MONTGOMERY_SUM,), check, product=True, lanes_at_end=True)
