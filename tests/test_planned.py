"""Planned transforms over columns (a row-major n x C matrix), a chosen root of
unity, the natural order and the coset extension: the plans' steps run by the
pure-Python oracle against direct evaluation, the parameters' refusals, the
kernels on this CPU (`kerngen test`: every column against the reference DFT),
and Plonky3's conventions (dft_batch's definition, its published values)."""

from __future__ import annotations

import dataclasses
import json
import ctypes
import random
import shutil
import time

import numpy as np
import pytest

from kerngen.commands.test import test_bundle as run_kerngen_bundle
from kerngen.core.compile_cache import CompileCache
from kerngen.core.contract import Bound
from kerngen.emission.files import write
from kerngen.emission.render import render
from kerngen.errors import ParamError
from kerngen.families import build_all, from_mapping
from kerngen.families.ntt.codelets import compact_twin, moved_rows
from kerngen.families.ntt.maths import NttMath
from kerngen.families.ntt import plan as plans
from kerngen.families.ntt import plan_model
from kerngen.families.ntt.plan import Permute, Rows, permute_stage, plan_transform
from kerngen.families.ntt.plan_oracle import run_plan, run_stage
from kerngen.families.ntt.planned import Expansion, Transform, build_steps, leaf_design, transform_math, twiddle
from kerngen.families.ntt.planned_functions import forward_steps, inverse_steps, lde_math, lde_steps
from kerngen.harness import toolchain
from kerngen.harness.cpu import cpu_flags
from kerngen.ir.instr import ArgBase, Mem

from conftest import STORE

BABYBEAR, KOALABEAR, GOLDILOCKS = 2013265921, 2130706433, (1 << 64) - (1 << 32) + 1


def _set(**keys):
    table = {"name": "cols", "family": "ntt", "q": BABYBEAR, "width": 32, "ring": "cyclic", "isa": "avx2",
             "columns": 8, **keys}
    return from_mapping(table, "test")


def _brv(i: int, bits: int) -> int:
    return int(format(i, f"0{bits}b")[::-1], 2) if bits else 0


def _evaluate(coeffs: np.ndarray, points: list[int], q: int) -> np.ndarray:
    """Each column of `coeffs` (n x C, object integers) evaluated at each point: row i at points[i]."""
    n = coeffs.shape[0]
    powers = np.array([[pow(x, j, q) for j in range(n)] for x in points], dtype=object)
    return powers.dot(coeffs) % q


