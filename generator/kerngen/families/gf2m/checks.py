"""Harness cases for GF(2^m) bundles, judged against SymPy (`reference`),
and the OpenSSL comparisons they are timed beside. The cases are made from
a bundle's manifest alone (field, kinds, argument shapes)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...core.bundle import BenchItem, Bundle, Check, Comparison
from ...core.family import Calls
from ...harness import protocol, toolchain
from ...harness.cpu import cpu_flags
from ...harness.protocol import Case, manifest_arg
from .reference import monomial_remainders, ref_inv, ref_ladder_step, ref_mul, ref_muladd, ref_mulmod, ref_rem

# ---------------------------------------------------------------------------
# cases


def limbs_of(x: int, count: int) -> tuple[int, ...]:
    return tuple((x >> (64 * i)) & ((1 << 64) - 1) for i in range(count))


def value_of(limbs) -> int:
    return sum(int(v) << (64 * i) for i, v in enumerate(limbs))


def _edge_values(bits: int, rng: random.Random) -> list[int]:
    """Zero, one, all ones, top bit only, alternating patterns, sparse and random."""
    ones = (1 << bits) - 1
    alt = int("10" * bits, 2) & ones
    return [0, 1, ones, 1 << (bits - 1), alt, ones ^ alt,
            (1 << (bits - 1)) | 1, rng.getrandbits(bits) | (1 << (bits - 1))]


def _inputs(bits: int, rng: random.Random, nrandom: int) -> list[int]:
    return _edge_values(bits, rng) + [rng.getrandbits(bits) for _ in range(nrandom)]


def _judge(expected: tuple[int, ...], what: str) -> Callable[[dict[int, list[int]]], str | None]:
    def judge(outputs: dict[int, list[int]]) -> str | None:
        got = tuple(outputs.get(0, ()))
        if got == expected:
            return None
        bad = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), len(got))
        return (f"{what}: limb {bad} is {got[bad] if bad < len(got) else 'missing'}, expected "
                f"{expected[bad]} (got 0x{value_of(got):x}, expected 0x{value_of(expected):x})")
    return judge


def _judge_lazy(expected: int, poly, bits: int, what: str) -> Callable[[dict[int, list[int]]], str | None]:
    """A lazy result: any value below 2^bits (so nothing past the limbs)
    whose remainder mod f is `expected`."""
    def judge(outputs: dict[int, list[int]]) -> str | None:
        got = value_of(outputs.get(0, ()))
        if got >> bits == 0 and ref_rem(got, poly) == expected:
            return None
        return (f"{what}: got 0x{got:x}, whose remainder mod f is 0x{ref_rem(got, poly):x}, "
                f"expected a value below 2^{bits} congruent to 0x{expected:x}")
    return judge


def _case(fn: dict, tag: str, ins: list[int], alias: bool) -> Case:
    """Case for a kernel out, in1, in2, ... (a manifest entry): inputs as
    integers; `alias` makes out share in1's buffer."""
    args = []
    kargs, dtype = fn["args"], fn["dtype"]
    for i, a in enumerate(kargs):
        if i == 0:
            args.append(manifest_arg(a, dtype, alias_of=1 if alias else None))
        else:
            args.append(manifest_arg(a, dtype, limbs_of(ins[i - 1], a["count"])))
    if alias and kargs[1]["count"] < kargs[0]["count"]:
        raise ValueError("an in-place call needs an input at least as long as the output")
    return Case(f"{fn['symbol']}.{tag}", fn["symbol"], tuple(args))


class _Refs:
    """Memoised references for one field: squaring chains are shared between
    gf2m_sqr and every gf2m_msqr, which keeps SymPy's share of a run small."""

    def __init__(self, poly):
        self.poly = tuple(poly)
        self._chains: dict[int, list[int]] = {}
        self._ladder: list | None = None

    def ladder_cases(self, m: int, rng: random.Random) -> list:
        """(state, x, c, swap, expected) for the ladder-step kernels, made
        once per field: each case costs a dozen SymPy products. Edge values
        (all ones, top bit, alternating bits) and random ones, both swaps;
        the first case is also run in place."""
        if self._ladder is None:
            xs = _edge_values(m, rng)[2:] + [rng.getrandbits(m) for _ in range(2)]
            cases = []
            for i in range(4):
                els = tuple(xs[(i + j) % len(xs)] for j in range(4))
                x, c = xs[(i + 5) % len(xs)], xs[(i + 6) % len(xs)]
                sw = i % 2 == 0
                cases.append((els, x, c, sw, ref_ladder_step(els, x, c, sw, self.poly)))
            self._ladder = cases
        return self._ladder

    def msqr(self, a: int, k: int) -> int:
        chain = self._chains.setdefault(a, [a])
        while len(chain) <= k:
            x = chain[-1]
            chain.append(ref_mulmod(x, x, self.poly))
        return chain[k]


