/* fuzz_util.h: what the libFuzzer harnesses of tests/fuzz/ share.
 *
 * The readers under test take a path (fopen, gzopen, H5Fopen), so each
 * input goes into a temporary file (mkstemp under $TMPDIR or /tmp, removed
 * at exit; not a memfd: HDF5 resolves the real path of what it opens, and
 * /proc/self/fd/N of a memfd has none). And the house rule for
 * bad input, checked on every input a reader refuses: one non-empty line
 * (runtime/error.h), naming the file. */
#ifndef MR_FUZZ_UTIL_H
#define MR_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/error.h"

/* The path of a file holding exactly data[0..size) (the same file, rewritten,
 * on every call). Aborts when it cannot be written. */
const char *fz_file(const uint8_t *data, size_t size);

/* Aborts, printing why, when a refusal breaks the rule: st is not MR_OK
 * but err's message is empty, spans lines, or does not name `name` (NULL:
 * not checked). */
void fz_check_refusal(mr_status st, const mr_error *err, const char *name);

/* Aborts when an HDF5 file or object is still open after an input: a leak
 * of ours. (HDF5's own leaks on broken files are suppressed,
 * tests/fuzz/lsan.supp, so this is what tells ours from them.) */
void fz_check_h5_closed(void);

#endif
