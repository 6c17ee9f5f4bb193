// nccl_emu.cc - NCCL on the CPU (libmr_emu_nccl): communicators across the
// threads of one process and across processes (mpirun -np N, one emulated
// GPU each), all-reduce and broadcast on the caller's CUDA stream, abort.
//
// A clique (the ranks of one ncclUniqueId) meets in a POSIX shared memory
// object named after the id: a header with a process-shared robust mutex
// and condition variable, and one staging slot per rank. A collective is a
// task on the rank's stream (emu_enqueue); per chunk of at most kChunk
// bytes, each rank copies its data into its slot, all meet at a barrier,
// each computes the result from all slots in rank order (so every rank
// gets bitwise the same sums), and all meet again before the slots are
// reused. The same path serves threads and processes.
// Comments quote nccl.h (NCCL 2.28) and the NCCL user guide.
// Relies on: emu.h (the emulated runtime's streams and pointer checks),
// POSIX shm, process-shared pthread mutexes and condition variables.
#include <fcntl.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_emu/emu.h"

namespace {

constexpr int kMaxRanks = 64;
constexpr size_t kChunk = size_t{1} << 20;  // bytes per rank per round
constexpr size_t kHeaderBytes = 16384;
constexpr uint32_t kMagic = 0x4d52454d;  // "MREM": an emulator id

// What the ranks of a collective tell each other, to catch ranks calling
// different collectives (NCCL requires the same sequence on every rank).
struct OpMeta {
    uint64_t seq;
    uint64_t count;
    int32_t kind, dtype, op, root;
};

struct Header {
    uint32_t ready;  // set (release) once the creator has initialised the rest
    int32_t nranks;
    int32_t joined;
    int32_t aborted;  // ncclResult_t of the clique's failure, 0 while healthy
    int32_t taken[kMaxRanks];
    int32_t pid[kMaxRanks];
    int32_t dev[kMaxRanks];  // CUDA ordinal in process pid
    OpMeta meta[kMaxRanks];
    uint64_t gen;  // barrier generation
    int32_t count;  // ranks at the current barrier
    pthread_mutex_t mu;
    pthread_cond_t cv;
};
static_assert(sizeof(Header) <= kHeaderBytes, "header too large");

// ---- the last error (ncclGetLastError: "Returns a human-readable message
// of the last error that occurred").
std::mutex last_m;
std::string last_error;

ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::lock_guard lk(last_m);
    last_error = buf;
    return r;
}

std::string shm_name(const ncclUniqueId &id) {
    static const char hex[] = "0123456789abcdef";
    std::string s = "/mr_emu_nccl_";
    for (int i = 4; i < 20; i++) {
        s += hex[(unsigned char)id.internal[i] >> 4];
        s += hex[(unsigned char)id.internal[i] & 15];
    }
    return s;
}

// Records the clique's failure (h->mu held): the first reason stays. An
// atomic store: the stream workers read it without the mutex.
void fail_clique(Header *h, int why) {
    if (!h->aborted) __atomic_store_n(&h->aborted, why, __ATOMIC_RELEASE);
}

// Locks the clique's robust mutex; a process that died holding it leaves
// the clique failed (its peers then see ncclRemoteError).
void lock(Header *h) {
    int r = pthread_mutex_lock(&h->mu);
    if (r == EOWNERDEAD) {
        pthread_mutex_consistent(&h->mu);
        fail_clique(h, ncclRemoteError);
    }
}

// Marks ranks of other processes that have exited as failures (h->mu held).
void check_peers(Header *h) {
    for (int r = 0; r < h->nranks; r++)
        if (h->taken[r] && h->pid[r] != getpid() && kill(h->pid[r], 0) != 0 && errno == ESRCH) {
            fail_clique(h, ncclRemoteError);
            pthread_cond_broadcast(&h->cv);
        }
}

// Waits on the clique's condition variable for a while (200 ms), then
// looks at the peers (h->mu held).
void timed_wait(Header *h) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int r = pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    if (r == EOWNERDEAD) {
        pthread_mutex_consistent(&h->mu);
        fail_clique(h, ncclRemoteError);
    } else if (r == ETIMEDOUT) {
        check_peers(h);
    }
}

