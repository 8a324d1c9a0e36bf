"""What a project adopting kerngen's bundles relies on, through the CLI: the
licence, clean refusals of bad input before any work (exit 2, one line,
nothing written), whole-bundle replacement, the header's NTT domain, testing
a copied bundle from its manifest, shipped names anywhere, per-function CPU
features and alignment, the bench table."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

from kerngen.commands.test import manifest_params
from kerngen.core.manifest import read_bundle
from kerngen.emission.files import exclusive
from kerngen.families import load

from conftest import REPO, kerngen

SPDX = "SPDX-License-Identifier: MIT OR Apache-2.0"
needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


def refused(r, *words: str) -> None:
    """Exit 2 with one error line naming what is wrong, and no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in errors[0], (w, errors[0])


def ntt_file(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- licence -----------------------------------------------------------------

def test_the_project_and_every_generated_file_carry_the_licence():
    assert "MIT OR Apache-2.0" in (REPO / "LICENSE").read_text()
    assert (REPO / "LICENSE-MIT").is_file() and "Apache License" in (REPO / "LICENSE-APACHE").read_text()
    for bundle in (REPO / "generated").iterdir():
        for f in bundle.iterdir():
            text = f.read_text()
            if f.suffix == ".json":
                assert json.loads(text)["license"] == "MIT OR Apache-2.0", f
            else:
                assert SPDX in "\n".join(text.splitlines()[:3]), f


# --- bad input, refused before any work ----------------------------------------

@pytest.mark.parametrize("out, words", [
    ("/dev/null", "exists and is not a directory"),
    ("/proc/kerngen-x", "cannot create files in /proc"),
    ("afile", "exists and is not a directory"),
    ("afile/sub", "afile is not a directory"),
])
def test_bad_output_paths_are_refused_before_building(tmp_path, out, words, kerngen_cli):
    (tmp_path / "afile").write_text("keep")
    r = kerngen_cli("emit", REPO / "params/tiny-257.toml", "--out", out, cwd=tmp_path)
    refused(r, "--out", words)
    assert "building" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "keep"


def test_an_unwritable_heatmap_is_refused_before_building(tmp_path, kerngen_cli):
    r = kerngen_cli("explore", "params/tiny-257.toml", "--png", "/proc/kerngen-x.png", "--batches", "1")
    refused(r, "--png", "/proc")
    assert "building" not in r.stderr


@pytest.mark.parametrize("batches", ["0", "-5", "many"])
def test_bench_batches_must_be_positive(batches, kerngen_cli):
    r = kerngen_cli("bench", "params/tiny-257.toml", "--batches", batches)
    refused(r, "--batches")


def test_encodings(tmp_path, kerngen_cli):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('name = "x"\nfamily = "ntt"\nn = 64\nq = 257\ndescription = "caf\xe9"\n'.encode("latin-1"))
    refused(kerngen_cli("emit", bad, "--out", tmp_path / "o"), "file", "not UTF-8")
    assert not (tmp_path / "o").exists()
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + (REPO / "params/tiny-257.toml").read_bytes())
    r = kerngen_cli("emit", bom, "--out", tmp_path / "b")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("n, q", [(256, 32257), (32, 29761)])
def test_q_beyond_what_the_lanes_hold_names_a_q_that_works(tmp_path, n, q, kerngen_cli):
    """The refusal names a smaller prime with the same roots of unity, and that one emits."""
    path = ntt_file(tmp_path, f'name = "x"\nfamily = "ntt"\nn = {n}\nq = {q}\n')
    r = kerngen_cli("emit", path, "--out", tmp_path / "o")
    refused(r, f"{path}: q:", "too large", "works here")
    assert not (tmp_path / "o").exists()
    named = re.search(r"q = (\d+) works here, the largest prime with 2\^(\d+) \| q - 1", r.stderr)
    best, roots = int(named.group(1)), 1 << int(named.group(2))
    assert best < q and sympy.isprime(best) and (best - 1) % roots == 0 == (q - 1) % roots, r.stderr
    r = kerngen_cli("emit", ntt_file(tmp_path, f'name = "x"\nfamily = "ntt"\nn = {n}\nq = {best}\n'), "--out",
                    tmp_path / "o")
    assert r.returncode == 0, r.stderr


def test_too_few_layers_names_the_layers_key(tmp_path, kerngen_cli):
    path = ntt_file(tmp_path, (REPO / "params/kyber-3329.toml").read_text() + "layers = 4\n")
    refused(kerngen_cli("emit", path, "--out", tmp_path / "o"), "layers: must be between 5 and 7",
            "base blocks have degree at most 8")


# --- emitting over a directory -------------------------------------------------

