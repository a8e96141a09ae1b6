// Batched working-set subproblem of the GPU C-SVC solver (ThunderSVM style, SPEC §6).
//
// One thread block per problem p, one thread per working-set row (blockDim.x
// is a power of two >= ws; extra threads are idle).  Each thread keeps its
// alpha, F = -y*grad, y, C and K(t,t) in registers; block reductions pick
//   i = argmax_{I_up} F,   M = min_{I_low} F,
//   j = argmax_{j in I_low, F_j < F_i} (F_i - F_j)^2 / eta_ij     (Fan, Chen, Lin 2005, WSS 2)
// with eta floored at 1e-12.  Step t = min((F_i - F_j)/eta, box bounds);
// alpha_i += y_i t, alpha_j -= y_j t, F_k -= t (K_ik - K_jk).
// Local stopping: gap < max(tol, 0.1 * initial local gap), or max_inner steps.
// Ties in the reductions go to the smaller index, as numpy.argmax does, so the
// NumPy twin gpuksvm.solvers.smo.working_set.solve_subproblems_host follows the same path.
//
// Kww    (P, ws, ws)  kernel values among the working-set rows (row-major)
// yw, Cw (P, ws)      labels (0 = padding slot, never moves), upper bounds
// alpha  (P, ws)      in: current alpha, out: new alpha
// Fw     (P, ws)      F of the working-set rows (read only)
// active (P,)         0: skip the problem
// n_inner(P,)        out: inner steps;  gap0 (P,) out: initial local gap
// dynamic shared memory: blockDim.x * (sizeof(T) + sizeof(int)) bytes
#include "common.cuh"

// -inf from its bit pattern: NVRTC has no math.h, so INFINITY / HUGE_VAL are undefined there.
template <typename T> __device__ __forceinline__ T smo_neg_inf();
template <> __device__ __forceinline__ float smo_neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double smo_neg_inf<double>() {
    return __longlong_as_double(static_cast<long long>(0xfff0000000000000ULL));
}

// (value, index) arg-max over the 32 lanes of a warp by a butterfly of shuffles: every lane gets
// the result; ties -> smaller index.
template <typename T>
__device__ __forceinline__ void smo_warp_argmax(T& v, int& idx) {
    for (int o = 16; o > 0; o >>= 1) {
        const T b = __shfl_xor_sync(0xffffffffu, v, o);
        const int ib = __shfl_xor_sync(0xffffffffu, idx, o);
        if (b > v || (b == v && ib < idx)) { v = b; idx = ib; }
    }
}

// Block-wide (value, index) arg-max; ties -> smaller index.  All threads get the result.
// Each warp reduces by shuffles, its lane 0 stores the warp's pair, and after one barrier every
// warp reduces the blockDim.x / 32 pairs itself (blockDim.x is a power of two, 32..1024): two
// barriers per reduction instead of one per level of a shared-memory tree (none for one warp).
template <typename T>
__device__ __forceinline__ void smo_block_argmax(T v, int idx, T* sval, int* sidx, T& out_v, int& out_i) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    smo_warp_argmax<T>(v, idx);
    if (nwarps == 1) {   // one warp (ws <= 32): the butterfly gave every lane the result
        out_v = v;
        out_i = idx;
        return;
    }
    if (lane == 0) {
        sval[warp] = v;
        sidx[warp] = idx;
    }
    __syncthreads();
    T w = smo_neg_inf<T>();
    int iw = 0x7fffffff;
    if (lane < nwarps) {
        w = sval[lane];
        iw = sidx[lane];
    }
    smo_warp_argmax<T>(w, iw);
    out_v = w;
    out_i = iw;
    __syncthreads();  // the arrays are reused by the next reduction
}

