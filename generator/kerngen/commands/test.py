"""`kerngen test`: run every check of a bundle through the C harness and judge
the outputs against independent references.

A bundle is tested from its manifest alone: `kerngen test PARAMS.toml` emits
the bundle into a temporary directory (its kernels from the bundle store,
`kerngen.store`, built into it once) and tests that, exactly as `kerngen
test BUNDLE_DIR` tests a bundle emitted earlier or copied into another project.
A bundle this kerngen version wrote is also compared with what its parameters
give: an NTT bundle's constant tables, made again by the kernel builders
alone (seconds, where a whole emission of a large set takes minutes); a
bundle of another family, with a fresh emission of the whole bundle.
Functions this CPU cannot run, and with `--on-model` every function, run
their checks on the machine model instead (`on_model`).
"""

from __future__ import annotations

import dataclasses

import re
import tempfile
from functools import partial
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.bundle import Bundle
from ..core.compile_cache import CompileCache
from ..core.family import Calls, Constants, Family
from ..core.manifest import Manifest, ObjectEntry, read_bundle
from ..core.params import COMMON_KEYS
from ..families import FAMILIES, build_all, family_of, from_mapping, native
from ..harness import macho, protocol, toolchain, wine
from ..harness.cpu import lacks, left_out
from ..emission.files import write
from ..machine.formats import COFF64, ELF64, MACHO64
from ..machine.isa import ISAS
from ..emission.render import render
from ..store import Store
from . import on_model

Say = Callable[[str], None]


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: int
    failed: int
    failures: tuple[str, ...]
    # the checks passed where each ran: "cpu" (the ELF object here), "wine" (the COFF object), "model" (the
    # machine model), "readback" (the Mach-O object read back), "parameters" (the comparison with a fresh emission)
    passed_on: tuple[tuple[str, int], ...] = ()

    def passed_at(self, place: str) -> int:
        return dict(self.passed_on).get(place, 0)


def split_by_cpu(manifest: Manifest, on_model: bool = False) -> tuple[tuple, tuple]:
    """(the functions this CPU, as masked, runs; those it leaves to the machine model): the one selection
    `kerngen test` makes, for whoever counts what ran where."""
    runnable = () if on_model else tuple(f for f in manifest.functions if not lacks(f.cpu))
    return runnable, tuple(f for f in manifest.functions if f not in runnable)


def bundle_library(p: Any, workdir: Path) -> tuple[Bundle, Path]:
    """Build, render and assemble one parameter set for this machine (System V,
    ELF, whichever ABIs it names); returns (bundle, shared object)."""
    bundle = family_of(p).build(native(p))
    return bundle, toolchain.bundle_library(bundle, f"kerngen emit {p.source}", workdir / p.name, workdir)


def test_params(p: Any, seed: int, say: Say, on_model: bool = False, store: Store | None = None,
                cache: CompileCache | None = None) -> Outcome:
    """Emit the bundle of `p` (every ABI it names) into a temporary directory and test it there: its
    kernels taken from `store` (built into it where it lacks them), else built here through `cache`
    (kernels the caller's earlier builds compiled are taken from it)."""
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        bundles = build_all(p, cache) if store is None else store.bundles(p)
        write(render(bundles, f"kerngen emit {p.source}"), Path(tmp) / p.name)
        say(f"{p.name}: emitted and verified {len(bundles[0].functions)} kernels for {', '.join(p.abis)}")
        try:
            return test_bundle(Path(tmp) / p.name, seed, say, Path(tmp), reemit=False, on_model=on_model)
        finally:
            wine.stop_wineserver(Path(tmp))


def manifest_params(directory: Path, manifest: Manifest) -> Any:
    """The parameters a bundle's manifest records (every key that shapes its kernels)."""
    family = FAMILIES[manifest.family]
    table = {k: v for k, v in manifest.params.items() if k in family.keys | COMMON_KEYS}
    return from_mapping(table, f"{directory / 'manifest.json'} (params)")


