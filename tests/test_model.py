"""The machine model (passes.interpret): the instruction table's semantics run
on whole kernels, compared with the CPU on the same inputs, and `kerngen test
--on-model` (commands.on_model)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from kerngen.commands import on_model
from kerngen.commands.test import test_bundle as run_bundle_test
from kerngen.core.family import native
from kerngen.core.manifest import read_bundle
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.families import from_mapping, load
from kerngen.families.ntt import checks as ntt_checks
from kerngen.harness import protocol, toolchain
from kerngen.harness.cpu import MASK_VARIABLE, cpu_flags
from kerngen.emission.printer import instr_text
from kerngen.ir.instr import Imm, Instr, Mem, PhysReg, TableBase
from kerngen.machine.ops import MULHI, MULHU, MINU, OPS, SRL
from kerngen.machine.registers import MASK
from kerngen.passes.interpret import compile_kernel
from kerngen.passes.verify import verify_kernel

from conftest import REPO, STORE
from mutation import copied_with, instruction_mutants, table_entries, table_entry_mutant
from test_semantics import A, B, C, _kernel, _load, _store, _ymm

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")

# scalar kernels (64-bit lanes on general registers: mulx, cmovb) beside their AVX2 twins, kept small
SCALAR = {"name": "s16", "family": "ntt", "n": 16, "q": 4611686018326724609, "width": 64, "isa": ["avx2", "scalar"]}


def _bundle(name: str):
    p = from_mapping(SCALAR, "test") if name == "scalar" else load(REPO / f"params/{name}.toml")
    return STORE.bundle(native(p))


def test_every_row_a_kernel_can_run_has_semantics():
    """The model runs every row by the table: element-wise, widening, blocks,
    a movement, or a store of the element its immediate names."""
    missing = [op.name for op in OPS.values() if op.cls not in ("address", "control") and op.arith is None
               and op.widen is None and op.blocks is None and op.move is None
               and not (op.cls == "store" and any(s.kind == "i" for s in op.slots))]
    assert missing == []


def test_64_bit_semantics_on_numpy_arrays_are_those_on_integers():
    """High products, logical shifts and unsigned minima of 64-bit elements
    on int64 arrays (which wrap) give what the same semantics give on Python
    integers, extremes included."""
    rng = np.random.default_rng(3)
    edges = np.array([0, 1, -1, 2**63 - 1, -2**63, 2**32, 2**32 - 1, -2**32], dtype=np.int64)
    a = np.concatenate([np.repeat(edges, len(edges)), rng.integers(-2**63, 2**63 - 1, 256, dtype=np.int64)])
    b = np.concatenate([np.tile(edges, len(edges)), rng.integers(-2**63, 2**63 - 1, 256, dtype=np.int64)])
    for semantics in (MULHI, MULHU, MINU):
        got = semantics.exact((a, b), 64)
        assert got.tolist() == [semantics.exact((int(x), int(y)), 64) for x, y in zip(a, b)]
    got = SRL.exact((a, 13), 64)
    assert got.tolist() == [SRL.exact((int(x), 13), 64) for x in a]


def test_block_semantics_on_integers():
    """vpclmulqdq's words against shift-and-xor products, vpmaddwd's sums
    (the one that wraps too) and vpshufb's zeroing and lane-local indices."""
    rng = np.random.default_rng(4)
    edges = np.array([0, 2**64 - 1, 2**63], dtype=np.uint64)
    x, y = (np.concatenate([edges, rng.integers(0, 2**64 - 1, 64, dtype=np.uint64, endpoint=True)]) for _ in range(2))
    blocks = np.stack([x, y], axis=-1)
    for imm in (0x00, 0x01, 0x10, 0x11):
        got = OPS["vpclmulqdq"].blocks.value((blocks, blocks[::-1]), imm).astype(np.uint64)
        for k in range(len(x)):
            a, b = int(blocks[k, imm & 1]), int(blocks[::-1][k, imm >> 4 & 1])
            want = 0
            for i in range(64):
                want ^= (a << i) * (b >> i & 1)
            assert int(got[k, 1]) << 64 | int(got[k, 0]) == want
    halves = np.array([[0x8000, 0x8000], [3, 0xFFFF]], dtype=np.uint16)  # (-2^15)^2 * 2 wraps; 3*3 + (-1)*2
    sums = OPS["vpmaddwd"].blocks.value((halves, np.array([[0x8000, 0x8000], [3, 2]], dtype=np.uint16)), None)
    assert [int(lo) & 0xFFFF | (int(hi) & 0xFFFF) << 16 for lo, hi in sums] == [0x80000000, 7]
    data, control = np.arange(16, 32, dtype=np.uint8)[None], np.array([[15, 0x80, 1, 0x8F] * 4], dtype=np.uint8)
    assert OPS["vpshufb"].blocks.value((data, control), None).tolist() == [[31, 0, 17, 0] * 4]


