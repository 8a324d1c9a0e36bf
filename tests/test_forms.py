"""Encodings and instruction forms as data: selection of the forms an ISA
encodes, the required extensions read from the chosen form, the printer
spelling and tying by the encoding, legalisation strategies by name."""

from __future__ import annotations

import dataclasses

import pytest

from kerngen.emission.printer import body_text
from kerngen.ir.instr import Builder, Imm, Instr, PhysReg
from kerngen.machine.encoding import EVEX, LEGACY, VEX, Form
from kerngen.machine.isa import AVX2, AVX512, ISAS, SCALAR, SSE
from kerngen.machine.ops import MULLO, OPS, InstructionTable, Op, Slot
from kerngen.machine.registers import GENERAL, VECTOR, general_family, vector_family
from kerngen.machine.target import PLATFORMS, Target
from kerngen.passes import pipeline
from kerngen.passes.legalise import STRATEGIES

# an ISA whose vector instructions take EVEX forms, on AVX2's extensions (so AVX-512 forms need more)
EVEX_ISA = dataclasses.replace(AVX2, name="evex", vector_bits=512, encoding=EVEX,
                               families=(vector_family(32, EVEX.widths), general_family()))


def _evex(mnemonic: str, *extensions: str) -> tuple[Form, ...]:
    return (Form(EVEX, (512,), mnemonic, frozenset({"AVX512F", *extensions}), EVEX.registers),
            Form(EVEX, (128, 256), mnemonic, frozenset({"AVX512F", "AVX512VL", *extensions}), EVEX.registers))


def _with(*rows: Op) -> InstructionTable:
    return InstructionTable({**OPS, **{row.name: row for row in rows}})


def test_a_row_with_an_evex_form_is_a_candidate_only_where_the_isa_encodes_evex():
    # a second row doing 64-bit mullo beside the shipped one (EVEX forms, lowered by the scalar ISA)
    slots = (Slot("w", "v"), Slot("r", "v"), Slot("r", "vm"))
    vpmullq = Op("vpmullq", slots, "mul", _evex("vpmullq", "AVX512DQ"), elem=64, generic="mullo", arith=MULLO,
                 commutative=True)
    table = _with(vpmullq)
    assert table.doing("mullo", 64) == ("mullo64", "vpmullq")  # both do it; the ISA keeps what it can hold
    assert EVEX_ISA.candidates("mullo", 64, table) == ("mullo64", "vpmullq")
    assert AVX2.candidates("mullo", 64, table) == () and SSE.candidates("mullo", 64, table) == ()
    assert SCALAR.candidates("mullo", 64, table) == ("mullo64",)  # lowered onto general registers
    assert AVX512.candidates("mullo", 64) == ("mullo64",)
    assert vpmullq.form(EVEX, 512).mnemonic == "vpmullq" and vpmullq.form(EVEX, 512).extensions == {"AVX512F", "AVX512DQ"}
    assert vpmullq.form(EVEX, 256).extensions == {"AVX512F", "AVX512DQ", "AVX512VL"}
    with pytest.raises(KeyError, match="no VEX form"):
        vpmullq.form(VEX, 256)


def test_a_row_s_forms_are_chosen_by_encoding_and_width():
    widened = OPS["vpaddq"]
    assert AVX512.candidates("add", 64) == AVX2.candidates("add", 64) == ("vpaddq",)
    assert widened.form(EVEX, 512).extensions == {"AVX512F"}
    assert widened.form(EVEX, 128).extensions == {"AVX512F", "AVX512VL"}
    assert widened.form(VEX, 256).extensions == {"AVX2"} and widened.form(VEX, 128).extensions == {"AVX"}
    assert widened.form(LEGACY, 128).mnemonic == "paddq"
    with pytest.raises(KeyError):
        widened.form(VEX, 512)  # VEX encodes no zmm
    # vblendvpd has no EVEX form: an EVEX ISA cannot select on signs this way
    assert AVX2.has("select_negative", 64) and not EVEX_ISA.has("select_negative", 64)
    assert not SSE.has("select_negative", 64)  # nor legacy: blendvpd reads its selector from xmm0 alone


def _required(isa, body: list[Instr]) -> frozenset[str]:
    u = pipeline.Unit("k", (), Target(isa, 64, PLATFORMS["sysv"]), Builder(256), body, False, None)
    pipeline._required_isa(u)
    return u.extensions


def test_the_required_extensions_are_those_of_the_chosen_form():
    def clmul(bits):
        x = PhysReg("vec", 1, bits)
        return [Instr("vpclmulqdq", (x, x, x, Imm(0)))]

    assert _required(AVX2, clmul(128)) == {"AVX", "PCLMULQDQ"}
    assert _required(AVX2, clmul(256)) == {"AVX", "VPCLMULQDQ"}
    assert _required(SSE, clmul(128)) == {"PCLMULQDQ"}
    with pytest.raises(KeyError, match="no legacy form on 256-bit"):
        _required(SSE, clmul(256))
    z = PhysReg("vec", 20, 512)
    assert _required(AVX512, [Instr("vpaddq", (z, z, z))]) == {"AVX512F"}
    assert _required(AVX512, [Instr("vpaddw", (z, z, z))]) == {"AVX512F", "AVX512BW"}
    g = PhysReg("gpr", 3, 64)
    assert _required(SCALAR, [Instr("mulx64", (g, g, g))]) == {"BMI2"}  # a general-register form, any ISA


def test_the_printer_spells_and_ties_by_the_encoding():
    lo, hi = PhysReg("vec", 2, 256), PhysReg("vec", 9, 256)
    add = Instr("vpaddw", (lo, lo, hi))

    def text(isa, ins):
        return body_text((ins,), Target(isa, 16, PLATFORMS["sysv"]))

    assert text(AVX2, add) == ["vpaddw       ymm2, ymm9, ymm2"]  # VEX's two-byte prefix wants the low r/m
    x2, x9 = PhysReg("vec", 2, 128), PhysReg("vec", 9, 128)
    assert text(SSE, Instr("vpaddw", (x2, x2, x9))) == ["paddw        xmm2, xmm9"]  # two operands: tied
    assert text(AVX512, add) == ["vpaddw       ymm2, ymm2, ymm9"]  # EVEX: one prefix length, no swap


def test_every_isa_names_a_legalisation_strategy_and_an_encoding_of_its_width():
    for isa in ISAS.values():
        assert isa.legalisation in STRATEGIES, isa.name
        on_general = isa.register_use.lanes == GENERAL
        assert on_general or isa.vector_bits in isa.encoding.widths, isa.name
        # lanes live on general registers exactly where they are legalised onto them, and the ISA then has
        # no vector registers to allocate
        assert on_general == (isa.legalisation == "onto_gprs") == (not isa.has_family(VECTOR)), isa.name


def test_an_isa_read_back_from_the_store_selects_as_before():
    """Bundles are pickled into the store: an ISA read back (its encoding a
    copy, not the module's row) must find the same forms."""
    import pickle

    for isa in ISAS.values():
        copy = pickle.loads(pickle.dumps(isa))
        assert copy.encoding is not isa.encoding
        for generic, bits in (("minu", 16), ("select_negative", 64), ("add", 32), ("mullo", 64)):
            assert copy.candidates(generic, bits) == isa.candidates(generic, bits), (isa.name, generic, bits)
