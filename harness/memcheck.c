/* kerngen test harness: kernels under valgrind memcheck with their inputs undefined.
 *
 *   valgrind --tool=memcheck kg_memcheck LIB.so [LIB.so ...] VECTORS.txt
 *
 * Calls every case of VECTORS.txt (format in vectors.h) once, directly,
 * after marking the bytes of its in and inout buffers undefined
 * (VALGRIND_MAKE_MEM_UNDEFINED): memcheck then reports every branch,
 * conditional move and memory address that depends on them. The program
 * reads nothing the kernel wrote, so every such report is the kernel's.
 *
 * Prints on stderr, in the order memcheck writes its reports there,
 *   kg_memcheck: case <case_id>           before the call
 *   kg_memcheck: ran <case_id>            after it
 *   kg_memcheck: unhandled <case_id>      the simulated CPU stopped at an instruction it cannot
 *                                         decode (SIGILL): the case was not checked
 * Exit status: 0 when every case was called, 2 for bad usage or input.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/memcheck.h>

#include "vectors.h"

typedef void (*kg_kernel)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

static sigjmp_buf kg_stopped;

static void kg_on_sigill(int sig)
{
    (void)sig;
    siglongjmp(kg_stopped, 1);
}

static int run_case(const struct kg_case *c)
{
    struct kg_case_bufs cb;
    if (kg_case_bufs_alloc(c, &cb)) {
        fprintf(stderr, "case %s: out of memory\n", c->id);
        return -1;
    }
    for (unsigned j = 0; j < c->nargs; j++) {
        const struct kg_arg *a = &c->args[j];
        if (a->alias_of < 0 && a->role != KG_OUT)
            VALGRIND_MAKE_MEM_UNDEFINED(cb.bufs[j].ptr, a->count * a->elem_bytes);
    }
    fprintf(stderr, "kg_memcheck: case %s\n", c->id);
    if (sigsetjmp(kg_stopped, 1)) {
        fprintf(stderr, "kg_memcheck: unhandled %s\n", c->id);
    } else {
        ((kg_kernel)c->fn)(cb.argv[0], cb.argv[1], cb.argv[2], cb.argv[3], cb.argv[4]);
        fprintf(stderr, "kg_memcheck: ran %s\n", c->id);
    }
    kg_case_bufs_free(c, &cb);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argv[1][0] == '-') {
        fputs("usage: kg_memcheck LIB.so [LIB.so ...] VECTORS.txt\n", stderr);
        return 2;
    }
    unsigned nlibs = (unsigned)(argc - 2);
    struct kg_caseset set;
    if (kg_parse_vectors(argv[argc - 1], &set))
        return 2;
    void **handles = calloc(nlibs, sizeof *handles);
    if (!handles || kg_resolve_symbols(&set, argv + 1, nlibs, handles))
        return 2;
    struct sigaction on_sigill;
    memset(&on_sigill, 0, sizeof on_sigill);
    on_sigill.sa_handler = kg_on_sigill;
    sigaction(SIGILL, &on_sigill, NULL);
    for (size_t k = 0; k < set.n; k++)
        if (run_case(&set.cases[k]))
            return 1;
    kg_free_cases(&set);
    free(handles);
    return 0;
}
