/* kerngen test harness: cycle counter.
 *
 *   kg_bench [options] -v VECTORS.txt LIB.so [LIB.so ...]     batch mode
 *   kg_bench [options] LIB.so SYMBOL ARGSPEC...               one symbol
 *
 * Batch mode times every case of VECTORS.txt (format in vectors.h; the data
 * lines supply valid inputs). A case's symbol "K:name" is taken from the K-th
 * library on the command line (0-based, default 0), so kernels and their
 * baselines from different shared objects are timed in one run.
 *
 * One-symbol mode describes the arguments on the command line, each as
 *   ROLE:ELEM_BYTES:COUNT:ALIGN[:LO:HI]      e.g. inout:2:256:32:-3328:3328
 * filled with uniform random values in [LO, HI], or random bits without them.
 *
 * Options:
 *   -b N   batches per case (default 101)
 *   -t T   minimum ticks per batch (default 2000): the TSC advances in steps of
 *          about 24 ticks here, so one call of a small kernel cannot be timed;
 *          K back-to-back calls are, with K doubled until a batch lasts T ticks
 *   -k K   fixed calls per batch instead of the calibration above
 *   -w T   warm-up ticks per case before calibration (default 2000000), to
 *          let the core leave its idle clock and fill the caches
 *
 * Method: after warm-up and calibration, the cases are run round-robin, one
 * batch each per round (A B C A B C ...), so every case sees the same machine
 * noise and ratios between them are meaningful. A batch is timed as
 * "lfence; rdtsc; lfence" ... "rdtscp; lfence" around K direct calls; its
 * per-call figure is ticks / K. The thread is pinned to the CPU it started
 * on. Ticks include the call and loop overhead (a few cycles).
 *
 * Inputs are copied back into the in/inout buffers before each batch, not
 * before each call: within a batch an in-place kernel (an NTT) runs on its
 * own previous output, whose values may grow and even wrap. Constant-time,
 * straight-line kernels take the same time on any values, so this does not
 * bias them; a C baseline whose running time depends on the data could be
 * timed on atypical values, which matters only for non-constant-time code.
 *
 * Output on stdout, one line per case ('#' lines are comments):
 *   bench <case_id> <symbol> <median_ticks_per_call> <min_ticks_per_call> <batches> <calls_per_batch>
 *
 * Exit status: 0 on success, 2 for bad usage, a malformed vector file or a
 * missing library or symbol, 1 when a kernel wrote outside its buffers.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vectors.h"

typedef void (*kg_fn5)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

static int have_rdtscp;

static inline uint64_t tsc_begin(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}

static inline uint64_t tsc_end(void)
{
    uint32_t lo, hi, aux;
    if (have_rdtscp)
        __asm__ volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    else
        __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}

static uint64_t time_batch(void *fn, const uint64_t *a, uint64_t k)
{
    kg_fn5 f;
    memcpy(&f, &fn, sizeof f); /* dlsym hands out data pointers; ISO C has no direct cast */
    uint64_t t0 = tsc_begin();
    for (uint64_t i = 0; i < k; i++)
        f(a[0], a[1], a[2], a[3], a[4]);
    return tsc_end() - t0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-')
        return -1;
    *v = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

/* ROLE:ELEM:COUNT:ALIGN[:LO:HI] */
static int parse_argspec(const char *spec, struct kg_arg *a)
{
    char role[8];
    unsigned eb;
    size_t count, align;
    long long lo, hi;
    int used = 0;
    int n = sscanf(spec, "%7[a-z]:%u:%zu:%zu%n", role, &eb, &count, &align, &used);
    if (n != 4)
        return -1;
    int ranged = 0;
    if (spec[used] == ':') {
        int used2 = 0;
        if (sscanf(spec + used, ":%lld:%lld%n", &lo, &hi, &used2) != 2 || lo > hi)
            return -1;
        used += used2;
        ranged = 1;
    }
    if (spec[used])
        return -1;
    memset(a, 0, sizeof *a);
    a->alias_of = -1;
    if (kg_parse_role(role, &a->role))
        return -1;
    if ((eb != 1 && eb != 2 && eb != 4 && eb != 8) || count < 1 || count > (1u << 26) || !align ||
        (align & (align - 1)) || align > KG_MAX_ALIGN)
        return -1;
    a->elem_bytes = eb;
    a->count = count;
    a->align = align;
    if (a->role == KG_OUT)
        return 0;
    a->data = malloc(count * eb);
    if (!a->data)
        return -1;
    if (!ranged) {
        kg_rand_fill(a->data, count * eb);
        return 0;
    }
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0 means the full 64-bit range */
    for (size_t k = 0; k < count; k++) {
        uint64_t v = (uint64_t)lo + (span ? kg_rand64() % span : kg_rand64());
        memcpy(a->data + k * eb, &v, eb);
    }
    return 0;
}

static void usage(void)
{
    fputs("usage: kg_bench [-b BATCHES] [-t MIN_TICKS] [-k CALLS] [-w WARMUP_TICKS] "
          "-v VECTORS.txt LIB.so [LIB.so ...]\n"
          "       kg_bench [options] LIB.so SYMBOL ROLE:ELEM:COUNT:ALIGN[:LO:HI] ...\n",
          stderr);
}

