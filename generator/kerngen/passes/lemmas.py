"""Lemmas: exact facts about reduction idioms and modular products, proven.

An idiom is a short instruction sequence on `bits`-bit lanes with broadcast
constants (Barrett, special-form, ...), written in the instruction table's
width-neutral names and run through the table's own lane semantics. Its
lemma gives the exact output range for any input range and states that
the output is congruent to the input mod q. The proof method follows the
width: for 16-bit lanes the idiom is run on all 2^16 inputs at once (one
numpy lane per input); wider lanes have too many inputs to run: an idiom
of a known shape (Barrett's quotient, a special form's split) is proven
from its steps (`shapes`), any other by an SMT solver, which proves
congruence for all inputs and finds the extremes of the output for each
input range asked. The verifier and the bounds stage ask
this module, so neither trusts a hand-derived range.

A lemma is a fact about its idiom or its (q, bits) alone, and the SMT
proofs take seconds: each proving function is a registered memo
(`core.compile_cache.memo`), bounded, kept across builds of a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.compile_cache import memo
from ..machine.ops import Arith, by_width, lane_range, lane_value, spec, unsigned, wrap
from . import smt
from .shapes import quotient_lemma, split_lemma

EXHAUSTIVE_BITS = 16  # widest lanes whose every input is run
SMT_TIMEOUT_MS = 30_000  # an idiom the solver cannot settle in this time is not proven (refused)


class LemmaError(Exception):
    pass


def _arith(name: str, bits: int) -> Arith:
    a = spec(by_width(name, bits)).arith
    if a is None:
        raise LemmaError(f"{name} has no element-wise semantics on {bits}-bit lanes")
    return a


@dataclass(frozen=True)
class ScalarIdiom:
    """An idiom in lane form: steps (op, dst, *sources) over names, ops by
    their width-neutral names ("add", "mulhi", "sra", ...), sources in the
    order of the row's read slots; 'x' is the input, constants are ints,
    the last step's dst is the output. `signed`: the lanes' values are read
    as signed integers (else unsigned: the input and output ranges are in
    [0, 2^bits))."""

    kind: str
    q: int
    steps: tuple[tuple[str | int, ...], ...]
    bits: int
    signed: bool = True

    @property
    def lane(self) -> tuple[int, int]:
        """The lane's values, least and greatest."""
        return lane_range(self.bits, self.signed)

    def read(self, y):
        """A lane's bits as the integer the idiom's values mean."""
        return lane_value(y, self.bits, self.signed)

    def run(self, x):
        """The output for input x: an int, or a numpy array of inputs at once."""
        env = {"x": x}
        for op, dst, *sources in self.steps:
            env[dst] = _arith(op, self.bits).exact(tuple(_val(env, s) for s in sources), self.bits)
        return env[self.steps[-1][1]]

    def symbolic(self, z3, x):
        """The output as a z3 bit-vector expression of input x."""
        return self.symbolic_values(z3, x)[self.steps[-1][1]]

    def symbolic_values(self, z3, x) -> dict:
        """Every named value (x and each step's) as a z3 bit-vector expression of input x."""
        env = {"x": x}
        for op, dst, *sources in self.steps:
            row = spec(by_width(op, self.bits))
            kinds = [row.slots[k].kind for k in row.read]  # immediates (shift counts, truth tables) stay integers
            values = tuple(z3.BitVecVal(v, self.bits) if isinstance(v, int) and kind != "i" else v
                           for v, kind in zip((_val(env, s) for s in sources), kinds))
            env[dst] = _arith(op, self.bits).smt(z3, values, self.bits)
        return env


def _val(env, s):
    return s if isinstance(s, int) else env[s]


class Lemma:
    """What a proof established: congruence, and `range_for(lo, hi)`, the
    exact output range over inputs in [lo, hi]."""

    kind: str
    q: int

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class ExhaustiveLemma(Lemma):
    kind: str
    q: int
    lane: tuple[int, int]  # the inputs, least and greatest
    outputs: np.ndarray  # output for input x at index x - lane[0]
    _ranges: dict = field(default_factory=dict, repr=False)

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            least, most = self.lane
            chunk = self.outputs[max(lo, least) - least:min(hi, most) - least + 1]  # a lane holds no more
            found = self._ranges[(lo, hi)] = (int(chunk.min()), int(chunk.max()))
        return found


