"""Lemmas read off an idiom's shape, proven without a solver (`lemmas.prove`
takes them first on lanes too wide to run every input).

- A quotient's (Barrett, freeze): y = x - q*t(x) with t non-decreasing,
  then perhaps q added where negative. The runs of inputs sharing one t
  give the exact range over any inputs and show that x - q*t(x) never
  leaves the lane, so the lane's wrapping product and subtraction give it
  exactly (congruent to x).
- A split's (special forms): x = h*2^a + l (h = x >> a, l = x & (2^a - 1))
  and y = l + c*h from shifts, adds and subtractions, c = 2^a mod q: in a
  ring mod 2^W those give l + c*h up to a multiple of 2^W, so exactly where
  that stays in the lane, which its range over every input shows.

Both give exact ranges, as the SMT solver's would, in milliseconds where the
solver took seconds on 32-bit lanes. They import nothing of the lemmas module
(which imports them): an idiom is read through its fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class Idiom(Protocol):
    """What these lemmas read of an idiom (`lemmas.ScalarIdiom` is one)."""

    kind: str
    q: int
    steps: tuple
    bits: int
    signed: bool

    @property
    def lane(self) -> tuple[int, int]: ...

MAX_RUNS = 1 << 16  # values of a quotient the runs of equal t are followed for (2^32 / q for q near 2^20: 4096)


@dataclass(frozen=True, eq=False)
class QuotientLemma:
    """y = x - q*t(x) exactly, with t non-decreasing in x (both proven, see
    `_quotient_lemma` and `leaving_input`), and with `fix` then q added where
    y is negative. On each run of inputs sharing one t = T, y = x - q*T
    climbs by one per input, so its values there are exactly [a_T - q*T,
    b_T - q*T] for the run's ends a_T, b_T: the exact range over any inputs
    is found from the runs alone (a few thousand for a 32-bit lane and q
    near 2^20), found by bisection."""

    idiom: Idiom
    quotient: Idiom  # the steps computing t from x
    fix: bool
    _ranges: dict = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return self.idiom.kind

    @property
    def q(self) -> int:
        return self.idiom.q

    def _runs(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each value T that t takes on inputs in [lo, hi] (inside the lane),
        with the first and last such input."""
        t = lambda xs: self.quotient.run(np.asarray(xs, dtype=np.int64))
        t_lo, t_hi = int(t([lo])[0]), int(t([hi])[0])
        ts = np.arange(t_lo, t_hi + 1, dtype=np.int64)
        # a_T: the first input with t(x) >= T (t is non-decreasing), by bisection for all T at once
        left, right = np.full(ts.shape, lo, dtype=np.int64), np.full(ts.shape, hi + 1, dtype=np.int64)
        while np.any(left < right):
            mid = (left + right) >> 1
            below = t(np.minimum(mid, hi)) < ts
            below &= mid <= hi
            left, right = np.where(below & (left < right), mid + 1, left), np.where(~below & (left < right), mid, right)
        starts = left
        ends = np.append(starts[1:] - 1, hi)
        keep = starts <= ends  # values of T that some input takes
        return ts[keep], starts[keep], ends[keep]

    @property
    def few_runs(self) -> bool:
        """Whether t takes at most MAX_RUNS values over the lane (what `leaving_input` examines)."""
        half = 1 << (self.idiom.bits - 1)
        t_lo, t_hi = (int(v) for v in self.quotient.run(np.array([-half, half - 1], dtype=np.int64)))
        return t_hi - t_lo < MAX_RUNS

    def leaving_input(self) -> int | None:
        """An input whose x - q*t(x) leaves the lane, or None: then the lane's
        wrapping products and subtraction give y = x - q*t(x) exactly for
        every input (congruent to x), the lane's ends of each run checked."""
        half = 1 << (self.idiom.bits - 1)
        ts, starts, ends = self._runs(-half, half - 1)
        low, high = starts - self.q * ts < -half, ends - self.q * ts > half - 1
        if low.any():
            return int(starts[low][0])
        return int(ends[high][0]) if high.any() else None

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        found = self._ranges.get((lo, hi))
        if found is None:
            half = 1 << (self.idiom.bits - 1)
            ts, starts, ends = self._runs(max(lo, -half), min(hi, half - 1))
            r_lo, r_hi = starts - self.q * ts, ends - self.q * ts
            if not self.fix:
                found = (int(r_lo.min()), int(r_hi.max()))
            else:  # runs below zero move up by q; a run across zero gives 0 .. and .. q - 1
                neg, pos = r_hi < 0, r_lo >= 0
                across = ~neg & ~pos
                lows = np.concatenate([r_lo[pos], r_lo[neg] + self.q, np.zeros(int(across.sum()), dtype=np.int64)])
                highs = np.concatenate([r_hi[pos], r_hi[neg] + self.q, np.maximum(r_hi[across], self.q - 1)])
                found = (int(lows.min()), int(highs.max()))
            self._ranges[(lo, hi)] = found
        return found


