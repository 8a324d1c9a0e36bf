"""Twiddle tables: register-wide rows, and where the distinct twiddles alone
would fill L1, the values every lane of a vector shares stored once and
broadcast."""

from __future__ import annotations

from pathlib import Path

from kerngen.families import load
from kerngen.families.ntt.design import design
from kerngen.families.ntt.kernels import build_ntt, kernel_builder
from kerngen.families.ntt.twiddles import L1_BYTES, TwiddleTable
from kerngen.families.ntt.schedule import schedule
from kerngen.ir.instr import Builder, Mem, TableBase

REPO = Path(__file__).resolve().parent.parent


def test_a_shared_row_is_one_value_in_the_second_table():
    b = Builder(512)
    table = TwiddleTable(b, "t", 64, shared_once=True)
    shared, again, other, row = table.vector([5] * 8), table.vector([5] * 8), table.vector([7] * 8), table.vector(range(8))
    assert shared == again == Mem(TableBase("t_shared"), 0, 8) and other == Mem(TableBase("t_shared"), 8, 8)
    assert row == Mem(TableBase("t"), 0, 64)
    assert table.operand(row) is row and b.instrs == []
    register = table.operand(shared)  # a broadcast load of the one value
    assert [(ins.op, ins.operands) for ins in b.instrs] == [("vpbroadcastq", (register, shared))]
    table.finish("twiddles")
    assert b.tables["t_shared"].values == (5, 7) and b.tables["t"].values == tuple(range(8))
    # 16-bit lanes keep register-wide rows: their broadcast from memory takes a shuffle as well as the load
    words = TwiddleTable(Builder(512), "w", 16, shared_once=True)
    assert words.vector([3] * 32) == Mem(TableBase("w"), 0, 64)


def _tables(name: str, isa: str) -> dict[str, tuple[int, ...]]:
    """The twiddle tables of the set's forward NTT for `isa`, as the kernel builder lays them out (no passes)."""
    p = load(REPO / "params" / f"{name}.toml")
    ar = design(p, next(t for t in p.targets if t.isa.name == isa))
    b = kernel_builder(ar.layout)
    build_ntt(b, ar, schedule(ar, p.policy, "forward", p.q - 1), "tw")
    return {label: t.values for label, t in b.tables.items() if label.startswith("tw")}


def test_only_twiddles_beyond_l1_are_stored_once():
    he = _tables("he-1125899906826241", "avx512")  # 4096 twiddles, w and w' of 8 bytes each: 64 KiB
    assert 4096 * 8 * 2 > L1_BYTES
    rows = he["tw"]
    assert not any(len(set(rows[k:k + 8])) == 1 for k in range(0, len(rows), 8))
    assert len(he["tw_shared"]) == len(set(he["tw_shared"])) > 0
    nfl = _tables("nfl-4611686018326724609", "avx512")  # 1024 of them: 16 KiB, rows register-wide
    assert 1024 * 8 * 2 <= L1_BYTES and set(nfl) == {"tw"}
