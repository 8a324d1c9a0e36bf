"""Register pairs: the GF(2^m) kernels' operations on 128-bit values.

An element is ceil(m/64) little-endian 64-bit limbs, held in registers as
pairs (limbs 2k, 2k+1 in one xmm). `Pairs` has one method per operation,
each one instruction in the IR's three-operand form; on an SSE target the
legalisation pass makes them two-operand. With bits = 256 every value is two
independent pairs, one per 128-bit lane, and the same instructions (VEX.256
forms, VPCLMULQDQ for the products) do two field operations at once.
"""

from __future__ import annotations

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from ...machine.ops import sized_load, sized_store

Terms = dict[int, list]  # limb offset -> 128-bit values to xor in there


class Pairs:
    def __init__(self, b: Builder, bits: int = 128):
        self.b = b
        self.bits = bits

    def const(self, label: str, pair: tuple[int, int], comment: str) -> Mem:
        """A constant pair (repeated in both lanes for bits = 256)."""
        t = self.b.table(label + ("_x2" if self.bits == 256 else ""), 8,
                         pair * (self.bits // 128), comment=comment)
        return Mem(t, 0, self.bits // 8)

    def _op(self, op: str, *operands) -> VReg:
        return self.b.op(op, *operands, bits=self.bits)

    def xor(self, a, c) -> VReg:
        return self._op("vpxor", a, c)

    def and_(self, a, c) -> VReg:
        return self._op("vpand", a, c)

    def clmul(self, a, c, imm: int) -> VReg:
        return self._op("vpclmulqdq", a, c, Imm(imm))

    def squares(self, a, both: bool = True) -> tuple[VReg, ...]:
        """The squares of a's limbs (lane 0's, then lane 1's where `both`) with no carry-less product: a
        square puts bit k at bit 2k, so each byte's low and high nibble are spread to every other bit by a
        constant bit matrix (`vgf2p8affineqb`) and the two interleaved byte by byte."""
        low, high = (self._op("vgf2p8affineqb", a, self.const(f"gf2m_spread_{name}", (_spread(nibble),) * 2,
                                                                f"spreads each byte's {name} nibble"), Imm(0))
                     for nibble, name in ((0, "low"), (1, "high")))
        return (self._op("vpunpcklbw", low, high),) + ((self._op("vpunpckhbw", low, high),) if both else ())

    def sll(self, a, r: int) -> VReg:
        return self._op("vpsllq", a, Imm(r))

    def srl(self, a, r: int) -> VReg:
        return self._op("vpsrlq", a, Imm(r))

    def shift_right_pair(self, lo, hi, r: int) -> VReg:
        """Each lane of lo shifted right by r, its vacated top bits the bottom
        of hi's lane (`vpshrdq`): limbs k, k+1 of a polynomial -> bits
        64 k + r .. 64 k + r + 63."""
        return self._op("vpshrdq", lo, hi, Imm(r))

    def up64(self, a) -> VReg:
        """Lane 0 moved to lane 1, lane 0 cleared."""
        return self._op("vpslldq", a, Imm(8))

    def down64(self, a) -> VReg:
        """Lane 1 moved to lane 0, lane 1 cleared."""
        return self._op("vpsrldq", a, Imm(8))

    def straddle(self, hi, lo) -> VReg:
        """(lane 1 of lo, lane 0 of hi)."""
        return self._op("vpalignr", hi, lo, Imm(8))

    def unpacklo(self, a, c) -> VReg:
        """(lane 0 of a, lane 0 of c)."""
        return self._op("vpunpcklqdq", a, c)

    def unpackhi(self, a, c) -> VReg:
        """(lane 1 of a, lane 1 of c)."""
        return self._op("vpunpckhqdq", a, c)

    def swap(self, a) -> VReg:
        return self._op("vpshufd", a, Imm(0x4E))

    def load(self, mem: Mem) -> VReg:
        return self.b.op(sized_load(mem.size), mem, bits=128)

    def store(self, mem: Mem, reg) -> None:
        self.b.emit(sized_store(mem.size), mem, reg)

    def zero(self) -> VReg:
        return self._op("load", self.const("gf2m_zero", (0, 0), comment="zero pair"))

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


def _spread(nibble: int) -> int:
    """The bit matrix taking bit k of a byte's `nibble` (0 low, 1 high) to bit 2k: the row of result bit i
    is byte 7 - i of the word."""
    return sum(1 << (4 * nibble + k) << 8 * (7 - 2 * k) for k in range(4))


def normalize(v: Pairs, terms: Terms) -> dict[int, VReg]:
    return {o: v.tree(rs) for o, rs in sorted(terms.items()) if rs}


def pair_at(v: Pairs, norm: dict[int, VReg], k: int) -> VReg:
    """Pair k (limbs 2k, 2k+1) of the sum of offset terms."""
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
    return v.tree(parts) if parts else v.zero()


def to_pairs(v: Pairs, norm: dict[int, VReg], nwords: int) -> list[VReg]:
    """Pairs (limbs 2k, 2k+1) for limbs 0..nwords-1 of the sum of offset terms;
    terms reaching further must be zero there."""
    return [pair_at(v, norm, k) for k in range((nwords + 1) // 2)]


def load_pairs(v: Pairs, arg: int, nwords: int, at: int = 0) -> list[VReg]:
    """Limbs at..at+nwords-1 of buffer `arg` as pairs (an odd count ends with
    an 8-byte load, so nothing past the element is read)."""
    out = []
    for k in range((nwords + 1) // 2):
        size = 16 if 2 * k + 1 < nwords else 8
        out.append(v.load(Mem(ArgBase(arg), 8 * at + 16 * k, size)))
    return out


def store_pairs(v: Pairs, arg: int, pairs: list[VReg], nwords: int, at: int = 0) -> None:
    for k in range((nwords + 1) // 2):
        size = 16 if 2 * k + 1 < nwords else 8
        v.store(Mem(ArgBase(arg), 8 * at + 16 * k, size), pairs[k])
