"""The functions of a planned bundle for one ISA, each a C driver over the
codelets `planned` builds: the forward and inverse transforms (n rows of
`columns` polynomials each), base multiplication, and the coset low-degree
extension (`lde`), with their contracts and the compact layout the
manifest states.

Orders: the in-place Cooley–Tukey order of the stages (bit-reversed rows;
on one polynomial each leaf's own order inside it) is the fastest; the
natural order adds a bit reversal of the rows as a step of its own, after
the forward's stages and before the inverse's. A coset extension of n rows
by 2^k runs the inverse of size n (scaled by 2^-L alone), then the forward
of size n 2^k on the coset from layer k: its first k layers would add zero
rows to the coefficients, so each block at layer k starts as a copy of the
coefficients, made by the first stage's tiles as they start (the blocks
other than the first in a stage of their own, before the first block's).
In the fastest order its first stage copies the input in; in the natural
one a bit reversal from the input does, and one of the output ends it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.bundle import Function
from ...core.compile_cache import CompileCache
from ...core.contract import ArgContract, Bound, BoundOf, Contract, Values
from ...ir.instr import Kernel
from ...machine.target import Target
from .contracts import array_arg, basemul_contract, basemul_summary, forward_contract, inverse_contract
from .maths import NttMath, ring_words
from .params import NttParams
from .plan import Fill, block_stage, permute_stage, spread_stage
from .planned import (UNIT, Call, Driver, Expansion, Recipe, Step, Transform, build_steps, codelet_recipes,
                      leaf_design, leaf_params, transform_math, transform_plan, unit_file)
from .schedule import forward_input, inverse_input


@dataclass(frozen=True)
class PlannedLayout:
    """A planned transform's output order, compactly: row i of n (elements (i, c) at i*columns + c) holds
    the evaluation at index i (natural) or, in the in-place order, at the Cooley–Tukey index
    (i // leaf) * leaf + leaf_order[i % leaf], whose evaluation point is g * psi^(2 brv(j) + 1) (negacyclic)
    or g * omega^brv(j) (cyclic), brv on log2 n bits."""

    n: int
    leaf: int
    leaf_order: tuple[int, ...]
    order: str
    root: int
    ring: str
    coset: int
    columns: int

    def manifest(self) -> dict:
        return {"order": self.order, "d": 1, "planned": {
            "n": self.n, "columns": self.columns, "leaf": self.leaf, "leaf_order": list(self.leaf_order),
            "root": self.root, "ring": self.ring, "coset": self.coset}}


def planned_layout(p: NttParams, t: Target, math: NttMath | None = None) -> PlannedLayout:
    """The forward's output order (of the transform `math`, default the set's own)."""
    math = math or transform_math(p)
    ar = leaf_design(p, t)
    natural = p.order == "natural" or p.columns > 1
    leaf, order = (1, (0,)) if natural else (ar.layout.n, ar.layout.output_order)
    return PlannedLayout(math.n, leaf, tuple(order), p.order, math.psi, math.ring, math.coset, p.columns)


def _permute(p: NttParams, t: Target, n: int, out_of_place: bool = False) -> Step:
    stage = permute_stage(n, p.columns, t.lane_bytes, out_of_place)
    return Step(stage, stage.subpasses, None, (0, 1) if out_of_place else (0,))


def forward_steps(p: NttParams, t: Target) -> list[Step]:
    steps = Transform("ntt_forward", transform_plan(p, t), transform_math(p), False).steps()
    return steps + ([_permute(p, t, p.n)] if p.order == "natural" else [])


def inverse_steps(p: NttParams, t: Target) -> list[Step]:
    math = transform_math(p)
    tr = Transform("ntt_inverse", transform_plan(p, t), math, True, math.inverse_scale(leaf_design(p, t).mul.r))
    return ([_permute(p, t, p.n)] if p.order == "natural" else []) + tr.steps()


def lde_math(p: NttParams) -> NttMath:
    """The extension's transform: n 2^k rows on the coset shift * <root>."""
    lde = p.lde
    return NttMath(p.n << lde.added_bits, p.q, p.layers + lde.added_bits, p.ring, lde.shift, lde.root)


