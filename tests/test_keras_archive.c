/* test_keras_archive.c: the .keras archive writer (models/keras_archive.h) against the importer
 * (models/keras_import.h): the files Keras 3.15 saved in tests/golden/keras_models/, imported,
 * written as an archive and imported again, give the same .cfg text and the same weights
 * bitwise; mirrored_train --save x.keras writes that archive (a zip of metadata.json,
 * config.json and model.weights.h5, in Keras's order) with the trained weights of --save x.h5. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include "models/keras.h"
#include "models/keras_archive.h"
#include "models/keras_import.h"
#include "tests/testutil.h"

static char *golden(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/golden/keras_models/%s", name);
    return tu_source_path(rel);
}

/* A model file as the importer makes it: its .cfg (cfg->text) and its weights. */
static void load(const char *path, mr_config *cfg, mr_model *m) {
    mr_error err = {0};
    ck_assert_msg(mr_keras_import_config_load(path, cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(m, tu_cpu_backend(), cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_keras_load(path, m, 0, NULL, &err) == MR_OK, "%s", err.msg);
}

/* text's lines (malloc'd copies into lines[], at most max), sorted within each section: a .h5's
 * training_config lists the loss before the optimizer, config.json's compile_config after. */
static int cmp_line(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}
static int section_lines(const char *text, char **lines, int max) {
    int n = 0, start = 0;
    for (const char *p = text; *p && n < max; n++) {
        size_t k = strcspn(p, "\n");
        lines[n] = strndup(p, k);
        if (lines[n][0] == '[') {
            qsort(lines + start, (size_t)(n - start), sizeof *lines, cmp_line);
            start = n + 1;
        }
        p += k + (p[k] == '\n');
    }
    qsort(lines + start, (size_t)(n - start), sizeof *lines, cmp_line);
    return n;
}

/* Two lines alike but for the spelling of a number: Keras's file holds the double of a float32
 * value (0.0020000000949949026) or a double the layer computes in float32 (Rescaling's 1/255),
 * ours the shortest text of the float32 (0.002); both read back to the same float. */
static int same_line(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    const char *ea = strchr(a, '='), *eb = strchr(b, '=');
    if (!ea || !eb || ea - a != eb - b || strncmp(a, b, (size_t)(ea - a)) != 0) return 0;
    char *end_a, *end_b;
    float fa = strtof(ea + 1, &end_a), fb = strtof(eb + 1, &end_b);
    return *end_a == '\0' && *end_b == '\0' && fa == fb;
}

/* The same .cfg: the same lines in each section (any order), numbers as float32. */
static void assert_same_text(const char *a, const char *b) {
    enum { MAX_LINES = 512 };
    char *la[MAX_LINES], *lb[MAX_LINES];
    int na = section_lines(a, la, MAX_LINES), nb = section_lines(b, lb, MAX_LINES);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++)
        ck_assert_msg(same_line(la[i], lb[i]), "%s != %s", la[i], lb[i]);
    for (int i = 0; i < na; i++)
        free(la[i]), free(lb[i]);
}

/* Same .cfg, the same model as Keras's config.json (byte for byte) and the same weights. */
static void assert_same_model(const mr_config *ca, const mr_model *a, const mr_config *cb,
                              const mr_model *b) {
    assert_same_text(ca->text, cb->text);
    char *ja = mr_keras_model_config(a, MR_KERAS_ARCHIVE, ca->net.learning_rate),
         *jb = mr_keras_model_config(b, MR_KERAS_ARCHIVE, cb->net.learning_rate);
    ck_assert_str_eq(ja, jb);
    free(ja);
    free(jb);
    ck_assert_int_eq(a->n_params, b->n_params);
    ck_assert_int_eq(a->n_state, b->n_state);
    /* a CPU context's memory is host memory */
    ck_assert(memcmp(a->params, b->params, (size_t)a->n_params * sizeof(float)) == 0);
    if (a->n_state > 0)
        ck_assert(memcmp(a->state, b->state, (size_t)a->n_state * sizeof(float)) == 0);
}

/* The zip's entries, in order, are Keras's three. */
static void assert_keras_entries(const char *path) {
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &zerr);
    ck_assert_msg(za != NULL, "%s: not a zip", path);
    const char *want[] = {"metadata.json", "config.json", "model.weights.h5"};
    ck_assert_int_eq(zip_get_num_entries(za, 0), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(zip_get_name(za, (zip_uint64_t)i, 0), want[i]);
        zip_stat_t zs;
        ck_assert_int_eq(zip_stat_index(za, (zip_uint64_t)i, 0, &zs), 0);
        ck_assert_int_eq(zs.comp_method, ZIP_CM_STORE);
    }
    zip_discard(za);
}

