// CVM furthest-point search (Tsang et al. 2005, eq. 12-13), in two passes.
//
// For every candidate row l (all rows, or a list of row indices) it computes
//
//     s_l = y_l * ( r_l * sum_i coef_i * k(z_i, x_l) + b ) + self_l
//
// where z_i are the core vectors, coef_i = alpha_i y_i r_i, r the optional
// normalization scale 1/sqrt(k(x,x)) and self_l = alpha_l / C for a candidate
// that is itself a core vector (the delta_ij / C term of the transformed
// kernel).  The squared distance of phi~(z_l) to the ball centre is
// kappa~ + alpha'K~alpha - 2 s_l (eq. 12), so the furthest candidate is the
// arg-min of s (eq. 13: the worst violator of the margin constraint).
// Nothing of size n x |S| is stored.
//
// Pass 1, cvm_partial_*: block (bx, by) takes candidates [bx*per_block, (bx+1)*per_block), one
// per thread (per_block <= CVM_BLOCK, a multiple of 32: the launch spreads the candidates evenly
// over the blocks; a warp without a candidate only stages its share of the chunks), against the
// core rows [by*rows_per_split, (by+1)*rows_per_split) and writes
// partial[by * n_cand + c] = sum_i coef_i k(z_i, x_c) over them (double).  Splitting the core
// set over blockIdx.y fills the device when there are few candidates (the sampled search: a few
// hundred candidates are two blocks, 132 SMs).
//
// X and Z have rows of `ld` values (d rounded up to a multiple of V = 16 / sizeof(T), zero beyond d:
// the scanner pads them), so every row starts on a 16-byte boundary and the staging moves 16-byte
// vectors (float4 / double2).
// The rows' squared norms come in (xn: per row of X, zn: per core row), so the hot loop is the
// dot products alone.  A block takes its core rows in tiles of CVM_ZROWS and the columns in
// chunks of CVM_DC: a warp loads whole 64-byte (float) or 128-byte (double) runs of its rows into
// xs (row stride CVM_DC + V: the 16-byte loads of a thread's own row are free of bank
// conflicts), the tile chunk into zt (column-major); each thread then adds the chunk to its
// CVM_ZROWS dot products: per column one FFMA per core row, the core rows read as 16-byte
// broadcasts and the thread's row as 16-byte loads.  After the last chunk the thread parks the
// dot products in its row of xs and takes the tile's kernel values in a rolled loop
// (gk_tile_values of common.cuh).
//
// Pass 2, cvm_furthest_* / cvm_scores_*: s from the n_split partial sums (added in split order:
// deterministic), then each block reduces its group of candidates [g*group_size,
// (g+1)*group_size) to (min s, row) -- per-group minima serve the sampled search (one group per
// random sample of 59).  When `counter` is non-null the last block to finish also reduces all
// group minima to a single (min s, row) -- the exact scan is then two launches.  Ties go to the
// smallest row index (deterministic).  cvm_scores_* also writes every candidate's s to
// scores[candidate position] (the core-set loop's sampled search adds every violator of a
// sample, and its stop rule sums the violations).
// NumPy twin: gpuksvm.solvers.cvm.meb.candidate_scores / HostScanner.
#include "common.cuh"

#define CVM_BLOCK 256   // threads per block: pass 1 exactly this, pass 2 at most this
#define CVM_ZROWS 16    // core rows per tile (a slice of the core set is whole tiles)
#define CVM_DC 16       // columns per chunk

template <typename T> struct cvm_vec;
template <> struct cvm_vec<float> { typedef float4 type; };
template <> struct cvm_vec<double> { typedef double2 type; };

template <typename T>
struct CvmTile {
    static constexpr int V = 16 / sizeof(T);           // values per 16-byte vector
    static constexpr int Q = CVM_DC / V;               // vectors per row chunk
    static constexpr int XS = CVM_DC + V;              // row stride of xs
    static constexpr int ZS = CVM_ZROWS + V;           // column stride of zt
    static constexpr int RW = 32 / Q;                  // rows a warp stages per round
};

// The row of xs lane `lane` of a warp stages in each round (of RW rows): vector lane % Q of it.
// With 4 vectors a row (float), the 8 lanes of a quarter warp take rows r and r + 4 (80 words
// apart: their 16-byte stores are on distinct banks); with 8 (double) one row.
template <typename T>
__device__ __forceinline__ int cvm_stage_row(int lane) {
    return CvmTile<T>::Q == 4 ? ((lane >> 2) & 1) * 4 + (lane >> 3) : lane / CvmTile<T>::Q;
}

