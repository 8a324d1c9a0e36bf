"""Targets other than System V / ELF render from the same kernels through the
ABI and object-format rows, and the package works installed (not editable)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from kerngen.families import for_abi, load
from kerngen.families.ntt.layout import plan
from kerngen.machine.abi import RBP
from kerngen.machine.registers import GPR_NAMES
from kerngen.emission.frame import Frame, frame_of
from kerngen.emission.render import render
from kerngen.machine.target import PLATFORMS, make_target

from conftest import REPO, STORE

needs_nasm = pytest.mark.skipif(shutil.which("nasm") is None, reason="nasm is needed to assemble")


def _render_for(name: str, platform: str) -> str:
    p = for_abi(load(REPO / f"params/{name}.toml"), platform)
    return render(STORE.bundle(p), "test")[PLATFORMS[platform].asm_file(name)]


def _function(asm: str, label: str) -> list[str]:
    lines = asm.splitlines()
    start = lines.index(f"{label}:")
    return [ln.strip() for ln in lines[start + 1:lines.index(".end:", start)]]


@needs_nasm
@pytest.mark.parametrize("name", ["kyber-3329", "gf2m-233"])
@pytest.mark.parametrize("platform, fmt, abi", [("win64", "win64", "Microsoft x64"), ("macho", "macho64", "System V")])
def test_other_platforms_render_and_assemble(name, platform, fmt, abi, tmp_path):
    asm = _render_for(name, platform)
    path = tmp_path / f"{name}.asm"
    path.write_text(asm)
    r = subprocess.run(["nasm", "-f", fmt, "-o", str(tmp_path / "out.o"), str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"({abi}" in asm and f"assemble with: nasm -f {fmt}" in asm
    assert ".note.GNU-stack" not in asm
    if platform == "macho":
        assert all(ln.startswith("global _kg_") for ln in asm.splitlines() if ln.startswith("global"))


@needs_nasm
@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None, reason="cc and nm link and list")
def test_a_program_linked_with_gc_sections_keeps_only_the_kernels_it_calls(tmp_path):
    """Each ELF function and table has a section of its own: `ld --gc-sections` keeps the one kernel a program
    calls and the tables it reads, and drops the other kernels; linked without it, every kernel stays."""
    bundle = STORE.bundle(load(REPO / "params/kyber-3329.toml"))
    (tmp_path / "k.asm").write_text(render(bundle, "test")[PLATFORMS["sysv"].asm_file("kyber-3329")])
    subprocess.run(["nasm", "-f", "elf64", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.asm")], check=True)
    symbols = [f.symbol for f in bundle.functions]
    kept = symbols[0]
    (tmp_path / "app.c").write_text(f"extern void {kept}(void);\n"
                                    f"void (*volatile used)(void) = {kept};\n"
                                    "int main(void) { return used == 0; }\n")
    linked = {}
    for name, flags in (("gc", ["-Wl,--gc-sections"]), ("all", [])):
        subprocess.run(["cc", "-o", str(tmp_path / name), str(tmp_path / "app.c"), str(tmp_path / "k.o"), *flags],
                       check=True)
        nm = subprocess.run(["nm", str(tmp_path / name)], capture_output=True, text=True, check=True).stdout
        linked[name] = {line.split()[-1] for line in nm.splitlines()}
    assert set(symbols) <= linked["all"]
    assert kept in linked["gc"] and not (set(symbols) - {kept}) & linked["gc"]


@needs_nasm
@pytest.mark.skipif(shutil.which("llvm-objdump") is None, reason="llvm-objdump reads Mach-O headers")
def test_a_macho_object_lets_the_linker_strip_each_function(tmp_path):
    """Mach-O has no section per function: the header's SUBSECTIONS_VIA_SYMBOLS lets ld -dead_strip drop each
    symbol's bytes alone."""
    (tmp_path / "k.asm").write_text(_render_for("kyber-3329", "macho"))
    subprocess.run(["nasm", "-f", "macho64", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.asm")], check=True)
    header = subprocess.run(["llvm-objdump", "--macho", "--private-header", str(tmp_path / "k.o")],
                            capture_output=True, text=True, check=True).stdout
    assert "SUBSECTIONS_VIA_SYMBOLS" in header


_SAVE = re.compile(r"^v?movdqa(?:64)? \[rsp \+ (\d+)\], (xmm\d+)$")  # EVEX kernels save with vmovdqa64
_RESTORE = re.compile(r"^v?movdqa(?:64)? (xmm\d+), \[(rsp|rbp) \+ (\d+)\]$")


def _saved_and_used(body: list[str]) -> tuple[set[str], set[str], set[str]]:
    """xmm6-15 the body writes or reads, those its prologue saves, those its epilogue
    restores (relative to rbp when it is the frame pointer, else to rsp)."""
    callee_saved = {f"xmm{r}" for r in range(6, 16)} | {f"ymm{r}" for r in range(6, 16)}
    used = {op.strip().replace("ymm", "xmm") for ln in body if not _SAVE.match(ln)
            for op in ln.split(None, 1)[-1].split(",") if op.strip() in callee_saved}
    saved = {m.group(2) for m in map(_SAVE.match, body) if m}
    restored = {m.group(1) for m in map(_RESTORE.match, body) if m}
    return used, saved, restored


@needs_nasm
def test_win64_saves_the_vector_registers_it_uses_and_loads_stack_arguments():
    """The Win64 frame is the one its unwind codes describe: stack-argument
    loads, pushes, a fixed allocation holding 16-aligned xmm saves, the saves,
    rbp as frame pointer only when the kernel spills (then the body aligns rsp
    and allocates the spill slots), each described instruction followed by its
    `.uwK` label; the epilogue restores, then lea/add rsp, pops and returns."""
    asm = _render_for("gf2m-233", "win64")
    ladder = body_of_ladder(asm)
    assert ladder[0] == "mov r10, [rsp + 40]"  # the fifth argument, above the shadow space
    assert ladder[1:5] == ["push rbp", ".uw0:", "sub rsp, 160", ".uw1:"]
    fp = ladder.index("mov rbp, rsp")
    assert ladder[fp + 1:fp + 3] == [".uw12:", "and rsp, -32"]
    spill = ladder[fp + 3].removeprefix("sub rsp, ")
    assert spill.isdigit() and int(spill) % 32 == 0 and int(spill) > 0  # the spill slots, 32-byte aligned
    # xmm only: VEX.128 writes leave the upper halves clean, so no vzeroupper
    assert ladder[-3:] == ["lea rsp, [rbp + 160]", "pop rbp", "ret"] and "vzeroupper" not in ladder
    assert _function(asm, "kg_gf2m233_ladder_step2_avx2")[-4] == "vzeroupper"  # it writes ymm registers
    labels = [ln[:-1] for ln in asm.splitlines() if ln.startswith("kg_") and ln.endswith(":")
              and ".xdata" not in ln]
    some = 0
    for label in labels:
        body = _function(asm, label)
        used, saved, restored = _saved_and_used(body)
        assert saved == used and restored == used, label
        some += bool(used)
        pushes = [ln.split()[1] for ln in body if ln.startswith("push ")]
        fixed = [int(ln.split(", ")[1]) for i, ln in enumerate(body)
                 if ln.startswith("sub rsp, ") and body[i - 1] != "and rsp, -32"]
        alloc = fixed[0] if fixed else 0
        # rsp is 8 mod 16 at entry: the saves are 16-aligned, inside the fixed allocation
        offsets = [int(m.group(1)) for m in map(_SAVE.match, body) if m]
        if offsets:
            assert (8 + 8 * len(pushes) + alloc) % 16 == 0 and max(offsets) + 16 <= alloc, label
        frame_pointer = "mov rbp, rsp" in body
        assert all(m.group(2) == ("rbp" if frame_pointer else "rsp") for m in map(_RESTORE.match, body) if m)
        # the canonical epilogue: lea rsp, [rbp + alloc] or add rsp, alloc, the pops, ret
        tail = [f"pop {r}" for r in reversed(pushes)] + ["ret"]
        if frame_pointer:
            tail.insert(0, f"lea rsp, [rbp + {alloc}]")
        elif alloc:
            tail.insert(0, f"add rsp, {alloc}")
        assert body[-len(tail):] == tail, label
        described = len(pushes) + bool(alloc) + len(offsets) + frame_pointer
        assert [ln for ln in body if ln.startswith(".uw")] == [f".uw{k}:" for k in range(described)], label
    assert some


def test_win64_unwind_codes_describe_the_prologue():
    """UNWIND_CODEs in prologue order, from GPR_NAMES (the x64 register
    encoding: rax=0 ... r15=15) and the frame's sizes; ALLOC_SMALL up to 128
    bytes, ALLOC_LARGE (size/8 in one extra slot) above."""
    assert GPR_NAMES.index("rbx") == 3 and GPR_NAMES.index("rbp") == RBP == 5 and GPR_NAMES.index("rsi") == 6
    assert [GPR_NAMES.index(f"r{k}") for k in range(8, 16)] == list(range(8, 16))
    small = Frame((), (), ("rbx", "rsi"), 0, (("xmm6", 0), ("xmm9", 16)), "movdqa", False,
                  unwind=True, alloc=40)
    assert [(c.label, c.op, c.info, c.extra) for c in small.unwind_codes] == [
        (0, 0, 3, ()), (1, 0, 6, ()), (2, 2, 4, ()), (3, 8, 6, (0,)), (4, 8, 9, (1,))]
    assert small.unwind_slots == 7 and small.frame_register == 0
    large = Frame((), (), ("rbp",), 0, tuple((f"xmm{6 + k}", 16 * k) for k in range(10)), "vmovdqa", True,
                  unwind=True, alloc=160, frame_pointer=True, spill_bytes=64)
    codes = large.unwind_codes
    assert (codes[1].op, codes[1].info, codes[1].extra) == (1, 0, (20,))
    assert (codes[-1].label, codes[-1].op, codes[-1].info) == (12, 3, 0)
    assert large.unwind_slots == 1 + 2 + 20 + 1 and large.frame_register == RBP
    leaf = Frame((("r10", 40),), (), (), 0, (), "movdqa", False, unwind=True)
    assert not leaf.has_frame and leaf.unwind_codes == ()


def test_win64_refuses_a_frame_of_4_kib_or_more():
    """A page or more of stack would need probes (__chkstk)."""
    p = load(REPO / "params/gf2m-233.toml")
    p = for_abi(p, "win64")
    kernel = next(fn.kernel for fn in STORE.bundle(p).functions if fn.symbol == "kg_gf2m233_ladder_step_avx2")
    frame_of(dataclasses.replace(kernel, spill_slots=100))
    with pytest.raises(ValueError, match="kg_gf2m233_ladder_step_avx2"):
        frame_of(dataclasses.replace(kernel, spill_slots=128))


def body_of_ladder(asm: str) -> list[str]:
    return _function(asm, "kg_gf2m233_ladder_step_avx2")


def test_layouts_plan_for_other_lane_widths():
    """The layout is width-neutral: 32-bit lanes swap at 32, 64 and 128 bits and
    interleave doublewords; plan() checks that the inverse undoes the forward."""
    for n, layers in ((256, 8), (1024, 10), (64, 5)):
        layout = plan(n, layers, make_target("avx2", 32))
        assert layout.lanes == 8 and sorted(layout.output_order) == list(range(n))
    # SSE plans the same IR vectors (16 lanes); legalisation keeps their halves in two xmm registers
    sse, avx2 = plan(256, 7, make_target("sse", 16)), plan(256, 7, make_target("avx2", 16))
    assert sse.lanes == 16 and sse.output_order == avx2.output_order


def test_a_plain_install_runs_from_another_directory(tmp_path):
    """pip install (not editable) carries the templates, harness sources and
    shipped parameter sets; a shipped set is found by its name anywhere."""
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--target", str(site), str(REPO)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for part in ("templates/asm.j2", "csrc/runner.c", "params/kyber-3329.toml"):
        path = site / "kerngen" / part
        assert path.is_file() and not path.is_symlink(), part
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run([sys.executable, "-c", "import kerngen; print(kerngen.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert where.stdout.startswith(str(site)), where.stdout
    r = subprocess.run([sys.executable, "-m", "kerngen", "emit", "params/kyber-3329.toml", "--out", "kyber"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for f in ("kyber-3329.asm", "kyber-3329.h", "manifest.json"):
        assert (tmp_path / "kyber" / f).read_text() == (REPO / "generated/kyber-3329" / f).read_text()
    if shutil.which("nasm") and shutil.which("gcc"):
        r = subprocess.run([sys.executable, "-m", "kerngen", "test", "kyber-3329"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")


@needs_nasm
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf")
@pytest.mark.parametrize("name", ["kyber-3329", "gf2m-233"])
def test_elf_bundles_keep_cet_in_a_program_built_with_cf_protection(name, tmp_path):
    """Every exported entry starts with endbr64 and the object is marked IBT and
    SHSTK: linking it into C code built with -fcf-protection=full keeps both,
    and ld's cet-report=error (which names any input without them) accepts it.
    The link is a shared object without start files because Debian's own crt
    objects carry no CET marking; the same bundle with its note removed fails."""
    bundle = REPO / "generated" / name
    manifest = json.loads((bundle / "manifest.json").read_text())
    asm = (bundle / f"{name}.asm").read_text()
    for f in manifest["functions"]:
        entry = asm.split(f"\n{f['symbol']}:\n", 1)[1]
        assert entry.lstrip().startswith("endbr64"), f["symbol"]
    unmarked = asm[:asm.index("section .note.gnu.property")] + asm[asm.index("section .note.GNU-stack"):]
    first = manifest["functions"][0]
    (tmp_path / "c.c").write_text(f"void {first['symbol']}(void);\nvoid call(void) {{ {first['symbol']}(); }}\n")
    results = {}
    for label, text in (("marked", asm), ("unmarked", unmarked)):
        src = tmp_path / f"{label}.asm"
        src.write_text(text)
        subprocess.run(["nasm", "-f", "elf64", str(src), "-o", str(tmp_path / f"{label}.o")], check=True)
        so = tmp_path / f"{label}.so"
        r = subprocess.run(["gcc", "-fcf-protection=full", "-fPIC", "-shared", "-nostdlib", "-Wl,-z,cet-report=error",
                            str(tmp_path / "c.c"), str(tmp_path / f"{label}.o"), "-o", str(so)],
                           capture_output=True, text=True)
        results[label] = r
    assert results["marked"].returncode == 0, results["marked"].stderr
    notes = subprocess.run(["readelf", "-n", str(tmp_path / "marked.so")], capture_output=True, text=True).stdout
    assert "x86 feature: IBT, SHSTK" in notes
    assert results["unmarked"].returncode != 0 and "missing IBT and SHSTK properties" in results["unmarked"].stderr
