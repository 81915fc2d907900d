/* refnorm.check._judge: optional compiled loops of the judge, the same figures as its NumPy path.
 *
 * The definition is NumPy (refnorm/check/plain.py: the judgement of one array as its formulas, with
 * precision.py's intervals and bias.py's test); this module, built
 * when a C compiler is present at install time (setup.py, optional=True), does in one pass over a block
 * of elements what the NumPy path does in ~40: the rounding interval of each returned value, its excess
 * over the reference, the ratio to its bound, the unconstrained elements, the largest constrained error,
 * the worst elements, and the bias test's per-group sums. tests/test_plain.py holds it to plain.py (each
 * element's terms bit for bit) and tests/test_compare.py to the NumPy path of blocks; REFNORM_NATIVE=0 runs the NumPy path. Maxima and counts are exact; sums (the bias test's,
 * the row bounds') are taken in LANES interleaved partial sums, so they equal NumPy's within rounding,
 * and the loops vectorize (the same additions whatever the instruction set: the same bits on every CPU).
 *
 *   compare(g, ref, E, mult, kind, scale, shape, start, acc) -> (max_ratio, over, unconstrained,
 *           dmax, max_bound, top, max_abs_ref): max_abs_ref, max |ref| over the finite values of the block
 *       g, ref, E: C-contiguous blocks of n values, float64 (g may be float32: the returned values,
 *       exactly representable in the dtype `kind`: 0 float64, 1 float32, 2 float16, 3 bfloat16); mult: uint16
 *       or uint32 multiplicities of the returned values (bias.py), or None: every one 1; scale: max|ref| over the whole array; shape:
 *       the WHOLE array's shape; the block is its elements start..start+n-1 in C order, or, with
 *       axis >= 0, the sub-array whose index along that axis is start.. (its elements in C order; g, ref
 *       and E may then be views of the block's shape whose axes after `axis` are contiguous, read as they
 *       lie, run by run: batch_norm's bounds laid out by channel). acc (float64, updated in place)
 *       holds the bias sums (S, sum E, Q) of the group "all" then of every index along every axis, in
 *       that order; elements outside the test add nothing (bias.py's `ok`). top: the 3 largest ratios
 *       (ratio, flat index in the whole array), ties to the lowest index.
 *   abs_max_finite(a) -> max |a| over the finite values of a float64 buffer (0.0 when none).
 *   value_counts(keys, out, exact_limit) -> exact: out[i] (uint32, or uint16: None when a count does not
 *       fit, and out is left as it was) = how many keys equal keys[i]; keys:
 *       the bits of the values (unsigned 2, 4 or 8-byte integers; -0 counts as +0). Exact (hash
 *       partitions and small tables: the key's width of scratch a key) for at most exact_limit keys (16-bit
 *       keys: always, by a table of every pattern); beyond, each key's count is that of its bucket
 *       among 2^24 by a hash: never below the exact one.
 *       With saturate (uint16 out): counts above 65535 are written as 65535 instead of failing;
 *       saturated_counts(keys, counts) gives those keys' exact counts.
 *   bucket_counts(keys, table[, out]): those bucket counts kept as a table of 2^24 (filled from the keys;
 *       with out, looked up for them), so that a large array's counts need not be held per element.
 *   row_bounds(...): bounds/_rows.py's row bounds (below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../norms/_fused_api.h"     /* judge_rows calls the reference's row kernels */

#if defined(__GNUC__)
#define ALWAYS_INLINE __attribute__((always_inline))     /* also into the NO_TRAPS loops below */
#else
#define ALWAYS_INLINE
#endif

/* Sums in LANES interleaved partial sums (element j into lane j % LANES, the lanes added in a fixed
 * tree): independent chains the compiler vectorizes, the same additions whatever the instruction set.
 * LANE_LOOP(n, j, l, body) runs body for j = 0..n-1 with l = j % LANES. */
enum { LANES = 8 };
#define LANE_LOOP(n, j, l, ...)                                                                           \
    do {                                                                                                  \
        Py_ssize_t j0_ = 0;                                                                               \
        for (; j0_ + LANES <= (n); j0_ += LANES)                                                          \
            for (int l = 0; l < LANES; l++) { const Py_ssize_t j = j0_ + l; __VA_ARGS__ }                 \
        for (int l = 0; j0_ + l < (n); l++) { const Py_ssize_t j = j0_ + l; __VA_ARGS__ }                 \
    } while (0)

static inline ALWAYS_INLINE double lanes_sum(const double *v)
{
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}


/* VECTOR_EXT: GCC's vector extensions (below); -DREFNORM_NO_VECTOR_EXT builds the plain-C loops instead
 * (what other compilers get; tests/test_compare.py builds and runs them) */
#if defined(__GNUC__) && !defined(REFNORM_NO_VECTOR_EXT)
#define VECTOR_EXT 1
#else
#define VECTOR_EXT 0
#endif

/* The row sums of the row bounds, their lanes held in registers: GCC's vector extensions (four doubles
 * a vector; a pair of SSE2 registers on the base ISA), the same lane-by-lane additions whatever the
 * instruction set. Lanes of LANE_LOOP: element j into lane j % 8 (x's sums, two vectors each) or
 * j % 4 (the six sums with the cotangent, one vector each: twelve would not fit the registers). */
#if VECTOR_EXT
#pragma GCC diagnostic ignored "-Wpsabi"     /* v4d helpers are always inlined: no call passes a vector */
typedef double v4d __attribute__((vector_size(32)));
typedef long long v4i __attribute__((vector_size(32)));
static inline ALWAYS_INLINE v4d ld4(const double *p) { v4d v; memcpy(&v, p, sizeof v); return v; }
static inline ALWAYS_INLINE void st4(double *p, v4d v) { memcpy(p, &v, sizeof v); }
static inline ALWAYS_INLINE v4d vabs4(v4d v) { return (v4d)((v4i)v & 0x7fffffffffffffffLL); }
#endif

/* x's sums: v1 of x, va of |x|, vq of x^2 (8 lanes each) */
static inline ALWAYS_INLINE void sums_x(const double *restrict x, Py_ssize_t n, double *v1, double *va, double *vq)
{
    Py_ssize_t j = 0;
#if VECTOR_EXT
    v4d a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0 = {0}, c1 = {0};
    for (; j + 8 <= n; j += 8) {
        v4d x0 = ld4(x + j), x1 = ld4(x + j + 4);
        a0 += x0; a1 += x1;
        b0 += vabs4(x0); b1 += vabs4(x1);
        c0 += x0 * x0; c1 += x1 * x1;
    }
    st4(v1, a0); st4(v1 + 4, a1); st4(va, b0); st4(va + 4, b1); st4(vq, c0); st4(vq + 4, c1);
#else
    for (int l = 0; l < 8; l++)
        v1[l] = va[l] = vq[l] = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            v1[l] += x[j + l];
            va[l] += fabs(x[j + l]);
            vq[l] += x[j + l] * x[j + l];
        }
#endif
    for (int l = 0; j < n; j++, l++) {
        v1[l] += x[j];
        va[l] += fabs(x[j]);
        vq[l] += x[j] * x[j];
    }
}

/* the sum of (x - mu)^2 (8 lanes) */
static inline ALWAYS_INLINE void sum_d2(const double *restrict x, Py_ssize_t n, double mu, double *v2)
{
    Py_ssize_t j = 0;
#if VECTOR_EXT
    v4d a0 = {0}, a1 = {0};
    for (; j + 8 <= n; j += 8) {
        v4d d0 = ld4(x + j) - mu, d1 = ld4(x + j + 4) - mu;
        a0 += d0 * d0;
        a1 += d1 * d1;
    }
    st4(v2, a0); st4(v2 + 4, a1);
#else
    for (int l = 0; l < 8; l++)
        v2[l] = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            double d = x[j + l] - mu;
            v2[l] += d * d;
        }
#endif
    for (int l = 0; j < n; j++, l++) {
        double d = x[j] - mu;
        v2[l] += d * d;
    }
}

/* sums_g's terms of elements j..j+3 (vectors; GW: their g w) and of element j alone into lane l */
#define SUMS_G4(j, GW)                                                                                    \
    do {                                                                                                  \
        v4d xv = ld4(x + (j)), xh = (xv - mu) * r, axh = vabs4(xh);                                       \
        v4d gw = (GW), agw = vabs4(gw);                                                                   \
        v4d kap = centered ? r * (vabs4(xv) + amu) : axh;                                                 \
        s0 += gw; s1 += agw; s2 += gw * xh; s3 += agw * axh; s4 += agw * kap; s5 += agw * (Dc + axh);     \
    } while (0)
#define SUMS_G1(j, GW, l)                                                                                 \
    do {                                                                                                  \
        double xh = (x[j] - mu) * r, axh = fabs(xh);                                                      \
        double gw = (GW), agw = fabs(gw);                                                                 \
        double kap = centered ? r * (fabs(x[j]) + amu) : axh;                                             \
        o[0][l] += gw; o[1][l] += agw; o[2][l] += gw * xh; o[3][l] += agw * axh; o[4][l] += agw * kap;    \
        o[5][l] += agw * (Dc + axh);                                                                      \
    } while (0)

/* the six sums with the cotangent (4 lanes each, o[k][lane]; element j into lane j % 4): g w, |g w|, g w xh,
 * |g w| |xh|, |g w| kap, |g w| (Dc + |xh|), where xh = (x - mu) r and kap = r (|x| + |mu|) (centered) or
 * |xh|. rep 0: a weight per element, w[j]; rep > 0 (a multiple of 4, n = rep * runs): a weight per run of
 * rep elements, w[j / rep] read once a run (w NULL: 1), the same lanes and operations */
static inline ALWAYS_INLINE void sums_g(const double *restrict x, const double *restrict g, const double *restrict w,
                                        Py_ssize_t rep, Py_ssize_t n, double mu, double r, double amu, int centered,
                                        double Dc, double o[6][4])
{
    Py_ssize_t j = 0;
#if VECTOR_EXT
    v4d s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0};
    if (rep)
        for (Py_ssize_t k = 0; k < n / rep; k++) {
            const double wk = w ? w[k] : 1.0;
            for (j = k * rep; j < (k + 1) * rep; j += 4)
                SUMS_G4(j, ld4(g + j) * wk);
        }
    else
        for (; j + 4 <= n; j += 4)
            SUMS_G4(j, ld4(g + j) * ld4(w + j));
    st4(o[0], s0); st4(o[1], s1); st4(o[2], s2); st4(o[3], s3); st4(o[4], s4); st4(o[5], s5);
#else
    for (int k = 0; k < 6; k++)
        for (int l = 0; l < 4; l++)
            o[k][l] = 0;
#endif
    for (; j < n; j++)                  /* rep 0: the tail; without the vector extensions: every element */
        SUMS_G1(j, g[j] * (rep ? (w ? w[j / rep] : 1.0) : w[j]), (int)(j & 3));
}

static inline ALWAYS_INLINE double lanes4_sum(const double *v)
{
    return (v[0] + v[2]) + (v[1] + v[3]);
}

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

/* 2^k for -1022 <= k <= 1023, built from its bits (no libm call in the loop) */
static inline double pow2(int k)
{
    union { uint64_t u; double d; } v;
    v.u = (uint64_t)(k + 1023) << 52;
    return v.d;
}

/* [lo, hi]: the reals that round to g in the dtype (precision.rounding_interval); g is a value of
 * the dtype (float32, float16 or bfloat16 here: their spacings are normal float64 numbers). */
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
        away = pow2(d->emin - d->p + 1);
        *lo = -away / 2;
        *hi = away / 2;
        return;
    }
    union { double d; uint64_t u; } v;
    v.d = a;
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;        /* a in [2^e, 2^(e+1)): a is a normal float64 */
    int ee = e > d->emin ? e : d->emin;
    away = pow2(ee - d->p + 1);
    toward = ((v.u & 0xfffffffffffffULL) == 0 && e > d->emin) ? away / 2 : away;
    if (g > 0) { *lo = g - toward / 2; *hi = g + away / 2; }
    else { *lo = g - away / 2; *hi = g + toward / 2; }
}

/* x (finite) correctly rounded to the dtype, to nearest, ties to even, as precision.round_to: +-inf where that
 * rounds beyond the largest finite value (NaN for a non-finite x); float64: x. The spacing s of the dtype at
 * x's binade (2^(max(e, emin) - p + 1)) and C = 1.5 2^52 s: x + C lies in [2^52 s, 2^53 s), whose float64
 * spacing is s, so the addition rounds x to a multiple of s, ties to even, and subtracting C is exact. */
static inline ALWAYS_INLINE double round_dt(const struct dt *d, double x)
{
    if (d->kind == 0)
        return x;
    uint64_t u;
    memcpy(&u, &x, 8);
    int64_t eb = (int64_t)((u >> 52) & 0x7ff), eminb = d->emin + 1023;
    uint64_t sb = (uint64_t)((eb > eminb ? eb : eminb) + 1 - d->p) << 52;
    double s;
    memcpy(&s, &sb, 8);
    double C = s * 0x1.8p52, R = (x + C) - C;
    return fabs(R) <= d->fmax ? R : (isnan(R) ? R : copysign(INFINITY, x));
}

/* the three worst elements: ratio, flat index, and the element's returned value, reference and bound */
struct top3 { double r[3], g[3], ref[3], E[3]; Py_ssize_t i[3]; int n; };

static inline void top_add(struct top3 *t, double r, Py_ssize_t i, double g, double ref, double E)
{
    /* larger ratio first, then the lower index; the elements arrive in increasing index */
    if (t->n == 3 && !(r > t->r[2]))
        return;
    int j = t->n < 3 ? t->n++ : 2;
    while (j > 0 && r > t->r[j - 1]) {
        t->r[j] = t->r[j - 1];
        t->i[j] = t->i[j - 1];
        t->g[j] = t->g[j - 1];
        t->ref[j] = t->ref[j - 1];
        t->E[j] = t->E[j - 1];
        j--;
    }
    t->r[j] = r;
    t->i[j] = i;
    t->g[j] = g;
    t->ref[j] = ref;
    t->E[j] = E;
}

