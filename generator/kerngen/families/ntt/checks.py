"""Test cases for the NTT family, judged against `reference`.

Everything here works from a bundle's manifest alone (as `kerngen test
BUNDLE_DIR` does for a copied bundle): symbols, argument shapes, input
contracts, output bounds, scales and the output layout. Inputs are random
and at the edges of each input contract (`inputs.edge_inputs`), the same for
each ISA's twin of a function. The round trip forward NTT -> base
multiplication -> inverse NTT runs as a chain of harness calls, for every ISA.
"""

from __future__ import annotations

import random
import zlib

import numpy as np

from ...core.bundle import Check
from ...core.family import Calls, Runner
from ...harness import protocol
from ...harness.protocol import Case
from .inputs import (edge_inputs, element_bits, function, harness_args, inputs_rng, isas, outside, requires,
                     shoup_quotient)
from .planned_checks import checks as planned_set_checks
from .maths import RINGS
from .sweeps import sweep
from .reference import (block_products, blocks_of, lagrange_images, layout_is_crt_basis, mulmod, reduce_blocks,
                        ring_constant, ring_product, unit_block_products, unit_images)


def checks(manifest: dict, seed: int, randoms: int = 3) -> list[Check]:
    """Every function of every ISA on inputs at the edges of its contract and
    random ones; each ISA's twin of a function on the same inputs. A planned
    transform's by `planned_checks` (its codelets through it)."""
    if planned(manifest):
        return planned_set_checks(manifest, seed)
    out: list[Check] = []
    for isa in isas(manifest):
        out += _ntt_checks(manifest, function(manifest, "ntt_forward", isa), function(manifest, "ntt_inverse", isa),
                           seed, randoms)
    n, q = manifest["params"]["n"], manifest["params"]["q"]
    layout = function(manifest, "ntt_forward")["output"]["layout"]
    for fn in manifest["functions"]:
        rng = inputs_rng(seed, fn)
        if fn["kind"] in ("reduce", "freeze"):
            out += _reduce_checks(fn, n, q, rng, randoms)
        elif fn["kind"] in SHOUP_KINDS:
            out += _shoup_checks(fn, n, q, rng, randoms)
        elif fn["kind"] in ("basemul", "basemul_acc"):
            out += _product_checks(fn, n, q, layout, rng, randoms)
    return out


