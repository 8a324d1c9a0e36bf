; kerngen test harness: checked call into a kernel (Microsoft x64, NASM, win64).
;
;   uint64_t kg_checked_call(const void *fn, uint64_t a0, uint64_t a1,
;                            uint64_t a2, uint64_t a3, uint64_t a4);
;
; The Win64 counterpart of abi_check.asm. Calls fn(a0, a1, a2, a3, a4) the
; way a Microsoft x64 caller does -- a0..a3 in rcx, rdx, r8, r9, a4 on the
; stack just above the 32 bytes of shadow space, rsp 16-byte aligned at the
; call -- with every callee-saved register holding a random value from
; kg_abi_seed[], and reports everything the callee failed to put back as a
; bitmask (bit layout in abi_check_win64.h):
;
;   bits 0-7    rbx, rbp, rdi, rsi, r12, r13, r14, r15 differ from kg_abi_seed[0..7]
;   bit  8      rsp differs from its value before the call
;   bit  9      AVX upper state still in use on return (missing vzeroupper)
;   bit  10     direction flag left set
;   bits 11-20  xmm6 .. xmm15 (low 128 bits) differ from kg_abi_seed[8..27]
;   bit  21     MXCSR control bits (6-15) changed
;   bit  22     x87 control word changed (both as abi_control.inc says)
;
; kg_abi_seed[] holds 28 quadwords: the eight general registers, then two
; quadwords (low, high) for each of xmm6..xmm15. Filling the registers with
; fresh random values before every call makes the check independent of what
; the surrounding C code keeps in them (see abi_check.asm).
;
; The caller (C) fills kg_abi_seed[] and kg_abi_flags before the call:
;   kg_abi_flags bit 0: AVX is usable (vzeroupper may be executed)
;   kg_abi_flags bit 1: XGETBV with ECX=1 (XINUSE) is supported
;
; The stub itself is a Win64 function: it preserves its own caller's
; callee-saved general registers, xmm6-15, MXCSR and the x87 control word. The value fn returned
; is kept in kg_abi_last_ret. Not reentrant: the expected stack pointer lives
; in a static slot, because a callee that broke rsp cannot be trusted to
; leave our own frame where we could find it.

default rel

%include "abi_control.inc"

%define KG_ABI_RSP      (1 << 8)
%define KG_ABI_YMM      (1 << 9)
%define KG_ABI_DF       (1 << 10)
%define KG_ABI_XMM6     11
%define KG_ABI_MXCSR    21
%define KG_ABI_X87CW    22

%define NSEEDS          28
%define XMM_SEEDS       (kg_abi_seed + 8 * 8)

; Frame below the eight pushes (rsp is 8 mod 16 after them):
;   [rsp +   0]  32 bytes of shadow space for the callee
;   [rsp +  32]  the fifth argument
;   [rsp +  40]  padding
;   [rsp +  48]  160 bytes: our caller's xmm6..xmm15
;   [rsp + 208]  padding, so that rsp is 16-aligned at the call
%define SHADOW          32
%define ARG5            32
%define XMM_SAVE        48
%define FRAME           (XMM_SAVE + 160 + 8)
%define PUSHES          (8 * 8)
; the stub's own stack arguments a3, a4 (above its return address and the
; 32 bytes of shadow space its caller reserved)
%define OWN_A3          (FRAME + PUSHES + 8 + 32)
%define OWN_A4          (OWN_A3 + 8)

section .bss bss align=64
global kg_abi_seed
kg_abi_seed:        resq NSEEDS
global kg_abi_flags
kg_abi_flags:       resq 1
global kg_abi_last_ret
kg_abi_last_ret:    resq 1
expected_rsp:       resq 1
mxcsr_before:       resd 1
mxcsr_after:        resd 1
x87cw_before:       resw 1
x87cw_after:        resw 1

section .text

; Compare one callee-saved general register with its seed and fold the
; outcome into eax without a branch; ecx is free after the call.
%macro CHECK_SEED 2                 ; register, index in kg_abi_seed
    xor     ecx, ecx
    cmp     %1, [kg_abi_seed + 8 * %2]
    setne   cl
    shl     ecx, %2
    or      eax, ecx
%endmacro

; The same for xmm6..xmm15: all 16 bytes equal to the seed gives a byte mask
; of 0xffff; anything else sets the register's bit. Destroys the register.
%macro CHECK_XMM 1                  ; register number, 6..15
    pcmpeqb xmm%1, [XMM_SEEDS + 16 * (%1 - 6)]
    pmovmskb ecx, xmm%1
    xor     ecx, 0xffff             ; 0 when every byte matched
    add     ecx, 0xffff             ; carries into bit 16 unless it was 0
    shr     ecx, 16
    shl     ecx, KG_ABI_XMM6 + %1 - 6
    or      eax, ecx
