"""AVX-512 NTT kernels beside their AVX2 twins: 512-bit vectors of 16- and
32-bit lanes built, verified and checked against SymPy on this CPU, and the
dispatch unit testing exactly the extensions they use and the zmm state."""

from __future__ import annotations

import re

import pytest

from kerngen.commands.test import test_bundle as run_kerngen_bundle
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import ParamError
from kerngen.families import from_mapping
from kerngen.families.ntt.design import design
from kerngen.harness.cpu import cpu_flags

from conftest import STORE

# 16-bit Montgomery (ML-KEM's n and q) and 32-bit Shoup (ML-DSA's); "standard" order, which every ISA's
# layout leaves alike (the fastest order is each width's own)
SETS = {
    "kyber": {"n": 256, "q": 3329, "width": 16},
    "dilithium": {"n": 256, "q": 8380417, "width": 32},
}


def _params(name: str):
    return from_mapping({"name": f"{name}512", "family": "ntt", **SETS[name], "isa": ["avx512", "avx2"],
                         "order": "standard"}, "test_avx512")


def _body(text: str, symbol: str) -> str:
    """A function's lines in a bundle's assembly, from its label to its `ret`."""
    body = text[text.index(f"{symbol}:"):]
    return body[:body.index("\n    ret")]


def _passes_every_check(files: dict[str, str], name: str, tmp_path) -> None:
    """The rendered bundle written out passes `kerngen test`, both ISAs' kernels run (or modelled)."""
    write(files, tmp_path / name)
    outcome = run_kerngen_bundle(tmp_path / name, 3, lambda s: None, tmp_path, reemit=False)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 2 * 20  # both ISAs' kernels ran


@pytest.mark.parametrize("name", SETS)
def test_avx512_kernels_use_zmm_and_vzeroupper(name):
    bundle = STORE.bundle(_params(name))
    kernels = [f for f in bundle.functions if f.isa == "avx512"]
    assert {f.kind for f in kernels} == {f.kind for f in bundle.functions if f.isa == "avx2"}
    text = render(bundle, "test")[f"{bundle.name}.asm"]
    for f in kernels:
        body = _body(text, f.symbol)
        assert "zmm" in body and "vzeroupper" in body, f.symbol
        # the extensions of the forms chosen, no more: byte and word lanes need AVX512BW, zmm alone no VL
        assert "avx512f" in f.cpu and "avx512vl" not in f.cpu
        assert ("avx512bw" in f.cpu) == (SETS[name]["width"] == 16) or f.kind != "ntt_forward", f.symbol


def test_the_dispatch_unit_checks_the_avx512_bits_and_the_zmm_state():
    files = render(STORE.bundle(_params("kyber")), "test")
    unit = files["kyber512_dispatch.c"]
    avx512 = unit[unit.index("case 0:"):unit.index("case 1:")]
    assert "avx512:" in avx512 and "OS saves zmm and opmask state" in avx512
    assert "leaf_7[1] >> 16 & 1" in avx512 and "leaf_7[1] >> 30 & 1" in avx512  # AVX512F, AVX512BW
    assert "_os_saves(0xe6, xcr0)" in avx512 and 'sysctlbyname("hw.optional.avx512f"' in unit
    avx2 = unit[unit.index("case 1:"):unit.index("default:")]
    assert "(xcr0 & 0x6) == 0x6" in avx2 and "os_saves" not in avx2


@pytest.mark.parametrize("name", SETS)
def test_avx512_kernels_pass_against_sympy_on_this_cpu(name, tmp_path):
    p = _params(name)
    lacks = sorted({e for f in STORE.bundle(p).functions if f.isa == "avx512" for e in f.cpu} - cpu_flags())
    if lacks:
        pytest.skip(f"this CPU lacks {', '.join(lacks)}: runs on the model once `kerngen test` has it")
    _passes_every_check(render(STORE.bundles(p), "test"), p.name, tmp_path)


# 256-bit EVEX (AVX-512VL): AVX2's vector width, so AVX2's fastest order, with 32 registers, opmasks and IFMA
VL_SETS = {**SETS, "ifma": {"n": 64, "q": 1125899906826241, "width": 64}}


def _vl_params(name: str):
    return from_mapping({"name": f"{name}vl", "family": "ntt", **VL_SETS[name], "isa": ["avx512vl", "avx2"]},
                        "test_avx512")


@pytest.mark.parametrize("name", VL_SETS)
def test_avx512vl_kernels_are_evex_on_ymm_and_pass_every_check(name, tmp_path):
    """ymm registers only, the NTTs reaching past ymm15 (EVEX alone encodes those) and, on 64-bit lanes,
    taking IFMA's products; AVX512VL required and checked first by the dispatch unit; every check passes (on
    this CPU, or on the model where it lacks them)."""
    p = _vl_params(name)
    bundle = STORE.bundle(p)
    files = render(STORE.bundles(p), "test")
    text = files[f"{p.name}.asm"]
    kernels = [f for f in bundle.functions if f.isa == "avx512vl"]
    assert {f.kind for f in kernels} == {f.kind for f in bundle.functions if f.isa == "avx2"}
    for f in kernels:
        body = _body(text, f.symbol)
        assert "ymm" in body and "zmm" not in body and {"avx512f", "avx512vl"} <= set(f.cpu), f.symbol
        if f.kind in ("ntt_forward", "ntt_inverse"):
            assert re.search(r"\bymm(1[6-9]|2\d|3[01])\b", body) and (name != "ifma") == ("avx512ifma" not in f.cpu)
    unit = files[f"{p.name}_dispatch.c"]
    assert "avx512vl:" in unit[unit.index("case 0:"):unit.index("case 1:")]
    _passes_every_check(files, p.name, tmp_path)