START_TEST(archive_named) {
    ck_assert(mr_keras_archive_named("m.keras"));
    ck_assert(mr_keras_archive_named("out/m.keras"));
    ck_assert(!mr_keras_archive_named(".keras"));
    ck_assert(!mr_keras_archive_named("out/.keras"));
    ck_assert(!mr_keras_archive_named("m.h5"));
    ck_assert(!mr_keras_archive_named("m.keras/x.h5"));
    ck_assert(!mr_keras_archive_named("m.keras.h5"));
}
END_TEST

/* import -> archive -> import: the same .cfg text and weights, for each corpus file that
 * imports (Sequential and Functional, from .keras and .h5). */
START_TEST(round_trip_same_model) {
    const char *files[] = {"cnn.keras", "cnn.h5", "residual.keras", "residual.h5"};
    char *path = golden(files[_i]);
    mr_config ca = {0}, cb = {0};
    mr_model a = {0}, b = {0};
    load(path, &ca, &a);
    char out[512];
    snprintf(out, sizeof out, "%s/rt%d.keras", tu_tmpdir(), _i);
    mr_error err = {0};
    ck_assert_msg(mr_keras_archive_save(out, &a, 0, ca.net.learning_rate, &err) == MR_OK, "%s",
                  err.msg);
    assert_keras_entries(out);
    ck_assert(mr_keras_import_is_model(out));
    load(out, &cb, &b);
    assert_same_model(&ca, &a, &cb, &b);
    mr_model_free(&a);
    mr_model_free(&b);
    mr_config_free(&ca);
    mr_config_free(&cb);
    free(path);
}
END_TEST

/* A write that cannot happen leaves nothing and names the path. */
START_TEST(save_fails_named) {
    char *path = golden("cnn.keras");
    mr_config c = {0};
    mr_model m = {0};
    load(path, &c, &m);
    mr_error err = {0};
    ck_assert_int_eq(mr_keras_archive_save("/nonexistent-dir/m.keras", &m, 0, 0.001f, &err),
                     MR_ERR_IO);
    ck_assert_msg(strstr(err.msg, "/nonexistent-dir/m.keras") != NULL, "%s", err.msg);
    mr_model_free(&m);
    mr_config_free(&c);
    free(path);
}
END_TEST

static void train(const char *model, const char *save, const char *extra) {
    char cmd[2048], *out = NULL;
    char *exe = tu_build_path("launch/mirrored_train");
    snprintf(cmd, sizeof cmd, "%s %s --synthetic 64 --epochs 1 --devices cpu --quiet --save %s %s",
             exe, model, save, extra);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s\n%s", cmd, out);
    free(out);
    free(exe);
}

/* mirrored_train MODEL.keras --save x.keras: Keras's archive, which imports as the model it was
 * trained from, with the weights the same run writes to --save x.h5. */
