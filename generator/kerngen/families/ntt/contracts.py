"""What each NTT kernel promises: its typed contract (arguments, the bounds
it requires, what it ensures and the text the header prints), and the check
that the map the verifier proved is the one the kernel must compute."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.contract import ArgContract, Bound, BoundOf, Contract, Values
from ...core.manifest import Companion
from ...core.proof import MapProof, monomials
from ...errors import VerifyError
from ...ir.instr import ArgSpec
from ...machine.target import Target
from ...passes.pipeline import Compiled
from .maths import NttMath, modulus_text
from .params import NttParams, output_representation, output_words

A_REQUIRES, A_ENSURES = BoundOf("a", "requires"), BoundOf("a", "ensures")

SHOUP_KERNELS = {"mulmod_shoup": "r[i] = a[i]*w[i] mod q", "muladd_shoup": "r[i] = a[i]*w[i] + b[i] mod q"}


@dataclass(frozen=True)
class BlockLayout:
    """The forward NTT's output order: block j holds coefficient k of
    a mod (x^d - zeta_j) at array position positions[j][k]."""

    d: int
    zetas: tuple[int, ...]
    positions: tuple[tuple[int, ...], ...]
    order: str  # the order parameter that chose the positions

    def manifest(self) -> dict:
        return {"order": self.order, "d": self.d,
                "blocks": [{"zeta": z, "positions": list(p)} for z, p in zip(self.zetas, self.positions)]}


def block_layout(math: NttMath, output_order: tuple[int, ...], order: str) -> BlockLayout:
    d = math.d
    positions = [[0] * d for _ in range(math.n // d)]
    for pos, idx in enumerate(output_order):
        positions[idx // d][idx % d] = pos
    return BlockLayout(d, math.final_zetas, tuple(tuple(p) for p in positions), order)


def array_arg(p: NttParams, t: Target, name: str, role: str, polys: int = 1, unsigned: bool = False) -> ArgSpec:
    """An array of `polys` polynomials of n coefficients (of n rows of the set's columns), signed or
    `unsigned`. Arrays are moved
    with unaligned vector moves, so any element-aligned array works;
    register-aligned ones are fastest (no vector access then crosses a page:
    measured up to 9% on an NTT, 1% for other offsets)."""
    return ArgSpec(name, role, f"{'u' if unsigned else ''}int{t.lane_bits}_t", t.lane_bytes, p.n * p.columns * polys,
                   t.lane_bytes,
                   t.isa.vector_bits // 8)


def _sum_text(k: int) -> str:
    terms = [f"a_{i}*b_{i}" for i in range(k)]
    return " + ".join(terms) if k <= 3 else f"{terms[0]} + ... + {terms[-1]}"


def forward_contract(p: NttParams, t: Target, d: int, lay: BlockLayout, input_bound: Bound, signed: bool) -> Contract:
    output = dict(p.output)["forward"]
    return Contract(
        (ArgContract(array_arg(p, t, "a", "inout", unsigned=not signed),
                     Values(input_bound, representation="signed" if signed else "unsigned"),
                     Values(None, scale=1, layout=lay, representation=output_representation(output, p.q))),),
        (("requires: every a[i] in ", A_REQUIRES),
         ("ensures:  every a[i] in ", A_ENSURES,
          f"{output_words(output, 'a')}, block j at {p.prefix}_ntt_positions[j] (manifest: layout),"),
         (f"          a[pos_j[k]] = (a mod (x^{d} - zeta_j))_k mod {p.q} (scale 1)",)))


def basemul_contract(p: NttParams, t: Target, d: int, k: int, inputs: Values, output: str, r: int,
                     signed: bool) -> Contract:
    """Base multiplication of `k` pairs of polynomials summed (1: one product); `r`: the Montgomery factor."""
    per = "" if k == 1 else f", in each of the {k} polynomials"
    n, q = p.n, p.q
    power = _power_of_two(r, q)
    factor = "" if power is None else f"*2^-{power}"
    scale_words = "scale 1" if power is None else f"scale 2^-{power} mod q, undone by the inverse NTT"
    return Contract(
        (ArgContract(array_arg(p, t, "r", "out", unsigned=not signed), None,
                     Values(None, scale=pow(r, -1, q), layout="ntt_forward output",
                            representation=output_representation(output, q)), ("a", "b")),
         ArgContract(array_arg(p, t, "a", "in", k, not signed), inputs),
         ArgContract(array_arg(p, t, "b", "in", k, not signed), inputs)),
        (("requires: every a[i], b[i] in ", A_REQUIRES, f" (the forward NTT's output), in its layout{per}"),
         ("ensures:  every r[i] in ", BoundOf("r", "ensures"),
          f"{output_words(output, 'r')}; r_j = a_j*b_j{factor} mod (x^{d} - zeta_j, {q})" if k == 1 else
          f"{output_words(output, 'r')}; r_j = sum over i < {k} of a_i_j*b_i_j{factor} "
          f"mod (x^{d} - zeta_j, {q}),"),
         *(() if k == 1 else ((f"          a_i = a[{n}*i .. {n}*i+{n - 1}], b_i likewise",),)),
         (f"          ({scale_words}); r may alias a or b",)))


def basemul_summary(d: int, k: int) -> str:
    return (f"base multiplication r = a*b blockwise mod (x^{d} - zeta_j), NTT domain" if k == 1 else
            f"base multiply-accumulate r = {_sum_text(k)} blockwise, NTT domain")


def inverse_contract(p: NttParams, t: Target, input_bound: Bound, r: int, signed: bool) -> Contract:
    output, q = dict(p.output)["inverse"], p.q
    return Contract(
        (ArgContract(array_arg(p, t, "a", "inout", unsigned=not signed),
                     Values(input_bound, layout="ntt_forward output"),
                     Values(None, scale=r % q, layout="natural", representation=output_representation(output, q))),),
        (("requires: every a[i] in ", A_REQUIRES, " (base multiplication's output is), in the forward NTT's layout"),
         ("ensures:  every a[i] in ", A_ENSURES, f"{output_words(output, 'a')}, natural order,"),
         (f"          a = {_times(r, q)}INTT(a) mod {q}: forward, basemul, inverse give a*b mod "
          f"({modulus_text(p.n, p.ring, p.coset)}, {q})",)))


def _power_of_two(r: int, q: int) -> int | None:
    """k where the multiplication leaves the factor r = 2^k (Montgomery's R), None where it leaves none
    (r = 1 mod q: the special 64-bit multiplication)."""
    if r % q == 1:
        return None
    if r & (r - 1):
        raise ValueError(f"a multiplication's factor is 1 or a power of two (its `r`), got {r}")
    return r.bit_length() - 1


def _times(r: int, q: int) -> str:
    power = _power_of_two(r, q)
    return "" if power is None else f"2^{power} * "


def reduce_contract(p: NttParams, t: Target, lane: Bound, canonical: bool, signed: bool) -> Contract:
    """A standalone reduction of any lane value (`canonical`: the freeze)."""
    lane_type = f"{'' if signed else 'u'}int{p.width}"
    return Contract(
        (ArgContract(array_arg(p, t, "a", "inout", unsigned=not signed), Values(lane),
                     Values(None, representation="canonical" if canonical else None, scale=1, layout="natural")),),
        ((f"requires: any {lane_type} a[i]",),
         ("ensures:  every a[i] in ", A_ENSURES, f" (proven over all 2^{p.width} inputs), congruent to the input mod "
          f"{p.q}" + (": the canonical representative" if canonical else ""))))


def shoup_contract(p: NttParams, t: Target, kind: str) -> Contract:
    """mulmod_shoup(r, a, w, wp) or muladd_shoup(r, a, w, wp, b) on unsigned lanes."""
    q, bits, accumulate = p.q, p.width, kind == "muladd_shoup"
    top = (1 << bits) - 1
    args = [ArgContract(array_arg(p, t, "r", "out", unsigned=True), None,
                        Values(None, representation="canonical", scale=1, layout="natural"),
                        ("a", "b") if accumulate else ("a",)),
            ArgContract(array_arg(p, t, "a", "in", unsigned=True), Values(Bound(0, top))),
            ArgContract(array_arg(p, t, "w", "in", unsigned=True), Values(Bound(0, q - 1))),
            ArgContract(array_arg(p, t, "wp", "in", unsigned=True),
                        Values(Bound(0, top), representation=Companion("w", bits).spelled()))]
    if accumulate:
        args.append(ArgContract(array_arg(p, t, "b", "in", unsigned=True), Values(Bound(0, q - 1))))
    return Contract(tuple(args), (
        (f"requires: any uint{bits} a[i]; w[i] in [0, {q - 1}] with wp[i] = floor(w[i]*2^{bits}/{q})"
         + (f"; b[i] in [0, {q - 1}]" if accumulate else ""),),
        ("ensures:  every r[i] in ", BoundOf("r", "ensures"), f" (proven), {SHOUP_KERNELS[kind]}; r may alias a"
         + (" or b" if accumulate else ""),)))


def map_proof(c: Compiled, expect: tuple[tuple[str, ...], ...], blocks: BlockLayout | None = None,
              element: bool = False, copies: int = 1) -> MapProof | None:
    """What the verifier proved of the map, checked against what the kernel
    must be: linear (or bilinear) mod q in the `expect`ed arguments, and, for
    base multiplication, each output block from the same block of its inputs
    (of each of its `copies` polynomials), and from every element of it (a
    block's product reads all of them: a term left out of a sum is missed);
    for a reduction, each element from its own. Anything else is a generator bug.
    None for an unverified kernel (a dry build)."""
    k, proof = c.kernel, c.proof
    if proof is None:
        return None
    [(out, form)] = proof.forms.items()
    found = monomials(form, [a.name for a in k.args])
    if found != expect:
        raise VerifyError(f"{k.symbol}: the verifier finds the map {found} mod q, not {expect}")
    deps = proof.deps[out]
    if element:
        ins = [i for i, a in enumerate(k.args) if a.role != "out"]
        own = [sum(1 << (proof.bases[i] + p) for i in ins) for p in range(len(deps))]
        bad = next((p for p, d in enumerate(deps) if not d or d & ~own[p]), None)
        if bad is not None:
            raise VerifyError(f"{k.symbol}: output element {bad} depends on other input elements")
    if blocks is not None:
        ins = [i for i, a in enumerate(k.args) if a.role != "out"]
        for j, positions in enumerate(blocks.positions):
            allowed = sum(1 << (proof.bases[i] + copy * k.args[0].count + p) for i in ins for p in positions
                          for copy in range(copies))
            if any(deps[p] & ~allowed for p in positions):
                raise VerifyError(f"{k.symbol}: output block {j} depends on inputs outside its block")
            if any(deps[p] & allowed != allowed for p in positions):
                raise VerifyError(f"{k.symbol}: output block {j} does not depend on every element of its block")
    return MapProof("q", found, "element" if element else "block" if blocks is not None else None)
