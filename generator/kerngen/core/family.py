"""The protocol every kernel family implements, and nothing else.

A family is a package (`kerngen.families.ntt`, `kerngen.families.gf2m`)
exposing one `Family` object: its parameter schema and command-line
options, how it builds a bundle, what the vendoring files say of its
kernels, the harness checks and benchmarks that judge and time them, and the
extras only some families have (multi-call checks, whole-algorithm
benchmarks, reduction-schedule exploration). The registry
(`kerngen.families`) maps the `family` key of a parameter file to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..machine.target import NATIVE, PLATFORMS
from .bundle import BenchItem, Bundle, Check
from .compile_cache import CompileCache
from .manifest import Manifest
from .params import Common, Option, Overrides

if TYPE_CHECKING:
    from ..ir.instr import Table

Runner = Callable[[list], list]  # harness cases -> harness results


@dataclass(frozen=True)
class Calls:
    """How checks call a bundle's kernels: `run(cases)` once each through the
    text runner, `batch(function, inputs)` many times through the binary one
    (a function entry in the manifest's JSON form; in/inout argument index ->
    array of rows; returns out/inout argument index -> array of rows)."""

    run: Runner
    batch: Callable[[dict, dict], dict]


@dataclass(frozen=True)
class Constants:
    """How a family makes a bundle's constants again from its parameters
    without the passes (seconds, where emitting a large set takes minutes),
    for `kerngen test` to compare with the bundle's files; each callable
    takes the parameters and the manifest."""

    kernel_tables: Callable[[Any, Manifest], Mapping[str, Table]]  # every table the kernels read, by label
    # the table a label names by its value (pw_3329) over vectors of the given bits, or None
    by_value: Callable[[str, int], Table | None]
    header_lines: Callable[[Any, Manifest], list[list[str]]]  # the header's constants, each as its C lines


class Family:
    name: str
    keys: frozenset[str]  # the keys its parameter files may have, beyond the common ones
    kinds: frozenset[str]  # the kinds of the functions its bundles hold (only the family reads them)
    options: tuple[Option, ...] = ()  # its command-line options, each replacing a key of its files

    def parse(self, table: dict, common: Common, overrides: Overrides) -> Any:
        """Validated, typed parameters (carrying their `Target`)."""
        raise NotImplementedError

    def schema(self, table: dict, common: Common, overrides: Overrides) -> Any:
        """The typed parameters of the schema alone, without the searches and proofs `parse` adds to it
        (what `kerngen list` shows): by default `parse`."""
        return self.parse(table, common, overrides)

    def summary(self, params: Any) -> str:
        """What a validated set was designed to, in one line (`kerngen check`)."""
        raise NotImplementedError

    def build(self, params: Any, cache: CompileCache | None = None) -> Bundle:
        """Every kernel, compiled and verified (through `cache`, a fresh one if none is given), with its contract."""
        raise NotImplementedError

    def vendoring(self, bundle: Bundle) -> dict[str, Any]:
        """The template variables of the family's sections of the vendoring
        files (the README's description of its values, the examples), by
        name; none where the bundle lacks the kernels they describe."""
        return {}

    def checks(self, manifest: Manifest, seed: int) -> list[Check]:
        """One harness call each, judged against references independent of the
        generator, made from a bundle's manifest alone (a copied bundle is
        tested the same way)."""
        raise NotImplementedError

    def chained_checks(self, manifest: Manifest, calls: Calls, seed: int) -> list[tuple[str, str | None]]:
        """Checks spanning several calls (round trips, basis-vector proofs) or
        none (manifest facts): (name, None when passed else what is wrong)."""
        return []

    def drive(self, manifest: Manifest, symbol: str, run: Callable, inputs: dict) -> dict:
        """A function of the bundle's C units (a driver: its manifest entry says which unit) run without them:
        each of the kernels it calls through `run(symbol, inputs)` (the machine model's), on each row of
        `inputs`; the family knows what its drivers do."""
        raise NotImplementedError(f"{self.name} bundles have no drivers")

    def bench_items(self, bundle: Bundle, library: Path, workdir: Path) -> list[BenchItem]:
        """What `kerngen bench` times of the bundle (assembled as `library`), each beside its comparisons."""
        raise NotImplementedError

    def extra_bench_rows(self, bundle: Bundle, library: Path, workdir: Path, batches: int) -> list[dict]:
        """Rows for whole-algorithm demonstrators built on the bundle."""
        return []

    constants: Constants | None = None  # None: `kerngen test` compares a whole fresh emission instead
    explorer: Any = None  # reduction-schedule exploration (explore, format_table), where the family has schedules


def for_abi(params: Any, abi: str) -> Any:
    """The same parameters with every target on the calling convention `abi`
    (a family's parameters carry their targets in `targets`)."""
    platform = PLATFORMS[abi]
    return dataclasses.replace(params, targets=tuple(dataclasses.replace(t, platform=platform)
                                                     for t in params.targets))


def native(params: Any) -> Any:
    """The parameters on this machine's convention (System V, ELF): what the
    harness runs and times, whichever ABIs the bundle is emitted for."""
    return for_abi(params, NATIVE.name)
