; kerngen test harness: deliberately broken kernels.
;
; The checker is only worth something if it fails when it should: each
; function below breaks exactly one rule, and tests/test_harness.py runs them
; through kg_runner and expects the matching verdict. Every function takes
; int16_t buffers of 16 elements, so one vector description fits them all:
;
;   kg_bad_rbx(int16_t *a)                changes rbx              -> abi rbx
;   kg_bad_rbp(int16_t *a)                changes rbp              -> abi rbp
;   kg_bad_r15(int16_t *a)                changes r15              -> abi r15
;   kg_bad_rsp(int16_t *a)                returns with "ret 8"     -> abi rsp
;   kg_bad_ymm(int16_t *a)                AVX without vzeroupper   -> abi ymm-upper
;   kg_bad_df(int16_t *a)                 leaves DF set            -> abi direction-flag
;   kg_bad_mxcsr(int16_t *a)              rounds SSE toward zero   -> abi mxcsr
;   kg_bad_x87cw(int16_t *a)              rounds x87 toward zero   -> abi x87-control
;   kg_bad_overflow(int16_t *a)           writes a[16]             -> canary 0
;   kg_bad_underflow(int16_t *a)          writes a[-1]             -> canary 0
;   kg_bad_inmod(int16_t *r, const int16_t *a)  copies a to r, then writes a[3] -> inmod 1
;   kg_good_copy(int16_t *r, const int16_t *a)  copies a to r      -> ok (control)

default rel

section .text

global kg_bad_rbx:function
kg_bad_rbx:
    not     rbx
    ret

global kg_bad_rbp:function
kg_bad_rbp:
    not     rbp
    ret

global kg_bad_r15:function
kg_bad_r15:
    not     r15
    ret

global kg_bad_rsp:function
kg_bad_rsp:
    ret     8

global kg_bad_ymm:function
kg_bad_ymm:
    vpcmpeqb ymm0, ymm0, ymm0
    ret

global kg_bad_df:function
kg_bad_df:
    std
    ret

global kg_bad_mxcsr:function
kg_bad_mxcsr:
    stmxcsr [rsp - 8]
    xor     dword [rsp - 8], 0x6000
    ldmxcsr [rsp - 8]
    ret

global kg_bad_x87cw:function
kg_bad_x87cw:
    fnstcw  [rsp - 8]
    xor     word [rsp - 8], 0x0c00
    fldcw   [rsp - 8]
    ret

global kg_bad_overflow:function
kg_bad_overflow:
    not     word [rdi + 2 * 16]
    ret

global kg_bad_underflow:function
kg_bad_underflow:
    not     word [rdi - 2]
    ret

global kg_bad_inmod:function
kg_bad_inmod:
    movdqu  xmm0, [rsi]
    movdqu  xmm1, [rsi + 16]
    movdqu  [rdi], xmm0
    movdqu  [rdi + 16], xmm1
    not     word [rsi + 2 * 3]
    ret

global kg_good_copy:function
kg_good_copy:
    movdqu  xmm0, [rsi]
    movdqu  xmm1, [rsi + 16]
    movdqu  [rdi], xmm0
    movdqu  [rdi + 16], xmm1
    ret

section .note.GNU-stack noalloc noexec nowrite progbits