template <typename T>
__device__ void smo_subproblem(const T* __restrict__ Kww, const T* __restrict__ yw, const T* __restrict__ Cw,
                               T* __restrict__ alpha, const T* __restrict__ Fw, const int* __restrict__ active,
                               int ws, T tol, int max_inner, int* __restrict__ n_inner, T* __restrict__ gap0) {
    extern __shared__ unsigned char smo_smem[];
    T* sval = reinterpret_cast<T*>(smo_smem);
    int* sidx = reinterpret_cast<int*>(sval + blockDim.x);
    __shared__ T s_ub_i, s_ub_j, s_step_j;

    const int p = blockIdx.x;
    const int tid = threadIdx.x;
    if (!active[p]) {
        if (tid == 0) { n_inner[p] = 0; gap0[p] = T(0); }
        return;
    }
    const T NEG_INF = smo_neg_inf<T>();
    const T* K = Kww + (size_t)p * ws * ws;
    const bool valid = tid < ws;
    const size_t off = (size_t)p * ws + tid;
    T a = valid ? alpha[off] : T(0);
    T f = valid ? Fw[off] : T(0);
    const T y = valid ? yw[off] : T(0);
    const T c = valid ? Cw[off] : T(0);
    const T kd = valid ? K[(size_t)tid * ws + tid] : T(0);

    T eps_local = T(0);
    T g0 = T(0);
    int it = 0;
    for (;;) {
        const bool up = valid && ((y > T(0) && a < c) || (y < T(0) && a > T(0)));
        const bool low = valid && ((y < T(0) && a < c) || (y > T(0) && a > T(0)));
        T m; int i;
        smo_block_argmax<T>(up ? f : NEG_INF, tid, sval, sidx, m, i);
        T negM; int dummy;
        smo_block_argmax<T>(low ? -f : NEG_INF, tid, sval, sidx, negM, dummy);
        const T gap = m + negM;  // m - M; -inf when I_up or I_low is empty
        if (it == 0) {
            g0 = (gap > NEG_INF) ? gap : T(0);
            eps_local = fmax(tol, T(0.1) * gap);
        }
        if (!(gap >= eps_local) || it >= max_inner) break;
        const T Kit = valid ? K[(size_t)i * ws + tid] : T(0);  // K symmetric: K[i][tid]
        const T Kii = K[(size_t)i * ws + i];
        const T b = m - f;
        T eta = Kii + kd - T(2) * Kit;
        eta = eta > T(1e-12) ? eta : T(1e-12);
        const T gain = (low && f < m) ? b * b / eta : NEG_INF;
        T gbest; int j;
        smo_block_argmax<T>(gain, tid, sval, sidx, gbest, j);
        if (tid == i) s_ub_i = (y > T(0)) ? c - a : a;
        if (tid == j) { s_ub_j = (y > T(0)) ? a : c - a; s_step_j = b / eta; }
        __syncthreads();
        const T ub_i = s_ub_i, ub_j = s_ub_j;
        T t = s_step_j;
        t = ub_i < t ? ub_i : t;
        t = ub_j < t ? ub_j : t;
        const T Kjt = valid ? K[(size_t)j * ws + tid] : T(0);
        if (tid == i) a = (t == ub_i) ? ((y > T(0)) ? c : T(0)) : a + y * t;
        if (tid == j) a = (t == ub_j) ? ((y > T(0)) ? T(0) : c) : a - y * t;
        f -= t * (Kit - Kjt);
        ++it;
        // no barrier needed here: s_ub_i/s_ub_j/s_step_j are written next after three block
        // reductions of the next step, each of which synchronizes (checked by the mutation test)
    }
    if (valid) alpha[off] = a;
    if (tid == 0) { n_inner[p] = it; gap0[p] = g0; }
}

extern "C" __global__ void smo_subproblem_f32(const float* Kww, const float* yw, const float* Cw, float* alpha,
                                              const float* Fw, const int* active, int ws, float tol,
                                              int max_inner, int* n_inner, float* gap0) {
    smo_subproblem<float>(Kww, yw, Cw, alpha, Fw, active, ws, tol, max_inner, n_inner, gap0);
}

