"""Multi-squaring a -> a^(2^k) mod f as one precomputed GF(2)-linear map."""

from __future__ import annotations

from ...ir.instr import Imm, Mem, VReg
from ...machine.isa import Isa
from ...passes.fuse import fuses
from .plan import FieldPlan, msqr_columns
from .vec import Pairs


def map_pays(m: int, k: int, isa: Isa) -> bool:
    """Whether k squarings in a row are cheaper as one application of the
    precomputed linear map (256-bit registers).

    A squaring in a dependent chain costs about its latency, about the same
    for any limb count up to 9 (one carry-less product, two folds; measured:
    docs/performance.md, "Measurements behind design choices"); the map costs about (its instruction count) / 3:
    per 4-limb input chunk and bit, a shift and a compare, then for each of
    4 lane rotations of each 4-limb output chunk an and and an xor, fused
    into one `vpternlogq` where the ISA has it. Measured: m = 233 inversion
    with maps for k >= 14 beats squarings.
    """
    chunks = (m + 255) // 256
    per_column = 1 if fuses(isa) else 2  # a column's and and xor one `vpternlogq`
    ops = chunks * 64 * (2 + 4 * per_column * chunks)
    return 17 * k > ops / 3 + 20


def msqr_map(v: Pairs, plan: FieldPlan, pairs: list[VReg], k: int, isa: Isa) -> list[VReg]:
    """a^(2^k) mod f as the product of a precomputed GF(2) matrix with a.

    Constant time without table lookups: the matrix is applied column by
    column under masks. The input sits in ymm chunks of 4 limbs; for bit b,
    `vpsllq` by 63 - b and `vpcmpgtq` against zero turn bit b of every lane
    into an all-ones or all-zero lane mask, so lane l selects column
    64 l + b. Instead of broadcasting each lane's mask, the columns are
    stored pre-rotated: accumulator s holds, in lane l, output limb
    (l + s) mod 4 of the selected columns, and one `vpermq` per accumulator
    puts the limbs in place at the end. Per bit: 2 + 2 * 4 * (output chunks)
    instructions for up to 4 * (input chunks) columns. Where the ISA has no
    blend of dwords (AVX-512's EVEX forms), the chunks are the pairs inserted
    into halves; where the ISA shifts 64-bit lanes arithmetically (AVX-512),
    `vpsraq` by 63 makes the lane mask, and `fuse bitwise` makes each
    column's and and xor one `vpternlogq` reading the column from memory:
    2 + 4 * (output chunks) instructions per bit.

    The mask is a vector, never an opmask over a memory operand: a masked
    load's time depends on its mask (fault suppression), which would make the
    kernel's time depend on its data (measured on Zen 5: docs/performance.md,
    "Measurements behind design choices").
    """
    b = v.b
    m, n = plan.m, plan.limbs
    nc = (n + 3) // 4
    cols = msqr_columns(m, plan.poly, k)
    z256 = b.table("gf2m_zero4", 8, (0, 0, 0, 0), comment="zero ymm")

    def zero():
        return b.op("load", Mem(z256, 0, 32), bits=256)

    xs = []
    if isa.has("blend", 32):
        lanes = []
        for l in range(n):
            p = pairs[l // 2]
            lanes.append(b.op("vpbroadcastq_x", p if l % 2 == 0 else v.down64(p), bits=256))
        for c in range(nc):
            x = lanes[4 * c]
            for j in range(1, 4):
                src = lanes[4 * c + j] if 4 * c + j < n else zero()
                x = b.op("vpblendd", x, src, Imm(0x3 << (2 * j)), bits=256)
            xs.append(x)
    else:
        for c in range(nc):
            x = zero()
            for h in range(2):
                if 2 * c + h < len(pairs):
                    x = b.op("vinserti128", x, pairs[2 * c + h], Imm(h), bits=256)
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
    arithmetic = isa.has("sra", 64)
    zero_m = None if arithmetic else zero()
    acc: dict[tuple[int, int], VReg] = {}
    for c, bit, uses in plan_ops:
        sh = b.op("vpsllq", xs[c], Imm(63 - bit), bits=256) if bit != 63 else xs[c]
        mask = b.op("vpsraq", sh, Imm(63), bits=256) if arithmetic else b.op("vpcmpgtq", zero_m, sh, bits=256)
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