class _OfIdiom:
    """A lemma about one idiom: its kind and modulus are the idiom's."""

    idiom: ScalarIdiom

    @property
    def kind(self) -> str:
        return self.idiom.kind

    @property
    def q(self) -> int:
        return self.idiom.q


@dataclass(frozen=True, eq=False)
class ConditionalSubtractionLemma(_OfIdiom, Lemma):
    """y = x - c where c <= x < limit, else x, on unsigned lanes, for every x
    (proven), c a multiple of q: the exact range over [lo, hi] follows from
    that form. `limit` is the lane's end where an unsigned minimum keeps x
    (min(x, x - c)), and c + 2^(W-1) where x is kept by the sign of x - c."""

    idiom: ScalarIdiom
    c: int
    limit: int
    # ranges asked before: a schedule search asks for the same few bounds hundreds of thousands of times
    _ranges: dict = field(default_factory=dict, repr=False)

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            found = self._ranges[(lo, hi)] = self._range(max(lo, 0), min(hi, self.idiom.lane[1]))
        return found

    def _range(self, lo: int, hi: int) -> tuple[int, int]:
        pieces = [(a, b) for a, b in ((lo, min(hi, self.c - 1)), (max(lo, self.limit), hi)) if a <= b]
        a, b = max(lo, self.c), min(hi, self.limit - 1)
        if a <= b:
            pieces.append((a - self.c, b - self.c))
        return min(a for a, _ in pieces), max(b for _, b in pieces)


def _conditional_subtraction(idiom: ScalarIdiom, z3, x, y) -> ConditionalSubtractionLemma | None:
    """The idiom as a conditional subtraction of c, a multiple of q, when it
    starts with x - c and the solver proves it equal to the closed form for
    every x: up to the lane's end (an unsigned minimum), or up to c + 2^(W-1)
    (x kept where x - c reads negative)."""
    steps = idiom.steps
    if idiom.signed or steps[0][0] != "sub" or steps[0][2] != "x" or not isinstance(steps[0][3], int):
        return None
    c = steps[0][3]
    if c <= 0 or c % idiom.q:
        return None
    for limit in (1 << idiom.bits, c + (1 << (idiom.bits - 1))):
        solver = z3.Solver()
        solver.set("timeout", SMT_TIMEOUT_MS)
        inside = z3.UGE(x, c) if limit >> idiom.bits else z3.And(z3.UGE(x, c), z3.ULT(x, limit))
        solver.add(y != z3.If(inside, x - c, x))
        if smt.check(solver) == z3.unsat:
            return ConditionalSubtractionLemma(idiom, c, limit)
    return None


@dataclass(frozen=True, eq=False)
class SmtLemma(_OfIdiom, Lemma):
    idiom: ScalarIdiom
    _ranges: dict = field(default_factory=dict, repr=False)

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            import z3

            bits, least = self.idiom.bits, self.idiom.lane[0]
            x = z3.BitVec("x", bits)
            y = self.idiom.symbolic(z3, x)
            ends = []
            for goal in ("minimize", "maximize"):
                opt = z3.Optimize()
                opt.set("timeout", SMT_TIMEOUT_MS)
                opt.add(x >= lo, x <= hi) if self.idiom.signed else opt.add(z3.UGE(x, lo), z3.ULE(x, hi))
                v = z3.BV2Int(y - least)  # the value, shifted to be non-negative
                getattr(opt, goal)(v)
                verdict = smt.check(opt)
                if verdict == z3.unknown:
                    raise LemmaError(f"{self.kind} mod {self.q}: output range not found within "
                                     f"{SMT_TIMEOUT_MS // 1000} s")
                if verdict != z3.sat:
                    raise LemmaError(f"{self.kind} mod {self.q}: no input in [{lo}, {hi}]")
                ends.append(opt.model().eval(v).as_long() + least)
            found = self._ranges[(lo, hi)] = (ends[0], ends[1])
        return found


