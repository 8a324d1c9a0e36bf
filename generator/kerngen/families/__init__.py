"""The registry of kernel families, by the `family` key of a parameter file,
and the loading of parameter files through it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.bundle import Bundle
from ..core.compile_cache import CompileCache
from ..core.family import Family, for_abi, native
from ..core.params import Option, Overrides, check_overrides, common, read_table
from .gf2m import GF2M
from .ntt import NTT

__all__ = ["FAMILIES", "OPTIONS", "build_all", "family_of", "for_abi", "from_mapping", "load", "native"]

FAMILIES: dict[str, Family] = {f.name: f for f in (NTT, GF2M)}
OPTIONS: tuple[Option, ...] = tuple(o for f in FAMILIES.values() for o in f.options)  # the command line's, in order


def family_of(params: Any) -> Family:
    return FAMILIES[params.family]


def from_mapping(table: dict, source: str, overrides: Overrides = Overrides()) -> Any:
    """Validate a parsed parameter table with its family's schema."""
    c = common(table, source, tuple(FAMILIES), overrides)
    check_overrides(source, overrides, c.family, {f.name: f.options for f in FAMILIES.values()})
    return FAMILIES[c.family].parse(table, c, overrides)


def load(path: str | Path, overrides: Overrides = Overrides()) -> Any:
    table, source = read_table(path)
    return from_mapping(table, source, overrides)


def load_schema(path: str | Path) -> Any:
    """The parameters of a file as its family's schema reads them, without validation's searches and
    proofs (`Family.schema`): what a set says it is."""
    table, source = read_table(path)
    c = common(table, source, tuple(FAMILIES), Overrides())
    return FAMILIES[c.family].schema(table, c, Overrides())


def build_all(params: Any, cache: CompileCache | None = None) -> tuple[Bundle, ...]:
    """The bundle's kernels for each of its ABIs, in the parameters' order
    (the allocator and the frame differ; the maths and the contracts do not),
    compiled through `cache` (a fresh one if none is given): an ABI that
    differs from another only in object format compiles nothing again."""
    family, cache = family_of(params), CompileCache() if cache is None else cache
    return tuple(family.build(for_abi(params, abi), cache) for abi in params.abis)