// One rank's state. The ncclComm handle holds it, and so does every task
// queued on a stream, so an aborted or destroyed communicator's pending
// work still finds it.
struct RankState {
    int rank = -1, nranks = 0, device = 0;
    std::string name;
    Header *h = nullptr;
    size_t map_len = 0;
    std::atomic<bool> aborted{false};
    std::atomic<int> async{ncclSuccess};
    uint64_t seq = 0;  // collectives issued (the caller's thread)
    std::mutex pm;
    std::condition_variable pcv;
    int pending = 0;  // collectives queued, not yet run (under pm)

    ~RankState() {
        if (h) munmap(h, map_len);
    }
    char *slot(int r) const { return (char *)h + kHeaderBytes + (size_t)r * kChunk; }

    bool failed() const { return aborted.load() || __atomic_load_n(&h->aborted, __ATOMIC_ACQUIRE) != 0; }

    // Every rank meets here; false if the clique failed or this rank was
    // aborted ("aborts any operations that might still be running").
    bool barrier() {
        lock(h);
        if (h->aborted || aborted) {
            pthread_mutex_unlock(&h->mu);
            return false;
        }
        uint64_t g = h->gen;
        if (++h->count == h->nranks) {
            h->count = 0;
            h->gen++;
            pthread_cond_broadcast(&h->cv);
            pthread_mutex_unlock(&h->mu);
            return true;
        }
        while (h->gen == g && !h->aborted && !aborted)
            timed_wait(h);
        bool ok = h->gen != g;
        pthread_mutex_unlock(&h->mu);
        return ok;
    }

    void note_failure() {
        int cur = ncclSuccess;
        int why = aborted ? (int)ncclInvalidUsage : __atomic_load_n(&h->aborted, __ATOMIC_ACQUIRE);
        async.compare_exchange_strong(cur, why ? why : (int)ncclInternalError);
    }

    void done_one() {
        std::lock_guard lk(pm);
        if (--pending == 0) pcv.notify_all();
    }
};

}  // namespace

struct ncclComm {
    std::shared_ptr<RankState> st;
    bool finalized = false;
};