START_TEST(train_saves_archive) {
    const char *files[] = {"cnn.keras", "residual.h5"};
    char *path = golden(files[_i]), keras_out[512], h5_out[512];
    snprintf(keras_out, sizeof keras_out, "%s/trained%d.keras", tu_tmpdir(), _i);
    snprintf(h5_out, sizeof h5_out, "%s/trained%d.h5", tu_tmpdir(), _i);
    train(path, keras_out, "");
    train(path, h5_out, "");
    assert_keras_entries(keras_out);
    mr_config c0 = {0}, ck = {0};
    mr_model m0 = {0}, mk = {0}, mh = {0};
    load(path, &c0, &m0);
    load(keras_out, &ck, &mk);
    mr_error err = {0};
    ck_assert_msg(mr_model_init(&mh, tu_cpu_backend(), &c0, 1, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_keras_load(h5_out, &mh, 0, NULL, &err) == MR_OK, "%s", err.msg);
    assert_same_model(&c0, &mh, &ck, &mk);
    mr_model_free(&m0);
    mr_model_free(&mk);
    mr_model_free(&mh);
    mr_config_free(&c0);
    mr_config_free(&ck);
    free(path);
}
END_TEST

/* --resume auto never takes a .keras --save (no training state): it says so and starts over;
 * the stop's checkpoint is named from the stem (x-stopped.h5). A .keras [net] checkpoint or
 * --checkpoint-on-signal is refused. */
START_TEST(resume_auto_skips_archive) {
    char *path = golden("cnn.keras"), *exe = tu_build_path("launch/mirrored_train");
    char save[512], cmd[2048], *out = NULL;
    snprintf(save, sizeof save, "%s/again.keras", tu_tmpdir());
    train(path, save, "");
    snprintf(cmd, sizeof cmd,
             "%s %s --synthetic 64 --epochs 1 --devices cpu --verbose 2 --save %s --resume auto",
             exe, path, save);
    ck_assert_msg(tu_run(cmd, &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "is a Keras archive, not a checkpoint to resume from: skipped") !=
                      NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "again-stopped.h5") != NULL, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "%s %s --synthetic 64 --devices cpu --checkpoint-on-signal %s/s.keras", exe, path,
             tu_tmpdir());
    ck_assert_int_eq(tu_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "--checkpoint-on-signal") != NULL, "%s", out);
    free(out);
    free(exe);
    free(path);
}
END_TEST

/* cnn.keras rewritten with a second `member` (another member's bytes) of
 * the same name: Keras reads the last of two, libzip the first, so the
 * importer and the weights' reader refuse the archive, naming the member. */
