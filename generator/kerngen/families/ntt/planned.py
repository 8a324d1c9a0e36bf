"""A planned transform for one ISA: the plan (`plan`), its codelets built and
verified in the order they run, each taking what the one before it proved
it leaves (the composition check), and the twiddle tables they read.

A planned function runs steps: the stages of one or more transforms
(`Transform`: a plan, the maths its twiddles come from, Cooley–Tukey or
Gentleman–Sande butterflies) and permutations between them. Every codelet's
twiddles are named by (layer, block) of its transform (`Call.entry`): a Rows
sub-pass's table row k holds the 2^r - 1 twiddles of the block k at its
first layer, by layer and block inside; a leaf's row c the entries its
kernel reads (`codelets.ArgumentTwiddles`), for leaf c. `twiddle` gives each
one's value from the transform's maths alone, and the multiplication
strategy its stored form: the tables the C driver builds at load time, and
the tests compare entry by entry (`table_values`). Codelets that come out
the same (geometry, butterflies, input bound, scale, final reduction) are
built once and shared by every step that runs them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...core.bundle import Function
from ...core.compile_cache import CompileCache
from ...core.contract import Bound
from ...errors import VerifyError
from ...machine.registers import VECTOR
from ...machine.target import Target
from ...passes.pipeline import Compiled, compile_kernel
from .codelets import (ArgumentTwiddles, build_rows, build_spread, compact_twin, leaf_contract, moved_rows,
                       rows_contract, twiddle_args, twiddle_bound)
from .design import design, isa_design
from .kernels import build_ntt, kernel_builder
from .layout import top_pass_layers
from .maths import RING_CONSTANT, NttMath, max_layers
from .params import NttParams
from .plan import Leaf, Permute, Plan, Rows, Spread, Stage, SubPass, plan_transform
from .schedule import Arithmetic, TwiddleRange, schedule

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
    """The parameters of an unrolled kernel of `size` coefficients, every layer (a leaf, or the design the
    codelets share): one polynomial, in the in-place order where the whole transform's is natural (the
    permutation after the stages makes that)."""
    return dataclasses.replace(p, n=size, layers=size.bit_length() - 1 - (p.n.bit_length() - 1 - p.layers),
                               order="standard" if p.order == "natural" else p.order, columns=1, lde=None,
                               root=None, generator=None)


def transform_plan(p: NttParams, t: Target, n: int | None = None, first: int = 0, columns: int | None = None) -> Plan:
    """The plan of the set's transform (of `n` rows of `columns`, from layer `first`, where given)."""
    return plan_transform(n or p.n, columns or p.columns, t.lanes, t.lane_bytes, rows_radix(t),
                          leaf_max=1 << LEAF_BITS, first=first)


def design_size(p: NttParams, t: Target) -> int:
    """The unrolled size whose design (strategy, reducer) every codelet of `t` shares: the leaf's, or on
    columns the largest power of two up to a leaf dividing n * columns that q's roots allow."""
    last = transform_plan(p, t).stages[-1].subpasses[0].codelet
    if isinstance(last, Leaf):
        return last.size
    elements = p.n * p.columns
    bits = min(LEAF_BITS, (elements & -elements).bit_length() - 1)
    return 1 << max_layers(1 << bits, p.q, p.ring)


def leaf_design(p: NttParams, t: Target) -> Arithmetic:
    """The arithmetic every codelet of `t` uses: the leaf's design (strategy, reducer, layout)."""
    return design(leaf_params(p, design_size(p, t)), t)


def transform_math(p: NttParams) -> NttMath:
    """The maths of the whole transform (the leaves' own is of their size)."""
    return NttMath(p.n, p.q, p.layers, p.ring, p.coset, p.psi)


@dataclass(frozen=True)
class Transform:
    """One transform a planned function runs: `plan`'s stages, the maths its twiddles come from, its
    butterflies (inverse: Gentleman–Sande, layers backwards, twiddles inverted) and the constant its layer 0
    scales by (an inverse's). `name` is its codelets' symbols' middle."""

    name: str
    plan: Plan
    math: NttMath
    inverse: bool
    scale: int | None = None
    invert: bool | None = None  # whether its twiddles are inverted, where not as its butterflies say

    @property
    def inverted(self) -> bool:
        return self.inverse if self.invert is None else self.invert

    def steps(self) -> list[Step]:
        stages = self.plan.stages[::-1] if self.inverse else self.plan.stages
        return [Step(st, st.subpasses[::-1] if self.inverse else st.subpasses, self) for st in stages]


