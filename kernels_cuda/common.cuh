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

// ||x||^2 of the thread's row chunk and <x, z_r> of the tile's rows, one column chunk of width
// W (compile-time: both loops unroll, part[] stays in registers): R FFMA per column for the
// dot products, one for the norm.  The squared distance is then ||x||^2 + ||z_r||^2 - 2<x, z_r>
// (gk_tile_dots), one FFMA per (row, core row, feature) where x - z needs an FADD and an FFMA.
template <typename T, int R, int W>
__device__ __forceinline__ void gk_dot_update(const T* xr, const T* zt, T (&part)[R], T& xx) {
#pragma unroll
    for (int c = 0; c < W; ++c) {
        const T x = xr[c];
        xx += x * x;
#pragma unroll
        for (int r = 0; r < R; ++r) part[r] += x * zt[c * R + r];
    }
}

// Stages column chunk [c0, c0 + w) of the block's B rows (slot j's row starts at rowptr[j]; an
// empty slot points at a valid row whose values nobody uses) and of the tile's core rows t0 ..
// t0 + rows (zeros beyond `rows` and beyond `cols` columns).  One warp load covers 32 / w rows
// of w consecutive values (w = DC: 64-byte runs, whole 32-byte sectors); a full chunk costs a
// thread DC x (shared pointer load, address, global load, shared store).  The caller
// synchronizes around it.
template <typename T, int B, int R, int DC, bool FULL>
__device__ __forceinline__ void gk_stage_chunk(const T* const* rowptr, int d, const T* __restrict__ Z, int t0,
                                               int rows, int c0, int cols, int lw, T* xs, T* zt,
                                               T (&zsum)[R * DC / B]) {
    const int tid = threadIdx.x;
    const int w = FULL ? DC : 1 << lw;
    if (FULL) {
        const int c = tid % DC;
#pragma unroll
        for (int q = 0; q < DC; ++q) {   // B * DC values, DC per thread: lanes c of group tid / DC take
            const int j = (tid / DC) * DC + q;   // its DC rows (two row pointers per 16-byte shared load)
            xs[j * (DC + 1) + c] = rowptr[j][c0 + c];
        }
    } else {
        for (int e = tid; e < B * w; e += B) {
            const int j = e >> lw, c = e & (w - 1);
            xs[j * (DC + 1) + c] = c < cols ? rowptr[j][c0 + c] : T(0);
        }
    }
    const T* const zc = Z + (long long)t0 * d + c0;   // the tile's chunk: row r at zc + r * d
    if (FULL) {
        static_assert((R * DC) % B == 0, "the tile chunk is whole rounds of the block");
#pragma unroll
        for (int q = 0; q < R * DC / B; ++q) {   // DC lanes (half a warp) per core row
            const int e = q * B + tid, r = e / DC, c = e % DC;
            const T v = r < rows ? zc[r * d + c] : T(0);
            zt[c * R + r] = v;
            T sq = v * v;   // the row's chunk of ||z_r||^2, summed over its DC lanes
#pragma unroll
            for (int o = DC / 2; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
            zsum[q] += sq;
        }
    } else {
        for (int e = tid; e < R * w; e += B) {
            const int r = e >> lw, c = e & (w - 1);
            zt[c * R + r] = (r < rows && c < cols) ? zc[r * d + c] : T(0);
        }
    }
}

// One tile of R core rows (t0 .. t0 + rows) against the block's B rows (blockDim.x == B; slot j's
// row at rowptr[j], see gk_stage_chunk), in
// column chunks of DC staged through shared memory (xs: B * (DC + 1), zt: DC * R): full chunks
// in a loop of their own (no column bounds, compile-time width), then the last d % DC columns
// at their power-of-two width (gk_chunk_width).  Leaves part[r] = <x, z_r> and xx = ||x||^2 in
// the thread's registers, zz[r] = ||z_r||^2 (shared, R) and the tile's rows of V in vs
// (vs[r * vstride + c] = V[(t0 + r) * vcols + c], c < vcols; shared), and ends at a barrier:
// the caller then reads zz, vs and its own row of xs (gk_park_part) until its next call.
// `compute` (the same for the 32 threads of a warp): false for a warp none of whose rows is
// used, which then only stages its share of the chunks and skips the multiply-adds (part and xx
// stay zero).
template <typename T, int B, int R, int DC>
__device__ __forceinline__ void gk_tile_dots(const T* const* rowptr, int d,
                                             const T* __restrict__ Z, int t0, int rows,
                                             const T* __restrict__ V, int vcols, int vstride,
                                             T* xs, T* zt, T* zz, T* vs, T (&part)[R], T& xx,
                                             bool compute = true) {
    static_assert(DC == 16 && B % 32 == 0 && (R * DC) % B == 0, "chunks of 16 columns, whole warps");
    const int tid = threadIdx.x;
#pragma unroll
    for (int r = 0; r < R; ++r) part[r] = T(0);
    xx = T(0);
    constexpr int RB = R * DC / B;   // core rows whose norm a lane c = 0 of a row chunk sums
    T zsum[RB];
#pragma unroll
    for (int q = 0; q < RB; ++q) zsum[q] = T(0);
    const T* const xr = xs + tid * (DC + 1);
    int c0 = 0;
    for (; c0 + DC <= d; c0 += DC) {
        __syncthreads();   // the previous chunk, or the previous tile's xs / zz / vs, is read
        gk_stage_chunk<T, B, R, DC, true>(rowptr, d, Z, t0, rows, c0, DC, 4, xs, zt, zsum);
        __syncthreads();
        if (compute) gk_dot_update<T, R, DC>(xr, zt, part, xx);
    }
    if (c0 < d) {
        const int cols = d - c0;
        const int w = gk_chunk_width<DC>(cols);
        const int lw = w == 2 ? 1 : w == 4 ? 2 : w == 8 ? 3 : 4;
        __syncthreads();
        gk_stage_chunk<T, B, R, DC, false>(rowptr, d, Z, t0, rows, c0, cols, lw, xs, zt, zsum);
        __syncthreads();
        switch (compute ? w : 0) {
            case 0: break;
            case 2: gk_dot_update<T, R, 2>(xr, zt, part, xx); break;
            case 4: gk_dot_update<T, R, 4>(xr, zt, part, xx); break;
            case 8: gk_dot_update<T, R, 8>(xr, zt, part, xx); break;
            default: gk_dot_update<T, R, 16>(xr, zt, part, xx); break;
        }
        if (tid % DC == 0) {
#pragma unroll
            for (int q = 0; q < RB; ++q) {
                const int r = q * (B / DC) + tid / DC;
                for (int c = 0; c < w; ++c) zsum[q] += zt[c * R + r] * zt[c * R + r];
            }
        }
    }
    if (tid % DC == 0) {
#pragma unroll
        for (int q = 0; q < RB; ++q) zz[q * (B / DC) + tid / DC] = zsum[q];
    }
    for (int e = tid; e < rows * vcols; e += B) vs[(e / vcols) * vstride + e % vcols] = V[(long long)t0 * vcols + e];
    __syncthreads();
}

// The squared distance from the dot product and the two norms (clamped at 0 by gk_kernel_value).
template <typename T>
__device__ __forceinline__ T gk_dist2(T xx, T zz, T dot) {
    return xx + zz - T(2) * dot;
}

// The tile's kernel values: parks part[] in the thread's slot (gk_park_part) and calls
// use(r, k(x, z_r)) for r < rows in a rolled loop (one inlined copy of gk_kernel_value).
template <typename T, int R, typename Use>
__device__ __forceinline__ void gk_tile_values(const T (&part)[R], T* slot, int rows, T xx, const T* zz, int ktype,
                                               T gamma, T coef0, T degree, Use use) {
    gk_park_part<T, R>(part, slot);
#pragma unroll 1
    for (int r = 0; r < rows; ++r) {
        const T dot = slot[r];
        use(r, gk_kernel_value<T>(ktype, dot, gk_dist2<T>(xx, zz[r], dot), gamma, coef0, degree));
    }
}