START_TEST(duplicate_member_refused) {
    static const char *const members[] = {"config.json", "model.weights.h5"};
    const char *member = members[_i];
    char *path = golden("cnn.keras"), out[512];
    snprintf(out, sizeof out, "%s/dup%d.keras", tu_tmpdir(), _i);
    int code = 0;
    zip_t *in = zip_open(path, ZIP_RDONLY, &code),
          *za = zip_open(out, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert(in != NULL && za != NULL);
    char stand_in[64];
    snprintf(stand_in, sizeof stand_in, "%s", member);
    stand_in[strlen(stand_in) - 1] = 'Q'; /* one length: patched to `member` below */
    const zip_int64_t n = zip_get_num_entries(in, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(in, (zip_uint64_t)i, 0);
        ck_assert_int_ge(
            zip_file_add(za, name, zip_source_zip(za, in, (zip_uint64_t)i, 0, 0, -1), 0), 0);
        if (strcmp(name, "metadata.json") == 0) /* not the member itself: other bytes */
            ck_assert_int_ge(
                zip_file_add(za, stand_in, zip_source_zip(za, in, (zip_uint64_t)i, 0, 0, -1), 0),
                0);
    }
    ck_assert_int_eq(zip_close(za), 0);
    zip_discard(in);
    size_t size = 0;
    char *bytes = tu_read_file(out, &size);
    for (size_t i = 0; i + strlen(member) <= size; i++)
        if (memcmp(bytes + i, stand_in, strlen(member)) == 0)
            memcpy(bytes + i, member, strlen(member));
    FILE *f = fopen(out, "wb");
    ck_assert_uint_eq(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(bytes);
    mr_config cfg;
    mr_error err = {0};
    mr_status st = mr_keras_import_config_load(out, &cfg, &err);
    if (st == MR_OK) { /* the importer reads config.json alone: the weights' reader refuses */
        mr_model m;
        ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s",
                      err.msg);
        st = mr_keras_load(out, &m, 0, NULL, &err);
        mr_model_free(&m);
        mr_config_free(&cfg);
    }
    ck_assert_int_eq(st, MR_ERR_DATA);
    char want[128];
    snprintf(want, sizeof want, "member '%s' appears twice", member);
    ck_assert_msg(strstr(err.msg, out) && strstr(err.msg, want), "%s", err.msg);
    free(path);
}
END_TEST

/* cnn.keras with its model.weights.h5 swapped for 80 MiB of zeros
 * (deflated to a few hundred KB): refused before it is unpacked, as more
 * than a model of its size can hold (a 2 MB archive unpacked to 2.1 GB
 * into $TMPDIR), and nothing is left in $TMPDIR. */
START_TEST(weights_bomb_refused) {
    char *path = golden("cnn.keras"), out[512], tmpdir[512];
    snprintf(out, sizeof out, "%s/bomb.keras", tu_tmpdir());
    snprintf(tmpdir, sizeof tmpdir, "%s/t", tu_tmpdir());
    ck_assert_int_eq(mkdir(tmpdir, 0700), 0);
    int code = 0;
    zip_t *in = zip_open(path, ZIP_RDONLY, &code),
          *za = zip_open(out, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert(in != NULL && za != NULL);
    const size_t big = (size_t)80 << 20;
    void *zeros = calloc(1, big);
    for (zip_int64_t i = 0; i < zip_get_num_entries(in, 0); i++) {
        const char *name = zip_get_name(in, (zip_uint64_t)i, 0);
        const int weights = strcmp(name, "model.weights.h5") == 0;
        zip_source_t *src = weights ? zip_source_buffer(za, zeros, big, 0)
                                    : zip_source_zip(za, in, (zip_uint64_t)i, 0, 0, -1);
        zip_int64_t k = zip_file_add(za, name, src, 0);
        ck_assert_int_ge(k, 0);
        zip_set_file_compression(za, (zip_uint64_t)k, weights ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 9);
    }
    ck_assert_int_eq(zip_close(za), 0);
    zip_discard(in);
    free(zeros);
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    ck_assert_msg(mr_keras_import_config_load(out, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    setenv("TMPDIR", tmpdir, 1);
    mr_status st = mr_keras_load(out, &m, 0, NULL, &err);
    unsetenv("TMPDIR");
    mr_model_free(&m);
    mr_config_free(&cfg);
    ck_assert_int_eq(st, MR_ERR_DATA);
    ck_assert_msg(
        strstr(err.msg, "model.weights.h5: member of 83886080 bytes is larger than the limit"),
        "%s", err.msg);
    ck_assert_msg(rmdir(tmpdir) == 0, "%s is not empty", tmpdir);
    free(path);
}
END_TEST

/* A .keras of config.json alone, whose Dense has units 0: the importer
 * passes the value on and the .cfg parser refuses it, naming the Keras
 * layer, not a line of the text the importer generated (issue 47 M1). */
START_TEST(parse_refusal_names_the_layer) {
    static const char config[] =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], "
        "\"dtype\": \"float32\", \"name\": \"in\"}}, "
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 0}}, "
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"out\", \"units\": 2, "
        "\"activation\": \"softmax\"}}]}, \"compile_config\": {\"optimizer\": {\"class_name\": "
        "\"Adam\", \"config\": {\"learning_rate\": 0.01}}, \"loss\": "
        "\"sparse_categorical_crossentropy\"}}";
    char out[512];
    snprintf(out, sizeof out, "%s/units0.keras", tu_tmpdir());
    int code = 0;
    zip_t *za = zip_open(out, ZIP_CREATE | ZIP_TRUNCATE, &code);
    ck_assert_ptr_nonnull(za);
    zip_source_t *src = zip_source_buffer(za, config, sizeof config - 1, 0);
    ck_assert_int_ge(zip_file_add(za, "config.json", src, 0), 0);
    ck_assert_int_eq(zip_close(za), 0);
    mr_config cfg;
    mr_error err = {0};
    ck_assert_int_eq(mr_keras_import_config_load(out, &cfg, &err), MR_ERR_CONFIG);
    char want[600];
    snprintf(want, sizeof want, "%s: layer 'd' (Dense): [dense] units: 0 is out of range", out);
    ck_assert_msg(strstr(err.msg, want) == err.msg, "%s", err.msg);
}
END_TEST

/* SIGTERM while a .keras's weights are unpacked into $TMPDIR: the process
 * still ends by SIGTERM, and nothing is left there (issue 47 N10: 508 MB
 * were). A Dense of 8 Mi weights (32 MiB) unpacks for long enough that
 * the temporary file is seen and the signal lands during its life. */
START_TEST(sigterm_while_unpacking_leaves_nothing) {
    char out[512], tmpdir[512];
    snprintf(out, sizeof out, "%s/big.keras", tu_tmpdir());
    snprintf(tmpdir, sizeof tmpdir, "%s/unpack", tu_tmpdir());
    ck_assert_int_eq(mkdir(tmpdir, 0700), 0);
    mr_config cfg;
    mr_model m;
    mr_error err = {0};
    const char *text = "[net]\nseed = 3\n[input]\nshape = 4096\n[dense]\nunits = 2048\n"
                       "[dense]\nunits = 2\nactivation = softmax\n";
    ck_assert_msg(mr_config_parse(text, "big.cfg", NULL, &cfg, &err) == MR_OK, "%s", err.msg);
    ck_assert_msg(mr_model_init(&m, tu_cpu_backend(), &cfg, 1, 0, &err) == MR_OK, "%s", err.msg);
    ck_assert_int_eq(mr_model_init_weights(&m, 3, &err), MR_OK);
    ck_assert_msg(mr_keras_archive_save(out, &m, 0, 0.01f, &err) == MR_OK, "%s", err.msg);
    int seen = 0;
    for (int attempt = 0; attempt < 5 && !seen; attempt++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            signal(SIGTERM, SIG_DFL);
            setenv("TMPDIR", tmpdir, 1);
            mr_error e = {0};
            _exit(mr_keras_load(out, &m, 0, NULL, &e) == MR_OK ? 0 : 1);
        }
        /* the temporary file, as soon as it is there */
        for (int i = 0; i < 20000 && !seen; i++) {
            DIR *d = opendir(tmpdir);
            for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
                seen |= e->d_name[0] != '.';
            if (d != NULL) closedir(d);
            if (!seen) usleep(100);
        }
        if (seen) kill(pid, SIGTERM);
        int ws;
        ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
        if (seen && WIFEXITED(ws)) seen = 0; /* it had finished already: again */
        if (seen) ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM);
    }
    mr_model_free(&m);
    mr_config_free(&cfg);
    ck_assert_msg(seen, "the temporary file was never seen in %s", tmpdir);
    ck_assert_msg(rmdir(tmpdir) == 0, "%s is not empty after SIGTERM", tmpdir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("keras_archive");
    TCase *tc = tcase_create("keras_archive");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, archive_named);
    tcase_add_loop_test(tc, round_trip_same_model, 0, 4);
    tcase_add_test(tc, save_fails_named);
    tcase_add_loop_test(tc, train_saves_archive, 0, 2);
    tcase_add_test(tc, resume_auto_skips_archive);
    tcase_add_loop_test(tc, duplicate_member_refused, 0, 2);
    tcase_add_test(tc, weights_bomb_refused);
    tcase_add_test(tc, parse_refusal_names_the_layer);
    tcase_add_test(tc, sigterm_while_unpacking_leaves_nothing);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
