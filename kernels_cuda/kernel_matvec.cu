// Fused kernel mat-vec  out = K(X, Z) V  without storing K(X, Z) (KeOps style).
//
// One thread per row x_i, a block of exactly GK_BLOCK rows.  Z is taken in tiles of GK_ZROWS rows
// (gk_tile_dots of common.cuh): d in chunks of GK_DC columns staged through shared memory (a
// warp's loads are runs of 16 consecutive values of a row: whole 32-byte sectors), full chunks in
// a loop of their own and the last d % 16 columns at their power-of-two width; each thread adds
// a chunk to its GK_ZROWS dot products and its row's squared norm (one FFMA per feature and core
// row; the RBF distance is ||x||^2 + ||z||^2 - 2<x,z>).  After the last chunk the thread parks the
// dot products in its own row of the staging buffer and takes the tile's kernel values in a
// rolled loop (gk_park_part), which multiply the tile's rows of V into the thread's m <= GK_MAXM
// sums.  Every index into part[] and acc[] is a compile-time constant of an unrolled loop, so
// both stay in registers (a run-time index would put them in local memory).
// Worth it for small d only (Falkon: d < 50); for large d the GEMM-based
// block path of gpuksvm.kernels.kernel is faster.
// NumPy twin: gpuksvm.kernels.kernel.kernel_matvec(..., method="blocked").
#include "common.cuh"

#define GK_BLOCK 128   // threads (rows) per block: the launch's block size, exactly
#define GK_MAXM 16
#define GK_ZROWS 16    // core rows per tile
#define GK_DC 16       // columns per chunk
static_assert(GK_ZROWS <= GK_DC + 1, "a thread's row of xs holds its parked partial sums");

template <typename T>
__device__ void kernel_matvec(const T* __restrict__ X, const T* __restrict__ Z, const T* __restrict__ V,
                              T* __restrict__ out, int n, int k, int d, int m, int ktype,
                              T gamma, T coef0, T degree) {
    __shared__ T xs[GK_BLOCK * (GK_DC + 1)];   // row chunk of slot j at j * (GK_DC + 1): no bank conflicts
    __shared__ T zt[GK_DC * GK_ZROWS];                // tile chunk, zt[c * GK_ZROWS + r]
    __shared__ T zz[GK_ZROWS];                        // squared norms of the tile's rows
    __shared__ T vs[GK_ZROWS * GK_MAXM];              // tile rows of V, vs[r * GK_MAXM + c]
    __shared__ __align__(16) const T* rowptr[GK_BLOCK];      // slot j's row of X (beyond n: row n - 1, unused)
    const int tid = threadIdx.x;
    const int i = blockIdx.x * GK_BLOCK + tid;
    rowptr[tid] = X + (long long)min(i, n - 1) * d;   // read after gk_tile_dots' first barrier
    T acc[GK_MAXM];
#pragma unroll
    for (int c = 0; c < GK_MAXM; ++c) acc[c] = T(0);

    for (int t0 = 0; t0 < k; t0 += GK_ZROWS) {
        const int rows = min(GK_ZROWS, k - t0);
        T part[GK_ZROWS];
        T xx;
        gk_tile_dots<T, GK_BLOCK, GK_ZROWS, GK_DC>(rowptr, d, Z, t0, rows, V, m, GK_MAXM, xs, zt, zz, vs, part, xx);
        // rows of the tile beyond k: zero in zt, not staged in zz and vs
        T* const parked = xs + tid * (GK_DC + 1);   // this thread's slot; the next staging waits at a barrier
        gk_tile_values<T, GK_ZROWS>(part, parked, rows, xx, zz, ktype, gamma, coef0, degree, [&](int r, T kv) {
#pragma unroll
            for (int c = 0; c < GK_MAXM; ++c) {
                if (c < m) acc[c] += kv * vs[r * GK_MAXM + c];
            }
        });
    }
    if (i < n) {
#pragma unroll
        for (int c = 0; c < GK_MAXM; ++c) {
            if (c < m) out[(long long)i * m + c] = acc[c];
        }
    }
}

extern "C" __global__ void __launch_bounds__(GK_BLOCK)
kernel_matvec_f32(const float* X, const float* Z, const float* V, float* out,
                  int n, int k, int d, int m, int ktype, float gamma, float coef0, float degree) {
    kernel_matvec<float>(X, Z, V, out, n, k, d, m, ktype, gamma, coef0, degree);
}

extern "C" __global__ void __launch_bounds__(GK_BLOCK)
kernel_matvec_f64(const double* X, const double* Z, const double* V, double* out,
                  int n, int k, int d, int m, int ktype, double gamma, double coef0, double degree) {
    kernel_matvec<double>(X, Z, V, out, n, k, d, m, ktype, gamma, coef0, degree);
}
