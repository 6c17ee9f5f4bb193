/* test_mpi.c: the job, the mpi and hierarchical communicators and the
 * strategy across processes. Every rank runs this program under mpirun
 * (2 ranks; 4 ranks; 4 ranks grouped into simulated nodes of 2 by
 * MIRRORED_RANKS_PER_NODE, the cross-node path); tests/meson.build starts
 * them. Check runs without forking (MPI is initialised once per process),
 * and each test ends with the ranks agreeing on its outcome, so they fail
 * together and stay in step for the next test.
 *
 * Bitwise claims: with one replica per process on one node the mpi
 * communicator sums every element in rank order, as the local
 * communicator sums replica threads, so the job trains bitwise like one
 * process with as many replicas. The hierarchical paths associate the sum
 * differently ((a + b) + (c + d)): those are compared within SU_BOUND
 * (test_strategy.c explains the bound), as is 1 replica at the global batch. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dmem_impl.h"
#include "runtime/hash.h"
#include "collectives/job.h"
#include "tests/strategyutil.h"
#include "tests/testutil.h"

static mr_job job;
static int rpn; /* MIRRORED_RANKS_PER_NODE, 0: real nodes */

/* 1 on every rank when ok is 1 on every rank. */
static int all_ok(int ok) {
    int *all = calloc((size_t)job.size, sizeof(int));
    mr_error err = {0};
    ck_assert_msg(mr_job_allgather(&job, &ok, sizeof ok, all, &err) == MR_OK, "%s", err.msg);
    int every = 1;
    for (int p = 0; p < job.size; p++)
        every &= all[p];
    free(all);
    return every;
}

/* Asserts cond on this rank and agrees with the others: a failure anywhere
 * fails the test everywhere (the failing rank says why). */
