"""Reduction modulo the field polynomial f, specialised to f.

The part above x^m is multiplied by g = f - x^m, chunk by 64-bit chunk of g
(see `plan`): a chunk equal to 1 is a plain xor, a single term x^r two
shifts, anything else one carry-less product per word. One form works on
register pairs; the other on 64-bit general registers, word by word from
the top (measured beside it).
"""

from __future__ import annotations

from collections import defaultdict

from ...ir.instr import ArgBase, Builder, GReg, Imm, Mem, VReg
from .mul import MulConfig
from .plan import Chunk, FieldPlan, folds, limb_from, shift_terms, term_sources
from .vec import Pairs, Terms, normalize, pair_at, to_pairs


def _top_mask(v: Pairs, plan: FieldPlan) -> Mem:
    """The limbs of x^m - 1 in the top pair of an element (all of its lower
    lane with n even; nothing of its upper lane with n odd)."""
    n = plan.limbs
    mask = ((1 << 64) - 1, plan.low_mask) if n % 2 == 0 else (plan.low_mask, 0)
    return v.const(f"gf2m_mask_{mask[0]:x}_{mask[1]:x}", mask,
                   comment=f"limbs of x^{plan.m} - 1 in pair {(n - 1) // 2}")


def _g_chunk(v: Pairs, plan: FieldPlan, ch: Chunk) -> Mem:
    return v.const(f"gf2m_g_{ch.bits:x}", (ch.bits, 0),
                   comment=f"terms x^{64 * ch.q}*(...) of f - x^{plan.m}, chunk {ch.q}")


def _by_products(ch: Chunk, cfg: MulConfig) -> bool:
    """Whether chunk `ch` of g is folded by carry-less products, one per
    word; otherwise it is 1 (a plain xor) or, with `single_shift`, one term
    (two shifts per pair, `_shift_terms`)."""
    return ch.bits != 1 and not (cfg.single_shift and ch.single_shift is not None)


def _shift_terms(v: Pairs, ch: Chunk, h: VReg) -> list[tuple[int, VReg]]:
    """h times chunk `ch` of g (not `_by_products`) as (limb offset from h's, term)."""
    if ch.bits == 1:
        return [(ch.q, h)]
    r = ch.single_shift
    return [(ch.q, v.sll(h, r)), (ch.q + 1, v.srl(h, 64 - r))]


