"""The NTT family's parameter schema: n, q, width, layers, reduction policy, reducer."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ...core.contract import Bound
from ...errors import ParamError, toml_value
from ...core.params import COMMON_KEYS, Common, Option, Overrides, check_keys, choose_isas, option_value, require
from ...machine.isa import AVX2, AVX512, AVX512VL, SCALAR, SSE
from ...machine.target import Target
from ...passes.special64 import MAX_B, special_form
from .batches import Lde, parse_columns, parse_lde
from .maths import EXTRA_ROOT_BITS, RINGS, max_layers
from .roots import RootChoice, parse_root

POLICIES = ("eager", "layer", "index", "minimal")
REDUCERS = ("auto", "barrett", "special")
MULS = ("auto", "montgomery", "shoup", "special")  # multiplication strategies (auto: the cheaper by the cost model)
ORDERS = ("fastest", "standard", "natural")  # of the NTT domain (layout.plan)
WIDTHS = (16, 32, 64)
MIN_Q = {16: 3, 32: 1 << 20, 64: 1 << 32}  # the smallest q per lane width (wider: where the proofs stay quick)
MONTGOMERY_WIDTHS = (16, 32)  # lanes with the high-half or widening signed products Montgomery's product needs
# lanes whose Shoup products are reduced below q where Harvey's 4q leaves them (`shoup_limit`): q up to 2^31
# on 32-bit lanes, which Montgomery's signed sums leave; on 16-bit lanes Montgomery's keep q up to 2^15
SHOUP_BELOW_Q_WIDTHS = (32,)
AUTO_ISA = "auto"
ISAS = (AVX2.name, AVX512.name, AVX512VL.name, SSE.name, SCALAR.name, AUTO_ISA)  # the first is the default
SCALAR_MIN_N = 4  # n = 2 has vectors of one lane, which the scalar legalisation reads past (not built)
SCALAR_WIDTHS = (64,)  # general registers hold one lane each: only 64-bit lanes fill them
# what isa = "auto" builds, per lane width, best first (the dispatch unit calls the first the CPU runs), as
# measured (docs/performance.md): AVX2 first everywhere; then SSE for 16- and 32-bit lanes, while
# at 64 bits SSE's two lanes are level with plain C and the scalar code runs 1.2-1.6x NFLlib's and HEXL's
AUTO_ISAS = {16: (AVX2.name, SSE.name), 32: (AVX2.name, SSE.name), 64: (AVX2.name, SCALAR.name)}
MAX_BLOCK_BITS = 3  # base blocks of degree at most 8 (base multiplication d = 1, 2, 4, 8)
KEYS = COMMON_KEYS | {"n", "q", "width", "layers", "reduction", "reducer", "mul", "order", "basemul_acc", "output"}
KEYS |= {"ring", "coset"}  # the ring x^n + 1 or x^n - 1, and a coset to evaluate on (`_ring_and_coset`)
KEYS |= {"order_isa"}  # the ISA whose fastest order is the NTT domain (`_order_isa`)
KEYS |= {"root", "generator"}  # the root of unity chosen (`roots`)
KEYS |= {"columns", "lde"}  # batches of polynomials as a matrix's columns, their coset extension (`batches`)
NARROW_LANES = 16  # lanes this wide take inverse inputs in half the signed range (inverse_input_top)
ACC_COUNTS = range(2, 9)  # basemul_acc: sums of 2 to 8 products
# transforms of more coefficients are planned (`planned`): stages of loops over verified codelets, up to this
UNROLLED_MAX = 4096
PLANNED_MAX = 1 << 24
OUTPUTS = ("lazy", "centred", "canonical")  # what a kernel promises of its output: proven bound, (-q, q), [0, q)
# (or a number B: |value| <= B, the room a scheme needs for its next addition; see `_output_bound`)
OUTPUT_KERNELS = ("forward", "basemul", "inverse")  # the kernels `output` chooses for (basemul: also basemul_acc)
POLICY = Option("policy", "reduction", POLICIES, "index",
                "reduction policy for NTT kernels (default: the file's, else index)")
REDUCER = Option("reducer", "reducer", REDUCERS, "auto",
                 "reduction used by NTT schedules: barrett, special (shifts and adds, for q of sparse signed-binary "
                 "shape such as 7681 = 2^13 - 2^9 + 1) or auto (cheapest by the cost model)")
ORDER = Option("order", "order", ORDERS, ORDERS[0],
               "order of the NTT domain: fastest (default; whatever the kernels leave, in the manifest's layout), "
               "standard (the in-place order FIPS 203 and FIPS 204 specify: block j, mod x^d - psi^(2 brv(j)+1), at "
               "positions d*j..d*j+d-1; in the cyclic ring x^d - omega^brv(j), a radix-2 DIT NTT's order) or natural "
               "(blocks in the order of psi^(2j+1), cyclic omega^j)")
OPTIONS = (POLICY, REDUCER, ORDER)  # the command line's --policy, --reducer, --order
# the kinds of the family's functions (each a manifest entry's `kind`; codelet: a part of a planned transform,
# which its driver calls; lde: a planned coset low-degree extension, the `lde` key's)
KINDS = frozenset({"ntt_forward", "ntt_inverse", "basemul", "basemul_acc", "reduce", "freeze", "mulmod_shoup",
                   "muladd_shoup", "codelet", "lde"})


@dataclass(frozen=True)
class NttParams:
    """NTT over Z_q[x]/(x^n+1) (negacyclic) or Z_q[x]/(x^n-1) (cyclic), on a coset of
    its points or not, on `width`-bit lanes."""

    name: str
    n: int
    q: int
    width: int
    isas: tuple[str, ...]  # every kernel is built for each, the first preferred
    layers: int  # NTT layers L; block degree d = n >> L
    policy: str
    reducer: str  # "auto", "barrett" or "special"
    mul: str  # "auto", "montgomery" or "shoup"
    order: str  # of the NTT domain: "fastest", "standard" or "natural" (layout.ORDERS)
    basemul_acc: tuple[int, ...]  # k of each r = sum of k base products kernel
    output: tuple[tuple[str, str | int], ...]  # (kernel, "lazy" | "centred" | "canonical" | B) for OUTPUT_KERNELS
    prefix: str
    source: str  # the file (or text) these came from, for messages
    targets: tuple[Target, ...]  # one per ISA, for the first ABI
    abis: tuple[str, ...]  # calling conventions (object files) the bundle is emitted for
    ring: str = RINGS[0]  # "negacyclic" or "cyclic" (maths.RINGS)
    coset: int = 1  # g: the NTT evaluates on g times the ring's points (1: no coset)
    order_isa: str | None = None  # the ISA whose fastest order is the NTT domain (None: the narrowest vectors')
    root: int | None = None  # the key root: psi, a primitive 2^K-th root of unity (`roots`)
    generator: int | None = None  # the key generator psi is derived from
    columns: int = 1  # the polynomials: columns of a row-major n x C matrix (`batches`)
    lde: Lde | None = None  # the coset extension built, if any

    family = "ntt"

    @property
    def d(self) -> int:
        return self.n >> self.layers

    @property
    def planned(self) -> bool:
        """Whether the transforms are planned (`planned`): stages of verified codelets, not one unrolled kernel;
        always for columns."""
        return self.n > UNROLLED_MAX or self.columns > 1

    @property
    def psi(self) -> int | None:
        """The root of unity chosen (None: the smallest primitive root): named, derived from the generator, or
        the extension's to the power 2^added_bits."""
        bits = self.layers + EXTRA_ROOT_BITS[self.ring]
        if self.root is not None or self.generator is not None:
            return RootChoice(self.root, self.generator).of_order(self.q, bits)
        return None if self.lde is None else pow(self.lde.root, 1 << self.lde.added_bits, self.q)

    @property
    def target(self) -> Target:
        """The first ISA's target (the layout and the NTT domain are the same for all)."""
        return self.targets[0]


