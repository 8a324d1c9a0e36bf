"""The check of the special-form templates (tag kinds `special64.KINDS`):
x*w, a + b and a - b mod q = 2^64 - 2^b + 1 on unsigned 64-bit lanes, every
value canonical, proven by `special64.prove`."""

from __future__ import annotations

from .. import special64
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView
from .terms import lane_constant, product_terms, prove_wide, show


def check(mc: MachineView, group: Group) -> Checked:
    """Every lane of the result must be the group's template (in one of the
    ISAs' lowerings) on one lane x, y of values made outside it, the
    template proven for q; x and y of a sum or difference in [0, q) (a
    product takes any). The result is then the operation mod q, in [0, q)."""
    index, ins, result, kind = group.index, group.instr, group.result, group.kind

    def bad(why: str):
        mc.fail(index, ins, f"ends a {kind} template that {why}")

    q, bits = mc.modulus, mc.bits
    if mc.signed or bits != special64.BITS:
        bad(f"runs on {mc.lane_type} lanes (it needs unsigned 64-bit ones)")
    if special64.special_form(q) is None:
        bad(f"reduces by q = {q}, which is not 2^64 - 2^b + 1")
    prove_wide(mc)
    constant = lambda leaf: (lambda c: None if c is None else (c,))(lane_constant(leaf))  # noqa: E731
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    for lane, term in enumerate(product_terms(mc, result, ins.operands[0].bits // bits, group.made_inside(), bad)):
        found = next(((t, xy) for lw in special64.LOWERINGS for t in (special64.templates(q, lw)[kind],)
                      for xy in (special64.match(t, term, constant),) if xy is not None), None)
        if found is None:
            bad(f"computes lane {lane} as {show(term)}, not the {kind} template mod {q}")
        template, (x, y) = found
        try:
            special64.prove(template)
        except special64.SpecialFormError as e:
            bad(f"is not proven: {e}")
        (x_lo, x_hi), (y_lo, y_hi) = x[1].lanes[x[2]], y[1].lanes[y[2]]
        if kind != special64.MUL and (x_lo < 0 or y_lo < 0 or x_hi >= q or y_hi >= q):
            bad(f"takes [{x_lo}, {x_hi}] and [{y_lo}, {y_hi}] in lane {lane}, not values in [0, q)")
        if kind != special64.MUL:
            made = union(x[1].form, y[1].form)
        else:  # a product by a constant keeps the other factor's form
            made = x[1].form if lane_constant(y) is not None else y[1].form if lane_constant(x) is not None \
                else product(x[1].form, y[1].form)
        form = union(form, made)
        lanes[lane] = (0, q - 1)
        deps[lane] = x[1].deps[x[2]] | y[1].deps[y[2]]
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form))


CHECK = IdiomCheck(special64.KINDS, check, product=True, lanes_at_end=True)
