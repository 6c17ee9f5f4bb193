/* devices.c: --devices parsing and device listing (see devices.h). */
#include "devices.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mr_gpu_count(void) {
    return 0; /* no CUDA backend in this build */
}

static mr_status no_gpu(const char *spec, mr_error *err) {
    return mr_error_set(err, MR_ERR_UNSUPPORTED,
                        "--devices %s: no GPU available (this build has no CUDA backend); "
                        "use --devices cpu or cpu:N",
                        spec);
}

mr_status mr_devices_parse(const char *spec, int cores, mr_device_set *out, mr_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = MR_DEVICE_CPU;
    out->cores = cores > 0 ? cores : mr_cpu_cores();
    if (strcmp(spec, "auto") == 0) {
        out->count = mr_gpu_count() > 0 ? mr_gpu_count() : out->cores;
        if (out->count > MR_MAX_REPLICAS) out->count = MR_MAX_REPLICAS;
    } else if (strcmp(spec, "cpu") == 0) {
        out->count = 1;
    } else if (strncmp(spec, "cpu:", 4) == 0) {
        const char *p = spec + 4;
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end == p || *end != '\0' || errno || !isdigit((unsigned char)*p))
            return mr_error_set(err, MR_ERR_USAGE,
                                "--devices %s: '%s' is not a replica count (use cpu:N with N >= 1)",
                                spec, p);
        if (n < 1 || n > MR_MAX_REPLICAS)
            return mr_error_set(err, MR_ERR_USAGE,
                                "--devices %s: the replica count must be between 1 and %d", spec,
                                MR_MAX_REPLICAS);
        out->count = (int)n;
    } else if (strcmp(spec, "gpu") == 0 || strncmp(spec, "gpu:", 4) == 0) {
        return no_gpu(spec, err);
    } else {
        return mr_error_set(
            err, MR_ERR_USAGE,
            "--devices %s: unknown device spec (use auto, cpu, cpu:N, gpu or gpu:0,2)", spec);
    }
    for (int i = 0; i < out->count; i++)
        out->ordinals[i] = i;
    return MR_OK;
}

void mr_devices_format(const mr_device_set *set, char *buf, size_t n) {
    buf[0] = '\0';
    const char *kind = set->kind == MR_DEVICE_CPU ? "cpu" : "gpu";
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

void mr_devices_list(FILE *out, int cores) {
    if (cores <= 0) cores = mr_cpu_cores();
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ')
                        c++;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(model, sizeof model, "%s", c);
                }
                break;
            }
        fclose(f);
    }
    long mem = sysconf(_SC_PHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
    fprintf(out, "cpu: %s, %d core%s usable, %ld MiB memory (auto: up to %d CPU replica%s)\n",
            model, cores, cores == 1 ? "" : "s", mem, cores, cores == 1 ? "" : "s");
    fprintf(out, "gpu: none (this build has no CUDA backend)\n");
}
