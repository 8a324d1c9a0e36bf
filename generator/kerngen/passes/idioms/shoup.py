"""The check of a Shoup product (tag kind "shoup"): lo(x*w) - lo(hi(x*w')*q)
on unsigned lanes with w' = floor(w*2^bits/q), from the tables or from the
argument the contract pairs with w's, proven by Shoup's lemma (with a high
half short by up to 2, `wide.HIGH_SHORT`, by the lemma with that slack)."""

from __future__ import annotations

from .. import wide
from ..lemmas import prove_shoup
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView
from .terms import lane_constant, leaf_constant, moved_from, product_terms, prove_wide, show

SHOUP = "shoup"  # the tag kind of a Shoup product: lo(x*w) - lo(hi(x*w')*q) on unsigned lanes


def check(mc: MachineView, group: Group) -> Checked:
    """Every lane r of the result must be lo(x*w) - lo(hi(x*w')*q) of one
    lane x, w, w' of values made outside the product (followed back lane
    by lane as for Montgomery; the high half hi(x*w') unsigned), on
    unsigned lanes, with q itself and w' = floor(w*2^bits/q): for a
    constant w in [0, q) lane by lane from the tables, for a variable w
    the element of an argument the contract pairs with the same element
    of w''s argument, both as loaded. Then Shoup's lemma makes r = x*w
    mod q, in [0, q - 1 + ceil(q*x/2^bits)], plus slack*q where the high
    half may fall short by that much (`wide.HIGH_HALVES`)."""
    index, ins, result = group.index, group.instr, group.result

    def bad(why: str):
        mc.fail(index, ins, f"ends a Shoup product that {why}")

    q, bits = mc.modulus, mc.bits
    if mc.signed:
        bad(f"runs on {mc.lane_type} lanes (it needs unsigned ones)")
    if bits == wide.BITS:
        prove_wide(mc)
    inside = group.made_inside()
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    shape = "not lo(x*w) - lo(hi(x*w')*q)"
    for lane, term in enumerate(product_terms(mc, result, ins.operands[0].bits // bits, inside, bad)):
        if term[0] != "sub" or term[1][0] != "mullo" or term[2][0] != "mullo":
            bad(f"computes lane {lane} as {show(term)}, {shape}")
        (_, a, b), (_, c, d) = term[1], term[2]
        high, qv = (c, d) if c[0] in wide.HIGH_HALVES else (d, c)
        if high[0] not in wide.HIGH_HALVES or qv[0] != "leaf" or a[0] != "leaf" or b[0] != "leaf":
            bad(f"computes lane {lane} as {show(term)}, {shape}")
        if leaf_constant(qv) != q:
            bad(f"does not reduce by q = {q}")
        shared = [t for t in high[1:] if t in (a, b)]
        if len(shared) != 1 or high[1][0] != "leaf" or high[2][0] != "leaf" or a == b:
            bad(f"does not multiply one x in both products (lane {lane}: {show(term)})")
        x = shared[0]
        w, wp = (b if a == x else a), (high[2] if high[1] == x else high[1])
        wc = lane_constant(w)
        if wc is not None:  # from a table, or the zeros a short load leaves in the upper lanes
            wpc = lane_constant(wp)
            if not 0 <= wc < q or wpc != (wc << bits) // q:
                bad(f"pairs w = {wc} with w' = {wpc}, not floor(w*2^{bits}/q) for w in [0, q)")
        elif not shoup_pair(mc, w, wp, bits):
            bad("pairs a variable w with a w' that is not its element of an argument the contract pairs with w's")
        (x_lo, x_hi), (w_lo, w_hi) = x[1].lanes[x[2]], w[1].lanes[w[2]]
        if w_lo < 0 or w_hi >= q:
            bad(f"takes w in [{w_lo}, {w_hi}] in lane {lane}, not in [0, q)")
        if wc != 0:  # (a zero w adds nothing)
            form = union(form, x[1].form if wc is not None else product(x[1].form, w[1].form))
        lanes[lane] = prove_shoup(q, bits, wide.HIGH_HALVES[high[0]]).range_for(x_lo, x_hi)
        deps[lane] = x[1].deps[x[2]] | w[1].deps[w[2]] | wp[1].deps[wp[2]]
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form))



def shoup_pair(mc: MachineView, w: tuple, wp: tuple, bits: int) -> bool:
    """Lanes w and w' are elements k of arguments i and j that the contract
    pairs as w' = floor(w*2^bits/q), each moved unchanged from its argument
    (so the contract's relation holds)."""
    found = [_input_element(mc, v, lane) for _, v, lane in (w, wp)]
    if None in found:
        return False
    (i, k), (j, m) = found
    return (i, j, bits) in mc.shoup_pairs and k == m


def _input_element(mc: MachineView, v: Value, lane: int) -> tuple[int, int] | None:
    """(argument, element) whose value lane `lane` of v holds unchanged: followed
    through loads and lane moves to memory; None where anything else made it."""
    made = mc.made(v.vid)
    if made is None:  # read from memory: one element of an argument, as its form and dependence say
        dep = v.deps[lane]
        arg = next((i for i in range(len(mc.bases)) if v.form == frozenset({(i,)})), None)
        if arg is None or not dep or dep & (dep - 1) or dep.bit_length() - 1 < mc.bases[arg]:
            return None
        return arg, dep.bit_length() - 1 - mc.bases[arg]
    moved = moved_from(mc, made, v, lane)
    return None if moved is None else _input_element(mc, *moved)



CHECK = IdiomCheck((SHOUP,), check, product=True, lanes_at_end=True)
