"""Primes q = 2^64 - 2^b + 1 on 64-bit lanes (Goldilocks): the special form's
kernels pass `kerngen test`, its templates' proofs refuse a wrong constant, and
a q above 2^62 of no such form is refused with the shapes that are taken."""

import dataclasses

import pytest

from kerngen.passes import special64

GOLDILOCKS = (1 << 64) - (1 << 32) + 1
Q40 = (1 << 64) - (1 << 40) + 1


def _params(tmp_path, name: str, q: int, isas: str = '["avx2", "scalar"]') -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nfamily = "ntt"\nn = 16\nq = {q}\nwidth = 64\nisa = {isas}\n')
    return path


@pytest.mark.parametrize("q", [GOLDILOCKS, Q40], ids=["goldilocks", "2^64-2^40+1"])
def test_special_form_bundles_pass_kerngen_test(tmp_path, kerngen_cli, q):
    r = kerngen_cli("test", _params(tmp_path, "special", q))
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" passed, 0 failed") and int(last.split()[0]) > 0
    # forward, base multiplication, inverse and freeze on each ISA: no Shoup kernels, whose 2q leaves the lane
    assert "of 8 functions" in r.stderr


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
