"""The Win64 form of shipped bundles, run for real under Wine.

A shipped parameter set of each kind (`WIN64_SETS`) is rendered for the Microsoft x64 convention
(COFF, `nasm -f win64`), linked into a DLL exporting the manifest's symbols,
and every check its family makes from the manifest runs through
`kg_runner.exe` (the shared runner built with MinGW-w64 against the Win64
checked-call stub) in one Wine process per bundle, judged exactly as on
Linux. Deliberately broken Win64 functions show that the stub and the
canaries catch what the Win64 convention forbids: changed rdi, rsi, xmm6-15
(all 128 bits), rsp, the direction flag, MXCSR, a dirty upper state, writes
outside a buffer or into an input, and a fault is reported with the case
that caused it. Kernels with a frame carry .pdata/.xdata unwind data: every
one has a function table entry whose decoded unwind codes match its frame,
and a kernel made to fault mid-body is unwound by Windows' own
RtlLookupFunctionEntry and RtlVirtualUnwind back to its caller with every
callee-saved register recovered. Skipped, with the reason, where Wine or
MinGW-w64 is not installed (`apt-get install wine64 wine gcc-mingw-w64-x86-64`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kerngen.commands.test import split_by_cpu, test_bundle as run_kerngen_test
from kerngen.core.manifest import Manifest
from kerngen.core.params import Overrides
from kerngen.families import family_of, load
from kerngen.errors import HarnessError
from kerngen.harness import protocol, toolchain, wine
from kerngen.harness.cpu import cpu_flags
from kerngen.harness.protocol import STATUS_ABI, STATUS_CANARY, STATUS_INMOD, STATUS_OK, Arg, Case
from kerngen.emission.frame import Frame, frame_of
from kerngen.emission.files import write
from kerngen.emission.render import render

from conftest import STORE

REPO = Path(__file__).resolve().parents[1]
# one shipped set of each family, lane width, multiplication strategy, order and ISA list (the frames, the
# register families and their Win64 preferences differ between these; the others, babybear and koalabear
# among them (nfl's 32-bit Shoup products in mldsa's standard order, on the same ISAs), repeat what these
# have at another n or q, and each Win64 build verifies every kernel again: all of them would double the
# suite's time)
WIN64_SETS = ("kyber-3329", "mlkem-3329", "kyber-3329-shoup", "mldsa-8380417", "nfl-1073479681",
              "nfl-4611686018326724609", "goldilocks-18446744069414584321", "gf2m-233", "gf2m-571")
SHIPPED = [REPO / "params" / f"{name}.toml" for name in WIN64_SETS]
SEED = 20240

_MISSING = [t for t in wine.missing_tools() if not t.startswith("nasm")]
pytestmark = pytest.mark.skipif(
    bool(_MISSING), reason="the Win64 harness runs under Wine with MinGW-w64; missing: " + "; ".join(_MISSING))


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """Builds and the Wine prefix (several hundred MB) for this module only:
    the prefix is made once, shared by every test here, and deleted after
    its wineserver is stopped."""
    with tempfile.TemporaryDirectory(prefix="kg-win64-") as tmp:
        work = Path(tmp)
        try:
            yield work
        finally:
            wine.stop_wineserver(work)


def win64_params(path: Path):
    """The parameter set of `path` emitted for Win64 only (as `--abi win64` does)."""
    return load(path, Overrides(abi="win64"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_set_passes_every_check_under_wine(workdir: Path, path: Path) -> None:
    """`kerngen test` of the set's Win64 bundle: every check, run under Wine."""
    p = win64_params(path)
    files = render(STORE.bundles(p), f"kerngen emit {path.name} --abi win64")
    manifest = json.loads(files["manifest.json"])
    assert manifest["objects"] == [{"file": f"{p.name}_win64.asm", "abi": "win64", "format": "win64"}]
    assert "nasm -f win64" in files[f"{p.name}_win64.asm"] and f"{p.name}.asm" not in files
    bundle = workdir / p.name
    write(files, bundle)
    said: list[str] = []
    outcome = run_kerngen_test(bundle, SEED, said.append, workdir, reemit=False)
    assert any("Wine" in line for line in said), said
    assert outcome.failed == 0, f"{p.name} (win64):\n" + "\n".join(outcome.failures[:20])
    typed = Manifest.parse(manifest, "manifest.json")
    runnable, modelled = split_by_cpu(typed)
    assert runnable and outcome.passed_at("wine") == len(family_of(p).checks(typed.only(runnable), SEED))
    assert outcome.passed == outcome.passed_at("wine") + outcome.passed_at("model")
    assert bool(modelled) == bool(outcome.passed_at("model"))