def function_checks(fn: dict, rng: random.Random, nrandom: int = 4,
                    refs: _Refs | None = None, chain_inputs: list[int] | None = None) -> list[Check]:
    """Cases for one function (its manifest entry)."""
    m, poly = fn["m"], tuple(fn["poly"])
    refs = refs or _Refs(poly)
    n_out = fn["args"][0]["count"]
    kind = fn["kind"]
    out: list[Check] = []

    def add(tag, ins, expected, alias=False):
        case = _case(fn, tag, ins, alias)
        out.append(Check(case, _judge(limbs_of(expected, n_out), f"{fn['symbol']} {tag}")))

    lazy_bits = 64 * n_out

    def add_lazy(tag, ins, expected, alias=False):
        case = _case(fn, tag, ins, alias)
        out.append(Check(case, _judge_lazy(expected, poly, lazy_bits, f"{fn['symbol']} {tag}")))

    if kind == "gf2m_mul_lazy":
        xs = _inputs(lazy_bits, rng, nrandom)
        ys = _inputs(lazy_bits, rng, nrandom)
        pairs = [(x, y) for x in xs[:4] for y in xs[:4]] + list(zip(xs[4:], reversed(ys)))
        for i, (x, y) in enumerate(pairs):
            add_lazy(f"p{i}", [x, y], ref_mulmod(x, y, poly))
        add_lazy("inplace", [xs[-1], ys[-1]], ref_mulmod(xs[-1], ys[-1], poly), alias=True)
    elif kind == "gf2m_sqr_lazy":
        xs = _inputs(lazy_bits, rng, nrandom)
        for i, x in enumerate(xs):
            add_lazy(f"v{i}", [x], ref_mulmod(x, x, poly))
        add_lazy("inplace", [xs[-1]], ref_mulmod(xs[-1], xs[-1], poly), alias=True)
    elif kind == "gf2m_freeze":
        extra = [c for c in ((1 << m) - 1, 1 << m, ((1 << lazy_bits) - 1) ^ ((1 << m) - 1)) if c >> lazy_bits == 0]
        for i, c in enumerate(_inputs(lazy_bits, rng, nrandom) + extra):
            add(f"c{i}", [c], ref_rem(c, poly))
        c = rng.getrandbits(lazy_bits)
        add("inplace", [c], ref_rem(c, poly), alias=True)
    elif kind in ("gf2m_mul", "gf2m_mulwide"):
        xs = _inputs(m, rng, nrandom)
        ys = _inputs(m, rng, nrandom)
        pairs = [(x, y) for x in xs[:4] for y in xs[:4]] + list(zip(xs[4:], reversed(ys)))
        for i, (x, y) in enumerate(pairs):
            exp = ref_mul(x, y) if kind == "gf2m_mulwide" else ref_mulmod(x, y, poly)
            add(f"p{i}", [x, y], exp)
        x, y = xs[-1], ys[-1]
        add("inplace", [x, y], ref_mul(x, y) if kind == "gf2m_mulwide" else ref_mulmod(x, y, poly),
            alias=kind == "gf2m_mul")
    elif kind == "gf2m_muladd":
        xs = _inputs(m, rng, nrandom)
        for i in range(len(xs)):
            q = [xs[i], xs[(i + 3) % len(xs)], xs[(i + 5) % len(xs)], rng.getrandbits(m)]
            add(f"p{i}", q, ref_muladd(*q, poly))
        ones = (1 << m) - 1
        add("ones", [ones] * 4, ref_muladd(ones, ones, ones, ones, poly))
        add("ones2", [ones, ones, ones, 1], ref_muladd(ones, ones, ones, 1, poly))
        q = [rng.getrandbits(m) for _ in range(4)]
        add("inplace", q, ref_muladd(*q, poly), alias=True)
    elif kind in ("gf2m_sqr", "gf2m_msqr"):
        k = fn.get("k", 1)
        xs = chain_inputs if chain_inputs is not None else _inputs(m, rng, 1)[2:]
        for i, x in enumerate(xs):
            add(f"v{i}", [x], refs.msqr(x, k))
        add("inplace", [xs[-1]], refs.msqr(xs[-1], k), alias=True)
    elif kind == "gf2m_ladder_step":
        n = fn["args"][2]["count"]
        ones = (1 << 64) - 1

        def pack(els):
            return sum(e << (64 * n * i) for i, e in enumerate(els))
        for i, (els, x, c, sw, exp) in enumerate(refs.ladder_cases(m, rng)):
            add(f"s{i}", [pack(els), x, c, ones if sw else 0], pack(exp), alias=i == 0)
    elif kind == "gf2m_inv":
        xs = _inputs(m, rng, nrandom)
        for i, x in enumerate(xs):
            add(f"v{i}", [x], ref_inv(x, poly))
        add("inplace", [xs[-1]], ref_inv(xs[-1], poly), alias=True)
    elif kind == "gf2m_reduce":
        bits = 2 * m - 1
        extra = [(1 << m) - 1, 1 << m, ((1 << bits) - 1) ^ ((1 << m) - 1)]
        for i, c in enumerate(_inputs(bits, rng, nrandom) + extra):
            add(f"c{i}", [c], ref_rem(c, poly))
        c = rng.getrandbits(bits)
        add("inplace", [c], ref_rem(c, poly), alias=True)
    else:
        raise ValueError(f"no checks for kind {kind}")
    return out


