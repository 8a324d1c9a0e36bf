"""What the FIPS 203 and FIPS 204 tests share: a shipped bundle's kernels
called through ctypes as a C caller calls them (tests/test_mlkem.py,
tests/test_mldsa.py), and the references they are judged against that come
from no standard's pseudocode (bit reversal, the schoolbook negacyclic product)."""

from __future__ import annotations

import ctypes
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kerngen.harness import toolchain
from kerngen.harness.cpu import cpu_flags

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
    """The bundle's kernels of one ISA through ctypes, with the manifest's promises."""

    def __init__(self, lib: ctypes.CDLL, manifest: dict, isa: str):
        self.lib, self.isa = lib, isa
        self.fns = {f["kind"] + (str(f["k"]) if "k" in f else ""): f for f in manifest["functions"] if f["isa"] == isa}
        self.dtype = np.dtype(self.fns["ntt_forward"]["dtype"])

    def call(self, kind: str, *arrays: np.ndarray) -> None:
        if any(a.dtype != self.dtype for a in arrays):
            raise TypeError(f"{kind} takes {self.dtype} arrays")
        getattr(self.lib, self.fns[kind]["symbol"])(*(a.ctypes.data_as(ctypes.c_void_p) for a in arrays))

    def array(self, values) -> np.ndarray:
        """A fresh array of the kernels' element type holding `values` (which must fit it)."""
        out = np.zeros(len(values), dtype=self.dtype)
        out[:] = values
        if [int(x) for x in out] != [int(v) for v in values]:
            raise OverflowError(f"values do not fit {self.dtype}")
        return out

    def bound(self, kind: str) -> list[int]:
        return self.fns[kind]["output"]["bound"]

    def requires(self, kind: str) -> list[int]:
        return self.fns[kind]["input"]["bound"]

    def scale(self, kind: str) -> int:
        return self.fns[kind]["output"]["scale"]


def load_kernels(bundle: Path, workdir: Path) -> dict[str, Kernels]:
    """The committed bundle at `bundle` assembled into a shared object, by
    ISA, for each of its ISAs this CPU runs (the test skips if none)."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    so = toolchain.assemble_shared(bundle / f"{manifest['params']['name']}.asm", workdir)
    lib = ctypes.CDLL(str(so))
    host = cpu_flags()
    isas = [isa for isa in manifest["params"]["isa"]
            if all(set(f["cpu"]) <= host for f in manifest["functions"] if f["isa"] == isa)]
    if not isas:
        pytest.skip("this CPU runs none of the bundle's ISAs")
    return {isa: Kernels(lib, manifest, isa) for isa in isas}


def of_isa(kernels: dict[str, Kernels], isa: str) -> Kernels:
    """One ISA's kernels, or a skip where this CPU does not run them."""
    if isa not in kernels:
        pytest.skip(f"this CPU does not run {isa}")
    return kernels[isa]