def test_the_model_computes_the_verifier_s_constants_on_evex_rows():
    """Opmask, merge- and zero-masked, accumulating, three-source and 128-bit
    movement rows of AVX-512 on constant vectors: the model's lanes are the
    exact ones the verifier establishes (both from the table alone)."""
    mask = PhysReg(MASK, 1, 256)
    body = [_load(0, "A"), _load(1, "B"), _load(2, "C"), _load(3, "C"), _load(4, "C"), _load(5, "C"),
            Instr("vpcmpgtq_k", (mask, _ymm(0), _ymm(1))),
            Instr("vpaddq_evex_merge", (_ymm(2), mask, _ymm(0), _ymm(1))),
            Instr("vpmadd52luq_zero", (_ymm(5), mask, _ymm(0), _ymm(1))),
            Instr("vpmadd52huq", (_ymm(3), _ymm(0), _ymm(1))),
            Instr("vpternlogq", (_ymm(6), _ymm(0), _ymm(1), _ymm(4), Imm(0x96))),
            Instr("vshufi64x2", (_ymm(7), _ymm(0), _ymm(1), Imm(0b01))),
            _store(0, 2), _store(1, 5), _store(2, 3), _store(3, 6), _store(4, 7)]
    kernel = _kernel({"A": A, "B": B, "C": C}, body, 0, 5)
    proof = verify_kernel(kernel, {}, (1 << 61) - 1)
    after = compile_kernel(kernel).run({})
    for arg, lanes in proof.outputs.items():
        assert all(lo == hi for lo, hi in lanes)
        assert after[arg].view(np.int64)[0].tolist() == [lo for lo, _ in lanes], arg


def test_a_broadcast_memory_source_is_its_element_in_every_lane():
    """EVEX's {1to4}: an addition and a multiply-add each read one table
    element into every lane; the verifier, the model and the printer agree."""
    element = Mem(TableBase("C"), 16, 8, broadcast=True)  # C[2] = 300
    body = [_load(0, "A"), _load(1, "B"),
            Instr("vpaddq_evex", (_ymm(2), _ymm(0), element)),
            Instr("zero", (_ymm(3),)),
            Instr("vpmadd52luq", (_ymm(3), _ymm(1), element)),
            _store(0, 2), _store(1, 3)]
    kernel = _kernel({"A": A, "B": B, "C": C}, body, 0, 2)
    expected = {0: [a + 300 for a in A], 1: [b * 300 for b in B]}
    proof = verify_kernel(kernel, {}, (1 << 61) - 1)
    after = compile_kernel(kernel).run({})
    for arg, lanes in proof.outputs.items():
        assert [lo for lo, _ in lanes] == [hi for _, hi in lanes] == expected[arg], arg
        assert after[arg].view(np.int64)[0].tolist() == expected[arg], arg
    assert " ".join(instr_text(body[2], kernel.target).split()) == "vpaddq ymm2, ymm0, qword [rel C + 16]{1to4}"


