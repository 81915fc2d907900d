/* The fused row kernels of refnorm.norms._fused, included once per instruction set (_fused.c).
 *
 * Every function here computes, for rows s..e-1 of a 3-D view, exactly the floating-point operations
 * of the NumPy path in _common.py (Grouped.forward / Grouped.backward, layer_norm's blocks), in the
 * same order, so the results are the same bits:
 *   - a sum is NumPy's: 0.0 + pairwise(values), pairwise = NumPy's pairwise_sum (8 accumulators over
 *     runs of at most 128 values, halved at multiples of 8 above that); a row of row_axis 1 (batch_norm:
 *     channel r of an (N, C, S) array) is the running sum, in order of n, of the pairwise sums of its
 *     segments (np.add.accumulate over n of np.add.reduce over S);
 *   - element-wise values are formed as the NumPy code forms them: d = (x - m0) - c, xhat = d * rstd,
 *     y = xhat * w + b, g = dy * w, dx = ((g - mean(g)) - xhat * mean(g * xhat)) * rstd.
 * The file is compiled with -ffp-contract=off (no fused multiply-add) and without -ffast-math, and the
 * eight accumulators are one vector of eight doubles: element-wise IEEE arithmetic in every lane, the
 * same bits whatever the instruction set.
 *
 * SFX is the name suffix of this instance (_base, _avx2, _avx512). */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, SFX)

/* One pairwise sum per expression: NAME(k, o, n) sums EXPR over elements o .. o+n-1 (offsets into the
 * arrays of k). EXPR_V(i) is the vector of elements i .. i+7, EXPR_S(i) element i. */
#define DEFINE_PAIRWISE(NAME, EXPR_V, EXPR_S)                                              \
    static double F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n)               \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double res = -0.0;                                                             \
            for (Py_ssize_t i = o; i < o + n; i++)                                         \
                res += EXPR_S(i);                                                          \
            return res;                                                                    \
        }                                                                                  \
        if (n <= 128) {                                                                    \
            v8d r = EXPR_V(o);                                                             \
            Py_ssize_t i, stop = o + n - (n % 8);                                          \
            for (i = o + 8; i < stop; i += 8)                                              \
                r += EXPR_V(i);                                                            \
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
            for (; i < o + n; i++)                                                         \
                res += EXPR_S(i);                                                          \
            return res;                                                                    \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        return F(NAME)(k, o, n2) + F(NAME)(k, o + n2, n - n2);                             \
    }

/* x */
#define SX_V(i) load8(k->x + (i))
#define SX_S(i) (k->x[i])
DEFINE_PAIRWISE(sum_x, SX_V, SX_S)
/* x - m0 */
#define SD0_V(i) (load8(k->x + (i)) - k->m0)
#define SD0_S(i) (k->x[i] - k->m0)
DEFINE_PAIRWISE(sum_d0, SD0_V, SD0_S)
/* d * d, d = (x - m0) - c */
#define SD2_V(i) sq8((load8(k->x + (i)) - k->m0) - k->c)
#define SD2_S(i) sq1((k->x[i] - k->m0) - k->c)
DEFINE_PAIRWISE(sum_d2, SD2_V, SD2_S)
/* a (g or dy) */
#define SA_V(i) load8(k->a + (i))
#define SA_S(i) (k->a[i])
DEFINE_PAIRWISE(sum_a, SA_V, SA_S)
/* a * xhat, xhat = ((x - m0) - c) * rstd */
#define SAX_V(i) (load8(k->a + (i)) * (((load8(k->x + (i)) - k->m0) - k->c) * k->r))
#define SAX_S(i) (k->a[i] * (((k->x[i] - k->m0) - k->c) * k->r))
DEFINE_PAIRWISE(sum_ax, SAX_V, SAX_S)

/* The NumPy sum over row r: one pairwise run over the P*Q contiguous values (row_axis 0), or the
 * running sum over p of the segments' sums (row_axis 1). */
static double F(row_sum)(const struct geom *gm, struct args *k, Py_ssize_t r, pairwise_fn fn)
{
    if (gm->row_axis == 0)
        return 0.0 + fn(k, r * gm->P * gm->Q, gm->P * gm->Q);
    double acc = 0.0 + fn(k, r * gm->Q, gm->Q);          /* segment p = 0 at (0 * R + r) * Q */
    for (Py_ssize_t p = 1; p < gm->P; p++)
        acc = acc + (0.0 + fn(k, (p * gm->R + r) * gm->Q, gm->Q));
    return acc;
}

