// emu_block.cc - cooperating threads of an emulated thread block: the
// barriers (__syncthreads, __syncwarp, the shuffles' meeting point) of
// emu_block.h, with the block's threads as fibers on the stream's worker.
//
// Fast path: emu_block_run calls the threads one after another on the
// worker's own stack. When thread k first waits at a barrier, the worker's
// stack becomes thread k's "main" context, which also schedules: threads
// k+1.. start as fibers on pooled stacks, each running until it waits or
// returns, then switching back to main. Threads before k returned without
// a barrier (they took an early exit), so they no longer count, as on
// hardware. Barriers count arrivals per generation: one waiting for the
// block is released when arrivals equal the threads not yet returned; one
// for a warp likewise over the warp's lanes.
// Relies on: glibc ucontext, Linux mmap; the sanitizer fiber interfaces
// (ASan: __sanitizer_start/finish_switch_fiber, TSan: __tsan_*_fiber).
// Under ASan a process whose kernels meet at a barrier prints once "ASan
// doesn't fully support makecontext/swapcontext functions and may produce
// false positives in some cases": the switch annotations below are what it
// needs to know the live stack (the gpu suite runs clean under ASan and TSan).
#include "tests/gpu_emu/emu_block.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif

#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kWarp = 32;
// A fiber's stack: a kernel body and the math library it calls; the
// sanitizers' frames are larger, so generous (reserved, touched on use).
constexpr size_t kStack = size_t{256} << 10;

enum class St : unsigned char { unstarted, running, waiting, done };
enum class Wait : unsigned char { block, warp };

struct Thread {
    St st = St::unstarted;
    Wait kind = Wait::block;
    uint64_t gen = 0; // the generation it waits to see pass
};

struct Fiber {
    ucontext_t uc;
    char *stack = nullptr; // usable part, above a guard page
    void *tsan = nullptr;
    void *fake = nullptr; // ASan's fake stack while switched out
};

// The block being run on this worker thread.
struct Block {
    EmuBlockFns fns{};
    unsigned n = 0;
    unsigned cur = 0;     // the thread running now
    unsigned main = 0;    // the thread on the worker's stack
    bool fibered = false; // a barrier was reached: fibers in use
    unsigned live = 0;    // threads not returned
    unsigned arrived = 0; // at the current block barrier
    uint64_t gen = 0;     // block barrier generation
    unsigned warp_live[kMaxThreads / kWarp];
    unsigned warp_arrived[kMaxThreads / kWarp];
    uint64_t warp_gen[kMaxThreads / kWarp];
    Thread th[kMaxThreads];
    ucontext_t main_uc;
    void *main_tsan = nullptr;
    void *main_fake = nullptr;
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    uint64_t slots[kMaxThreads];
};

thread_local Block *cur_block = nullptr;

// A worker's fiber stacks, made on first use and kept for its later blocks;
// released when the worker (the stream) ends.
struct Pool {
    std::vector<Fiber> f;
    ~Pool() {
        long page = sysconf(_SC_PAGESIZE);
        for (Fiber &x : f) {
            if (!x.stack) continue;
            munmap(x.stack - page, kStack + (size_t)page);
#ifdef EMU_TSAN
            __tsan_destroy_fiber(x.tsan);
#endif
        }
    }
};
thread_local Pool pool;

[[noreturn]] void die(const char *what) {
    fprintf(stderr, "gpu emulator: %s\n", what);
    abort();
}

Fiber &fiber(unsigned t) {
    if (pool.f.empty()) pool.f.resize(kMaxThreads);
    Fiber &f = pool.f[t];
    if (!f.stack) {
        long page = sysconf(_SC_PAGESIZE);
        void *p = mmap(nullptr, kStack + (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) die("no memory for a block thread's stack");
        mprotect(p, (size_t)page, PROT_NONE); // guard: an overflow faults
        f.stack = (char *)p + page;
#ifdef EMU_TSAN
        f.tsan = __tsan_create_fiber(0);
#endif
    }
    return f;
}

// ---- switching, with the sanitizers told (ASan: which stack is live;
// TSan: which fiber's happens-before state applies)

void switch_to_fiber(Block &b, unsigned t) {
    Fiber &f = fiber(t);
#ifdef EMU_TSAN
    __tsan_switch_to_fiber(f.tsan, 0);
#endif
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&b.main_fake, f.stack, kStack);
#endif
    swapcontext(&b.main_uc, &f.uc);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(b.main_fake, nullptr, nullptr);
#endif
    b.cur = b.main;
    b.fns.index(b.fns.ctx, b.main);
}

// From fiber t back to main; `exiting`: t never resumes.
void switch_to_main(Block &b, unsigned t, bool exiting) {
    Fiber &f = fiber(t);
#ifdef EMU_TSAN
    __tsan_switch_to_fiber(b.main_tsan, 0);
#endif
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &f.fake, b.main_bottom, b.main_size);
#else
    (void)exiting;
#endif
    swapcontext(&f.uc, &b.main_uc);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f.fake, &b.main_bottom, &b.main_size);
#endif
}

bool released(const Block &b, unsigned t) {
    const Thread &h = b.th[t];
    if (h.st != St::waiting) return h.st != St::done;
    return h.kind == Wait::block ? b.gen > h.gen : b.warp_gen[t / kWarp] > h.gen;
}

