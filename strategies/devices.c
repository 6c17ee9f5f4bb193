/* devices.c: device spec parsing and device listing (see devices.h). */
#include "strategies/devices.h"

#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The GPUs this process sees: the build's "gpu" kind's, or none with the
 * reason where the build has no such kind. */
static const mr_gpu_list *gpus_seen(void) {
    return mr_backend_kind_devices(mr_backend_kind_find("gpu"));
}

int mr_gpu_count(void) {
    return gpus_seen()->count;
}

const mr_backend_kind *mr_devices_kind(const mr_device_set *set) {
    return mr_backend_kind_find(set->kind);
}

/* The devices argument with `value`, as the caller names it (`named`, a
 * printf format with one %s; NULL: "devices 'gpu'"), into buf[n]. */
static const char *arg(const char *named, const char *value, char *buf, size_t n) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(buf, n, named != NULL ? named : "devices '%s'", value);
#pragma GCC diagnostic pop
    return buf;
}

static mr_status no_gpu(const char *spec, const char *named, const mr_gpu_list *gpus,
                        mr_error *err) {
    char asked[300], instead[300];
    return mr_error_set(err, MR_ERR_UNSUPPORTED, "%s: no GPU available (%s); use %s or cpu:N",
                        arg(named, spec, asked, sizeof asked),
                        gpus->reason[0] ? gpus->reason : "the CUDA runtime sees no GPU",
                        arg(named, "cpu", instead, sizeof instead));
}

/* "0,2" into out->ordinals: indices of visible GPUs, each once. */
static mr_status parse_gpu_list(const char *said, const char *p, const mr_gpu_list *gpus,
                                mr_device_set *out, mr_error *err) {
    while (1) {
        char *end;
        errno = 0;
        long i = strtol(p, &end, 10);
        if (end == p || errno || !isdigit((unsigned char)*p) || (*end != ',' && *end != '\0'))
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s: '%s' is not a list of GPU indices (use gpu:0,2)", said, p);
        if (i >= gpus->count)
            return mr_error_set(err, MR_ERR_UNSUPPORTED,
                                "%s: there is no GPU %ld (%d visible: 0..%d)", said, i, gpus->count,
                                gpus->count - 1);
        for (int k = 0; k < out->count; k++)
            if (out->ordinals[k] == (int)i)
                return mr_error_set(err, MR_ERR_USAGE, "%s: GPU %ld listed twice", said, i);
        if (out->count == MR_MAX_REPLICAS)
            return mr_error_set(err, MR_ERR_USAGE, "%s: more than %d GPUs", said, MR_MAX_REPLICAS);
        out->ordinals[out->count++] = (int)i;
        if (*end == '\0') return MR_OK;
        p = end + 1;
    }
}

/* The GPUs of "gpu", "gpu:LIST" (or "auto" with GPUs), then this process's
 * part of them when the node has several processes that see the same GPUs
 * (with GPUs of its own, it takes them all). */
static mr_status parse_gpus(const char *spec, const char *named, const char *said,
                            const mr_device_env *env, const mr_gpu_list *gpus, mr_device_set *out,
                            mr_error *err) {
    snprintf(out->kind, sizeof out->kind, "gpu");
    /* first: a process that sees no GPU says why the node's setup is wrong, as the others do */
    if (env->gpus_conflict != NULL)
        return mr_error_set(err, MR_ERR_UNSUPPORTED, "%s: %s", said, env->gpus_conflict);
    if (gpus->count == 0) return no_gpu(spec, named, gpus, err);
    if (strncmp(spec, "gpu:", 4) == 0) {
        MR_CHECK(parse_gpu_list(said, spec + 4, gpus, out, err));
    } else {
        out->count = gpus->count < MR_MAX_REPLICAS ? gpus->count : MR_MAX_REPLICAS;
        for (int i = 0; i < out->count; i++)
            out->ordinals[i] = gpus->gpu[i].ordinal;
    }
    int procs = env->local_size > 1 && !env->gpus_own ? env->local_size : 1;
    if (procs == 1) return MR_OK;
    if (out->count < procs)
        return mr_error_set(err, MR_ERR_UNSUPPORTED,
                            "%s: %d processes on this node but %d GPU%s for them (one "
                            "GPU or more per process: mpirun -np at most the GPUs of a node)",
                            said, procs, out->count, out->count == 1 ? "" : "s");
    /* process k of n takes the k-th of n equal parts, in list order */
    int per = out->count / procs;
    memmove(out->ordinals, out->ordinals + env->local_rank * per, sizeof(int) * (size_t)per);
    out->count = per;
    return MR_OK;
}

