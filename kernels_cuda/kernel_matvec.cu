// Fused kernel mat-vec  out = K(X, Z) V  without storing K(X, Z) (KeOps style).
//
// One thread per row x_i keeps x_i (d <= GK_MAXD) and the m <= GK_MAXM partial
// sums in registers; the block streams Z and V through shared memory in tiles
// of GK_TILE rows.  Worth it for small d only (Falkon: d < 50); for large d the
// GEMM-based block path of gpuksvm.kernels is faster.
// NumPy twin: gpuksvm.kernels.kernel_matvec(..., method="blocked").
#include "common.cuh"

#define GK_MAXD 64
#define GK_MAXM 16
#define GK_TILE 64

template <typename T>
__device__ void kernel_matvec(const T* __restrict__ X, const T* __restrict__ Z, const T* __restrict__ V,
                              T* __restrict__ out, int n, int k, int d, int m, int ktype,
                              T gamma, T coef0, T degree) {
    extern __shared__ unsigned char gk_smem[];
    T* zs = reinterpret_cast<T*>(gk_smem);   // GK_TILE * d
    T* vs = zs + GK_TILE * d;                 // GK_TILE * m
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    T xi[GK_MAXD];
    T acc[GK_MAXM];
    if (i < n) {
        for (int c = 0; c < d; ++c) xi[c] = X[(long long)i * d + c];
    }
    for (int c = 0; c < GK_MAXM; ++c) acc[c] = T(0);

    for (int t0 = 0; t0 < k; t0 += GK_TILE) {
        const int rows = min(GK_TILE, k - t0);
        for (int e = threadIdx.x; e < rows * d; e += blockDim.x) zs[e] = Z[(long long)t0 * d + e];
        for (int e = threadIdx.x; e < rows * m; e += blockDim.x) vs[e] = V[(long long)t0 * m + e];
        __syncthreads();
        if (i < n) {
            for (int r = 0; r < rows; ++r) {
                const T* z = zs + r * d;
                T dot = T(0), dist2 = T(0);
                if (ktype == GPUKSVM_RBF) {
                    for (int c = 0; c < d; ++c) { const T df = xi[c] - z[c]; dist2 += df * df; }
                } else {
                    for (int c = 0; c < d; ++c) dot += xi[c] * z[c];
                }
                const T kv = gk_kernel_value<T>(ktype, dot, dist2, gamma, coef0, degree);
                for (int c = 0; c < m; ++c) acc[c] += kv * vs[r * m + c];
            }
        }
        __syncthreads();
    }
    if (i < n) {
        for (int c = 0; c < m; ++c) out[(long long)i * m + c] = acc[c];
    }
}

extern "C" __global__ void kernel_matvec_f32(const float* X, const float* Z, const float* V, float* out,
                                             int n, int k, int d, int m, int ktype,
                                             float gamma, float coef0, float degree) {
    kernel_matvec<float>(X, Z, V, out, n, k, d, m, ktype, gamma, coef0, degree);
}

extern "C" __global__ void kernel_matvec_f64(const double* X, const double* Z, const double* V, double* out,
                                             int n, int k, int d, int m, int ktype,
                                             double gamma, double coef0, double degree) {
    kernel_matvec<double>(X, Z, V, out, n, k, d, m, ktype, gamma, coef0, degree);
}
