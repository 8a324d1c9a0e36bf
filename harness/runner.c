/* kerngen test harness: data-driven runner.
 *
 *   kg_runner LIB.so [LIB.so ...] VECTORS.txt OUTPUT.txt
 *   kg_runner --caps
 *
 * Runs every case of VECTORS.txt (format in vectors.h) once, through the
 * checked-call stub, and writes OUTPUT.txt. The runner knows nothing of the
 * mathematics: it places the buffers, calls, checks the ABI and the memory
 * discipline, and prints what the kernel wrote; the Python side judges the
 * values.
 *
 * Output file ('#' lines are comments):
 *
 *   # kg_runner seed <seed> avx <0|1> xinuse <0|1>
 *   case <case_id> ok
 *   case <case_id> abi <reason words>    e.g. "abi rbx r15", "abi ymm-upper"
 *   case <case_id> canary <arg index>    bytes before/after that buffer changed
 *   case <case_id> inmod <arg index>     an "in" buffer was written
 *   out <arg index> <values...>          one line per out/inout argument
 *
 * When several problems occur, only the first of abi, canary, inmod is named.
 * Reason words: rbx rbp r12 r13 r14 r15 rsp ymm-upper direction-flag.
 * "ymm-upper" is only detectable when the CPU reports XINUSE (see --caps,
 * which prints "avx 0|1" and "xinuse 0|1").
 *
 * Each case's lines are flushed before the next case runs, so when a kernel
 * crashes the runner the output names every case that completed.
 * $KG_SEED fixes the random canaries, fill patterns and register seeds.
 *
 * Exit status: 0 when the output was written (whatever the verdicts),
 * 2 for a malformed vector file, a missing library or symbol, or bad usage,
 * 1 for other failures (memory, output file).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include "abi_check_win64.h"
#include "win64.h"
#else
#include "abi_check.h"
#endif
#include "vectors.h"

static int shared_with_writer(const struct kg_case *c, unsigned j)
{
    for (unsigned i = 0; i < c->nargs; i++)
        if (kg_owner(c, i) == j && c->args[i].role != KG_IN)
            return 1;
    return 0;
}

static int run_case(const struct kg_case *c, FILE *out)
{
    struct kg_case_bufs cb;
    if (kg_case_bufs_alloc(c, &cb)) {
        fprintf(stderr, "case %s: out of memory\n", c->id);
        return -1;
    }
#ifdef _WIN32
    for (unsigned r = 0; r < KG_ABI_NSEEDS; r++)
#else
    for (unsigned r = 0; r < 6; r++)
#endif
        kg_abi_seed[r] = kg_rand64();

    uint64_t mask = kg_checked_call(c->fn, cb.argv[0], cb.argv[1], cb.argv[2], cb.argv[3],
                                    cb.argv[4]);

    fprintf(out, "case %s ", c->id);
    int reported = 0;
    if (mask) {
        fputs("abi", out);
        for (unsigned bit = 0; bit < 64; bit++)
            if (mask >> bit & 1)
                fprintf(out, " %s", kg_abi_bit_name(bit));
        reported = 1;
    }
    for (unsigned j = 0; j < c->nargs && !reported; j++)
        if (c->args[j].alias_of < 0 && !kg_buf_canary_ok(&cb.bufs[j])) {
            fprintf(out, "canary %u", j);
            reported = 1;
        }
    for (unsigned j = 0; j < c->nargs && !reported; j++) {
        const struct kg_arg *a = &c->args[j];
        if (a->alias_of < 0 && a->role == KG_IN && !shared_with_writer(c, j) &&
            memcmp(cb.bufs[j].ptr, a->data, a->count * a->elem_bytes)) {
            fprintf(out, "inmod %u", j);
            reported = 1;
        }
    }
    if (!reported)
        fputs("ok", out);
    fputc('\n', out);

    for (unsigned i = 0; i < c->nargs; i++) {
        const struct kg_arg *a = &c->args[i];
        if (a->role == KG_IN)
            continue;
        fprintf(out, "out %u", i);
        kg_print_elems(out, cb.bufs[kg_owner(c, i)].ptr, a->elem_bytes, a->count);
        fputc('\n', out);
    }
    kg_case_bufs_free(c, &cb);
    return fflush(out) ? -1 : 0;
}

static void usage(void)
{
    fputs("usage: kg_runner LIB.so [LIB.so ...] VECTORS.txt OUTPUT.txt\n"
          "       kg_runner --caps\n",
          stderr);
}

int main(int argc, char **argv)
{
#ifdef _WIN32
    kg_win64_init();
#endif
    unsigned flags = kg_abi_init();
    if (argc == 2 && !strcmp(argv[1], "--caps")) {
        printf("avx %d\nxinuse %d\n", !!(flags & KG_ABI_HAVE_AVX),
               !!(flags & KG_ABI_HAVE_XINUSE));
        return 0;
    }
    if (argc < 4 || argv[1][0] == '-') {
        usage();
        return 2;
    }
    unsigned nlibs = (unsigned)(argc - 3);
    const char *vectors = argv[argc - 2], *output = argv[argc - 1];

    uint64_t seed = kg_seed_from_env();
    kg_rng_seed(seed);

    struct kg_caseset set;
    if (kg_parse_vectors(vectors, &set))
        return 2;
    void **handles = calloc(nlibs, sizeof *handles);
    if (!handles || kg_resolve_symbols(&set, argv + 1, nlibs, handles))
        return 2;

    FILE *out = fopen(output, "w");
    if (!out) {
        perror(output);
        return 1;
    }
    fprintf(out, "# kg_runner seed %llu avx %d xinuse %d\n", (unsigned long long)seed,
            !!(flags & KG_ABI_HAVE_AVX), !!(flags & KG_ABI_HAVE_XINUSE));
    for (size_t k = 0; k < set.n; k++)
        if (run_case(&set.cases[k], out)) {
            perror(output);
            return 1;
        }
    if (fclose(out)) {
        perror(output);
        return 1;
    }
    kg_free_cases(&set);
    free(handles);
    return 0;
}
