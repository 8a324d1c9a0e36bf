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

from .numtheory import signed_word

_MASK = 0xFFFF


def _u(x: int) -> int:
    return x & _MASK


def _s(x: int) -> int:
    return signed_word(x)


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
    """Run the idiom on all 2^16 inputs; refuse it unless every output is congruent."""
    outs = []
    for x in range(-32768, 32768):
        y = idiom.run(x)
        if (y - x) % idiom.q:
            raise LemmaError(f"{idiom.kind} mod {idiom.q}: output {y} for input {x} is not congruent")
        outs.append(y)
    return Lemma(idiom.kind, idiom.q, tuple(outs))
