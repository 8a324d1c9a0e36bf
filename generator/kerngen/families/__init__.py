"""The registry of kernel families, by the `family` key of a parameter file,
and the loading of parameter files through it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..core.bundle import Bundle
from ..core.family import Family
from ..core.params import Overrides, common, read_table
from ..target.target import NATIVE, PLATFORMS
from .gf2m import GF2M
from .ntt import NTT

FAMILIES: dict[str, Family] = {f.name: f for f in (NTT, GF2M)}


def family_of(params: Any) -> Family:
    return FAMILIES[params.family]


def from_mapping(table: dict, source: str, overrides: Overrides = Overrides()) -> Any:
    """Validate a parsed parameter table with its family's schema."""
    c = common(table, source, tuple(FAMILIES), overrides)
    return FAMILIES[c.family].parse(table, c, overrides)


def load(path: str | Path, overrides: Overrides = Overrides()) -> Any:
    table, source = read_table(path)
    return from_mapping(table, source, overrides)


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


def build_all(params: Any) -> tuple[Bundle, ...]:
    """The bundle's kernels for each of its ABIs, in the parameters' order
    (the allocator and the frame differ; the maths and the contracts do not)."""
    family = family_of(params)
    return tuple(family.build(for_abi(params, abi)) for abi in params.abis)
