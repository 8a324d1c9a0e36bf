"""The tables between a bundle's NTT order and the standard one
(`prefix_ntt_to_standard`, `prefix_ntt_from_standard`), for every shipped
bundle in another order: applied to its forward NTT's output they give the
NTT of FIPS 203's and FIPS 204's pseudocode position by position, and what
the shipped set of the same n and q in the standard order computes; and the
bundle's README says so in its first lines. The bundles are read as
test_examples.py reads them (generated/, or KERNGEN_EXAMPLE_BUNDLES).
"""

from __future__ import annotations

import random
import subprocess

import pytest
import sympy

from fips import bitrev
from kerngen.families.ntt.params import UNROLLED_MAX
from test_examples import PARAMS, SHIPPED, WARNINGS, Bundle, kernels, needs, run_all, runs_here, succeed  # noqa: F401


def standard_ntt(f: list[int], q: int, zeta: int, layers: int) -> list[int]:
    """The NTT in the standard order, as FIPS 203 (Algorithm 9) and FIPS 204 (Algorithm 41)
    write it, for any n, q and number of layers: block j at d*j .. d*j + d - 1 is f mod
    (x^d - zeta^(2 brv(j) + 1))."""
    f = [x % q for x in f]
    n, i, length = len(f), 1, len(f) // 2
    for _ in range(layers):
        for start in range(0, n, 2 * length):
            z = pow(zeta, bitrev(i, layers), q)
            i += 1
            for j in range(start, start + length):
                t = z * f[j + length] % q
                f[j + length] = (f[j] - t) % q
                f[j] = (f[j] + t) % q
        length //= 2
    return f


# the standards' roots: FIPS 203 (ML-KEM) zeta = 17, FIPS 204 (ML-DSA) zeta = 1753
STANDARD_ROOTS = {(256, 3329, 7): 17, (256, 8380417, 8): 1753}


