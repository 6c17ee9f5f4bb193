/* mpi_impl.c: timed polling waits on MPI requests (mpi_impl.h). */
#include "collectives/mpi_impl.h"
#include "runtime/backoff.h"

#include <stdio.h>
#include <string.h>

mr_status mr_mpi_check(int rc, const char *call, mr_error *err) {
    if (rc == MPI_SUCCESS) return MR_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return mr_error_set(err, MR_ERR_RUNTIME, "%s failed: %s", call, text);
}

/* Polls before backing off: about 20-50 us of MPI_Testall on these
 * machines, longer than a small all-reduce between two processes takes. */
#define SPIN_POLLS 2000
/* Then yields between polls for this long, then sleeps between them
 * (runtime/backoff.h): a wait that only yields keeps its core busy and
 * takes it from a neighbour that shares it. */
#define YIELD_S 200e-6

/* 1 when a request before i waits for the same peer and is still pending
 * (already named: a receive and a send to one process count once) */
static int named_before(MPI_Request *reqs, const int *peers, int i) {
    for (int j = 0; j < i; j++)
        if (peers[j] == peers[i] && reqs[j] != MPI_REQUEST_NULL) return 1;
    return 0;
}

mr_status mr_mpi_wait(MPI_Request *reqs, int n, const int *peers, double timeout_s, int yield,
                      const char *what, mr_error *err) {
    mr_backoff b = {0};
    int backing_off = 0;
    for (long polls = 0;; polls++) {
        int done = 0;
        MR_CHECK(
            mr_mpi_check(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall", err));
        if (done) return MR_OK;
        if (!yield && polls < SPIN_POLLS) continue;
        if (!backing_off) {
            mr_backoff_begin(&b, yield ? 0.0 : YIELD_S);
            backing_off = 1;
        }
        if (mr_backoff_elapsed(&b) <= timeout_s) {
            mr_backoff_pause(&b);
            continue;
        }
        char missing[256] = "";
        for (int i = 0; i < n; i++) {
            int one = 1;
            if (peers == NULL || peers[i] < 0 || reqs[i] == MPI_REQUEST_NULL) continue;
            MPI_Test(&reqs[i], &one, MPI_STATUS_IGNORE);
            if (one || named_before(reqs, peers, i)) continue;
            char num[16];
            snprintf(num, sizeof num, "%s%d", missing[0] ? "," : "", peers[i]);
            strncat(missing, num, sizeof missing - strlen(missing) - 1);
        }
        return mr_error_set(err, MR_ERR_RUNTIME, "%s: waited %.0f s for rank(s) %s", what,
                            timeout_s, missing[0] ? missing : "(unknown)");
    }
}
