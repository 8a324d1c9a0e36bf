"""What the FIPS 203 and FIPS 204 tests share: a shipped bundle's kernels
called through the library (kerngen.load) as a C caller calls them (tests/test_mlkem.py,
tests/test_mldsa.py), and the references they are judged against that come
from no standard's pseudocode (bit reversal, the schoolbook negacyclic product)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import kerngen
from kerngen.core.manifest import read_bundle
from kerngen.library.bundle import LoadedBundle, runnable_isas

NEEDS_TOOLS = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="needs nasm and gcc")


def bitrev(i: int, bits: int) -> int:
    """i with its `bits` low bits in reverse order (BitRev7 of FIPS 203, BitRev8 of FIPS 204)."""
    return int(f"{i:0{bits}b}"[::-1], 2)


def schoolbook(a: list[int], b: list[int], q: int) -> list[int]:
    """a*b mod (x^n + 1, q), n = len(a), by the definition: x^n = -1."""
    n = len(a)
    c = [0] * n
    for i in range(n):
        for j in range(n):
            if i + j < n:
                c[i + j] += a[i] * b[j]
            else:
                c[i + j - n] -= a[i] * b[j]
    return [x % q for x in c]


class Kernels:
    """The bundle's kernels of one ISA (kerngen.load), by the names the tests use, with the manifest's promises."""

    def __init__(self, bundle: LoadedBundle):
        self.bundle, self.isa, self.dtype = bundle, bundle.isa, bundle.dtype

    def call(self, name: str, *arrays: np.ndarray) -> None:
        getattr(self.bundle, name)(*arrays)

    def array(self, values) -> np.ndarray:
        """A fresh array of the kernels' element type holding `values` (which must fit it)."""
        out = np.zeros(len(values), dtype=self.dtype)
        out[:] = values
        if [int(x) for x in out] != [int(v) for v in values]:
            raise OverflowError(f"values do not fit {self.dtype}")
        return out

    def bound(self, name: str) -> tuple[int, int]:
        return getattr(self.bundle, name).entry.output.bound

    def requires(self, name: str) -> tuple[int, int]:
        return getattr(self.bundle, name).entry.input.bound

    def scale(self, name: str) -> int:
        return getattr(self.bundle, name).entry.output.scale


def load_kernels(bundle: Path, workdir: Path) -> dict[str, Kernels]:
    """The committed bundle at `bundle` loaded by kerngen.load (assembled in
    `workdir`), by ISA, for each of its ISAs this CPU runs (the test skips if none)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(workdir))
        isas = runnable_isas(read_bundle(bundle)[1])
        if not isas:
            pytest.skip("this CPU runs none of the bundle's ISAs")
        return {isa: Kernels(kerngen.load(bundle, isa)) for isa in isas}


def of_isa(kernels: dict[str, Kernels], isa: str) -> Kernels:
    """One ISA's kernels, or a skip where this CPU does not run them."""
    if isa not in kernels:
        pytest.skip(f"this CPU does not run {isa}")
    return kernels[isa]