# the fastest order with ISAs of two vector widths: 32-bit lanes (Shoup below q) and 64-bit ones (IFMA on zmm)
MIXED = {
    32: {"n": 32, "q": 8380417, "width": 32},
    64: {"n": 16, "q": 1125899906826241, "width": 64},
}


def _fastest(bits: int, isas: list[str], **more):
    return from_mapping({"name": f"mixed{bits}", "family": "ntt", **MIXED[bits], "isa": isas, **more}, "test_avx512")


@pytest.mark.parametrize("bits", MIXED)
def test_isas_of_several_widths_share_the_narrower_ones_fastest_order(bits):
    p = _fastest(bits, ["avx512", "avx2"])
    alone = {isa: design(_fastest(bits, [isa])).layout.output_order for isa in ("avx512", "avx2")}
    assert alone["avx512"] != alone["avx2"]  # each width's own passes leave another order
    # one NTT domain, the AVX2 set's: adding AVX-512 kernels changes no user's layout
    assert [design(p, t).layout.output_order for t in p.targets] == [alone["avx2"]] * 2
    bundle = STORE.bundle(p)
    assert bundle.design.layout.output_order == alone["avx2"]
    assert {f.isa for f in bundle.functions} == {"avx512", "avx2"}
    unit = render(bundle, "test")[f"{p.name}_dispatch.c"]
    assert "avx512:" in unit[unit.index("case 0:"):unit.index("case 1:")]  # tried first
    assert "avx2:" in unit[unit.index("case 1:"):unit.index("default:")]


@pytest.mark.parametrize("bits", MIXED)
def test_order_isa_makes_the_named_isas_fastest_order_the_domain(bits):
    """`order_isa = "avx512"`: the zmm kernels leave their own order and the AVX2 ones reach it, so the
    AVX-512 kernels are those of a set built for AVX-512 alone."""
    p = _fastest(bits, ["avx512", "avx2"], order_isa="avx512")
    alone = _fastest(bits, ["avx512"])
    assert [design(p, t).layout.output_order for t in p.targets] == [design(alone).layout.output_order] * 2
    bundle, solo = STORE.bundle(p), STORE.bundle(alone)
    assert bundle.params_manifest["order_isa"] == "avx512" and "order_isa" not in solo.params_manifest
    text, solo_text = render(bundle, "test")[f"{p.name}.asm"], render(solo, "test")[f"{p.name}.asm"]
    def instructions(asm: str, symbol: str) -> list[str]:  # the contract comments hold the hull of both ISAs'
        return [line.split(";")[0].rstrip() for line in _body(asm, symbol).splitlines() if line.split(";")[0].strip()]
    for f in solo.functions:
        if f.kind.startswith("ntt_"):
            assert instructions(text, f.symbol) == instructions(solo_text, f.symbol)


@pytest.mark.parametrize(("more", "message"), [
    ({"order_isa": "sse"}, 'must name one of the ISAs built ("avx512", "avx2"), got "sse"'),
    ({"order_isa": 512}, "got 512"),
    ({"order_isa": "avx512", "order": "standard"}, 'order = "standard" fixes the NTT domain'),
])
def test_order_isa_names_a_built_isa_of_the_fastest_order(more, message):
    with pytest.raises(ParamError, match="order_isa") as refused:
        _fastest(32, ["avx512", "avx2"], **more)
    assert message in str(refused.value)


@pytest.mark.parametrize("order_isa", [None, "avx512"])
@pytest.mark.parametrize("bits", MIXED)
def test_isas_of_several_widths_in_the_fastest_order_pass_against_sympy(bits, order_isa, tmp_path):
    """Every ISA's kernels checked against the one layout of the manifest (on
    the machine model where this CPU lacks AVX-512), whichever ISA's order it is."""
    p = _fastest(bits, ["avx512", "avx2"], **({} if order_isa is None else {"order_isa": order_isa}))
    built = STORE.bundles(p)
    write(render(built, "test"), tmp_path / p.name)
    outcome = run_kerngen_bundle(tmp_path / p.name, 3, lambda s: None, tmp_path, reemit=False)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 2 * 20  # both ISAs' kernels ran


def test_blend_masks_are_loaded_once_while_the_opmask_holds_them():
    """vpblendmd by an immediate loads its opmask through r11 (`BLEND_SCRATCH`); the printer leaves the
    loads out while k1 holds that immediate from the last ones, and loads again after a loop's top."""
    from kerngen.emission.printer import body_text
    from kerngen.ir.instr import Imm, Instr, PhysReg
    from kerngen.machine.target import make_target

    z = [PhysReg("vec", k, 512) for k in range(3)]
    blend = [Instr("vpblendmd_imm", (z[0], z[1], z[2], Imm(mask))) for mask in (0xAAAA, 0x5555)]
    loop_top = Instr("repeat", (PhysReg("gpr", 0, 64), Imm(4), Imm(1)))
    lines = body_text((blend[0], blend[0], blend[1], blend[1], loop_top, blend[1]), make_target("avx512", 32))
    loads = [line.split()[-1] for line in lines if line.split()[0] == "mov" and "r11d" in line]
    assert loads == ["0xaaaa", "0x5555", "0x5555"]
    assert sum(line.split()[0] == "kmovd" for line in lines) == 3
    assert sum(line.split()[0] == "vpblendmd" for line in lines) == 5