def lde_steps(p: NttParams, t: Target) -> list[Step]:
    """In the in-place order: the inverse of n rows (scaled by 2^-L), its first stage copying the input in,
    then the forward of n 2^k rows from layer k, its first stage split by blocks (`Stage.split`) and filled
    from block 0. In the natural order on columns (`natural_lde_steps`) the transposed transforms; on one
    polynomial, a bit reversal from the input first and one of the output last."""
    math, k = transform_math(p), p.lde.added_bits
    natural = p.order == "natural"
    if natural and p.columns > 1:
        return natural_lde_steps(p, t)
    big = lde_math(p)
    inverse = Transform("lde_inverse", transform_plan(p, t), math, True, math.inverse_scale(1)).steps()
    forward = Transform("lde_forward", transform_plan(p, t, big.n, k), big, False).steps()
    if not natural:
        first = inverse[0]
        inverse[0] = dataclasses.replace(first, stage=dataclasses.replace(first.stage, fill=Fill(1)))
    head = forward[0]
    later, block0 = head.stage.split(1 << k)
    forward[0:1] = [dataclasses.replace(head, stage=later), dataclasses.replace(head, stage=block0, beside=True)]
    return (([_permute(p, t, p.n, True)] if natural else []) + inverse + forward
            + ([_permute(p, t, big.n)] if natural else []))


def planned_recipes(p: NttParams, t: Target) -> list[Recipe]:
    """Every codelet's recipe of the bundle's functions for `t` (those built share symbols: the first's)."""
    steps = forward_steps(p, t) + inverse_steps(p, t) + (lde_steps(p, t) if p.lde is not None else [])
    return codelet_recipes(p, t, steps)


def natural_lde_steps(p: NttParams, t: Target) -> list[Step]:
    """Natural evaluations to natural evaluations, no permutation. The inverse's transpose (Cooley–Tukey
    butterflies, inverted twiddles, unscaled) leaves n times the coefficients in bit-reversed rows, in the last
    n rows of the output (its first stage copying the input in). The extension's transform of N rows on
    bit-reversed input wants coefficient j at row brv_K(j) = 2^k brv_L(j), zero rows between: its first k
    Gentleman–Sande layers are then products of each row into 2^k rows (`Expansion`, the coset's twist and
    1/n with them), and its other layers pair rows 2^k or more apart with the twiddles of n rows (the same
    values): a Gentleman–Sande transform (twiddles not inverted: the forward's transpose, so natural rows
    out) of n rows of 2^k C columns."""
    k, lde = p.lde.added_bits, p.lde
    origin = (p.n << k) - p.n  # rows, then elements
    origin *= p.columns
    coefficients = [dataclasses.replace(step, stage=dataclasses.replace(step.stage, origin=origin))
                    for step in Transform("lde_inverse", transform_plan(p, t), transform_math(p), False,
                                          invert=True).steps()]
    first = coefficients[0]
    coefficients[0] = dataclasses.replace(first, stage=dataclasses.replace(first.stage, fill=Fill(1)))
    big = NttMath(p.n << k, p.q, p.layers + k, p.ring, 1, lde.root)
    spread = spread_stage(p.n, k, p.columns, origin)
    rest = Transform("lde_forward", transform_plan(p, t, columns=p.columns << k), transform_math(p), True,
                     invert=False).steps()
    return coefficients + [Step(spread, spread.subpasses, Expansion("lde_spread", big, lde.shift, k))] + rest


def _signature(p: NttParams, t: Target, name: str, contract: Contract, calls: tuple[Call, ...]) -> Kernel:
    kernels = [c.function.kernel for c in calls if c.function is not None]
    return Kernel(f"{p.prefix}_{name}_{t.isa.name}", contract.specs, (), (), t,
                  frozenset().union(*(k.extensions for k in kernels)),
                  constant_time=all(k.constant_time for k in kernels))


def _codelets(made: dict) -> list[Function]:
    return list(dict.fromkeys(fn for fn, _ in made.values()))


def _stages_text(calls: tuple[Call, ...]) -> str:
    stages = len({id(c.stage) for c in calls})
    return f"{stages} stage{'s' if stages > 1 else ''} of verified codelets (C driver)"


