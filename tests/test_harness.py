"""Tests of the C harness: the ABI checker catches each deliberate corrupter,
a correct kernel passes with its outputs read back, the runner rejects bad
vector files, the bench times two libraries in one run, and the plain C
baseline computes a real NTT round trip (checked against SymPy)."""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from sympy import Poly, symbols

from kerngen.families.ntt import baseline
from kerngen.errors import HarnessError
from kerngen.harness import cpu, protocol, toolchain
from kerngen.harness.protocol import STATUS_ABI, STATUS_CANARY, STATUS_INMOD, STATUS_OK, Arg, Case

ADD16_ASM = """\
default rel
section .text
; r[i] = a[i] + b[i] (mod 2^16) for 32 int16; all three 32-byte aligned
global kg_test_add16:function
kg_test_add16:
    vmovdqa ymm0, [rsi]
    vmovdqa ymm1, [rsi + 32]
    vpaddw  ymm0, ymm0, [rdx]
    vpaddw  ymm1, ymm1, [rdx + 32]
    vmovdqa [rdi], ymm0
    vmovdqa [rdi + 32], ymm1
    vzeroupper
    ret
section .note.GNU-stack noalloc noexec nowrite progbits
"""

ADD16_SCALAR_ASM = """\
default rel
section .text
; same contract as kg_test_add16, one element at a time
global kg_test_add16_scalar:function
kg_test_add16_scalar:
    xor     ecx, ecx
.next:
    movzx   eax, word [rsi + 2 * rcx]
    add     ax, [rdx + 2 * rcx]
    mov     [rdi + 2 * rcx], ax
    inc     ecx
    cmp     ecx, 32
    jne     .next
    ret
section .note.GNU-stack noalloc noexec nowrite progbits
"""


def _wrap16(v: int) -> int:
    return (v + (1 << 15)) % (1 << 16) - (1 << 15)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kg-harness")


@pytest.fixture(scope="module")
def corrupters(workdir: Path) -> Path:
    return toolchain.assemble_shared(toolchain.HARNESS_DIR / "abi_corrupters.asm", workdir)


@pytest.fixture(scope="module")
def add16(workdir: Path) -> Path:
    src = workdir / "add16.asm"
    src.write_text(ADD16_ASM)
    return toolchain.assemble_shared(src, workdir)


@pytest.fixture(scope="module")
def add16_scalar(workdir: Path) -> Path:
    src = workdir / "add16_scalar.asm"
    src.write_text(ADD16_SCALAR_ASM)
    return toolchain.assemble_shared(src, workdir)


