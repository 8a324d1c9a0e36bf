/* kerngen test harness: vector-file parser, buffers with canaries, random
 * patterns, symbol lookup and CPU feature detection shared by kg_runner and
 * kg_bench. The file format is described in vectors.h. */
#define _GNU_SOURCE
#include "vectors.h"

#include <cpuid.h>
#ifdef _WIN32
#include <malloc.h>

#include "win64.h"
#else
#include <dlfcn.h>
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _WIN32
#include "abi_check_win64.h"
#else
#include "abi_check.h"
#endif

/* ---- random numbers ---------------------------------------------------- */

static uint64_t rng_state = 0x6b65726e67656e31ull;

void kg_rng_seed(uint64_t seed) { rng_state = seed; }

uint64_t kg_rand64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kg_rand_fill(void *p, size_t n)
{
    unsigned char *q = p;
    while (n >= 8) {
        uint64_t r = kg_rand64();
        memcpy(q, &r, 8);
        q += 8;
        n -= 8;
    }
    if (n) {
        uint64_t r = kg_rand64();
        memcpy(q, &r, n);
    }
}

uint64_t kg_seed_from_env(void)
{
    const char *s = getenv("KG_SEED");
    uint64_t seed = 0;
    if (s && *s) {
        char *end;
        errno = 0;
        seed = strtoull(s, &end, 0);
        if (errno == 0 && *end == '\0')
            return seed;
        fprintf(stderr, "warning: ignoring KG_SEED=%s (not a number)\n", s);
    }
#ifdef _WIN32
    seed = kg_win64_random64();
#else
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1)
            seed = 0;
        fclose(f);
    }
#endif
    if (seed == 0)
        seed = (uint64_t)(uintptr_t)&seed ^ (uint64_t)clock();
    return seed;
}

/* ---- CPU features for the checked call --------------------------------- */

unsigned kg_abi_init(void)
{
    unsigned a, b, c, d, flags = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1;
        int avx = (c >> 28) & 1;
        if (osxsave && avx) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            /* the OS must save both xmm (bit 1) and ymm (bit 2) state */
            if ((lo & 6u) == 6u) {
                flags |= KG_ABI_HAVE_AVX;
                if (__get_cpuid_count(0x0d, 1, &a, &b, &c, &d) && (a & 4u))
                    flags |= KG_ABI_HAVE_XINUSE;
            }
        }
    }
    kg_abi_flags = flags;
    return flags;
}

const char *kg_abi_bit_name(unsigned bit)
{
#ifdef _WIN32
    static const char *const names[KG_ABI_NBITS] = {
        "rbx", "rbp", "rdi", "rsi", "r12", "r13", "r14", "r15", "rsp", "ymm-upper",
        "direction-flag", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
        "xmm14", "xmm15", "mxcsr", "x87-control",
    };
#else
    static const char *const names[KG_ABI_NBITS] = {
        "rbx", "rbp", "r12", "r13", "r14", "r15", "rsp", "ymm-upper", "direction-flag", "mxcsr",
        "x87-control",
    };
#endif
    return bit < KG_ABI_NBITS ? names[bit] : "unknown";
}

/* ---- parser ------------------------------------------------------------ */

struct parser {
    const char *path;
    long line;
};

