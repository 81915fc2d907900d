/* refnorm.check._judge: optional compiled loops of the judge, the same figures as its NumPy path.
 *
 * The definition is NumPy (refnorm/check/precision.py, bias.py, core.py's _judge); this module, built
 * when a C compiler is present at install time (setup.py, optional=True), does in one pass over a block
 * of elements what the NumPy path does in ~40: the rounding interval of each returned value, its excess
 * over the reference, the ratio to its bound, the unconstrained elements, the largest constrained error,
 * the worst elements, and the bias test's per-group sums. tests/test_judge_fast.py checks it against the
 * NumPy path; REFNORM_NATIVE=0 runs the NumPy path.
 *
 *   compare(g, ref, E, mult, kind, scale, shape, row0, acc) -> (max_ratio, over, unconstrained,
 *           dmax, max_bound, top)
 *       g, ref, E: C-contiguous float64 blocks of n values (g: the returned values, exactly
 *       representable in the dtype `kind`: 0 float64, 1 float32, 2 float16, 3 bfloat16); mult: uint32
 *       multiplicities of the returned values (bias.py); scale: max|ref| over the whole array; shape:
 *       the WHOLE array's shape; the block is rows row0.. of its axis 0. acc (float64, updated in place)
 *       holds the bias sums (S, sum E, Q) of the group "all" then of every index along every axis, in
 *       that order; elements outside the test add nothing (bias.py's `ok`). top: the 3 largest ratios
 *       (ratio, flat index in the whole array), ties to the lowest index.
 *   value_counts(keys, exact_limit) -> uint32 counts: for each key (uint64), how many keys equal it
 *       (exact: an open-addressing table when it needs at most exact_limit slots; otherwise each key's
 *       count is that of its bucket among 2^24 by a hash: never smaller than the exact count).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int P_BITS[4] = {53, 24, 11, 8};         /* significand bits, the implicit one included */
static const int E_MIN[4] = {-1022, -126, -14, -126};  /* the smallest normal is 2^E_MIN */
static const int E_MAX[4] = {1023, 127, 15, 127};      /* the largest finite value is below 2^(E_MAX+1) */

struct dt {
    int kind, p, emin;
    double fmax, top_half;        /* top_half: half the spacing below fmax (values beyond round to inf) */
};

static struct dt dtype_of(int kind)
{
    struct dt d;
    d.kind = kind;
    d.p = P_BITS[kind];
    d.emin = E_MIN[kind];
    double ulp_top = ldexp(1.0, E_MAX[kind] - d.p + 1);
    d.fmax = ldexp(2.0, E_MAX[kind]) - ulp_top;
    d.top_half = ulp_top / 2;
    return d;
}

/* [lo, hi]: the reals that round to g in the dtype (precision.rounding_interval). */
static inline void interval(const struct dt *d, double g, double *lo, double *hi)
{
    if (d->kind == 0 || isnan(g)) {
        *lo = *hi = g;
        return;
    }
    if (isinf(g)) {
        if (g > 0) { *lo = d->fmax + d->top_half; *hi = INFINITY; }
        else { *lo = -INFINITY; *hi = -d->fmax - d->top_half; }
        return;
    }
    double a = fabs(g), away, toward;
    if (a == 0) {
        away = toward = ldexp(1.0, d->emin - d->p + 1);
    } else {
        int k;
        frexp(a, &k);                 /* a = m 2^k, m in [0.5, 1): a in [2^(k-1), 2^k) */
        int e = k - 1 > d->emin ? k - 1 : d->emin;
        away = ldexp(1.0, e - d->p + 1);
        toward = (a == ldexp(1.0, k - 1) && k - 1 > d->emin) ? away / 2 : away;
    }
    if (a == 0) { *lo = -away / 2; *hi = away / 2; }
    else if (g > 0) { *lo = g - toward / 2; *hi = g + away / 2; }
    else { *lo = g - away / 2; *hi = g + toward / 2; }
}

struct top3 { double r[3]; Py_ssize_t i[3]; int n; };

static inline void top_add(struct top3 *t, double r, Py_ssize_t i)
{
    /* larger ratio first, then the lower index; the elements arrive in increasing index */
    if (t->n == 3 && !(r > t->r[2]))
        return;
    int j = t->n < 3 ? t->n++ : 2;
    while (j > 0 && r > t->r[j - 1]) {
        t->r[j] = t->r[j - 1];
        t->i[j] = t->i[j - 1];
        j--;
    }
    t->r[j] = r;
    t->i[j] = i;
}

