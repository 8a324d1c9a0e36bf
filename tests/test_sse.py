"""SSE kernels and bundles of several ISAs: SSE machine code has no VEX
encoding and no ymm register (so it cannot fault with #UD without AVX),
the dispatch unit detects the CPU's ISAs and routes every call to the chosen
one, and bad ISA lists are refused before anything is written."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from kerngen.families import load
from kerngen.harness.cpu import cpu_flags

from conftest import REPO

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None
                                 or shutil.which("objdump") is None, reason="needs nasm, gcc and objdump")

NTT_SETS = sorted(p for p in (REPO / "params").glob("*.toml") if load(p).family == "ntt")


def disassembly(obj) -> dict[str, list[tuple[str, str]]]:
    """Each function's instructions as (raw bytes, mnemonic and operands), from objdump."""
    out = subprocess.run(["objdump", "-d", "-M", "intel", "-w", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    funcs: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\w+)>:$", line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"^\s+[0-9a-f]+:\t([0-9a-f ]+)\t(.*)$", line)
        if m and current is not None:
            current.append((m.group(1).strip(), m.group(2).strip()))
    return funcs


def avx_only(instructions: list[tuple[str, str]]) -> list[str]:
    """Instructions a CPU without AVX cannot run: VEX or EVEX encoded (first
    byte c4, c5 or 62 in 64-bit mode; objdump spells them v...), or naming ymm/zmm."""
    bad = []
    for raw, text in instructions:
        first = raw.split()[0]
        if first in ("c4", "c5", "62") or text.startswith("v") or re.search(r"\b[yz]mm\d", text):
            bad.append(f"{raw}  {text}")
    return bad


def assemble(asm, tmp_path):
    obj = tmp_path / (asm.stem + ".o")
    subprocess.run(["nasm", "-f", "elf64", str(asm), "-o", str(obj)], check=True)
    return obj


@needs_tools
@pytest.mark.parametrize("path", [p for p in NTT_SETS if "sse" in load(p).isas], ids=lambda p: p.stem)
def test_sse_machine_code_has_no_vex_and_no_ymm(path, tmp_path):
    name = path.stem
    manifest = json.loads((REPO / "generated" / name / "manifest.json").read_text())
    funcs = disassembly(assemble(REPO / "generated" / name / f"{name}.asm", tmp_path))
    by_isa = {}
    for f in manifest["functions"]:
        by_isa.setdefault(f["isa"], []).append(f["symbol"])
    assert {"avx2", "sse"} <= set(by_isa)  # (and avx512, in the sets that carry it)
    for symbol in by_isa["sse"]:
        assert len(funcs[symbol]) > 10, symbol
        assert avx_only(funcs[symbol]) == [], symbol
    for symbol in by_isa["avx2"]:  # the check sees VEX code where there is some
        assert avx_only(funcs[symbol]), symbol


@needs_tools
def test_the_encoding_check_finds_one_vex_instruction(tmp_path):
    asm = tmp_path / "mixed.asm"
    asm.write_text("section .text\nglobal f\nf:\n paddw xmm0, xmm1\n pshufb xmm2, xmm3\n vpaddw xmm0, xmm0, xmm1\n"
                   " paddw xmm8, [rdi]\n ret\nglobal g\ng:\n movdqu xmm9, [rsi]\n pextrw eax, xmm9, 3\n ret\n")
    funcs = disassembly(assemble(asm, tmp_path))
    assert [b.split("  ")[1] for b in avx_only(funcs["f"])] == ["vpaddw xmm0,xmm0,xmm1"]
    assert avx_only(funcs["g"]) == []


def _routing_program(manifest: dict, prefix: str, header: str, stubs: bool) -> str:
    """A C program that, for each ISA, chooses it and calls every function
    without suffix; with `stubs` the kernels are C functions recording their
    name, so the program prints which kernel each call reached."""
    isas = []
    for f in manifest["functions"]:
        if f["isa"] not in isas:
            isas.append(f["isa"])
    lines = ["#include <stdio.h>", "#include <string.h>", f'#include "{header}"',
             "static const char *reached = \"\";"]
    calls = []
    for f in manifest["functions"]:
        base = f["symbol"].removesuffix("_" + f["isa"])
        params = ", ".join(f"{'const ' if a['role'] == 'in' else ''}{f['dtype']}_t *{a['name']}"
                           for a in f["args"])
        if stubs:
            lines.append(f"void {f['symbol']}({params}) {{ "
                         + " ".join(f"(void){a['name']};" for a in f["args"]) + f' reached = "{f["symbol"]}"; }}')
        if f["isa"] == isas[0]:
            calls.append((base, f["args"], f["dtype"]))
    lines.append("int main(void) {")
    lines.append(f'    const char *isas[] = {{{", ".join(json.dumps(i) for i in isas)}}};')
    lines.append(f'    printf("chosen %s\\n", {prefix}_isa() ? {prefix}_isa() : "none");')
    lines.append(f'    printf("use neon %d\\n", {prefix}_use_isa("neon"));')
    lines.append(f"    for (unsigned i = 0; i < {len(isas)}; i++) {{")
    lines.append(f'        if ({prefix}_use_isa(isas[i]) != 0) {{ printf("refused %s\\n", isas[i]); continue; }}')
    for base, args, dtype in calls:
        decls = " ".join(f"static {dtype}_t {a['name']}_{base}[{a['count']}];" for a in args)
        lines.append(f"        {{ {decls} {base}({', '.join(a['name'] + '_' + base for a in args)}); "
                     f'printf("%s {base} %s\\n", {prefix}_isa(), reached); }}')
    lines += ["    }", "    return 0;", "}"]
    return "\n".join(lines) + "\n"


@needs_tools
def test_dispatch_detects_the_cpu_and_routes_every_call(tmp_path):
    """Stub kernels record which one a call reaches: every function without
    suffix reaches its kernel of the chosen ISA; the first choice is the
    first ISA of the bundle's order (the widest first) whose CPU features
    /proc/cpuinfo lists; use_isa refuses an ISA unknown (neon) or not
    runnable here."""
    bundle = REPO / "generated" / "kyber-3329"
    manifest = json.loads((bundle / "manifest.json").read_text())
    prefix = manifest["params"]["prefix"]
    for f in ("kyber-3329.h", "kyber-3329_dispatch.c"):
        shutil.copy(bundle / f, tmp_path / f)
    (tmp_path / "main.c").write_text(_routing_program(manifest, prefix, "kyber-3329.h", stubs=True))
    exe = tmp_path / "routing"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O2", "main.c",
                    "kyber-3329_dispatch.c", "-o", str(exe)], cwd=tmp_path, check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()

    flags = cpu_flags()
    isas = manifest["params"]["isa"]
    runs = {isa: all(set(f["cpu"]) <= flags for f in manifest["functions"] if f["isa"] == isa) for isa in isas}
    assert out[0] == "chosen " + next(isa for isa in isas if runs[isa])
    assert out[1] == "use neon -1"
    assert [line for line in out[2:] if line.startswith("refused")] == [f"refused {i}" for i in isas if not runs[i]]
    routed = [line.split() for line in out[2:] if not line.startswith("refused")]
    for isa in isas:
        mine = [r for r in routed if r[0] == isa]
        assert (len(mine) == sum(f["isa"] == isa for f in manifest["functions"])) == runs[isa], (isa, out)
        for chosen, base, reached in mine:
            assert reached == f"{base}_{isa}"


