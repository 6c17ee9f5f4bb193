// cudart_emu.cc - the CUDA runtime API on the CPU (libmr_emu_cudart), the
// test double the project's CUDA host code and kernels run against in CI.
//
// Implements the calls the project makes (runtime/*.c, collectives/
// nccl_comm.c, models/*.cu) and a few neighbours, with the behaviour the
// CUDA Runtime API documentation gives them; each behaviour cites the
// sentence of the documentation (cuda_runtime_api.h, CUDA 13) it follows.
//   devices     MIRRORED_EMULATED_GPUS (default 2, 0 allowed), filtered by
//               CUDA_VISIBLE_DEVICES as the real runtime does
//   memory      mmap'ed apart from the heap, poisoned (0xFF: NaN floats)
//   streams     one worker thread and FIFO queue each; stream 0 is a
//               per-device legacy stream
//   events      (stream, ticket) pairs: what a record captured; a timing
//               event's record is an operation that reads the host's
//               steady clock when the stream reaches it
//   schedule    MIRRORED_EMU_SCHEDULE=fifo | delay:SEED | late:SEED[:MS]
//   host access MIRRORED_EMU_CHECK_HOST_ACCESS=1 (best effort, see below)
//   counters    per device, what the device was given (emu_counters.h)
//   capture     cudaStreamBeginCapture ... cudaGraphLaunch on one stream:
//               captured operations are kept, not run, and replayed in
//               order by each launch; the calls a capture forbids fail it
// Relies on: the real NVIDIA headers for every type and prototype, C++20
// threads, Linux mmap/mprotect.
#include "tests/gpu_emu/emu.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_emu/emu_counters.h"
#include "tests/gpu_emu/emu_kernel.h"

namespace {

// ---------------------------------------------------------------- config

enum class Sched { fifo, delay, late };

struct Config {
    int physical = 2;          // MIRRORED_EMULATED_GPUS
    std::vector<int> visible;  // visible ordinal -> physical index
    Sched sched = Sched::fifo;
    uint64_t seed = 0;
    // late:SEED[:MS]: an operation on a late stream waits at most this long
    // for a waiter (200 ms unless MS says)
    std::chrono::milliseconds late_hold{200};
    bool check_host = false;
};

// A malformed setting ends the process: a test run under a schedule it did
// not get would pass for the wrong reason.
[[noreturn]] void bad_env(const char *var, const char *val) {
    fprintf(stderr, "gpu emulator: invalid %s=%s\n", var, val);
    abort();
}

Config parse_config() {
    Config c;
    if (const char *v = getenv("MIRRORED_EMULATED_GPUS")) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || n < 0 || n > 64) bad_env("MIRRORED_EMULATED_GPUS", v);
        c.physical = (int)n;
    }
    // CUDA_VISIBLE_DEVICES: a comma-separated list of ordinals; as with the
    // real driver, the list ends at the first invalid entry.
    if (const char *v = getenv("CUDA_VISIBLE_DEVICES")) {
        std::string s(v);
        size_t pos = 0;
        while (pos <= s.size()) {
            size_t comma = s.find(',', pos);
            std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            char *end;
            long i = strtol(item.c_str(), &end, 10);
            if (item.empty() || *end != '\0' || i < 0 || i >= c.physical ||
                std::find(c.visible.begin(), c.visible.end(), (int)i) != c.visible.end())
                break;
            c.visible.push_back((int)i);
            if (comma == std::string::npos) break;
            pos = comma + 1;
        }
    } else {
        for (int i = 0; i < c.physical; i++)
            c.visible.push_back(i);
    }
    if (const char *v = getenv("MIRRORED_EMU_SCHEDULE")) {
        std::string s(v);
        auto seeded = [&](const char *prefix, Sched k) {
            size_t n = strlen(prefix);
            if (s.compare(0, n, prefix) != 0) return false;
            char *end;
            c.seed = strtoull(s.c_str() + n, &end, 10);
            if (k == Sched::late && *end == ':' && end[1] != '\0') {
                long ms = strtol(end + 1, &end, 10);
                if (ms < 1) bad_env("MIRRORED_EMU_SCHEDULE", v);
                c.late_hold = std::chrono::milliseconds(ms);
            }
            if (s.size() == n || *end != '\0') bad_env("MIRRORED_EMU_SCHEDULE", v);
            c.sched = k;
            return true;
        };
        if (s == "fifo" || s.empty())
            c.sched = Sched::fifo;
        else if (!seeded("delay:", Sched::delay) && !seeded("late:", Sched::late))
            bad_env("MIRRORED_EMU_SCHEDULE", v);
    }
    if (const char *v = getenv("MIRRORED_EMU_CHECK_HOST_ACCESS")) c.check_host = strcmp(v, "1") == 0;
    return c;
}

const Config &config() {
    static const Config c = parse_config();
    return c;
}

constexpr size_t kDeviceMemory = size_t{8} << 30;  // reported per device
constexpr unsigned char kPoison = 0xFF;            // every float a NaN

// ---------------------------------------------------------------- errors

thread_local cudaError_t last_error = cudaSuccess;