@dataclass(frozen=True)
class Expansion:
    """The first `bits` layers of a Gentleman–Sande transform of N = n 2^bits rows (`math`: its root, no
    coset) on bit-reversed coefficients of degree below n, zero rows between them: row m of n becomes rows
    m 2^bits + t, each row m times a product of twiddles (`factor`), with the coset's twist shift^j of
    coefficient j = brv(m) and 1/n (the transposed inverse before it leaves n times the coefficients)."""

    name: str
    math: NttMath
    shift: int
    bits: int
    inverse = False
    scale = None

    def factor(self, m: int, t: int) -> int:
        q, n_bits = self.math.q, self.math.layers - self.bits
        return spread_factor(q, self.shift, pow(1 << n_bits, -1, q), n_bits, self.bits, m, t,
                             lambda layer, block: twiddle(self.math, layer, block, False))


@dataclass(frozen=True)
class Step:
    """A stage as a function runs it: its sub-passes in that order, of `transform` (None: a permutation);
    `arrays`: the function's argument each array argument of the codelets is a part of."""

    stage: Stage
    subs: tuple[SubPass, ...]
    transform: Transform | Expansion | None
    arrays: tuple[int, ...] = (0,)
    beside: bool = False  # the same layers as the step before on other rows: its inputs are what that one took


@dataclass(frozen=True)
class Call:
    """A sub-pass as it runs: its stage, its codelet (None: a permutation, C code), and what its table
    holds: per row, the (layer, block) of each entry, rows `row_stride` blocks apart at the sub-pass's first
    layer (Rows: entry (t, j) of row k is (first + t, k * 2^t + j); leaf: the kernel's entries, shifted to
    leaf k), their values from `math`, inverted where `inverse`."""

    stage: Stage
    sub: SubPass
    function: Function | None
    entries: tuple[tuple[int, int], ...]  # of row 0, (layer, block)
    rows: int  # table rows: one per block at the sub-pass's first layer
    scale_layer: int | None  # the layer whose twiddles carry `scale` (None: none)
    arrays: tuple[int, ...] = (0,)
    math: NttMath | None = None
    inverse: bool = False
    scale: int = 1
    expansion: Expansion | None = None  # a Spread's: its factors

    def entry(self, row: int, k: int) -> tuple[int, int]:
        layer, block = self.entries[k]
        return layer, block + (row << (layer - self.sub.first))


def _compile(p: NttParams, t: Target, ar: Arithmetic, b, symbol: str, contract, cache: CompileCache) -> Compiled:
    return compile_kernel(b, symbol, contract, t, modulus=p.q, signed=ar.mul.signed,
                          shoup_pairs=twiddle_args(ar).shoup_pairs, cache=cache)


def _codelet(p: NttParams, t: Target, ar: Arithmetic, r: Recipe, bound: Bound, finish, cache: CompileCache):
    """The codelet `r` compiled for inputs in `bound`, and its table row's entries. A Rows codelet whose rows
    are not adjacent is verified as its compact twin (`codelets.compact_twin`), and compiled through every
    other pass as it is: `codelets.moved_rows` proves the two streams the same but for the rows' addresses."""
    b, contract, entries = r.make(p, t, ar, bound, finish)
    c = r.sub.codelet
    if not isinstance(c, Rows) or c.stride == c.width:
        return _compile(p, t, ar, b, r.symbol, contract, cache), entries
    twin = dataclasses.replace(r, symbol=f"{p.prefix}_{r.direction}_rows{c.radix_bits}x{c.width}_twin_{t.isa.name}",
                               sub=dataclasses.replace(r.sub, codelet=compact_twin(c)))
    proven = _compile(p, t, ar, twin.make(p, t, ar, bound, finish)[0], twin.symbol,
                      rows_contract(t, ar, twin.sub.codelet, bound), cache)
    real = compile_kernel(b, r.symbol, contract, t, cache=cache)
    why = moved_rows(real.kernel.body, proven.kernel.body, c, t.lane_bytes)
    if why is not None:
        raise VerifyError(f"{r.symbol}: not the stream of its verified twin {twin.symbol} with the rows moved: {why}")
    return Compiled(real.kernel, contract.proven({0: proven.contract.arg("a").ensures.bound}), proven.proof), entries