def parse(table: dict, c: Common, overrides: Overrides) -> NttParams:
    src = c.source
    check_keys(src, table, KEYS, "ntt")
    width = table.get("width", WIDTHS[0])
    if isinstance(width, bool) or not isinstance(width, int):
        raise ParamError(src, "width", f"must be an integer, got {toml_value(width)}")
    if width not in WIDTHS:
        raise ParamError(src, "width", f"must be one of {', '.join(map(str, WIDTHS))} (the lane widths implemented), "
                                       f"got {width}")
    isas = choose_isas(src, table, overrides, ISAS, "ntt")
    by_auto = AUTO_ISA in isas
    if by_auto:
        if len(isas) > 1:
            raise ParamError(src, "isa", f"\"{AUTO_ISA}\" stands alone (it chooses the list), "
                                         f"got {toml_value(list(isas))}")
        isas = AUTO_ISAS[width]
    if SCALAR.name in isas and width not in SCALAR_WIDTHS:
        raise ParamError(src, "isa", f"\"{SCALAR.name}\" needs width = {' or '.join(map(str, SCALAR_WIDTHS))} "
                                     f"(one lane per general register), got width = {width}")
    n = require(src, table, "n", int, "a power of two")
    if n < 2 or n > PLANNED_MAX or n & (n - 1):
        raise ParamError(src, "n", f"must be a power of two between 2 and 2^{PLANNED_MAX.bit_length() - 1}, got {n}")
    if SCALAR.name in isas and n < SCALAR_MIN_N:
        if by_auto:  # auto chooses what builds
            isas = tuple(i for i in isas if i != SCALAR.name)
        else:
            raise ParamError(src, "isa", f"\"{SCALAR.name}\" needs n >= {SCALAR_MIN_N}: its kernels for vectors "
                                         f"of one lane (n = 2) are not built; use avx2 or sse, got n = {n}")
    q = require(src, table, "q", int, "an odd prime")
    if q < 3 or not sympy.isprime(q):
        raise ParamError(src, "q", f"must be an odd prime, got {q}")
    if width in MONTGOMERY_WIDTHS and q >= 1 << (width - 1):
        raise ParamError(src, "q", f"must be below 2^{width - 1} = {1 << (width - 1)} for {width}-bit lanes (q "
                                   f"in Montgomery's signed lanes, Shoup's remainders below 2q in unsigned ones), "
                                   f"got {q}")
    special = special_fits(width, q)
    if width not in MONTGOMERY_WIDTHS and not shoup_fits(width, q) and not special:
        raise ParamError(src, "q", f"must be below 2^{width - 2} = {1 << (width - 2)} for {width}-bit lanes "
                                   f"(Shoup's multiplication, Harvey's lazy values reach 4q), or of the form "
                                   f"2^{width} - 2^b + 1 with 1 <= b <= {MAX_B} (kept canonical, the lane's wrap "
                                   f"reducing: Goldilocks 2^64 - 2^32 + 1), got {q}")
    mul = table.get("mul", MULS[0])
    if mul not in MULS:
        raise ParamError(src, "mul", f"must be one of {', '.join(MULS)}, got {toml_value(mul)}")
    if mul == "montgomery" and width not in MONTGOMERY_WIDTHS:
        raise ParamError(src, "mul", f"\"montgomery\" needs {' or '.join(map(str, MONTGOMERY_WIDTHS))}-bit lanes (no "
                                     f"vector instruction multiplies signed {width}-bit lanes); use shoup or auto")
    if mul == "special" and not special:
        raise ParamError(src, "mul", f"\"special\" needs q = 2^64 - 2^b + 1 with 1 <= b <= {MAX_B} on 64-bit lanes, "
                                     f"got q = {q} on {width}-bit lanes; use auto")
    if mul == "shoup" and q >= shoup_limit(width):
        raise ParamError(src, "mul", f"\"shoup\" needs q < 2^{shoup_limit(width).bit_length() - 1} = "
                                     f"{shoup_limit(width)} on {width}-bit lanes (Harvey's lazy values reach 4q), got "
                                     f"q = {q}; use montgomery or auto")
    if q < MIN_Q[width]:
        raise ParamError(src, "q", f"must be at least 2^{MIN_Q[width].bit_length() - 1} for {width}-bit lanes, got "
                                   f"{q}: below that the SMT proofs of the {width}-bit reductions' ranges take the "
                                   f"solver too long; q < 2^15 fits 16-bit lanes (twice as many per register)")
    ring, coset = _ring_and_coset(src, table, n, q)
    extra = EXTRA_ROOT_BITS[ring]
    top = max_layers(n, q, ring)
    min_layers = max(1, (n.bit_length() - 1) - MAX_BLOCK_BITS)
    if top < min_layers:
        need = 1 << (min_layers + extra)
        raise ParamError(
            src, "q",
            f"q-1 = {q - 1} must be divisible by {need}: an NTT of degree n={n} needs at least {min_layers} layers "
            f"(base blocks of degree at most {n >> min_layers}), and q allows only {top}",
        )
    if "layers" in table:
        layers = require(src, table, "layers", int, "a positive integer")
        if not min_layers <= layers <= top:
            raise ParamError(src, "layers", f"must be between {min_layers} and {top} for n = {n}, q = {q}: at least "
                                            f"{min_layers} so that base blocks have degree at most {n >> min_layers}, "
                                            f"at most {top} because {'2^(layers+1)' if extra else '2^layers'} must "
                                            f"divide q-1 = {q - 1} (the {ring} ring) and "
                                            f"2^layers must divide n; got {layers}")
    else:
        layers = top
    targets = c.targets(isas, width)
    columns = parse_columns(src, table, targets)
    planned = n > UNROLLED_MAX or columns > 1
    if planned and layers != n.bit_length() - 1:
        what = f"n = {n} is a planned transform" if n > UNROLLED_MAX else f"{columns} columns are transformed by a plan"
        raise ParamError(src, "q", f"{what}, which runs every layer (blocks of degree 1): "
                                   f"q-1 = {q - 1} must be divisible by {1 << (n.bit_length() - 1 + extra)} (the "
                                   f"{ring} ring), and q allows {top} layers")
    pol = option_value(src, table, overrides, POLICY)
    red = option_value(src, table, overrides, REDUCER)
    given = f" from --{REDUCER.name}" if overrides.option(REDUCER.name) is not None else ""
    if mul == "shoup" and red != "auto":
        raise ParamError(src, "reducer", f"{toml_value(red)}{given} reduces signed lanes; with mul = \"shoup\" the lanes are "
                                         "unsigned and the reductions Harvey's: leave reducer at auto")
    if red != "auto" and width not in MONTGOMERY_WIDTHS:
        raise ParamError(src, "reducer", f"{toml_value(red)}{given} reduces the signed lanes of Montgomery's multiplication; "
                                         f"{width}-bit lanes are unsigned, multiplied by Shoup's with Harvey's "
                                         "reductions: leave reducer at auto")
    order = option_value(src, table, overrides, ORDER)
    acc = table.get("basemul_acc", [])
    if isinstance(acc, int) and not isinstance(acc, bool):
        acc = [acc]
    if (not isinstance(acc, list) or any(isinstance(k, bool) or not isinstance(k, int) or k not in ACC_COUNTS
                                         for k in acc)):
        raise ParamError(src, "basemul_acc", f"must be a list of sums to fuse, each k from {ACC_COUNTS[0]} to "
                                             f"{ACC_COUNTS[-1]} (e.g. [2, 3, 4]), got {toml_value(acc)}")
    if len(set(acc)) != len(acc):
        raise ParamError(src, "basemul_acc", f"names a k twice: {toml_value(acc)}")
    if special and acc:
        raise ParamError(src, "basemul_acc", f"sums of products are not built for q = {q} (values kept canonical "
                                             "by the special form's templates): leave basemul_acc out")
    outputs = _outputs(src, table)
    if planned:
        _planned_choices(src, acc, outputs)
    for kernel, given in outputs:
        if isinstance(given, int):
            _output_bound(src, kernel, given, mul)
    inverse_top = inverse_input_top(width, q)
    only_montgomery = mul == "montgomery" or red != "auto" or q >= shoup_limit(width)
    if only_montgomery and not special and not montgomery_meets_inverse(width, q, dict(outputs)["basemul"]):
        raise ParamError(src, "output", f"basemul = {toml_value(dict(outputs)['basemul'])} needs "
                                        f"q - 1 <= {inverse_top}: the inverse NTT takes inputs in "
                                        f"[-{inverse_top}, {inverse_top}], and q = {q} "
                                        "puts base multiplication's outputs beyond them; use \"lazy\" (reduced "
                                        "only as far as the inverse needs)")
    bits = layers + extra
    roots = parse_root(src, table, q, bits, f"the {ring} NTT of n = {n} ({layers} layers)")
    lde = parse_lde(src, table, n, q, ring, coset, bits, roots, PLANNED_MAX)
    if lde is not None and not planned:
        raise ParamError(src, "lde", f"a coset extension is a planned transform: it needs columns > 1 or n above "
                                     f"{UNROLLED_MAX}")
    return NttParams(c.name, n, q, width, isas, layers, pol, red, mul, order, tuple(acc), outputs,
                     c.prefix, src, targets, c.abis, ring, coset, _order_isa(src, table, order, isas),
                     table.get("root"), roots.generator, columns, lde)