namespace {

// ---- attaching to a clique

ncclResult_t attach(RankState &st, const ncclUniqueId &id, int nranks) {
    uint32_t magic;
    memcpy(&magic, id.internal, sizeof magic);
    if (magic != kMagic) return fail(ncclInvalidArgument, "ncclCommInitRank: the id is not from ncclGetUniqueId");
    st.name = shm_name(id);
    st.map_len = kHeaderBytes + (size_t)nranks * kChunk;
    bool creator = true;
    int fd = shm_open(st.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = false;
        fd = shm_open(st.name.c_str(), O_RDWR, 0600);
    }
    if (fd < 0) return fail(ncclSystemError, "shm_open %s: %s", st.name.c_str(), strerror(errno));
    if (creator) {
        if (ftruncate(fd, (off_t)st.map_len) != 0) {
            close(fd);
            shm_unlink(st.name.c_str());
            return fail(ncclSystemError, "ftruncate %s: %s", st.name.c_str(), strerror(errno));
        }
    } else {
        // the creator sizes it: wait for that
        struct stat sb;
        for (;;) {
            if (fstat(fd, &sb) != 0) {
                close(fd);
                return fail(ncclSystemError, "fstat %s: %s", st.name.c_str(), strerror(errno));
            }
            if (sb.st_size > 0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if ((size_t)sb.st_size != st.map_len) {
            close(fd);
            return fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d differs from the other ranks'",
                        nranks);
        }
    }
    void *p = mmap(nullptr, st.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return fail(ncclSystemError, "mmap %s: %s", st.name.c_str(), strerror(errno));
    st.h = (Header *)p;
    Header *h = st.h;
    if (creator) {
        h->nranks = nranks;
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&h->mu, &ma);
        pthread_mutexattr_destroy(&ma);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&h->cv, &ca);
        pthread_condattr_destroy(&ca);
        __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) == 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ncclSuccess;
}

// Takes rank `rank` of the clique; the last rank to join removes the name
// (every rank has it mapped: nothing is left in /dev/shm).
ncclResult_t join(RankState &st, int rank) {
    Header *h = st.h;
    lock(h);
    ncclResult_t r = ncclSuccess;
    for (int q = 0; q < h->nranks && r == ncclSuccess; q++)
        if (h->taken[q] && h->pid[q] == getpid() && h->dev[q] == st.device) {
            // NCCL refuses two ranks of a clique on one GPU ("Duplicate GPU
            // detected"), and every rank's init fails. (It would also
            // deadlock here: cudaFree waits for the whole device, so for the
            // other rank's collective, which waits for this rank.) Ranks of
            // other processes are not compared: each process numbers its
            // emulated GPUs from 0.
            r = fail(ncclInvalidUsage, "Duplicate GPU detected: rank %d and rank %d both on CUDA device %d", q,
                     rank, st.device);
            fail_clique(h, ncclInvalidUsage);
            pthread_cond_broadcast(&h->cv);
            shm_unlink(st.name.c_str());  // the clique is over: leave nothing in /dev/shm
        }
    if (r == ncclSuccess && h->taken[rank]) {
        r = fail(ncclInvalidArgument, "ncclCommInitRank: rank %d joined twice", rank);
    } else if (r == ncclSuccess) {
        h->taken[rank] = 1;
        h->pid[rank] = getpid();
        h->dev[rank] = st.device;
        if (++h->joined == h->nranks) {
            shm_unlink(st.name.c_str());
            pthread_cond_broadcast(&h->cv);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

// "ncclCommInitRank implicitly syncronizes with other ranks": waits for all.
ncclResult_t wait_joined(RankState &st) {
    Header *h = st.h;
    lock(h);
    while (h->joined < h->nranks && !h->aborted && !st.aborted)
        timed_wait(h);
    ncclResult_t r = ncclSuccess;
    if (h->aborted)
        r = fail((ncclResult_t)h->aborted, "ncclCommInitRank: the clique failed (%s)",
                 ncclGetErrorString((ncclResult_t)h->aborted));
    else if (h->joined < h->nranks)
        r = fail(ncclInvalidUsage, "ncclCommInitRank: aborted during init");
    pthread_mutex_unlock(&h->mu);
    return r;
}

// ---- groups: "All calls to NCCL until ncclGroupEnd will be fused into a
// single NCCL operation. Nothing will be started on the CUDA stream until
// ncclGroupEnd." Per thread.
struct Deferred {
    std::shared_ptr<RankState> init;  // an init, or
    std::function<void()> launch;     // a collective's enqueue
    ncclUniqueId id;
    int rank = 0;
};
thread_local int group_depth = 0;
thread_local std::vector<Deferred> deferred;

// ---- reductions

template <class T>
void reduce_typed(const RankState &st, void *out, size_t n, ncclRedOp_t op) {
    T *o = (T *)out;
    for (size_t i = 0; i < n; i++) {
        T acc = ((const T *)st.slot(0))[i];
        for (int r = 1; r < st.nranks; r++) {
            T v = ((const T *)st.slot(r))[i];
            switch (op) {
            case ncclSum:
            case ncclAvg: acc = acc + v; break;
            case ncclProd: acc = acc * v; break;
            case ncclMax: acc = std::max(acc, v); break;
            case ncclMin: acc = std::min(acc, v); break;
            default: break;
            }
        }
        if (op == ncclAvg) acc = (T)(acc / (T)st.nranks);
        o[i] = acc;
    }
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;  // half, bfloat16, fp8: not emulated
    }
}

void reduce(const RankState &st, void *out, size_t n, ncclDataType_t t, ncclRedOp_t op) {
    switch (t) {
    case ncclInt8: reduce_typed<int8_t>(st, out, n, op); break;
    case ncclUint8: reduce_typed<uint8_t>(st, out, n, op); break;
    case ncclInt32: reduce_typed<int32_t>(st, out, n, op); break;
    case ncclUint32: reduce_typed<uint32_t>(st, out, n, op); break;
    case ncclInt64: reduce_typed<int64_t>(st, out, n, op); break;
    case ncclUint64: reduce_typed<uint64_t>(st, out, n, op); break;
    case ncclFloat32: reduce_typed<float>(st, out, n, op); break;
    case ncclFloat64: reduce_typed<double>(st, out, n, op); break;
    default: break;
    }
}

enum Kind { kAllReduce = 1, kBroadcast = 2 };

// The collective, on the rank's stream worker.
// counted: the call counted it in `pending` (not one captured into a CUDA
// graph, which runs at each graph launch, or never).
void run_collective(const std::shared_ptr<RankState> &st, OpMeta meta, const void *send, void *recv,
                    ncclDataType_t dt, ncclRedOp_t op, bool counted) {
    RankState &s = *st;
    size_t es = type_size(dt);
    size_t per = kChunk / es;
    bool ok = !s.failed();
    for (size_t off = 0; ok && off < meta.count; off += per) {
        size_t n = std::min(per, meta.count - off);
        if (meta.kind == kAllReduce || s.rank == meta.root)
            memcpy(s.slot(s.rank), (const char *)send + off * es, n * es);
        s.h->meta[s.rank] = meta;
        ok = s.barrier();
        if (!ok) break;
        for (int r = 0; r < s.nranks; r++) {
            const OpMeta &m = s.h->meta[r];
            if (m.seq != meta.seq || m.count != meta.count || m.kind != meta.kind || m.dtype != meta.dtype ||
                m.op != meta.op || m.root != meta.root) {
                fail(ncclInvalidUsage, "rank %d called a different collective than rank %d (#%llu)", r,
                     s.rank, (unsigned long long)meta.seq);
                lock(s.h);
                fail_clique(s.h, ncclInvalidUsage);
                pthread_cond_broadcast(&s.h->cv);
                pthread_mutex_unlock(&s.h->mu);
                ok = false;
                break;
            }
        }
        if (!ok) break;
        if (meta.kind == kAllReduce)
            reduce(s, (char *)recv + off * es, n, dt, op);
        else
            memcpy((char *)recv + off * es, s.slot(meta.root), n * es);
        ok = s.barrier();  // before the slots are written again
    }
    if (!ok) s.note_failure();
    if (counted) s.done_one();
}

ncclResult_t check_comm(ncclComm_t comm, const char *call) {
    if (comm == nullptr || !comm->st || comm->st->h == nullptr)
        return fail(ncclInvalidArgument, "%s: comm is not an initialised communicator", call);
    if (comm->st->aborted) return fail(ncclInvalidUsage, "%s: comm was aborted", call);
    return ncclSuccess;
}

ncclResult_t check_buffer(const RankState &st, const void *p, size_t bytes, const char *call,
                          const char *what) {
    size_t left = 0;
    int dev = emu_device_of(p, &left);
    if (bytes > 0 && (dev != st.device || left < bytes))
        return fail(ncclInvalidArgument, "%s: %s (%p) is not device memory of cuda:%d with %zu bytes", call,
                    what, p, st.device, bytes);
    return ncclSuccess;
}

ncclResult_t collective(const char *call, Kind kind, const void *send, void *recv, size_t count,
                        ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    if (ncclResult_t r = check_comm(comm, call)) return r;
    auto st = comm->st;
    size_t es = type_size(dt);
    if (es == 0) return fail(ncclInvalidArgument, "%s: datatype %d is not emulated", call, (int)dt);
    if (kind == kAllReduce && (op < ncclSum || op > ncclAvg))
        return fail(ncclInvalidArgument, "%s: invalid reduction %d", call, (int)op);
    if (kind == kBroadcast && (root < 0 || root >= st->nranks))
        return fail(ncclInvalidArgument, "%s: root %d outside [0, %d)", call, root, st->nranks);
    if (kind == kAllReduce || st->rank == root)
        if (ncclResult_t r = check_buffer(*st, send, count * es, call, "sendbuff")) return r;
    if (ncclResult_t r = check_buffer(*st, recv, count * es, call, "recvbuff")) return r;
    int sdev = emu_stream_device(stream);
    if (sdev != st->device)
        return fail(ncclInvalidArgument, "%s: the stream is not a stream of cuda:%d", call, st->device);
    // Numbered at the call: the order of calls is what ranks must agree on.
    OpMeta meta{++st->seq, count, kind, (int32_t)dt, kind == kAllReduce ? (int32_t)op : 0,
                kind == kBroadcast ? root : 0};
    auto launch = [st, meta, send, recv, dt, op, stream] {
        // "Starting with NCCL 2.9, NCCL operations can be captured by CUDA
        // Graphs" (NCCL User Guide, Using NCCL with CUDA Graphs): captured,
        // a collective runs at each launch of the graph, so it is no pending
        // work of the communicator. "The launch of a graph ... containing a
        // captured NCCL operation is considered collective for the same set
        // of ranks that were present in the capture": replays keep the
        // captured sequence number, the same on every rank.
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        bool counted = cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs == cudaStreamCaptureStatusNone;
        if (counted) {
            std::lock_guard lk(st->pm);
            st->pending++;
        }
        emu_count_library(stream, EmuLibrary::nccl);
        emu_enqueue(stream,
                    [st, meta, send, recv, dt, op, counted] { run_collective(st, meta, send, recv, dt, op, counted); });
    };
    if (group_depth > 0) {
        Deferred d;
        d.launch = launch;
        deferred.push_back(std::move(d));
    } else {
        launch();
    }
    return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
    // "Generates an Id to be used in ncclCommInitRank. ncclGetUniqueId
    // should be called once and the Id should be distributed to all ranks in
    // the communicator before calling ncclCommInitRank."
    if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &kMagic, sizeof kMagic);
    std::random_device rd;
    for (int i = 4; i < 20; i += 4) {
        uint32_t v = rd();
        memcpy(uniqueId->internal + i, &v, 4);
    }
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    // "rank must be between 0 and nranks-1 and unique within a communicator
    // clique. Each rank is associated to a CUDA device, which has to be set
    // before calling ncclCommInitRank. ncclCommInitRank implicitly
    // syncronizes with other ranks, so it must be called by different
    // threads/processes or use ncclGroupStart/ncclGroupEnd."
    if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || nranks > kMaxRanks)
        return fail(ncclInvalidArgument, "ncclCommInitRank: nranks %d (the emulator supports 1 to %d)", nranks,
                    kMaxRanks);
    if (rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d outside [0, %d)", rank, nranks);
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(ncclUnhandledCudaError, "ncclCommInitRank: no current CUDA device");
    }
    auto st = std::make_shared<RankState>();
    st->rank = rank;
    st->nranks = nranks;
    st->device = dev;
    auto *c = new ncclComm{st};
    *comm = c;
    if (group_depth > 0) {
        Deferred d;
        d.init = st;
        d.id = commId;
        d.rank = rank;
        deferred.push_back(std::move(d));
        return ncclSuccess;
    }
    ncclResult_t r = attach(*st, commId, nranks);
    if (r == ncclSuccess) r = join(*st, rank);
    if (r == ncclSuccess) r = wait_joined(*st);
    if (r != ncclSuccess) {
        delete c;  // no communicator: nothing for the caller to free
        *comm = nullptr;
    }
    return r;
}

ncclResult_t ncclGroupStart() {
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    // "End a group call. Start a fused NCCL operation consisting of all
    // calls since ncclGroupStart."
    if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    std::vector<Deferred> ops;
    ops.swap(deferred);
    bool inits = false, colls = false;
    for (auto &d : ops)
        (d.init ? inits : colls) = true;
    // "Both collective communication and ncclCommInitRank can be used in
    // conjunction of ncclGroupStart/ncclGroupEnd, but not together."
    if (inits && colls) return fail(ncclInvalidUsage, "ncclGroupEnd: inits and collectives in one group");
    ncclResult_t res = ncclSuccess;
    // every init of the group joins first, then all wait: one thread may
    // hold several ranks of a clique
    std::vector<bool> ok(ops.size(), false);
    for (size_t i = 0; i < ops.size(); i++) {
        if (ops[i].init) {
            ncclResult_t r = attach(*ops[i].init, ops[i].id, ops[i].init->nranks);
            if (r == ncclSuccess) r = join(*ops[i].init, ops[i].rank);
            ok[i] = r == ncclSuccess;
            if (r != ncclSuccess && res == ncclSuccess) res = r;
        } else {
            ops[i].launch();
        }
    }
    // a failed join fails the clique: no need to wait (and its message stays
    // the last error)
    for (size_t i = 0; i < ops.size() && res == ncclSuccess; i++)
        if (ops[i].init && ok[i]) {
            ncclResult_t r = wait_joined(*ops[i].init);
            if (r != ncclSuccess && res == ncclSuccess) res = r;
        }
    return res;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
    // "Creates a clique of communicators (single process version)."
    // "If devlist is NULL, the first ndev CUDA devices are used. Order of
    // devlist defines user-order of processors within the communicator."
    if (comm == nullptr || ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: comm NULL or ndev < 1");
    int ndevices = emu_device_count();
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= ndevices)
            return fail(ncclInvalidArgument, "ncclCommInitAll: no CUDA device %d", d);
    }
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    int saved = -1;
    (void)cudaGetDevice(&saved);
    ncclResult_t res = ncclGroupStart();
    for (int i = 0; i < ndev; i++) {
        cudaSetDevice(devlist ? devlist[i] : i);
        ncclResult_t r = ncclCommInitRank(&comm[i], ndev, id, i);
        if (r != ncclSuccess && res == ncclSuccess) res = r;
    }
    ncclResult_t r = ncclGroupEnd();
    if (res == ncclSuccess) res = r;
    if (saved >= 0) cudaSetDevice(saved);
    return res;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    // "Reduces data arrays of length count in sendbuff using op operation,
    // and leaves identical copies of result on each recvbuff. In-place
    // operation will happen if sendbuff == recvbuff."
    return collective("ncclAllReduce", kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
    // "Copies count elements from sendbuff on the root rank to all ranks'
    // recvbuff. sendbuff is only used on rank root and ignored for other
    // ranks."
    return collective("ncclBroadcast", kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                      stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    // "Checks whether the comm has encountered any asynchronous errors": a
    // failed collective of this rank, or a peer that failed (aborted,
    // exited) as ncclRemoteError.
    if (comm == nullptr || asyncError == nullptr || !comm->st)
        return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
    RankState &s = *comm->st;
    ncclResult_t r = (ncclResult_t)s.async.load();
    if (r == ncclSuccess && s.h != nullptr) {
        int a = __atomic_load_n(&s.h->aborted, __ATOMIC_ACQUIRE);
        if (a != 0) r = ncclRemoteError;
    }
    *asyncError = r;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    // "ncclCommFinalize flushes all issued communications, and marks
    // communicator state as ncclInProgress. The state will change to
    // ncclSuccess when the communicator is globally quiescent": a blocking
    // communicator returns once its queued collectives have run.
    if (ncclResult_t r = check_comm(comm, "ncclCommFinalize")) return r;
    RankState &s = *comm->st;
    {
        std::unique_lock lk(s.pm);
        s.pcv.wait(lk, [&] { return s.pending == 0; });
    }
    comm->finalized = true;
    ncclResult_t a = (ncclResult_t)s.async.load();
    return a == ncclSuccess ? ncclSuccess : fail(a, "ncclCommFinalize: a collective failed");
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    // "Frees local resources associated with communicator object." (NCCL
    // user guide: without an earlier ncclCommFinalize, ncclCommDestroy
    // finalizes first.)
    if (comm == nullptr) return ncclSuccess;
    ncclResult_t r = ncclSuccess;
    if (!comm->finalized && comm->st && comm->st->h && !comm->st->aborted) r = ncclCommFinalize(comm);
    delete comm;  // pending tasks keep their own reference to the rank state
    return r;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    // "Frees resources associated with communicator object and aborts any
    // operations that might still be running on the device." A collective
    // of this rank that waits for its peers ends without a result; the
    // other ranks of the clique see the failure (ncclRemoteError) as they
    // would a peer's abort. Other communicators are untouched.
    if (comm == nullptr) return ncclSuccess;
    auto st = comm->st;
    if (st) {
        st->aborted = true;
        if (st->h) {
            lock(st->h);
            fail_clique(st->h, ncclRemoteError);
            if (st->h->joined < st->h->nranks) shm_unlink(st->name.c_str());  // during init
            pthread_cond_broadcast(&st->h->cv);
            pthread_mutex_unlock(&st->h->mu);
        }
    }
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (ncclResult_t r = check_comm(comm, "ncclCommCount")) return r;
    if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->st->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    if (ncclResult_t r = check_comm(comm, "ncclCommCuDevice")) return r;
    if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = comm->st->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (ncclResult_t r = check_comm(comm, "ncclCommUserRank")) return r;
    if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->st->rank;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm) {
    // "Returns a human-readable message of the last error that occurred."
    // One message per process (comm is not needed for it). The string
    // stays valid until the next error of this process.
    (void)comm;
    static thread_local std::string copy;
    std::lock_guard lk(last_m);
    copy = last_error;
    return copy.c_str();
}

}  // extern "C"
