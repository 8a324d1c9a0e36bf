"""The instruction table: every instruction the kernels use, as data.

One row per IR opcode. The IR is written in one form whatever the target:
three operands, destination first (the VEX form). A row says

- its operand slots (which are written and read, which may be memory);
- its forms (`machine.encoding.Form`): for each encoding it has (legacy,
  VEX, EVEX), the register widths, the mnemonic and the CPU extensions,
  from which a pass derives a kernel's requirements; an ISA's kernels use
  the forms of its encoding (`Op.form`, `Isa.candidates`);
- the element width it computes on, whether its sources commute, and its
  lane semantics: element-wise arithmetic (`Arith`: exact on integers and
  numpy arrays, symbolic on SMT bit-vectors, of any number of sources read
  in slot order, an accumulating form's destination among them, and under
  an opmask merging or zeroing, `Arith.masked`) or a movement of units
  between and within registers (`Move`; under an opmask its route reads
  the mask's bits where an immediate would be, a permutation by an index
  register that register's contents, `Move.indices`).

The legalisation, allocation, required-ISA and verification passes, the
lemma prover, the NTT layout planner and both printers read this table;
none of them keeps instruction facts of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import product

from .encoding import EVEX, LEGACY, VEX, Encoding, Form

# Operand slot kinds: "v" vector register, "vm" vector register or memory,
# "m" memory only, "i" immediate, "g" general register, "gm" general or memory,
# "k" opmask register (one bit per lane).
# Access: "w" written, "r" read, "rw" both (an accumulating form's destination,
# or a merge-masked one: the lanes the mask leaves keep the old value).


@dataclass(frozen=True)
class Slot:
    access: str
    kind: str


def _sig(text: str) -> tuple[Slot, ...]:
    return tuple(Slot(*part.split(":")) for part in text.split(","))


def _same_width(x, bits: int) -> bool:
    """Whether x is a numpy array of `bits`-bit integers: its arithmetic has wrapped already, and a mask
    of `bits` ones may not fit its type (64 bits), so a change of reading is a view of its bits."""
    return getattr(x, "dtype", None) is not None and x.dtype.itemsize * 8 == bits and x.dtype.kind in "iu"


def wrap(x, bits: int):
    """x as a signed `bits`-bit integer (two's complement wrap); ints and numpy arrays."""
    if _same_width(x, bits):
        return x if x.dtype.kind == "i" else x.view(f"i{bits // 8}")
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


def unsigned(x, bits: int):
    if _same_width(x, bits):
        return x if x.dtype.kind == "u" else x.view(f"u{bits // 8}")
    return x & ((1 << bits) - 1)


def high_half(a, b, bits: int, signed: bool):
    """Bits `bits`..2*`bits`-1 of the product of a and b, read signed or unsigned: on ints, and on numpy
    arrays of `bits`-bit integers (whose products would wrap) from the products of their halves."""
    if not (_same_width(a, bits) or _same_width(b, bits)):
        return (a * b) >> bits if signed else (unsigned(a, bits) * unsigned(b, bits)) >> bits
    import numpy as np

    kind = np.dtype(f"u{bits // 8}")
    ua, ub = np.asarray(a).astype(kind), np.asarray(b).astype(kind)
    half = bits // 2
    low = kind.type((1 << half) - 1)
    a0, a1, b0, b1 = ua & low, ua >> half, ub & low, ub >> half
    middle = ((a0 * b0) >> half) + (a1 * b0 & low) + (a0 * b1)  # below 2^bits: no wrap
    high = a1 * b1 + ((a1 * b0) >> half) + (middle >> half)
    if signed:  # a factor below zero is its unsigned reading less 2^bits
        high = high - np.where(wrap(ua, bits) < 0, ub, 0).astype(kind)
        high = high - np.where(wrap(ub, bits) < 0, ua, 0).astype(kind)
    return wrap(high, bits)


def lane_range(bits: int, signed: bool = True) -> tuple[int, int]:
    """The least and greatest value of a `bits`-bit lane, read signed or unsigned."""
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def lane_value(x, bits: int, signed: bool = True):
    """A lane's bits as the integer they mean, read signed or unsigned; ints and numpy arrays."""
    return wrap(x, bits) if signed else unsigned(x, bits)


def min_unsigned(a, b, bits: int):
    """The smaller of a and b read as unsigned `bits`-bit integers; ints and numpy arrays."""
    ua, ub = unsigned(a, bits), unsigned(b, bits)
    if hasattr(ua, "shape") or hasattr(ub, "shape"):
        import numpy as np

        return np.minimum(ua, ub)
    return min(ua, ub)


def _where(cond, x, y):
    """x where cond holds, else y; ints and numpy arrays."""
    if hasattr(cond, "shape"):
        import numpy as np

        return np.where(cond, x, y)
    return x if cond else y


@dataclass(frozen=True)
class Arith:
    """Element-wise semantics on signed `bits`-bit elements, of any number of sources.

    The sources are the instruction's read operands in slot order: the
    destination where it is read (an accumulating form, a merge-masked row)
    first, then, in a masked row, the mask's bit for the lane (0 or 1), then
    the operands; an immediate is the plain integer it is (a shift count, a
    truth table).
    `value(sources, bits)` is the mathematical result before the wrap to
    `bits` bits (on ints or numpy int64 arrays); the instruction's result is
    `exact(sources, bits)`. `smt(z3, sources, bits)` is the wrapped result on
    z3 bit-vectors (immediates stay integers). `corners`: over a box of
    inputs, `value` takes its extremes at the box's corners (monotone or
    bilinear), so intervals pass through exactly. `checked`: outside a tagged
    reduction idiom, a value leaving the signed range is an overflow, not an
    intended wrap.
    """

    value: Callable
    smt: Callable
    corners: bool = False
    checked: bool = False

    def exact(self, sources: tuple, bits: int):
        return wrap(self.value(sources, bits), bits)

    def masked(self, zeroing: bool, accumulating: bool) -> Arith:
        """These semantics under an opmask: the sources gain the mask's bit
        for the lane, after the destination's old value where it is read:
        merge-masking keeps it where the bit is 0 (zero-masking writes 0
        there), and an accumulating form reads it anyway. A corner of a box
        is one of the inner semantics' corners or of the old lane, so
        intervals still pass through corners where the inner ones do."""
        def split(sources):
            """(what a lane whose bit is 0 gets, the bit, the inner semantics' sources)"""
            if zeroing and not accumulating:
                return 0, sources[0], sources[1:]
            old, bit, *rest = sources
            return (0 if zeroing else old), bit, ((old, *rest) if accumulating else tuple(rest))

        def value(sources, w):
            kept, bit, inner = split(sources)
            return _where(bit != 0, self.value(inner, w), kept)

        def smt(z3, sources, w):
            kept, bit, inner = split(sources)
            return z3.If(bit != 0, self.smt(z3, inner, w), kept)

        return Arith(value, smt, self.corners, self.checked)


def _binary(value: Callable, smt: Callable, **kwargs) -> Arith:
    """Semantics of two sources, written value(a, b, bits) and smt(z3, a, b, bits)."""
    return Arith(lambda s, w: value(*s, w), lambda z3, s, w: smt(z3, *s, w), **kwargs)


def _wide(z3, x, bits, signed=True):
    return z3.SignExt(bits, x) if signed else z3.ZeroExt(bits, x)


ADD = _binary(lambda a, b, w: a + b, lambda z3, a, b, w: a + b, corners=True, checked=True)
SUB = _binary(lambda a, b, w: a - b, lambda z3, a, b, w: a - b, corners=True, checked=True)
MULLO = _binary(lambda a, b, w: a * b, lambda z3, a, b, w: a * b)
MULHI = _binary(lambda a, b, w: high_half(a, b, w, signed=True),
                lambda z3, a, b, w: z3.Extract(2 * w - 1, w, _wide(z3, a, w) * _wide(z3, b, w)), corners=True)
MULHU = _binary(lambda a, b, w: high_half(a, b, w, signed=False),
                lambda z3, a, b, w: z3.Extract(2 * w - 1, w, _wide(z3, a, w, False) * _wide(z3, b, w, False)))
# round((a*b) / 2^(w-1)): ((a*b >> (w-2)) + 1) >> 1
MULHRS = _binary(lambda a, b, w: (((a * b) >> (w - 2)) + 1) >> 1,
                 lambda z3, a, b, w: z3.Extract(w, 1, ((_wide(z3, a, w) * _wide(z3, b, w)) >> (w - 2)) + 1),
                 corners=True)
SRA = _binary(lambda a, k, w: a >> k, lambda z3, a, k, w: a >> k, corners=True)
SRL = _binary(lambda a, k, w: unsigned(a, w) >> k, lambda z3, a, k, w: z3.LShR(a, k))
SLL = _binary(lambda a, k, w: a << k, lambda z3, a, k, w: a << k)
AND = _binary(lambda a, b, w: a & b, lambda z3, a, b, w: a & b)
ANDN = _binary(lambda a, b, w: ~a & b, lambda z3, a, b, w: ~a & b)
OR = _binary(lambda a, b, w: a | b, lambda z3, a, b, w: a | b)
XOR = _binary(lambda a, b, w: a ^ b, lambda z3, a, b, w: a ^ b)
# unsigned minimum: with x - c wrapping below zero, min(x, x - c) is x - c exactly where x >= c
MINU = _binary(lambda a, b, w: min_unsigned(a, b, w), lambda z3, a, b, w: z3.If(z3.ULE(a, b), a, b))
CMPGT = _binary(lambda a, b, w: (a > b) * -1,
                lambda z3, a, b, w: z3.If(a > b, z3.BitVecVal(-1, w), z3.BitVecVal(0, w)))
# unsigned a > b, all ones where it holds: a carry or borrow out of a sum or difference, as a mask
CMPGTU = _binary(lambda a, b, w: (unsigned(a, w) > unsigned(b, w)) * -1,
                 lambda z3, a, b, w: z3.If(z3.UGT(a, b), z3.BitVecVal(-1, w), z3.BitVecVal(0, w)))
# the same comparison into an opmask: the lane's bit (monotone in each source, so its extremes are at corners)
CMPGT_MASK = _binary(lambda a, b, w: (a > b) * 1,
                     lambda z3, a, b, w: z3.If(a > b, z3.BitVecVal(1, w), z3.BitVecVal(0, w)), corners=True)
# unsigned a > b into an opmask: the lane's bit (a carry or borrow, as a mask register's bit)
CMPGTU_MASK = _binary(lambda a, b, w: (unsigned(a, w) > unsigned(b, w)) * 1,
                      lambda z3, a, b, w: z3.If(z3.UGT(a, b), z3.BitVecVal(1, w), z3.BitVecVal(0, w)))
# the product of the low 32-bit halves of two elements, exact in 64 bits (vpmuludq on 64-bit lanes)
_LOW32 = (1 << 32) - 1
MUL32 = _binary(lambda a, b, w: (a & _LOW32) * (b & _LOW32),
                lambda z3, a, b, w: z3.ZeroExt(w - 32, z3.Extract(31, 0, a)) * z3.ZeroExt(w - 32, z3.Extract(31, 0, b)))


def _select_negative(a, b, w):
    return _where(wrap(a, w) < 0, b, a)


# b where a is negative (its sign bit set), else a: with a = x - c, x where x < c (a blend selected by a's signs)
SELECT_NEGATIVE = _binary(_select_negative, lambda z3, a, b, w: z3.If(a < 0, b, a))


def _ternary(a, b, c, table: int):
    """Bit i is bit (a_i b_i c_i) of the 8-bit truth table: the sum of the
    table's minterms (ints, numpy arrays and z3 bit-vectors alike)."""
    out = a ^ a
    for m in range(8):
        if table >> m & 1:
            out = out | ((a if m & 4 else ~a) & (b if m & 2 else ~b) & (c if m & 1 else ~c))
    return out


def _shift_right_pair(a, b, r, w):
    """The low w bits of (b : a) shifted right by r (ints and numpy arrays)."""
    r %= w
    return unsigned(a, w) >> r | (unsigned(b, w) << (w - r) if r else 0)


# vpshrdq (VBMI2): a right shift of a whose vacated top bits come from the bottom of b
SHIFT_RIGHT_PAIR = Arith(lambda s, w: _shift_right_pair(*s, w),
                         lambda z3, s, w: z3.LShR(s[0], s[2] % w) | (s[1] << (w - s[2] % w) if s[2] % w else 0))

# vpternlogd/q: any bitwise function of three sources, its truth table the immediate
TERNARY = Arith(lambda s, w: _ternary(*s), lambda z3, s, w: _ternary(*s))


def truth_table(fn: Callable[[int, int, int], int]) -> int:
    """vpternlog's immediate for fn(a, b, c) of the sources' bits, in operand order: bit 4a + 2b + c."""
    return sum((fn(m >> 2 & 1, m >> 1 & 1, m & 1) & 1) << m for m in range(8))


def ternary_is_linear(table: int, fixed: tuple[bool, bool, bool]) -> bool:
    """Whether the truth table, for every value of the bits of the `fixed`
    sources (constants), is a GF(2)-linear function of the other sources'
    bits: their xor where some bits are masks, say, but not their and."""
    free = [k for k in range(3) if not fixed[k]]
    for const in product(*((0, 1) if fixed[k] else (0,) for k in range(3))):
        def f(bits: dict[int, int]) -> int:
            m = sum((bits.get(k, const[k])) << (2 - k) for k in range(3))
            return table >> m & 1
        for assign in product((0, 1), repeat=len(free)):
            one_by_one = 0
            for k, bit in zip(free, assign):
                if bit:
                    one_by_one ^= f({k: 1, **{j: 0 for j in free if j != k}})
            if f(dict(zip(free, assign))) != one_by_one:
                return False
    return True

_LOW52 = (1 << 52) - 1
_LOW26 = (1 << 26) - 1


def _high52(a, b):
    """Bits 52..103 of the product of the low 52 bits of a and b, from 26-bit
    halves whose partial products fit int64 (numpy) as well as ints."""
    a, b = a & _LOW52, b & _LOW52
    a1, a0, b1, b0 = a >> 26, a & _LOW26, b >> 26, b & _LOW26
    return a1 * b1 + ((((a0 * b0) >> 26) + a1 * b0 + a0 * b1) >> 26)


def _product52(z3, a, b):
    return z3.ZeroExt(52, z3.Extract(51, 0, a)) * z3.ZeroExt(52, z3.Extract(51, 0, b))


# vpmadd52luq/huq (IFMA), accumulating on 64-bit lanes: the destination plus the low or the high 52 bits
# of the 104-bit product of its sources' low 52 bits (the low bits of a wrapped product are the same)
MADD52LO = Arith(lambda s, w: s[0] + (s[1] * s[2] & _LOW52),
                 lambda z3, s, w: s[0] + z3.ZeroExt(w - 52, z3.Extract(51, 0, s[1] * s[2])))
MADD52HI = Arith(lambda s, w: s[0] + _high52(s[1], s[2]),
                 lambda z3, s, w: s[0] + z3.ZeroExt(w - 52, z3.Extract(103, 52, _product52(z3, s[1], s[2]))))

# the products a widening row (`Op.widen`) and its low half compute, by their width-neutral names
PRODUCT_HALVES = {"mullo": MULLO, "mulhi": MULHI, "mulhu": MULHU}


def _shift_pair(left: bool):
    """shld/shrd: the destination shifted by the count, the bits shifted in from the top (shld) or the
    bottom (shrd) of the source; the count taken modulo the width, as the CPU takes it (0: unchanged)."""
    def value(s, w):
        a, b, k = s
        k %= w
        if k == 0:
            return a
        # the shifted-in part read signed again (it is below 2^(w-1)), so both parts have one type
        return (a << k) | wrap(unsigned(b, w) >> (w - k), w) if left else wrap(unsigned(a, w) >> k, w) | (b << (w - k))

    def smt(z3, s, w):
        a, b, k = s
        k %= w
        if k == 0:
            return a
        return (a << k) | z3.LShR(b, w - k) if left else z3.LShR(a, k) | (b << (w - k))
    return Arith(value, smt)


SHLD, SHRD = _shift_pair(left=True), _shift_pair(left=False)


@dataclass(frozen=True)
class Blocks:
    """Semantics of a row that neither computes lane by lane nor moves units
    (a sum of products of halves, a carry-less product, a byte table look-up):
    each `block`-bit block of the destination from the same block of each
    source. `value(sources, imm)` takes each source's blocks as numpy arrays
    of shape (..., block // part) of unsigned `part`-bit parts and gives the
    destination's the same way (any integer type: parts are cut to `part`
    bits). Concrete only: the verifier follows such rows inside tagged idioms
    or by their forms over GF(2), never by their values."""

    block: int
    part: int
    value: Callable

    def on_bytes(self, sources, imm: int | None, size: int):
        """The destination's `size` bytes from the sources' (numpy uint8 arrays of shape (rows, size))."""
        import numpy as np

        part = np.dtype(f"<u{self.part // 8}")
        shape = (-1, size * 8 // self.block, self.block // self.part)
        out = np.asarray(self.value(tuple(np.ascontiguousarray(x).view(part).reshape(shape) for x in sources), imm))
        return out.astype(part).reshape(out.shape[0], -1).view(np.uint8)


def _sum_of_products(sources, imm):
    """vpmaddwd: the 32-bit sum of the products of the signed 16-bit halves (wrapping as the CPU does
    when both products are 2^30)."""
    import numpy as np

    a, b = (lane_value(x.astype(np.int64), 16) for x in sources)
    total = (a * b).sum(axis=-1, keepdims=True)
    return np.concatenate([total, total >> 16], axis=-1)


def clmul(x, y):
    """The 128-bit carry-less product of numpy arrays of 64-bit words, as (low words, high words)."""
    import numpy as np

    word = np.uint64
    low, high = np.zeros_like(x), np.zeros_like(x)
    for i in range(64):
        taken = x & (word(0) - (y >> word(i) & word(1)))  # x where bit i of y is set
        low ^= taken << word(i)
        if i:
            high ^= taken >> word(64 - i)
    return low, high


def _carryless(sources, imm):
    """vpclmulqdq: per 128-bit block, the carry-less product of the first source's word imm[0] and the
    second's word imm[4]."""
    import numpy as np

    a, b = sources
    return np.stack(clmul(a[..., imm & 1], b[..., imm >> 4 & 1]), axis=-1)


def _byte_lookup(sources, imm):
    """vpshufb: per 128-bit block, byte k of the first source at the index the low four bits of byte k of
    the second give, or zero where that byte's top bit is set."""
    import numpy as np

    a, control = sources
    picked = np.take_along_axis(a, (control & 15).astype(np.intp), axis=-1)
    return np.where(control & 0x80, 0, picked)


def _affine_bytes(sources, imm):
    """vgf2p8affineqb: per 64-bit block, bit i of each byte x of the first source is the parity of x and
    byte 7 - i of the second (an 8 x 8 bit matrix over GF(2)), xored with bit i of the immediate."""
    import numpy as np

    x, matrix = sources
    parity = np.array([bin(k).count("1") & 1 for k in range(256)], dtype=np.uint8)
    out = np.zeros_like(x)
    for i in range(8):
        bit = parity[x & matrix[..., 7 - i:8 - i]] ^ np.uint8(imm >> i & 1)
        out |= bit << np.uint8(i)
    return out


Route = tuple[tuple[int, int] | None, ...]


@dataclass(frozen=True)
class Move:
    """A data movement: destination unit k takes unit j of source s, or zero.

    `unit` is the moved granularity in bits (0: the data's own lane width).
    `route(dest_units, src_units, imm, unit_bits)` gives, per destination
    unit, (source index among the instruction's sources, unit index) or
    None for a zero unit; `src_units` are the sources' sizes in units. A
    route of None says this immediate, or this register width (a
    destination of `dest_units` units), is not a movement of the instruction.
    Routes are written for any register width the instruction has.
    """

    unit: int
    route: Callable[[int, tuple[int, ...], int | None, int], Route]
    # a permutation by an index register: the position among the instruction's sources of the register
    # whose contents, read as one little-endian integer, the route takes where an immediate would be
    # (its unit k the k-th `unit`-bit field); None: the route reads the immediate (or an opmask's bits)
    indices: int | None = None


def _zeros(n, srcs, imm, u):
    return (None,) * n


def _identity(n, srcs, imm, u):
    return tuple((0, k) if k < srcs[0] else None for k in range(n))


def _broadcast(n, srcs, imm, u):
    return ((0, 0),) * n


_VEX_WIDEST = 256  # bits of the widest register a VEX encoding names (ymm)

# in-lane shuffles (unpacks, pshufd, pshuflw/pshufhw, byte shifts, alignr) work within each 128-bit lane
# of a register, whatever its width
LANE_BLOCK_BITS = 128


def _halves(n, u):
    """Units per 128-bit lane and the lanes' first units."""
    per = max(1, LANE_BLOCK_BITS // u)
    return per, range(0, n, per)


def _unpack(high: bool):
    def route(n, srcs, imm, u):
        per, starts = _halves(n, u)
        out = []
        for h in starts:
            first = h + (per // 2 if high else 0)
            for k in range(per // 2):
                out += [(0, first + k), (1, first + k)]
        return tuple(out)
    return route


def _blend(n, srcs, imm, u):
    """A unit of the second source where its immediate bit (repeating every 8 units) is set; VEX forms
    only, so registers of at most 256 bits."""
    if n * u > _VEX_WIDEST or imm > 0xFF:
        return None
    return tuple((1, k) if imm >> (k % 8) & 1 else (0, k) for k in range(n))


def _perm2x128(n, srcs, imm, u):
    """The two halves of a 256-bit register, each any half of either source (or zero)."""
    if n != 2:
        return None
    out = []
    for h in range(2):
        sel = imm >> (4 * h) & 0xF
        out.append(None if sel & 8 else (sel >> 1 & 1, sel & 1))
    return tuple(out)


def _pshufd(n, srcs, imm, u):
    return tuple((0, k - k % 4 + (imm >> (2 * (k % 4)) & 3)) for k in range(n))


def _odd_duplicated(n, srcs, imm, u):
    """Each odd unit copied over its even neighbour (vmovshdup)."""
    return tuple((0, k | 1) for k in range(n))


def _pshuflw(n, srcs, imm, u):
    """16-bit units: the low four of each 128-bit half permuted by the immediate, the high four kept."""
    return tuple((0, k - k % 8 + (imm >> (2 * (k % 8)) & 3)) if k % 8 < 4 else (0, k) for k in range(n))


def _pshufhw(n, srcs, imm, u):
    """16-bit units: the high four of each 128-bit half permuted by the immediate, the low four kept."""
    return tuple((0, k - k % 8 + 4 + (imm >> (2 * (k % 8 - 4)) & 3)) if k % 8 >= 4 else (0, k) for k in range(n))


def _permq(n, srcs, imm, u):
    """64-bit units: each 256-bit half of the destination picks units of the same half by the immediate."""
    return tuple((0, k - k % 4 + (imm >> (2 * (k % 4)) & 3)) for k in range(n))


def _alignr(n, srcs, imm, u):
    """Bytes imm.. of (first source : second source), per 128-bit half."""
    out = []
    for k in range(n):
        h, j = k - k % 16, k % 16 + imm
        out.append((1, h + j) if j < 16 else (0, h + j - 16) if j < 32 else None)
    return tuple(out)


def _byteshift(left: bool):
    def route(n, srcs, imm, u):
        out = []
        for k in range(n):
            h, j = k - k % 16, k % 16 + (-imm if left else imm)
            out.append((0, h + j) if 0 <= j < 16 else None)
        return tuple(out)
    return route


def _extract(n, srcs, imm, u):
    """Unit `imm` of the source into the lowest unit, the others zero: the unit the immediate's low bits name
    (the CPU ignores the others)."""
    return ((0, imm % srcs[0]),) + (None,) * (n - 1)


def _one_from_each(n, srcs, imm, u):
    """Unit k of the destination the first unit of source k."""
    return tuple((k, 0) if k < len(srcs) else None for k in range(n))


def _insert128(n, srcs, imm, u):
    """The second source into the half the immediate's low bits name (the CPU ignores the others)."""
    return tuple((1, 0) if k == imm % n else (0, k) for k in range(n))


def _insert_element(n, srcs, imm, u):
    """The second source's unit 0 into the unit the immediate's low bits name (the CPU ignores the others)."""
    return tuple((1, 0) if k == imm % n else (0, k) for k in range(n))


def _element_shift(elem: int, left: bool):
    """A shift by `imm` bits inside `elem`-bit elements, as a move of bytes;
    None (no route) unless imm is a whole number of bytes."""
    def route(n, srcs, imm, u):
        if imm % 8:
            return None
        per, by = elem // 8, imm // 8
        out = []
        for k in range(n):
            g, j = k - k % per, k % per + (-by if left else by)
            out.append((0, g + j) if 0 <= j < per else None)
        return tuple(out)
    return route


@dataclass(frozen=True)
class Op:
    name: str  # IR opcode
    slots: tuple[Slot, ...]
    cls: str  # "alu", "mul", "shuffle", "load", "store", "clmul", "move", "address", "control"
    forms: tuple[Form, ...]  # its encodings (none: lanes lowered one by one onto general registers, `on_gpr`)
    elem: int | None = None  # element width computed on (None: bitwise or whole register)
    generic: str | None = None  # width-neutral name: by_width(generic, elem) is this op
    arith: Arith | None = None
    move: Move | None = None
    commutative: bool = False
    # products of the low `elem/2`-bit halves of each `elem`-bit unit: the unit's low half is their
    # mullo, its high half their `widen` ("mulhi" signed, "mulhu" unsigned), in lanes of elem/2 bits
    widen: str | None = None
    halves: bool = False  # the 256-bit form works on each 128-bit half alone (so it splits into two xmm forms)
    selector_first: bool = False  # the first source is also the selector operand, printed again last (vblendvpd)
    # the general-register row each lane of this vector operation becomes where lanes live in general
    # registers (the scalar ISA, `passes.legalise`); None: no such lowering
    on_gpr: str | None = None
    # the assembly lines of a general-register operation spelt as several instructions, as format strings
    # over the operand texts ({0} the destination); None: one instruction, its mnemonic and operands
    lines: tuple[str, ...] | None = None
    # how many of `lines` only load reserved scratch registers from the operands (`BLEND_SCRATCH`): the
    # printer leaves them out where the scratch registers already hold what they would load
    scratch_lines: int = 0
    # an opmask row (its "k" slot): "merge" keeps the destination's lanes whose mask bit is 0 (the
    # destination is then also read), "zero" writes zero there; None: no mask
    masking: str | None = None
    blocks: Blocks | None = None  # semantics neither element-wise nor a movement (`Blocks`)
    # its time depends on its operands' values (as a division's does): no kernel may hold it, the
    # constant-time proof (`passes.constant_time`) refuses it; no row of this table is such
    variable_time: bool = False

    @property
    def encodable(self) -> bool:
        """Whether some x86 instruction does this on vectors or registers as written (else the
        row stands for lanes lowered one by one onto general registers, `on_gpr`)."""
        return bool(self.forms)

    @cached_property  # asked of every instruction by every pass
    def written(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.slots) if "w" in s.access)

    @cached_property
    def read(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.slots) if "r" in s.access)

    @property
    def gpr_only(self) -> bool:
        return all(s.kind in ("g", "gm", "m", "i") for s in self.slots)

    @cached_property
    def destination_apart(self) -> bool:
        """Whether the IR names a written-only destination apart from a first
        source register of its kind (`x = y + z`), which a two-operand form
        cannot: there the destination is the first source."""
        d, *sources = self.slots
        return d.access == "w" and d.kind in ("v", "g") and len(sources) >= 2 and sources[0] == Slot("r", d.kind)

    def form(self, encoding: Encoding, bits: int | None) -> Form:
        """The form of this row under `encoding` on `bits`-bit vector
        registers; a general-register instruction has one form on every ISA."""
        if self.gpr_only:
            return self.forms[0]
        for f in self.forms:
            if f.exists(encoding, bits):
                return f
        raise KeyError(f"{self.name} has no {encoding.name} form on {bits}-bit registers")

    def form_exists(self, encoding: Encoding, bits: int) -> bool:
        """Whether this row has a form in `encoding` on `bits`-bit registers."""
        return any(f.exists(encoding, bits) for f in self.forms)

    def encoded_in(self, encoding: Encoding) -> bool:
        """Whether some form of this row is of `encoding`."""
        return any(f.encoding == encoding for f in self.forms)

    def spelt(self, texts: list[str]) -> list[str]:
        """The operand texts as an instruction of this row spells them: under an opmask, the mask
        decorates the destination ({k2}, and {z} for zeroing) instead of standing apart."""
        if self.masking is None:
            return list(texts)
        return [f"{texts[0]}{{{texts[1]}}}" + ("{z}" if self.masking == "zero" else ""), *texts[2:]]

    def ties(self, form: Form) -> bool:
        """Whether `form` names one register for the destination and the first
        source: an operation with its destination apart in a two-operand
        encoding, or with more register operands than its encoding names
        (vpternlog's three sources: the instruction reads its destination)."""
        registers = sum(slot.kind in ("v", "vm", "g", "gm") for slot in self.slots)
        return self.destination_apart and (form.encoding.operands == 2 or registers > form.encoding.operands)


def _forms(vex: str | None, legacy: str | None, sse: str | None, avx: str | None, extra: tuple[str, ...] = (),
           extra256: tuple[str, ...] = (), avx256: str = "AVX2", widths: tuple[int, ...] = VEX.widths
           ) -> tuple[Form, ...]:
    """The usual pair: a legacy form (xmm) needing `sse`, and a VEX form on
    `widths` whose VEX.128 encoding needs `avx` ("AVX" or "AVX2") and VEX.256
    one `avx256` (AVX2 for integer operations, AVX for plain moves); extra:
    further extensions of every form (extra256 in place of them on VEX.256)."""
    out = []
    if legacy is not None:
        out.append(Form(LEGACY, LEGACY.widths, legacy, frozenset({sse} - {None}) | frozenset(extra), LEGACY.registers))
    if vex is not None:
        needs_at = {128: frozenset({avx}) | frozenset(extra), 256: frozenset({avx256}) | frozenset(extra256 or extra)}
        for needs in dict.fromkeys(needs_at[w] for w in widths):  # one form for the widths needing the same
            out.append(Form(VEX, tuple(w for w in widths if needs_at[w] == needs), vex, needs, VEX.registers))
    return tuple(out)


def _vex(mnemonic: str, avx: str, **kwargs) -> tuple[Form, ...]:
    """A VEX form alone (no legacy one), as `_forms`."""
    return _forms(mnemonic, None, None, avx, **kwargs)


def _evex(mnemonic: str, *extensions: str, widths: tuple[int, ...] = EVEX.widths) -> tuple[Form, ...]:
    """EVEX forms alone on `widths`: on zmm registers needing AVX512F and
    `extensions`, on xmm and ymm registers AVX512VL besides."""
    needs = frozenset({"AVX512F", *extensions})
    short = tuple(w for w in widths if w < 512)
    return (((Form(EVEX, (512,), mnemonic, needs, EVEX.registers),) if 512 in widths else ()) +
            ((Form(EVEX, short, mnemonic, needs | {"AVX512VL"}, EVEX.registers),) if short else ()))


def _evex_elementwise(mnemonic: str, elem: int | None) -> tuple[Form, ...]:
    """The EVEX forms of an operation on `elem`-bit elements: on bytes and 16-bit elements they need AVX512BW."""
    return _evex(mnemonic, *(("AVX512BW",) if elem in (8, 16) else ()))


_GENERAL_REGISTERS = 16  # rax .. r15


def _gpr(mnemonic: str, *extensions: str, encoding: Encoding = LEGACY) -> tuple[Form, ...]:
    """A general-register instruction's one form (mulx is VEX-encoded, for three operands)."""
    return (Form(encoding, (64,), mnemonic, frozenset(extensions), _GENERAL_REGISTERS),)


_MOVE = dict(avx256="AVX")


_YMM = (256,)  # whole 128-bit halves moved: no xmm form
_XMM = (128,)  # a part of an xmm register: no ymm form


_VEX3 = "w:v,r:v,r:vm"
_VEX3I = "w:v,r:v,r:vm,r:i"
_SHIFT = "w:v,r:v,r:i"

IDENTITY = Move(0, _identity)

_ROWS: list[Op] = []


_CROSSING = {"vperm2i128", "vshufi64x2", "vpermq", "vextracti128", "vinserti128", "vpbroadcastw", "vpbroadcastd",
             "vpbroadcastq", "vpbroadcastq_x", "vbroadcasti128", "vbroadcasti64x4", "vextracti64x4",
             "valignq", "vpermi2q", "vpermt2q", "vpermi2d",
             "vpermt2d"}  # vector forms that move data between the 128-bit halves


def _row(name, sig, cls, forms, *, elem=None, generic=None, arith=None, move=None, commutative=False, widen=None,
         selector_first=False, on_gpr=None, lines=None, scratch_lines=0, blocks=None):
    s = _sig(sig)
    halves = bool(forms) and name not in _CROSSING and \
        any(slot.kind in ("v", "vm") for slot in s) and all(slot.kind != "g" and slot.kind != "gm" for slot in s)
    _ROWS.append(Op(name, s, cls, forms, elem, generic, arith, move, commutative, widen, halves, selector_first,
                    on_gpr, lines, scratch_lines, blocks=blocks))


def _moved_under_mask(route: Callable, elem: int, zeroing: bool) -> Callable:
    """A movement under an opmask, its route taking the mask's bits as its immediate (one bit per
    `elem`-bit element; None: the mask is not known, and neither is the movement): a unit whose bit is
    set moved as `route` moves it from the sources after the old destination and the mask, else the
    destination's own unit (merging) or zero."""
    def masked(n, srcs, imm, u):
        inner = route(n, srcs[2:], None, u) if imm is not None else None
        if inner is None:
            return None
        return tuple((None if zeroing else (0, k)) if not imm >> (k * u // elem) & 1 else
                     None if r is None else (r[0] + 2, r[1]) for k, r in enumerate(inner))
    return masked


def _masked_row(name: str, masking: str, generic: str | None = None) -> None:
    """Row `name` under an opmask, as its EVEX forms encode it (`name_merge`,
    `name_zero`): the mask read after the destination, which merge-masking
    reads too; the semantics the row's own (`Arith.masked`, `_moved_under_mask`).
    Not commutative: its second and third operands are the mask and a source.
    Its width-neutral name, by which an ISA says whether it has it (`Isa.has`),
    is `generic` ("add_merge" for a row builders do not otherwise ask for), else
    the row's with the masking after it (duplicate_odd_merge)."""
    op = next(row for row in _ROWS if row.name == name)
    dst, *rest = op.slots
    access = "rw" if masking == "merge" else dst.access
    # Its sources are registers: a masked load's time depends on its mask (fault suppression), so a masked
    # operand from memory would make a kernel's time depend on its data (measured on Zen 5:
    # docs/performance.md, "Measurements behind design choices").
    rest = [Slot(slot.access, "v") if slot.kind == "vm" else slot for slot in rest]
    slots = (Slot(access, dst.kind), Slot("r", "k"), *rest)
    zeroing = masking == "zero"
    arith = op.arith.masked(zeroing, accumulating="r" in dst.access) if op.arith is not None else None
    move = None
    if op.move is not None and op.arith is None:
        if any(slot.kind == "i" for slot in rest):
            raise ValueError(f"{name}: a masked movement reads the mask's bits where the immediate would be")
        move = Move(op.move.unit, _moved_under_mask(op.move.route, op.elem, zeroing))
    _ROWS.append(Op(f"{name}_{masking}", slots, op.cls, tuple(f for f in op.forms if f.encoding is EVEX), op.elem,
                    generic or op.generic and f"{op.generic}_{masking}", arith, move, False, None, op.halves,
                    masking=masking))


# Each row's forms: `_forms` the usual legacy and VEX ones, `_vex` a VEX form alone, `_gpr` a general-register
# instruction's one form, () none (lanes lowered onto general registers); further forms (EVEX) join the tuple.

# moves between registers and memory (sizes: the memory operand's)
_row("load", "w:v,r:m", "load", _forms("vmovdqu", "movdqu", "SSE2", "AVX", **_MOVE) + _evex("vmovdqu64"),
     move=IDENTITY)
_row("load_aligned", "w:v,r:m", "load", _forms("vmovdqa", "movdqa", "SSE2", "AVX", **_MOVE) + _evex("vmovdqa64"),
     move=IDENTITY)
_row("store", "w:m,r:v", "store", _forms("vmovdqu", "movdqu", "SSE2", "AVX", **_MOVE) + _evex("vmovdqu64"),
     move=IDENTITY)
_row("store_aligned", "w:m,r:v", "store", _forms("vmovdqa", "movdqa", "SSE2", "AVX", **_MOVE) + _evex("vmovdqa64"),
     move=IDENTITY)
_row("copy", "w:v,r:v", "move", _forms("vmovdqa", "movdqa", "SSE2", "AVX", **_MOVE) + _evex("vmovdqa64"),
     move=IDENTITY)
_row("load64", "w:v,r:m", "load", _forms("vmovq", "movq", "SSE2", "AVX", widths=_XMM) + _evex("vmovq", widths=_XMM),
     move=IDENTITY)
_row("store64", "w:m,r:v", "store", _forms("vmovq", "movq", "SSE2", "AVX", widths=_XMM) + _evex("vmovq", widths=_XMM),
     move=IDENTITY)
_row("load32", "w:v,r:m", "load", _forms("vmovd", "movd", "SSE2", "AVX", widths=_XMM) + _evex("vmovd", widths=_XMM),
     move=IDENTITY)
_row("store32", "w:m,r:v", "store", _forms("vmovd", "movd", "SSE2", "AVX", widths=_XMM) + _evex("vmovd", widths=_XMM),
     move=IDENTITY)
# one 16-bit element, chosen by the immediate, stored to memory
_row("store16", "w:m,r:v,r:i", "store", _forms("vpextrw", "pextrw", "SSE4.1", "AVX", widths=_XMM)
     + _evex("vpextrw", "AVX512BW", widths=_XMM), elem=16)
_row("vpbroadcastw", "w:v,r:m", "load", _vex("vpbroadcastw", "AVX2") + _evex("vpbroadcastw", "AVX512BW"), elem=16,
     generic="broadcast", move=Move(16, _broadcast))
_row("vpbroadcastd", "w:v,r:m", "load", _vex("vpbroadcastd", "AVX2") + _evex("vpbroadcastd"), elem=32,
     generic="broadcast", move=Move(32, _broadcast))
_row("vpbroadcastq", "w:v,r:m", "load", _vex("vpbroadcastq", "AVX2") + _evex("vpbroadcastq"), elem=64,
     generic="broadcast", move=Move(64, _broadcast))
# a ymm (zmm) register from element 0 of an xmm register
_row("vpbroadcastq_x", "w:v,r:v", "shuffle", _vex("vpbroadcastq", "AVX2") + _evex("vpbroadcastq"), elem=64,
     move=Move(64, _broadcast))

# element-wise arithmetic
for _w, _s in ((16, "w"), (32, "d"), (64, "q")):
    _row(f"vpadd{_s}", _VEX3, "alu", _forms(f"vpadd{_s}", f"padd{_s}", "SSE2", "AVX")
         + _evex_elementwise(f"vpadd{_s}", _w), elem=_w, generic="add",
         arith=ADD, commutative=True, on_gpr="add64" if _w == 64 else None)
    _row(f"vpsub{_s}", _VEX3, "alu", _forms(f"vpsub{_s}", f"psub{_s}", "SSE2", "AVX")
         + _evex_elementwise(f"vpsub{_s}", _w), elem=_w, generic="sub",
         arith=SUB, on_gpr="sub64" if _w == 64 else None)
_row("vpmullw", _VEX3, "mul", _forms("vpmullw", "pmullw", "SSE2", "AVX") + _evex_elementwise("vpmullw", 16), elem=16, generic="mullo", arith=MULLO,
     commutative=True)
_row("vpmulhw", _VEX3, "mul", _forms("vpmulhw", "pmulhw", "SSE2", "AVX") + _evex_elementwise("vpmulhw", 16), elem=16, generic="mulhi", arith=MULHI,
     commutative=True)
_row("vpmulhuw", _VEX3, "mul", _forms("vpmulhuw", "pmulhuw", "SSE2", "AVX") + _evex_elementwise("vpmulhuw", 16), elem=16, generic="mulhu",
     arith=MULHU, commutative=True)
_row("vpmulhrsw", _VEX3, "mul", _forms("vpmulhrsw", "pmulhrsw", "SSSE3", "AVX") + _evex_elementwise("vpmulhrsw", 16), elem=16, generic="mulhrs",
     arith=MULHRS, commutative=True)
_row("vpmulld", _VEX3, "mul", _forms("vpmulld", "pmulld", "SSE4.1", "AVX") + _evex_elementwise("vpmulld", 32), elem=32, generic="mullo",
     arith=MULLO, commutative=True)
# 32 x 32 -> 64-bit products of the even elements: no element-wise semantics at one width, but
# lane semantics on 32-bit lanes (`widen`: the even lane gets the low half, the odd lane the high half)
_row("vpmuldq", _VEX3, "mul", _forms("vpmuldq", "pmuldq", "SSE4.1", "AVX") + _evex_elementwise("vpmuldq", 64), elem=64, commutative=True,
     widen="mulhi")
_row("vpmuludq", _VEX3, "mul", _forms("vpmuludq", "pmuludq", "SSE2", "AVX") + _evex_elementwise("vpmuludq", 64), elem=64, commutative=True,
     widen="mulhu", generic="mul32", arith=MUL32)  # on 64-bit lanes: element-wise
# 32-bit sums of the two 16 x 16 -> 32-bit products in each 32-bit unit: no element-wise semantics at one
# width (the verifier follows it only inside a tagged pair reduction)
_row("vpmaddwd", _VEX3, "mul", _forms("vpmaddwd", "pmaddwd", "SSE2", "AVX") + _evex_elementwise("vpmaddwd", 16),
     elem=32, generic="madd", blocks=Blocks(32, 16, _sum_of_products))
_row("vpminuw", _VEX3, "alu", _forms("vpminuw", "pminuw", "SSE4.1", "AVX") + _evex_elementwise("vpminuw", 16),
     elem=16, generic="minu", arith=MINU,
     commutative=True)
_row("vpminud", _VEX3, "alu", _forms("vpminud", "pminud", "SSE4.1", "AVX") + _evex_elementwise("vpminud", 32), elem=32, generic="minu", arith=MINU,
     commutative=True)
_row("vpand", _VEX3, "alu", _forms("vpand", "pand", "SSE2", "AVX") + _evex("vpandq"), generic="and", arith=AND,
     commutative=True, on_gpr="and64")
_row("vpandn", _VEX3, "alu", _forms("vpandn", "pandn", "SSE2", "AVX") + _evex("vpandnq"), generic="andn", arith=ANDN)
_row("vpor", _VEX3, "alu", _forms("vpor", "por", "SSE2", "AVX") + _evex("vporq"), generic="or", arith=OR, commutative=True)
_row("vpxor", _VEX3, "alu", _forms("vpxor", "pxor", "SSE2", "AVX") + _evex("vpxorq"), generic="xor", arith=XOR,
     commutative=True)
# a register of zeros from nothing: the xor of a register with itself, which the CPU recognises and breaks the
# dependence on the old value of (no execution port on Intel cores); a movement of no source (every lane zero)
_row("zero", "w:v", "alu", _evex("vpxord"), move=Move(0, _zeros),
     lines=("vpxord {0}, {0}, {0}",))
_row("vpcmpgtq", _VEX3, "alu", _forms("vpcmpgtq", "pcmpgtq", "SSE4.2", "AVX"), elem=64, generic="cmpgt",
     arith=CMPGT)
# 64-bit lanes have no multiplication and no unsigned minimum below AVX-512 (and no high product at all):
# the scalar ISA lowers these rows lane by lane onto general registers
_row("mullo64", _VEX3, "mul", _evex("vpmullq", "AVX512DQ"), elem=64, generic="mullo", arith=MULLO,
     commutative=True, on_gpr="imul64")
_row("mulhu64", _VEX3, "mul", (), elem=64, generic="mulhu", arith=MULHU, commutative=True, on_gpr="mulx64")
_row("minu64", _VEX3, "alu", _evex("vpminuq"), elem=64, generic="minu", arith=MINU, commutative=True,
     on_gpr="cmovb64")
# no vector instruction below AVX-512 compares 64-bit lanes unsigned (vector code flips the signs first)
_row("cmpgtu64", _VEX3, "alu", (), elem=64, generic="cmpgtu", arith=CMPGTU, on_gpr="sbbmask64")
# the legacy blendvpd reads its selector from xmm0 alone: no legacy form here (`csub.conditional_subtraction`)
_row("vblendvpd", _VEX3, "alu", _vex("vblendvpd", "AVX", avx256="AVX"), elem=64,
     generic="select_negative", arith=SELECT_NEGATIVE, selector_first=True)
# AVX-512 rows: EVEX forms alone, so no ISA of the VEX or legacy encodings selects them. Three sources
# (any bitwise function, its truth table the immediate), an accumulating multiply-add (the destination
# is also read: IFMA), a comparison into an opmask, and an addition and a multiply-add under an opmask,
# merging or zeroing
for _w, _s in ((32, "d"), (64, "q")):
    _row(f"vpternlog{_s}", "w:v,r:v,r:v,r:vm,r:i", "alu", _evex(f"vpternlog{_s}"), elem=_w, generic="ternary",
         arith=TERNARY)
_row("vpmadd52luq", "rw:v,r:v,r:vm", "mul", _evex("vpmadd52luq", "AVX512IFMA"), elem=64, generic="madd52lo",
     arith=MADD52LO, commutative=True)
_row("vpmadd52huq", "rw:v,r:v,r:vm", "mul", _evex("vpmadd52huq", "AVX512IFMA"), elem=64, generic="madd52hi",
     arith=MADD52HI, commutative=True)
_row("vpshrdq", _VEX3I, "alu", _evex("vpshrdq", "AVX512VBMI2"), elem=64, generic="shift_right_pair",
     arith=SHIFT_RIGHT_PAIR)
_row("vpcmpgtq_k", "w:k,r:v,r:vm", "alu", _evex("vpcmpgtq"), elem=64, generic="cmpgt_mask", arith=CMPGT_MASK)
# unsigned a > b (vpcmpuq's predicate 6, "not less or equal"): a carry or borrow into an opmask
_row("vpcmpuq_k", "w:k,r:v,r:vm", "alu", _evex("vpcmpnleuq"), elem=64, generic="cmpgtu_mask", arith=CMPGTU_MASK)
_row("vpaddq_evex", _VEX3, "alu", _evex("vpaddq"), elem=64, arith=ADD, commutative=True)
# where its mask bit is set, the old lane plus a constant (a carry's or borrow's correction): "add_merge"
_masked_row("vpaddq_evex", "merge", "add_merge")
_masked_row("vpaddq_evex", "zero")
for _masking in ("merge", "zero"):
    _masked_row("vpmadd52luq", _masking)
# GF(2) accumulation under a lane mask: a column of a linear map added where the lane's selecting bit is set
# (merging into an accumulator, or zeroing where it starts one)
_row("vpxorq_evex", _VEX3, "alu", _evex("vpxorq"), elem=64, arith=XOR, commutative=True)
_masked_row("vpxorq_evex", "merge", "xor_merge")
_masked_row("vpxorq_evex", "zero", "xor_zero")

# shifts by an immediate: element-wise, and a move of bytes when the count is whole bytes
for _w, _s in ((16, "w"), (32, "d"), (64, "q")):
    # 64-bit elements: EVEX alone
    _row(f"vpsra{_s}", _SHIFT, "alu", (_forms(f"vpsra{_s}", f"psra{_s}", "SSE2", "AVX") if _w != 64 else ())
         + _evex_elementwise(f"vpsra{_s}", _w), elem=_w, generic="sra", arith=SRA)
    _row(f"vpsrl{_s}", _SHIFT, "alu", _forms(f"vpsrl{_s}", f"psrl{_s}", "SSE2", "AVX") + _evex_elementwise(f"vpsrl{_s}", _w),
         elem=_w, generic="srl",
         arith=SRL, move=Move(8, _element_shift(_w, left=False)))
    _row(f"vpsll{_s}", _SHIFT, "alu", _forms(f"vpsll{_s}", f"psll{_s}", "SSE2", "AVX") + _evex_elementwise(f"vpsll{_s}", _w),
         elem=_w, generic="sll",
         arith=SLL, move=Move(8, _element_shift(_w, left=True)))

# shuffles
_row("vpsrldq", _SHIFT, "shuffle", _forms("vpsrldq", "psrldq", "SSE2", "AVX") + _evex("vpsrldq", "AVX512BW"),
     move=Move(8, _byteshift(False)))
_row("vpslldq", _SHIFT, "shuffle", _forms("vpslldq", "pslldq", "SSE2", "AVX") + _evex("vpslldq", "AVX512BW"),
     move=Move(8, _byteshift(True)))
_row("vpblendw", _VEX3I, "shuffle", _forms("vpblendw", "pblendw", "SSE4.1", "AVX"), elem=16, generic="blend",
     move=Move(16, _blend))
_row("vpblendd", _VEX3I, "shuffle", _vex("vpblendd", "AVX2"), elem=32, generic="blend",
     move=Move(32, _blend))
_row("vperm2i128", _VEX3I, "shuffle", _vex("vperm2i128", "AVX2", widths=_YMM), elem=128,
     generic="permute_halves", move=Move(128, _perm2x128))
_row("vpermq", "w:v,r:vm,r:i", "shuffle", _vex("vpermq", "AVX2", widths=_YMM) + _evex("vpermq", widths=(256, 512)),
     elem=64,
     move=Move(64, _permq))
_row("vpshufd", "w:v,r:vm,r:i", "shuffle", _forms("vpshufd", "pshufd", "SSE2", "AVX") + _evex("vpshufd"), elem=32,
     move=Move(32, _pshufd))
_row("vmovshdup", "w:v,r:vm", "shuffle", _forms("vmovshdup", "movshdup", "SSE3", "AVX", **_MOVE) + _evex("vmovshdup"), elem=32,
     generic="duplicate_odd", move=Move(32, _odd_duplicated))
_row("vpshufb", _VEX3, "shuffle", _forms("vpshufb", "pshufb", "SSSE3", "AVX") + _evex("vpshufb", "AVX512BW"),
     blocks=Blocks(128, 8, _byte_lookup))
_row("vpshuflw", "w:v,r:vm,r:i", "shuffle", _forms("vpshuflw", "pshuflw", "SSE2", "AVX")
     + _evex("vpshuflw", "AVX512BW"), elem=16,
     generic="shuffle_low", move=Move(16, _pshuflw))
_row("vpshufhw", "w:v,r:vm,r:i", "shuffle", _forms("vpshufhw", "pshufhw", "SSE2", "AVX") + _evex("vpshufhw", "AVX512BW"), elem=16,
     generic="shuffle_high", move=Move(16, _pshufhw))
_row("vpalignr", _VEX3I, "shuffle", _forms("vpalignr", "palignr", "SSSE3", "AVX") + _evex("vpalignr", "AVX512BW"), move=Move(8, _alignr))
for _w, _s in ((8, "bw"), (16, "wd"), (32, "dq"), (64, "qdq")):
    _row(f"vpunpckl{_s}", _VEX3, "shuffle", _forms(f"vpunpckl{_s}", f"punpckl{_s}", "SSE2", "AVX")
         + _evex_elementwise(f"vpunpckl{_s}", _w), elem=_w,
         generic="interleave_low", move=Move(_w, _unpack(high=False)))
    _row(f"vpunpckh{_s}", _VEX3, "shuffle", _forms(f"vpunpckh{_s}", f"punpckh{_s}", "SSE2", "AVX")
         + _evex_elementwise(f"vpunpckh{_s}", _w), elem=_w,
         generic="interleave_high", move=Move(_w, _unpack(high=True)))
_row("vextracti128", _SHIFT, "shuffle", _vex("vextracti128", "AVX2", widths=_YMM)
     + _evex("vextracti64x2", "AVX512DQ", widths=_YMM), move=Move(128, _extract))
_row("vinserti128", _VEX3I, "shuffle", _vex("vinserti128", "AVX2", widths=_YMM)
     + _evex("vinserti64x2", "AVX512DQ", widths=_YMM), move=Move(128, _insert128))
_row("vpclmulqdq", _VEX3I, "clmul",
     _forms("vpclmulqdq", "pclmulqdq", None, "AVX", extra=("PCLMULQDQ",), extra256=("VPCLMULQDQ",), avx256="AVX")
     + _evex("vpclmulqdq", "VPCLMULQDQ"), blocks=Blocks(128, 64, _carryless))
# GFNI's EVEX forms only: its legacy and VEX forms would make SSE and AVX2 kernels leave out CPUs without GFNI
# (AMD Zen 3 has AVX2 and VPCLMULQDQ), while every CPU with AVX-512 VBMI2 and VPCLMULQDQ has it
_row("vgf2p8affineqb", _VEX3I, "alu", _evex("vgf2p8affineqb", "GFNI"), elem=8, generic="affine_bytes",
     blocks=Blocks(64, 8, _affine_bytes))

# general-purpose registers, and moves between them and vectors
_row("mov", "w:g,r:gm", "move", _gpr("mov"), move=IDENTITY)
_row("lea", "w:g,r:m", "address", _gpr("lea"))  # an address into a register: no memory access
_row("add", "rw:g,r:i", "address", _gpr("add"))  # moves an address register along (`passes.roll`)
# a rolled loop (`passes.roll`): `repeat c, k, id` sets counter c to k and labels the loop's top;
# `repeat_end c, id` counts c down and branches back while it is nonzero (`printer` spells both)
_row("repeat", "w:g,r:i,r:i", "control", _gpr("mov"))
_row("repeat_end", "rw:g,r:i", "control", _gpr("dec"))
_row("mov_store", "w:m,r:g", "store", _gpr("mov"), move=IDENTITY)
_row("xor", "rw:g,r:gm", "alu", _gpr("xor"), arith=XOR)
_row("and", "rw:g,r:gm", "alu", _gpr("and"), arith=AND)
_row("or", "rw:g,r:gm", "alu", _gpr("or"), arith=OR)
# a general register's shift takes its count modulo the width (a vector shift by the width or more zeroes)
_row("shl", "rw:g,r:i", "alu", _gpr("shl"), elem=64,
     arith=_binary(lambda a, k, w: a << k % w, lambda z3, a, k, w: a << k % w))
_row("shr", "rw:g,r:i", "alu", _gpr("shr"), elem=64,
     arith=_binary(lambda a, k, w: unsigned(a, w) >> k % w, lambda z3, a, k, w: z3.LShR(a, k % w)))
_row("shld", "rw:g,r:g,r:i", "alu", _gpr("shld"), elem=64, arith=SHLD)
_row("shrd", "rw:g,r:g,r:i", "alu", _gpr("shrd"), elem=64, arith=SHRD)
# lanes on general registers (the scalar ISA): the vector rows' operations in the same three-operand form,
# destination tied to the first source (two-operand instructions) unless spelt otherwise
_GPR3 = "w:g,r:g,r:gm"
_row("load64_gpr", "w:g,r:m", "load", _gpr("mov"), elem=64, move=IDENTITY)
_row("add64", _GPR3, "alu", _gpr("add"), elem=64, generic="add", arith=ADD, commutative=True)
_row("sub64", _GPR3, "alu", _gpr("sub"), elem=64, generic="sub", arith=SUB)
_row("imul64", _GPR3, "mul", _gpr("imul"), elem=64, generic="mullo", arith=MULLO, commutative=True)
# mulx multiplies by rdx (never allocated on this ISA: `general_family(implicit=...)` in machine/isa.py); VEX-encoded,
# it has three operands, and naming the destination twice keeps the high half alone
_row("mulx64", _GPR3, "mul", _gpr("mulx", "BMI2", encoding=VEX), elem=64,
     generic="mulhu", arith=MULHU, commutative=True, lines=("mov rdx, {1}", "mulx {0}, {0}, {2}"))
# the unsigned minimum: b where b < a (a compare and a conditional move, no branch)
_row("cmovb64", _GPR3, "alu", _gpr("cmovb"), elem=64, generic="minu", arith=MINU,
     commutative=True, lines=("cmp {2}, {0}", "cmovb {0}, {2}"))
_row("and64", _GPR3, "alu", _gpr("and"), generic="and", arith=AND, commutative=True)  # bitwise, as vpand
# a > b unsigned as a mask: the borrow of b - a, spread over the register by a subtraction with borrow
_row("sbbmask64", _GPR3, "alu", _gpr("sbb"), elem=64, generic="cmpgtu", arith=CMPGTU,
     lines=("cmp {2}, {0}", "sbb {0}, {0}"))
_row("movq_to_gpr", "w:g,r:v", "move", _forms("vmovq", "movq", "SSE2", "AVX", widths=_XMM)
     + _evex("vmovq", widths=_XMM), move=IDENTITY)
_row("movq_from_gpr", "w:v,r:g", "move", _forms("vmovq", "movq", "SSE2", "AVX", widths=_XMM)
     + _evex("vmovq", widths=_XMM), move=IDENTITY)
_row("pextrq", "w:g,r:v,r:i", "shuffle", _forms("vpextrq", "pextrq", "SSE4.1", "AVX", widths=_XMM)
     + _evex("vpextrq", "AVX512DQ", widths=_XMM), move=Move(64, _extract))
_row("pinsrq", "w:v,r:v,r:g,r:i", "shuffle", _forms("vpinsrq", "pinsrq", "SSE4.1", "AVX", widths=_XMM)
     + _evex("vpinsrq", "AVX512DQ", widths=_XMM), move=Move(64, _insert_element))
# one 16-bit element from memory into the element the immediate names, the others from the first source
_row("pinsrw", "w:v,r:v,r:m,r:i", "shuffle", _forms("vpinsrw", "pinsrw", "SSE2", "AVX", widths=_XMM)
     + _evex("vpinsrw", "AVX512BW", widths=_XMM), elem=16,
     move=Move(16, _insert_element))


# --- AVX-512 rows --------------------------------------------------------------------------------
# EVEX forms only (no legacy or VEX one), needing AVX512F (the 256-bit form AVX512VL too). Listed last:
# where a VEX row does the same movement (vperm2i128 on 256 bits), lane-move searches that take the
# first row in table order keep the VEX row.


def _shuffle128x2(n, srcs, imm, u):
    """128-bit units: the low half of the destination's from the first source, the high half from the
    second, each unit picked by the immediate (one bit a unit on 256 bits, two on 512)."""
    if n not in (2, 4):
        return None
    width = n.bit_length() - 1
    return tuple((2 * k // n, imm >> (width * k) & (n - 1)) for k in range(n))


def _blend_by_bits(n, srcs, imm, u):
    """A unit of the second source where its immediate bit is set, one bit per unit of the register."""
    return tuple((1, k) if imm >> k & 1 else (0, k) for k in range(n))


# EVEX has no blend by an immediate: the immediate goes through a general register into an opmask, which
# selects the second source's units (vpblendm). The ISA reserves both registers: `BLEND_SCRATCH`.
BLEND_SCRATCH = ("r11", "k1")
for _w, _s in ((16, "w"), (32, "d")):
    _row(f"vpblendm{_s}_imm", _VEX3I, "shuffle", _evex(f"vpblendm{_s}", *(("AVX512BW",) if _w == 16 else ())),
         elem=_w, generic="blend", move=Move(_w, _blend_by_bits),
         lines=(f"mov {BLEND_SCRATCH[0]}d, {{3}}", f"kmovd {BLEND_SCRATCH[1]}, {BLEND_SCRATCH[0]}d",
                f"vpblendm{_s} {{0}}{{{{{BLEND_SCRATCH[1]}}}}}, {{1}}, {{2}}"), scratch_lines=2)

_row("vshufi64x2", _VEX3I, "shuffle", _evex("vshufi64x2", widths=(256, 512)), elem=128,
     generic="permute_halves", move=Move(128, _shuffle128x2))


def _align64(n, srcs, imm, u):
    """64-bit units imm.. of (first source : second source), the second the lower (valignq)."""
    out = []
    for k in range(n):
        j = k + imm % n
        out.append((1, j) if j < srcs[1] else (0, j - srcs[1]) if j - srcs[1] < srcs[0] else None)
    return tuple(out)


# the low 256 bits of memory in both halves of a zmm register, and one 256-bit half out of one
_row("vbroadcasti64x4", "w:v,r:m", "load", _evex("vbroadcasti64x4", widths=(512,)), move=Move(256, _broadcast))
# the low 128 bits of memory in both halves of a ymm register
_row("vbroadcasti128", "w:v,r:m", "load", _vex("vbroadcasti128", "AVX2", widths=_YMM)
     + _evex("vbroadcasti64x2", "AVX512DQ", widths=_YMM), move=Move(128, _broadcast))
_row("vextracti64x4", _SHIFT, "shuffle", _evex("vextracti64x4", widths=(512,)), move=Move(256, _extract))
# a zmm register's halves from two 256-bit memory operands: a ymm load (which clears the upper half) and
# vinserti64x4 from memory, in place of two zmm loads and a lane move of their halves (`passes.halves`)
LOAD_HALVES = "load_halves"
_row(LOAD_HALVES, "w:v,r:m,r:m", "load", _evex("vinserti64x4", widths=(512,)), move=Move(256, _one_from_each),
     lines=("vmovdqu64 {half0}, {1}", "vinserti64x4 {0}, {0}, {2}, 1"))
_row("valignq", _VEX3I, "shuffle", _evex("valignq"), elem=64, move=Move(64, _align64))


def _two_tables(tables: tuple[int, int]):
    """A permutation of the units of two tables (at source positions `tables`) by an index register
    (`Move.indices`): destination unit k takes the unit the low bits of index unit k name in the
    tables laid end to end (the CPU ignores the higher bits)."""
    def route(n, srcs, imm, u):
        if imm is None:  # the index register's contents are not known: neither is the movement
            return None
        picks = (imm >> (u * k) & (2 * n - 1) for k in range(n))
        return tuple((tables[pick // n], pick % n) for pick in picks)
    return route


# Two-source permutations by an index register: on 32- and 64-bit units one µop on port 5 on the Xeon of
# the figures, as vshufi64x2 (on 16-bit units two: no row). vpermi2 overwrites the index register, vpermt2
# the first table. The index is a constant a kernel holds; of the two, the lane moves take vpermi2 (listed
# first), whose copy before it reads that constant, off the data's chain
for _w, _s in ((64, "q"), (32, "d")):
    _row(f"vpermi2{_s}", "rw:v,r:v,r:vm", "shuffle", _evex(f"vpermi2{_s}"), elem=_w, generic="permute_pair",
         move=Move(_w, _two_tables((1, 2)), indices=0))
    _row(f"vpermt2{_s}", "rw:v,r:v,r:vm", "shuffle", _evex(f"vpermt2{_s}"), elem=_w, generic="permute_pair",
         move=Move(_w, _two_tables((0, 2)), indices=1))

# --- Opmask rows of the 32-bit products ----------------------------------------------------------
# An opmask of the 32-bit lanes where two sources share a set bit (a constant selector, made once per
# kernel from a table: the same whether its lanes are read signed or unsigned), and the odd dwords
# copied over the even ones under it, merging: the even lanes' high halves of widening products moved
# down over the odd lanes' product in one instruction, where a VEX kernel moves and then blends
TEST_MASK = _binary(lambda a, b, w: ((a & b) != 0) * 1,
                    lambda z3, a, b, w: z3.If(a & b != 0, z3.BitVecVal(1, w), z3.BitVecVal(0, w)))
_row("vptestmd_k", "w:k,r:v,r:vm", "alu", _evex("vptestmd"), elem=32, generic="test_mask", arith=TEST_MASK,
     commutative=True)
_masked_row("vmovshdup", "merge")

OPS: dict[str, Op] = {op.name: op for op in _ROWS}


@dataclass(frozen=True)
class InstructionTable:
    """Rows by opcode, and which rows do each width-neutral operation."""

    ops: dict[str, Op]

    @cached_property
    def _doing(self) -> dict[tuple[str, int], tuple[str, ...]]:
        found: dict[tuple[str, int], tuple[str, ...]] = {}
        for op in self.ops.values():
            if op.generic is not None and not op.gpr_only:  # general-register rows are reached through `on_gpr`
                found[op.generic, op.elem or 0] = found.get((op.generic, op.elem or 0), ()) + (op.name,)
        return found

    def doing(self, generic: str, bits: int) -> tuple[str, ...]:
        """The rows doing `generic` ("add", "mulhi", "sra", "broadcast",
        "interleave_low", ...) on `bits`-bit elements, in table order, whatever
        their encodings (`Isa.candidates` keeps those an ISA can have);
        bitwise operations ("and", "xor", ...) serve every width."""
        return self._doing.get((generic, bits)) or self._doing.get((generic, 0), ())


TABLE = InstructionTable(OPS)


def spec(name: str) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR opcode {name!r}") from None


def by_width(generic: str, bits: int) -> str:
    """The first row doing `generic` on `bits`-bit elements (`InstructionTable.doing`):
    the one builders write where they leave the choice to no cost model."""
    found = TABLE.doing(generic, bits)
    if not found:
        raise KeyError(f"no instruction does {generic} on {bits}-bit elements")
    return found[0]


def has(generic: str, bits: int) -> bool:
    """Whether some vector instruction, in some encoding, does `generic` on
    `bits`-bit elements (`Isa.has`: one the ISA's kernels can have)."""
    return any(OPS[name].encodable for name in TABLE.doing(generic, bits))


def generic_name(name: str) -> str:
    """The width-neutral name of an element-wise opcode (vpaddw -> add)."""
    g = spec(name).generic
    if g is None:
        raise KeyError(f"{name} has no width-neutral name")
    return g


# moves of exactly one vector of `size` bytes between memory and a register;
# a two-byte vector is broadcast in and its element 0 extracted out
_SIZED_LOADS = {64: "load", 32: "load", 16: "load", 8: "load64", 4: "load32", 2: "vpbroadcastw"}
_SIZED_STORES = {64: "store", 32: "store", 16: "store", 8: "store64", 4: "store32", 2: "store16"}


def sized_load(size: int) -> str:
    return _SIZED_LOADS[size]


def sized_store(size: int) -> str:
    return _SIZED_STORES[size]
