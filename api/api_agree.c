/* api_agree.c: one call of the public C API as one call of the job
 * (api_internal.h): under mpirun, every process makes the same call with
 * the same arguments, a failure on one is the same error on all, and
 * predict's rows reach every process. A one-process job agrees with
 * itself at no cost. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/api_internal.h"

uint32_t api_crc(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0) { /* zlib's crc32 takes a uInt */
        const uInt piece = n > (1u << 30) ? 1u << 30 : (uInt)n;
        crc = (uint32_t)crc32(crc, b, piece);
        b += piece, n -= piece;
    }
    return crc;
}

uint32_t api_crc_str(uint32_t crc, const char *s) {
    return s == NULL ? api_crc(crc, "\1", 1) : api_crc(crc, s, strlen(s) + 1);
}

uint32_t api_crc_array(uint32_t crc, const mirrored_array *a) {
    if (a == NULL) return api_crc(crc, "\2", 1);
    crc = api_crc(crc, &a->dtype, sizeof a->dtype);
    crc = api_crc(crc, &a->ndim, sizeof a->ndim);
    if (a->ndim < 1 || a->ndim > MIRRORED_MAX_DIMS) return crc;
    size_t bytes = a->dtype == MIRRORED_UINT8 ? 1 : 4;
    for (int i = 0; i < a->ndim; i++) {
        crc = api_crc(crc, &a->shape[i], sizeof a->shape[i]);
        bytes *= a->shape[i] > 0 ? (size_t)a->shape[i] : 0;
    }
    return a->data != NULL ? api_crc(crc, a->data, bytes) : crc;
}

int api_many_processes(void) {
    mr_job *j;
    mr_error e = {0};
    return api_job(&j, &e) == MR_OK && j->size > 1;
}

mr_status api_agree(mr_status st, mr_error *err) {
    mr_job *j;
    if (api_job(&j, err) != MR_OK) return err->status;
    return j->size == 1 ? st : mr_job_agree(j, st, err);
}

mr_status api_agree_call(const char *call, mr_status st, uint32_t args, mr_error *err) {
    MR_CHECK(api_agree(st, err));
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    if (j->size == 1) return MR_OK;
    args = api_crc_str(args, call); /* another call is other arguments */
    uint32_t *all = malloc(sizeof *all * (size_t)j->size);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "%s: out of memory", call);
    mr_status got = mr_job_allgather(j, &args, sizeof args, all, err);
    int differs = 0;
    for (int p = 1; got == MR_OK && p < j->size && !differs; p++)
        if (all[p] != all[0]) differs = p;
    free(all);
    MR_CHECK(got);
    if (differs)
        return mr_error_set(err, MR_ERR_USAGE,
                            "%s: rank %d (%s) was given other arguments than rank 0 (%s): under "
                            "mpirun every process makes the same call with the same arguments",
                            call, differs, j->hosts[differs], j->hosts[0]);
    return MR_OK;
}

mr_status api_share_rows(float *out, int64_t count, mr_error *err) {
    mr_job *j;
    MR_CHECK(api_job(&j, err));
    if (j->size == 1 || count == 0) return MR_OK;
    /* each row is one process's (the others' are zeros): their bits OR'ed
     * are that process's bits exactly, -0.0 and NaN's payload included */
    const size_t bytes = sizeof(float) * (size_t)count;
    uint32_t *all = malloc(bytes * (size_t)j->size);
    if (all == NULL) return mr_error_set(err, MR_ERR_NOMEM, "predict: out of memory for the rows");
    mr_status st = mr_job_allgather(j, out, bytes, all, err);
    uint32_t *bits = (uint32_t *)out;
    for (int p = 0; st == MR_OK && p < j->size; p++)
        for (int64_t i = 0; i < count; i++)
            bits[i] = p == 0 ? all[i] : bits[i] | all[(int64_t)p * count + i];
    free(all);
    return st;
}
