"""A planned transform for one ISA: the plan (`plan`), its codelets built and
verified in the order they run, each taking what the one before it proved
it leaves (the composition check), and the twiddle tables they read.

Every codelet's twiddles are named by (layer, block) of the whole transform
(`TableRows`): a Rows sub-pass's table row k holds the 2^r - 1 twiddles of
the block k at its first layer, by layer and block inside; a leaf's row c
the entries its kernel reads (`codelets.ArgumentTwiddles`), for leaf c.
`twiddle` gives each one's value from the transform's maths alone, and the
multiplication strategy its stored form: the tables the C driver builds at
load time, and the tests compare entry by entry (`table_values`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.bundle import Function
from ...core.compile_cache import CompileCache
from ...core.contract import Bound, Values
from ...ir.instr import Kernel
from ...machine.registers import VECTOR
from ...machine.target import Target
from ...passes.pipeline import Compiled, compile_kernel
from .codelets import ArgumentTwiddles, build_rows, leaf_contract, rows_contract, twiddle_args, twiddle_bound
from .design import design, isa_design
from .kernels import build_ntt, kernel_builder
from .layout import top_pass_layers
from .contracts import basemul_contract, basemul_summary, forward_contract, inverse_contract
from .maths import RING_CONSTANT, NttMath, ring_words
from .params import NttParams
from .plan import Leaf, Plan, Rows, Stage, SubPass, block_stage, plan_transform
from .schedule import Arithmetic, TwiddleRange, forward_input, inverse_input, schedule

# leaves of at most this many coefficients: each verified in seconds, their code rolled to a few KiB
LEAF_BITS = 10
UNIT = "unit"  # the manifest field naming the C file a driver function is defined in


def unit_file(p: NttParams) -> str:
    return f"{p.name}_plan.c"


def rows_radix(t: Target) -> int:
    """Layers a Rows codelet does: 16 rows where 32 vector registers hold a vector each (AVX-512), else what
    the unrolled kernels' top passes do (8 rows, or 2 where lanes live on general registers)."""
    per_vector = t.isa.registers_per_vector(t.lanes, t.lane_bits)
    return 4 if per_vector == 1 and len(t.pool(VECTOR)) >= 32 else top_pass_layers(per_vector)


def leaf_params(p: NttParams, size: int) -> NttParams:
    """The parameters of a leaf's unrolled kernel: `size` coefficients, every layer of the leaf."""
    return dataclasses.replace(p, n=size, layers=size.bit_length() - 1 - (p.n.bit_length() - 1 - p.layers))


def transform_plan(p: NttParams, t: Target) -> Plan:
    return plan_transform(p.n, 1, t.lanes, t.lane_bytes, rows_radix(t), leaf_max=1 << LEAF_BITS)


@dataclass(frozen=True)
class Call:
    """A sub-pass of a planned transform as it runs: its stage, its codelet, and what its table holds:
    per row, the (layer, block) of each entry, rows `row_stride` blocks apart at the sub-pass's first layer
    (Rows: entry (t, j) of row k is (first + t, k * 2^t + j); leaf: the kernel's entries, shifted to leaf k)."""

    stage: Stage
    sub: SubPass
    function: Function
    entries: tuple[tuple[int, int], ...]  # of row 0, (layer, block)
    rows: int  # table rows: one per block at the sub-pass's first layer
    scale_layer: int | None  # the layer whose twiddles carry the inverse's scale (None: none)
    arrays: tuple[int, ...] = (0,)  # the transform's argument each array argument of the codelet is a part of

    def entry(self, row: int, k: int) -> tuple[int, int]:
        layer, block = self.entries[k]
        return layer, block + (row << (layer - self.sub.first))


@dataclass(frozen=True)
class PlannedDirection:
    direction: str
    calls: tuple[Call, ...]  # in the order they run
    input_bound: Bound
    output_bound: Bound


def _symbol(p: NttParams, t: Target, direction: str, name: str) -> str:
    return f"{p.prefix}_ntt_{direction}_{name}_{t.isa.name}"


