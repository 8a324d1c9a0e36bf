"""Bundles for several calling conventions and object formats (`abi`), and
the visibility of their symbols: one .asm file per ABI, the manifest naming
each file's ABI and format and each function's symbol per ABI, a header that
compiles for every platform it was emitted for (and says what to do on the
others), hidden symbols by default, Mach-O objects read back with LLVM's
tools, and bad lists refused before anything is written."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kerngen.core.params import Overrides
from kerngen.families import load
from kerngen.harness import macho, wine
from kerngen.emission.render import render

from conftest import REPO, STORE, error_lines

SHIPPED = sorted((REPO / "params").glob("*.toml"))
ALL = "sysv,win64,macho"
# visibility changes one word of each global directive, the same in every set: every set's object is
# checked hidden, and one set of each family's default
DEFAULT_VISIBILITY_SETS = ("kyber-3329", "gf2m-233")
MACHO_CASES = [(p, "hidden") for p in SHIPPED] + [(p, "default") for p in SHIPPED if p.stem in DEFAULT_VISIBILITY_SETS]


def needs(*tools: str):
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def emitted(kerngen_cli, tmp_path: Path, name: str, *flags: str) -> tuple[Path, dict]:
    out = tmp_path / name
    r = kerngen_cli("emit", f"params/{name}.toml", *flags, "--out", out)
    assert r.returncode == 0, r.stderr
    return out, json.loads((out / "manifest.json").read_text())


def symbol_table(obj: Path) -> dict[str, tuple[str, str]]:
    """ELF symbol -> (binding, visibility), from readelf -s."""
    out = subprocess.run(["readelf", "-sW", str(obj)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) == 8 and cols[3] == "FUNC":
            table[cols[7]] = (cols[4], cols[5])
    return table


def dynamic_symbols(so: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


# --- one file per ABI ------------------------------------------------------------

@needs("nasm", "gcc")
@pytest.mark.parametrize("name", ["kyber-3329", "gf2m-233"])
def test_an_abi_list_emits_one_asm_file_each_and_the_manifest_says_which(tmp_path, name, kerngen_cli):
    out, manifest = emitted(kerngen_cli, tmp_path, name, "--abi", ALL)
    stem = name
    assert manifest["params"]["abi"] == ["sysv", "win64", "macho"]
    assert manifest["objects"] == [
        {"file": f"{stem}.asm", "abi": "sysv", "format": "elf64", "visibility": "hidden"},
        {"file": f"{stem}_win64.asm", "abi": "win64", "format": "win64"},
        {"file": f"{stem}_macho.asm", "abi": "macho", "format": "macho64", "visibility": "hidden"},
    ]
    for obj in manifest["objects"]:
        text = (out / obj["file"]).read_text()
        assert f"assemble with: nasm -f {obj['format']}" in text
        r = subprocess.run(["nasm", "-f", obj["format"], "-o", str(tmp_path / "o"), str(out / obj["file"])],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    for f in manifest["functions"]:
        assert f["symbols"] == {"sysv": f["symbol"], "win64": f["symbol"], "macho": "_" + f["symbol"]}
    # every .asm file, the build files and the README are listed and hashed
    assert {o["file"] for o in manifest["objects"]} <= manifest["files"].keys()
    cmake = (out / "CMakeLists.txt").read_text()
    for obj in manifest["objects"]:
        assert f'STREQUAL "{obj["format"]}")\n  set(' in cmake and obj["file"] in cmake


def test_one_abi_other_than_sysv_emits_only_its_file(tmp_path, kerngen_cli):
    out, manifest = emitted(kerngen_cli, tmp_path, "tiny-257", "--abi", "macho")
    assert [o["file"] for o in manifest["objects"]] == ["tiny-257_macho.asm"]
    assert not (out / "tiny-257.asm").exists()
    assert "Regenerate with: kerngen emit params/tiny-257.toml --abi macho" in (out / "tiny-257.h").read_text()


@needs("nasm", "gcc", "llvm-nm", "llvm-objdump")
def test_kerngen_test_runs_each_object_as_this_machine_can(tmp_path, kerngen_cli):
    """ELF here, COFF under Wine (when installed), Mach-O read back; and a fresh
    emission of the manifest's parameters (the abi list among them) matches."""
    out, manifest = emitted(kerngen_cli, tmp_path, "tiny-257", "--abi", ALL)
    r = kerngen_cli("test", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "comparing with a fresh emission" in r.stderr
    assert "(tiny-257.asm)" in r.stderr
    assert "checking the Mach-O object of tiny-257_macho.asm" in r.stderr
    if not wine.missing_tools():
        assert "(tiny-257_win64.asm, Wine)" in r.stderr
    else:
        assert "not running tiny-257_win64.asm" in r.stderr
    assert r.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")


# --- the header on each platform ----------------------------------------------------

def _compile_header(compiler: str, bundle: Path, name: str, *defines: str) -> subprocess.CompletedProcess:
    return subprocess.run([compiler, "-fsyntax-only", "-x", "c", "-std=c11", "-Wall", "-Werror", *defines,
                           "-I", str(bundle), "-"], input=f'#include "{name}.h"\nint main(void) {{ return 0; }}\n',
                          capture_output=True, text=True)


@needs("gcc", wine.MINGW_GCC)
def test_the_header_compiles_for_every_platform_emitted_and_names_the_missing_one(tmp_path, kerngen_cli):
    both, _ = emitted(kerngen_cli, tmp_path, "kyber-3329", "--abi", "sysv,win64")
    assert _compile_header("gcc", both, "kyber-3329").returncode == 0
    assert _compile_header(wine.MINGW_GCC, both, "kyber-3329").returncode == 0
    # the preprocessor chain on a Mach-O compiler (no Mac here: its macro stands in for it)
    r = _compile_header("gcc", both, "kyber-3329", "-D__APPLE__")
    assert r.returncode != 0 and "emitted without kyber-3329_macho.asm" in r.stderr and "--abi macho" in r.stderr
    only, _ = emitted(kerngen_cli, tmp_path, "gf2m-163", "--abi", "sysv")
    assert _compile_header("gcc", only, "gf2m-163").returncode == 0
    r = _compile_header(wine.MINGW_GCC, only, "gf2m-163")
    assert r.returncode != 0 and "emitted without gf2m-163_win64.asm" in r.stderr and "--abi win64" in r.stderr


# --- visibility -------------------------------------------------------------------

@needs("nasm", "gcc", "readelf", "nm")
@pytest.mark.parametrize("flags, assembled, visible", [
    ((), (), "HIDDEN"),
    (("--visibility", "default"), (), "DEFAULT"),
    ((), ("-DKERNGEN_VISIBILITY=default",), "DEFAULT"),  # chosen when assembling, without emitting again
    (("--visibility", "default"), ("-DKERNGEN_VISIBILITY=hidden",), "HIDDEN"),
])
def test_symbols_are_hidden_unless_asked_and_a_shared_library_exports_only_default_ones(
        tmp_path, flags, assembled, visible, kerngen_cli):
    out, manifest = emitted(kerngen_cli, tmp_path, "tiny-257", *flags)
    assert manifest["objects"][0]["visibility"] == ("default" if "default" in flags else "hidden")
    obj, so = tmp_path / "k.o", tmp_path / "k.so"
    subprocess.run(["nasm", "-f", "elf64", *assembled, "-o", str(obj), str(out / "tiny-257.asm")], check=True)
    table = symbol_table(obj)
    symbols = [f["symbol"] for f in manifest["functions"]]
    assert {s: table.get(s) for s in symbols} == {s: ("GLOBAL", visible) for s in symbols}
    subprocess.run(["gcc", "-shared", "-o", str(so), str(obj)], check=True)
    exported = dynamic_symbols(so)
    assert (set(symbols) <= exported) if visible == "DEFAULT" else not (set(symbols) & exported)


@needs("nasm", "gcc")
def test_a_program_calls_hidden_kernels_it_links(tmp_path, kerngen_cli):
    """Hidden symbols link into the program that holds them (and keep it PIE)."""
    out, manifest = emitted(kerngen_cli, tmp_path, "tiny-257", "--isa", "sse")
    fwd = next(f["symbol"] for f in manifest["functions"] if f["kind"] == "ntt_forward")
    (tmp_path / "main.c").write_text(
        f'#include <stdio.h>\n#include "tiny-257.h"\n'
        f"int main(void) {{ static int16_t a[KG_TINY257_N] __attribute__((aligned(32))) = {{1}};\n"
        f'  {fwd}(a); printf("%d %d\\n", a[0], a[1]); return 0; }}\n')
    subprocess.run(["nasm", "-f", "elf64", "-o", str(tmp_path / "k.o"), str(out / "tiny-257.asm")], check=True)
    r = subprocess.run(["gcc", "-O2", "-pie", "-fPIE", "-I", str(out), "-o", str(tmp_path / "app"),
                        str(tmp_path / "main.c"), str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    run = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True)
    assert run.returncode == 0 and len(run.stdout.split()) == 2, run.stdout + run.stderr


# --- Mach-O -----------------------------------------------------------------------

@needs("nasm", *macho.TOOLS[1:])
@pytest.mark.parametrize("path, visibility", MACHO_CASES, ids=[f"{v}-{p.stem}" for p, v in MACHO_CASES])
def test_every_shipped_set_makes_a_clean_mach_o_object(tmp_path, path, visibility):
    """Underscored symbols of the manifest's visibility in __TEXT,__text, tables in
    __TEXT,__const, nothing else exported or undefined, every relocation RIP-relative."""
    p = load(path, Overrides(abi="macho", visibility=visibility))
    files = render(STORE.bundles(p), "test")
    manifest = json.loads(files["manifest.json"])
    [obj] = manifest["objects"]
    assert obj == {"file": f"{p.name}_macho.asm", "abi": "macho", "format": "macho64", "visibility": visibility}
    asm = tmp_path / obj["file"]
    asm.write_text(files[obj["file"]])
    assert ".note" not in files[obj["file"]] and "endbr64" not in files[obj["file"]]
    symbols = {f["symbol"]: f["symbols"]["macho"] for f in manifest["functions"] if "unit" not in f}  # drivers: C
    assert macho.object_problems(macho.assemble(asm, tmp_path), symbols, visibility) == []


MACHO_CONTROL = """\
default rel
section .rodata align=32
tab: dd 1, 2, 3, 4
{extra_data}
section .text
global {symbol}:private_extern
{extra_global}
{symbol}:
    {load}
    ret
{extra_code}
"""


@needs("nasm", *macho.TOOLS[1:])
@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"load": "mov rax, tab"}, "absolute relocation in __TEXT,__text"),
    ({"extra_data": "tab_address: dq tab"}, "absolute relocation in __DATA,__const"),
    ({"extra_global": "global _kg_g\n_kg_g: ret"}, "_kg_g (__TEXT,__text) is exported"),
    ({"extra_code": "extern _memcpy\n    call _memcpy"}, "_memcpy is undefined"),
    ({"extra_data": "section .data\nx: dd 0"}, "unexpected section __DATA,__data"),
    ({"visibility": "default"}, "private external, expected external"),
    ({"symbol": "kg_f"}, "Mach-O symbol 'kg_f', expected the leading underscore"),
])
def test_the_mach_o_check_finds_each_fault(tmp_path, change, problem):
    """Controls: a clean object passes; each fault the check exists for is named."""
    fields = {"extra_data": "", "extra_global": "", "extra_code": "", "load": "mov eax, [tab]", "symbol": "_kg_f"}
    fields.update({k: v for k, v in change.items() if k in fields})
    asm = tmp_path / "control.asm"
    asm.write_text(MACHO_CONTROL.format(**fields))
    symbols = {"kg_f": fields["symbol"]}
    problems = macho.object_problems(macho.assemble(asm, tmp_path), symbols, change.get("visibility", "hidden"))
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