def fresh_emission(directory: Path, manifest: Manifest) -> str | None:
    """None when the bundle's files are exactly what this kerngen emits from
    the manifest's parameters (then every proof made at emission holds for
    them: overflow, congruences, consistent constant tables); else what differs."""
    files = render(build_all(manifest_params(directory, manifest)), manifest.command)
    changed = [name for name, text in files.items() if (directory / name).read_text() != text]
    return None if not changed else (f"{', '.join(changed)} differ from a fresh emission of the manifest's "
                                     "parameters: the bundle was edited after kerngen wrote it")


_LABEL = re.compile(r"^([A-Za-z_.$][\w.$@]*):\s*$")
_DATA = ("db", "dw", "dd", "dq")


def asm_tables(text: str) -> dict[str, list[int]]:
    """The constant tables of an emitted .asm file (its data before the first
    code section): label -> values as written."""
    out: dict[str, list[int]] = {}
    label = None
    for line in text.splitlines():
        words = line.split(None, 1)
        if line.startswith("section .text"):
            break
        if _LABEL.match(line):
            label = _LABEL.match(line).group(1)
            out[label] = []
        elif label and len(words) == 2 and words[0] in _DATA:
            out[label] += [int(v, 0) for v in words[1].split(",")]
    return out


def constants_differ(directory: Path, manifest: Manifest, constants: Constants) -> str | None:
    """None when every constant table of every object, and the header's
    tables and macros, are those the manifest's parameters give (made by the
    family's `constants`); else the first that is not."""
    p = manifest_params(directory, manifest)
    want = constants.kernel_tables(p, manifest)
    widest = max(ISAS[f.isa].written_bits for f in manifest.functions)  # what a constant shared by ISAs fills
    for obj in manifest.objects:
        have = asm_tables((directory / obj.file).read_text())
        for label, values in have.items():
            broadcast = constants.by_value(label, widest)
            if broadcast is not None and len(values) <= len(broadcast.values):
                # a constant in every lane: the file keeps the longest any kernel reads (kernels the shortcut
                # does not build may read it over wider vectors), at most the widest ISA's vectors
                table = dataclasses.replace(broadcast, values=broadcast.values[:max(len(values), 1)])
            else:
                table = want.get(label) or broadcast
            if table is None:
                return f"{obj.file}: table {label} is not one kerngen makes from the manifest's parameters"
            mask = (1 << (8 * table.elem_bytes)) - 1
            got, expected = [v & mask for v in values], [v & mask for v in table.values]
            if got != expected:
                k = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
                return (f"{obj.file}: {label}[{k}] is "
                        f"{values[k] if k < len(values) else 'missing'}, the manifest's parameters give "
                        f"{table.values[k] if k < len(table.values) else 'no such element'}")
        missing = sorted(set(want) - set(have))
        if missing:
            return f"{obj.file}: lacks the table {missing[0]} its kernels read"
    header = f"{p.name}.h"
    text = (directory / header).read_text() if header in manifest.files else ""
    for lines in constants.header_lines(p, manifest):
        if "\n".join(lines) not in text:
            code = [line for line in lines if not line.startswith("/*")]
            return f"{header}: {code[0]!r} is missing or differs from what the manifest's parameters give"
    return None


def compare_with_parameters(directory: Path, manifest: Manifest) -> tuple[str, str | None]:
    """(what was compared, None or what differs): the constants alone where
    the family can make them without the passes, else a fresh emission."""
    constants = FAMILIES[manifest.family].constants
    if constants is not None:
        return "fresh emission of the constant tables", constants_differ(directory, manifest, constants)
    return "fresh emission", fresh_emission(directory, manifest)