def _compile(p: NttParams, t: Target, ar: Arithmetic, b, symbol: str, contract, cache: CompileCache) -> Compiled:
    return compile_kernel(b, symbol, contract, t, modulus=p.q, signed=ar.mul.signed,
                          shoup_pairs=twiddle_args(ar).shoup_pairs, cache=cache)


@dataclass(frozen=True)
class Recipe:
    """How one codelet of a direction is made: its symbol, where it runs (stage, sub-pass), and for a given
    input bound its builder, contract and table row entries (`make`); the inverse's scale where it carries it."""

    symbol: str
    stage: Stage
    sub: SubPass
    scale: int | None

    def make(self, p: NttParams, t: Target, ar: Arithmetic, direction: str, bound: Bound, finish=None):
        """(builder, contract, entries of table row 0) for inputs in `bound`; a leaf's outputs reduced by
        `finish` (a reducer, or `kernels.WhereAbove`) where given."""
        b = kernel_builder(ar.layout)
        c = self.sub.codelet
        top = bound.magnitude if ar.mul.signed else bound.hi
        if isinstance(c, Leaf):
            twiddles = ArgumentTwiddles(b, ar)
            s = schedule(ar, p.policy, direction, top, twiddles=TwiddleRange(twiddle_bound(ar).magnitude))
            build_ntt(b, ar, s, "", finish, 1, twiddles=twiddles, scaled=False)
            entries = tuple((self.sub.first + layer, block) for layer, block in twiddles.entries)
            return b, leaf_contract(t, ar, c.size, len(entries), bound), entries
        build_rows(b, ar, c, t.lanes, direction == "inverse", top, self.scale)
        entries = tuple((self.sub.first + k, j) for k in range(c.radix_bits) for j in range(1 << k))
        return b, rows_contract(t, ar, c, bound), entries

    def summary(self, p: NttParams, direction: str) -> str:
        c = self.sub.codelet
        if isinstance(c, Leaf):
            return (f"{direction} layers {self.sub.first}..{p.layers - 1} of a block of {c.size} coefficients, "
                    "twiddles from w")
        return (f"{direction} layers {self.sub.first}..{self.sub.first + c.radix_bits - 1} of {1 << c.radix_bits} "
                f"rows {c.stride} elements apart, {c.width} elements each, twiddles from w")

    def rows(self) -> int:
        """The table's rows: one per block at the sub-pass's first layer."""
        return self.sub.tile_blocks * self.stage.tiles // self.stage.low_groups


def recipes(p: NttParams, t: Target, direction: str) -> tuple[Recipe, ...]:
    """The codelets of one direction, in the order they run."""
    plan = transform_plan(p, t)
    ar = leaf_design(p, t)
    subs = list(enumerate(plan.subpasses))
    if direction == "inverse":
        subs.reverse()
    scale = transform_math(p).inverse_scale(ar.mul.r) if direction == "inverse" else None
    return tuple(Recipe(_symbol(p, t, direction, "leaf" if isinstance(sub.codelet, Leaf) else f"rows{index}"),
                        stage, sub, scale if sub.first == 0 and isinstance(sub.codelet, Rows) else None)
                 for index, (stage, sub) in subs)


def transform_math(p: NttParams) -> NttMath:
    """The maths of the whole transform (the leaves' own is of their size)."""
    return NttMath(p.n, p.q, p.layers, p.ring, p.coset)


def leaf_design(p: NttParams, t: Target) -> Arithmetic:
    """The arithmetic every codelet of `t` uses: the leaf's design (strategy, reducer, layout)."""
    return design(leaf_params(p, transform_plan(p, t).stages[-1].subpasses[0].codelet.size), t)