@dataclass(frozen=True)
class Recipe:
    """How one codelet is made: its symbol, where it runs (stage, sub-pass), its transform; for a given input
    bound its builder, contract and table row entries (`make`)."""

    symbol: str
    stage: Stage
    sub: SubPass
    transform: Transform

    @property
    def scale(self) -> int | None:
        """The constant its layer 0 scales by: the transform's, on the Rows codelet holding layer 0."""
        return self.transform.scale if self.sub.first == 0 and isinstance(self.sub.codelet, Rows) else None

    @property
    def direction(self) -> str:
        return "inverse" if self.transform.inverse else "forward"

    def make(self, p: NttParams, t: Target, ar: Arithmetic, bound: Bound, finish=None):
        """(builder, contract, entries of table row 0 relative to the sub-pass's first layer) for inputs in
        `bound`; the outputs reduced by `finish` (a reducer, or `kernels.WhereAbove`) where given."""
        b = kernel_builder(ar.layout)
        c = self.sub.codelet
        top = bound.magnitude if ar.mul.signed else bound.hi
        if isinstance(c, Spread):
            build_spread(b, ar, c, t.lanes, top)
            return b, rows_contract(t, ar, c, bound), tuple((0, k) for k in range(c.twiddles))
        if isinstance(c, Leaf):
            twiddles = ArgumentTwiddles(b, ar)
            s = schedule(ar, p.policy, self.direction, top, twiddles=TwiddleRange(twiddle_bound(ar).magnitude))
            build_ntt(b, ar, s, "", finish, 1, twiddles=twiddles, scaled=False)
            return b, leaf_contract(t, ar, c.size, len(twiddles.entries), bound), tuple(twiddles.entries)
        build_rows(b, ar, c, t.lanes, self.transform.inverse, top, self.scale, finish)
        entries = tuple((k, j) for k in range(c.radix_bits) for j in range(1 << k))
        return b, rows_contract(t, ar, c, bound), entries

    def summary(self, p: NttParams) -> str:
        c = self.sub.codelet
        if isinstance(c, Spread):
            return (f"a row times {c.twiddles} factors into {c.twiddles} rows {c.pitch} elements apart, {c.width} "
                    "elements each (a coset extension's zero rows), factors from w")
        if isinstance(c, Leaf):
            return (f"{self.direction} layers {self.sub.first}..{self.sub.first + c.layers - 1} of a block of "
                    f"{c.size} coefficients, twiddles from w")
        return (f"{self.direction} layers {self.sub.first}..{self.sub.first + c.radix_bits - 1} of "
                f"{1 << c.radix_bits} rows {c.stride} elements apart, {c.width} elements each, twiddles from w")

    def rows(self) -> int:
        """The table's rows: one per block at the sub-pass's first layer (from block 0)."""
        return self.sub.tile_blocks * self.stage.blocks


def recipe(p: NttParams, t: Target, step: Step, sub: SubPass) -> Recipe:
    tr = step.transform
    if isinstance(tr, Expansion):
        return Recipe(f"{p.prefix}_{tr.name}_{t.isa.name}", step.stage, sub, tr)
    index = [s for _, s in tr.plan.subpasses].index(sub)
    name = "leaf" if isinstance(sub.codelet, Leaf) else f"rows{index}"
    return Recipe(f"{p.prefix}_{tr.name}_{name}_{t.isa.name}", step.stage, sub, tr)


def codelet_recipes(p: NttParams, t: Target, steps: list[Step]) -> list[Recipe]:
    """Every codelet's recipe of `steps`, in the order they run."""
    return [recipe(p, t, step, sub) for step in steps if step.transform is not None for sub in step.subs]


@dataclass(frozen=True)
class Chain:
    calls: tuple[Call, ...]  # in the order they run
    output_bound: Bound


