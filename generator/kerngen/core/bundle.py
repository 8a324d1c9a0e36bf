"""What a family hands to emission, testing and benchmarking.

A family turns validated parameters into a `Bundle`: compiled, verified
kernels with their typed contracts and manifest facts. Rendering, the
harness and the commands work on bundles only and know no family's
maths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..machine.isa import cpuinfo_name
from .contract import Contract
from .params import names_manifest
from .proof import MapProof

if TYPE_CHECKING:
    from ..ir.instr import Kernel
    from ..machine.target import Target


@dataclass(frozen=True)
class Function:
    kernel: Kernel
    kind: str  # ntt_forward, ntt_inverse, basemul, gf2m_mul, ...
    contract: Contract
    summary: str  # one line for the header and the .asm comment block
    head: tuple[tuple[str, Any], ...]  # the family's leading manifest fields: (n, q) or (m, poly)
    facts: tuple[tuple[str, Any], ...] = ()  # further manifest fields, in order
    notes: tuple[str, ...] = ()  # .asm comment lines: the reduction schedule, the fold plan
    schedule: Any = None  # the family's typed schedule of the kernel (explore reads it)
    proof: MapProof | None = None  # what the verifier proved about the map
    # a function the bundle's C unit implements by calling codelets (the family's driver data: a planned
    # transform), its `kernel` then the signature alone (no body); None: its own kernel
    driver: Any = None
    internal: bool = False  # a codelet its bundle's drivers call (declared and documented, not dispatched)

    @property
    def symbol(self) -> str:
        return self.kernel.symbol

    @property
    def isa(self) -> str:
        return self.kernel.target.isa.name

    @property
    def dtype(self) -> str:
        """Element type in the manifest: the C type without its _t."""
        return self.kernel.args[0].ctype.removesuffix("_t")

    @property
    def cpu(self) -> list[str]:
        """The CPU features the kernel's instructions need (required-ISA pass), as CPUID flags are named."""
        return sorted(cpuinfo_name(e) for e in self.kernel.extensions)

    def fact(self, key: str, default: Any = None) -> Any:
        return dict(self.facts).get(key, default)

    def manifest(self) -> dict:
        entry: dict[str, Any] = {"symbol": self.symbol, "kind": self.kind, "isa": self.isa, "dtype": self.dtype}
        entry.update(self.head)
        entry["args"] = [{"name": a.name, "role": a.role, "count": a.count, "align": a.align}
                         | ({"preferred_align": a.preferred_align} if a.preferred_align else {})
                         for a in self.kernel.args]
        for arg, c in zip(entry["args"], self.contract.args):  # a caller checks each argument by its own entry
            if c.requires is not None:
                arg["requires"] = c.requires.manifest()
            if c.may_alias:
                arg["may_alias"] = list(c.may_alias)
        if self.contract.inputs_shared:  # and the one requirement of every input, where they share it
            entry["input"] = self.contract.manifest_input()
        entry["output"] = self.contract.manifest_output()
        entry["cpu"] = self.cpu
        entry["constant_time"] = self.kernel.constant_time
        if self.proof is not None:
            entry["proof"] = self.proof.manifest()
        entry.update(self.facts)
        return entry


@dataclass(frozen=True)
class CDefine:
    """A constant the C header defines as a macro."""

    name: str
    value: int
    comment: str = ""


@dataclass(frozen=True)
class CPrototype:
    """A function of a bundle's C unit (not a kernel) the header declares, with what it does."""

    declaration: str  # the prototype, ending in ;
    comment: str


@dataclass(frozen=True)
class CUnit:
    """A C source file a family adds to a bundle: its name, the template it is rendered from, the context."""

    file: str
    template: str
    context: dict
    summary: str  # what it holds, for the bundle's README


@dataclass(frozen=True)
class CTable:
    """A constant table the C header carries (`static const`), row-major."""

    name: str
    ctype: str
    shape: tuple[int, ...]  # one or two dimensions
    values: tuple[int, ...]
    comment: str = ""

    def rows(self, brackets: str = "{}", spell: Callable[[int], str] = str) -> list[str]:
        """The initialiser's lines, each ending in a comma: at most 16 values a
        line; a two-dimensional table one bracketed entry per row of it; each
        value as `spell` writes it."""
        if len(self.shape) == 1:
            cells, per = [spell(v) for v in self.values], 16
        else:
            w = self.shape[1]
            cells = [brackets[0] + ", ".join(spell(v) for v in self.values[i:i + w]) + brackets[1]
                     for i in range(0, len(self.values), w)]
            per = max(1, 16 // w)
        return [", ".join(cells[i:i + per]) + "," for i in range(0, len(cells), per)]


@dataclass(frozen=True)
class Bundle:
    name: str
    params: Any  # the family's parameters
    target: Target
    title: str  # one line for the header
    params_manifest: dict[str, Any]  # the parameters as loaded, for manifest.json
    functions: tuple[Function, ...]
    notes: tuple[str, ...] = ()  # file-level comment lines (derived constants)
    header: tuple[CDefine | CTable, ...] = ()  # what a C user needs beyond the prototypes
    design: Any = None  # what the family derived the kernels from (NTT: maths, layout, arithmetic), for its tools
    prototypes: tuple[CPrototype, ...] = ()  # the C units' functions the header declares
    units: tuple[CUnit, ...] = ()  # C sources the bundle's functions are implemented in (drivers)
    # the family that built it (a `core.family.Family`, which knows bundles: so not named here), for its
    # vendoring context; None: a bundle made by hand
    family: Any = None

    @property
    def preferred(self) -> tuple[Function, ...]:
        """The functions of the first ISA (the one preferred where several run), in the bundle's order."""
        return tuple(f for f in self.functions if f.isa == self.functions[0].isa)

    def function(self, kind: str, symbol: str | None = None, isa: str | None = None) -> Function:
        """The first function of this kind (of this ISA, with this symbol)."""
        for f in self.functions:
            if f.kind == kind and symbol in (None, f.symbol) and isa in (None, f.isa):
                return f
        raise KeyError(kind)


def manifest_params(bundles: tuple[Bundle, ...]) -> dict[str, Any]:
    """The parameters as the manifest states them: the family's, then the ABIs
    of the bundles (one per ABI) and their symbols' visibility."""
    first = bundles[0]
    return {**first.params_manifest, "abi": names_manifest(tuple(b.target.platform.name for b in bundles)),
            "visibility": first.target.visibility}


@dataclass(frozen=True)
class Check:
    """One harness call and how to judge what it wrote: `judge` receives the
    output arrays by argument index and returns None when they are right,
    else a message saying what is wrong (which element, expected what)."""

    case: Any  # harness Case
    judge: Callable[[dict[int, list[int]]], str | None]


@dataclass(frozen=True)
class Comparison:
    """A function measured beside a kernel in the same run (`<label>_ticks`)."""

    label: str  # "baseline", "openssl", ...
    library: Path | None  # shared object; None: the kernel's own bundle
    symbol: str


@dataclass(frozen=True)
class BenchItem:
    kind: str
    symbol: str
    case: Any  # harness Case with valid inputs
    comparisons: tuple[Comparison, ...] = ()