@needs_tools
def test_dispatch_unit_links_with_the_kernels_and_computes_what_they_do(tmp_path):
    """The real kernels behind the dispatch unit: the forward NTT through the
    function without suffix equals each ISA's kernel called directly, for
    every ISA this CPU runs, and the unit chose the first of them."""
    bundle = REPO / "generated" / "kyber-3329"
    manifest = json.loads((bundle / "manifest.json").read_text())
    runnable = [isa for isa in manifest["params"]["isa"]
                if all(set(f["cpu"]) <= cpu_flags() for f in manifest["functions"] if f["isa"] == isa)]
    for f in ("kyber-3329.h", "kyber-3329_dispatch.c", "kyber-3329.asm"):
        shutil.copy(bundle / f, tmp_path / f)
    direct = "".join(f"    memcpy(b, input, sizeof b); kg_kyber3329_ntt_forward_{isa}(b); "
                     f'printf(" %d", memcmp(a, b, sizeof a));\n' for isa in runnable)
    (tmp_path / "main.c").write_text("""#include <stdio.h>
#include <string.h>
#include "kyber-3329.h"
int main(void) {
    static int16_t input[256], a[256], b[256];
    for (int i = 0; i < 256; i++) input[i] = (int16_t)((i * 1237) % 3329 - 1664);
    memcpy(a, input, sizeof a);
    kg_kyber3329_ntt_forward(a);
    printf("%s", kg_kyber3329_isa());
""" + direct + """    printf("\\n");
    return 0;
}
""")
    subprocess.run(["nasm", "-f", "elf64", "kyber-3329.asm", "-o", "k.o"], cwd=tmp_path, check=True)
    subprocess.run(["gcc", "-O2", "main.c", "kyber-3329_dispatch.c", "k.o", "-o", "run"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "run")], capture_output=True, text=True, check=True).stdout.split()
    assert out == [runnable[0]] + ["0"] * len(runnable)


