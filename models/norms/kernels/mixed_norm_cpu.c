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

/* out[b, :] = mean over t of x[b, t, :]  (the selector input), one sequential pass. */
void token_mean_forward(const float *restrict x, long B, long T, long D, int num_threads, float *restrict out) {
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (long b = 0; b < B; ++b) {
        float *restrict ob = out + b * D;
        for (long d = 0; d < D; ++d) ob[d] = 0.f;
        for (long t = 0; t < T; ++t) {
            const float *restrict xr = x + (b * T + t) * D;
            for (long d = 0; d < D; ++d) ob[d] += xr[d];
        }
        const float inv = 1.f / (float)T;
        for (long d = 0; d < D; ++d) ob[d] *= inv;
    }
}

/* dx[b, t, :] += v[b, :] for every token: the gradient that reaches x through the token mean. */
void add_token_broadcast(float *restrict dx, const float *restrict v, long B, long T, long D, int num_threads) {
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (long r = 0; r < B * T; ++r) {
        float *restrict dxr = dx + r * D;
        const float *restrict vb = v + (r / T) * D;
        for (long d = 0; d < D; ++d) dxr[d] += vb[d];
    }
}
