// Shared device helpers of the gpuksvm CUDA sources.
// Kernel codes (must match gpuksvm/kernels/kernel.py: KERNEL_CODES):
//   0 linear  k = <x,z>
//   1 rbf     k = exp(-gamma * ||x - z||^2)
//   2 poly    k = (gamma <x,z> + coef0)^degree
//   3 sigmoid k = tanh(gamma <x,z> + coef0)
#pragma once

#define GPUKSVM_LINEAR 0
#define GPUKSVM_RBF 1
#define GPUKSVM_POLY 2
#define GPUKSVM_SIGMOID 3

template <typename T> __device__ __forceinline__ T gk_exp(T v);
template <> __device__ __forceinline__ float gk_exp<float>(float v) { return expf(v); }
template <> __device__ __forceinline__ double gk_exp<double>(double v) { return exp(v); }

template <typename T> __device__ __forceinline__ T gk_pow(T b, T e);
template <> __device__ __forceinline__ float gk_pow<float>(float b, float e) { return powf(b, e); }
template <> __device__ __forceinline__ double gk_pow<double>(double b, double e) { return pow(b, e); }

template <typename T> __device__ __forceinline__ T gk_tanh(T v);
template <> __device__ __forceinline__ float gk_tanh<float>(float v) { return tanhf(v); }
template <> __device__ __forceinline__ double gk_tanh<double>(double v) { return tanh(v); }

// Kernel value from the inner product <x,z> and the squared distance ||x-z||^2.
template <typename T>
__device__ __forceinline__ T gk_kernel_value(int ktype, T dot, T dist2, T gamma, T coef0, T degree) {
    switch (ktype) {
        case GPUKSVM_RBF: return gk_exp<T>(-gamma * (dist2 > T(0) ? dist2 : T(0)));
        case GPUKSVM_POLY: return gk_pow<T>(gamma * dot + coef0, degree);
        case GPUKSVM_SIGMOID: return gk_tanh<T>(gamma * dot + coef0);
        default: return dot;
    }
}

// One column chunk of a (rows x core rows) tile, in registers.  `xr` is the
// thread's row chunk (DC values, zero beyond d), `zt` the core-row chunk laid
// out column-major, zt[c * R + r] (zero beyond d; a broadcast read: every
// thread of the block reads the same word).  part[r] accumulates ||x - z_r||^2
// (rbf) or <x, z_r> (the other kernels) in column order.  Both loops have
// compile-time trip counts and are fully unrolled, so part[] stays in
// registers (a runtime index would put it in local memory).
template <typename T, int R, int DC>
__device__ __forceinline__ void gk_tile_update(bool rbf, const T* xr, const T* zt, T (&part)[R]) {
    if (rbf) {
#pragma unroll
        for (int c = 0; c < DC; ++c) {
            const T x = xr[c];
#pragma unroll
            for (int r = 0; r < R; ++r) { const T df = x - zt[c * R + r]; part[r] += df * df; }
        }
    } else {
#pragma unroll
        for (int c = 0; c < DC; ++c) {
            const T x = xr[c];
#pragma unroll
            for (int r = 0; r < R; ++r) part[r] += x * zt[c * R + r];
        }
    }
}

// Parks part[] in the thread's own row of the chunk staging buffer (`slot`,
// read and written by this thread alone until the next barrier), so that the
// kernel values can then be taken in a rolled loop over `slot[r]`: unrolled,
// that loop would inline one copy of gk_kernel_value (exp, pow, tanh) per row
// and multiply the NVRTC compile time.  The stores use constant indices, so
// part[] itself stays in registers.
template <typename T, int R>
__device__ __forceinline__ void gk_park_part(const T (&part)[R], T* slot) {
#pragma unroll
    for (int r = 0; r < R; ++r) slot[r] = part[r];
}

// The width a chunk of `cols` (1..DC) columns is computed at: the smallest of
// 2, 4, 8, ..., DC that holds it (DC a power of two), so a small d does not pay
// for DC columns; the staged chunk is zero from `cols` to the width.
template <int DC>
__device__ __forceinline__ int gk_chunk_width(int cols) {
    int w = 2;
    while (w < cols && w < DC) w <<= 1;
    return w;
}

// gk_tile_update over the first `w` columns (w from gk_chunk_width<DC>).
template <typename T, int R, int DC>
__device__ __forceinline__ void gk_chunk_update(bool rbf, int w, const T* xr, const T* zt, T (&part)[R]) {
    static_assert(DC == 16, "gk_chunk_update dispatches the widths 2, 4, 8, 16");
    switch (w) {
        case 2: gk_tile_update<T, R, 2>(rbf, xr, zt, part); break;
        case 4: gk_tile_update<T, R, 4>(rbf, xr, zt, part); break;
        case 8: gk_tile_update<T, R, 8>(rbf, xr, zt, part); break;
        default: gk_tile_update<T, R, 16>(rbf, xr, zt, part); break;
    }
}