# ---------------------------------------------------------------------------
# the stub and the canaries catch what Win64 forbids

CORRUPTERS_ASM = """\
; Deliberately broken Win64 functions (Microsoft x64: arguments in rcx, rdx,
; r8, r9, then the stack above 32 bytes of shadow space; rbx, rbp, rdi, rsi,
; r12-r15, xmm6-15 and MXCSR's control bits are callee-saved). Each breaks
; one rule; buffers are 16 int16.
default rel
section .text

global kg_w64_bad_rdi
kg_w64_bad_rdi:
    not     rdi
    ret

global kg_w64_bad_rsi
kg_w64_bad_rsi:
    inc     rsi
    ret

global kg_w64_bad_rbx
kg_w64_bad_rbx:
    not     rbx
    ret

global kg_w64_bad_r12
kg_w64_bad_r12:
    xor     r12d, r12d
    ret

global kg_w64_bad_xmm6
kg_w64_bad_xmm6:
    pxor    xmm6, xmm6
    ret

global kg_w64_bad_xmm15
kg_w64_bad_xmm15:
    vpcmpeqb xmm15, xmm15, xmm15    ; VEX on xmm zeroes the upper half: no vzeroupper needed
    ret

; only the high quadword changes: the whole 128 bits are compared
global kg_w64_bad_xmm9_high
kg_w64_bad_xmm9_high:
    punpcklqdq xmm9, xmm9
    ret

global kg_w64_bad_rsp
kg_w64_bad_rsp:
    ret     8

global kg_w64_bad_df
kg_w64_bad_df:
    std
    ret

global kg_w64_bad_ymm
kg_w64_bad_ymm:
    vpcmpeqb ymm0, ymm0, ymm0
    ret

; MXCSR's rounding control and the x87 control word are callee-saved in Win64 (the shadow space is the
; callee's to use)
global kg_w64_bad_mxcsr
kg_w64_bad_mxcsr:
    stmxcsr [rsp + 8]
    xor     dword [rsp + 8], 0x6000
    ldmxcsr [rsp + 8]
    ret

global kg_w64_bad_x87cw
kg_w64_bad_x87cw:
    fnstcw  [rsp + 8]
    xor     word [rsp + 8], 0x0c00
    fldcw   [rsp + 8]
    ret

global kg_w64_bad_overflow
kg_w64_bad_overflow:
    not     word [rcx + 2 * 16]
    ret

global kg_w64_bad_underflow
kg_w64_bad_underflow:
    not     word [rcx - 2]
    ret

; r = a, then writes a[3]
global kg_w64_bad_inmod
kg_w64_bad_inmod:
    movdqu  xmm0, [rdx]
    movdqu  xmm1, [rdx + 16]
    movdqu  [rcx], xmm0
    movdqu  [rcx + 16], xmm1
    not     word [rdx + 2 * 3]
    ret

; control: r = a, using every volatile register and the shadow space,
; and saving and restoring the callee-saved registers it uses
global kg_w64_good_copy
kg_w64_good_copy:
    mov     [rsp + 8], rcx
    mov     [rsp + 16], rdx
    mov     [rsp + 24], r8
    mov     [rsp + 32], r9
    push    rdi
    push    rsi
    sub     rsp, 24                 ; 16-aligned again, room for one xmm save
    movdqa  [rsp], xmm6
    mov     rsi, [rsp + 24 + 16 + 16]   ; a, back from the shadow space
    mov     rdi, [rsp + 24 + 16 + 8]    ; r
    movdqu  xmm6, [rsi]
    movdqu  xmm0, [rsi + 16]
    movdqu  [rdi], xmm6
    movdqu  [rdi + 16], xmm0
    pcmpeqb xmm1, xmm1
    pcmpeqb xmm2, xmm2
    pcmpeqb xmm3, xmm3
    pcmpeqb xmm4, xmm4
    pcmpeqb xmm5, xmm5
    mov     r10, -1
    mov     r11, -1
    mov     eax, -1
    movdqa  xmm6, [rsp]
    add     rsp, 24
    pop     rsi
    pop     rdi
    ret

; five pointers: o_k[0] = k + 1 for the four register arguments and the one
; above the shadow space, and o_0[1] = rsp mod 16 at the call (0 when the
; caller aligned the stack)
global kg_w64_five_args
kg_w64_five_args:
    mov     word [rcx], 1
    mov     word [rdx], 2
    mov     word [r8], 3
    mov     word [r9], 4
    mov     rax, [rsp + 40]
    mov     word [rax], 5
    lea     rax, [rsp + 8]
    and     eax, 15
    mov     [rcx + 2], ax
    ret

; vmovdqa needs 32 bytes: faults on a 16-aligned buffer
global kg_w64_aligned_load
kg_w64_aligned_load:
    vmovdqa ymm0, [rcx]
    vmovdqa [rcx], ymm0
    vzeroupper
    ret
"""

