"""Planned transforms (n above 4096): the plan's structure against a direct
transform, the twiddles' closed form against the maths module, the C unit's
tables entry by entry against the manifest's rule, the verifier's refusal of
an input contract outside the lanes, and whole planned sets through `kerngen
test` on the CPU and on the machine model."""

from __future__ import annotations

import ctypes
import json
import random
import shutil

import numpy as np
import pytest

from kerngen.core.contract import ArgContract, Bound, Contract, Values
from kerngen.errors import VerifyError
from kerngen.families.ntt import plan_model
from kerngen.families.ntt.maths import NttMath
from kerngen.families.ntt.plan import plan_transform
from kerngen.families.ntt.plan_oracle import run_plan
from kerngen.families.ntt.planned import twiddle
from kerngen.harness import toolchain
from kerngen.harness.cpu import MASK_VARIABLE, host_flags
from kerngen.ir.instr import ArgBase, ArgSpec, Builder, Mem
from kerngen.machine.target import make_target
from kerngen.passes.pipeline import compile_kernel

from conftest import REPO

needs_tools = pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None,
                                 reason="nasm and gcc are needed to run kernels")
# a planned BabyBear set small enough for the suite: two stages of Rows codelets and leaves of 1024
PLANNED = {"name": "bb8k", "family": "ntt", "n": 8192, "q": 2013265921, "width": 32, "ring": "cyclic",
           "isa": ["avx512", "avx2"]}


def _direct(a: np.ndarray, n: int, columns: int, q: int, tw) -> np.ndarray:
    """Layer after layer, every butterfly of the in-place Cooley–Tukey transform (the plan's definition)."""
    a = a.copy()
    bits = n.bit_length() - 1
    for layer in range(bits):
        half = n >> (layer + 1)
        for i in range(n):
            if (i >> (bits - layer - 1)) & 1:
                continue
            w = tw(layer, i >> (bits - layer))
            x, y = a[i * columns:(i + 1) * columns].copy(), a[(i + half) * columns:(i + half + 1) * columns].copy()
            a[i * columns:(i + 1) * columns] = (x + y * w) % q
            a[(i + half) * columns:(i + half + 1) * columns] = (x - y * w) % q
    return a


@pytest.mark.parametrize("n, columns, lanes, radix, leaf, tile", [
    (64, 1, 8, 3, 16, 64), (256, 1, 4, 2, 32, 128), (32, 8, 8, 3, 2048, 256), (128, 16, 8, 3, 2048, 1024),
    (1024, 1, 8, 3, 64, 512)])
def test_a_plan_runs_every_butterfly_of_the_transform(n, columns, lanes, radix, leaf, tile):
    """Stages, tiles and calls put together do what the layers do, forward and back (with random twiddles)."""
    q, rng = 7681, random.Random(n + columns)
    tws: dict = {}
    tw = lambda layer, block: tws.setdefault((layer, block), rng.randrange(1, q))  # noqa: E731
    p = plan_transform(n, columns, lanes, 2, radix, leaf_max=leaf, tile_bytes=tile)
    a = np.array([rng.randrange(q) for _ in range(n * columns)], dtype=np.int64)
    forward = run_plan(p, a, q, tw)
    assert np.array_equal(forward, _direct(a, n, columns, q, tw))
    back = run_plan(p, forward, q, lambda layer, block: pow(tw(layer, block), -1, q), inverse=True)
    assert np.array_equal(back, a * n % q)


@pytest.mark.parametrize("ring, coset", [("negacyclic", 1), ("cyclic", 1), ("negacyclic", 7), ("cyclic", 5)])
def test_the_twiddles_closed_form_is_the_maths_module_s(ring, coset):
    math = NttMath(64, 7681 if ring == "negacyclic" else 257, 6, ring, coset)
    for layer in range(6):
        indices = range(0, 64, 64 >> layer)  # the first index of each block at `layer`
        bit = 5 - layer
        for inverse in (False, True):
            assert [twiddle(math, layer, i >> (bit + 1), inverse) for i in indices] == \
                math.twiddles(layer, bit, indices, inverse)


def test_the_verifier_refuses_an_input_contract_outside_the_lanes():
    """A contract promising inputs signed lanes cannot hold (a Shoup bundle's 2q on int32) proves nothing."""
    b = Builder(256)
    b.emit("store", Mem(ArgBase(0), 0, 32), b.op("load", Mem(ArgBase(0), 0, 32)))
    spec = ArgSpec("a", "inout", "int32_t", 4, 8, 4)
    contract = Contract((ArgContract(spec, Values(Bound(0, 4026531841)), Values(None)),), ())
    with pytest.raises(VerifyError, match="leaves the int32 lanes"):
        compile_kernel(b, "outside", contract, make_target("avx2", 32), modulus=2013265921)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The planned set emitted, its library built (the codelets and the C unit)."""
    root = tmp_path_factory.mktemp("planned")
    (root / "p.toml").write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in PLANNED.items()) + "\n")
    from kerngen.cli import main
    assert main(["emit", str(root / "p.toml"), "--out", str(root / "bb8k")]) == 0
    return root / "bb8k"


@needs_tools
def test_the_c_unit_builds_the_tables_the_manifest_says(planned, tmp_path):
    """Entry by entry, every table the C unit builds is the one the manifest's plan and root give."""
    manifest = json.loads((planned / "manifest.json").read_text())
    lib = ctypes.CDLL(str(toolchain.assemble_shared(planned / "bb8k.asm", tmp_path, [planned / "bb8k_plan.c"])))
    checked = 0
    for fn in manifest["functions"]:
        if fn["kind"] not in ("ntt_forward", "ntt_inverse") or not set(fn["cpu"]) <= host_flags():
            continue
        w, wp = plan_model.tables(manifest, fn)
        want = np.array(w + (wp or []), dtype=object) % (1 << 32)
        copy = getattr(lib, f"{fn['symbol']}_table")
        copy.restype = ctypes.c_size_t
        count = copy(None)
        out = np.zeros(count, dtype=np.int64)
        assert copy(ctypes.c_void_p(out.ctypes.data)) == count == len(want)
        assert np.array_equal(out % (1 << 32), want.astype(np.int64)), fn["symbol"]
        checked += 1
    assert checked


@needs_tools
@pytest.mark.parametrize("mask", [None, "-avx2"], ids=["cpu", "model"])
def test_a_planned_set_passes_kerngen_test(planned, kerngen_cli, monkeypatch, mask):
    """Every output of forward, inverse and base multiplication against the independent DFT, and the
    product round trips, on the CPU and, with the ISA hidden, on the machine model."""
    if mask:
        monkeypatch.setenv(MASK_VARIABLE, mask)
    r = kerngen_cli("test", planned)
    assert r.returncode == 0 and r.stdout.endswith(" 0 failed\n"), r.stdout + r.stderr
    passed = int(r.stdout.split()[-4])
    assert passed >= 20
    if mask:
        assert "running avx2 on the machine model" in r.stderr
