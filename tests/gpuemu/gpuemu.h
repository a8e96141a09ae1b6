// gpuemu.h -- CUDA kernels of gpuksvm executed on the CPU, for tests without a GPU.
//
// Execution model
//   * Blocks run one after another.  So `__shared__` storage is ordinary static
//     storage (build.py rewrites the declarations) and dynamic shared memory is
//     one buffer, reused by every block.
//   * Inside a block every CUDA thread is a fiber with its own stack (started with
//     makecontext, then switched with _setjmp/_longjmp: no signal-mask syscall per switch).
//     A fiber runs until it reaches __syncthreads() or returns; the scheduler
//     resumes the fibers waiting at a barrier only when no fiber of the block can
//     run any more.  Between two barriers the fibers run in forward, reverse or a
//     seeded random order (warp by warp, see below): a result that depends on that
//     order is an intra-block race.
//
// Diagnostics (returned as text by gpuemu_launch; the Python launcher raises them)
//   * a barrier reached by some threads of a block while others exited, or
//     threads waiting at different __syncthreads() sites (undefined on a GPU);
//   * an invalid launch configuration (block > 1024 threads, a zero or too large
//     grid dimension, more than 48 KiB of dynamic shared memory);
//   * faults: SIGSEGV/SIGBUS (the launcher puts a PROT_NONE page after every
//     array argument, dynamic shared memory ends at one, every fiber stack starts
//     at one), SIGILL (an UndefinedBehaviorSanitizer check built in trap mode:
//     out-of-bounds index of a fixed-size array, signed overflow, ...), SIGFPE.
//     The fault is caught, the launch abandoned, and the report gives the faulting
//     address and code offset (the launcher maps them to an argument and a line).
//   * dynamic and static shared memory are filled with 0xFF bytes (NaN, -1) at the
//     start of every block: CUDA does not initialize shared memory.
//
//   * multiply-adds are fused as NVRTC fuses them by default (-fmad=true) when the
//     CPU has FMA (build.py: g++ -ffp-contract=fast -mfma; GPUEMU_FMA=off builds
//     without); g++ need not fuse the same pairs as NVRTC.
//
//   * warp primitives (__shfl_*_sync, __ballot_sync, __syncwarp): the lanes of a warp (32
//     consecutive linear thread indices) meet at the primitive in lock step -- a fiber
//     waits there until every lane of its warp that has not exited waits at the same one
//     (lanes at different sites, or some at __syncthreads, are reported); a shuffle that
//     reads an exited or missing lane, or a caller outside its mask, is reported.  Between
//     two barriers the warps run one after another (in the thread order), each up to its
//     next __syncthreads: a warp runs ahead of the others as far as it may.
//
// Not modelled: lock-step execution between warp primitives, partial masks (the
// lanes named are not checked against those that arrive), the memory model and inter-block concurrency (blocks are sequential), atomics
// contention, texture/constant memory, the device math library's accuracy.
#pragma once
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <xmmintrin.h>

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int a = 1, unsigned int b = 1, unsigned int c = 1) : x(a), y(b), z(c) {}
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

// CUDA's vector types that the sources load through, aligned as on the device
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };

