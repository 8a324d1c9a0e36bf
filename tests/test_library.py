"""kerngen as a Python library (kerngen.load, build, explore): kernels called
on numpy arrays against references, batches, refusals naming the argument,
the cache, and a non-editable install used from another directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import kerngen
import kerngen.errors
from conftest import REPO
from fips import NEEDS_TOOLS, schoolbook
from kerngen.harness.cpu import cpu_flags

pytestmark = NEEDS_TOOLS
KYBER = REPO / "generated" / "kyber-3329"
GF2M = REPO / "generated" / "gf2m-233"
SESSION = re.compile(r"<!-- library-session:start -->\s*```python\n(.*?)```\s*<!-- library-session:end -->", re.S)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """The user's cache directory, one for the module: each bundle is assembled once."""
    path = tmp_path_factory.mktemp("library") / "cache"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(path))
        yield path


@pytest.fixture
def kyber(cache):
    return kerngen.load(KYBER)


def polys(shape, q=3329, seed=1):
    return np.random.default_rng(seed).integers(-(q - 1), q, shape).astype(np.int16)


def test_product_of_two_polynomials_matches_the_schoolbook_product(kyber):
    q, n = 3329, 256
    a, b = polys(n, seed=2), polys(n, seed=3)
    fa, fb, r = a.copy(), b.copy(), np.empty(n, np.int16)
    kyber.ntt_forward(fa)
    kyber.ntt_forward(fb)
    kyber.basemul(r, fa, fb)
    kyber.ntt_inverse(r)
    scale = kyber.basemul.entry.output.scale * kyber.ntt_inverse.entry.output.scale % q
    expected = [x * scale % q for x in schoolbook([int(x) for x in a], [int(x) for x in b], q)]
    assert [int(x) % q for x in r] == expected


def test_the_isa_is_the_first_of_the_dispatch_order_the_cpu_runs(kyber, cache):
    manifest = json.loads((KYBER / "manifest.json").read_text())
    runnable = [isa for isa in manifest["params"]["isa"]
                if all(set(f["cpu"]) <= cpu_flags() for f in manifest["functions"] if f["isa"] == isa)]
    assert kyber.isa == runnable[0]
    assert kerngen.load(KYBER, isa="sse").isa == "sse"
    with pytest.raises(ValueError, match="no 'scalar' kernels"):
        kerngen.load(KYBER, isa="scalar")
    assert list((cache / "kerngen" / "lib").glob("kyber-3329-*.so"))  # assembled into the user's cache


def test_a_batch_equals_row_by_row_calls_and_costs_about_the_kernels_time(kyber):
    rows = polys((4096, 256))
    batch = rows.copy()
    kyber.ntt_forward(batch)
    for i in (0, 1, 2047, 4095):
        one = rows[i].copy()
        kyber.ntt_forward(one)
        assert (batch[i] == one).all()
    fn, row = kyber.ntt_forward, rows[0].copy()

    def kernel_alone():  # the same row 4096 times in the C loop: the kernel's own time, no checks, in L1
        return fn._loop(fn._address, 1, (ctypes_pointer * 1)(row.ctypes.data), (ctypes_ssize * 1)(0), len(rows))

    def timed(call):
        data = rows.copy()
        start = time.perf_counter()
        call(data)
        return time.perf_counter() - start

    # alternated, and the fastest of each: the suite's other workers share the cores and the caches
    pairs = [(timed(lambda _: kernel_alone()), timed(kyber.ntt_forward)) for _ in range(25)]
    alone, batched = min(a for a, _ in pairs), min(b for _, b in pairs)
    assert batched < 2.5 * alone, f"a (4096, 256) batch took {batched * 1e3:.2f} ms, the kernel alone {alone * 1e3:.2f} ms"


import ctypes  # noqa: E402

ctypes_pointer, ctypes_ssize = ctypes.c_void_p, ctypes.c_ssize_t


@pytest.mark.parametrize("make, error, rule", [
    (lambda: np.zeros(256, np.float64), TypeError, "dtype int16"),
    (lambda: np.zeros(256, np.int32), TypeError, "dtype int16"),
    (lambda: [0] * 256, TypeError, "numpy array"),
    (lambda: np.zeros(255, np.int16), ValueError, "256 elements"),
    (lambda: np.zeros((256, 2), np.int16)[:, 0], ValueError, "ascontiguousarray"),
    (lambda: np.full(256, 4000, np.int16), ValueError, r"4000, outside the proven input bound \[-3328, 3328\]"),
])
def test_wrong_arrays_are_refused_naming_the_function_and_argument(kyber, make, error, rule):
    with pytest.raises(error, match=rf"ntt_forward_\w+: argument 'a': .*{rule}"):
        kyber.ntt_forward(make())