extern "C" __global__ void smo_subproblem_f64(const double* Kww, const double* yw, const double* Cw,
                                              double* alpha, const double* Fw, const int* active, int ws,
                                              double tol, int max_inner, int* n_inner, double* gap0) {
    smo_subproblem<double>(Kww, yw, Cw, alpha, Fw, active, ws, tol, max_inner, n_inner, gap0);
}

// ---------------------------------------------------------------------------
// The decisions of one outer round of the working-set solver, fused
// (gpuksvm.solvers.smo.working_set._round_state; NumPy twin: gpuksvm.solvers.smo.working_set.round_keys_host).
//
// For problem p (rows i < n1 of the padded (P, n1) state y, C, alpha, F):
//   up_i  = (y_i > 0 and a_i < C_i) or (y_i < 0 and a_i > 0)        (I_up,  FCL05 eq. 6)
//   low_i = (y_i < 0 and a_i < C_i) or (y_i > 0 and a_i > 0)        (I_low)
//   su_i = -F_i if up_i else +inf,   sl_i = F_i if low_i else +inf   (sort keys: most violating first)
// the rows of the kept half of the working set (keep[p, :]) then get +inf keys (they are
// no candidates), and
//   stats[p] = (m - M, ½ Σ_i a_i (−y_i F_i − 1) [double], #finite su, #finite sl)
// with m = max_{up} F, M = min_{low} F (m - M in T, as the twin).
// smo_round_keys: grid (n_chunks, P), block SMO_RK_BLOCK; block (c, p) writes the keys of
// rows [c·chunk, (c+1)·chunk) and its partial (m, M, obj, #su, #sl) to part[p, c, :].
// smo_round_finish: grid (P,), block SMO_RK_BLOCK; clears the kept rows' keys and reduces
// the partials (two launches: the kept rows are cleared after every key is written).
#define SMO_RK_BLOCK 256

template <typename T>
__device__ __forceinline__ bool smo_finite(T v) { return v > smo_neg_inf<T>() && v < -smo_neg_inf<T>(); }

// Tree reduction of the block's five partials in s[5][SMO_RK_BLOCK] to slot 0:
// max, min, sum, sum, sum (the callers stored theirs in slot tid and synchronized).
__device__ __forceinline__ void smo_rk_reduce(double (*s)[SMO_RK_BLOCK], int tid) {
    for (int w = SMO_RK_BLOCK / 2; w > 0; w >>= 1) {
        if (tid < w) {
            if (s[0][tid + w] > s[0][tid]) s[0][tid] = s[0][tid + w];
            if (s[1][tid + w] < s[1][tid]) s[1][tid] = s[1][tid + w];
            s[2][tid] += s[2][tid + w];
            s[3][tid] += s[3][tid + w];
            s[4][tid] += s[4][tid + w];
        }
        __syncthreads();
    }
}

template <typename T>
__device__ void smo_round_keys(const T* __restrict__ y, const T* __restrict__ C, const T* __restrict__ alpha,
                               const T* __restrict__ F, long long n1, long long chunk, T* __restrict__ su,
                               T* __restrict__ sl, double* __restrict__ part) {
    __shared__ double s[5][SMO_RK_BLOCK];
    const int tid = threadIdx.x;
    const long long p = blockIdx.y;
    const long long i0 = (long long)blockIdx.x * chunk;
    long long i1 = i0 + chunk;
    if (i1 > n1) i1 = n1;
    const T INF = -smo_neg_inf<T>();
    double m = (double)smo_neg_inf<T>(), M = (double)INF, obj = 0.0, cu = 0.0, cl = 0.0;
    for (long long i = i0 + tid; i < i1; i += SMO_RK_BLOCK) {
        const long long o = p * n1 + i;
        const T yi = y[o], ai = alpha[o], ci = C[o], fi = F[o];
        const bool up = (yi > T(0) && ai < ci) || (yi < T(0) && ai > T(0));
        const bool low = (yi < T(0) && ai < ci) || (yi > T(0) && ai > T(0));
        if (up && (double)fi > m) m = (double)fi;
        if (low && (double)fi < M) M = (double)fi;
        obj += (double)ai * (-(double)yi * (double)fi - 1.0);
        const T ku = up ? -fi : INF, kl = low ? fi : INF;
        su[o] = ku;
        sl[o] = kl;
        cu += smo_finite<T>(ku) ? 1.0 : 0.0;
        cl += smo_finite<T>(kl) ? 1.0 : 0.0;
    }
    s[0][tid] = m; s[1][tid] = M; s[2][tid] = obj; s[3][tid] = cu; s[4][tid] = cl;
    __syncthreads();
    smo_rk_reduce(s, tid);
    if (tid == 0) {
        double* out = part + (p * gridDim.x + blockIdx.x) * 5;
        for (int q = 0; q < 5; ++q) out[q] = s[q][0];
    }
}

