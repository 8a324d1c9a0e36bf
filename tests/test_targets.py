"""Targets other than System V / ELF render from the same kernels through the
ABI and object-format rows, and the package works installed (not editable)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from kerngen.families import family_of, load
from kerngen.families.ntt.layout import plan
from kerngen.target.render import render
from kerngen.target.target import make_target

from conftest import REPO

needs_nasm = pytest.mark.skipif(shutil.which("nasm") is None, reason="nasm is needed to assemble")


def _render_for(name: str, platform: str) -> str:
    p = load(REPO / f"params/{name}.toml")
    p = dataclasses.replace(p, target=make_target(p.isa, p.target.lane_bits, platform))
    return render(family_of(p).build(p), "test")[f"{name}.asm"]


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


def _saved_and_used(body: list[str]) -> tuple[set[str], set[str], set[str]]:
    """xmm6-15 the body writes or reads, those its prologue saves, those its epilogue restores."""
    callee_saved = {f"xmm{r}" for r in range(6, 16)} | {f"ymm{r}" for r in range(6, 16)}
    used = {op.strip().replace("ymm", "xmm") for ln in body if not ln.startswith("vmovdqa [rsp +")
            for op in ln.split(None, 1)[-1].split(",") if op.strip() in callee_saved}
    saved = {ln.split(", ")[1] for ln in body if ln.startswith("vmovdqa [rsp +")}
    restored = {ln.split()[1].rstrip(",") for ln in body if ln.startswith("vmovdqa xmm") and ln.endswith("]")
                and "[rsp +" in ln}
    return used, saved, restored


@needs_nasm
def test_win64_saves_the_vector_registers_it_uses_and_loads_stack_arguments():
    asm = _render_for("gf2m-233", "win64")
    assert body_of_ladder(asm)[0] == "mov r10, [rsp + 40]"  # the fifth argument, above the shadow space
    labels = [ln[:-1] for ln in asm.splitlines() if ln.startswith("kg_") and ln.endswith(":")]
    some = 0
    for label in labels:
        used, saved, restored = _saved_and_used(_function(asm, label))
        assert saved == used and restored == used, label
        some += bool(used)
    assert some


def body_of_ladder(asm: str) -> list[str]:
    return _function(asm, "kg_gf2m233_ladder_step_avx2")


def test_layouts_plan_for_other_lane_widths():
    """The layout is width-neutral: 32-bit lanes swap at 32, 64 and 128 bits and
    interleave doublewords; plan() checks that the inverse undoes the forward."""
    for n, layers in ((256, 8), (1024, 10), (64, 5)):
        layout = plan(n, layers, make_target("avx2", 32))
        assert layout.lanes == 8 and sorted(layout.output_order) == list(range(n))
    assert plan(256, 7, make_target("sse", 16)).lanes == 8


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
