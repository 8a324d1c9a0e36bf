"""Many inputs at once through a linear kernel, judged by its basis images.

A kernel proven linear mod q is determined by its images of the unit
vectors (`checks.basis_proofs`), so its output for any input a is a times
that matrix, mod q. The sweep runs each NTT on many inputs in one kg_batch
call — half uniform over its input contract, half with every element near
one end of it, chosen at random element by element — and compares the
outputs with those products and the output bound. What unit vectors and a
few edge inputs pass and these find: a Shoup quotient w' off by one (wrong
on about one uniform input in fifty), a conditional subtraction left out
(about one mixed-extremes input in thirty), on any ISA.
"""

from __future__ import annotations

import numpy as np

from .inputs import NEAR
from .reference import mulmod

# at most this many multiply-adds of the products (float64, exact below 2^53), per kernel
BUDGET = 1 << 29
MOST_ROWS, FEWEST_ROWS = 512, 16
LIMB = 16  # bits of a limb: a product of two limbs summed over 2^21 elements stays below 2^53


def rows_for(n: int, q: int) -> int:
    """How many inputs a sweep of an n-element kernel mod q runs: as many as
    the budget allows, at most `MOST_ROWS`, at least `FEWEST_ROWS`."""
    limbs = -(-q.bit_length() // LIMB)
    return max(FEWEST_ROWS, min(MOST_ROWS, BUDGET // (n * n * limbs * limbs)))


def sweep_inputs(lo: int, hi: int, n: int, rows: int, seed: int) -> np.ndarray:
    """`rows` inputs of n elements in [lo, hi]: the first half uniform, the
    others each element within `NEAR` of lo or of hi, at random."""
    rng = np.random.default_rng(seed)
    half = rows // 2
    near = min(NEAR, hi - lo)
    dtype = np.int64 if hi < 1 << 63 else np.uint64  # unsigned lanes of a q near 2^64 reach past int64
    uniform = rng.integers(lo, hi, size=(half, n), endpoint=True, dtype=dtype)
    top = rng.integers(0, 2, size=(rows - half, n)).astype(bool)
    offset = rng.integers(0, near, size=(rows - half, n), endpoint=True, dtype=dtype)
    return np.concatenate([uniform, np.where(top, hi - offset, lo + offset)])


def _limbs(residues: np.ndarray, count: int) -> list[np.ndarray]:
    mask = np.uint64((1 << LIMB) - 1)
    return [((residues >> np.uint64(LIMB * i)) & mask).astype(np.float64) for i in range(count)]


def images_product(inputs: np.ndarray, images: np.ndarray, q: int) -> np.ndarray:
    """inputs @ images mod q, exactly, as uint64 residues: both split into
    16-bit limbs whose products BLAS sums exactly in float64."""
    if q >= 1 << 62:  # sums of two residues can wrap uint64, products pass `mulmod`'s bound: Python integers
        return (residues(inputs, q).astype(object) @ residues(images, q).astype(object) % q).astype(np.uint64)
    count = -(-q.bit_length() // LIMB)
    xs = _limbs(residues(inputs, q), count)
    us = _limbs(residues(images, q), count)
    out = np.zeros((inputs.shape[0], images.shape[1]), dtype=np.uint64)
    for i, x in enumerate(xs):
        for j, u in enumerate(us):
            part = (x @ u).astype(np.uint64) % np.uint64(q)
            shift = np.uint64(pow(2, LIMB * (i + j), q))
            out = (out + (part * shift if q < 1 << 31 else mulmod(part, shift, q))) % np.uint64(q)
    return out


def residues(values: np.ndarray, q: int) -> np.ndarray:
    """Values (signed or unsigned integers, or Python integers) as uint64 residues mod q."""
    if values.dtype == np.uint64:
        return values % np.uint64(q)
    if values.dtype == object:
        return np.array([[int(v) % q for v in row] for row in values], dtype=np.uint64)
    return (values.astype(np.int64) % q).astype(np.uint64)


def sweep(fn: dict, images: np.ndarray, q: int, batch, seed: int,
          judged: dict | None = None) -> tuple[str, str | None]:
    """(what ran, None or the first wrong output) for the linear kernel `fn`
    on `rows_for` inputs through `batch(fn, inputs)`. `judged` keeps the
    expected outputs by everything they derive from (the images given for
    `fn`'s kind, its input bound, scale and the seed), for the next ISA's
    kernel of the same function."""
    n = fn["args"][0]["count"]
    rows = rows_for(n, q)
    lo, hi = fn["input"]["bound"]
    x = sweep_inputs(lo, hi, n, rows, seed)
    got = batch(fn, {0: x})[0]
    olo, ohi = fn["output"]["bound"]
    what = f"sweep of {fn['symbol']} ({rows} inputs: uniform, and each element near an end of its contract)"
    outside = np.argwhere((got < olo) | (got > ohi)) if got.dtype != np.uint64 else np.argwhere(got > np.uint64(ohi))
    if len(outside):
        r, e = outside[0]
        return what, f"input {r}: element {e} = {got[r, e]} is outside the output bound [{olo}, {ohi}]"
    key = (fn["kind"], lo, hi, rows, seed, fn["output"]["scale"])
    judged = {} if judged is None else judged
    if key not in judged:
        judged[key] = mulmod(images_product(x, images, q), np.uint64(fn["output"]["scale"] % q), q) % np.uint64(q)
    want = judged[key]
    wrong = np.argwhere(residues(got, q) != want)
    if len(wrong):
        r, e = wrong[0]
        return what, f"input {r}: element {e} is {got[r, e]}, want {int(want[r, e])} mod {q}"
    return what, None
