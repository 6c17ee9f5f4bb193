// test_nccl.cc - tests of the NCCL emulation (nccl_emu.cc), modelled on
// nccl-tests' result checking: every rank fills its buffer with a
// rank-dependent pattern, the host computes the expected result (the sum in
// rank order, which the emulator promises bitwise), and each rank's result
// is compared exactly. 2, 3 and 4 ranks, as threads (ncclCommInitRank per
// thread; ncclCommInitAll with grouped collectives) and as processes (this
// program re-executed per rank, the id passed in hex); float and double,
// in and out of place, more than one staging chunk; broadcast; argument
// errors; mismatched collectives; an abort while a rank never arrives.
// Relies on: Check, the emulated runtime (MIRRORED_EMULATED_GPUS=4: one GPU
// per rank, as NCCL requires within a process).
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_emu/emu.h"

#include <check.h>  // last: it defines a macro `fail`

#define CU(call) ck_assert_int_eq((call), cudaSuccess)
#define NC(call) ck_assert_int_eq((call), ncclSuccess)

namespace {

// more than one 1 MiB staging chunk per rank, for floats and doubles
constexpr size_t kCount = 300000;

template <class T>
T pattern(int rank, size_t i) {
    // not exactly representable sums: the order of the additions shows
    return (T)(0.001 * (double)((i * 31 + (size_t)rank * 7) % 997) + 1.1 * rank + 0.3);
}

template <class T>
T expected_sum(int nranks, size_t i) {
    T acc = pattern<T>(0, i);
    for (int r = 1; r < nranks; r++)
        acc = acc + pattern<T>(r, i);
    return acc;
}

// One rank's work, whatever runs it (a thread or a process): all-reduce of
// floats in place, of doubles out of place, broadcast from the last rank.
// Returns an empty string or what was wrong.
template <class T>
std::string check_allreduce(ncclComm_t comm, int rank, int nranks, cudaStream_t s, bool in_place,
                            ncclDataType_t dt) {
    std::vector<T> h(kCount);
    for (size_t i = 0; i < kCount; i++)
        h[i] = pattern<T>(rank, i);
    T *send, *recv;
    if (cudaMalloc((void **)&send, kCount * sizeof(T)) != cudaSuccess) return "cudaMalloc";
    recv = send;
    if (!in_place && cudaMalloc((void **)&recv, kCount * sizeof(T)) != cudaSuccess) return "cudaMalloc";
    cudaMemcpyAsync(send, h.data(), kCount * sizeof(T), cudaMemcpyHostToDevice, s);
    if (ncclAllReduce(send, recv, kCount, dt, ncclSum, comm, s) != ncclSuccess) return "ncclAllReduce";
    std::vector<T> got(kCount);
    cudaMemcpyAsync(got.data(), recv, kCount * sizeof(T), cudaMemcpyDeviceToHost, s);
    std::string err;
    for (size_t i = 0; i < kCount && err.empty(); i++)
        if (got[i] != expected_sum<T>(nranks, i))
            err = "rank " + std::to_string(rank) + ": element " + std::to_string(i) + " differs";
    cudaFree(send);
    if (!in_place) cudaFree(recv);
    return err;
}

std::string check_broadcast(ncclComm_t comm, int rank, int nranks, cudaStream_t s) {
    const int root = nranks - 1;
    std::vector<int32_t> h(kCount);
    for (size_t i = 0; i < kCount; i++)
        h[i] = rank * 1000000 + (int32_t)i;
    int32_t *d;
    cudaMalloc((void **)&d, kCount * sizeof(int32_t));
    cudaMemcpyAsync(d, h.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice, s);
    if (ncclBroadcast(d, d, kCount, ncclInt32, root, comm, s) != ncclSuccess) return "ncclBroadcast";
    cudaMemcpyAsync(h.data(), d, kCount * sizeof(int32_t), cudaMemcpyDeviceToHost, s);
    cudaFree(d);
    for (size_t i = 0; i < kCount; i++)
        if (h[i] != root * 1000000 + (int32_t)i) return "broadcast: rank " + std::to_string(rank) + " differs";
    return "";
}

std::string rank_work(ncclComm_t comm, int rank, int nranks, cudaStream_t s) {
    std::string e = check_allreduce<float>(comm, rank, nranks, s, true, ncclFloat);
    if (e.empty()) e = check_allreduce<double>(comm, rank, nranks, s, false, ncclFloat64);
    if (e.empty()) e = check_broadcast(comm, rank, nranks, s);
    if (e.empty() && cudaStreamSynchronize(s) != cudaSuccess) e = "cudaStreamSynchronize";
    return e;
}

// A rank as a thread: its own device, stream, ncclCommInitRank.
void thread_rank(ncclUniqueId id, int rank, int nranks, std::string *err) {
    cudaSetDevice(rank);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        *err = "ncclCommInitRank";
        return;
    }
    *err = rank_work(comm, rank, nranks, s);
    if (ncclCommFinalize(comm) != ncclSuccess) *err += " ncclCommFinalize";
    if (ncclCommDestroy(comm) != ncclSuccess) *err += " ncclCommDestroy";
    cudaStreamDestroy(s);
}

