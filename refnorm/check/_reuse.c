/* refnorm.check._reuse: optional; the streaming judge's large temporaries reused instead of re-faulted.
 *
 * The streaming judge (stream.py) computes each block's reference, bounds and comparison in NumPy
 * temporaries of the same few sizes (2 MiB of float64 for a block of 2^18 elements), thousands per call.
 * glibc returns freed blocks of that size to the system (an mmap, or a trimmed heap top), so every new
 * temporary is faulted in again page by page: ~150k page faults in one layer_norm 4096x4096 judgement,
 * 15-25% of its time (docs/performance.md, round 6). This module is a NumPy memory handler
 * (PyDataMem_SetHandler, NumPy >= 1.22) that keeps freed blocks of at least MIN_BYTES, up to SLOTS of
 * them and CAP_BYTES in all, while a scope is open, and hands one back to the next request of exactly
 * that size; the values written are the same (the bytes are the program's), only where they live changes.
 *
 *   enter() -> the handler in use before, in this thread's context; this context's arrays are
 *       allocated by the reusing handler from now on, and a scope is open
 *   leave(previous): the handler `previous` back in this context; the scope closed; when no scope is
 *       open any more (every thread has left), every kept block is freed
 *   kept() -> (blocks, bytes) kept now (tests)
 *
 * An array allocated under the handler keeps it: freed after the scopes closed, its block goes straight
 * back to free(). calloc and realloc are the system's (a calloc'd block is never kept for a malloc, nor
 * the other way round: a kept block is only ever handed to malloc, which promises nothing of its bytes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>

enum { SLOTS = 32 };
static const size_t MIN_BYTES = (size_t)1 << 18;       /* 256 KiB: smaller blocks are glibc's business */
static const size_t CAP_BYTES = (size_t)1 << 26;       /* 64 MiB kept at most */

static struct {
    pthread_mutex_t lock;
    int open;                       /* scopes open (threads inside enter/leave) */
    int n;
    size_t bytes;
    void *ptr[SLOTS];
    size_t size[SLOTS];
} pool = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, {0}, {0}};

static void *r_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= MIN_BYTES) {
        void *p = NULL;
        pthread_mutex_lock(&pool.lock);
        for (int i = pool.n - 1; i >= 0; i--)
            if (pool.size[i] == size) {
                p = pool.ptr[i];
                pool.bytes -= size;
                pool.n--;
                pool.ptr[i] = pool.ptr[pool.n];
                pool.size[i] = pool.size[pool.n];
                break;
            }
        pthread_mutex_unlock(&pool.lock);
        if (p)
            return p;
    }
    return malloc(size);
}

static void *r_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    return calloc(nelem, elsize);
}

static void *r_realloc(void *ctx, void *ptr, size_t new_size)
{
    (void)ctx;
    return realloc(ptr, new_size);
}

static void r_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr && size >= MIN_BYTES) {
        int kept = 0;
        pthread_mutex_lock(&pool.lock);
        if (pool.open > 0 && pool.n < SLOTS && pool.bytes + size <= CAP_BYTES) {
            pool.ptr[pool.n] = ptr;
            pool.size[pool.n] = size;
            pool.n++;
            pool.bytes += size;
            kept = 1;
        }
        pthread_mutex_unlock(&pool.lock);
        if (kept)
            return;
    }
    free(ptr);
}

static PyDataMem_Handler handler = {
    "refnorm_reuse", 1, {NULL, r_malloc, r_calloc, r_realloc, r_free}
};

static PyObject *capsule;           /* the handler, as NumPy takes it */

static PyObject *py_enter(PyObject *self, PyObject *args)
{
    (void)self; (void)args;
    pthread_mutex_lock(&pool.lock);
    pool.open++;
    pthread_mutex_unlock(&pool.lock);
    PyObject *old = PyDataMem_SetHandler(capsule);
    if (!old) {
        pthread_mutex_lock(&pool.lock);
        pool.open--;
        pthread_mutex_unlock(&pool.lock);
    }
    return old;
}

static PyObject *py_leave(PyObject *self, PyObject *previous)
{
    (void)self;
    PyObject *cur = PyDataMem_SetHandler(previous);
    if (!cur)
        return NULL;
    Py_DECREF(cur);
    void *drop[SLOTS];
    int n = 0;
    pthread_mutex_lock(&pool.lock);
    if (--pool.open <= 0) {
        pool.open = 0;
        for (n = 0; n < pool.n; n++)
            drop[n] = pool.ptr[n];
        pool.n = 0;
        pool.bytes = 0;
    }
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n; i++)
        free(drop[i]);
    Py_RETURN_NONE;
}

static PyObject *py_kept(PyObject *self, PyObject *args)
{
    (void)self; (void)args;
    pthread_mutex_lock(&pool.lock);
    int n = pool.n;
    size_t bytes = pool.bytes;
    pthread_mutex_unlock(&pool.lock);
    return Py_BuildValue("(in)", n, (Py_ssize_t)bytes);
}

static PyMethodDef methods[] = {
    {"enter", py_enter, METH_NOARGS, "enter() -> the previous handler; reuse large blocks in this context"},
    {"leave", py_leave, METH_O, "leave(previous): restore the handler; free the kept blocks when no scope is open"},
    {"kept", py_kept, METH_NOARGS, "kept() -> (blocks, bytes) kept now"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_reuse", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reuse(void)
{
    import_array();
    capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (!capsule)
        return NULL;
    return PyModule_Create(&moduledef);
}