// Every failing call is also recorded for cudaGetLastError, as in the real
// runtime ("Returns the last error that has been produced by any of the
// runtime calls in the same instance of the CUDA Runtime library in the host
// thread").
cudaError_t fail(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

thread_local int current_device = 0;

// ---------------------------------------------------------------- counters

constexpr int kMaxDevices = 64; // MIRRORED_EMULATED_GPUS's limit
constexpr size_t kCounts = sizeof(mr_emu_counters) / sizeof(uint64_t);
static_assert(sizeof(mr_emu_counters) == kCounts * sizeof(uint64_t), "counters are uint64_t only");
std::atomic<uint64_t> counts[kMaxDevices][kCounts];

// Adds n to the counter at byte offset `at` of mr_emu_counters, on device dev.
void count_at(int dev, size_t at, uint64_t n) {
    if (dev < 0 || dev >= kMaxDevices) return;
    counts[dev][at / sizeof(uint64_t)].fetch_add(n, std::memory_order_relaxed);
}
#define COUNT(dev, field, n) count_at((dev), offsetof(mr_emu_counters, field), (n))

// ---------------------------------------------------------------- memory

struct Alloc {
    size_t size;    // requested: accesses past it are errors
    size_t mapped;  // page-rounded length of the mapping
    int device;     // -1: pinned host memory
};

// Allocations by base address. The map never leaves the process (leaked on
// purpose: detached stream workers may still run while static destructors
// do).
struct Memory {
    std::shared_mutex m;
    std::map<uintptr_t, Alloc> allocs;
    std::vector<size_t> used;  // bytes per visible device
};

Memory &memory() {
    static Memory *mem = [] {
        auto *p = new Memory;
        p->used.assign(config().visible.size(), 0);
        return p;
    }();
    return *mem;
}

// The allocation holding p, or null; the caller holds memory().m.
const std::pair<const uintptr_t, Alloc> *find_alloc(const void *p) {
    auto &a = memory().allocs;
    uintptr_t u = (uintptr_t)p;
    auto it = a.upper_bound(u);
    if (it == a.begin()) return nullptr;
    --it;
    if (u >= it->first + std::max<size_t>(it->second.size, 1)) return nullptr;
    return &*it;
}

// ---- MIRRORED_EMU_CHECK_HOST_ACCESS: device memory is PROT_NONE whenever no
// stream of any device is running an operation. A host read or write of
// device memory at such a time faults, and the handler names the
// allocation. Best effort: an access while some stream works goes unseen.
std::mutex prot_m;  // before memory().m
int active_ops = 0; // under prot_m

void protect_all(int prot) {  // prot_m held
    std::shared_lock lk(memory().m);
    for (auto &[base, a] : memory().allocs)
        if (a.device >= 0) mprotect((void *)base, a.mapped, prot);
}

void op_begin() {
    if (!config().check_host) return;
    std::lock_guard lk(prot_m);
    if (active_ops++ == 0) protect_all(PROT_READ | PROT_WRITE);
}

void op_end() {
    if (!config().check_host) return;
    std::lock_guard lk(prot_m);
    if (--active_ops == 0) protect_all(PROT_NONE);
}

void on_segv(int sig, siginfo_t *si, void *) {
    // Dying: the lookup takes no lock (a racing cudaFree at worst prints
    // the generic message).
    char msg[200];
    int n = snprintf(msg, sizeof msg,
                     "gpu emulator: host access to device memory at %p "
                     "(MIRRORED_EMU_CHECK_HOST_ACCESS=1): the host read or wrote a cudaMalloc "
                     "buffer\n",
                     si->si_addr);
    if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void install_segv_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, nullptr);
    });
}

// ---------------------------------------------------------------- streams

struct Device;
struct Capture;

// One stream: a FIFO of operations run in order by a worker thread.
// Tickets count operations: the n-th enqueued has ticket n; done is the
// number completed (in order), so "ticket t complete" is done >= t.
struct StreamState {
    int device = 0;
    bool legacy = false;    // the device's stream 0
    bool blocking = false;  // cudaStreamDefault: synchronises with stream 0
    bool late = false;      // held until waited for (late:SEED)
    std::mutex m;
    std::condition_variable cv;
    struct Op {
        std::function<void()> fn;
        bool wait;  // a wait for another stream: touches no memory
    };
    std::deque<Op> q;
    uint64_t enq = 0, done = 0;
    uint64_t demand = 0;  // highest ticket someone waits for
    uint64_t observed = 0;  // highest ticket a cudaStreamQuery found complete
    bool closing = false;
    std::mt19937_64 rng;
    std::shared_ptr<Capture> cap; // while capturing (under m)

    void run();
};

// A capture sequence (cudaStreamBeginCapture): the operations it recorded,
// in stream order, and whether a forbidden call has invalidated it.
struct Capture {
    std::vector<StreamState::Op> ops; // under the stream's m
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::thread::id thread; // the thread that began it
    std::atomic<bool> invalid{false};
};

// Every ongoing capture sequence, for the calls that are forbidden "if any
// other thread has a concurrent capture sequence initiated with
// cudaStreamCaptureModeGlobal" (cudaThreadExchangeStreamCaptureMode).
std::mutex captures_m;
std::vector<std::shared_ptr<Capture>> &captures() {
    static auto *v = new std::vector<std::shared_ptr<Capture>>;
    return *v;
}

// The host's steady clock in milliseconds: what a timing event's record
// reads when its stream runs it (cudaEventElapsedTime subtracts two).
double steady_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The dependency an event record or a legacy-stream barrier captures.
struct Dep {
    std::shared_ptr<StreamState> s;
    uint64_t t = 0;
};

// Blocks until d's operation has completed; first tells a late stream that
// someone waits for it.
void wait_dep(const Dep &d) {
    if (!d.s || d.t == 0) return;
    std::unique_lock lk(d.s->m);
    if (d.s->demand < d.t) {
        d.s->demand = d.t;
        d.s->cv.notify_all();
    }
    d.s->cv.wait(lk, [&] { return d.s->done >= d.t; });
}

bool dep_done(const Dep &d, bool demand) {
    if (!d.s || d.t == 0) return true;
    std::lock_guard lk(d.s->m);
    if (demand && d.s->demand < d.t) {
        d.s->demand = d.t;
        d.s->cv.notify_all();
    }
    return d.s->done >= d.t;
}

Dep tail(const std::shared_ptr<StreamState> &s) {
    std::lock_guard lk(s->m);
    return {s, s->enq};
}

struct Device {
    int ordinal = 0, physical = 0;
    std::mutex m;
    std::vector<std::shared_ptr<StreamState>> streams;  // live and draining, legacy first
    int created = 0;                                    // streams the user made
    std::atomic<int> sticky{cudaSuccess};
};

std::vector<Device *> &devices() {
    static std::vector<Device *> *d = [] {
        auto *v = new std::vector<Device *>;
        for (size_t i = 0; i < config().visible.size(); i++) {
            auto *dev = new Device;
            dev->ordinal = (int)i;
            dev->physical = config().visible[i];
            v->push_back(dev);
        }
        return v;
    }();
    return *d;
}

void StreamState::run() {
    current_device = device;
    const Config &c = config();
    for (;;) {
        Op op;
        {
            std::unique_lock lk(m);
            cv.wait(lk, [&] { return !q.empty() || closing; });
            if (q.empty()) break;  // closing, drained
            if (late) {
                // late:SEED: the operation waits until something waits for
                // it (or late_hold passes, so that work nobody waits for on
                // the host, such as a peer's collective, still progresses).
                uint64_t t = done + 1;
                cv.wait_for(lk, c.late_hold, [&] { return demand >= t || closing; });
            }
            op = std::move(q.front());
            q.pop_front();
        }
        if (c.sched != Sched::fifo) {
            // delay:SEED, and late:SEED on the other streams: 0-2 ms before
            // each operation, so that the order of unsynchronised work varies.
            std::uniform_int_distribution<int> us(0, 2000);
            std::this_thread::sleep_for(std::chrono::microseconds(us(rng)));
        }
        if (op.wait) {
            op.fn();
        } else {
            op_begin();
            op.fn();
            op_end();
        }
        {
            std::lock_guard lk(m);
            done++;
        }
        cv.notify_all();
    }
}