// One chunk of columns [c0, c0 + CVM_DC) into xs and zt: FULL (every vector of the chunk inside
// the rows), or the last `nvec` vectors of the rows (the rest zero).  xo[k]: the 16-byte vector of X
// where the thread's row of round k starts.
template <typename T, bool FULL>
__device__ __forceinline__ void cvm_stage(const T* __restrict__ X, const unsigned (&xo)[CvmTile<T>::Q], int ld,
                                          const T* __restrict__ Z, int t0, int rows, int c0, int nvec, T* xs,
                                          T* zt) {
    typedef typename cvm_vec<T>::type VT;
    typedef CvmTile<T> G;
    const int tid = threadIdx.x;
    const int v = (tid & 31) % G::Q;
    const int j0 = (tid >> 5) * G::RW + cvm_stage_row<T>(tid & 31);
#pragma unroll
    for (int k = 0; k < G::Q; ++k) {
        VT val;
        if (FULL || v < nvec) {
            val = reinterpret_cast<const VT*>(X)[xo[k] + (unsigned)(c0 / G::V + v)];
        } else {
            val = VT{};
        }
        *reinterpret_cast<VT*>(xs + (k * (CVM_BLOCK / G::Q) + j0) * G::XS + v * G::V) = val;
    }
    static_assert(CVM_ZROWS * CVM_DC == CVM_BLOCK, "a tile chunk is one value per thread");
    const int r = tid / CVM_DC, c = tid % CVM_DC;
    zt[c * G::ZS + r] = (r < rows && (FULL || c < nvec * G::V)) ? Z[(long long)(t0 + r) * ld + c0 + c] : T(0);
}

// The chunk's first W columns (W: 2, 4, 8 or 16) added to the thread's dot products.
template <typename T, int W>
__device__ __forceinline__ void cvm_dots(const T* xr, const T* zt, T (&part)[CVM_ZROWS]) {
    typedef typename cvm_vec<T>::type VT;
    typedef CvmTile<T> G;
#pragma unroll
    for (int cv = 0; cv < (W + G::V - 1) / G::V; ++cv) {
        const VT xv = *reinterpret_cast<const VT*>(xr + cv * G::V);
        const T* const xe = reinterpret_cast<const T*>(&xv);
#pragma unroll
        for (int i = 0; i < (W < G::V ? W : G::V); ++i) {
            const T* const zc = zt + (cv * G::V + i) * G::ZS;
#pragma unroll
            for (int r4 = 0; r4 < CVM_ZROWS / G::V; ++r4) {
                const VT zv = *reinterpret_cast<const VT*>(zc + r4 * G::V);
                const T* const ze = reinterpret_cast<const T*>(&zv);
#pragma unroll
                for (int q = 0; q < G::V; ++q) part[r4 * G::V + q] += xe[i] * ze[q];
            }
        }
    }
}