std::string hex(const ncclUniqueId &id) {
    std::string s;
    char b[3];
    for (size_t i = 0; i < sizeof id.internal; i++) {
        snprintf(b, sizeof b, "%02x", (unsigned char)id.internal[i]);
        s += b;
    }
    return s;
}

ncclUniqueId unhex(const char *s) {
    ncclUniqueId id;
    for (size_t i = 0; i < sizeof id.internal; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        id.internal[i] = (char)v;
    }
    return id;
}

// A rank as a process (main's --rank): one emulated GPU, as under mpirun.
int process_rank(int rank, int nranks, const char *idhex) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, unhex(idhex), rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(nullptr));
        return 1;
    }
    std::string e = rank_work(comm, rank, nranks, s);
    if (ncclCommDestroy(comm) != ncclSuccess) e += " ncclCommDestroy";
    if (!e.empty()) fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
}

}  // namespace

START_TEST(threads) {
    for (int nranks = 2; nranks <= 4; nranks++) {
        ncclUniqueId id;
        NC(ncclGetUniqueId(&id));
        std::vector<std::string> errs(nranks);
        std::vector<std::thread> ts;
        for (int r = 0; r < nranks; r++)
            ts.emplace_back(thread_rank, id, r, nranks, &errs[r]);
        for (auto &t : ts)
            t.join();
        for (int r = 0; r < nranks; r++)
            ck_assert_msg(errs[r].empty(), "%d ranks, rank %d: %s", nranks, r, errs[r].c_str());
    }
}
END_TEST

START_TEST(processes) {
    for (int nranks = 2; nranks <= 4; nranks++) {
        ncclUniqueId id;
        NC(ncclGetUniqueId(&id));
        std::string idhex = hex(id);
        std::vector<pid_t> pids;
        for (int r = 0; r < nranks; r++) {
            pid_t p = fork();
            if (p == 0) {
                // one emulated GPU per process, as the project's mpirun runs
                setenv("MIRRORED_EMULATED_GPUS", "1", 1);
                std::string rs = std::to_string(r), ns = std::to_string(nranks);
                execl("/proc/self/exe", "test_gpu_emu_nccl", "--rank", rs.c_str(), ns.c_str(), idhex.c_str(),
                      (char *)nullptr);
                _exit(127);
            }
            pids.push_back(p);
        }
        for (int r = 0; r < nranks; r++) {
            int st;
            waitpid(pids[r], &st, 0);
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%d processes: rank %d failed", nranks, r);
        }
    }
}
END_TEST