def _random(rows: int, columns: int, q: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    return np.array([[rng.randrange(q) for _ in range(columns)] for _ in range(rows)], dtype=object)


# --- the oracle of the plans (no kernel built) -------------------------------------------------------------

@pytest.mark.parametrize("buffer_above", [0, 1 << 30])
def test_a_plan_of_columns_is_the_dft_of_each_column_in_bit_reversed_rows(buffer_above):
    """Every layer by Rows codelets across columns, several stages (small tiles), their tiles copied to a
    buffer or not: the rows come out in the in-place order, row i the evaluation at omega^brv(i); the
    inverse plan brings back 2^L times the input."""
    n, columns, q = 64, 8, BABYBEAR
    plan = plan_transform(n, columns, 8, 4, 3, tile_bytes=1024, buffer_above=buffer_above)
    assert len(plan.stages) > 1 and all(isinstance(s.codelet, Rows) for _, s in plan.subpasses)
    assert any(st.buffered for st in plan.stages) == (buffer_above == 0)
    math = NttMath(n, q, 6, "cyclic", 1, pow(31, (q - 1) >> 6, q))
    a = _random(n, columns, q, 1)
    out = run_plan(plan, a.reshape(-1), q, lambda layer, block: twiddle(math, layer, block, False))
    want = _evaluate(a, [pow(math.psi, _brv(i, 6), q) for i in range(n)], q)
    assert (out.reshape(n, columns) == want).all()
    back = run_plan(plan, out, q, lambda layer, block: twiddle(math, layer, block, True), inverse=True)
    assert (back.reshape(n, columns) == a * n % q).all()


def test_the_bit_reversal_stage_is_the_permutation_it_names():
    stage = permute_stage(1 << 9, 8, 4)
    p = stage.subpasses[0].codelet
    assert isinstance(p, Permute) and p.tiles * (1 << 2 * p.low_bits) == 1 << 9
    a = np.arange((1 << 9) * 8, dtype=object)
    run_stage(None, stage, stage.subpasses, [a], BABYBEAR, None)
    rows = a.reshape(-1, 8)
    assert all(rows[_brv(i, 9), 0] == 8 * i for i in range(1 << 9))


@pytest.mark.parametrize("order", ["natural", "fastest"])
@pytest.mark.parametrize("buffered", [True, False])
def test_the_steps_of_each_function_compute_their_definitions(order, buffered, monkeypatch):
    """forward, inverse and lde as the C driver runs them (fills, split stages, permutations, tiles copied
    to a buffer or not), by the oracle, against direct evaluation on the chosen root's points and the
    coset's."""
    monkeypatch.setattr(plans, "BUFFER_ABOVE", 0 if buffered else plans.BUFFER_ABOVE)
    monkeypatch.setattr(plans, "TILE_BYTES", 1024)  # several stages at 64 rows
    p = _set(n=64, order=order, generator=31, lde={"added_bits": 2, "shift": 31})
    assert any(step.stage.buffered for step in lde_steps(p, p.target)) == buffered
    t = p.target
    q, n, columns = p.q, p.n, p.columns
    psi = transform_math(p).psi
    assert psi == pow(31, (q - 1) >> 6, q)
    index = (lambda i: i) if order == "natural" else (lambda i: _brv(i, 6))

    def run(steps, arrays):
        """The oracle's butterflies carry no scale: each inverse's, on its layer 0 in the kernels, is applied
        to the result (every step is linear)."""
        scales = {}
        for step in steps:
            tr = step.transform
            if isinstance(tr, Expansion):
                w = lambda t_, m, tr=tr: tr.factor(m, t_)  # noqa: E731 (a Spread's factors, by (t, m))
            else:
                w = None if tr is None else (lambda layer, block, tr=tr: twiddle(tr.math, layer, block, tr.inverted))
            run_stage(getattr(tr, "plan", None), step.stage, step.subs, arrays, q, w,
                      isinstance(tr, Transform) and tr.inverse)
            if tr is not None and tr.scale:
                scales[tr.name] = tr.scale
        arrays[0][:] = arrays[0] * int(np.prod([s for s in scales.values()], dtype=object)) % q

    coeffs = _random(n, columns, q, 2)
    a = coeffs.reshape(-1).copy()
    run(forward_steps(p, t), [a])
    evaluations = _evaluate(coeffs, [pow(psi, index(i), q) for i in range(n)], q)
    assert (a.reshape(n, columns) == evaluations).all()
    run(inverse_steps(p, t), [a])
    r = leaf_design(p, t).mul.r
    assert (a.reshape(n, columns) == coeffs * r % q).all()
    big = lde_math(p)
    out = np.zeros(big.n * columns, dtype=object)
    run(lde_steps(p, t), [out, evaluations.reshape(-1).copy()])
    points = [31 * pow(big.psi, index(i) if order == "natural" else _brv(i, 8), q) % q for i in range(big.n)]
    assert (out.reshape(big.n, columns) == _evaluate(coeffs, points, q)).all()


# --- parameters ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("keys, key, words", [
    ({"root": 1728404513}, "root", "order 2^2"),  # Plonky3's g_2 for BabyBear: a 4th root, not a 2^13-th
    ({"root": 5}, "root", "no power of two"),
    ({"generator": 4}, "generator", "non-square"),
    ({"generator": 31, "root": 440564289}, "root", "give one"),
    ({"columns": 12}, "columns", "multiple of 8"),
    ({"isa": ["avx512", "avx2"]}, "columns", "avx512vl"),  # 8 columns fill no 16-lane vector
    ({"lde": {"added_bits": 1}, "root": pow(31, (BABYBEAR - 1) >> 13, BABYBEAR)}, "lde", "give generator"),
    ({"lde": {"added_bits": 1, "shift": pow(31, (BABYBEAR - 1) >> 14, BABYBEAR)}}, "lde", "shift^16384 = 1"),
    ({"lde": {"added_bits": 5}}, "lde", "from 1 to 4"),
    ({"ring": "negacyclic", "lde": {"added_bits": 1}}, "lde", "cyclic"),
])
def test_bad_column_parameters_name_the_key_and_rule(keys, key, words):
    with pytest.raises(ParamError) as e:
        _set(n=8192, **keys)
    assert e.value.key == key and words in str(e.value)


@pytest.mark.parametrize("q, generator, n, root", [  # Plonky3's two_adic_generator(k), as its facts list them
    (BABYBEAR, 31, 1 << 14, 1657000625), (KOALABEAR, 3, 1 << 16, 1848593786),
    (GOLDILOCKS, 7, 1 << 16, 6115771955107415310),
])
def test_a_generator_gives_plonky3s_two_adic_generator(q, generator, n, root):
    width = 64 if q == GOLDILOCKS else 32
    p = _set(q=q, width=width, n=n, columns=4 if width == 64 else 8, generator=generator)
    assert transform_math(p).psi == root


