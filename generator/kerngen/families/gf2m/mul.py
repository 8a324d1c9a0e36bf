"""Products in GF(2)[x] with PCLMULQDQ, as 128-bit terms at limb offsets.

Products are formed as 128-bit *terms* placed at limb offsets; terms at odd
offsets straddle two pairs and are merged with one `palignr` per pair at the
end (`vec.to_pairs`), so no product is ever shifted on its own. How blocks
are multiplied (three or four carry-less products, Karatsuba splits) is a
`MulConfig`, chosen per m by measurement.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ...ir.instr import VReg
from .vec import Pairs, Terms, normalize


@dataclass(frozen=True)
class MulConfig:
    """How products are formed.

    base: "k3" multiplies two 128-bit blocks with three carry-less products
    (Karatsuba inside the block), "s4" with four.
    karatsuba_min: block count from which operands are split in halves
    recursively (0: schoolbook over blocks at every size).
    single_shift: a chunk of g that is one term x^r is folded with two shifts
    per pair instead of one carry-less product per word.
    """

    base: str = "k3"
    karatsuba_min: int = 0
    single_shift: bool = True


# Chosen by timing the variants side by side in one kg_bench run (an Intel
# machine with VPCLMULQDQ, then AMD Zen 3 with the one-pass reduction): for
# m = 409 one carry-less product per word folds x^87 faster than shifts, for
# m = 233 shifts beat products and Karatsuba over the two 128-bit blocks (12
# products) beats schoolbook and the three-product forms; for 409 and 571
# three-product blocks split by Karatsuba are the fastest; for 163 and 283 the
# choices are within 3% of the best (docs/performance.md, "Measurements behind
# design choices"). Other m use the rule in `default_config`.
_MEASURED: dict[int, MulConfig] = {
    163: MulConfig("s4", 0, True),
    233: MulConfig("s4", 2, True),
    283: MulConfig("k3", 0, True),
    409: MulConfig("k3", 2, True),
    571: MulConfig("k3", 2, True),
}


def default_config(m: int) -> MulConfig:
    if m in _MEASURED:
        return _MEASURED[m]
    n = (m + 63) // 64
    blocks = (n + 1) // 2
    return MulConfig("k3", 3 if blocks >= 3 else 0, True)


@dataclass
class _Blk:
    """A 128-bit block of an operand: `width` limbs (1: upper lane is zero)."""

    reg: VReg
    width: int
    folded: VReg | None = None  # lane 0 holds lane0 ^ lane1 (Karatsuba middle factor)


def _blocks(pairs: list[VReg], nwords: int) -> list[_Blk]:
    return [_Blk(r, 2 if 2 * k + 1 < nwords else 1) for k, r in enumerate(pairs)]


def _folded(v: Pairs, blk: _Blk) -> VReg:
    if blk.folded is None:
        blk.folded = v.xor(blk.reg, v.swap(blk.reg))
    return blk.folded


def _mul_blocks(v: Pairs, a: list[_Blk], b: list[_Blk], cfg: MulConfig) -> dict[int, VReg]:
    """a * b as normalized terms (one register per limb offset)."""
    nb = len(a)
    assert len(b) == nb
    if cfg.karatsuba_min and nb >= max(2, cfg.karatsuba_min):
        h = (nb + 1) // 2
        a0, a1, b0, b1 = a[:h], a[h:], b[:h], b[h:]

        def sums(x0, x1):
            return [_Blk(v.xor(x0[i].reg, x1[i].reg), max(x0[i].width, x1[i].width)) if i < len(x1)
                    else x0[i] for i in range(h)]

        d0 = _mul_blocks(v, a0, b0, cfg)
        d2 = _mul_blocks(v, a1, b1, cfg)
        d1 = _mul_blocks(v, sums(a0, a1), sums(b0, b1), cfg)
        # a0 b0 + (d1 + a0 b0 + a1 b1) x^128h + a1 b1 x^256h, term by term;
        # d0[2h + o] + d2[o] lands both at 2h + o and at 4h + o: xored once
        terms: Terms = defaultdict(list)
        shared = {o: v.xor(d0[2 * h + o], d2[o]) for o in d2 if 2 * h + o in d0}
        for o, r in d0.items():
            if o - 2 * h not in shared:
                terms[o].append(r)
                terms[o + 2 * h].append(r)
        for o, r in d1.items():
            terms[o + 2 * h].append(r)
        for o, r in d2.items():
            if o not in shared:
                terms[o + 2 * h].append(r)
                terms[o + 4 * h].append(r)
        for o, r in shared.items():
            terms[o + 2 * h].append(r)
            terms[o + 4 * h].append(r)
        return normalize(v, terms)
    terms = defaultdict(list)
    lo_s: Terms = defaultdict(list)
    hi_s: Terms = defaultdict(list)
    mid_s: Terms = defaultdict(list)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            o = 2 * (i + j)
            if x.width == 2 and y.width == 2:
                if cfg.base == "k3":
                    lo_s[i + j].append(v.clmul(x.reg, y.reg, 0x00))
                    hi_s[i + j].append(v.clmul(x.reg, y.reg, 0x11))
                    mid_s[i + j].append(v.clmul(_folded(v, x), _folded(v, y), 0x00))
                else:
                    terms[o].append(v.clmul(x.reg, y.reg, 0x00))
                    terms[o + 1].append(v.clmul(x.reg, y.reg, 0x01))
                    terms[o + 1].append(v.clmul(x.reg, y.reg, 0x10))
                    terms[o + 2].append(v.clmul(x.reg, y.reg, 0x11))
            elif x.width == 2:
                terms[o].append(v.clmul(x.reg, y.reg, 0x00))
                terms[o + 1].append(v.clmul(x.reg, y.reg, 0x01))
            elif y.width == 2:
                terms[o].append(v.clmul(x.reg, y.reg, 0x00))
                terms[o + 1].append(v.clmul(x.reg, y.reg, 0x10))
            else:
                terms[o].append(v.clmul(x.reg, y.reg, 0x00))
    for s in sorted(lo_s):
        lo, hi, mid = v.tree(lo_s[s]), v.tree(hi_s[s]), v.tree(mid_s[s])
        terms[2 * s].append(lo)
        terms[2 * s + 1] += [mid, lo, hi]
        terms[2 * s + 2].append(hi)
    return normalize(v, terms)


def square(v: Pairs, pairs: list[VReg], nwords: int, spread: bool = False) -> list[VReg]:
    """Squares land on even limb offsets, so each limb's square is one pair.
    They are made from the top limb down: the reduction folds the top first,
    so its products start the longest chain. `spread`: by spreading bits
    (`Pairs.squares`), not by carry-less products."""
    if spread:
        top_first = {}
        for k in reversed(range(len(pairs))):
            top_first.update(zip((2 * k, 2 * k + 1), v.squares(pairs[k], both=2 * k + 1 < nwords)))
    else:
        top_first = {i: v.clmul(pairs[i // 2], pairs[i // 2], 0x11 * (i & 1)) for i in reversed(range(nwords))}
    return [top_first[i] for i in range(nwords)]


def multiply(v: Pairs, x: list[VReg], y: list[VReg], nwords: int, cfg: MulConfig) -> dict[int, VReg]:
    """x * y for elements of `nwords` limbs given as pairs, as normalized terms."""
    return _mul_blocks(v, _blocks(x, nwords), _blocks(y, nwords), cfg)