@memo(maxsize=1024)
def prove(idiom: ScalarIdiom, method: str | None = None) -> Lemma:
    """Prove the idiom congruent to its input for every input; refuse it
    otherwise. `method` defaults by width: "exhaustive" up to 16 bits,
    "shape" above: an idiom of a quotient's or a split's shape (Barrett,
    freeze, special forms) settled from its steps (`shapes`), in
    milliseconds where the solver takes seconds, others by "smt", the
    solver. The same steps under other names are the same lemma (the
    verifier names what it rebuilds from instructions its own way): each is
    proven once. An idiom asked about again (the schedules ask about a few,
    millions of times) is not renamed again either."""
    names = {"x": "x"}
    steps = []
    for k, (op, dst, a, b) in enumerate(idiom.steps):
        steps.append((op, f"v{k}", names.get(a, a) if isinstance(a, str) else a,
                      names.get(b, b) if isinstance(b, str) else b))
        names[dst] = f"v{k}"
    return _prove(ScalarIdiom(idiom.kind, idiom.q, tuple(steps), idiom.bits, idiom.signed), method)


@memo(maxsize=1024)
def _prove(idiom: ScalarIdiom, method: str | None) -> Lemma:
    method = method or ("exhaustive" if idiom.bits <= EXHAUSTIVE_BITS else "shape")
    if method == "exhaustive":
        least, most = idiom.lane
        x = np.arange(least, most + 1, dtype=np.int64)
        y = idiom.read(idiom.run(x))
        bad = np.nonzero((y - x) % idiom.q)[0]
        if bad.size:
            i = int(bad[0])
            raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {int(y[i])} for input {int(x[i])} is not congruent")
        return ExhaustiveLemma(idiom.kind, idiom.q, idiom.lane, y)
    if method == "shape":
        shaped = _by_shape(idiom)
        if shaped is not None:
            return shaped
    import z3

    bits = idiom.bits
    x = z3.BitVec("x", bits)
    y = idiom.symbolic(z3, x)
    if idiom.signed and _congruent_by_structure(idiom, z3, x):
        return quotient_lemma(idiom) or SmtLemma(idiom)
    closed = _conditional_subtraction(idiom, z3, x, y)
    if closed is not None:
        return closed
    extend = z3.SignExt if idiom.signed else z3.ZeroExt
    diff = extend(1, y) - extend(1, x)  # one bit wider: the difference cannot wrap
    solver = z3.Solver()
    solver.set("timeout", SMT_TIMEOUT_MS)
    solver.add(z3.SRem(diff, z3.BitVecVal(idiom.q, bits + 1)) != 0)
    verdict = smt.check(solver)
    if verdict == z3.unknown:
        raise LemmaError(f"{idiom.kind} mod {idiom.q}: congruence not proven within {SMT_TIMEOUT_MS // 1000} s")
    if verdict != z3.unsat:
        m = solver.model()
        xi = idiom.read(m.eval(x).as_long())
        raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {idiom.read(m.eval(y).as_long())} for input {xi} "
                         f"is not congruent")
    return SmtLemma(idiom)


def _by_shape(idiom: ScalarIdiom) -> Lemma | None:
    """The lemma of a quotient's or a split's shape (`shapes`), or None
    where the idiom has neither (or a quotient with too many runs to follow)."""
    if not idiom.signed:
        return None
    quotient = quotient_lemma(idiom)
    if quotient is not None and quotient.few_runs:
        wrapped = quotient.leaving_input()
        if wrapped is not None:
            raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {idiom.run(wrapped)} for input {wrapped} is not "
                             "congruent")
        return quotient
    return split_lemma(idiom)