def reduce_pairs(v: Pairs, plan: FieldPlan, pairs: list[VReg], bound: int, cfg: MulConfig) -> list[VReg]:
    """Pairs of a polynomial of degree <= bound -> pairs of its remainder mod f."""
    n, s = plan.limbs, plan.slack
    for fd in folds(plan, bound):
        p = list(pairs)

        def at(k):
            return p[k] if 0 <= k < len(p) else None

        # floor(c / x^m) = limbs n.. of c * x^s
        shifted: dict[int, VReg] = {}
        for k in range(n // 2, (n + fd.hi_words - 1) // 2 + 1):
            cur, prev = at(k), at(k - 1)
            if s == 0:
                if cur is not None:
                    shifted[k] = cur
                continue
            parts = []
            if cur is not None:
                parts.append(v.sll(cur, s))
            if cur is not None and prev is not None:
                carry = v.straddle(cur, prev)
            elif prev is not None:
                carry = v.down64(prev)
            else:
                carry = v.up64(cur)
            parts.append(v.srl(carry, 64 - s))
            shifted[k] = v.tree(parts)
        hi_pairs = []  # (register, limb offset of its lane 0 within floor(c / x^m))
        for k, r in shifted.items():
            j = 2 * k - n
            hi_pairs.append((v.down64(r), 0) if j < 0 else (r, j))
        words = [(shifted[(n + j) // 2], (n + j) & 1) for j in range(fd.hi_words)]
        terms: Terms = defaultdict(list)
        nlo = (n + 1) // 2
        for k in range(nlo):
            r = p[k]
            if k == nlo - 1 and (s or n % 2):
                r = v.and_(r, _top_mask(v, plan))
            terms[2 * k].append(r)
        for ch in plan.chunks:
            if _by_products(ch, cfg):
                g = _g_chunk(v, plan, ch)
                for j, (r, lane) in enumerate(words):
                    terms[j + ch.q].append(v.clmul(r, g, lane))
                continue
            for r, j in hi_pairs:
                for d, t in _shift_terms(v, ch, r):
                    terms[j + d].append(t)
        pairs = to_pairs(v, normalize(v, terms), min(fd.bound_out // 64 + 1, 2 * n))
    while len(pairs) < (n + 1) // 2:
        pairs.append(v.zero())
    return pairs[: (n + 1) // 2]


def gpr_reduce_streams(plan: FieldPlan) -> bool:
    """Whether the word-streaming GPR reduction applies: the fold of one word
    of floor(c / x^m) must land wholly below that word's own place above x^m
    (degree < 64 j + 63 + k1 < m + 64 j, i.e. k1 <= m - 64), so that one pass
    from the top word down performs every fold of `folds` at once."""
    return plan.top_middle <= plan.m - 64


def reduce_gpr(b: Builder, plan: FieldPlan, bound: int) -> None:
    """out = c mod f on 64-bit registers, c of degree <= bound read from
    argument 1, out written to argument 0.

    The words H_j (bits m + 64 j .. m + 64 j + 63 of c) of the plan's first
    fold are taken from the top down; each is multiplied by g = f - x^m chunk
    by chunk (bit r of chunk q: H_j << r into word j + q, H_j >> (64 - r) into
    word j + q + 1) as soon as it is final, so later folds happen on the way
    down instead of in separate passes (see `gpr_reduce_streams`). A word is
    loaded when first touched and a low word stored as soon as no lower H_j
    can reach it; words above x^m wait in registers from their first
    contribution until consumed, up to about n of them when g has a chunk
    above the first (the allocator cannot spill GPRs: `build` falls back to
    callee-saved registers, then to no GPR kernel). Every word of c is
    loaded before out's copy of it is written, so out may be c.
    """
    n, s = plan.limbs, plan.slack
    top = bound // 64  # limbs above are not read
    fd = folds(plan, bound)[0]
    span = max(ch.q for ch in plan.chunks) + 1  # words j .. j + span one H_j can reach
    acc: dict[int, GReg] = {}
    stored: set[int] = set()

    def word(w: int) -> GReg:
        if w not in acc:
            acc[w] = b.greg()
            b.emit("mov", acc[w], Mem(ArgBase(1), 8 * w, 8))
        return acc[w]

    def flush(above: int) -> None:
        # words below n-1 that no remaining fold can reach; n-1 waits for its mask
        for w in sorted(acc, reverse=True):
            if above < w < n - 1 and w not in stored:
                b.emit("mov_store", Mem(ArgBase(0), 8 * w, 8), acc.pop(w))
                stored.add(w)

    for j in reversed(range(fd.hi_words)):
        lo_w, hi_w = n + j - 1, n + j
        if s == 0:
            h = word(hi_w)
        elif hi_w > top:
            # the word above is zero: H_j is the top s bits of the one below
            h = b.greg()
            b.emit("mov", h, word(lo_w))
            b.emit("shr", h, Imm(64 - s))
        else:
            # word n+j is not needed again once H_j is formed: shift it in place
            h = word(hi_w)
            b.emit("shld", h, word(lo_w), Imm(s))
        acc.pop(hi_w, None)
        for ch in plan.chunks:
            for r in range(64):
                if not (ch.bits >> r) & 1:
                    continue
                dst = word(j + ch.q)
                if r == 0:
                    b.emit("xor", dst, h)
                    continue
                t = b.greg()
                b.emit("mov", t, h)
                b.emit("shl", t, Imm(r))
                b.emit("xor", dst, t)
                t = b.greg()
                b.emit("mov", t, h)
                b.emit("shr", t, Imm(64 - r))
                b.emit("xor", word(j + ch.q + 1), t)
        flush(j - 1 + span)
    if s:
        # the top s bits of word n-1 went into H_0 (and are the only bits there)
        # and takes no 64-bit immediate: the mask comes from memory
        mask = b.table(f"gf2m_mask64_{plan.low_mask:x}", 8, (plan.low_mask,),
                       comment=f"bits of limb {n - 1} below x^{plan.m}")
        b.emit("and", word(n - 1), Mem(mask, 0, 8))
    for w in reversed(range(n)):
        if w not in stored:
            b.emit("mov_store", Mem(ArgBase(0), 8 * w, 8), word(w))
            acc.pop(w)


def streams_by_pairs(plan: FieldPlan) -> bool:
    """Whether `reduce_stream` applies: the plan splits at a word boundary
    (no slack) and a folded pair lands wholly below itself and the pair
    under it, so each pair above x^m is final when the pass reaches it."""
    return plan.slack == 0 and max(ch.q for ch in plan.chunks) <= plan.limbs - 3


def reduce_stream(v: Pairs, plan: FieldPlan, pairs: list[VReg], cfg: MulConfig) -> list[VReg]:
    """Pairs of c (2 n limbs) -> pairs of c mod f, for a plan with
    `streams_by_pairs`: one pass from the top pair down.

    Each pair above x^m is multiplied by g as soon as everything folded
    into it has arrived, so every word is folded exactly once (a pass per
    fold, as in `reduce_pairs`, folds the words it brings down again).
    Contributions wait as terms at limb offsets; a pair is read out of
    them with the one `palignr` that `to_pairs` would use. With n odd the
    pair straddling x^m has its upper word folded alone (its other lane
    zero), which touches nothing it was read from.
    """
    n = plan.limbs
    acc: Terms = defaultdict(list)
    for k, r in enumerate(pairs):
        acc[2 * k].append(r)

    def term(o: int) -> VReg | None:
        r = v.tree(acc.pop(o, []))
        if r is not None:
            acc[o] = [r]
        return r

    def add(o: int, r: VReg, words: int) -> None:
        assert o + words <= consumed, f"a fold reaches limb {o + words - 1}, above x^m and read already"
        acc[o].append(r)

    consumed = 2 * len(pairs)  # limbs from here up have been folded
    for k in reversed(range(n // 2, len(pairs))):
        h = pair_at(v, {o: r for o in (2 * k - 1, 2 * k, 2 * k + 1) if (r := term(o)) is not None}, k)
        o, words = 2 * k - n, 2
        if o < 0:  # the pair straddling x^m: its upper word alone is folded
            h, o, words = v.down64(h), 0, 1
        consumed = max(n, 2 * k)
        for ch in plan.chunks:
            if _by_products(ch, cfg):
                g = _g_chunk(v, plan, ch)
                add(o + ch.q, v.clmul(h, g, 0x00), 2)
                if words == 2:
                    add(o + ch.q + 1, v.clmul(h, g, 0x01), 2)
                continue
            for d, t in _shift_terms(v, ch, h):
                add(o + d, t, words)
    out = to_pairs(v, {o: r for o in range(-1, n) if (r := term(o)) is not None}, n)
    if n % 2:  # the straddling pair's upper word was folded: clear it
        out[-1] = v.and_(out[-1], _top_mask(v, plan))
    return out


def shift_term(ops, lo, hi, r: int):
    """Limbs of a one-pass term (`plan.term_sources`): lo shifted right by r,
    the vacated top bits from the bottom of hi; either may be None (zero), and
    so is the result where both are. `ops`: `vec.Pairs` or `quad.Quad`."""
    if hi is None:
        return lo if lo is None or not r else ops.srl(lo, r)
    return ops.sll(hi, 64 - r) if lo is None else ops.shift_right_pair(lo, hi, r)


def one_pass_pays(plan: FieldPlan, bound: int) -> bool:
    """Whether `reduce_one_pass` adds no more terms than the folds one after
    another do (each fold one per term of g): so with trinomials whose middle
    term is far from x^m, which need a second full fold (233, 409: four terms
    either way, the one pass three xors shallower). With the pentanomials of
    small g the second fold touches a word or two, and the one pass's terms
    multiply (sixteen), and measured slower for m = 163; for 233 and 409 it is
    the faster (docs/performance.md, "Measurements behind design choices")."""
    return len(shift_terms(plan, bound)) <= len(folds(plan, bound)) * (len(plan.poly) - 1)


def reduce_one_pass(v: Pairs, plan: FieldPlan, pairs: list[VReg], bound: int) -> list[VReg]:
    """Pairs of c (degree <= bound) -> pairs of c mod f, every fold at once.

    c mod f is c plus, for each (b, t) of `shift_terms`, (c & bits >= b)
    shifted right by t, cut below x^m. Output pair j takes from each term the
    pairs of that masked c at limbs 2 j + q and 2 j + q + 1 (q = t // 64)
    shifted right together by t mod 64 (`vpshrdq`), so every term depends on
    c alone: one mask, one `palignr` and one shift deep, then the xor tree,
    where folds one after another are as deep as their count times that.
    """
    n = plan.limbs
    top = len(pairs)
    masked: dict[tuple[int, int], VReg | None] = {}
    placed: dict[tuple[int, int], VReg | None] = {}

    def pair(b: int, k: int) -> VReg | None:
        """Pair k of c & bits >= b; None where it is zero."""
        if k < 0 or k >= top or 128 * k + 127 < b:
            return None
        if 128 * k >= b:
            return pairs[k]
        if (b, k) not in masked:
            lanes = (limb_from(b, 2 * k), limb_from(b, 2 * k + 1))
            masked[b, k] = v.and_(pairs[k], v.const(f"gf2m_mask_{lanes[0]:x}_{lanes[1]:x}", lanes,
                                                    comment=f"bits from x^{b} up in pair {k}"))
        return masked[b, k]

    def at(b: int, limb: int) -> VReg | None:
        """Limbs limb, limb + 1 of c & bits >= b as a pair; None where zero."""
        if limb % 2 == 0:
            return pair(b, limb // 2)
        if (b, limb) not in placed:
            lo, hi = pair(b, limb // 2), pair(b, limb // 2 + 1)
            placed[b, limb] = (None if lo is None and hi is None else v.up64(hi) if lo is None
                               else v.down64(lo) if hi is None else v.straddle(hi, lo))
        return placed[b, limb]

    out = []
    for j in range((n + 1) // 2):
        terms = []  # (whether a mask precedes it, term)
        for b, t in shift_terms(plan, bound):
            r = t % 64
            src_lo, src_hi = term_sources(b, t, 2 * j)
            lo, hi = at(*src_lo), at(*src_hi) if src_hi else None
            term = shift_term(v, lo, hi, r)
            if term is not None:
                terms.append((bool(src_lo[0] or src_hi and src_hi[0]), term))
        # xors in the order the terms are ready (`fuse bitwise` makes each two one vpternlogq), the
        # masked terms, one instruction deeper, last; the top pair's cut below x^m fuses with the last
        parts = [pairs[j]] + [term for _, term in sorted(terms, key=lambda e: e[0])]
        last = parts.pop() if j == (n - 1) // 2 and (plan.slack or n % 2) else None
        acc = parts[0]
        for term in parts[1:]:
            acc = v.xor(acc, term)
        out.append(acc if last is None else v.and_(v.xor(acc, last), _top_mask(v, plan)))
    return out


def freeze_pairs(v: Pairs, plan: FieldPlan, pairs: list[VReg]) -> list[VReg]:
    """Pairs of a lazy element (degree < 64 n) -> pairs of its remainder mod f.

    The s bits above x^m form one short word H; each term x^e of g adds
    H x^e, one word (two when e mod 64 + s > 64) built in the lane H sits
    in, and the words are placed into their pairs by unpacking: with
    x^233 + x^74 + 1 that is a shift, a shift, one `punpckhqdq`, an xor
    and the mask. A small field whose g reaches within s bits of x^m needs
    more than one such fold (`folds`). Needs the upper lane of an odd n's
    top pair zero (as loaded and as every kernel leaves it).
    """
    n, s = plan.limbs, plan.slack
    top, lane = divmod(n - 1, 2)
    out = list(pairs)
    for fd in folds(plan, 64 * n - 1):
        bits = fd.bound_in - plan.m + 1  # of H
        h = v.srl(out[top], 64 - s)  # H in `lane`; with lane 1, lane 0 holds junk
        words: dict[int, list[VReg]] = defaultdict(list)
        for e in plan.poly[1:]:
            limb, r = divmod(e, 64)
            words[limb].append(v.sll(h, r) if r else h)
            if r + bits > 64:
                words[limb + 1].append(v.srl(h, 64 - r))
        out[top] = v.and_(out[top], _top_mask(v, plan))
        for k in range((max(words) + 2) // 2):
            w0, w1 = v.tree(words.get(2 * k, [])), v.tree(words.get(2 * k + 1, []))
            if w0 is None and w1 is None:
                continue
            if lane == 0:  # the other lane is zero: words combine by moving lane 0 up
                add = w0 if w1 is None else v.unpacklo(w0, w1) if w0 is not None else v.up64(w1)
            elif w0 is not None and w1 is not None:
                add = v.unpackhi(w0, w1)
            elif w0 is not None:
                add = v.down64(w0)
            else:
                add = v.unpackhi(v.zero(), w1)
            out[k] = v.xor(out[k], add)
    return out
