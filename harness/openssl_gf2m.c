/* kerngen bench: OpenSSL's GF(2^m) arithmetic behind the kernels' signatures.
 *
 * Built once per field with
 *   gcc -O2 -fPIC -shared -DKG_M=233 -DKG_LIMBS=4 -DKG_POLY=233,74,0 \
 *       openssl_gf2m.c -o openssl_gf2m-233.so -lcrypto
 * Every function takes little-endian uint64 limb arrays like the kernels
 * (out first); see to_bn for what the figures include. kg_ossl_copy does only
 * the compare and the result conversion: the part of every other figure that
 * is not OpenSSL's arithmetic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>

#ifndef KG_M
#error "define KG_M, KG_LIMBS and KG_POLY"
#endif

static const int kg_poly[] = {KG_POLY, -1};

static BN_CTX *ctx;
static BIGNUM *ba, *bb, *bc, *bd, *br, *bt, *bp;

static void kg_init(void)
{
    if (ctx)
        return;
    ctx = BN_CTX_new();
    ba = BN_new();
    bb = BN_new();
    bc = BN_new();
    bd = BN_new();
    br = BN_new();
    bt = BN_new();
    bp = BN_new();
    if (!ctx || !ba || !bb || !bc || !bd || !br || !bt || !bp || !BN_GF2m_arr2poly(kg_poly, bp))
        abort();
}

/* The bench calls a function many times on the same inputs; converting them
 * again each time would charge OpenSSL for work its callers do not repeat
 * (their operands stay BIGNUMs). So inputs are converted only when their
 * bytes change: the figures are OpenSSL's arithmetic plus a compare and the
 * conversion of the result, which kg_ossl_copy measures alone. */
static struct {
    const BIGNUM *bn;
    uint64_t words[2 * KG_LIMBS];
    int limbs;
} kg_seen[4];

static void to_bn(BIGNUM *r, const uint64_t *x, int limbs)
{
    int slot = r == ba ? 0 : r == bb ? 1 : r == bc ? 2 : r == bd ? 3 : -1;
    if (slot >= 0 && kg_seen[slot].bn == r && kg_seen[slot].limbs == limbs &&
        memcmp(kg_seen[slot].words, x, 8 * (size_t)limbs) == 0)
        return;
    if (!BN_lebin2bn((const unsigned char *)x, 8 * limbs, r))
        abort();
    if (slot >= 0) {
        kg_seen[slot].bn = r;
        kg_seen[slot].limbs = limbs;
        memcpy(kg_seen[slot].words, x, 8 * (size_t)limbs);
    }
}

static void from_bn(uint64_t *out, const BIGNUM *r, int limbs)
{
    /* BN_bn2lebinpad runs a constant-time loop that costs more than most of
     * the arithmetic timed here; BN_bn2bin and a byte reversal are cheaper */
    unsigned char be[16 * KG_LIMBS];
    int len = BN_num_bytes(r);
    unsigned char *o = (unsigned char *)out;
    if (len > 8 * limbs || BN_bn2bin(r, be) != len)
        abort();
    for (int i = 0; i < len; i++)
        o[i] = be[len - 1 - i];
    memset(o + len, 0, (size_t)(8 * limbs - len));
}

void kg_ossl_copy(uint64_t *out, const uint64_t *a)
{
    kg_init();
    to_bn(ba, a, KG_LIMBS);
    from_bn(out, ba, KG_LIMBS);
}

void kg_ossl_mul(uint64_t *out, const uint64_t *a, const uint64_t *b)
{
    kg_init();
    to_bn(ba, a, KG_LIMBS);
    to_bn(bb, b, KG_LIMBS);
    if (!BN_GF2m_mod_mul_arr(br, ba, bb, kg_poly, ctx))
        abort();
    from_bn(out, br, KG_LIMBS);
}

void kg_ossl_sqr(uint64_t *out, const uint64_t *a)
{
    kg_init();
    to_bn(ba, a, KG_LIMBS);
    if (!BN_GF2m_mod_sqr_arr(br, ba, kg_poly, ctx))
        abort();
    from_bn(out, br, KG_LIMBS);
}

#define KG_MSQR(k)                                                    \
    void kg_ossl_msqr##k(uint64_t *out, const uint64_t *a)            \
    {                                                                 \
        kg_init();                                                    \
        to_bn(ba, a, KG_LIMBS);                                       \
        if (!BN_copy(br, ba))                                         \
            abort();                                                  \
        for (int i = 0; i < (k); i++)                                 \
            if (!BN_GF2m_mod_sqr_arr(br, br, kg_poly, ctx))           \
                abort();                                              \
        from_bn(out, br, KG_LIMBS);                                   \
    }
KG_MSQR(2)
KG_MSQR(4)
KG_MSQR(8)
KG_MSQR(16)

void kg_ossl_reduce(uint64_t *out, const uint64_t *c)
{
    kg_init();
    to_bn(ba, c, 2 * KG_LIMBS);
    if (!BN_GF2m_mod_arr(br, ba, kg_poly))
        abort();
    from_bn(out, br, KG_LIMBS);
}

void kg_ossl_mulwide(uint64_t *out, const uint64_t *a, const uint64_t *b)
{
    /* OpenSSL has no public unreduced product; the nearest is the reduced one */
    uint64_t r[KG_LIMBS];
    kg_ossl_mul(r, a, b);
    memset(out, 0, 16 * KG_LIMBS);
    memcpy(out, r, sizeof r);
}

void kg_ossl_muladd(uint64_t *out, const uint64_t *a, const uint64_t *b, const uint64_t *c,
                    const uint64_t *d)
{
    kg_init();
    to_bn(ba, a, KG_LIMBS);
    to_bn(bb, b, KG_LIMBS);
    to_bn(bc, c, KG_LIMBS);
    to_bn(bd, d, KG_LIMBS);
    if (!BN_GF2m_mod_mul_arr(br, ba, bb, kg_poly, ctx) ||
        !BN_GF2m_mod_mul_arr(bt, bc, bd, kg_poly, ctx) || !BN_GF2m_add(br, br, bt))
        abort();
    from_bn(out, br, KG_LIMBS);
}

void kg_ossl_inv(uint64_t *out, const uint64_t *a)
{
    kg_init();
    to_bn(ba, a, KG_LIMBS);
    if (BN_is_zero(ba)) {
        memset(out, 0, 8 * KG_LIMBS);
        return;
    }
    if (!BN_GF2m_mod_inv(br, ba, bp, ctx))
        abort();
    from_bn(out, br, KG_LIMBS);
}