def planned_functions(p: NttParams, t: Target, cache: CompileCache) -> list[Function]:
    """The forward and inverse transforms of `t`, the coset extension where the set asks for it (C drivers
    over their codelets), and the codelets."""
    ar = leaf_design(p, t)
    signed = ar.mul.signed
    lay = planned_layout(p, t)
    made: dict = {}
    rows = f"a[{p.n}]" if p.columns == 1 else f"the {p.columns} columns of a[{p.n}][{p.columns}]"
    out = []
    for direction, steps in (("forward", forward_steps(p, t)), ("inverse", inverse_steps(p, t))):
        start = forward_input(p.q, signed) if direction == "forward" else inverse_input(p.width, p.q, signed)
        chain = build_steps(p, t, steps, start, cache, made, finish_last=direction == "forward")
        contract = (forward_contract(p, t, 1, lay, start, signed) if direction == "forward" else
                    inverse_contract(p, t, start, ar.mul.r, signed)).proven({0: chain.output_bound})
        summary = (f"{direction} {ring_words(p.ring, p.coset)} NTT of {rows} in place, {p.order} order: "
                   f"{_stages_text(chain.calls)}")
        out.append(Function(_signature(p, t, f"ntt_{direction}", contract, chain.calls), f"ntt_{direction}",
                            contract, summary, (("n", p.n), ("q", p.q)), ((UNIT, unit_file(p)),),
                            driver=Driver(direction, chain.calls, ar)))
    if p.lde is not None:
        out.append(_lde_function(p, t, ar, lay, made, cache))
    return out + _codelets(made)


def lde_contract(p: NttParams, t: Target, start: Bound, lay: PlannedLayout, out_lay: PlannedLayout,
                 signed: bool) -> Contract:
    rows = p.n << p.lde.added_bits
    extended = dataclasses.replace(p, n=rows)
    return Contract(
        (ArgContract(array_arg(extended, t, "out", "out", unsigned=not signed), None,
                     Values(None, scale=1, layout=out_lay)),
         ArgContract(array_arg(p, t, "in", "in", unsigned=not signed), Values(start, layout=lay))),
        (("requires: every in[i] in ", BoundOf("in", "requires"),
          f", n = {p.n} rows of {p.columns} columns' evaluations in the forward transform's order"),
         ("ensures:  every out[i] in ", BoundOf("out", "ensures"),
          f" (proven), {rows} rows: each column's polynomial evaluated on the coset {p.lde.shift} * <"
          f"{p.lde.root}>,"),
         (f"          in the {p.order} order of a forward transform of {rows} rows (manifest: layout); out must "
          "not overlap in",)))


def _lde_function(p: NttParams, t: Target, ar, lay: PlannedLayout, made: dict, cache: CompileCache) -> Function:
    signed = ar.mul.signed
    start = inverse_input(p.width, p.q, signed)
    chain = build_steps(p, t, lde_steps(p, t), start, cache, made)
    big = lde_math(p)
    out_lay = planned_layout(dataclasses.replace(p, n=big.n, layers=big.layers), t, big)
    contract = lde_contract(p, t, start, lay, out_lay, signed).proven({0: chain.output_bound})
    summary = (f"coset low-degree extension of {p.columns} columns of {p.n} evaluations to {big.n} (added_bits "
               f"{p.lde.added_bits}, shift {p.lde.shift}), {p.order} order: {_stages_text(chain.calls)}")
    return Function(_signature(p, t, "lde", contract, chain.calls), "lde", contract, summary,
                    (("n", p.n), ("q", p.q)),
                    ((UNIT, unit_file(p)), ("added_bits", p.lde.added_bits), ("shift", p.lde.shift)),
                    driver=Driver("lde", chain.calls, ar))


def planned_basemul(p: NttParams, t: Target, forward_out: Bound, basemul_block, cache: CompileCache) -> list[Function]:
    """Base multiplication over n (blocks of degree 1: element-wise products): the kernel of the design's size
    `basemul_block(p_block, forward_bound)` (built as the unrolled sets' is, its own symbol) called on each
    block of the arrays by the C unit."""
    ar = leaf_design(p, t)
    size = ar.layout.n
    block_p = dataclasses.replace(leaf_params(p, size), prefix=f"{p.prefix}_block")
    block = dataclasses.replace(basemul_block(block_p, t, forward_out, cache), internal=True)
    signed = ar.mul.signed
    stage = block_stage(p.n * p.columns, size)
    output = block.contract.manifest_output()
    contract = basemul_contract(p, t, 1, 1, Values(forward_out, layout="ntt_forward output"),
                                output.get("representation", "lazy"), ar.mul.r, signed)
    contract = contract.proven({0: block.contract.arg("r").ensures.bound})
    signature = Kernel(f"{p.prefix}_basemul_{t.isa.name}", contract.specs, (), (), t, block.kernel.extensions,
                       constant_time=block.kernel.constant_time)
    call = Call(stage, stage.subpasses[0], block, (), 0, None, (0, 1, 2))
    return [Function(signature, "basemul", contract, basemul_summary(1, 1) + f" (blocks of {size}, C driver)",
                     (("n", p.n), ("q", p.q)), ((UNIT, unit_file(p)),), driver=Driver("basemul", (call,), ar)),
            block]