@dataclass
class _Tally:
    name: str
    passed: int = 0
    failures: list[str] = field(default_factory=list)
    place: str = "parameters"  # where the checks judged now ran (`Outcome.passed_on`)
    passed_on: dict[str, int] = field(default_factory=dict)

    def judge(self, check: str, msg: str | None) -> None:
        if msg:
            self.failures.append(f"{self.name}: {check}: {msg}")
        else:
            self.passed += 1
            self.passed_on[self.place] = self.passed_on.get(self.place, 0) + 1

    def judge_results(self, checks: list, results: list, say: Say) -> None:
        start = time.monotonic()
        for k, (c, r) in enumerate(zip(checks, results, strict=True)):
            msg = f"{r.status} {r.reason}".strip() if not r.ok else c.judge(r.outputs)
            self.judge(f"{c.case.case_id} ({c.case.symbol})", msg)
            if time.monotonic() - start > 5 and k % 16 == 15:
                say(f"{self.name}: judged {k + 1} of {len(checks)}")


def _test_native(asm: Path, obj: ObjectEntry, manifest: Manifest, family: Family, work: Path, seed: int, say: Say,
                 tally: _Tally) -> None:
    """The System V object, assembled and run here: every check, then the
    multi-call checks and basis-vector proofs."""
    lib = toolchain.assemble_shared(asm, work, [asm.parent / u for u in manifest.units])

    def run(cases):
        return protocol.run_runner(lib, cases, workdir=work, seed=seed)

    def batch(fn, inputs):
        return protocol.run_batch(lib, fn["symbol"], fn["args"], fn["dtype"], inputs, work, seed=seed)

    checks = family.checks(manifest, seed)
    say(f"{tally.name}: running {len(checks)} checks of {len(manifest.functions)} functions ({asm.name})")
    tally.judge_results(checks, run([c.case for c in checks]), say)
    for check, msg in family.chained_checks(manifest, Calls(run, batch), seed):
        tally.judge(check, msg)


def _test_win64(asm: Path, obj: ObjectEntry, manifest: Manifest, family: Family, work: Path, seed: int, say: Say,
                tally: _Tally) -> None:
    """The Win64 object, linked into a DLL and run under Wine through the
    Win64 checked-call stub: every check."""
    missing = wine.missing_tools()
    if missing:
        say(f"{tally.name}: not running {asm.name}: the Win64 harness needs {'; '.join(missing)}")
        return
    dll = wine.assemble_dll(asm, work, [f.symbols[obj.abi] for f in manifest.functions],
                            [asm.parent / u for u in manifest.units])
    checks = family.checks(manifest, seed)
    say(f"{tally.name}: running {len(checks)} checks of {len(manifest.functions)} functions ({asm.name}, Wine)")
    tally.judge_results(checks, wine.run_runner_wine(dll, [c.case for c in checks], work, seed=seed), say)


def _test_macho(asm: Path, obj: ObjectEntry, manifest: Manifest, family: Family, work: Path, seed: int, say: Say,
                tally: _Tally) -> None:
    """The Mach-O object (no Mac here to run it): symbols, sections, relocations."""
    missing = macho.missing_tools()
    if missing:
        say(f"{tally.name}: not checking {asm.name}: missing {', '.join(missing)}")
        return
    # the functions of the bundle's C units (a planned transform's driver) are not in the object
    symbols = {f.symbol: f.symbols[obj.abi] for f in manifest.functions if "unit" not in f.facts}
    say(f"{tally.name}: checking the Mach-O object of {asm.name} (symbols, sections, relocations)")
    problems = macho.object_problems(macho.assemble(asm, work), symbols, obj.visibility or "default")
    tally.judge(f"Mach-O object {asm.name}", "; ".join(problems) or None)


