"""Shoup's product on 64-bit lanes from 52-bit multiply-adds (AVX-512 IFMA).

`vpmadd52huq`/`vpmadd52luq` add to their destination the high or the low
52 bits of the 104-bit product of their sources' low 52 bits. For x, w, w'
below 2^52 (Harvey's lazy values below 4q < 2^52, so q < 2^50) and the
52-bit Shoup constant w' = floor(w*2^52/q), the product is four steps
(`SHOUP52`), from accumulators that start at zero:

    Q = hi52(x*w');  t = lo52(x*w);  u = t + lo52(Q*(2^52 - q));  r = u & (2^52 - 1)

u is below 2^53 (no 64-bit wrap), and r = (x*w - Q*q) mod 2^52, which is
x*w - Q*q itself wherever Shoup's lemma on 52 bits (`lemmas.prove_shoup(q,
52)`) bounds it below 2^52. `prove_template` proves the first claim once
per process (z3 over the integers: each 52-bit product a variable, each
low or high half a division with remainder, so the claim is linear); the
verifier's check (`idioms.shoup52`) matches the steps in a lane's term and
applies the lemma.
"""

from __future__ import annotations

from ..core.compile_cache import memo
from . import smt

BITS = 52  # the width of the multiply-adds' products' halves
MASK = (1 << BITS) - 1

# (operation, destination, accumulator or first source, further sources): "zero" is 0, "negq" 2^52 - q
SHOUP52: tuple[tuple[str, ...], ...] = (
    ("madd52hi", "quotient", "zero", "x", "wp"),
    ("madd52lo", "t", "zero", "x", "w"),
    ("madd52lo", "u", "t", "quotient", "negq"),
    ("and", "r", "u", "mask"),
)

OPERATIONS = tuple(sorted({step[0] for step in SHOUP52}))  # what an ISA needs on 64-bit lanes for it


class Shoup52Error(Exception):
    pass


@memo(maxsize=1)
def prove_template() -> None:
    """For x, w, w' in [0, 2^52) and q in (0, 2^52): the steps leave
    quotient = floor(x*w'/2^52) and r = (x*w - quotient*q) mod 2^52 in
    [0, 2^52), and no accumulation wraps 64 bits."""
    _prove(SHOUP52)


def _prove(steps: tuple[tuple[str, ...], ...]) -> None:
    import z3

    solver = z3.Solver()
    fresh = iter(range(1 << 30))

    def var(lo: int, hi: int):
        v = z3.Int(f"i{next(fresh)}")
        solver.add(v >= lo, v <= hi)
        return v

    def halves(p):
        high, low = var(0, MASK), var(0, MASK)
        solver.add(p == high * (1 << BITS) + low)
        return high, low

    x, w, wp, q = var(0, MASK), var(0, MASK), var(0, MASK), var(1, MASK)
    products: dict[tuple[str, str], object] = {}
    env = {"x": x, "w": w, "wp": wp, "zero": z3.IntVal(0), "negq": (1 << BITS) - q, "mask": z3.IntVal(MASK)}
    wraps = []
    for op, dst, acc, *factors in steps:
        if op in ("madd52lo", "madd52hi"):
            a, b = factors
            key = tuple(sorted((a, b)))
            if key not in products:
                # a product of two 52-bit values, named by its factors; Q*(2^52 - q) = Q*2^52 - Q*q
                p = var(0, MASK * MASK)
                if key == ("negq", "quotient"):
                    qq = var(0, MASK * MASK)
                    solver.add(p == env["quotient"] * (1 << BITS) - qq)
                    products[("q", "quotient")] = qq
                products[key] = p
            high, low = halves(products[key])
            env[dst] = env[acc] + (low if op == "madd52lo" else high)
            wraps.append(env[dst] >= 1 << 64)
        elif op == "and" and factors == ["mask"]:
            above, low = var(0, (1 << 12) - 1), var(0, MASK)
            solver.add(env[acc] == above * (1 << BITS) + low)
            env[dst] = low
        else:
            raise Shoup52Error(f"no proof rule for {op} with {factors}")
    xw, xwp = products.get(("w", "x")), products.get(("wp", "x"))
    qq = products.get(("q", "quotient"))
    if xw is None or xwp is None or qq is None or "quotient" not in env:
        raise Shoup52Error("the 52-bit Shoup product is not proven: it does not form x*w, x*w' and Q*q")
    r, quotient = env[steps[-1][1]], env["quotient"]
    solver.add(z3.Or(*wraps, quotient * (1 << BITS) > xwp, xwp >= (quotient + 1) * (1 << BITS),
                     (r - xw + qq) % (1 << BITS) != 0))
    if smt.check(solver) != z3.unsat:
        raise Shoup52Error("the 52-bit Shoup product is not proven")
