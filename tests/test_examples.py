"""The README examples of every shipped bundle, as a user copies them: the C
example compiled by GCC and Clang with -Wall -Wextra -Werror against the
committed header and the assembled kernels, run, and its output checked
against products computed here (a product in the bundle's ring mod q, a Shoup product,
a GF(2^m) product); the C++ and Rust examples of one bundle per element
type; and a caller passing polyvec-like arrays compiled without a warning.

The bundles are read from generated/ (the committed ones), or from the
directory KERNGEN_EXAMPLE_BUNDLES names (bundles emitted elsewhere, one
directory per set, to check templates without touching generated/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from conftest import REPO
from kerngen.harness.cpu import MASK_VARIABLE, left_out, runnable_isas

BUNDLES = Path(os.environ.get("KERNGEN_EXAMPLE_BUNDLES", REPO / "generated"))
PARAMS = {p.stem: tomllib.loads(p.read_text()) for p in sorted((REPO / "params").glob("*.toml"))}
WARNINGS = ("-Wall", "-Wextra", "-Werror")


def needs(*tools: str):
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed")


def run_all(commands: list[list], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Run the commands at once (compilers are single-threaded), each to completion."""
    procs = [subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for cmd in commands]
    out = []
    for cmd, p in zip(commands, procs):
        stdout, stderr = p.communicate()
        out.append(subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr))
    return out


def succeed(results: list[subprocess.CompletedProcess]) -> None:
    for r in results:
        assert r.returncode == 0 and not r.stderr.strip(), \
            f"{' '.join(map(str, r.args))} ({r.returncode}):\n{r.stdout}\n{r.stderr}"