def build_direction(p: NttParams, t: Target, direction: str, cache: CompileCache) -> PlannedDirection:
    """Every codelet of one direction, built in the order they run, each proven for what the one before it
    proved it leaves."""
    ar = leaf_design(p, t)
    signed = ar.mul.signed
    start = forward_input(p.q, signed) if direction == "forward" else inverse_input(p.width, p.q, signed)
    bound = start
    calls = []
    made = recipes(p, t, direction)
    # the forward's last codelet leaves what base multiplication takes as it is (its signed lanes, where a
    # Shoup bundle multiplies there), reducing its outputs where they need it: the cheapest that fits
    d = isa_design(leaf_params(p, ar.layout.n), t, ar)
    for recipe in made:
        last = recipe is made[-1] and direction == "forward"
        for finish in (d.ntt_finishers["lazy"] if last else (None,)):
            b, contract, entries = recipe.make(p, t, ar, direction, bound, finish)
            compiled = _compile(p, t, ar, b, recipe.symbol, contract, cache)
            if not last or d.basemul_takes_as_it_is(compiled.contract.arg("a").ensures.bound):
                break
        fn = Function(compiled.kernel, "codelet", compiled.contract, recipe.summary(p, direction),
                      (("n", p.n), ("q", p.q)), internal=True)
        calls.append(Call(recipe.stage, recipe.sub, fn, entries, recipe.rows(),
                          recipe.sub.first if recipe.scale is not None else None))
        bound = compiled.contract.arg("a").ensures.bound
    return PlannedDirection(direction, tuple(calls), start, bound)


# --- the twiddles' values --------------------------------------------------------------------------------

def twiddle(math: NttMath, layer: int, block: int, inverse: bool) -> int:
    """The twiddle of `layer`'s butterflies in `block` (of 2^layer) of the transform `math` (`twiddle_value`)."""
    return twiddle_value(math.q, math.n, math.root_bits, math.psi, RING_CONSTANT[math.ring] == -1, math.coset, layer,
                         block, inverse)