def test_an_unrolled_set_takes_the_root_named():
    """The root threads through every size: an unrolled Kyber set on 17^3 has its blocks' zetas there."""
    p = from_mapping({"name": "k", "family": "ntt", "n": 256, "q": 3329, "width": 16, "isa": "avx2", "root": 1584},
                     "test")
    zetas = render(STORE.bundles(p), "test")["manifest.json"]
    layout = next(f for f in json.loads(zetas)["functions"] if f["kind"] == "ntt_forward")["output"]["layout"]
    assert layout["blocks"][0]["zeta"] == 1584  # psi itself: block 0 is x^2 - psi in the standard split


# --- codelets whose rows lie far apart -------------------------------------------------------------------------

def test_far_apart_rows_are_verified_as_their_compact_twin(monkeypatch):
    """A plan of 2^18 rows of 8 columns in place (no buffer): its first codelets' rows lie megabytes apart,
    which the verifier, tracking every element of an argument, could not hold (tens of GB); each is proven
    as its compact twin and related to it by the moved rows, so the whole forward builds in seconds."""
    monkeypatch.setattr(plans, "BUFFER_ABOVE", 1 << 40)
    p = _set(n=1 << 18)
    started = time.monotonic()
    chain = build_steps(p, p.target, forward_steps(p, p.target), Bound(0, p.q - 1), CompileCache(), {})
    assert time.monotonic() - started < 120
    top = chain.calls[0]
    assert top.sub.codelet.stride > top.sub.codelet.width and top.function.kernel.args[0].count > 1 << 20


def test_moved_rows_refuses_a_stream_that_is_not_the_twins():
    p = _set(n=1 << 12)
    chain = build_steps(p, p.target, forward_steps(p, p.target), Bound(0, p.q - 1), CompileCache(), {})
    call = next(c for c in chain.calls if c.sub.codelet.stride > c.sub.codelet.width)
    codelet, body = call.sub.codelet, call.function.kernel.body
    twin = tuple(dataclasses.replace(ins, operands=tuple(
        dataclasses.replace(op, offset=_compact(op.offset, codelet, 4)) if isinstance(op, Mem) and
        op.base == ArgBase(0) else op for op in ins.operands))
        for ins in body)
    assert compact_twin(codelet).footprint < codelet.footprint
    assert moved_rows(body, twin, codelet, 4) is None
    k = next(i for i, ins in enumerate(twin) if any(isinstance(op, Mem) and op.base == ArgBase(0)
                                                    for op in ins.operands))
    shifted = list(twin)
    shifted[k] = dataclasses.replace(twin[k], operands=tuple(
        dataclasses.replace(op, offset=op.offset + 4 * codelet.width) if isinstance(op, Mem) else op
        for op in twin[k].operands))  # one access to the next row's elements
    assert "moved to row" in moved_rows(body, tuple(shifted), codelet, 4)


def _compact(offset: int, codelet: Rows, elem: int) -> int:
    row, within = divmod(offset, codelet.stride * elem)
    return row * codelet.width * elem + within


# --- the kernels on this CPU ------------------------------------------------------------------------------------

CPU_ISAS = [pytest.param("avx2", 8, id="avx2"),
            pytest.param("avx512", 16, id="avx512", marks=pytest.mark.skipif(
                "avx512f" not in cpu_flags(), reason="the CPU has no AVX-512"))]


@pytest.mark.parametrize("on_model", [False, True], ids=["cpu", "model"])
@pytest.mark.parametrize("isa, columns", CPU_ISAS)
def test_columns_pass_kerngen_test(isa, columns, on_model, tmp_path, monkeypatch):
    """n = 2^13 rows of a vector's columns, natural order, Plonky3's root, an extension by 2: forward,
    inverse, base multiplication and lde judged column by column against the reference DFT, on the CPU and
    on the machine model (the manifest's plans run through the codelets read back: permutations, fills,
    buffers, spreads). The AVX2 set is built with the tiles of its strided stages copied to a buffer, as
    arrays above BUFFER_ABOVE are (so not through the store, which keys bundles by the sources)."""
    p = _set(n=1 << 13, isa=isa, columns=columns, order="natural", generator=31,
             lde={"added_bits": 1, "shift": 31})
    if isa == "avx2":
        monkeypatch.setattr(plans, "BUFFER_ABOVE", 0)
        monkeypatch.setattr(plans, "TILE_BYTES", 32 * 1024)
        bundles = build_all(p, CompileCache())
    else:
        bundles = STORE.bundles(p)
    files = render(bundles, "test")
    assert ("tile_rows" in files[f"{p.name}_plan.c"]) == (isa == "avx2")
    write(files, tmp_path / "cols")
    outcome = run_kerngen_bundle(tmp_path / "cols", 3, lambda s: None, tmp_path, reemit=False, on_model=on_model)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 30


