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

/* The eight accumulators of NumPy's pairwise sum are NV vectors of VW doubles (VW = 8, 4 or 2 by
 * instruction set): accumulator j*VW + l is lane l of vector j. */
#define NV (8 / VW)
typedef double F(vec) __attribute__((vector_size(VW * 8)));
#define LANE(r, e) ((r)[(e) / VW][(e) % VW])
#define LOADV(p) ({ F(vec) v_; memcpy(&v_, (p), sizeof v_); v_; })
#define HSUM(r) (((LANE(r, 0) + LANE(r, 1)) + (LANE(r, 2) + LANE(r, 3))) + \
                 ((LANE(r, 4) + LANE(r, 5)) + (LANE(r, 6) + LANE(r, 7))))

/* dst[q] = E for q < Q, E written with q as the index (E_V: the vector of q .. q+VW-1, E_S: element
 * q). With `nt` (a large output not read again here), the aligned middle part is written with
 * non-temporal stores, which skip reading the destination's cache lines from memory first: the same
 * values, a third less memory traffic for the output. */
#define STORE_ROW(dst, Q, E_V, E_S)                                                         \
    do {                                                                                   \
        Py_ssize_t q = 0;                                                                  \
        if (nt) {                                                                          \
            for (; q < (Q) && ((uintptr_t)((dst) + q) % (VW * 8)) != 0; q++)               \
                (dst)[q] = (E_S);                                                          \
            for (; q + VW <= (Q); q += VW)                                                 \
                STREAMV((dst) + q, (E_V));                                                 \
        }                                                                                  \
        for (; q < (Q); q++)                                                               \
            (dst)[q] = (E_S);                                                              \
    } while (0)

/* Two pairwise sums at once: NAME(k, o, n, out) puts the sums of EXPR1 and EXPR2 over elements
 * o .. o+n-1 (offsets into the arrays of k) in out[0], out[1]. The split points of the pairwise
 * recursion depend only on n, so each sum is, operation for operation, NumPy's pairwise sum of its
 * own values. E_V(i) is the vector of elements i .. i+VW-1, E_S(i) element i. */
#define DEFINE_PAIRWISE2(NAME, E1_V, E1_S, E2_V, E2_S)                                      \
    static void F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n, double *out)      \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double r1 = -0.0, r2 = -0.0;                                                   \
            for (Py_ssize_t i = o; i < o + n; i++) {                                       \
                r1 += E1_S(i);                                                             \
                r2 += E2_S(i);                                                             \
            }                                                                              \
            out[0] = r1;                                                                   \
            out[1] = r2;                                                                   \
            return;                                                                        \
        }                                                                                  \
        if (n <= 128) {                                                                    \
            F(vec) a1[NV], a2[NV];                                                         \
            for (int j = 0; j < NV; j++) {                                                 \
                a1[j] = E1_V(o + j * VW);                                                  \
                a2[j] = E2_V(o + j * VW);                                                  \
            }                                                                              \
            Py_ssize_t i, stop = o + n - (n % 8);                                          \
            for (i = o + 8; i < stop; i += 8) {                                            \
                for (int j = 0; j < NV; j++) {                                             \
                    a1[j] += E1_V(i + j * VW);                                             \
                    a2[j] += E2_V(i + j * VW);                                             \
                }                                                                          \
            }                                                                              \
            double r1 = HSUM(a1), r2 = HSUM(a2);                                           \
            for (; i < o + n; i++) {                                                       \
                r1 += E1_S(i);                                                             \
                r2 += E2_S(i);                                                             \
            }                                                                              \
            out[0] = r1;                                                                   \
            out[1] = r2;                                                                   \
            return;                                                                        \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        double lo[2], hi[2];                                                               \
        F(NAME)(k, o, n2, lo);                                                             \
        F(NAME)(k, o + n2, n - n2, hi);                                                    \
        out[0] = lo[0] + hi[0];                                                            \
        out[1] = lo[1] + hi[1];                                                            \
    }

