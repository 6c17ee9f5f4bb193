/* test_job.c: the one-process job (no launcher): its shape, all-gather,
 * agreement and communicator; test_mpi.c covers jobs of several processes
 * under mpirun. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/job.h"
#include "runtime/backend.h"
#include "tests/testutil.h"

START_TEST(one_process_job) {
    unsetenv("OMPI_COMM_WORLD_SIZE"); /* as when started without mpirun */
    unsetenv("PMI_SIZE"), unsetenv("PMIX_SIZE"), unsetenv("PMI_RANK"), unsetenv("PMIX_RANK");
    int argc = 1;
    char *args[] = {"test_job", NULL}, **argv = args;
    mr_job job;
    mr_error err = {0};
    ck_assert_int_eq(mr_job_init(&argc, &argv, 0, 30.0, &job, &err), MR_OK);
    ck_assert_int_eq(job.size, 1);
    ck_assert_int_eq(job.rank, 0);
    ck_assert_int_eq(job.n_nodes, 1);
    ck_assert_int_eq(job.cores, mr_cpu_cores());
    ck_assert(job.hosts[0][0] != '\0');
    ck_assert_ptr_null(job.impl); /* MPI never initialised */
    int mine = 7, all = 0;
    ck_assert_int_eq(mr_job_allgather(&job, &mine, sizeof mine, &all, &err), MR_OK);
    ck_assert_int_eq(all, 7);
    /* agreement in one process is the process's own status and message */
    ck_assert_int_eq(mr_job_agree(&job, MR_OK, &err), MR_OK);
    mr_status st = mr_job_agree(&job, mr_error_set(&err, MR_ERR_IO, "x: cannot open"), &err);
    ck_assert_int_eq(st, MR_ERR_IO);
    ck_assert_str_eq(err.msg, "x: cannot open");
    /* a failure without a message is named by its status, never empty */
    mr_error_clear(&err);
    ck_assert_int_eq(mr_job_agree(&job, MR_ERR_USAGE, &err), MR_ERR_USAGE);
    ck_assert_int_eq(err.status, MR_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "without a message"), "%s", err.msg);
    ck_assert_int_eq(job.failed, 0);
    /* the communicator: local, with the job's timeout */
    mr_comm *c;
    mr_error_clear(&err);
    ck_assert_int_eq(mr_job_comm_create(&job, 3, &c, &err), MR_OK);
    ck_assert_str_eq(mr_comm_name(c), "local");
    ck_assert_int_eq(c->size, 3);
    ck_assert_int_eq(c->world_size, 3);
    ck_assert_double_eq(c->timeout_s, 30.0);
    ck_assert_int_eq(job.replicas[0], 3);
    ck_assert_int_eq(job.first[0], 0);
    ck_assert_int_eq(job.world_replicas, 3);
    mr_comm_destroy(c);
    ck_assert_int_eq(mr_job_comm_create(&job, 0, &c, &err), MR_ERR_USAGE);
    char buf[128];
    mr_job_format_rank(&job, 0, buf, sizeof buf);
    ck_assert(strstr(buf, job.hosts[0]) && strstr(buf, "rank 0"));
    mr_job_abort(&job, 3); /* returns in a one-process job */
    mr_job_finalize(&job);
}
END_TEST

int main(void) {
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("job");
    tcase_add_test(tc, one_process_job);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