def checks(manifest: dict, seed: int) -> list[Check]:
    """Random and worst-case cases for every function of a GF(2^m) bundle,
    every ISA's alike."""
    rng = random.Random(seed)
    m, poly = manifest["params"]["m"], manifest["params"]["poly"]
    refs = _Refs(poly)
    ones = (1 << m) - 1
    chain_inputs = [ones, 1 << (m - 1), int("10" * m, 2) & ones, rng.getrandbits(m)]
    out: list[Check] = []
    for fn in manifest["functions"]:  # each ISA's twin of a function on the same inputs, whichever ISA is first
        twin_rng = random.Random(f"{seed}:{fn['symbol'].removesuffix('_' + fn['isa'])}")
        out += function_checks(fn, twin_rng, refs=refs, chain_inputs=chain_inputs)
    return out


# ---------------------------------------------------------------------------
# benchmarks against OpenSSL


def _limbs(values: list[int], count: int) -> np.ndarray:
    return np.array([limbs_of(v, count) for v in values], dtype=np.uint64).reshape(len(values), count)


def _bits_to_limbs(bits: np.ndarray, count: int) -> np.ndarray:
    """Rows of 0/1 (bit i of each row) as rows of `count` uint64 limbs."""
    rows, width = bits.shape
    padded = np.zeros((rows, 64 * count), dtype=np.uint64)
    padded[:, :width] = bits
    weights = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
    return (padded.reshape(rows, count, 64) * weights).sum(axis=2, dtype=np.uint64)


def _square_power(table: list[int], m: int, k: int) -> np.ndarray:
    """Row i: the bits of (x^i)^(2^k) mod f, from the squaring matrix (column
    i: x^(2i) mod f, from `table`) raised to the k-th power over GF(2)."""
    sq = np.array([[(table[2 * i] >> b) & 1 for b in range(m)] for i in range(m)], dtype=np.float64)  # row i: image
    result = np.eye(m, dtype=np.float64)
    for _ in range(k):  # rows are images: applying the square to image rows is a right product
        result = (result @ sq) % 2
    return result.astype(np.uint64)


def _canonical(got: np.ndarray, table: list[int], m: int) -> np.ndarray:
    """Rows of lazy results (limbs, any 64 n bits) as their remainders mod f:
    each bit b >= m set is replaced by x^b mod f from `table`."""
    got = got.copy()
    count = got.shape[1]
    for b in range(m, 64 * count):
        limb, off = divmod(b, 64)
        bit = np.uint64(1 << off)
        rows = (got[:, limb] & bit) != 0
        got[rows] ^= _limbs([table[b]], count)[0]
        got[:, limb] &= ~bit
    return got