std::shared_ptr<StreamState> new_stream(Device *dev, bool legacy, bool blocking) {
    auto s = std::make_shared<StreamState>();
    s->device = dev->ordinal;
    s->legacy = legacy;
    s->blocking = blocking;
    {
        std::lock_guard lk(dev->m);
        // late:SEED holds the streams made after the device's first one
        // (the project's copy and communication streams).
        s->late = !legacy && config().sched == Sched::late && dev->created++ > 0;
        uint64_t n = dev->streams.size();
        s->rng.seed(config().seed * 1000003u + (uint64_t)dev->ordinal * 7919u + n);
        // legacy first: sync_device and the legacy barriers find it there
        if (legacy)
            dev->streams.insert(dev->streams.begin(), s);
        else
            dev->streams.push_back(s);
    }
    // Detached: a destroyed stream drains on its own ("the resources
    // associated with stream will be released automatically once the
    // device has completed all work in stream"). The worker owns a
    // reference until it has left the device's list.
    std::thread([s, dev] {
        s->run();
        std::lock_guard lk(dev->m);
        auto &v = dev->streams;
        v.erase(std::remove(v.begin(), v.end(), s), v.end());
    }).detach();
    return s;
}

std::shared_ptr<StreamState> legacy_stream(Device *dev) {
    {
        std::lock_guard lk(dev->m);
        if (!dev->streams.empty() && dev->streams.front()->legacy) return dev->streams.front();
    }
    static std::mutex make_m;
    std::lock_guard mk(make_m);
    {
        std::lock_guard lk(dev->m);
        if (!dev->streams.empty() && dev->streams.front()->legacy) return dev->streams.front();
    }
    return new_stream(dev, true, false);
}

}  // namespace

// The opaque handles of driver_types.h, defined here.
struct CUstream_st {
    std::shared_ptr<StreamState> st;
};

struct CUevent_st {
    std::mutex m;
    Dep rec;  // the most recent record's capture; none before the first
    Dep seen;  // the last record a query found complete (counted as a host sync)
    unsigned flags = 0;
    // A timing event's most recent record: the steady clock (ms) when its
    // stream ran it, written by the stream's worker before the ticket
    // completes (so read after dep_done). A new one per record: a pending
    // earlier record never writes the current one's time.
    std::shared_ptr<double> stamp;
};

namespace {

// Live handles, so that a stale or foreign handle is an error instead of a crash.
std::mutex handles_m;
std::set<const void *> &live_handles() {
    static auto *s = new std::set<const void *>;
    return *s;
}

bool live(const void *h) {
    std::lock_guard lk(handles_m);
    return live_handles().count(h) != 0;
}

cudaError_t no_device() { return fail(devices().empty() ? cudaErrorNoDevice : cudaErrorInvalidDevice); }

Device *cur_dev() {
    auto &d = devices();
    if (current_device < 0 || current_device >= (int)d.size()) return nullptr;
    return d[current_device];
}

// The stream behind handle s: stream 0 is the current device's legacy
// stream. Null for an unknown handle or without a device.
std::shared_ptr<StreamState> stream_of(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy) {
        Device *d = cur_dev();
        return d ? legacy_stream(d) : nullptr;
    }
    if (!live(s)) return nullptr;
    return s->st;
}

cudaError_t bad_stream(cudaStream_t s) {
    if ((s == nullptr || s == cudaStreamLegacy) && cur_dev() == nullptr) return no_device();
    return fail(cudaErrorInvalidResourceHandle);
}

// Puts op on s, after the implicit barriers of the legacy default stream:
// "Stream 0 ... synchronizes with all blocking streams" (cudaStreamDefault
// streams wait for stream 0's earlier work and stream 0 for theirs);
// cudaStreamNonBlocking "specifies that work running in the created stream
// may run concurrently with work in stream 0 (the NULL stream), and that the
// created stream should perform no implicit synchronization with stream 0".
// Returns the operation's ticket.
uint64_t enqueue_run(const std::shared_ptr<StreamState> &s, std::function<void()> op, bool wait) {
    std::vector<Dep> deps;
    if (s->legacy || s->blocking) {
        std::lock_guard lk(devices()[s->device]->m);
        for (auto &o : devices()[s->device]->streams)
            if (o != s && (s->legacy ? o->blocking : o->legacy)) deps.push_back({o, 0});
    }
    for (auto &d : deps)
        d = tail(d.s);
    std::lock_guard lk(s->m);
    for (auto &d : deps)
        if (d.t > 0) {
            s->q.push_back({[d] { wait_dep(d); }, true});
            s->enq++;
        }
    s->q.push_back({std::move(op), wait});
    uint64_t t = ++s->enq;
    s->cv.notify_all();
    return t;
}

// Puts op on s (enqueue_run), or, while s is capturing, records it in the
// capture: "When a stream is in capture mode, all operations pushed into the
// stream will not be executed, but will instead be captured into a graph"
// (cudaStreamBeginCapture). Counted as an operation either way; the ticket
// is 0 for a captured one (nothing to wait for).
uint64_t enqueue(const std::shared_ptr<StreamState> &s, std::function<void()> op,
                 bool wait = false) {
    if (wait)
        COUNT(s->device, waits, 1);
    else
        COUNT(s->device, ops, 1);
    {
        std::lock_guard lk(s->m);
        if (s->cap) {
            if (!s->cap->invalid) s->cap->ops.push_back({std::move(op), wait});
            return 0;
        }
    }
    return enqueue_run(s, std::move(op), wait);
}

// The capture s is in, or null.
std::shared_ptr<Capture> capture_of(const std::shared_ptr<StreamState> &s) {
    std::lock_guard lk(s->m);
    return s->cap;
}