namespace gpuemu {

enum Order { kForward = 0, kReverse = 1, kRandom = 2 };
enum FiberState { kReady = 0, kAtBarrier = 1, kDone = 2, kAtWarp = 3 };
constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kMaxDynamicShared = 48 * 1024;

struct Fiber {
    ucontext_t start;        // entry context (used once per block)
    jmp_buf jb;              // where the fiber resumes after a barrier
    uint3 tid;
    int state = kReady;
    int barrier_line = 0;
    char* stack = nullptr;   // kStackBytes usable, a PROT_NONE page below
};

struct State {
    dim3 grid, block;
    uint3 bidx;
    Fiber* cur = nullptr;
    jmp_buf sched;           // the scheduler, resumed when a fiber waits or ends
    unsigned char* smem_guard = nullptr;   // the PROT_NONE page after dynamic shared memory
    void (*body)(void**) = nullptr;
    void** args = nullptr;
    unsigned char* dyn_smem = nullptr;
    long long block_epoch = 0;
    int order = kForward;
    unsigned seed = 1;
    std::string report;
    int n_diag = 0;
    unsigned long long xbuf[1024];   // a warp primitive's exchange slots, one per thread (kMaxThreads)
};

inline State& S() { static State s; return s; }

inline void diag(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void diag(const char* fmt, ...) {
    State& s = S();
    if (s.n_diag++ >= 10) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s.report += buf;
    s.report += "\n";
}

inline long page_size() { static long p = sysconf(_SC_PAGESIZE); return p; }

// n usable bytes that end exactly at a PROT_NONE page (overruns fault at once)
inline unsigned char* guarded_tail(size_t n, void** base_out, size_t* total_out) {
    const size_t pg = page_size();
    const size_t total = ((n + pg - 1) / pg + 1) * pg;
    void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) { perror("gpuemu mmap"); abort(); }
    mprotect(static_cast<char*>(base) + total - pg, pg, PROT_NONE);
    *base_out = base;
    *total_out = total;
    return static_cast<unsigned char*>(base) + (total - pg) - n;
}

// ------------------------------------------------------------------ barriers / shared memory
// The current fiber waits (state kAtBarrier or kAtWarp) at the barrier of source line `line`.
inline void wait_at(int state, int line) {
    State& s = S();
    Fiber* f = s.cur;
    f->state = state;
    f->barrier_line = line;
    if (!_setjmp(f->jb)) _longjmp(s.sched, 1);
}

inline void syncthreads(int line) { wait_at(kAtBarrier, line); }

// A warp's lock step at one warp primitive: the fiber waits until every lane of its warp that has
// not exited waits there too (run_block releases them together).
inline void warpsync(int line) { wait_at(kAtWarp, line); }

// static __shared__ poisoning: the first thread of a block to reach the declaration fills it
inline void shared_decl(void* p, size_t n) {
    struct Decl { void* p; long long epoch; };
    static std::vector<Decl> decls;
    const long long epoch = S().block_epoch;
    for (auto& d : decls) {
        if (d.p == p) {
            if (d.epoch != epoch) { memset(p, 0xFF, n); d.epoch = epoch; }
            return;
        }
    }
    memset(p, 0xFF, n);
    decls.push_back({p, epoch});
}

// ------------------------------------------------------------------ fault capture
struct Fault {
    sigjmp_buf env;
    volatile sig_atomic_t armed = 0;
    volatile int sig = 0;
    void* volatile addr = nullptr;
    volatile uintptr_t pc = 0;
};
inline Fault& F() { static Fault f; return f; }

inline void on_fault(int sig, siginfo_t* si, void* uctx) {
    Fault& f = F();
    if (!f.armed) { signal(sig, SIG_DFL); raise(sig); return; }
    f.armed = 0;
    f.sig = sig;
    f.addr = si->si_addr;
#if defined(__x86_64__)
    f.pc = static_cast<uintptr_t>(static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
    f.pc = static_cast<uintptr_t>(static_cast<ucontext_t*>(uctx)->uc_mcontext.pc);
#endif
    siglongjmp(f.env, 1);
}

struct FaultScope {   // handlers + alternate signal stack for the duration of one launch
    static constexpr int kSigs[4] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    struct sigaction old[4];
    stack_t old_stack;
    std::vector<char> alt;
    FaultScope() : alt(1 << 16) {
        stack_t st{};
        st.ss_sp = alt.data();
        st.ss_size = alt.size();
        sigaltstack(&st, &old_stack);
        struct sigaction sa{};
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        for (int i = 0; i < 4; ++i) sigaction(kSigs[i], &sa, &old[i]);
    }
    ~FaultScope() {
        for (int i = 0; i < 4; ++i) sigaction(kSigs[i], &old[i], nullptr);
        sigaltstack(&old_stack, nullptr);
    }
};

// ------------------------------------------------------------------ the scheduler
inline void fiber_entry() {
    State& s = S();
    s.body(s.args);
    s.cur->state = kDone;
    _longjmp(s.sched, 1);   // never returns: the stack is reused by the next block
}

inline std::vector<Fiber>& fibers(unsigned n) {
    static std::vector<Fiber> fs;
    if (fs.size() < n) fs.resize(n);
    for (unsigned t = 0; t < n; ++t) {
        if (!fs[t].stack) {
            void* base; size_t total;
            // the guard page sits BELOW the stack (stacks grow down): an overflow faults
            const size_t pg = page_size();
            base = mmap(nullptr, kStackBytes + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (base == MAP_FAILED) { perror("gpuemu mmap"); abort(); }
            mprotect(base, pg, PROT_NONE);
            (void)total;
            fs[t].stack = static_cast<char*>(base) + pg;
        }
    }
    return fs;
}

inline bool valid_config(dim3 grid, dim3 block, size_t smem) {
    const unsigned long long nt = 1ull * block.x * block.y * block.z;
    bool ok = true;
    if (nt == 0 || nt > kMaxThreads || block.x > 1024 || block.y > 1024 || block.z > 64) {
        diag("invalid launch: block (%u,%u,%u) (at most 1024 threads, z <= 64)", block.x, block.y, block.z);
        ok = false;
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        diag("invalid launch: grid (%u,%u,%u) (x < 2^31, y and z <= 65535, none 0)", grid.x, grid.y, grid.z);
        ok = false;
    }
    if (smem > kMaxDynamicShared) {
        diag("invalid launch: %zu bytes of dynamic shared memory (> 48 KiB needs cudaFuncSetAttribute)", smem);
        ok = false;
    }
    return ok;
}

inline void run_block(unsigned nt, std::vector<Fiber>& fs, std::mt19937& rng, std::vector<unsigned>& order) {
    State& s = S();
    for (unsigned t = 0; t < nt; ++t) {
        Fiber& f = fs[t];
        f.tid = {t % s.block.x, (t / s.block.x) % s.block.y, t / (s.block.x * s.block.y)};
        f.state = kReady;
        f.barrier_line = -1;     // not started
        getcontext(&f.start);
        f.start.uc_stack.ss_sp = f.stack;
        f.start.uc_stack.ss_size = kStackBytes;
        f.start.uc_link = nullptr;
        makecontext(&f.start, fiber_entry, 0);
    }
    ucontext_t here;
    for (unsigned live = nt; live;) {
        for (unsigned t = 0; t < nt; ++t) order[t] = t;
        if (s.order == kReverse) std::reverse(order.begin(), order.end());
        else if (s.order == kRandom) std::shuffle(order.begin(), order.end(), rng);
        // Warp by warp, in the order of their first thread in `order`: a warp's ready lanes run
        // (in that order) until each waits at a barrier, at a warp primitive, or has exited; when
        // all its live lanes wait at one warp primitive they go on together, so the warp runs
        // ahead of the others up to its next __syncthreads (a race between warps that only a
        // barrier prevents shows).
        std::vector<char> seen((nt + 31) / 32, 0);
        for (unsigned first : order) {
            const unsigned w0 = first & ~31u, w1 = std::min(nt, w0 + 32);
            if (seen[w0 / 32]) continue;
            seen[w0 / 32] = 1;
            for (;;) {
                for (unsigned t : order) {
                    if (t < w0 || t >= w1) continue;
                    Fiber& f = fs[t];
                    if (f.state != kReady) continue;
                    s.cur = &f;
                    if (!_setjmp(s.sched)) {
                        if (f.barrier_line < 0) swapcontext(&here, &f.start);   // first run: enter on its stack
                        else _longjmp(f.jb, 1);
                    }
                }
                unsigned at_warp = 0, at_block = 0;
                int wline = -1;
                bool wmixed = false;
                for (unsigned t = w0; t < w1; ++t) {
                    if (fs[t].state == kAtWarp) {
                        if (wline >= 0 && wline != fs[t].barrier_line) wmixed = true;
                        wline = fs[t].barrier_line;
                        ++at_warp;
                    } else if (fs[t].state == kAtBarrier) {
                        ++at_block;
                    }
                }
                if (!at_warp) break;
                if (at_block || wmixed) {
                    diag("warp %u of block (%u,%u,%u): lanes wait at different sites (a warp primitive at line %d%s)",
                         w0 / 32, s.bidx.x, s.bidx.y, s.bidx.z, wline, at_block ? " and __syncthreads" : "");
                    return;
                }
                for (unsigned t = w0; t < w1; ++t)
                    if (fs[t].state == kAtWarp) fs[t].state = kReady;
            }
        }
        unsigned waiting = 0, done = 0;
        int line = -1;
        bool mixed = false;
        for (unsigned t = 0; t < nt; ++t) {
            if (fs[t].state == kAtBarrier) {
                if (line >= 0 && line != fs[t].barrier_line) mixed = true;
                line = fs[t].barrier_line;
                ++waiting;
            } else if (fs[t].state == kDone) {
                ++done;
            }
        }
        if (waiting && done)
            diag("divergent __syncthreads (line %d) in block (%u,%u,%u): %u threads wait, %u exited",
                 line, s.bidx.x, s.bidx.y, s.bidx.z, waiting, done);
        if (mixed)
            diag("threads of block (%u,%u,%u) wait at different __syncthreads sites", s.bidx.x, s.bidx.y, s.bidx.z);
        if (waiting && (done || mixed)) return;   // undefined behaviour: abandon the block
        live = waiting;
        for (unsigned t = 0; t < nt; ++t)
            if (fs[t].state == kAtBarrier) fs[t].state = kReady;
    }
}

// Where a faulting address lies: 1 the guard page after dynamic shared memory, 2 the guard page
// below a fiber stack (stack overflow), 0 elsewhere.
inline int classify(const void* a) {
    const unsigned char* p = static_cast<const unsigned char*>(a);
    const size_t pg = page_size();
    State& s = S();
    if (s.smem_guard && p >= s.smem_guard && p < s.smem_guard + pg) return 1;
    for (const Fiber& f : fibers(0))
        if (f.stack && p >= reinterpret_cast<unsigned char*>(f.stack) - pg && p < reinterpret_cast<unsigned char*>(f.stack)) return 2;
    return 0;
}

// Returns 0 (ran), 1 (diagnostics in the report), 2 (fault: see fault_info).
inline int launch(void (*body)(void**), void** args, dim3 grid, dim3 block, size_t smem, int order,
                  unsigned seed, int ftz) {
    State& s = S();
    s.report.clear();
    s.n_diag = 0;
    if (!valid_config(grid, block, smem)) return 1;
    s.grid = grid;
    s.block = block;
    s.body = body;
    s.args = args;
    s.order = order;
    static void* smem_base = nullptr;
    static size_t smem_total = 0;
    if (smem_base) munmap(smem_base, smem_total);
    s.dyn_smem = guarded_tail(smem, &smem_base, &smem_total);
    s.smem_guard = s.dyn_smem + smem;
    const unsigned nt = block.x * block.y * block.z;
    std::vector<Fiber>& fs = fibers(nt);
    std::vector<unsigned> perm(nt);
    std::mt19937 rng(seed);
    const unsigned csr = _mm_getcsr();
    if (ftz) _mm_setcsr(csr | 0x8040);   // FTZ + DAZ, as CuPy's -ftz=true for float32
    Fault& f = F();
    FaultScope scope;
    int rc = 0;
    if (sigsetjmp(f.env, 1) == 0) {
        f.armed = 1;
        for (unsigned bz = 0; bz < grid.z && s.report.empty(); ++bz)
            for (unsigned by = 0; by < grid.y && s.report.empty(); ++by)
                for (unsigned bx = 0; bx < grid.x && s.report.empty(); ++bx) {
                    s.bidx = {bx, by, bz};
                    ++s.block_epoch;
                    memset(s.dyn_smem, 0xFF, smem);
                    run_block(nt, fs, rng, perm);
                }
        f.armed = 0;
        rc = s.report.empty() ? 0 : 1;
    } else {
        rc = 2;   // fiber contexts are rebuilt by the next launch
    }
    _mm_setcsr(csr);
    return rc;
}

}  // namespace gpuemu

#define threadIdx (gpuemu::S().cur->tid)
#define blockIdx (gpuemu::S().bidx)
#define blockDim (gpuemu::S().block)
#define gridDim (gpuemu::S().grid)
#define __syncthreads() gpuemu::syncthreads(__LINE__)
#define __threadfence() __sync_synchronize()
#define __threadfence_block() __sync_synchronize()

// atomics: the fibers of a launch share one OS thread, so a plain read-modify-write is atomic
template <typename T> inline T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> inline T atomicMin(T* p, T v) { T o = *p; *p = v < o ? v : o; return o; }
template <typename T> inline T atomicMax(T* p, T v) { T o = *p; *p = v > o ? v : o; return o; }
template <typename T> inline T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <typename T> inline T atomicCAS(T* p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }

// warp primitives: the lanes of a warp (32 consecutive linear thread indices) meet in lock step
// (warpsync), exchange through S().xbuf, and meet again before the slots are reused
namespace gpuemu {
inline unsigned linear_tid() {
    const State& s = S();
    return s.cur->tid.x + s.block.x * (s.cur->tid.y + s.block.y * s.cur->tid.z);
}

inline void check_mask(unsigned mask, const char* name, int line) {
    if (!(mask >> (linear_tid() & 31) & 1u))
        diag("%s at line %d: the calling lane %u is not in its mask 0x%08x", name, line, linear_tid() & 31, mask);
}

// v of lane `src` (0..31) of the caller's warp
template <typename T> inline T shfl_lane(T v, unsigned src, int line) {
    static_assert(sizeof(T) <= sizeof(unsigned long long), "a shuffled value is at most 8 bytes");
    State& s = S();
    const unsigned t = linear_tid(), from = (t & ~31u) + src;
    const unsigned nt = s.block.x * s.block.y * s.block.z;
    memcpy(&s.xbuf[t], &v, sizeof(T));
    warpsync(line);
    T out = v;
    if (from >= nt || fibers(0)[from].state == kDone)
        diag("warp shuffle at line %d: lane %u reads lane %u, which %s", line, t & 31, src,
             from >= nt ? "does not exist" : "has exited");
    else
        memcpy(&out, &s.xbuf[from], sizeof(T));
    warpsync(line);
    return out;
}

template <typename T> inline T shfl_sync(int line, unsigned mask, T v, int src, int width = 32) {
    check_mask(mask, "__shfl_sync", line);
    const unsigned lane = linear_tid() & 31, base = lane & ~unsigned(width - 1);
    return shfl_lane(v, base + (unsigned(src) & unsigned(width - 1)), line);
}
template <typename T> inline T shfl_down_sync(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    check_mask(mask, "__shfl_down_sync", line);
    const unsigned lane = linear_tid() & 31, base = lane & ~unsigned(width - 1);
    return shfl_lane(v, lane + delta < base + unsigned(width) ? lane + delta : lane, line);
}
template <typename T> inline T shfl_up_sync(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    check_mask(mask, "__shfl_up_sync", line);
    const unsigned lane = linear_tid() & 31, base = lane & ~unsigned(width - 1);
    return shfl_lane(v, lane >= base + delta ? lane - delta : lane, line);
}
template <typename T> inline T shfl_xor_sync(int line, unsigned mask, T v, int lane_mask, int width = 32) {
    check_mask(mask, "__shfl_xor_sync", line);
    const unsigned lane = linear_tid() & 31, base = lane & ~unsigned(width - 1), src = lane ^ unsigned(lane_mask);
    return shfl_lane(v, src < base + unsigned(width) ? src : lane, line);
}
inline unsigned ballot_sync(int line, unsigned mask, int pred) {
    check_mask(mask, "__ballot_sync", line);
    State& s = S();
    const unsigned t = linear_tid(), w0 = t & ~31u, nt = s.block.x * s.block.y * s.block.z;
    s.xbuf[t] = pred != 0;
    warpsync(line);
    unsigned bits = 0;
    for (unsigned l = 0; l < 32 && w0 + l < nt; ++l)
        if ((mask >> l & 1u) && fibers(0)[w0 + l].state != kDone && s.xbuf[w0 + l]) bits |= 1u << l;
    warpsync(line);
    return bits;
}
inline void syncwarp(int line, unsigned mask) {
    check_mask(mask, "__syncwarp", line);
    warpsync(line);
}
}  // namespace gpuemu
#define __shfl_sync(...) gpuemu::shfl_sync(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) gpuemu::shfl_down_sync(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) gpuemu::shfl_up_sync(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) gpuemu::shfl_xor_sync(__LINE__, __VA_ARGS__)
#define __ballot_sync(mask, pred) gpuemu::ballot_sync(__LINE__, (mask), (pred))
#define __syncwarp(...) gpuemu::syncwarp(__LINE__, (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 0xffffffffu)

// device math: the C library's float/double overloads
using std::exp; using std::fmax; using std::fmin; using std::pow; using std::sqrt; using std::tanh;
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// bit casts
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline float __int_as_float(unsigned int v) { float f; memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