static int sees(const mr_gpu_list *l, const char *bus_id) {
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->gpu[i].pci_bus_id, bus_id) == 0) return 1;
    return 0;
}

#define SHARE_HINT "give every process all the node's GPUs or each its own (CUDA_VISIBLE_DEVICES)"

mr_status mr_devices_gpu_sharing(const mr_gpu_list *const *lists, int n, int *own, mr_error *err) {
    *own = 0;
    /* the same set everywhere (bus ids are unique within a list) */
    int same = 1;
    for (int k = 1; k < n && same; k++) {
        same = lists[k]->count == lists[0]->count;
        for (int i = 0; i < lists[k]->count && same; i++)
            same = sees(lists[0], lists[k]->gpu[i].pci_bus_id);
    }
    if (same) return MR_OK;
    /* else pairwise disjoint, none empty */
    for (int j = 0; j < n; j++)
        for (int k = j + 1; k < n; k++)
            for (int i = 0; i < lists[j]->count; i++)
                if (sees(lists[k], lists[j]->gpu[i].pci_bus_id))
                    return mr_error_set(err, MR_ERR_UNSUPPORTED,
                                        "processes %d and %d of this node both see GPU %s but not "
                                        "the same GPUs: " SHARE_HINT,
                                        j, k, lists[j]->gpu[i].pci_bus_id);
    for (int k = 0; k < n; k++)
        if (lists[k]->count == 0)
            for (int j = 0; j < n; j++)
                if (lists[j]->count > 0)
                    return mr_error_set(err, MR_ERR_UNSUPPORTED,
                                        "process %d of this node sees no GPU while process %d "
                                        "sees %d: " SHARE_HINT,
                                        k, j, lists[j]->count);
    *own = 1;
    return MR_OK;
}

/* What one process sees, for the job's all-gather: its node and bus ids. */
typedef struct seen_gpus {
    int node, local_rank, count;
    char bus_id[MR_MAX_GPUS][sizeof(((mr_gpu_info *)0)->pci_bus_id)];
} seen_gpus;

mr_status mr_devices_job_env(mr_job *job, mr_device_env *env, char *conflict, size_t n,
                             mr_error *err) {
    *env = (mr_device_env){
        .cores = job->cores, .local_rank = job->local_rank, .local_size = job->local_size};
    if (n > 0) conflict[0] = '\0';
    if (job->size == 1) return MR_OK;
    const mr_gpu_list *gpus = gpus_seen();
    seen_gpus mine = {.node = job->node, .local_rank = job->local_rank, .count = gpus->count};
    for (int i = 0; i < gpus->count; i++)
        snprintf(mine.bus_id[i], sizeof mine.bus_id[i], "%s", gpus->gpu[i].pci_bus_id);
    int local = job->local_size > 1 ? job->local_size : 1;
    seen_gpus *all = calloc((size_t)job->size, sizeof *all);
    mr_gpu_list *lists = calloc((size_t)local, sizeof *lists);
    const mr_gpu_list **node = calloc((size_t)local, sizeof *node);
    mr_status st = all && lists && node ? MR_OK : mr_error_set(err, MR_ERR_NOMEM, "out of memory");
    if (st == MR_OK) st = mr_job_allgather(job, &mine, sizeof mine, all, err);
    if (st == MR_OK) {
        /* this node's processes, placed by local rank */
        for (int p = 0; p < job->size; p++) {
            if (all[p].node != job->node || all[p].local_rank < 0 || all[p].local_rank >= local)
                continue;
            mr_gpu_list *l = &lists[all[p].local_rank];
            l->count = all[p].count;
            for (int i = 0; i < l->count; i++)
                memcpy(l->gpu[i].pci_bus_id, all[p].bus_id[i], sizeof l->gpu[i].pci_bus_id);
        }
        for (int k = 0; k < local; k++)
            node[k] = &lists[k];
        mr_error why = {0};
        if (mr_devices_gpu_sharing(node, local, &env->gpus_own, &why) != MR_OK) {
            snprintf(conflict, n, "%s", why.msg);
            env->gpus_conflict = conflict;
        }
    }
    free(node);
    free(lists);
    free(all);
    return st;
}

