"""The check of a Karatsuba cross term (tag kind "karatsuba"): two
subtractions (pm - p00) - p11 of checked Montgomery products, pm the product
of the sums of the others' factors, bounded through the exact identity of the
cross term rather than the products' intervals."""

from __future__ import annotations

from ...machine.ops import spec
from ..values import Value, union
from .base import Checked, Group, IdiomCheck, MachineView
from .terms import sum_parts

KARATSUBA = "karatsuba"  # the tag kind of a cross term: Montgomery products (x0+x1)(w0+w1) - x0*w0 - x1*w1


def check(mc: MachineView, group: Group) -> Checked:
    """r = (pm - p00) - p11 for checked Montgomery products p00 = x0*w0/R,
    p11 = x1*w1/R and pm = (x0 + x1)(w0 + w1)/R, the sums made lane by
    lane by additions: then r*R = x0*w1 + x1*w0 - (tm - t0 - t1)*q
    exactly, each t in [-2^(bits-1), 2^(bits-1)), which bounds r far
    tighter than pm's interval minus the others' (those forget that pm's
    factors are the others' sums). Wrapping subtractions give r itself
    when that bound lies inside the lane."""
    index, ins, result = group.index, group.instr, group.result

    def bad(why: str):
        mc.fail(index, ins, f"ends a Karatsuba cross term that {why}")

    q, bits = mc.modulus, mc.bits
    if len(group.steps) != 2 or any(spec(st.instr.op).generic != "sub" for st in group.steps):
        bad("is not two subtractions")
    (pm, p00), first = group.steps[0].sources, group.steps[0].result
    rest, p11 = group.steps[1].sources
    if rest.vid != first.vid:
        bad("does not subtract from the first difference")
    made = [mc.product_leaves(v.vid) for v in (pm, p00, p11)]
    if None in made:
        bad("subtracts something other than checked Montgomery products")

    def sum_of(leaf: tuple, a: tuple, c: tuple) -> bool:
        parts = sum_parts(mc, leaf)
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
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), union(pm.form, p00.form, p11.form)))


CHECK = IdiomCheck((KARATSUBA,), check, product=False, lanes_at_end=False)
