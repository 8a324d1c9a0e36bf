"""The check of a Shoup product from 52-bit multiply-adds (tag kind
"shoup52", `passes.ifma`): the steps of `ifma.SHOUP52` on one lane x below
2^52 and table constants w in [0, q), w' = floor(w*2^52/q), or elements of
arguments the contract pairs so, proven by the template's proof and Shoup's
lemma on 52 bits."""

from __future__ import annotations

from ...errors import VerifyError
from .. import ifma
from ..lemmas import prove_shoup
from ..values import Value, product, union
from .base import Checked, Group, IdiomCheck, MachineView
from .shoup import shoup_pair
from .terms import lane_constant, product_terms, show

SHOUP52 = "shoup52"  # the tag kind: the steps of `ifma.SHOUP52`

_INPUTS = ("x", "w", "wp", "zero", "negq", "mask")
_MULTIPLY_ADDS = ("madd52lo", "madd52hi")  # their two factors commute (the accumulator comes first)


def _expected() -> tuple:
    """The template as a term over its inputs, ("input", name) each."""
    env: dict[str, tuple] = {name: ("input", name) for name in _INPUTS}
    for op, dst, *sources in ifma.SHOUP52:
        env[dst] = (op, *(env[v] for v in sources))
    return env[ifma.SHOUP52[-1][1]]


def _match(actual: tuple, expected: tuple, bound: dict[str, list[tuple]]) -> bool:
    """Whether `actual` is `expected` with a leaf for each input, the leaves
    each input stands for collected in `bound` (factors of a multiply-add,
    and of the mask's `and`, in either order)."""
    if expected[0] == "input":
        if actual[0] != "leaf":
            return False
        bound.setdefault(expected[1], []).append(actual)
        return True
    if actual[0] != expected[0] or len(actual) != len(expected):
        return False
    orders = [actual[1:]]
    if expected[0] in _MULTIPLY_ADDS:
        orders.append((actual[1], actual[3], actual[2]))
    elif expected[0] == "and":
        orders.append((actual[2], actual[1]))
    for order in orders:
        trial = {k: list(v) for k, v in bound.items()}
        if all(_match(a, e, trial) for a, e in zip(order, expected[1:], strict=True)):
            bound.clear()
            bound.update(trial)
            return True
    return False


def check(mc: MachineView, group: Group) -> Checked:
    """Every lane r of the result must be the template on one lane x in
    [0, 2^52) of a value made outside the product and constants from the
    tables: w in [0, q), w' = floor(w*2^52/q), 2^52 - q, the 52-bit mask and
    zero accumulators. The template's proof makes r = (x*w - Q*q) mod 2^52,
    Shoup's lemma on 52 bits x*w - Q*q = x*w mod q in [0, q - 1 +
    ceil(q*x/2^52)], which must stay below 2^52 for the mask to keep it."""
    index, ins, result = group.index, group.instr, group.result

    def bad(why: str):
        mc.fail(index, ins, f"ends a 52-bit Shoup product that {why}")

    q = mc.modulus
    if mc.signed or mc.bits != 64:
        bad(f"runs on {mc.lane_type} lanes (it needs unsigned 64-bit ones)")
    try:
        ifma.prove_template()
    except ifma.Shoup52Error as e:
        raise VerifyError(f"{mc.symbol}: {e}") from None
    lemma = prove_shoup(q, ifma.BITS)
    want = {"zero": 0, "negq": (1 << ifma.BITS) - q, "mask": ifma.MASK}
    expected = _expected()
    lanes, deps, form = list(result.lanes), list(result.deps), frozenset()
    for lane, term in enumerate(product_terms(mc, result, ins.operands[0].bits // mc.bits, group.made_inside(),
                                              bad)):
        bound: dict[str, list[tuple]] = {}
        if not _match(term, expected, bound):
            bad(f"computes lane {lane} as {show(term)}, not the steps of {ifma.SHOUP52}")
        values = {name: {lane_constant(leaf) for leaf in leaves} for name, leaves in bound.items()}
        for name, value in want.items():
            if values[name] != {value}:
                bad(f"takes {name} = {values[name]} in lane {lane}, not {value}")
        if any(leaf != bound["x"][0] for leaf in bound["x"]):
            bad(f"does not multiply one x in both products (lane {lane}: {show(term)})")
        x, w, wp = bound["x"][0], bound["w"][0], bound["wp"][0]
        (wc,), (wpc,) = values["w"], values["wp"]
        if wc is not None:
            if not 0 <= wc < q or wpc != (wc << ifma.BITS) // q:
                bad(f"pairs w = {wc} with w' = {wpc}, not table constants w in [0, q) and floor(w*2^52/q)")
        elif not shoup_pair(mc, w, wp, ifma.BITS):
            bad("pairs a variable w with a w' that is not its element of an argument the contract pairs with w's "
                "as floor(w*2^52/q)")
        else:
            w_lo, w_hi = w[1].lanes[w[2]]
            if w_lo < 0 or w_hi >= q:
                bad(f"takes w in [{w_lo}, {w_hi}] in lane {lane}, not in [0, q)")
        x_lo, x_hi = x[1].lanes[x[2]]
        if x_lo < 0 or x_hi > ifma.MASK:
            bad(f"takes x in [{x_lo}, {x_hi}] in lane {lane}: the multiply-adds read 52 bits")
        lanes[lane] = lemma.range_for(x_lo, x_hi)
        if lanes[lane][1] > ifma.MASK:
            bad(f"leaves x*w mod q up to {lanes[lane][1]} in lane {lane}, beyond the 52 bits kept")
        if wc != 0:  # (a zero w adds nothing)
            form = union(form, x[1].form if wc is not None else product(x[1].form, w[1].form))
        deps[lane] = x[1].deps[x[2]] | w[1].deps[w[2]] | wp[1].deps[wp[2]]
    return Checked(Value(result.vid, tuple(lanes), tuple(deps), form))


CHECK = IdiomCheck((SHOUP52,), check, product=True, lanes_at_end=True)
