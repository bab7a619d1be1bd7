/*
 * Fused CPU kernels for the per-sample mixture of DyT and LayerNorm:
 *
 *     y[b,t,:] = cl[b,:] * LN0(x[b,t,:]) + cd[b,:] * tanh(alpha * x[b,t,:]) + c0[b,:]
 *
 * where LN0 is LayerNorm without affine. AutoNorm, Random Selector and DyT all reduce to this form
 * (the per-sample gate weights and the per-channel affine parameters are folded into cl, cd, c0 by
 * the caller, on tiny (B, D) tensors). One pass over x forward, one pass over (x, grad) backward:
 * the branch activations are recomputed instead of stored, which is what makes the layer cost close
 * to a single LayerNorm.
 *
 * Layout: x, y, g, dx are contiguous float32 (B, T, D); cl, cd, c0 and their grads are (B, D);
 * mean and rstd are (B, T). Compiled at first use by models/norms/_kernel_loader.py and called
 * through ctypes (the GIL is released during the call).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rational tanh approximation (the 13/6 minimax form used by Eigen), max abs error ~1e-7 in float32;
 * plain arithmetic, so the compiler vectorises it. */
static inline float fast_tanh(float v) {
    const float clamp = 7.90531110763549805f;
    float x = v > clamp ? clamp : (v < -clamp ? -clamp : v);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return p / q;
}

/* Rational erf approximation (Eigen's float erf: odd 13th-degree over even 8th-degree polynomial,
 * inputs clamped to [-4, 4] where float erf is +-1), max abs error ~4e-7 in float32 against the exact
 * erf; plain arithmetic, so the selector's GELU vectorises instead of calling libm's scalar erff. */