def quotient_lemma(idiom: Idiom) -> QuotientLemma | None:
    """The idiom as y = x - q*t(x) (Barrett), optionally followed by q added
    where y is negative (freeze), when that is its shape: the subtraction is
    exact where `leaving_input` finds none (or the solver shows x - t*q does
    not wrap) and t is non-decreasing
    (each step computing it is an arithmetic shift, an addition of a constant
    or a multiplication, low or high half, by a positive one, none of which
    wraps over the whole lane by interval arithmetic). None otherwise."""
    bits, q, steps = idiom.bits, idiom.q, idiom.steps
    fix = len(steps) >= 3 and [s[0] for s in steps[-3:]] == ["sra", "and", "add"]
    core = steps[:-3] if fix else steps
    if len(core) < 3 or core[-1][:3] != ("sub", core[-1][1], "x") or core[-2][0] != "mullo" or \
            core[-1][3] != core[-2][1] or q not in core[-2][2:]:
        return None
    r = core[-1][1]
    if fix:
        (_, s, a, k), (_, m, b, c), (_, _, d, e) = steps[-3:]
        if a != r or k != bits - 1 or {b, c} != {s, q} or {d, e} != {r, m}:
            return None
    t_name = next(v for v in core[-2][2:] if v != q)
    quotient = core[:-2]
    if not quotient or quotient[-1][1] != t_name:
        return None
    half = 1 << (bits - 1)
    span = {"x": (-half, half - 1)}
    for op, dst, a, b in quotient:
        if a not in span or not isinstance(b, int):
            return None
        lo, hi = span[a]
        if op == "sra":
            lo, hi = lo >> b, hi >> b
        elif op == "add":
            lo, hi = lo + b, hi + b
        elif op == "mullo" and b > 0:
            lo, hi = lo * b, hi * b
        elif op == "mulhi" and b > 0:
            lo, hi = (lo * b) >> bits, (hi * b) >> bits
        else:
            return None
        if lo < -half or hi > half - 1:
            return None
        span[dst] = (lo, hi)
    # the fix adds q where y is negative (its steps say so): that cannot wrap, and keeps the congruence
    return QuotientLemma(idiom, dataclasses.replace(idiom, steps=quotient), fix)


@dataclass(frozen=True, eq=False)
class SplitLemma:
    """y = l + c*h exactly for x = h*2^`split` + l (h = x >> split,
    arithmetic; 0 <= l < 2^split), c = 2^split mod q (see `split_lemma`). For
    each h, y grows with l; over the h strictly inside an input range l
    takes every value and c*h is linear: the exact range is at the ends."""

    idiom: Idiom
    split: int
    c: int

    @property
    def kind(self) -> str:
        return self.idiom.kind

    @property
    def q(self) -> int:
        return self.idiom.q

    def range_for(self, lo: int, hi: int) -> tuple[int, int]:
        least, most = self.idiom.lane
        lo, hi = max(lo, least), min(hi, most)
        a, mask = self.split, (1 << self.split) - 1
        h_lo, h_hi = lo >> a, hi >> a
        pieces = [(h_lo, lo & mask, hi & mask if h_lo == h_hi else mask)]
        if h_hi > h_lo:
            pieces.append((h_hi, 0, hi & mask))
        if h_hi - h_lo >= 2:
            pieces += [(h_lo + 1, 0, mask), (h_hi - 1, 0, mask)]
        return min(self.c * h + l for h, l, _ in pieces), max(self.c * h + l for h, _, l in pieces)


def split_lemma(idiom: Idiom) -> SplitLemma | None:
    """The idiom as a split (h = sra(x, a), l = and(x, 2^a - 1)) followed by
    shifts left, additions and subtractions of those values, summing to
    l + c*h with c = 2^a mod q, whose range over the lane stays inside it;
    None otherwise (the solver then decides)."""
    steps = idiom.steps
    if not idiom.signed or len(steps) < 3:
        return None
    (op1, h, x1, a), (op2, l, x2, mask) = steps[:2]
    if (op1, x1, op2, x2) != ("sra", "x", "and", "x") or not isinstance(a, int) or not 0 < a < idiom.bits or \
            mask != (1 << a) - 1:
        return None
    terms = {l: (1, 0), h: (0, 1)}  # each value as its coefficients of l and h
    for op, dst, u, v in steps[2:]:
        if u not in terms:
            return None
        if op == "sll" and isinstance(v, int):
            terms[dst] = (terms[u][0] << v, terms[u][1] << v)
        elif op in ("add", "sub") and v in terms:
            sign = 1 if op == "add" else -1
            terms[dst] = (terms[u][0] + sign * terms[v][0], terms[u][1] + sign * terms[v][1])
        else:
            return None
    of_l, c = terms[steps[-1][1]]
    if of_l != 1 or (c - (1 << a)) % idiom.q:
        return None
    lemma = SplitLemma(idiom, a, c)
    lo, hi = lemma.range_for(*idiom.lane)
    return lemma if idiom.lane[0] <= lo and hi <= idiom.lane[1] else None
