"""The check of a Montgomery product (tag kind "montgomery"): a group ending
in hi(x*w) - hi(lo(x*w')*q), with w' = w*q^-1 mod 2^bits, proven congruent to
x*w/2^bits mod q by the SMT-proven Montgomery lemma; on 64-bit lanes the
products are assembled from 32-bit pieces, (hi(x*w) + q) - hi(lo(x*w')*q)."""

from __future__ import annotations

from ...machine.ops import wrap
from .. import wide
from ..lemmas import prove_montgomery
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView
from .terms import leaf_constant, product_factors, product_terms, prove_wide, show, sum_parts

MONTGOMERY = "montgomery"  # the tag kind of a Montgomery product group


def check(mc: MachineView, group: Group) -> Checked:
    """Every lane r of the result must be hi(x*w) - hi(lo(x*w')*q) of one
    lane x, w, w' of values made outside the product, followed back lane
    by lane through its instructions (element-wise ones, the widening
    products of even lanes and the lane moves between them), with q
    itself as the modulus and w' = w*q^-1 mod 2^bits: for a constant w
    lane by lane from the tables, for a variable w as the product the
    kernel computed. Then the SMT-proven Montgomery lemma makes r
    congruent to x*w/2^bits mod q; its interval follows from x's and w's."""
    index, ins, result = group.index, group.instr, group.result

    def bad(why: str):
        mc.fail(index, ins, f"ends a Montgomery product that {why}")

    q, bits = mc.modulus, mc.bits
    pieces = bits == wide.BITS  # products from 32-bit pieces, on unsigned lanes: (hi(x*w) + q) - hi(t*q)
    if mc.signed == pieces:
        bad(f"runs on {mc.lane_type} lanes (it is {'unsigned' if pieces else 'signed'})")
    high_op = "mulhu" if pieces else "mulhi"
    qinv = pow(q, -1, 1 << bits)
    inside = group.made_inside()
    active = ins.operands[0].bits // bits  # the lanes the product computes
    half = 1 << (bits - 1)
    # hi(t*q) for any t; on unsigned lanes, q is added to hi(x*w) first
    (u_lo, u_hi), lift = ((0, q - 1), q) if pieces else (((-half * q) >> bits, ((half - 1) * q) >> bits), 0)
    if pieces:
        prove_wide(mc)
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    leaves = []
    for lane, term in enumerate(product_terms(mc, result, active, inside, bad)):
        if pieces:
            lifted = term[1] if term[0] == "sub" else ("leaf",)
            summands = [t for t in lifted[1:] if t[0] == "leaf" and leaf_constant(t) == q]
            if lifted[0] != "add" or len(summands) != 1:
                bad(f"computes lane {lane} as {show(term)}, not (hi(x*w) + q) - hi(lo(x*w')*q)")
            term = ("sub", lifted[2] if lifted[1] is summands[0] else lifted[1], term[2])
        if term[0] != "sub" or term[1][0] != high_op or term[2][0] != high_op:
            bad(f"computes lane {lane} as {show(term)}, not hi(x*w) - hi(lo(x*w')*q)")
        (_, a, b), (_, c, d) = term[1], term[2]
        low, qv = (c, d) if c[0] == "mullo" else (d, c)
        factors = product_factors(low)
        if low[0] != "mullo" or qv[0] != "leaf" or a[0] != "leaf" or b[0] != "leaf" or factors is None:
            bad(f"computes lane {lane} as {show(term)}, not hi(x*w) - hi(lo(x*w')*q)")
        if leaf_constant(qv) != wrap(q, bits):
            bad(f"does not reduce by q = {q}")
        if len(factors) == 3:  # lo(lo(x*w)*q^-1): the product itself times q^-1
            rest = list(factors)
            for t in (a, b):
                if t not in rest:
                    bad("does not multiply the same x and w in both products")
                rest.remove(t)
            if (leaf_constant(rest[0]) or 0) % (1 << bits) != qinv:
                bad("multiplies lo(x*w) by something other than q^-1")
            x, w = (b, a) if leaf_constant(b) is None else (a, b)
        else:
            shared = [t for t in (a, b) if t in factors]
            if len(factors) != 2 or len(shared) != 1 or a == b:
                bad("does not multiply one x in both products")
            x = shared[0]
            w = b if a == x else a
            wq = factors[1] if factors[0] == x else factors[0]
            if leaf_constant(w) is not None:
                if leaf_constant(wq) is None or (leaf_constant(wq) - leaf_constant(w) * qinv) % (1 << bits):
                    bad("pairs a constant w with a w' that is not w*q^-1 mod 2^bits")
            elif not times_qinv(mc, wq, w, qinv):
                bad("pairs a variable w with a w' not computed as mullo(w, q^-1) or a sum of such")
        form = union(form, x[1].form if leaf_constant(w) is not None else product(x[1].form, w[1].form))
        (x_lo, x_hi), (w_lo, w_hi) = x[1].lanes[x[2]], w[1].lanes[w[2]]
        corners = [i * j for i in (x_lo, x_hi) for j in (w_lo, w_hi)]
        r_lo, r_hi = (min(corners) >> bits) + lift - u_hi, (max(corners) >> bits) + lift - u_lo
        if r_lo < mc.lo or r_hi > mc.hi:  # (unsigned: hi(x*w) + q, the largest value made, is r_hi)
            bad(f"can leave {mc.lane_type} in lane {lane}: [{r_lo}, {r_hi}]")
        lanes[lane] = (r_lo, r_hi)
        deps[lane] = x[1].deps[x[2]] | w[1].deps[w[2]]
        leaves.append((x, w))
    prove_montgomery(q, bits, signed=not pieces)
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form), tuple(leaves))


def times_qinv(mc: MachineView, wq: tuple, w: tuple, qinv: int) -> bool:
    """Term wq = w*q^-1 mod 2^bits for the leaf w, as the kernel made it:
    mullo(w, q^-1) in the same lane, or u' + v' (added inside the product,
    or before it) for w = u + v with u', v' such multiples of u and v:
    multiplication mod 2^bits distributes over wrapping addition."""
    if wq[0] == "leaf":
        made = mc.made(wq[1].vid)
        if made is not None and made.generic == "mullo" and wq[2] == w[2]:
            mates = [v for v in made.sources if v.vid != w[1].vid]
            return len(mates) == 1 and mates[0].constant is not None and \
                (mates[0].constant[w[2]] - qinv) % (1 << mc.bits) == 0
        parts = sum_parts(mc, wq)
    else:
        parts = wq[1:] if wq[0] == "add" else None
    w_parts = sum_parts(mc, w)
    if parts is None or w_parts is None:
        return False
    (u, v), (uq, vq) = w_parts, parts
    return (times_qinv(mc, uq, u, qinv) and times_qinv(mc, vq, v, qinv)) or \
        (times_qinv(mc, vq, u, qinv) and times_qinv(mc, uq, v, qinv))



CHECK = IdiomCheck((MONTGOMERY,), check, product=True, lanes_at_end=True)