// Arrivals equal the threads still running: the barrier opens.
void check_open(Block &b, unsigned warp) {
    if (b.arrived > 0 && b.arrived == b.live) {
        b.arrived = 0;
        b.gen++;
    }
    if (b.warp_arrived[warp] > 0 && b.warp_arrived[warp] == b.warp_live[warp]) {
        b.warp_arrived[warp] = 0;
        b.warp_gen[warp]++;
    }
}

void thread_returned(Block &b, unsigned t) {
    b.th[t].st = St::done;
    b.live--;
    b.warp_live[t / kWarp]--;
    check_open(b, t / kWarp);
}

void fiber_entry();

// Starts thread t as a fiber on its pooled stack and runs it until it
// waits or returns. Not inlined: getcontext returns twice, and the
// scheduler's locals must not live across it.
__attribute__((noinline)) void start_fiber(Block &b, unsigned t) {
    Fiber &f = fiber(t);
#ifdef EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(f.stack, kStack);
#endif
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack;
    f.uc.uc_stack.ss_size = kStack;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, fiber_entry, 0);
    b.th[t].st = St::running;
    b.cur = t;
    switch_to_fiber(b, t);
}

// From main: runs fibers (starting new ones, resuming released ones) until
// main's own wait is over (main_waits) or every other thread has returned.
void schedule(Block &b, bool main_waits) {
    for (;;) {
        if (main_waits && released(b, b.main)) break;
        bool ran = false;
        for (unsigned t = b.main + 1; t < b.n; t++) {
            Thread &h = b.th[t];
            if (h.st == St::unstarted) {
                start_fiber(b, t);
                ran = true;
            } else if (h.st == St::waiting && released(b, t)) {
                h.st = St::running;
                b.cur = t;
                b.fns.index(b.fns.ctx, t);
                switch_to_fiber(b, t);
                ran = true;
            }
            if (main_waits && released(b, b.main)) return;
        }
        if (main_waits ? released(b, b.main) : b.live == 0) break;
        if (!ran) {
            if (!main_waits && b.live == 0) break;
            die("a barrier that can never open: some threads of a block wait at __syncthreads or "
                "a warp exchange that others never reach (barrier divergence)");
        }
    }
}

void fiber_entry() {
    Block &b = *cur_block;
    unsigned t = b.cur;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &b.main_bottom, &b.main_size);
#endif
    b.fns.run(b.fns.ctx, t);
    thread_returned(b, t);
    switch_to_main(b, t, true);
    die("a finished block thread resumed");
}

// Thread cur waits at a barrier of the given kind until it opens.
void wait_at(Wait kind) {
    Block *bp = cur_block;
    if (!bp) die("__syncthreads or a warp exchange outside a kernel");
    Block &b = *bp;
    unsigned t = b.cur;
    if (!b.fibered) {
        // The first barrier of this block: from now on the worker's stack is
        // thread t's, and the threads after it are fibers.
        b.fibered = true;
        b.main = t;
        for (unsigned u = t + 1; u < b.n; u++)
            b.th[u].st = St::unstarted;
#ifdef EMU_TSAN
        b.main_tsan = __tsan_get_current_fiber();
#endif
    }
    Thread &h = b.th[t];
    h.st = St::waiting;
    h.kind = kind;
    unsigned w = t / kWarp;
    if (kind == Wait::block) {
        h.gen = b.gen;
        b.arrived++;
    } else {
        h.gen = b.warp_gen[w];
        b.warp_arrived[w]++;
    }
    check_open(b, w);
    if (t == b.main) {
        schedule(b, true);
    } else if (!released(b, t)) {
        switch_to_main(b, t, false);
    }
    h.st = St::running;
    b.cur = t;
    b.fns.index(b.fns.ctx, t);
}

} // namespace

// The worker's block state, made on its first block and reused (a launch
// runs up to 65536 blocks: no allocation per block).
thread_local std::unique_ptr<Block> worker_block;

void emu_block_run(const EmuBlockFns &fns, unsigned nthreads) {
    if (nthreads > kMaxThreads) die("a block of more than 1024 threads");
    if (cur_block) die("a block run inside a block");
    if (!worker_block) worker_block = std::make_unique<Block>();
    Block *b = worker_block.get();
    b->fns = fns;
    b->n = nthreads;
    b->live = nthreads;
    b->cur = b->main = 0;
    b->fibered = false;
    b->arrived = 0;
    b->gen = 0;
    for (unsigned w = 0; w * kWarp < nthreads; w++) {
        unsigned lo = w * kWarp;
        b->warp_live[w] = nthreads - lo < kWarp ? nthreads - lo : kWarp;
        b->warp_arrived[w] = 0;
        b->warp_gen[w] = 0;
    }
    cur_block = b;
    for (unsigned t = 0; t < nthreads && !b->fibered; t++) {
        b->cur = t;
        b->th[t].st = St::running;
        fns.run(fns.ctx, t);
        thread_returned(*b, t);
    }
    if (b->fibered) schedule(*b, false);  // main returned: the others finish
    cur_block = nullptr;
}

void emu_block_barrier() {
    wait_at(Wait::block);
}

void emu_warp_barrier() {
    wait_at(Wait::warp);
}

uint64_t *emu_block_slots() {
    if (!cur_block) die("a warp exchange outside a kernel");
    return cur_block->slots;
}

unsigned emu_block_thread() {
    return cur_block ? cur_block->cur : 0;
}