def basis_proofs(manifest: dict, calls: Calls) -> list[tuple[str, str | None]]:
    """Every kernel proven GF(2)-multilinear (its manifest `proof`) run on a
    whole basis — each basis monomial x^i of a linear argument, each pair
    (x^i, x^j) of a bilinear product, each product of a sum of products with
    the other product's arguments zero — and compared with the images SymPy
    gives: together with the verifier's proof of the form, that determines the
    kernel for every input. A lazy kernel's basis is every bit of its limbs
    and its images are compared by their remainders mod f. Inversion and the
    ladder step are not multilinear and are checked by sampling only."""
    m, poly = manifest["params"]["m"], manifest["params"]["poly"]
    limbs = (m + 63) // 64
    table = monomial_remainders(poly, 128 * limbs - 1)  # x^s mod f, s up to a product of lazy elements
    out = []
    for fn in manifest["functions"]:
        try:
            mono = (fn.get("proof") or {}).get("monomials")
            if not mono:
                continue
            kind = fn["kind"]
            counts = [a["count"] for a in fn["args"]]
            n_out = counts[0]
            name = f"basis proof of {fn['symbol']}"
            bits = fn["input"]["bits"]  # m, 2m - 1 unreduced, every bit of the limbs lazy
            if len(mono) == 1 and len(mono[0]) == 1:  # linear in one argument (1)
                units = _bits_to_limbs(np.eye(bits, dtype=np.uint64), counts[1])
                if kind in ("gf2m_reduce", "gf2m_freeze"):
                    want = _limbs(table[:bits], n_out)
                elif kind == "gf2m_sqr_lazy":
                    want = _limbs([table[2 * i] for i in range(bits)], n_out)
                else:
                    want = _bits_to_limbs(_square_power(table, m, fn.get("k", 1)), n_out)
                got = calls.batch(fn, {1: units})[0]
                label, case = f"{bits} basis monomials", lambda row: (row,)
            else:  # products: pairs of basis monomials, one product at a time
                units = _bits_to_limbs(np.eye(bits, dtype=np.uint64), counts[1])
                i, j = np.divmod(np.arange(bits * bits), bits)
                zero = np.zeros((bits * bits, counts[1]), dtype=np.uint64)
                if kind == "gf2m_mulwide":
                    pair_want = _limbs([1 << s for s in range(2 * m - 1)], n_out)
                else:
                    pair_want = _limbs(table, n_out)
                gots, wants = [], []
                for p in range(len(mono)):
                    inputs = {k: zero for k in range(1, len(counts))}
                    first, second = (1 + 2 * p, 2 + 2 * p)
                    inputs[first], inputs[second] = units[i], units[j]
                    gots.append(calls.batch(fn, inputs)[0])
                    wants.append(pair_want[i + j])
                got, want = np.concatenate(gots), np.concatenate(wants)
                label = f"{len(got)} pairs of basis monomials"

                def case(row: int, pairs: int = bits * bits) -> tuple:  # the product and the pair of a row
                    return mono[row // pairs], int(i[row % pairs]), int(j[row % pairs])
            if fn["output"]["representation"] == "lazy":
                got = _canonical(got, table, m)
            bad = np.argwhere(got != want)
            out.append((f"{name} ({label})", None if not len(bad) else
                        f"basis input {case(int(bad[0][0]))}: limb {bad[0][1]} is {int(got[tuple(bad[0])]):#x}, "
                        f"want {int(want[tuple(bad[0])]):#x}"))
        except protocol.KernelFault as e:  # a failed check of this kernel: the others are still proven
            out.append((f"basis proof of {fn['symbol']}", str(e)))
    return out


def build_openssl_shim(m: int, poly, workdir: Path) -> Path:
    """`harness/openssl_gf2m.c` compiled for one field (cached by content)."""
    flags = ["-O2", f"-DKG_M={m}", f"-DKG_LIMBS={(m + 63) // 64}", "-DKG_POLY=" + ",".join(map(str, poly))]
    return toolchain.build_shared_c("openssl_gf2m.c", f"openssl_gf2m-{m}", flags, workdir,
                                  "building the OpenSSL comparison (it needs libssl-dev)", link=["-lcrypto"])


# OpenSSL has no lazy form: a lazy kernel is timed beside the reduced operation
_OPENSSL_TWIN = {"mul_lazy": "mul", "sqr_lazy": "sqr"}


def _short(fn: dict, prefix: str) -> str:
    return fn["symbol"][len(prefix) + 1: -len(fn["isa"]) - 1]


def bench_items(bundle: Bundle, workdir: Path) -> list[BenchItem]:
    """Every kernel with valid random inputs, beside OpenSSL's BN_GF2m_* doing
    the same job ("openssl"; the shim times the operation on prepared BIGNUMs,
    see the header of harness/openssl_gf2m.c)."""
    p = bundle.params
    so = build_openssl_shim(p.m, p.poly, workdir)
    rng = random.Random(2024)
    items = []
    # the GPR reduction has no OpenSSL counterpart of its own: it is timed as
    # a comparison beside the xmm reduction, on the same inputs, from the same library
    functions = [f.manifest() for f in bundle.functions]
    gpr = {fn["kind"]: fn["symbol"] for fn in functions if fn.get("registers") == "gpr"}
    host = cpu_flags()
    for fn in functions:
        if not set(fn["cpu"]) <= host or fn.get("registers") == "gpr":
            continue
        ins = []
        for a in fn["args"][1:]:
            if fn["kind"] == "gf2m_ladder_step" and a["count"] == 4 * p.limbs:
                ins.append(sum(rng.getrandbits(p.m) << (64 * p.limbs * i) for i in range(4)))
                continue
            if a["count"] == 1:  # the ladder step's swap mask
                ins.append((1 << 64) - 1)
                continue
            ins.append(rng.getrandbits(fn["input"]["bits"]) | 1)
        case = _case(fn, "bench", ins, alias=False)
        short = _short(fn, p.prefix)
        comps = (Comparison("openssl", so, f"kg_ossl_{_OPENSSL_TWIN.get(short, short)}"),)
        if fn["kind"] in gpr:
            comps += (Comparison("gpr", None, gpr[fn["kind"]]),)
        items.append(BenchItem(fn["kind"], fn["symbol"], case, comps))
    return items
