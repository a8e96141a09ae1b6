// Fused kernel mat-vec  out = K(X, Z) V  without storing K(X, Z) (KeOps style).
//
// One thread per row x_i (a block of GK_BLOCK rows).  Z is taken in tiles of GK_ZROWS rows and d
// in chunks of GK_DC columns (a narrower last chunk at its power-of-two width): the block stages
// its rows' chunk (coalesced: a warp reads runs of consecutive values of a row) and the tile's
// chunk in shared memory, and each thread adds the chunk to its GK_ZROWS partial dot products /
// squared distances (gk_chunk_update of common.cuh, registers).  After the last chunk the thread
// parks them in its own row of the staging buffer and takes the tile's kernel values in a rolled
// loop (gk_park_part), which multiply the tile's rows of V into the thread's m <= GK_MAXM sums.  Every index
// into part[] and acc[] is a compile-time constant of an unrolled loop, so both stay in registers
// (a run-time index would put them in local memory).
// Worth it for small d only (Falkon: d < 50); for large d the GEMM-based
// block path of gpuksvm.kernels.kernel is faster.
// NumPy twin: gpuksvm.kernels.kernel.kernel_matvec(..., method="blocked").
#include "common.cuh"

#define GK_BLOCK 128   // threads (rows) per block: the launch's block size, at most this
#define GK_MAXM 16
#define GK_ZROWS 16    // core rows per tile
#define GK_DC 16       // columns per chunk
static_assert(GK_ZROWS <= GK_DC + 1, "a thread's row of xs holds its parked partial sums");

template <typename T>
__device__ void kernel_matvec(const T* __restrict__ X, const T* __restrict__ Z, const T* __restrict__ V,
                              T* __restrict__ out, int n, int k, int d, int m, int ktype,
                              T gamma, T coef0, T degree) {
    __shared__ T xs[GK_BLOCK * (GK_DC + 1)];   // row chunk of slot j at j * (GK_DC + 1): no bank conflicts
    __shared__ T zt[GK_DC * GK_ZROWS];         // tile chunk, zt[c * GK_ZROWS + r]
    __shared__ T vs[GK_ZROWS * GK_MAXM];       // tile rows of V, vs[r * GK_MAXM + c]
    const int tid = threadIdx.x;
    const int i0 = blockIdx.x * blockDim.x;
    const int i = i0 + tid;
    const bool rbf = ktype == GPUKSVM_RBF;
    T acc[GK_MAXM];
#pragma unroll
    for (int c = 0; c < GK_MAXM; ++c) acc[c] = T(0);

    for (int t0 = 0; t0 < k; t0 += GK_ZROWS) {
        const int rows = min(GK_ZROWS, k - t0);
        T part[GK_ZROWS];
#pragma unroll
        for (int r = 0; r < GK_ZROWS; ++r) part[r] = T(0);
        for (int c0 = 0; c0 < d; c0 += GK_DC) {
            const int cols = min(GK_DC, d - c0);
            const int w = gk_chunk_width<GK_DC>(cols);   // columns staged and computed (zero beyond cols)
            __syncthreads();   // the previous chunk (and tile of V) is read by every thread
            for (int e = tid; e < (int)blockDim.x * w; e += blockDim.x) {
                const int j = e / w, c = e % w, gi = i0 + j;
                xs[j * (GK_DC + 1) + c] = (gi < n && c < cols) ? X[(long long)gi * d + c0 + c] : T(0);
            }
            for (int e = tid; e < rows * w; e += blockDim.x) {
                const int r = e / w, c = e % w;
                zt[c * GK_ZROWS + r] = c < cols ? Z[(long long)(t0 + r) * d + c0 + c] : T(0);
            }
            if (c0 == 0) {
                for (int e = tid; e < rows * m; e += blockDim.x) vs[(e / m) * GK_MAXM + e % m] = V[(long long)t0 * m + e];
            }
            __syncthreads();
            gk_chunk_update<T, GK_ZROWS, GK_DC>(rbf, w, xs + tid * (GK_DC + 1), zt, part);
        }
        // rows of the tile beyond k were not staged (zt, vs hold stale values there)
        T* const parked = xs + tid * (GK_DC + 1);   // this thread's slot; the next staging waits at a barrier
        gk_park_part<T, GK_ZROWS>(part, parked);
#pragma unroll 1
        for (int r = 0; r < rows; ++r) {
            const T kv = gk_kernel_value<T>(ktype, parked[r], parked[r], gamma, coef0, degree);
#pragma unroll
            for (int c = 0; c < GK_MAXM; ++c) {
                if (c < m) acc[c] += kv * vs[r * GK_MAXM + c];
            }
        }
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