def _congruent_by_structure(idiom: ScalarIdiom, z3, x) -> bool:
    """Congruence from the idiom's shape, where it has one: y built from x by
    adding and subtracting multiples of q (mullo(t, q); and(sign mask, k*q),
    which is 0 or k*q). Followed in wide arithmetic, where nothing wraps, y is x
    plus multiples of q; the solver proves the lane's y equals that wide value
    (cheap, where a remainder by q needs a divider circuit: Barrett, freeze).
    False when the shape is another (special forms) or y can differ."""
    bits, q = idiom.bits, idiom.q
    wide = lambda v: z3.SignExt(bits, v)
    env, masks = idiom.symbolic_values(z3, x), set()
    exact = {"x": wide(x)}  # values congruent to x, or multiples of q, as wide expressions
    multiple: set[str] = set()
    for op, dst, a, b in idiom.steps:
        if op == "mullo" and q in (a, b):
            multiple.add(dst)
            exact[dst] = wide(env[b if a == q else a]) * z3.BitVecVal(q, 2 * bits)
        elif op == "sra" and b == bits - 1:
            masks.add(dst)  # 0 or -1
        elif op == "and" and any(isinstance(v, int) and v and v % q == 0 for v in (a, b)) and \
                (a in masks or b in masks):
            multiple.add(dst)  # 0 or a multiple of q
            exact[dst] = wide(env[dst])
        elif op in ("add", "sub") and a in exact and b in exact and (a in multiple) + (b in multiple) == 1 \
                and (op == "add" or b in multiple):
            exact[dst] = exact[a] + exact[b] if op == "add" else exact[a] - exact[b]
    last = idiom.steps[-1][1]
    if last not in exact or last in multiple:
        return False
    solver = z3.Solver()
    solver.set("timeout", SMT_TIMEOUT_MS)
    solver.add(exact[last] != wide(env[last]))
    return smt.check(solver) == z3.unsat


@dataclass(frozen=True)
class MontgomeryLemma:
    """For every signed `bits`-bit a, b, with t = lo(a * lo(b * q^-1)) and
    r = hi(a*b) - hi(t*q) computed in `bits` bits:
      (1) lo(t*q) = lo(a*b), and
      (2) the subtraction of the high halves never wraps.
    Writing a*b = H1*2^bits + L and t*q = H2*2^bits + L (same L by (1))
    gives r * 2^bits = a*b - t*q exactly (by (2)), hence r = a*b*2^-bits mod
    q: the Montgomery product, with a variable or a constant b. Proven once
    per q for all input pairs (too many to run): (1) in the ring of integers
    mod 2^bits, where t*q = a*b*(q^-1*q), from q^-1*q = 1 mod 2^bits; (2) by
    the extremes of both high halves over the whole lane. The range of r is
    not part of the lemma: the verifier derives it.
    (1) holds for any double-width value in place of a*b, t taken from its
    low half: so a sum S of products inside the signed double-width lane is
    reduced alike, r = S*2^-bits mod q, where (2) holds over S's range
    (`prove_montgomery`'s `products`; the multiply-accumulates that reduce once).
    On unsigned lanes (`signed` False) the product is r = (H1 + q) - H2:
    H2 <= q - 1 for every t, so the subtraction cannot wrap, and the verifier
    bounds the sum H1 + q from a's and b's ranges; (1) is the lemma."""

    q: int
    qinv: int
    bits: int
    signed: bool = True


@memo(maxsize=256)
def prove_montgomery(q: int, bits: int, qinv: int | None = None, signed: bool = True,
                     products: tuple[int, int] | None = None) -> MontgomeryLemma:
    """`qinv` defaults to q^-1 mod 2^bits; passing another value lets tests watch a false lemma fail.
    `products`: the least and greatest double-width value reduced, where it is not one product a*b
    but a sum S of them (`MontgomeryLemma`, signed lanes); by default a*b's over the lanes."""
    if qinv is None:
        qinv = pow(q, -1, 1 << bits)
        qinv = wrap(qinv, bits) if signed else qinv
    if qinv * q % (1 << bits) != 1:  # then a = b = 1 gives t*q = q^-1*q, not a*b = 1, in the low half
        raise LemmaError(f"Montgomery product mod {q}: low halves differ for a = 1, b = 1")
    if not signed:
        return MontgomeryLemma(q, qinv, bits, signed)
    half = 1 << (bits - 1)
    if products is None:
        products = (-half * (half - 1), half * half)  # a*b over signed lanes, least and greatest
    elif products[0] < -half << bits or products[1] >= half << bits:
        raise LemmaError(f"Montgomery reduction mod {q}: a sum in [{products[0]}, {products[1]}] leaves the "
                         f"signed {2 * bits}-bit lane its halves are read from")
    high = [p >> bits for p in products]
    tq = [(-half * q) >> bits, ((half - 1) * q) >> bits]  # hi(t*q) over every t
    if high[0] - tq[1] < -half or high[1] - tq[0] > half - 1:
        raise LemmaError(f"Montgomery product mod {q}: high-half subtraction wraps (q too large for {bits} bits)")
    return MontgomeryLemma(q, qinv, bits)