static void pin_to_current_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((size_t)cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv)
{
    uint64_t batches = 101, min_ticks = 2000, fixed_k = 0, warmup = 2000000;
    const char *vectors = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "+b:t:k:w:v:h")) != -1) {
        uint64_t *dst = NULL;
        switch (opt) {
        case 'b': dst = &batches; break;
        case 't': dst = &min_ticks; break;
        case 'k': dst = &fixed_k; break;
        case 'w': dst = &warmup; break;
        case 'v': vectors = optarg; break;
        default: usage(); return 2;
        }
        if (dst && parse_u64(optarg, dst)) {
            fprintf(stderr, "-%c wants a non-negative integer, got '%s'\n", opt, optarg);
            return 2;
        }
    }
    if (batches < 1 || batches > 1000000) {
        fputs("-b must be 1..1000000\n", stderr);
        return 2;
    }

    unsigned a, b, c, d;
    have_rdtscp = __get_cpuid(0x80000001, &a, &b, &c, &d) && (d >> 27 & 1);
    kg_rng_seed(kg_seed_from_env());

    struct kg_caseset set = {0};
    char **libs;
    unsigned nlibs;
    if (vectors) {
        if (optind >= argc) {
            usage();
            return 2;
        }
        libs = argv + optind;
        nlibs = (unsigned)(argc - optind);
        if (kg_parse_vectors(vectors, &set))
            return 2;
    } else {
        if (argc - optind < 3 || argc - optind - 2 > KG_MAX_ARGS) {
            usage();
            return 2;
        }
        libs = argv + optind;
        nlibs = 1;
        set.cases = calloc(1, sizeof *set.cases);
        if (!set.cases)
            return 1;
        set.n = 1;
        struct kg_case *cs = &set.cases[0];
        cs->id = strdup(argv[optind + 1]);
        cs->symbol = strdup(argv[optind + 1]);
        cs->nargs = (unsigned)(argc - optind - 2);
        for (unsigned i = 0; i < cs->nargs; i++)
            if (parse_argspec(argv[optind + 2 + (int)i], &cs->args[i])) {
                fprintf(stderr, "bad argument spec '%s' (want ROLE:ELEM:COUNT:ALIGN[:LO:HI])\n",
                        argv[optind + 2 + (int)i]);
                return 2;
            }
    }
    if (set.n == 0) {
        fputs("no cases to time\n", stderr);
        return 2;
    }
    void **handles = calloc(nlibs, sizeof *handles);
    if (!handles || kg_resolve_symbols(&set, libs, nlibs, handles))
        return 2;

    pin_to_current_cpu();

    struct kg_case_bufs *bufs = calloc(set.n, sizeof *bufs);
    uint64_t *k = calloc(set.n, sizeof *k);
    double *per_call = calloc(set.n * batches, sizeof *per_call);
    if (!bufs || !k || !per_call)
        return 1;
    for (size_t i = 0; i < set.n; i++)
        if (kg_case_bufs_alloc(&set.cases[i], &bufs[i])) {
            fprintf(stderr, "case %s: out of memory\n", set.cases[i].id);
            return 1;
        }

    for (size_t i = 0; i < set.n; i++) {
        const struct kg_case *cs = &set.cases[i];
        uint64_t start = tsc_begin();
        do {
            kg_case_bufs_reload(cs, &bufs[i]);
            time_batch(cs->fn, bufs[i].argv, 16);
        } while (tsc_end() - start < warmup);

        k[i] = fixed_k ? fixed_k : 1;
        while (!fixed_k && k[i] < (1u << 24)) {
            kg_case_bufs_reload(cs, &bufs[i]);
            if (time_batch(cs->fn, bufs[i].argv, k[i]) >= min_ticks)
                break;
            k[i] *= 2;
        }
    }

    for (uint64_t m = 0; m < batches; m++)
        for (size_t i = 0; i < set.n; i++) {
            kg_case_bufs_reload(&set.cases[i], &bufs[i]);
            uint64_t t = time_batch(set.cases[i].fn, bufs[i].argv, k[i]);
            per_call[i * batches + m] = (double)t / (double)k[i];
        }

    int status = 0;
    printf("# kg_bench cpu %d batches %llu min_ticks %llu %s\n", sched_getcpu(),
           (unsigned long long)batches, (unsigned long long)min_ticks,
           have_rdtscp ? "rdtscp" : "rdtsc");
    for (size_t i = 0; i < set.n; i++) {
        const struct kg_case *cs = &set.cases[i];
        for (unsigned j = 0; j < cs->nargs; j++)
            if (cs->args[j].alias_of < 0 && !kg_buf_canary_ok(&bufs[i].bufs[j])) {
                fprintf(stderr, "case %s: argument %u: write outside the buffer\n", cs->id, j);
                status = 1;
            }
        double *v = per_call + i * batches;
        qsort(v, batches, sizeof *v, cmp_double);
        double median = batches % 2 ? v[batches / 2] : (v[batches / 2 - 1] + v[batches / 2]) / 2;
        printf("bench %s %s %.2f %.2f %llu %llu\n", cs->id, cs->symbol, median, v[0],
               (unsigned long long)batches, (unsigned long long)k[i]);
        kg_case_bufs_free(cs, &bufs[i]);
    }
    free(per_call);
    free(k);
    free(bufs);
    free(handles);
    kg_free_cases(&set);
    return fflush(stdout) ? 1 : status;
}
