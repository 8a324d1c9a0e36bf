/* kerngen test harness: interface to the checked-call stub (abi_check.asm). */
#ifndef KG_ABI_CHECK_H
#define KG_ABI_CHECK_H

#include <stdint.h>

/* Bits of the value returned by kg_checked_call. Bits 0-5 follow the order of
 * kg_abi_seed[]; a set bit means the callee returned with a different value. */
#define KG_ABI_RBX (1u << 0)
#define KG_ABI_RBP (1u << 1)
#define KG_ABI_R12 (1u << 2)
#define KG_ABI_R13 (1u << 3)
#define KG_ABI_R14 (1u << 4)
#define KG_ABI_R15 (1u << 5)
#define KG_ABI_RSP (1u << 6)
#define KG_ABI_YMM (1u << 7) /* AVX upper state in use: vzeroupper missing */
#define KG_ABI_DF (1u << 8)  /* direction flag left set */
#define KG_ABI_MXCSR (1u << 9) /* MXCSR control bits changed */
#define KG_ABI_X87CW (1u << 10) /* x87 control word changed */
#define KG_ABI_NBITS 11

/* Bits of kg_abi_flags, set once from CPUID by kg_abi_init(). */
#define KG_ABI_HAVE_AVX (1u << 0)
#define KG_ABI_HAVE_XINUSE (1u << 1)

extern uint64_t kg_abi_seed[6];
extern uint64_t kg_abi_flags;
extern uint64_t kg_abi_last_ret;

uint64_t kg_checked_call(const void *fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                         uint64_t a4);

/* Detects what the stub may use (AVX, XGETBV with ECX=1) and stores it in
 * kg_abi_flags. Returns the flags. */
unsigned kg_abi_init(void);

/* Word naming one mask bit ("rbx", "ymm-upper", ...), used in output files. */
const char *kg_abi_bit_name(unsigned bit);

#endif
