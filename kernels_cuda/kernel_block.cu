// Fused elementwise epilogue of a kernel block K(X, Z).
//
// The caller computes G = X Z^T with one GEMM (cuBLAS) into the output buffer,
// and the row norms xn = ||x_i||^2, zn = ||z_j||^2.  This kernel turns G into
// the kernel block in place in ONE pass over memory:
//   rbf:     K_ij = exp(-gamma * max(xn_i + zn_j - 2 G_ij, 0))   (clamp: fp32 round-off)
//   poly:    K_ij = (gamma G_ij + coef0)^degree
//   sigmoid: K_ij = tanh(gamma G_ij + coef0)
// NumPy twin: gpuksvm.kernels.kernel.epilogue_host.
#include "common.cuh"

template <typename T>
__device__ void kernel_epilogue(T* __restrict__ G, const T* __restrict__ xn, const T* __restrict__ zn,
                                long long n, long long k, long long ldg, int ktype,
                                T gamma, T coef0, T degree) {
    const long long total = n * k;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    // (i, j) of idx, then stepped by (stride / k, stride % k) with a carry: two divisions per
    // thread instead of one per element
    long long i = idx / k, j = idx - i * k;
    const long long di = stride / k, dj = stride - di * k;
    for (; idx < total; idx += stride) {
        T* g = G + i * ldg + j;
        const T dot = *g;
        T dist2 = T(0);
        if (ktype == GPUKSVM_RBF) dist2 = xn[i] + zn[j] - T(2) * dot;
        *g = gk_kernel_value<T>(ktype, dot, dist2, gamma, coef0, degree);
        i += di;
        j += dj;
        if (j >= k) { j -= k; ++i; }
    }
}

extern "C" __global__ void kernel_epilogue_f32(float* G, const float* xn, const float* zn,
                                               long long n, long long k, long long ldg, int ktype,
                                               float gamma, float coef0, float degree) {
    kernel_epilogue<float>(G, xn, zn, n, k, ldg, ktype, gamma, coef0, degree);
}

extern "C" __global__ void kernel_epilogue_f64(double* G, const double* xn, const double* zn,
                                               long long n, long long k, long long ldg, int ktype,
                                               double gamma, double coef0, double degree) {
    kernel_epilogue<double>(G, xn, zn, n, k, ldg, ktype, gamma, coef0, degree);
}

// ---------------------------------------------------------------------------
// One-pass tiled kernel block for small d: the dot products AND the kernel
// function in one kernel, each output written exactly once (no GEMM buffer
// re-read).  A 16x16 thread block computes a 64x64 output tile, 4x4 outputs
// per thread in registers; X and Z are streamed through shared memory in
// slices of GK_TK(T) features (64 for float, 32 for double: 34 KiB of
// slices either way; at d = 64 a float block stages once).  Thread (ty, tx) owns rows ty + 16a and columns
// tx + 16b, so that a warp's stores are contiguous (coalesced).
//
// Register tiling: row ty + 16a of a slice is kept at position 4 ty + a of
// its shared row (column tx + 16b at 4 tx + b), so a thread's four X values
// and four Z values of one feature are two aligned vectors: per feature a
// thread issues 2 shared loads (128-bit for float, 2 x 2 for double) for 16
// FMAs.  The shared rows are GK_BM + 4 long (a 16-byte multiple): when a warp
// stages a slice, lane l takes row tyb + 16 (l % 4) and feature (l / 4) of a
// run of 8, so its 32 stores land in 32 different banks, and each row's 8
// features are one 32-byte sector of X (coalesced).  Full slices run an
// unrolled GK_TK(T)-feature loop; the last d % GK_TK(T) features a rolled loop, so a
// small d does no padded work.
// For large d, cuBLAS GEMM + kernel_epilogue is faster (gpuksvm.kernels.kernel picks).
// NumPy twin: gpuksvm.kernels.kernel.kernel_block on the CPU.
#define GK_BM 64
#define GK_BN 64
#define GK_TK_F32 64   // features per slice, float: 2 x 64 x 68 x 4 B = 34 KiB of slices
#define GK_TK_F64 32   // double: 2 x 32 x 68 x 8 B = 34 KiB (64 would exceed 48 KiB)
#define GK_TK(T) (sizeof(T) == 4 ? GK_TK_F32 : GK_TK_F64)
#define GK_LD (GK_BM + 4)   // shared row length: 16-byte aligned vectors, conflict-free staging
static_assert(GK_BM == 64 && GK_BN == 64, "the 16x16 block computes 4x4 outputs per thread");
static_assert(2 * GK_TK_F32 * GK_LD >= 16 * 256 && 2 * GK_TK_F64 * GK_LD >= 16 * 256, "the slices hold the block's parked sums");

template <typename T> struct gk_vec4;
template <> struct gk_vec4<float> {
    static __device__ __forceinline__ void load(const float* p, float (&v)[4]) {
        const float4 q = *reinterpret_cast<const float4*>(p);
        v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    }
    static __device__ __forceinline__ void load2(const float* p, float (&v)[2]) {
        const float2 q = *reinterpret_cast<const float2*>(p);
        v[0] = q.x; v[1] = q.y;
    }
};
template <> struct gk_vec4<double> {
    static __device__ __forceinline__ void load(const double* p, double (&v)[4]) {
        const double2 q0 = reinterpret_cast<const double2*>(p)[0];
        const double2 q1 = reinterpret_cast<const double2*>(p)[1];
        v[0] = q0.x; v[1] = q0.y; v[2] = q1.x; v[3] = q1.y;
    }
    static __device__ __forceinline__ void load2(const double* p, double (&v)[2]) {
        const double2 q = *reinterpret_cast<const double2*>(p);
        v[0] = q.x; v[1] = q.y;
    }
};

