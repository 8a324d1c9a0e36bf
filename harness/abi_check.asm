; kerngen test harness: checked call into a kernel (SysV AMD64, NASM, elf64).
;
;   uint64_t kg_checked_call(const void *fn, uint64_t a0, uint64_t a1,
;                            uint64_t a2, uint64_t a3, uint64_t a4);
;
; Calls fn(a0, a1, a2, a3, a4) with every callee-saved general register
; holding a random value from kg_abi_seed[], then reports everything the
; callee failed to put back as a bitmask (bit layout in abi_check.h):
;
;   bits 0-5  rbx, rbp, r12, r13, r14, r15 differ from kg_abi_seed[0..5]
;   bit  6    rsp differs from its value before the call
;   bit  7    AVX upper state still in use on return (missing vzeroupper)
;   bit  8    direction flag left set
;   bit  9    MXCSR control bits (6-15) changed
;   bit  10   x87 control word changed
;
; MXCSR and the x87 control word are compared as abi_control.inc says, and put
; back.
;
; A plain "save, call, restore" would let a kernel that clobbers rbx pass
; whenever the caller did not happen to need rbx afterwards; seeding the
; registers with fresh random values before every call makes the check
; independent of what the surrounding C code keeps there.
;
; The caller (C) fills kg_abi_seed[] and kg_abi_flags before the call:
;   kg_abi_flags bit 0: AVX is usable (vzeroupper may be executed)
;   kg_abi_flags bit 1: XGETBV with ECX=1 (XINUSE) is supported
; Both come from CPUID once at start-up; executing vzeroupper or xgetbv(1)
; without them would fault with #UD.
;
; The value fn returned is kept in kg_abi_last_ret. Not reentrant: the
; expected stack pointer lives in a static slot, because a callee that broke
; rsp cannot be trusted to leave our own frame where we could find it.

default rel

%include "abi_control.inc"

%define KG_ABI_RSP      (1 << 6)
%define KG_ABI_YMM      (1 << 7)
%define KG_ABI_DF       (1 << 8)
%define KG_ABI_MXCSR    9
%define KG_ABI_X87CW    10

section .bss
align 64
global kg_abi_seed:data (6 * 8)
kg_abi_seed:        resq 6
global kg_abi_flags:data 8
kg_abi_flags:       resq 1
global kg_abi_last_ret:data 8
kg_abi_last_ret:    resq 1
expected_rsp:       resq 1
mxcsr_before:       resd 1
mxcsr_after:        resd 1
x87cw_before:       resw 1
x87cw_after:        resw 1

section .text

; Compare one callee-saved register with its seed and fold the outcome into
; eax without a branch; ecx is free after the call.
%macro CHECK_SEED 2                 ; register, index in kg_abi_seed
    xor     ecx, ecx
    cmp     %1, [kg_abi_seed + 8 * %2]
    setne   cl
    shl     ecx, %2
    or      eax, ecx
%endmacro

global kg_checked_call:function
kg_checked_call:
    push    rbp
    push    rbx
    push    r12
    push    r13
    push    r14
    push    r15
    ; six pushes leave rsp at 8 mod 16; the callee must see it 16-aligned
    sub     rsp, 8
    mov     [expected_rsp], rsp

    mov     rax, rdi
    mov     rdi, rsi
    mov     rsi, rdx
    mov     rdx, rcx
    mov     rcx, r8
    mov     r8, r9

    stmxcsr [mxcsr_before]
    fnstcw  [x87cw_before]

    ; Start from a clean upper state, so that whatever XINUSE says after the
    ; call is the callee's doing and not left over from libc.
    test    byte [kg_abi_flags], 1
    jz      .no_avx_before
    vzeroupper
.no_avx_before:

    mov     rbx, [kg_abi_seed + 0]
    mov     rbp, [kg_abi_seed + 8]
    mov     r12, [kg_abi_seed + 16]
    mov     r13, [kg_abi_seed + 24]
    mov     r14, [kg_abi_seed + 32]
    mov     r15, [kg_abi_seed + 40]
    ; Junk in the unused argument and scratch registers, so a kernel that
    ; reads one of them by mistake misbehaves here rather than in a user's
    ; program.
    mov     r9, rbx
    not     r9
    mov     r10, rbp
    not     r10
    mov     r11, r12
    not     r11

    call    rax

    mov     [kg_abi_last_ret], rax
    xor     eax, eax
    CHECK_SEED rbx, 0
    CHECK_SEED rbp, 1
    CHECK_SEED r12, 2
    CHECK_SEED r13, 3
    CHECK_SEED r14, 4
    CHECK_SEED r15, 5

    ; rsp first: pushfq below needs a stack we own
    xor     ecx, ecx
    cmp     rsp, [expected_rsp]
    setne   cl
    shl     ecx, 6
    or      eax, ecx
    mov     rsp, [expected_rsp]

    pushfq
    pop     rcx
    shr     ecx, 10
    and     ecx, 1
    shl     ecx, 8
    or      eax, ecx
    cld                             ; the C caller relies on DF = 0

    test    byte [kg_abi_flags], 2
    jz      .no_xinuse
    mov     r8d, eax
    mov     ecx, 1
    xgetbv                          ; XINUSE in edx:eax; bit 2 = AVX (ymm upper halves)
    and     eax, 4
    shl     eax, 5                  ; bit 2 -> KG_ABI_YMM (bit 7)
    or      eax, r8d
.no_xinuse:

    CHECK_CONTROL stmxcsr, mxcsr, 0xffc0, KG_ABI_MXCSR, ldmxcsr   ; control bits only: the status flags are volatile
    CHECK_CONTROL fnstcw, x87cw, 0xffff, KG_ABI_X87CW, fldcw

    test    byte [kg_abi_flags], 1
    jz      .no_avx_after
    vzeroupper                      ; do not hand a dirty state back to C either
.no_avx_after:

    add     rsp, 8
    pop     r15
    pop     r14
    pop     r13
    pop     r12
    pop     rbx
    pop     rbp
    ret

section .note.GNU-stack noalloc noexec nowrite progbits