def _planned_choices(src: str, acc: list[int], outputs: tuple[tuple[str, str | int], ...]) -> None:
    """What a planned transform (n above UNROLLED_MAX, or columns) does not offer: fused sums of products,
    outputs other than lazy."""
    if acc:
        raise ParamError(src, "basemul_acc", f"fused sums of products are not built for planned transforms (n above "
                                             f"{UNROLLED_MAX}, or columns)")
    eager = [k for k, v in outputs if v != OUTPUTS[0]]
    if eager:
        raise ParamError(src, "output", f"{', '.join(eager)}: planned transforms (n above {UNROLLED_MAX}, or "
                                        "columns) leave lazy outputs; leave output out")


def _order_isa(src: str, table: dict, order: str, isas: tuple[str, ...]) -> str | None:
    """`order_isa`: the ISA whose fastest order the NTT domain is, one of the
    set's (None when absent: the narrowest vectors', `design.fastest_arrangement`)."""
    if "order_isa" not in table:
        return None
    named = table["order_isa"]
    if not isinstance(named, str) or named not in isas:
        raise ParamError(src, "order_isa", f"must name one of the ISAs built ({', '.join(map(toml_value, isas))}), "
                                           f"got {toml_value(named)}")
    if order != ORDERS[0]:
        raise ParamError(src, "order_isa", f"chooses among fastest orders, and order = {toml_value(order)} fixes "
                                           "the NTT domain: leave order_isa out")
    return named