def build_steps(p: NttParams, t: Target, steps: list[Step], start: Bound, cache: CompileCache, made: dict,
                finish_last: bool = False) -> Chain:
    """Every codelet of `steps`, built in the order they run, each proven for what the one before it proved
    it leaves; codelets already in `made` (by what makes them) are shared. `finish_last`: the last codelet
    leaves what base multiplication takes as it is (its signed lanes, where a Shoup bundle multiplies
    there), reducing its outputs where they need it: the cheapest that fits."""
    ar = leaf_design(p, t)
    bound, calls = start, []
    last = [(step, sub) for step in steps if step.transform is not None for sub in step.subs][-1]
    d = isa_design(leaf_params(p, ar.layout.n), t, ar)
    symbols = {key: fn.symbol for key, (fn, _) in made.items()}
    before = after = bound
    for step in steps:
        if step.beside:
            bound, after = before, bound
        else:
            before, after = bound, None
        for sub in step.subs:
            if step.transform is None:
                calls.append(Call(step.stage, sub, None, (), 0, None, step.arrays))
                continue
            r = recipe(p, t, step, sub)
            finishing = finish_last and (step, sub) == last
            key = (sub.codelet, r.transform.inverse, r.scale, bound, finishing)
            if key not in made:
                symbol = r.symbol
                while symbol in symbols.values():  # the same place, another input bound: a codelet of its own
                    symbol = f"{r.symbol.removesuffix('_' + t.isa.name)}b_{t.isa.name}"
                    r = dataclasses.replace(r, symbol=symbol)
                for finish in (d.ntt_finishers["lazy"] if finishing else (None,)):
                    compiled, entries = _codelet(p, t, ar, r, bound, finish, cache)
                    if not finishing or d.basemul_takes_as_it_is(compiled.contract.arg("a").ensures.bound):
                        break
                fn = Function(compiled.kernel, "codelet", compiled.contract, r.summary(p),
                              (("n", p.n), ("q", p.q)), internal=True)
                made[key] = (fn, entries)
                symbols[key] = fn.symbol
            fn, entries = made[key]
            tr = r.transform
            expansion = tr if isinstance(tr, Expansion) else None
            calls.append(Call(step.stage, sub, fn, tuple((sub.first + k, j) for k, j in entries), r.rows(),
                              sub.first if r.scale is not None else None, step.arrays, tr.math,
                              expansion is None and tr.inverted, tr.scale if r.scale is not None else 1, expansion))
            bound = fn.contract.arg("a").ensures.bound
        if after is not None:
            bound = Bound(min(bound.lo, after.lo), max(bound.hi, after.hi))
    return Chain(tuple(calls), bound)


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


def spread_factor(q: int, shift: int, n_inverse: int, row_bits: int, bits: int, m: int, t: int, twiddle_of) -> int:
    """Factor t of row m of an `Expansion`: shift^brv(m) (brv of `row_bits` bits) times `n_inverse`, times the
    twiddle of each of the first `bits` Gentleman–Sande layers (of row_bits + bits) that t's bits name,
    `twiddle_of(layer, block)`. The C unit computes the same (templates/ntt_plan.j2)."""
    layers = row_bits + bits
    rev = int(format(m, f"0{row_bits}b")[::-1], 2) if row_bits else 0
    v = pow(shift, rev, q) * n_inverse % q
    for u in range(bits):
        if t >> u & 1:
            v = v * twiddle_of(layers - 1 - u, m << (bits - 1 - u)) % q
    return v


def table_values(ar: Arithmetic, call: Call) -> tuple[list[int], list[int] | None]:
    """The table `call` reads, every row: w (and Shoup's w') of each entry, as the strategy stores them."""
    math = call.math
    w, wp = [], []
    for row in range(call.rows):
        for k in range(len(call.entries)):
            layer, block = call.entry(row, k)
            if call.expansion is not None:
                s = call.expansion.factor(row, k)
            else:
                s = twiddle(math, layer, block, call.inverse)
            if layer == call.scale_layer:
                s = s * call.scale % math.q
            c = ar.mul.constant(s)
            w.append(c.w)
            if twiddle_args(ar).paired:
                wp.append(c.wp)
    return w, (wp if twiddle_args(ar).paired else None)


@dataclass(frozen=True)
class Driver:
    """What the C unit runs for a planned function of one ISA: its calls, in order (the twiddle tables they
    read: `table_values` in the strategy `ar`'s stored form)."""

    direction: str  # "forward", "inverse", "basemul", "lde"
    calls: tuple[Call, ...]
    ar: Arithmetic

    @property
    def permutes(self) -> bool:
        return any(isinstance(c.sub.codelet, Permute) for c in self.calls)