/* One pairwise sum: the same, for one expression. */
#define DEFINE_PAIRWISE(NAME, E_V, E_S)                                                     \
    static double F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n)               \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double res = -0.0;                                                             \
            for (Py_ssize_t i = o; i < o + n; i++)                                         \
                res += E_S(i);                                                             \
            return res;                                                                    \
        }                                                                                  \
        if (n <= 128) {                                                                    \
            F(vec) a[NV];                                                                  \
            for (int j = 0; j < NV; j++)                                                   \
                a[j] = E_V(o + j * VW);                                                    \
            Py_ssize_t i, stop = o + n - (n % 8);                                          \
            for (i = o + 8; i < stop; i += 8)                                              \
                for (int j = 0; j < NV; j++)                                               \
                    a[j] += E_V(i + j * VW);                                               \
            double res = HSUM(a);                                                          \
            for (; i < o + n; i++)                                                         \
                res += E_S(i);                                                             \
            return res;                                                                    \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        return F(NAME)(k, o, n2) + F(NAME)(k, o + n2, n - n2);                             \
    }

/* The same sums for data already in the cache, several leaves at once: a leaf is one chain of
 * dependent additions, so summing four leaves (two, for two expressions) interleaved keeps the adder
 * busy; each leaf's own operations and their order are unchanged, and the leaf sums are combined
 * along the same tree (gather / combine, in _fused.c). (For data coming from memory the four streams
 * cost more than they save, measured: the first pass over a row uses the plain form above.) */
#define LEAF_INIT(a, E_V, at)                                                              \
    for (int j_ = 0; j_ < NV; j_++)                                                        \
        (a)[j_] = E_V((at) + j_ * VW)
#define LEAF_STEP(a, E_V, at)                                                              \
    for (int j_ = 0; j_ < NV; j_++)                                                        \
        (a)[j_] += E_V((at) + j_ * VW)
#define LEAF_TAIL(res, E_S, from, end)                                                     \
    for (Py_ssize_t i_ = (from); i_ < (end); i_++)                                         \
        res += E_S(i_)

