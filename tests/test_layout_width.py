"""The NTT layout plans at the Target's vector width from the instruction
table's lane moves: a 512-bit width plans four 128-bit lanes with moves that
are table rows (no kernel is built), and the 256-bit plans stay as they were."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from kerngen.families.ntt.layout import Butterflies, pairs, plan, split_vectors
from kerngen.families.ntt.shuffles import Interleave, Swap, lane_moves
from kerngen.ir.lanes import SPLIT, move_lanes
from kerngen.machine.encoding import EVEX
from kerngen.machine.isa import AVX2
from kerngen.machine.ops import spec
from kerngen.machine.registers import MASKS, general_family, vector_family
from kerngen.machine.target import PLATFORMS, Target, make_target


def wide_target(lane_bits: int) -> Target:
    """A target writing 512-bit vectors into 512-bit registers (an AVX-512 ISA
    as far as the layout is concerned)."""
    isa = dataclasses.replace(AVX2, name="avx512", vector_bits=512, written_bits=512, encoding=EVEX,
                              families=(vector_family(32, EVEX.widths), general_family(), MASKS),
                              extensions=AVX2.extensions | {"AVX512F", "AVX512BW", "AVX512VL"})
    return Target(isa, lane_bits, PLATFORMS["sysv"])


def _natural(n: int, d: int) -> list[int]:
    """Block j (zeta psi^(2j+1)) at positions d*j..: the bit-reversed block index."""
    bits = (n // d).bit_length() - 1
    return [d * int(f"{p // d:0{bits}b}"[::-1] or "0", 2) + p % d for p in range(n)]


def _run(layout, passes, start) -> list[int]:
    """The array after `passes` from `start`, moving lanes by the layout's
    recipes through the table's routes; every butterfly must pair partners."""
    memory = split_vectors(start, layout.lanes)
    for p in passes:
        for group in p.groups:
            regs = [memory[v] for v in group]
            for st in p.steps:
                for lo, hi in pairs(len(regs), st.slot_bit):
                    if isinstance(st, Butterflies):
                        assert all(h == l + (1 << st.bit) for l, h in zip(regs[lo], regs[hi])), st
                    else:
                        regs[lo], regs[hi] = layout.move(st, regs[lo], regs[hi])
            for v, r in zip(group, regs):
                memory[v] = r
    return [i for reg in memory for i in reg]


def _lane_moves(layout) -> list[Swap | Interleave]:
    steps = [st for p in layout.passes + layout.inverse_passes for st in p.steps] + list(layout.block_steps)
    return [st for st in steps if not isinstance(st, Butterflies)]


@pytest.mark.parametrize("layers", [7, 8])
@pytest.mark.parametrize("order", ["fastest", "standard", "natural"])
def test_n256_on_16_bit_lanes_plans_for_512_bits(order, layers):
    """32 lanes in four 128-bit lanes of a 512-bit register: the plan's forward
    order is what its lane moves make, the inverse returns the natural order,
    and every lane move is instructions of table rows moving whole lanes of a
    512-bit register (no VEX blend); lanes 256 bits apart move with vshufi64x2."""
    n = 256
    layout = plan(n, layers, wide_target(16), order)
    assert layout.lanes == 32 and layout.register_bits == 512 and layout.vectors == 8
    out = layout.output_order
    assert sorted(out) == list(range(n))
    assert _run(layout, layout.passes, range(n)) == list(out)
    assert _run(layout, layout.inverse_passes, out) == list(range(n))
    if order == "standard":
        assert list(out) == list(range(n))
    if order == "natural":
        assert list(out) == _natural(n, layout.d)
    used = set()
    for st in _lane_moves(layout):
        for _, op, _, _, _ in layout.shuffles.recipe(st):
            assert spec(op).move is not None, op
            used.add(op)
        ids = list(range(32))
        lo, hi = layout.shuffles.simulate(st, ids, [32 + i for i in ids])  # raises unless whole lanes move
        assert sorted(lo + hi) == list(range(64))
    assert "vshufi64x2" in used and not used & {"vperm2i128", "vpblendd", "vpblendw"}


def test_wider_lanes_plan_for_512_bits():
    for bits, lanes in ((32, 16), (64, 8)):
        layout = plan(1024, 10, wide_target(bits), "standard")
        assert layout.lanes == lanes and list(layout.output_order) == list(range(1024))


def test_lane_moves_across_128_bit_lanes_come_from_the_table():
    """On 256 bits the swap of halves is vperm2i128 as always; on 512 bits the
    swap of 256-bit halves is one vshufi64x2 a result, of 128-bit lanes one
    vpermi2q by an index register (and a copy of it, which the permutation
    overwrites), and the search over arrangements pays for them by their
    instructions."""
    assert lane_moves(16, 256).recipe(Swap(3, 0)) == (("lo", "vperm2i128", "x", "y", 0x20),
                                                      ("hi", "vperm2i128", "x", "y", 0x31))
    wide = lane_moves(16, 512)
    assert wide.recipe(Swap(4, 1)) == (("lo", "vshufi64x2", "x", "y", 0x44), ("hi", "vshufi64x2", "x", "y", 0xEE))
    assert [line[1] for line in wide.recipe(Swap(3, 0))] == ["vpermi2q"] * 2
    assert (wide.cost(Swap(4, 0)), wide.cost(Swap(3, 0)), wide.cost(Interleave(0))) == (2, 4, 2)
    quads = lane_moves(64, 512)  # two 64-bit lanes in each 128-bit lane
    x, y = [f"x{k}" for k in range(8)], [f"y{k}" for k in range(8)]
    assert quads.simulate(Swap(1, 0), x, y) == (["x0", "x1", "y0", "y1", "x4", "x5", "y4", "y5"],
                                                ["x2", "x3", "y2", "y3", "x6", "x7", "y6", "y7"])
    assert quads.simulate(Swap(2, 0), x, y) == (x[:4] + y[:4], x[4:] + y[4:])
    assert dict(lane_moves(16, 128).swaps).keys() == {16, 32, 64}


