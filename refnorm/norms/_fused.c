/* refnorm.norms._fused: optional compiled row kernels, the same bits as the NumPy path.
 *
 * The reference is NumPy (refnorm/norms/_common.py). This module, built when a C compiler is present
 * at install time (setup.py, optional=True), fuses the per-row passes of layer_norm, group_norm,
 * instance_norm and batch_norm (batch statistics) into a few loops over each row, with the values of
 * the NumPy operations bit for bit (_fused_kernels.h says how; tests/test_fused.py checks it on every
 * golden case and on random shapes, for every instruction set this CPU has). Without it, or with
 * REFNORM_NATIVE=0, refnorm runs the NumPy path and gives the same results.
 *
 * Two functions, each for rows s..e-1 of a 3-D view (R rows; a row is P segments of Q contiguous
 * values: row_axis 0, the view (R, P, Q); row_axis 1, the view (P, R, Q)), releasing the GIL:
 *   forward(x, y, w, b, m0, c, var, rstd, s, e, R, P, Q, row_axis, wkind, eps)
 *   backward(x, dy, dx, w, m0, c, rstd, sxy, sy, colsum, s, e, R, P, Q, row_axis, wkind[, wrows])
 * Arrays are C-contiguous float64 buffers (None where absent: y, w, b, var, rstd in the forward; w,
 * sxy, sy in the backward). wkind: 1, one weight/bias value per segment ((R, P, 1) or (1, R, 1));
 * 2, one per element of the row (layer_norm: P = 1, Q values; in the backward also wrows rows of P * Q
 * values, row r using row r % wrows: group_norm's weight spread over its segments). Sizes are
 * checked, never trusted. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <stdint.h>
#include "_fused_api.h"      /* struct geom */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

/* Outputs of at least this many bytes are written with non-temporal stores (STORE_ROW). */
#define NT_MIN_BYTES (4.0 * 1024 * 1024)


struct args {
    const double *x, *a;        /* x, and dy or g */
    const double *w;            /* weight per element (g = a[i] * w[i - wo]) */
    Py_ssize_t wo;              /* the offset of the row's first element */
    double m0, c, r;            /* first-pass mean, its correction, rstd */
    double ws;                  /* one weight for the row (g = a * ws) */
};

/* The leaves of NumPy's pairwise sum of n values (8 <= n <= MAX_GATHER) starting at o, in order:
 * runs of at most 128 values, split as pairwise_sum splits (n2 = n / 2 rounded down to a multiple of 8). */