#define DEFINE_PAIRWISE_IL(NAME, E_V, E_S)                                                  \
    static void F(NAME##_leaves)(const struct args *k, const Py_ssize_t *lo, const Py_ssize_t *ln, \
                                 int cnt, double *out)                                      \
    {                                                                                      \
        int t = 0;                                                                         \
        for (; t + 4 <= cnt; t += 4) {                                                     \
            F(vec) a0[NV], a1[NV], a2[NV], a3[NV];                                         \
            const Py_ssize_t o0 = lo[t], o1 = lo[t + 1], o2 = lo[t + 2], o3 = lo[t + 3];   \
            const Py_ssize_t w0 = ln[t] / 8, w1 = ln[t + 1] / 8, w2 = ln[t + 2] / 8,       \
                             w3 = ln[t + 3] / 8;                                           \
            Py_ssize_t m = w0 < w1 ? w0 : w1;                                              \
            m = m < w2 ? m : w2;                                                           \
            m = m < w3 ? m : w3;                                                           \
            LEAF_INIT(a0, E_V, o0);                                                        \
            LEAF_INIT(a1, E_V, o1);                                                        \
            LEAF_INIT(a2, E_V, o2);                                                        \
            LEAF_INIT(a3, E_V, o3);                                                        \
            for (Py_ssize_t s_ = 1; s_ < m; s_++) {                                        \
                LEAF_STEP(a0, E_V, o0 + 8 * s_);                                           \
                LEAF_STEP(a1, E_V, o1 + 8 * s_);                                           \
                LEAF_STEP(a2, E_V, o2 + 8 * s_);                                           \
                LEAF_STEP(a3, E_V, o3 + 8 * s_);                                           \
            }                                                                              \
            for (Py_ssize_t s_ = m; s_ < w0; s_++) LEAF_STEP(a0, E_V, o0 + 8 * s_);        \
            for (Py_ssize_t s_ = m; s_ < w1; s_++) LEAF_STEP(a1, E_V, o1 + 8 * s_);        \
            for (Py_ssize_t s_ = m; s_ < w2; s_++) LEAF_STEP(a2, E_V, o2 + 8 * s_);        \
            for (Py_ssize_t s_ = m; s_ < w3; s_++) LEAF_STEP(a3, E_V, o3 + 8 * s_);        \
            double r0 = HSUM(a0), r1 = HSUM(a1), r2 = HSUM(a2), r3 = HSUM(a3);             \
            LEAF_TAIL(r0, E_S, o0 + 8 * w0, o0 + ln[t]);                                   \
            LEAF_TAIL(r1, E_S, o1 + 8 * w1, o1 + ln[t + 1]);                               \
            LEAF_TAIL(r2, E_S, o2 + 8 * w2, o2 + ln[t + 2]);                               \
            LEAF_TAIL(r3, E_S, o3 + 8 * w3, o3 + ln[t + 3]);                               \
            out[t] = r0;                                                                   \
            out[t + 1] = r1;                                                               \
            out[t + 2] = r2;                                                               \
            out[t + 3] = r3;                                                               \
        }                                                                                  \
        for (; t < cnt; t++) {                                                             \
            F(vec) a0[NV];                                                                 \
            const Py_ssize_t o0 = lo[t], w0 = ln[t] / 8;                                   \
            LEAF_INIT(a0, E_V, o0);                                                        \
            for (Py_ssize_t s_ = 1; s_ < w0; s_++) LEAF_STEP(a0, E_V, o0 + 8 * s_);        \
            double r0 = HSUM(a0);                                                          \
            LEAF_TAIL(r0, E_S, o0 + 8 * w0, o0 + ln[t]);                                   \
            out[t] = r0;                                                                   \
        }                                                                                  \
    }                                                                                      \
    static double F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n)               \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double res = -0.0;                                                             \
            LEAF_TAIL(res, E_S, o, o + n);                                                 \
            return res;                                                                    \
        }                                                                                  \
        if (n <= MAX_GATHER) {                                                             \
            Py_ssize_t lo[MAX_LEAVES], ln[MAX_LEAVES];                                     \
            double sums[MAX_LEAVES];                                                       \
            int cnt = 0, at = 0;                                                           \
            gather(o, n, lo, ln, &cnt);                                                    \
            F(NAME##_leaves)(k, lo, ln, cnt, sums);                                        \
            return combine(n, sums, 1, &at);                                               \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        return F(NAME)(k, o, n2) + F(NAME)(k, o + n2, n - n2);                             \
    }

#define DEFINE_PAIRWISE2_IL(NAME, E1_V, E1_S, E2_V, E2_S)                                   \
    static void F(NAME##_leaves)(const struct args *k, const Py_ssize_t *lo, const Py_ssize_t *ln, \
                                 int cnt, double *out)                                      \
    {                                                                                      \
        int t = 0;                                                                         \
        for (; t + 2 <= cnt; t += 2) {                                                     \
            F(vec) a0[NV], b0[NV], a1[NV], b1[NV];                                         \
            const Py_ssize_t o0 = lo[t], o1 = lo[t + 1], w0 = ln[t] / 8, w1 = ln[t + 1] / 8; \
            const Py_ssize_t m = w0 < w1 ? w0 : w1;                                        \
            LEAF_INIT(a0, E1_V, o0);                                                       \
            LEAF_INIT(b0, E2_V, o0);                                                       \
            LEAF_INIT(a1, E1_V, o1);                                                       \
            LEAF_INIT(b1, E2_V, o1);                                                       \
            for (Py_ssize_t s_ = 1; s_ < m; s_++) {                                        \
                LEAF_STEP(a0, E1_V, o0 + 8 * s_);                                          \
                LEAF_STEP(b0, E2_V, o0 + 8 * s_);                                          \
                LEAF_STEP(a1, E1_V, o1 + 8 * s_);                                          \
                LEAF_STEP(b1, E2_V, o1 + 8 * s_);                                          \
            }                                                                              \
            for (Py_ssize_t s_ = m; s_ < w0; s_++) {                                       \
                LEAF_STEP(a0, E1_V, o0 + 8 * s_);                                          \
                LEAF_STEP(b0, E2_V, o0 + 8 * s_);                                          \
            }                                                                              \
            for (Py_ssize_t s_ = m; s_ < w1; s_++) {                                       \
                LEAF_STEP(a1, E1_V, o1 + 8 * s_);                                          \
                LEAF_STEP(b1, E2_V, o1 + 8 * s_);                                          \
            }                                                                              \
            double ra0 = HSUM(a0), rb0 = HSUM(b0), ra1 = HSUM(a1), rb1 = HSUM(b1);         \
            LEAF_TAIL(ra0, E1_S, o0 + 8 * w0, o0 + ln[t]);                                 \
            LEAF_TAIL(rb0, E2_S, o0 + 8 * w0, o0 + ln[t]);                                 \
            LEAF_TAIL(ra1, E1_S, o1 + 8 * w1, o1 + ln[t + 1]);                             \
            LEAF_TAIL(rb1, E2_S, o1 + 8 * w1, o1 + ln[t + 1]);                             \
            out[2 * t] = ra0;                                                              \
            out[2 * t + 1] = rb0;                                                          \
            out[2 * t + 2] = ra1;                                                          \
            out[2 * t + 3] = rb1;                                                          \
        }                                                                                  \
        for (; t < cnt; t++) {                                                             \
            F(vec) a0[NV], b0[NV];                                                         \
            const Py_ssize_t o0 = lo[t], w0 = ln[t] / 8;                                   \
            LEAF_INIT(a0, E1_V, o0);                                                       \
            LEAF_INIT(b0, E2_V, o0);                                                       \
            for (Py_ssize_t s_ = 1; s_ < w0; s_++) {                                       \
                LEAF_STEP(a0, E1_V, o0 + 8 * s_);                                          \
                LEAF_STEP(b0, E2_V, o0 + 8 * s_);                                          \
            }                                                                              \
            double ra0 = HSUM(a0), rb0 = HSUM(b0);                                         \
            LEAF_TAIL(ra0, E1_S, o0 + 8 * w0, o0 + ln[t]);                                 \
            LEAF_TAIL(rb0, E2_S, o0 + 8 * w0, o0 + ln[t]);                                 \
            out[2 * t] = ra0;                                                              \
            out[2 * t + 1] = rb0;                                                          \
        }                                                                                  \
    }                                                                                      \
    static void F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n, double *out)      \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double r1 = -0.0, r2 = -0.0;                                                   \
            LEAF_TAIL(r1, E1_S, o, o + n);                                                 \
            LEAF_TAIL(r2, E2_S, o, o + n);                                                 \
            out[0] = r1;                                                                   \
            out[1] = r2;                                                                   \
            return;                                                                        \
        }                                                                                  \
        if (n <= MAX_GATHER) {                                                             \
            Py_ssize_t lo[MAX_LEAVES], ln[MAX_LEAVES];                                     \
            double sums[2 * MAX_LEAVES];                                                   \
            int cnt = 0, at = 0;                                                           \
            gather(o, n, lo, ln, &cnt);                                                    \
            F(NAME##_leaves)(k, lo, ln, cnt, sums);                                        \
            out[0] = combine(n, sums, 2, &at);                                             \
            at = 0;                                                                        \
            out[1] = combine(n, sums + 1, 2, &at);                                         \
            return;                                                                        \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        double lo_[2], hi_[2];                                                             \
        F(NAME)(k, o, n2, lo_);                                                            \
        F(NAME)(k, o + n2, n - n2, hi_);                                                   \
        out[0] = lo_[0] + hi_[0];                                                          \
        out[1] = lo_[1] + hi_[1];                                                          \
    }

/* Four pairwise sums at once (plain form, one leaf at a time: four chains already). */
#define DEFINE_PAIRWISE4(NAME, E1_V, E1_S, E2_V, E2_S, E3_V, E3_S, E4_V, E4_S)              \
    static void F(NAME)(const struct args *k, Py_ssize_t o, Py_ssize_t n, double *out)      \
    {                                                                                      \
        if (n < 8) {                                                                       \
            double r1 = -0.0, r2 = -0.0, r3 = -0.0, r4 = -0.0;                             \
            for (Py_ssize_t i = o; i < o + n; i++) {                                       \
                r1 += E1_S(i);                                                             \
                r2 += E2_S(i);                                                             \
                r3 += E3_S(i);                                                             \
                r4 += E4_S(i);                                                             \
            }                                                                              \
            out[0] = r1, out[1] = r2, out[2] = r3, out[3] = r4;                            \
            return;                                                                        \
        }                                                                                  \
        if (n <= 128) {                                                                    \
            F(vec) a1[NV], a2[NV], a3[NV], a4[NV];                                         \
            for (int j = 0; j < NV; j++) {                                                 \
                a1[j] = E1_V(o + j * VW);                                                  \
                a2[j] = E2_V(o + j * VW);                                                  \
                a3[j] = E3_V(o + j * VW);                                                  \
                a4[j] = E4_V(o + j * VW);                                                  \
            }                                                                              \
            Py_ssize_t i, stop = o + n - (n % 8);                                          \
            for (i = o + 8; i < stop; i += 8) {                                            \
                for (int j = 0; j < NV; j++) {                                             \
                    a1[j] += E1_V(i + j * VW);                                             \
                    a2[j] += E2_V(i + j * VW);                                             \
                    a3[j] += E3_V(i + j * VW);                                             \
                    a4[j] += E4_V(i + j * VW);                                             \
                }                                                                          \
            }                                                                              \
            double r1 = HSUM(a1), r2 = HSUM(a2), r3 = HSUM(a3), r4 = HSUM(a4);             \
            for (; i < o + n; i++) {                                                       \
                r1 += E1_S(i);                                                             \
                r2 += E2_S(i);                                                             \
                r3 += E3_S(i);                                                             \
                r4 += E4_S(i);                                                             \
            }                                                                              \
            out[0] = r1, out[1] = r2, out[2] = r3, out[3] = r4;                            \
            return;                                                                        \
        }                                                                                  \
        Py_ssize_t n2 = n / 2;                                                             \
        n2 -= n2 % 8;                                                                      \
        double lo_[4], hi_[4];                                                             \
        F(NAME)(k, o, n2, lo_);                                                            \
        F(NAME)(k, o + n2, n - n2, hi_);                                                   \
        for (int j = 0; j < 4; j++)                                                        \
            out[j] = lo_[j] + hi_[j];                                                      \
    }

/* x */
#define SX_V(i) LOADV(k->x + (i))
#define SX_S(i) (k->x[i])
DEFINE_PAIRWISE(sum_x, SX_V, SX_S)
/* x - m0 */
#define SD0_V(i) (LOADV(k->x + (i)) - k->m0)
#define SD0_S(i) (k->x[i] - k->m0)
DEFINE_PAIRWISE_IL(sum_d0, SD0_V, SD0_S)
/* d * d, d = (x - m0) - c */
#define SD2_V(i) ({ F(vec) d_ = (LOADV(k->x + (i)) - k->m0) - k->c; d_ * d_; })
#define SD2_S(i) ({ double d_ = (k->x[i] - k->m0) - k->c; d_ * d_; })
DEFINE_PAIRWISE_IL(sum_d2, SD2_V, SD2_S)
/* a (g or dy) */
#define SA_V(i) LOADV(k->a + (i))
#define SA_S(i) (k->a[i])
DEFINE_PAIRWISE(sum_a, SA_V, SA_S)
/* a * xhat, xhat = ((x - m0) - c) * rstd */
#define SAX_V(i) (LOADV(k->a + (i)) * (((LOADV(k->x + (i)) - k->m0) - k->c) * k->r))
#define SAX_S(i) (k->a[i] * (((k->x[i] - k->m0) - k->c) * k->r))
DEFINE_PAIRWISE(sum_ax, SAX_V, SAX_S)
/* (g, g * xhat) with g = a, or g = a * w[i] (a weight per element), or (below, with dy and dy * xhat)
 * g = a * ws (one weight per segment): g computed as NumPy computes it (dy * w, one rounding), then
 * used as the stored value would be. */
DEFINE_PAIRWISE2(sum_a_ax, SA_V, SA_S, SAX_V, SAX_S)
DEFINE_PAIRWISE2_IL(sum_a_ax_il, SA_V, SA_S, SAX_V, SAX_S)
#define SGW_V(i) (LOADV(k->a + (i)) * LOADV(k->w + ((i) - k->wo)))
#define SGW_S(i) (k->a[i] * k->w[(i) - k->wo])
#define SGWX_V(i) (SGW_V(i) * (((LOADV(k->x + (i)) - k->m0) - k->c) * k->r))
#define SGWX_S(i) (SGW_S(i) * (((k->x[i] - k->m0) - k->c) * k->r))
DEFINE_PAIRWISE2_IL(sum_gw_gwx, SGW_V, SGW_S, SGWX_V, SGWX_S)
#define SGS_V(i) (LOADV(k->a + (i)) * k->ws)
#define SGS_S(i) (k->a[i] * k->ws)
#define SGSX_V(i) (SGS_V(i) * (((LOADV(k->x + (i)) - k->m0) - k->c) * k->r))
#define SGSX_S(i) (SGS_S(i) * (((k->x[i] - k->m0) - k->c) * k->r))
/* (dy, dy * xhat, g, g * xhat), g = dy * ws */
DEFINE_PAIRWISE4(sum_quad, SA_V, SA_S, SAX_V, SAX_S, SGS_V, SGS_S, SGSX_V, SGSX_S)

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

/* row_sum of two expressions at once (out[0], out[1]), each in its own NumPy order. */
static void F(row_sum2)(const struct geom *gm, struct args *k, Py_ssize_t r, pairwise2_fn fn, double *out)
{
    if (gm->row_axis == 0) {
        fn(k, r * gm->P * gm->Q, gm->P * gm->Q, out);
        out[0] = 0.0 + out[0];
        out[1] = 0.0 + out[1];
        return;
    }
    double seg[2];
    fn(k, r * gm->Q, gm->Q, seg);
    double acc1 = 0.0 + seg[0], acc2 = 0.0 + seg[1];
    for (Py_ssize_t p = 1; p < gm->P; p++) {
        fn(k, (p * gm->R + r) * gm->Q, gm->Q, seg);
        acc1 = acc1 + (0.0 + seg[0]);
        acc2 = acc2 + (0.0 + seg[1]);
    }
    out[0] = acc1;
    out[1] = acc2;
}

static void F(forward_rows)(const struct geom *gm, const double *x, double *y, const double *w,
                            const double *b, double *m0o, double *co, double *varo, double *rstdo,
                            Py_ssize_t s, Py_ssize_t e, double eps)
{
    const double n = (double)(gm->P * gm->Q);
    const Py_ssize_t Q = gm->Q;
    const int nt = (double)gm->R * gm->P * gm->Q * 8 >= NT_MIN_BYTES;
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
                    STORE_ROW(ys, Q, (((LOADV(xs + q) - m0) - c) * rstd) * LOADV(w + q) + LOADV(b + q),
                              (((xs[q] - m0) - c) * rstd) * w[q] + b[q]);
                } else if (w) {
                    STORE_ROW(ys, Q, (((LOADV(xs + q) - m0) - c) * rstd) * LOADV(w + q),
                              (((xs[q] - m0) - c) * rstd) * w[q]);
                } else if (b) {
                    STORE_ROW(ys, Q, ((LOADV(xs + q) - m0) - c) * rstd + LOADV(b + q),
                              ((xs[q] - m0) - c) * rstd + b[q]);
                } else {
                    STORE_ROW(ys, Q, ((LOADV(xs + q) - m0) - c) * rstd,
                              ((xs[q] - m0) - c) * rstd);
                }
                continue;
            }
            const Py_ssize_t pi = seg_param(gm, r, p);
            const double ws = w ? w[pi] : 0.0, bs = b ? b[pi] : 0.0;
            if (w && b) {
                STORE_ROW(ys, Q, (((LOADV(xs + q) - m0) - c) * rstd) * ws + bs,
                          (((xs[q] - m0) - c) * rstd) * ws + bs);
            } else if (w) {
                STORE_ROW(ys, Q, (((LOADV(xs + q) - m0) - c) * rstd) * ws,
                          (((xs[q] - m0) - c) * rstd) * ws);
            } else if (b) {
                STORE_ROW(ys, Q, ((LOADV(xs + q) - m0) - c) * rstd + bs,
                          ((xs[q] - m0) - c) * rstd + bs);
            } else {
                STORE_ROW(ys, Q, ((LOADV(xs + q) - m0) - c) * rstd,
                          ((xs[q] - m0) - c) * rstd);
            }
        }
    }
}