template <typename T>
__device__ void cvm_partial(const T* __restrict__ X, int d, int ld, const T* __restrict__ xn,
                            const long long* __restrict__ cand, long long n_cand,
                            const T* __restrict__ Z, const T* __restrict__ zn, const T* __restrict__ coef, int m,
                            int rows_per_split, int ktype, T gamma, T coef0, T degree, double* __restrict__ partial,
                            int per_block) {
    typedef CvmTile<T> G;
    static_assert(CVM_ZROWS <= G::XS, "a thread's row of xs holds its parked dot products");
    __shared__ __align__(16) T xs[CVM_BLOCK * G::XS];   // candidate chunk of slot j at j * XS
    __shared__ __align__(16) T zt[CVM_DC * G::ZS];      // tile chunk, zt[c * ZS + r]
    __shared__ T zz[CVM_ZROWS];                         // squared norms of the tile's rows
    __shared__ T cs[CVM_ZROWS];                         // tile coefficients
    const int tid = threadIdx.x;
    const long long first = (long long)blockIdx.x * per_block;    // the block's first candidate
    const long long c = first + tid;
    const bool active = tid < per_block && c < n_cand;
    const int lane0 = tid & ~31;                                     // the warp's first thread
    const bool busy = lane0 < per_block && first + lane0 < n_cand;   // the warp has a candidate
    // slot j's candidate row (no candidate: the last one's)
    auto row_of = [&](int j) {
        const long long cj = (j < per_block && first + j < n_cand) ? first + j : n_cand - 1;
        return cand != nullptr ? cand[cj] : cj;
    };
    const T xx = xn[row_of(tid)];
    // the rows this thread stages, one per round, as 32-bit offsets in 16-byte vectors (the scanner
    // keeps X below 64 GiB: GpuScanner.supported); 64-bit pointers would spill f64 on sm_80
    unsigned xo[G::Q];
    {
        const int j0 = (tid >> 5) * G::RW + cvm_stage_row<T>(tid & 31);
#pragma unroll
        for (int k = 0; k < G::Q; ++k) xo[k] = (unsigned)(row_of(k * (CVM_BLOCK / G::Q) + j0) * (ld / G::V));
    }
    T* const xr = xs + tid * G::XS;   // the thread's own row of xs
    const int z0 = blockIdx.y * rows_per_split;
    const int z1 = min(m, z0 + rows_per_split);
    const int full = ld - ld % CVM_DC;
    double acc = 0.0;
    for (int t0 = z0; t0 < z1; t0 += CVM_ZROWS) {
        const int rows = min(CVM_ZROWS, z1 - t0);
        __syncthreads();   // the previous tile's zz / cs are read
        if (tid < rows) {
            zz[tid] = zn[t0 + tid];
            cs[tid] = coef[t0 + tid];
        }
        T part[CVM_ZROWS];
#pragma unroll
        for (int r = 0; r < CVM_ZROWS; ++r) part[r] = T(0);
        int c0 = 0;
        for (; c0 < full; c0 += CVM_DC) {
            __syncthreads();   // the previous chunk, or the previous tile's parked values, is read
            cvm_stage<T, true>(X, xo, ld, Z, t0, rows, c0, G::Q, xs, zt);
            __syncthreads();
            if (busy) cvm_dots<T, CVM_DC>(xr, zt, part);
        }
        if (c0 < ld) {   // the last ld % CVM_DC columns (d - c0 of them data), at width 2, 4, 8 or 16
            const int cols = d - c0;
            __syncthreads();
            cvm_stage<T, false>(X, xo, ld, Z, t0, rows, c0, (ld - c0) / G::V, xs, zt);
            __syncthreads();
            if (busy) {
                if (cols <= 2) cvm_dots<T, 2>(xr, zt, part);
                else if (cols <= 4) cvm_dots<T, 4>(xr, zt, part);
                else if (cols <= 8) cvm_dots<T, 8>(xr, zt, part);
                else cvm_dots<T, CVM_DC>(xr, zt, part);
            }
        }
        if (!busy) continue;   // no candidate in this warp: the values are not used
        // rows of the tile beyond z1: zero in zt, not staged in zz and cs
        // park in the thread's own row of xs; the next staging waits at a barrier
        gk_tile_values<T, CVM_ZROWS>(part, xr, rows, xx, zz, ktype, gamma, coef0, degree,
                                     [&](int r, T kv) { acc += (double)kv * (double)cs[r]; });
    }
    if (active) partial[(long long)blockIdx.y * n_cand + c] = acc;
}

template <typename T>
__device__ __forceinline__ void cvm_better(double s, long long r, double& bs, long long& br) {
    if (s < bs || (s == bs && r >= 0 && (br < 0 || r < br))) { bs = s; br = r; }
}

// Tree reduction of the block's (s, row) pairs in shared memory to slot 0
// (the callers have stored their pair in slot tid and synchronized).
template <typename T>
__device__ __forceinline__ void cvm_block_argmin(double* red_s, long long* red_i, int tid) {
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (tid < w) {
            double bs = red_s[tid];
            long long br = red_i[tid];
            cvm_better<T>(red_s[tid + w], red_i[tid + w], bs, br);
            red_s[tid] = bs;
            red_i[tid] = br;
        }
        __syncthreads();
    }
}

