"""Checks of planned transforms (n above the unrolled sizes, or columns), from the manifest alone.

A planned layout (`planned_functions.PlannedLayout.manifest`) says row i of
n (elements (i, c) at i*columns + c, each column a polynomial) holds the
evaluation at index i (natural order) or at the in-place Cooley–Tukey index
j = (i // leaf) * leaf + leaf_order[i % leaf], whose point is g psi^(2
brv(j) + 1) (negacyclic) or g omega^brv(j) (cyclic). The reference computes
every evaluation of every column at once by another route: the coefficients
twisted by (g psi)^k (or g^k), a cyclic DFT in natural order (iterative
radix 2 over numpy arrays, exact residues: `reference`), then the
evaluations placed by the layout. Checks judge all outputs of each call:
the forward against the reference, the inverse by the reference of its
output (the forward map is a bijection, so scale * input back means the
inverse is right), the coset extension against the reference evaluations
of the input's coefficients (an inverse DFT of the input, by the same DFT),
on inputs at the edges of each contract, random ones and unit vectors.
"""

from __future__ import annotations

import numpy as np

from ...core.bundle import Check
from ...harness.protocol import Case
from .inputs import edge_inputs, function, harness_args, inputs_rng, isas, outside
from .reference import mul_residues, powers, residue_dtype, residues

# unit vectors each forward transform is run on (beside its edges and random inputs): a sample of the basis
UNIT_VECTORS = 3


def _bit_reversal(bits: int) -> np.ndarray:
    i = np.arange(1 << bits, dtype=np.int64)
    out = np.zeros_like(i)
    for b in range(bits):
        out |= ((i >> b) & 1) << (bits - 1 - b)
    return out