// For work put on s: cudaErrorStreamCaptureInvalidated if s's capture was
// invalidated ("The current capture sequence on the stream has been
// invalidated due to a previous error"), else cudaSuccess.
cudaError_t capture_ok(const std::shared_ptr<StreamState> &s) {
    auto c = capture_of(s);
    return c && c->invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

// A call that stream capture forbids (it waits for the device, or is not
// stream-ordered: "During stream capture (see cudaStreamBeginCapture), some
// actions, such as a call to cudaMalloc, may be unsafe"): true, after
// invalidating the captures that forbid it, when one does. In the default
// mode "If the local thread has an ongoing capture sequence that was not
// initiated with cudaStreamCaptureModeRelaxed ..., or if any other thread has
// a concurrent capture sequence initiated with cudaStreamCaptureModeGlobal,
// this thread is prohibited from potentially unsafe API calls." The call
// then fails with cudaErrorStreamCaptureUnsupported ("The operation is not
// permitted when the stream is capturing").
bool forbidden_by_capture() {
    std::lock_guard lk(captures_m);
    bool hit = false;
    for (auto &c : captures()) {
        bool mine = c->thread == std::this_thread::get_id();
        if (c->mode == cudaStreamCaptureModeGlobal ||
            (mine && c->mode == cudaStreamCaptureModeThreadLocal)) {
            c->invalid = true;
            hit = true;
        }
    }
    return hit;
}

// Invalidates s's capture, if any, and says whether there was one: a
// synchronisation or a query of a capturing stream is forbidden ("It is
// invalid to synchronize or query the execution status of a stream which is
// being captured", CUDA C++ Programming Guide, Stream Capture: Prohibited
// and Unhandled Operations).
bool capturing_invalidate(const std::shared_ptr<StreamState> &s) {
    auto c = capture_of(s);
    if (c) c->invalid = true;
    return c != nullptr;
}

cudaError_t sticky(int device) {
    auto &d = devices();
    if (device < 0 || device >= (int)d.size()) return cudaSuccess;
    return (cudaError_t)d[device]->sticky.load();
}

// Waits for all work queued so far on every stream of device dev.
void sync_device(Device *dev) {
    std::vector<std::shared_ptr<StreamState>> v;
    {
        std::lock_guard lk(dev->m);
        v = dev->streams;
    }
    for (auto &s : v)
        wait_dep(tail(s));
}

}  // namespace

// ================================================================ emu.h

void emu_enqueue(cudaStream_t s, std::function<void()> task) {
    auto st = stream_of(s);
    if (!st) {
        bad_stream(s);
        return;
    }
    if (cudaError_t e = capture_ok(st)) {
        fail(e);
        return;
    }
    enqueue(st, std::move(task));
}

void emu_count_launch(cudaStream_t s) {
    COUNT(emu_stream_device(s), launches, 1);
}

void emu_count_library(cudaStream_t s, EmuLibrary lib) {
    int dev = emu_stream_device(s);
    switch (lib) {
    case EmuLibrary::blas:
        COUNT(dev, blas_calls, 1);
        break;
    case EmuLibrary::blas_pool:
        COUNT(dev, blas_calls, 1);
        COUNT(dev, blas_pool_calls, 1);
        break;
    case EmuLibrary::dnn:
        COUNT(dev, dnn_calls, 1);
        break;
    case EmuLibrary::nccl:
        COUNT(dev, nccl_calls, 1);
        break;
    }
}

int emu_device_of(const void *p, size_t *bytes_left) {
    std::shared_lock lk(memory().m);
    auto *a = find_alloc(p);
    if (a == nullptr || a->second.device < 0) return -1;
    if (bytes_left) *bytes_left = a->second.size - ((uintptr_t)p - a->first);
    return a->second.device;
}

bool emu_is_pinned(const void *p) {
    std::shared_lock lk(memory().m);
    auto *a = find_alloc(p);
    return a != nullptr && a->second.device < 0;
}

void emu_set_last_error(cudaError_t e) { last_error = e; }

int emu_stream_device(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy) return cur_dev() ? current_device : -1;
    if (!live(s)) return -1;
    return s->st->device;
}

int emu_device_count() { return (int)devices().size(); }

void emu_device_fault(cudaError_t e, const char *what) {
    fprintf(stderr, "gpu emulator: device %d: %s\n", current_device, what);
    auto &d = devices();
    if (current_device >= 0 && current_device < (int)d.size()) {
        int ok = cudaSuccess;
        d[current_device]->sticky.compare_exchange_strong(ok, e);
    }
}

bool emu_launch_check(dim3 grid, dim3 block, cudaStream_t s) {
    // The limits of compute capability 9.0: at most 1024 threads a block
    // (x, y <= 1024, z <= 64), a grid of at most 2^31-1 x 65535 x 65535.
    // An empty or oversized configuration is cudaErrorInvalidConfiguration
    // ("This indicates that a kernel launch is requesting resources that can
    // never be satisfied by the current device"), reported by
    // cudaGetLastError after the launch.
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
        block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x > 0x7fffffffu ||
        grid.y > 65535 || grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        return false;
    }
    if (!stream_of(s)) {
        bad_stream(s);
        return false;
    }
    return true;
}

// ================================================================ the API

extern "C" {

// ---- errors

cudaError_t cudaGetLastError(void) {
    // "Returns the last error that has been produced by any of the runtime
    // calls in the same instance of the CUDA Runtime library in the host
    // thread and resets it to cudaSuccess."
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    // "This call does not reset the error to cudaSuccess like cudaGetLastError()."
    return last_error;
}

namespace {
struct ErrText {
    cudaError_t e;
    const char *name, *text;
};
// The codes this emulator returns, with the real runtime's strings.
const ErrText err_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
};
const ErrText *err_text(cudaError_t e) {
    for (auto &t : err_texts)
        if (t.e == e) return &t;
    return nullptr;
}
}  // namespace

const char *cudaGetErrorName(cudaError_t e) {
    // "If the error code is not recognized, "unrecognized error code" is returned."
    const ErrText *t = err_text(e);
    return t ? t->name : "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t e) {
    const ErrText *t = err_text(e);
    return t ? t->text : "unrecognized error code";
}

// ---- versions and devices