def block(readme: str, lang: str, first_line: str) -> str:
    """The README's code block in `lang` that starts with `first_line`, as a user copies it."""
    for m in re.finditer(rf"^```{lang}\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL):
        if m.group(1).startswith(first_line):
            return m.group(1)
    raise AssertionError(f"no {lang} block starting {first_line!r} in the README")


# --- what the examples must print, computed here --------------------------------

def ring_at(a: list[int], b: list[int], q: int, ks, c: int) -> list[int]:
    """Coefficients ks of a*b mod (x^n - c, q), each in [0, q)."""
    n = len(a)
    return [sum(a[i] * b[k - i] if i <= k else c * a[i] * b[n + k - i] for i in range(n)) % q for k in ks]


def ring_constant(params: dict) -> int:
    """c of the manifest's ring x^n - c: -1 (negacyclic), 1 (cyclic), times g^n on a coset g."""
    return (1 if params.get("ring") == "cyclic" else -1) * pow(params.get("coset", 1), params["n"], params["q"])


def clmul_mod(a: int, b: int, poly: list[int]) -> int:
    """a*b in GF(2)[x] modulo the polynomial with the exponents `poly` (bit i: x^i)."""
    f = sum(1 << e for e in poly)
    m = max(poly)
    out = 0
    for i in range(b.bit_length()):
        if b >> i & 1:
            out ^= a << i
    for d in range(out.bit_length() - 1, m - 1, -1):
        if out >> d & 1:
            out ^= f << (d - m)
    return out


def expected_lines(manifest: dict) -> list[list[int]]:
    """The lines a bundle's README examples print, as numbers (their inputs: target/examples.py)."""
    params = manifest["params"]
    first = {}
    for f in manifest["functions"]:
        first.setdefault(f["kind"], f)
    if params["family"] != "ntt":
        m, poly = params["m"], params["poly"]
        limbs = first["gf2m_mul"]["args"][0]["count"]
        c = clmul_mod(1 << 1, 1 << (m - 1), poly)  # x * x^(m-1)
        return [[c >> (64 * i) & (2**64 - 1)] for i in range(limbs)]
    n, q = params["n"], params["q"]
    forward = first["ntt_forward"]
    sign = -1 if forward["dtype"].startswith("int") and forward["input"]["bound"][0] <= -(q - 1) else 1
    a, b = [i % q for i in range(n)], [sign * ((7 * i + 1) % q) for i in range(n)]
    ks = (0, 1, n - 1)
    c = ring_at(a, b, q, ks, ring_constant(params))
    lines = [c]
    shoup = first.get("mulmod_shoup")
    if shoup is not None and shoup["dtype"] != forward["dtype"]:  # the example shows every lane type
        lines.append([ci * ((5 * k + 3) % q) % q for ci, k in zip(c, ks)])
    return lines


def printed(out: str, hexadecimal: bool = False) -> list[list[int]]:
    return [[int(x, 16 if hexadecimal else 10) for x in line.split()] for line in out.strip().splitlines()]


@dataclass(frozen=True)
class Bundle:
    """A shipped set's bundle directory and what its manifest says."""

    name: str

    @property
    def dir(self) -> Path:
        return BUNDLES / self.name

    @cached_property
    def manifest(self) -> dict:
        path = self.dir / "manifest.json"
        assert path.is_file(), f"no bundle for the shipped set {self.name} in {BUNDLES}"
        return json.loads(path.read_text())

    @property
    def params(self) -> dict:
        return self.manifest["params"]

    @property
    def readme(self) -> str:
        return (self.dir / "README.md").read_text()

    @property
    def family(self) -> str:
        return PARAMS[self.name]["family"]

    def first(self, kind: str) -> dict | None:
        """The preferred ISA's function of `kind`."""
        return next((f for f in self.manifest["functions"] if f["kind"] == kind), None)

    @property
    def lane(self) -> str:
        """The element type of the example's main kernels (the forward NTT's, or the GF(2^m) product's)."""
        return self.first("ntt_forward")["dtype"] if self.family == "ntt" else "gf2m"

    def expected(self) -> list[list[int]]:
        return expected_lines(self.manifest)

    @property
    def unit(self) -> list[Path]:
        """The dispatch unit's C files (none in a bundle of one ISA)."""
        return sorted(self.dir.glob("*_dispatch.c"))

    @property
    def c_sources(self) -> list[Path]:
        """Every C file of the bundle, which a program is built with (the dispatch unit, a planned driver)."""
        return sorted(self.dir.glob("*.c"))

    def check_output(self, out: str) -> None:
        hexadecimal = self.family != "ntt"
        assert printed(out, hexadecimal) == self.expected(), f"{self.name}: printed {out!r}"


SHIPPED = [Bundle(name) for name in PARAMS]


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    """Each bundle's System V object, assembled once per session."""
    directory = tmp_path_factory.mktemp("kernels")
    done: dict[str, Path] = {}

    def get(b: Bundle) -> Path:
        if b.name not in done:
            obj = directory / f"{b.name}.o"
            r = subprocess.run(["nasm", "-f", "elf64", str(b.dir / f"{b.name}.asm"), "-o", str(obj)],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            done[b.name] = obj
        return done[b.name]
    return get


def runs_here(b: Bundle) -> str:
    """The ISA whose kernels the examples call on this CPU (as the mask in the environment leaves it): the
    first the dispatch unit finds runnable, or, in a bundle without one, its first ISA; skipped where none."""
    functions = [Function(f["isa"], f["cpu"]) for f in b.manifest["functions"]]
    runs = runnable_isas(functions)
    isa = (runs[:1] if b.unit else [i for i in runs if i == functions[0].isa]) or [None]
    if isa[0] is None:
        pytest.skip(f"{b.name}: {left_out(functions)}")
    return isa[0]


@dataclass(frozen=True)
class Function:
    isa: str
    cpu: list[str]


# --- the C example of every bundle ------------------------------------------------

def check_run(b: Bundle, program: Path, isa: str) -> None:
    """The example run as built: the product printed, by the kernels of `isa` where a dispatch unit chose."""
    r = subprocess.run([program], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    b.check_output(r.stdout)
    assert r.stderr == (f"calling the {isa} kernels\n" if b.unit else "")


# the examples as built on this machine, and under the CPU mask of an AMD Zen 3 (no AVX-512, no GFNI)
MASKS = [None, "x86-64-v3,+vpclmulqdq"]


@needs("nasm", "gcc", "clang")
@pytest.mark.parametrize("mask", MASKS, ids=["cpu", "zen3"])
@pytest.mark.parametrize("b", SHIPPED, ids=lambda b: b.name)
def test_c_example_compiles_without_warnings_and_prints_the_product(b, mask, kernels, tmp_path, monkeypatch):
    if mask:
        monkeypatch.setenv(MASK_VARIABLE, mask)
    isa = runs_here(b)
    (tmp_path / "app.c").write_text(block(b.readme, "c", "/* app.c"))
    obj = kernels(b)
    succeed(run_all([[cc, "-O2", *WARNINGS, "-I", b.dir, "app.c", *b.c_sources, obj, "-o", f"app-{cc}"]
                     for cc in ("gcc", "clang")], tmp_path))
    for cc in ("gcc", "clang"):
        check_run(b, tmp_path / f"app-{cc}", isa)


def one_per_lane() -> list[Bundle]:
    """The smallest shipped bundle (fewest coefficients, then name) of each element type."""
    chosen: dict[str, Bundle] = {}
    present = [b for b in SHIPPED if (b.dir / "manifest.json").is_file()]  # a missing one fails its C test
    for b in sorted(present, key=lambda b: (b.params.get("n", 0), b.name)):
        chosen.setdefault(b.lane, b)
    return list(chosen.values())


def test_every_lane_type_has_a_bundle_whose_cpp_and_rust_examples_are_built():
    assert {"int16", "uint16", "uint32", "uint64", "gf2m"} <= {b.lane for b in one_per_lane()}


@needs("nasm", "g++")
@pytest.mark.parametrize("b", one_per_lane(), ids=lambda b: b.lane)
def test_cpp_example_compiles_without_warnings_and_prints_the_product(b, kernels, tmp_path):
    isa = runs_here(b)
    (tmp_path / "app.cpp").write_text(block(b.readme, "cpp", "// app.cpp"))
    units = [tmp_path / f"{c.stem}.o" for c in b.c_sources]
    succeed(run_all([["gcc", "-O2", *WARNINGS, "-c", c, "-o", o] for c, o in zip(b.c_sources, units)], tmp_path))
    succeed(run_all([["g++", "-std=c++17", "-O2", *WARNINGS, "-I", b.dir, "app.cpp", *units, kernels(b), "-o", "app"]],
                    tmp_path))
    check_run(b, tmp_path / "app", isa)


@pytest.fixture(scope="module")
def rust_apps(tmp_path_factory):
    """One Cargo workspace holding, per element type, a bundle and its README's Rust example as a
    binary depending on it: one `cargo build --offline` for all (no registry crate is needed)."""
    root = tmp_path_factory.mktemp("rust")
    members = []
    for b in one_per_lane():
        shutil.copytree(b.dir, root / "third_party" / b.name)
        app = root / "apps" / b.name
        (app / "src").mkdir(parents=True)
        (app / "src" / "main.rs").write_text(block(b.readme, "rust", "// src/main.rs"))
        crate = tomllib.loads((b.dir / "Cargo.toml").read_text())["package"]["name"]
        (app / "Cargo.toml").write_text(
            f'[package]\nname = "app-{b.name}"\nversion = "0.1.0"\nedition = "2021"\n\n'
            f'[dependencies]\n{crate} = {{ path = "../../third_party/{b.name}" }}\n')
        members.append(f'"apps/{b.name}"')
    (root / "Cargo.toml").write_text(f"[workspace]\nresolver = \"2\"\nmembers = [{', '.join(members)}]\n")
    env = {**os.environ, "CARGO_TARGET_DIR": str(root / "target"), "CARGO_TERM_COLOR": "never"}
    r = subprocess.run(["cargo", "build", "--offline", "--quiet"], cwd=root, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    return root / "target" / "debug"


@needs("nasm", "cargo", "ar")
@pytest.mark.parametrize("b", one_per_lane(), ids=lambda b: b.lane)
def test_rust_example_builds_with_cargo_and_prints_the_product(b, rust_apps):
    check_run(b, rust_apps / f"app-{b.name}", runs_here(b))


# --- a caller passing polyvec-like arrays --------------------------------------------

def polyvec_caller(b: Bundle) -> str:
    """C that calls every function the header declares on members of arrays of structs (the
    polyvec of Kyber and Dilithium: k polynomials one after another, each a struct member) and
    on pointers into a larger buffer; an argument of several units (basemul_acc's k
    polynomials, a double-width product) starts at a member of one unit."""
    header = (b.dir / f"{b.name}.h").read_text()
    # the functions and their dispatched names (not a planned driver's stage API)
    named = {name for f in b.manifest["functions"] for name in (f["symbol"], f["symbol"].removesuffix("_" + f["isa"]))}
    protos = [(s, a) for s, a in re.findall(r"^(?:const char \*|int |void )(\w+)\((.*)\);$", header, re.MULTILINE)
              if s in named]
    units: dict[str, int] = {}
    for f in b.manifest["functions"]:
        for a in f["args"]:
            t = f["dtype"] + "_t"
            units[t] = min(units.get(t, a["count"]), a["count"])
    lines = [f'#include "{b.name}.h"', ""]
    for t, unit in units.items():
        lines.append(f"struct poly_{t} {{ {t} coeffs[{unit}]; }};")
    lines.append("")
    body = []
    for symbol, args in protos:
        if args == "void" or "char" in args:
            continue
        params = re.findall(r"(const )?(\w+) \*(\w+)", args)
        assert len(params) == args.count(",") + 1, f"{symbol}: unexpected parameters {args}"
        calls_member, calls_buffer = [], []
        for const, t, _ in params:
            calls_member.append(f"vec_{t}[1].coeffs")
            calls_buffer.append(f"buf_{t} + {units[t]} * i")
        body.append(f"    {symbol}({', '.join(calls_member)});")
        body.append(f"    {symbol}({', '.join(calls_buffer)});")
    lines.append("void use_all(int i);")
    lines.append("void use_all(int i) {")
    for t, unit in units.items():
        most = max(a["count"] for f in b.manifest["functions"] for a in f["args"] if f["dtype"] + "_t" == t)
        lines.append(f"    static struct poly_{t} vec_{t}[{most // unit + 1}];")
        lines.append(f"    static {t} buf_{t}[{4 * most}];")
    return "\n".join(lines + body + ["}", ""])


def array_prototypes(b: Bundle) -> str:
    """The header with the array-parameter prototypes of old (`T a[N]`), for the control."""
    isa_of = {f["symbol"]: f["isa"] for f in b.manifest["functions"]}

    def proto(m: re.Match) -> str:
        symbol = m.group(1)
        base = symbol.removesuffix("_" + isa_of[symbol]) if symbol in isa_of else symbol
        params = re.sub(r"(\w+) \*(\w+)",
                        lambda p: f"{p.group(1)} {p.group(2)}[{base.upper()}_{p.group(2).upper()}_LEN]", m.group(2))
        return f"void {symbol}({params});"
    return re.sub(r"^void (\w+)\((.*)\);$", proto, (b.dir / f"{b.name}.h").read_text(), flags=re.MULTILINE)


@needs("gcc", "clang")
@pytest.mark.parametrize("b", SHIPPED, ids=lambda b: b.name)
def test_polyvec_like_callers_and_the_dispatch_unit_compile_without_warnings(b, tmp_path):
    (tmp_path / "caller.c").write_text(polyvec_caller(b))
    sources = ["caller.c"] + [str(p) for p in b.c_sources]
    succeed(run_all([[cc, "-std=c11", "-O2", *WARNINGS, "-I", b.dir, "-c", src, "-o", f"{i}-{cc}.o"]
                     for cc in ("gcc", "clang") for i, src in enumerate(sources)], tmp_path))


@needs("gcc")
def test_the_polyvec_caller_warns_with_array_parameters(tmp_path):
    """The control: the same caller against the header with `T a[N]` prototypes draws GCC's
    warnings wherever an argument spans several polynomials of the polyvec."""
    b = next(b for b in SHIPPED if b.family == "ntt" and b.first("basemul_acc"))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / f"{b.name}.h").write_text(array_prototypes(b))
    (tmp_path / "caller.c").write_text(polyvec_caller(b))
    r = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-I", "old", "-c", "caller.c", "-o", "c.o"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "-Wstringop-overread" in r.stderr or "-Wstringop-overflow" in r.stderr, r.stderr
