"""The constant tables of an NTT bundle, made again from its parameters.

`kerngen test DIR` of a bundle this kerngen version wrote compares its
constants with these: every twiddle table (w beside its w' or w*q^-1) and
base-multiplication zeta table, as the kernel builders lay them out for each
ISA, the broadcast constants (named by value: pw_3329, pd_m1), and the
header's NTT-domain tables and macros. The builders run without the passes
(allocation, verification), which is what makes emission slow: a constant
changed after emission, with its hash fixed up in the manifest, is found
here; the code around the constants is judged by the harness's checks and
basis-vector proofs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.manifest import Manifest
from ...ir.instr import Builder, Table, shared_table
from ...emission.render import c_lines
from .build import header_constants, planned_header_constants
from .contracts import block_layout
from .design import design, isa_design, montgomery_basemul
from .schedule import DIRECTIONS
from .kernels import build_basemul, build_ntt, kernel_builder
from ...core.contract import Bound
from .params import NttParams
from .planned import leaf_design
from .planned_functions import planned_recipes
from .reducers import CONST_PREFIX, broadcast_const
from .schedule import schedule

_BROADCAST = re.compile(rf"^({'|'.join(CONST_PREFIX.values())})_(m?)(\d+)$")


def kernel_tables(p: NttParams, manifest: Manifest) -> dict[str, Table]:
    """Every twiddle and zeta table the kernels of `p` read, by label, built
    as `build` builds them: each NTT with the reduction schedule for the input
    bound its manifest entry requires, each base multiplication with the
    variant its manifest entry names (the finishing reduction adds no table).
    A planned transform's codelets read no twiddle table (their twiddles are
    arguments, built by the C unit and checked with the transforms)."""
    fns = {f.symbol: f for f in manifest.functions}
    out: dict[str, Table] = {}
    if p.planned:  # their codelets' lane-move and constant tables, each built for its manifest's input bound
        for t in p.targets:
            for recipe in planned_recipes(p, t):
                fn = fns.get(recipe.symbol)
                if fn is not None:
                    bound = next(a.requires.bound for a in fn.args if a.requires is not None)  # its rows
                    b, _, _ = recipe.make(p, t, leaf_design(p, t), Bound(*bound))
                    for table in b.tables.values():
                        out[table.label] = shared_table(out.get(table.label), table)
        return out
    for t in p.targets:
        isa, ar = t.isa.name, design(p, t)
        symbol = f"{p.prefix}_%s_{isa}"
        built: list[Builder] = []
        for direction in DIRECTIONS:
            fn = fns.get(symbol % f"ntt_{direction}")
            if fn is None:  # a kernel this CPU cannot run is left out of the test
                continue
            b = kernel_builder(ar.layout)
            scale_last = fn.fact("reduction", {}).get("scale_on_last_layer", False)  # as the build chose
            build_ntt(b, ar, schedule(ar, p.policy, direction, fn.input.bound[1], scale_last),
                      f"{p.prefix}_ntt_{direction}_twiddles_{isa}")
            built.append(b)
        forward = fns.get(symbol % "ntt_forward")
        bm_ar = montgomery_basemul(p, ar)
        for k in (1, *p.basemul_acc):
            kind = "basemul" if k == 1 else f"basemul_acc{k}"
            fn = fns.get(symbol % kind)
            if fn is None or forward is None:
                continue
            b = kernel_builder(ar.layout)
            build_basemul(b, bm_ar, isa_design(p, t, ar).basemul_reducer, f"{p.prefix}_{kind}_zetas_{isa}",
                          max(map(abs, forward.output.bound)), None, k, fn.fact("karatsuba", False),
                          fn.fact("summed_factors", False), fn.facts["interleaved_units"],
                          qinv_in_register=t.isa.encoding.unaligned_memory,
                          reduce_once=fn.fact("reduce_once", False))
            built.append(b)
        for b in built:
            for label, t in b.tables.items():
                out[label] = shared_table(out.get(label), t)  # as the bundle's files keep it
    return out


def broadcast_table(label: str, vector_bits: int) -> Table | None:
    """The broadcast constant a label such as pw_3329 or pd_m1 names over `vector_bits`-bit vectors, or None."""
    found = _BROADCAST.match(label)
    if not found:
        return None
    prefix, minus, digits = found.groups()
    bits = next(bits for bits, name in CONST_PREFIX.items() if name == prefix)
    b = Builder(vector_bits=vector_bits)
    broadcast_const(b, -int(digits) if minus else int(digits), bits)
    return b.tables[label]


@dataclass(frozen=True)
class _Scale:
    """A function's kind and output scale, as `header_constants` reads them
    from a built function (here from the manifest)."""

    kind: str
    scale: int

    @property
    def contract(self) -> _Scale:
        return self

    def manifest_output(self) -> dict:
        return {"scale": self.scale}


def header_lines(p: NttParams, manifest: Manifest) -> list[list[str]]:
    """The header's NTT-domain macros and tables (N, Q, D, the blocks, the
    scales, zetas and positions) as C lines, the layout from the parameters."""
    scales = [_Scale(f.kind, f.output.scale) for f in manifest.functions]
    if p.planned:
        return [c_lines(item) for item in planned_header_constants(p, scales)]
    ar = design(p)
    layout = block_layout(ar.math, ar.layout.output_order, p.order)
    return [c_lines(item) for item in header_constants(p, layout, scales)]