ONE = (("inout", 16),)
COPY = (("out", 16), ("in", 16))

CORRUPTERS = [
    ("kg_w64_bad_rdi", ONE, STATUS_ABI, "rdi"),
    ("kg_w64_bad_rsi", ONE, STATUS_ABI, "rsi"),
    ("kg_w64_bad_rbx", ONE, STATUS_ABI, "rbx"),
    ("kg_w64_bad_r12", ONE, STATUS_ABI, "r12"),
    ("kg_w64_bad_xmm6", ONE, STATUS_ABI, "xmm6"),
    ("kg_w64_bad_xmm15", ONE, STATUS_ABI, "xmm15"),
    ("kg_w64_bad_xmm9_high", ONE, STATUS_ABI, "xmm9"),
    ("kg_w64_bad_rsp", ONE, STATUS_ABI, "rsp"),
    ("kg_w64_bad_df", ONE, STATUS_ABI, "direction-flag"),
    ("kg_w64_bad_ymm", ONE, STATUS_ABI, "ymm-upper"),
    ("kg_w64_bad_mxcsr", ONE, STATUS_ABI, "mxcsr"),
    ("kg_w64_bad_x87cw", ONE, STATUS_ABI, "x87-control"),
    ("kg_w64_bad_overflow", ONE, STATUS_CANARY, "0"),
    ("kg_w64_bad_underflow", ONE, STATUS_CANARY, "0"),
    ("kg_w64_bad_inmod", COPY, STATUS_INMOD, "1"),
    ("kg_w64_good_copy", COPY, STATUS_OK, ""),
]

DATA = tuple((i - 8) * 1000 for i in range(16))


def _args(shape: tuple[tuple[str, int], ...]) -> tuple[Arg, ...]:
    return tuple(Arg(role, 2, count, 32 if role != "in" else 16, None if role == "out" else DATA)
                 for role, count in shape)


@pytest.fixture(scope="module")
def corrupters(workdir: Path) -> Path:
    src = workdir / "w64_corrupters.asm"
    src.write_text(CORRUPTERS_ASM)
    return wine.assemble_dll(src, workdir)


@pytest.fixture(scope="module")
def corrupter_results(workdir: Path, corrupters: Path) -> dict[str, protocol.CaseResult]:
    """All corrupters in one Wine run: a broken callee must not spoil the next case."""
    cases = [Case(symbol, symbol, _args(shape)) for symbol, shape, _, _ in CORRUPTERS]
    return {r.case_id: r for r in wine.run_runner_wine(corrupters, cases, workdir, seed=SEED)}


