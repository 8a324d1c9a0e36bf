"""Primes q = 2^64 - 2^b + 1 on 64-bit lanes (Goldilocks): the special form's
kernels pass `kerngen test` on every ISA (AVX-512 on this CPU, or on the
machine model where it lacks AVX-512), its templates' proofs refuse a wrong
constant, and a q above 2^62 of no such form is refused with the shapes that
are taken."""

import dataclasses

import pytest

from kerngen.harness.cpu import MASK_VARIABLE, cpu_flags
from kerngen.machine.isa import ISAS
from kerngen.passes import special64

from conftest import REPO

GOLDILOCKS = (1 << 64) - (1 << 32) + 1
Q40 = (1 << 64) - (1 << 40) + 1


def _params(tmp_path, name: str, q: int, isas: str = '["avx512", "avx2", "scalar"]') -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nfamily = "ntt"\nn = 16\nq = {q}\nwidth = 64\nisa = {isas}\n')
    return path


# the second set as on a CPU without AVX-512: its AVX-512 kernels run on the machine model
@pytest.mark.parametrize("q,avx512_cpu", [(GOLDILOCKS, True), (Q40, False)], ids=["goldilocks", "2^64-2^40+1"])
def test_special_form_bundles_pass_kerngen_test(tmp_path, kerngen_cli, monkeypatch, q, avx512_cpu):
    if not avx512_cpu:
        monkeypatch.setenv(MASK_VARIABLE, "-avx512f")
    r = kerngen_cli("test", _params(tmp_path, "special", q))
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" passed, 0 failed") and int(last.split()[0]) > 0
    # forward, base multiplication, inverse and freeze on each ISA: no Shoup kernels, whose 2q leaves the lane
    assert "emitted and verified 12 kernels" in r.stderr
    modelled = "special: running avx512 on the machine model" in r.stderr
    assert modelled == (not avx512_cpu or "avx512f" not in cpu_flags())


def test_avx512_templates_correct_carries_under_opmasks():
    """On AVX-512 a carry or borrow is an opmask and its correction one merge-masked addition: no lane
    mask is and-ed with a constant, and the templates are shorter than AVX2's."""
    masked, lanes = (special64.templates(GOLDILOCKS, special64.Lowering.of(ISAS[isa])) for isa in ("avx512", "avx2"))
    for kind in special64.KINDS:
        ops = [step[0] for step in masked[kind].steps]
        assert "add_merge" in ops and "cmpgtu_mask" in ops and not {"and", "cmpgt", "xor"} & set(ops), ops
        assert len(masked[kind].steps) < len(lanes[kind].steps)
        special64.prove(masked[kind])


def test_a_correction_under_an_opmask_adds_a_held_register():
    """The merge-masked addition reads no memory (its time would depend on the mask): its constant is
    loaded once at the kernel's start and every correction reads the register (`promote_constants`)."""
    name = "goldilocks-18446744069414584321"
    text = (REPO / "generated" / name / f"{name}.asm").read_text()
    forward = text.split("kg_goldilocks18446744069414584321_ntt_forward_avx512:\n")[1].split("\n.end:")[0]
    loads = [line for line in forward.splitlines() if "[rel pq_18446744073709551615]" in line]
    assert len(loads) == 1 and "held in a register" in loads[0]
    held = loads[0].split()[1].rstrip(",")
    corrections = [line for line in forward.splitlines() if line.strip().startswith("vpaddq") and "{k" in line]
    assert corrections and any(line.rstrip().endswith(held) for line in corrections)


def test_special_form_is_found_from_q():
    assert special64.special_form(GOLDILOCKS) == 32 and special64.special_form(Q40) == 40
    assert special64.special_form((1 << 64) - 59) is None  # the largest 64-bit prime: no such shape


@pytest.mark.parametrize("kind", special64.KINDS)
def test_templates_refuse_a_wrong_constant(kind):
    """Goldilocks's templates (e = 2^32 - 1) claimed for 2^64 - 2^40 + 1: not proven."""
    lowering = special64.Lowering(True, True)
    right = special64.templates(GOLDILOCKS, lowering)[kind]
    special64.prove(right)
    wrong = dataclasses.replace(right, q=Q40)
    with pytest.raises(special64.SpecialFormError, match="mod 18446742974197923841"):
        special64.prove(wrong)


def test_a_q_above_2_62_of_no_special_form_is_refused(tmp_path, kerngen_cli):
    q = (1 << 64) - 59
    r = kerngen_cli("emit", _params(tmp_path, "big", q), "--out", tmp_path / "out")
    assert r.returncode != 0
    assert "must be below 2^62" in r.stderr and "2^64 - 2^b + 1" in r.stderr and str(q) in r.stderr