def _ring_and_coset(src: str, table: dict, n: int, q: int) -> tuple[str, int]:
    """`ring` and `coset` (1 when absent). A coset g must be a unit (1 < g < q,
    q prime) whose g^n is not 1: else x^n - c g^n is the ring's own x^n - c and
    g times its points are those points again, in another order."""
    ring = table.get("ring", RINGS[0])
    if ring not in RINGS:
        raise ParamError(src, "ring", f"must be one of {', '.join(map(toml_value, RINGS))} (x^n + 1 or x^n - 1), "
                                      f"got {toml_value(ring)}")
    if "coset" not in table:
        return ring, 1
    g = table["coset"]
    if isinstance(g, bool) or not isinstance(g, int) or not 1 < g < q:
        raise ParamError(src, "coset", f"must be an integer g with 1 < g < q = {q} (the NTT evaluates on g times "
                                       f"the ring's points), got {toml_value(g)}")
    if pow(g, n, q) == 1:
        gen = sympy.primitive_root(q)
        hint = f", e.g. {gen} (a generator of the nonzero residues)" if pow(gen, n, q) != 1 else ""
        raise ParamError(src, "coset", f"g = {g} has g^{n} = 1 mod {q}: g times the ring's points are those points "
                                       f"again (no coset); choose g with g^{n} != 1 mod {q}{hint}")
    return ring, g


