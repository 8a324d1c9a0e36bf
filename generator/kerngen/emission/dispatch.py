"""The dispatch unit of a bundle built for several ISAs (NAME_dispatch.c).

For each function it defines the name without the ISA suffix; the first
call picks the preferred ISA (`Isa.preference`: AVX-512, AVX2, then scalar,
then SSE) whose kernels the CPU can run, from the CPU features the
required-ISA pass found in those kernels (CPUID) and the register state they
need the OS to save (XGETBV; on macOS, which enables the AVX-512 state on
first use, sysctl), less what the CPU mask in the environment hides
(KERNGEN_CPU, read as `harness.cpu` reads it: a program runs as on a CPU
without those extensions), and every call goes there. The unit branches only on
that choice (the CPU's features, or the ISA asked for), never on the data
(the kernels' own branches are proven by `passes.constant_time`). The C text
is templates/dispatch.j2; this module derives what it
tests and calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.bundle import Bundle, Function
from ..machine.isa import AVX512_STATE, CPUID, ISAS, LEVELS, XCR0_STATES, cpuinfo_name

_REGISTERS = ("eax", "ebx", "ecx", "edx")


@dataclass(frozen=True)
class IsaTest:
    """How the dispatch unit decides that the CPU runs one ISA's kernels."""

    name: str
    bits: tuple[tuple[str, int, int, str], ...]  # (leaf variable, register index, bit, extension)
    xcr0: int  # register state the OS must save

    def condition(self, prefix: str, lazy_state: int) -> str:
        """The C expression that is true on a CPU and OS that run the ISA's kernels (the unit's names start
        with `prefix`; state in `lazy_state` is asked of the OS where XCR0 shows it only after first use)."""
        terms = [f"({var}[{reg}] >> {bit} & 1)" for var, reg, bit, _ in self.bits]
        if self.xcr0 & lazy_state:
            terms.append(f"{prefix}_os_saves(0x{self.xcr0:x}, xcr0)")
        elif self.xcr0:
            terms.append(f"(xcr0 & 0x{self.xcr0:x}) == 0x{self.xcr0:x}")
        return " && ".join(terms) or "1"

    @property
    def state(self) -> str:
        """The register state the OS must save, as the unit's comment names it ("" for none)."""
        return next((name for bits, name in XCR0_STATES if self.xcr0 & bits == bits), "")


@dataclass(frozen=True)
class Entry:
    """One function without its ISA suffix, and the kernel it calls per ISA (in `Dispatch.isas` order)."""

    symbol: str
    c_args: str
    call_args: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class CpuMaskTable:
    """What the unit needs to honour the CPU mask (KERNGEN_CPU, `harness.cpu`): the extensions it tests, as
    the mask names them; each ISA's as bits of that list (in `Dispatch.isas` order); each level's likewise."""

    extensions: tuple[str, ...]
    needs: tuple[int, ...]
    levels: tuple[tuple[str, int], ...]

    @staticmethod
    def of(tests: tuple[IsaTest, ...]) -> CpuMaskTable:
        names = tuple(dict.fromkeys(e for t in tests for *_, e in t.bits))
        bits = {e: 1 << k for k, e in enumerate(names)}
        return CpuMaskTable(tuple(cpuinfo_name(e) for e in names),
                            tuple(sum(bits[e] for *_, e in t.bits) for t in tests),
                            tuple((level, sum(bits[e] for e in names if e in keeps)) for level, keeps in LEVELS.items()))


@dataclass(frozen=True)
class Dispatch:
    prefix: str
    isas: tuple[IsaTest, ...]  # in the order of preference (`Isa.preference`)
    leaves: tuple[tuple[str, int, int], ...]  # (variable, leaf, subleaf) the tests read
    entries: tuple[Entry, ...]
    not_dispatched: tuple[str, ...]  # functions some ISA has no kernel for: call their suffixed names
    lazy_state: int = AVX512_STATE  # XCR0 bits macOS enables only on first use (the unit asks sysctl there)

    @property
    def mask(self) -> CpuMaskTable:
        return CpuMaskTable.of(self.isas)

    @property
    def asks_os(self) -> bool:
        """Whether some ISA needs state the OS may enable lazily (the unit then has its OS query)."""
        return any(t.xcr0 & self.lazy_state for t in self.isas)


def _leaf_var(leaf: int, subleaf: int) -> str:
    return f"leaf_{leaf:x}" + (f"_{subleaf}" if subleaf else "")


def _isa_test(name: str, fns: list[Function]) -> IsaTest:
    needed = sorted(set().union(*(f.kernel.extensions for f in fns)))
    unknown = [e for e in needed if e not in CPUID]
    if unknown:
        raise ValueError(f"no CPUID row for {', '.join(unknown)} (machine/isa.py CPUID)")
    bits = tuple((_leaf_var(CPUID[e].leaf, CPUID[e].subleaf), _REGISTERS.index(CPUID[e].register), CPUID[e].bit, e)
                 for e in needed)
    xcr0 = 0
    for e in needed:
        xcr0 |= CPUID[e].xcr0
    return IsaTest(name, bits, xcr0)


def _c_args(fn: Function) -> str:
    return ", ".join(a.c_declaration for a in fn.kernel.args)


def dispatch(bundle: Bundle) -> Dispatch | None:
    """The dispatch unit's content, or None for a bundle of one ISA; its
    names start with the bundle's symbol prefix."""
    by_isa: dict[str, list[Function]] = {}
    for fn in (f for f in bundle.functions if not f.internal):
        by_isa.setdefault(fn.isa, []).append(fn)
    if len(by_isa) < 2:
        return None
    order = sorted(by_isa, key=lambda name: ISAS[name].preference)
    names: dict[str, dict[str, Function]] = {}
    for isa in order:
        names[isa] = {fn.symbol.removesuffix("_" + isa): fn for fn in by_isa[isa]}
    entries, only_some = [], []
    for base in dict.fromkeys(b for isa in order for b in names[isa]):  # the bundle's order
        variants = [names[isa].get(base) for isa in order]
        if None in variants:
            only_some.append(base)
            continue
        fn = variants[0]
        if any(_c_args(v) != _c_args(fn) or v.contract.lines() != fn.contract.lines() for v in variants):
            raise ValueError(f"{base}: the ISAs' kernels differ in arguments or contract")
        entries.append(Entry(base, _c_args(fn), ", ".join(a.name for a in fn.kernel.args),
                             tuple(v.symbol for v in variants)))
    tests = tuple(_isa_test(isa, by_isa[isa]) for isa in order)
    leaves = sorted({(CPUID[e].leaf, CPUID[e].subleaf) for t in tests for *_, e in t.bits} | {(1, 0)})
    return Dispatch(bundle.params_manifest["prefix"], tests, tuple((_leaf_var(lf, sub), lf, sub) for lf, sub in leaves), tuple(entries),
                    tuple(only_some))

