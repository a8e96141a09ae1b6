// CVM furthest-point search (Tsang et al. 2005, eq. 12-13), fused.
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
// Nothing of size n x |S| is stored: one thread per candidate keeps one
// accumulator (double) and CVM_ZROWS partial sums in registers; the block
// takes the core set in tiles of CVM_ZROWS rows and d in chunks of CVM_DC
// columns, staging its candidates' chunk (a warp reads runs of up to CVM_DC
// consecutive values of a row: coalesced) and the tile's chunk in shared
// memory (gk_chunk_update of common.cuh: a chunk narrower than CVM_DC is
// computed at its power-of-two width).  The tile's kernel values are taken in
// a rolled loop over the partial sums parked in the thread's own row of the
// staging buffer (gk_park_part).
//
// Each block reduces its group of candidates [g*group_size, (g+1)*group_size)
// to (min s, row) -- per-group minima serve the sampled search (one group per
// random sample of 59).  When `counter` is non-null the last block to finish
// also reduces all group minima to a single (min s, row) -- the exact scan is
// then one launch.  Ties go to the smallest row index (deterministic).
// When `scores` is non-null every candidate's s is also written to
// scores[candidate position] (cvm_scores_*: the core-set loop's sampled search
// adds every violator of a sample, and its stop rule sums the violations).
// NumPy twin: gpuksvm.solvers.cvm.meb.candidate_scores / HostScanner.
#include "common.cuh"