def shoup_fits(width: int, q: int) -> bool:
    """Whether Shoup's multiplication and Harvey's lazy butterflies can run:
    their values reach 4q, which must fit the unsigned lane."""
    return q < 1 << (width - 2)


def shoup_limit(width: int) -> int:
    """q must be below this for Shoup's multiplication on `width`-bit lanes:
    2^(W-2) for Harvey's lazy values (4q), 2^(W-1) where its products may be
    reduced below q instead, the values then below 2q (`shoup.ShoupBelowQ`)."""
    return 1 << (width - 1 if width in SHOUP_BELOW_Q_WIDTHS else width - 2)


def montgomery_meets_inverse(width: int, q: int, basemul_output: str | int) -> bool:
    """Whether Montgomery's base multiplication can give the output asked
    inside what its signed inverse NTT takes (centred and canonical: (-q, q))."""
    return basemul_output not in OUTPUTS[1:] or q - 1 <= inverse_input_top(width, q)


def special_fits(width: int, q: int) -> bool:
    """Whether q = 2^64 - 2^b + 1 on 64-bit lanes, where the special form's
    templates keep every value canonical (`passes.special64`)."""
    return width == 64 and special_form(q, width) is not None


def strategies(p: NttParams) -> tuple[str, ...]:
    """The multiplication strategies to build with: the one named, or for
    "auto" every one that fits q (the cost model chooses among them); a
    reducer named (Montgomery's signed lanes are the only ones it reduces)
    leaves Montgomery's alone."""
    if p.mul != MULS[0]:
        return (p.mul,)
    if p.reducer != REDUCERS[0]:
        return ("montgomery",)
    return tuple(k for k in MULS[1:] if (k != "shoup" or p.q < shoup_limit(p.width)) and
                 (k != "montgomery" or p.width in MONTGOMERY_WIDTHS and
                  montgomery_meets_inverse(p.width, p.q, dict(p.output)["basemul"])) and
                 (k != "special" or special_fits(p.width, p.q)))