def smallest_root(q: int, layers: int) -> int:
    """The smallest primitive 2^(layers+1)-th root of unity mod q (what the standards chose)."""
    order = 1 << (layers + 1)
    g = sympy.primitive_root(q)
    return min(pow(g, (q - 1) // order * k, q) for k in range(1, order, 2))


def test_the_standard_roots_are_the_smallest():
    for (n, q, layers), zeta in STANDARD_ROOTS.items():
        assert smallest_root(q, layers) == zeta


def permutation_program(b: Bundle, a: list[int]) -> str:
    prefix, fwd = b.params["prefix"], b.first("ntt_forward")
    t = fwd["dtype"] + "_t"
    n = b.params["n"]
    return f"""#include <stdio.h>
#include "{b.name}.h"
static {t} a[{n}] = {{ {', '.join(map(str, a))} }};
static {t} std_[{n}], back[{n}];
int main(void) {{
    {fwd['symbol']}(a);
    for (int i = 0; i < {n}; i++) std_[i] = a[{prefix}_ntt_to_standard[i]];
    for (int i = 0; i < {n}; i++) back[i] = std_[{prefix}_ntt_from_standard[i]];
    for (int i = 0; i < {n}; i++)
        if (back[i] != a[i] || {prefix}_ntt_to_standard[{prefix}_ntt_from_standard[i]] != i) return 3;
    for (int i = 0; i < {n}; i++) printf("%lld\\n", (long long)std_[i]);
    return 0;
}}
"""


# (a planned transform's NTT domain is its compact layout: no standard-order tables in its header)
NON_STANDARD = [b for b in SHIPPED if b.family == "ntt" and PARAMS[b.name].get("order", "fastest") != "standard"
                and PARAMS[b.name]["n"] <= UNROLLED_MAX]


@needs("nasm", "gcc")
@pytest.mark.parametrize("b", NON_STANDARD, ids=lambda b: b.name)
def test_the_standard_order_tables_permute_the_forward_output_into_the_standards_order(b, kernels, tmp_path):
    """to_standard applied to the kernels' forward NTT gives the standard NTT position by
    position (times the forward's scale); from_standard brings it back."""
    runs_here(b)
    n, q, layers = b.params["n"], b.params["q"], b.params["layers"]
    fwd = b.first("ntt_forward")
    lo, hi = fwd["input"]["bound"]
    rng = random.Random(n * q)
    a = [rng.randrange(max(lo, -(q - 1)), min(hi, q - 1) + 1) for _ in range(n)]
    (tmp_path / "perm.c").write_text(permutation_program(b, a))
    succeed(run_all([["gcc", "-O1", *WARNINGS, "-I", b.dir, "perm.c", kernels(b), "-o", "perm"]],
                    tmp_path))
    r = subprocess.run([tmp_path / "perm"], capture_output=True, text=True)
    assert r.returncode == 0, f"{b.name}: from_standard does not undo to_standard ({r.returncode})"
    got = [int(x) % q for x in r.stdout.split()]
    zeta = STANDARD_ROOTS.get((n, q, layers)) or smallest_root(q, layers)
    scale = fwd["output"]["scale"]
    assert got == [scale * x % q for x in standard_ntt(a, q, zeta, layers)]


def standard_twins(b: Bundle) -> list[str]:
    return [name for name, p in PARAMS.items() if name != b.name and p.get("family", "ntt") == "ntt"
            and p.get("order") == "standard" and (p["n"], p["q"]) == (b.params["n"], b.params["q"])
            and (p.get("ring", "negacyclic"), p.get("coset", 1)) == (b.params.get("ring", "negacyclic"),
                                                                     b.params.get("coset", 1))]


@pytest.mark.parametrize("b", NON_STANDARD, ids=lambda b: b.name)
def test_a_bundle_in_another_order_says_so_first_and_names_its_standard_twins(b):
    head = "\n".join(b.readme.splitlines()[:14])
    assert "not the standard" in head and f"{b.params['prefix']}_ntt_to_standard" in head, head
    for twin in standard_twins(b):
        assert f"`{twin}`" in head, twin


def twin_program(b: Bundle, twin: Bundle, a: list[int]) -> str:
    """Both forward NTTs of the same input; prints the permuted one, then the standard twin's."""
    n = b.params["n"]
    rows = []
    for tag, x, perm in (("own", b, f"{b.params['prefix']}_ntt_to_standard"), ("twin", twin, None)):
        f = x.first("ntt_forward")
        t = f["dtype"] + "_t"
        index = f"{perm}[i]" if perm else "i"
        rows.append(f"    static {t} {tag}[{n}] = {{ {', '.join(map(str, a))} }};\n    {f['symbol']}({tag});\n"
                    f"    for (int i = 0; i < {n}; i++) printf(\"%lld\\n\", (long long){tag}[{index}]);")
    includes = "".join(f'#include "{x.name}.h"\n' for x in (b, twin))
    return f"#include <stdio.h>\n{includes}int main(void) {{\n" + "\n".join(rows) + "\n    return 0;\n}\n"


TWINS = [(b, Bundle(t)) for b in NON_STANDARD for t in standard_twins(b)
         if PARAMS[t].get("layers") == PARAMS[b.name].get("layers")]


@needs("nasm", "gcc")
@pytest.mark.parametrize("b, twin", TWINS, ids=[f"{b.name}-{t.name}" for b, t in TWINS])
def test_the_permuted_forward_output_is_the_standard_order_emissions(b, twin, kernels, tmp_path):
    """to_standard applied to a bundle's forward NTT gives, mod q, what the shipped set of the
    same n and q in the standard order computes (after the forwards' scales)."""
    runs_here(b)
    runs_here(twin)
    n, q = b.params["n"], b.params["q"]
    bounds = [x.first("ntt_forward")["input"]["bound"] for x in (b, twin)]
    lo, hi = max(lo for lo, _ in bounds), min(hi for _, hi in bounds)
    rng = random.Random(q)
    a = [rng.randrange(lo, hi + 1) for _ in range(n)]
    (tmp_path / "twin.c").write_text(twin_program(b, twin, a))
    succeed(run_all([["gcc", "-O1", *WARNINGS, "-I", b.dir, "-I", twin.dir, "twin.c", kernels(b),
                      kernels(twin), "-o", "twin"]], tmp_path))
    r = subprocess.run([tmp_path / "twin"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    values = [int(x) for x in r.stdout.split()]
    own, standard = values[:n], values[n:]
    s_own, s_twin = (x.first("ntt_forward")["output"]["scale"] for x in (b, twin))
    assert [v * s_twin % q for v in own] == [v * s_own % q for v in standard]