# --- bad input ----------------------------------------------------------------------

@pytest.mark.parametrize("key, value, words", [
    ("abi", '"arm64"', 'abi: must be "sysv", "win64" or "macho" (or a list of them), got "arm64"'),
    ("abi", '["sysv", "win64", "sysv"]', "abi: names sysv twice"),
    ("abi", "[]", "abi: must be"),
    ("abi", "7", "abi: must be"),
    ("visibility", '"protected"', 'visibility: must be "hidden" or "default", got "protected"'),
])
def test_bad_abi_or_visibility_in_the_file_exits_2_and_writes_nothing(tmp_path, key, value, words, kerngen_cli):
    src = tmp_path / "p.toml"
    src.write_text(f'name = "p"\nfamily = "ntt"\nn = 256\nq = 3329\n{key} = {value}\n')
    r = kerngen_cli("emit", src, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and len(error_lines(r.stderr)) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, words", [
    (("--abi", "win32"), "abi: must be"),
    (("--abi", "win32"), 'got "win32" from --abi'),
    (("--abi", "macho,sysv,macho"), "names macho twice"),
    (("--abi", ""), 'got "" from --abi'),
    (("--visibility", "internal"), "--visibility: invalid choice: 'internal'"),
])
def test_bad_abi_or_visibility_option_exits_2_and_writes_nothing(tmp_path, args, words, kerngen_cli):
    r = kerngen_cli("emit", "params/kyber-3329.toml", *args, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert words in r.stderr
    assert not (tmp_path / "out").exists()