#define CVM_BLOCK 256   // threads (candidates) per block: the launch's block size, at most this
#define CVM_ZROWS 16    // core rows per tile
#define CVM_DC 16       // columns per chunk
static_assert(CVM_ZROWS <= CVM_DC + 1, "a thread's row of xs holds its parked partial sums");

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
__device__ void cvm_furthest(const T* __restrict__ X, int d, const long long* __restrict__ cand,
                             long long n_cand, long long group_size,
                             const T* __restrict__ Z, const T* __restrict__ coef, int m,
                             double b, const T* __restrict__ y, const T* __restrict__ self_term,
                             const T* __restrict__ xscale, int ktype, T gamma, T coef0, T degree,
                             double* part_s, long long* part_idx, unsigned int* counter,
                             double* out_s, long long* out_idx, double* scores) {
    __shared__ T xs[CVM_BLOCK * (CVM_DC + 1)];   // candidate chunk of slot j at j * (CVM_DC + 1)
    __shared__ T zt[CVM_DC * CVM_ZROWS];         // tile chunk, zt[c * CVM_ZROWS + r]
    __shared__ T cs[CVM_ZROWS];                  // tile coefficients
    __shared__ double red_s[CVM_BLOCK];
    __shared__ long long red_i[CVM_BLOCK];
    __shared__ bool am_last;

    const int tid = threadIdx.x;
    const bool rbf = ktype == GPUKSVM_RBF;
    const long long g0 = (long long)blockIdx.x * group_size;
    long long g1 = g0 + group_size;
    if (g1 > n_cand) g1 = n_cand;

    double best = 1.0 / 0.0;
    long long besti = -1;
    for (long long base = g0; base < g1; base += blockDim.x) {   // uniform trip count in the block
        const long long c = base + tid;
        const bool active = c < g1;
        const long long row = active ? (cand != nullptr ? cand[c] : c) : -1;
        double acc = 0.0;
        for (int t0 = 0; t0 < m; t0 += CVM_ZROWS) {
            const int rows = min(CVM_ZROWS, m - t0);
            T part[CVM_ZROWS];
#pragma unroll
            for (int r = 0; r < CVM_ZROWS; ++r) part[r] = T(0);
            for (int c0 = 0; c0 < d; c0 += CVM_DC) {
                const int cols = min(CVM_DC, d - c0);
                const int w = gk_chunk_width<CVM_DC>(cols);   // columns staged and computed (zero beyond cols)
                __syncthreads();   // the previous chunk is read by every thread
                for (int e = tid; e < (int)blockDim.x * w; e += blockDim.x) {
                    const int j = e / w, k = e % w;
                    const long long cj = base + j;   // slot j's candidate
                    xs[j * (CVM_DC + 1) + k] = (cj < g1 && k < cols)
                        ? X[(cand != nullptr ? cand[cj] : cj) * d + c0 + k] : T(0);
                }
                for (int e = tid; e < rows * w; e += blockDim.x) {
                    const int r = e / w, k = e % w;
                    zt[k * CVM_ZROWS + r] = k < cols ? Z[(long long)(t0 + r) * d + c0 + k] : T(0);
                }
                if (c0 == 0) {
                    for (int e = tid; e < rows; e += blockDim.x) cs[e] = coef[t0 + e];
                }
                __syncthreads();
                gk_chunk_update<T, CVM_ZROWS, CVM_DC>(rbf, w, xs + tid * (CVM_DC + 1), zt, part);
            }
            // rows of the tile beyond m were not staged (zt, cs hold stale values there)
            if (active) {
                T* const parked = xs + tid * (CVM_DC + 1);   // this thread's slot; the next staging waits at a barrier
                gk_park_part<T, CVM_ZROWS>(part, parked);
#pragma unroll 1
                for (int r = 0; r < rows; ++r) {
                    const T kv = gk_kernel_value<T>(ktype, parked[r], parked[r], gamma, coef0, degree);
                    acc += (double)kv * (double)cs[r];
                }
            }
        }
        if (active) {
            double s = acc;
            if (xscale != nullptr) s *= (double)xscale[row];
            s += b;
            if (y != nullptr) s *= (double)y[row];
            if (self_term != nullptr) s += (double)self_term[row];
            if (scores != nullptr) scores[c] = s;
            cvm_better<T>(s, row, best, besti);
        }
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
cvm_furthest_f32(const float* X, int d, const long long* cand, long long n_cand, long long group_size,
                 const float* Z, const float* coef, int m, double b, const float* y,
                 const float* self_term, const float* xscale, int ktype, float gamma, float coef0,
                 float degree, double* part_s, long long* part_idx, unsigned int* counter,
                 double* out_s, long long* out_idx) {
    cvm_furthest<float>(X, d, cand, n_cand, group_size, Z, coef, m, b, y, self_term, xscale,
                        ktype, gamma, coef0, degree, part_s, part_idx, counter, out_s, out_idx, nullptr);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK, 2)
cvm_furthest_f64(const double* X, int d, const long long* cand, long long n_cand, long long group_size,
                 const double* Z, const double* coef, int m, double b, const double* y,
                 const double* self_term, const double* xscale, int ktype, double gamma, double coef0,
                 double degree, double* part_s, long long* part_idx, unsigned int* counter,
                 double* out_s, long long* out_idx) {
    cvm_furthest<double>(X, d, cand, n_cand, group_size, Z, coef, m, b, y, self_term, xscale,
                         ktype, gamma, coef0, degree, part_s, part_idx, counter, out_s, out_idx, nullptr);
}

// As cvm_furthest_*, also writing every candidate's s to `scores` (n_cand doubles).
extern "C" __global__ void __launch_bounds__(CVM_BLOCK, 2)
cvm_scores_f32(const float* X, int d, const long long* cand, long long n_cand, long long group_size,
               const float* Z, const float* coef, int m, double b, const float* y,
               const float* self_term, const float* xscale, int ktype, float gamma, float coef0,
               float degree, double* part_s, long long* part_idx, unsigned int* counter,
               double* out_s, long long* out_idx, double* scores) {
    cvm_furthest<float>(X, d, cand, n_cand, group_size, Z, coef, m, b, y, self_term, xscale,
                        ktype, gamma, coef0, degree, part_s, part_idx, counter, out_s, out_idx, scores);
}

extern "C" __global__ void __launch_bounds__(CVM_BLOCK, 2)
cvm_scores_f64(const double* X, int d, const long long* cand, long long n_cand, long long group_size,
               const double* Z, const double* coef, int m, double b, const double* y,
               const double* self_term, const double* xscale, int ktype, double gamma, double coef0,
               double degree, double* part_s, long long* part_idx, unsigned int* counter,
               double* out_s, long long* out_idx, double* scores) {
    cvm_furthest<double>(X, d, cand, n_cand, group_size, Z, coef, m, b, y, self_term, xscale,
                         ktype, gamma, coef0, degree, part_s, part_idx, counter, out_s, out_idx, scores);
}
