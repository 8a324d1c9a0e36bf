"""The 32-bit products on zmm under an opmask: the even lanes' high halves of the widening products moved
down over the odd lanes' product by one merge-masked vmovshdup, under an opmask of the even lanes made once
per kernel; followed by the verifier and the model alike, and refused where the mask selects other lanes."""

from __future__ import annotations

import dataclasses
import re

import pytest

from kerngen.errors import VerifyError
from kerngen.ir.instr import ArgBase, ArgSpec, Instr, Kernel, Mem, PhysReg, Table, TableBase
from kerngen.machine.isa import AVX2, AVX512
from kerngen.machine.ops import spec
from kerngen.machine.registers import MASK, VECTOR
from kerngen.machine.target import make_target
from kerngen.passes.interpret import compile_kernel
from kerngen.passes.verify import verify_kernel

from test_avx512 import _params
from conftest import STORE

LANES, Q = 16, 8380417
X = [1000 * k + 7 for k in range(LANES)]
Y = [3 * k + 1 << 20 for k in range(LANES)]


def _zmm(n: int) -> PhysReg:
    return PhysReg(VECTOR, n, 512)


def _moved_kernel(selector: list[int]) -> Kernel:
    """out = X with lane 2i replaced by lane 2i+1 of Y where the selector's lane 2i is set, and so on: the
    merge-masked vmovshdup under the opmask `vptestmd` makes of the selector (constant tables)."""
    tables = {"X": X, "Y": Y, "S": selector}
    mask = PhysReg(MASK, 2, 512)
    body = (*(Instr("load", (_zmm(k), Mem(TableBase(label), 0, 64))) for k, label in enumerate(tables)),
            Instr("vptestmd_k", (mask, _zmm(2), _zmm(2))),
            Instr("vmovshdup_merge", (_zmm(0), mask, _zmm(1))),
            Instr("store", (Mem(ArgBase(0), 0, 64), _zmm(0))))
    return Kernel("moved", (ArgSpec("out", "out", "uint32_t", 4, LANES, 64),), body,
                  tuple(Table(label, 4, tuple(values)) for label, values in tables.items()),
                  make_target("avx512", 32), frozenset())


@pytest.mark.parametrize("selector", [[1, 0] * 8, [0, 1] * 8, [5, 0, 0, 2] * 4])
def test_the_verifier_and_the_model_follow_the_masked_move(selector):
    want = [Y[k | 1] if selector[k] else X[k] for k in range(LANES)]
    proof = verify_kernel(_moved_kernel(selector), {}, Q, signed=False)
    assert proof.outputs[0] == tuple((v, v) for v in want)
    assert compile_kernel(_moved_kernel(selector)).run({})[0][0].tolist() == want


def test_only_the_evex_isa_has_the_merged_move():
    assert AVX512.has("duplicate_odd_merge", 32) and not AVX2.has("duplicate_odd_merge", 32)
    row = spec("vmovshdup_merge")
    assert row.spelt(["zmm3", "k2", "zmm1"]) == ["zmm3{k2}", "zmm1"]
    assert [s.access for s in row.slots] == ["rw", "r", "r"]  # merging reads the old destination


def _text(f) -> str:
    from kerngen.emission.printer import body_text
    return "\n".join(body_text(f.kernel.body, f.kernel.target))


def test_zmm_products_take_one_merged_move_under_one_mask_and_vex_ones_the_blend():
    bundle = STORE.bundle(_params("dilithium"))
    for f in bundle.functions:
        text = _text(f)
        if f.isa == "avx512":
            merged = re.findall(r"vmovshdup\s+zmm\d+\{k\d\}", text)
            assert merged and "vpblendmd" not in text and "r11" not in text, f.symbol
            assert text.count("vptestmd") == 1, f.symbol  # the mask made once, held in an allocated opmask
        elif f.isa == "avx2" and f.kind == "ntt_forward":
            assert "vpblendd" in text and "{k" not in text


def test_a_mask_selecting_the_odd_lanes_is_refused():
    """The shipped mask's table swapped for one of the odd lanes: the lanes no longer hold the Shoup
    products the verifier checks, and it says so; unchanged, the same kernel verifies."""
    bundle = STORE.bundle(_params("dilithium"))
    f = next(f for f in bundle.functions if f.isa == "avx512" and f.kind == "reduce")
    inputs = {i: (b.lo, b.hi) for i, b in f.contract.inputs().items()}
    verify_kernel(f.kernel, inputs, Q, signed=False)
    odd = tuple(Table(t.label, t.elem_bytes, tuple(v ^ 1 for v in t.values)) if t.label.endswith("even_lanes") else t
                for t in f.kernel.tables)
    assert odd != f.kernel.tables
    with pytest.raises(VerifyError, match="Shoup product"):
        verify_kernel(dataclasses.replace(f.kernel, tables=odd), inputs, Q, signed=False)


@pytest.mark.parametrize("held", [6, 7])
def test_opmasks_are_allocated_from_their_pool_and_never_spilled(held):
    """k2..k7 hand out six opmasks; a seventh held at once has nowhere to go (no opmask is spilled)."""
    from kerngen.errors import AllocationError
    from kerngen.ir.instr import Builder
    from kerngen.passes.allocate import RegisterPools, allocate

    b = Builder(512)
    v = b.op("load", Mem(TableBase("X"), 0, 64))
    masks = [b.kreg() for _ in range(held)]
    for k in masks:
        b.emit("vptestmd_k", k, v, v)
    for k in masks:
        b.emit("vmovshdup_merge", v, k, v)
    b.emit("store", Mem(ArgBase(0), 0, 64), v)
    pools = RegisterPools(vector=tuple(range(32)), mask=make_target("avx512", 32).pool(MASK))
    if held > len(pools.mask):
        with pytest.raises(AllocationError, match="opmask"):
            allocate(b.instrs, pools)
        return
    body = allocate(b.instrs, pools).body
    numbers = [ins.operands[0].number for ins in body if ins.op == "vptestmd_k"]
    assert sorted(numbers) == list(range(2, 8)) and all(isinstance(ins.operands[1], PhysReg) for ins in body[1:-1])