mr_status mr_devices_parse(const char *spec, const mr_device_env *env_in, const char *named,
                           mr_device_set *out, mr_error *err) {
    char said[300]; /* the argument, as the caller names it: each message's start */
    arg(named, spec, said, sizeof said);
    mr_device_env env = env_in ? *env_in : (mr_device_env){0};
    const mr_gpu_list *gpus = env.gpus ? env.gpus : gpus_seen();
    memset(out, 0, sizeof *out);
    snprintf(out->kind, sizeof out->kind, "cpu");
    out->cores = env.cores > 0 ? env.cores : mr_cpu_cores();
    if (strcmp(spec, "auto") == 0) {
        if (gpus->count > 0) return parse_gpus(spec, named, said, &env, gpus, out, err);
        out->count = out->cores < MR_MAX_REPLICAS ? out->cores : MR_MAX_REPLICAS;
    } else if (strcmp(spec, "cpu") == 0) {
        out->count = 1;
    } else if (strncmp(spec, "cpu:", 4) == 0) {
        const char *p = spec + 4;
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end == p || *end != '\0' || errno || !isdigit((unsigned char)*p))
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s: '%s' is not a replica count (use cpu:N with N >= 1)", said, p);
        if (n < 1 || n > MR_MAX_REPLICAS)
            return mr_error_set(err, MR_ERR_USAGE,
                                "%s: cpu:N is a count of replica threads, 1 to %d, not "
                                "an index like TensorFlow's /CPU:0 (gpu:N is an index: gpu:0 is "
                                "the first GPU); one CPU replica is cpu or cpu:1",
                                said, MR_MAX_REPLICAS);
        out->count = (int)n;
    } else if (strcmp(spec, "gpu") == 0 || strncmp(spec, "gpu:", 4) == 0) {
        return parse_gpus(spec, named, said, &env, gpus, out, err);
    } else {
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: unknown device spec (use auto, cpu, cpu:N, gpu or "
                            "gpu:0,2; cpu:N is a count of replica threads, gpu:N a GPU index)",
                            said);
    }
    for (int i = 0; i < out->count; i++)
        out->ordinals[i] = i;
    return MR_OK;
}

void mr_devices_format(const mr_device_set *set, char *buf, size_t n) {
    buf[0] = '\0';
    const char *kind = set->kind;
    for (int i = 0; i < set->count; i++) {
        char one[32];
        if (i == 3 && set->count > 4) {
            snprintf(one, sizeof one, ", ..., %s:%d", kind, set->ordinals[set->count - 1]);
            strncat(buf, one, n - strlen(buf) - 1);
            break;
        }
        snprintf(one, sizeof one, "%s%s:%d", i ? ", " : "", kind, set->ordinals[i]);
        strncat(buf, one, n - strlen(buf) - 1);
    }
}

static void cpu_model(char *model, size_t n) {
    snprintf(model, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(model, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

void mr_devices_list(FILE *out, const mr_device_env *env) {
    int cores = env && env->cores > 0 ? env->cores : mr_cpu_cores();
    const mr_gpu_list *gpus = env && env->gpus ? env->gpus : gpus_seen();
    char model[256];
    cpu_model(model, sizeof model);
    long mem = sysconf(_SC_PHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
    fprintf(out, "cpu: %s, %d core%s usable, %ld MiB memory\n", model, cores, cores == 1 ? "" : "s",
            mem);
    char drv[16], rt[16];
    mr_cuda_version_format(gpus->driver_version, drv, sizeof drv);
    mr_cuda_version_format(gpus->runtime_version, rt, sizeof rt);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char vis[160] = "";
    if (visible != NULL) snprintf(vis, sizeof vis, ", CUDA_VISIBLE_DEVICES=%s", visible);
    if (gpus->count == 0) {
        fprintf(out, "gpu: none (%s; CUDA driver %s, runtime %s%s)\n", gpus->reason, drv, rt, vis);
        fprintf(out, "auto: up to %d CPU replica%s\n", cores, cores == 1 ? "" : "s");
        return;
    }
    for (int i = 0; i < gpus->count; i++) {
        const mr_gpu_info *g = &gpus->gpu[i];
        fprintf(out, "gpu:%d: %s, %.1f GiB, compute capability %d.%d, PCI %s\n", g->ordinal,
                g->name, (double)g->total_bytes / (1024.0 * 1024.0 * 1024.0), g->cc_major,
                g->cc_minor, g->pci_bus_id);
    }
    fprintf(out, "cuda: driver %s, runtime %s%s\n", drv, rt, vis);
    fprintf(out, "auto: %d GPU replica%s\n", gpus->count, gpus->count == 1 ? "" : "s");
}
