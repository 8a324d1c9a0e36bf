"""Lemmas: exact facts about reduction idioms and modular products, proven.

An idiom is a short instruction sequence on `bits`-bit lanes with broadcast
constants (Barrett, special-form, ...), written in the instruction table's
width-neutral names and run through the table's own lane semantics. Its
lemma gives the exact output range for any input range and states that
the output is congruent to the input mod q. The proof method follows the
width: for 16-bit lanes the idiom is run on all 2^16 inputs at once (one
numpy lane per input); wider lanes have too many inputs to run, so an SMT
solver proves congruence for all of them and finds the extremes of the
output for each input range asked. The verifier and the bounds stage ask
this module, so neither trusts a hand-derived range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..ir.ops import Arith, by_width, spec, unsigned, wrap

EXHAUSTIVE_BITS = 16  # widest lanes whose every input is run


class LemmaError(Exception):
    pass


def _arith(name: str, bits: int) -> Arith:
    a = spec(by_width(name, bits)).arith
    if a is None:
        raise LemmaError(f"{name} has no element-wise semantics on {bits}-bit lanes")
    return a


@dataclass(frozen=True)
class ScalarIdiom:
    """An idiom in lane form: steps (op, dst, src1, src2) over names, ops by
    their width-neutral names ("add", "mulhi", "sra", ...); 'x' is the input,
    constants are ints, the last step's dst is the output."""

    kind: str
    q: int
    steps: tuple[tuple[str, str, str | int, str | int], ...]
    bits: int

    def run(self, x):
        """The output for input x: an int, or a numpy array of inputs at once."""
        env = {"x": x}
        for op, dst, a, b in self.steps:
            env[dst] = _arith(op, self.bits).exact(_val(env, a), _val(env, b), self.bits)
        return env[self.steps[-1][1]]

    def symbolic(self, z3, x):
        """The output as a z3 bit-vector expression of input x."""
        env = {"x": x}
        for op, dst, a, b in self.steps:
            immediate = spec(by_width(op, self.bits)).slots[2].kind == "i"  # shift counts stay integers
            va, vb = _val(env, a), _val(env, b)
            va = z3.BitVecVal(va, self.bits) if isinstance(va, int) else va
            vb = z3.BitVecVal(vb, self.bits) if isinstance(vb, int) and not immediate else vb
            env[dst] = _arith(op, self.bits).smt(z3, va, vb, self.bits)
        return env[self.steps[-1][1]]


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
    bits: int
    outputs: np.ndarray  # output for input x at index x + 2^(bits-1)
    _ranges: dict = field(default_factory=dict, repr=False)

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            half = 1 << (self.bits - 1)
            chunk = self.outputs[max(lo, -half) + half:min(hi, half - 1) + half + 1]  # a lane holds no more
            found = self._ranges[(lo, hi)] = (int(chunk.min()), int(chunk.max()))
        return found


@dataclass(frozen=True, eq=False)
class SmtLemma(Lemma):
    idiom: ScalarIdiom
    _ranges: dict = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return self.idiom.kind

    @property
    def q(self) -> int:
        return self.idiom.q

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            import z3

            bits = self.idiom.bits
            x = z3.BitVec("x", bits)
            y = self.idiom.symbolic(z3, x)
            ends = []
            for goal in ("minimize", "maximize"):
                opt = z3.Optimize()
                opt.add(x >= lo, x <= hi)
                v = z3.BV2Int(y + (1 << (bits - 1)))  # signed value, shifted to be non-negative
                getattr(opt, goal)(v)
                if opt.check() != z3.sat:
                    raise LemmaError(f"{self.kind} mod {self.q}: no input in [{lo}, {hi}]")
                ends.append(opt.model().eval(v).as_long() - (1 << (bits - 1)))
            found = self._ranges[(lo, hi)] = (ends[0], ends[1])
        return found


@lru_cache(maxsize=None)
def prove(idiom: ScalarIdiom, method: str | None = None) -> Lemma:
    """Prove the idiom congruent to its input for every input; refuse it
    otherwise. `method` defaults by width: "exhaustive" up to 16 bits,
    "smt" above."""
    method = method or ("exhaustive" if idiom.bits <= EXHAUSTIVE_BITS else "smt")
    if method == "exhaustive":
        half = 1 << (idiom.bits - 1)
        x = np.arange(-half, half, dtype=np.int64)
        y = idiom.run(x)
        bad = np.nonzero((y - x) % idiom.q)[0]
        if bad.size:
            i = int(bad[0])
            raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {int(y[i])} for input {int(x[i])} is not congruent")
        return ExhaustiveLemma(idiom.kind, idiom.q, idiom.bits, y)
    import z3

    bits = idiom.bits
    x = z3.BitVec("x", bits)
    y = idiom.symbolic(z3, x)
    diff = z3.SignExt(1, y) - z3.SignExt(1, x)  # one bit wider: the difference cannot wrap
    solver = z3.Solver()
    solver.add(z3.SRem(diff, z3.BitVecVal(idiom.q, bits + 1)) != 0)
    if solver.check() != z3.unsat:
        m = solver.model()
        xi = wrap(m.eval(x).as_long(), bits)
        raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {wrap(m.eval(y).as_long(), bits)} for input {xi} "
                         f"is not congruent")
    return SmtLemma(idiom)


@dataclass(frozen=True)
class MontgomeryLemma:
    """For every signed `bits`-bit a, b, with t = lo(a * lo(b * q^-1)) and
    r = hi(a*b) - hi(t*q) computed in `bits` bits:
      (1) lo(t*q) = lo(a*b), and
      (2) the subtraction of the high halves never wraps.
    Writing a*b = H1*2^bits + L and t*q = H2*2^bits + L (same L by (1))
    gives r * 2^bits = a*b - t*q exactly (by (2)), hence r = a*b*2^-bits mod
    q: the Montgomery product, with a variable or a constant b. Both facts
    are proven by an SMT solver over all input pairs (too many to run), once
    per q. The range of r is not part of the lemma: the verifier derives it."""

    q: int
    qinv: int
    bits: int


@lru_cache(maxsize=None)
def prove_montgomery(q: int, bits: int, qinv: int | None = None) -> MontgomeryLemma:
    """`qinv` defaults to q^-1 mod 2^bits; passing another value lets tests watch a false lemma fail."""
    import z3

    qinv = wrap(pow(q, -1, 1 << bits), bits) if qinv is None else qinv
    a, b = z3.BitVec("a", bits), z3.BitVec("b", bits)
    t = a * (b * z3.BitVecVal(qinv % (1 << bits), bits))  # two low-half multiplications
    qv = z3.BitVecVal(q, bits)
    wide = lambda v: z3.SignExt(bits, v)
    prod, tq = wide(a) * wide(b), wide(t) * z3.BitVecVal(q, 2 * bits)
    diff = wide(z3.Extract(2 * bits - 1, bits, prod)) - wide(z3.Extract(2 * bits - 1, bits, tq))
    top = (1 << (bits - 1)) - 1
    for what, counter in (("low halves differ", t * qv != a * b),
                          ("high-half subtraction wraps", z3.Or(diff > top, diff < -top - 1))):
        solver = z3.Solver()
        solver.add(counter)
        if solver.check() != z3.unsat:
            m = solver.model()
            raise LemmaError(f"Montgomery product mod {q}: {what} for a = {m[a]}, b = {m[b]}")
    return MontgomeryLemma(q, qinv, bits)


@lru_cache(maxsize=None)
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