/* precision.excess: the distance from ri to the rounding interval [lo, hi] of gi (interval(), also set) */
static inline double excess_at(const struct dt *d, double gi, double ri, double *lo, double *hi)
{
    interval(d, gi, lo, hi);
    int gnan = isnan(gi), rnan = isnan(ri);
    if (gnan || rnan)
        return (gnan && rnan) ? 0.0 : INFINITY;
    if (isinf(ri))
        return gi == ri ? 0.0 : INFINITY;
    double a = *lo - ri, b = ri - *hi;
    if (isnan(a) || isnan(b))
        return INFINITY;
    double ex = a > b ? a : b;
    return ex < 0 ? 0.0 : ex;
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
enum { CHUNK = 256 };

/* core._judge's ratio of a finite excess ex to a finite bound Ei (0 / 0 = 0, ex / 0 = inf) */
static inline double ratio_of(double ex, double Ei)
{
    return Ei == 0 ? (ex > 0 ? INFINITY : 0.0) : ex / Ei;
}

/* One piece of finite elements (n elements of one segment of the last axis), in one pass: each element's
 * terms, reduced at once (nothing but r is stored):
 *   - the ratio ex / E (ratio_of) only where it may exceed T ("hot"; where ex <= t E, a normal product,
 *     ex / E rounds to at most T, with t = T (1 - 2^-50)): its maximum and the count over 1 in RL lanes
 *     (L: exact whatever the lanes), and r[j] = the ratio where it exceeds thr (the third worst so far:
 *     it may join the worst three, which cmp_run decides in element order), else -1;
 *   - the maxima and counts that need no ratio, in RL lanes (L): max E, max |g - ref| of the constrained
 *     (an element is unconstrained where 0 < E and E >= scale), their count, max |ref|;
 *   - the bias test's terms: (g - R) * sign(ref), R = round_dt(ref) the correctly rounded reference, E
 *     and width^2 (times the multiplicity m16 or m32, when given), 0 where g - R overflows or R is not
 *     finite (the test leaves the element out); their sums over the piece in
 *     LANES lanes (element j into lane j % 8, the lanes added by lanes_sum) into *ls, *le, *lq, and each
 *     element's own into a0, a1, a2 (the groups of the last axis; NULL: none).
 * nseg pieces of n elements, one after the other (whole segments of a short last axis: the same a0, a1, a2
 * for each), each with its own sums ls[k], le[k], lq[k]: the same operations as nseg calls of one piece,
 * with the constants and the maxima's lanes held in registers from one piece to the next.
 * interval(): the spacing away from zero and toward it, each side picked by the sign (for 0, toward =
 * away); float64 (kind 0): the value itself. Returns how many r[j] are set. The vector loop (GCC's
 * vector extensions, two vectors of four a step: lanes 0-3 and 4-7) and the element one (its tail, and
 * the whole piece without the extensions) do the same operations on every element, in the same lanes:
 * the same bits. Compiled for AVX-512, AVX2 and the base ISA (INSTANCES). */
#define PIECE_ARGS const struct dt *restrict d, const double *restrict g, const double *restrict ref,           \
    const double *restrict E, const uint16_t *restrict m16, const uint32_t *restrict m32, Py_ssize_t n,          \
    double scale, double t, double thr, double *restrict r, struct lanes_acc *restrict L, double *restrict a0,   \
    double *restrict a1, double *restrict a2, double *ls, double *le, double *lq, int plain, Py_ssize_t nseg

enum { RL = 4 };
struct lanes_acc { double maxE[RL], dmax[RL], mref[RL], rmax[RL]; long long unc[RL], over[RL]; };

/* element j of a piece: its terms into lane l (of 8) of s, e, q and lane l % RL of L; returns 1 if hot */
static inline ALWAYS_INLINE int piece_elem(const struct dt *restrict d, const double *restrict g,
                                           const double *restrict ref, const double *restrict E,
                                           const uint16_t *restrict m16, const uint32_t *restrict m32,
                                           Py_ssize_t j, int l, double scale, double t, double thr, double *restrict r,
                                           struct lanes_acc *restrict L, double *restrict a0, double *restrict a1,
                                           double *restrict a2, double *s, double *e_, double *q)
{
    const int64_t emin = d->emin, sh = 1 - d->p + 1023;
    double gi = g[j], ri = ref[j], Ei = E[j];
    uint64_t u;
    memcpy(&u, &gi, 8);
    int64_t e = (int64_t)((u >> 52) & 0x7ff) - 1023;        /* gi = 0: e = -1023, the zero case */
    int64_t ee = e > emin ? e : emin;
    uint64_t pb = (uint64_t)(ee + sh) << 52;
    double away;
    memcpy(&away, &pb, 8);
    double half = ((u & 0xfffffffffffffULL) == 0 && e > emin) ? 0.5 : 1.0;
    double toward = away * half;
    int neg = (int64_t)u < 0;                                /* -0 too: for 0, toward = away */
    double dl = neg ? away : toward, dh = neg ? toward : away;
    double lo = d->kind == 0 ? gi : gi - dl / 2, hi = d->kind == 0 ? gi : gi + dh / 2;
    double a = lo - ri, b = ri - hi;
    double ex = a > b ? a : b;
    ex = ex > 0 ? ex : 0.0;
    double tE = t * Ei;
    int hot = ex > tE || (ex > 0 && tE < 0x1p-1000);
    double rr = hot ? ratio_of(ex, Ei) : 0.0;
    int top = rr > thr;
    r[j] = top ? rr : -1.0;
    double err = gi - round_dt(d, ri), width = hi - lo;    /* against the correctly rounded reference */
    int ok = fabs(err) <= DBL_MAX;
    double sg = ri > 0 ? 1.0 : (ri < 0 ? -1.0 : 0.0);
    double sv = ok ? err * sg : 0.0, ev = ok ? Ei : 0.0, w2 = ok ? width * width : 0.0;
    if (m16)
        w2 *= (double)m16[j];
    else if (m32)
        w2 *= (double)m32[j];
    s[l] += sv;
    e_[l] += ev;
    q[l] += w2;
    if (a0) {
        a0[j] += sv;
        a1[j] += ev;
        a2[j] += w2;
    }
    double dm = (Ei > 0 && Ei >= scale) ? -1.0 : fabs(gi - ri);
    int k = l % RL;
    L->mref[k] = fabs(ri) > L->mref[k] ? fabs(ri) : L->mref[k];
    L->maxE[k] = Ei > L->maxE[k] ? Ei : L->maxE[k];
    L->unc[k] += dm < 0;
    L->dmax[k] = dm > L->dmax[k] ? dm : L->dmax[k];
    L->rmax[k] = rr > L->rmax[k] ? rr : L->rmax[k];
    L->over[k] += rr > 1;
    return top;
}

#if VECTOR_EXT
static inline ALWAYS_INLINE v4d vmax4(v4d a, v4d b)      /* a > b ? a : b, lane by lane */
{
    v4i m = a > b;
    return (v4d)(((v4i)a & m) | ((v4i)b & ~m));
}

static inline ALWAYS_INLINE v4d vmin4(v4d a, v4d b)      /* a < b ? a : b, lane by lane */
{
    v4i m = a < b;
    return (v4d)(((v4i)a & m) | ((v4i)b & ~m));
}

static inline ALWAYS_INLINE double hmin4(v4d v)
{
    double a = v[0] < v[1] ? v[0] : v[1], b = v[2] < v[3] ? v[2] : v[3];
    return a < b ? a : b;
}

static inline ALWAYS_INLINE double hmax4(v4d v)
{
    double a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
    return a > b ? a : b;
}

static inline ALWAYS_INLINE v4d vsel4(v4i m, v4d a, v4d b)   /* m ? a : b, lane by lane */
{
    return (v4d)(((v4i)a & m) | ((v4i)b & ~m));
}

/* 1 when some lane of the mask m is set */
static inline ALWAYS_INLINE int any4(v4i m)
{
#if defined(__clang__)
    v4i o = m | __builtin_shufflevector(m, m, 2, 3, 0, 1);
#else
    v4i o = m | __builtin_shuffle(m, (v4i){2, 3, 0, 1});
#endif
    return (o[0] | o[1]) != 0;
}

static inline ALWAYS_INLINE v4i ld4i(const long long *p) { v4i v; memcpy(&v, p, sizeof v); return v; }
static inline ALWAYS_INLINE void st4i(long long *p, v4i v) { memcpy(p, &v, sizeof v); }

/* piece_elem for elements J..J+3 (lanes 0-3 of the vectors SV, EV, QV), with two shortcuts that give
 * the same values:
 *   - the excess ex (the distance from ref to g's rounding interval [lo, hi], which holds g and reaches
 *     at least half the spacing toward zero to each side, a4 = toward / 2; float64: a4 = 0) is at most
 *     |g - ref| - a4.
 *     An element is hot only where fl(ex) > tE (or ex > 0 with tE < 2^-1000), so where g - ref, say,
 *     exceeds tE + a4 as reals, so where |g - ref| >= fl(tE + a4) (rounding is monotonic) > (tE + a4)
 *     0.999 as computed: the interval is formed only for a vector with an element past that test;
 *   - the interval's width hi - lo is (away + toward) / 2, exactly (g has p significant bits, so g +-
 *     half a spacing is a float64): the spacing away from zero, times 3/4 where g is a power of two
 *     above the smallest normal (toward = away / 2), else times 1; 0 for float64 (lo = hi = g). */
/* PIECE4 in three parts, for elements J..J+3 (X: the vectors' suffix): PIECE4_A the element's values and the
 * candidate test, PIECE4_HOT the ratios (run for a vector with a candidate; for a vector without one it
 * sets r to -1 and changes nothing else: hv is 0 in every lane), PIECE4_B the sums and maxima. The loops
 * below test the candidates of two vectors (eight elements) at once. */
#define PIECE4_A(J, X, PLAIN)                                                                             \
        v4d gi##X = ld4(g + (J)), ri##X = ld4(ref + (J)), Ei##X = ld4(E + (J));                           \
        v4d err##X = gi##X - ri##X, aerr##X = vabs4(err##X), tE##X = t * Ei##X;                           \
        v4i u##X = (v4i)gi##X;                                                                            \
        v4i eb##X = (u##X >> 52) & 0x7ff;                             /* the biased exponent */           \
        v4i gt##X = eb##X > eminb;                                                                        \
        v4i ee##X = (eb##X & gt##X) | (eminb & ~gt##X);                                                   \
        v4d away##X = (v4d)((ee##X + shb) << 52);                                                         \
        v4i pow2##X = ((u##X & 0xfffffffffffffLL) == 0) & gt##X;                                          \
        v4d tw##X = vsel4(pow2##X, half, one);                        /* toward / away */                 \
        v4d a4##X = k0 ? zero : away##X * tw##X * 0.5;                /* toward / 2 */                    \
        v4i cand##X = PLAIN ? aerr##X > (tE##X + a4##X) * 0.999                    /* every hot one */    \
                            : (aerr##X > (tE##X + a4##X) * 0.999) | ((aerr##X > 0) & (tE##X < 0x1p-1000));   \
        v4d width##X = k0 ? zero : away##X * vsel4(pow2##X, three4, one);

#define PIECE4_HOT(J, X)                                                                                  \
    do {                                                                                                  \
        v4d toward = away##X * tw##X;                                                                     \
        v4i neg = u##X < 0;                                                                               \
        v4d dl = vsel4(neg, away##X, toward), dh = vsel4(neg, toward, away##X);                           \
        v4d lo = k0 ? gi##X : gi##X - dl / 2, hi = k0 ? gi##X : gi##X + dh / 2;                           \
        v4d a = lo - ri##X, b = ri##X - hi;                                                               \
        v4d ex = vmax4(a, b);                                                                             \
        ex = vsel4(ex > 0, ex, zero);                                                                     \
        v4i hv = (ex > tE##X) | ((ex > 0) & (tE##X < 0x1p-1000));                                         \
        v4d rr = (v4d)(hv & (v4i)vsel4(Ei##X == 0, vsel4(ex > 0, inf4, zero), ex / Ei##X));  /* ratio_of */ \
        st4(L->rmax, vmax4(rr, ld4(L->rmax)));              /* in memory: no register held by the loop */ \
        st4i(L->over, ld4i(L->over) - (rr > 1));                                                          \
        v4i tm = rr > thr;                                                                                \
        st4(r + (J), vsel4(tm, rr, mone));                                                                \
        hot -= tm;                                                                                        \
    } while (0)

#define PIECE4_B(J, JA, X, SV, EV, QV, PLAIN)                                                             \
    do {                                                                                                  \
        v4i rb = ((v4i)ri##X >> 52) & 0x7ff, rg = rb > eminb;     /* round_dt(ri): R, and okr: R finite */ \
        v4d cm = (v4d)((((rb & rg) | (eminb & ~rg)) + shb) << 52) * 0x1.8p52;                             \
        v4d R = k0 ? ri##X : (ri##X + cm) - cm;                                                           \
        v4i okr = vabs4(R) <= fmax4;                                                                      \
        v4d D = gi##X - R;                                                                                \
        v4d sv = (v4d)((((v4i)D) ^ ((v4i)ri##X & signb)) & (ri##X != 0) & okr), ev = (v4d)((v4i)Ei##X & okr); \
        v4d w2 = (v4d)((v4i)(width##X * width##X) & okr);                                                 \
        if (m16)                                                                                          \
            w2 *= (v4d){m16[(J)], m16[(J) + 1], m16[(J) + 2], m16[(J) + 3]};                              \
        else if (m32)                                                                                     \
            w2 *= (v4d){m32[(J)], m32[(J) + 1], m32[(J) + 2], m32[(J) + 3]};                              \
        SV += sv;                                                                                         \
        EV += ev;                                                                                         \
        QV += w2;                                                                                         \
        if (HAS_A || a0) {                                                                                \
            st4(a0 + (JA), ld4(a0 + (JA)) + sv);                                                          \
            st4(a1 + (JA), ld4(a1 + (JA)) + ev);                                                          \
            st4(a2 + (JA), ld4(a2 + (JA)) + w2);                                                          \
        }                                                                                                 \
        mref = vmax4(vabs4(ri##X), mref);                                                                 \
        if (PLAIN)                      /* no element unconstrained; the chunk's largest bound: cmp_run */ \
            dmax = vmax4(aerr##X, dmax);                                                                  \
        else {                                                                                            \
            v4d dm = vsel4((Ei##X > 0) & (Ei##X >= scale), mone, aerr##X);                                \
            maxE = vmax4(Ei##X, maxE);                                                                    \
            unc -= dm < 0;                                                                                \
            dmax = vmax4(dm, dmax);                                                                       \
        }                                                                                                 \
    } while (0)

/* elements J..J+7 (lanes 0-3 into S0, E0, Q0, lanes 4-7 into S1, E1, Q1; JA: their index in the segment) */
#define PIECE8(J, JA, PLAIN)                                                                              \
    do {                                                                                                  \
        PIECE4_A(J, _0, PLAIN)                                                                            \
        PIECE4_A((J) + 4, _1, PLAIN)                                                                      \
        if (__builtin_expect(any4(cand_0 | cand_1), 0)) {                                                 \
            PIECE4_HOT(J, _0);                                                                            \
            PIECE4_HOT((J) + 4, _1);                                                                      \
        } else {                                                                                          \
            st4(r + (J), mone);                                                                           \
            st4(r + (J) + 4, mone);                                                                       \
        }                                                                                                 \
        PIECE4_B(J, JA, _0, s0, e0, q0, PLAIN);                                                           \
        PIECE4_B((J) + 4, (JA) + 4, _1, s1, e1, q1, PLAIN);                                               \
    } while (0)

/* elements J..J+3 into lanes 0-3 */
#define PIECE4(J, JA, PLAIN)                                                                              \
    do {                                                                                                  \
        PIECE4_A(J, _0, PLAIN)                                                                            \
        if (__builtin_expect(any4(cand_0), 0))                                                            \
            PIECE4_HOT(J, _0);                                                                            \
        else                                                                                              \
            st4(r + (J), mone);                                                                           \
        PIECE4_B(J, JA, _0, s0, e0, q0, PLAIN);                                                           \
    } while (0)

/* segment o..o+n-1's whole vectors: eight elements a step, then lanes 0-3 once more where four are left (W =
 * 28: no element left to the tail) */
#define SEGMENT_VECTORS(PLAIN)                                                                            \
    do {                                                                                                  \
        for (; j + 8 <= n; j += 8)                                                                        \
            PIECE8(o + j, j, PLAIN);                                                                      \
        if (j + 4 <= n) {                                                                                 \
            PIECE4(o + j, j, PLAIN);                                                                      \
            j += 4;                                                                                       \
        }                                                                                                 \
    } while (0)

#define PIECE_BODY                                                                                        \
    const long long eminb = d->emin + 1023, shb = 1 - d->p;                                               \
    const int k0 = d->kind == 0;                                                                          \
    const v4d zero = {0}, one = zero + 1.0, mone = zero - 1.0, half = zero + 0.5, three4 = zero + 0.75;    \
    const v4d inf4 = zero + INFINITY, fmax4 = zero + d->fmax;                                             \
    const v4i signb = (v4i){0} + (long long)0x8000000000000000ULL;                                       \
    v4d maxE = ld4(L->maxE), dmax = ld4(L->dmax), mref = ld4(L->mref);                                    \
    v4i unc = ld4i(L->unc), hot = {0};                                                                    \
    Py_ssize_t nhot = 0;                                                                                  \
    enum { HAS_A = 0 };                 /* 1 in the loop of the common case: a0 is known to be given */   \
    const int common = plain && !k0 && !m16 && !m32 && a0;                                                \
    for (Py_ssize_t k = 0; k < nseg; k++) {                                                               \
        const Py_ssize_t o = k * n;                 /* segment k: elements o..o+n-1 */                   \
        v4d s0 = {0}, s1 = {0}, e0 = {0}, e1 = {0}, q0 = {0}, q1 = {0};                                   \
        Py_ssize_t j = 0;                                                                                 \
        if (common) {                   /* the common case's loop, its conditions known when compiled:     \
                                         * float32 or 16-bit values, no multiplicities, the last axis's    \
                                         * sums (the same operations as below) */                         \
            enum { k0 = 0, HAS_A = 1 };                                                                   \
            const uint16_t *const m16 = NULL;                                                             \
            const uint32_t *const m32 = NULL;                                                             \
            SEGMENT_VECTORS(1);                                                                           \
        } else if (plain)                                                                                 \
            SEGMENT_VECTORS(1);                                                                           \
        else                                                                                              \
            SEGMENT_VECTORS(0);                                                                           \
        if (j < n) {                    /* the tail, element by element, its lanes in memory */           \
            st4(L->maxE, maxE); st4(L->dmax, dmax); st4(L->mref, mref); st4i(L->unc, unc);                \
            double s[LANES], e[LANES], q[LANES];                                                          \
            st4(s, s0); st4(s + 4, s1); st4(e, e0); st4(e + 4, e1); st4(q, q0); st4(q + 4, q1);           \
            PIECE_TAIL(o, k)                                                                              \
            maxE = ld4(L->maxE); dmax = ld4(L->dmax); mref = ld4(L->mref); unc = ld4i(L->unc);            \
        } else {                        /* lanes_sum of the lanes in s0 (0-3) and s1 (4-7), in registers */ \
            v4d ts = s0 + s1, te = e0 + e1, tq = q0 + q1;                                                 \
            ls[k] = (ts[0] + ts[2]) + (ts[1] + ts[3]);                                                    \
            le[k] = (te[0] + te[2]) + (te[1] + te[3]);                                                    \
            lq[k] = (tq[0] + tq[2]) + (tq[1] + tq[3]);                                                    \
        }                                                                                                 \
    }                                                                                                     \
    st4(L->maxE, maxE); st4(L->dmax, dmax); st4(L->mref, mref); st4i(L->unc, unc);                        \
    long long h[RL];                                                                                      \
    st4i(h, hot);                                                                                         \
    return nhot + (h[0] + h[1]) + (h[2] + h[3]);
#else
#define PIECE_BODY                                                                                        \
    Py_ssize_t nhot = 0;                                                                                  \
    (void)plain;                        /* every element by piece_elem */                                 \
    for (Py_ssize_t k = 0; k < nseg; k++) {                                                               \
        const Py_ssize_t o = k * n, j = 0;                                                                \
        double s[LANES] = {0}, e[LANES] = {0}, q[LANES] = {0};                                            \
        PIECE_TAIL(o, k)                                                                                  \
    }                                                                                                     \
    return nhot;
#endif
/* segment k's elements j.. (from element o) one by one (element j into lane j % 8), and its sums */
#define PIECE_TAIL(o, k)                                                                                  \
    for (Py_ssize_t jj = j; jj < n; jj++)                                                                 \
        nhot += piece_elem(d, g + o, ref + o, E + o, m16 ? m16 + o : NULL, m32 ? m32 + o : NULL, jj,      \
                           (int)(jj % LANES), scale, t, thr, r + o, L, a0, a1, a2, s, e, q);              \
    ls[k] = lanes_sum(s);                                                                                 \
    le[k] = lanes_sum(e);                                                                                 \
    lq[k] = lanes_sum(q);

/* no-trapping-math: selects of comparisons become blends (no value changes; no FP trap is enabled) */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_TRAPS __attribute__((optimize("no-trapping-math")))
#else
#define NO_TRAPS
#endif
/* inlined into cmp_run's instances (one per instruction set, below) */
static inline ALWAYS_INLINE Py_ssize_t piece(PIECE_ARGS) { PIECE_BODY }

/* The instruction sets the vector loops are compiled for, best first: AVX-512 (F, VL, DQ, BW: the same
 * 256-bit vectors, with mask registers for the compares and selects and 32 vector registers), AVX2, and
 * the base ISA. Every instance does the same operations in the same order (no fused multiply-add:
 * -ffp-contract=off): the same bits (tests/test_compare.py, tests/test_stream.py run each). */
enum { ISA_BASE, ISA_AVX2, ISA_AVX512 };
static const char *const ISA_NAMES[] = {"base", "avx2", "avx512"};
static int isa = -1;           /* the loops in use: -1 not decided yet (the CPU decides; set_isa) */

static int best_isa(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        return ISA_AVX512;
    return __builtin_cpu_supports("avx2") ? ISA_AVX2 : ISA_BASE;
#else
    return ISA_BASE;
#endif
}

/* ISA(fn, args...): fn_avx512, fn_avx2 or fn_base (args), the best the CPU runs (set_isa may force a lower one) */
#if defined(__GNUC__) && defined(__x86_64__)
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512vl,avx512dq,avx512bw")))
static inline int use_isa(void)
{
    if (isa < 0)
        isa = best_isa();
    return isa;
}
#define ISA(fn, ...) (use_isa() == ISA_AVX512 ? fn##_avx512(__VA_ARGS__)                                    \
                      : use_isa() == ISA_AVX2 ? fn##_avx2(__VA_ARGS__) : fn##_base(__VA_ARGS__))
/* the instances of a function: INSTANCES(static void, name, (ARGS), body) */
#define INSTANCES(ret, fn, args, ...)                                                                     \
    TARGET_AVX512 NO_TRAPS ret fn##_avx512 args { __VA_ARGS__ }                                           \
    TARGET_AVX2 NO_TRAPS ret fn##_avx2 args { __VA_ARGS__ }                                               \
    NO_TRAPS ret fn##_base args { __VA_ARGS__ }
#else
#define ISA(fn, ...) fn##_base(__VA_ARGS__)
#define INSTANCES(ret, fn, args, ...) NO_TRAPS ret fn##_base args { __VA_ARGS__ }
#endif


/* 1 when every value of the three blocks is finite and those of a and b (returned values, reference) are
 * also "tame": a + a finite (x - x is 0 for a finite x, NaN for inf or NaN). Then g - ref is finite: |g - ref|
 * <= |g| + |ref| <= 2 max(|g|, |ref|), and rounding is monotonic. */
#define FINITE_ARGS const double *restrict a, const double *restrict b, const double *restrict c, Py_ssize_t n,   \
    double *restrict cmm
#if VECTOR_EXT
#define FINITE_BODY                                                                                       \
    v4d z0 = {0}, z1 = {0}, mn = {0}, mx = {0};                                                           \
    mn += INFINITY;                                                                                       \
    mx -= INFINITY;                                                                                       \
    Py_ssize_t j = 0;                                                                                     \
    for (; j + 8 <= n; j += 8) {                                                                          \
        v4d a0 = ld4(a + j), a1 = ld4(a + j + 4), b0 = ld4(b + j), b1 = ld4(b + j + 4);                  \
        v4d c0 = ld4(c + j), c1 = ld4(c + j + 4);                                                         \
        mn = vmin4(vmin4(c0, c1), mn);                                                                    \
        mx = vmax4(vmax4(c0, c1), mx);                                                                    \
        a0 += a0; a1 += a1; b0 += b0; b1 += b1;                                                              \
        z0 += ((a0 - a0) + (b0 - b0)) + (c0 - c0);                                                        \
        z1 += ((a1 - a1) + (b1 - b1)) + (c1 - c1);                                                        \
    }                                                                                                     \
    double z[LANES];                                                                                      \
    st4(z, z0); st4(z + 4, z1);                                                                           \
    cmm[0] = hmin4(mn);                                                                                   \
    cmm[1] = hmax4(mx);                                                                                   \
    for (int l = 0; j < n; j++, l++) {                                                                    \
        z[l] += (((a[j] + a[j]) - (a[j] + a[j])) + ((b[j] + b[j]) - (b[j] + b[j]))) + (c[j] - c[j]);        \
        cmm[0] = c[j] < cmm[0] ? c[j] : cmm[0];                                                           \
        cmm[1] = c[j] > cmm[1] ? c[j] : cmm[1];                                                           \
    }                                                                                                     \
    return lanes_sum(z) == 0;
#else
#define FINITE_BODY                                                                                       \
    double z[LANES] = {0};                                                                                \
    cmm[0] = INFINITY;                                                                                    \
    cmm[1] = -INFINITY;                                                                                   \
    LANE_LOOP(n, j, l, z[l] += (((a[j] + a[j]) - (a[j] + a[j])) + ((b[j] + b[j]) - (b[j] + b[j]))) + (c[j] - c[j]); \
              cmm[0] = c[j] < cmm[0] ? c[j] : cmm[0]; cmm[1] = c[j] > cmm[1] ? c[j] : cmm[1];);               \
    return lanes_sum(z) == 0;
#endif

static inline ALWAYS_INLINE int all_finite(FINITE_ARGS) { FINITE_BODY }

/* The value of each of the 65536 bit patterns of a 16-bit dtype (kind 2: float16, 3: bfloat16), exactly, from
 * integers only (no float32 step: a flush-denormals mode could not change a subnormal's value); made once, under
 * the GIL (value_table). */
static double *v16_tables[4];

static double pattern_value(int kind, uint16_t h)
{
    const int mb = kind == 2 ? 10 : 7, eb = 15 - mb, bias = (1 << (eb - 1)) - 1;
    const int e = (h >> mb) & ((1 << eb) - 1), m = h & ((1 << mb) - 1);
    double v;
    if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);                       /* zero, subnormal */
    else if (e == (1 << eb) - 1)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m | (1 << mb)), e - bias - mb);
    return (h >> 15) ? -v : v;
}

static const double *value_table(int kind)
{
    if (!v16_tables[kind]) {
        double *t = PyMem_RawMalloc(65536 * sizeof *t);
        if (!t)
            return NULL;
        for (int h = 0; h < 65536; h++)
            t[h] = pattern_value(kind, (uint16_t)h);
        v16_tables[kind] = t;
    }
    return v16_tables[kind];
}

/* b[j] = the value of element j: float32 a32[j] widened (exactly), or the value vt[a16[j]] of 16-bit pattern
 * a16[j] (a32 NULL), for n values, and mb[j] = mt[a16[j]] (the multiplicities: the counts of the array's
 * patterns) when mt is given; 1 when these values and those of r and E are all finite and r's tame
 * (all_finite; a float32 or 16-bit value is); emm: the least and the largest of E (meaningful when finite) */
static inline ALWAYS_INLINE int widen_finite(const float *restrict a32, const uint16_t *restrict a16,
                                             const double *restrict vt, const uint32_t *restrict mt,
                                             double *restrict b, uint32_t *restrict mb, const double *restrict r,
                                             const double *restrict E, Py_ssize_t n, double *restrict emm)
{
    Py_ssize_t j = 0;
    if (mt)
        for (Py_ssize_t k = 0; k < n; k++)
            mb[k] = mt[a16[k]];
    emm[0] = INFINITY;
    emm[1] = -INFINITY;
#if VECTOR_EXT
    typedef float v4f __attribute__((vector_size(16)));
    v4d z = {0}, mn = {0}, mx = {0};
    mn += INFINITY;
    mx -= INFINITY;
    for (; j + 4 <= n; j += 4) {
        v4d g;
        if (a32) {
            v4f f;
            memcpy(&f, a32 + j, sizeof f);
            g = __builtin_convertvector(f, v4d);
        } else
            g = (v4d){vt[a16[j]], vt[a16[j + 1]], vt[a16[j + 2]], vt[a16[j + 3]]};
        v4d rv = ld4(r + j), ev = ld4(E + j);
        st4(b + j, g);
        mn = vmin4(ev, mn);
        mx = vmax4(ev, mx);
        rv += rv;
        z += ((g - g) + (rv - rv)) + (ev - ev);
    }
    double zs = (z[0] + z[1]) + (z[2] + z[3]);
    emm[0] = hmin4(mn);
    emm[1] = hmax4(mx);
#else
    double zs = 0;
#endif
    for (; j < n; j++) {
        b[j] = a32 ? (double)a32[j] : vt[a16[j]];
        zs += ((b[j] - b[j]) + ((r[j] + r[j]) - (r[j] + r[j]))) + (E[j] - E[j]);
        emm[0] = E[j] < emm[0] ? E[j] : emm[0];
        emm[1] = E[j] > emm[1] ? E[j] : emm[1];
    }
    return zs == 0;
}

/* The comparison of one returned array with its reference (compare.compare_block is the definition): its
 * figures accumulated over runs of elements (cmp_run), each run consecutive in the C order of the whole
 * array (shape), with the bias sums of the groups ("all", then each axis's indices: compare._acc_len)
 * added into acc (3 * acc_len: sums of (g - round_dt(ref)) * sign(ref), of E, of width^2 * multiplicity). top: the three
 * worst (ratio, flat index). */
struct cmp {
    struct dt d;
    double lo_inf, scale;
    Py_ssize_t nd, shape[MAXDIM], offs[MAXDIM + 1], acc_len;
    double *acc;
    double maxr, dmax, maxE, mref;
    Py_ssize_t over, unc;
    int dmax_nan, maxE_nan;
    struct top3 top;
    struct lanes_acc lacc;
};

/* shape: nd sizes (checked >= 0 by the caller); acc: 3 * acc_len doubles (cmp_acc_len) */
static Py_ssize_t cmp_acc_len(Py_ssize_t nd, const Py_ssize_t *shape, Py_ssize_t *offs)
{
    Py_ssize_t acc_len = 1;          /* group offsets in acc (in units of groups): "all" at 0, axis a's from offs[a] */
    for (Py_ssize_t a = 0; a < nd; a++) {
        if (offs)
            offs[a] = acc_len;
        acc_len += (nd > 1 && shape[a] > 1) ? shape[a] : 0;
    }
    return acc_len;
}

static void cmp_init(struct cmp *c, int kind, double scale, Py_ssize_t nd, const Py_ssize_t *shape, double *acc)
{
    memset(c, 0, sizeof *c);
    c->d = dtype_of(kind);
    c->lo_inf = c->d.kind == 0 ? INFINITY : c->d.fmax + c->d.top_half;
    c->scale = scale;
    c->nd = nd;
    memcpy(c->shape, shape, sizeof(Py_ssize_t) * (size_t)nd);
    c->acc_len = cmp_acc_len(nd, shape, c->offs);
    c->acc = acc;
}

/* The run of n elements from flat index flat0 (C order of the whole array): returned values g64 (float64),
 * g32 (float32) or g16 (16-bit patterns, their values in the table vt: value_table), reference ref, bounds E
 * and multiplicities m16 or m32 (or neither: 1), each pointing at the run's first element, or mtab (with
 * g16: the counts of the whole array's 65536 patterns, looked up by each element's). Walked in chunks of CHUNK elements, each in pieces within one segment of
 * the last axis (there only the last index moves, so the bias sums of the groups of the other axes, and
 * of "all", are summed over the piece and added once). */
#define CMP_RUN_ARGS struct cmp *c, Py_ssize_t flat0, const double *g64, const float *g32, const uint16_t *g16,      \
    const double *vt, const double *ref, const double *E, const uint16_t *m16, const uint32_t *m32,                \
    const uint32_t *mtab, Py_ssize_t n
static inline ALWAYS_INLINE void cmp_run_body(CMP_RUN_ARGS)
{
    double rb[CHUNK], gb[CHUNK], segs[3 * CHUNK];      /* segs: the pieces' sums (ls, le, lq) */
    uint32_t mb[CHUNK];
#define MULT(k) (mc16 ? (double)mc16[k] : mc32 ? (double)mc32[k] : 1.0)
    const struct dt *d = &c->d;
    const Py_ssize_t nd = c->nd, *shape = c->shape, acc_len = c->acc_len, last = nd - 1;
    const double scale = c->scale;
    double *acc = c->acc;
    Py_ssize_t idx[MAXDIM];
    {   /* the multi-index of the run's first element */
        Py_ssize_t f = flat0;
        for (Py_ssize_t a = nd - 1; a >= 0; a--) {
            idx[a] = shape[a] ? f % shape[a] : 0;
            f = shape[a] ? f / shape[a] : 0;
        }
    }
    int per_last = nd > 1 && shape[last] > 1;
    /* the sums of the group "all", held here over the run (the same additions, in the same order) */
    double all_s = acc[0], all_e = acc[acc_len], all_q = acc[2 * acc_len];
    struct lanes_acc lacc = c->lacc;        /* the lanes, held here too: no store into acc can change them */
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t cn = n - i < CHUNK ? n - i : CHUNK;
        const double *gc = g64 ? g64 + i : gb, *rc = ref + i, *Ec = E + i;
        /* the chunk's multiplicities: per element (m16, m32), or the counts of its 16-bit patterns (mtab) */
        const uint16_t *mc16 = m16 ? m16 + i : NULL;
        const uint32_t *mc32 = mtab ? mb : m32 ? m32 + i : NULL;
        /* first (float32 values and 16-bit patterns widened, exactly): it brings the chunk into L1 for the pieces */
        double emm[2];                 /* the chunk's least and largest bound */
        int fin = g64 ? all_finite(gc, rc, Ec, cn, emm)
                  : widen_finite(g32 ? g32 + i : NULL, g16 ? g16 + i : NULL, vt, mtab, gb, mb, rc, Ec, cn, emm);
        /* every value finite: each piece's terms in one pass (piece, vectorized), the maxima and counts
         * that need no ratio with them; the ratio is taken, in element order, only for the elements
         * whose ratio can exceed T = min(max ratio so far, the third worst, 1) ("hot"): the others
         * change neither the maximum, nor the count over 1, nor the worst three */
        double T = c->top.n < 3 ? 0.0 : c->top.r[2];
        T = c->maxr < T ? c->maxr : T;
        T = T < 1.0 ? T : 1.0;
        const double t = T * (1.0 - 0x1p-50), thr = c->top.n < 3 ? 0.0 : c->top.r[2];
        /* a "plain" chunk: every bound below the scale (no element unconstrained) and t E >= 2^-1000 (no
         * candidate for want of a normal product): the pieces skip those tests (the same figures) */
        const int plain = fin && emm[1] < scale && t * emm[0] >= 0x1p-1000;
        if (plain)
            lacc.maxE[0] = emm[1] > lacc.maxE[0] ? emm[1] : lacc.maxE[0];
        for (Py_ssize_t p = 0; p < cn;) {
            Py_ssize_t pn = nd ? shape[last] - idx[last] : cn - p;      /* what is left of the segment */
            if (pn > cn - p)
                pn = cn - p;
            double *as = per_last ? acc + c->offs[last] + idx[last] : NULL;
            /* whole segments of a short last axis, one after the other (each a piece of its own, with its
             * own sums: the same operations as one piece a call, with less around each) */
            const Py_ssize_t nseg = fin && nd && pn == shape[last] && pn <= CHUNK / 2 ? (cn - p) / pn : 1;
            double ls = 0, le = 0, lq = 0;
            const Py_ssize_t fp = flat0 + i + p;                /* the piece's first flat index */
            if (fin) {
                Py_ssize_t tops = piece(d, gc + p, rc + p, Ec + p, mc16 ? mc16 + p : NULL, mc32 ? mc32 + p : NULL,
                                        pn, scale, t, thr, rb + p, &lacc, as, as ? as + acc_len : NULL,
                                        as ? as + 2 * acc_len : NULL, segs, segs + CHUNK, segs + 2 * CHUNK, plain,
                                        nseg);
                for (Py_ssize_t j = 0; tops && j < nseg * pn; j++)   /* may join the worst three: in element order */
                    if (rb[p + j] >= 0 && rb[p + j] > (c->top.n < 3 ? 0.0 : c->top.r[2]))
                        top_add(&c->top, rb[p + j], fp + j, gc[p + j], rc[p + j], Ec[p + j]);
            } else
            for (Py_ssize_t j = 0; j < pn; j++) {
                Py_ssize_t k = p + j;
                double gi = gc[k], ri = rc[k], Ei = Ec[k], lo, hi;
                if (fabs(ri) <= DBL_MAX && fabs(ri) > c->mref)
                    c->mref = fabs(ri);
                double ex = excess_at(d, gi, ri, &lo, &hi);
                int gnan = isnan(gi), rnan = isnan(ri);
                /* core._judge's ratio */
                int finE = isfinite(Ei);
                double r = finE ? ratio_of(ex, Ei) : ((gnan && !rnan) ? INFINITY : 0.0);
                if (isinf(gi) && isfinite(ri) && fabs(ri) < c->lo_inf)
                    r = INFINITY;
                if (r > c->maxr)
                    c->maxr = r;
                if (r > 1)
                    c->over++;
                if (r > 0 && (c->top.n < 3 || r > c->top.r[2]))
                    top_add(&c->top, r, fp + j, gi, ri, Ei);
                if (isnan(Ei))
                    c->maxE_nan = 1;
                else if (Ei > c->maxE)
                    c->maxE = Ei;
                if (!finE || (Ei > 0 && Ei >= scale))
                    c->unc++;
                else {
                    double diff = fabs(gi - ri);
                    if ((gnan && rnan) || gi == ri || (isinf(gi) && ex == 0))
                        diff = 0;
                    if (isnan(diff))
                        c->dmax_nan = 1;
                    else if (diff > c->dmax)
                        c->dmax = diff;
                }
                /* bias.bias_test's element terms */
                double err = gi - round_dt(d, ri), width = hi - lo;   /* against the correctly rounded reference */
                if (isfinite(err) && finE && isfinite(width) && isfinite(ri)) {
                    double sv = ri > 0 ? err : (ri < 0 ? -err : 0.0);
                    double q = width * width * MULT(k);
                    ls += sv;
                    le += Ei;
                    lq += q;
                    if (as) {
                        as[j] += sv;
                        as[acc_len + j] += Ei;
                        as[2 * acc_len + j] += q;
                    }
                }
            }
            if (!fin) {
                segs[0] = ls;
                segs[CHUNK] = le;
                segs[2 * CHUNK] = lq;
            }
            for (Py_ssize_t k = 0; k < nseg; k++) {    /* each piece's sums into its groups, piece after piece */
                ls = segs[k];
                le = segs[CHUNK + k];
                lq = segs[2 * CHUNK + k];
                all_s += ls;
                all_e += le;
                all_q += lq;
                if (nd > 1)
                    for (Py_ssize_t a = 0; a < last; a++)
                        if (shape[a] > 1) {
                            Py_ssize_t o = c->offs[a] + idx[a];
                            acc[o] += ls;
                            acc[acc_len + o] += le;
                            acc[2 * acc_len + o] += lq;
                        }
                if (nd) {                              /* the next piece's multi-index */
                    idx[last] += pn;
                    for (Py_ssize_t a = last; a > 0 && idx[a] >= shape[a]; a--) {
                        idx[a] = 0;
                        idx[a - 1]++;
                    }
                }
            }
            p += nseg * pn;
        }
        for (int l = 0; fin && l < RL; l++)          /* the ratios' maximum so far, for the next chunk's T */
            c->maxr = lacc.rmax[l] > c->maxr ? lacc.rmax[l] : c->maxr;
        i += cn;
    }
    acc[0] = all_s;
    acc[acc_len] = all_e;
    acc[2 * acc_len] = all_q;
    c->lacc = lacc;
#undef MULT
}

INSTANCES(static void, cmp_run, (CMP_RUN_ARGS), cmp_run_body(c, flat0, g64, g32, g16, vt, ref, E, m16, m32, mtab, n);)

static void cmp_run(CMP_RUN_ARGS)
{
    ISA(cmp_run, c, flat0, g64, g32, g16, vt, ref, E, m16, m32, mtab, n);
}

/* The figures as compare() returns them: (max ratio, over, unconstrained, max |g - ref| of the
 * constrained, max E, [(ratio, flat index)], max |ref|) */
static PyObject *cmp_result(struct cmp *c)
{
    double maxE = c->maxE, dmax = c->dmax, mref = c->mref, maxr = c->maxr;
    Py_ssize_t unc = c->unc, over = c->over;
    for (int l = 0; l < RL; l++) {   /* the finite chunks' partial maxima and counts (piece) */
        maxE = c->lacc.maxE[l] > maxE ? c->lacc.maxE[l] : maxE;
        dmax = c->lacc.dmax[l] > dmax ? c->lacc.dmax[l] : dmax;
        mref = c->lacc.mref[l] > mref ? c->lacc.mref[l] : mref;
        unc += (Py_ssize_t)c->lacc.unc[l];
        maxr = c->lacc.rmax[l] > maxr ? c->lacc.rmax[l] : maxr;
        over += (Py_ssize_t)c->lacc.over[l];
    }
    PyObject *t = PyList_New(0);
    if (!t)
        return NULL;
    for (int j = 0; j < c->top.n; j++) {
        PyObject *p = Py_BuildValue("(dnddd)", c->top.r[j], c->top.i[j], c->top.g[j], c->top.ref[j], c->top.E[j]);
        if (!p || PyList_Append(t, p) < 0) { Py_XDECREF(p); Py_DECREF(t); return NULL; }
        Py_DECREF(p);
    }
    return Py_BuildValue("(dnnddNd)", maxr, over, unc, c->dmax_nan ? NAN : dmax, c->maxE_nan ? NAN : maxE, t, mref);
}

/* the sizes of a Python sequence `o` (at most MAXDIM, each >= 0) into shape; returns nd, or -1 */
static Py_ssize_t get_shape(PyObject *o, Py_ssize_t *shape, Py_ssize_t *total)
{
    Py_ssize_t nd = PySequence_Size(o);
    if (nd < 0 || nd > MAXDIM) {
        PyErr_SetString(PyExc_ValueError, "_judge: shape must be a sequence of at most 32 sizes");
        return -1;
    }
    *total = 1;
    for (Py_ssize_t a = 0; a < nd; a++) {
        PyObject *it = PySequence_GetItem(o, a);
        shape[a] = it ? PyLong_AsSsize_t(it) : -1;
        Py_XDECREF(it);
        if (shape[a] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "_judge: negative size in shape");
            return -1;
        }
        *total *= shape[a];
    }
    return nd;
}

/* the multiplicities: None, uint16, or else uint32 */
static int get_mult(PyObject *o, Py_buffer *v)
{
    if (o == Py_None) {
        memset(v, 0, sizeof *v);
        return 0;
    }
    if (get_buf(o, v, "mult", "H", 2, 0) == 0)
        return 0;
    PyErr_Clear();
    return get_buf(o, v, "mult", "IL", 4, 0);
}

static void release(Py_buffer *v)
{
    if (v->obj)
        PyBuffer_Release(v);
}

/* o's buffer in any layout (its strides), of float64 values ('d') or, where fmts allows, float32 ('f') */
static int get_view(PyObject *o, Py_buffer *v, const char *name, const char *fmts)
{
    if (PyObject_GetBuffer(o, v, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (strchr(fmts, *f) == NULL || f[1] != 0 || v->itemsize != (*f == 'd' ? 8 : *f == 'H' ? 2 : 4)) {
        PyErr_Format(PyExc_TypeError, "_judge: '%s' has format %s; expected %s", name, v->format, fmts);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* The strides (st, nd of them) of view v as the block of shape bshape: v itself of that shape with its axes
 * after `axis` contiguous (any strides before), or v C-contiguous of as many values (its C strides).
 * Returns 0 when v is neither. */
static int block_strides(const Py_buffer *v, Py_ssize_t nd, const Py_ssize_t *bshape, Py_ssize_t axis,
                         Py_ssize_t *st)
{
    int c = PyBuffer_IsContiguous(v, 'C');
    if (!c && v->ndim != nd)
        return 0;
    Py_ssize_t want = v->itemsize;
    for (Py_ssize_t a = nd - 1; a >= 0; a--) {
        st[a] = c ? want : v->strides[a];
        if ((!c && v->shape[a] != bshape[a]) || (a > axis && st[a] != want && bshape[a] > 1))
            return 0;
        want *= bshape[a];
    }
    return 1;
}

static PyObject *py_compare(PyObject *self, PyObject *args)
{
    PyObject *og, *oref, *oE, *omult, *oshape, *oacc, *omtab = Py_None;
    int kind;
    double scale;
    Py_ssize_t start, axis = -1;
    if (!PyArg_ParseTuple(args, "OOOOidOnO|nO:compare", &og, &oref, &oE, &omult, &kind, &scale, &oshape, &start,
                          &oacc, &axis, &omtab))
        return NULL;
    if (kind < 0 || kind > 3) {
        PyErr_Format(PyExc_ValueError, "_judge: kind=%d; expected 0..3", kind);
        return NULL;
    }
    Py_ssize_t shape[MAXDIM], total;
    Py_ssize_t nd = get_shape(oshape, shape, &total);
    if (nd < 0)
        return NULL;
    Py_ssize_t acc_len = cmp_acc_len(nd, shape, NULL);
    Py_buffer vg = {0}, vr = {0}, vE = {0}, vm = {0}, va = {0}, vt = {0};
    if (get_view(og, &vg, "g", "dfH") < 0 || get_view(oref, &vr, "ref", "d") < 0 || get_view(oE, &vE, "E", "d") < 0
        || get_mult(omult, &vm) < 0 || get_buf(oacc, &va, "acc", "d", 8, 1) < 0
        || (omtab != Py_None && get_buf(omtab, &vt, "mtab", "IL", 4, 0) < 0)) {
        release(&vg); release(&vr); release(&vE); release(&vm); release(&va); release(&vt);
        return NULL;
    }
    /* g of 16-bit patterns (uint16; kind 2, 3), read through the table of their values; mtab: the counts of
     * the array's 65536 patterns (compare.PatternCounts), instead of per-element multiplicities */
    const double *vtab = NULL;
    if ((vg.itemsize == 2 && kind != 2 && kind != 3) || (vt.obj && (vg.itemsize != 2 || vm.obj || vt.len / 4 != 65536))) {
        release(&vg); release(&vr); release(&vE); release(&vm); release(&va); release(&vt);
        PyErr_Format(PyExc_ValueError, "_judge.compare: 16-bit patterns need kind 2 or 3 (kind=%d), and mtab (65536 "
                     "counts, not with mult) 16-bit patterns", kind);
        return NULL;
    }
    if (vg.itemsize == 2 && !(vtab = value_table(kind))) {
        release(&vg); release(&vr); release(&vE); release(&vm); release(&va); release(&vt);
        return PyErr_NoMemory();
    }
    const uint32_t *mtab = vt.obj ? vt.buf : NULL;
    Py_ssize_t n = vg.len / vg.itemsize;
    /* axis >= 0: the block is the elements whose index along `axis` is start..start+k-1 (in C order); g, ref
     * and E may then be views of its shape whose axes after `axis` are contiguous (batch_norm's bounds,
     * laid out by channel; the returned array's slice), mult is C-contiguous; else all are C-contiguous */
    Py_ssize_t across = axis >= 0 && axis < nd && shape[axis] ? total / shape[axis] : 1;
    Py_ssize_t k = axis >= 0 && across ? n / across : 0, bshape[MAXDIM];
    for (Py_ssize_t a = 0; a < nd; a++)
        bshape[a] = a == axis ? k : shape[a];
    int bad = vr.len / 8 != n || vE.len / 8 != n || (vm.obj && vm.len / vm.itemsize != n) || va.len / 8 != 3 * acc_len
              || (axis >= nd) || start < 0
              || (axis < 0 ? start + n > total : (n % (across ? across : 1) != 0 || start + k > shape[axis]));
    Py_ssize_t sg[MAXDIM], sr[MAXDIM], sE[MAXDIM];            /* along axis: the views' strides as the block */
    if (!bad && axis < 0)
        bad = !PyBuffer_IsContiguous(&vg, 'C') || !PyBuffer_IsContiguous(&vr, 'C') || !PyBuffer_IsContiguous(&vE, 'C');
    else if (!bad)
        bad = !block_strides(&vg, nd, bshape, axis, sg) || !block_strides(&vr, nd, bshape, axis, sr)
              || !block_strides(&vE, nd, bshape, axis, sE);
    if (bad) {
        release(&vg); release(&vr); release(&vE); release(&vm); release(&va); release(&vt);
        PyErr_Format(PyExc_ValueError, "_judge: block of %zd values from %zd does not fit the shape, or acc, or its "
                     "arrays are not C-contiguous (along an axis: contiguous after it)", n, start);
        return NULL;
    }
    const int f64 = vg.itemsize == 8, f32 = vg.itemsize == 4;
    const uint32_t *m32 = vm.obj && vm.itemsize == 4 ? vm.buf : NULL;
    const uint16_t *m16 = vm.obj && vm.itemsize == 2 ? vm.buf : NULL;
    struct cmp c;
    cmp_init(&c, kind, scale, nd, shape, va.buf);
    Py_BEGIN_ALLOW_THREADS
    if (axis < 0)                     /* a range of whole rows: one run */
        cmp_run(&c, start, f64 ? vg.buf : NULL, f32 ? vg.buf : NULL, f64 || f32 ? NULL : vg.buf, vtab, vr.buf, vE.buf,
                m16, m32, mtab, n);
    else {                            /* along axis: a run of `inner` elements per index of the axes up to it */
        Py_ssize_t inner = 1, outer = 1, idx[MAXDIM] = {0};
        for (Py_ssize_t a = axis + 1; a < nd; a++)
            inner *= shape[a];
        for (Py_ssize_t a = 0; a < axis; a++)
            outer *= shape[a];
        for (Py_ssize_t o = 0; o < outer && inner; o++) {
            Py_ssize_t og_ = 0, or_ = 0, oE_ = 0;         /* the byte offsets of index o of the axes before */
            for (Py_ssize_t a = 0, f = o, d = outer; a < axis; a++) {
                d /= shape[a];
                idx[a] = f / d;
                f %= d;
                og_ += idx[a] * sg[a];
                or_ += idx[a] * sr[a];
                oE_ += idx[a] * sE[a];
            }
            /* the k indices along axis in one run where the three views hold them one after the other */
            Py_ssize_t step = inner * vg.itemsize == sg[axis] && inner * 8 == sr[axis] && inner * 8 == sE[axis] ? k : 1;
            for (Py_ssize_t j = 0; j < k; j += step) {
                const char *gp = (const char *)vg.buf + og_ + j * sg[axis];
                const char *rp = (const char *)vr.buf + or_ + j * sr[axis];
                const char *Ep = (const char *)vE.buf + oE_ + j * sE[axis];
                Py_ssize_t b = (o * k + j) * inner;          /* the multiplicities: the block in C order */
                cmp_run(&c, (o * shape[axis] + start + j) * inner, f64 ? (const double *)gp : NULL,
                        f32 ? (const float *)gp : NULL, f64 || f32 ? NULL : (const uint16_t *)gp, vtab,
                        (const double *)rp, (const double *)Ep, m16 ? m16 + b : NULL, m32 ? m32 + b : NULL, mtab,
                        step * inner);
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&vg); release(&vr); release(&vE); release(&vm); release(&va); release(&vt);
    return cmp_result(&c);
}

/* abs_max_finite(a) -> max |a| over the finite values of the float64 buffer a (0.0 when none): the
 * running scale of "unconstrained" (compare.ArrayAccumulator), one vectorized pass */
#define ABSMAX_ARGS const double *restrict a, Py_ssize_t n
#define ABSMAX_BODY                                                                                       \
    double m[LANES] = {0};                                                                                \
    LANE_LOOP(n, j, l, double v = fabs(a[j]); m[l] = (v <= DBL_MAX && v > m[l]) ? v : m[l];);             \
    double r = 0;                                                                                         \
    for (int l = 0; l < LANES; l++)                                                                       \
        r = m[l] > r ? m[l] : r;                                                                          \
    return r;

INSTANCES(static double, absmax, (ABSMAX_ARGS), ABSMAX_BODY)

static PyObject *py_abs_max_finite(PyObject *self, PyObject *arg)
{
    Py_buffer v;
    if (get_buf(arg, &v, "a", "d", 8, 0) < 0)
        return NULL;
    double r;
    Py_BEGIN_ALLOW_THREADS
    r = ISA(absmax, v.buf, v.len / 8);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return PyFloat_FromDouble(r);
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

struct slot { uint64_t key; uint32_t count, used; };

/* The key of element i: its bits (2, 4 or 8 bytes), -0 as +0. */
static inline uint64_t key_at(const void *k, int width, Py_ssize_t i)
{
    uint64_t v;
    if (width == 8) {
        v = ((const uint64_t *)k)[i];
        return v == 0x8000000000000000ULL ? 0 : v;
    }
    if (width == 4) {
        v = ((const uint32_t *)k)[i];
        return v == 0x80000000u ? 0 : v;
    }
    v = ((const uint16_t *)k)[i];
    return v == 0x8000u ? 0 : v;
}

/* 32-bit keys (float32 values), exact. mix32 is a bijection, so counting the hashes h = mix32(key)
 * counts the keys. Two radix levels on h's top bits split the hashes into sub-parts whose top 18 bits
 * are equal: within one, the low DIRECT = 14 bits tell the hashes apart, and a direct table of 2^14
 * counts (64 KiB, in L1; no probing, no branch) counts them. Steps: (1) histogram of h's top b1 bits
 * (parts of ~256K hashes, at most 256 streams); (2) h scattered into A by them; (3) per part of A:
 * histogram of the next 18 - b1 bits, h scattered into T (the part fits L2), each sub-part counted in
 * the direct table (then cleared), the counts into U, gathered back into A in A's order; (4) out[i]
 * read from A in the original order. Memory: A (4 bytes a key), T and U (one part each, at most PART_CAP
 * keys: a part swollen by repeated keys is counted by count_swollen_part), the tables. */
/* where the counts go: uint32, or uint16 when every count fits (COUNTS_DO_NOT_FIT otherwise, and
 * nothing is written), or with `saturate` uint16 counts capped at 65535 (saturated_counts gives the
 * exact count of the keys there) */
struct sink { uint32_t *o32; uint16_t *o16; int saturate; };
enum { COUNTS_DO_NOT_FIT = 1 };

static inline void put(struct sink o, Py_ssize_t i, uint32_t v)
{
    if (o.o16)
        o.o16[i] = (uint16_t)(v > 0xffff ? 0xffff : v);
    else
        o.o32[i] = v;
}

static inline int fits(struct sink o, uint64_t most)
{
    return !o.o16 || o.saturate || most <= 0xffff;
}

static inline uint32_t mix32(uint32_t k)
{
    k ^= k >> 16;
    k *= 0x85ebca6bu;
    k ^= k >> 13;
    k *= 0xc2b2ae35u;
    k ^= k >> 16;
    return k;
}

static inline uint32_t hash32(const uint32_t *k, Py_ssize_t i)
{
    uint32_t v = k[i];
    return mix32(v == 0x80000000u ? 0 : v);         /* -0 as +0 */
}

/* the prefix sums of a histogram of `parts` counts into start (parts + 1), fill = start; returns the
 * largest count */
static Py_ssize_t prefix(Py_ssize_t *start, Py_ssize_t *fill, Py_ssize_t parts)
{
    Py_ssize_t biggest = 0;
    for (Py_ssize_t p = 0; p < parts; p++) {
        if (start[p + 1] > biggest)
            biggest = start[p + 1];
        start[p + 1] += start[p];
        fill[p] = start[p];
    }
    return biggest;
}

/* A part of count_exact32 swollen by repeated keys (more than PART_CAP hashes: its distinct hashes are
 * no more than an ordinary part's): its hashes a[0..na-1] replaced by their counts, counted in an
 * open-addressing table of its distinct hashes (grown as they come), so that no scratch the size of the
 * part is needed. Returns the largest count, or -1 without memory. */
enum { PART_CAP = 1 << 20 };
struct hcount { uint32_t h, c; };     /* c == 0: empty */

static int64_t count_swollen_part(uint32_t *a, Py_ssize_t na)
{
    Py_ssize_t size = 1 << 16, used = 0;
    struct hcount *t = calloc((size_t)size, sizeof *t);
    if (!t)
        return -1;
    for (Py_ssize_t i = 0; i < na; i++) {
        Py_ssize_t j = a[i] & (size - 1);
        while (t[j].c && t[j].h != a[i])
            j = (j + 1) & (size - 1);
        if (!t[j].c) {
            t[j].h = a[i];
            if (2 * ++used > size) {          /* grow: the entries rehashed into twice the slots */
                struct hcount *g = calloc((size_t)size * 2, sizeof *g);
                if (!g) { free(t); return -1; }
                t[j].c = 1;
                for (Py_ssize_t s_ = 0; s_ < size; s_++)
                    if (t[s_].c) {
                        Py_ssize_t r = t[s_].h & (2 * size - 1);
                        while (g[r].c)
                            r = (r + 1) & (2 * size - 1);
                        g[r] = t[s_];
                    }
                free(t);
                t = g;
                size *= 2;
                continue;
            }
        }
        t[j].c++;
    }
    uint32_t most = 0;
    for (Py_ssize_t i = 0; i < na; i++) {
        Py_ssize_t j = a[i] & (size - 1);
        while (t[j].h != a[i])
            j = (j + 1) & (size - 1);
        a[i] = t[j].c;
        most = a[i] > most ? a[i] : most;
    }
    free(t);
    return most;
}

static int count_exact32(const uint32_t *k, Py_ssize_t n, struct sink out)
{
    enum { DIRECT = 14, FIXED = 32 - DIRECT };
    int b1 = 0;
    while (b1 < 8 && ((Py_ssize_t)1 << (18 + b1)) < n)
        b1++;
    int b2 = FIXED - b1;
    Py_ssize_t p1n = (Py_ssize_t)1 << b1, p2n = (Py_ssize_t)1 << b2;
    Py_ssize_t s1[257] = {0}, f1[256];
#define P1(h) (b1 ? (Py_ssize_t)((h) >> (32 - b1)) : 0)
#define P2(h) ((Py_ssize_t)(((h) << b1) >> (DIRECT + b1)))       /* the next b2 = FIXED - b1 bits */
    uint32_t *A = malloc(sizeof(uint32_t) * (n ? n : 1));
    Py_ssize_t *s2 = malloc(sizeof(Py_ssize_t) * (p2n + 1)), *f2 = malloc(sizeof(Py_ssize_t) * p2n);
    uint32_t *cnt = calloc((size_t)1 << DIRECT, sizeof(uint32_t));
    if (!A || !s2 || !f2 || !cnt) { free(A); free(s2); free(f2); free(cnt); return -1; }
    for (Py_ssize_t i = 0; i < n; i++)
        s1[P1(hash32(k, i)) + 1]++;
    Py_ssize_t big1 = prefix(s1, f1, p1n);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t h = hash32(k, i);
        A[f1[P1(h)]++] = h;
    }
    Py_ssize_t tn = big1 < PART_CAP ? big1 : PART_CAP;       /* T and U: one ordinary part */
    uint32_t *T = malloc(sizeof(uint32_t) * (tn ? tn : 1)), *U = malloc(sizeof(uint32_t) * (tn ? tn : 1));
    if (!T || !U) { free(T); free(U); free(A); free(s2); free(f2); free(cnt); return -1; }
    const uint32_t low = ((uint32_t)1 << DIRECT) - 1;
    uint32_t most = 0;
    for (Py_ssize_t q = 0; q < p1n; q++) {
        uint32_t *a = A + s1[q];
        Py_ssize_t na = s1[q + 1] - s1[q];
        if (na > tn) {                              /* swollen by repeated keys */
            int64_t m = count_swollen_part(a, na);
            if (m < 0) { free(T); free(U); free(A); free(s2); free(f2); free(cnt); return -1; }
            most = (uint32_t)m > most ? (uint32_t)m : most;
            f1[q] = s1[q];
            continue;
        }
        memset(s2, 0, sizeof(Py_ssize_t) * (p2n + 1));
        for (Py_ssize_t i = 0; i < na; i++)
            s2[P2(a[i]) + 1]++;
        prefix(s2, f2, p2n);
        for (Py_ssize_t i = 0; i < na; i++)
            T[f2[P2(a[i])]++] = a[i];
        for (Py_ssize_t r = 0; r < p2n; r++) {
            Py_ssize_t lo = s2[r], hi = s2[r + 1];
            for (Py_ssize_t i = lo; i < hi; i++)
                cnt[T[i] & low]++;
            for (Py_ssize_t i = lo; i < hi; i++) {
                U[i] = cnt[T[i] & low];
                most = U[i] > most ? U[i] : most;
            }
            for (Py_ssize_t i = lo; i < hi; i++)
                cnt[T[i] & low] = 0;
            f2[r] = lo;
        }
        for (Py_ssize_t i = 0; i < na; i++)                  /* back in A's order */
            a[i] = U[f2[P2(a[i])]++];
        f1[q] = s1[q];
    }
    int ok = fits(out, most);
    for (Py_ssize_t i = 0; ok && i < n; i++)
        put(out, i, A[f1[P1(hash32(k, i))]++]);
#undef P1
#undef P2
    free(T); free(U); free(A); free(s2); free(f2); free(cnt);
    return ok ? 0 : COUNTS_DO_NOT_FIT;
}

/* Exact counts, every pass sequential (256 streams at most): (1) a histogram of 8 bits of each key's
 * hash; (2) the keys copied in that partition order; (3) each part counted in its own small
 * open-addressing table (it fits the cache), its keys overwritten by their counts; (4) the counts read
 * back in the original order, part by part. Memory: one key's width per key, plus one part's table. */
static int count_exact(const void *k, int width, Py_ssize_t n, struct sink out)
{
    enum { PARTS = 1024 };
    Py_ssize_t start[PARTS + 1] = {0}, fill[PARTS];
    if (width == 4 && n >= (1 << 16))          /* smaller: the tables below are cheaper */
        return count_exact32(k, n, out);
    if (width == 2) {                 /* 16-bit values: a table of every bit pattern */
        uint32_t *table = calloc(65536, sizeof(uint32_t));
        if (!table)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            table[key_at(k, 2, i)]++;
        uint32_t most = 0;
        for (Py_ssize_t j = 0; j < 65536; j++)
            most = table[j] > most ? table[j] : most;
        int ok = fits(out, most);
        for (Py_ssize_t i = 0; ok && i < n; i++)
            put(out, i, table[key_at(k, 2, i)]);
        free(table);
        return ok ? 0 : COUNTS_DO_NOT_FIT;
    }
    /* the scratch holds keys of the input's width, then their counts in place */
    void *pk = malloc((size_t)width * (n ? n : 1));
    if (!pk)
        return -1;
    uint32_t *pk32 = pk;
    uint64_t *pk64 = pk;
    for (Py_ssize_t i = 0; i < n; i++)
        start[(mix(key_at(k, width, i)) >> 54) + 1]++;
    Py_ssize_t biggest = 0;
    for (int p = 0; p < PARTS; p++) {
        if (start[p + 1] > biggest)
            biggest = start[p + 1];
        start[p + 1] += start[p];
        fill[p] = start[p];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t key = key_at(k, width, i);
        Py_ssize_t at = fill[mix(key) >> 54]++;
        if (width == 4)
            pk32[at] = (uint32_t)key;
        else
            pk64[at] = key;
    }
    Py_ssize_t slots = 1;
    while (slots < 2 * biggest)
        slots *= 2;
    struct slot *t = malloc(sizeof(struct slot) * slots);
    if (!t) { free(pk); return -1; }
    uint64_t most = 0;
    for (int p = 0; p < PARTS; p++) {
        Py_ssize_t a = start[p], b = start[p + 1], size = 1;
        while (size < 2 * (b - a))
            size *= 2;
        uint64_t m = (uint64_t)size - 1;
        memset(t, 0, sizeof(struct slot) * size);
        for (int pass = 0; pass < 2; pass++)
            for (Py_ssize_t i = a; i < b; i++) {
                uint64_t key = width == 4 ? pk32[i] : pk64[i];
                uint64_t h = mix(key ^ 0x9e3779b97f4a7c15ULL) & m;
                while (t[h].used && t[h].key != key)
                    h = (h + 1) & m;
                if (pass == 0) {
                    t[h].used = 1;
                    t[h].key = key;
                    t[h].count++;
                    most = t[h].count > most ? t[h].count : most;
                } else if (width == 4)
                    pk32[i] = t[h].count;
                else
                    pk64[i] = t[h].count;
            }
        fill[p] = start[p];
    }
    int ok = fits(out, most);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        Py_ssize_t at = fill[mix(key_at(k, width, i)) >> 54]++;
        put(out, i, width == 4 ? pk32[at] : (uint32_t)pk64[at]);
    }
    free(t); free(pk);
    return ok ? 0 : COUNTS_DO_NOT_FIT;
}

/* the keys of value_counts and bucket_counts: C-contiguous unsigned integers of 2, 4 or 8 bytes */
static int get_keys(PyObject *o, Py_buffer *v)
{
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if ((v->itemsize != 2 && v->itemsize != 4 && v->itemsize != 8) || strchr("HILQK", *f) == NULL) {
        PyErr_Format(PyExc_TypeError, "_judge: keys have format %s; expected unsigned 2, 4 or 8-byte integers",
                     v->format);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static PyObject *py_value_counts(PyObject *self, PyObject *args)
{
    PyObject *okeys, *oout;
    Py_ssize_t exact_limit;
    int saturate = 0;
    if (!PyArg_ParseTuple(args, "OOn|p:value_counts", &okeys, &oout, &exact_limit, &saturate))
        return NULL;
    Py_buffer vk, vo;
    if (get_keys(okeys, &vk) < 0)
        return NULL;
    int width = (int)vk.itemsize;
    if (PyObject_GetBuffer(oout, &vo, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&vk);
        return NULL;
    }
    const char *fo = vo.format ? vo.format : "B";
    if (*fo == '<' || *fo == '=' || *fo == '@')
        fo++;
    if (!((vo.itemsize == 4 && strchr("IL", *fo)) || (vo.itemsize == 2 && *fo == 'H')) || fo[1] != 0) {
        PyErr_Format(PyExc_TypeError, "_judge: out has format %s; expected uint32 or uint16", vo.format);
        PyBuffer_Release(&vk); PyBuffer_Release(&vo);
        return NULL;
    }
    Py_ssize_t n = vk.len / width;
    if (vo.len / vo.itemsize != n || n > (Py_ssize_t)UINT32_MAX) {
        PyBuffer_Release(&vk); PyBuffer_Release(&vo);
        PyErr_SetString(PyExc_ValueError, "_judge: out must have as many values as keys (at most 2^32)");
        return NULL;
    }
    const void *k = vk.buf;
    struct sink out = {vo.itemsize == 4 ? vo.buf : NULL, vo.itemsize == 2 ? vo.buf : NULL, saturate};
    int exact = n <= exact_limit || width == 2, failed = 0;
    uint32_t *cnt = exact ? NULL : calloc((size_t)1 << 24, sizeof(uint32_t));
    if (!exact && !cnt) {
        PyBuffer_Release(&vk); PyBuffer_Release(&vo);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    if (exact)
        failed = count_exact(k, width, n, out);
    else {
        for (Py_ssize_t i = 0; i < n; i++)
            cnt[mix(key_at(k, width, i)) >> 40]++;
        uint64_t most = 0;
        for (Py_ssize_t j = 0; j < ((Py_ssize_t)1 << 24); j++)
            most = cnt[j] > most ? cnt[j] : most;
        failed = fits(out, most) ? 0 : COUNTS_DO_NOT_FIT;
        for (Py_ssize_t i = 0; !failed && i < n; i++)
            put(out, i, cnt[mix(key_at(k, width, i)) >> 40]);
    }
    Py_END_ALLOW_THREADS
    free(cnt);
    PyBuffer_Release(&vk); PyBuffer_Release(&vo);
    if (failed < 0)
        return PyErr_NoMemory();
    if (failed == COUNTS_DO_NOT_FIT)
        Py_RETURN_NONE;
    return PyBool_FromLong(exact);
}

/* saturated_counts(keys, counts) -> (sorted keys, their counts): the exact counts of the keys whose count in
 * `counts` (uint16, value_counts with saturate) is 65535, the cap: at most n / 65535 distinct keys, counted
 * in a small open-addressing table in one pass (-0 as +0). compare.SaturatedCounts looks them up. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static PyObject *py_saturated_counts(PyObject *self, PyObject *args)
{
    PyObject *okeys, *ocnt;
    if (!PyArg_ParseTuple(args, "OO:saturated_counts", &okeys, &ocnt))
        return NULL;
    Py_buffer vk = {0}, vc = {0};
    if (get_keys(okeys, &vk) < 0)
        return NULL;
    if (get_buf(ocnt, &vc, "counts", "H", 2, 0) < 0) {
        release(&vk);
        return NULL;
    }
    int width = (int)vk.itemsize;
    Py_ssize_t n = vk.len / width;
    if (vc.len / 2 != n) {
        release(&vk); release(&vc);
        PyErr_SetString(PyExc_ValueError, "_judge.saturated_counts: counts must have as many values as keys");
        return NULL;
    }
    Py_ssize_t most = n / 0xffff + 1, slots = 16;
    while (slots < 2 * most)
        slots *= 2;
    struct slot *t = calloc((size_t)slots, sizeof(struct slot));
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)most);
    if (!t || !keys) {
        free(t); free(keys); release(&vk); release(&vc);
        return PyErr_NoMemory();
    }
    const uint16_t *c = vc.buf;
    Py_ssize_t found = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        if (c[i] == 0xffff) {
            uint64_t key = key_at(vk.buf, width, i), h = mix(key) & (uint64_t)(slots - 1);
            while (t[h].used && t[h].key != key)
                h = (h + 1) & (uint64_t)(slots - 1);
            if (!t[h].used && found < most) {
                t[h].used = 1;
                t[h].key = key;
                keys[found++] = key;
            }
            t[h].count++;
        }
    qsort(keys, (size_t)found, sizeof(uint64_t), cmp_u64);
    Py_END_ALLOW_THREADS
    PyObject *ok = PyList_New(found), *oc = PyList_New(found);
    for (Py_ssize_t j = 0; ok && oc && j < found; j++) {
        uint64_t h = mix(keys[j]) & (uint64_t)(slots - 1);
        while (t[h].key != keys[j])
            h = (h + 1) & (uint64_t)(slots - 1);
        PyList_SET_ITEM(ok, j, PyLong_FromUnsignedLongLong(keys[j]));
        PyList_SET_ITEM(oc, j, PyLong_FromUnsignedLong(t[h].count));
    }
    free(t); free(keys); release(&vk); release(&vc);
    if (!ok || !oc) {
        Py_XDECREF(ok); Py_XDECREF(oc);
        return NULL;
    }
    return Py_BuildValue("(NN)", ok, oc);
}

/* bucket_counts(keys, table[, out]): the bucketed counts of value_counts beyond its exact limit, kept as
 * a table: without out, table (uint32, 2^24) += how many keys fall in each bucket (mix(key) >> 40, -0
 * as +0); with out (uint32, one per key), out[i] = table[the bucket of keys[i]] (compare.BucketCounts:
 * the streaming judge looks them up block by block instead of holding 4 bytes an element). */
/* pattern_counts(bits, table): table[b] += the number of elements of bits (uint16) equal to b; table holds
 * 65536 uint64 counts (compare.PatternCounts: the counts of a 16-bit array's bit patterns). Four partial
 * tables, so that a run of equal patterns does not wait on one counter. */
static PyObject *py_pattern_counts(PyObject *self, PyObject *args)
{
    PyObject *obits, *otab;
    if (!PyArg_ParseTuple(args, "OO:pattern_counts", &obits, &otab))
        return NULL;
    Py_buffer vb = {0}, vt = {0};
    if (get_buf(obits, &vb, "bits", "H", 2, 0) < 0)
        return NULL;
    if (get_buf(otab, &vt, "table", "LQ", 8, 1) < 0) {
        release(&vb);
        return NULL;
    }
    if (vt.len / 8 != 65536) {
        release(&vb); release(&vt);
        PyErr_Format(PyExc_ValueError, "_judge.pattern_counts: table holds %zd counts; expected 65536", vt.len / 8);
        return NULL;
    }
    uint32_t *part = calloc(4 * 65536, sizeof *part);
    if (!part) {
        release(&vb); release(&vt);
        return PyErr_NoMemory();
    }
    const uint16_t *b = vb.buf;
    uint64_t *table = vt.buf;
    Py_ssize_t n = vb.len / 2;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < n; s += (Py_ssize_t)1 << 30) {     /* a part's counts stay below 2^32 */
        Py_ssize_t e = n - s < ((Py_ssize_t)1 << 30) ? n : s + ((Py_ssize_t)1 << 30), i = s;
        for (; i + 4 <= e; i += 4) {
            part[b[i]]++;
            part[65536 + b[i + 1]]++;
            part[2 * 65536 + b[i + 2]]++;
            part[3 * 65536 + b[i + 3]]++;
        }
        for (; i < e; i++)
            part[b[i]]++;
        for (Py_ssize_t k = 0; k < 65536; k++) {
            table[k] += (uint64_t)part[k] + part[65536 + k] + part[2 * 65536 + k] + part[3 * 65536 + k];
            part[k] = part[65536 + k] = part[2 * 65536 + k] = part[3 * 65536 + k] = 0;
        }
    }
    Py_END_ALLOW_THREADS
    free(part);
    release(&vb); release(&vt);
    Py_RETURN_NONE;
}

static PyObject *py_bucket_counts(PyObject *self, PyObject *args)
{
    PyObject *okeys, *otab, *oout = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:bucket_counts", &okeys, &otab, &oout))
        return NULL;
    Py_buffer vk = {0}, vt = {0}, vo = {0};
    if (get_keys(okeys, &vk) < 0)
        return NULL;
    int width = (int)vk.itemsize;
    if (get_buf(otab, &vt, "table", "IL", 4, 1) < 0 || (oout != Py_None && get_buf(oout, &vo, "out", "IL", 4, 1) < 0)) {
        release(&vk); release(&vt);
        return NULL;
    }
    Py_ssize_t n = vk.len / width;
    if (vt.len / 4 != ((Py_ssize_t)1 << 24) || (vo.obj && vo.len / 4 != n)) {
        release(&vk); release(&vt); release(&vo);
        PyErr_SetString(PyExc_ValueError, "_judge.bucket_counts: table must hold 2^24 counts, out one per key");
        return NULL;
    }
    const void *k = vk.buf;
    uint32_t *table = vt.buf, *out = vo.obj ? vo.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (out)
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = table[mix(key_at(k, width, i)) >> 40];
    else
        for (Py_ssize_t i = 0; i < n; i++)
            table[mix(key_at(k, width, i)) >> 40]++;
    Py_END_ALLOW_THREADS
    release(&vk); release(&vt); release(&vo);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ row bounds */
/* bounds/_rows.row_bounds for rows of a C-contiguous (m, n) float64 x and cotangent g (m, n, or None):
 * the same formulas, the row sums in 8 interleaved partial sums instead of NumPy's pairwise sums (the same values
 * within rounding). The parameters w, b (or None) are a PATTERN of wrows rows of wcols values, wcols
 * dividing n: element j of a row uses value j / (n / wcols) of its pattern row (wcols 1: one value per
 * row; n: one per element); row i uses pattern row (i / wdiv) % wrows, wdiv 1 unless given (layer_norm: 1 x n;
 * group_norm: G x Cg, each value over its channel's spatial run; batch_norm: C x 1; adaptive_layer_norm's
 * per-sample parameters: N x n, wdiv the rows of a sample). Writes E_y and E_dx (m*n), adds the parameter-gradient terms
 * into tw, tb (the pattern's shape: summed over the rows that share a pattern element), and per row
 * (mean bound, rstd bound, S, K, var, mu) into stats (m*6). With P > 1, x and g hold (P, m, n / P) values
 * instead (batch_norm's block (N, C, spatial) as it lies: row i, channel i, gathered from its P runs); E_y and
 * E_dx are still (m, n). With u2 > 0: the bounds of a second,
 * strict contract (unit roundoff u2, multipliers gn2, gm2: bounds.bounds' E_ref) added to E_y, E_dx,
 * the statistics' bounds and the parameter terms as bounds.bounds adds them. */

/* The strict contract's terms as coefficients times the formula's brackets: cG = u gn, c4 = 4 u,
 * cQ = q2 (the second-order term), cK = u (gm + 4); with a second strict contract (E_ref) added to y's
 * and dx's, the sums of both contracts' coefficients (the two bounds added, within rounding). The
 * relaxed contracts add their terms to these. */
static inline ALWAYS_INLINE double ey_strict(double cG, double c4, double cQ, double aw, double ab, double K, double rho,
                                             double axh, double kap, double y)
{
    return cG * (aw * (K + rho * axh)) + c4 * (aw * kap + ab + fabs(y)) + cQ * (aw * (axh + 1));
}

static inline ALWAYS_INLINE double edx_strict(double cG, double c4, double cQ, double r, double Ag, double aB, double Bg,
                                              double Kg, double K, double rho, double axh, double adx, double pw)
{
    return cG * (r * (Ag + axh * ((1 + rho) * Bg + Kg) + aB * (K + 3 * rho * axh)) + rho * adx) + c4 * pw
           + cQ * (adx + r * (aB + Ag) * (axh + 1));
}

static inline ALWAYS_INLINE double tw_strict(double cK, double cG, double cQ, double ag, double K, double rho,
                                             double axh, double kap)
{
    return cK * (ag * kap) + cG * (ag * (K + rho * axh)) + cQ * (ag * (axh + 1));
}

struct rows_args {
    const double *X, *W, *B, *G;
    double *Ey, *Edx, *TW, *TB, *ST;
    Py_ssize_t m, n, wrows, wcols;
    Py_ssize_t wdiv;                  /* rows per pattern row: row i uses pattern row (i / wdiv) % wrows */
    Py_ssize_t P;                     /* > 1: X and G hold (P, m, n / P) values, row i gathered from them */
    double eps, u, gn, gm, ud, eta, u2, gn2, gm2;
    int centered, ddof, eps_std, lowp, epi, two;
    double *scratch;                  /* 6 n: the row's w and b, the parameter terms of its elements, its x and g
                                       * gathered (P > 1) */
    Py_ssize_t i0;                    /* the rows are rows i0.. of the parameters' pattern (judge_rows' pieces) */
};

/* the terms a, b of the next n elements of a run (n a multiple of 8 but for the run's last) added into the
 * run's 8 lanes va, vb: the run's element jj into lane jj % 8, in order (whether the run comes in one call
 * or in several) */
enum { TERM_BLOCK = 256 };
static inline ALWAYS_INLINE void sums2_more(const double *restrict a, const double *restrict b, Py_ssize_t n,
                                            double *va, double *vb)
{
    Py_ssize_t j = 0;
#if VECTOR_EXT
    v4d a0 = ld4(va), a1 = ld4(va + 4), b0 = ld4(vb), b1 = ld4(vb + 4);
    for (; j + 8 <= n; j += 8) {
        a0 += ld4(a + j); a1 += ld4(a + j + 4);
        b0 += ld4(b + j); b1 += ld4(b + j + 4);
    }
    st4(va, a0); st4(va + 4, a1); st4(vb, b0); st4(vb + 4, b1);
#endif
    for (int l = (int)(j % 8); j < n; j++, l = (l + 1) % 8) {
        va[l] += a[j];
        vb[l] += b[j];
    }
}

/* a row's parameter terms a, b added into tw, tb: element j into pattern element j / rep (rep = n / wcols > 1),
 * each pattern element's run of terms summed in 8 lanes (sums2_more) */
static inline ALWAYS_INLINE void add_terms(double *restrict tw, double *restrict tb, const double *restrict a,
                                           const double *restrict b, Py_ssize_t n, Py_ssize_t rep)
{
    for (Py_ssize_t k = 0; k < n / rep; k++) {
        double va[LANES] = {0}, vb[LANES] = {0};
        sums2_more(a + k * rep, b + k * rep, rep, va, vb);
        tw[k] += lanes_sum(va);
        tb[k] += lanes_sum(vb);
    }
}

/* the statement (last argument) with LOWP, EPI constants equal to the flags lowp, epi (the compiler
 * drops the terms of the other contracts) */
#define FLAGS(lowp, epi, LOWP, EPI, ...)                                                                  \
    do {                                                                                                  \
        if (lowp && epi) { enum { LOWP = 1, EPI = 1 }; __VA_ARGS__ }                                      \
        else if (lowp) { enum { LOWP = 1, EPI = 0 }; __VA_ARGS__ }                                        \
        else { enum { LOWP = 0, EPI = 0 }; __VA_ARGS__ }                                                  \
    } while (0);

/* FLAGS with a third flag, add (ADD) */
#define FLAGS3(lowp, epi, add, LOWP, EPI, ADD, ...)                                                       \
    do {                                                                                                  \
        if (add) { enum { ADD = 1 }; FLAGS(lowp, epi, LOWP, EPI, __VA_ARGS__) }                           \
        else { enum { ADD = 0 }; FLAGS(lowp, epi, LOWP, EPI, __VA_ARGS__) }                               \
    } while (0);

/* The rows: the row sums in LANES partial sums, the element bounds in loops without a
 * branch (selects on the contract's flags; vectorized), the parameter terms summed per pattern element
 * in element order. Compiled for AVX-512, AVX2 and the base ISA (the same operations element by element: the
 * same bits). */
/* element j's bound of y (ROWS_Y) and of dx with its parameter terms (ROWS_DX), its weight WJ and bias BJ
 * (ROWS_BODY's variables) */
#define ROWS_Y(j, WJ, BJ)                                                                                 \
    do {                                                                                                  \
        double xh = (x[j] - mu) * r, axh = fabs(xh);                                                      \
        double wj = (WJ), bj = (BJ);                                                                      \
        double aw = fabs(wj), ab = fabs(bj);                                                              \
        double y = xh * wj + bj;                                                                          \
        double kr = r * (fabs(x[j]) + amu), kap = centered ? kr : axh;                                    \
        double e = ey_strict(cG, c4, cQ, aw, ab, K, rho, axh, kap, y);                                    \
        double el = e + (2 * ud * aw * (Dc + axh) + ud2 * aw * (axh + 1));                                \
        double ee = el + (2 * ud * (aw * kap + ab + fabs(y)) + 2 * eta * (1 + aw));                       \
        ey[j] = LOWP ? (EPI ? ee : el) : e;                                                               \
    } while (0)

/* element j's bound of dx (into EDX_) and its parameter terms (TWT_, TBT_), declared in the caller's scope */
#define ROWS_DX_TERMS(j, WJ)                                                                              \
        double xh = (x[j] - mu) * r, axh = fabs(xh);                                                      \
        double gw = g[j] * (WJ), agw = fabs(gw), ag = fabs(g[j]);                                         \
        double kr = r * (fabs(x[j]) + amu), kap = centered ? kr : axh;                                    \
        double dx = r * (gw - Am - xh * Bv), adx = fabs(dx);                                              \
        double pw = r * (agw + aA + axh * aB + aB * kap + axh * Kg);                                      \
        double e = edx_strict(cG, c4, cQ, r, Ag, aB, Bg, Kg, K, rho, axh, adx, pw);                       \
        double tw = tw_strict(cKt, cGt, cQt, ag, K, rho, axh, kap);                                       \
        double tb = cBt * ag;                                                                             \
        double D = Dc + axh;                                                                              \
        double el = e + (2 * ud * (r * (aB * D + axh * Dg) + adx) + ud2 * (adx + r * (aB + Ag) * (axh + 1))); \
        double twl = tw + (ud * (2 * ag * D + gm * ag * axh) + ud2 * ag * (axh + 1));                     \
        double tbl = tb + ud * gm * ag;                                                                   \
        double ee = el + 2 * ud * pw, twe = twl + 2 * ud * ag * kap;                                      \
        const double EDX_ = LOWP ? (EPI ? ee : el) : e, TWT_ = LOWP ? (EPI ? twe : twl) : tw;             \
        const double TBT_ = LOWP ? tbl : tb;

/* element j: its dx bound into edx, its parameter terms into tw_, tb_ (added in place, or as 0 + the term) */
#define ROWS_DX(j, WJ)                                                                                    \
    do {                                                                                                  \
        ROWS_DX_TERMS(j, WJ)                                                                              \
        edx[j] = EDX_;                                                                                    \
        tw_[j] = (ADD ? tw_[j] : 0.0) + TWT_;                                                             \
        tb_[j] = (ADD ? tb_[j] : 0.0) + TBT_;                                                             \
    } while (0)


#define ROWS_BODY                                                                                         \
    const Py_ssize_t m = A->m, n = A->n, wcols = A->wcols, wrows = A->wrows;                              \
    const double u = A->u, gn = A->gn, gm = A->gm, ud = A->ud, eta = A->eta, u2 = A->u2, gn2 = A->gn2;    \
    const double gm2 = A->gm2;                                                                            \
    const int centered = A->centered, lowp = A->lowp, epi = A->epi, two = A->two;                         \
    double *restrict wbuf = A->scratch, *restrict bbuf = A->scratch + n, *restrict twb = A->scratch + 2 * n; \
    double *restrict tbb = A->scratch + 3 * n;                                                            \
    double dn = (double)n, dd = (double)(n - A->ddof > 1 ? n - A->ddof : 1);                              \
    for (Py_ssize_t i = 0; i < m; i++) {                                                                  \
        const double *restrict x = A->X + i * n;                                                          \
        const double *restrict g = A->G ? A->G + i * n : NULL;                                            \
        if (A->P > 1 && m > 1) {     /* row i: run p of Q values at (p * m + i) * Q, gathered (one row: \
                                      * already in place) */                                              \
            const Py_ssize_t Q = n / A->P;                                                                \
            for (Py_ssize_t p = 0; p < A->P; p++) {                                                       \
                memcpy(A->scratch + 4 * n + p * Q, A->X + (p * m + i) * Q, sizeof(double) * (size_t)Q);   \
                if (A->G)                                                                                 \
                    memcpy(A->scratch + 5 * n + p * Q, A->G + (p * m + i) * Q, sizeof(double) * (size_t)Q); \
            }                                                                                             \
            x = A->scratch + 4 * n;                                                                       \
            g = A->G ? A->scratch + 5 * n : NULL;                                                         \
        }                                                                                                 \
        Py_ssize_t po = (((A->i0 + i) / A->wdiv) % wrows) * wcols, rep = n / wcols;   /* element j: po + j / rep */ \
        /* runs: each pattern element's run of rep elements, its w and b read once (runs of whole vectors: \
         * sums_g's lanes as in one loop over the row); else w and b per element (the row's own, or      \
         * spread into the scratch) */                                                                    \
        const int runs = rep > 1 && rep % 4 == 0;                                                         \
        const double *restrict wr = wbuf, *restrict br = bbuf;                                                        \
        if (A->W && wcols == n)                                                                           \
            wr = A->W + po;                                                                               \
        else if (!runs)                                                                                   \
            for (Py_ssize_t k = 0; k < wcols; k++)                                                        \
                for (Py_ssize_t j = k * rep; j < (k + 1) * rep; j++)                                      \
                    wbuf[j] = A->W ? A->W[po + k] : 1.0;                                                  \
        if (A->B && wcols == n)                                                                           \
            br = A->B + po;                                                                               \
        else if (!runs)                                                                                   \
            for (Py_ssize_t k = 0; k < wcols; k++)                                                        \
                for (Py_ssize_t j = k * rep; j < (k + 1) * rep; j++)                                      \
                    bbuf[j] = A->B ? A->B[po + k] : 0.0;                                                  \
        double v1[LANES], va[LANES], vq[LANES];                                                           \
        sums_x(x, n, v1, va, vq);                                                                         \
        double s1 = lanes_sum(v1), sa = lanes_sum(va), sq = lanes_sum(vq);                                \
        double mu = 0, var;                                                                               \
        if (centered) {                                                                                   \
            mu = s1 / dn;                                                                                 \
            double v2[LANES];                                                                             \
            sum_d2(x, n, mu, v2);                                                                         \
            var = lanes_sum(v2) / dd;                                                                     \
        } else                                                                                            \
            var = sq / dn;                                                                                \
        double r = A->eps_std ? 1.0 / (sqrt(var) + A->eps) : 1.0 / sqrt(var + A->eps);                    \
        double S = sa / dn, amu = fabs(mu);                                                               \
        double K = centered ? r * S : 0.0, rho = (1.0 + K) / 2, Kmu = r * amu;                            \
        double q2 = (gn * u) * (gn * u) * K * K / 2, ud2 = 2 * ud * ud * Kmu * Kmu;                       \
        double q2b = (gn2 * u2) * (gn2 * u2) * K * K / 2;                                                 \
        double Dc = r * (amu + eta / ud);                                                                 \
        /* the strict brackets' coefficients (ey_strict): y's and dx's of both contracts, the parameters' \
         * of each */                                                                                     \
        double cG1 = u * gn, cK1 = u * (gm + 4), cG2 = u2 * gn2, cK2 = u2 * (gm2 + 4);                    \
        double cG = two ? cG1 + cG2 : cG1, c4 = two ? 4 * u + 4 * u2 : 4 * u, cQ = two ? q2 + q2b : q2;   \
        double *restrict ey = A->Ey + i * n;                                                              \
        FLAGS(lowp, epi, LOWP, EPI,                                                                       \
        if (runs)                                                                                         \
            for (Py_ssize_t k = 0; k < wcols; k++) {                                                      \
                const double wk = A->W ? A->W[po + k] : 1.0, bk = A->B ? A->B[po + k] : 0.0;              \
                _Pragma("GCC ivdep")    /* the outputs do not overlap: no run-time alias tests */          \
                for (Py_ssize_t j = k * rep; j < (k + 1) * rep; j++)                                      \
                    ROWS_Y(j, wk, bk);                                                                    \
            }                                                                                             \
        else {                                                                                            \
            _Pragma("GCC ivdep")                                                                          \
            for (Py_ssize_t j = 0; j < n; j++)                                                            \
                ROWS_Y(j, wr[j], br[j]);                                                                  \
        })                                                                                                \
        double Em = u * (gn * S + 4 * amu), Er = u * r * (gn * rho + 4);                                  \
        if (lowp) {                                                                                       \
            Em += 2 * ud * amu;                                                                           \
            Er += 2 * ud * r + 2 * ud * ud * r * Kmu * Kmu;                                               \
        }                                                                                                 \
        if (two) {                                                                                        \
            Em = Em + u2 * (gn2 * S + 4 * amu);                                                           \
            Er = Er + u2 * r * (gn2 * rho + 4);                                                           \
        }                                                                                                 \
        double *st = A->ST + 6 * i;                                                                       \
        st[0] = Em; st[1] = Er; st[2] = S; st[3] = K; st[4] = var; st[5] = mu;                            \
        if (!g)                                                                                           \
            continue;                                                                                     \
        double o6[6][4];                                                                                  \
        if (runs)                                                                                         \
            sums_g(x, g, A->W ? A->W + po : NULL, rep, n, mu, r, amu, centered, Dc, o6);                  \
        else                                                                                              \
            sums_g(x, g, wr, 0, n, mu, r, amu, centered, Dc, o6);                                         \
        double sgw = lanes4_sum(o6[0]), sagw = lanes4_sum(o6[1]), sgx = lanes4_sum(o6[2]);                \
        double sbg = lanes4_sum(o6[3]), skg = lanes4_sum(o6[4]), sgd = lanes4_sum(o6[5]);                 \
        double Am = centered ? sgw / dn : 0.0, Bv = sgx / (centered ? dd : dn);                           \
        double aA = fabs(Am), aB = fabs(Bv), Ag = centered ? sagw / dn : 0.0;                             \
        double Bg = sbg / dn, Kg = skg / dn, Dg = sgd / dn;                                               \
        double *restrict edx = A->Edx + i * n;                                                            \
        /* the parameter terms: one per pattern element (rep 1), added in place; else each element's into \
         * the scratch (as 0 + the term: what adding it to a zeroed scratch gave), summed per pattern      \
         * element by add_terms */                                                                        \
        double *restrict tw_ = rep == 1 ? A->TW + po : twb, *restrict tb_ = rep == 1 ? A->TB + po : tbb;  \
        const int in_place = rep == 1;                                                                    \
        /* the parameter terms' coefficients, both contracts' added (tw_strict is linear in them) */      \
        double cKt = two ? cK1 + cK2 : cK1, cGt = two ? cG1 + cG2 : cG1, cQt = two ? q2 + q2b : q2;       \
        double cBt = two ? u * gm + u2 * gm2 : u * gm;                                                    \
        FLAGS3(lowp, epi, in_place, LOWP, EPI, ADD,                                                       \
        if (runs)                       /* each run's parameter terms summed in 8 lanes as add_terms sums \
                                         * them (the same additions), into TW, TB at the run's end */      \
            for (Py_ssize_t k = 0; k < wcols; k++) {                                                      \
                const double wk = A->W ? A->W[po + k] : 1.0;                                              \
                double sw[LANES] = {0}, sb[LANES] = {0};                                                  \
                for (Py_ssize_t jb = 0; jb < rep; jb += TERM_BLOCK) {                                     \
                    const Py_ssize_t nb = rep - jb < TERM_BLOCK ? rep - jb : TERM_BLOCK, j0 = k * rep + jb; \
                    double tws[TERM_BLOCK], tbs[TERM_BLOCK];                                              \
                    _Pragma("GCC ivdep")                                                                  \
                    for (Py_ssize_t j = j0; j < j0 + nb; j++) {                                           \
                        ROWS_DX_TERMS(j, wk)                                                              \
                        edx[j] = EDX_;                                                                    \
                        tws[j - j0] = TWT_;                                                               \
                        tbs[j - j0] = TBT_;                                                               \
                    }                                                                                     \
                    sums2_more(tws, tbs, nb, sw, sb);                                                     \
                }                                                                                         \
                A->TW[po + k] += lanes_sum(sw);                                                           \
                A->TB[po + k] += lanes_sum(sb);                                                           \
            }                                                                                             \
        else {                                                                                            \
            _Pragma("GCC ivdep")                                                                          \
            for (Py_ssize_t j = 0; j < n; j++)                                                            \
                ROWS_DX(j, wr[j]);                                                                        \
        })                                                                                                \
        if (rep > 1 && !runs)                                                                             \
            add_terms(A->TW + po, A->TB + po, twb, tbb, n, rep);                                         \
    }

INSTANCES(static void, rows, (const struct rows_args *A), ROWS_BODY)

static void rows(const struct rows_args *A)
{
    ISA(rows, A);
}

static PyObject *py_row_bounds(PyObject *self, PyObject *args)
{
    PyObject *ox, *ow, *ob, *og, *oEy, *oEdx, *otw, *otb, *ost;
    double eps, u, gn, gm, ud, eta, u2 = 0, gn2 = 0, gm2 = 0;
    int centered, ddof, eps_std, lowp, epi;
    Py_ssize_t wrows, wcols;
    Py_ssize_t P = 1, wdiv = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOdddddiiiiidnn|dddnn:row_bounds", &ox, &ow, &ob, &og, &oEy, &oEdx, &otw,
                          &otb, &ost, &eps, &u, &gn, &gm, &ud, &centered, &ddof, &eps_std, &lowp, &epi, &eta, &wrows,
                          &wcols, &u2, &gn2, &gm2, &P, &wdiv))
        return NULL;
    Py_buffer v[9];
    PyObject *o[9] = {ox, ow, ob, og, oEy, oEdx, otw, otb, ost};
    const char *names[9] = {"x", "w", "b", "g", "E_y", "E_dx", "tw", "tb", "stats"};
    int writable[9] = {0, 0, 0, 0, 1, 1, 1, 1, 1};
    int held[9] = {0};
    double *p[9] = {NULL};
    for (int i = 0; i < 9; i++) {
        if (o[i] == Py_None)
            continue;
        if (get_buf(o[i], &v[i], names[i], "d", 8, writable[i]) < 0) {
            for (int j = 0; j < i; j++) if (held[j]) PyBuffer_Release(&v[j]);
            return NULL;
        }
        held[i] = 1;
        p[i] = v[i].buf;
    }
    PyObject *xo = ox;
    Py_ssize_t m = -1, n = -1;
    if (PyObject_HasAttrString(xo, "shape")) {
        PyObject *sh = PyObject_GetAttrString(xo, "shape");
        if (sh && PyTuple_Check(sh) && PyTuple_Size(sh) == 2) {
            m = PyLong_AsSsize_t(PyTuple_GetItem(sh, 0));
            n = PyLong_AsSsize_t(PyTuple_GetItem(sh, 1));
        }
        Py_XDECREF(sh);
    }
    Py_ssize_t np_ = wrows * wcols;
    Py_ssize_t len[9] = {m * n, np_, np_, m * n, m * n, m * n, np_, np_, 6 * m};
    int bad = m < 0 || n < 1 || !p[0] || !p[4] || !p[8] || (p[3] && (!p[5] || !p[6] || !p[7]))
              || wrows < 1 || wcols < 1 || n % wcols || P < 1 || n % P || wdiv < 1;
    for (int i = 0; i < 9 && !bad; i++)
        if (held[i] && v[i].len / 8 != len[i])
            bad = 1;
    if (bad) {
        for (int j = 0; j < 9; j++) if (held[j]) PyBuffer_Release(&v[j]);
        PyErr_SetString(PyExc_ValueError, "_judge.row_bounds: x must be (m, n) with n >= 1, and the other "
                        "arrays sized to match (w, b, tw, tb: wrows*wcols with wcols dividing n; g, E_y, E_dx: m*n; "
                        "stats: 6*m), P >= 1 dividing n, wdiv >= 1");
        return NULL;
    }
    const double *X = p[0], *W = p[1], *B = p[2], *G = p[3];
    double *Ey = p[4], *Edx = p[5], *TW = p[6], *TB = p[7], *ST = p[8];
    int two = u2 > 0;                 /* a second (strict) contract, its bounds added to the first's */
    struct rows_args ra = {X, W, B, G, Ey, Edx, TW, TB, ST, m, n, wrows, wcols, wdiv, P, eps, u, gn, gm, ud, eta,
                           u2, gn2, gm2, centered, ddof, eps_std, lowp, epi, two, NULL, 0};
    ra.scratch = malloc(sizeof(double) * 6 * (size_t)n);
    if (!ra.scratch) {
        for (int j = 0; j < 9; j++) if (held[j]) PyBuffer_Release(&v[j]);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    rows(&ra);
    Py_END_ALLOW_THREADS
    free(ra.scratch);
    for (int j = 0; j < 9; j++) if (held[j]) PyBuffer_Release(&v[j]);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ the compiled block pipeline
 * judge_rows(api, x, dy, xkind, P, merged, kw, kb, eps, sxy, sy, bw, bb, wrows, wcols, contracts)
 *     -> ((figures of y, figures of dx) for each contract)
 *
 * One block of rows of layer_norm or group_norm judged in one call (stream.py, pipeline.py: "the compiled
 * block pipeline"), a few rows at a time (SUB_ELEMENTS values, so that their float64 temporaries stay in the
 * L2 cache from one stage to the next instead of going out to memory between them), each stage the very code
 * of the path it replaces:
 *   - x and dy widened to float64 (exactly; 16-bit patterns through value_table);
 *   - the reference: _fused's forward and backward kernels (the capsule `api`, _fused_api.h), on the rows of
 *     the geometry (rows, P, Q) (row_axis 0): layer_norm's (merged 0: P = 1, kw, kb a value per element, the
 *     column sums sxy, sy started at 0.0 by the first rows and added to row after row), or group_norm's
 *     (merged 1: kw, kb a value per segment, rows * P, as the sums sxy, sy; the merged backward), so y, dx
 *     and the sums are the bits _fused.forward / _fused.backward give on the whole block;
 *   - for each contract, the row bounds: rows(), as row_bounds with the parameter pattern bw, bb (wrows x
 *     wcols; the block's row i uses pattern row i % wrows; tw, tb added to, row after row, as by one call);
 *     then the comparison of the returned y and dx: cmp_run, as compare on the whole block (the counts, maxima
 *     and worst elements the same; the sums within rounding: compare's pieces end at the calls' ends too).
 * x, dy: the block's (rows, n) values, C-contiguous, float64, float32, or 16-bit patterns of xkind 2 or 3;
 * kw, kb, sxy, sy, bw, bb: float64 or None (sxy and bw with kw, sy and bb with kb). contracts: a tuple of
 * (bargs, tw, tb, stats, jy, jdx): bargs row_bounds' (eps, u, gn, gm, ud, eta, centered, ddof, eps_std, lowp,
 * epi, u2, gn2, gm2); tw, tb float64 of wrows * wcols values, added to; stats (4, rows) float64 or None, set to
 * the rows' mean (m0 + c, as the forwards form it), rstd and their bounds (row_bounds' stats); jy, jdx: (g,
 * kind, scale, shape, start, acc, mult, mtab, room): compare's arguments for the block of the returned array
 * (g: its rows * n values, flat), and room, how many candidates to keep (the elements whose bound is at least
 * the running scale, compare.ArrayAccumulator._candidates; < 0: none, the scale is final). Each figures
 * tuple: compare's, then (candidate bounds, candidate errors: bytes of float64; the candidates' count, which
 * may exceed room: then only room are kept). */
enum { SUB_ELEMENTS = 1 << 13 };

/* judge_rows' scratch, kept by each thread from one call to the next (a fresh buffer would be faulted in,
 * page by page, at every block) when it holds at most KEEP_SCRATCH doubles */
enum { KEEP_SCRATCH = 1 << 20 };
static _Thread_local double *tl_scratch;
static _Thread_local size_t tl_len;

static double *scratch_get(size_t need)
{
    if (tl_len >= need)
        return tl_scratch;
    free(tl_scratch);
    tl_scratch = malloc(sizeof(double) * need);
    tl_len = tl_scratch ? need : 0;
    return tl_scratch;
}

static void scratch_put(void)
{
    if (tl_len > KEEP_SCRATCH) {
        free(tl_scratch);
        tl_scratch = NULL;
        tl_len = 0;
    }
}

struct judged {
    Py_buffer g, acc, mult, mtab;
    int kind;
    double scale;
    Py_ssize_t shape[MAXDIM], nd, total, start, room;
    const double *vt;
    struct cmp c;
    double *candE, *candD;
    Py_ssize_t ncand, cap;
    int oom;                          /* no memory for a candidate: judged_result raises MemoryError */
};

static void judged_release(struct judged *J)
{
    release(&J->g); release(&J->acc); release(&J->mult); release(&J->mtab);
    free(J->candE); free(J->candD);
}

/* J <- the tuple o (judge_rows' jy, jdx) for a block of count values (chan: a block of channels, g the
 * (N, channels, S) view of them, its two inner axes contiguous, start the first channel); -1 with an exception */
static int judged_get(PyObject *o, struct judged *J, Py_ssize_t count, const char *name, int chan)
{
    memset(J, 0, sizeof *J);
    PyObject *og, *oshape, *oacc, *omult, *omtab;
    if (!PyArg_ParseTuple(o, "OidOnOOOn", &og, &J->kind, &J->scale, &oshape, &J->start, &oacc, &omult, &omtab,
                          &J->room))
        return -1;
    if (J->kind < 0 || J->kind > 3) {
        PyErr_Format(PyExc_ValueError, "_judge.judge_rows: %s kind=%d; expected 0..3", name, J->kind);
        return -1;
    }
    if ((J->nd = get_shape(oshape, J->shape, &J->total)) < 0)
        return -1;
    if (get_view(og, &J->g, "g", "dfH") < 0 || get_buf(oacc, &J->acc, "acc", "d", 8, 1) < 0
        || get_mult(omult, &J->mult) < 0 || (omtab != Py_None && get_buf(omtab, &J->mtab, "mtab", "IL", 4, 0) < 0))
        return -1;
    Py_ssize_t isz = J->g.itemsize;
    int laid = chan ? J->g.ndim == 3 && J->g.strides[2] == isz && J->g.strides[1] == J->g.shape[2] * isz && J->nd >= 2
                      && J->start + J->g.shape[1] <= J->shape[1] && J->g.shape[0] == J->shape[0]
                    : PyBuffer_IsContiguous(&J->g, 'C') && J->start + count <= J->total;
    if (!laid || J->g.len / isz != count || J->start < 0
        || J->acc.len / 8 != 3 * cmp_acc_len(J->nd, J->shape, NULL) || (J->mult.obj && J->mult.len / J->mult.itemsize != count)
        || (isz == 2 && J->kind != 2 && J->kind != 3)
        || (J->mtab.obj && (isz != 2 || J->mult.obj || J->mtab.len / 4 != 65536))) {
        PyErr_Format(PyExc_ValueError, "_judge.judge_rows: %s: the returned block (C-contiguous, %zd values from "
                     "flat index %zd of the shape; of channels: an (N, channels, S) view from channel %zd, its inner "
                     "axes contiguous), acc, mult or mtab do not fit", name, count, J->start, J->start);
        return -1;
    }
    if (isz == 2 && !(J->vt = value_table(J->kind))) {
        PyErr_NoMemory();
        return -1;
    }
    cmp_init(&J->c, J->kind, J->scale, J->nd, J->shape, J->acc.buf);
    return 0;
}

/* room for more candidates (up to J->room; grown as they come: most blocks have none); 0 when out of memory */
static int judged_grow(struct judged *J)
{
    Py_ssize_t cap = J->cap ? 2 * J->cap : 1024;
    cap = cap < J->room ? cap : J->room;
    double *e = realloc(J->candE, sizeof(double) * (size_t)cap);
    if (e)
        J->candE = e;
    double *d = e ? realloc(J->candD, sizeof(double) * (size_t)cap) : NULL;
    if (d)
        J->candD = d;
    if (!e || !d)
        return 0;
    J->cap = cap;
    return 1;
}

/* the returned value at byte offset b of a block, widened */
static inline double value_at(const Py_buffer *g, const double *vt, Py_ssize_t b)
{
    const char *p = (const char *)g->buf + b;
    return g->itemsize == 8 ? *(const double *)p : g->itemsize == 4 ? (double)*(const float *)p : vt[*(const uint16_t *)p];
}

/* the largest bound the comparison has seen so far (NaN: one was NaN) */
static double cmp_max_bound(const struct cmp *c)
{
    double m = c->maxE;
    for (int l = 0; l < RL; l++)
        m = c->lacc.maxE[l] > m ? c->lacc.maxE[l] : m;
    return c->maxE_nan ? NAN : m;
}

/* k consecutive values of the returned array compared (ref, E): the first at flat index flat of the whole
 * array, at byte offset gb in the block g, at mo in its multiplicities; then, while the scale is running,
 * the candidates (ArrayAccumulator._candidates: bound finite, positive and at least the scale; their errors
 * as _diff) */
static void judged_run(struct judged *J, Py_ssize_t flat, Py_ssize_t gb, Py_ssize_t mo, Py_ssize_t k,
                       const double *ref, const double *E)
{
    const Py_buffer *g = &J->g;
    const char *gp = (const char *)g->buf + gb;
    const Py_ssize_t mi = J->mult.obj ? J->mult.itemsize : 0;
    if (J->room >= 0 && J->c.scale == 0)     /* the running scale not started: the reference's own (as add()) */
        J->scale = J->c.scale = ISA(absmax, ref, k);
    cmp_run(&J->c, flat, g->itemsize == 8 ? (const double *)gp : NULL,
            g->itemsize == 4 ? (const float *)gp : NULL, g->itemsize == 2 ? (const uint16_t *)gp : NULL, J->vt, ref, E,
            mi == 2 ? (const uint16_t *)J->mult.buf + mo : NULL, mi == 4 ? (const uint32_t *)J->mult.buf + mo : NULL,
            J->mtab.obj ? J->mtab.buf : NULL, k);
    if (J->room < 0 || cmp_max_bound(&J->c) < J->scale)
        return;
    for (Py_ssize_t j = 0; j < k; j++) {
        double Ei = E[j];
        if (!(Ei >= J->scale && Ei > 0 && isfinite(Ei)))
            continue;
        if (J->ncand < J->room && (J->ncand < J->cap || judged_grow(J))) {
            double gi = value_at(g, J->vt, gb + j * g->itemsize), ri = ref[j], lo, hi, d = fabs(gi - ri);
            if ((isnan(gi) && isnan(ri)) || gi == ri || (isinf(gi) && excess_at(&J->c.d, gi, ri, &lo, &hi) == 0))
                d = 0;
            J->candE[J->ncand] = Ei;
            J->candD[J->ncand] = d;
        } else if (J->ncand < J->room)
            J->oom = 1;
        J->ncand++;
    }
}

static PyObject *judged_result(struct judged *J)
{
    if (J->oom)
        return PyErr_NoMemory();
    Py_ssize_t kept = J->ncand < J->room ? J->ncand : (J->room > 0 ? J->room : 0);
    return Py_BuildValue("(Ny#y#n)", cmp_result(&J->c), (const char *)J->candE, kept * 8, (const char *)J->candD,
                         kept * 8, J->ncand);
}

/* dst[0..k-1] = the values of src (float64, float32, or 16-bit patterns of the table vt), widened (exactly;
 * compiled per instruction set: the float32 loop is a vector conversion) */
#define WIDEN_ARGS const void *restrict src, int isz, const double *restrict vt, double *restrict dst, Py_ssize_t k
INSTANCES(static void, widen, (WIDEN_ARGS),
    if (isz == 4)
        for (Py_ssize_t j = 0; j < k; j++)
            dst[j] = (double)((const float *)src)[j];
    else if (isz == 2)
        for (Py_ssize_t j = 0; j < k; j++)
            dst[j] = vt[((const uint16_t *)src)[j]];
    else
        memcpy(dst, src, sizeof(double) * (size_t)k);)

static void widen(WIDEN_ARGS)
{
    ISA(widen, src, isz, vt, dst, k);
}

/* one contract of judge_rows: its bounds' arguments and buffers, and its two comparisons */
struct contract_run {
    Py_buffer tw, tb, stats;
    struct rows_args ra;
    struct judged jy, jdx;
};

static void contract_release(struct contract_run *K)
{
    release(&K->tw); release(&K->tb); release(&K->stats);
    judged_release(&K->jy);
    judged_release(&K->jdx);
}

enum { MAX_CONTRACTS = 4 };

static PyObject *py_judge_rows(PyObject *self, PyObject *args)
{
    PyObject *ocap, *ox, *ody, *okw, *okb, *osxy, *osy, *obw, *obb, *ok;
    int xkind, mode;
    Py_ssize_t P, wrows, wcols;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOiniOOdOOOOnnO:judge_rows", &ocap, &ox, &ody, &xkind, &P, &mode, &okw, &okb, &eps,
                          &osxy, &osy, &obw, &obb, &wrows, &wcols, &ok))
        return NULL;
    const int merged = mode >= 1, chan = mode == 2;
    const struct fused_api *api = PyCapsule_GetPointer(ocap, FUSED_API_NAME);
    if (!api)
        return NULL;
    if (api->version != FUSED_API_VERSION) {
        PyErr_Format(PyExc_RuntimeError, "_judge.judge_rows: _fused's api is version %d; expected %d", api->version,
                     FUSED_API_VERSION);
        return NULL;
    }
    Py_ssize_t nk = PyTuple_Check(ok) ? PyTuple_Size(ok) : -1;
    if (nk < 1 || nk > MAX_CONTRACTS) {
        PyErr_Format(PyExc_ValueError, "_judge.judge_rows: contracts must be a tuple of 1 to %d", (int)MAX_CONTRACTS);
        return NULL;
    }
    Py_buffer vx = {0}, vdy = {0}, vp[6] = {{0}};
    struct contract_run K[MAX_CONTRACTS];
    memset(K, 0, sizeof K);
    PyObject *out = NULL;
    double *scratch = NULL;
    PyObject *po[6] = {okw, okb, osxy, osy, obw, obb};
    const char *pn[6] = {"kw", "kb", "sxy", "sy", "bw", "bb"};
    Py_ssize_t m = -1, n = -1;
    if (get_view(ox, &vx, "x", "dfH") < 0 || get_view(ody, &vdy, "dy", "dfH") < 0)
        goto done;
    for (int i = 0; i < 6; i++)
        if (po[i] != Py_None && get_buf(po[i], &vp[i], pn[i], "d", 8, i == 2 || i == 3) < 0)
            goto done;
    if (!chan && vx.ndim == 2) {
        m = vx.shape[0];
        n = vx.shape[1];
    }
    /* channels: x and dy are (N, channels, S) views, their inner axes contiguous; a row is a channel's N runs */
    int laid = chan ? vx.ndim == 3 && vdy.ndim == 3 && vx.shape[0] == P && vdy.shape[0] == P
                      && vx.shape[1] == vdy.shape[1] && vx.shape[2] == vdy.shape[2]
                      && vx.strides[2] == vx.itemsize && vx.strides[1] == vx.shape[2] * vx.itemsize
                      && vdy.strides[2] == vdy.itemsize && vdy.strides[1] == vdy.shape[2] * vdy.itemsize
                    : PyBuffer_IsContiguous(&vx, 'C') && PyBuffer_IsContiguous(&vdy, 'C');
    if (chan && laid) {
        m = vx.shape[1];
        n = P * vx.shape[2];
    }
    /* the kernel's parameters and sums: per element of a row (mode 0: layer_norm, P = 1, column sums), per
     * segment of each row (mode 1: group_norm's (rows, P)), or per channel, the sums per (n, channel) (mode 2) */
    const Py_ssize_t plen = merged ? m * P : n, klen = chan ? m : plen, pat = wrows * wcols;
    int bad = !laid || m < 1 || n < 2 || P < 1 || n % P || (!merged && P != 1) || wrows < 1 || wcols < 1 || n % wcols
              || (chan && wcols != 1) || mode < 0 || mode > 2
              || vdy.len != vx.len || vdy.itemsize != vx.itemsize
              || (vx.itemsize == 2 ? (xkind != 2 && xkind != 3) : xkind != (vx.itemsize == 8 ? 0 : 1))
              || (vp[0].obj != NULL) != (vp[2].obj != NULL) || (vp[1].obj != NULL) != (vp[3].obj != NULL)
              || (vp[0].obj != NULL) != (vp[4].obj != NULL) || (vp[1].obj != NULL) != (vp[5].obj != NULL);
    for (int i = 0; i < 6 && !bad; i++)
        if (vp[i].obj && vp[i].len / 8 != (i < 2 ? klen : i < 4 ? plen : pat))
            bad = 1;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "_judge.judge_rows: x and dy must be C-contiguous (m, n) blocks of one "
                        "dtype (xkind: 0 float64, 1 float32, 2 or 3 16-bit), n >= 2 a multiple of P and of wcols, or "
                        "(mode 2) (P, m, S) views with contiguous inner axes; kw, kb, sxy, sy float64 of n values "
                        "(mode 0, P 1), m * P (mode 1), or m and m * P (mode 2), bw, bb of wrows * wcols (mode 2: "
                        "wcols 1; sxy and bw with kw, sy and bb with kb); mode 0, 1 or 2");
        goto done;
    }
    const Py_ssize_t Q = n / P;
    const Py_ssize_t sub = SUB_ELEMENTS / n > 1 ? SUB_ELEMENTS / n : 1, sn = sub * n;
    const size_t need = (size_t)6 * sn + (size_t)9 * sub + (size_t)6 * n + (size_t)2 * P + (size_t)2 * P * sub;
    if (!(scratch = scratch_get(need))) {
        PyErr_NoMemory();
        goto done;
    }
    double *xs = scratch, *dys = xs + sn, *ys = dys + sn, *dxs = ys + sn, *Ey = dxs + sn, *Edx = Ey + sn;
    double *m0 = Edx + sn, *cc = m0 + sub, *rstd = cc + sub, *st = rstd + sub, *segs = st + 6 * sub + 6 * n;
    double *sxs = segs + 2 * P, *sys = sxs + P * sub;          /* mode 2: a piece's sums per (n, channel) */
    const double *KW = vp[0].buf, *KB = vp[1].buf, *BW = vp[4].buf, *BB = vp[5].buf;
    double *SXY = vp[2].buf, *SY = vp[3].buf;
    for (Py_ssize_t j = 0; j < nk; j++) {
        struct contract_run *C = &K[j];
        PyObject *ojy, *ojdx, *otw, *otb, *ostats;
        double be, u, gn, gm, ud, eta, u2, gn2, gm2;
        int centered, ddof, eps_std, lowp, epi;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ok, j), "(ddddddiiiiiddd)OOOOO:judge_rows contract", &be, &u, &gn,
                              &gm, &ud, &eta, &centered, &ddof, &eps_std, &lowp, &epi, &u2, &gn2, &gm2, &otw, &otb,
                              &ostats, &ojy, &ojdx))
            goto done;
        if (get_buf(otw, &C->tw, "tw", "d", 8, 1) < 0 || get_buf(otb, &C->tb, "tb", "d", 8, 1) < 0
            || (ostats != Py_None && get_buf(ostats, &C->stats, "stats", "d", 8, 1) < 0))
            goto done;
        if (C->tw.len / 8 != pat || C->tb.len / 8 != pat || (C->stats.obj && C->stats.len / 8 != 4 * m)) {
            PyErr_SetString(PyExc_ValueError, "_judge.judge_rows: a contract's tw, tb must be float64 of wrows * wcols "
                            "values, its stats (4, m) float64 or None");
            goto done;
        }
        if (judged_get(ojy, &C->jy, m * n, "y", chan) < 0 || judged_get(ojdx, &C->jdx, m * n, "dx", chan) < 0)
            goto done;
        for (int a = 0; chan && a < 2; a++) {      /* the returned blocks: (N, m, S) views of (N, C, S...) arrays */
            const struct judged *J = a ? &C->jdx : &C->jy;
            if (J->g.shape[1] != m || J->g.shape[2] != Q || J->total != J->shape[0] * J->shape[1] * Q) {
                PyErr_SetString(PyExc_ValueError, "_judge.judge_rows: a returned block of channels must be the (N, m, "
                                "S) view of an array of N * C * S values");
                goto done;
            }
        }
        struct rows_args ra = {NULL, BW, BB, NULL, Ey, Edx, C->tw.buf, C->tb.buf, st, 0, n, wrows, wcols, 1,
                               chan ? P : 1, be, u, gn, gm, ud, eta, u2, gn2, gm2, centered, ddof, eps_std, lowp, epi,
                               u2 > 0, st + 6 * sub, 0};
        C->ra = ra;
    }
    const double *vt = vx.itemsize == 2 ? value_table(xkind) : NULL;
    if (vx.itemsize == 2 && !vt) {
        PyErr_NoMemory();
        goto done;
    }
    const int isz = (int)vx.itemsize;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r0 = 0; r0 < m; r0 += sub) {
        const Py_ssize_t k = m - r0 < sub ? m - r0 : sub, o = r0 * n;
        const double *xr = xs, *dyr = dys;
        if (chan)                                      /* channels r0..: their N runs gathered, (N, k, S) */
            for (Py_ssize_t p = 0; p < P; p++) {
                widen((const char *)vx.buf + p * vx.strides[0] + r0 * Q * isz, isz, vt, xs + p * k * Q, k * Q);
                widen((const char *)vdy.buf + p * vdy.strides[0] + r0 * Q * isz, isz, vt, dys + p * k * Q, k * Q);
            }
        else if (isz == 8) {                           /* float64: read where it lies */
            xr = (const double *)vx.buf + o;
            dyr = (const double *)vdy.buf + o;
        } else {
            widen((const char *)vx.buf + o * isz, isz, vt, xs, k * n);
            widen((const char *)vdy.buf + o * isz, isz, vt, dys, k * n);
        }
        /* the rows r0..r0+k-1 as the rows of a geometry of their own: their parameters and sums from r0 * P
         * (mode 2: the parameters from r0, the sums into (N, m) from column r0) */
        struct geom gmt = {k, P, Q, chan, merged ? 1 : 2, 1};
        const Py_ssize_t po_ = chan ? r0 : merged ? r0 * P : 0;
        const double *kw = KW ? KW + po_ : NULL, *kb = KB ? KB + po_ : NULL;
        api->forward(&gmt, xr, ys, kw, kb, m0, cc, NULL, rstd, 0, k, eps);
        if (chan) {
            api->merged(&gmt, xr, dyr, dxs, kw, m0, cc, rstd, SXY ? sxs : NULL, SY ? sys : NULL, 0, k, segs);
            for (Py_ssize_t p = 0; p < P; p++)
                for (Py_ssize_t i = 0; i < k; i++) {
                    if (SXY)
                        SXY[p * m + r0 + i] = sxs[p * k + i];
                    if (SY)
                        SY[p * m + r0 + i] = sys[p * k + i];
                }
        } else if (merged)
            api->merged(&gmt, xr, dyr, dxs, kw, m0, cc, rstd, SXY ? SXY + po_ : NULL, SY ? SY + po_ : NULL, 0, k, segs);
        else
            api->backward(&gmt, xr, dyr, dxs, kw, m0, cc, rstd, SXY, SY, r0 == 0 ? 1 : 2, 0, k);
        for (Py_ssize_t j = 0; j < nk; j++) {         /* each contract's bounds, then its comparisons */
            struct contract_run *C = &K[j];
            C->ra.X = xr;
            C->ra.G = dyr;
            C->ra.m = k;
            C->ra.i0 = r0;
            rows(&C->ra);
            if (C->stats.obj) {        /* the rows' mean (as the forward's m0 + c) and rstd, and their bounds */
                double *so = C->stats.buf;
                for (Py_ssize_t i = 0; i < k; i++) {
                    so[r0 + i] = m0[i] + cc[i];
                    so[m + r0 + i] = rstd[i];
                    so[2 * m + r0 + i] = st[6 * i];
                    so[3 * m + r0 + i] = st[6 * i + 1];
                }
            }
            if (!chan) {
                judged_run(&C->jy, C->jy.start + o, o * C->jy.g.itemsize, o, k * n, ys, Ey);
                judged_run(&C->jdx, C->jdx.start + o, o * C->jdx.g.itemsize, o, k * n, dxs, Edx);
                continue;
            }
            /* channel r0 + i, run p: S values; the reference laid out (N, k, S), the bounds by row (k, N * S) */
            for (Py_ssize_t i = 0; i < k; i++)
                for (Py_ssize_t p = 0; p < P; p++) {
                    struct judged *J2[2] = {&C->jy, &C->jdx};
                    const double *R2[2] = {ys, dxs}, *E2[2] = {Ey, Edx};
                    for (int a = 0; a < 2; a++) {
                        struct judged *J = J2[a];
                        const Py_ssize_t ch = J->start + r0 + i;       /* in the whole array */
                        judged_run(J, (p * J->shape[1] + ch) * Q, p * J->g.strides[0] + (r0 + i) * J->g.strides[1],
                                   (p * m + r0 + i) * Q, Q, R2[a] + (p * k + i) * Q, E2[a] + i * n + p * Q);
                    }
                }
        }
    }
    Py_END_ALLOW_THREADS
    out = PyTuple_New(nk);
    for (Py_ssize_t j = 0; out && j < nk; j++) {
        PyObject *ry = judged_result(&K[j].jy), *rdx = ry ? judged_result(&K[j].jdx) : NULL;
        PyObject *pair = rdx ? PyTuple_Pack(2, ry, rdx) : NULL;
        Py_XDECREF(ry);
        Py_XDECREF(rdx);
        if (!pair)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, j, pair);
    }
done:
    scratch_put();
    release(&vx);
    release(&vdy);
    for (int i = 0; i < 6; i++)
        release(&vp[i]);
    for (int j = 0; j < MAX_CONTRACTS; j++)
        contract_release(&K[j]);
    return out;
}

/* set_isa("avx512" | "avx2" | "base") -> the one in use before; set_isa(None): just that (tests run each) */
static PyObject *py_set_isa(PyObject *self, PyObject *args)
{
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|z:set_isa", &name))
        return NULL;
    if (isa < 0)
        isa = best_isa();
    const char *was = ISA_NAMES[isa];
    if (!name)
        return PyUnicode_FromString(was);
    int k = ISA_BASE;
    while (k <= ISA_AVX512 && strcmp(name, ISA_NAMES[k]) != 0)
        k++;
    if (k > ISA_AVX512) {
        PyErr_Format(PyExc_ValueError, "_judge.set_isa: isa=%s; expected 'avx512', 'avx2' or 'base'", name);
        return NULL;
    }
    if (k > best_isa()) {
        PyErr_Format(PyExc_ValueError, "_judge.set_isa: this CPU does not run %s; it runs up to '%s'", name,
                     ISA_NAMES[best_isa()]);
        return NULL;
    }
    isa = k;
    return PyUnicode_FromString(was);
}

/* isas() -> the instruction sets this CPU runs, best first */
static PyObject *py_isas(PyObject *self, PyObject *unused)
{
    int best = best_isa();
    PyObject *t = PyTuple_New(best + 1);
    for (int k = best; t && k >= 0; k--)
        PyTuple_SET_ITEM(t, best - k, PyUnicode_FromString(ISA_NAMES[k]));
    return t;
}

static PyMethodDef methods[] = {
    {"set_isa", py_set_isa, METH_VARARGS, "set_isa(name=None) -> the ISA of the vector loops before ('avx512', "
     "'avx2' or 'base')"},
    {"isas", py_isas, METH_NOARGS, "isas() -> the ISAs this CPU runs, best first"},
    {"bucket_counts", py_bucket_counts, METH_VARARGS, "bucket_counts(keys, table[, out])"},
    {"pattern_counts", py_pattern_counts, METH_VARARGS, "pattern_counts(bits, table): 16-bit patterns counted"},
    {"saturated_counts", py_saturated_counts, METH_VARARGS, "saturated_counts(keys, counts) -> (keys, counts)"},
    {"compare", py_compare, METH_VARARGS, "compare(g, ref, E, mult, kind, scale, shape, start, acc[, axis[, mtab]])"},
    {"abs_max_finite", py_abs_max_finite, METH_O, "abs_max_finite(a) -> max |a| over the finite values of float64 a "
     "(0.0 when none)"},
    {"row_bounds", py_row_bounds, METH_VARARGS,
     "row_bounds(x, w, b, g, E_y, E_dx, tw, tb, stats, eps, u, gn, gm, ud, centered, ddof, eps_std, lowp, epi, eta, "
     "wrows, wcols[, u2, gn2, gm2, P])"},
    {"judge_rows", py_judge_rows, METH_VARARGS, "judge_rows(api, x, dy, xkind, P, merged, kw, kb, eps, sxy, sy, bw, "
     "bb, wrows, wcols, contracts) -> ((figures of y, of dx) per contract): a block of rows judged in one call"},
    {"value_counts", py_value_counts, METH_VARARGS, "value_counts(keys, out, exact_limit) -> exact (None: out is "
     "uint16 and a count does not fit)"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_judge", NULL, -1, methods};

PyMODINIT_FUNC PyInit__judge(void)
{
    return PyModule_Create(&moduledef);
}