cudaError_t cudaDriverGetVersion(int *v) {
    if (v == nullptr) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;  // the emulated driver matches the headers
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
    if (v == nullptr) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
    if (n == nullptr) return fail(cudaErrorInvalidValue);
    *n = (int)devices().size();
    // As the real runtime: no device is an error, with a count of 0.
    return *n == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    // "Sets device as the current device for the calling host thread. Valid
    // device id's are 0 to (cudaGetDeviceCount() - 1)."
    if (devices().empty()) return fail(cudaErrorNoDevice);
    if (device < 0 || device >= (int)devices().size()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    if (device == nullptr) return fail(cudaErrorInvalidValue);
    if (devices().empty()) return fail(cudaErrorNoDevice);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (p == nullptr) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)devices().size()) return no_device();
    int phys = devices()[device]->physical;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "Emulated GPU %d", phys);
    for (int i = 0; i < 16; i++)
        p->uuid.bytes[i] = (char)(i == 0 ? 0xE0 : i == 15 ? phys : 0);
    p->totalGlobalMem = kDeviceMemory;
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9;  // compute capability 9.0
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->maxThreadsPerMultiProcessor = 2048;
    p->unifiedAddressing = 1;
    p->pciDomainID = 0;
    p->pciBusID = 0x10 + phys;  // "0000:%02X:00.0", distinct per device
    p->pciDeviceID = 0;
    p->asyncEngineCount = 2;
    p->concurrentKernels = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    Device *d = cur_dev();
    if (!d) return no_device();
    // "It is also invalid to query the execution status of or synchronize a
    // broader handle which encompasses an active stream capture, such as a
    // device or context handle" (Programming Guide, Stream Capture).
    bool capturing = false;
    {
        std::lock_guard lk(d->m);
        for (auto &st : d->streams) {
            std::lock_guard sl(st->m);
            if (st->cap) {
                st->cap->invalid = true;
                capturing = true;
            }
        }
    }
    if (capturing || forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(d->ordinal, host_syncs, 1);
    sync_device(d);
    return fail(sticky(d->ordinal));
}