template <typename T>
__device__ void cvm_furthest(const double* __restrict__ partial, int n_split, const long long* __restrict__ cand,
                             long long n_cand, long long group_size, double b, const T* __restrict__ y,
                             const T* __restrict__ self_term, const T* __restrict__ xscale,
                             double* part_s, long long* part_idx, unsigned int* counter,
                             double* out_s, long long* out_idx, double* scores) {
    __shared__ double red_s[CVM_BLOCK];
    __shared__ long long red_i[CVM_BLOCK];
    __shared__ bool am_last;

    const int tid = threadIdx.x;
    const long long g0 = (long long)blockIdx.x * group_size;
    long long g1 = g0 + group_size;
    if (g1 > n_cand) g1 = n_cand;

    double best = 1.0 / 0.0;
    long long besti = -1;
    for (long long c = g0 + tid; c < g1; c += blockDim.x) {
        const long long row = cand != nullptr ? cand[c] : c;
        double s = 0.0;
        for (int p = 0; p < n_split; ++p) s += partial[(long long)p * n_cand + c];
        if (xscale != nullptr) s *= (double)xscale[row];
        s += b;
        if (y != nullptr) s *= (double)y[row];
        if (self_term != nullptr) s += (double)self_term[row];
        if (scores != nullptr) scores[c] = s;
        cvm_better<T>(s, row, best, besti);
    }

    // block reduction of (s, row)
    red_s[tid] = best;
    red_i[tid] = besti;
    __syncthreads();
    cvm_block_argmin<T>(red_s, red_i, tid);
    if (tid == 0) {
        part_s[blockIdx.x] = red_s[0];
        part_idx[blockIdx.x] = red_i[0];
    }
    if (counter == nullptr) return;

    // last block reduces the group minima (threadFenceReduction pattern)
    if (tid == 0) {
        __threadfence();
        const unsigned int ticket = atomicAdd(counter, 1u);
        am_last = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (!am_last) return;
    __threadfence();
    best = 1.0 / 0.0;
    besti = -1;
    for (int g = tid; g < (int)gridDim.x; g += blockDim.x) {
        const double ps = ((volatile double*)part_s)[g];
        const long long pi = ((volatile long long*)part_idx)[g];
        cvm_better<T>(ps, pi, best, besti);
    }
    red_s[tid] = best;
    red_i[tid] = besti;
    __syncthreads();
    cvm_block_argmin<T>(red_s, red_i, tid);
    if (tid == 0) {
        out_s[0] = red_s[0];
        out_idx[0] = red_i[0];
        *counter = 0u;   // ready for the next launch
    }
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK, 2)
cvm_partial_f32(const float* X, int d, int ld, const float* xn, const long long* cand, long long n_cand, const float* Z,
               const float* zn, const float* coef, int m, int rows_per_split, int ktype, float gamma, float coef0,
               float degree, double* partial, int per_block) {
    cvm_partial<float>(X, d, ld, xn, cand, n_cand, Z, zn, coef, m, rows_per_split, ktype, gamma, coef0, degree, partial,
                     per_block);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK, 2)
cvm_partial_f64(const double* X, int d, int ld, const double* xn, const long long* cand, long long n_cand, const double* Z,
               const double* zn, const double* coef, int m, int rows_per_split, int ktype, double gamma, double coef0,
               double degree, double* partial, int per_block) {
    cvm_partial<double>(X, d, ld, xn, cand, n_cand, Z, zn, coef, m, rows_per_split, ktype, gamma, coef0, degree, partial,
                     per_block);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK)
cvm_furthest_f32(const double* partial, int n_split, const long long* cand, long long n_cand,
               long long group_size, double b, const float* y, const float* self_term, const float* xscale,
               double* part_s, long long* part_idx, unsigned int* counter, double* out_s,
               long long* out_idx) {
    cvm_furthest<float>(partial, n_split, cand, n_cand, group_size, b, y, self_term, xscale, part_s, part_idx,
                      counter, out_s, out_idx, nullptr);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK)
cvm_furthest_f64(const double* partial, int n_split, const long long* cand, long long n_cand,
               long long group_size, double b, const double* y, const double* self_term, const double* xscale,
               double* part_s, long long* part_idx, unsigned int* counter, double* out_s,
               long long* out_idx) {
    cvm_furthest<double>(partial, n_split, cand, n_cand, group_size, b, y, self_term, xscale, part_s, part_idx,
                      counter, out_s, out_idx, nullptr);
}

// As cvm_furthest_*, also writing every candidate's s to `scores` (n_cand doubles).
extern "C" __global__ void __launch_bounds__(CVM_BLOCK)
cvm_scores_f32(const double* partial, int n_split, const long long* cand, long long n_cand,
               long long group_size, double b, const float* y, const float* self_term, const float* xscale,
               double* part_s, long long* part_idx, unsigned int* counter, double* out_s,
               long long* out_idx, double* scores) {
    cvm_furthest<float>(partial, n_split, cand, n_cand, group_size, b, y, self_term, xscale, part_s, part_idx,
                      counter, out_s, out_idx, scores);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK)
cvm_scores_f64(const double* partial, int n_split, const long long* cand, long long n_cand,
               long long group_size, double b, const double* y, const double* self_term, const double* xscale,
               double* part_s, long long* part_idx, unsigned int* counter, double* out_s,
               long long* out_idx, double* scores) {
    cvm_furthest<double>(partial, n_split, cand, n_cand, group_size, b, y, self_term, xscale, part_s, part_idx,
                      counter, out_s, out_idx, scores);
}