def test_a_bundle_of_one_isa_has_no_dispatch_unit(tmp_path, kerngen_cli):
    r = kerngen_cli("emit", "params/tiny-257.toml", "--isa", "sse", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    assert not [p.name for p in (tmp_path / "t").iterdir() if p.suffix == ".c"]
    assert "_use_isa" not in (tmp_path / "t" / "tiny-257.h").read_text()


ISA_CHOICES = 'must be "avx2", "avx512", "avx512vl", "sse", "scalar" or "auto" (or a list of them) for the ntt family'


@pytest.mark.parametrize("isa, words", [
    ('"avx1024"', ISA_CHOICES + ', got "avx1024"'),
    ('["avx2", "neon"]', ISA_CHOICES + ', got "neon"'),
    ('["sse", "sse"]', "names sse twice"),
    ("[]", ISA_CHOICES + ", got []"),
    ("[3]", ISA_CHOICES + ", got [3]"),
])
def test_bad_isa_lists_exit_2_naming_the_key_and_the_choices(tmp_path, isa, words, kerngen_cli):
    src = tmp_path / "p.toml"
    src.write_text(f'name = "p"\nfamily = "ntt"\nn = 256\nq = 3329\nisa = {isa}\n')
    r = kerngen_cli("emit", src, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert f"isa: {words}" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arg, words", [("avx2,avx1024", 'got "avx1024" from --isa'),
                                        ("sse,sse", "names sse twice"), ("", 'got ""')])
def test_bad_isa_option_exits_2(tmp_path, arg, words, kerngen_cli):
    r = kerngen_cli("emit", "params/kyber-3329.toml", "--isa", arg, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and "isa" in r.stderr
    assert not (tmp_path / "out").exists()


def test_isa_option_takes_a_list(tmp_path, kerngen_cli):
    r = kerngen_cli("emit", "params/gf2m-163.toml", "--isa", "sse,avx2", "--out", tmp_path / "g")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert manifest["params"]["isa"] == ["sse", "avx2"]
    assert {f["isa"] for f in manifest["functions"]} == {"sse", "avx2"}
    text = (tmp_path / "g" / "gf2m-163_dispatch.c").read_text()
    assert '{ "avx2", "sse" }' in text  # the widest first, whatever the order given