static inline float fast_erf(float v) {
    const float x = v > 4.f ? 4.f : (v < -4.f ? -4.f : v);
    const float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p = p * x;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

void mixed_norm_forward(const float *restrict x, const float *restrict cl, const float *restrict cd,
                        const float *restrict c0, float alpha, float eps, int use_ln, long B, long T, long D,
                        int num_threads, float *restrict y, float *restrict mean_out,
                        float *restrict rstd_out) {
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (long r = 0; r < B * T; ++r) {
        const long b = r / T;
        const float *restrict xr = x + r * D;
        float *restrict yr = y + r * D;
        const float *restrict clb = cl + b * D;
        const float *restrict cdb = cd + b * D;
        const float *restrict c0b = c0 + b * D;
        float mean = 0.f, rstd = 0.f;
        if (use_ln) {
            float s = 0.f;
            for (long d = 0; d < D; ++d) s += xr[d];
            mean = s / (float)D;
            float v = 0.f;
            for (long d = 0; d < D; ++d) {
                float c = xr[d] - mean;
                v += c * c;
            }
            rstd = 1.f / sqrtf(v / (float)D + eps);
        }
        mean_out[r] = mean;
        rstd_out[r] = rstd;
        for (long d = 0; d < D; ++d) {
            float xv = xr[d];
            yr[d] = (xv - mean) * rstd * clb[d] + fast_tanh(alpha * xv) * cdb[d] + c0b[d];
        }
    }
}

/* Backward for one sample b: recompute the normalised row and tanh once per row (kept in the
 * L1-resident scratch rows xh, th), accumulate the (D,) grads of cl, cd, c0 over tokens. */
static float backward_sample(const float *restrict g, const float *restrict x, const float *restrict mean,
                             const float *restrict rstd, const float *restrict clb,
                             const float *restrict cdb, float alpha, int use_ln, long T, long D,
                             float *restrict dx, float *restrict dclb, float *restrict dcdb,
                             float *restrict dc0b, float *restrict xh, float *restrict th) {
    for (long d = 0; d < D; ++d) dclb[d] = dcdb[d] = dc0b[d] = 0.f;
    float da = 0.f;
    for (long t = 0; t < T; ++t) {
        const float *restrict xr = x + t * D;
        const float *restrict gr = g + t * D;
        float *restrict dxr = dx + t * D;
        const float mu = mean[t], rs = rstd[t];
        float s1 = 0.f, s2 = 0.f;
        for (long d = 0; d < D; ++d) {
            const float gv = gr[d];
            const float xhv = (xr[d] - mu) * rs;
            const float thv = fast_tanh(alpha * xr[d]);
            xh[d] = xhv;
            th[d] = thv;
            const float gl = gv * clb[d];
            s1 += gl;
            s2 += gl * xhv;
            dclb[d] += gv * xhv;
            dcdb[d] += gv * thv;
            dc0b[d] += gv;
        }
        const float m1 = use_ln ? s1 / (float)D : 0.f;
        const float m2 = use_ln ? s2 / (float)D : 0.f;
        for (long d = 0; d < D; ++d) {
            const float gv = gr[d];
            const float dpre = gv * cdb[d] * (1.f - th[d] * th[d]);
            da += dpre * xr[d];
            dxr[d] = rs * (gv * clb[d] - m1 - xh[d] * m2) + dpre * alpha;
        }
    }
    return da;
}

/* dalpha_per_sample has B entries (summed by the caller), so the parallel loop over samples needs
 * no atomics. */
void mixed_norm_backward(const float *restrict g, const float *restrict x, const float *restrict mean,
                         const float *restrict rstd, const float *restrict cl, const float *restrict cd,
                         float alpha, int use_ln, long B, long T, long D, int num_threads,
                         float *restrict dx, float *restrict dcl, float *restrict dcd,
                         float *restrict dc0, float *restrict dalpha_per_sample) {
#pragma omp parallel num_threads(num_threads)
    {
        float *scratch = (float *)malloc(sizeof(float) * 2 * (size_t)D);
#pragma omp for schedule(static)
        for (long b = 0; b < B; ++b) {
            dalpha_per_sample[b] = backward_sample(
                g + b * T * D, x + b * T * D, mean + b * T, rstd + b * T, cl + b * D, cd + b * D, alpha,
                use_ln, T, D, dx + b * T * D, dcl + b * D, dcd + b * D, dc0 + b * D, scratch, scratch + D);
        }
        free(scratch);
    }
}

/* ------------------------------------------------------------------------------------------------
 * The whole AutoNorm layer (token mean -> selector MLP -> (Gumbel-)softmax gate -> mixed norm) as one
 * forward and one backward call. Everything per sample b runs while that sample's rows sit in L2:
 *   forward:  pass 1 over x[b] (row mean/rstd, token sum), the gate of b, pass 2 writes y[b];
 *   backward: pass 1 over (g[b], x[b]) accumulates the (D,) coefficient grads and writes the row-local
 *             part of dx[b], the gate backward of b gives the token-mean gradient, pass 2 adds the
 *             LayerNorm row-mean terms and that gradient to dx[b] (x[b], dx[b] still in L2).
 * Reductions over samples (parameter grads) run after the parallel loop, so no atomics are needed.
 *
 * The token mean the selector reads is the plain mean over T when token_weights is NULL, else the
 * weighted sum with token_weights (B, T) (1 / n_real on real tokens, 0 on pads: a masked mean computed
 * by the caller), so padded sequences pool over their real tokens only.
 *
 * Per-sample state, one row of `state` (B, S) with S = autonorm_state_width(T, D, H), laid out as
 *   mean[T] rstd[T] pooled[D] pre[H] cdf[H] hidden[H] soft[2] weights[2]
 * where cdf = Phi(pre) (the GELU derivative needs it) and soft is the (Gumbel-)softmax the gradient
 * flows through (= the noise-free probabilities in eval); weights is what mixes the branches (soft, or
 * its one-hot in hard straight-through mode).
 * ------------------------------------------------------------------------------------------------ */

#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

long autonorm_state_width(long T, long D, long H) { return 2 * T + D + 3 * H + 4; }

static float dot(const float *restrict a, const float *restrict b, long n) {
    float s = 0.f;
    for (long i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

/* Two-way softmax, computed as torch does (shift by the max, exp, divide by the sum). */
static void softmax2(float l0, float l1, float *restrict out) {
    const float m = l0 > l1 ? l0 : l1;
    const float e0 = expf(l0 - m), e1 = expf(l1 - m);
    const float s = e0 + e1;
    out[0] = e0 / s;
    out[1] = e1 / s;
}

/* Selector MLP and gate of one sample. exp_noise (2 values) is a standard exponential draw E, so the
 * Gumbel noise is -log(E) (as torch.nn.functional.gumbel_softmax draws it); NULL means noise-free. */
static void gate_forward(const float *restrict pooled, const float *restrict w1, const float *restrict b1,
                         const float *restrict w2, const float *restrict b2, const float *restrict exp_noise,
                         float tau, int hard, long D, long H, float *restrict pre, float *restrict cdf,
                         float *restrict hidden, float *restrict probs, float *restrict soft,
                         float *restrict weights) {
    for (long h = 0; h < H; ++h) pre[h] = b1[h] + dot(w1 + h * D, pooled, D);
    for (long h = 0; h < H; ++h) {
        const float phi = 0.5f * (1.f + fast_erf(pre[h] * INV_SQRT2));
        cdf[h] = phi;
        hidden[h] = pre[h] * phi;
    }
    const float l0 = b2[0] + dot(w2, hidden, H);
    const float l1 = b2[1] + dot(w2 + H, hidden, H);
    softmax2(l0, l1, probs);
    if (exp_noise == NULL) {
        soft[0] = probs[0];
        soft[1] = probs[1];
    } else {
        softmax2((l0 - logf(exp_noise[0])) / tau, (l1 - logf(exp_noise[1])) / tau, soft);
    }
    if (hard && exp_noise != NULL) {
        const int pick = soft[1] > soft[0]; /* torch.argmax: the first index wins a tie */
        weights[0] = (float)(1 - pick);
        weights[1] = (float)pick;
    } else {
        weights[0] = soft[0];
        weights[1] = soft[1];
    }
}

/* cl = w_ln * ln_w, cd = w_dyt * dyt_w, c0 = w_dyt * dyt_b + w_ln * ln_b for one sample. */
static void fold_coefficients(const float *restrict weights, const float *restrict dyt_w,
                              const float *restrict dyt_b, const float *restrict ln_w,
                              const float *restrict ln_b, long D, float *restrict cl, float *restrict cd,
                              float *restrict c0) {
    const float wd = weights[0], wl = weights[1];
    for (long d = 0; d < D; ++d) {
        cl[d] = wl * ln_w[d];
        cd[d] = wd * dyt_w[d];
        c0[d] = wd * dyt_b[d] + wl * ln_b[d];
    }
}

/* Pass 1 of the forward for one sample: row mean and rstd, and the token mean into pooled (weighted
 * by tw, the sample's T token weights, unless tw is NULL). */
static void row_stats_and_token_mean(const float *restrict xb, const float *restrict tw, float eps, long T,
                                     long D, float *restrict mean, float *restrict rstd,
                                     float *restrict pooled) {
    for (long d = 0; d < D; ++d) pooled[d] = 0.f;
    for (long t = 0; t < T; ++t) {
        const float *restrict xr = xb + t * D;
        /* Weight 1 (exact) without a mask: the plain sum, scaled by 1 / T below. */
        const float w = tw ? tw[t] : 1.f;
        float s = 0.f;
        for (long d = 0; d < D; ++d) {
            s += xr[d];
            pooled[d] += w * xr[d];
        }
        const float mu = s / (float)D;
        float v = 0.f;
        for (long d = 0; d < D; ++d) {
            const float c = xr[d] - mu;
            v += c * c;
        }
        mean[t] = mu;
        rstd[t] = 1.f / sqrtf(v / (float)D + eps);
    }
    if (tw) return; /* the weights already sum to 1 (or to 0 for a sample without real tokens) */
    const float inv_t = 1.f / (float)T;
    for (long d = 0; d < D; ++d) pooled[d] *= inv_t;
}

/* Pass 2 of the forward for one sample: y = cl * LN0(x) + cd * tanh(alpha x) + c0. */
static void mix_rows(const float *restrict xb, const float *restrict mean, const float *restrict rstd,
                     const float *restrict cl, const float *restrict cd, const float *restrict c0, float alpha,
                     long T, long D, float *restrict yb) {
    for (long t = 0; t < T; ++t) {
        const float *restrict xr = xb + t * D;
        float *restrict yr = yb + t * D;
        const float mu = mean[t], rs = rstd[t];
        for (long d = 0; d < D; ++d) {
            const float xv = xr[d];
            yr[d] = (xv - mu) * rs * cl[d] + fast_tanh(alpha * xv) * cd[d] + c0[d];
        }
    }
}

void autonorm_forward(const float *restrict x, float alpha, const float *restrict dyt_w,
                      const float *restrict dyt_b, const float *restrict ln_w, const float *restrict ln_b,
                      const float *restrict w1, const float *restrict b1, const float *restrict w2,
                      const float *restrict b2, const float *restrict exp_noise,
                      const float *restrict token_weights, float tau, int hard, float eps, long B, long T,
                      long D, long H, int num_threads, float *restrict y,
                      float *restrict state, float *restrict probs) {
    const long S = autonorm_state_width(T, D, H);
#pragma omp parallel num_threads(num_threads)
    {
        float *coef = (float *)malloc(sizeof(float) * 3 * (size_t)D);
#pragma omp for schedule(static)
        for (long b = 0; b < B; ++b) {
            float *st = state + b * S;
            float *pooled = st + 2 * T, *pre = pooled + D, *cdf = pre + H, *hidden = cdf + H;
            float *soft = hidden + H, *weights = soft + 2;
            row_stats_and_token_mean(x + b * T * D, token_weights ? token_weights + b * T : NULL, eps, T, D,
                                     st, st + T, pooled);
            gate_forward(pooled, w1, b1, w2, b2, exp_noise ? exp_noise + 2 * b : NULL, tau, hard, D, H, pre,
                         cdf, hidden, probs + 2 * b, soft, weights);
            fold_coefficients(weights, dyt_w, dyt_b, ln_w, ln_b, D, coef, coef + D, coef + 2 * D);
            mix_rows(x + b * T * D, st, st + T, coef, coef + D, coef + 2 * D, alpha, T, D, y + b * T * D);
        }
        free(coef);
    }
}

/* Per-sample gradient scratch, one row of `work` (B, W) with W = autonorm_work_width(T, D, H):
 *   dcl[D] dcd[D] dc0[D] dpre[H] dlogits[2] dalpha[1] row_c[T] row_k[T] dpool[D]  */
long autonorm_work_width(long T, long D, long H) { return 4 * D + H + 3 + 2 * T; }

/* Backward pass 1 for one sample: everything local to a row. Accumulates the (D,) grads of cl, cd,
 * c0 over tokens, writes dx = rs * g * cl + alpha * g * cd * (1 - tanh^2) and, per row, the constants
 * of the LayerNorm row-mean terms: rs * (-m1 - xh * m2) = row_c - row_k * x. Returns dalpha. */
static float backward_rows(const float *restrict gb, const float *restrict xb, const float *restrict mean,
                           const float *restrict rstd, const float *restrict cl, const float *restrict cd,
                           float alpha, long T, long D, float *restrict dxb, float *restrict dcl,
                           float *restrict dcd, float *restrict dc0, float *restrict row_c,
                           float *restrict row_k) {
    const float inv_d = 1.f / (float)D;
    for (long d = 0; d < D; ++d) dcl[d] = dcd[d] = dc0[d] = 0.f;
    float da = 0.f;
    for (long t = 0; t < T; ++t) {
        const float *restrict xr = xb + t * D;
        const float *restrict gr = gb + t * D;
        float *restrict dxr = dxb + t * D;
        const float mu = mean[t], rs = rstd[t];
        float s1 = 0.f, s2 = 0.f;
        for (long d = 0; d < D; ++d) {
            const float xv = xr[d], gv = gr[d];
            const float xh = (xv - mu) * rs;
            const float th = fast_tanh(alpha * xv);
            const float gl = gv * cl[d];
            const float q = gv * cd[d] * (1.f - th * th);
            s1 += gl;
            s2 += gl * xh;
            dcl[d] += gv * xh;
            dcd[d] += gv * th;
            dc0[d] += gv;
            da += q * xv;
            dxr[d] = rs * gl + alpha * q;
        }
        const float m1 = s1 * inv_d, m2 = s2 * inv_d;
        row_k[t] = rs * rs * m2;
        row_c[t] = -rs * m1 + rs * rs * m2 * mu;
    }
    return da;
}

/* Gate backward for one sample: the two mixing weights, the (Gumbel-)softmax, the selector MLP, down
 * to dpool, the gradient of the pooled input times pool_scale: 1/T, what each token receives through a
 * plain token mean; with token weights pool_scale is 1 and finish_dx applies each token's weight. */
static void gate_backward(const float *restrict dcl, const float *restrict dcd, const float *restrict dc0,
                          const float *restrict dyt_w, const float *restrict dyt_b, const float *restrict ln_w,
                          const float *restrict ln_b, const float *restrict w1, const float *restrict w2,
                          const float *restrict pre, const float *restrict cdf, const float *restrict soft,
                          float inv_tau, float pool_scale, long D, long H, float *restrict dlogits,
                          float *restrict dpre, float *restrict dpool) {
    const float dw0 = dot(dcd, dyt_w, D) + dot(dc0, dyt_b, D);
    const float dw1 = dot(dcl, ln_w, D) + dot(dc0, ln_b, D);
    const float sdot = soft[0] * dw0 + soft[1] * dw1;
    dlogits[0] = soft[0] * (dw0 - sdot) * inv_tau;
    dlogits[1] = soft[1] * (dw1 - sdot) * inv_tau;
    for (long h = 0; h < H; ++h) {
        const float z = pre[h];
        const float dgelu = cdf[h] + z * expf(-0.5f * z * z) * INV_SQRT_2PI;
        dpre[h] = (dlogits[0] * w2[h] + dlogits[1] * w2[H + h]) * dgelu;
    }
    for (long d = 0; d < D; ++d) dpool[d] = 0.f;
    for (long h = 0; h < H; ++h) {
        const float v = dpre[h] * pool_scale;
        const float *restrict w1h = w1 + h * D;
        for (long d = 0; d < D; ++d) dpool[d] += v * w1h[d];
    }
}

/* Backward pass 2 for one sample: dx += row_c - row_k * x + w_t * dpool, with w_t the token's weight
 * (1 without token weights: dpool already carries the 1/T). x and dx are still in L2. */
static void finish_dx(const float *restrict xb, const float *restrict tw, const float *restrict row_c,
                      const float *restrict row_k, const float *restrict dpool, long T, long D,
                      float *restrict dxb) {
    for (long t = 0; t < T; ++t) {
        const float *restrict xr = xb + t * D;
        float *restrict dxr = dxb + t * D;
        const float c = row_c[t], k = row_k[t];
        const float w = tw ? tw[t] : 1.f;
        for (long d = 0; d < D; ++d) dxr[d] += c - k * xr[d] + w * dpool[d];
    }
}

void autonorm_backward(const float *restrict g, const float *restrict x, float alpha,
                       const float *restrict dyt_w, const float *restrict dyt_b, const float *restrict ln_w,
                       const float *restrict ln_b, const float *restrict w1, const float *restrict w2,
                       const float *restrict state, const float *restrict token_weights, float tau,
                       int selector_grads, long B, long T, long D, long H, int num_threads,
                       float *restrict dx, float *restrict work,
                       float *restrict d_alpha, float *restrict d_dyt_w, float *restrict d_dyt_b,
                       float *restrict d_ln_w, float *restrict d_ln_b, float *restrict d_w1,
                       float *restrict d_b1, float *restrict d_w2, float *restrict d_b2) {
    const long S = autonorm_state_width(T, D, H), W = autonorm_work_width(T, D, H);
    const float inv_tau = 1.f / tau;
    const float pool_scale = token_weights ? 1.f : 1.f / (float)T;
#pragma omp parallel num_threads(num_threads)
    {
        float *coef = (float *)malloc(sizeof(float) * 3 * (size_t)D);
#pragma omp for schedule(static)
        for (long b = 0; b < B; ++b) {
            const float *st = state + b * S;
            const float *pre = st + 2 * T + D, *cdf = pre + H, *soft = cdf + 2 * H, *weights = soft + 2;
            float *wk = work + b * W;
            float *dcl = wk, *dcd = wk + D, *dc0 = wk + 2 * D, *dpre = wk + 3 * D, *dlogits = dpre + H;
            float *dalpha = dlogits + 2, *row_c = dalpha + 1, *row_k = row_c + T, *dpool = row_k + T;
            fold_coefficients(weights, dyt_w, dyt_b, ln_w, ln_b, D, coef, coef + D, coef + 2 * D);
            *dalpha = backward_rows(g + b * T * D, x + b * T * D, st, st + T, coef, coef + D, alpha, T, D,
                                    dx + b * T * D, dcl, dcd, dc0, row_c, row_k);
            gate_backward(dcl, dcd, dc0, dyt_w, dyt_b, ln_w, ln_b, w1, w2, pre, cdf, soft, inv_tau, pool_scale,
                          D, H, dlogits, dpre, dpool);
            finish_dx(x + b * T * D, token_weights ? token_weights + b * T : NULL, row_c, row_k, dpool, T, D,
                      dx + b * T * D);
        }
        free(coef);
    }
    /* Reductions over samples. */
    float da = 0.f;
    for (long b = 0; b < B; ++b) da += work[b * W + 3 * D + H + 2];
    *d_alpha = da;
    for (long d = 0; d < D; ++d) d_dyt_w[d] = d_dyt_b[d] = d_ln_w[d] = d_ln_b[d] = 0.f;
    for (long b = 0; b < B; ++b) {
        const float *restrict wk = work + b * W;
        const float *restrict weights = state + b * S + 2 * T + D + 3 * H + 2;
        const float wd = weights[0], wl = weights[1];
        for (long d = 0; d < D; ++d) {
            d_ln_w[d] += wl * wk[d];
            d_dyt_w[d] += wd * wk[D + d];
            d_dyt_b[d] += wd * wk[2 * D + d];
            d_ln_b[d] += wl * wk[2 * D + d];
        }
    }
    if (!selector_grads) return;
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (long h = 0; h < H; ++h) {
        float *restrict dw1h = d_w1 + h * D;
        float db1 = 0.f, dw20 = 0.f, dw21 = 0.f;
        for (long d = 0; d < D; ++d) dw1h[d] = 0.f;
        for (long b = 0; b < B; ++b) {
            const float *restrict wk = work + b * W;
            const float *restrict st = state + b * S;
            const float v = wk[3 * D + h];
            const float *restrict pooled = st + 2 * T;
            for (long d = 0; d < D; ++d) dw1h[d] += v * pooled[d];
            db1 += v;
            const float hid = st[2 * T + D + 2 * H + h];
            dw20 += wk[3 * D + H] * hid;
            dw21 += wk[3 * D + H + 1] * hid;
        }
        d_b1[h] = db1;
        d_w2[h] = dw20;
        d_w2[H + h] = dw21;
    }
    float db20 = 0.f, db21 = 0.f;
    for (long b = 0; b < B; ++b) {
        db20 += work[b * W + 3 * D + H];
        db21 += work[b * W + 3 * D + H + 1];
    }
    d_b2[0] = db20;
    d_b2[1] = db21;
}