template <typename T>
__device__ void smo_round_finish(long long n1, int n_chunks, const long long* __restrict__ keep, int n_keep,
                                 T* __restrict__ su, T* __restrict__ sl, const double* __restrict__ part,
                                 double* __restrict__ stats) {
    __shared__ double s[5][SMO_RK_BLOCK];
    const int tid = threadIdx.x;
    const long long p = blockIdx.x;
    const T INF = -smo_neg_inf<T>();
    double m = (double)smo_neg_inf<T>(), M = (double)INF, obj = 0.0, cu = 0.0, cl = 0.0;
    // kept rows are distinct (or the dummy row n1 - 1, whose keys are +inf): one thread each
    for (int j = tid; j < n_keep; j += SMO_RK_BLOCK) {
        const long long o = p * n1 + keep[p * n_keep + j];
        if (smo_finite<T>(su[o])) { su[o] = INF; cu -= 1.0; }
        if (smo_finite<T>(sl[o])) { sl[o] = INF; cl -= 1.0; }
    }
    for (int c = tid; c < n_chunks; c += SMO_RK_BLOCK) {
        const double* q = part + (p * n_chunks + c) * 5;
        if (q[0] > m) m = q[0];
        if (q[1] < M) M = q[1];
        obj += q[2]; cu += q[3]; cl += q[4];
    }
    s[0][tid] = m; s[1][tid] = M; s[2][tid] = obj; s[3][tid] = cu; s[4][tid] = cl;
    __syncthreads();
    smo_rk_reduce(s, tid);
    if (tid == 0) {
        double* out = stats + p * 4;
        out[0] = (double)((T)s[0][0] - (T)s[1][0]);
        out[1] = 0.5 * s[2][0];
        out[2] = s[3][0];
        out[3] = s[4][0];
    }
}

extern "C" __global__ void __launch_bounds__(SMO_RK_BLOCK)
smo_round_keys_f32(const float* y, const float* C, const float* alpha, const float* F, long long n1,
                   long long chunk, float* su, float* sl, double* part) {
    smo_round_keys<float>(y, C, alpha, F, n1, chunk, su, sl, part);
}

extern "C" __global__ void __launch_bounds__(SMO_RK_BLOCK)
smo_round_keys_f64(const double* y, const double* C, const double* alpha, const double* F, long long n1,
                   long long chunk, double* su, double* sl, double* part) {
    smo_round_keys<double>(y, C, alpha, F, n1, chunk, su, sl, part);
}

extern "C" __global__ void __launch_bounds__(SMO_RK_BLOCK)
smo_round_finish_f32(long long n1, int n_chunks, const long long* keep, int n_keep, float* su, float* sl,
                     const double* part, double* stats) {
    smo_round_finish<float>(n1, n_chunks, keep, n_keep, su, sl, part, stats);
}

extern "C" __global__ void __launch_bounds__(SMO_RK_BLOCK)
smo_round_finish_f64(long long n1, int n_chunks, const long long* keep, int n_keep, double* su, double* sl,
                     const double* part, double* stats) {
    smo_round_finish<double>(n1, n_chunks, keep, n_keep, su, sl, part, stats);
}