def inverse_input_top(width: int, q: int) -> int:
    """|a[i]| at most this into the inverse NTT. The inverse adds pairs before
    its first multiplication (which carries the scaling), so its inputs may
    use half the signed range: the contract on 16-bit lanes, where base
    multiplication's outputs need that room. Wider lanes take (-q, q), what
    base multiplication gives there, so the sums of the layers have the rest
    of the lane to grow in and the bound analysis may need no reduction at
    all (Dilithium: 256*q < 2^31)."""
    half = (1 << (width - 2)) - 1
    return half if width <= NARROW_LANES else min(q - 1, half)


def _outputs(src: str, table: dict) -> tuple[tuple[str, str], ...]:
    """`output`: one choice for every kernel, or a table by kernel."""
    given = table.get("output", OUTPUTS[0])
    rule = (f"must be one of {', '.join(OUTPUTS)} for every kernel, or a table choosing per kernel "
            f"({', '.join(OUTPUT_KERNELS)}) among those or a bound B on |value|, e.g. "
            f"{{ basemul = \"centred\", inverse = 8380408 }}")
    if isinstance(given, str):
        given = {k: given for k in OUTPUT_KERNELS}
    if not isinstance(given, dict):
        raise ParamError(src, "output", f"{rule}; got {toml_value(given)}")
    for k, v in given.items():
        if k not in OUTPUT_KERNELS:
            raise ParamError(src, "output", f"{rule}; {toml_value(k)} is no such kernel")
        if (isinstance(v, bool) or not isinstance(v, int)) and v not in OUTPUTS:
            raise ParamError(src, "output", f"{rule}; got {toml_value(v)} for {k}")
    return tuple((k, given.get(k, OUTPUTS[0])) for k in OUTPUT_KERNELS)


def _output_bound(src: str, kernel: str, bound: int, mul: str) -> None:
    """`output = { kernel = B }`: every output proven in [-B, B], for a
    scheme that adds to it (ML-DSA's t + s2 must stay inside (-q, q)). A
    final Barrett reduction guarantees its own bound whatever comes before
    it, so any B from there to the lane's top can be met; the bound is of
    |value|, so the lanes must be signed (Montgomery's); the family checks
    B against the reducers (output_bound_error)."""
    if mul != "montgomery":
        raise ParamError(src, "output", f"{kernel} = {bound} (a bound on |value|) needs mul = \"montgomery\" "
                                        f"(signed lanes), got mul = {toml_value(mul)}")


def output_bound_error(p: NttParams, kernel: str, bound: int, least: int) -> ParamError | None:
    """The refusal of `output = { kernel = bound }` unless it lies from `least` (what a final Barrett
    reduction guarantees: the kernels' reducers know it) to the lane's top."""
    top = (1 << (p.width - 1)) - 1
    if least <= bound <= top:
        return None
    return ParamError(p.source, "output", f"{kernel} = {bound}: a bound on |value| must be from {least} (what a "
                                          f"final Barrett reduction guarantees for q = {p.q}) to {top} (the lane's "
                                          "top)")


# what the manifest says of an output range (None: only its proven bound)
_REPRESENTATION = {"lazy": None, "centred": "centred", "canonical": "canonical"}


def output_range(output: str | int, q: int) -> Bound | None:
    """What an `output` choice asks of a kernel's proven bound: nothing
    (lazy), (-q, q), [0, q), or [-B, B] for a number B."""
    if isinstance(output, int):
        return Bound(-output, output)
    return {"lazy": None, "centred": Bound(-(q - 1), q - 1), "canonical": Bound(0, q - 1)}[output]


def output_representation(output: str | int, q: int) -> str | None:
    """The manifest's word for an output choice; a bound B below q is centred too."""
    if isinstance(output, int):
        return "centred" if output < q else None
    return _REPRESENTATION[output]


def output_words(output: str | int, name: str) -> str:
    """The contract's words for a bound asked as a number (the proven one is quoted before them)."""
    return f" (proven, inside the |{name}[i]| <= {output} asked)" if isinstance(output, int) else " (proven)"