def test_the_contract_check_can_be_turned_off_and_aliasing_is_refused(kyber):
    kyber.ntt_forward(np.full(256, 4000, np.int16), check=False)  # the caller's risk: no error
    a = polys(257)  # r may be the very array a is (the manifest's may_alias), never a shifted view of it
    with pytest.raises(ValueError, match="argument 'r': overlaps argument 'a'; it may be"):
        kyber.basemul(a[1:], a[:256], polys(256))
    with pytest.raises(ValueError, match="argument 'r': is written"):
        kyber.basemul(np.empty(256, np.int16), polys((3, 256)), polys((3, 256)))


def shoup_operands(shape, q=3329, bits=16, seed=7):
    """a, w and w' = floor(w*2^bits/q) as Shoup's kernels take them."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << bits, shape, dtype=np.uint16)
    w = rng.integers(0, q, shape, dtype=np.uint16)
    return a, w, ((w.astype(np.uint64) << np.uint64(bits)) // np.uint64(q)).astype(np.uint16)


def test_shoup_s_w_prime_must_be_floor_w_2_to_the_w_over_q(kyber):
    a, w, wp = shoup_operands(256)
    r = np.empty(256, np.uint16)
    kyber.mulmod_shoup(r, a, w, wp)
    assert all(int(x) % 3329 == int(y) * int(z) % 3329 for x, y, z in zip(r, a, w))
    wp[5] += 1  # one w' off: the product of that element is no longer a*w mod q
    with pytest.raises(ValueError, match=rf"mulmod_shoup_\w+: argument 'wp': holds {wp[5]} where 'w' holds {w[5]} "
                                         rf"\(element 5\); it must be floor\(w\*2\^16/q\) = {wp[5] - 1} for q = 3329"):
        kyber.mulmod_shoup(r, a, w, wp)
    kyber.mulmod_shoup(r, a, w, wp, check=False)  # the caller's risk
    wp[5] -= 1
    rows_wp = np.broadcast_to(wp, (3, 256)).copy()  # a row of w' per call beside one row of w for every call
    rows_wp[2, 9] ^= 1
    with pytest.raises(ValueError, match=r"muladd_shoup_\w+: argument 'wp': .*\(element \(2, 9\)\)"):
        kyber.muladd_shoup(np.empty((3, 256), np.uint16), shoup_operands((3, 256))[0], w, rows_wp,
                           np.zeros(256, np.uint16))


def test_arguments_by_the_manifest_s_names(kyber):
    a, w, wp = shoup_operands(256)
    by_position, by_name, mixed = (np.empty(256, np.uint16) for _ in range(3))
    kyber.mulmod_shoup(by_position, a, w, wp)
    kyber.mulmod_shoup(wp=wp, w=w, a=a, r=by_name)
    kyber.mulmod_shoup(mixed, a, wp=wp, w=w)
    assert (by_name == by_position).all() and (mixed == by_position).all()
    signature = r"mulmod_shoup_\w+: takes 4 arrays \(r, a, w, wp\)"
    with pytest.raises(TypeError, match=rf"{signature}; it has no argument 'x'"):
        kyber.mulmod_shoup(by_name, a, w, x=wp)
    with pytest.raises(TypeError, match=rf"{signature}; 'a' is given twice"):
        kyber.mulmod_shoup(by_name, a, w, wp, a=a)
    with pytest.raises(TypeError, match=rf"{signature}; missing 'w', 'wp'"):
        kyber.mulmod_shoup(by_name, a=a)


def test_load_and_build_say_what_they_take(cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no directory kyber-3329 here
    with pytest.raises(kerngen.errors.BundleError, match=r"cannot be read: .*; 'kyber-3329' names a shipped parameter "
                                                         r"set, not a bundle: kerngen.build\('kyber-3329'\)"):
        kerngen.load("kyber-3329")
    (tmp_path / "mine.toml").write_text((REPO / "params/tiny-257.toml").read_text())
    with pytest.raises(kerngen.errors.BundleError, match=r"'mine.toml' is a parameter file, not a bundle: "
                                                         r"kerngen.build\('mine.toml'\)"):
        kerngen.load("mine.toml")
    with pytest.raises(kerngen.errors.BundleError) as e:
        kerngen.load("no-such-set")
    assert "kerngen.build" not in str(e.value)
    for call in (kerngen.build, kerngen.explore):
        with pytest.raises(TypeError, match=rf"kerngen.{call.__name__}: takes a parameter file .* got int 3329"):
            call(3329)
    with pytest.raises(TypeError, match=r"kerngen.load: takes a bundle directory .* got int 3329"):
        kerngen.load(3329)


def test_a_gf2m_product_matches_carry_less_multiplication_mod_the_polynomial(cache):
    field = kerngen.load(GF2M)
    m, poly = 233, (1 << 233) | (1 << 74) | 1
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 2**63, (2, 8, 4), dtype=np.uint64)
    a[:, 3] &= np.uint64((1 << (m - 192)) - 1)
    b[:, 3] &= np.uint64((1 << (m - 192)) - 1)
    out = np.empty_like(a)
    field.mul(out, a, b)

    def value(limbs):
        return sum(int(x) << (64 * i) for i, x in enumerate(limbs))

    for x, y, got in zip(a, b, out):
        product = 0
        for i in range(m):
            if value(y) >> i & 1:
                product ^= value(x) << i
        for bit in range(2 * m, m - 1, -1):
            if product >> bit & 1:
                product ^= poly << (bit - m)
        assert value(got) == product
    a[0, 3] = np.uint64(1 << 63)
    with pytest.raises(ValueError, match=r"mul_avx(512|2): argument 'a': .*bit 233"):
        field.mul(out, a, b)


def test_a_second_build_of_the_same_set_loads_at_once(cache):
    first = kerngen.build("kyber-3329")
    start = time.perf_counter()
    again = kerngen.build("kyber-3329")
    assert time.perf_counter() - start < 1.0
    assert again.directory == first.directory and "ntt_forward" in again.kernels
    assert first.domain().positions.shape == (128, 2) and len(first.domain().zetas) == 128
    # emitted by this kerngen: every input with its own bound, aliasing as data
    fa, fb = polys(256, seed=5), polys(256, seed=6)
    first.basemul(fa, fa, fb)  # r may be the same array as a
    both = np.zeros(512, np.int16)
    with pytest.raises(ValueError, match="argument 'r': overlaps argument 'a'; it may be the same array as a, b only"):
        first.basemul(both[:256], both[128:384], fb)
    r, a, w = (np.zeros(256, np.uint16) for _ in range(3))
    w[7] = 3329
    with pytest.raises(ValueError, match=r"mulmod_shoup_\w+: argument 'w': holds 3329, outside .* \[0, 3328\]"):
        first.mulmod_shoup(r, a, w, np.zeros(256, np.uint16))


def test_import_kerngen_loads_no_numpy():
    code = "import sys, kerngen; print('numpy' in sys.modules, callable(kerngen.load))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_the_library_session_runs_from_any_directory(cache, monkeypatch, tmp_path):
    """docs/library.md's worked session, as a user copies it, run outside the repository."""
    found = SESSION.search((REPO / "docs" / "library.md").read_text())
    assert found is not None, "docs/library.md has no library session between its markers"
    monkeypatch.chdir(tmp_path)
    exec(compile(found.group(1), "docs/library.md library session", "exec"), {})


