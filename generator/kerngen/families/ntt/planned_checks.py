"""Checks of planned transforms (n above the unrolled sizes), from the manifest alone.

The forward transform's layout (`planned.PlannedLayout.manifest`) says
position p holds a(zeta_i) for the in-place Cooley–Tukey index i = (p //
leaf) * leaf + leaf_order[p % leaf], zeta_i = g psi^(2 brv(i) + 1)
(negacyclic) or g omega^brv(i) (cyclic). The reference computes every
evaluation at once by another route: the coefficients twisted by (g psi)^k
(or g^k), a cyclic DFT in natural order (iterative radix 2 over numpy
arrays, exact residues: `reference`), then the evaluations placed by the
layout. Checks judge all n outputs of each call: the forward against the
reference, the inverse by the reference of its output (the forward map is a
bijection, so scale * input back means the inverse is right), on inputs at
the edges of each contract, random ones and unit vectors.
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
    """B[j] = sum_k b[k] omega^(jk) mod q in natural order: iterative radix-2 decimation in time."""
    n = len(b)
    bits = n.bit_length() - 1
    dtype = b.dtype
    x = b[_bit_reversal(bits)].copy()
    h = 1
    while h < n:
        w = pow(omega, n // (2 * h), q)
        tw = residues([pow(w, k, q) for k in range(h)], q, dtype)
        x = x.reshape(n // (2 * h), 2, h)
        u, v = x[:, 0, :], mul_residues(x[:, 1, :], np.broadcast_to(tw, x[:, 1, :].shape), q)
        x = np.stack([(u + v) % q, (u + q - v) % q], axis=1).reshape(n)
        h *= 2
    return x


def forward_reference(a: list[int], params: dict, planned: dict) -> np.ndarray:
    """The forward transform of `a` as the layout places it (residues)."""
    n, q = params["n"], params["q"]
    psi, g = planned["root"], planned["coset"]
    dtype = residue_dtype(q)
    negacyclic = planned["ring"] == "negacyclic"
    twist = g * psi % q if negacyclic else g % q
    factors = powers(residues([twist], q, dtype), n, q, dtype)[0]  # (g psi)^k or g^k, k < n
    coeffs = mul_residues(residues(a, q, dtype), factors, q)
    natural = _dft(coeffs, psi * psi % q if negacyclic else psi, q)
    bits = n.bit_length() - 1
    leaf = planned["leaf"]
    order = np.asarray(planned["leaf_order"], dtype=np.int64)
    positions = np.arange(n, dtype=np.int64)
    index = positions // leaf * leaf + order[positions % leaf]
    return natural[_bit_reversal(bits)[index]]


def _residue_list(values: list[int], q: int) -> np.ndarray:
    return residues(values, q, residue_dtype(q))


def _scaled(values: np.ndarray, scale: int, q: int) -> np.ndarray:
    """scale * values mod q (residues), exactly whatever q (`reference`'s products)."""
    return mul_residues(values, residues([scale % q] * len(values), q, values.dtype), q)


def checks(manifest: dict, seed: int, randoms: int = 1) -> list[Check]:
    """Each ISA's forward and inverse transform on the edges of its contract, random inputs and unit vectors."""
    params = manifest["params"]
    n, q = params["n"], params["q"]
    out = []
    for isa in isas(manifest):
        fwd, inv = function(manifest, "ntt_forward", isa), function(manifest, "ntt_inverse", isa)
        planned = fwd["output"]["layout"]["planned"]

        def forward_judge(a: list[int], fwd=fwd, planned=planned):
            def judge(outputs: dict[int, list[int]]) -> str | None:
                got = outputs[0]
                bad = outside(got, fwd["output"]["bound"])
                if bad:
                    return bad
                want = _scaled(forward_reference(a, params, planned), fwd["output"]["scale"], q)
                wrong = np.flatnonzero(_residue_list(got, q) != want)
                return None if not len(wrong) else \
                    f"position {wrong[0]}: {got[wrong[0]] % q}, want {want[wrong[0]]} ({len(wrong)} positions wrong)"
            return judge

        def inverse_judge(y: list[int], inv=inv, planned=planned):
            def judge(outputs: dict[int, list[int]]) -> str | None:
                got = outputs[0]
                bad = outside(got, inv["output"]["bound"])
                if bad:
                    return bad
                back = forward_reference(got, params, planned)
                want = _scaled(_residue_list(y, q), inv["output"]["scale"], q)
                wrong = np.flatnonzero(back != want)
                return None if not len(wrong) else \
                    f"the output's forward transform differs from scale * input at {len(wrong)} positions, " \
                    f"first {wrong[0]}"
            return judge

        rng = inputs_rng(seed, fwd)
        units = [("unit", [int(k == j) for j in range(n)]) for k in [0, n - 1] + rng.sample(range(1, n - 1),
                                                                                           UNIT_VECTORS - 2)]
        for name, a in edge_inputs(*fwd["input"]["bound"], n, rng, randoms) + units:
            out.append(Check(Case(f"forward-{isa}-{name}-{a.index(1) if name == 'unit' else 0}", fwd["symbol"],
                                  harness_args(fwd, a)), forward_judge(a)))
        for name, y in edge_inputs(*inv["input"]["bound"], n, inputs_rng(seed, inv), randoms):
            out.append(Check(Case(f"inverse-{isa}-{name}", inv["symbol"], harness_args(inv, y)), inverse_judge(y)))
        out += _basemul_checks(function(manifest, "basemul", isa), q, n, inputs_rng(seed, fwd), randoms)
    return out


def _basemul_checks(fn: dict, q: int, n: int, rng, randoms: int) -> list[Check]:
    """Element-wise products (blocks of degree 1): r[i] = scale * a[i] * b[i] mod q, each edge of a beside
    the next of b."""
    edges = edge_inputs(*fn["input"]["bound"], n, rng, randoms)

    def judge(a: list[int], b: list[int]):
        def check(outputs: dict[int, list[int]]) -> str | None:
            got = outputs[0]
            bad = outside(got, fn["output"]["bound"])
            if bad:
                return bad
            want = _scaled(mul_residues(_residue_list(a, q), _residue_list(b, q), q), fn["output"]["scale"], q)
            wrong = np.flatnonzero(_residue_list(got, q) != want)
            return None if not len(wrong) else f"element {wrong[0]}: {got[wrong[0]] % q}, want {want[wrong[0]]}"
        return check
    return [Check(Case(f"basemul-{fn['isa']}-{name}", fn["symbol"], harness_args(fn, a, b)), judge(a, b))
            for (name, a), (_, b) in zip(edges, edges[1:] + edges[:1])]


def product_judge(manifest: dict):
    """The round trip's judge (`checks.round_trips`): the product's transform is the transforms' product."""
    params = manifest["params"]
    planned = function(manifest, "ntt_forward")["output"]["layout"]["planned"]
    q = params["q"]

    def judge(a: list[int], b: list[int], product: list[int], q_: int, c: int) -> str | None:
        want = mul_residues(forward_reference(a, params, planned), forward_reference(b, params, planned), q)
        wrong = np.flatnonzero(forward_reference(product, params, planned) != want)
        return None if not len(wrong) else \
            f"the product's transform differs from the transforms' product at {len(wrong)} positions"
    return judge


def layout_check(manifest: dict) -> str | None:
    """The leaf order is a permutation of the leaf, the root a primitive root of the ring's order."""
    fwd = function(manifest, "ntt_forward")
    planned, params = fwd["output"]["layout"]["planned"], manifest["params"]
    leaf, q, n = planned["leaf"], params["q"], params["n"]
    if sorted(planned["leaf_order"]) != list(range(leaf)) or n % leaf:
        return f"leaf_order is no permutation of a leaf of {leaf} coefficients dividing n = {n}"
    order = 2 * n if planned["ring"] == "negacyclic" else n
    psi = planned["root"]
    if pow(psi, order, q) != 1 or pow(psi, order // 2, q) == 1:
        return f"root {psi} is not a primitive {order}-th root of unity mod {q}"
    return None
