/* Calls one kernel `count` times, for the Python library's batches: argument
 * i of call j is ptrs[i] + j * strides[i] (a stride of 0 passes the same row
 * to every call). One C loop, so a batch costs the kernels' time, not one
 * Python call per row; ctypes releases the GIL around it. */
#include <stddef.h>
#include <stdint.h>

typedef void (*kg_fn1)(void *);
typedef void (*kg_fn2)(void *, void *);
typedef void (*kg_fn3)(void *, void *, void *);
typedef void (*kg_fn4)(void *, void *, void *, void *);
typedef void (*kg_fn5)(void *, void *, void *, void *, void *);
typedef void (*kg_fn6)(void *, void *, void *, void *, void *, void *);

enum { KG_MAX_ARGS = 6 };

int kg_call_batch(void *fn, int nargs, char *const *ptrs, const ptrdiff_t *strides, size_t count)
{
    if (nargs < 1 || nargs > KG_MAX_ARGS)
        return -1;
    for (size_t j = 0; j < count; j++) {
        void *p[KG_MAX_ARGS] = {0};
        for (int i = 0; i < nargs; i++)
            p[i] = ptrs[i] + (ptrdiff_t)j * strides[i];
        switch (nargs) {
        case 1: ((kg_fn1)fn)(p[0]); break;
        case 2: ((kg_fn2)fn)(p[0], p[1]); break;
        case 3: ((kg_fn3)fn)(p[0], p[1], p[2]); break;
        case 4: ((kg_fn4)fn)(p[0], p[1], p[2], p[3]); break;
        case 5: ((kg_fn5)fn)(p[0], p[1], p[2], p[3], p[4]); break;
        default: ((kg_fn6)fn)(p[0], p[1], p[2], p[3], p[4], p[5]); break;
        }
    }
    return 0;
}
