"""The instruction table and the passes that read it: lane routes, legalisation
to two-operand SSE forms, the required-ISA pass, lemma proofs by width."""

from __future__ import annotations

import dataclasses
import random
import shutil

import numpy as np
import pytest

from kerngen.core.bundle import Bundle, Function
from kerngen.core import compile_cache
from kerngen.core.compile_cache import CacheStatistics, CompileCache, clear_memos, memo, memo_statistics
from kerngen.core.contract import ArgContract, Bound, Contract, Values
from kerngen.errors import CheckError
from kerngen.core.params import Overrides
from kerngen.families import load
from kerngen.families.ntt.build import build as ntt_build
from kerngen.families.ntt.kernels import build_reduce, kernel_builder
from kerngen.families.ntt.layout import plan
from kerngen.families.ntt.reducers import barrett_idiom, freeze_idiom, reducers
from kerngen.families.gf2m.build import build as gf2m_build
from kerngen.harness import protocol, toolchain
from kerngen.ir.instr import ArgBase, ArgSpec, Builder, IdiomTag, Imm, Instr, Mem, PhysReg, TableBase
from kerngen.ir.lanes import SPLIT, move_lanes
from kerngen.machine.ops import OPS, by_width, spec
from kerngen.ir.stream import executed
from kerngen.passes.lemmas import LemmaError, ScalarIdiom, SmtLemma, prove
from kerngen.passes.shapes import QuotientLemma
from kerngen.passes import roll as roll_pass
from kerngen.passes.check import check_encoding
from kerngen.passes.encoding import fold_broadcasts, fold_loads
from kerngen.machine.encoding import EVEX, VEX
from kerngen.commands import on_model
from kerngen.passes import pipeline
from kerngen.passes.pipeline import compile_kernel
from kerngen.emission.files import write
from kerngen.emission.printer import body_text
from kerngen.emission.render import render
from kerngen.machine.isa import AVX512
from kerngen.machine.target import make_target

from conftest import REPO, STORE

AVX2_16, SSE_16 = make_target("avx2", 16), make_target("sse", 16)
needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


# --- the table ---------------------------------------------------------------

def test_every_vector_row_has_an_encoding_and_extensions():
    for op in OPS.values():
        # a row without an encoding stands for lanes lowered onto general registers, each lane by a
        # general-register row doing the same (the scalar ISA)
        assert op.encodable or op.on_gpr is not None, op.name
        if op.on_gpr is not None:
            lowered = spec(op.on_gpr)
            assert lowered.gpr_only and lowered.encodable and lowered.elem == op.elem, op.name
            assert lowered.arith is op.arith and lowered.generic == op.generic, op.name
        if not op.gpr_only:  # every vector form names what it needs, on widths its encoding has
            assert all(f.extensions and set(f.widths) <= set(f.encoding.widths) for f in op.forms), op.name
    assert by_width("add", 16) == "vpaddw" and by_width("add", 32) == "vpaddd" and by_width("xor", 64) == "vpxor"
    with pytest.raises(KeyError):
        by_width("mulhi", 32)  # no 32-bit high multiply exists
    assert not AVX2_16.isa.has("mullo", 64) and AVX512.has("mullo", 64)  # vpmullq: EVEX only
    assert make_target("scalar", 64).isa.has("mullo", 64)  # 64-bit lanes multiply on GPRs only


def test_lane_routes_move_whole_lanes_and_see_splits():
    x, y = list(range(16)), list(range(100, 116))
    assert move_lanes(spec("vpunpcklwd"), [x, y], None, 16, 16, 0)[:4] == [0, 100, 1, 101]
    assert move_lanes(spec("vpunpckhqdq"), [x, y], None, 16, 16, 0)[:8] == [4, 5, 6, 7, 104, 105, 106, 107]
    assert move_lanes(spec("vperm2i128"), [x, y], 0x31, 16, 16, 0) == x[8:] + y[8:]
    assert move_lanes(spec("vpblendd"), [x, y], 0xAA, 16, 16, 0)[:4] == [0, 1, 102, 103]
    assert move_lanes(spec("vpsllq"), [x], 32, 16, 16, 0)[:4] == [0, 0, 0, 1]  # qwords: words 0, 1 move up two
    # bytes move whole 64-bit lanes when the count is whole lanes, else lanes are cut
    assert move_lanes(spec("vpalignr"), [[1, 2], [3, 4]], 8, 64, 2, 0) == [4, 1]
    assert move_lanes(spec("vpslldq"), [[7, 8]], 4, 64, 2, 0) == [SPLIT, SPLIT]
    assert move_lanes(spec("vpsllq"), [x], 4, 16, 16, 0) is None  # a shift by part of a byte is no movement