// ---- memory

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    // "Allocates size bytes of linear memory on the device and returns in
    // *devPtr a pointer to the allocated memory. The allocated memory is
    // suitably aligned for any kind of variable. The memory is not cleared.
    // cudaMalloc() returns cudaErrorMemoryAllocation in case of failure."
    if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
    Device *d = cur_dev();
    if (!d) return no_device();
    *devPtr = nullptr;
    if (forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(d->ordinal, allocs, 1);
    if (size == 0) return cudaSuccess;  // as the real runtime: a null pointer
    long page = sysconf(_SC_PAGESIZE);
    size_t mapped = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    Memory &mem = memory();
    {
        std::lock_guard lk(mem.m);
        if (size > kDeviceMemory - mem.used[d->ordinal]) return fail(cudaErrorMemoryAllocation);
        mem.used[d->ordinal] += size;
    }
    // Apart from the heap: a stray host pointer never lands in it, and a
    // freed buffer is unmapped (a later access faults).
    void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        std::lock_guard lk(mem.m);
        mem.used[d->ordinal] -= size;
        return fail(cudaErrorMemoryAllocation);
    }
    // "The memory is not cleared": poison it, so that reading before writing
    // gives NaNs instead of the zeros fresh pages would.
    memset(p, kPoison, mapped);
    if (config().check_host) install_segv_handler();
    std::lock_guard pl(prot_m);
    {
        std::lock_guard lk(mem.m);
        mem.allocs[(uintptr_t)p] = Alloc{size, mapped, d->ordinal};
    }
    if (config().check_host && active_ops == 0) mprotect(p, mapped, PROT_NONE);
    *devPtr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr) {
    // "If devPtr is 0, no operation is performed."
    if (devPtr == nullptr) return cudaSuccess;
    int dev;
    size_t left;
    {
        std::shared_lock lk(memory().m);
        auto *a = find_alloc(devPtr);
        if (a == nullptr || a->first != (uintptr_t)devPtr || a->second.device < 0)
            return fail(cudaErrorInvalidValue);
        dev = a->second.device;
        left = a->second.size;
    }
    if (forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(dev, frees, 1);
    COUNT(dev, host_syncs, 1);
    // "For all other pointers, this API may perform implicit
    // synchronization": the project relies on it (cudaFree waits for the
    // device), so the emulator always does.
    sync_device(devices()[dev]);
    std::lock_guard pl(prot_m);
    std::lock_guard lk(memory().m);
    auto it = memory().allocs.find((uintptr_t)devPtr);
    if (it == memory().allocs.end()) return fail(cudaErrorInvalidValue);  // freed twice at once
    munmap(devPtr, it->second.mapped);
    memory().allocs.erase(it);
    memory().used[dev] -= left;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    // "Allocates size bytes of host memory that is page-locked and
    // accessible to the device." Pinned memory is what makes
    // cudaMemcpyAsync asynchronous; it is tracked for that.
    if (pHost == nullptr) return fail(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return fail(cudaErrorInvalidValue);
    *pHost = nullptr;
    if (forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(current_device, allocs, 1);
    if (size == 0) return cudaSuccess;
    long page = sysconf(_SC_PAGESIZE);
    size_t mapped = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
    memset(p, kPoison, mapped);  // not cleared either
    std::lock_guard lk(memory().m);
    memory().allocs[(uintptr_t)p] = Alloc{size, mapped, -1};
    *pHost = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void *ptr) {
    if (ptr == nullptr) return cudaSuccess;
    {
        std::shared_lock lk(memory().m);
        auto *a = find_alloc(ptr);
        if (a == nullptr || a->first != (uintptr_t)ptr || a->second.device >= 0)
            return fail(cudaErrorInvalidValue);
    }
    if (forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(current_device, frees, 1);
    COUNT(current_device, host_syncs, 1);
    // The real cudaFreeHost synchronises the device: a queued copy may still
    // read or write the buffer.
    for (Device *d : devices())
        sync_device(d);
    std::lock_guard lk(memory().m);
    auto it = memory().allocs.find((uintptr_t)ptr);
    if (it == memory().allocs.end()) return fail(cudaErrorInvalidValue);
    munmap(ptr, it->second.mapped);
    memory().allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    // "Returns in *total the total amount of memory available to the the
    // current context. Returns in *free the amount of memory on the device
    // that is free according to the OS."
    if (free_bytes == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
    Device *d = cur_dev();
    if (!d) return no_device();
    std::shared_lock lk(memory().m);
    *total = kDeviceMemory;
    *free_bytes = kDeviceMemory - memory().used[d->ordinal];
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr) {
    if (attr == nullptr) return fail(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    std::shared_lock lk(memory().m);
    auto *a = find_alloc(ptr);
    if (a == nullptr) {
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = -2;
        return cudaSuccess;
    }
    attr->type = a->second.device >= 0 ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attr->device = a->second.device >= 0 ? a->second.device : 0;
    if (a->second.device >= 0)
        attr->devicePointer = const_cast<void *>(ptr);
    else
        attr->hostPointer = attr->devicePointer = const_cast<void *>(ptr);
    return cudaSuccess;
}

namespace {

enum class Where { device, pinned, pageable };

Where where(const void *p, size_t n, bool *in_bounds) {
    std::shared_lock lk(memory().m);
    auto *a = find_alloc(p);
    *in_bounds = true;
    if (a == nullptr) return Where::pageable;
    *in_bounds = n <= a->second.size - ((uintptr_t)p - a->first);
    return a->second.device >= 0 ? Where::device : Where::pinned;
}

// Waits for ticket t of s and returns the device's sticky error.
cudaError_t wait_ticket(const std::shared_ptr<StreamState> &s, uint64_t t) {
    wait_dep({s, t});
    return fail(sticky(s->device));
}

// A copy that returns with the copy done: a host synchronisation, which a
// capturing stream cannot make (Programming Guide, Stream Capture).
cudaError_t copy_wait(const std::shared_ptr<StreamState> &s, uint64_t t) {
    COUNT(s->device, host_syncs, 1);
    return wait_ticket(s, t);
}

cudaError_t memcpy_on(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                      const std::shared_ptr<StreamState> &s, bool *waited) {
    *waited = false;
    if (count == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
    bool dst_ok, src_ok;
    Where wd = where(dst, count, &dst_ok), ws = where(src, count, &src_ok);
    if (!dst_ok || !src_ok) return fail(cudaErrorInvalidValue);  // past an allocation's end
    bool dd = wd == Where::device, sd = ws == Where::device;
    // "Calling cudaMemcpyAsync() with dst and src pointers that do not match
    // the direction of the copy results in an undefined behavior": here, an
    // error, so that the mistake shows.
    switch (kind) {
    case cudaMemcpyHostToHost:
        if (dd || sd) return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyHostToDevice:
        if (!dd || sd) return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDeviceToHost:
        if (dd || !sd) return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDeviceToDevice:
        if (!dd || !sd) return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDefault:
        break;  // inferred from the pointers (unified addressing)
    default:
        return fail(cudaErrorInvalidMemcpyDirection);
    }
    if (cudaError_t e = sticky(s->device)) return fail(e);
    if (cudaError_t e = capture_ok(s)) return fail(e);
    // Synchronous with the host below (host to host, device to pageable
    // memory): forbidden on a capturing stream. So is a copy from pageable
    // memory, whose source is read at the call (staged), which a graph's
    // replays could not repeat: a test relying on it fails, not a stale copy.
    bool synchronous = (!dd && !sd) || (sd && wd == Where::pageable);
    if ((synchronous || (dd && ws == Where::pageable)) && capturing_invalidate(s))
        return fail(cudaErrorStreamCaptureUnsupported);
    int dir =
        dd ? (sd ? MR_EMU_COPY_D2D : MR_EMU_COPY_H2D) : (sd ? MR_EMU_COPY_D2H : MR_EMU_COPY_H2H);
    count_at(s->device, offsetof(mr_emu_counters, copies) + dir * sizeof(uint64_t), 1);
    count_at(s->device, offsetof(mr_emu_counters, copy_bytes) + dir * sizeof(uint64_t), count);
    *waited = synchronous;
    if (!dd && !sd) {
        // "For transfers from any host memory to any host memory, the
        // function is fully synchronous with respect to the host."
        uint64_t t = enqueue(s, [=] { memcpy(dst, src, count); });
        return copy_wait(s, t);
    }
    if (dd && ws == Where::pageable) {
        // "If pageable memory must first be staged to pinned memory, the
        // driver may synchronize with the stream and stage the copy into
        // pinned memory": the source is read now (the caller may reuse it
        // as soon as the call returns), the device written in stream order.
        auto staged = std::make_shared<std::vector<unsigned char>>(
            (const unsigned char *)src, (const unsigned char *)src + count);
        enqueue(s, [=] { memcpy(dst, staged->data(), count); });
        return cudaSuccess;
    }
    uint64_t t = enqueue(s, [=] { memcpy(dst, src, count); });
    if (sd && wd == Where::pageable) {
        // "For transfers between device memory and pageable host memory, the
        // function might be synchronous with respect to host": to pageable
        // memory it is ("For transfers from device to either pageable or
        // pinned host memory, the function returns only once the copy has
        // completed"), so the host may read dst at once.
        return copy_wait(s, t);
    }
    // "For all other transfers, the function should be fully asynchronous."
    return cudaSuccess;
}

cudaError_t memset_on(void *devPtr, int value, size_t count, const std::shared_ptr<StreamState> &s) {
    if (count == 0) return cudaSuccess;
    bool ok;
    if (devPtr == nullptr || where(devPtr, count, &ok) != Where::device || !ok)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = sticky(s->device)) return fail(e);
    if (cudaError_t e = capture_ok(s)) return fail(e);
    COUNT(s->device, memsets, 1);
    enqueue(s, [=] { memset(devPtr, value, count); });
    return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    bool waited;
    return memcpy_on(dst, src, count, kind, s, &waited);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
    auto s = stream_of(nullptr);
    if (!s) return no_device();
    // Synchronous, on the legacy stream: a potentially unsafe call during
    // a capture.
    if (forbidden_by_capture()) return fail(cudaErrorStreamCaptureUnsupported);
    bool waited;
    cudaError_t e = memcpy_on(dst, src, count, kind, s, &waited);
    if (e != cudaSuccess || waited) return e;
    // "For transfers from device memory to device memory, no host-side
    // synchronization is performed." Every other cudaMemcpy returns with
    // the copy done (pinned host to device: "synchronous with respect to
    // the host").
    bool ok;
    if (where(dst, count, &ok) == Where::device && where(src, count, &ok) == Where::device)
        return cudaSuccess;
    return copy_wait(s, tail(s).t);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    // "The Async versions are always asynchronous with respect to the host."
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    return memset_on(devPtr, value, count, s);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    // "Note that this function is asynchronous with respect to the host
    // unless devPtr refers to pinned host memory": device memory only
    // here, on the legacy stream 0.
    auto s = stream_of(nullptr);
    if (!s) return no_device();
    return memset_on(devPtr, value, count, s);
}

// ---- streams

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
    if (pStream == nullptr || (flags & ~(unsigned)cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
    Device *d = cur_dev();
    if (!d) return no_device();
    // "Any streams or events created from this host thread will be
    // associated with device" (cudaSetDevice).
    auto *h = new CUstream_st{new_stream(d, false, flags == cudaStreamDefault)};
    {
        std::lock_guard lk(handles_m);
        live_handles().insert(h);
    }
    *pStream = h;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    // "In case the device is still doing work in the stream stream when
    // cudaStreamDestroy() is called, the function will return immediately
    // and the resources associated with stream will be released
    // automatically once the device has completed all work in stream."
    if (stream == nullptr || stream == cudaStreamLegacy) return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard lk(handles_m);
        if (!live_handles().erase(stream)) return fail(cudaErrorInvalidResourceHandle);
    }
    auto s = stream->st;
    if (auto c = capture_of(s)) {
        // A capture that can no longer end: no longer one that forbids calls.
        std::lock_guard lk(captures_m);
        auto &v = captures();
        v.erase(std::remove(v.begin(), v.end(), c), v.end());
    }
    {
        std::lock_guard lk(s->m);
        s->closing = true;
        s->demand = UINT64_MAX;  // a late stream drains now
    }
    s->cv.notify_all();
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    // "Blocks until stream has completed all operations."
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    if (capturing_invalidate(s)) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(s->device, host_syncs, 1);
    return wait_ticket(s, tail(s).t);
}

namespace {
// The first cudaStreamQuery that finds ticket t of s complete is a host
// sync (a host polls until the stream is idle).
void count_observed(const std::shared_ptr<StreamState> &s, uint64_t t) {
    std::lock_guard lk(s->m);
    if (t > s->observed) {
        s->observed = t;
        COUNT(s->device, host_syncs, 1);
    }
}
}  // namespace

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    if (capturing_invalidate(s)) return fail(cudaErrorStreamCaptureUnsupported);
    COUNT(s->device, queries, 1);
    Dep d = tail(s);
    if (!dep_done(d, true)) return cudaErrorNotReady;  // not an error: not recorded
    count_observed(s, d.t);
    return fail(sticky(s->device));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    // "Makes all future work submitted to stream wait for all work captured
    // in event." The capture is the one current at this call: "Other APIs
    // such as cudaStreamWaitEvent() use the most recently captured state at
    // the time of the API call, and are not affected by later calls to
    // cudaEventRecord()." "event may be from a different device than stream."
    if (flags & ~(unsigned)cudaEventWaitExternal) return fail(cudaErrorInvalidValue);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    if (event == nullptr || !live(event)) return fail(cudaErrorInvalidResourceHandle);
    if (capturing_invalidate(s))
        return fail(cudaErrorStreamCaptureUnsupported); // as cudaEventRecord
    Dep d;
    {
        std::lock_guard lk(event->m);
        d = event->rec;
    }
    // Even an empty capture is queued, so the wait stays an ordered
    // operation of the stream.
    enqueue(s, [d] { wait_dep(d); }, true);
    return cudaSuccess;
}

// ---- events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    if (event == nullptr ||
        (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
        return fail(cudaErrorInvalidValue);
    if (!cur_dev()) return no_device();
    auto *e = new CUevent_st;
    e->flags = flags;
    {
        std::lock_guard lk(handles_m);
        live_handles().insert(e);
    }
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    // "Captures in event the contents of stream at the time of this call."
    // "cudaEventRecord() can be called multiple times on the same event and
    // will overwrite the previously captured state." The capture is the
    // stream's last ticket: the event completes when that operation has.
    if (event == nullptr || !live(event)) return fail(cudaErrorInvalidResourceHandle);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    // Events in a capture (fork and join of captured streams) are not
    // emulated: the call fails and invalidates the capture, so a test that
    // would rely on them fails instead of passing on a wrong graph.
    if (capturing_invalidate(s)) return fail(cudaErrorStreamCaptureUnsupported);
    // Stream 0 records after the blocking streams too (legacy semantics):
    // queue a no-op that carries those barriers. A timing event queues an
    // operation that reads the clock (it carries the same barriers).
    std::shared_ptr<double> stamp;
    Dep d;
    if (!(event->flags & cudaEventDisableTiming)) {
        stamp = std::make_shared<double>(0.0);
        d = Dep{s, enqueue(s, [stamp] { *stamp = steady_ms(); }, true)};
    } else {
        d = s->legacy ? Dep{s, enqueue(s, [] {}, true)} : tail(s);
    }
    std::lock_guard lk(event->m);
    event->rec = d;
    event->stamp = std::move(stamp);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    // "Returns cudaSuccess if all captured work has been completed, or
    // cudaErrorNotReady if any captured work is incomplete." "Before the
    // first call to cudaEventRecord(), an event represents an empty set of
    // work, so for example cudaEventQuery() would return cudaSuccess."
    if (event == nullptr || !live(event)) return fail(cudaErrorInvalidResourceHandle);
    Dep d;
    {
        std::lock_guard lk(event->m);
        d = event->rec;
    }
    // A query is someone waiting: a late stream stops holding the work.
    if (d.s) COUNT(d.s->device, queries, 1);
    if (!dep_done(d, true)) return cudaErrorNotReady;
    if (d.s) {
        // Polling until the event completes is how a host waits: the first
        // query that finds this record complete is the host sync.
        std::lock_guard lk(event->m);
        if (event->seen.s != d.s || event->seen.t != d.t) {
            event->seen = d;
            COUNT(d.s->device, host_syncs, 1);
        }
    }
    return d.s ? fail(sticky(d.s->device)) : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    // "Waits until the completion of all work currently captured in event."
    if (event == nullptr || !live(event)) return fail(cudaErrorInvalidResourceHandle);
    Dep d;
    {
        std::lock_guard lk(event->m);
        d = event->rec;
    }
    if (d.s) COUNT(d.s->device, host_syncs, 1);
    wait_dep(d);
    return d.s ? fail(sticky(d.s->device)) : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    // "Computes the elapsed time between two events (in milliseconds with a
    // resolution of around 0.5 microseconds)." "If cudaEventRecord() has not
    // been called on either event, then cudaErrorInvalidResourceHandle is
    // returned. If cudaEventRecord() has been called on both events but one
    // or both of them has not yet been completed (that is, cudaEventQuery()
    // would return cudaErrorNotReady on at least one of the events),
    // cudaErrorNotReady is returned. If either event was created with the
    // cudaEventDisableTiming flag, then this function will return
    // cudaErrorInvalidResourceHandle."
    if (ms == nullptr) return fail(cudaErrorInvalidValue);
    if (start == nullptr || end == nullptr || !live(start) || !live(end))
        return fail(cudaErrorInvalidResourceHandle);
    Dep d[2];
    std::shared_ptr<double> t[2];
    cudaEvent_t ev[2] = {start, end};
    for (int i = 0; i < 2; i++) {
        std::lock_guard lk(ev[i]->m);
        if (ev[i]->flags & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
        d[i] = ev[i]->rec;
        t[i] = ev[i]->stamp;
    }
    if (!t[0] || !t[1]) return fail(cudaErrorInvalidResourceHandle);  // never recorded
    // Like cudaEventQuery, asking is waiting: a late stream releases the work.
    bool done0 = dep_done(d[0], true), done1 = dep_done(d[1], true);
    if (!done0 || !done1) return cudaErrorNotReady;  // not an error: not recorded
    *ms = (float)(*t[1] - *t[0]);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    // "An event may be destroyed before it is complete (i.e., while
    // cudaEventQuery() would return cudaErrorNotReady). In this case, the
    // call does not block on completion of the event, and any associated
    // resources will automatically be released asynchronously at
    // completion." Queued waits hold their own copy of the capture.
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard lk(handles_m);
        if (!live_handles().erase(event)) return fail(cudaErrorInvalidResourceHandle);
    }
    delete event;
    return cudaSuccess;
}

// ---- stream capture and graphs (one stream; see the file comment)

}  // extern "C"

// The opaque graph handles of driver_types.h: a captured sequence, and its
// executable copy.
struct CUgraph_st {
    std::vector<StreamState::Op> ops;
};
struct CUgraphExec_st {
    std::vector<StreamState::Op> ops;
};

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    // "Capture may not be initiated if stream is cudaStreamLegacy. Capture
    // must be ended on the same stream in which it was initiated, and it may
    // only be initiated if the stream is not already in capture mode."
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    if (s->legacy) return fail(cudaErrorStreamCaptureUnsupported);
    auto c = std::make_shared<Capture>();
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    {
        std::lock_guard lk(s->m);
        if (s->cap) return fail(cudaErrorIllegalState);
        s->cap = c;
    }
    std::lock_guard lk(captures_m);
    captures().push_back(c);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
    // "End capture on stream, returning the captured graph via pGraph.
    // Capture must have been initiated on stream via a call to
    // cudaStreamBeginCapture. If capture was invalidated, due to a violation
    // of the rules of stream capture, then a NULL graph will be returned."
    // "If the mode argument to cudaStreamBeginCapture was not
    // cudaStreamCaptureModeRelaxed, this call must be from the same thread
    // as cudaStreamBeginCapture."
    if (pGraph == nullptr) return fail(cudaErrorInvalidValue);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    std::shared_ptr<Capture> c;
    {
        std::lock_guard lk(s->m);
        if (!s->cap) return fail(cudaErrorStreamCaptureUnmatched);
        if (s->cap->mode != cudaStreamCaptureModeRelaxed &&
            s->cap->thread != std::this_thread::get_id())
            return fail(cudaErrorStreamCaptureWrongThread);
        c = std::move(s->cap);
        s->cap = nullptr;
    }
    {
        std::lock_guard lk(captures_m);
        auto &v = captures();
        v.erase(std::remove(v.begin(), v.end(), c), v.end());
    }
    *pGraph = nullptr;
    if (c->invalid) return fail(cudaErrorStreamCaptureInvalidated);
    *pGraph = new CUgraph_st{std::move(c->ops)};
    std::lock_guard lk(handles_m);
    live_handles().insert(*pGraph);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus) {
    // "cudaStreamCaptureStatusNone: The stream is not capturing.
    // cudaStreamCaptureStatusActive: The stream is capturing.
    // cudaStreamCaptureStatusInvalidated: The stream was capturing but an
    // error has invalidated the capture sequence."
    if (pCaptureStatus == nullptr) return fail(cudaErrorInvalidValue);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    auto c = capture_of(s);
    *pCaptureStatus = !c           ? cudaStreamCaptureStatusNone
                      : c->invalid ? cudaStreamCaptureStatusInvalidated
                                   : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) {
    // "Instantiates graph as an executable graph": a copy, so the graph may be
    // destroyed while the executable graph lives.
    if (pGraphExec == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
    if (graph == nullptr || !live(graph)) return fail(cudaErrorInvalidValue);
    *pGraphExec = new CUgraphExec_st{graph->ops};
    std::lock_guard lk(handles_m);
    live_handles().insert(*pGraphExec);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    // "Executes graphExec in stream. ... Each launch is ordered behind both
    // any previous work in stream and any previous launches of graphExec":
    // the captured operations, in their captured order, on stream.
    if (graphExec == nullptr || !live(graphExec)) return fail(cudaErrorInvalidValue);
    auto s = stream_of(stream);
    if (!s) return bad_stream(stream);
    if (cudaError_t e = capture_ok(s)) return fail(e);
    if (cudaError_t e = sticky(s->device)) return fail(e);
    COUNT(s->device, graph_launches, 1);
    {
        std::lock_guard lk(s->m);
        if (s->cap) { // a graph launched into a capture: its operations are captured
            if (!s->cap->invalid)
                s->cap->ops.insert(s->cap->ops.end(), graphExec->ops.begin(), graphExec->ops.end());
            return cudaSuccess;
        }
    }
    COUNT(s->device, ops_replayed, graphExec->ops.size());
    for (auto &op : graphExec->ops)
        enqueue_run(s, op.fn, op.wait);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
    // Queued replays hold their own copies of the operations.
    if (graphExec == nullptr) return fail(cudaErrorInvalidValue);
    {
        std::lock_guard lk(handles_m);
        if (!live_handles().erase(graphExec)) return fail(cudaErrorInvalidValue);
    }
    delete graphExec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    if (graph == nullptr) return fail(cudaErrorInvalidValue);
    {
        std::lock_guard lk(handles_m);
        if (!live_handles().erase(graph)) return fail(cudaErrorInvalidValue);
    }
    delete graph;
    return cudaSuccess;
}

}  // extern "C"

// ================================================================ emu_counters.h

void mr_emu_counters_get(int device, mr_emu_counters *out) {
    uint64_t v[kCounts] = {};
    for (int d = 0; d < kMaxDevices; d++) {
        if (device != -1 && d != device) continue;
        for (size_t i = 0; i < kCounts; i++)
            v[i] += counts[d][i].load(std::memory_order_relaxed);
    }
    memcpy(out, v, sizeof *out);
}

void mr_emu_counters_reset(void) {
    for (auto &dev : counts)
        for (auto &c : dev)
            c.store(0, std::memory_order_relaxed);
}