def test_a_bundle_directory_is_replaced_whole(tmp_path, kerngen_cli):
    out = tmp_path / "d"
    assert kerngen_cli("emit", "params/tiny-257.toml", "--out", out).returncode == 0
    held = sorted(p.name for p in out.iterdir())
    refused(kerngen_cli("emit", "params/kyber-3329.toml", "--out", out), "--out", "the bundle of 'tiny-257'", "--force")
    assert sorted(p.name for p in out.iterdir()) == held  # another set's bundle is not replaced without --force
    assert kerngen_cli("emit", "params/kyber-3329.toml", "--out", out, "--force").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["kyber-3329.asm", "kyber-3329.h", "kyber-3329_dispatch.c", "manifest.json", "README.md", "CMakeLists.txt",
         "meson.build", "Cargo.toml", "build.rs", "kyber-3329.rs"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_foreign_directory_needs_force_and_two_bundles_need_two_directories(tmp_path, kerngen_cli):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused(kerngen_cli("emit", "params/tiny-257.toml", "--out", foreign), "--out", "holds no kerngen bundle",
            "--force")
    assert (foreign / "notes.txt").read_text() == "mine"
    assert kerngen_cli("emit", "params/tiny-257.toml", "--out", foreign, "--force").returncode == 0
    assert not (foreign / "notes.txt").exists()
    twin = ntt_file(tmp_path, (REPO / "params/tiny-257.toml").read_text(), "twin.toml")
    refused(kerngen_cli("emit", "params/tiny-257.toml", twin, "--out", tmp_path / "both"), "--out",
            "both name the bundle")
    assert not (tmp_path / "both").exists()

def test_two_emits_racing_into_one_directory_leave_one_bundle_and_one_refusal(tmp_path):
    """Two sets emitted into one --out at once: one writes its bundle, the other is refused as the one that
    came second is (never both report success over one bundle). The race is made certain by holding the
    directory's lock until both have checked the empty directory and begun building."""
    sets = [REPO / "params/tiny-257.toml",
            ntt_file(tmp_path, (REPO / "params/tiny-257.toml").read_text().replace("tiny-257", "tiny-twin"),
                     "tiny-twin.toml")]
    out = tmp_path / "race" / "out"
    with exclusive([out]):
        runs = [subprocess.Popen([sys.executable, "-m", "kerngen", "emit", str(s), "--out", str(out)], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in sets]
        for run in runs:  # each past its checks of the (empty) directory
            assert any("building and verifying kernels" in line for line in iter(run.stderr.readline, ""))
    ended = [(run.wait(), run.stdout.read(), run.stderr.read()) for run in runs]
    codes = sorted(code for code, _, _ in ended)
    assert codes == [0, 2], ended
    (_, listed, _), (_, unlisted, complaint) = sorted(ended, key=lambda e: e[0])
    winner = json.loads((out / "manifest.json").read_text())["params"]["name"]
    assert sorted(listed.split()) == sorted(str(p) for p in out.iterdir()) and unlisted == ""
    refused(subprocess.CompletedProcess([], 2, unlisted, complaint), "--out", f"the bundle of {winner!r}", "--force")


def test_directories_follow_the_umask(tmp_path):
    r = subprocess.run(f"umask 022 && {sys.executable} -m kerngen emit params/tiny-257.toml --out {tmp_path / 'm'}",
                       shell=True, cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "m" / "manifest.json").stat().st_mode & 0o777 == 0o644


# --- the header's NTT domain, and freeze ---------------------------------------

@needs_tools
def test_the_header_carries_the_ntt_domain(tmp_path, kerngen_cli):
    out = tmp_path / "k"
    assert kerngen_cli("emit", "params/kyber-3329.toml", "--out", out).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    layout = next(f for f in manifest["functions"] if f["kind"] == "ntt_forward")["output"]["layout"]
    (tmp_path / "use.c").write_text("""
#include <stdio.h>
#include "kyber-3329.h"
int main(void) {
    printf("%d %d %d\\n", KG_KYBER3329_N, KG_KYBER3329_NTT_D, KG_KYBER3329_NTT_BLOCKS);
    for (int j = 0; j < KG_KYBER3329_NTT_BLOCKS; j++) {
        printf("%d", kg_kyber3329_ntt_zetas[j]);
        for (int k = 0; k < KG_KYBER3329_NTT_D; k++) printf(" %d", kg_kyber3329_ntt_positions[j][k]);
        printf("\\n");
    }
    return 0;
}
""")
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(out), "-o", str(tmp_path / "use"),
                        str(tmp_path / "use.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True).stdout.splitlines()
    assert lines[0] == f"256 {layout['d']} {len(layout['blocks'])}"
    assert lines[1:] == [" ".join(map(str, [b["zeta"], *b["positions"]])) for b in layout["blocks"]]
    freeze = next(f for f in manifest["functions"] if f["kind"] == "freeze")
    assert freeze["input"]["bound"] == [-32768, 32767] and freeze["output"]["bound"] == [0, 3328]


# --- testing a vendored bundle --------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "params").glob("*.toml")))
def test_every_shipped_bundle_is_its_manifests_fresh_emission(name):
    """What `kerngen test DIR` checks first, that the manifest's parameters
    (every key that shapes the kernels among them) emit exactly the committed
    files: they are the parameters of params/NAME.toml and the manifest's
    command the one test_generated_bundle_is_current renders with, which
    emits the committed files (emission depends on nothing else)."""
    directory, manifest = read_bundle(REPO / "generated" / name)
    recorded, shipped = manifest_params(directory, manifest), load(REPO / f"params/{name}.toml")
    assert dataclasses.replace(recorded, source="") == dataclasses.replace(shipped, source="")
    assert manifest.command == f"kerngen emit params/{name}.toml"


@needs_tools
def test_a_copied_bundle_is_tested_from_its_manifest(tmp_path):
    vendored = tmp_path / "third_party" / "kerngen"
    shutil.copytree(REPO / "generated" / "kyber-3329", vendored)
    r = kerngen("test", vendored, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
    assert int(r.stdout.split()[-4]) > 40
    r = kerngen("test", vendored / "manifest.json", cwd=tmp_path)
    assert r.returncode == 0
    with (vendored / "kyber-3329.asm").open("a") as f:
        f.write("; edited\n")
    refused(kerngen("test", vendored, cwd=tmp_path), "kyber-3329.asm", "does not match its manifest")
    refused(kerngen("test", vendored, "--policy", "eager", cwd=tmp_path), "--policy", "emitted bundle")


@needs_tools
def test_a_large_ntt_is_tested_with_progress():
    """n = 4096: the shipped set of that degree through every check (its kernels come from the run's store,
    built once; test_ntt's SymPy test of the shipped sets leaves this one to here)."""
    r = kerngen("test", "he-1125899906826241")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "running" in r.stderr and "checks" in r.stderr and " 0 failed" in r.stdout


# --- names, paths, commands -----------------------------------------------------

def test_shipped_names_work_anywhere_and_list_prints_usable_paths(tmp_path):
    r = kerngen("emit", "kyber-3329", "--out", "k", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k" / "kyber-3329.asm").read_text() == (REPO / "generated/kyber-3329/kyber-3329.asm").read_text()
    r = kerngen("list", cwd=tmp_path)
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()][:len(list(REPO.glob("params/*.toml")))]
    assert sorted(names) == sorted(p.stem for p in REPO.glob("params/*.toml"))
    assert "files:" not in r.stdout  # away from the repository only names are shown, and they work from here
    assert kerngen("emit", names[-1], "--out", "n", cwd=tmp_path).returncode == 0
    r = kerngen("list")
    files = next(line for line in r.stdout.splitlines() if line.startswith("files: "))
    pattern = files.split()[1].rstrip(";")
    assert all((REPO / pattern.replace("NAME", name)).is_file() for name in names)


def test_the_reproduce_command_keeps_the_directory(tmp_path, kerngen_cli):
    src = tmp_path / "sets" / "g.toml"
    src.parent.mkdir()
    src.write_text((REPO / "params/gf2m-233.toml").read_text())
    r = kerngen_cli("emit", src, "--isa", "sse", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    asm = (tmp_path / "o" / "gf2m-233.asm").read_text()
    assert f"; Regenerate with: kerngen emit {src} --isa sse" in asm


# --- alignment, CPU features, bench -----------------------------------------------

def test_contracts_state_alignment_and_cpu_features():
    manifest = json.loads((REPO / "generated/kyber-3329/manifest.json").read_text())
    header = (REPO / "generated/kyber-3329/kyber-3329.h").read_text()
    cpu = {"avx512": {"avx512f", "avx512bw"}, "avx2": {"avx", "avx2"}, "sse": {"sse2"}}
    vector_bytes = {"avx512": 64, "avx2": 32, "sse": 16}
    assert {f["isa"] for f in manifest["functions"]} == set(cpu)
    for f in manifest["functions"]:
        assert cpu[f["isa"]] <= set(f["cpu"]), f["symbol"]
        for a in f["args"]:  # unaligned vector moves: element alignment suffices (the harness places them so)
            assert a["align"] == 2 and a["preferred_align"] == vector_bytes[f["isa"]]
    assert header.count("cpu: AVX, AVX2 ") == sum(f["isa"] == "avx2" for f in manifest["functions"]) == 8  # with mulmod_shoup and muladd_shoup
    gf = json.loads((REPO / "generated/gf2m-233/manifest.json").read_text())
    by = {f["symbol"]: f["cpu"] for f in gf["functions"]}
    assert by["kg_gf2m233_mul_avx2"] == ["avx", "pclmulqdq"] and by["kg_gf2m233_reduce_gpr_avx2"] == []
    assert "vpclmulqdq" in by["kg_gf2m233_ladder_step2_avx2"]


@needs_tools
def test_bench_rows_are_named_by_symbol(kerngen_cli):
    r = kerngen_cli("bench", "params/tiny-257.toml", "--batches", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "tiny-257 (symbols kg_tiny257_KERNEL)" and lines[1].split()[0] == "kernel"
    kernels = [ln.split()[0] for ln in lines[2:lines.index("")]]
    manifest = json.loads((REPO / "generated/tiny-257/manifest.json").read_text())
    named = {f["symbol"].removeprefix("kg_tiny257_") for f in manifest["functions"]}
    assert kernels and len(set(kernels)) == len(kernels) and set(kernels) <= named  # each row one kernel