#define MAX_GATHER 1024
#define MAX_LEAVES 16
static void gather(Py_ssize_t o, Py_ssize_t n, Py_ssize_t *lo, Py_ssize_t *ln, int *cnt)
{
    if (n <= 128) {
        lo[*cnt] = o;
        ln[*cnt] = n;
        (*cnt)++;
        return;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    gather(o, n2, lo, ln, cnt);
    gather(o + n2, n - n2, lo, ln, cnt);
}

/* The pairwise sum of n values from its leaves' sums (sums[0], sums[stride], ...; *at: the next
 * leaf): the additions of pairwise_sum's recursion, in its order. */
static double combine(Py_ssize_t n, const double *sums, int stride, int *at)
{
    if (n <= 128)
        return sums[stride * (*at)++];
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    double left = combine(n2, sums, stride, at);
    return left + combine(n - n2, sums, stride, at);
}

/* Whether every segment (Q values at multiples of Q) of a row of n values is a node of NumPy's
 * pairwise tree over the row: then the row's sum is its segments' sums, combined along the tree. */
static int segments_aligned(Py_ssize_t o, Py_ssize_t n, Py_ssize_t Q)
{
    if (n == Q)
        return o % Q == 0;
    if (n < Q || n <= 128)
        return 0;
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return segments_aligned(o, n2, Q) && segments_aligned(o + n2, n - n2, Q);
}

/* The row's pairwise sum from its segments' pairwise sums (segs[0], segs[2], ...: stride 2). */
static double combine_segments(Py_ssize_t n, Py_ssize_t Q, const double *segs, int *at)
{
    if (n == Q)
        return segs[2 * (*at)++];
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    double left = combine_segments(n2, Q, segs, at);
    return left + combine_segments(n - n2, Q, segs, at);
}

typedef double (*pairwise_fn)(const struct args *, Py_ssize_t, Py_ssize_t);
typedef void (*pairwise2_fn)(const struct args *, Py_ssize_t, Py_ssize_t, double *);

static inline Py_ssize_t seg_off(const struct geom *gm, Py_ssize_t r, Py_ssize_t p)
{
    return gm->row_axis == 0 ? (r * gm->P + p) * gm->Q : (p * gm->R + r) * gm->Q;
}

/* index of segment (r, p) in a per-segment parameter: (R, P, 1) for row_axis 0, (1, R, 1) for 1 */
static inline Py_ssize_t seg_param(const struct geom *gm, Py_ssize_t r, Py_ssize_t p)
{
    return gm->row_axis == 0 ? r * gm->P + p : r;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define MULTI_ISA 1
#pragma GCC push_options
#pragma GCC target("avx512f")
#define SFX _avx512
#define VW 8
#define STREAMV(p, v) _mm512_stream_pd((p), (__m512d)(v))
#include "_fused_kernels.h"
#undef SFX
#undef VW
#undef STREAMV
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2")
#define SFX _avx2
#define VW 4
#define STREAMV(p, v) _mm256_stream_pd((p), (__m256d)(v))
#include "_fused_kernels.h"
#undef SFX
#undef VW
#undef STREAMV
#pragma GCC pop_options
#endif
#define SFX _base
#define VW 2
#ifdef MULTI_ISA
#define STREAMV(p, v) _mm_stream_pd((p), (__m128d)(v))
#else
#define STREAMV(p, v) do { vec_base v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)
#endif
#include "_fused_kernels.h"
#undef SFX
#undef VW
#undef STREAMV

#ifdef MULTI_ISA
#define FENCE() _mm_sfence()        /* the non-temporal stores are visible before the call returns */
#else
#define FENCE() ((void)0)
#endif

typedef void (*forward_fn)(const struct geom *, const double *, double *, const double *, const double *,
                           double *, double *, double *, double *, Py_ssize_t, Py_ssize_t, double);
typedef void (*backward_fn)(const struct geom *, const double *, const double *, double *, const double *,
                            const double *, const double *, const double *, double *, double *, int,
                            Py_ssize_t, Py_ssize_t);

typedef void (*merged_fn)(const struct geom *, const double *, const double *, double *, const double *,
                          const double *, const double *, const double *, double *, double *, Py_ssize_t,
                          Py_ssize_t, double *);

struct isa {
    const char *name;
    forward_fn fwd;
    backward_fn bwd;
    merged_fn merged;
};

static const struct isa ISAS[] = {
#ifdef MULTI_ISA
    {"avx512", forward_rows_avx512, backward_rows_avx512, backward_rows_merged_avx512},
    {"avx2", forward_rows_avx2, backward_rows_avx2, backward_rows_merged_avx2},
#endif
    {"base", forward_rows_base, backward_rows_base, backward_rows_merged_base},
};
#define N_ISAS ((int)(sizeof ISAS / sizeof ISAS[0]))

static const struct isa *current = NULL;

static int isa_supported(const struct isa *s)
{
#ifdef MULTI_ISA
    __builtin_cpu_init();
    if (strcmp(s->name, "avx512") == 0)
        return __builtin_cpu_supports("avx512f");
    if (strcmp(s->name, "avx2") == 0)
        return __builtin_cpu_supports("avx2");
#endif
    (void)s;
    return 1;
}

/* ------------------------------------------------------------------ buffers */
struct buf {
    Py_buffer view;
    double *p;
    int held;
};

static void release(struct buf *b, int count)
{
    for (int i = 0; i < count; i++)
        if (b[i].held)
            PyBuffer_Release(&b[i].view);
}

/* b <- o as a C-contiguous float64 buffer of at least `need` values (NULL pointer for None when
 * `optional`). Returns -1 with a Python exception set on a wrong type, dtype or size. */
static int get(PyObject *o, struct buf *b, const char *name, Py_ssize_t need, int writable, int optional)
{
    b->held = 0;
    b->p = NULL;
    if (o == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_TypeError, "_fused: '%s' is None; expected a float64 array", name);
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &b->view, flags) < 0)
        return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (strcmp(f, "d") != 0 || b->view.itemsize != 8) {
        PyErr_Format(PyExc_TypeError, "_fused: '%s' has format %s; expected float64 ('d')", name,
                     b->view.format ? b->view.format : "B");
        return -1;
    }
    if (b->view.len / 8 < need) {
        PyErr_Format(PyExc_ValueError, "_fused: '%s' has %zd values; expected at least %zd", name,
                     b->view.len / 8, need);
        return -1;
    }
    b->p = (double *)b->view.buf;
    return 0;
}