# --- legalisation ------------------------------------------------------------

def _sse_text(b: Builder, nargs: int = 2) -> list[str]:
    args = tuple(ArgContract(ArgSpec(f"a{i}", "inout", "int16_t", 2, 64, 16), Values(Bound(0, 0)),
                             Values(Bound(0, 0))) for i in range(nargs))
    k = compile_kernel(b, "t", Contract(args, ()), SSE_16).kernel
    return [line.split()[0] + " " + "".join(line.split()[1:]) for line in body_text(k.body, k.target)]


def test_a_dying_first_source_takes_the_result_without_a_copy():
    b = Builder(128)
    x, y = b.op("load", Mem(ArgBase(0), 0, 16)), b.op("load", Mem(ArgBase(1), 0, 16))
    b.emit("store", Mem(ArgBase(0), 0, 16), b.op("vpsubw", x, y))
    text = _sse_text(b)
    assert text[2] == "psubw xmm0,xmm1" and not any(t.startswith("movdqa") for t in text)


def test_a_copy_that_gets_its_source_register_is_dropped():
    """h copied to t and then dead: t takes h's register, and `mov r, r` is not written."""
    from kerngen.passes.allocate import RegisterPools, allocate
    b = Builder(128)
    h, t = b.greg(), b.greg()
    b.emit("mov", h, Mem(ArgBase(1), 0, 8))
    b.emit("mov", t, h)
    b.emit("shl", t, Imm(3))
    b.emit("mov_store", Mem(ArgBase(0), 0, 8), t)
    body = allocate(b.instrs, RegisterPools(gpr=(0, 1))).body
    assert [ins.op for ins in body] == ["mov", "shl", "mov_store"]


def test_a_live_first_source_is_copied_or_the_sources_swap():
    b = Builder(128)
    x, y = b.op("load", Mem(ArgBase(0), 0, 16)), b.op("load", Mem(ArgBase(1), 0, 16))
    b.emit("store", Mem(ArgBase(0), 0, 16), b.op("vpaddw", x, y))  # commutes: y dies, so y takes the sum
    b.emit("store", Mem(ArgBase(0), 16, 16), b.op("vpsubw", x, x))  # x lives on to here
    b.emit("store", Mem(ArgBase(1), 0, 16), x)
    text = _sse_text(b)
    assert text[2] == "paddw xmm1,xmm0"
    b = Builder(128)
    x, y = b.op("load", Mem(ArgBase(0), 0, 16)), b.op("load", Mem(ArgBase(1), 0, 16))
    b.emit("store", Mem(ArgBase(0), 0, 16), b.op("vpsubw", x, y))  # does not commute: x is copied
    b.emit("store", Mem(ArgBase(1), 0, 16), x)
    assert _sse_text(b)[2:4] == ["movdqa xmm2,xmm0", "psubw xmm2,xmm1"]


def test_instructions_without_a_legacy_form_are_rewritten_or_refused():
    b = Builder(128)
    x, y = b.op("load", Mem(ArgBase(0), 0, 16)), b.op("load", Mem(ArgBase(1), 0, 16))
    b.emit("store", Mem(ArgBase(0), 0, 16), b.op("vpblendd", x, y, Imm(0b0101)))
    b.emit("store", Mem(ArgBase(1), 0, 16), b.op("vpbroadcastq", Mem(ArgBase(0), 0, 8)))
    text = _sse_text(b)
    assert "pblendw xmm0,xmm1,51" in text  # dwords 0 and 2: words 0, 1, 4, 5
    assert any(t.startswith("movq") for t in text) and any(t.startswith("pshufd") and t.endswith(",68") for t in text)
    b = Builder(256)  # a 256-bit value becomes two registers: two loads, two stores
    b.emit("store", Mem(ArgBase(0), 0, 32), b.op("load", Mem(ArgBase(0), 0, 32)))
    assert [t.split()[0] for t in _sse_text(b)] == ["movdqu"] * 4
    b = Builder(256)
    b.emit("store", Mem(ArgBase(0), 0, 32), b.op("vpermq", b.op("load", Mem(ArgBase(0), 0, 32)), Imm(0x4e)))
    with pytest.raises(CheckError, match="vpermq on 256-bit registers moves data between halves and cannot be split"):
        _sse_text(b)
    b = Builder(128)
    b.emit("store", Mem(ArgBase(0), 0, 16), b.op("vpermq", Mem(ArgBase(0), 0, 16), Imm(0)))
    with pytest.raises(CheckError, match="vpermq has no legacy encoding"):
        _sse_text(b)


