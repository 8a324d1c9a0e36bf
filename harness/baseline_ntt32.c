/* kerngen harness: plain C baseline for the 32-bit NTT kernels.
 *
 * The yardstick that `kerngen bench` sets the emitted kernels against: the
 * straightforward portable code a user would otherwise write (loops, signed
 * Montgomery arithmetic with R = 2^32 and int64 products, in the style of the
 * Dilithium reference C code), built with -O3 -march=native so the compiler
 * may vectorise it. Its array order is its own and need not match the emitted
 * kernels; only the round trip forward -> basemul -> inverse is a contract
 * (the negacyclic product mod q in natural order), which tests/test_harness.py
 * checks against SymPy. The 16-bit twin is harness/baseline_ntt16.c; the two
 * share their structure and their tables' meaning, not code.
 *
 * Constants come from kg_params.h, written per parameter set by
 * kerngen.families.ntt.baseline.header():
 *   KG_N, KG_Q, KG_LAYERS (L), KG_D (= N >> L, block degree 1, 2, 4 or 8)
 *   KG_QINV           q^-1 mod 2^32 as int32
 *   KG_BARRETT_V, KG_BARRETT_SHIFT   v = round(2^shift / q), shift = 30 + bitlen(q)
 *   KG_F              R^2 / 2^L mod q, centred (R = 2^32): final inverse scaling
 *   kg_zetas[2^L]         R * zeta^brv_L(i) mod q, centred; zeta a primitive
 *                         2^(L+1)-th root of unity; forward reads 1 .. 2^L - 1
 *   kg_zetas_inv[2^L - 1] R * (-zeta^-brv_L(k)) mod q for the forward index k
 *                         that each inverse butterfly group undoes, in the
 *                         order the inverse reads them
 *   kg_zetas_block[2^L]   R * zeta^(2 brv_L(j) + 1) mod q: block j of the
 *                         forward output is a mod (x^d - zeta^(2 brv_L(j) + 1))
 *   All table entries and KG_F centred: |value| <= (q - 1) / 2.
 *
 * Contracts (q odd, q < 2^30; d = 1, 2, 4 or 8):
 *   forward: |a[i]| < q in; int32 out (Barrett passes are inserted between
 *            layers wherever the growth of q per layer would overflow int32).
 *   basemul: any int32 in; |r[i]| <= (q + 1) / 2 out, times R^-1. r may alias
 *            a or b.
 *   inverse: |a[i]| < 2^30 in (so any |a[i]| <= q); |a[i]| < q out: R times
 *            the inverse transform (the L Gentleman-Sande layers give 2^L
 *            times it, KG_F turns that into R), which cancels basemul's R^-1
 *            and leaves a * b mod q.
 * Why q < 2^30: the inverse adds and subtracts two values below 2^30 (its
 * input) or below q (after a layer) in absolute value, and basemul adds two
 * Montgomery results of absolute value <= q, so 2q must fit int32; the
 * basemul sums (up to 8 products of centred values) then stay within
 * montgomery_reduce's input range (see there).
 * Signed right shifts are arithmetic and conversions to int32 wrap mod 2^32, as
 * in GCC and Clang.
 */
#include <stdint.h>

#include "kg_params.h"

#if KG_N != (KG_D << KG_LAYERS)
#error "kg_params.h: KG_N must equal KG_D << KG_LAYERS"
#endif
#if KG_D != 1 && KG_D != 2 && KG_D != 4 && KG_D != 8
#error "kg_params.h: KG_D must be 1, 2, 4 or 8"
#endif
#if KG_Q >= (1L << 30) || KG_Q % 2 == 0
#error "kg_params.h: the baseline needs an odd q below 2^30"
#endif

_Static_assert(sizeof kg_zetas / sizeof kg_zetas[0] == (1u << KG_LAYERS), "kg_zetas size");
_Static_assert(sizeof kg_zetas_inv / sizeof kg_zetas_inv[0] == (1u << KG_LAYERS) - 1,
               "kg_zetas_inv size");
_Static_assert(sizeof kg_zetas_block / sizeof kg_zetas_block[0] == (1u << KG_LAYERS),
               "kg_zetas_block size");

void kg_baseline_ntt_forward(int32_t a[KG_N]);
void kg_baseline_ntt_inverse(int32_t a[KG_N]);
void kg_baseline_basemul(int32_t r[KG_N], const int32_t a[KG_N], const int32_t b[KG_N]);