def test_swaps_inside_128_bit_lanes_take_rows_that_have_the_width():
    """VEX blends stop at 256 bits: there a swap of neighbouring words is two
    shifts and two blends as always; on 512 bits the blends are EVEX ones
    under an opmask of a bit per word of the register (four instructions,
    where gathering each source's even words and interleaving takes eight);
    neighbouring dwords are gathered and interleaved, as cheap as shifting
    and blending them and free of port 0's shifts."""
    assert [line[1] for line in lane_moves(16, 256).recipe(Swap(0, 0))] == ["vpslld", "vpblendw", "vpsrld", "vpblendw"]
    wide = lane_moves(16, 512)
    assert [line[1:] for line in wide.recipe(Swap(0, 0))] == [
        ("vpslld", "y", None, 16), ("vpblendmw_imm", "x", "s", 0xAAAAAAAA),
        ("vpsrld", "x", None, 16), ("vpblendmw_imm", "t", "y", 0xAAAAAAAA)]
    assert [line[1] for line in wide.recipe(Swap(1, 0))] == ["vpshufd", "vpshufd", "vpunpckldq", "vpunpckhdq"]
    assert wide.cost(Swap(0, 0)) == 4
    x, y = list(range(32)), list(range(32, 64))
    assert wide.simulate(Swap(0, 0), x, y) == ([v for i in range(0, 32, 2) for v in (i, 32 + i)],
                                               [v for i in range(1, 32, 2) for v in (i, 32 + i)])
    assert move_lanes(spec("vpblendd"), [x, y], 0xAA, 16, 32, None) is None
    assert move_lanes(spec("vpblendd"), [x[:16], y[:16]], 0xAA, 16, 16, None) == x[:2] + y[2:4] + x[4:6] + \
        y[6:8] + x[8:10] + y[10:12] + x[12:14] + y[14:16]


def test_vshufi64x2_route_picks_128_bit_lanes_of_two_sources():
    """On 512 bits each destination lane takes the lane the immediate's two bits
    name, the low two from the first source, the high two from the second; on
    256 bits one bit a lane; vperm2i128 has no 512-bit form."""
    row = spec("vshufi64x2")
    x, y = [f"x{k}" for k in range(8)], [f"y{k}" for k in range(8)]  # 64-bit lanes: two per 128 bits
    assert move_lanes(row, [x, y], 0x1B, 64, 8, None) == ["x6", "x7", "x4", "x5", "y2", "y3", "y0", "y1"]
    assert move_lanes(row, [x, y], 0x44, 64, 8, None) == ["x0", "x1", "x2", "x3", "y0", "y1", "y2", "y3"]
    assert move_lanes(row, [x[:4], y[:4]], 0b10, 64, 4, None) == ["x0", "x1", "y2", "y3"]
    words = [f"w{k}" for k in range(32)]  # 16-bit lanes travel in groups of eight
    assert move_lanes(row, [words, words], 0b00_01_10_11, 16, 32, SPLIT) == words[24:] + words[16:24] + \
        words[8:16] + words[:8]
    assert move_lanes(spec("vperm2i128"), [x, y], 0x20, 64, 8, None) is None
    assert move_lanes(spec("vperm2i128"), [x[:4], y[:4]], 0x20, 64, 4, None) == ["x0", "x1", "y0", "y1"]


# digests of the plans before the width came from the Target (the same on every later commit)
PLANS_256 = {
    ("avx2", 16, 256, 7, "fastest"): "f29abb7d5a3d141f",
    ("avx2", 16, 256, 7, "standard"): "01dd87d879054f12",
    ("avx2", 16, 256, 7, "natural"): "4ccc36dcc6568268",
    ("avx2", 16, 256, 8, "fastest"): "8e71b09cce145bd3",
    ("avx2", 16, 256, 8, "standard"): "0ae0769bd296272d",
    ("avx2", 32, 256, 8, "fastest"): "39737e96a0665c76",
    ("avx2", 32, 256, 8, "standard"): "ccc5c954c5fea51d",
    ("avx2", 64, 1024, 10, "fastest"): "56e32c21c6e983dc",
    ("avx2", 64, 1024, 10, "standard"): "369413534c0c9ed3",
    ("sse", 16, 256, 7, "standard"): "ff935d225f015298",
    ("scalar", 64, 1024, 10, "standard"): "5097c32e2562fcc2",
}


@pytest.mark.parametrize("key", list(PLANS_256))
def test_shipped_isas_keep_their_256_bit_plans(key):
    isa, bits, n, layers, order = key
    layout = plan(n, layers, make_target(isa, bits), order)
    text = repr((layout.passes, layout.inverse_passes, layout.output_order, layout.block_steps,
                 layout.block_slot_bits))
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == PLANS_256[key]
