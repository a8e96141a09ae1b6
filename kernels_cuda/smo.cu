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
// NumPy twin gpuksvm.solvers.smo.solve_subproblems_host follows the same path.
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

// Block-wide (value, index) arg-max; ties -> smaller index.  All threads get the result.
template <typename T>
__device__ __forceinline__ void smo_block_argmax(T v, int idx, T* sval, int* sidx, T& out_v, int& out_i) {
    const int tid = threadIdx.x;
    sval[tid] = v;
    sidx[tid] = idx;
    __syncthreads();
    for (int s = blockDim.x >> 1; s > 0; s >>= 1) {
        if (tid < s) {
            T a = sval[tid], b = sval[tid + s];
            int ia = sidx[tid], ib = sidx[tid + s];
            if (b > a || (b == a && ib < ia)) {
                sval[tid] = b;
                sidx[tid] = ib;
            }
        }
        __syncthreads();
    }
    out_v = sval[0];
    out_i = sidx[0];
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