@pytest.mark.parametrize("isa, columns", CPU_ISAS)
def test_dft_batch_of_babybear_as_plonky3_defines_it(isa, columns, tmp_path):
    """BabyBear, generator 31, cyclic, natural order: the forward is dft_batch (y_i = sum_j c_j g^(ij), g
    Plonky3's two_adic_generator(3)), its published 8-point value of x included; the extension is
    coset_lde_batch(m, 1, 31), its published value of x on H_8 included; the inverse is INVERSE_SCALE times
    idft_batch."""
    import kerngen

    q = BABYBEAR
    p = _set(n=8, isa=isa, columns=columns, order="natural", generator=31, lde={"added_bits": 1})
    write(render(STORE.bundles(p), "test"), tmp_path / "b")
    b = kerngen.load(tmp_path / "b", isa)
    coeffs = _random(8, columns, q, 3)
    coeffs[:, 0] = [0, 1, 0, 0, 0, 0, 0, 0]  # the polynomial x
    a = coeffs.reshape(-1).astype(np.uint32)
    b.ntt_forward(a)
    got = a.reshape(8, columns).astype(object) % q
    g = pow(31, (q - 1) >> 3, q)
    assert (got == _evaluate(coeffs, [pow(g, i, q) for i in range(8)], q)).all()
    assert got[:, 0].tolist() == [1, 1592366214, 1728404513, 211723194, 2013265920, 420899707, 284861408,
                                  1801542727]
    out = np.zeros(16 * columns, dtype=np.uint32)
    b.lde(out, got.reshape(-1).astype(np.uint32))
    assert (out.reshape(16, columns)[:5, 0] % q).tolist() == [31, 48486297, 1044970530, 434053879, 1235625957]
    scale = json.loads((tmp_path / "b" / "manifest.json").read_text())
    scale = next(f for f in scale["functions"] if f["kind"] == "ntt_inverse")["output"]["scale"]
    back = got.reshape(-1).astype(np.uint32)
    b.ntt_inverse(back)
    assert (back.reshape(8, columns).astype(object) % q == coeffs * scale % q).all()


def test_threads_run_a_columns_plan_as_one_call_does(tmp_path):
    """threads= splits every stage of a plan of columns (a permutation, an extension's fills and spread) into
    tile ranges on a pool: the outputs are the single call's, and the domain names each row's point."""
    import kerngen

    q = BABYBEAR
    p = _set(n=1 << 13, order="natural", generator=31, lde={"added_bits": 1, "shift": 31})
    write(render(STORE.bundles(p), "test"), tmp_path / "t")
    b = kerngen.load(tmp_path / "t", "avx2")
    coeffs = _random(1 << 13, 8, q, 5)
    one, four = (coeffs.reshape(-1).astype(np.uint32) for _ in range(2))
    b.ntt_forward(one)
    b.ntt_forward(four, threads=4)
    assert np.array_equal(one, four)
    domain = b.domain()
    rows = [int(r) for r in domain.positions[:3, 0]]
    assert (one.reshape(-1, 8)[rows, :1].astype(object) % q ==
            _evaluate(coeffs[:, :1], [int(z) for z in domain.zetas[:3]], q)).all()
    out1, out4 = np.zeros(2 * one.size, dtype=np.uint32), np.zeros(2 * one.size, dtype=np.uint32)
    b.lde(out1, one)
    b.lde(out4, one, threads=3)
    assert np.array_equal(out1, out4)


@pytest.mark.skipif(shutil.which("nasm") is None or shutil.which("gcc") is None, reason="nasm and gcc are needed")
def test_the_c_unit_builds_the_extension_tables_the_manifest_says(tmp_path):
    """Entry by entry, the tables of every planned function of columns (a spread's factors, two transforms'
    twiddles, inverted or not, the scale) are the ones the manifest's plan gives (`plan_model.tables`)."""
    p = _set(n=1 << 10, generator=31, lde={"added_bits": 2, "shift": 31})
    write(render(STORE.bundles(p), "test"), tmp_path / "t")
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    unit = tmp_path / "t" / "cols_plan.c"
    lib = ctypes.CDLL(str(toolchain.assemble_shared(tmp_path / "t" / "cols.asm", tmp_path, [unit])))
    kinds = set()
    for fn in manifest["functions"]:
        if "plan" not in fn or not fn["plan"]["entries"]:
            continue
        w, wp = plan_model.tables(manifest, fn)
        copy = getattr(lib, f"{fn['symbol']}_table")
        copy.restype = ctypes.c_size_t
        out = np.zeros(copy(None), dtype=np.int64)
        assert copy(ctypes.c_void_p(out.ctypes.data)) == len(w + (wp or []))
        assert np.array_equal(out % (1 << 32), np.array(w + (wp or []), dtype=object) % (1 << 32)), fn["symbol"]
        kinds.add(fn["kind"])
    assert kinds == {"ntt_forward", "ntt_inverse", "lde"}
