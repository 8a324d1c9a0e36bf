"""What every kernel family hands to emission, testing and benchmarking.

A family module (`ntt16`, `gf2m`) turns validated parameters into a `Bundle`:
allocated, verified kernels plus the manifest facts about each. `emit`,
`testing` and `bench` work on bundles only and know no family's maths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .isa.ir import Kernel


@dataclass(frozen=True)
class Function:
    kernel: Kernel
    kind: str  # ntt_forward, ntt_inverse, basemul, gf2m_mul, ...
    isa: str
    dtype: str  # element C type name in the manifest: int16, uint64, ...
    manifest: dict[str, Any]  # family-specific fields: n, q / m, poly, input, output, ...
    summary: str  # one line for the header and the .asm comment block
    contract: tuple[str, ...]  # lines: requires / ensures, for .h and .asm
    schedule: tuple[str, ...] = ()  # reduction schedule notes, written as .asm comments


@dataclass(frozen=True)
class Bundle:
    name: str
    params: Any  # NttParams | Gf2mParams
    params_manifest: dict[str, Any]  # the parameters as loaded, for manifest.json
    functions: tuple[Function, ...]
    notes: tuple[str, ...] = field(default=())  # file-level comment lines (derived constants)


@dataclass(frozen=True)
class Check:
    """One harness call and how to judge what it wrote.

    `case` is a `harness.Case`; `judge` receives the output arrays by argument
    index and returns None when they are right, else a message saying what is
    wrong (which element, expected what).
    """

    case: Any
    judge: Any  # Callable[[dict[int, list[int]]], str | None]


@dataclass(frozen=True)
class Comparison:
    """A function measured beside a kernel in the same run (`<label>_ticks`)."""

    label: str  # "baseline", "openssl", ...
    library: Any  # Path of a shared object; None: the kernel's own bundle
    symbol: str


@dataclass(frozen=True)
class BenchItem:
    kind: str
    symbol: str
    case: Any  # harness.Case with valid inputs
    comparisons: tuple[Comparison, ...] = ()
