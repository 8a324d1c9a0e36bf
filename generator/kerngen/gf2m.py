"""The GF(2^m) family: multiplication, squaring, reduction, multiply-accumulate,
multi-squaring and inversion, fully unrolled on 128-bit registers.

An element is ceil(m/64) little-endian 64-bit limbs, held in registers as
pairs (limbs 2k, 2k+1 in one xmm). Products are formed with PCLMULQDQ as
128-bit *terms* placed at limb offsets; terms at odd offsets straddle two
pairs and are merged with one `palignr` per pair at the end, so no product is
ever shifted on its own. Reduction multiplies the part above x^m by
g = f - x^m, chunk by 64-bit chunk of g (see `gf2m_plan`): a chunk equal to 1
is a plain xor, a single term x^r two shifts, anything else one carry-less
product per word. The GF(2)[x] facts come from `gf2m_plan`; this module only
turns them into instructions.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

from .errors import AllocationError
from .family import Bundle, Function
from .gf2m_plan import FieldPlan, field_plan, folds, itoh_tsujii_chain, map_pays, msqr_columns
from .isa.abi import SYSV
from .isa.ir import ArgBase, ArgSpec, Builder, GReg, Imm, Mem, VReg
from .isa.pipeline import compile_kernel
from .params import Gf2mParams


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


# Chosen by timing the variants side by side in one kg_bench run on the
# development machine (Intel, VPCLMULQDQ-capable; ticks per call for
# mul / 16 squarings): most differences are within a tick or two, except that
# for m = 409 one carry-less product per word folds x^87 faster than shifts
# (msqr16 364 vs 434), and for m = 233 shifts beat products (272 vs 304).
# Other m use the rule in `default_config`.
_MEASURED: dict[int, MulConfig] = {
    163: MulConfig("s4", 0, True),
    233: MulConfig("s4", 0, True),
    283: MulConfig("k3", 0, True),
    409: MulConfig("s4", 2, False),
    571: MulConfig("k3", 0, True),
}


def default_config(m: int) -> MulConfig:
    if m in _MEASURED:
        return _MEASURED[m]
    n = (m + 63) // 64
    blocks = (n + 1) // 2
    return MulConfig("k3", 3 if blocks >= 3 else 0, True)


MSQR_STEPS = (2, 4, 8, 16)


# ---------------------------------------------------------------------------
# instruction helpers: one method per operation, VEX three-operand for avx2,
# copy-then-modify legacy forms for sse


class _Vec:
    def __init__(self, b: Builder, sse: bool, bits: int = 128):
        """bits = 256: every value is two independent 128-bit pairs, one per
        ymm lane; all operations below act lane by lane (VEX.256 forms,
        VPCLMULQDQ for the products), so one instruction stream does two
        field operations at once."""
        self.b = b
        self.sse = sse
        self.bits = bits
        assert bits == 128 or not sse

    def const(self, label: str, pair: tuple[int, int], comment: str) -> Mem:
        """A constant pair (repeated in both lanes for bits = 256)."""
        t = self.b.table(label + ("_x2" if self.bits == 256 else ""), 8,
                         pair * (self.bits // 128), comment=comment)
        return Mem(t, 0, self.bits // 8)

    def _two(self, vex: str, leg: str, a, *rest) -> VReg:
        if not self.sse:
            return self.b.op(vex, a, *rest, bits=self.bits)
        d = self.b.op("sse_copy", a, bits=128)
        self.b.emit(leg, d, *rest)
        return d

    def xor(self, a, c) -> VReg:
        return self._two("vpxor", "sse_pxor", a, c)

    def and_(self, a, c) -> VReg:
        return self._two("vpand", "sse_pand", a, c)

    def clmul(self, a, c, imm: int) -> VReg:
        return self._two("vpclmulqdq", "sse_pclmulqdq", a, c, Imm(imm))

    def sll(self, a, r: int) -> VReg:
        return self._two("vpsllq", "sse_psllq", a, Imm(r))

    def srl(self, a, r: int) -> VReg:
        return self._two("vpsrlq", "sse_psrlq", a, Imm(r))

    def up64(self, a) -> VReg:
        """Lane 0 moved to lane 1, lane 0 cleared."""
        return self._two("vpslldq", "sse_pslldq", a, Imm(8))

    def down64(self, a) -> VReg:
        """Lane 1 moved to lane 0, lane 1 cleared."""
        return self._two("vpsrldq", "sse_psrldq", a, Imm(8))

    def straddle(self, hi, lo) -> VReg:
        """(lane 1 of lo, lane 0 of hi)."""
        return self._two("vpalignr", "sse_palignr", hi, lo, Imm(8))

    def swap(self, a) -> VReg:
        return self.b.op("sse_pshufd" if self.sse else "vpshufd", a, Imm(0x4E), bits=self.bits)

    def load(self, mem: Mem) -> VReg:
        op = {16: ("load", "sse_load"), 8: ("load64", "sse_load64")}[mem.size][self.sse]
        return self.b.op(op, mem, bits=128)

    def store(self, mem: Mem, reg) -> None:
        op = {16: ("store", "sse_store"), 8: ("store64", "sse_store64")}[mem.size][self.sse]
        self.b.emit(op, mem, reg)

    def zero(self) -> VReg:
        mem = self.const("gf2m_zero", (0, 0), comment="zero pair")
        return self.b.op("sse_load" if self.sse else "load", mem, bits=self.bits)

    def tree(self, regs: list) -> VReg | None:
        """Xor of all `regs`, as a balanced tree (short dependency chains)."""
        regs = list(regs)
        if not regs:
            return None
        while len(regs) > 1:
            nxt = [self.xor(regs[i], regs[i + 1]) for i in range(0, len(regs) - 1, 2)]
            if len(regs) % 2:
                nxt.append(regs[-1])
            regs = nxt
        return regs[0]


Terms = dict[int, list]  # limb offset -> 128-bit values to xor in there


def _normalize(v: _Vec, terms: Terms) -> dict[int, VReg]:
    return {o: v.tree(rs) for o, rs in sorted(terms.items()) if rs}


def _to_pairs(v: _Vec, norm: dict[int, VReg], nwords: int) -> list[VReg]:
    """Pairs (limbs 2k, 2k+1) for limbs 0..nwords-1 of the sum of offset terms;
    terms reaching further must be zero there."""
    pairs = []
    for k in range((nwords + 1) // 2):
        parts = []
        if 2 * k in norm:
            parts.append(norm[2 * k])
        lo, hi = norm.get(2 * k - 1), norm.get(2 * k + 1)
        if lo is not None and hi is not None:
            parts.append(v.straddle(hi, lo))
        elif hi is not None:
            parts.append(v.up64(hi))
        elif lo is not None:
            parts.append(v.down64(lo))
        pairs.append(v.tree(parts) if parts else v.zero())
    return pairs


# ---------------------------------------------------------------------------
# products


@dataclass
class _Blk:
    """A 128-bit block of an operand: `width` limbs (1: upper lane is zero)."""

    reg: VReg
    width: int
    folded: VReg | None = None  # lane 0 holds lane0 ^ lane1 (Karatsuba middle factor)


def _blocks(pairs: list[VReg], nwords: int) -> list[_Blk]:
    return [_Blk(r, 2 if 2 * k + 1 < nwords else 1) for k, r in enumerate(pairs)]


def _folded(v: _Vec, blk: _Blk) -> VReg:
    if blk.folded is None:
        blk.folded = v.xor(blk.reg, v.swap(blk.reg))
    return blk.folded


def _mul_blocks(v: _Vec, a: list[_Blk], b: list[_Blk], cfg: MulConfig) -> dict[int, VReg]:
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
        terms: Terms = defaultdict(list)
        for o, r in d0.items():
            terms[o].append(r)
            terms[o + 2 * h].append(r)
        for o, r in d1.items():
            terms[o + 2 * h].append(r)
        for o, r in d2.items():
            terms[o + 2 * h].append(r)
            terms[o + 4 * h].append(r)
        return _normalize(v, terms)
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
    return _normalize(v, terms)


def _square(v: _Vec, pairs: list[VReg], nwords: int) -> list[VReg]:
    """Squares land on even limb offsets, so each limb's square is one pair."""
    return [v.clmul(pairs[i // 2], pairs[i // 2], 0x11 * (i & 1)) for i in range(nwords)]


# ---------------------------------------------------------------------------
# reduction


def _reduce(v: _Vec, plan: FieldPlan, pairs: list[VReg], bound: int, cfg: MulConfig) -> list[VReg]:
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
                mask = (((1 << 64) - 1, plan.low_mask) if n % 2 == 0 else (plan.low_mask, 0))
                r = v.and_(r, v.const(f"gf2m_mask_{mask[0]:x}_{mask[1]:x}", mask,
                                      comment=f"limbs of x^{plan.m} - 1 in pair {k}"))
            terms[2 * k].append(r)
        for ch in plan.chunks:
            r_ = ch.single_shift
            if ch.bits == 1:
                for r, j in hi_pairs:
                    terms[j + ch.q].append(r)
            elif cfg.single_shift and r_ is not None:
                for r, j in hi_pairs:
                    terms[j + ch.q].append(v.sll(r, r_))
                    terms[j + ch.q + 1].append(v.srl(r, 64 - r_))
            else:
                g = v.const(f"gf2m_g_{ch.bits:x}", (ch.bits, 0),
                            comment=f"terms x^{64 * ch.q}*(...) of f - x^{plan.m}, chunk {ch.q}")
                for j, (r, lane) in enumerate(words):
                    terms[j + ch.q].append(v.clmul(r, g, lane))
        pairs = _to_pairs(v, _normalize(v, terms), min(fd.bound_out // 64 + 1, 2 * n))
    while len(pairs) < (n + 1) // 2:
        pairs.append(v.zero())
    return pairs[: (n + 1) // 2]


def gpr_reduce_streams(plan: FieldPlan) -> bool:
    """Whether the word-streaming GPR reduction applies: the fold of one word
    of floor(c / x^m) must land wholly below that word's own place above x^m
    (degree < 64 j + 63 + k1 < m + 64 j, i.e. k1 <= m - 64), so that one pass
    from the top word down performs every fold of `folds` at once."""
    return plan.top_middle <= plan.m - 64


def _reduce_gpr(b: Builder, plan: FieldPlan, bound: int) -> None:
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


# ---------------------------------------------------------------------------
# multi-squaring as a linear map (avx2)


def _msqr_map(v: _Vec, plan: FieldPlan, pairs: list[VReg], k: int) -> list[VReg]:
    """a^(2^k) mod f as the product of a precomputed GF(2) matrix with a.

    Constant time without table lookups: the matrix is applied column by
    column under masks. The input sits in ymm chunks of 4 limbs; for bit b,
    `vpsllq` by 63 - b and `vpcmpgtq` against zero turn bit b of every lane
    into an all-ones or all-zero lane mask, so lane l selects column
    64 l + b. Instead of broadcasting each lane's mask, the columns are
    stored pre-rotated: accumulator s holds, in lane l, output limb
    (l + s) mod 4 of the selected columns, and one `vpermq` per accumulator
    puts the limbs in place at the end. Per bit: 2 + 2 * 4 * (output chunks)
    instructions for up to 4 * (input chunks) columns.
    """
    b = v.b
    m, n = plan.m, plan.limbs
    nc = (n + 3) // 4
    cols = msqr_columns(m, plan.poly, k)
    z256 = b.table("gf2m_zero4", 8, (0, 0, 0, 0), comment="zero ymm")

    def zero():
        return b.op("load", Mem(z256, 0, 32), bits=256)

    lanes = []
    for l in range(n):
        p = pairs[l // 2]
        lanes.append(b.op("vpbroadcastq_x", p if l % 2 == 0 else v.down64(p), bits=256))
    xs = []
    for c in range(nc):
        x = lanes[4 * c]
        for j in range(1, 4):
            src = lanes[4 * c + j] if 4 * c + j < n else zero()
            x = b.op("vpblendd", x, src, Imm(0x3 << (2 * j)), bits=256)
        xs.append(x)
    values: list[int] = []
    plan_ops = []  # (c, bit, [(d, s, offset)])
    for c in range(nc):
        for bit in range(64):
            live = [l for l in range(4) if 4 * c + l < n and 64 * (4 * c + l) + bit < m]
            if not live:
                continue
            uses = []
            for d in range(nc):
                for s in range(4):
                    row = []
                    for l in range(4):
                        limb = 4 * d + (l + s) % 4
                        j = 64 * (4 * c + l) + bit
                        row.append((cols[j] >> (64 * limb)) & ((1 << 64) - 1) if l in live else 0)
                    if any(row):
                        uses.append((d, s, 8 * len(values)))
                        values += row
            plan_ops.append((c, bit, uses))
    tab = b.table(f"gf2m_sq{k}_map", 8, values,
                  comment=f"a -> a^(2^{k}) mod f: columns x^j -> x^(j 2^{k}), pre-rotated by lane")
    zero_m = zero()
    acc: dict[tuple[int, int], VReg] = {}
    for c, bit, uses in plan_ops:
        sh = b.op("vpsllq", xs[c], Imm(63 - bit), bits=256) if bit != 63 else xs[c]
        mask = b.op("vpcmpgtq", zero_m, sh, bits=256)
        for d, s, off in uses:
            t = b.op("vpand", mask, Mem(tab, off, 32), bits=256)
            acc[(d, s)] = b.op("vpxor", acc[(d, s)], t, bits=256) if (d, s) in acc else t
    out = []
    for d in range(nc):
        parts = []
        for s in range(4):
            if (d, s) not in acc:
                continue
            a = acc[(d, s)]
            if s:
                imm = sum(((j - s) % 4) << (2 * j) for j in range(4))
                a = b.op("vpermq", a, Imm(imm), bits=256)
            parts.append(a)
        r = parts[0]
        for p in parts[1:]:
            r = b.op("vpxor", r, p, bits=256)
        for h in range(2):
            if 2 * (2 * d + h) < n:
                out.append(b.op("vextracti128", r, Imm(h), bits=128))
    return out


# ---------------------------------------------------------------------------
# memory


def _load(v: _Vec, arg: int, nwords: int, at: int = 0) -> list[VReg]:
    """Limbs at..at+nwords-1 of buffer `arg` as pairs (an odd count ends with
    an 8-byte load, so nothing past the element is read)."""
    out = []
    for k in range((nwords + 1) // 2):
        size = 16 if 2 * k + 1 < nwords else 8
        out.append(v.load(Mem(ArgBase(arg), 8 * at + 16 * k, size)))
    return out


def _store(v: _Vec, arg: int, pairs: list[VReg], nwords: int, at: int = 0) -> None:
    for k in range((nwords + 1) // 2):
        size = 16 if 2 * k + 1 < nwords else 8
        v.store(Mem(ArgBase(arg), 8 * at + 16 * k, size), pairs[k])


# ---------------------------------------------------------------------------
# kernels


class _Field:
    """Builds the kernels of one parameter set."""

    def __init__(self, p: Gf2mParams, cfg: MulConfig | None = None):
        self.p = p
        self.plan = field_plan(p.m, p.poly)
        self.cfg = cfg or default_config(p.m)
        self.n = p.limbs
        self.sse = p.isa == "sse"

    def _new(self) -> _Vec:
        return _Vec(Builder(), self.sse)

    def mul_pairs(self, v: _Vec, x: list[VReg], y: list[VReg]) -> dict[int, VReg]:
        return _mul_blocks(v, _blocks(x, self.n), _blocks(y, self.n), self.cfg)

    def reduce(self, v: _Vec, pairs: list[VReg], bound: int) -> list[VReg]:
        return _reduce(v, self.plan, pairs, bound, self.cfg)

    def mulmod(self, v: _Vec, x: list[VReg], y: list[VReg]) -> list[VReg]:
        wide = _to_pairs(v, self.mul_pairs(v, x, y), 2 * self.n)
        return self.reduce(v, wide, 2 * self.p.m - 2)

    def sqrmod(self, v: _Vec, x: list[VReg]) -> list[VReg]:
        return self.reduce(v, _square(v, x, self.n), 2 * self.p.m - 2)

    # -- kernel bodies

    def k_mul(self, v):
        a, b = _load(v, 1, self.n), _load(v, 2, self.n)
        _store(v, 0, self.mulmod(v, a, b), self.n)

    def k_sqr(self, v):
        _store(v, 0, self.sqrmod(v, _load(v, 1, self.n)), self.n)

    def k_reduce(self, v):
        bound = 2 * self.p.m - 2
        c = _load(v, 1, bound // 64 + 1)
        _store(v, 0, self.reduce(v, c, bound), self.n)

    def k_mulwide(self, v):
        a, b = _load(v, 1, self.n), _load(v, 2, self.n)
        _store(v, 0, _to_pairs(v, self.mul_pairs(v, a, b), 2 * self.n), 2 * self.n)

    def k_muladd(self, v):
        a, b = _load(v, 1, self.n), _load(v, 2, self.n)
        c, d = _load(v, 3, self.n), _load(v, 4, self.n)
        terms: Terms = defaultdict(list)
        for prod in (self.mul_pairs(v, a, b), self.mul_pairs(v, c, d)):
            for o, r in prod.items():
                terms[o].append(r)
        wide = _to_pairs(v, _normalize(v, terms), 2 * self.n)
        _store(v, 0, self.reduce(v, wide, 2 * self.p.m - 2), self.n)

    def uses_map(self, k: int) -> bool:
        return not self.sse and map_pays(self.p.m, k)

    def msqr(self, v: _Vec, x: list[VReg], k: int) -> list[VReg]:
        if self.uses_map(k):
            return _msqr_map(v, self.plan, x, k)
        for _ in range(k):
            x = self.sqrmod(v, x)
        return x

    def k_msqr(self, v, k: int):
        _store(v, 0, self.msqr(v, _load(v, 1, self.n), k), self.n)

    def k_ladder_step(self, v):
        """One Montgomery-ladder step in López–Dahab x-only coordinates.

        State (X0, Z0, X1, Z1) with R1 - R0 = P, P = (x, .). After the
        conditional swap by mask: R1 <- R0 + R1 (Z = (X0 Z1 + X1 Z0)^2,
        X = x Z + (X0 Z1)(X1 Z0)) and R0 <- 2 R0 (Z = X0^2 Z0^2,
        X = X0^4 + b Z0^4 = (X0^2 + sqrt(b) Z0^2)^2, so the curve enters as
        c = sqrt(b), one product). 6 products, 4 squarings, 9 reductions;
        the two halves are independent, which the core overlaps.
        """
        n = self.n
        st = [_load(v, 1, n, i * n) for i in range(4)]
        x, c = _load(v, 2, n), _load(v, 3, n)
        if self.sse:
            mask = v.b.op("sse_pshufd", v.load(Mem(ArgBase(4), 0, 8)), Imm(0x44), bits=128)
        else:
            mask = v.b.op("vpbroadcastq", Mem(ArgBase(4), 0, 8), bits=128)
        for a, b in ((0, 2), (1, 3)):
            for k in range(len(st[a])):
                t = v.and_(v.xor(st[a][k], st[b][k]), mask)
                st[a][k], st[b][k] = v.xor(st[a][k], t), v.xor(st[b][k], t)
        X0, Z0, X1, Z1 = st
        t1 = self.mulmod(v, X0, Z1)
        t2 = self.mulmod(v, X1, Z0)
        a = self.sqrmod(v, X0)
        cc = self.sqrmod(v, Z0)
        nZ1 = self.sqrmod(v, [v.xor(p, q) for p, q in zip(t1, t2)])
        nZ0 = self.mulmod(v, a, cc)
        bc = self.mulmod(v, c, cc)
        nX0 = self.sqrmod(v, [v.xor(p, q) for p, q in zip(a, bc)])
        terms: Terms = defaultdict(list)
        for prod in (self.mul_pairs(v, x, nZ1), self.mul_pairs(v, t1, t2)):
            for o, r in prod.items():
                terms[o].append(r)
        nX1 = self.reduce(v, _to_pairs(v, _normalize(v, terms), 2 * n), 2 * self.p.m - 2)
        for i, e in enumerate((nX0, nZ0, nX1, nZ1)):
            _store(v, 0, e, n, i * n)

    def k_ladder_step2(self, v):
        """The step of `k_ladder_step` with its independent operations done
        two at a time, one per ymm lane (VPCLMULQDQ): (X0 Z1, X1 Z0) and
        (X0^2, Z0^2), then (X0^2 Z0^2, sqrt(b) Z0^2), then the squarings
        ((t1 + t2)^2, (X0^2 + sqrt(b) Z0^2)^2), then the two products of
        X(R0 + R1) added lane to lane before its single 128-bit reduction:
        4 paired products, 2 paired squarings and 6 reductions in place of
        6 products, 4 squarings and 9 reductions.
        """
        n, b = self.n, v.b
        w = _Vec(b, False, 256)
        X0, Z0, X1, Z1 = [_load(v, 1, n, i * n) for i in range(4)]
        x, c = _load(v, 2, n), _load(v, 3, n)
        zy = w.zero()

        def ins(y, lo, h):
            return b.op("vinserti128", y, lo, Imm(h), bits=256)

        def perm(p, q, imm):
            return b.op("vperm2i128", p, q, Imm(imm), bits=256)

        def ext(y, h):
            return b.op("vextracti128", y, Imm(h), bits=128)

        U = [ins(ins(zy, p, 0), q, 1) for p, q in zip(X0, Z0)]  # [X0 | Z0]
        V = [ins(ins(zy, p, 0), q, 1) for p, q in zip(X1, Z1)]  # [X1 | Z1]
        mask = b.op("vpbroadcastq", Mem(ArgBase(4), 0, 8), bits=256)
        for k in range(len(U)):
            t = w.and_(w.xor(U[k], V[k]), mask)
            U[k], V[k] = w.xor(U[k], t), w.xor(V[k], t)
        P1 = [perm(u, q, 0x20) for u, q in zip(U, V)]  # [X0 | X1]
        P2 = [perm(u, q, 0x13) for u, q in zip(U, V)]  # [Z1 | Z0]
        T = self.mulmod(w, P1, P2)  # [t1 | t2]
        Q = self.sqrmod(w, U)  # [X0^2 | Z0^2]
        B1 = [ins(q, ck, 1) for q, ck in zip(Q, c)]  # [X0^2 | c]
        B2 = [perm(q, q, 0x11) for q in Q]  # [Z0^2 | Z0^2]
        R = self.mulmod(w, B1, B2)  # [Z(2 R0) | c Z0^2]
        W = [w.xor(perm(t, r, 0x30), perm(t, q, 0x21)) for t, r, q in zip(T, R, Q)]  # [t1 + t2 | X0^2 + c Z0^2]
        Q2 = self.sqrmod(w, W)  # [Z(R0 + R1) | X(2 R0)]
        D1 = [ins(t, xk, 1) for t, xk in zip(T, x)]  # [t1 | x]
        D2 = [perm(t, q, 0x21) for t, q in zip(T, Q2)]  # [t2 | Z(R0 + R1)]
        prod = self.mul_pairs(w, D1, D2)
        terms = {o: v.xor(ext(r, 0), ext(r, 1)) for o, r in prod.items()}
        nX1 = self.reduce(v, _to_pairs(v, terms, 2 * n), 2 * self.p.m - 2)
        out = ([ext(r, 1) for r in Q2], [ext(r, 0) for r in R], nX1, [ext(r, 0) for r in Q2])
        for i, e in enumerate(out):
            _store(v, 0, e, n, i * n)

    def k_inv(self, v):
        a = _load(v, 1, self.n)
        b = a
        for step, k in itoh_tsujii_chain(self.p.m):
            if step == "double":
                b = self.mulmod(v, self.msqr(v, b, k), b)
            else:
                b = self.mulmod(v, self.sqrmod(v, b), a)
        _store(v, 0, self.sqrmod(v, b), self.n)


def _arg(name: str, role: str, count: int) -> ArgSpec:
    return ArgSpec(name, role, "uint64_t", 8, count, 8)


def _poly_text(poly) -> str:
    return " + ".join("1" if e == 0 else "x" if e == 1 else f"x^{e}" for e in poly)


def build(params: Gf2mParams, cfg: MulConfig | None = None, msqr_steps=MSQR_STEPS) -> "Bundle":
    """Every GF(2^m) kernel for `params`, allocated, with its manifest facts."""
    f = _Field(params, cfg)
    m, n, isa = params.m, params.limbs, params.isa
    pre = params.prefix
    poly_s = _poly_text(params.poly)
    elem = {"bound": [0, (1 << m) - 1], "representation": "reduced", "bits": m, "limbs": n}
    wide = {"bound": [0, (1 << (2 * m - 1)) - 1], "representation": "unreduced", "bits": 2 * m - 1,
            "limbs": 2 * n}
    red = [f"{n} little-endian uint64 limbs, degree < {m} (fully reduced mod f)"]
    alias = "out may be the same buffer as any input (all inputs are read before out is written)"
    plan = f.plan
    fold_lines = []
    for i, fd in enumerate(folds(plan, 2 * m - 2)):
        fold_lines.append(f"fold {i + 1}: degree <= {fd.bound_in} -> <= {fd.bound_out} "
                          f"({fd.hi_words} words above x^{m} times f - x^{m})")
    chunk_lines = [f"f - x^{m} chunk {c.q}: 0x{c.bits:x}"
                   + (" (plain xor)" if c.bits == 1 else
                      " (two shifts per pair)" if f.cfg.single_shift and c.single_shift is not None
                      else " (one carry-less product per word)") for c in plan.chunks]
    cfg_line = (f"products: {f.cfg.base} blocks of 128 bits, "
                + (f"Karatsuba split from {f.cfg.karatsuba_min} blocks" if f.cfg.karatsuba_min
                   else "schoolbook over blocks"))
    specs = [
        ("gf2m_mul", "mul", f.k_mul, (_arg("out", "out", n), _arg("a", "in", n), _arg("b", "in", n)),
         f"out = a * b mod f in GF(2^{m})",
         ["requires: a, b: " + red[0], "ensures: out = a*b mod f: " + red[0], alias],
         {"input": elem, "output": elem}),
        ("gf2m_sqr", "sqr", f.k_sqr, (_arg("out", "out", n), _arg("a", "in", n)),
         f"out = a^2 mod f in GF(2^{m})",
         ["requires: a: " + red[0], "ensures: out = a^2 mod f: " + red[0], alias],
         {"input": elem, "output": elem}),
        ("gf2m_reduce", "reduce", f.k_reduce, (_arg("out", "out", n), _arg("c", "in", 2 * n)),
         f"out = c mod f for an unreduced c of degree <= {2 * m - 2}",
         [f"requires: c: {2 * n} little-endian uint64 limbs, degree <= {2 * m - 2} (below 2^{2 * m - 1}); "
          f"limbs above {(2 * m - 2) // 64} are not read",
          "ensures: out = c mod f: " + red[0], alias],
         {"input": wide, "output": elem, "registers": "xmm"}),
        ("gf2m_mulwide", "mulwide", f.k_mulwide, (_arg("out", "out", 2 * n), _arg("a", "in", n), _arg("b", "in", n)),
         "out = a * b in GF(2)[x], not reduced (xor such products, then gf2m_reduce once)",
         ["requires: a, b: " + red[0],
          f"ensures: out = a*b: {2 * n} limbs, degree <= {2 * m - 2}, not reduced", alias],
         {"input": elem, "output": wide}),
        ("gf2m_muladd", "muladd", f.k_muladd,
         (_arg("out", "out", n), _arg("a", "in", n), _arg("b", "in", n), _arg("c", "in", n), _arg("d", "in", n)),
         f"out = a*b + c*d mod f in GF(2^{m}), one reduction",
         ["requires: a, b, c, d: " + red[0], "ensures: out = a*b + c*d mod f: " + red[0], alias],
         {"input": elem, "output": elem}),
    ]
    if gpr_reduce_streams(plan):
        # the same reduction on 64-bit registers, to measure beside the xmm one
        red_spec = specs[2]
        specs.append(("gf2m_reduce", "reduce_gpr", lambda v: _reduce_gpr(v.b, plan, 2 * m - 2))
                     + (red_spec[3], red_spec[4] + " (64-bit general registers, one pass from the top word down)",
                        red_spec[5], {**red_spec[6], "registers": "gpr"}))
    for k in msqr_steps:
        how = "one precomputed linear map, applied under masks" if f.uses_map(k) else f"{k} squarings"
        specs.append((
            "gf2m_msqr", f"msqr{k}", (lambda v, k=k: f.k_msqr(v, k)), (_arg("out", "out", n), _arg("a", "in", n)),
            f"out = a^(2^{k}) mod f in GF(2^{m}) ({how})",
            ["requires: a: " + red[0], f"ensures: out = a^(2^{k}) mod f: " + red[0], alias],
            {"input": elem, "output": elem, "k": k}))
    specs.append((
        "gf2m_ladder_step", "ladder_step", f.k_ladder_step,
        (_arg("out", "out", 4 * n), _arg("st", "in", 4 * n), _arg("x", "in", n), _arg("c", "in", n),
         _arg("swap", "in", 1)),
        f"one Montgomery-ladder step in López–Dahab x-only coordinates over GF(2^{m})",
        [f"requires: st = (X0, Z0, X1, Z1), four elements of {n} limbs each, " + red[0].split(", ", 1)[1],
         "requires: x = x-coordinate of P, c = sqrt(b) for the curve y^2 + xy = x^3 + a x^2 + b "
         "(both " + red[0].split(", ", 1)[1] + "); swap[0] = 0 or all ones",
         "ensures: with (R0, R1) = (R1, R0) when swap[0] is all ones: out = (X(2 R0), Z(2 R0), "
         "X(R0 + R1), Z(R0 + R1)) given R1 - R0 = P; X(2R) = X^4 + b Z^4, Z(2R) = X^2 Z^2, "
         "Z(R0 + R1) = (X0 Z1 + X1 Z0)^2, X(R0 + R1) = x Z(R0 + R1) + X0 Z1 X1 Z0; all " + red[0].split(", ", 1)[1],
         "out may be the same buffer as st (all inputs are read before out is written)"],
        {"input": elem, "output": elem}))
    if not f.sse:
        step = specs[-1]
        specs.append(step[:1] + ("ladder_step2", f.k_ladder_step2) + step[3:4]
                     + (step[4] + " (two operations per ymm lane pair; needs VPCLMULQDQ)",
                        step[5] + ["needs AVX2 and VPCLMULQDQ (check CPUID before calling)"],
                        {**step[6], "cpu": ["avx2", "vpclmulqdq"]}))
    chain = itoh_tsujii_chain(m)
    nmul = len(chain)
    maps = sorted({k for s_, k in chain if s_ == "double" and f.uses_map(k)})
    specs.append((
        "gf2m_inv", "inv", f.k_inv, (_arg("out", "out", n), _arg("a", "in", n)),
        f"out = a^-1 mod f in GF(2^{m}) (Itoh-Tsujii: {nmul} multiplications; "
        + (f"a^(2^k) as a linear map for k in {maps}, squarings otherwise)" if maps else f"{m - 1} squarings)"),
        ["requires: a: " + red[0], "ensures: out = a^(2^m - 2) mod f, the inverse of a when a != 0, "
         "and 0 when a = 0: " + red[0], alias],
        {"input": elem, "output": elem,
         "chain": [f"{s} {k}" for s, k in chain], "msqr_maps": maps}))
    functions = []
    for kind, short, body, args, summary, contract, extra in specs:
        v = f._new()
        body(v)
        symbol = f"{pre}_{short}_{isa}"
        gpr = extra.get("registers") == "gpr"
        try:
            kernel = compile_kernel(v.b, symbol, args, SYSV, uses_avx=not (f.sse or gpr))
        except AllocationError:
            if not gpr:
                raise
            # GPRs are never spilled: words waiting to be folded (about n of
            # them for g with a middle chunk above the first) may need the
            # callee-saved registers too, at the price of their push and pop;
            # beyond those, the field gets the xmm reduction only
            try:
                kernel = compile_kernel(v.b, symbol, args, SYSV, uses_avx=False if gpr else not f.sse, callee_saved=True)
            except AllocationError:
                continue
        if f.sse:
            kernel = _legacy_spills(kernel)
        clmuls = sum(1 for ins in kernel.body if "pclmulqdq" in ins.op)
        manifest = {"m": m, "poly": list(params.poly), **extra,
                    "static": {"instructions": len(kernel.body), "pclmulqdq": clmuls,
                               "spill_slots": kernel.spill_slots}}
        contract = list(contract) + [f"f = {poly_s}; limbs 8-byte aligned; constant time"]
        functions.append(Function(kernel, kind, isa, "uint64", manifest, summary, tuple(contract),
                                  tuple([cfg_line] + chunk_lines + fold_lines)
                                  if kind in ("gf2m_mul", "gf2m_reduce") else ()))
    pm = {"name": params.name, "family": "gf2m", "m": m, "poly": list(params.poly),
          "isa": isa, "prefix": pre}
    notes = (f"f = {poly_s}, {n} limbs of 64 bits, slack s = {plan.slack} bits",
             cfg_line, *chunk_lines, *fold_lines,
             "sse bundles are legacy-encoded (no VEX); avx2 bundles use VEX-encoded pclmulqdq on xmm "
             "(needs AVX and PCLMULQDQ, not VPCLMULQDQ)")
    return Bundle(params.name, params, pm, tuple(functions), notes)


_LEGACY_OF = {"load_aligned": "sse_load_aligned", "store_aligned": "sse_store_aligned",
              "load": "sse_load", "store": "sse_store"}


def _legacy_spills(kernel):
    """The allocator writes its spills and reloads in VEX form; an sse kernel
    must not contain any VEX instruction."""
    body = tuple(dataclasses.replace(ins, op=_LEGACY_OF.get(ins.op, ins.op)) for ins in kernel.body)
    return dataclasses.replace(kernel, body=body)