/* layer_norm's per-column sums over one row: sxy[q] += dy[q] * xhat[q], sy[q] += dy[q]. */
static void F(colsum_row)(const double *restrict xs, const double *restrict dys, double *restrict sxy,
                          double *restrict sy, Py_ssize_t Q, double m0, double c, double rstd)
{
    if (sxy && sy) {
        for (Py_ssize_t q = 0; q < Q; q++) {
            sxy[q] = sxy[q] + dys[q] * (((xs[q] - m0) - c) * rstd);
            sy[q] = sy[q] + dys[q];
        }
    } else if (sxy) {
        for (Py_ssize_t q = 0; q < Q; q++)
            sxy[q] = sxy[q] + dys[q] * (((xs[q] - m0) - c) * rstd);
    } else if (sy) {
        for (Py_ssize_t q = 0; q < Q; q++)
            sy[q] = sy[q] + dys[q];
    }
}

/* The backward for rows whose segments are nodes of the row's pairwise tree (row_axis 1, one
 * segment per row, or segments_aligned), with one weight per segment (wkind 1) or none: one pass over
 * each segment gives its pairwise sums of dy, dy * xhat, g and g * xhat; the per-segment sums (sy,
 * sxy) are 0.0 + those, and the row's sums of g and g * xhat are combined from them along the row's
 * tree (combine_segments; row_axis 1: the running sum over p), which are NumPy's additions in NumPy's
 * order. Then dx in a second pass. `segs`: room for 2 * P doubles. */