static void perr(const struct parser *p, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%ld: ", p->path, p->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int parse_size(const char *tok, size_t *out)
{
    char *end;
    if (!tok || !*tok || *tok == '-' || *tok == '+')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(tok, &end, 10);
    if (errno || *end)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* Parses one element of w bytes into dst (little-endian). Accepts the union
 * of the signed and unsigned ranges of the width. */
static int parse_elem(const char *tok, unsigned w, unsigned char *dst)
{
    char *end;
    uint64_t bits;
    errno = 0;
    if (tok[0] == '-') {
        long long v = strtoll(tok, &end, 10);
        if (errno || *end)
            return -1;
        if (w < 8 && v < -(1ll << (8 * w - 1)))
            return -1;
        bits = (uint64_t)v;
    } else {
        if (tok[0] == '+')
            return -1;
        unsigned long long v = strtoull(tok, &end, 10);
        if (errno || *end || !*tok)
            return -1;
        if (w < 8 && v >> (8 * w))
            return -1;
        bits = v;
    }
    memcpy(dst, &bits, w); /* x86-64 is little-endian: the low w bytes */
    return 0;
}

static int is_pow2(size_t x) { return x && !(x & (x - 1)); }

static char *next_tok(char **save) { return strtok_r(NULL, " \t\r\n", save); }

static int finish_case(const struct parser *p, struct kg_case *c, unsigned seen_args)
{
    if (seen_args != c->nargs) {
        perr(p, "case %s: %u arg lines for nargs %u", c->id, seen_args, c->nargs);
        return -1;
    }
    for (unsigned i = 0; i < c->nargs; i++) {
        struct kg_arg *a = &c->args[i];
        int needs_data = a->role != KG_OUT && a->alias_of < 0;
        if (needs_data && !a->data) {
            perr(p, "case %s: argument %u (%s) has no data line", c->id, i,
                 a->role == KG_IN ? "in" : "inout");
            return -1;
        }
        if (a->alias_of >= 0 && a->data) {
            perr(p, "case %s: argument %u is an alias of %d and must not carry data", c->id, i,
                 a->alias_of);
            return -1;
        }
    }
    return 0;
}

int kg_parse_role(const char *word, enum kg_role *role)
{
    if (!strcmp(word, "in"))
        *role = KG_IN;
    else if (!strcmp(word, "out"))
        *role = KG_OUT;
    else if (!strcmp(word, "inout"))
        *role = KG_INOUT;
    else
        return -1;
    return 0;
}

int kg_parse_vectors(const char *path, struct kg_caseset *set)
{
    struct parser p = {path, 0};
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    set->cases = NULL;
    set->n = 0;
    size_t cap = 0;
    struct kg_case *cur = NULL;
    unsigned seen_args = 0;
    int last_arg_wants_data = 0; /* data must directly follow its arg line */
    char *line = NULL;
    size_t linecap = 0;
    int rc = -1;

    while (getline(&line, &linecap, f) >= 0) {
        p.line++;
        char *save;
        char *kw = strtok_r(line, " \t\r\n", &save);
        if (!kw || kw[0] == '#')
            continue;
        int wants_data = 0;
        if (!strcmp(kw, "case")) {
            if (cur) {
                perr(&p, "case %s: missing 'end' before the next 'case'", cur->id);
                goto out;
            }
            char *id = next_tok(&save), *sym = next_tok(&save), *na = next_tok(&save);
            size_t nargs;
            if (!id || !sym || parse_size(na, &nargs) || next_tok(&save)) {
                perr(&p, "expected 'case <case_id> <symbol> <nargs>'");
                goto out;
            }
            if (nargs < 1 || nargs > KG_MAX_ARGS) {
                perr(&p, "case %s: nargs must be 1..%d, got %zu", id, KG_MAX_ARGS, nargs);
                goto out;
            }
            for (size_t k = 0; k < set->n; k++)
                if (!strcmp(set->cases[k].id, id)) {
                    perr(&p, "duplicate case id '%s' (first on line %ld)", id,
                         set->cases[k].line);
                    goto out;
                }
            if (set->n == cap) {
                cap = cap ? 2 * cap : 16;
                struct kg_case *nc = realloc(set->cases, cap * sizeof *nc);
                if (!nc) {
                    perr(&p, "out of memory");
                    goto out;
                }
                set->cases = nc;
            }
            cur = &set->cases[set->n++];
            memset(cur, 0, sizeof *cur);
            cur->line = p.line;
            cur->nargs = (unsigned)nargs;
            for (unsigned i = 0; i < KG_MAX_ARGS; i++)
                cur->args[i].alias_of = -1;
            cur->id = strdup(id);
            char *colon = strchr(sym, ':');
            if (colon) {
                *colon = '\0';
                size_t lib;
                if (parse_size(sym, &lib) || lib > 255) {
                    perr(&p, "case %s: bad library index '%s' (want K:SYMBOL)", id, sym);
                    goto out;
                }
                cur->lib = (unsigned)lib;
                sym = colon + 1;
            }
            if (!*sym) {
                perr(&p, "case %s: empty symbol", id);
                goto out;
            }
            cur->symbol = strdup(sym);
            seen_args = 0;
        } else if (!strcmp(kw, "arg")) {
            if (!cur) {
                perr(&p, "'arg' outside a case");
                goto out;
            }
            if (seen_args >= cur->nargs) {
                perr(&p, "case %s: more arg lines than nargs %u", cur->id, cur->nargs);
                goto out;
            }
            char *role = next_tok(&save);
            size_t eb, count, align;
            if (!role || parse_size(next_tok(&save), &eb) || parse_size(next_tok(&save), &count) ||
                parse_size(next_tok(&save), &align) || next_tok(&save)) {
                perr(&p, "expected 'arg <in|out|inout> <elem_bytes> <count> <align>'");
                goto out;
            }
            struct kg_arg *a = &cur->args[seen_args];
            if (kg_parse_role(role, &a->role)) {
                perr(&p, "unknown role '%s' (in, out, inout)", role);
                goto out;
            }
            if (eb != 1 && eb != 2 && eb != 4 && eb != 8) {
                perr(&p, "elem_bytes must be 1, 2, 4 or 8, got %zu", eb);
                goto out;
            }
            if (count < 1 || count > (1u << 26)) {
                perr(&p, "count must be 1..%u, got %zu", 1u << 26, count);
                goto out;
            }
            if (!is_pow2(align) || align > KG_MAX_ALIGN) {
                perr(&p, "align must be a power of two 1..%d, got %zu", KG_MAX_ALIGN, align);
                goto out;
            }
            a->elem_bytes = (unsigned)eb;
            a->count = count;
            a->align = align;
            seen_args++;
            wants_data = a->role != KG_OUT;
        } else if (!strcmp(kw, "data")) {
            if (!cur || !last_arg_wants_data) {
                perr(&p, "'data' must directly follow an in/inout 'arg' line");
                goto out;
            }
            struct kg_arg *a = &cur->args[seen_args - 1];
            a->data = malloc(a->count * a->elem_bytes);
            if (!a->data) {
                perr(&p, "out of memory");
                goto out;
            }
            size_t k = 0;
            for (char *t; (t = next_tok(&save)); k++) {
                if (k == a->count) {
                    perr(&p, "case %s: argument %u: more than %zu values", cur->id,
                         seen_args - 1, a->count);
                    goto out;
                }
                if (parse_elem(t, a->elem_bytes, a->data + k * a->elem_bytes)) {
                    perr(&p, "case %s: argument %u: value %zu '%s' is not a %u-byte integer",
                         cur->id, seen_args - 1, k, t, a->elem_bytes);
                    goto out;
                }
            }
            if (k != a->count) {
                perr(&p, "case %s: argument %u: %zu values, count is %zu", cur->id,
                     seen_args - 1, k, a->count);
                goto out;
            }
        } else if (!strcmp(kw, "alias")) {
            size_t i, j;
            if (!cur) {
                perr(&p, "'alias' outside a case");
                goto out;
            }
            if (parse_size(next_tok(&save), &i) || parse_size(next_tok(&save), &j) ||
                next_tok(&save)) {
                perr(&p, "expected 'alias <i> <j>'");
                goto out;
            }
            if (seen_args != cur->nargs) {
                perr(&p, "case %s: 'alias' must come after all %u arg lines", cur->id,
                     cur->nargs);
                goto out;
            }
            if (i >= cur->nargs || j >= cur->nargs || i == j) {
                perr(&p, "case %s: alias %zu %zu: indices must differ and be below %u", cur->id,
                     i, j, cur->nargs);
                goto out;
            }
            if (cur->args[i].alias_of >= 0) {
                perr(&p, "case %s: argument %zu aliased twice", cur->id, i);
                goto out;
            }
            if (cur->args[j].alias_of >= 0) {
                perr(&p, "case %s: alias %zu %zu: argument %zu is itself an alias", cur->id, i,
                     j, j);
                goto out;
            }
            for (unsigned k = 0; k < cur->nargs; k++)
                if (cur->args[k].alias_of == (int)i) {
                    perr(&p, "case %s: argument %zu already has aliases; name it as the target",
                         cur->id, i);
                    goto out;
                }
            cur->args[i].alias_of = (int)j;
        } else if (!strcmp(kw, "end")) {
            if (!cur) {
                perr(&p, "'end' outside a case");
                goto out;
            }
            if (next_tok(&save)) {
                perr(&p, "unexpected text after 'end'");
                goto out;
            }
            if (finish_case(&p, cur, seen_args))
                goto out;
            cur = NULL;
        } else {
            perr(&p, "unknown record '%s' (case, arg, data, alias, end)", kw);
            goto out;
        }
        last_arg_wants_data = wants_data;
    }
    if (ferror(f)) {
        perr(&p, "read error: %s", strerror(errno));
        goto out;
    }
    if (cur) {
        perr(&p, "case %s: file ends without 'end'", cur->id);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    if (rc)
        kg_free_cases(set);
    return rc;
}

void kg_free_cases(struct kg_caseset *set)
{
    for (size_t k = 0; k < set->n; k++) {
        free(set->cases[k].id);
        free(set->cases[k].symbol);
        for (unsigned i = 0; i < KG_MAX_ARGS; i++)
            free(set->cases[k].args[i].data);
    }
    free(set->cases);
    set->cases = NULL;
    set->n = 0;
}

/* ---- libraries --------------------------------------------------------- */

#ifdef _WIN32
/* kg_resolve_symbols with LoadLibrary and GetProcAddress is in win64.c */
#else
int kg_resolve_symbols(struct kg_caseset *set, char *const *libs, unsigned nlibs, void **handles)
{
    for (unsigned k = 0; k < nlibs; k++) {
        /* a path without a slash would make dlopen search the system paths */
        char *path = libs[k];
        char *buf = NULL;
        if (!strchr(path, '/')) {
            buf = malloc(strlen(path) + 3);
            if (!buf)
                return -1;
            strcpy(buf, "./");
            strcat(buf, path);
            path = buf;
        }
        handles[k] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        free(buf);
        if (!handles[k]) {
            fprintf(stderr, "cannot load library %u '%s': %s\n", k, libs[k], dlerror());
            return -1;
        }
    }
    for (size_t i = 0; i < set->n; i++) {
        struct kg_case *c = &set->cases[i];
        if (c->lib >= nlibs) {
            fprintf(stderr, "case %s: library index %u but only %u libraries given\n", c->id,
                    c->lib, nlibs);
            return -1;
        }
        dlerror();
        c->fn = dlsym(handles[c->lib], c->symbol);
        if (!c->fn) {
            fprintf(stderr, "case %s: symbol '%s' not found in '%s'\n", c->id, c->symbol,
                    libs[c->lib]);
            return -1;
        }
    }
    return 0;
}
#endif

/* ---- output ------------------------------------------------------------ */

void kg_print_elems(FILE *f, const unsigned char *bytes, unsigned elem_bytes, size_t count)
{
    for (size_t k = 0; k < count; k++) {
        const unsigned char *e = bytes + k * elem_bytes;
        switch (elem_bytes) {
        case 1:
            fprintf(f, " %u", (unsigned)e[0]);
            break;
        case 2: {
            int16_t v;
            memcpy(&v, e, 2);
            fprintf(f, " %d", (int)v);
            break;
        }
        case 4: {
            int32_t v;
            memcpy(&v, e, 4);
            fprintf(f, " %ld", (long)v);
            break;
        }
        default: {
            uint64_t v;
            memcpy(&v, e, 8);
            fprintf(f, " %llu", (unsigned long long)v);
            break;
        }
        }
    }
}

/* ---- buffers ----------------------------------------------------------- */

int kg_buf_alloc(struct kg_buf *b, size_t size, size_t align)
{
    memset(b, 0, sizeof *b);
    /* front = block alignment + align: a multiple of 2*align plus align, so
     * ptr is aligned to align and not to 2*align */
    size_t block_align = 2 * align > KG_CANARY_BYTES ? 2 * align : KG_CANARY_BYTES;
    size_t front = block_align + align;
    size_t back = KG_CANARY_BYTES + (-(size + KG_CANARY_BYTES) & (KG_CANARY_BYTES - 1));
    size_t total = front + size + back;
    void *block;
#ifdef _WIN32
    block = _aligned_malloc(total, block_align);
    if (!block)
        return -1;
#else
    if (posix_memalign(&block, block_align, total))
        return -1;
#endif
    b->block = block;
    b->block_size = total;
    b->ptr = b->block + front;
    b->size = size;
    kg_rand_fill(b->block, total);
    b->canary = malloc(total);
    if (!b->canary) {
#ifdef _WIN32
        _aligned_free(block);
#else
        free(block);
#endif
        b->block = NULL;
        return -1;
    }
    memcpy(b->canary, b->block, total);
    return 0;
}

int kg_buf_canary_ok(const struct kg_buf *b)
{
    size_t front = (size_t)(b->ptr - b->block);
    size_t back = front + b->size;
    return !memcmp(b->block, b->canary, front) &&
           !memcmp(b->block + back, b->canary + back, b->block_size - back);
}

void kg_buf_free(struct kg_buf *b)
{
#ifdef _WIN32
    _aligned_free(b->block);
#else
    free(b->block);
#endif
    free(b->canary);
    memset(b, 0, sizeof *b);
}

int kg_case_bufs_alloc(const struct kg_case *c, struct kg_case_bufs *cb)
{
    memset(cb, 0, sizeof *cb);
    for (unsigned j = 0; j < c->nargs; j++) {
        if (c->args[j].alias_of >= 0)
            continue;
        size_t size = c->args[j].count * c->args[j].elem_bytes, align = c->args[j].align;
        for (unsigned i = 0; i < c->nargs; i++)
            if (c->args[i].alias_of == (int)j) {
                size_t s = c->args[i].count * c->args[i].elem_bytes;
                if (s > size)
                    size = s;
                if (c->args[i].align > align)
                    align = c->args[i].align;
            }
        if (kg_buf_alloc(&cb->bufs[j], size, align)) {
            kg_case_bufs_free(c, cb);
            return -1;
        }
    }
    for (unsigned i = 0; i < c->nargs; i++)
        cb->argv[i] = (uint64_t)(uintptr_t)cb->bufs[kg_owner(c, i)].ptr;
    kg_case_bufs_reload(c, cb);
    return 0;
}

void kg_case_bufs_reload(const struct kg_case *c, struct kg_case_bufs *cb)
{
    for (unsigned j = 0; j < c->nargs; j++)
        if (c->args[j].data)
            memcpy(cb->bufs[j].ptr, c->args[j].data, c->args[j].count * c->args[j].elem_bytes);
}

void kg_case_bufs_free(const struct kg_case *c, struct kg_case_bufs *cb)
{
    for (unsigned j = 0; j < c->nargs; j++)
        if (cb->bufs[j].block)
            kg_buf_free(&cb->bufs[j]);
}