#define CHECK_ALL(cond, ...)                                                                       \
    do {                                                                                           \
        int ok_ = (cond);                                                                          \
        if (!ok_) {                                                                                \
            fprintf(stderr, "rank %d: ", job.rank);                                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
        ck_assert_msg(all_ok(ok_), "rank %d: %s (or another rank failed)", job.rank, #cond);       \
    } while (0)

/* The same bits on every rank: compares an FNV hash of n floats. */
static int same_everywhere(const float *v, size_t n) {
    uint64_t h = mr_fnv1a(v, sizeof(float) * n, MR_FNV1A_INIT);
    uint64_t *all = calloc((size_t)job.size, sizeof h);
    mr_error err = {0};
    ck_assert(mr_job_allgather(&job, &h, sizeof h, all, &err) == MR_OK);
    int same = 1;
    for (int p = 0; p < job.size; p++)
        same &= all[p] == h;
    free(all);
    return same;
}

/* Replica g's i-th value: mixed magnitudes, so that sums in another order
 * round differently. */
static float value(int g, size_t i) {
    uint64_t h = ((uint64_t)g * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)i * 0xBF58476D1CE4E5B9ull);
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    return ldexpf((float)(h % 1000003) / 1000003.0f, (int)(h % 13) - 6);
}

/* The sum the job's communicator computes for replica values value(g, i):
 * replicas in order inside a process, processes in order inside a node,
 * nodes in order (with one level only, rank order throughout). */
static float expected(int per_process, size_t i) {
    float total = 0.0f;
    int nodes = rpn > 0 ? (job.size + rpn - 1) / rpn : 1;
    int per_node = rpn > 0 ? rpn : job.size;
    for (int nd = 0; nd < nodes; nd++) {
        float node_sum = 0.0f;
        for (int p = nd * per_node; p < (nd + 1) * per_node && p < job.size; p++) {
            float proc = 0.0f;
            for (int r = 0; r < per_process; r++)
                proc = r == 0 ? value(p * per_process, i) : proc + value(p * per_process + r, i);
            node_sum = p == nd * per_node ? proc : node_sum + proc;
        }
        total = nd == 0 ? node_sum : total + node_sum;
    }
    return total;
}

START_TEST(job_shape) {
    CHECK_ALL(job.size >= 2 && job.rank >= 0 && job.rank < job.size, "size %d", job.size);
    CHECK_ALL(job.hosts[job.rank][0] != '\0' && job.cores >= 1, "host, cores");
    if (rpn > 0) {
        CHECK_ALL(job.node == job.rank / rpn && job.local_rank == job.rank % rpn &&
                      job.n_nodes == (job.size + rpn - 1) / rpn,
                  "node %d/%d local %d", job.node, job.n_nodes, job.local_rank);
    } else {
        CHECK_ALL(job.n_nodes == 1 && job.node == 0 && job.local_size == job.size &&
                      job.local_rank == job.rank,
                  "one machine: node %d/%d local %d/%d", job.node, job.n_nodes, job.local_rank,
                  job.local_size);
    }
    char buf[128];
    mr_job_format_rank(&job, job.rank, buf, sizeof buf);
    CHECK_ALL(strstr(buf, job.hosts[job.rank]) != NULL, "%s", buf);
}
END_TEST

START_TEST(agree_names_the_failing_rank) {
    mr_error err = {0};
    CHECK_ALL(mr_job_agree(&job, MR_OK, &err) == MR_OK, "all ok: %s", err.msg);
    /* rank 1 alone fails: every rank gets its error, named */
    mr_status st = MR_OK;
    if (job.rank == 1) st = mr_error_set(&err, MR_ERR_IO, "x.npy: cannot open");
    st = mr_job_agree(&job, st, &err);
    char want[256];
    snprintf(want, sizeof want, "rank 1 (%s): x.npy: cannot open", job.hosts[1]);
    CHECK_ALL(st == MR_ERR_IO && strcmp(err.msg, want) == 0, "got %d '%s'", st, err.msg);
    /* every rank fails alike (a bad .cfg): reported once, as one process would */
    mr_error_clear(&err);
    st = mr_job_agree(&job, mr_error_set(&err, MR_ERR_CONFIG, "a.cfg:3: bad"), &err);
    CHECK_ALL(st == MR_ERR_CONFIG && strcmp(err.msg, "a.cfg:3: bad") == 0, "%s", err.msg);
}
END_TEST

START_TEST(collectives_one_replica_per_process) {
    mr_comm *c;
    mr_error err = {0};
    CHECK_ALL(mr_job_comm_create(&job, 1, &c, &err) == MR_OK, "%s", err.msg);
    CHECK_ALL(strcmp(mr_comm_name(c), rpn > 0 ? "hierarchical" : "mpi") == 0, "%s",
              mr_comm_name(c));
    CHECK_ALL(c->size == 1 && c->world_size == job.size && c->world_offset == job.rank &&
                  job.world_replicas == job.size,
              "sizes");
    const size_t sizes[] = {0, 1, 7, 1000, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *buf = malloc(sizeof(float) * (n + 1));
        for (size_t i = 0; i < n; i++)
            buf[i] = value(job.rank, i);
        mr_status st = mr_comm_allreduce_sum(c, 0, mr_dfloat_of(buf), n, &err);
        int bits = 1;
        for (size_t i = 0; i < n; i++) {
            float want = expected(1, i);
            bits &= memcmp(&buf[i], &want, sizeof want) == 0;
        }
        CHECK_ALL(st == MR_OK && bits, "n=%zu: %s", n, err.msg);
        /* the same in three started buckets, moved on in between */
        for (size_t i = 0; i < n; i++)
            buf[i] = value(job.rank, i);
        st = mr_comm_allreduce_start(c, 0, mr_dfloat_of(buf), n / 3, &err);
        if (st == MR_OK) st = mr_comm_progress(c, 0, &err);
        if (st == MR_OK) st = mr_comm_allreduce_start(c, 0, mr_dfloat_of(buf + n / 3), n / 3, &err);
        if (st == MR_OK)
            st = mr_comm_allreduce_start(c, 0, mr_dfloat_of(buf + 2 * (n / 3)), n - 2 * (n / 3),
                                         &err);
        if (st == MR_OK) st = mr_comm_wait_all(c, 0, &err);
        for (size_t i = 0; i < n; i++) {
            float want = expected(1, i);
            bits &= memcmp(&buf[i], &want, sizeof want) == 0;
        }
        CHECK_ALL(st == MR_OK && bits, "started, n=%zu: %s", n, err.msg);
        free(buf);
    }
    /* doubles stay exact past 2^24, summed in rank order */
    double d[2] = {(double)(1 << 25) + job.rank, 0.1 * (job.rank + 1)}, want[2] = {0, 0};
    for (int p = 0; p < job.size; p++)
        want[0] += (double)(1 << 25) + p, want[1] += 0.1 * (p + 1);
    CHECK_ALL(mr_comm_allreduce_sum_f64(c, 0, d, 2, &err) == MR_OK && d[0] == want[0] &&
                  fabs(d[1] - want[1]) < 1e-15,
              "f64 %.17g %.17g: %s", d[0], d[1], err.msg);
    /* broadcast from replica 0, barrier */
    float b[5] = {0, 0, 0, 0, 0};
    if (job.rank == 0)
        for (int i = 0; i < 5; i++)
            b[i] = value(0, (size_t)i);
    CHECK_ALL(mr_comm_broadcast(c, 0, mr_dfloat_of(b), 5, 0, &err) == MR_OK && b[4] == value(0, 4),
              "%s", err.msg);
    CHECK_ALL(mr_comm_barrier(c, 0, &err) == MR_OK, "%s", err.msg);
    mr_comm_destroy(c);
}
END_TEST

typedef struct local_job {
    mr_comm *c;
    int r;
    size_t n;
    float *buf;
    mr_status st;
    mr_error err;
} local_job;

static void *second_replica(void *arg) {
    local_job *j = arg;
    j->st = mr_comm_allreduce_sum(j->c, j->r, mr_dfloat_of(j->buf), j->n, &j->err);
    if (j->st == MR_OK) j->st = mr_comm_broadcast(j->c, j->r, mr_dfloat_of(j->buf), 3, 0, &j->err);
    return NULL;
}

START_TEST(hierarchical_two_replicas_per_process) {
    mr_comm *c;
    mr_error err = {0};
    CHECK_ALL(mr_job_comm_create(&job, 2, &c, &err) == MR_OK, "%s", err.msg);
    CHECK_ALL(strcmp(mr_comm_name(c), "hierarchical") == 0 && c->size == 2 &&
                  c->world_size == 2 * job.size && c->world_offset == 2 * job.rank,
              "%s %d %d %d", mr_comm_name(c), c->size, c->world_size, c->world_offset);
    const size_t n = 4099;
    local_job j[2];
    for (int r = 0; r < 2; r++) {
        j[r] = (local_job){.c = c, .r = r, .n = n, .buf = malloc(sizeof(float) * n)};
        for (size_t i = 0; i < n; i++)
            j[r].buf[i] = value(c->world_offset + r, i);
    }
    pthread_t t;
    pthread_create(&t, NULL, second_replica, &j[1]);
    second_replica(&j[0]); /* replica 0 on the main thread: the one that calls MPI */
    pthread_join(t, NULL);
    int bits = 1;
    for (int r = 0; r < 2; r++)
        for (size_t i = 3; i < n; i++) {
            float want = expected(2, i);
            bits &= memcmp(&j[r].buf[i], &want, sizeof want) == 0;
        }
    CHECK_ALL(j[0].st == MR_OK && j[1].st == MR_OK && bits, "%s %s", j[0].err.msg, j[1].err.msg);
    CHECK_ALL(j[1].buf[0] == j[0].buf[0] && same_everywhere(j[0].buf, n), "broadcast");
    free(j[0].buf), free(j[1].buf);
    mr_comm_destroy(c);
}
END_TEST

/* The job (local_replicas per process) against one process with all the
 * replicas, and against one replica at the global batch. */
static void check_job_equivalence(const char *text, const char *extra, int local_replicas) {
    const int B = 4, R = local_replicas * job.size;
    su_run o = {.text = text,
                .net_extra = extra,
                .replicas = local_replicas,
                .batch = B,
                .n = 20 * (int64_t)B * R,
                .job = &job};
    int64_t na, nb, nc;
    mr_epoch_logs la, lb, lc;
    float *a = su_train_ok(&o, &na, &la);
    CHECK_ALL(same_everywhere(a, (size_t)na), "replicas of different processes differ");
    su_run all = o;
    all.job = NULL, all.replicas = R;
    float *b = su_train_ok(&all, &nb, &lb);
    su_run one = all;
    one.replicas = 1, one.batch = B * R;
    float *c = su_train_ok(&one, &nc, &lc);
    int exact = local_replicas == 1 && rpn == 0; /* flat mpi: rank order, as local */
    double d = tu_rel_diff(a, b, (size_t)na), d1 = tu_rel_diff(a, c, (size_t)na);
    int same = na == nb && (exact ? memcmp(a, b, sizeof(float) * (size_t)na) == 0 : d < SU_BOUND);
    CHECK_ALL(same, "%d x %d replicas vs %d in one process: relative difference %g", job.size,
              local_replicas, R, d);
    CHECK_ALL(d1 < SU_BOUND, "vs 1 replica at batch %d: %g", B * R, d1);
    /* the epoch's metrics (global replica 0 reports them) are the whole
     * global batch's, as one replica computes them: a shard's sums alone
     * would give a loss about 1/R of it */
    if (job.rank == 0)
        CHECK_ALL(fabs(la.loss - lc.loss) <= 1e-5 * lc.loss &&
                      fabs(la.accuracy - lc.accuracy) < 1.5 / (double)o.n &&
                      (!exact || (la.loss == lb.loss && la.accuracy == lb.accuracy)),
                  "loss %.9g vs %.9g, accuracy %g vs %g", la.loss, lc.loss, la.accuracy,
                  lc.accuracy);
    else
        CHECK_ALL(1, "-");
    free(a), free(b), free(c);
}

START_TEST(equivalence_sgd_momentum) {
    check_job_equivalence(su_mlp_text, su_sgd, 1);
    check_job_equivalence(su_cnn_text, su_sgd, 1);
    check_job_equivalence(su_cnn_text, su_sgd, 2);
}
END_TEST

START_TEST(equivalence_adam) {
    check_job_equivalence(su_mlp_text, su_adam, 1);
    check_job_equivalence(su_cnn_text, su_adam, 1);
    check_job_equivalence(su_mlp_text, su_adam, 2);
}
END_TEST

/* SyncBN and dropout masks keyed by the global sample follow the job-wide
 * replica index; per-replica BN statistics (sync=0) leave every replica
 * with the same moving statistics, the mean over all replicas'. */
START_TEST(batchnorm_across_processes) {
    check_job_equivalence(su_bn_text, su_sgd, 1);
    check_job_equivalence(su_res_text, su_adam, 1); /* a residual graph */
    char text[2048];
    snprintf(text, sizeof text, "%s", su_bn_text);
    strstr(text, "sync=1")[5] = '0';
    su_run o = {.text = text,
                .net_extra = su_sgd,
                .replicas = 1,
                .batch = 4,
                .n = 8 * (int64_t)job.size,
                .job = &job};
    int64_t na, nb;
    float *a = su_train_ok(&o, &na, NULL);
    CHECK_ALL(same_everywhere(a, (size_t)na), "moving statistics differ between processes");
    su_run all = o;
    all.job = NULL, all.replicas = job.size;
    float *b = su_train_ok(&all, &nb, NULL);
    double d = tu_rel_diff(a, b, (size_t)na);
    CHECK_ALL(d < SU_BOUND, "sync=0 vs one process: %g", d);
    free(a), free(b);
}
END_TEST

START_TEST(buckets_do_not_change_the_result) {
    su_run o = {.text = su_mlp_text,
                .net_extra = su_adam,
                .replicas = 1,
                .batch = 4,
                .n = 40 * (int64_t)job.size,
                .job = &job};
    int64_t na, nb;
    float *a = su_train_ok(&o, &na, NULL);
    o.bucket_floats = 50; /* a bucket per layer, started while backward goes on */
    float *b = su_train_ok(&o, &nb, NULL);
    CHECK_ALL(memcmp(a, b, sizeof(float) * (size_t)na) == 0, "buckets changed the weights");
    free(a), free(b);
}
END_TEST

START_TEST(check_sync_across_processes) {
    su_run o = {.text = su_mlp_text,
                .net_extra = su_adam,
                .replicas = 1,
                .batch = 4,
                .n = 40 * (int64_t)job.size,
                .job = &job,
                .check_sync = 2,
                .perturb = 4};
    int64_t np;
    mr_status st;
    mr_error err = {0};
    float *p = su_train(&o, &np, NULL, &st, &err);
    char want[64];
    snprintf(want, sizeof want, "replica %d differs", job.size - 1);
    if (job.rank == 0)
        CHECK_ALL(st == MR_ERR_RUNTIME && strstr(err.msg, "step 4") && strstr(err.msg, want) &&
                      strstr(err.msg, "dense_1"),
                  "%d %s", st, err.msg);
    else
        CHECK_ALL(st == MR_ERR_ABORTED, "%d %s", st, err.msg);
    free(p);
}
END_TEST

START_TEST(evaluate_exact_across_processes) {
    char text[2048];
    snprintf(text, sizeof text, su_mlp_text, "");
    mr_config cfg;
    mr_error err = {0};
    ck_assert(mr_config_parse(text, "t.cfg", NULL, &cfg, &err) == MR_OK);
    mr_dataset ds;
    su_make_data(&ds, 37);
    double l[2], a[2];
    for (int k = 0; k < 2; k++) {
        mr_strategy_opts so = {.devices = {.kind = "cpu", .count = k ? job.size : 1},
                               .job = k ? NULL : &job,
                               .seed = 3};
        mr_strategy *s;
        CHECK_ALL(mr_strategy_create(&cfg, &so, 37, &s, &err) == MR_OK, "%s", err.msg);
        CHECK_ALL(mr_strategy_evaluate(s, &ds, 0, 37, &l[k], &a[k], &err) == MR_OK, "%s", err.msg);
        mr_strategy_destroy(s);
    }
    CHECK_ALL(fabs(l[0] - l[1]) < 1e-6 && a[0] == a[1] && a[0] * 37 == round(a[0] * 37),
              "%g %g %g %g", l[0], l[1], a[0], a[1]);
    mr_dataset_free(&ds);
    mr_config_free(&cfg);
}
END_TEST

int main(int argc, char **argv) {
    const char *v = getenv("MIRRORED_RANKS_PER_NODE");
    rpn = v && *v ? atoi(v) : 0;
    mr_error err = {0};
    if (mr_job_init(&argc, &argv, rpn, 120.0, &job, &err) != MR_OK) {
        fprintf(stderr, "test_mpi: %s\n", err.msg);
        return 1;
    }
    if (job.size < 2) {
        fprintf(stderr, "test_mpi: run it under mpirun with 2 or more ranks\n");
        mr_job_finalize(&job);
        return 1;
    }
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("mpi");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, job_shape);
    tcase_add_test(tc, agree_names_the_failing_rank);
    tcase_add_test(tc, collectives_one_replica_per_process);
    tcase_add_test(tc, hierarchical_two_replicas_per_process);
    tcase_add_test(tc, equivalence_sgd_momentum);
    tcase_add_test(tc, equivalence_adam);
    tcase_add_test(tc, batchnorm_across_processes);
    tcase_add_test(tc, buckets_do_not_change_the_result);
    tcase_add_test(tc, check_sync_across_processes);
    tcase_add_test(tc, evaluate_exact_across_processes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    /* only rank 0's summary: the ranks agree on every outcome */
    srunner_run_all(sr, job.rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    mr_job_finalize(&job);
    return failed != 0;
}
