/* kerngen harness: plain C baseline for the NTT kernels, on 16-, 32- or 64-bit lanes.
 *
 * The yardstick that `kerngen bench` sets the emitted kernels against: the
 * straightforward portable code a user would otherwise write (loops, signed
 * Montgomery arithmetic with R = 2^W and products twice as wide, in the style
 * of the Kyber and Dilithium reference C code), built with -O3 -march=native
 * so the compiler may vectorise it. Its array order is its own and need not
 * match the emitted kernels; only the round trip forward -> basemul ->
 * inverse is a contract (the negacyclic product mod q in natural order),
 * which tests/test_harness.py checks against SymPy.
 *
 * The lane width and everything else come from kg_params.h, written per
 * parameter set by kerngen.families.ntt.baseline.header():
 *   kg_lane, kg_ulane  the lane's signed and unsigned W-bit types (W = KG_LANE_BITS)
 *   kg_wide            the signed 2W-bit type of products and sums of products
 *                      (__int128 for W = 64, a GCC and Clang extension on x86-64)
 *   KG_LANE_MAX        the largest kg_lane; KG_Q_BITS: q < 2^KG_Q_BITS
 *   KG_N, KG_Q, KG_LAYERS (L), KG_D (= N >> L, block degree 1, 2, 4 or 8)
 *   KG_QINV           q^-1 mod 2^W as kg_lane
 *   KG_BARRETT_V, KG_BARRETT_SHIFT   v = round(2^shift / q), shift = (W - 2) + bitlen(q)
 *   KG_F              R^2 / 2^L mod q, centred: final inverse scaling
 *   kg_zetas[2^L]         R * zeta^brv_L(i) mod q, centred; zeta a primitive
 *                         2^(L+1)-th root of unity; forward reads 1 .. 2^L - 1
 *   kg_zetas_inv[2^L - 1] R * (-zeta^-brv_L(k)) mod q for the forward index k
 *                         that each inverse butterfly group undoes, in the
 *                         order the inverse reads them
 *   kg_zetas_block[2^L]   R * zeta^(2 brv_L(j) + 1) mod q: block j of the
 *                         forward output is a mod (x^d - zeta^(2 brv_L(j) + 1))
 *
 * Contracts (q odd, q < 2^(W-2): 2^14 for W = 16, 2^30 for W = 32, 2^62 for
 * W = 64):
 *   forward: |a[i]| < q in; any kg_lane out (Barrett passes are inserted
 *            between layers wherever the growth of q per layer would leave
 *            the lane).
 *   basemul: any kg_lane in; |r[i]| <= (q + 1) / 2 out, times R^-1. r may
 *            alias a or b.
 *   inverse: |a[i]| < 2^(W-2) in; |a[i]| < q out: R times the inverse
 *            transform (the L Gentleman-Sande layers give 2^L times it, KG_F
 *            turns that into R), which cancels basemul's R^-1 and leaves
 *            a * b mod q.
 * Why q < 2^(W-2): sums and differences of two values below 2^(W-2) or q
 * stay in the lane, and a basemul sum of up to 8 products of centred values
 * (at most 8 ((q + 1) / 2)^2 = 2 (q + 1)^2; q = 1 mod 4 as the NTT needs,
 * so q <= 2^(W-2) - 3) stays below 2^(W-1) q, where montgomery_reduce
 * returns |r| <= q. For W = 64 that is below 2^125: inside __int128.
 * C computes lane sums in int, which is wider than the lane only for W = 16:
 * on 32- and 64-bit lanes an overflow would be undefined, so there these
 * bounds keep the arithmetic defined, not just correct.
 * Signed right shifts are arithmetic and conversions to a narrower signed
 * type wrap, as in GCC and Clang.
 */
#include <stdint.h>

#include "kg_params.h"

#if KG_N != (KG_D << KG_LAYERS)
#error "kg_params.h: KG_N must equal KG_D << KG_LAYERS"
#endif
#if KG_D != 1 && KG_D != 2 && KG_D != 4 && KG_D != 8
#error "kg_params.h: KG_D must be 1, 2, 4 or 8"
#endif
#if KG_Q_BITS > KG_LANE_BITS - 2
#error "kg_params.h: the contracts below need q < 2^(W-2)"
#endif
/* #if arithmetic is in intmax_t (64 bits), which holds 1 << 62 */
#if KG_Q >= (1LL << KG_Q_BITS) || KG_Q % 2 == 0
#error "kg_params.h: the baseline needs an odd q below 2^KG_Q_BITS"
#endif

_Static_assert(sizeof kg_zetas / sizeof kg_zetas[0] == (1u << KG_LAYERS), "kg_zetas size");
_Static_assert(sizeof kg_zetas_inv / sizeof kg_zetas_inv[0] == (1u << KG_LAYERS) - 1,
               "kg_zetas_inv size");
_Static_assert(sizeof kg_zetas_block / sizeof kg_zetas_block[0] == (1u << KG_LAYERS),
               "kg_zetas_block size");

