"""The assembly reader (emission.reader): a bundle's .asm read back into the
kernels the machine model runs, the inverse of the printer and the frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kerngen.commands.on_model import driver
from kerngen.core.manifest import read_bundle
from kerngen.core.params import Overrides
from kerngen.emission.files import write
from kerngen.emission.frame import frame_of
from kerngen.emission.printer import body_text
from kerngen.emission.reader import read_object
from kerngen.emission.render import frame_lines, render
from kerngen.families import load
from kerngen.passes.interpret import compile_kernel

from conftest import REPO, STORE
from mutation import copied_with

SHIPPED = sorted(p.name for p in (REPO / "generated").iterdir() if (p / "manifest.json").is_file())


def _code(line: str) -> str:
    return " ".join(line.partition(";")[0].split())


def _round_trip(directory: Path) -> dict:
    """Every function of every object of the bundle read back (no error), its file's lines from its label to
    `.end` exactly: the frame its body needs (`frame_of`), the body as the printer prints the kernel read, `ret`.
    Returns the kernels read, by ABI."""
    directory, manifest = read_bundle(directory)
    read = {}
    in_asm = [fn for fn in manifest.functions if not driver(fn)]  # a planned transform's driver is its C unit's
    for obj in manifest.objects:
        reading = read_object(directory / obj.file, obj, in_asm)
        assert reading.errors == {}
        lines = (directory / obj.file).read_text().splitlines()
        for fn in in_asm:
            kernel = reading.kernels[fn.symbol]
            start = lines.index(f"{fn.symbols[obj.abi]}:") + 1
            written = lines[start:lines.index(".end:", start)]
            frame = frame_of(kernel)
            prologue = (["endbr64"] if kernel.target.fmt.cet else []) + frame_lines("prologue", frame)
            epilogue = frame_lines("epilogue", frame) + ["ret"]
            body = written[len(prologue):len(written) - len(epilogue)]
            assert [_code(x) for x in written[:len(prologue)] + written[len(written) - len(epilogue):]] == \
                [_code(x) for x in prologue + epilogue], fn.symbol
            assert body == ["    " + x for x in body_text(kernel.body, kernel.target)], fn.symbol
        read[obj.abi] = reading.kernels
    return read


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_function_reads_back_into_the_kernel_that_prints_it(name):
    _round_trip(REPO / "generated" / name)


def test_every_abi_s_object_reads_back_and_runs_alike(tmp_path):
    """System V, Win64 (unwind labels, saved xmm registers, other argument registers) and Mach-O objects
    read back; each ABI's forward NTTs compute the same on the model (arguments are buffers, whatever
    register brings them)."""
    p = load(REPO / "params/kyber-3329.toml", Overrides(abi="sysv,win64,macho"))
    write(render(STORE.bundles(p), "test"), tmp_path / p.name)
    read = _round_trip(tmp_path / p.name)
    assert set(read) == {"sysv", "win64", "macho"}
    inputs = {0: np.random.default_rng(2).integers(-3328, 3329, (4, 256)).astype(np.int16).view(np.uint16)}
    for symbol in ("kg_kyber3329_ntt_forward_avx512", "kg_kyber3329_ntt_forward_sse"):
        outputs = [compile_kernel(kernels[symbol]).run(inputs)[0] for kernels in read.values()]
        assert all(np.array_equal(outputs[0], out) for out in outputs[1:]), symbol


KYBER = REPO / "generated/kyber-3329"
ASM = (KYBER / "kyber-3329.asm").read_text()


def _read_edited(tmp_path: Path, old: str, new: str, after: str):
    """The kyber-3329 bundle with the first `old` after the line `after` made `new`, read back."""
    at = ASM.index(old, ASM.index(after))
    copy = copied_with(KYBER, {"kyber-3329.asm": ASM[:at] + new + ASM[at + len(old):]}, tmp_path / "copy")
    directory, manifest = read_bundle(copy)
    obj = manifest.objects[0]
    return read_object(directory / obj.file, obj, manifest.functions), ASM[:at].count("\n") + 1


def test_a_line_no_row_prints_is_named_and_the_other_functions_are_read(tmp_path):
    symbol = "kg_kyber3329_reduce_barrett_avx512"
    reading, number = _read_edited(tmp_path, "vpaddw       zmm1, zmm1, zmm3", "vpaddw       zmm1, zmm1", f"{symbol}:")
    assert set(reading.errors) == {symbol}
    assert f"kyber-3329.asm line {number} ('vpaddw       zmm1, zmm1')" in reading.errors[symbol]
    assert "no row of the instruction table on avx512 prints this line" in reading.errors[symbol]
    assert len(reading.kernels) == 23


@pytest.mark.parametrize(("old", "new", "why"), [
    ("    vzeroupper\n", "", "the frame of kg_kyber3329_freeze_avx512 must be"),  # dirty zmm upper halves left so
    ("vpminuw      zmm0, zmm0, zmm1", "vpminuw      zmm0, zmm0, [rel kg_nowhere]", "kg_nowhere is no table"),
    ("[rdi + 64]", "[rsi + 64]", "rsi holds no argument's address and no table's here"),
    ("vpmulhw      zmm1, zmm0, zmm3", "vpmulhw      zmm1, zmm0, ymm3", "no row of the instruction table"),
])
def test_what_the_reader_cannot_take_for_the_function_is_a_named_error(tmp_path, old, new, why):
    """A frame that is not the one the body needs, a table the file lacks, an address register holding
    no buffer (freeze takes one argument), registers of two widths: each named, with its line."""
    symbol = "kg_kyber3329_freeze_avx512"
    reading, number = _read_edited(tmp_path, old, new, f"{symbol}:")
    assert list(reading.errors) == [symbol]
    assert why in reading.errors[symbol] and f"kyber-3329.asm line {number} (" in reading.errors[symbol]