def _dft(b: np.ndarray, omega: int, q: int) -> np.ndarray:
    """B[j] = sum_k b[k] omega^(jk) mod q in natural order, along the first axis (each column of an n x C
    array alike): iterative radix-2 decimation in time."""
    n = b.shape[0]
    rest = b.shape[1:]
    bits = n.bit_length() - 1
    x = b[_bit_reversal(bits)].copy()
    h = 1
    while h < n:
        w = pow(omega, n // (2 * h), q)
        tw = residues([pow(w, k, q) for k in range(h)], q, b.dtype).reshape((h,) + (1,) * len(rest))
        x = x.reshape((n // (2 * h), 2, h) + rest)
        u, v = x[:, 0], mul_residues(x[:, 1], np.broadcast_to(tw, x[:, 1].shape), q)
        x = np.stack([(u + v) % q, (u + q - v) % q], axis=1).reshape((n,) + rest)
        h *= 2
    return x


def _indices(layout: dict) -> np.ndarray:
    """Row p holds the evaluation at natural index indices[p]."""
    planned = layout["planned"]
    n = planned["n"]
    positions = np.arange(n, dtype=np.int64)
    if layout["order"] == "natural":
        return positions
    leaf = planned["leaf"]
    order = np.asarray(planned["leaf_order"], dtype=np.int64)
    return _bit_reversal(n.bit_length() - 1)[positions // leaf * leaf + order[positions % leaf]]


def _matrix(values, layout: dict, q: int) -> np.ndarray:
    planned = layout["planned"]
    return residues(list(values), q, residue_dtype(q)).reshape(planned["n"], planned["columns"])


def forward_residues(coeffs: np.ndarray, layout: dict, q: int) -> np.ndarray:
    """The forward transform of the n x C residues `coeffs` as `layout` places it (an n x C array)."""
    planned = layout["planned"]
    n = planned["n"]
    psi, g = planned["root"], planned["coset"]
    negacyclic = planned["ring"] == "negacyclic"
    twist = g * psi % q if negacyclic else g % q
    factors = powers(residues([twist], q, coeffs.dtype), n, q, coeffs.dtype)[0][:, None]  # (g psi)^k or g^k
    twisted = mul_residues(coeffs, np.broadcast_to(factors, coeffs.shape), q)
    natural = _dft(twisted, psi * psi % q if negacyclic else psi, q)
    return natural[_indices(layout)]


def forward_reference(a: list[int], layout: dict, q: int) -> np.ndarray:
    """The forward transform of `a` (n x C, row-major) as the layout places it (residues, flat)."""
    return forward_residues(_matrix(a, layout, q), layout, q).reshape(-1)


def lde_reference(y: list[int], layout: dict, extended: dict, q: int) -> np.ndarray:
    """The coset extension of `y` (evaluations placed by `layout`, of a cyclic transform without a coset) as
    `extended` places the evaluations of n 2^k rows: the coefficients by an inverse DFT, zero rows added."""
    planned = layout["planned"]
    n = planned["n"]
    natural = np.zeros_like(_matrix(y, layout, q))
    natural[_indices(layout)] = _matrix(y, layout, q)
    coeffs = _scaled(_dft(natural, pow(planned["root"], -1, q), q), pow(n, -1, q), q)
    big = np.zeros((extended["planned"]["n"], planned["columns"]), dtype=coeffs.dtype)
    big[:n] = coeffs
    return forward_residues(big, extended, q).reshape(-1)


def _residue_list(values: list[int], q: int) -> np.ndarray:
    return residues(values, q, residue_dtype(q))


def _scaled(values: np.ndarray, scale: int, q: int) -> np.ndarray:
    """scale * values mod q (residues), exactly whatever q (`reference`'s products)."""
    return mul_residues(values, np.broadcast_to(residues([scale % q], q, values.dtype), values.shape), q)


def _compare(got: list[int], want: np.ndarray, q: int, what: str) -> str | None:
    wrong = np.flatnonzero(_residue_list(got, q) != want)
    return None if not len(wrong) else \
        f"{what} {wrong[0]}: {got[wrong[0]] % q}, want {want[wrong[0]]} ({len(wrong)} wrong)"


def checks(manifest: dict, seed: int, randoms: int = 1) -> list[Check]:
    """Each ISA's forward and inverse transform (and coset extension) on the edges of its contract, random
    inputs and unit vectors; base multiplication on the edges."""
    q = manifest["params"]["q"]
    out = []
    for isa in isas(manifest):
        fwd, inv = function(manifest, "ntt_forward", isa), function(manifest, "ntt_inverse", isa)
        layout = fwd["output"]["layout"]
        size = fwd["args"][0]["count"]

        def forward_judge(a: list[int], fwd=fwd, layout=layout):
            def judge(outputs: dict[int, list[int]]) -> str | None:
                got = outputs[0]
                want = _scaled(forward_reference(a, layout, q), fwd["output"]["scale"], q)
                return outside(got, fwd["output"]["bound"]) or _compare(got, want, q, "position")
            return judge

        def inverse_judge(y: list[int], inv=inv, layout=layout):
            def judge(outputs: dict[int, list[int]]) -> str | None:
                got = outputs[0]
                bad = outside(got, inv["output"]["bound"])
                if bad:
                    return bad
                back = forward_reference(got, layout, q)
                want = _scaled(_residue_list(y, q), inv["output"]["scale"], q)
                wrong = np.flatnonzero(back != want)
                return None if not len(wrong) else \
                    f"the output's forward transform differs from scale * input at {len(wrong)} positions, " \
                    f"first {wrong[0]}"
            return judge

        rng = inputs_rng(seed, fwd)
        units = [("unit", [int(k == j) for j in range(size)])
                 for k in [0, size - 1] + rng.sample(range(1, size - 1), UNIT_VECTORS - 2)]
        for name, a in edge_inputs(*fwd["input"]["bound"], size, rng, randoms) + units:
            out.append(Check(Case(f"forward-{isa}-{name}-{a.index(1) if name == 'unit' else 0}", fwd["symbol"],
                                  harness_args(fwd, a)), forward_judge(a)))
        for name, y in edge_inputs(*inv["input"]["bound"], size, inputs_rng(seed, inv), randoms):
            out.append(Check(Case(f"inverse-{isa}-{name}", inv["symbol"], harness_args(inv, y)), inverse_judge(y)))
        out += _basemul_checks(function(manifest, "basemul", isa), q, size, inputs_rng(seed, fwd), randoms)
        if any(f["kind"] == "lde" for f in manifest["functions"]):
            out += _lde_checks(function(manifest, "lde", isa), q, seed, randoms)
    return out


def _lde_checks(fn: dict, q: int, seed: int, randoms: int) -> list[Check]:
    """The coset extension against the reference evaluations of its input's coefficients."""
    source = fn["args"][1]
    layout, extended = source["requires"]["layout"], fn["output"]["layout"]
    size = source["count"]

    def judge(y: list[int]):
        def check(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            want = _scaled(lde_reference(y, layout, extended, q), fn["output"]["scale"], q)
            return outside(got, fn["output"]["bound"]) or _compare(got, want, q, "position")
        return check
    rng = inputs_rng(seed, fn)
    units = [("unit", [int(k == j) for j in range(size)]) for k in (0, rng.randrange(1, size))]
    return [Check(Case(f"lde-{fn['isa']}-{name}-{y.index(1) if name == 'unit' else 0}", fn["symbol"],
                       harness_args(fn, y)), judge(y))
            for name, y in edge_inputs(*source["requires"]["bound"], size, rng, randoms) + units]


def _basemul_checks(fn: dict, q: int, size: int, rng, randoms: int) -> list[Check]:
    """Element-wise products (blocks of degree 1): r[i] = scale * a[i] * b[i] mod q, each edge of a beside
    the next of b."""
    edges = edge_inputs(*fn["input"]["bound"], size, rng, randoms)

    def judge(a: list[int], b: list[int]):
        def check(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            want = _scaled(mul_residues(_residue_list(a, q), _residue_list(b, q), q), fn["output"]["scale"], q)
            return outside(got, fn["output"]["bound"]) or _compare(got, want, q, "element")
        return check
    return [Check(Case(f"basemul-{fn['isa']}-{name}", fn["symbol"], harness_args(fn, a, b)), judge(a, b))
            for (name, a), (_, b) in zip(edges, edges[1:] + edges[:1])]


def product_judge(manifest: dict):
    """The round trip's judge (`checks.round_trips`): the product's transform is the transforms' product."""
    layout = function(manifest, "ntt_forward")["output"]["layout"]
    q = manifest["params"]["q"]

    def judge(a: list[int], b: list[int], product: list[int], q_: int, c: int) -> str | None:
        want = mul_residues(forward_reference(a, layout, q), forward_reference(b, layout, q), q)
        wrong = np.flatnonzero(forward_reference(product, layout, q) != want)
        return None if not len(wrong) else \
            f"the product's transform differs from the transforms' product at {len(wrong)} positions"
    return judge


def layout_check(manifest: dict) -> str | None:
    """Each planned layout's leaf order is a permutation of the leaf, its root a primitive root of the
    ring's order of its rows."""
    q = manifest["params"]["q"]
    for fn in manifest["functions"]:
        if fn["kind"] not in ("ntt_forward", "lde"):
            continue
        planned = fn["output"]["layout"]["planned"]
        leaf, n = planned["leaf"], planned["n"]
        if sorted(planned["leaf_order"]) != list(range(leaf)) or n % leaf:
            return f"{fn['symbol']}: leaf_order is no permutation of a leaf of {leaf} coefficients dividing n = {n}"
        order = 2 * n if planned["ring"] == "negacyclic" else n
        psi = planned["root"]
        if pow(psi, order, q) != 1 or pow(psi, order // 2, q) == 1:
            return f"{fn['symbol']}: root {psi} is not a primitive {order}-th root of unity mod {q}"
    return None