void kg_baseline_ntt_forward(kg_lane a[KG_N]);
void kg_baseline_ntt_inverse(kg_lane a[KG_N]);
void kg_baseline_basemul(kg_lane r[KG_N], const kg_lane a[KG_N], const kg_lane b[KG_N]);

/* a * R^-1 mod q: t = a q^-1 mod R is a kg_lane, so (a - t q) / R has
 * |r| <= (|a| + 2^(W-1) q) / R: below q for |a| < 2^(W-1) q. The low product
 * is taken unsigned (no signed overflow) and wrapped back to the lane: in
 * uint64_t, so that 16-bit lanes are not promoted to a signed int product,
 * and 64-bit lanes need no 128-bit product for the low half. a - t q is exact
 * in kg_wide (|t q| < 2^(2W-3)) and divisible by R, so the shift is exact. */
static inline kg_lane montgomery_reduce(kg_wide a)
{
    kg_lane t = (kg_lane)(kg_ulane)((kg_ulane)a * (uint64_t)(kg_ulane)KG_QINV);
    return (kg_lane)((a - (kg_wide)t * KG_Q) >> KG_LANE_BITS);
}

/* |a b| <= 2^(W-1) (q - 1) / 2 for centred b (a twiddle): |r| < q */
static inline kg_lane fqmul(kg_lane a, kg_lane b) { return montgomery_reduce((kg_wide)a * b); }

/* a mod q in [-(q+1)/2, (q+1)/2] for any kg_lane a: the shift keeps v * a
 * inside kg_wide and the quotient error below 1/q */
static inline kg_lane barrett_reduce(kg_lane a)
{
    kg_wide t = ((kg_wide)KG_BARRETT_V * a + ((kg_wide)1 << (KG_BARRETT_SHIFT - 1))) >> KG_BARRETT_SHIFT;
    return (kg_lane)(a - t * KG_Q);
}

void kg_baseline_ntt_forward(kg_lane a[KG_N])
{
    /* |t| < q after every Montgomery product, so each layer adds < q to the
     * bound; the bound is a function of the layer alone, never of the data */
    kg_wide bound = KG_Q;
    unsigned k = 1;
    for (unsigned len = KG_N / 2; len >= KG_D; len >>= 1) {
        if (bound + KG_Q > KG_LANE_MAX) {
            for (unsigned j = 0; j < KG_N; j++)
                a[j] = barrett_reduce(a[j]);
            bound = (KG_Q + 1) / 2;
        }
        for (unsigned start = 0; start < KG_N; start += 2 * len) {
            kg_lane zeta = kg_zetas[k++];
            for (unsigned j = start; j < start + len; j++) {
                kg_lane t = fqmul(zeta, a[j + len]);
                a[j + len] = (kg_lane)(a[j] - t);
                a[j] = (kg_lane)(a[j] + t);
            }
        }
        bound += KG_Q;
    }
}

void kg_baseline_ntt_inverse(kg_lane a[KG_N])
{
    /* values are below 2^(W-2) on input and below q after each layer, so the
     * sum and difference of two stay in the lane */
    unsigned k = 0;
    for (unsigned len = KG_D; len <= KG_N / 2; len <<= 1) {
        for (unsigned start = 0; start < KG_N; start += 2 * len) {
            kg_lane zeta = kg_zetas_inv[k++];
            for (unsigned j = start; j < start + len; j++) {
                kg_lane t = a[j];
                a[j] = barrett_reduce((kg_lane)(t + a[j + len]));
                a[j + len] = fqmul(zeta, (kg_lane)(a[j + len] - t));
            }
        }
    }
    for (unsigned j = 0; j < KG_N; j++)
        a[j] = fqmul(a[j], KG_F);
}

void kg_baseline_basemul(kg_lane r[KG_N], const kg_lane a[KG_N], const kg_lane b[KG_N])
{
    for (unsigned blk = 0; blk < KG_N / KG_D; blk++) {
        kg_lane x[KG_D], y[KG_D];
        /* centred inputs keep a sum of d <= 8 products below 2^(W-1) q */
        for (unsigned i = 0; i < KG_D; i++) {
            x[i] = barrett_reduce(a[blk * KG_D + i]);
            y[i] = barrett_reduce(b[blk * KG_D + i]);
        }
        /* x^(i+l) = zeta * x^(i+l-d) for i + l >= d; the wrapped part is
         * summed apart so it is multiplied by zeta once */
        kg_wide low[KG_D] = {0}, wrap[KG_D] = {0};
        for (unsigned i = 0; i < KG_D; i++)
            for (unsigned l = 0; l < KG_D; l++) {
                if (i + l < KG_D)
                    low[i + l] += (kg_wide)x[i] * y[l];
                else
                    wrap[i + l - KG_D] += (kg_wide)x[i] * y[l];
            }
        for (unsigned k = 0; k < KG_D; k++) {
            kg_lane w = fqmul(montgomery_reduce(wrap[k]), kg_zetas_block[blk]);
            r[blk * KG_D + k] = barrett_reduce((kg_lane)(montgomery_reduce(low[k]) + w));
        }
    }
}
