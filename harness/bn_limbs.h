/* kerngen harness: an OpenSSL BIGNUM as little-endian 64-bit limbs, for the
 * OpenSSL comparisons (openssl_gf2m.c, ladder.c). */
#ifndef KG_BN_LIMBS_H
#define KG_BN_LIMBS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>

#define KG_BN_MAX_LIMBS 16

/* out[0 .. limbs-1] = r; aborts if r does not fit. BN_bn2lebinpad runs a
 * constant-time loop; BN_bn2bin and a byte reversal are cheaper. */
static inline void kg_bn_to_limbs(uint64_t *out, int limbs, const BIGNUM *r)
{
    unsigned char be[8 * KG_BN_MAX_LIMBS];
    int len = BN_num_bytes(r);
    unsigned char *o = (unsigned char *)out;
    if (limbs > KG_BN_MAX_LIMBS || len > 8 * limbs || BN_bn2bin(r, be) != len)
        abort();
    for (int i = 0; i < len; i++)
        o[i] = be[len - 1 - i];
    memset(o + len, 0, (size_t)(8 * limbs - len));
}

#endif