@memo(maxsize=256)
def prove_pair_montgomery(q: int, bits: int, qinv: int | None = None) -> None:
    """The Montgomery reduction of a double-width value X (a pair reduction's
    sum of products) from its halves: with t = lo(X) * q^-1 mod 2^bits,
    X - t*q = (hi(X) - mulhi(t, q)) * 2^bits exactly. Writing X = hi*2^bits +
    lo_u and t*q = mulhi(t, q)*2^bits + lo_u(t*q) (lo_u: the low half
    unsigned), X - t*q = (hi - mulhi(t, q))*2^bits + (lo_u - lo_u(t*q)), so
    the claim is lo_u(t*q) = lo_u for every low half: checked here on all
    2^bits of them. (The verifier bounds the narrow result separately.)
    `qinv` defaults to q^-1 mod 2^bits; another value lets tests watch it fail."""
    qinv = wrap(pow(q, -1, 1 << bits), bits) if qinv is None else qinv
    lo = np.arange(-(1 << (bits - 1)), 1 << (bits - 1), dtype=np.int64)
    t = wrap(lo * qinv, bits)
    bad = np.nonzero(unsigned(t * q, bits) != unsigned(lo, bits))[0]
    if len(bad):
        raise LemmaError(f"pair Montgomery reduction mod {q}: t*q and X differ in their low halves for "
                         f"lo(X) = {int(lo[bad[0]])}")


@dataclass(frozen=True)
class ShoupLemma:
    """Shoup's product on unsigned `bits`-bit lanes (W = bits): for every
    x < 2^W and every w in [0, q) with w' = floor(w*2^W/q), the quotient
    Q = floor(x*w'/2^W) (a high-half product) leaves

        r = x*w - Q*q  with  0 <= r  and  r*2^W < q*(2^W + x),

    so r < 2q, and as 2q <= 2^W the lanes' low products give r exactly:
    r = lo(x*w) - lo(Q*q) mod 2^W. Hence r = x*w mod q with r <= q - 1 +
    ceil(q*x/2^W) (`range_for`). Proven by an SMT solver over the integers,
    once per q, for every x, w and w' so related (the verifier checks that
    the kernel's w' is related so).

    With a quotient up to `slack` below the high half (`wide.HIGH_SHORT`),
    r grows by at most slack*q: r*2^W < q*(2^W + x) + slack*q*2^W, which
    the low products hold where (2 + slack)*q <= 2^W."""

    q: int
    bits: int
    slack: int = 0

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        """Least and greatest r for x in [lo, hi]."""
        return 0, self.q - 1 - (-self.q * hi >> self.bits) + self.slack * self.q


@memo(maxsize=256)
def prove_shoup(q: int, bits: int, slack: int = 0) -> ShoupLemma:
    import z3

    r_ = 1 << bits
    if (2 + slack) * q > r_:
        raise LemmaError(f"Shoup product mod {q}: {2 + slack}q > 2^{bits}, the low products cannot hold r")
    x, w, wp, quotient = z3.Ints("x w wp Q")
    solver = z3.Solver()
    solver.set("timeout", SMT_TIMEOUT_MS)
    solver.add(0 <= x, x < r_, 0 <= w, w < q, wp * q <= w * r_, w * r_ < wp * q + q,
               quotient * r_ <= x * wp, x * wp < quotient * r_ + (1 + slack) * r_)
    r = x * w - quotient * q
    solver.add(z3.Or(r < 0, r * r_ >= q * (r_ + x) + slack * q * r_))
    verdict = smt.check(solver)
    if verdict != z3.unsat:
        why = "not proven within the time limit" if verdict == z3.unknown else f"fails for {solver.model()}"
        raise LemmaError(f"Shoup product mod {q} on {bits}-bit lanes: {why}")
    return ShoupLemma(q, bits, slack)
