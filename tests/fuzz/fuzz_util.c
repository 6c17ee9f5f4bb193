/* fuzz_util.c: see fuzz_util.h. */
#include "tests/fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

static char file_path[4096];

static void remove_file(void) {
    unlink(file_path);
}

const char *fz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(file_path, sizeof file_path, "%s/mirrored-fuzz-XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
        fd = mkstemp(file_path);
        if (fd < 0) {
            perror("fz_file: mkstemp");
            abort();
        }
        atexit(remove_file);
    }
    /* readers open the path afresh: what they see is the file's content, not
     * this descriptor's offset */
    if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fz_file: write");
        abort();
    }
    return file_path;
}

void fz_check_refusal(mr_status st, const mr_error *err, const char *name) {
    if (st == MR_OK) return;
    const char *why = NULL;
    if (err->msg[0] == '\0')
        why = "empty message";
    else if (strchr(err->msg, '\n') != NULL)
        why = "message of more than one line";
    else if (name != NULL && strstr(err->msg, name) == NULL)
        why = "message does not name the file";
    if (why == NULL) return;
    fprintf(stderr, "refusal breaks the one-line rule (%s), status %d: \"%s\"\n", why, (int)st,
            err->msg);
    abort();
}

void fz_check_h5_closed(void) {
    ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open == 0) return;
    fprintf(stderr, "%lld HDF5 files or objects left open after the input\n", (long long)open);
    abort();
}