def test_a_non_editable_install_works_from_another_directory(tmp_path):
    """pip install (not editable) of a copy of the sources into a venv that
    borrows this environment's libraries, then a product from elsewhere."""
    wanted = re.search(r'"setuptools>=([0-9]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    have = metadata.version("setuptools")
    # building without isolation uses this one, so nothing is downloaded; the set-up (make setup) installs it
    assert int(have.split(".")[0]) >= int(wanted), f"setuptools {have} here, the build needs >= {wanted}"
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "LICENSE", "LICENSE-MIT", "LICENSE-APACHE", "generator", "harness", "templates",
                 "params"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name, **({"symlinks": True, "ignore": shutil.ignore_patterns("__pycache__")}
                                             if copy is shutil.copytree else {}))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    borrowed = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "numpy").is_dir())
    (site / "borrowed.pth").write_text(borrowed + "\n")  # numpy and setuptools from here: nothing is downloaded
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", source], check=True, env=env, cwd=tmp_path)
    script = textwrap.dedent(f"""
        import numpy as np, kerngen
        assert "site-packages" in kerngen.__file__, kerngen.__file__
        b = kerngen.load({str(KYBER)!r})
        a = np.zeros(256, np.int16); a[1] = 1
        r = np.empty(256, np.int16); b.ntt_forward(a); b.basemul(r, a, a); b.ntt_inverse(r)
        print(int(r[2]) * pow(int(b.basemul.entry.output.scale * b.ntt_inverse.entry.output.scale), -1, 3329) % 3329)
    """)
    out = subprocess.run([venv / "bin" / "python", "-c", script], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1"]  # x * x = x^2