static void F(backward_rows_merged)(const struct geom *gm, const double *x, const double *dy, double *dx,
                                    const double *w, const double *m0s, const double *cs,
                                    const double *rstds, double *sxy, double *sy, Py_ssize_t s,
                                    Py_ssize_t e, double *segs)
{
    const double n = (double)(gm->P * gm->Q);
    const Py_ssize_t Q = gm->Q, P = gm->P;
    const int nt = (double)gm->R * gm->P * gm->Q * 8 >= NT_MIN_BYTES;
    for (Py_ssize_t r = s; r < e; r++) {
        const double m0 = m0s[r], c = cs[r], rstd = rstds[r];
        struct args k = {.x = x, .a = dy, .m0 = m0, .c = c, .r = rstd, .w = NULL, .wo = 0, .ws = 1.0};
        double accg = 0.0, accgx = 0.0;
        for (Py_ssize_t p = 0; p < P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            const Py_ssize_t si = gm->row_axis == 0 ? r * P + p : p * gm->R + r;
            double v[4];
            if (w) {
                k.ws = w[seg_param(gm, r, p)];
                F(sum_quad)(&k, o, Q, v);
            } else {
                F(sum_a_ax)(&k, o, Q, v);              /* g = dy */
                v[2] = v[0];
                v[3] = v[1];
            }
            if (sy)
                sy[si] = 0.0 + v[0];
            if (sxy)
                sxy[si] = 0.0 + v[1];
            if (gm->row_axis == 1 || P == 1) {          /* np.add.accumulate over p; or the row */
                accg = p == 0 ? 0.0 + v[2] : accg + (0.0 + v[2]);
                accgx = p == 0 ? 0.0 + v[3] : accgx + (0.0 + v[3]);
            } else {
                segs[2 * p] = v[2];
                segs[2 * p + 1] = v[3];
            }
        }
        if (gm->row_axis == 0 && P > 1) {               /* 0.0 + pairwise over the row */
            int at = 0;
            accg = 0.0 + combine_segments(P * Q, Q, segs, &at);
            at = 0;
            accgx = 0.0 + combine_segments(P * Q, Q, segs + 1, &at);
        }
        const double mg = accg / n, mgx = accgx / n;
        for (Py_ssize_t p = 0; p < P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            const double *restrict xs = x + o, *restrict dys = dy + o;
            double *restrict dxs = dx + o;
            if (w) {
                const double ws = w[seg_param(gm, r, p)];
                STORE_ROW(dxs, Q, ((LOADV(dys + q) * ws - mg) - (((LOADV(xs + q) - m0) - c) * rstd) * mgx) * rstd,
                          ((dys[q] * ws - mg) - (((xs[q] - m0) - c) * rstd) * mgx) * rstd);
            } else {
                STORE_ROW(dxs, Q, ((LOADV(dys + q) - mg) - (((LOADV(xs + q) - m0) - c) * rstd) * mgx) * rstd,
                          ((dys[q] - mg) - (((xs[q] - m0) - c) * rstd) * mgx) * rstd);
            }
        }
    }
}