/* get() for count arguments; on an error, releases what it took and returns -1. */
static int get_all(int count, PyObject **o, struct buf *b, const char *const *names, const Py_ssize_t *need,
                   const int *writable, const int *optional)
{
    for (int i = 0; i < count; i++) {
        if (get(o[i], &b[i], names[i], need[i], writable[i], optional[i]) < 0) {
            release(b, i + 1);
            return -1;
        }
    }
    return 0;
}

static int check_geom(struct geom *g, Py_ssize_t s, Py_ssize_t e, int with_params, int forward)
{
    if (g->R < 1 || g->P < 1 || g->Q < 1 || g->P > PY_SSIZE_T_MAX / g->Q
        || g->R > PY_SSIZE_T_MAX / (g->P * g->Q)) {
        PyErr_Format(PyExc_ValueError, "_fused: shape R=%zd, P=%zd, Q=%zd; expected positive sizes",
                     g->R, g->P, g->Q);
        return -1;
    }
    if (s < 0 || s > e || e > g->R) {
        PyErr_Format(PyExc_ValueError, "_fused: rows %zd..%zd; expected 0 <= s <= e <= R=%zd", s, e, g->R);
        return -1;
    }
    if (g->row_axis != 0 && g->row_axis != 1) {
        PyErr_Format(PyExc_ValueError, "_fused: row_axis=%d; expected 0 or 1", g->row_axis);
        return -1;
    }
    if (with_params && g->wkind != 1
        && !(g->wkind == 2 && g->row_axis == 0 && (g->P == 1 || !forward))) {
        PyErr_Format(PyExc_ValueError, "_fused: wkind=%d with P=%zd, row_axis=%d; expected 1, or 2 with "
                     "row_axis=0 (and P=1 in the forward)", g->wkind, g->P, g->row_axis);
        return -1;
    }
    if (g->wrows < 1 || g->wrows > g->R) {
        PyErr_Format(PyExc_ValueError, "_fused: wrows=%zd; expected 1 <= wrows <= R=%zd", g->wrows, g->R);
        return -1;
    }
    return 0;
}

static Py_ssize_t param_len(const struct geom *g)
{
    return g->wkind == 2 ? g->wrows * g->P * g->Q : (g->row_axis == 0 ? g->R * g->P : g->R);
}