def _ramp(count: int, step: int = 1) -> tuple[int, ...]:
    return tuple(_wrap16((i - count // 2) * step) for i in range(count))


ONE_BUFFER = ("inout", 16)
COPY = ("copy", 16)


@pytest.mark.parametrize(
    ("symbol", "shape", "status", "reason"),
    [
        ("kg_bad_rbx", ONE_BUFFER, STATUS_ABI, "rbx"),
        ("kg_bad_rbp", ONE_BUFFER, STATUS_ABI, "rbp"),
        ("kg_bad_r15", ONE_BUFFER, STATUS_ABI, "r15"),
        ("kg_bad_rsp", ONE_BUFFER, STATUS_ABI, "rsp"),
        ("kg_bad_ymm", ONE_BUFFER, STATUS_ABI, "ymm-upper"),
        ("kg_bad_df", ONE_BUFFER, STATUS_ABI, "direction-flag"),
        ("kg_bad_mxcsr", ONE_BUFFER, STATUS_ABI, "mxcsr"),
        ("kg_bad_x87cw", ONE_BUFFER, STATUS_ABI, "x87-control"),
        ("kg_bad_overflow", ONE_BUFFER, STATUS_CANARY, "0"),
        ("kg_bad_underflow", ONE_BUFFER, STATUS_CANARY, "0"),
        ("kg_bad_inmod", COPY, STATUS_INMOD, "1"),
        ("kg_good_copy", COPY, STATUS_OK, ""),
    ],
)
def test_corrupter_is_caught(workdir: Path, corrupters: Path, symbol: str,
                             shape: tuple[str, int], status: str, reason: str) -> None:
    if reason == "ymm-upper" and not cpu.abi_capabilities(workdir).xinuse:
        pytest.skip("this CPU does not report XINUSE; vzeroupper cannot be checked")
    kind, count = shape
    data = _ramp(count, 1000)
    if kind == "inout":
        args = (Arg("inout", 2, count, 32, data),)
    else:
        args = (Arg("out", 2, count, 32), Arg("in", 2, count, 16, data))
    [res] = protocol.run_runner(corrupters, [Case(symbol, symbol, args)], workdir=workdir)
    assert (res.status, res.reason) == (status, reason)
    if kind == "copy" and status == STATUS_OK:
        assert res.outputs == {0: list(data)}


def test_correct_kernel_passes_and_outputs_read_back(workdir: Path, add16: Path) -> None:
    rng = random.Random(1)
    a = tuple(rng.randint(-32768, 32767) for _ in range(32))
    b = tuple(rng.randint(-32768, 32767) for _ in range(32))
    want = [_wrap16(x + y) for x, y in zip(a, b, strict=True)]
    cases = [
        Case("separate", "kg_test_add16",
             (Arg("out", 2, 32, 32), Arg("in", 2, 32, 32, a), Arg("in", 2, 32, 32, b))),
        Case("in_place_a", "kg_test_add16",
             (Arg("out", 2, 32, 32, alias_of=1), Arg("in", 2, 32, 32, a),
              Arg("in", 2, 32, 32, b))),
        Case("in_place_b", "kg_test_add16",
             (Arg("out", 2, 32, 32, alias_of=2), Arg("in", 2, 32, 32, a),
              Arg("in", 2, 32, 32, b))),
        Case("doubling", "kg_test_add16",
             (Arg("inout", 2, 32, 32, a), Arg("in", 2, 32, 32, alias_of=0),
              Arg("in", 2, 32, 32, alias_of=0))),
    ]
    results = protocol.run_runner(add16, cases, workdir=workdir, seed=7)
    assert [r.status for r in results] == [STATUS_OK] * 4, results
    assert results[0].outputs == {0: want}
    assert results[1].outputs == {0: want}
    assert results[2].outputs == {0: want}
    assert results[3].outputs == {0: [_wrap16(2 * x) for x in a]}


def test_buffers_are_placed_at_exactly_the_declared_alignment(workdir: Path, add16: Path) -> None:
    # vmovdqa needs 32 bytes; a kernel declaring less must fault here, and the
    # error must name the case that crashed
    data = _ramp(32)
    cases = [Case("under_aligned", "kg_test_add16",
                  (Arg("out", 2, 32, 16), Arg("in", 2, 32, 32, data), Arg("in", 2, 32, 32, data)))]
    with pytest.raises(HarnessError, match=r"SIGSEGV.*under_aligned|under_aligned.*SIGSEGV"):
        protocol.run_runner(add16, cases, workdir=workdir)


def test_missing_symbol_is_named(workdir: Path, add16: Path) -> None:
    cases = [Case("nope", "kg_no_such_symbol", (Arg("inout", 2, 4, 2, (1, 2, 3, 4)),))]
    with pytest.raises(HarnessError, match="kg_no_such_symbol"):
        protocol.run_runner(add16, cases, workdir=workdir)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("case c kg_test_add16 1\narg in 2 4 2\nend\n", "no data line"),
        ("case c kg_test_add16 1\narg in 2 4 2\ndata 1 2 3\nend\n", "3 values"),
        ("case c kg_test_add16 1\narg in 2 2 2\ndata 1 70000\nend\n", "not a 2-byte"),
        ("case c kg_test_add16 1\narg in 3 2 2\ndata 1 2\nend\n", "elem_bytes"),
        ("case c kg_test_add16 1\narg in 2 2 24\ndata 1 2\nend\n", "power of two"),
        ("case c kg_test_add16 2\narg out 2 2 2\narg in 2 2 2\ndata 1 2\nalias 0 0\nend\n",
         "indices must differ"),
        ("case c kg_test_add16 1\narg inout 2 2 2\ndata 1 2\n", "without 'end'"),
        ("case c kg_test_add16 6\n", "nargs"),
        ("frobnicate\n", "unknown record"),
        ("case c kg_test_add16 1\narg out 2 2 2\ndata 1 2\nend\n", "directly follow"),
    ],
)
def test_malformed_vectors_exit_2(workdir: Path, add16: Path, text: str, message: str) -> None:
    runner = toolchain.build_runner(workdir)
    vec = workdir / "bad_vectors.txt"
    vec.write_text(text)
    proc = subprocess.run([str(runner), str(add16), str(vec), str(workdir / "bad_out.txt")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_bench_two_libraries_in_one_run(workdir: Path, add16: Path, add16_scalar: Path) -> None:
    a, b = _ramp(32, 3), _ramp(32, 5)
    args = (Arg("out", 2, 32, 32), Arg("in", 2, 32, 32, a), Arg("in", 2, 32, 32, b))
    cases = [Case("vector", "kg_test_add16", args, lib=0),
             Case("scalar", "kg_test_add16_scalar", args, lib=1)]
    results = protocol.run_bench([add16, add16_scalar], cases, batches=21, workdir=workdir,
                                warmup_ticks=200_000)
    assert [r.case_id for r in results] == ["vector", "scalar"]
    for r in results:
        assert r.median_ticks > 0 and 0 < r.min_ticks <= r.median_ticks
        assert r.batches == 21 and r.calls_per_batch >= 1


def test_kyber_constants_match_the_reference_derivation() -> None:
    p = baseline.constants_sympy(256, 3329, 7)
    assert p.zetas[:4] == (-1044, -758, -359, -1517)
    assert p.final_scale == 1441
    assert p.zetas_inv[0] == p.zetas[127]
    header = baseline.header(p)
    assert "#define KG_QINV (-3327)" in header
    assert "#define KG_BARRETT_V 20159" in header and "#define KG_BARRETT_SHIFT 26" in header


def _negacyclic_sympy(a: list[int], b: list[int], q: int) -> list[int]:
    """a * b mod (x^n + 1, q). The product is taken over the integers and
    x^n = -1 folds its upper half back: SymPy's multiplication and division
    over GF(q) take seconds for n = 1024 and over a minute for n = 4096."""
    x = symbols("x")
    n = len(a)
    prod = Poly(list(reversed(a)), x) * Poly(list(reversed(b)), x)
    coeffs = [int(c) for c in reversed(prod.all_coeffs())]
    coeffs += [0] * (2 * n - len(coeffs))
    return [(coeffs[i] - coeffs[n + i]) % q for i in range(n)]


Q62 = 4611686018326724609  # prime, 2^62 - 100663295; q - 1 = 2^25 * 47189 * 2912521
Q50 = 1125899906826241  # prime, 2^50 - 16383; q - 1 = 2^14 * 3^3 * 5 * 7 * 13 * 19 * 37 * 73 * 109

BASELINE_CASES = [
    # (n, q, layers, width): the block degree d = n >> layers is 1, 2, 4 or 8
    pytest.param(256, 3329, 7, 16, id="kyber-d2"),
    pytest.param(256, 7681, 8, 16, id="d1"),
    pytest.param(256, 3457, 6, 16, id="d4"),
    pytest.param(256, 3329, 5, 16, id="d8"),
    pytest.param(256, 8380417, 8, 32, id="dilithium-d1-w32"),
    pytest.param(512, 1073479681, 8, 32, id="q30-d2-w32"),
    pytest.param(256, 8380417, 6, 32, id="dilithium-d4-w32"),
    # the largest prime below 2^30 with a 64th root of unity: the 32-bit
    # file's limit, Barrett passes in the forward and the fullest basemul sums
    pytest.param(256, 1073741441, 5, 32, id="q-max-d8-w32"),
    # 64-bit lanes (__int128 products): 2^25 | Q62 - 1, so n = 1024 takes the
    # full log2 n = 10 layers (d = 1); fewer layers give the wider blocks, d = 8
    # the fullest basemul sums near the file's limit 2^62
    pytest.param(1024, Q62, 10, 64, id="q62-d1-w64"),
    pytest.param(1024, Q62, 9, 64, id="q62-d2-w64"),
    pytest.param(1024, Q62, 8, 64, id="q62-d4-w64"),
    pytest.param(1024, Q62, 7, 64, id="q62-d8-w64"),
    # 2^14 | Q50 - 1: n = 4096 takes all 12 layers
    pytest.param(4096, Q50, 12, 64, id="q50-n4096-d1-w64"),
    pytest.param(4096, Q50, 10, 64, id="q50-n4096-d4-w64"),
]


def test_dilithium_constants_match_the_reference_derivation() -> None:
    p = baseline.constants_sympy(256, 8380417, 8, width=32)
    assert p.zetas[1:4] == (25847, -2608894, -518909)  # zeta = 1753, R = 2^32
    assert p.final_scale == 41978
    header = baseline.header(p)
    assert "#define KG_QINV (58728449)" in header
    assert "static const int32_t kg_zetas[256]" in header and "typedef int32_t kg_lane;" in header


def test_baseline_limits_follow_the_width() -> None:
    with pytest.raises(ValueError, match="odd and below 2\\^14"):
        baseline.constants_sympy(256, 8380417, 8)
    with pytest.raises(ValueError, match="odd and below 2\\^30"):
        baseline.constants_sympy(256, 2147483137, 8, width=32)  # prime, 2^9 | q - 1, q > 2^30
    with pytest.raises(ValueError, match="odd and below 2\\^62"):
        baseline.constants_sympy(256, 4611686018427412993, 8, width=64)  # prime, 2^9 | q - 1, q > 2^62
    with pytest.raises(ValueError, match="16, 32 and 64-bit lanes, not 128"):
        baseline.constants_sympy(256, 3329, 7, width=128)


def test_baseline_64_bit_constants_fit_their_c_types() -> None:
    """On 64-bit lanes KG_QINV and KG_BARRETT_V are plain int64 literals and
    v * a for any lane value a, plus the rounding term, stays in __int128."""
    p = baseline.constants_sympy(1024, Q62, 10, width=64)
    header = baseline.header(p)
    assert "typedef int64_t kg_lane;" in header and "typedef __int128 kg_wide;" in header
    assert "static const int64_t kg_zetas[1024]" in header
    defines = dict(re.findall(r"^#define (KG_\w+) \(?(-?\d+)\)?", header, re.M))
    qinv, v, shift = (int(defines[k]) for k in ("KG_QINV", "KG_BARRETT_V", "KG_BARRETT_SHIFT"))
    assert qinv * Q62 % (1 << 64) == 1 and -(1 << 63) <= qinv < 1 << 63
    assert 0 < v < 1 << 63 and shift == 62 + Q62.bit_length()
    assert v * (1 << 63) + (1 << (shift - 1)) < 1 << 127
    assert int(defines["KG_LANE_MAX"]) == (1 << 63) - 1


def _baseline_caller(workdir: Path, n: int, q: int, layers: int,
                     width: int) -> Callable[[str, list[tuple[int, ...]], str], list[int]]:
    """Calls into the C baseline built for these parameters, on `width`-bit lanes."""
    consts = baseline.constants_sympy(n, q, layers, width)
    assert consts.width == width
    lib = baseline.build(consts, workdir)
    size = width // 8

    def call(symbol: str, inputs: list[tuple[int, ...]], case: str) -> list[int]:
        if len(inputs) == 1:
            args: tuple[Arg, ...] = (Arg("inout", size, n, 32, inputs[0]),)
        else:
            args = (Arg("out", size, n, 32),) + tuple(Arg("in", size, n, 32, d) for d in inputs)
        [res] = protocol.run_runner(lib, [Case(case, symbol, args)], workdir=workdir)
        assert res.ok, (res.status, res.reason)
        # the runner prints 8-byte elements unsigned
        return [v - (1 << width) if v >= 1 << (width - 1) else v for v in res.outputs[0]]

    return call


def _check_round_trip(call: Callable[[str, list[tuple[int, ...]], str], list[int]], a: list[int], b: list[int],
                      q: int) -> None:
    """inverse(basemul(forward(a), forward(b))) is a * b mod (x^n + 1, q), by SymPy."""
    fa = call("kg_baseline_ntt_forward", [tuple(a)], "fa")
    fb = call("kg_baseline_ntt_forward", [tuple(b)], "fb")
    prod = call("kg_baseline_basemul", [tuple(fa), tuple(fb)], "mul")
    assert all(abs(v) <= (q + 1) // 2 for v in prod)
    back = call("kg_baseline_ntt_inverse", [tuple(prod)], "inv")
    assert all(abs(v) < q for v in back)
    assert [v % q for v in back] == _negacyclic_sympy(a, b, q)


@pytest.mark.parametrize(("n", "q", "layers", "width"), BASELINE_CASES)
def test_baseline_round_trip_against_sympy(workdir: Path, n: int, q: int, layers: int, width: int) -> None:
    call = _baseline_caller(workdir, n, q, layers, width)
    rng = random.Random(n * q + layers)
    a = [rng.randint(-(q - 1), q - 1) for _ in range(n)]
    b = [rng.randint(-(q - 1), q - 1) for _ in range(n)]
    a[0], b[-1] = q - 1, -(q - 1)
    _check_round_trip(call, a, b, q)


@pytest.mark.parametrize(("n", "q", "layers", "width"), BASELINE_CASES)
@pytest.mark.parametrize("pattern", ["all-max", "all-min", "alternating", "max-times-alternating"])
def test_baseline_round_trip_on_extreme_inputs(workdir: Path, n: int, q: int, layers: int, width: int,
                                               pattern: str) -> None:
    """Every coefficient at the forward's input limit, +-(q - 1), with constant
    and with alternating signs."""
    call = _baseline_caller(workdir, n, q, layers, width)
    top = q - 1
    alternating = [top if i % 2 == 0 else -top for i in range(n)]
    a, b = {
        "all-max": ([top] * n, [top] * n),
        "all-min": ([-top] * n, [top] * n),
        "alternating": (alternating, [-v for v in alternating]),
        "max-times-alternating": ([top] * n, alternating),
    }[pattern]
    _check_round_trip(call, a, b, q)


def _fqmul(a: int, b: int, q: int, width: int) -> int:
    """The C file's Montgomery product a b R^-1 with the signed t = a b q^-1 mod R."""
    big_r = 1 << width
    t = a * b * pow(q, -1, big_r) % big_r
    t -= big_r if t >= big_r // 2 else 0
    return (a * b - t * q) >> width


@pytest.mark.parametrize(("n", "q", "layers", "width"), BASELINE_CASES)
def test_baseline_forward_takes_its_largest_second_layer(workdir: Path, n: int, q: int, layers: int,
                                                         width: int) -> None:
    """Inputs below q chosen so that the first two layers add near-extreme
    Montgomery products of one sign: over 2 q after layer 2, beyond 2^(W-1)
    for q near 2^(W-2), which the Barrett pass before that layer must catch
    (the constant and alternating patterns above do not reach it)."""
    call = _baseline_caller(workdir, n, q, layers, width)
    z1, z2 = baseline.constants_sympy(n, q, layers, width).zetas[1:3]
    rng = random.Random(q * width + layers)
    samples = [rng.randint(-(q - 1), q - 1) for _ in range(4000)]
    y = max(samples, key=lambda v: _fqmul(z1, v, q, width))
    u, v = max(((rng.choice(samples), rng.choice(samples)) for _ in range(4000)),
               key=lambda uv: _fqmul(z2, uv[0] + _fqmul(z1, uv[1], q, width), q, width))
    # layer 1 pairs j with j + n/2, layer 2 j with j + n/4 (j < n/4)
    quarter = n // 4
    a = [q - 1] * quarter + [u] * quarter + [y] * quarter + [v] * quarter
    _check_round_trip(call, a, a[::-1], q)


@pytest.mark.parametrize(("n", "q", "layers", "width"), BASELINE_CASES)
def test_baseline_basemul_takes_any_lane_value(workdir: Path, n: int, q: int, layers: int, width: int) -> None:
    """Block j of basemul's output is a * b * R^-1 mod (x^d - zeta_j) for any
    inputs of the lane type, the extremes included."""
    call = _baseline_caller(workdir, n, q, layers, width)
    consts = baseline.constants_sympy(n, q, layers, width)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    rng = random.Random(q + width)
    a = [rng.choice((lo, hi, rng.randint(lo, hi))) for _ in range(n)]
    b = [rng.choice((lo, hi, rng.randint(lo, hi))) for _ in range(n)]
    prod = call("kg_baseline_basemul", [tuple(a), tuple(b)], "mul-extremes")
    assert all(abs(v) <= (q + 1) // 2 for v in prod)
    d, r_inv = n >> layers, pow(1 << width, -1, q)
    for j, zeta_r in enumerate(consts.zetas_block):
        zeta = zeta_r * r_inv % q
        want = [0] * d
        for i in range(d):
            for k in range(d):
                term = a[j * d + i] * b[j * d + k]
                want[(i + k) % d] += term * zeta if i + k >= d else term
        assert [v % q for v in prod[j * d:(j + 1) * d]] == [w * r_inv % q for w in want], j


@pytest.mark.parametrize(("n", "q", "layers", "width"), BASELINE_CASES)
def test_baseline_inverse_takes_its_whole_input_range(workdir: Path, n: int, q: int, layers: int,
                                                      width: int) -> None:
    """forward(inverse(y)) = R y mod q for y up to the inverse's input limit:
    |y| <= q on 16-bit lanes, |y| < 2^(W-2) on 32- and 64-bit lanes."""
    call = _baseline_caller(workdir, n, q, layers, width)
    top = q if width == 16 else (1 << (width - 2)) - 1
    rng = random.Random(q - width)
    y = [rng.choice((-top, top, rng.randint(-top, top))) for _ in range(n)]
    back = call("kg_baseline_ntt_inverse", [tuple(y)], "inv-range")
    assert all(abs(v) < q for v in back)
    again = call("kg_baseline_ntt_forward", [tuple(back)], "fwd-of-inv")
    r = (1 << width) % q
    assert [v % q for v in again] == [v * r % q for v in y]


def test_missing_nasm_says_how_to_install(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = toolchain.shutil.which
    monkeypatch.setattr(toolchain.shutil, "which",
                        lambda name: None if name == "nasm" else real_which(name))
    src = workdir / "never_built.asm"
    src.write_text("section .text\n")
    with pytest.raises(HarnessError, match="apt-get install nasm"):
        toolchain.assemble_shared(src, workdir)


def test_build_failure_carries_the_assembler_message(workdir: Path) -> None:
    src = workdir / "broken.asm"
    src.write_text("section .text\n    frobnicate eax, 1\n")
    with pytest.raises(HarnessError, match="broken.asm.*error"):
        toolchain.assemble_shared(src, workdir)


def test_records_reject_inconsistent_arguments() -> None:
    with pytest.raises(ValueError, match="alias takes its data"):
        Case("c", "f", (Arg("inout", 2, 2, 2, (1, 2)), Arg("in", 2, 2, 2, (1, 2), alias_of=0)))
    with pytest.raises(ValueError, match="needs data"):
        Case("c", "f", (Arg("in", 2, 2, 2),))
    with pytest.raises(ValueError, match="does not fit"):
        Arg("in", 1, 1, 1, (256,))
    with pytest.raises(ValueError, match="odd and below"):
        baseline.BaselineConstants(256, 3328, 7, (), (), (), 0)


# ---------------------------------------------------------------------------
# an ABI violation in a bundle is a failed check: the run goes on and ends with the tally


def _with_rbx_clobbered(asm: str, symbol: str) -> str:
    """`symbol`'s body starting with abi_corrupters.asm's kg_bad_rbx (rbx is
    callee-saved in both conventions): the kernel still computes right."""
    corrupter = (toolchain.HARNESS_DIR / "abi_corrupters.asm").read_text()
    body = corrupter[corrupter.index("kg_bad_rbx:\n") + len("kg_bad_rbx:\n"):].split("\n")[0]
    assert body.split() == ["not", "rbx"]
    label = f"\n{symbol}:\n"
    at = asm.index(label) + len(label)
    return asm[:at] + body + "\n" + asm[at:]


def test_an_abi_violation_is_counted_and_every_object_still_tested(tmp_path: Path) -> None:
    """tiny-257 emitted for System V and Win64, its System V forward NTT made
    to clobber rbx (the manifest's hash fixed up, as an editor would): the
    checks of that kernel fail, its basis proof (kg_batch, which stops at the
    first broken call) fails instead of ending the run, the Win64 object is
    still tested (under Wine, where installed), and the run ends with the tally."""
    import hashlib
    import json

    from kerngen.commands.test import test_bundle
    from kerngen.core.params import Overrides
    from kerngen.families import build_all, load
    from kerngen.harness import wine
    from kerngen.emission.files import write
    from kerngen.emission.render import render

    from conftest import REPO

    p = load(REPO / "params/tiny-257.toml", Overrides(abi="sysv,win64"))
    bundle = tmp_path / "tiny"
    write(render(build_all(p), "kerngen emit tiny-257 --abi sysv,win64"), bundle)
    asm_file = bundle / "tiny-257.asm"
    asm_file.write_text(_with_rbx_clobbered(asm_file.read_text(), "kg_tiny257_ntt_forward_avx2"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][asm_file.name] = hashlib.sha256(asm_file.read_bytes()).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    said: list[str] = []
    work = tmp_path / "work"
    work.mkdir()
    try:
        outcome = test_bundle(bundle, 5, said.append, work, reemit=False)
    finally:
        wine.stop_wineserver(work)
    broken = [f for f in outcome.failures if "kg_tiny257_ntt_forward_avx2" in f]
    assert broken and all("rbx" in f for f in broken), outcome.failures
    assert any(f.startswith("tiny-257: basis proof of kg_tiny257_ntt_forward_avx2: ") and "breaks the ABI: rbx" in f
               for f in broken), broken
    assert all("forward_avx2" in f or "roundtrip-avx2" in f for f in outcome.failures), outcome.failures
    assert said[-1] == f"tiny-257: {outcome.passed} passed, {outcome.failed} failed" and outcome.failed >= 1
    if not [t for t in wine.missing_tools() if not t.startswith("nasm")]:
        assert any("tiny-257_win64.asm, Wine" in line for line in said), said
        win64_checks = [line for line in said if "tiny-257_win64.asm" in line]
        assert win64_checks and outcome.passed > outcome.failed