def twiddle_value(q: int, n: int, root_bits: int, psi: int, negacyclic: bool, coset: int, layer: int, block: int,
                  inverse: bool) -> int:
    """s = g^m psi^(e/2), m = n / 2^(layer+1), psi^e the block's root (`NttMath`), or its inverse; in closed
    form e = 2^(K-1-l) (2 brv_l(b) + 1) in the negacyclic ring, 2^(K-l) brv_l(b) in the cyclic one, K the
    root's bits. The C unit computes the same (templates/ntt_plan.j2)."""
    rev = int(format(block, f"0{layer}b")[::-1], 2) if layer else 0
    e = (1 << (root_bits - 1 - layer)) * (2 * rev + 1) if negacyclic else (1 << (root_bits - layer)) * rev
    s = pow(coset, n >> (layer + 1), q) * pow(psi, e // 2, q) % q
    return pow(s, -1, q) if inverse else s


def table_values(math: NttMath, ar: Arithmetic, call: Call, inverse: bool) -> tuple[list[int], list[int] | None]:
    """The table `call` reads, every row: w (and Shoup's w') of each entry, as the strategy stores them."""
    scale = math.inverse_scale(ar.mul.r)
    w, wp = [], []
    for row in range(call.rows):
        for k in range(len(call.entries)):
            layer, block = call.entry(row, k)
            s = twiddle(math, layer, block, inverse)
            if layer == call.scale_layer:
                s = s * scale % math.q
            c = ar.mul.constant(s)
            w.append(c.w)
            if twiddle_args(ar).paired:
                wp.append(c.wp)
    return w, (wp if twiddle_args(ar).paired else None)



@dataclass(frozen=True)
class PlannedLayout:
    """The forward output order of a planned transform, compactly: position p holds the value at coefficient
    index (p // leaf) * leaf + leaf_order[p % leaf] of the in-place Cooley–Tukey order, whose index i is the
    evaluation at zeta_i = g * psi^(2 brv(i) + 1) (negacyclic) or g * omega^brv(i) (cyclic), brv on L bits."""

    leaf: int
    leaf_order: tuple[int, ...]
    order: str
    root: int
    ring: str
    coset: int

    def manifest(self) -> dict:
        return {"order": self.order, "d": 1, "planned": {"leaf": self.leaf, "leaf_order": list(self.leaf_order),
                                                         "root": self.root, "ring": self.ring, "coset": self.coset}}

    def index(self, position: int) -> int:
        return position // self.leaf * self.leaf + self.leaf_order[position % self.leaf]


@dataclass(frozen=True)
class Driver:
    """What the C unit runs for a planned transform of one ISA: its calls, in order, and what their
    twiddle tables hold (`table_values` of the transform's maths in the strategy `ar`'s stored form)."""

    direction: str
    calls: tuple[Call, ...]
    math: NttMath
    ar: Arithmetic


def planned_layout(p: NttParams, t: Target) -> PlannedLayout:
    ar = leaf_design(p, t)
    math = transform_math(p)
    return PlannedLayout(ar.layout.n, ar.layout.output_order, p.order, math.psi, p.ring, p.coset)


def planned_functions(p: NttParams, t: Target, cache: CompileCache) -> list[Function]:
    """The forward and inverse transforms of `t` (C drivers over their codelets) and the codelets."""
    ar = leaf_design(p, t)
    math = transform_math(p)
    lay = planned_layout(p, t)
    out, codelets = [], []
    for direction in ("forward", "inverse"):
        built = build_direction(p, t, direction, cache)
        codelets += [c.function for c in built.calls]
        signed = ar.mul.signed
        contract = (forward_contract(p, t, 1, lay, built.input_bound, signed) if direction == "forward" else
                    inverse_contract(p, t, built.input_bound, ar.mul.r, signed))
        contract = contract.proven({0: built.output_bound})
        kernels = [c.function.kernel for c in built.calls]
        signature = Kernel(f"{p.prefix}_ntt_{direction}_{t.isa.name}", contract.specs, (), (), t,
                           frozenset().union(*(k.extensions for k in kernels)),
                           constant_time=all(k.constant_time for k in kernels))
        stages = len(transform_plan(p, t).stages)
        summary = (f"{direction} {ring_words(p.ring, p.coset)} NTT of a[{p.n}] in place: {stages} stages of "
                   f"verified codelets (C driver, {p.name}_plan.c)")
        out.append(Function(signature, f"ntt_{direction}", contract, summary, (("n", p.n), ("q", p.q)),
                            ((UNIT, unit_file(p)),), driver=Driver(direction, built.calls, math, ar)))
    return out + codelets


def planned_basemul(p: NttParams, t: Target, forward_out: Bound, basemul_block, cache: CompileCache) -> list[Function]:
    """Base multiplication over n (blocks of degree 1: element-wise products): the leaf-sized kernel
    `basemul_block(p_block, forward_bound)` (built as the unrolled sets' is, its own symbol) called on each
    block of the arrays by the C unit."""
    ar = leaf_design(p, t)
    size = ar.layout.n
    block_p = dataclasses.replace(leaf_params(p, size), prefix=f"{p.prefix}_block")
    block = dataclasses.replace(basemul_block(block_p, t, forward_out, cache), internal=True)
    signed = ar.mul.signed
    stage = block_stage(p.n, size)
    output = block.contract.manifest_output()
    contract = basemul_contract(p, t, 1, 1, Values(forward_out, layout="ntt_forward output"),
                                output.get("representation", "lazy"), ar.mul.r, signed)
    contract = contract.proven({0: block.contract.arg("r").ensures.bound})
    signature = Kernel(f"{p.prefix}_basemul_{t.isa.name}", contract.specs, (), (), t, block.kernel.extensions,
                       constant_time=block.kernel.constant_time)
    call = Call(stage, stage.subpasses[0], block, (), 0, None, (0, 1, 2))
    return [Function(signature, "basemul", contract, basemul_summary(1, 1) + f" (blocks of {size}, C driver)",
                     (("n", p.n), ("q", p.q)), ((UNIT, unit_file(p)),),
                     driver=Driver("basemul", (call,), transform_math(p), ar)), block]