def _words(kind: np.dtype, rows: int, count: int, rng) -> np.ndarray:
    """Random words of the whole range of `kind`, the first rows all zero, all ones and each extreme."""
    info = np.iinfo(kind)
    edges = np.array([[0], [info.max], [info.min], [-1 if info.min else info.max // 2]], dtype=kind)
    return np.concatenate([np.repeat(edges, count, axis=1),
                           rng.integers(info.min, info.max, (rows, count), dtype=kind, endpoint=True)])


def _differences(bundle, tmp_path, kinds=None) -> tuple[int, list[str]]:
    """(functions compared, where they differ): each function of `bundle` this
    CPU runs (of `kinds`, if given), on the CPU and, read back from the same
    assembly, on the model, with the same inputs over the whole range of its
    words (in its contract or not)."""
    lib = toolchain.bundle_library(bundle, "model", tmp_path / "lib", tmp_path)
    reading = on_model.bundle_kernels(*read_bundle(tmp_path / "lib"))
    assert reading.errors == {}
    model = on_model.Model(reading.kernels)
    rng = np.random.default_rng(11)
    host = cpu_flags()
    ran, differ = 0, []
    for f in bundle.functions:
        if not set(f.cpu) <= host or kinds is not None and f.kind not in kinds:
            continue
        fn = f.manifest()
        kind = protocol.batch_type(fn["dtype"])
        inputs = {i: _words(kind, 12, a["count"], rng) for i, a in enumerate(fn["args"]) if a["role"] != "out"}
        cpu = protocol.run_batch(lib, f.symbol, fn["args"], fn["dtype"], inputs, tmp_path)
        modelled = on_model.run_rows(model, fn, inputs)
        differ += [f"{f.symbol} argument {i}: row, element {np.argwhere(words != modelled[i])[0]}"
                   for i, words in cpu.items() if not np.array_equal(words, modelled[i])]
        ran += 1
    return ran, differ


@needs_tools
@pytest.mark.parametrize("name", ["kyber-3329", "mlkem-3329", "mldsa-8380417", "gf2m-233", "scalar"])
def test_model_and_cpu_compute_the_same_on_whole_kernels(name, tmp_path):
    """Identical outputs, word for word (`_differences`): AVX2 and SSE NTTs
    of 16- and 32-bit lanes (shuffles, vpmaddwd, vpmuldq), GF(2^m) kernels
    (vpclmulqdq, general registers) and scalar 64-bit lanes (mulx, cmovb)."""
    bundle = _bundle(name)
    ran, differ = _differences(bundle, tmp_path)
    assert ran >= len(bundle.functions) // 2 and differ == []


@needs_tools
def test_a_row_whose_semantics_are_not_the_cpu_s_shows_on_whole_kernels(monkeypatch, tmp_path):
    """vpmulhw given vpmulhrsw's rounding: the NTTs on the model and on the CPU differ."""
    bundle = _bundle("kyber-3329")
    monkeypatch.setitem(OPS, "vpmulhw", dataclasses.replace(OPS["vpmulhw"], arith=OPS["vpmulhrsw"].arith))
    ran, differ = _differences(bundle, tmp_path, kinds=("ntt_forward",))
    assert ran and len(differ) == ran


@needs_tools
def test_the_basis_proof_at_4096_64_bit_elements_runs_on_the_model(tmp_path):
    """he-1125899906826241's forward NTT (n = 4096, 64-bit lanes, products
    from 32-bit pieces) on all 4096 unit vectors at once: the model passes the
    basis-vector proof and its sweep; on inputs over the whole range of its
    words it computes what the CPU does."""
    bundle = _bundle("he-1125899906826241")
    forward = bundle.function("ntt_forward")
    fn = forward.manifest()
    model = on_model.Model({fn["symbol"]: forward.kernel})
    manifest = {"params": {"n": 4096, "q": 1125899906826241}, "functions": [fn]}
    proofs = ntt_checks.basis_proofs(manifest, model.calls())
    assert [msg for _, msg in proofs] == [None, None], proofs
    if not set(fn["cpu"]) <= cpu_flags():
        return
    alone = dataclasses.replace(bundle, functions=(forward,))
    lib = toolchain.bundle_library(alone, "model", tmp_path / "lib", tmp_path)
    inputs = {0: _words(np.dtype(np.uint64), 60, 4096, np.random.default_rng(5))}
    cpu = protocol.run_batch(lib, fn["symbol"], fn["args"], fn["dtype"], inputs, tmp_path)[0]
    assert np.array_equal(cpu, on_model.run_rows(model, fn, inputs)[0])


def test_kerngen_test_on_model(kerngen_cli):
    done = kerngen_cli("test", "generated/kyber-3329", "--on-model")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on the machine model" in done.stderr and "0 failed" in done.stdout


def test_functions_this_cpu_cannot_run_go_to_the_model(monkeypatch):
    """On a CPU without AVX2, the AVX2 functions run on the model, and the output says so."""
    monkeypatch.setenv(MASK_VARIABLE, "-avx2")
    said: list[str] = []
    outcome = run_bundle_test(REPO / "generated/kyber-3329", 1, said.append, reemit=False)
    assert outcome.failed == 0 and outcome.passed > 100
    assert any(f"running avx2 on the machine model: left out avx2 ({MASK_VARIABLE}=-avx2 hides avx2)" in s
               for s in said), said


def test_an_edited_bundle_another_version_wrote_runs_on_the_model(tmp_path):
    """Its comments changed and its manifest's version another: every function is read back from the
    .asm and passes every check on the model (no kernel built again, no fresh emission to compare with)."""
    directory = REPO / "generated/kyber-3329"
    asm = (directory / "kyber-3329.asm").read_text()
    edited = asm.replace("; layer 0", "; the first layer").replace("; freeze\n", "; made canonical\n")
    assert edited.count("; the first layer") > 8 and "; made canonical" in edited
    copy = copied_with(directory, {"kyber-3329.asm": edited}, tmp_path / "copy")
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["generator"]["version"] = "0.1.9"
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    said: list[str] = []
    outcome = run_bundle_test(copy, 1, said.append, tmp_path, on_model=True)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed > 300 and any("24 functions on the machine model" in s for s in said), said


def test_a_function_whose_assembly_cannot_be_read_fails_naming_the_line(monkeypatch, tmp_path):
    """On a CPU without AVX2, an AVX2 function with a line no row prints (a nop, which the table has no
    row for) is a failed check naming the function and the line (nothing ran it); the other AVX2
    functions run on the model and pass."""
    directory = REPO / "generated/kyber-3329"
    asm = (directory / "kyber-3329.asm").read_text()
    at = asm.index("    vpsubw", asm.index("kg_kyber3329_ntt_forward_avx2:"))
    number = asm[:at].count("\n") + 1
    copy = copied_with(directory, {"kyber-3329.asm": asm[:at] + "    nop\n" + asm[at:]}, tmp_path / "copy")
    monkeypatch.setenv(MASK_VARIABLE, "-avx2")
    outcome = run_bundle_test(copy, 1, lambda s: None, tmp_path, reemit=False)
    symbol = "kg_kyber3329_ntt_forward_avx2"
    assert outcome.failures[0].split(": ")[1] == f"{symbol} (not run)"
    assert f"kyber-3329.asm line {number} ('nop'): no row of the instruction table" in outcome.failures[0]
    # the round trips and basis-vector proofs through it fail as calls that crashed
    assert all(symbol in f for f in outcome.failures), outcome.failures
    assert outcome.passed > 200  # every other function's checks on the CPU and on the model


def _mutant(bundle, symbol: str, change):
    """The bundle with kernel `symbol`'s body or tables changed by `change(kernel)`."""
    functions = tuple(dataclasses.replace(f, kernel=change(f.kernel)) if f.symbol == symbol else f
                      for f in bundle.functions)
    return dataclasses.replace(bundle, functions=functions)


def _swapped(kernel):
    """The first subtraction of the second half of the body made an addition."""
    body = list(kernel.body)
    k = next(i for i in range(len(body) // 2, len(body)) if body[i].op == "vpsubw")
    body[k] = Instr("vpaddw", body[k].operands, body[k].comment, body[k].idiom)
    return dataclasses.replace(kernel, body=tuple(body))


def _twiddle(kernel):
    """One entry of the kernel's own twiddle table, plus one."""
    k = next(k for k, t in enumerate(kernel.tables) if t.label.startswith(kernel.symbol.removesuffix("_avx2")))
    t = kernel.tables[k]
    changed = dataclasses.replace(t, values=t.values[:100] + (t.values[100] + 1,) + t.values[101:])
    return dataclasses.replace(kernel, tables=kernel.tables[:k] + (changed,) + kernel.tables[k + 1:])


@needs_tools
@pytest.mark.parametrize("change", [_swapped, _twiddle])
def test_a_mutant_the_cpu_catches_is_caught_on_the_model(change, tmp_path):
    symbol = "kg_kyber3329_ntt_forward_avx2"
    bundle = _mutant(_bundle("kyber-3329"), symbol, change)
    write(render(bundle, "mutant"), tmp_path / "mutant")
    on_cpu = run_bundle_test(tmp_path / "mutant", 2, lambda s: None, tmp_path, reemit=False)
    modelled = run_bundle_test(tmp_path / "mutant", 2, lambda s: None, tmp_path, reemit=False, on_model=True)
    assert any(symbol in f for f in on_cpu.failures), "the CPU does not catch this mutant"
    assert {f.split(":")[1] for f in modelled.failures} == {f.split(":")[1] for f in on_cpu.failures}


# --- AVX-512 mutants of a shipped bundle's assembly, on a CPU without AVX-512

KYBER_ASM = (REPO / "generated/kyber-3329/kyber-3329.asm").read_text()


def _first(symbol: str, mnemonic: str, replacement: str | None) -> tuple[str, str]:
    return next(instruction_mutants(KYBER_ASM, f"kg_kyber3329_{symbol}", mnemonic, replacement))


def _twiddle_mutant() -> tuple[str, str]:
    label = "kg_kyber3329_ntt_forward_twiddles_avx512"
    return table_entry_mutant(KYBER_ASM, label, table_entries(KYBER_ASM, label)[2].index(-758), +1)


def _freeze_mutant() -> tuple[str, str]:
    return _first("freeze_avx512", "vpminuw", None)


# (the function each breaks, the mutant's text and what was changed)
AVX512_MUTANTS = {
    "add made sub": ("ntt_forward_avx512", lambda: _first("ntt_forward_avx512", "vpaddw", "vpsubw")),
    "Barrett rounding dropped": ("reduce_barrett_avx512", lambda: _first("reduce_barrett_avx512", "vpaddw", None)),
    "twiddle -758 made -757": ("ntt_forward_avx512", _twiddle_mutant),
    "mulhi made mullo": ("ntt_forward_avx512", lambda: _first("ntt_forward_avx512", "vpmulhw", "vpmullw")),
    "freeze's vpminuw dropped": ("freeze_avx512", _freeze_mutant),
}
# Freeze's result is wrong only where x - q*((x*20159 >> 16) >> 10) is q, at the nine negative multiples of q
# (test_the_freeze_mutant_runs_on_the_model_wrong_at_negative_multiples_of_q): the checks of a 16-bit unary
# kernel run every input through every vector (`exhaustive`), so they meet them


def _hide_avx512(monkeypatch) -> None:
    monkeypatch.setenv(MASK_VARIABLE, "-avx512f")


@needs_tools
@pytest.mark.parametrize("name", list(AVX512_MUTANTS))
def test_avx512_mutants_of_a_bundle_s_assembly_are_caught_on_the_model(name, monkeypatch, tmp_path):
    """Each mutant of the .asm of kyber-3329, its AVX-512 functions run on the model (this CPU's AVX-512
    hidden): the mutated function fails checks that ran (none "not run"), and only AVX-512 ones fail."""
    function, mutant = AVX512_MUTANTS[name]
    text, what = mutant()
    copy = copied_with(REPO / "generated/kyber-3329", {"kyber-3329.asm": text}, tmp_path / "mutant")
    _hide_avx512(monkeypatch)
    said: list[str] = []
    outcome = run_bundle_test(copy, 1, said.append, tmp_path, reemit=False)
    assert any("8 functions on the machine model" in s for s in said), said
    assert not any("(not run)" in f for f in outcome.failures), outcome.failures
    assert all("avx512" in f for f in outcome.failures), outcome.failures
    assert any(f"kg_kyber3329_{function}" in f for f in outcome.failures), (what, outcome.failures)


@needs_tools
def test_the_freeze_mutant_runs_on_the_model_wrong_at_negative_multiples_of_q(tmp_path):
    """Over every 16-bit input in the block the mutant changed, the model's freeze without its vpminuw
    differs from the shipped one at -9q..-q alone (q there, not 0), as the CPU's does where it has AVX-512."""
    text, _ = _freeze_mutant()
    copy = copied_with(REPO / "generated/kyber-3329", {"kyber-3329.asm": text}, tmp_path / "mutant")
    symbol = "kg_kyber3329_freeze_avx512"
    rows = np.zeros((2048, 256), dtype=np.int64)
    rows[:, :32] = np.arange(-2**15, 2**15).reshape(2048, 32)  # the first block holds every input once
    fn = {"symbol": symbol, "dtype": "int16", "args": [{"role": "inout", "count": 256, "align": 2}]}
    outputs = []
    for bundle in (REPO / "generated/kyber-3329", copy):
        directory, manifest = read_bundle(bundle)
        reading = on_model.bundle_kernels(directory, manifest.only(
            tuple(f for f in manifest.functions if f.symbol == symbol)))
        outputs.append(on_model.run_rows(on_model.Model(reading.kernels), fn, {0: rows})[0])
    shipped, mutant = outputs
    assert shipped[:, :32].min() == 0 and shipped[:, :32].max() == 3328
    assert sorted(set(rows[shipped != mutant].tolist())) == [-k * 3329 for k in range(9, 0, -1)]
    assert set(mutant[shipped != mutant].tolist()) == {3329}
    if {"avx512f", "avx512bw"} <= cpu_flags():
        lib = toolchain.assemble_shared(copy / "kyber-3329.asm", tmp_path)
        assert np.array_equal(protocol.run_batch(lib, symbol, fn["args"], "int16", {0: rows}, tmp_path)[0], mutant)


def test_every_input_of_a_16_bit_freeze_runs_on_the_model():
    """kyber-3329's AVX2 freeze on the model, every input through every vector
    (`exhaustive`), as `kerngen test` runs it for a CPU without AVX2: it
    passes; without its first conditional subtraction (vpminuw) it fails
    where the input is a multiple of q and the output is q."""
    from kerngen.families.ntt import exhaustive

    bundle = _bundle("kyber-3329")
    freeze = bundle.function("freeze", isa="avx2")
    fn = freeze.manifest()
    assert exhaustive.one_element_maps({"functions": [fn]}) == [fn]
    body = list(freeze.kernel.body)
    del body[next(i for i, ins in enumerate(body) if ins.op == "vpminuw")]
    mutant = dataclasses.replace(freeze.kernel, body=tuple(body))
    assert exhaustive.every_input(fn, on_model.Model({fn["symbol"]: freeze.kernel}).calls().batch)[1] is None
    _, wrong = exhaustive.every_input(fn, on_model.Model({fn["symbol"]: mutant}).calls().batch)
    assert wrong is not None and "gives 3329, outside [0, 3328]" in wrong, wrong