// Stage features [k0, k0 + GK_TK(T)) of rows [r0, r0 + 64) of A (n_rows x d) into s (zero beyond
// n_rows, and beyond d when `tail`).  Thread tid takes rows w + 16a and w + 8 + 16a (w = tid / 32,
// a = tid % 4), features cl + 8h (cl = (tid / 4) % 8): a warp's 32 shared stores hit 32 banks
// and it reads 4 rows x 8 consecutive features.  The addresses are recomputed per slice (a few
// integer operations) rather than kept: registers hold the accumulators.
template <typename T>
__device__ __forceinline__ void gk_stage(const T* __restrict__ A, T (*s)[GK_LD], int r0, int n_rows, int d,
                                         int k0, int tid, bool tail) {
    const int w = tid >> 5, a = tid & 3, cl = (tid >> 2) & 7, pos = 4 * w + a;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        const int g = r0 + w + 8 * q + 16 * a;
        const T* p = A + (long long)g * d + k0 + cl;
#pragma unroll
        for (int h = 0; h < GK_TK(T) / 8; ++h) {
            const bool in = g < n_rows && (!tail || k0 + cl + 8 * h < d);
            s[cl + 8 * h][pos + 32 * q] = in ? p[8 * h] : T(0);
        }
    }
}

// acc[a][b] += xs[c][4ty + a] * zs[c][4tx + b] for one feature c: the row values as one vector,
// the column values as two halves of two (fewer live registers: double keeps 50 % occupancy).
template <typename T>
__device__ __forceinline__ void gk_outer4(const T* xrow, const T* zrow, T (&acc)[4][4]) {
    T xa[4];
    gk_vec4<T>::load(xrow, xa);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        T zb[2];
        gk_vec4<T>::load2(zrow + 2 * h, zb);
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 2; ++b) acc[a][2 * h + b] += xa[a] * zb[b];
    }
}

template <typename T>
__device__ void kernel_block_tiled(const T* __restrict__ X, const T* __restrict__ Z,
                                   const T* __restrict__ xn, const T* __restrict__ zn,
                                   T* __restrict__ out, int n, int k, int d, long long ldo,
                                   int ktype, T gamma, T coef0, T degree) {
    __shared__ __align__(16) T tiles[2][GK_TK(T)][GK_LD];   // the X and Z slices; then the parked sums
    T (*const xs)[GK_LD] = tiles[0];
    T (*const zs)[GK_LD] = tiles[1];
    T* const parked = &tiles[0][0][0];   // acc[a][b] of thread tid at parked[(4a + b) * 256 + tid]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int col0 = blockIdx.x * GK_BN;
    const int n_row_tiles = (n + GK_BM - 1) / GK_BM;
    const int d_full = d - d % GK_TK(T);
    for (int rt = blockIdx.y; rt < n_row_tiles; rt += gridDim.y) {
        const int row0 = rt * GK_BM;
        T acc[4][4];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[a][b] = T(0);
        for (int k0 = 0; k0 < d_full; k0 += GK_TK(T)) {
            gk_stage<T>(X, xs, row0, n, d, k0, tid, false);
            gk_stage<T>(Z, zs, col0, k, d, k0, tid, false);
            __syncthreads();
#pragma unroll
            for (int c = 0; c < GK_TK(T); ++c) gk_outer4<T>(&xs[c][4 * ty], &zs[c][4 * tx], acc);
            __syncthreads();
        }
        if (d_full < d) {   // the last d % GK_TK(T) features
            gk_stage<T>(X, xs, row0, n, d, d_full, tid, true);
            gk_stage<T>(Z, zs, col0, k, d, d_full, tid, true);
            __syncthreads();
            const int end = (d - d_full) * GK_LD;   // feature c at offset c * GK_LD: one add per feature
#pragma unroll 1
            for (int o = 0; o < end; o += GK_LD) gk_outer4<T>(&xs[0][4 * ty] + o, &zs[0][4 * tx] + o, acc);
            __syncthreads();
        }
        // The slices are read (the last barrier above): park the sums in them, so that the kernel
        // values are taken in a rolled loop with no accumulator live (one inlined copy of
        // gk_kernel_value, and registers for 50 % occupancy in double).
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) parked[(4 * a + b) * 256 + tid] = acc[a][b];
#pragma unroll 1
        for (int q = 0; q < 16; ++q) {
            const int i = row0 + ty + 16 * (q >> 2), j = col0 + tx + 16 * (q & 3);
            if (i >= n) continue;
            if (j >= k) continue;
            const T dot = parked[q * 256 + tid];
            const T dist2 = (ktype == GPUKSVM_RBF) ? xn[i] + zn[j] - T(2) * dot : T(0);
            out[(long long)i * ldo + j] = gk_kernel_value<T>(ktype, dot, dist2, gamma, coef0, degree);
        }
        __syncthreads();   // the next row tile's staging overwrites the parked sums
    }
}

extern "C" __global__ void __launch_bounds__(256, 4) kernel_block_tiled_f32(const float* X, const float* Z, const float* xn,
                                                  const float* zn, float* out, int n, int k, int d,
                                                  long long ldo, int ktype, float gamma, float coef0,
                                                  float degree) {
    kernel_block_tiled<float>(X, Z, xn, zn, out, n, k, d, ldo, ktype, gamma, coef0, degree);
}

extern "C" __global__ void __launch_bounds__(256, 4) kernel_block_tiled_f64(const double* X, const double* Z, const double* xn,
                                                  const double* zn, double* out, int n, int k, int d,
                                                  long long ldo, int ktype, double gamma, double coef0,
                                                  double degree) {
    kernel_block_tiled<double>(X, Z, xn, zn, out, n, k, d, ldo, ktype, gamma, coef0, degree);
}