START_TEST(init_all_grouped) {
    // one thread drives every rank: ncclCommInitAll, then each collective
    // of all ranks in one group
    for (int nranks = 2; nranks <= 4; nranks++) {
        std::vector<int> devs(nranks);
        for (int r = 0; r < nranks; r++)
            devs[r] = r;  // one GPU per rank, as NCCL requires
        std::vector<ncclComm_t> comms(nranks);
        CU(cudaSetDevice(1));
        NC(ncclCommInitAll(comms.data(), nranks, devs.data()));
        int cur = -1;
        CU(cudaGetDevice(&cur));
        ck_assert_int_eq(cur, 1);  // restored
        std::vector<cudaStream_t> s(nranks);
        std::vector<float *> d(nranks);
        for (int r = 0; r < nranks; r++) {
            int dev, rk, n;
            NC(ncclCommCuDevice(comms[r], &dev));
            NC(ncclCommUserRank(comms[r], &rk));
            NC(ncclCommCount(comms[r], &n));
            ck_assert_int_eq(dev, devs[r]);
            ck_assert_int_eq(rk, r);
            ck_assert_int_eq(n, nranks);
            CU(cudaSetDevice(devs[r]));
            CU(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
            std::vector<float> h(kCount);
            for (size_t i = 0; i < kCount; i++)
                h[i] = pattern<float>(r, i);
            CU(cudaMalloc((void **)&d[r], kCount * sizeof(float)));
            CU(cudaMemcpyAsync(d[r], h.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, s[r]));
        }
        NC(ncclGroupStart());
        for (int r = 0; r < nranks; r++)
            NC(ncclAllReduce(d[r], d[r], kCount, ncclFloat, ncclSum, comms[r], s[r]));
        NC(ncclGroupEnd());
        for (int r = 0; r < nranks; r++) {
            CU(cudaSetDevice(devs[r]));
            std::vector<float> h(kCount);
            CU(cudaMemcpyAsync(h.data(), d[r], kCount * sizeof(float), cudaMemcpyDeviceToHost, s[r]));
            for (size_t i = 0; i < kCount; i += 7)
                ck_assert(h[i] == expected_sum<float>(nranks, i));
            CU(cudaFree(d[r]));
            CU(cudaStreamDestroy(s[r]));
            NC(ncclCommDestroy(comms[r]));
        }
    }
}
END_TEST

START_TEST(captured_allreduce) {
    // All-reduces captured into one CUDA graph per rank (one thread drives
    // both ranks, in a group), replayed twice: each launch sums the
    // buffers' current contents; the communicator has no pending work
    // left by the capture (its destruction does not wait for it).
    const int nranks = 2;
    std::vector<int> devs = {0, 1};
    std::vector<ncclComm_t> comms(nranks);
    NC(ncclCommInitAll(comms.data(), nranks, devs.data()));
    std::vector<cudaStream_t> s(nranks);
    std::vector<float *> d(nranks);
    std::vector<cudaGraphExec_t> x(nranks);
    for (int r = 0; r < nranks; r++) {
        CU(cudaSetDevice(r));
        CU(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
        CU(cudaMalloc((void **)&d[r], kCount * sizeof(float)));
    }
    for (int r = 0; r < nranks; r++)
        CU(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeGlobal));
    NC(ncclGroupStart());
    for (int r = 0; r < nranks; r++)
        NC(ncclAllReduce(d[r], d[r], kCount, ncclFloat, ncclSum, comms[r], s[r]));
    NC(ncclGroupEnd());
    for (int r = 0; r < nranks; r++) {
        cudaGraph_t g;
        CU(cudaStreamEndCapture(s[r], &g));
        CU(cudaGraphInstantiate(&x[r], g, 0));
        CU(cudaGraphDestroy(g));
    }
    for (int rep = 0; rep < 2; rep++) {
        for (int r = 0; r < nranks; r++) {
            CU(cudaSetDevice(r));
            std::vector<float> h(kCount);
            for (size_t i = 0; i < kCount; i++)
                h[i] = pattern<float>(r, i);
            CU(cudaMemcpyAsync(d[r], h.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, s[r]));
            CU(cudaGraphLaunch(x[r], s[r]));
        }
        for (int r = 0; r < nranks; r++) {
            CU(cudaSetDevice(r));
            std::vector<float> h(kCount);
            CU(cudaMemcpyAsync(h.data(), d[r], kCount * sizeof(float), cudaMemcpyDeviceToHost, s[r]));
            for (size_t i = 0; i < kCount; i += 7)
                ck_assert(h[i] == expected_sum<float>(nranks, i));
        }
    }
    for (int r = 0; r < nranks; r++) {
        CU(cudaSetDevice(r));
        CU(cudaGraphExecDestroy(x[r]));
        CU(cudaFree(d[r]));
        CU(cudaStreamDestroy(s[r]));
        NC(ncclCommDestroy(comms[r]));
    }
}
END_TEST

START_TEST(argument_errors) {
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NC(ncclCommInitAll(comms, 2, devs));
    cudaStream_t s;
    CU(cudaSetDevice(0));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d;
    CU(cudaMalloc((void **)&d, 16 * sizeof(float)));
    float host[16];
    ck_assert_int_eq(ncclAllReduce(d, d, 16, ncclFloat, ncclSum, nullptr, s), ncclInvalidArgument);
    ck_assert_int_eq(ncclAllReduce(d, d, 16, ncclFloat16, ncclSum, comms[0], s), ncclInvalidArgument);
    ck_assert_int_eq(ncclAllReduce(host, host, 16, ncclFloat, ncclSum, comms[0], s), ncclInvalidArgument);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(comms[0]), "sendbuff"));
    ck_assert_int_eq(ncclAllReduce(d, d, 17, ncclFloat, ncclSum, comms[0], s), ncclInvalidArgument);
    // rank 1 lives on cuda:1: a buffer of cuda:0 is not its memory
    ck_assert_int_eq(ncclAllReduce(d, d, 16, ncclFloat, ncclSum, comms[1], s), ncclInvalidArgument);
    ck_assert_int_eq(ncclBroadcast(d, d, 16, ncclFloat, 2, comms[0], s), ncclInvalidArgument);
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
    ncclComm_t c;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ck_assert_int_eq(ncclCommInitRank(&c, 2, id, 0), ncclInvalidArgument);  // not an id
    NC(ncclGetUniqueId(&id));
    ck_assert_int_eq(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);  // rank >= nranks
    ck_assert_str_eq(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error");
    ck_assert_str_eq(ncclGetErrorString(ncclSuccess), "no error");
    CU(cudaFree(d));
    CU(cudaStreamDestroy(s));
    NC(ncclCommDestroy(comms[0]));
    NC(ncclCommDestroy(comms[1]));
}
END_TEST