@pytest.mark.parametrize(("symbol", "shape", "status", "reason"), CORRUPTERS, ids=[c[0] for c in CORRUPTERS])
def test_win64_corrupter_is_caught(workdir: Path, corrupter_results: dict[str, protocol.CaseResult], symbol: str,
                                   shape: tuple, status: str, reason: str) -> None:
    if reason == "ymm-upper" and not wine.abi_capabilities_wine(workdir).xinuse:
        pytest.skip("this CPU does not report XINUSE; vzeroupper cannot be checked")
    res = corrupter_results[symbol]
    assert (res.status, res.reason) == (status, reason)
    if status == STATUS_OK:
        assert res.outputs == {0: list(DATA)}


def test_five_arguments_reach_the_callee_with_an_aligned_stack(workdir: Path, corrupters: Path) -> None:
    args = tuple(Arg("out", 2, 2, 2) for _ in range(5))
    # no seed: the runner draws one from the system generator (BCryptGenRandom)
    [res] = wine.run_runner_wine(corrupters, [Case("five", "kg_w64_five_args", args)], workdir)
    assert res.ok, (res.status, res.reason)
    assert [res.outputs[k][0] for k in range(5)] == [1, 2, 3, 4, 5]
    assert res.outputs[0][1] == 0  # rsp + 8 at entry is 16-aligned: rsp was at the call


def test_a_fault_names_the_case_and_the_exception(workdir: Path, corrupters: Path) -> None:
    cases = [Case("fine_first", "kg_w64_good_copy", _args(COPY)),
             Case("under_aligned", "kg_w64_aligned_load", (Arg("inout", 2, 16, 16, DATA),))]
    with pytest.raises(HarnessError, match=r"under_aligned.*EXCEPTION_ACCESS_VIOLATION"):
        wine.run_runner_wine(corrupters, cases, workdir, seed=SEED)


def test_missing_export_is_named(workdir: Path, corrupters: Path) -> None:
    cases = [Case("nope", "kg_w64_no_such_symbol", (Arg("inout", 2, 4, 2, (1, 2, 3, 4)),))]
    with pytest.raises(HarnessError, match="kg_w64_no_such_symbol"):
        wine.run_runner_wine(corrupters, cases, workdir, seed=SEED)


def test_dll_exports_exactly_the_names_given(workdir: Path) -> None:
    src = workdir / "w64_exports.asm"
    src.write_text("section .text\nglobal kg_w64_a\nkg_w64_a:\n    ret\nglobal kg_w64_b\nkg_w64_b:\n    ret\n")
    dll = wine.assemble_dll(src, workdir, ["kg_w64_a"])
    ok = Case("a", "kg_w64_a", (Arg("inout", 2, 1, 2, (7,)),))
    [res] = wine.run_runner_wine(dll, [ok], workdir, seed=SEED)
    assert res.ok and res.outputs == {0: [7]}
    with pytest.raises(HarnessError, match="kg_w64_b"):  # global in the object, not exported
        wine.run_runner_wine(dll, [Case("b", "kg_w64_b", ok.args)], workdir, seed=SEED)
    with pytest.raises(HarnessError, match="kg_w64_missing"):  # promised but not defined: the link fails
        wine.assemble_dll(src, workdir, ["kg_w64_a", "kg_w64_missing"])


# ---------------------------------------------------------------------------
# unwind data: Windows unwinds through every kernel with a frame

OBJDUMP = "x86_64-w64-mingw32-objdump"