static void F(forward_rows)(const struct geom *gm, const double *x, double *y, const double *w,
                            const double *b, double *m0o, double *co, double *varo, double *rstdo,
                            Py_ssize_t s, Py_ssize_t e, double eps)
{
    const double n = (double)(gm->P * gm->Q);
    const Py_ssize_t Q = gm->Q;
    for (Py_ssize_t r = s; r < e; r++) {
        struct args k = {.x = x};
        k.m0 = F(row_sum)(gm, &k, r, F(sum_x)) / n;
        k.c = F(row_sum)(gm, &k, r, F(sum_d0)) / n;
        double var = F(row_sum)(gm, &k, r, F(sum_d2)) / n;
        double rstd = 1.0 / sqrt(var + eps);
        m0o[r] = k.m0;
        co[r] = k.c;
        if (varo)
            varo[r] = var;
        if (rstdo)
            rstdo[r] = rstd;
        if (!y)
            continue;
        const double m0 = k.m0, c = k.c;
        for (Py_ssize_t p = 0; p < gm->P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            const double *xs = x + o;
            double *ys = y + o;
            if (gm->wkind == 2) {                       /* per element of the row (layer_norm) */
                if (w && b) {
                    for (Py_ssize_t q = 0; q < Q; q++)
                        ys[q] = (((xs[q] - m0) - c) * rstd) * w[q] + b[q];
                } else if (w) {
                    for (Py_ssize_t q = 0; q < Q; q++)
                        ys[q] = (((xs[q] - m0) - c) * rstd) * w[q];
                } else if (b) {
                    for (Py_ssize_t q = 0; q < Q; q++)
                        ys[q] = ((xs[q] - m0) - c) * rstd + b[q];
                } else {
                    for (Py_ssize_t q = 0; q < Q; q++)
                        ys[q] = ((xs[q] - m0) - c) * rstd;
                }
                continue;
            }
            const Py_ssize_t pi = seg_param(gm, r, p);
            const double ws = w ? w[pi] : 0.0, bs = b ? b[pi] : 0.0;
            if (w && b) {
                for (Py_ssize_t q = 0; q < Q; q++)
                    ys[q] = (((xs[q] - m0) - c) * rstd) * ws + bs;
            } else if (w) {
                for (Py_ssize_t q = 0; q < Q; q++)
                    ys[q] = (((xs[q] - m0) - c) * rstd) * ws;
            } else if (b) {
                for (Py_ssize_t q = 0; q < Q; q++)
                    ys[q] = ((xs[q] - m0) - c) * rstd + bs;
            } else {
                for (Py_ssize_t q = 0; q < Q; q++)
                    ys[q] = ((xs[q] - m0) - c) * rstd;
            }
        }
    }
}

/* dx for rows s..e-1; and either per-segment sums of dy * xhat and dy (sxy, sy, indexed like the
 * segments: (R, P) for row_axis 0, (P, R) for row_axis 1), or (colsum) column sums over the rows of
 * dy * xhat and dy, each of Q values, started at 0.0 and added row after row (layer_norm's block). */
static void F(backward_rows)(const struct geom *gm, const double *x, const double *dy, double *dx,
                             const double *w, const double *m0s, const double *cs, const double *rstds,
                             double *sxy, double *sy, int colsum, Py_ssize_t s, Py_ssize_t e)
{
    const double n = (double)(gm->P * gm->Q);
    const Py_ssize_t Q = gm->Q;
    if (colsum) {
        if (sxy)
            for (Py_ssize_t q = 0; q < Q; q++)
                sxy[q] = 0.0;
        if (sy)
            for (Py_ssize_t q = 0; q < Q; q++)
                sy[q] = 0.0;
    }
    for (Py_ssize_t r = s; r < e; r++) {
        const double m0 = m0s[r], c = cs[r], rstd = rstds[r];
        struct args k = {.x = x, .a = dy, .m0 = m0, .c = c, .r = rstd};
        /* the parameter-gradient sums, and g = dy * w written into dx */
        for (Py_ssize_t p = 0; p < gm->P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            if (colsum) {
                const double *xs = x + o, *dys = dy + o;
                if (sxy)
                    for (Py_ssize_t q = 0; q < Q; q++)
                        sxy[q] = sxy[q] + dys[q] * (((xs[q] - m0) - c) * rstd);
                if (sy)
                    for (Py_ssize_t q = 0; q < Q; q++)
                        sy[q] = sy[q] + dys[q];
            } else {
                const Py_ssize_t si = gm->row_axis == 0 ? r * gm->P + p : p * gm->R + r;
                if (sxy)
                    sxy[si] = 0.0 + F(sum_ax)(&k, o, Q);
                if (sy)
                    sy[si] = 0.0 + F(sum_a)(&k, o, Q);
            }
            if (w) {
                const double *dys = dy + o;
                double *gs = dx + o;
                if (gm->wkind == 2) {
                    for (Py_ssize_t q = 0; q < Q; q++)
                        gs[q] = dys[q] * w[q];
                } else {
                    const double ws = w[seg_param(gm, r, p)];
                    for (Py_ssize_t q = 0; q < Q; q++)
                        gs[q] = dys[q] * ws;
                }
            }
        }
        k.a = w ? dx : dy;                              /* g */
        const double mg = F(row_sum)(gm, &k, r, F(sum_a)) / n;
        const double mgx = F(row_sum)(gm, &k, r, F(sum_ax)) / n;
        for (Py_ssize_t p = 0; p < gm->P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            const double *xs = x + o, *gs = k.a + o;
            double *dxs = dx + o;
            for (Py_ssize_t q = 0; q < Q; q++)
                dxs[q] = ((gs[q] - mg) - (((xs[q] - m0) - c) * rstd) * mgx) * rstd;
        }
    }
}

#undef SX_V
#undef SX_S
#undef SD0_V
#undef SD0_S
#undef SD2_V
#undef SD2_S
#undef SA_V
#undef SA_S
#undef SAX_V
#undef SAX_S
#undef DEFINE_PAIRWISE
#undef F