START_TEST(duplicate_gpu) {
    ncclComm_t comms[2] = {nullptr, nullptr};
    int devs[2] = {1, 1};
    ck_assert_int_eq(ncclCommInitAll(comms, 2, devs), ncclInvalidUsage);
    ck_assert_ptr_nonnull(strstr(ncclGetLastError(nullptr), "Duplicate GPU"));
    NC(ncclCommAbort(comms[0]));
    NC(ncclCommAbort(comms[1]));
}
END_TEST

START_TEST(mismatched_collectives) {
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    NC(ncclCommInitAll(comms, 2, devs));
    cudaStream_t s[2];
    float *d[2];
    for (int r = 0; r < 2; r++) {
        CU(cudaSetDevice(r));
        CU(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
        CU(cudaMalloc((void **)&d[r], 64 * sizeof(float)));
    }
    NC(ncclAllReduce(d[0], d[0], 64, ncclFloat, ncclSum, comms[0], s[0]));
    NC(ncclAllReduce(d[1], d[1], 32, ncclFloat, ncclSum, comms[1], s[1]));  // another count
    for (int r = 0; r < 2; r++) {
        CU(cudaSetDevice(r));
        CU(cudaStreamSynchronize(s[r]));
        ncclResult_t a;
        NC(ncclCommGetAsyncError(comms[r], &a));
        ck_assert_int_ne(a, ncclSuccess);
    }
    for (int r = 0; r < 2; r++) {
        NC(ncclCommAbort(comms[r]));
        CU(cudaStreamDestroy(s[r]));
        CU(cudaFree(d[r]));
    }
}
END_TEST

START_TEST(abort_while_waiting) {
    // comms a: rank 0 posts an all-reduce, rank 1 never does; comms b: a
    // second clique on the same devices, unaffected throughout
    ncclComm_t a[2], b[2];
    int devs[2] = {0, 1};
    NC(ncclCommInitAll(a, 2, devs));
    NC(ncclCommInitAll(b, 2, devs));
    cudaStream_t s[2], t[2];
    float *d[2], *f[2];  // the buffers of a and of b
    cudaEvent_t after;
    for (int r = 0; r < 2; r++) {
        CU(cudaSetDevice(r));
        CU(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
        CU(cudaStreamCreateWithFlags(&t[r], cudaStreamNonBlocking));
        CU(cudaMalloc((void **)&d[r], 1000 * sizeof(float)));
        CU(cudaMalloc((void **)&f[r], 1000 * sizeof(float)));
        CU(cudaMemsetAsync(d[r], 0, 1000 * sizeof(float), s[r]));
        CU(cudaMemsetAsync(f[r], 0, 1000 * sizeof(float), t[r]));
    }
    CU(cudaSetDevice(0));
    CU(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
    NC(ncclAllReduce(d[0], d[0], 1000, ncclFloat, ncclSum, a[0], s[0]));
    CU(cudaEventRecord(after, s[0]));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ck_assert_int_eq(cudaEventQuery(after), cudaErrorNotReady);  // waits for rank 1
    auto other_clique_works = [&] {
        NC(ncclGroupStart());
        for (int r = 0; r < 2; r++)
            NC(ncclAllReduce(f[r], f[r], 1000, ncclFloat, ncclSum, b[r], t[r]));
        NC(ncclGroupEnd());
        for (int r = 0; r < 2; r++) {
            CU(cudaSetDevice(r));
            CU(cudaStreamSynchronize(t[r]));
        }
        CU(cudaSetDevice(0));
    };
    other_clique_works();
    NC(ncclCommAbort(a[0]));
    CU(cudaEventSynchronize(after));  // the stream behind the collective moves on
    ncclResult_t e;
    NC(ncclCommGetAsyncError(a[1], &e));
    ck_assert_int_eq(e, ncclRemoteError);  // the peer sees the abort
    NC(ncclCommAbort(a[1]));
    other_clique_works();
    for (int r = 0; r < 2; r++) {
        NC(ncclCommGetAsyncError(b[r], &e));
        ck_assert_int_eq(e, ncclSuccess);
        NC(ncclCommDestroy(b[r]));
        CU(cudaFree(d[r]));
        CU(cudaFree(f[r]));
        CU(cudaStreamDestroy(s[r]));
        CU(cudaStreamDestroy(t[r]));
    }
    CU(cudaEventDestroy(after));
}
END_TEST

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--rank") == 0)
        return process_rank(atoi(argv[2]), atoi(argv[3]), argv[4]);
    Suite *s = suite_create("gpu_emu_nccl");
    TCase *tc = tcase_create("nccl");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, threads);
    tcase_add_test(tc, processes);
    tcase_add_test(tc, init_all_grouped);
    tcase_add_test(tc, captured_allreduce);
    tcase_add_test(tc, argument_errors);
    tcase_add_test(tc, duplicate_gpu);
    tcase_add_test(tc, mismatched_collectives);
    tcase_add_test(tc, abort_while_waiting);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