def _test_on_model(directory: Path, manifest: Manifest, family: Family, seed: int, say: Say, tally: _Tally) -> None:
    """Every check of `manifest`'s functions, and the multi-call checks and
    basis-vector proofs, run on the machine model: the functions of the
    bundle's own assembly, read back from it (`on_model.bundle_kernels`). A
    function that cannot be read is a failed check naming the line, its own
    checks are not run (neither this CPU nor the model ran it), and a
    multi-call check calling it fails as a call that crashed would."""
    reading = on_model.bundle_kernels(directory, manifest)
    for symbol, why in reading.errors.items():
        tally.judge(f"{symbol} (not run)", why)
    drivers = {f.symbol: on_model.Driven(tuple(protocol.manifest_arg({"role": a.role, "count": a.count,
                                                                      "align": a.align}, f.dtype) for a in f.args),
                                         partial(family.drive, manifest, f.symbol))
               for f in manifest.functions if on_model.driver(f)}
    calls = on_model.Model(reading.kernels, drivers).calls()
    runs = set(reading.kernels) | set(drivers)
    checks = [c for c in family.checks(manifest, seed) if c.case.symbol in runs]
    say(f"{tally.name}: running {len(checks)} checks of {len(runs)} functions on the machine model "
        "(the instruction table's semantics run on their assembly, read back), not the CPU")
    try:
        tally.judge_results(checks, calls.run([c.case for c in checks]), say)
        for check, msg in family.chained_checks(manifest, calls, seed):
            tally.judge(check, msg)
    except protocol.KernelFault as e:  # a failed check, counted
        tally.judge("machine model", str(e))


# how each object format is tested here, and what `Outcome.passed_on` calls the place
_BY_FORMAT = {ELF64.name: _test_native, COFF64.name: _test_win64, MACHO64.name: _test_macho}
_PLACES = {ELF64.name: "cpu", COFF64.name: "wine", MACHO64.name: "readback"}


def test_bundle(path: Path, seed: int, say: Say, workdir: Path | None = None, reemit: bool = True,
                on_model: bool = False) -> Outcome:
    """Test the bundle in `path` (its directory or manifest) from its manifest
    alone, each ABI's object as this machine can (ELF: run here; COFF: run
    under Wine when it is installed; Mach-O: the object read back), and the
    functions this CPU cannot run, or with `on_model` every function, on the
    machine model (their assembly read back); with `reemit`,
    also compare it with what its parameters give when it was written by this
    version of kerngen (`compare_with_parameters`)."""
    directory, whole = read_bundle(path)
    name = whole.name
    family = FAMILIES[whole.family]
    runnable, modelled = split_by_cpu(whole, on_model)
    if modelled and not on_model:
        say(f"{name}: running {', '.join(dict.fromkeys(f.isa for f in modelled))} on the machine model: "
            + left_out(modelled))
    manifest = whole.only(runnable)
    tally = _Tally(name)
    if reemit:
        if whole.version == __version__:
            say(f"{name}: comparing with a fresh emission of its parameters"
                + (": its constant tables and header constants (the kernels' code is judged by the checks below)"
                   if family.constants is not None else ""))
            tally.judge(*compare_with_parameters(directory, whole))
        else:
            say(f"{name}: written by kerngen {whole.version}, not {__version__}: no fresh emission to compare with; "
                "the checks and basis-vector proofs below still run")
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        work = workdir or Path(tmp)
        try:
            for obj in whole.objects:
                # a Mach-O object is read, not run: all its functions; the others run what this CPU runs
                tested = whole if obj.format == MACHO64.name else manifest
                if not tested.functions:
                    continue
                tally.place = _PLACES[obj.format]
                try:
                    _BY_FORMAT[obj.format](directory / obj.file, obj, tested, family, work, seed, say, tally)
                except protocol.KernelFault as e:  # a failed check, counted; the other objects are still tested
                    tally.judge(f"{obj.file} ({obj.abi})", str(e))
        finally:
            if workdir is None:
                wine.stop_wineserver(work)
    if modelled:
        tally.place = "model"
        _test_on_model(directory, whole.only(modelled), family, seed, say, tally)
    say(f"{name}: {tally.passed} passed, {len(tally.failures)} failed")
    return Outcome(name, tally.passed, len(tally.failures), tuple(tally.failures), tuple(tally.passed_on.items()))
