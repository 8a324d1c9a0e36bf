/* kerngen test harness: interface to the Win64 checked-call stub
 * (abi_check_win64.asm), used instead of abi_check.h when the harness is
 * built for Windows (_WIN32). The functions have the names and signatures
 * of abi_check.h, so runner.c calls them the same way; what differs is the
 * number of seeds and the mask bits. */
#ifndef KG_ABI_CHECK_WIN64_H
#define KG_ABI_CHECK_WIN64_H

#include <stdint.h>

/* Bits of the value returned by kg_checked_call. Bits 0-7 follow the order
 * of the general-register seeds in kg_abi_seed[]; a set bit means the callee
 * returned with a different value. */
#define KG_ABI_RBX (1u << 0)
#define KG_ABI_RBP (1u << 1)
#define KG_ABI_RDI (1u << 2)
#define KG_ABI_RSI (1u << 3)
#define KG_ABI_R12 (1u << 4)
#define KG_ABI_R13 (1u << 5)
#define KG_ABI_R14 (1u << 6)
#define KG_ABI_R15 (1u << 7)
#define KG_ABI_RSP (1u << 8)
#define KG_ABI_YMM (1u << 9)   /* AVX upper state in use: vzeroupper missing */
#define KG_ABI_DF (1u << 10)   /* direction flag left set */
#define KG_ABI_XMM6 (1u << 11) /* xmm6 .. xmm15: bits 11 .. 20 */
#define KG_ABI_MXCSR (1u << 21) /* MXCSR control bits changed */
#define KG_ABI_X87CW (1u << 22) /* x87 control word changed */
#define KG_ABI_NBITS 23

/* Bits of kg_abi_flags, set once from CPUID by kg_abi_init(). */
#define KG_ABI_HAVE_AVX (1u << 0)
#define KG_ABI_HAVE_XINUSE (1u << 1)

/* rbx, rbp, rdi, rsi, r12-r15, then xmm6..xmm15 as (low, high) quadwords. */
#define KG_ABI_NSEEDS 28

extern uint64_t kg_abi_seed[KG_ABI_NSEEDS];
extern uint64_t kg_abi_flags;
extern uint64_t kg_abi_last_ret;

uint64_t kg_checked_call(const void *fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                         uint64_t a4);

/* Detects what the stub may use (AVX, XGETBV with ECX=1) and stores it in
 * kg_abi_flags. Returns the flags. (vectors.c) */
unsigned kg_abi_init(void);

/* Word naming one mask bit ("rdi", "xmm6", "ymm-upper", ...), used in output
 * files. (vectors.c) */
const char *kg_abi_bit_name(unsigned bit);

#endif
