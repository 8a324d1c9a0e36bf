/* kerngen test harness: one kernel called on many inputs, binary in and out.
 *
 *   kg_batch LIB.so SYMBOL RECORDS IN.bin OUT.bin ROLE:ELEM_BYTES:COUNT:ALIGN...
 *
 * One ROLE:ELEM_BYTES:COUNT:ALIGN word per argument, in C order (role in,
 * out or inout). IN.bin holds RECORDS records, each the bytes of every in and
 * inout argument in argument order (little-endian elements); OUT.bin receives
 * RECORDS records, each the bytes of every out and inout argument after the
 * call. Every call goes through the checked-call stub; buffers sit at exactly
 * their declared alignment between canaries, out buffers are filled with a
 * random pattern first, and in buffers must come back unchanged.
 *
 * Basis-vector proofs use this: thousands of calls whose inputs and outputs
 * would be slow as text. The runner knows nothing of the mathematics.
 *
 * Exit status: 0 when every record ran cleanly; 3 when a call broke the ABI
 * or its buffers (stdout: "record <k> abi|canary|inmod <details>"); 2 for bad
 * usage, a missing library or symbol, or a short input file; 1 for other
 * failures.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_check.h"
#include "vectors.h"

static int parse_arg(const char *word, struct kg_arg *a)
{
    char role[8];
    unsigned elem;
    size_t count, align;
    if (sscanf(word, "%7[a-z]:%u:%zu:%zu", role, &elem, &count, &align) != 4 || kg_parse_role(role, &a->role) ||
        !(elem == 1 || elem == 2 || elem == 4 || elem == 8) || count < 1 || align < 1 || align > KG_MAX_ALIGN ||
        (align & (align - 1)))
        return -1;
    a->elem_bytes = elem;
    a->count = count;
    a->align = align;
    a->data = NULL;
    a->alias_of = -1;
    return 0;
}

int main(int argc, char **argv)
{
    kg_abi_init();
    if (argc < 7) {
        fputs("usage: kg_batch LIB.so SYMBOL RECORDS IN.bin OUT.bin ROLE:ELEM_BYTES:COUNT:ALIGN...\n", stderr);
        return 2;
    }
    unsigned nargs = (unsigned)(argc - 6);
    if (nargs > KG_MAX_ARGS) {
        fputs("kg_batch: at most 5 arguments\n", stderr);
        return 2;
    }
    struct kg_case c = {.id = "batch", .symbol = argv[2], .nargs = nargs};
    for (unsigned i = 0; i < nargs; i++)
        if (parse_arg(argv[6 + i], &c.args[i])) {
            fprintf(stderr, "kg_batch: bad argument word %s\n", argv[6 + i]);
            return 2;
        }
    long records = strtol(argv[3], NULL, 10);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "kg_batch: %s\n", dlerror());
        return 2;
    }
    c.fn = dlsym(lib, argv[2]);
    if (!c.fn) {
        fprintf(stderr, "kg_batch: symbol %s not found in %s\n", argv[2], argv[1]);
        return 2;
    }
    FILE *in = fopen(argv[4], "rb"), *out = fopen(argv[5], "wb");
    if (!in || !out) {
        perror(!in ? argv[4] : argv[5]);
        return 1;
    }
    kg_rng_seed(kg_seed_from_env());
    for (unsigned i = 0; i < nargs; i++)
        if (c.args[i].role != KG_OUT && !(c.args[i].data = malloc(c.args[i].count * c.args[i].elem_bytes))) {
            fputs("kg_batch: out of memory\n", stderr);
            return 1;
        }
    struct kg_case_bufs cb;
    if (kg_case_bufs_alloc(&c, &cb)) {
        fputs("kg_batch: out of memory\n", stderr);
        return 1;
    }
    for (long k = 0; k < records; k++) {
        for (unsigned i = 0; i < nargs; i++) {
            struct kg_arg *a = &c.args[i];
            if (a->role != KG_OUT && fread(a->data, a->elem_bytes, a->count, in) != a->count) {
                fprintf(stderr, "kg_batch: %s ends before record %ld\n", argv[4], k);
                return 2;
            }
            if (a->role == KG_OUT) /* a kernel that leaves an output unwritten shows it */
                kg_rand_fill(cb.bufs[i].ptr, a->count * a->elem_bytes);
        }
        kg_case_bufs_reload(&c, &cb);
        for (unsigned r = 0; r < 6; r++)
            kg_abi_seed[r] = kg_rand64();
        uint64_t mask = kg_checked_call(c.fn, cb.argv[0], cb.argv[1], cb.argv[2], cb.argv[3], cb.argv[4]);
        if (mask) {
            printf("record %ld abi", k);
            for (unsigned bit = 0; bit < 64; bit++)
                if (mask >> bit & 1)
                    printf(" %s", kg_abi_bit_name(bit));
            putchar('\n');
            return 3;
        }
        for (unsigned j = 0; j < nargs; j++) {
            if (!kg_buf_canary_ok(&cb.bufs[j])) {
                printf("record %ld canary %u\n", k, j);
                return 3;
            }
            if (c.args[j].role == KG_IN && memcmp(cb.bufs[j].ptr, c.args[j].data, c.args[j].count * c.args[j].elem_bytes)) {
                printf("record %ld inmod %u\n", k, j);
                return 3;
            }
        }
        for (unsigned i = 0; i < nargs; i++)
            if (c.args[i].role != KG_IN &&
                fwrite(cb.bufs[i].ptr, c.args[i].elem_bytes, c.args[i].count, out) != c.args[i].count) {
                perror(argv[5]);
                return 1;
            }
    }
    kg_case_bufs_free(&c, &cb);
    if (fclose(out)) {
        perror(argv[5]);
        return 1;
    }
    fclose(in);
    return 0;
}