/* a * R^-1 mod q: t = a q^-1 mod 2^32 lies in [-2^31, 2^31), so the result
 * (a - t q) / 2^32 has |r| <= (|a| + 2^31 q) / 2^32, which is < q for
 * |a| < 2^31 q and <= q for |a| < 2^31 (q + 2); a - t q stays inside int64
 * for |a| < 2^62 (every caller here passes |a| < 2^61) */
static inline int32_t montgomery_reduce(int64_t a)
{
    int32_t t = (int32_t)((uint32_t)a * (uint32_t)KG_QINV);
    return (int32_t)((a - (int64_t)t * KG_Q) >> 32);
}

/* |a b| <= 2^31 (q - 1) / 2 < 2^31 q for centred b (a twiddle): |r| < q */
static inline int32_t fqmul(int32_t a, int32_t b) { return montgomery_reduce((int64_t)a * b); }

/* a mod q in [-(q+1)/2, (q+1)/2] for any int32 a: the shift 30 + bitlen(q)
 * keeps v * a inside int64 (v < 2^31) and the quotient error below 1/q */
static inline int32_t barrett_reduce(int32_t a)
{
    int64_t t = ((int64_t)KG_BARRETT_V * a + ((int64_t)1 << (KG_BARRETT_SHIFT - 1))) >> KG_BARRETT_SHIFT;
    return (int32_t)(a - t * KG_Q);
}

void kg_baseline_ntt_forward(int32_t a[KG_N])
{
    /* |t| < q after every Montgomery product, so each layer adds < q to the
     * bound; the bound is a function of the layer alone, never of the data */
    int64_t bound = KG_Q;
    unsigned k = 1;
    for (unsigned len = KG_N / 2; len >= KG_D; len >>= 1) {
        if (bound + KG_Q > INT32_MAX) {
            for (unsigned j = 0; j < KG_N; j++)
                a[j] = barrett_reduce(a[j]);
            bound = (KG_Q + 1) / 2;
        }
        for (unsigned start = 0; start < KG_N; start += 2 * len) {
            int32_t zeta = kg_zetas[k++];
            for (unsigned j = start; j < start + len; j++) {
                int32_t t = fqmul(zeta, a[j + len]);
                a[j + len] = a[j] - t;
                a[j] = a[j] + t;
            }
        }
        bound += KG_Q;
    }
}

void kg_baseline_ntt_inverse(int32_t a[KG_N])
{
    /* values are below 2^30 in absolute value on input and below q after
     * each layer, so the sum and difference of two stay below 2^31 */
    unsigned k = 0;
    for (unsigned len = KG_D; len <= KG_N / 2; len <<= 1) {
        for (unsigned start = 0; start < KG_N; start += 2 * len) {
            int32_t zeta = kg_zetas_inv[k++];
            for (unsigned j = start; j < start + len; j++) {
                int32_t t = a[j];
                a[j] = barrett_reduce(t + a[j + len]);
                a[j + len] = fqmul(zeta, a[j + len] - t);
            }
        }
    }
    for (unsigned j = 0; j < KG_N; j++)
        a[j] = fqmul(a[j], KG_F);
}

void kg_baseline_basemul(int32_t r[KG_N], const int32_t a[KG_N], const int32_t b[KG_N])
{
    for (unsigned blk = 0; blk < KG_N / KG_D; blk++) {
        int32_t x[KG_D], y[KG_D];
        /* centred inputs keep a sum of d <= 8 products below
         * 2 (q + 1)^2 < 2^31 (q + 2) for q < 2^30, so Montgomery gives <= q */
        for (unsigned i = 0; i < KG_D; i++) {
            x[i] = barrett_reduce(a[blk * KG_D + i]);
            y[i] = barrett_reduce(b[blk * KG_D + i]);
        }
        /* x^(i+l) = zeta * x^(i+l-d) for i + l >= d; the wrapped part is
         * summed apart so it is multiplied by zeta once */
        int64_t low[KG_D] = {0}, wrap[KG_D] = {0};
        for (unsigned i = 0; i < KG_D; i++)
            for (unsigned l = 0; l < KG_D; l++) {
                if (i + l < KG_D)
                    low[i + l] += (int64_t)x[i] * y[l];
                else
                    wrap[i + l - KG_D] += (int64_t)x[i] * y[l];
            }
        for (unsigned k = 0; k < KG_D; k++) {
            int32_t w = fqmul(montgomery_reduce(wrap[k]), kg_zetas_block[blk]);
            r[blk * KG_D + k] = barrett_reduce(montgomery_reduce(low[k]) + w);
        }
    }
}
