// Fused elementwise epilogue of a kernel block K(X, Z).
//
// The caller computes G = X Z^T with one GEMM (cuBLAS) into the output buffer,
// and the row norms xn = ||x_i||^2, zn = ||z_j||^2.  This kernel turns G into
// the kernel block in place in ONE pass over memory:
//   rbf:     K_ij = exp(-gamma * max(xn_i + zn_j - 2 G_ij, 0))   (clamp: fp32 round-off)
//   poly:    K_ij = (gamma G_ij + coef0)^degree
//   sigmoid: K_ij = tanh(gamma G_ij + coef0)
// NumPy twin: gpuksvm.kernels._epilogue_host.
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