def _ntt_checks(manifest: dict, fwd: dict, inv: dict, seed: int, randoms: int) -> list[Check]:
    """The forward NTT judged block by block against the CRT images, the
    inverse by its blocks' images: each output reduced mod q, in its bound."""
    n, q = manifest["params"]["n"], manifest["params"]["q"]
    layout = fwd["output"]["layout"]
    zetas = [blk["zeta"] for blk in layout["blocks"]]
    isa = fwd["isa"]
    out: list[Check] = []

    def forward_judge(a: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = outside(got, fwd["output"]["bound"])
            if bad:
                return bad
            scale = fwd["output"]["scale"]
            wants = reduce_blocks(a, layout, q)
            for j, (have, want) in enumerate(zip(blocks_of(got, layout), wants)):
                want = [scale * w % q for w in want]
                if [h % q for h in have] != want:
                    return f"block {j} (zeta {zetas[j]}): got {[h % q for h in have]}, want {want}"
            return None
        return judge

    for name, a in edge_inputs(*fwd["input"]["bound"], n, inputs_rng(seed, fwd), randoms):
        out.append(Check(Case(f"forward-{isa}-{name}", fwd["symbol"], harness_args(fwd, a)), forward_judge(a)))

    def inverse_judge(y: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = outside(got, inv["output"]["bound"])
            if bad:
                return bad
            scale = inv["output"]["scale"]
            for j, (have, ys) in enumerate(zip(reduce_blocks(got, layout, q), blocks_of(y, layout))):
                want = [scale * v % q for v in ys]
                if have != want:
                    return f"block {j}: the output reduces to {have}, want scale*input = {want}"
            return None
        return judge

    for name, y in edge_inputs(*inv["input"]["bound"], n, inputs_rng(seed, inv), randoms):
        out.append(Check(Case(f"inverse-{isa}-{name}", inv["symbol"], harness_args(inv, y)), inverse_judge(y)))
    return out


def _reduce_checks(red: dict, n: int, q: int, rng: random.Random, randoms: int) -> list[Check]:
    """A reduction or freeze: congruent to its input, inside its bound, over
    the edges and eight runs of n consecutive inputs spread over its range."""
    def reduce_judge(x: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = outside(got, red["output"]["bound"])
            if bad:
                return bad
            wrong = next((i for i in range(n) if (got[i] - x[i]) % q), None)
            return None if wrong is None else f"element {wrong}: {got[wrong]} is not congruent to {x[wrong]}"
        return judge

    lo, hi = red["input"]["bound"]
    total = hi - lo + 1
    sweep = [("sweep", [min(x, hi) for x in range(lo + k, lo + k + n)])
             for k in range(0, total, n)[:: max(1, total // n // 8)]]
    return [Check(Case(f"{red['symbol']}-{name}-{x[0]}", red["symbol"], harness_args(red, x)), reduce_judge(x))
            for name, x in edge_inputs(lo, hi, n, rng, randoms) + sweep]


def _product_checks(fn: dict, n: int, q: int, layout: dict, rng: random.Random, randoms: int) -> list[Check]:
    """Base multiplication (k = 1) or its sum of k products: a and b hold k
    polynomials each; each edge of a beside the next edge of b, the first in
    place too (r the same array as a)."""
    zetas = [blk["zeta"] for blk in layout["blocks"]]
    copies = fn.get("k", 1)

    def products_judge(a: list[int], b: list[int]):
        def judge(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = outside(got, fn["output"]["bound"])
            if bad:
                return bad
            scale = fn["output"]["scale"]
            wants = [[0] * layout["d"] for _ in zetas]
            for c in range(copies):
                part = block_products(blocks_of(a[c * n:(c + 1) * n], layout), blocks_of(b[c * n:(c + 1) * n], layout),
                                      zetas, q)
                wants = [[(x + y) % q for x, y in zip(w, p)] for w, p in zip(wants, part)]
            for j, (have, want) in enumerate(zip(blocks_of(got, layout), wants)):
                want = [scale * w % q for w in want]
                if [h % q for h in have] != want:
                    return f"block {j}: got {[h % q for h in have]}, want {want}"
            return None
        return judge

    lo, hi = fn["input"]["bound"]
    ins = edge_inputs(lo, hi, copies * n, rng, randoms)
    out = []
    for k, ((na, a), (_, b)) in enumerate(zip(ins, ins[1:] + ins[:1])):
        out.append(Check(Case(f"{fn['symbol']}-{na}", fn["symbol"], harness_args(fn, a, b)), products_judge(a, b)))
        if k == 0:  # in place: r is the same array as a (its first polynomial)
            out.append(Check(Case(f"{fn['symbol']}-inplace-{na}", fn["symbol"], harness_args(fn, a, b, alias={0: 1})),
                             products_judge(a, b)))
    return out


SHOUP_KINDS = ("mulmod_shoup", "muladd_shoup")


def _shoup_checks(fn: dict, n: int, q: int, rng: random.Random, randoms: int) -> list[Check]:
    """mulmod_shoup (r = a*w mod q) and muladd_shoup (r = a*w + b mod q):
    inputs at the edges of each argument's contract and random, wp computed
    from w; in place too (r the same array as a, and as b)."""
    bits = element_bits(fn)
    accumulate = fn["kind"] == "muladd_shoup"
    named = {a["name"]: edge_inputs(*requires(fn, a["name"]), n, rng, randoms) for a in fn["args"]
             if a["role"] == "in" and a["name"] != "wp"}
    out = []
    for k, (label, a) in enumerate(named["a"]):
        w = named["w"][(k + 1) % len(named["w"])][1]  # another edge beside each of a's
        b = named["b"][(k + 2) % len(named["b"])][1] if accumulate else [0] * n
        data = (a, w, [shoup_quotient(x, q, bits) for x in w]) + ((b,) if accumulate else ())

        def judge(outputs, a=a, w=w, b=b) -> str | None:
            got = outputs[0]
            bad = outside(got, fn["output"]["bound"])
            if bad:
                return bad
            wrong = next((i for i in range(n) if (got[i] - a[i] * w[i] - b[i]) % q), None)
            return None if wrong is None else (f"element {wrong}: {got[wrong]}, want a*w{' + b' if accumulate else ''} "
                                               f"= {(a[wrong] * w[wrong] + b[wrong]) % q} mod {q}")

        out.append(Check(Case(f"{fn['symbol']}-{label}", fn["symbol"], harness_args(fn, *data)), judge))
        if k == 0:
            out.append(Check(Case(f"{fn['symbol']}-inplace-a-{label}", fn["symbol"],
                                  harness_args(fn, *data, alias={0: 1})), judge))
            if accumulate:
                out.append(Check(Case(f"{fn['symbol']}-inplace-b-{label}", fn["symbol"],
                                      harness_args(fn, *data, alias={0: 4})), judge))
    return out


def round_trips(manifest: dict, run: Runner, seed: int, count: int = 2,
                judge=None) -> list[tuple[str, str | None]]:
    """forward(a), forward(b), basemul, inverse == a*b mod (x^n - c, q) (the
    manifest's ring, `reference.ring_constant`) through
    the harness, for each ISA's kernels on the same pairs: all at the maximum
    with all at the minimum, near the maximum with near the minimum, then
    `count` random pairs. Each step runs for every pair and ISA at once.
    `judge(a, b, got)`: what is wrong with `got` as the product (default:
    against the schoolbook product; a planned transform's by its transform)."""
    rng = random.Random(seed ^ 0x5EED)
    q = manifest["params"]["q"]
    c = ring_constant(manifest["params"], q)
    forward = function(manifest, "ntt_forward")
    lo, hi = forward["input"]["bound"]
    edges = dict(edge_inputs(lo, hi, forward["args"][0]["count"], rng, 2 * count))  # every column's n
    pairs = [(edges["max"], edges["min"]), (edges["near-max"], edges["near-min"])]
    pairs += [(edges[f"random{2 * k}"], edges[f"random{2 * k + 1}"]) for k in range(count)]
    trips = {f"roundtrip-{isa}-{k}": (isa, a, b) for isa in isas(manifest) for k, (a, b) in enumerate(pairs)}
    failed: dict[str, str] = {}

    def step(what: str, cases: dict[str, list[Case]]) -> dict[str, list[list[int]]]:
        """One step of every trip not failed yet: its cases' outputs, by trip."""
        flat = [(name, c) for name, cs in cases.items() if name not in failed for c in cs]
        results = run([c for _, c in flat]) if flat else []
        outputs: dict[str, list[list[int]]] = {}
        for (name, case), r in zip(flat, results, strict=True):
            if not r.ok:
                failed.setdefault(name, f"{what}: {r.case_id}: {r.status} {r.reason}")
            outputs.setdefault(name, []).append(r.outputs.get(0) if r.ok else None)
        return outputs

    transformed = step("forward", {name: [Case(f"{name}-f{x}", *_symbol_args(manifest, "ntt_forward", isa, v))
                                          for x, v in (("a", a), ("b", b))] for name, (isa, a, b) in trips.items()})
    products = step("basemul", {name: [Case(f"{name}-bm", *_symbol_args(manifest, "basemul", trips[name][0],
                                                                         *transformed[name]))]
                                for name in trips if name not in failed})
    back = step("inverse", {name: [Case(f"{name}-inv", *_symbol_args(manifest, "ntt_inverse", trips[name][0],
                                                                      products[name][0]))]
                            for name in trips if name not in failed})
    results = []
    for name, (_, a, b) in trips.items():
        if name in failed:
            results.append((name, failed[name]))
            continue
        results.append((name, (judge or _schoolbook_judge)(a, b, back[name][0], q, c)))
    return results


def _schoolbook_judge(a: list[int], b: list[int], product: list[int], q: int, c: int) -> str | None:
    got, want = [v % q for v in product], ring_product(a, b, q, c)
    bad = next((i for i in range(len(got)) if got[i] != want[i]), None)
    return None if bad is None else f"coefficient {bad}: got {got[bad]}, want {want[bad]}"


def _symbol_args(manifest: dict, kind: str, isa: str, *data: list[int]) -> tuple:
    """(symbol, harness arguments) of the `kind` function of `isa` on `data`."""
    fn = function(manifest, kind, isa)
    return fn["symbol"], harness_args(fn, *data)


_IMAGES = {"ntt_forward": unit_images, "ntt_inverse": lagrange_images}  # a kernel's images of the unit vectors


def basis_proofs(manifest: dict, calls: Calls) -> list[tuple[str, str | None]]:
    """Every kernel proven linear mod q (its manifest `proof`) run on a whole
    basis and compared with the images the definitions give: with the
    verifier's proof that no lane overflows and every multiplication and
    reduction is congruent, this determines the kernel for every input of its
    contract. Base multiplication, proven bilinear and block by block, runs
    on the d^2 pairs of unit vectors, every block at once. Each NTT then runs
    on many inputs judged by the same images (`sweeps`), each ISA's alike."""
    n, q = manifest["params"]["n"], manifest["params"]["q"]
    layout = function(manifest, "ntt_forward")["output"]["layout"]
    images: dict[str, np.ndarray] = {}  # by kind: every ISA's kernel is judged by the same images
    judged: dict = {}  # the sweeps' expected outputs, the same for every ISA's kernel (`sweep`)
    out = []
    for fn in manifest["functions"]:
        try:
            proof = fn.get("proof") or {}
            mono, scale = proof.get("monomials"), fn["output"]["scale"]
            name = f"basis proof of {fn['symbol']}"
            if proof.get("field") != "q" or not mono:
                continue
            if mono == [["a"]]:
                eye = np.eye(n, dtype=np.int64)
                if fn["kind"] in _IMAGES:
                    if fn["kind"] not in images:
                        images[fn["kind"]] = _IMAGES[fn["kind"]](layout, n, q)
                    want = images[fn["kind"]]
                else:  # a reduction: congruent to its input, element by element
                    want = eye
                got = calls.batch(fn, {0: eye})[0]
                bad = _mismatches(got, want, scale, q)
                out.append((f"{name} ({n} unit vectors)", None if not len(bad) else
                            f"basis vector {bad[0][0]}: element {bad[0][1]} is {got[tuple(bad[0])]}, "
                            f"want {scale * int(want[tuple(bad[0])]) % q} mod {q}"))
                if fn["kind"] != "reduce" and fn["kind"] != "freeze":  # many inputs judged by the same images
                    seed = zlib.crc32(fn["symbol"].removesuffix(fn["isa"]).encode())
                    out.append(sweep(fn, want, q, calls.batch, seed, judged))
            elif proof.get("locality") == "element":  # products of elements: each monomial's coefficient, all at once
                bits = element_bits(fn)
                ins = [i for i, a in enumerate(fn["args"]) if a["role"] != "out"]
                names = [fn["args"][i]["name"] for i in ins]
                data = {i: np.zeros((len(mono), n), dtype=object) for i in ins}  # w' may need all 64 bits
                for row, m in enumerate(mono):
                    for i, arg in zip(ins, names):
                        data[i][row] = 1 if arg in m else 0
                    if "wp" in names:  # Shoup's w' follows w
                        w = data[ins[names.index("w")]][row]
                        data[ins[names.index("wp")]][row] = [shoup_quotient(int(x), q, bits) for x in w]
                got = _integers(calls.batch(fn, data)[0])
                bad = np.argwhere((got - scale) % q)
                out.append((f"{name} (each of {len(mono)} monomials on every element)", None if not len(bad) else
                            f"monomial {mono[bad[0][0]]}: element {bad[0][1]} is {got[tuple(bad[0])]}, want {scale} "
                            f"mod {q}"))
            elif mono == [["a", "b"]] and proof.get("locality") == "block":
                # x^k in every block of polynomial i of a, x^l in every block of polynomial j of b
                d, copies = layout["d"], fn.get("k", 1)
                pairs = [(i, k, j, l) for i in range(copies) for k in range(d) for j in range(copies) for l in range(d)]
                units = [unit_block_products(layout, n, q, k, 0) for k in range(d)]
                zero = np.zeros(n, dtype=units[0].dtype)

                def placed(poly: int, block_unit: int) -> np.ndarray:
                    return np.concatenate([units[block_unit] if c == poly else zero for c in range(copies)])

                a = np.array([placed(i, k) for i, k, _, _ in pairs])
                b = np.array([placed(j, l) for _, _, j, l in pairs])
                got = calls.batch(fn, {1: a, 2: b})[0]
                want = np.array([unit_block_products(layout, n, q, k, l) if i == j else zero for i, k, j, l in pairs])
                bad = _mismatches(got, want, scale, q)
                out.append((f"{name} ({len(pairs)} pairs of unit blocks)", None if not len(bad) else
                            f"pair {pairs[bad[0][0]]}: element {bad[0][1]} is {got[tuple(bad[0])]}, "
                            f"want {scale * int(want[tuple(bad[0])]) % q} mod {q}"))
            else:
                out.append((name, f"no basis proof for a map of form {mono} with locality {proof.get('locality')}"))
        except protocol.KernelFault as e:  # a failed check of this kernel: the others are still proven
            out.append((f"basis proof of {fn['symbol']}", str(e)))
    return out


def _mismatches(got: np.ndarray, want: np.ndarray, scale: int, q: int) -> np.ndarray:
    """The indices where a kernel's outputs are not scale * want mod q (want:
    the references' residues; uint64 ones, of a q at or above 2^31, compared
    as uint64 residues, without Python integers, as are 64-bit words' against int64 references)."""
    if want.dtype != np.uint64 and got.dtype != np.uint64:
        return np.argwhere((got - scale * want) % q)
    want = want.astype(np.uint64)  # residues, in [0, q) whatever their type
    residues = got % np.uint64(q) if got.dtype == np.uint64 else (got.astype(np.int64) % q).astype(np.uint64)
    return np.argwhere(residues != (want if scale % q == 1 else mulmod(want, np.uint64(scale % q), q)))


def _integers(a: np.ndarray) -> np.ndarray:
    """Outputs as integers the checks' arithmetic is exact on: 64-bit words as Python integers."""
    return a.astype(object) if a.dtype == np.uint64 else a


def planned(manifest: dict) -> bool:
    """Whether the bundle's transforms are planned (their layout says so compactly)."""
    return "planned" in function(manifest, "ntt_forward")["output"]["layout"]


def layout_check(manifest: dict) -> str | None:
    """The forward NTT's layout is a CRT basis of the manifest's ring, placed as its order promises."""
    fwd = function(manifest, "ntt_forward")
    layout, params = fwd["output"]["layout"], manifest["params"]
    return (layout_is_crt_basis(params["n"], params["q"], layout, ring_constant(params, params["q"]))
            or order_is_kept(layout, params))


def order_is_kept(layout: dict, params: dict) -> str | None:
    """Standard: block j at positions d*j.., zeta zetas[0] w^brv(j); natural:
    the block of zetas[0] w^i at d*i... With g the coset (1 without one): in
    the negacyclic ring zetas[0] = g^d psi and w = psi^2 (zetas[j] =
    g^d psi^(2 brv(j) + 1), FIPS 203's and 204's order); in the cyclic ring
    zetas[0] = g^d and w = omega, read off block 2^(b-1) (brv = 1) of the b
    index bits of the blocks (zetas[j] = g^d omega^brv(j))."""
    order, d, blocks = layout.get("order", "fastest"), layout["d"], layout["blocks"]
    if order == "fastest":
        return None
    q, bits = params["q"], len(blocks).bit_length() - 1
    gd = pow(params.get("coset", 1), d, q)
    first = blocks[0]["zeta"] * pow(gd, -1, q) % q  # psi, or 1 in the cyclic ring
    if params.get("ring", RINGS[0]) == RINGS[0]:
        w = first * first % q
    elif first != 1:
        return f"block 0: zeta {blocks[0]['zeta']}, but the cyclic ring's first block has g^d = {gd}"
    else:
        w = blocks[1 << (bits - 1)]["zeta"] * pow(gd, -1, q) % q if bits else 1
    for j, blk in enumerate(blocks):
        r = int(format(j, f"0{bits}b")[::-1], 2) if bits else 0
        want = blocks[0]["zeta"] * pow(w, r, q) % q
        if blk["zeta"] % q != want:
            return f"block {j}: zeta {blk['zeta']}, but the {order} order has {want} there (w = {w}, brv({j}) = {r})"
        at = d * (j if order == "standard" else r)
        if blk["positions"] != list(range(at, at + d)):
            return f"{order} order: block {j} at {blk['positions']}, expected positions {at}..{at + d - 1}"
    return None
