/* kerngen demonstrator: scalar multiplication on a NIST binary curve with a
 * constant-time Montgomery ladder in López–Dahab x-only coordinates, built on
 * the emitted GF(2^m) kernels; OpenSSL's EC_POINT_mul beside it.
 *
 * Built once per curve with
 *   gcc -O2 -fPIC -shared -DKG_PREFIX=kg_gf2m233 -DKG_ISA=avx2 -DKG_LIMBS=4 \
 *       -DKG_CURVE=NID_sect233r1 ladder.c /path/to/gf2m-233.so -lcrypto
 * with KG_ISA the first of the bundle's ISAs this CPU runs and KG_HAVE_STEP2
 * defined where it runs the two-lane step too (kerngen chooses both, as the
 * CPU mask KERNGEN_CPU leaves the CPU).
 * OpenSSL is used only to read the curve's b, its order and generator once,
 * and for the comparison functions; the ladder itself calls only kernels:
 * one fused gf2m_ladder_step per scalar bit (conditional swap by mask,
 * differential addition and doubling in one straight-line kernel), then one
 * inversion and one product.
 *
 * Exports (limb arrays of KG_LIMBS little-endian uint64, out first):
 *   kg_ladder(out_x, k, x)       x(kP) for the point P with x-coordinate x;
 *                                k < 2^(order bits); 0 when kP is at infinity
 *   kg_ossl_ladder(out_x, k, x)  the same with EC_POINT_mul (P = the point
 *                                with that x and y-bit 0; x(kP) = x(-kP))
 *   kg_ladder_gen(out_x)         x of the curve's generator
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>

#include "bn_limbs.h"

#define N KG_LIMBS
#define KG_CAT3_(a, b, c) a##_##b##_##c
#define KG_CAT3(a, b, c) KG_CAT3_(a, b, c)
#define KG_K(op) KG_CAT3(KG_PREFIX, op, KG_ISA)

void KG_K(mul)(uint64_t *out, const uint64_t *a, const uint64_t *b);
void KG_K(sqr)(uint64_t *out, const uint64_t *a);
void KG_K(muladd)(uint64_t *out, const uint64_t *a, const uint64_t *b, const uint64_t *c,
                  const uint64_t *d);
void KG_K(inv)(uint64_t *out, const uint64_t *a);
typedef void kg_step_fn(uint64_t *out, const uint64_t *st, const uint64_t *x, const uint64_t *c,
                        const uint64_t *swap);
kg_step_fn KG_K(ladder_step);
#ifdef KG_HAVE_STEP2 /* defined where this CPU runs it */
kg_step_fn KG_K(ladder_step2); /* two field operations per ymm; needs VPCLMULQDQ */
static kg_step_fn *const ladder_step = KG_K(ladder_step2);
#else
static kg_step_fn *const ladder_step = KG_K(ladder_step);
#endif

static EC_GROUP *grp;
static BN_CTX *ctx;
static uint64_t curve_b[N], curve_sqrt_b[N];
static int order_bits;

static void init(void)
{
    if (grp)
        return;
    BIGNUM *p = BN_new(), *a = BN_new(), *b = BN_new();
    ctx = BN_CTX_new();
    grp = EC_GROUP_new_by_curve_name(KG_CURVE);
    if (!p || !a || !b || !ctx || !grp || !EC_GROUP_get_curve(grp, p, a, b, ctx))
        abort();
    kg_bn_to_limbs(curve_b, N, b);
    order_bits = EC_GROUP_order_bits(grp);
    /* sqrt(b) = b^(2^(m-1)): the step computes X0^4 + b Z0^4 as
     * (X0^2 + sqrt(b) Z0^2)^2, one product fewer */
    memcpy(curve_sqrt_b, curve_b, sizeof curve_b);
    for (int i = 1; i < EC_GROUP_get_degree(grp); i++)
        KG_K(sqr)(curve_sqrt_b, curve_sqrt_b);
    BN_free(p);
    BN_free(a);
    BN_free(b);
}

/* Swaps (x, y) when mask is all ones, leaves them when it is zero. */
static void cswap(uint64_t *x, uint64_t *y, uint64_t mask)
{
    for (int i = 0; i < N; i++) {
        uint64_t t = mask & (x[i] ^ y[i]);
        x[i] ^= t;
        y[i] ^= t;
    }
}

void kg_ladder(uint64_t *out, const uint64_t *k, const uint64_t *x)
{
    init();
    /* st = (X0, Z0, X1, Z1): R0 = infinity (1 : 0), R1 = P (x : 1);
     * R1 - R0 = P throughout */
    uint64_t st[4 * N] = {0}, t[N];
    uint64_t prev = 0, mask;
    st[0] = 1;
    memcpy(st + 2 * N, x, 8 * N);
    st[3 * N] = 1;
    for (int i = order_bits - 1; i >= 0; i--) {
        uint64_t bit = (k[i / 64] >> (i % 64)) & 1;
        mask = (uint64_t)0 - (bit ^ prev); /* swap only when the bit changes */
        prev = bit;
        ladder_step(st, st, x, curve_sqrt_b, &mask);
    }
    mask = (uint64_t)0 - prev;
    cswap(st, st + 2 * N, mask);
    cswap(st + N, st + 3 * N, mask);
    KG_K(inv)(t, st + N); /* 0 at infinity, and then so is the product */
    KG_K(mul)(out, st, t);
}

/* The comparison converts its inputs once per distinct value, as a caller
 * keeping BIGNUMs and points would; the point decompression is part of it. */
static uint64_t seen_x[N], seen_k[N];
static int seen_valid;
static EC_POINT *pt, *res;
static BIGNUM *bk, *bx, *rx, *ry;

void kg_ossl_ladder(uint64_t *out, const uint64_t *k, const uint64_t *x)
{
    init();
    if (!pt) {
        pt = EC_POINT_new(grp);
        res = EC_POINT_new(grp);
        bk = BN_new();
        bx = BN_new();
        rx = BN_new();
        ry = BN_new();
        if (!pt || !res || !bk || !bx || !rx || !ry)
            abort();
    }
    if (!seen_valid || memcmp(seen_x, x, sizeof seen_x) || memcmp(seen_k, k, sizeof seen_k)) {
        if (!BN_lebin2bn((const unsigned char *)x, 8 * N, bx) ||
            !BN_lebin2bn((const unsigned char *)k, 8 * N, bk) ||
            !EC_POINT_set_compressed_coordinates(grp, pt, bx, 0, ctx))
            abort();
        memcpy(seen_x, x, sizeof seen_x);
        memcpy(seen_k, k, sizeof seen_k);
        seen_valid = 1;
    }
    if (!EC_POINT_mul(grp, res, NULL, pt, bk, ctx))
        abort();
    if (EC_POINT_is_at_infinity(grp, res)) {
        memset(out, 0, 8 * N);
        return;
    }
    if (!EC_POINT_get_affine_coordinates(grp, res, rx, ry, ctx))
        abort();
    kg_bn_to_limbs(out, N, rx);
}

void kg_ladder_gen(uint64_t *out)
{
    init();
    BIGNUM *gx = BN_new(), *gy = BN_new();
    if (!gx || !gy || !EC_POINT_get_affine_coordinates(grp, EC_GROUP_get0_generator(grp), gx, gy, ctx))
        abort();
    kg_bn_to_limbs(out, N, gx);
    BN_free(gx);
    BN_free(gy);
}
