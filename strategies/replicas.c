/* replicas.c: this process's replicas as threads: running a task on every
 * replica (the caller is replica 0), pinning each to its core. Relies on
 * the communicator to release the others when one fails. */
#include <fenv.h>
#include <pthread.h>
#include <sched.h>

#include "strategies/strategy_impl.h"

void strategy_plan_pinning(mr_strategy *s) {
    /* pin only when the replicas fill the process's cores exactly (the
     * `auto` plan): fewer replicas pinned to the first cores would pile two
     * jobs of a shared machine onto the same cores */
    int pin = s->kind->pin_threads && s->L > 1 &&
              sched_getaffinity(0, sizeof s->cpus, &s->cpus) == 0 && s->L == CPU_COUNT(&s->cpus);
    for (int r = 0; r < s->L; r++) {
        replica *rep = &s->reps[r];
        rep->cpu = -1;
        for (int c = 0, n = 0; pin && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &s->cpus) && n++ == r) {
                rep->cpu = c;
                break;
            }
    }
}

/* When the replicas fill the cores, replica r runs on the r-th core of the
 * process's affinity mask as it was when the strategy was made (rep->cpu):
 * a replica that migrates leaves its caches behind (a few percent of
 * fashion_cnn.cfg's 2-replica throughput on 2 cores). */
static void pin_replica(const replica *rep) {
    if (rep->cpu < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(rep->cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static void *thread_main(void *arg) {
    replica *rep = arg;
    pin_replica(rep);
    /* a GPU replica's thread works on its own device */
    mr_status st = mr_backend_enter(rep->be, &rep->err);
    if (st == MR_OK) st = rep->s->task(rep);
    /* a failing replica releases the others from their collectives */
    if (st != MR_OK) mr_comm_abort(rep->s->comm, rep->r);
    return NULL;
}

mr_status strategy_run_replicas(mr_strategy *s, mr_status (*task)(replica *), mr_error *err) {
    s->task = task;
    pthread_t tid[MR_MAX_REPLICAS];
    int started[MR_MAX_REPLICAS] = {0};
    for (int r = 0; r < s->L; r++)
        mr_error_clear(&s->reps[r].err);
    for (int r = 1; r < s->L; r++) {
        if (pthread_create(&tid[r], NULL, thread_main, &s->reps[r]) != 0) {
            mr_error_set(&s->reps[r].err, MR_ERR_RUNTIME, "cannot start the thread of replica %d",
                         s->reps[r].g);
            mr_comm_abort(s->comm, r);
            continue;
        }
        started[r] = 1;
    }
    /* the caller is replica 0: its floating-point environment (a CPU
     * replica's flush-to-zero, backend_cpu.c) is the caller's again after
     * the task, so a program that embeds mirrored keeps its denormals */
    fenv_t caller_env;
    fegetenv(&caller_env);
    thread_main(&s->reps[0]);
    fesetenv(&caller_env);
    /* and its whole mask */
    if (s->reps[0].cpu >= 0) pthread_setaffinity_np(pthread_self(), sizeof s->cpus, &s->cpus);
    for (int r = 1; r < s->L; r++)
        if (started[r]) pthread_join(tid[r], NULL);
    const mr_error *first = NULL;
    for (int r = 0; r < s->L; r++) {
        const mr_error *e = &s->reps[r].err;
        if (e->status == MR_OK) continue;
        if (first == NULL || (first->status == MR_ERR_ABORTED && e->status != MR_ERR_ABORTED))
            first = e;
    }
    if (first == NULL) return MR_OK;
    return mr_error_set(err, first->status, "%s", first->msg);
}