PROBE_STUB_ASM = """\
; uint64_t kg_probe_call(void *fn, void *a0, void *a1, void *a2, void *a3, void *a4)
; Calls fn(a0, ..., a4) with rbx, rbp, rsi, rdi, r12-r15 and xmm6-15 seeded from
; kg_probe_seeds and returns the mask of those that differ from their seed when
; fn returns (bits 0-7: rbx, rbp, rsi, rdi, r12-r15; 8-17: xmm6-15; 18: rsp).
default rel

section .data data align=16
global kg_probe_seeds, kg_probe_rsp
kg_probe_seeds:
    dq 0x0b0b0b0b0b0b0b01, 0x0b0b0b0b0b0b0b02, 0x0b0b0b0b0b0b0b03, 0x0b0b0b0b0b0b0b04
    dq 0x0b0b0b0b0b0b0b05, 0x0b0b0b0b0b0b0b06, 0x0b0b0b0b0b0b0b07, 0x0b0b0b0b0b0b0b08
%assign k 6
%rep 10
    dq 0x5a5a5a5a00000000 + k, 0xa5a5a5a500000000 + k
%assign k k + 1
%endrep
kg_probe_rsp:
    dq 0

%macro check_gpr 2
    cmp %1, [kg_probe_seeds + 8 * %2]
    je %%same
    bts rax, %2
%%same:
%endmacro

%macro check_xmm 1
    pcmpeqb xmm%1, [kg_probe_seeds + 64 + 16 * (%1 - 6)]
    pmovmskb ecx, xmm%1
    cmp ecx, 0xffff
    je %%same
    bts rax, %1 + 2
%%same:
%endmacro

section .text
global kg_probe_call, kg_probe_return
kg_probe_call:
    push rbx
    push rbp
    push rsi
    push rdi
    push r12
    push r13
    push r14
    push r15
    sub rsp, 216                    ; shadow space, the fifth argument, our xmm6-15: rsp 16-aligned
%assign k 6
%rep 10
    movdqa [rsp + 48 + 16 * (k - 6)], xmm %+ k
%assign k k + 1
%endrep
    mov rax, rcx
    mov rcx, rdx
    mov rdx, r8
    mov r8, r9
    mov r9, [rsp + 216 + 64 + 40]
    mov r10, [rsp + 216 + 64 + 48]
    mov [rsp + 32], r10
    mov rbx, [kg_probe_seeds]
    mov rbp, [kg_probe_seeds + 8]
    mov rsi, [kg_probe_seeds + 16]
    mov rdi, [kg_probe_seeds + 24]
    mov r12, [kg_probe_seeds + 32]
    mov r13, [kg_probe_seeds + 40]
    mov r14, [kg_probe_seeds + 48]
    mov r15, [kg_probe_seeds + 56]
%assign k 6
%rep 10
    movdqa xmm %+ k, [kg_probe_seeds + 64 + 16 * (k - 6)]
%assign k k + 1
%endrep
    mov [kg_probe_rsp], rsp
    call rax
kg_probe_return:
    xor eax, eax
    check_gpr rbx, 0
    check_gpr rbp, 1
    check_gpr rsi, 2
    check_gpr rdi, 3
    check_gpr r12, 4
    check_gpr r13, 5
    check_gpr r14, 6
    check_gpr r15, 7
%assign k 6
%rep 10
    check_xmm k
%assign k k + 1
%endrep
    cmp rsp, [kg_probe_rsp]
    je .rsp_same
    bts rax, 18
.rsp_same:
%assign k 6
%rep 10
    movdqa xmm %+ k, [rsp + 48 + 16 * (k - 6)]
%assign k k + 1
%endrep
    add rsp, 216
    pop r15
    pop r14
    pop r13
    pop r12
    pop rdi
    pop rsi
    pop rbp
    pop rbx
    ret
"""

