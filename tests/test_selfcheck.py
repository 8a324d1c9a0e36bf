"""`kerngen selfcheck`: the instruction table's rows run on this CPU agree
with their semantics, and a row whose semantics are altered fails with a
witness; forms the CPU cannot run are skipped by name, never passed."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from kerngen.harness.cpu import cpu_flags
from kerngen.harness.selfcheck import forms, selfcheck, shipped_immediates, why_not_modelled
from kerngen.machine.isa import cpuinfo_name
from kerngen.machine.ops import (CMPGT_MASK, MULHRS, SRL, TABLE, Arith, Blocks, InstructionTable, _affine_bytes,
                                 _carryless, spec)

from conftest import REPO

GENERATED = REPO / "generated"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kg-selfcheck")  # one assembly of the table, shared by the mutants


def _replaced(name: str, **fields) -> InstructionTable:
    ops = dict(TABLE.ops)
    ops[name] = dataclasses.replace(ops[name], **fields)
    return InstructionTable(ops)


def _runnable(op, form) -> bool:
    return why_not_modelled(op) is None and all(cpuinfo_name(e) in cpu_flags() for e in form.extensions)


def test_every_runnable_form_passes_on_this_cpu(kerngen_cli) -> None:
    res = kerngen_cli("selfcheck", "--kernels", GENERATED)
    assert res.returncode == 0, res.stdout
    last = res.stdout.strip().splitlines()[-1]
    counts = re.fullmatch(r"(\d+) passed, (\d+) failed, (\d+) skipped", last)
    assert counts is not None, last
    runnable = sum(_runnable(op, form) for op, form, _ in forms(TABLE))
    assert int(counts[1]) == runnable > 0 and int(counts[2]) == 0


def _modulo_shift() -> Arith:
    """A logical right shift whose count is taken modulo the lane width (as C's shifts on x86 would)."""
    return Arith(lambda s, w: SRL.value((s[0], s[1] % w), w), SRL.smt)


@pytest.mark.parametrize("name,fields,imm", [
    ("vpmulhw", dict(arith=MULHRS), False),  # rounding where the CPU truncates
    ("vpsrlq", dict(arith=_modulo_shift()), True),  # a count at or above 64 gives zero, not a rotation of counts
    ("vpunpcklqdq", dict(move=spec("vpunpckhqdq").move), False),  # the high halves where the low ones go
    ("vpcmpuq_k", dict(arith=CMPGT_MASK), False),  # a signed comparison into the opmask where it is unsigned
    # the words of a carry-less product chosen by the other source's immediate bit
    ("vpclmulqdq", dict(blocks=Blocks(128, 64, lambda s, imm: _carryless(s, imm >> 4 & 1 | (imm & 1) << 4))), True),
    # the bit matrix's rows read in the opposite order
    ("vgf2p8affineqb", dict(blocks=Blocks(64, 8, lambda s, imm: _affine_bytes((s[0], s[1][..., ::-1]), imm))), True),
])
def test_a_wrong_row_fails_with_a_witness(workdir: Path, name: str, fields: dict, imm: bool) -> None:
    if not all(cpuinfo_name(e) in cpu_flags() for e in spec(name).forms[0].extensions):
        pytest.skip(f"this CPU cannot run {name}")
    report = selfcheck(workdir, cpu_flags(), _replaced(name, **fields))
    # the rows whose semantics read the replaced one (a widening product's high half) may fail with it
    mine = [entry for entry in report.failed if entry.startswith(f"{name} (")]
    assert mine and all("CPU 0x" in entry and "model 0x" in entry for entry in mine), report.failed
    assert all(("imm=" in entry) == imm for entry in mine)
    assert not any(entry.startswith(f"{name} (") for entry in report.passed)


def test_forms_this_cpu_lacks_are_skipped_by_name(workdir: Path) -> None:
    lacking = cpu_flags() - {"avx512f"}
    report = selfcheck(workdir, lacking, _replaced("vpaddq_evex", arith=spec("vpsubq").arith))
    evex = [entry for entry in report.skipped if "EVEX" in entry]
    assert evex and all("AVX512F" in entry for entry in evex)
    assert not any("EVEX" in entry for entry in report.passed + report.failed)


def test_shipped_immediates_are_read_from_the_kernels() -> None:
    found = shipped_immediates(GENERATED / "kyber-3329")
    assert 0xAA in found["vpblendw"] and found["vperm2i128"] and max(found["vpsraw"]) < 16
    assert shipped_immediates(None) == {}


def test_help_says_what_is_checked(kerngen_cli) -> None:
    res = kerngen_cli("selfcheck", "--help")
    assert res.returncode == 0 and "skipped" in res.stdout and "--kernels" in res.stdout
