"""The CPU mask (KERNGEN_CPU, `harness.cpu`): kerngen, the harness and the
dispatch unit behave as on a CPU without the extensions it hides, and under
it nothing runs an instruction the masked CPU lacks (the harness programs run
under valgrind, which stops at any AVX-512 instruction)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kerngen.core.family import native
from kerngen.emission.dispatch import dispatch
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import UsageError
from kerngen.families import load
from kerngen.harness.cpu import MASK_VARIABLE, CpuMask, cpu_flags, host_flags, left_out, march_flags, runnable_isas
from kerngen.machine.isa import ISAS

from conftest import REPO, STORE, under_valgrind

# an AMD Zen 3 (AVX2, VPCLMULQDQ, no AVX-512, no GFNI)
ZEN3 = "x86-64-v3,+vpclmulqdq"
AVX512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl"}
needs_avx512 = pytest.mark.skipif(not AVX512 <= host_flags(), reason="this CPU has no AVX-512 to hide")


def test_a_level_keeps_its_extensions_and_a_plus_one_more():
    flags = {"sse2", "sse4_1", "avx2", "avx", "pclmulqdq", "vpclmulqdq", "gfni", "avx512f", "fpu"}
    assert CpuMask.parse(ZEN3).apply(flags) == {"sse2", "sse4_1", "avx2", "avx", "pclmulqdq", "vpclmulqdq", "fpu"}
    assert CpuMask.parse("x86-64-v2").apply(flags) == {"sse2", "sse4_1", "fpu"}
    assert CpuMask.parse("-avx512f, -GFNI").apply(flags) == flags - {"avx512f", "gfni"}
    assert CpuMask.parse("x86-64-v4").apply({"avx512f"}) == {"avx512f"}
    assert CpuMask.parse("x86-64-v4").apply(set()) == set()  # a mask never adds what the CPU lacks


@pytest.mark.parametrize("text, named", [("x86-64-v9", "'x86-64-v9'"), ("avx2", "'avx2'"), ("-avx9", "'-avx9'"),
                                         ("+avx2", "+avx2")])
def test_a_mask_that_cannot_be_read_names_its_term(text, named):
    with pytest.raises(UsageError, match=re.escape(named)):
        CpuMask.parse(text)


def test_the_command_line_refuses_a_mask_it_cannot_read(kerngen_cli, monkeypatch):
    monkeypatch.setenv(MASK_VARIABLE, "x86-64-v3,+avx1024")
    r = kerngen_cli("list")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "'+avx1024'" in r.stderr and r.stdout == ""


@needs_avx512
def test_flags_and_compiler_options_under_the_mask(monkeypatch):
    monkeypatch.setenv(MASK_VARIABLE, ZEN3)
    assert not cpu_flags() & AVX512 and "avx2" in cpu_flags() and cpu_flags() <= host_flags()
    assert {"-mno-avx512f", "-mno-gfni"} <= set(march_flags()) and march_flags("x86-64-v2") == ["-march=x86-64-v2"]
    functions = STORE.bundle(native(load(REPO / "params/kyber-3329.toml"))).functions
    assert runnable_isas(functions) == ["avx2", "sse"]
    assert left_out(functions) == f"left out avx512 ({MASK_VARIABLE}={ZEN3} hides avx512bw, avx512f)"
    monkeypatch.delenv(MASK_VARIABLE)
    assert runnable_isas(functions) == ["avx512", "avx2", "sse"] and left_out(functions) is None


@needs_avx512
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nasm") is None, reason="needs gcc and nasm")
def test_the_dispatch_unit_chooses_as_kerngen_does(tmp_path, monkeypatch):
    """The unit's own reading of KERNGEN_CPU (C) against `harness.cpu`'s: for each mask, the first ISA in
    the unit's order whose every function the masked CPU runs."""
    p = load(REPO / "params/kyber-3329.toml")
    bundles = STORE.bundles(p)
    write(render(bundles, "kerngen emit kyber-3329"), tmp_path / "b")
    unit = dispatch(bundles[0])
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "kyber-3329.h"\n'
        f'int main(void) {{ const char *isa = {unit.prefix}_isa(); puts(isa ? isa : "none"); return 0; }}\n')
    subprocess.run(["nasm", "-f", "elf64", tmp_path / "b/kyber-3329.asm", "-o", tmp_path / "k.o"], check=True)
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", tmp_path / "b", tmp_path / "main.c",
                    tmp_path / "b/kyber-3329_dispatch.c", tmp_path / "k.o", "-o", tmp_path / "main"], check=True)
    order = [t.name for t in unit.isas]
    for text in ("", ZEN3, "x86-64-v2", "x86-64", "-avx512bw", "x86-64-v4", "X86-64-V3, -AVX2", "-sse4.1,-avx2"):
        monkeypatch.setenv(MASK_VARIABLE, text)
        runs = runnable_isas(bundles[0].functions)
        want = next((isa for isa in order if isa in runs), "none")
        got = subprocess.run([tmp_path / "main"], capture_output=True, text=True, check=True).stdout.strip()
        assert got == want, text


needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
# a small set whose first ISA is avx512
TINY = {"name": "tiny-257", "family": "ntt", "n": 64, "q": 257, "width": 16, "isa": ["avx512", "avx2", "sse"]}


@needs_avx512
@needs_valgrind
def test_bench_under_the_mask_times_what_the_cpu_runs_and_names_the_rest(kerngen_cli, monkeypatch, write_params):
    monkeypatch.setenv(MASK_VARIABLE, ZEN3)
    ran = under_valgrind(monkeypatch)
    r = kerngen_cli("bench", write_params(TINY), "--batches", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert f"left out avx512 ({MASK_VARIABLE}={ZEN3} hides avx512bw, avx512f): not timed" in r.stderr
    rows = json.loads(r.stdout)
    assert rows and "kg_bench" in ran
    assert not [row["symbol"] for row in rows if row["symbol"].endswith("_avx512")]
    assert {row["symbol"].rsplit("_", 1)[1] for row in rows} == {"avx2", "sse"}


@needs_avx512
@needs_valgrind
def test_test_under_the_mask_runs_the_rest_on_the_model(kerngen_cli, monkeypatch, write_params):
    monkeypatch.setenv(MASK_VARIABLE, ZEN3)
    ran = under_valgrind(monkeypatch)
    r = kerngen_cli("test", write_params(TINY))
    assert r.returncode == 0 and r.stdout.endswith(" failed\n") and "FAIL" not in r.stdout, r.stdout + r.stderr
    assert "kg_runner" in ran
    assert f"tiny-257: running avx512 on the machine model: left out avx512 ({MASK_VARIABLE}={ZEN3} hides" in r.stderr
    assert "on the machine model (the instruction table's semantics run on their assembly, read back), not the CPU" in r.stderr


@needs_avx512
@needs_valgrind
def test_without_the_mask_valgrind_stops_the_avx512_kernels(kerngen_cli, monkeypatch, write_params):
    """The control of the two tests above: valgrind does stop a harness program at an AVX-512 kernel."""
    monkeypatch.delenv(MASK_VARIABLE, raising=False)
    under_valgrind(monkeypatch)
    r = kerngen_cli("bench", write_params(TINY), "--batches", "2", "--json")
    assert r.returncode == 2 and "kg_bench" in r.stderr, r.stderr
