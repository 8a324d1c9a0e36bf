"""GF(2)[x] facts the GF(2^m) kernels are built from, derived from the exponents.

Everything the kernel builders need to know about the field polynomial lives
here, as plain numbers: how the high part of a product folds back (which
64-bit chunks of f - x^m to multiply by, how many folds a degree bound needs,
the alignment shift) and the Itoh–Tsujii addition chain. The builders (mul.py,
reduce.py, msqr.py, kernels.py) turn these into instructions; nothing there does polynomial arithmetic of its own.

`msqr_columns` (a matrix of m columns per (f, k)) is a registered memo
(`core.compile_cache.memo`), bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.compile_cache import memo


@dataclass(frozen=True)
class Chunk:
    """The terms of g = f - x^m with exponent in [64q, 64q + 64), as a 64-bit
    word `bits` (bit r set for the term x^(64q + r))."""

    q: int
    bits: int

    @property
    def single_shift(self) -> int | None:
        """r when the chunk is the single term x^(64q + r), else None."""
        return self.bits.bit_length() - 1 if self.bits & (self.bits - 1) == 0 else None


@dataclass(frozen=True)
class Fold:
    """One pass c -> (c mod x^m) + floor(c / x^m) * g.

    The input has degree at most `bound_in`; floor(c / x^m) spans `hi_words`
    words; the result has degree at most `bound_out`.
    """

    bound_in: int
    hi_words: int
    bound_out: int


@dataclass(frozen=True)
class FieldPlan:
    m: int
    poly: tuple[int, ...]
    limbs: int  # n = ceil(m / 64)
    slack: int  # s = 64 n - m: shifting left by s puts bit m on a word boundary
    chunks: tuple[Chunk, ...]  # g = f - x^m split into words, low to high
    top_middle: int  # largest exponent of g

    @property
    def low_mask(self) -> int:
        """Bits of word n-1 below m."""
        return (1 << (self.m - 64 * (self.limbs - 1))) - 1


def field_plan(m: int, poly: tuple[int, ...]) -> FieldPlan:
    n = (m + 63) // 64
    g = poly[1:]
    by_q: dict[int, int] = {}
    for e in g:
        by_q[e // 64] = by_q.get(e // 64, 0) | (1 << (e % 64))
    chunks = tuple(Chunk(q, by_q[q]) for q in sorted(by_q))
    return FieldPlan(m, tuple(poly), n, 64 * n - m, chunks, max(g))


def lazy_plan(plan: FieldPlan) -> FieldPlan:
    """The plan of reduction modulo x^s f = x^(64 n) + x^s g, s the slack.

    x^s f is a multiple of f, so a remainder modulo it is congruent to the
    input modulo f: this is the lazy (partial) reduction, to degree
    < 64 n. Its folds split at the word boundary x^(64 n), so no alignment
    shift is needed, and its result still needs one short fold (`freeze`)
    to become canonical.
    """
    s = plan.slack
    return field_plan(64 * plan.limbs, tuple(e + s for e in plan.poly))


def folds(plan: FieldPlan, bound: int) -> tuple[Fold, ...]:
    """The folds that bring a polynomial of degree <= `bound` below x^m.

    Each fold turns degree D into at most max(m - 1, D - m + k1), k1 the top
    middle exponent, so it shrinks the excess by m - k1 every time.
    """
    m, k1 = plan.m, plan.top_middle
    out = []
    d = bound
    while d >= m:
        hi_bits = d - m + 1
        nxt = max(m - 1, d - m + k1)
        out.append(Fold(d, (hi_bits + 63) // 64, nxt))
        d = nxt
    return tuple(out)


def shift_terms(plan: FieldPlan, bound: int) -> tuple[tuple[int, int], ...]:
    """c mod f for c of degree <= bound as c + sum of (c & bits >= b) >> t
    over the returned (b, t), then cut below x^m.

    One fold adds H g, H = (c & bits >= m) >> m: for each term x^e of
    g = f - x^m, H x^e = (c & bits >= m) >> (m - e) exactly, since the bits
    it drops are zero. A term (b, t) of degree bound - t >= m folds the same
    way: its bits from x^m up are (c & bits >= max(b, m + t)) >> t, and they
    add (b', t + m - e) for each e. Terms met twice cancel.
    """
    out: dict[tuple[int, int], int] = {}
    todo = [(plan.m, plan.m - e) for e in plan.poly[1:]]
    while todo:
        b, t = todo.pop()
        out[b, t] = out.get((b, t), 0) ^ 1
        if bound - t >= plan.m:
            todo += [(max(b, plan.m + t), t + plan.m - e) for e in plan.poly[1:]]
    return tuple(sorted(k for k, odd in out.items() if odd))


def limb_from(b: int, limb: int) -> int:
    """The bits of limb `limb` at x^b and above, as a 64-bit mask."""
    return ((1 << 64) - 1) ^ ((1 << min(64, max(0, b - 64 * limb))) - 1)


def term_sources(b: int, t: int, limb: int) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Where output limb `limb` of the term (b, t) of `shift_terms` comes
    from: limbs limb + t // 64 (lo) and the next (hi) of c & bits >= b,
    shifted right together by t mod 64 (hi is None when that is 0), each as
    (mask bound, first limb). A bound is 0 where the mask's bits are shifted
    out anyway: in lo below its lowest t mod 64 bits, in hi (whose lowest
    bits are kept) when b lies below hi's first limb."""
    first, r = divmod(t, 64)
    lo = (b if b > 64 * (limb + first) + r else 0, limb + first)
    hi = (b if b > 64 * (limb + first + 1) else 0, limb + first + 1) if r else None
    return lo, hi


def itoh_tsujii_chain(m: int) -> tuple[tuple[str, int], ...]:
    """Steps computing b_e = a^(2^e - 1) for e = m - 1 from b_1 = a.

    Reading the bits of m - 1 from the top: ("double", k) takes b_k to
    b_2k = b_k^(2^k) * b_k; ("inc", k) takes b_k to b_(k+1) = b_k^2 * a.
    The inverse is then b_(m-1)^2, m - 1 squarings in all.
    """
    e = m - 1
    steps: list[tuple[str, int]] = []
    k = 1
    for bit in bin(e)[3:]:
        steps.append(("double", k))
        k *= 2
        if bit == "1":
            steps.append(("inc", k))
            k += 1
    assert k == e
    return tuple(steps)


def _clmul(a: int, b: int) -> int:
    r = 0
    while b:
        low = b & -b
        r ^= a << (low.bit_length() - 1)
        b ^= low
    return r


def _rem(c: int, f: int, m: int) -> int:
    while c.bit_length() > m:
        c ^= f << (c.bit_length() - 1 - m)
    return c


@memo(maxsize=64)
def msqr_columns(m: int, poly: tuple[int, ...], k: int) -> tuple[int, ...]:
    """The matrix of a -> a^(2^k) mod f, column by column.

    Squaring is GF(2)-linear, so a^(2^k) = sum over the set bits j of a of
    (x^j)^(2^k) = y^j with y = x^(2^k) mod f: column j is y^j mod f.
    """
    f = sum(1 << e for e in poly)
    y = 2
    for _ in range(k):
        y = _rem(_clmul(y, y), f, m)
    cols = [1]
    for _ in range(m - 1):
        cols.append(_rem(_clmul(cols[-1], y), f, m))
    return tuple(cols)