%endmacro

global kg_checked_call
kg_checked_call:
    push    rbp
    push    rbx
    push    rdi
    push    rsi
    push    r12
    push    r13
    push    r14
    push    r15
    sub     rsp, FRAME
    mov     [expected_rsp], rsp

%assign i 6
%rep 10
    movdqu  [rsp + XMM_SAVE + 16 * (i - 6)], xmm%[i]
%assign i i + 1
%endrep

    ; the callee's arguments: a0..a3 in registers, a4 above the shadow space
    mov     rax, rcx                ; fn
    mov     rcx, rdx
    mov     rdx, r8
    mov     r8, r9
    mov     r9, [rsp + OWN_A3]
    mov     r10, [rsp + OWN_A4]
    mov     [rsp + ARG5], r10

    stmxcsr [mxcsr_before]
    fnstcw  [x87cw_before]

    ; Start from a clean upper state, so that whatever XINUSE says after the
    ; call is the callee's doing and not left over from the C runtime.
    test    byte [kg_abi_flags], 1
    jz      .no_avx_before
    vzeroupper
.no_avx_before:

    mov     rbx, [kg_abi_seed + 0]
    mov     rbp, [kg_abi_seed + 8]
    mov     rdi, [kg_abi_seed + 16]
    mov     rsi, [kg_abi_seed + 24]
    mov     r12, [kg_abi_seed + 32]
    mov     r13, [kg_abi_seed + 40]
    mov     r14, [kg_abi_seed + 48]
    mov     r15, [kg_abi_seed + 56]
%assign i 6
%rep 10
    movdqa  xmm%[i], [XMM_SEEDS + 16 * (i - 6)]
%assign i i + 1
%endrep
    ; Junk in the scratch registers (xmm0-5 get the complement of a seed),
    ; so a kernel that reads one of them by mistake misbehaves here rather
    ; than in a user's program.
    mov     r10, rbx
    not     r10
    mov     r11, rbp
    not     r11
    pcmpeqb xmm5, xmm5
    movdqa  xmm0, xmm5
    pxor    xmm0, xmm10
    movdqa  xmm1, xmm5
    pxor    xmm1, xmm11
    movdqa  xmm2, xmm5
    pxor    xmm2, xmm12
    movdqa  xmm3, xmm5
    pxor    xmm3, xmm13
    movdqa  xmm4, xmm5
    pxor    xmm4, xmm14
    pxor    xmm5, xmm15

    call    rax

    mov     [kg_abi_last_ret], rax
    xor     eax, eax
    CHECK_SEED rbx, 0
    CHECK_SEED rbp, 1
    CHECK_SEED rdi, 2
    CHECK_SEED rsi, 3
    CHECK_SEED r12, 4
    CHECK_SEED r13, 5
    CHECK_SEED r14, 6
    CHECK_SEED r15, 7

    ; rsp first: pushfq below needs a stack we own
    xor     ecx, ecx
    cmp     rsp, [expected_rsp]
    setne   cl
    shl     ecx, 8
    or      eax, ecx
    mov     rsp, [expected_rsp]

    pushfq
    pop     rcx
    shr     ecx, 10
    and     ecx, 1
    shl     ecx, 10
    or      eax, ecx
    cld                             ; the C caller relies on DF = 0

    ; XINUSE before anything else here touches a vector register
    test    byte [kg_abi_flags], 2
    jz      .no_xinuse
    mov     r8d, eax
    mov     ecx, 1
    xgetbv                          ; XINUSE in edx:eax; bit 2 = AVX (ymm upper halves)
    and     eax, 4
    shl     eax, 7                  ; bit 2 -> KG_ABI_YMM (bit 9)
    or      eax, r8d
.no_xinuse:

    CHECK_XMM 6
    CHECK_XMM 7
    CHECK_XMM 8
    CHECK_XMM 9
    CHECK_XMM 10
    CHECK_XMM 11
    CHECK_XMM 12
    CHECK_XMM 13
    CHECK_XMM 14
    CHECK_XMM 15

    CHECK_CONTROL stmxcsr, mxcsr, 0xffc0, KG_ABI_MXCSR, ldmxcsr   ; control bits only: the status flags are volatile
    CHECK_CONTROL fnstcw, x87cw, 0xffff, KG_ABI_X87CW, fldcw

    test    byte [kg_abi_flags], 1
    jz      .no_avx_after
    vzeroupper                      ; do not hand a dirty state back to C either
.no_avx_after:

%assign i 6
%rep 10
    movdqu  xmm%[i], [rsp + XMM_SAVE + 16 * (i - 6)]
%assign i i + 1
%endrep
    add     rsp, FRAME
    pop     r15
    pop     r14
    pop     r13
    pop     r12
    pop     rsi
    pop     rdi
    pop     rbx
    pop     rbp
    ret
