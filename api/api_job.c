/* api_job.c: the public C API's job of processes, its devices and its
 * statuses (include/mirrored.h): mirrored_init, mirrored_job,
 * mirrored_finalize, mirrored_list_devices, and the status and message
 * every api/ call returns (api_internal.h). */
#include <stdarg.h>
#include <stdio.h>

#include "api/api_internal.h"
#include "runtime/backend.h"
#include "session/session_job.h"

/* the API's statuses are the runtime's */
_Static_assert(MIRRORED_OK == (int)MR_OK, "status");
_Static_assert(MIRRORED_ERR_USAGE == (int)MR_ERR_USAGE, "status");
_Static_assert(MIRRORED_ERR_CONFIG == (int)MR_ERR_CONFIG, "status");
_Static_assert(MIRRORED_ERR_IO == (int)MR_ERR_IO, "status");
_Static_assert(MIRRORED_ERR_DATA == (int)MR_ERR_DATA, "status");
_Static_assert(MIRRORED_ERR_NOMEM == (int)MR_ERR_NOMEM, "status");
_Static_assert(MIRRORED_ERR_UNSUPPORTED == (int)MR_ERR_UNSUPPORTED, "status");
_Static_assert(MIRRORED_ERR_RUNTIME == (int)MR_ERR_RUNTIME, "status");
_Static_assert(MIRRORED_ERR_ABORTED == (int)MR_ERR_ABORTED, "status");
_Static_assert(MIRRORED_ERR_NOT_FOUND == (int)MR_ERR_NOT_FOUND, "status");
_Static_assert(sizeof(((mirrored_error *)0)->message) == sizeof(((mr_error *)0)->msg), "message");

/* One job per process, started once and ended once: MPI cannot start
 * again after MPI_Finalize (it aborts the process), so every call after
 * mirrored_finalize is refused. */
static mr_job job;
static int job_started, job_ended;

static mr_status refuse_ended(mr_error *err) {
    return mr_error_set(err, MR_ERR_USAGE,
                        "the job has ended (mirrored_finalize): no call may follow it");
}

mirrored_status api_fail(mirrored_error *err, const mr_error *e) {
    if (err != NULL) {
        err->status = (mirrored_status)e->status;
        snprintf(err->message, sizeof err->message, "%s",
                 e->msg[0] ? e->msg : mr_status_name(e->status));
    }
    return (mirrored_status)e->status;
}

mirrored_status api_ok(mirrored_error *err) {
    if (err != NULL) *err = (mirrored_error){.status = MIRRORED_OK};
    return MIRRORED_OK;
}

mirrored_status api_usage(mirrored_error *err, const char *fmt, ...) {
    if (err != NULL) {
        err->status = MIRRORED_ERR_USAGE;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return MIRRORED_ERR_USAGE;
}

mr_status api_job(mr_job **out, mr_error *err) {
    *out = &job;
    if (job_ended) return refuse_ended(err);
    if (job_started) return MR_OK;
    MR_CHECK(mr_session_job_init(NULL, NULL, &job, err));
    job_started = 1;
    return MR_OK;
}

MIRRORED_API const char *mirrored_version(void) {
    return MR_VERSION;
}

MIRRORED_API mirrored_status mirrored_init(int *argc, char ***argv, mirrored_error *err) {
    mr_error e = {0};
    if (job_ended) return api_fail(err, (refuse_ended(&e), &e));
    if (job_started) return api_ok(err);
    if (mr_session_job_init(argc, argv, &job, &e) != MR_OK) return api_fail(err, &e);
    job_started = 1;
    return api_ok(err);
}

MIRRORED_API mirrored_status mirrored_job(int *rank, int *size, mirrored_error *err) {
    if (rank == NULL || size == NULL) return api_usage(err, "mirrored_job: rank or size is NULL");
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    *rank = j->rank;
    *size = j->size;
    return api_ok(err);
}

MIRRORED_API void mirrored_finalize(void) {
    if (!job_started) return;
    mr_job_finalize(&job);
    job_started = 0;
    job_ended = 1;
}

/* "cpu:0\n..." of one kind's set into buf at *used */
static void put_names(const mr_device_set *d, char *buf, size_t size, size_t *used) {
    for (int i = 0; i < d->count; i++) {
        int n = snprintf(buf + *used, size > *used ? size - *used : 0, "%s:%d\n", d->kind,
                         d->ordinals[i]);
        *used += (size_t)(n > 0 ? n : 0);
    }
}

MIRRORED_API mirrored_status mirrored_list_devices(char *buf, size_t size, int *count,
                                                   mirrored_error *err) {
    if (buf == NULL || count == NULL || size == 0)
        return api_usage(err, "mirrored_list_devices: buf or count is NULL, or size is 0");
    mr_error e = {0};
    mr_job *j;
    if (api_job(&j, &e) != MR_OK) return api_fail(err, &e);
    mr_device_env env = {
        .cores = j->cores, .local_rank = j->local_rank, .local_size = j->local_size};
    /* a CPU replica per core this process may use; every GPU it sees */
    mr_device_set cpu = {.kind = "cpu", .count = j->cores > 0 ? j->cores : mr_cpu_cores()},
                  gpu = {0};
    if (cpu.count > MR_MAX_REPLICAS) cpu.count = MR_MAX_REPLICAS;
    for (int i = 0; i < cpu.count; i++)
        cpu.ordinals[i] = i;
    mr_error none = {0};
    if (mr_gpu_count() == 0 || mr_devices_parse("gpu", &env, NULL, &gpu, &none) != MR_OK)
        gpu.count = 0;
    size_t used = 0;
    buf[0] = '\0';
    put_names(&cpu, buf, size, &used);
    put_names(&gpu, buf, size, &used);
    if (used >= size)
        return api_usage(err, "mirrored_list_devices: %zu bytes of room, %zu needed", size,
                         used + 1);
    *count = cpu.count + gpu.count;
    return api_ok(err);
}
