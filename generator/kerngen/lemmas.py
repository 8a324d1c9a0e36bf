"""Reduction lemmas: exact facts about reduction idioms, proven by exhaustion.

An idiom is a short instruction sequence on 16-bit lanes with broadcast
constants (Barrett, special-form, ...). Its lemma gives the exact output range
for an input range and states that the output is congruent to the input mod q;
both are established by running the idiom's own instructions on every one of
the 2^16 possible inputs. The verifier and the bounds stage ask this module,
so neither trusts a hand-derived range.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .numtheory import signed_word

_MASK = 0xFFFF


def _u(x):
    return x & _MASK


def _s(x):
    """Wrap to a signed 16-bit word; works on ints and on numpy arrays alike."""
    return ((x + 0x8000) & _MASK) - 0x8000


# Lane semantics of the 16-bit operations an idiom may use: (a, b) -> result, signed words.
SCALAR_OPS = {
    "vpaddw": lambda a, b: _s(a + b),
    "vpsubw": lambda a, b: _s(a - b),
    "vpmullw": lambda a, b: _s(a * b),
    "vpmulhw": lambda a, b: (a * b) >> 16,
    "vpmulhuw": lambda a, b: _s((_u(a) * _u(b)) >> 16),
    "vpmulhrsw": lambda a, b: _s(((a * b) >> 14) + 1 >> 1),
    "vpsraw": lambda a, k: a >> k,
    "vpsrlw": lambda a, k: _s(_u(a) >> k),
    "vpsllw": lambda a, k: _s(a << k),
    "vpand": lambda a, b: _s(a & b),
    "vpor": lambda a, b: _s(a | b),
    "vpxor": lambda a, b: _s(a ^ b),
}


@dataclass(frozen=True)
class ScalarIdiom:
    """An idiom in lane form: steps (op, dst, src1, src2) over names; 'x' is the
    input, constants are ints, the last step's dst is the output."""

    kind: str
    q: int
    steps: tuple[tuple[str, str, str | int, str | int], ...]

    def run(self, x: int) -> int:
        env = {"x": x}
        val = lambda s: s if isinstance(s, int) else env[s]
        for op, dst, a, b in self.steps:
            env[dst] = SCALAR_OPS[op](val(a), val(b))
        return env[self.steps[-1][1]]


@dataclass(frozen=True)
class Lemma:
    kind: str
    q: int
    outputs: tuple[int, ...]  # output for input x at index x + 32768

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        key = (self.kind, self.q, id(self.outputs), lo, hi)
        found = _RANGES.get(key)
        if found is None:
            chunk = self.outputs[lo + 32768:hi + 32769]
            found = _RANGES[key] = (min(chunk), max(chunk))
        return found


_RANGES: dict[tuple, tuple[int, int]] = {}


class LemmaError(Exception):
    pass


@lru_cache(maxsize=None)
def prove(idiom: ScalarIdiom) -> Lemma:
    """Run the idiom on all 2^16 inputs at once (one numpy lane per input);
    refuse it unless every output is congruent to its input."""
    x = np.arange(-32768, 32768, dtype=np.int64)
    y = idiom.run(x)
    bad = np.nonzero((y - x) % idiom.q)[0]
    if bad.size:
        i = int(bad[0])
        raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {int(y[i])} for input {int(x[i])} is not congruent")
    return Lemma(idiom.kind, idiom.q, tuple(int(v) for v in y))


@dataclass(frozen=True)
class MontgomeryLemma:
    """For every int16 a, b, with t = lo16(a * lo16(b * q^-1)) and r =
    hi16(a*b) - hi16(t*q) computed in 16 bits:
      (1) lo16(t*q) = lo16(a*b), and
      (2) the subtraction of the high halves never wraps.
    Writing a*b = H1*2^16 + L and t*q = H2*2^16 + L (same L by (1)) gives
    r * 2^16 = a*b - t*q exactly (by (2)), hence r = a*b*2^-16 mod q: the
    Montgomery product, with a variable or a constant b. Both facts are proven
    by an SMT solver over all 2^32 input pairs (too many to run), once per q.
    The range of r is not part of the lemma: the verifier derives it."""

    q: int
    qinv: int


@lru_cache(maxsize=None)
def prove_montgomery(q: int, qinv: int | None = None) -> MontgomeryLemma:
    """`qinv` defaults to q^-1 mod 2^16; passing another value lets tests watch a false lemma fail."""
    import z3

    qinv = signed_word(pow(q, -1, 1 << 16)) if qinv is None else qinv
    a, b = z3.BitVec("a", 16), z3.BitVec("b", 16)
    t = a * (b * z3.BitVecVal(qinv & 0xFFFF, 16))  # vpmullw twice: low halves
    q16 = z3.BitVecVal(q, 16)
    wide = lambda v: z3.SignExt(16, v)
    prod, tq = wide(a) * wide(b), wide(t) * z3.BitVecVal(q, 32)
    diff = wide(z3.Extract(31, 16, prod)) - wide(z3.Extract(31, 16, tq))
    for what, counter in (("low halves differ", t * q16 != a * b),
                          ("high-half subtraction wraps", z3.Or(diff > 32767, diff < -32768))):
        solver = z3.Solver()
        solver.add(counter)
        if solver.check() != z3.unsat:
            m = solver.model()
            raise LemmaError(f"Montgomery product mod {q}: {what} for a = {m[a]}, b = {m[b]}")
    return MontgomeryLemma(q, qinv)
