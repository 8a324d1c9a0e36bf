/* What a caller without a fused kernel runs for r = a_0*b_0 + ... + a_{k-1}*b_{k-1}
 * in the NTT domain: k base multiplications and k - 1 polynomial additions
 * (a loop the compiler vectorises at -O3 -march=native), timed beside the fused
 * basemul_acc kernel of the same bundle. kg_acc.h (generated) names the base
 * multiplication (KG_BASEMUL), the degree (KG_N) and k (KG_K). Sums wrap as
 * uint16: only the time matters here. */
#include <stdint.h>

#include "kg_acc.h"

void KG_BASEMUL(int16_t *r, const int16_t *a, const int16_t *b);

void kg_calls_basemul_acc(int16_t *r, const int16_t *a, const int16_t *b)
{
    static int16_t t[KG_N] __attribute__((aligned(64)));
    KG_BASEMUL(r, a, b);
    for (int i = 1; i < KG_K; i++) {
        KG_BASEMUL(t, a + i * KG_N, b + i * KG_N);
        for (int j = 0; j < KG_N; j++)
            r[j] = (int16_t)((uint16_t)r[j] + (uint16_t)t[j]);
    }
}