static PyObject *py_forward(PyObject *self, PyObject *args)
{
    PyObject *o[8];
    Py_ssize_t s, e;
    struct geom g;
    double eps;
    g.wrows = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOnnnnniid:forward", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &s, &e, &g.R, &g.P, &g.Q, &g.row_axis, &g.wkind, &eps))
        return NULL;
    int with_params = o[2] != Py_None || o[3] != Py_None;
    if (check_geom(&g, s, e, with_params, 1) < 0)
        return NULL;
    Py_ssize_t total = g.R * g.P * g.Q, pl = param_len(&g);
    static const char *names[8] = {"x", "y", "w", "b", "m0", "c", "var", "rstd"};
    const Py_ssize_t need[8] = {total, total, pl, pl, g.R, g.R, g.R, g.R};
    const int writable[8] = {0, 1, 0, 0, 1, 1, 1, 1}, optional[8] = {0, 1, 1, 1, 0, 0, 1, 1};
    struct buf b[8];
    if (get_all(8, o, b, names, need, writable, optional) < 0)
        return NULL;
    const struct isa *isa = current;
    Py_BEGIN_ALLOW_THREADS
    isa->fwd(&g, b[0].p, b[1].p, b[2].p, b[3].p, b[4].p, b[5].p, b[6].p, b[7].p, s, e, eps);
    FENCE();
    Py_END_ALLOW_THREADS
    release(b, 8);
    Py_RETURN_NONE;
}

static PyObject *py_backward(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    Py_ssize_t s, e;
    struct geom g;
    int colsum;
    g.wrows = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOpnnnnnii|n:backward", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &colsum, &s, &e, &g.R, &g.P, &g.Q, &g.row_axis, &g.wkind,
                          &g.wrows))
        return NULL;
    if (check_geom(&g, s, e, o[3] != Py_None || colsum, 0) < 0)
        return NULL;
    if (colsum && !(g.P == 1 && g.row_axis == 0)) {
        PyErr_SetString(PyExc_ValueError, "_fused: colsum needs P=1 and row_axis=0");
        return NULL;
    }
    Py_ssize_t total = g.R * g.P * g.Q, pl = param_len(&g);
    Py_ssize_t sl = colsum ? g.Q : g.R * g.P;
    static const char *names[9] = {"x", "dy", "dx", "w", "m0", "c", "rstd", "sxy", "sy"};
    const Py_ssize_t need[9] = {total, total, total, pl, g.R, g.R, g.R, sl, sl};
    const int writable[9] = {0, 0, 1, 0, 0, 0, 0, 1, 1}, optional[9] = {0, 0, 0, 1, 0, 0, 0, 1, 1};
    struct buf b[9];
    if (get_all(9, o, b, names, need, writable, optional) < 0)
        return NULL;
    if (b[2].p == b[0].p || b[2].p == b[1].p) {
        release(b, 9);
        PyErr_SetString(PyExc_ValueError, "_fused: 'dx' must not share memory with 'x' or 'dy'");
        return NULL;
    }
    const struct isa *isa = current;
    /* one pass for all the sums where the segments are nodes of the row's pairwise tree */
    int merged = !colsum && (b[3].p == NULL || g.wkind == 1)
                 && (g.row_axis == 1 || g.P == 1 || segments_aligned(0, g.P * g.Q, g.Q));
    if (!merged && b[3].p != NULL && g.wkind == 1) {
        release(b, 9);
        PyErr_Format(PyExc_ValueError, "_fused: backward with one weight per segment (wkind=1) needs rows "
                     "whose pairwise sum splits at the segments (P=%zd, Q=%zd); spread the weight over the "
                     "row (wkind=2) instead", g.P, g.Q);
        return NULL;
    }
    double *segs = NULL;
    if (merged && g.row_axis == 0 && g.P > 1) {
        segs = PyMem_RawMalloc(sizeof(double) * 2 * (size_t)g.P);
        if (!segs) {
            release(b, 9);
            return PyErr_NoMemory();
        }
    }
    Py_BEGIN_ALLOW_THREADS
    if (merged)
        isa->merged(&g, b[0].p, b[1].p, b[2].p, b[3].p, b[4].p, b[5].p, b[6].p, b[7].p, b[8].p, s, e, segs);
    else
        isa->bwd(&g, b[0].p, b[1].p, b[2].p, b[3].p, b[4].p, b[5].p, b[6].p, b[7].p, b[8].p, colsum, s, e);
    FENCE();
    Py_END_ALLOW_THREADS
    PyMem_RawFree(segs);
    release(b, 9);
    Py_RETURN_NONE;
}