PROBE_C = r"""
/* Makes kernels of a Win64 DLL fault and unwinds them from the fault.
 *
 * usage: unwind_probe.exe (DLL SYMBOL NARGS FAULT_ARG VALID_BYTES)...
 *
 * Each argument of a case points into a page of its own followed by a
 * no-access page; argument FAULT_ARG has only VALID_BYTES before it, so the
 * kernel faults in its body when it reaches further. A vectored handler looks
 * the faulting pc up in the DLL's .pdata (RtlLookupFunctionEntry), unwinds
 * one frame (RtlVirtualUnwind) and, when that lands on the return address in
 * kg_probe_call with its rsp, resumes there, as if the kernel had returned:
 * kg_probe_call then reports which callee-saved registers differ from the
 * values it seeded. One line per case:
 *   SYMBOL VALID faulted=F entry=E offset=O changed_gpr=G changed_xmm=X mask=M
 * G and X count the seeded registers the kernel had changed when it faulted
 * (what the unwinder had to restore); M is kg_probe_call's mask (0: all
 * restored). A fault the unwind data cannot explain ends the run, exit 4. */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern uint64_t kg_probe_call(void *fn, void *a0, void *a1, void *a2, void *a3, void *a4);
extern char kg_probe_return[];
extern uint64_t kg_probe_rsp;
extern uint64_t kg_probe_seeds[];

static void *probe_fn;
static int faulted, changed_gpr, changed_xmm, has_entry;
static uint64_t fault_offset;

static LONG CALLBACK on_fault(EXCEPTION_POINTERS *ep)
{
    if (ep->ExceptionRecord->ExceptionCode != EXCEPTION_ACCESS_VIOLATION || faulted)
        return EXCEPTION_CONTINUE_SEARCH;
    faulted = 1;
    CONTEXT ctx = *ep->ContextRecord;
    fault_offset = ctx.Rip - (uint64_t)probe_fn;
    DWORD64 *gpr[8] = {&ctx.Rbx, &ctx.Rbp, &ctx.Rsi, &ctx.Rdi, &ctx.R12, &ctx.R13, &ctx.R14, &ctx.R15};
    for (int i = 0; i < 8; i++)
        changed_gpr += *gpr[i] != kg_probe_seeds[i];
    for (int k = 0; k < 10; k++)
        changed_xmm += memcmp(&ctx.Xmm6 + k, &kg_probe_seeds[8 + 2 * k], 16) != 0;

    DWORD64 base = 0;
    PRUNTIME_FUNCTION fn = RtlLookupFunctionEntry(ctx.Rip, &base, NULL);
    has_entry = fn != NULL && base + fn->BeginAddress == (DWORD64)probe_fn && ctx.Rip < base + fn->EndAddress;
    if (fn == NULL) {
        printf("no function entry for the fault at offset %llu\n", (unsigned long long)fault_offset);
        fflush(stdout);
        ExitProcess(4);
    }
    PVOID data;
    DWORD64 frame;
    RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, ctx.Rip, fn, &ctx, &data, &frame, NULL);
    if (ctx.Rip != (DWORD64)kg_probe_return || ctx.Rsp != kg_probe_rsp) {
        printf("unwound to rip %+lld rsp %+lld from the caller's\n",
               (long long)(ctx.Rip - (DWORD64)kg_probe_return), (long long)(ctx.Rsp - kg_probe_rsp));
        fflush(stdout);
        ExitProcess(4);
    }
    *ep->ContextRecord = ctx;
    return EXCEPTION_CONTINUE_EXECUTION;
}

int main(int argc, char **argv)
{
    if (argc < 6 || (argc - 1) % 5) {
        fprintf(stderr, "usage: %s (DLL SYMBOL NARGS FAULT_ARG VALID_BYTES)...\n", argv[0]);
        return 2;
    }
    AddVectoredExceptionHandler(1, on_fault);
    for (int i = 1; i < argc; i += 5) {
        HMODULE dll = LoadLibraryA(argv[i]);
        probe_fn = dll ? (void *)GetProcAddress(dll, argv[i + 1]) : NULL;
        if (probe_fn == NULL) {
            fprintf(stderr, "cannot load %s from %s\n", argv[i + 1], argv[i]);
            return 2;
        }
        int nargs = atoi(argv[i + 2]), fault = atoi(argv[i + 3]), valid = atoi(argv[i + 4]);
        void *args[5] = {0};
        for (int a = 0; a < nargs && a < 5; a++) {
            char *region = VirtualAlloc(NULL, 8192, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
            DWORD old;
            if (region == NULL || !VirtualProtect(region + 4096, 4096, PAGE_NOACCESS, &old))
                return 2;
            args[a] = a == fault ? region + 4096 - valid : region;
        }
        faulted = changed_gpr = changed_xmm = has_entry = 0;
        fault_offset = 0;
        uint64_t mask = kg_probe_call(probe_fn, args[0], args[1], args[2], args[3], args[4]);
        printf("%s %d faulted=%d entry=%d offset=%llu changed_gpr=%d changed_xmm=%d mask=%llx\n", argv[i + 1],
               valid, faulted, has_entry, (unsigned long long)fault_offset, changed_gpr, changed_xmm,
               (unsigned long long)mask);
        fflush(stdout);
    }
    return 0;
}
"""

