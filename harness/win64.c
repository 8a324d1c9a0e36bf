/* kerngen test harness: Windows support for kg_runner (MinGW-w64 build,
 * run under Wine or on Windows). The runner and the vector-file code are
 * the shared runner.c and vectors.c; this file holds what differs on
 * Windows: loading kernels from DLLs, a fault handler standing in for the
 * signal that kills a crashing runner on Linux, the system random
 * generator, and getline(). Declared in win64.h and vectors.h. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <bcrypt.h>
#include <fcntl.h>
#include <io.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vectors.h"
#include "win64.h"

/* ---- faults ------------------------------------------------------------ */

static const struct {
    DWORD code;
    const char *name;
} fatal[] = {
    {EXCEPTION_ACCESS_VIOLATION, "EXCEPTION_ACCESS_VIOLATION"},
    {EXCEPTION_ILLEGAL_INSTRUCTION, "EXCEPTION_ILLEGAL_INSTRUCTION"},
    {EXCEPTION_PRIV_INSTRUCTION, "EXCEPTION_PRIV_INSTRUCTION"},
    {EXCEPTION_DATATYPE_MISALIGNMENT, "EXCEPTION_DATATYPE_MISALIGNMENT"},
    {EXCEPTION_IN_PAGE_ERROR, "EXCEPTION_IN_PAGE_ERROR"},
    {EXCEPTION_STACK_OVERFLOW, "EXCEPTION_STACK_OVERFLOW"},
    {EXCEPTION_INT_DIVIDE_BY_ZERO, "EXCEPTION_INT_DIVIDE_BY_ZERO"},
    {EXCEPTION_INT_OVERFLOW, "EXCEPTION_INT_OVERFLOW"},
    {EXCEPTION_ARRAY_BOUNDS_EXCEEDED, "EXCEPTION_ARRAY_BOUNDS_EXCEEDED"},
    {EXCEPTION_BREAKPOINT, "EXCEPTION_BREAKPOINT"},
    {EXCEPTION_SINGLE_STEP, "EXCEPTION_SINGLE_STEP"},
    {EXCEPTION_FLT_DIVIDE_BY_ZERO, "EXCEPTION_FLT_DIVIDE_BY_ZERO"},
    {EXCEPTION_FLT_INVALID_OPERATION, "EXCEPTION_FLT_INVALID_OPERATION"},
    {STATUS_FLOAT_MULTIPLE_TRAPS, "STATUS_FLOAT_MULTIPLE_TRAPS"},
};

/* A vectored handler runs before any frame-based handling, so it needs no
 * unwind information for the kernel that faulted (kernels have none). */
static LONG CALLBACK on_fault(EXCEPTION_POINTERS *ep)
{
    const EXCEPTION_RECORD *r = ep->ExceptionRecord;
    const char *name = NULL;
    for (size_t k = 0; k < sizeof fatal / sizeof fatal[0]; k++)
        if (fatal[k].code == r->ExceptionCode)
            name = fatal[k].name;
    if (!name)
        return EXCEPTION_CONTINUE_SEARCH;
    char msg[256];
    int len;
    if (r->ExceptionCode == EXCEPTION_ACCESS_VIOLATION && r->NumberParameters >= 2)
        len = snprintf(msg, sizeof msg, "%s (0x%08lx) at %p: %s of address %p\n", name,
                       (unsigned long)r->ExceptionCode, r->ExceptionAddress,
                       r->ExceptionInformation[0] == 1   ? "write"
                       : r->ExceptionInformation[0] == 8 ? "execution"
                                                         : "read",
                       (void *)r->ExceptionInformation[1]);
    else
        len = snprintf(msg, sizeof msg, "%s (0x%08lx) at %p\n", name,
                       (unsigned long)r->ExceptionCode, r->ExceptionAddress);
    DWORD written;
    if (len > 0)
        WriteFile(GetStdHandle(STD_ERROR_HANDLE), msg, (DWORD)len, &written, NULL);
    TerminateProcess(GetCurrentProcess(), KG_WIN64_CRASH_STATUS);
    return EXCEPTION_CONTINUE_SEARCH;
}

void kg_win64_init(void)
{
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    AddVectoredExceptionHandler(1, on_fault);
    _fmode = _O_BINARY;
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
}

/* ---- random seed ------------------------------------------------------- */

uint64_t kg_win64_random64(void)
{
    uint64_t r = 0;
    if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, (PUCHAR)&r, sizeof r,
                                        BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
        return 0;
    return r;
}

/* ---- getline ----------------------------------------------------------- */

ssize_t kg_win64_getline(char **line, size_t *cap, FILE *f)
{
    size_t len = 0;
    if (!*line || *cap < 128) {
        char *p = realloc(*line, 128);
        if (!p)
            return -1;
        *line = p;
        *cap = 128;
    }
    for (;;) {
        if (!fgets(*line + len, (int)(*cap - len > INT_MAX ? INT_MAX : *cap - len), f))
            break;
        len += strlen(*line + len);
        if (len && (*line)[len - 1] == '\n')
            break;
        if (*cap - len < 2) {
            char *p = realloc(*line, 2 * *cap);
            if (!p)
                return -1;
            *line = p;
            *cap *= 2;
        }
    }
    return len ? (ssize_t)len : -1;
}

/* ---- libraries --------------------------------------------------------- */

static void print_last_error(void)
{
    DWORD err = GetLastError();
    char buf[256];
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                             err, 0, buf, sizeof buf, NULL);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    fprintf(stderr, "error %lu%s%s\n", (unsigned long)err, n ? ": " : "", n ? buf : "");
}

/* The Windows form of vectors.c's kg_resolve_symbols: LoadLibrary and
 * GetProcAddress for dlopen and dlsym, the same messages. */
int kg_resolve_symbols(struct kg_caseset *set, char *const *libs, unsigned nlibs, void **handles)
{
    for (unsigned k = 0; k < nlibs; k++) {
        /* a name without a directory would make LoadLibrary search the
         * system directories and PATH; always load the file given */
        size_t n = strlen(libs[k]);
        char *path = malloc(n + 3);
        if (!path)
            return -1;
        int bare = !strpbrk(libs[k], "/\\:");
        strcpy(path, bare ? ".\\" : "");
        strcat(path, libs[k]);
        for (char *p = path; *p; p++)
            if (*p == '/')
                *p = '\\';
        handles[k] = LoadLibraryExA(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
        free(path);
        if (!handles[k]) {
            fprintf(stderr, "cannot load library %u '%s': ", k, libs[k]);
            print_last_error();
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
        c->fn = (void *)GetProcAddress((HMODULE)handles[c->lib], c->symbol);
        if (!c->fn) {
            fprintf(stderr, "case %s: symbol '%s' not found in '%s'\n", c->id, c->symbol,
                    libs[c->lib]);
            return -1;
        }
    }
    return 0;
}
