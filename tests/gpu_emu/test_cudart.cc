// test_cudart.cc - tests of the emulated CUDA runtime (cudart_emu.cc):
// devices, poisoned memory, the copy synchronisation rules, event record
// generations, the last error, and the adversarial schedules (each run in a
// child process, since the schedule is read once per process).
// Relies on: Check, emu.h (emu_enqueue: host tasks that hold a stream).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu_emu/emu.h"
#include "tests/gpu_emu/emu_counters.h"

// after the C++ headers: check.h defines a macro `fail`
#include <check.h>

#define CU(call) ck_assert_int_eq((call), cudaSuccess)

namespace {

// A host task on a stream that blocks until the test opens it.
struct Gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
    void wait() {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return open; });
    }
    void release() {
        {
            std::lock_guard lk(m);
            open = true;
        }
        cv.notify_all();
    }
};

std::shared_ptr<Gate> hold(cudaStream_t s) {
    auto g = std::make_shared<Gate>();
    emu_enqueue(s, [g] { g->wait(); });
    return g;
}

void sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The host's steady clock in milliseconds, the clock a timing event's
// record reads (cudart_emu.cc).
double host_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Runs scenario `name` (below) in a fresh process (this program with
// --child, so that no emulator state is inherited) with the environment
// setting `env` (VAR=value); its result (a string) comes back on its stdout.
std::string run_child(const char *env, const char *name, int *signal_out = nullptr) {
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        putenv(strdup(env));
        execl("/proc/self/exe", "test_gpu_emu_cudart", "--child", name, (char *)nullptr);
        _exit(127);
    }
    close(fd[1]);
    std::string out;
    char buf[256];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0)
        out.append(buf, (size_t)k);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (signal_out)
        *signal_out = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    else
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return out;
}

void expect_child(const char *env, const char *name, const char *want) {
    std::string r = run_child(env, name);
    ck_assert_str_eq(r.c_str(), want);
}

std::string visible() {
    int n = 0;
    cudaDeviceProp p;
    bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n == 1 &&
              cudaGetDeviceProperties(&p, 0) == cudaSuccess &&
              strcmp(p.name, "Emulated GPU 1") == 0;
    return ok ? "ok" : "wrong";
}

std::string nogpu() {
    int n = -1;
    void *p;
    bool ok = cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0 &&
              cudaMalloc(&p, 4) == cudaErrorNoDevice && cudaSetDevice(0) == cudaErrorNoDevice;
    return ok ? "ok" : "wrong";
}

// Two streams log their operations: unsynchronised (u) and with b waiting
// for all of a's work (s).
std::string interleave(bool sync) {
    cudaStream_t a, b;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    auto mu = std::make_shared<std::mutex>();
    auto log = std::make_shared<std::string>();
    for (int i = 0; i < 8; i++)
        emu_enqueue(a, [=] {
            std::lock_guard lk(*mu);
            *log += 'a';
        });
    if (sync) {
        cudaEventRecord(ev, a);
        cudaStreamWaitEvent(b, ev, 0);
    }
    for (int i = 0; i < 8; i++)
        emu_enqueue(b, [=] {
            std::lock_guard lk(*mu);
            *log += 'b';
        });
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    return *log;
}

std::string interleave_u() {
    return interleave(false);
}
std::string interleave_s() {
    return interleave(true);
}

// The project's upload pattern: a copy on the second ("copy") stream, read
// by the first ("compute") stream with or without waiting for it.
std::string upload(bool wait) {
    cudaStream_t compute, copy;
    cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
    cudaEvent_t copied;
    cudaEventCreateWithFlags(&copied, cudaEventDisableTiming);
    float *buf, *out, *pinned;
    cudaMalloc((void **)&buf, sizeof(float));
    cudaMalloc((void **)&out, sizeof(float));
    cudaHostAlloc((void **)&pinned, sizeof(float), cudaHostAllocPortable);
    *pinned = 42.0f;
    cudaMemsetAsync(buf, 0, sizeof(float), compute);
    cudaStreamSynchronize(compute);
    cudaMemcpyAsync(buf, pinned, sizeof(float), cudaMemcpyHostToDevice, copy);
    cudaEventRecord(copied, copy);
    if (wait) cudaStreamWaitEvent(compute, copied, 0);
    cudaMemcpyAsync(out, buf, sizeof(float), cudaMemcpyDeviceToDevice, compute);
    float r = -1;
    cudaMemcpyAsync(&r, out, sizeof(float), cudaMemcpyDeviceToHost, compute);
    cudaStreamSynchronize(copy);
    return std::to_string((int)r);
}