@pytest.mark.parametrize("bits, shuffle", [(32, 0x00), (64, 0x44)])
def test_a_broadcast_from_memory_splits_into_one_xmm_register_for_both_halves(bits, shuffle):
    """An element broadcast into a ymm register from memory (the twiddles
    every lane of a vector shares, stored once where the rows would fill L1:
    32-bit lanes at n = 4096) becomes on SSE one xmm register serving both
    halves: the element loaded alone (movd, movq), then copied into every
    element (pshufd 0, 0x44). On the model every lane of both halves holds it."""
    target = make_target("sse", bits)
    b = Builder(256)
    b.table("element", bits // 8, [5, 7])
    shared = b.op(by_width("broadcast", bits), Mem(TableBase("element"), bits // 8, bits // 8))
    b.emit("store", Mem(ArgBase(0), 0, 32), b.op(by_width("add", bits), shared, Mem(ArgBase(0), 0, 32)))
    legal = pipeline.legalise(b.body, target, b)
    assert [ins.op for ins in legal[:2]] == [f"load{bits}", "vpshufd"] and legal[1].operands[2] == Imm(shuffle)
    assert [ins.op for ins in legal].count(f"load{bits}") == 1  # both halves read the one register
    dtype = f"int{bits}"
    arg = ArgSpec("a", "inout", f"{dtype}_t", bits // 8, 256 // bits, 32)
    c = compile_kernel(b, "kg_broadcast", Contract((ArgContract(arg, Values(Bound(0, 0)), Values(Bound(0, 0))),), ()),
                       target)
    text = body_text(c.kernel.body, c.kernel.target)
    assert not any(line.lstrip().startswith("v") for line in text), text
    fn = {"symbol": "kg_broadcast", "dtype": dtype, "args": [{"name": "a", "role": "inout", "count": 256 // bits}]}
    rows = np.arange(3 * (256 // bits)).reshape(3, -1)
    [got] = on_model.run_rows(on_model.Model({"kg_broadcast": c.kernel}), fn, {0: rows}).values()
    assert (got == rows + 7).all()


@needs_tools
def test_a_legalised_reduction_is_verified_and_right(tmp_path):
    """Barrett on 8 lanes of an SSE target: the legalised idiom (with the copies
    it needs) is proven by the verifier and gives congruent, bounded results."""
    q = 3329
    layout = plan(64, 6, SSE_16)
    red = reducers(q, 16)["barrett"]
    b = kernel_builder(layout)
    build_reduce(b, layout, red)
    spec_ = ArgSpec("a", "inout", "int16_t", 2, 64, 16)
    c = compile_kernel(b, "kg_sse_reduce", Contract((ArgContract(spec_, Values(Bound(-32768, 32767)),
                                                                 Values(None)),), ()), SSE_16, modulus=q)
    assert c.contract.arg("a").ensures.bound == Bound(-1664, 1664)
    assert c.proof.idioms_checked == 2 * layout.vectors  # each 256-bit idiom became two on xmm halves
    text = body_text(c.kernel.body, c.kernel.target)
    assert text and not any(line.startswith("v") for line in text)
    assert "AVX" not in c.kernel.extensions
    fn = Function(c.kernel, "reduce", c.contract, "Barrett on SSE", (("n", 64), ("q", q)))
    write(render(Bundle("sse-reduce", None, SSE_16, "test", {"name": "sse-reduce", "family": "ntt"}, (fn,)), "test"),
          tmp_path / "b")
    lib = toolchain.assemble_shared(tmp_path / "b" / "sse-reduce.asm", tmp_path)
    x = tuple(range(-32768, 32768, 1024))
    [r] = protocol.run_runner(lib, [protocol.Case("sse", "kg_sse_reduce", (protocol.Arg("inout", 2, 64, 16, x),))],
                            workdir=tmp_path)
    assert r.ok
    assert all((y - v) % q == 0 and abs(y) <= 1664 for y, v in zip(r.outputs[0], x))


# --- required ISA ------------------------------------------------------------

def test_extensions_are_derived_from_the_instructions():
    kyber = ntt_build(load(REPO / "params/kyber-3329.toml", Overrides(isa="avx2,sse")))
    for f in kyber.functions:  # SSE: what the legalised forms need (pblendw: SSE4.1), often SSE2 alone
        # (pminuw, Shoup's conditional subtraction and the 16-bit freeze: SSE4.1 too)
        sse41 = f.kind in ("ntt_inverse", "mulmod_shoup", "muladd_shoup", "freeze")
        expect = {"AVX", "AVX2"} if f.isa == "avx2" else {"SSE2", "SSE4.1"} if sse41 else {"SSE2"}
        assert f.kernel.extensions == expect, f.symbol
    p = load(REPO / "params/gf2m-233.toml")
    by = {f.symbol: f.kernel for f in STORE.bundle(p).functions}
    assert by["kg_gf2m233_mul_avx2"].extensions == {"AVX", "PCLMULQDQ"}
    assert by["kg_gf2m233_mul_avx512"].extensions == {"AVX512F", "AVX512VL", "AVX512DQ", "VPCLMULQDQ", "AVX512VBMI2"}
    assert "VPCLMULQDQ" in by["kg_gf2m233_ladder_step2_avx2"].extensions
    assert by["kg_gf2m233_reduce_gpr_avx2"].extensions == frozenset()
    assert not by["kg_gf2m233_reduce_gpr_avx2"].dirty_upper  # so no vzeroupper
    sse = gf2m_build(dataclasses.replace(p, isas=("sse",), targets=(make_target("sse", 64),)), msqr_steps=())
    for f in sse.functions:
        assert not {"AVX", "AVX2"} & f.kernel.extensions, f.symbol
    assert {"SSSE3", "PCLMULQDQ"} <= sse.function("gf2m_mul").kernel.extensions


# --- lemmas by width ---------------------------------------------------------

def test_the_smt_proof_agrees_with_the_exhaustive_one():
    for idiom, box in ((barrett_idiom(3329, 16), (-32768, 32767)), (reducers(7681, 16)["special"].idiom, (-9000, 12345))):
        exhaustive, smt = prove(idiom, "exhaustive"), prove(idiom, "smt")
        assert smt.range_for(*box) == exhaustive.range_for(*box)


def test_quotient_ranges_agree_with_running_every_input_and_with_the_solver():
    """Barrett and the 32-bit freeze (x - q*t(x), t non-decreasing; then q
    added where negative) get their ranges from the runs of equal t: the same
    as running all 2^16 inputs, and as the SMT optimiser's on 32-bit lanes.
    The 16-bit freeze ends in an unsigned minimum, outside that shape: the
    solver's ranges must still be the exhaustive ones."""
    rng = random.Random(4)
    for q in (3329, 7681, 12289, 257):
        for idiom in (barrett_idiom(q, 16), freeze_idiom(q, 16)):
            exhaustive, quotient = prove(idiom, "exhaustive"), prove(idiom, "smt")
            assert isinstance(quotient, QuotientLemma) or idiom.steps[-1][0] == "minu"
            for _ in range(20 if isinstance(quotient, QuotientLemma) else 6):  # an optimiser's range: ~0.1 s each
                lo = rng.randint(-32768, 32767)
                box = (lo, rng.randint(lo, 32767))
                assert quotient.range_for(*box) == exhaustive.range_for(*box), (q, idiom.kind, box)
    for q in (8380417, 1073479681):
        for idiom in (barrett_idiom(q, 32), freeze_idiom(q, 32)):
            quotient = prove(idiom)
            assert isinstance(quotient, QuotientLemma)
            box = (-(1 << 31) // 3, (1 << 31) // 2)
            assert quotient.range_for(*box) == SmtLemma(quotient.idiom).range_for(*box)


def test_the_16_bit_freeze_is_a_floor_barrett_and_an_unsigned_minimum():
    """Six instructions instead of eight where the lane has mulhi and minu:
    every int16 must land on its canonical representative; 32-bit lanes (no
    mulhi) keep the centred Barrett and the masked q."""
    x = np.arange(-32768, 32768, dtype=np.int64)
    for q in (3329, 7681, 12289, 257):
        idiom = freeze_idiom(q, 16)
        assert [op for op, *_ in idiom.steps] == ["mulhi", "sra", "mullo", "sub", "sub", "minu"], q
        y = idiom.read(idiom.run(x))
        assert np.array_equal(y, x % q), q
    assert [op for op, *_ in freeze_idiom(8380417, 32).steps][-3:] == ["sra", "and", "add"]


def test_the_smt_proof_refuses_a_wrong_idiom():
    wrong = dataclasses.replace(barrett_idiom(3329, 16), q=3331)
    with pytest.raises(LemmaError, match="not congruent"):
        prove(wrong, "smt")
    with pytest.raises(LemmaError, match="not congruent"):
        prove(ScalarIdiom("plain", 3329, (("add", "r", "x", 1),), 32))  # 32-bit lanes: SMT by default


# --- shorter encodings -------------------------------------------------------

def _adds_from_tables(reads: dict[str, int], vectors: int = 8):
    """x[v] += c for table rows c, each row read `reads[row]` times in turn:
    a 16-bit kernel over `vectors` ymm of argument 0."""
    b = Builder(256)
    rows = {name: b.table(f"row_{name}", 2, [k % 7 for k in range(16 * 8)]) for name in reads}
    order = [name for name, n in reads.items() for _ in range(n)]
    for v, name in zip(range(vectors), order * vectors):
        x = b.op("load", Mem(ArgBase(0), 32 * v, 32))
        offset = 32 * (v % 8)
        b.emit("store", Mem(ArgBase(0), 32 * v, 32), b.op("vpaddw", x, Mem(rows[name], offset if name == "far" else 0, 32)))
    arg = ArgSpec("a", "inout", "int16_t", 2, 16 * vectors, 32)
    contract = Contract((ArgContract(arg, Values(Bound(-1000, 1000)), Values(None)),), ())
    return compile_kernel(b, "kg_adds", contract, AVX2_16, modulus=3329)


def test_loads_read_only_by_memory_capable_slots_are_folded_into_them():
    """x*y and x + y: x's load goes (y moved to the register side of the
    commutative product, the idiom's source slot following it); y's cannot
    (the addition already reads x from memory); a load with a store before
    its last read stays (the output may alias it); so does a subtraction's
    first source."""
    b = Builder(256)
    x, y = b.op("load", Mem(ArgBase(1), 0, 32)), b.op("load", Mem(ArgBase(2), 0, 32))
    product = b.op("vpmullw", x, y, idiom=IdiomTag(b.new_group(), "t", "start", 1))
    total = b.op("vpaddw", y, x)
    b.emit("store", Mem(ArgBase(0), 0, 32), product)
    b.emit("store", Mem(ArgBase(0), 32, 32), total)
    body = fold_loads(b.instrs)
    assert [ins.op for ins in body] == ["load", "vpmullw", "vpaddw", "store", "store"]
    mul, add = body[1], body[2]
    assert mul.operands[1:] == (y, Mem(ArgBase(1), 0, 32)) and mul.idiom.source == 2
    assert add.operands[1:] == (y, Mem(ArgBase(1), 0, 32))
    b = Builder(256)
    x, y = b.op("load", Mem(ArgBase(1), 0, 32)), b.op("load", Mem(ArgBase(2), 0, 32))
    b.emit("store", Mem(ArgBase(0), 0, 32), b.op("vpaddw", y, y))
    b.emit("store", Mem(ArgBase(0), 32, 32), b.op("vpaddw", y, x))  # read after the first store
    b.emit("store", Mem(ArgBase(0), 64, 32), b.op("vpsubw", b.op("vpsubw", x, y), y))
    assert fold_loads(b.instrs) == b.instrs


def test_table_broadcasts_read_by_elementwise_rows_fold_into_them_where_the_encoding_broadcasts():
    """EVEX, 64-bit lanes: the broadcast an addition reads goes into the
    addition's memory slot (its sources swapped), broadcast there; one a store
    reads stays loaded. VEX, or lanes of another width: nothing changes."""
    b = Builder(512)
    x = b.op("load", Mem(ArgBase(1), 0, 64))
    total = b.op("vpaddq_evex", b.op("vpbroadcastq", Mem(TableBase("w"), 8, 8)), x)
    kept = b.op("vpbroadcastq", Mem(TableBase("w"), 0, 8))
    b.emit("store", Mem(ArgBase(0), 0, 64), total)
    b.emit("store", Mem(ArgBase(0), 64, 64), kept)
    body = fold_broadcasts(b.instrs, EVEX, 64)
    assert [ins.op for ins in body] == ["load", "vpaddq_evex", "vpbroadcastq", "store", "store"]
    assert body[1].operands[1:] == (x, Mem(TableBase("w"), 8, 8, broadcast=True))
    assert fold_broadcasts(b.instrs, VEX, 64) == b.instrs == fold_broadcasts(b.instrs, EVEX, 32)


def test_folded_loads_on_vex_only_and_the_kernel_stays_proven():
    """kyber-3329's AVX2 base multiplication reads two of each block's four
    input vectors from memory in the instructions that use them (the
    verifier sees one value in each read); the SSE one, whose legacy memory
    operands would need 16-byte alignment, loads them all."""
    from kerngen.passes.verify import verify_kernel
    p = load(REPO / "params/kyber-3329.toml", Overrides(isa="avx2,sse"))
    fns = {f.isa: f for f in ntt_build(p).functions if f.kind == "basemul"}
    def folded(fn):
        return sum(1 for ins in fn.kernel.body if spec(ins.op).cls not in ("load", "store")
                   for op in ins.operands if isinstance(op, Mem) and isinstance(op.base, ArgBase))
    def loads(fn):
        return sum(1 for ins in fn.kernel.body if spec(ins.op).cls == "load" and isinstance(ins.operands[1].base, ArgBase))
    assert loads(fns["avx2"]) == 16 and folded(fns["avx2"]) == 48  # of 32 vectors, 16 read three times each
    assert folded(fns["sse"]) == 0
    inputs = {1: (-16184, 16184), 2: (-16184, 16184)}
    assert Bound(*verify_kernel(fns["avx2"].kernel, inputs, p.q).hull(0)) == fns["avx2"].contract.arg("r").ensures.bound


def test_a_constant_read_often_is_held_in_an_unused_register_and_stays_proven():
    c = _adds_from_tables({"often": 1}, vectors=8)
    body = c.kernel.body
    def from_table(op):
        return isinstance(op, Mem) and isinstance(op.base, TableBase)

    held = [ins for ins in body if ins.op == "load" and from_table(ins.operands[1])]
    assert len(held) == 1  # one load; the eight additions read the register
    assert not any(from_table(op) for ins in body if ins.op == "vpaddw" for op in ins.operands)
    assert c.contract.arg("a").ensures.bound == Bound(-1000, 1006)  # the verifier saw the same constant
    few = _adds_from_tables({"often": 1}, vectors=4).kernel.body  # four reads: not worth a register
    assert sum(1 for ins in few if ins.op == "vpaddw" and isinstance(ins.operands[2], Mem)) == 4


def test_nearby_table_accesses_go_through_a_register_and_every_one_is_checked():
    c = _adds_from_tables({"far": 1}, vectors=8)  # eight different rows of one table, 256 bytes in all
    body, straight = list(c.kernel.body), executed(c.kernel)
    [lea] = [ins for ins in body if ins.op == "lea"]
    pointed = [op for ins in body for op in ins.operands if isinstance(op, Mem) and op.pointer is not None]
    assert len(pointed) == 8 and all(op.offset - op.pointer.bias in range(-128, 128) for op in pointed)
    text = "\n".join(body_text(tuple(body), c.kernel.target))
    assert "lea          rax, [rel row_far + 128]" in text and "[rax - 128]" in text and "[rax + 96]" in text
    assert "[rel row_far" not in text.replace("lea          rax, [rel row_far", "")
    assert len(straight) == len(body) - 1 and "lea" not in {ins.op for ins in straight}
    check_encoding(body, straight, AVX2_16.abi, 1)
    at = body.index(lea)
    wrong_bias = dataclasses.replace(lea, operands=(lea.operands[0], dataclasses.replace(lea.operands[1], offset=0)))
    clobber = Instr("mov", (lea.operands[0], lea.operands[0]))
    for broken, verified, why in (
            (body[:at] + [wrong_bias] + body[at + 1:], straight, "differs from verified instruction"),
            (body[:at + 1] + [clobber] + body[at + 1:], straight[:at] + (clobber,) + straight[at:], "does not point"),
            ([ins for ins in body if ins is not lea], straight, "does not point")):
        with pytest.raises(CheckError, match=why):
            check_encoding(broken, verified, AVX2_16.abi, 1)


def test_two_tables_read_in_turn_take_no_lea():
    """Rows of two tables read alternately (as a reduction of every register
    reads its two constants): one register cannot serve both, and re-pointing
    it before each access would cost a `lea` each, so all stay RIP-relative."""
    c = _adds_from_tables({"far": 1, "near": 1}, vectors=8)
    assert not any(ins.op == "lea" for ins in c.kernel.body)
    alone = _adds_from_tables({"far": 1}, vectors=8)  # one table: still one lea for its run
    assert sum(1 for ins in alone.kernel.body if ins.op == "lea") == 1


def test_a_commutative_operation_names_its_high_register_where_the_short_prefix_can():
    lo, hi = PhysReg("vec", 2, 256), PhysReg("vec", 9, 256)
    swap, keep = Instr("vpaddw", (lo, lo, hi)), Instr("vpsubw", (lo, lo, hi))
    assert body_text((swap, keep), AVX2_16) == ["vpaddw       ymm2, ymm9, ymm2", "vpsubw       ymm2, ymm2, ymm9"]
    x2, x9 = PhysReg("vec", 2, 128), PhysReg("vec", 9, 128)
    assert body_text((Instr("vpaddw", (x2, x2, x9)),), SSE_16) == ["paddw        xmm2, xmm9"]  # legacy keeps its tie


def _groups(count: int, table_stride: int, target=AVX2_16, cache: CompileCache | None = None):
    """`count` groups of (load, add a table row, store), each 32 bytes further
    into argument 0 and `table_stride` bytes further into the table (compiled through `cache`)."""
    b = Builder(256)
    rows = b.table("rows", 2, [k % 5 for k in range(16 * count)])
    for g in range(count):
        x = b.op("load", Mem(ArgBase(0), 32 * g, 32))
        y = b.op("vpsubw", b.op("vpaddw", x, Mem(rows, table_stride * g, 32)), Mem(rows, table_stride * g, 32))
        b.emit("store", Mem(ArgBase(0), 32 * g, 32), y)
    arg = ArgSpec("a", "inout", "int16_t", 2, 16 * count, 32)
    contract = Contract((ArgContract(arg, Values(Bound(-1000, 1000)), Values(None)),), ())
    return compile_kernel(b, "kg_groups", contract, target, modulus=3329, cache=cache)


def test_long_kernels_roll_their_repeated_groups_and_run_the_verified_stream(monkeypatch):
    monkeypatch.setattr(roll_pass, "ROLL_ABOVE", 0)
    monkeypatch.setattr(roll_pass, "_MIN_SAVED", 4)
    c = _groups(16, 32)
    body, straight = list(c.kernel.body), executed(c.kernel)
    assert c.kernel.loops == ((16, 6, ()),)  # load, add, sub, store, and the two pointers moved
    assert len(straight) == 16 * 4
    text = "\n".join(body_text(c.kernel.body, c.kernel.target))
    assert "mov          rax, 16\n.repeat1:" in text and "dec          rax\njnz          .repeat1" in text
    assert "add          rdi, 32" in text and "add          rdi, -512" in text
    check_encoding(body, straight, AVX2_16.abi, 1)
    top = next(i for i, ins in enumerate(body) if ins.op == "repeat")
    step = next(i for i, ins in enumerate(body) if ins.op == "add" and ins.operands[0].number != 7)
    for at, ins, why in ((top, dataclasses.replace(body[top], operands=(body[top].operands[0], Imm(15),
                                                                        body[top].operands[2])), "runs 60"),
                         (step, dataclasses.replace(body[step], operands=(body[step].operands[0], Imm(64))),
                          "differs from verified instruction 5")):
        with pytest.raises(CheckError, match=why):
            check_encoding(body[:at] + [ins] + body[at + 1:], straight, AVX2_16.abi, 1)
    same_row = _groups(16, 0).kernel  # read 32 times: held in a register, so only the argument moves
    assert same_row.loops == ((16, 5, ()),) and not any(ins.op == "lea" for ins in same_row.body)


def _blocks(blocks: int, groups: int):
    """`blocks` of `groups` (load, add four table rows, store): groups 32 bytes apart in argument 0 and in
    the table, blocks 256 bytes apart in the table, so that the table's addresses step twice as the argument's once."""
    b = Builder(256)
    rows = b.table("rows", 2, [k % 5 for k in range(512 * blocks)])
    for k in range(blocks):
        for g in range(groups):
            x = b.op("load", Mem(ArgBase(0), 32 * (k * groups + g), 32))
            for j in range(4):
                x = b.op("vpaddw", x, Mem(rows, 256 * (k + blocks * j) + 32 * g, 32))
            b.emit("store", Mem(ArgBase(0), 32 * (k * groups + g), 32), x)
    arg = ArgSpec("a", "inout", "int16_t", 2, 16 * blocks * groups, 32)
    contract = Contract((ArgContract(arg, Values(Bound(-1000, 1000)), Values(None)),), ())
    return compile_kernel(b, "kg_blocks", contract, AVX2_16, modulus=3329)


def test_a_loop_of_blocks_rolls_the_groups_inside_them_where_three_or_more_repeat(monkeypatch):
    monkeypatch.setattr(roll_pass, "ROLL_ABOVE", 0)
    monkeypatch.setattr(roll_pass, "_MIN_SAVED", 6)
    c = _blocks(4, 3)
    body, straight = list(c.kernel.body), executed(c.kernel)
    assert c.kernel.loops == ((2, 12, ((3, 8, ()),)), (3, 8, ())) and len(straight) == 4 * 3 * 6
    text = "\n".join(body_text(c.kernel.body, c.kernel.target))
    # the inner loop's table pointer starts where the outer loop's points, which moves a block (256 bytes) a pass
    assert "mov          rax, 2\n.repeat1:\nlea          rsi, [rcx]" in text and "add          rcx, 0x100" in text
    check_encoding(body, straight, AVX2_16.abi, 1)
    inner_step = next(i for i, ins in enumerate(body) if ins.op == "add" and ins.operands[0].number == 6)
    wrong = dataclasses.replace(body[inner_step], operands=(body[inner_step].operands[0], Imm(64)))
    with pytest.raises(CheckError, match="differs from verified instruction"):
        check_encoding(body[:inner_step] + [wrong] + body[inner_step + 1:], straight, AVX2_16.abi, 1)
    # two groups a block: an inner loop would save one group and pay its exit's misprediction each pass
    assert _blocks(4, 2).kernel.loops == ((4, 14, ()),)


def test_a_kernel_is_compiled_once_for_the_platforms_of_one_convention(monkeypatch):
    """System V on ELF and on Mach-O: the passes run once and the kernel comes
    back on each target; Win64 is compiled again, and so is another builder."""
    verified, cache = [], CompileCache()

    def counted(name, run):
        return (lambda u: (verified.append(u.target.platform.name), run(u))) if name == "verify" else run
    monkeypatch.setattr(pipeline, "PASSES", tuple((name, counted(name, run)) for name, run in pipeline.PASSES))
    elf, macho, win64 = (make_target("avx2", 16, platform) for platform in ("sysv", "macho", "win64"))
    first, again, other = (_groups(8, 32, t, cache) for t in (elf, macho, win64))
    assert verified == ["sysv", "win64"]
    assert again.kernel.body == first.kernel.body and again.contract == first.contract
    assert (first.kernel.target, again.kernel.target, other.kernel.target) == (elf, macho, win64)
    _groups(4, 32, macho, cache)
    assert verified == ["sysv", "win64", "macho"]
    _groups(8, 32, macho)  # no cache: the passes run
    assert verified == ["sysv", "win64", "macho", "macho"]


def test_the_compile_cache_counts_keeps_its_latest_kernels_and_clears():
    cache = CompileCache(capacity=2)
    first = _groups(8, 32, AVX2_16, cache)
    assert (cache.hits, cache.misses, cache.size) == (0, 1, 1)
    again = _groups(8, 32, AVX2_16, cache)  # the same kernel compiled a second time: a hit
    assert again.kernel == first.kernel and again.contract == first.contract
    assert (cache.hits, cache.misses, cache.size) == (1, 1, 1)
    _groups(4, 32, AVX2_16, cache)
    _groups(2, 32, AVX2_16, cache)  # a third kernel: the first, least recently used, goes
    assert (cache.hits, cache.misses, cache.size) == (1, 3, 2)
    _groups(8, 32, AVX2_16, cache)
    assert (cache.hits, cache.misses, cache.size) == (1, 4, 2)
    [own, *memos] = cache.statistics()
    assert own == CacheStatistics(CompileCache.NAME, 1, 4, 2, 2) and tuple(memos) == memo_statistics()
    cache.clear()
    assert (cache.hits, cache.misses, cache.size) == (0, 0, 0)
    _groups(8, 32, AVX2_16, cache)
    assert (cache.hits, cache.misses, cache.size) == (0, 1, 1)


def test_memos_are_bounded_registered_and_cleared_together(monkeypatch):
    monkeypatch.setattr(compile_cache, "_MEMOS", {})  # the package's memos are left alone
    calls = []

    @memo(maxsize=2)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    name = f"{square.__module__}.{square.__qualname__}"
    assert [square(x) for x in (3, 3, 4, 5, 3)] == [9, 9, 16, 25, 9] and calls == [3, 4, 5, 3]
    assert memo_statistics() == (CacheStatistics(name, 1, 4, 2, 2),)
    clear_memos()
    assert memo_statistics() == (CacheStatistics(name, 0, 0, 0, 2),)
    square(3)
    assert calls == [3, 4, 5, 3, 3]


def test_only_the_kernels_beyond_the_uop_cache_are_rolled():
    def rolled(name: str) -> set[str]:
        """The functions of a shipped bundle that hold a loop."""
        found, function = set(), None
        for line in (REPO / f"generated/{name}/{name}.asm").read_text().splitlines():
            if line.startswith("kg_") and line.endswith(":"):
                function = line[:-1]
            elif line.strip().startswith("jnz"):
                found.add(function)
        return found

    assert {"kg_nfl1073479681_ntt_forward_avx2", "kg_nfl1073479681_ntt_inverse_avx2"} <= rolled("nfl-1073479681")
    assert not rolled("kyber-3329") and not rolled("mlkem-3329")
    assert rolled("dilithium-8380417") == {"kg_dilithium8380417_ntt_forward_sse", "kg_dilithium8380417_ntt_inverse_sse"}
