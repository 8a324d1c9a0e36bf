/* kerngen test harness: code shared by kg_runner and kg_bench.
 *
 * Vector file format (text, one record per line, '#' starts a comment line,
 * blank lines ignored):
 *
 *   case <case_id> <symbol> <nargs>
 *   arg <in|out|inout> <elem_bytes> <count> <align>      (nargs times, in C order)
 *   data <v0> ... <v(count-1)>                           (right after each in/inout arg)
 *   alias <i> <j>                                        (0 or more)
 *   end
 *
 * <case_id>   any token without white space, unique within the file.
 * <symbol>    a symbol name, optionally prefixed "K:" to take it from the K-th
 *             shared object given on the command line (default 0).
 * <nargs>     1..5; every argument is a pointer to a buffer.
 * <elem_bytes> 1, 2, 4 or 8; <count> >= 1; <align> a power of two, 1..4096.
 * data        decimal numbers; any value in [-2^(w-1), 2^w - 1] for a w-bit
 *             element is accepted and stored modulo 2^w. Output files print
 *             1-byte and 8-byte elements unsigned, 2- and 4-byte ones signed.
 * alias i j   argument i is passed the buffer of argument j (in-place call);
 *             j must not itself be an alias, i carries no data line, and the
 *             shared buffer is sized and aligned for the larger of the two.
 */
#ifndef KG_VECTORS_H
#define KG_VECTORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KG_MAX_ARGS 5
#define KG_MAX_ALIGN 4096
/* At least this many canary bytes on each side of every buffer. */
#define KG_CANARY_BYTES 64

enum kg_role { KG_IN, KG_OUT, KG_INOUT };

struct kg_arg {
    enum kg_role role;
    unsigned elem_bytes;
    size_t count;
    size_t align;
    unsigned char *data; /* count * elem_bytes bytes, little-endian; NULL for out/aliased */
    int alias_of;        /* -1 when the argument owns its buffer */
};

struct kg_case {
    char *id;
    char *symbol;
    unsigned lib;
    unsigned nargs;
    struct kg_arg args[KG_MAX_ARGS];
    void *fn;  /* filled by kg_resolve_symbols */
    long line; /* line of the "case" record, for messages */
};

struct kg_caseset {
    struct kg_case *cases;
    size_t n;
};

/* Parses a vector file. On any error prints "PATH:LINE: message" to stderr
 * and returns -1; the caller exits with status 2. */
/* "in" / "out" / "inout" to a role; 0 on success, -1 for any other word. */
int kg_parse_role(const char *word, enum kg_role *role);
int kg_parse_vectors(const char *path, struct kg_caseset *set);
void kg_free_cases(struct kg_caseset *set);

/* dlopen()s every library and dlsym()s every case's symbol; names the
 * missing library or symbol on stderr and returns -1 on failure. */
int kg_resolve_symbols(struct kg_caseset *set, char *const *libs, unsigned nlibs, void **handles);

/* Prints count elements (" v0 v1 ...") in the output number format. */
void kg_print_elems(FILE *f, const unsigned char *bytes, unsigned elem_bytes, size_t count);

/* Deterministic generator (splitmix64) for canaries, seeds and fill patterns;
 * seeded from $KG_SEED when set, else from /dev/urandom. */
uint64_t kg_seed_from_env(void);
void kg_rng_seed(uint64_t seed);
uint64_t kg_rand64(void);
void kg_rand_fill(void *p, size_t n);

/* A buffer placed at exactly its declared alignment (aligned to align but not
 * to 2 * align, so a kernel that silently relies on stronger alignment than
 * it documents faults here), between random canaries of at least
 * KG_CANARY_BYTES. */
struct kg_buf {
    unsigned char *block;
    size_t block_size;
    unsigned char *ptr;
    size_t size;
    unsigned char *canary; /* copy of the whole block taken after placement */
};

int kg_buf_alloc(struct kg_buf *b, size_t size, size_t align);
/* Returns 1 when both canaries still hold their pattern. */
int kg_buf_canary_ok(const struct kg_buf *b);
void kg_buf_free(struct kg_buf *b);

/* Index of the argument whose buffer argument i uses. */
static inline unsigned kg_owner(const struct kg_case *c, unsigned i)
{
    return c->args[i].alias_of < 0 ? i : (unsigned)c->args[i].alias_of;
}

/* Buffers of one case: bufs[j] is allocated only for owners. */
struct kg_case_bufs {
    struct kg_buf bufs[KG_MAX_ARGS];
    uint64_t argv[KG_MAX_ARGS];
};

/* Allocates every owner buffer (size and alignment covering all arguments
 * that share it), fills it with a random pattern, then copies the data of
 * in/inout arguments in. */
int kg_case_bufs_alloc(const struct kg_case *c, struct kg_case_bufs *cb);
/* Copies in/inout data into the buffers again (between bench batches). */
void kg_case_bufs_reload(const struct kg_case *c, struct kg_case_bufs *cb);
void kg_case_bufs_free(const struct kg_case *c, struct kg_case_bufs *cb);

#endif
