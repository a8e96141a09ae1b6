// Fused elementwise epilogue of a kernel block K(X, Z).
//
// The caller computes G = X Z^T with one GEMM (cuBLAS) into the output buffer,
// and the row norms xn = ||x_i||^2, zn = ||z_j||^2.  This kernel turns G into
// the kernel block in place in ONE pass over memory:
//   rbf:     K_ij = exp(-gamma * max(xn_i + zn_j - 2 G_ij, 0))   (clamp: fp32 round-off)
//   poly:    K_ij = (gamma G_ij + coef0)^degree
//   sigmoid: K_ij = tanh(gamma G_ij + coef0)
// NumPy twin: gpuksvm.kernels.kernel._epilogue_host.
#include "common.cuh"

template <typename T>
__device__ void kernel_epilogue(T* __restrict__ G, const T* __restrict__ xn, const T* __restrict__ zn,
                                long long n, long long k, long long ldg, int ktype,
                                T gamma, T coef0, T degree) {
    const long long total = n * k;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long i = idx / k;
        const long long j = idx - i * k;
        T* g = G + i * ldg + j;
        const T dot = *g;
        T dist2 = T(0);
        if (ktype == GPUKSVM_RBF) dist2 = xn[i] + zn[j] - T(2) * dot;
        *g = gk_kernel_value<T>(ktype, dot, dist2, gamma, coef0, degree);
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
// per thread; X and Z are streamed through shared memory in slices of
// GK_TK features.  Thread (ty, tx) owns rows ty + 16a and columns tx + 16b so
// that a warp's stores are contiguous (coalesced).
// For large d, cuBLAS GEMM + kernel_epilogue is faster (gpuksvm.kernels.kernel picks).
// NumPy twin: gpuksvm.kernels.kernel.kernel_block on the CPU.
#define GK_BM 64
#define GK_BN 64
#define GK_TK 16

template <typename T>
__device__ void kernel_block_tiled(const T* __restrict__ X, const T* __restrict__ Z,
                                   const T* __restrict__ xn, const T* __restrict__ zn,
                                   T* __restrict__ out, int n, int k, int d, long long ldo,
                                   int ktype, T gamma, T coef0, T degree) {
    __shared__ T xs[GK_TK][GK_BM + 1];
    __shared__ T zs[GK_TK][GK_BN + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int col0 = blockIdx.x * GK_BN;
    const int n_row_tiles = (n + GK_BM - 1) / GK_BM;
    for (int rt = blockIdx.y; rt < n_row_tiles; rt += gridDim.y) {
        const int row0 = rt * GK_BM;
        T acc[4][4];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[a][b] = T(0);
        for (int k0 = 0; k0 < d; k0 += GK_TK) {
            // 256 threads load a 64 x 16 slice of X and of Z (4 elements each)
            for (int e = tid; e < GK_BM * GK_TK; e += 256) {
                const int r = e / GK_TK, c = e - (e / GK_TK) * GK_TK;
                const int gi = row0 + r, gc = k0 + c;
                xs[c][r] = (gi < n && gc < d) ? X[(long long)gi * d + gc] : T(0);
                const int gj = col0 + r;
                zs[c][r] = (gj < k && gc < d) ? Z[(long long)gj * d + gc] : T(0);
            }
            __syncthreads();
#pragma unroll
            for (int c = 0; c < GK_TK; ++c) {
                T xa[4], zb[4];
#pragma unroll
                for (int a = 0; a < 4; ++a) xa[a] = xs[c][ty + 16 * a];
#pragma unroll
                for (int b = 0; b < 4; ++b) zb[b] = zs[c][tx + 16 * b];
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int b = 0; b < 4; ++b) acc[a][b] += xa[a] * zb[b];
            }
            __syncthreads();
        }
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            const int i = row0 + ty + 16 * a;
            if (i >= n) continue;
            const T xni = (ktype == GPUKSVM_RBF) ? xn[i] : T(0);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int j = col0 + tx + 16 * b;
                if (j >= k) continue;
                const T dot = acc[a][b];
                const T dist2 = (ktype == GPUKSVM_RBF) ? xni + zn[j] - T(2) * dot : T(0);
                out[(long long)i * ldo + j] = gk_kernel_value<T>(ktype, dot, dist2, gamma, coef0, degree);
            }
        }
    }
}

extern "C" __global__ void kernel_block_tiled_f32(const float* X, const float* Z, const float* xn,
                                                  const float* zn, float* out, int n, int k, int d,
                                                  long long ldo, int ktype, float gamma, float coef0,
                                                  float degree) {
    kernel_block_tiled<float>(X, Z, xn, zn, out, n, k, d, ldo, ktype, gamma, coef0, degree);
}

extern "C" __global__ void kernel_block_tiled_f64(const double* X, const double* Z, const double* xn,
                                                  const double* zn, double* out, int n, int k, int d,
                                                  long long ldo, int ktype, double gamma, double coef0,
                                                  double degree) {
    kernel_block_tiled<double>(X, Z, xn, zn, out, n, k, d, ldo, ktype, gamma, coef0, degree);
}
