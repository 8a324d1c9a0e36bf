"""The proofs behind `kerngen test`: lemmas apply only to the values their
idiom made, Montgomery products are checked, maps are proven linear, and a
bundle edited after emission is found."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from kerngen.core.params import Overrides
from kerngen.errors import VerifyError
from kerngen.families import load
from kerngen.families.ntt.build import build
from kerngen.ir.instr import Imm, Instr
from kerngen.machine.ops import spec
from kerngen.passes.verify import verify_kernel

from conftest import REPO

AVX2_SSE = Overrides(isa="avx2,sse")  # the ISAs whose kernels these tests read
needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")


def _reduce_kernel():
    bundle = build(load(REPO / "params/kyber-3329.toml", AVX2_SSE))
    return next(f for f in bundle.functions if f.symbol == "kg_kyber3329_reduce_barrett_avx2").kernel


def test_a_lemma_applies_only_to_the_values_its_idiom_made():
    """A Barrett reduction with an outside write into a register it reads before
    its last instruction is refused, however harmless the write looks to
    interval arithmetic (here a halving; the hand-built mutant of the issue
    doubled the register: real outputs then reach 10 times the lemma's bound
    and are not congruent, and that one also overflows); the kernel as built is not."""
    k = _reduce_kernel()
    assert verify_kernel(k, {0: (-32768, 32767)}, 3329).hull(0) == (-1664, 1664)
    end = next(i for i, ins in enumerate(k.body) if ins.idiom is not None and ins.idiom.role == "end")
    for reg in k.body[end].operands[1:]:
        for outside in (Instr(spec("vpsraw").name, (reg, reg, Imm(1))), Instr(spec("vpaddw").name, (reg, reg, reg))):
            mutant = dataclasses.replace(k, body=k.body[:end] + (outside,) + k.body[end:])
            with pytest.raises(VerifyError, match="reads a value from outside itself|can overflow"):
                verify_kernel(mutant, {0: (-32768, 32767)}, 3329)
        halved = Instr(spec("vpsraw").name, (reg, reg, Imm(1)))
        mutant = dataclasses.replace(k, body=k.body[:end] + (halved,) + k.body[end:])
        with pytest.raises(VerifyError, match="reads a value from outside itself"):
            verify_kernel(mutant, {0: (-32768, 32767)}, 3329)


def test_montgomery_products_are_checked_and_maps_proven():
    bundle = build(load(REPO / "params/kyber-3329.toml", AVX2_SSE))
    fwd = bundle.function("ntt_forward")
    proof = verify_kernel(fwd.kernel, {0: (-3328, 3328)}, 3329)
    assert proof.products_checked == 7 * 8 and proof.forms[0] == frozenset({(0,)})
    assert fwd.manifest()["proof"] == {"field": "q", "monomials": [["a"]], "locality": None}
    assert bundle.function("basemul").manifest()["proof"]["locality"] == "block"
    # a w' that is not w*q^-1 makes the product non-linear mod q: refused
    table = next(t for t in fwd.kernel.tables if t.label.endswith("forward_twiddles_avx2"))
    values = list(table.values)
    values[0] += 1
    broken = dataclasses.replace(fwd.kernel, tables=tuple(dataclasses.replace(t, values=tuple(values))
                                                           if t is table else t for t in fwd.kernel.tables))
    with pytest.raises(VerifyError, match="Montgomery product that pairs a constant w with a w'"):
        verify_kernel(broken, {0: (-3328, 3328)}, 3329)


def test_32_bit_montgomery_products_are_checked_lane_by_lane():
    """Dilithium's NTT: even/odd widening products, every lane followed back to
    hi(x*w) - hi(lo(x*w')*q); a wrong w, w' or odd-lane w, or odd lanes blended
    from the wrong product, is refused."""
    bundle = build(dataclasses.replace(load(REPO / "params/dilithium-8380417.toml", Overrides(isa="avx2")),
                                       mul="montgomery"))
    fwd = bundle.function("ntt_forward")
    q, top = 8380417, 8380416
    proof = verify_kernel(fwd.kernel, {0: (-top, top)}, q)
    assert proof.products_checked == 8 * 16 and proof.forms[0] == frozenset({(0,)})
    assert bundle.function("basemul").manifest()["proof"]["locality"] == "block"
    table = next(t for t in fwd.kernel.tables if t.label.endswith("forward_twiddles_avx2"))
    rows = len(table.values) // 8
    for row in (0, 1, 2, rows - 1):
        values = list(table.values)
        values[8 * row + 2] += 1  # an even lane: every row is read there
        broken = dataclasses.replace(fwd.kernel, tables=tuple(dataclasses.replace(t, values=tuple(values))
                                                               if t is table else t for t in fwd.kernel.tables))
        with pytest.raises(VerifyError, match="Montgomery product that pairs a constant w with a w'"):
            verify_kernel(broken, {0: (-top, top)}, q)
    blend = next(i for i, ins in enumerate(fwd.kernel.body) if ins.op == "vpblendd")
    ins = fwd.kernel.body[blend]
    swapped = dataclasses.replace(ins, operands=ins.operands[:3] + (Imm(0x55),))
    broken = dataclasses.replace(fwd.kernel, body=fwd.kernel.body[:blend] + (swapped,) + fwd.kernel.body[blend + 1:])
    with pytest.raises(VerifyError, match="not hi\\(x\\*w\\)"):
        verify_kernel(broken, {0: (-top, top)}, q)


@needs_tools
def test_an_edited_bundle_is_found_even_with_its_hash_updated(tmp_path):
    """One twiddle lane changed (w only: basis vectors alone cannot see it) and
    the manifest's sha256 updated: the comparison with a fresh emission finds it."""
    out = tmp_path / "k"
    shutil.copytree(REPO / "generated/kyber-3329", out)
    asm = (out / "kyber-3329.asm").read_text()
    at = asm.index("dw ", asm.index("kg_kyber3329_ntt_forward_twiddles_avx2:")) + 3
    end = asm.index(",", at)
    asm = asm[:at] + str(int(asm[at:end]) + 1) + asm[end:]
    (out / "kyber-3329.asm").write_text(asm)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["kyber-3329.asm"] = hashlib.sha256(asm.encode()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    r = subprocess.run([sys.executable, "-m", "kerngen", "test", str(out)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "fresh emission" in r.stdout and "kyber-3329.asm" in r.stdout


@needs_tools
def test_basis_proofs_run_for_every_multilinear_kernel(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kerngen", "test", "kyber-3329", "gf2m-163"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    for bundle in ("kyber-3329", "gf2m-163"):
        manifest = json.loads((REPO / "generated" / bundle / "manifest.json").read_text())
        proven = [f for f in manifest["functions"] if f["proof"]["monomials"]]
        assert len(proven) >= 5