# (bundle, symbol, the argument that faults, its bytes before a no-access page)
UNWIND_CASES = [
    ("kyber-3329", "kg_kyber3329_ntt_forward_avx2", 0, 0),  # rbp frame, 10 xmm saves: faults early
    ("kyber-3329", "kg_kyber3329_ntt_forward_avx2", 0, 480),  # ... and once xmm6-15 are in use
    ("kyber-3329", "kg_kyber3329_basemul_avx2", 1, 256),  # a fixed allocation only: ALLOC_SMALL
    ("kyber-3329", "kg_kyber3329_ntt_inverse_sse", 0, 448),  # legacy SSE saves, ALLOC_LARGE, rbp
    ("gf2m-233", "kg_gf2m233_reduce_gpr_avx2", 0, 0),  # one push (rbx), nothing else
    ("gf2m-233", "kg_gf2m233_ladder_step_avx2", 0, 64),  # five arguments, the fifth on the stack
]


@pytest.fixture(scope="module")
def unwind_bundles(workdir: Path) -> dict[str, tuple[Path, dict, dict[str, Frame]]]:
    """kyber-3329 and gf2m-233 for Win64: each DLL, manifest and function frames."""
    out = {}
    for name in ("kyber-3329", "gf2m-233"):
        p = win64_params(REPO / "params" / f"{name}.toml")
        bundle = STORE.bundle(p)
        files = render(bundle, f"kerngen emit {name}.toml --abi win64")
        src = workdir / f"unwind-{name}"
        src.mkdir(exist_ok=True)
        (src / f"{name}.asm").write_text(files[f"{name}_win64.asm"])
        manifest = json.loads(files["manifest.json"])
        dll = wine.assemble_dll(src / f"{name}.asm", workdir, [f["symbol"] for f in manifest["functions"]])
        out[name] = (dll, manifest, {fn.symbol: frame_of(fn.kernel) for fn in bundle.functions})
    return out


def _function_table(objdump_p: str) -> dict[str, dict]:
    """Exported function -> its .pdata entry and decoded UNWIND_INFO, from `objdump -p`."""
    rvas = dict(re.findall(r"^\s*\[\s*(\d+)\] \+base\[\s*\d+\]\s+([0-9a-f]+) Export RVA", objdump_p, re.M))
    names = dict(re.findall(r"^\s*\[\s*(\d+)\] (kg_\w+)$", objdump_p, re.M))
    base = int(re.search(r"^ImageBase\s+([0-9a-f]+)", objdump_p, re.M).group(1), 16)
    by_start = {base + int(rvas[k], 16): name for k, name in names.items()}
    table = {}
    for start, end in re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]+) ([0-9a-f]+) [0-9a-f]+$", objdump_p, re.M):
        table[by_start.get(int(start, 16), start)] = {"end": int(end, 16) - int(start, 16)}
    xdata = objdump_p[objdump_p.index("Dump of .xdata"):]
    for block in re.split(r"\n(?= [0-9a-f]+ \(rva: )", xdata)[1:]:
        start = int(re.match(r" [0-9a-f]+ \(rva: [0-9a-f]+\): ([0-9a-f]+)", block).group(1), 16)
        info = re.search(r"Nbr codes: (\d+), Prologue size: 0x([0-9a-f]+), Frame offset: 0x0, Frame reg: (\w+)", block)
        table[by_start[start]].update(
            slots=int(info.group(1)), prolog=int(info.group(2), 16), frame_reg=info.group(3),
            pushes=re.findall(r": push (\w+)", block),
            alloc=[int(x, 16) for x in re.findall(r"alloc \w+ area: rsp = rsp - 0x([0-9a-f]+)", block)],
            saves=[(x, int(off, 16)) for x, off in re.findall(r"save (xmm\d+) at \w+ \+ 0x([0-9a-f]+)", block)],
            fpreg=re.findall(r"FPReg: (\w+) = rsp \+ 0x0", block))
    return table