static int get_buf(PyObject *o, Py_buffer *v, const char *name, const char *fmt, Py_ssize_t item, int writable)
{
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (strchr(fmt, *f) == NULL || f[1] != 0 || v->itemsize != item) {
        PyErr_Format(PyExc_TypeError, "_judge: '%s' has format %s; expected %s", name, v->format, fmt);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

#define MAXDIM 32

static PyObject *py_compare(PyObject *self, PyObject *args)
{
    PyObject *og, *oref, *oE, *omult, *oshape, *oacc;
    int kind;
    double scale;
    Py_ssize_t row0;
    if (!PyArg_ParseTuple(args, "OOOOidOnO:compare", &og, &oref, &oE, &omult, &kind, &scale, &oshape, &row0,
                          &oacc))
        return NULL;
    if (kind < 0 || kind > 3) {
        PyErr_Format(PyExc_ValueError, "_judge: kind=%d; expected 0..3", kind);
        return NULL;
    }
    Py_ssize_t shape[MAXDIM], nd = PySequence_Size(oshape);
    if (nd < 0 || nd > MAXDIM) {
        PyErr_SetString(PyExc_ValueError, "_judge: shape must be a sequence of at most 32 sizes");
        return NULL;
    }
    Py_ssize_t inner = 1, offs[MAXDIM + 1], acc_len = 1;
    for (Py_ssize_t a = 0; a < nd; a++) {
        PyObject *it = PySequence_GetItem(oshape, a);
        shape[a] = it ? PyLong_AsSsize_t(it) : -1;
        Py_XDECREF(it);
        if (shape[a] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "_judge: negative size in shape");
            return NULL;
        }
        if (a > 0)
            inner *= shape[a];
    }
    /* group offsets in acc (in units of groups): "all" at 0, axis a's indices from offs[a] */
    for (Py_ssize_t a = 0; a < nd; a++) {
        offs[a] = acc_len;
        acc_len += (nd > 1 && shape[a] > 1) ? shape[a] : 0;
    }
    Py_buffer vg, vr, vE, vm, va;
    if (get_buf(og, &vg, "g", "d", 8, 0) < 0)
        return NULL;
    if (get_buf(oref, &vr, "ref", "d", 8, 0) < 0) { PyBuffer_Release(&vg); return NULL; }
    if (get_buf(oE, &vE, "E", "d", 8, 0) < 0) { PyBuffer_Release(&vg); PyBuffer_Release(&vr); return NULL; }
    if (get_buf(omult, &vm, "mult", "IL", 4, 0) < 0) {
        PyBuffer_Release(&vg); PyBuffer_Release(&vr); PyBuffer_Release(&vE);
        return NULL;
    }
    if (get_buf(oacc, &va, "acc", "d", 8, 1) < 0) {
        PyBuffer_Release(&vg); PyBuffer_Release(&vr); PyBuffer_Release(&vE); PyBuffer_Release(&vm);
        return NULL;
    }
    Py_ssize_t n = vg.len / 8;
    int bad = vr.len / 8 != n || vE.len / 8 != n || vm.len / 4 != n || va.len / 8 != 3 * acc_len
              || (nd > 0 && (inner == 0 ? n != 0 : (n % inner != 0 || row0 < 0 || row0 + n / inner > shape[0])))
              || (nd == 0 && n != 1);
    if (bad) {
        PyBuffer_Release(&vg); PyBuffer_Release(&vr); PyBuffer_Release(&vE); PyBuffer_Release(&vm);
        PyBuffer_Release(&va);
        PyErr_Format(PyExc_ValueError, "_judge: block of %zd values does not match the shape, row0=%zd or acc",
                     n, row0);
        return NULL;
    }
    const double *g = vg.buf, *ref = vr.buf, *E = vE.buf;
    const uint32_t *mult = vm.buf;
    double *acc = va.buf;
    double maxr = 0, dmax = 0, maxE = 0;
    Py_ssize_t over = 0, unc = 0;
    int dmax_nan = 0, maxE_nan = 0;
    struct top3 top = {{0, 0, 0}, {0, 0, 0}, 0};
    struct dt d = dtype_of(kind);
    double lo_inf = d.kind == 0 ? INFINITY : d.fmax + d.top_half;
    Py_ssize_t base = row0 * inner;
    Py_ssize_t idx[MAXDIM];
    {   /* the multi-index of the block's first element */
        Py_ssize_t f = base;
        for (Py_ssize_t a = nd - 1; a >= 0; a--) {
            idx[a] = shape[a] ? f % shape[a] : 0;
            f = shape[a] ? f / shape[a] : 0;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double gi = g[i], ri = ref[i], Ei = E[i], lo, hi;
        interval(&d, gi, &lo, &hi);
        /* precision.excess */
        double ex;
        int gnan = isnan(gi), rnan = isnan(ri);
        if (gnan || rnan)
            ex = (gnan && rnan) ? 0.0 : INFINITY;
        else if (isinf(ri))
            ex = gi == ri ? 0.0 : INFINITY;
        else {
            double a = lo - ri, b = ri - hi;
            ex = a > b ? a : b;
            if (isnan(a) || isnan(b))
                ex = INFINITY;
            else if (ex < 0)
                ex = 0;
        }
        /* core._judge's ratio */
        int finE = isfinite(Ei);
        double r;
        if (finE)
            r = ex == 0 ? 0.0 : (Ei == 0 ? INFINITY : ex / Ei);
        else
            r = (gnan && !rnan) ? INFINITY : 0.0;
        if (isinf(gi) && isfinite(ri) && fabs(ri) < lo_inf)
            r = INFINITY;
        if (r > maxr)
            maxr = r;
        if (r > 1)
            over++;
        if (r > 0)
            top_add(&top, r, base + i);
        if (isnan(Ei))
            maxE_nan = 1;
        else if (Ei > maxE)
            maxE = Ei;
        int unconstrained = !finE || (Ei > 0 && Ei >= scale);
        if (unconstrained)
            unc++;
        else {
            double diff = fabs(gi - ri);
            if ((gnan && rnan) || gi == ri || (isinf(gi) && ex == 0))
                diff = 0;
            if (isnan(diff))
                dmax_nan = 1;
            else if (diff > dmax)
                dmax = diff;
        }
        /* bias.bias_test's element terms */
        double err = gi - ri, width = hi - lo;
        if (isfinite(err) && finE && isfinite(width) && isfinite(ri)) {
            double s = ri > 0 ? err : (ri < 0 ? -err : 0.0);
            double q = width * width * (double)mult[i];
            acc[0] += s;
            acc[acc_len] += Ei;
            acc[2 * acc_len] += q;
            if (nd > 1)
                for (Py_ssize_t a = 0; a < nd; a++)
                    if (shape[a] > 1) {
                        Py_ssize_t k = offs[a] + idx[a];
                        acc[k] += s;
                        acc[acc_len + k] += Ei;
                        acc[2 * acc_len + k] += q;
                    }
        }
        for (Py_ssize_t a = nd - 1; a >= 0; a--) {     /* the next multi-index */
            if (++idx[a] < shape[a])
                break;
            idx[a] = 0;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vg); PyBuffer_Release(&vr); PyBuffer_Release(&vE); PyBuffer_Release(&vm);
    PyBuffer_Release(&va);
    PyObject *t = PyList_New(0);
    if (!t)
        return NULL;
    for (int j = 0; j < top.n; j++) {
        PyObject *p = Py_BuildValue("(dn)", top.r[j], top.i[j]);
        if (!p || PyList_Append(t, p) < 0) { Py_XDECREF(p); Py_DECREF(t); return NULL; }
        Py_DECREF(p);
    }
    return Py_BuildValue("(dnnddN)", maxr, over, unc, dmax_nan ? NAN : dmax, maxE_nan ? NAN : maxE, t);
}

/* ------------------------------------------------------------------ value counts */
static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static PyObject *py_value_counts(PyObject *self, PyObject *args)
{
    PyObject *okeys, *oout;
    Py_ssize_t exact_limit;
    if (!PyArg_ParseTuple(args, "OOn:value_counts", &okeys, &oout, &exact_limit))
        return NULL;
    Py_buffer vk, vo;
    if (get_buf(okeys, &vk, "keys", "QLK", 8, 0) < 0)
        return NULL;
    if (get_buf(oout, &vo, "out", "IL", 4, 1) < 0) { PyBuffer_Release(&vk); return NULL; }
    Py_ssize_t n = vk.len / 8;
    if (vo.len / 4 != n) {
        PyBuffer_Release(&vk); PyBuffer_Release(&vo);
        PyErr_SetString(PyExc_ValueError, "_judge: out must have as many values as keys");
        return NULL;
    }
    const uint64_t *k = vk.buf;
    uint32_t *out = vo.buf;
    Py_ssize_t slots = 1;
    while (slots < 2 * n)
        slots *= 2;
    int exact = slots <= exact_limit;
    if (!exact)
        slots = (Py_ssize_t)1 << 24;
    uint64_t *keys = exact ? malloc(sizeof(uint64_t) * slots) : NULL;
    uint32_t *cnt = calloc(slots, sizeof(uint32_t));
    unsigned char *used = exact ? calloc(slots, 1) : NULL;
    if (!cnt || (exact && (!keys || !used))) {
        free(keys); free(cnt); free(used);
        PyBuffer_Release(&vk); PyBuffer_Release(&vo);
        return PyErr_NoMemory();
    }
    uint64_t mask = (uint64_t)slots - 1;
    Py_BEGIN_ALLOW_THREADS
    for (int pass = 0; pass < 2; pass++)
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t h = mix(k[i]) & mask;
            if (exact)
                while (used[h] && keys[h] != k[i])
                    h = (h + 1) & mask;
            if (pass == 0) {
                if (exact && !used[h]) { used[h] = 1; keys[h] = k[i]; }
                cnt[h]++;
            } else
                out[i] = cnt[h];
        }
    Py_END_ALLOW_THREADS
    free(keys); free(cnt); free(used);
    PyBuffer_Release(&vk); PyBuffer_Release(&vo);
    return PyBool_FromLong(exact);
}

static PyMethodDef methods[] = {
    {"compare", py_compare, METH_VARARGS, "compare(g, ref, E, mult, kind, scale, shape, row0, acc)"},
    {"value_counts", py_value_counts, METH_VARARGS, "value_counts(keys, out, exact_limit) -> exact"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_judge", NULL, -1, methods};

PyMODINIT_FUNC PyInit__judge(void)
{
    return PyModule_Create(&moduledef);
}