/* dx for rows s..e-1; and either per-segment sums of dy * xhat and dy (sxy, sy, indexed like the
 * segments: (R, P) for row_axis 0, (P, R) for row_axis 1), or (colsum) column sums over the rows of
 * dy * xhat and dy, each of Q values, started at 0.0 (colsum 1; 2: at what they hold) and added row after
 * row (layer_norm's block). */
static void F(backward_rows)(const struct geom *gm, const double *x, const double *dy, double *dx,
                             const double *w, const double *m0s, const double *cs, const double *rstds,
                             double *sxy, double *sy, int colsum, Py_ssize_t s, Py_ssize_t e)
{
    /* Called for the rows backward_rows_merged does not take: layer_norm (colsum, wkind 2), and rows
     * whose sums do not split at their segments, with no weight or a weight spread over the row
     * (wkind 2). g = dy * w is formed on the fly. */
    const double n = (double)(gm->P * gm->Q);
    const Py_ssize_t Q = gm->Q;
    if (colsum == 1) {                                  /* colsum 2: added to what sxy and sy hold */
        if (sxy)
            for (Py_ssize_t q = 0; q < Q; q++)
                sxy[q] = 0.0;
        if (sy)
            for (Py_ssize_t q = 0; q < Q; q++)
                sy[q] = 0.0;
    }
    const int nt = (double)gm->R * gm->P * gm->Q * 8 >= NT_MIN_BYTES;
    for (Py_ssize_t r = s; r < e; r++) {
        const double m0 = m0s[r], c = cs[r], rstd = rstds[r];
        struct args k = {.x = x, .a = dy, .m0 = m0, .c = c, .r = rstd, .w = NULL, .wo = 0, .ws = 1.0};
        /* the parameter-gradient sums of dy * xhat and dy */
        for (Py_ssize_t p = 0; p < gm->P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            if (colsum) {                               /* layer_norm: P = 1, per-column sums */
                F(colsum_row)(x + o, dy + o, sxy, sy, Q, m0, c, rstd);
                continue;
            }
            const Py_ssize_t si = gm->row_axis == 0 ? r * gm->P + p : p * gm->R + r;
            if (sxy && sy) {
                double both[2];
                F(sum_a_ax)(&k, o, Q, both);
                sy[si] = 0.0 + both[0];
                sxy[si] = 0.0 + both[1];
            } else if (sxy) {
                sxy[si] = 0.0 + F(sum_ax)(&k, o, Q);
            } else if (sy) {
                sy[si] = 0.0 + F(sum_a)(&k, o, Q);
            }
        }
        double sums[2];
        if (w) {                                        /* row_axis 0: the row starts at r * P * Q */
            k.w = w + (r % gm->wrows) * gm->P * gm->Q;
            k.wo = r * gm->P * gm->Q;
            F(row_sum2)(gm, &k, r, F(sum_gw_gwx), sums);
        } else {
            F(row_sum2)(gm, &k, r, F(sum_a_ax_il), sums);
        }
        const double mg = sums[0] / n, mgx = sums[1] / n;
        for (Py_ssize_t p = 0; p < gm->P; p++) {
            const Py_ssize_t o = seg_off(gm, r, p);
            const double *restrict xs = x + o, *restrict dys = dy + o;
            double *restrict dxs = dx + o;
            if (w) {
                const double *restrict ws = k.w + p * Q;
                STORE_ROW(dxs, Q, ((LOADV(dys + q) * LOADV(ws + q) - mg) - (((LOADV(xs + q) - m0) - c) * rstd) * mgx) * rstd,
                          ((dys[q] * ws[q] - mg) - (((xs[q] - m0) - c) * rstd) * mgx) * rstd);
            } else {
                STORE_ROW(dxs, Q, ((LOADV(dys + q) - mg) - (((LOADV(xs + q) - m0) - c) * rstd) * mgx) * rstd,
                          ((dys[q] - mg) - (((xs[q] - m0) - c) * rstd) * mgx) * rstd);
            }
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
#undef SGSX_S
#undef SGSX_V
#undef SGS_S
#undef SGS_V
#undef SGWX_S
#undef SGWX_V
#undef SGW_S
#undef SGW_V
#undef DEFINE_PAIRWISE
#undef DEFINE_PAIRWISE2
#undef DEFINE_PAIRWISE4
#undef DEFINE_PAIRWISE_IL
#undef DEFINE_PAIRWISE2_IL
#undef LEAF_INIT
#undef LEAF_STEP
#undef LEAF_TAIL
#undef STORE_ROW
#undef NV
#undef LANE
#undef LOADV
#undef HSUM
#undef F