@pytest.mark.skipif(shutil.which(OBJDUMP) is None, reason=f"{OBJDUMP} (binutils-mingw-w64) reads the DLL")
def test_every_function_with_a_frame_has_unwind_data(unwind_bundles) -> None:
    """The DLL's function table (.pdata, through the PE exception directory)
    has an entry for exactly the functions with a frame (leaf functions need
    none), covering the function, and its UNWIND_INFO, as binutils decodes it,
    is the frame: pushes, the fixed allocation, each xmm save, rbp."""
    framed = leaf = 0
    for dll, _manifest, frames in unwind_bundles.values():
        out = subprocess.run([OBJDUMP, "-p", str(dll)], capture_output=True, text=True, check=True).stdout
        table = _function_table(out)
        assert set(table) == {s for s, f in frames.items() if f.has_frame}
        for symbol, f in frames.items():
            if not f.has_frame:
                leaf += 1
                continue
            framed += 1
            t = table[symbol]
            assert t["end"] > t["prolog"] > 0 and t["slots"] == f.unwind_slots, symbol
            assert t["pushes"] == list(reversed(f.pushes)), symbol  # codes run in reverse prologue order
            assert t["alloc"] == ([f.alloc] if f.alloc else []), symbol
            assert sorted(t["saves"]) == sorted(f.saves), symbol
            assert t["frame_reg"] == ("rbp" if f.frame_pointer else "none"), symbol
            assert t["fpreg"] == (["rbp"] if f.frame_pointer else []), symbol
    assert framed and leaf


def test_a_faulting_kernel_unwinds_to_its_caller(workdir: Path, unwind_bundles) -> None:
    """Each kernel is made to fault in its body (one argument runs into a
    no-access page) with every callee-saved register seeded; from the fault
    context RtlLookupFunctionEntry finds its .pdata entry and RtlVirtualUnwind
    unwinds one frame to the return address in the caller, at the caller's
    rsp, where execution resumes: rbx, rbp, rsi, rdi, r12-r15 and xmm6-15 all
    hold their seeds again, though the kernels had changed them (rbp as frame
    pointer, xmm6-15 in use) when they faulted."""
    nasm, gcc = shutil.which("nasm"), shutil.which(wine.MINGW_GCC)
    if nasm is None:
        pytest.skip("nasm is needed to assemble")
    build = workdir / "unwind-probe"
    build.mkdir(exist_ok=True)
    (build / "probe_stub.asm").write_text(PROBE_STUB_ASM)
    (build / "unwind_probe.c").write_text(PROBE_C)
    toolchain.run_build([nasm, "-f", "win64", "-o", build / "probe_stub.obj", build / "probe_stub.asm"],
                     "assembling probe_stub.asm")
    toolchain.run_build([gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", build / "unwind_probe.exe",
                      build / "unwind_probe.c", build / "probe_stub.obj"], "building unwind_probe.exe")
    host = cpu_flags()
    argv, expected = [wine.to_windows_path(build / "unwind_probe.exe")], []
    for name, symbol, fault, valid in UNWIND_CASES:
        dll, manifest, frames = unwind_bundles[name]
        fn = next(f for f in manifest["functions"] if f["symbol"] == symbol)
        assert frames[symbol].has_frame
        if set(fn.get("cpu", ())) <= host:
            argv += [wine.to_windows_path(dll), symbol, str(len(fn["args"])), str(fault), str(valid)]
            expected.append((symbol, valid))
    if not expected:
        pytest.skip("this CPU runs none of the probed kernels")
    proc = wine.run_wine(workdir, argv, 120.0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [tuple(ln.split()[:2]) for ln in lines] == [(s, str(v)) for s, v in expected], proc.stdout
    results = [dict(kv.split("=") for kv in ln.split()[2:]) for ln in lines]
    for ln, r in zip(lines, results, strict=True):
        assert (r["faulted"], r["entry"], r["mask"]) == ("1", "1", "0"), ln
    # the unwinder had something to restore: rbp (frame pointer or rbx) and xmm6-15
    assert any(int(r["changed_gpr"]) for r in results) and any(int(r["changed_xmm"]) == 10 for r in results)