static PyObject *py_segments_aligned(PyObject *self, PyObject *args)
{
    Py_ssize_t n, q;
    if (!PyArg_ParseTuple(args, "nn:segments_aligned", &n, &q))
        return NULL;
    if (n < 1 || q < 1 || n % q != 0) {
        PyErr_Format(PyExc_ValueError, "_fused: segments_aligned(%zd, %zd); expected n a positive multiple of q", n, q);
        return NULL;
    }
    return PyBool_FromLong(segments_aligned(0, n, q));
}

static PyObject *py_isa(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(current->name);
}

static PyObject *py_isas(PyObject *self, PyObject *noargs)
{
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (int i = 0; i < N_ISAS; i++) {
        if (isa_supported(&ISAS[i])) {
            PyObject *s = PyUnicode_FromString(ISAS[i].name);
            if (!s || PyList_Append(out, s) < 0) {
                Py_XDECREF(s);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(s);
        }
    }
    return out;
}

static PyObject *py_set_isa(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    for (int i = 0; i < N_ISAS; i++) {
        if (strcmp(ISAS[i].name, name) == 0) {
            if (!isa_supported(&ISAS[i])) {
                PyErr_Format(PyExc_ValueError, "_fused: this CPU does not support isa=%s", name);
                return NULL;
            }
            current = &ISAS[i];
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_ValueError, "_fused: isa=%s; expected one of avx512, avx2, base", name);
    return NULL;
}

/* the kernels for other extensions (_fused_api.h): those of the instruction set in use at each call */
static void api_forward(const struct geom *g, const double *x, double *y, const double *w, const double *b,
                        double *m0, double *c, double *var, double *rstd, Py_ssize_t s, Py_ssize_t e, double eps)
{
    current->fwd(g, x, y, w, b, m0, c, var, rstd, s, e, eps);
    FENCE();
}

static void api_backward(const struct geom *g, const double *x, const double *dy, double *dx, const double *w,
                         const double *m0, const double *c, const double *rstd, double *sxy, double *sy, int colsum,
                         Py_ssize_t s, Py_ssize_t e)
{
    current->bwd(g, x, dy, dx, w, m0, c, rstd, sxy, sy, colsum, s, e);
    FENCE();
}

static void api_merged(const struct geom *g, const double *x, const double *dy, double *dx, const double *w,
                       const double *m0, const double *c, const double *rstd, double *sxy, double *sy, Py_ssize_t s,
                       Py_ssize_t e, double *segs)
{
    current->merged(g, x, dy, dx, w, m0, c, rstd, sxy, sy, s, e, segs);
    FENCE();
}

static const struct fused_api API = {FUSED_API_VERSION, api_forward, api_backward, api_merged};

static PyMethodDef methods[] = {
    {"forward", py_forward, METH_VARARGS, "forward(x, y, w, b, m0, c, var, rstd, s, e, R, P, Q, row_axis, wkind, eps)"},
    {"backward", py_backward, METH_VARARGS, "backward(x, dy, dx, w, m0, c, rstd, sxy, sy, colsum, s, e, R, P, Q, row_axis, wkind[, wrows])"},
    {"segments_aligned", py_segments_aligned, METH_VARARGS,
     "segments_aligned(n, q): whether a row of n values sums, in NumPy's pairwise order, as its n/q segments do."},
    {"isa", py_isa, METH_NOARGS, "The instruction set in use: 'avx512', 'avx2' or 'base'."},
    {"isas", py_isas, METH_NOARGS, "The instruction sets this CPU supports, best first."},
    {"set_isa", py_set_isa, METH_O, "Use another instruction set (the results are the same bits)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_fused", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fused(void)
{
    for (int i = 0; i < N_ISAS && !current; i++)
        if (isa_supported(&ISAS[i]))
            current = &ISAS[i];
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    PyObject *cap = PyCapsule_New((void *)&API, FUSED_API_NAME, NULL);
    if (!cap || PyModule_AddObject(m, "api", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