std::string upload_nowait() {
    return upload(false);
}
std::string upload_wait() {
    return upload(true);
}

// MIRRORED_EMU_CHECK_HOST_ACCESS=1: stream work reaches device memory; the
// host touching it faults (this scenario dies of SIGSEGV).
std::string host_touch() {
    float *d;
    cudaMalloc((void **)&d, 64);
    cudaMemsetAsync(d, 0, 64, nullptr);
    cudaDeviceSynchronize();
    volatile float x = d[3]; // the bug the check catches
    return std::to_string(x);
}

const struct {
    const char *name;
    std::string (*run)();
} scenarios[] = {
    {"visible", visible},
    {"nogpu", nogpu},
    {"interleave_u", interleave_u},
    {"interleave_s", interleave_s},
    {"upload_nowait", upload_nowait},
    {"upload_wait", upload_wait},
    {"host_touch", host_touch},
};

} // namespace

START_TEST(devices) {
    int n = -1, v = 0;
    CU(cudaGetDeviceCount(&n));
    ck_assert_int_eq(n, 2);
    CU(cudaDriverGetVersion(&v));
    ck_assert_int_eq(v, CUDART_VERSION);
    CU(cudaRuntimeGetVersion(&v));
    ck_assert_int_eq(v, CUDART_VERSION);
    cudaDeviceProp p0, p1;
    CU(cudaGetDeviceProperties(&p0, 0));
    CU(cudaGetDeviceProperties(&p1, 1));
    ck_assert_str_eq(p0.name, "Emulated GPU 0");
    ck_assert_str_eq(p1.name, "Emulated GPU 1");
    ck_assert_int_eq(p0.major, 9);
    ck_assert_int_eq(p0.minor, 0);
    ck_assert_uint_eq(p0.totalGlobalMem, (size_t)8 << 30);
    ck_assert_int_ne(p0.pciBusID, p1.pciBusID);
    int d = -1;
    CU(cudaGetDevice(&d));
    ck_assert_int_eq(d, 0);
    CU(cudaSetDevice(1));
    CU(cudaGetDevice(&d));
    ck_assert_int_eq(d, 1);
    // the current device is per thread
    std::thread([] {
        int e = -1;
        ck_assert_int_eq(cudaGetDevice(&e), cudaSuccess);
        ck_assert_int_eq(e, 0);
    }).join();
    ck_assert_int_eq(cudaSetDevice(2), cudaErrorInvalidDevice);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidDevice);
}
END_TEST

START_TEST(visible_devices) {
    // the device list is read once per process: each case in a child
    expect_child("CUDA_VISIBLE_DEVICES=1", "visible", "ok");
    expect_child("MIRRORED_EMULATED_GPUS=0", "nogpu", "ok");
}
END_TEST

