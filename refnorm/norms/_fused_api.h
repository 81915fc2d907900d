/* The compiled row kernels of refnorm.norms._fused as another extension calls them, without Python in
 * between: _fused's attribute `api` is a capsule (FUSED_API_NAME) holding a struct fused_api, whose
 * functions run the kernels of the instruction set _fused uses at the time of the call (set_isa). The
 * streaming judge's compiled block pipeline (refnorm/check/_judge.c, judge_rows) computes the reference of
 * a few rows at a time with them: the same kernels, so the same bits as _fused.forward / _fused.backward.
 *
 * The kernels work on rows s..e-1 of a 3-D view (struct geom; _fused.c's docstring). */
#ifndef REFNORM_FUSED_API_H
#define REFNORM_FUSED_API_H

struct geom {
    Py_ssize_t R, P, Q;
    int row_axis, wkind;
    Py_ssize_t wrows;           /* wkind 2: the weight holds wrows rows of P * Q; row r uses r % wrows */
};

#define FUSED_API_NAME "refnorm.norms._fused.api"
#define FUSED_API_VERSION 2

struct fused_api {
    int version;                /* FUSED_API_VERSION */
    /* _fused.forward's kernel: y, mean m0 + its correction c, var, rstd of rows s..e-1 */
    void (*forward)(const struct geom *, const double *x, double *y, const double *w, const double *b,
                    double *m0, double *c, double *var, double *rstd, Py_ssize_t s, Py_ssize_t e, double eps);
    /* _fused.backward's kernel for rows that are not merged (layer_norm's: colsum 1, the column sums
     * started at 0.0; colsum 2, added to what sxy and sy hold, row after row: the rows of one block given
     * in several calls give the same sums as one call) */
    void (*backward)(const struct geom *, const double *x, const double *dy, double *dx, const double *w,
                     const double *m0, const double *c, const double *rstd, double *sxy, double *sy, int colsum,
                     Py_ssize_t s, Py_ssize_t e);
    /* _fused.backward's kernel for rows whose segments are nodes of the row's pairwise tree, with one weight
     * per segment or none (group_norm's): the per-segment sums sxy, sy (indexed r * P + p), dx; segs: room
     * for 2 * P doubles */
    void (*merged)(const struct geom *, const double *x, const double *dy, double *dx, const double *w,
                   const double *m0, const double *c, const double *rstd, double *sxy, double *sy, Py_ssize_t s,
                   Py_ssize_t e, double *segs);
};

#endif