START_TEST(poison_and_known_answer) {
    float *d = nullptr, *e = nullptr;
    CU(cudaMalloc((void **)&d, 100 * sizeof(float)));
    CU(cudaMalloc((void **)&e, 100 * sizeof(float)));
    size_t left = 0;
    ck_assert_int_eq(emu_device_of(d + 10, &left), 0);
    ck_assert_uint_eq(left, 90 * sizeof(float));
    ck_assert_int_eq(emu_device_of(&left, nullptr), -1);
    std::vector<float> h(100, 1.0f);
    // "The memory is not cleared": the poison shows
    CU(cudaMemcpyAsync(h.data(), d, 100 * sizeof(float), cudaMemcpyDeviceToHost, 0));
    for (float x : h)
        ck_assert(std::isnan(x));
    for (int i = 0; i < 100; i++)
        h[i] = (float)i;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaMemcpyAsync(d, h.data(), 100 * sizeof(float), cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(e, d, 100 * sizeof(float), cudaMemcpyDeviceToDevice, s));
    CU(cudaMemsetAsync(e, 0, 10 * sizeof(float), s));
    std::vector<float> r(100, -1.0f);
    CU(cudaMemcpyAsync(r.data(), e, 100 * sizeof(float), cudaMemcpyDeviceToHost, s));
    for (int i = 0; i < 100; i++)
        ck_assert_float_eq(r[i], i < 10 ? 0.0f : (float)i);
    // bounds and directions are checked
    ck_assert_int_eq(
        cudaMemcpyAsync(d + 1, h.data(), 100 * sizeof(float), cudaMemcpyHostToDevice, s),
        cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpyAsync(h.data(), r.data(), 4, cudaMemcpyHostToDevice, s),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemsetAsync(h.data(), 0, 4, s), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
    size_t fr, tot;
    CU(cudaMemGetInfo(&fr, &tot));
    ck_assert_uint_eq(tot - fr, 200 * sizeof(float));
    CU(cudaFree(d));
    CU(cudaFree(e));
    CU(cudaMemGetInfo(&fr, &tot));
    ck_assert_uint_eq(tot, fr);
    ck_assert_int_eq(cudaFree(h.data()), cudaErrorInvalidValue);
    void *big;
    ck_assert_int_eq(cudaMalloc(&big, (size_t)9 << 30), cudaErrorMemoryAllocation);
    CU(cudaStreamDestroy(s));
    (void)cudaGetLastError();
}
END_TEST

START_TEST(copy_synchronisation) {
    const size_t n = 1 << 16;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d;
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    std::vector<float> src(n, 3.0f);
    CU(cudaMemsetAsync(d, 0, n * sizeof(float), s));
    // pageable -> device: staged at the call; the source may change at once
    auto g = hold(s);
    CU(cudaMemcpyAsync(d, src.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    std::fill(src.begin(), src.end(), -7.0f);
    g->release();
    // device -> pageable: complete when the call returns, though the stream
    // was busy for 50 ms before it
    emu_enqueue(s, [] { sleep_ms(50); });
    std::vector<float> back(n, 0.0f);
    CU(cudaMemcpyAsync(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    for (size_t i = 0; i < n; i += 997)
        ck_assert_float_eq(back[i], 3.0f);
    // device -> pinned: asynchronous; the data is there after a sync
    float *pinned;
    CU(cudaHostAlloc((void **)&pinned, n * sizeof(float), cudaHostAllocPortable));
    ck_assert(emu_is_pinned(pinned + 5));
    std::memset(pinned, 0, n * sizeof(float));
    g = hold(s);
    CU(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    ck_assert_float_eq(pinned[0], 0.0f); // not yet: the stream is held
    ck_assert_int_eq(cudaStreamQuery(s), cudaErrorNotReady);
    g->release();
    CU(cudaStreamSynchronize(s));
    ck_assert_float_eq(pinned[n - 1], 3.0f);
    // pinned -> device: asynchronous, reads the source when it runs
    g = hold(s);
    for (size_t i = 0; i < n; i++)
        pinned[i] = 1.0f;
    CU(cudaMemcpyAsync(d, pinned, n * sizeof(float), cudaMemcpyHostToDevice, s));
    pinned[0] = 5.0f; // before the copy runs: it is copied
    g->release();
    CU(cudaMemcpyAsync(back.data(), d, 2 * sizeof(float), cudaMemcpyDeviceToHost, s));
    ck_assert_float_eq(back[0], 5.0f);
    ck_assert_float_eq(back[1], 1.0f);
    CU(cudaFreeHost(pinned));
    CU(cudaFree(d));
    CU(cudaStreamDestroy(s));
}
END_TEST

START_TEST(event_generations) {
    cudaStream_t a, b;
    CU(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    // never recorded: complete, and a wait on it passes at once
    CU(cudaEventQuery(ev));
    CU(cudaStreamWaitEvent(b, ev, 0));
    CU(cudaStreamSynchronize(b));
    auto g1 = hold(a);
    CU(cudaEventRecord(ev, a)); // generation 1: after g1
    ck_assert_int_eq(cudaEventQuery(ev), cudaErrorNotReady);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess); // not ready is no error
    CU(cudaStreamWaitEvent(b, ev, 0));                 // binds to generation 1
    std::atomic<int> ran{0};
    emu_enqueue(b, [&ran] { ran = 1; });
    auto g2 = hold(a);
    CU(cudaEventRecord(ev, a)); // generation 2: after g2; b's wait is unchanged
    sleep_ms(20);
    ck_assert_int_eq(ran.load(), 0);
    g1->release();
    CU(cudaStreamSynchronize(b)); // returns though generation 2 is pending
    ck_assert_int_eq(ran.load(), 1);
    ck_assert_int_eq(cudaEventQuery(ev), cudaErrorNotReady);
    g2->release();
    CU(cudaEventSynchronize(ev));
    CU(cudaEventQuery(ev));
    // destroyed while pending: a queued wait still completes
    auto g3 = hold(a);
    CU(cudaEventRecord(ev, a));
    CU(cudaStreamWaitEvent(b, ev, 0));
    CU(cudaEventDestroy(ev));
    ck_assert_int_eq(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
    g3->release();
    CU(cudaStreamSynchronize(b));
    CU(cudaStreamDestroy(a));
    CU(cudaStreamDestroy(b));
    (void)cudaGetLastError();
}
END_TEST

// cudaEventElapsedTime: the time between two records as the stream ran
// them (a 30 ms task between them), and the documented errors. The upper
// bounds are the host's own clock around the stream's work, not a guess at
// how fast the machine is: an interval the stream ran lies within the one
// in which the host saw it run.
START_TEST(event_elapsed_time) {
    cudaStream_t a;
    CU(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    cudaEvent_t t0, t1, untimed;
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    CU(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    float ms = -1.0f;
    // never recorded
    ck_assert_int_eq(cudaEventElapsedTime(&ms, t0, t1), cudaErrorInvalidResourceHandle);
    ck_assert_int_eq(cudaEventElapsedTime(nullptr, t0, t1), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    // the stream runs t0, then the host time the gate is shut, then 30 ms, then t1
    auto g = hold(a);
    CU(cudaEventRecord(t0, a));
    emu_enqueue(a, [] { sleep_ms(30); });
    CU(cudaEventRecord(t1, a));
    CU(cudaEventRecord(untimed, a));
    ck_assert_int_eq(cudaEventElapsedTime(&ms, t0, t1), cudaErrorNotReady);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess); // not ready is no error
    sleep_ms(20);                                      // host time: not in the interval
    const double released = host_ms();
    g->release();
    CU(cudaEventSynchronize(t1));
    const double t1_done = host_ms();
    CU(cudaEventElapsedTime(&ms, t0, t1));
    ck_assert_float_ge(ms, 29.5f);
    ck_assert_double_le(ms, t1_done - released + 0.01);
    float back = 0.0f;
    CU(cudaEventElapsedTime(&back, t1, t0)); // the other way round: negative
    ck_assert_float_eq(back, -ms);
    CU(cudaEventElapsedTime(&back, t0, t0));
    ck_assert_float_eq(back, 0.0f);
    ck_assert_int_eq(cudaEventElapsedTime(&ms, t0, untimed), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    // a record again: the new time (after t1's), not the previous one's (30 ms before)
    CU(cudaEventRecord(t0, a));
    CU(cudaEventSynchronize(t0));
    const double t0_done = host_ms();
    CU(cudaEventElapsedTime(&back, t1, t0));
    ck_assert_float_ge(back, 0.0f);
    ck_assert_double_le(back, t0_done - released + 0.01);
    CU(cudaEventDestroy(t0));
    ck_assert_int_eq(cudaEventElapsedTime(&ms, t0, t1), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    CU(cudaEventDestroy(t1));
    CU(cudaEventDestroy(untimed));
    CU(cudaStreamDestroy(a));
}
END_TEST

START_TEST(last_error) {
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    void *p;
    ck_assert_int_eq(cudaMalloc(nullptr, 4), cudaErrorInvalidValue);
    CU(cudaMalloc(&p, 4)); // a success keeps the recorded error
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    // per thread
    ck_assert_int_eq(cudaStreamSynchronize((cudaStream_t)&p), cudaErrorInvalidResourceHandle);
    std::thread([] { ck_assert_int_eq(cudaGetLastError(), cudaSuccess); }).join();
    ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    ck_assert_str_eq(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    ck_assert_str_eq(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    ck_assert_str_eq(cudaGetErrorString((cudaError_t)12345), "unrecognized error code");
    CU(cudaFree(p));
}
END_TEST

START_TEST(legacy_stream) {
    // cudaMemset goes on stream 0; a blocking stream orders after it, and
    // stream 0 after a blocking stream's earlier work
    float *d;
    CU(cudaMalloc((void **)&d, 16));
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    auto g = hold(s);
    CU(cudaMemset(d, 0, 16)); // waits for the held stream
    std::atomic<int> order{0};
    emu_enqueue(nullptr, [&order] { order = order * 10 + 2; });
    emu_enqueue(s, [&order] { order = order * 10 + 1; }); // waits for stream 0
    sleep_ms(20);
    ck_assert_int_eq(order.load(), 0);
    g->release();
    CU(cudaDeviceSynchronize());
    ck_assert_int_eq(order.load(), 21);
    CU(cudaStreamDestroy(s));
    CU(cudaFree(d));
}
END_TEST

// ---- adversarial schedules: each scenario in a child with the schedule set

START_TEST(schedule_delay) {
    std::vector<std::string> seen;
    for (int seed = 1; seed <= 6; seed++) {
        std::string sched = "MIRRORED_EMU_SCHEDULE=delay:" + std::to_string(seed);
        expect_child(sched.c_str(), "interleave_s", "aaaaaaaabbbbbbbb");
        std::string u = run_child(sched.c_str(), "interleave_u");
        ck_assert_uint_eq(u.size(), 16);
        if (std::find(seen.begin(), seen.end(), u) == seen.end()) seen.push_back(u);
    }
    // random 0-2 ms delays interleave the unsynchronised streams differently
    ck_assert_uint_ge(seen.size(), 2);
}
END_TEST

START_TEST(schedule_late) {
    // the copy is held until something waits for it: a missing wait reads
    // the old contents, deterministically. The hold's bound is 10 minutes
    // here, not the default 200 ms, which a loaded machine could spend
    // before the compute stream reads (the scenario's last call waits for
    // the copy stream, which ends the hold).
    expect_child("MIRRORED_EMU_SCHEDULE=late:1:600000", "upload_nowait", "0");
    expect_child("MIRRORED_EMU_SCHEDULE=late:1", "upload_wait", "42");
    expect_child("MIRRORED_EMU_SCHEDULE=fifo", "upload_wait", "42");
    expect_child("MIRRORED_EMU_SCHEDULE=late:2", "interleave_s", "aaaaaaaabbbbbbbb");
}
END_TEST

START_TEST(host_access_check) {
    // the normal traffic works with the check on
    expect_child("MIRRORED_EMU_CHECK_HOST_ACCESS=1", "upload_wait", "42");
    expect_child("MIRRORED_EMU_CHECK_HOST_ACCESS=1", "interleave_s", "aaaaaaaabbbbbbbb");
    int sig = 0;
    run_child("MIRRORED_EMU_CHECK_HOST_ACCESS=1", "host_touch", &sig);
    ck_assert_int_eq(sig, SIGSEGV);
    // without the check, the host reads the bytes (zeros)
    expect_child("MIRRORED_EMU_CHECK_HOST_ACCESS=0", "host_touch", "0.000000");
}
END_TEST

// A capture records the stream's operations without running them; each
// launch of the instantiated graph runs them again, in order, on the
// launch's stream.
START_TEST(capture_replayed) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *d;
    CU(cudaMalloc((void **)&d, sizeof(int)));
    int *pinned;
    CU(cudaMallocHost((void **)&pinned, sizeof(int)));
    CU(cudaMemset(d, 0, sizeof(int)));
    CU(cudaDeviceSynchronize());
    auto runs = std::make_shared<std::atomic<int>>(0);
    cudaStreamCaptureStatus st;
    CU(cudaStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, cudaStreamCaptureStatusNone);
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CU(cudaStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, cudaStreamCaptureStatusActive);
    emu_enqueue(s, [runs, d] { *d = ++*runs * 10; });  // a "kernel"
    CU(cudaMemcpyAsync(pinned, d, sizeof(int), cudaMemcpyDeviceToHost, s));
    ck_assert_int_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    cudaGraph_t g;
    CU(cudaStreamEndCapture(s, &g));
    ck_assert_ptr_nonnull(g);
    CU(cudaStreamSynchronize(s));
    ck_assert_int_eq(runs->load(), 0);  // captured, not run
    cudaGraphExec_t x;
    CU(cudaGraphInstantiate(&x, g, 0));
    CU(cudaGraphDestroy(g));  // the executable graph is a copy
    for (int k = 1; k <= 3; k++) {
        *pinned = -1;
        CU(cudaGraphLaunch(x, s));
        CU(cudaStreamSynchronize(s));
        ck_assert_int_eq(runs->load(), k);
        ck_assert_int_eq(*pinned, 10 * k);
    }
    CU(cudaGraphExecDestroy(x));
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureUnmatched);
    ck_assert_int_eq(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
                     cudaErrorStreamCaptureUnsupported);  // the legacy stream
    cudaGetLastError();
    CU(cudaFreeHost(pinned));
    CU(cudaFree(d));
    CU(cudaStreamDestroy(s));
}
END_TEST

// The calls a capture forbids fail and invalidate it: then the work queued
// on the stream is refused, and the end of the capture gives no graph.
START_TEST(capture_invalidated) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *p = nullptr;
    CU(cudaMalloc(&p, 64));
    // each forbidden call, in a capture of its own
    auto forbidden = [&](int which) -> cudaError_t {
        void *q = nullptr;
        switch (which) {
        case 0: return cudaStreamSynchronize(s);
        case 1: return cudaDeviceSynchronize();
        case 2: return cudaMalloc(&q, 16);
        case 3: return cudaStreamQuery(s);
        case 4: return cudaFree(p);
        case 5: {
            char h[64] = {0};  // pageable: read at the call, not at each replay
            return cudaMemcpyAsync(p, h, 64, cudaMemcpyHostToDevice, s);
        }
        default: {
            char h[64];  // pageable: the copy would wait
            return cudaMemcpyAsync(h, p, 64, cudaMemcpyDeviceToHost, s);
        }
        }
    };
    for (int which = 0; which < 7; which++) {
        CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        ck_assert_int_eq(forbidden(which), cudaErrorStreamCaptureUnsupported);
        cudaStreamCaptureStatus st;
        CU(cudaStreamIsCapturing(s, &st));
        ck_assert_int_eq(st, cudaStreamCaptureStatusInvalidated);
        ck_assert_int_eq(cudaMemsetAsync(p, 0, 64, s), cudaErrorStreamCaptureInvalidated);
        cudaGraph_t g = (cudaGraph_t)&st;
        ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
        ck_assert_ptr_null(g);
        CU(cudaStreamIsCapturing(s, &st));
        ck_assert_int_eq(st, cudaStreamCaptureStatusNone);
        cudaGetLastError();
    }
    // relaxed mode allows an allocation (not stream-ordered, not captured)
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    void *q = nullptr;
    CU(cudaMalloc(&q, 16));
    cudaGraph_t g;
    CU(cudaStreamEndCapture(s, &g));
    CU(cudaGraphDestroy(g));
    CU(cudaFree(q));
    // a stream destroyed while capturing leaves no capture that forbids calls
    cudaStream_t s2;
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CU(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    CU(cudaStreamDestroy(s2));
    CU(cudaMalloc(&q, 16));
    CU(cudaFree(q));
    CU(cudaFree(p));
    CU(cudaStreamDestroy(s));
}
END_TEST

// The counters see each call once, on the stream's device; a graph's
// operations count when captured, and its launches as graph launches.
START_TEST(counters) {
    mr_emu_counters_reset();
    mr_emu_counters c;
    mr_emu_counters_get(-1, &c);
    ck_assert_uint_eq(c.ops + c.allocs + c.host_syncs, 0);
    CU(cudaSetDevice(1));
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d, *d2, *pinned;
    CU(cudaMalloc((void **)&d, 1000));
    CU(cudaMalloc((void **)&d2, 1000));
    CU(cudaMallocHost((void **)&pinned, 1000));
    CU(cudaMemcpyAsync(d, pinned, 1000, cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(d2, d, 600, cudaMemcpyDeviceToDevice, s));
    CU(cudaMemcpyAsync(d2, d, 400, cudaMemcpyDefault, s));
    CU(cudaMemcpyAsync(pinned, d2, 1000, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    float h[4];
    CU(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));  // waits
    mr_emu_counters_get(1, &c);
    ck_assert_uint_eq(c.allocs, 3);
    ck_assert_uint_eq(c.copies[MR_EMU_COPY_H2D], 1);
    ck_assert_uint_eq(c.copy_bytes[MR_EMU_COPY_H2D], 1000);
    ck_assert_uint_eq(c.copies[MR_EMU_COPY_D2D], 2);
    ck_assert_uint_eq(c.copy_bytes[MR_EMU_COPY_D2D], 1000);
    ck_assert_uint_eq(c.copies[MR_EMU_COPY_D2H], 2);
    ck_assert_uint_eq(c.copy_bytes[MR_EMU_COPY_D2H], 1000 + sizeof h);
    ck_assert_uint_eq(c.host_syncs, 2);  // the stream synchronize, the cudaMemcpy
    ck_assert_uint_eq(c.ops, 5);
    mr_emu_counters d0;
    mr_emu_counters_get(0, &d0);
    ck_assert_uint_eq(d0.ops + d0.allocs, 0);  // all on device 1
    // captured once, launched twice
    mr_emu_counters_reset();
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CU(cudaMemsetAsync(d, 0, 1000, s));
    emu_enqueue(s, [] {});
    cudaGraph_t g;
    CU(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t x;
    CU(cudaGraphInstantiate(&x, g, 0));
    CU(cudaGraphLaunch(x, s));
    CU(cudaGraphLaunch(x, s));
    CU(cudaStreamSynchronize(s));
    mr_emu_counters_get(-1, &c);
    ck_assert_uint_eq(c.memsets, 1);
    ck_assert_uint_eq(c.ops, 2);
    ck_assert_uint_eq(c.graph_launches, 2);
    ck_assert_uint_eq(c.ops_replayed, 4);
    ck_assert_uint_eq(c.host_syncs, 1);
    CU(cudaGraphExecDestroy(x));
    CU(cudaGraphDestroy(g));
    CU(cudaFree(d));
    CU(cudaFree(d2));
    CU(cudaFreeHost(pinned));
    mr_emu_counters_get(-1, &c);
    ck_assert_uint_eq(c.frees, 3);
    CU(cudaStreamDestroy(s));
}
END_TEST

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        for (auto &sc : scenarios)
            if (strcmp(sc.name, argv[2]) == 0) {
                std::string r = sc.run();
                fwrite(r.data(), 1, r.size(), stdout);
                return 0;
            }
        return 2;
    }
    Suite *s = suite_create("gpu_emu_cudart");
    TCase *tc = tcase_create("cudart");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, devices);
    tcase_add_test(tc, visible_devices);
    tcase_add_test(tc, poison_and_known_answer);
    tcase_add_test(tc, copy_synchronisation);
    tcase_add_test(tc, event_generations);
    tcase_add_test(tc, event_elapsed_time);
    tcase_add_test(tc, last_error);
    tcase_add_test(tc, legacy_stream);
    tcase_add_test(tc, schedule_delay);
    tcase_add_test(tc, schedule_late);
    tcase_add_test(tc, host_access_check);
    tcase_add_test(tc, capture_replayed);
    tcase_add_test(tc, capture_invalidated);
    tcase_add_test(tc, counters);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
