/* file_kind.c: see file_kind.h. */
#include "runtime/file_kind.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char HDF5_SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* A zip's first member (its local header: the name's length at byte 26, the name at 30) is a
 * .npy in numpy.savez's archives, and metadata.json, config.json or model.weights.h5 in a
 * .keras; another zip is only a zip. */
static mr_file_kind zip_kind(const unsigned char *head, size_t got) {
    static const char *const keras[] = {"metadata.json", "config.json", "model.weights.h5"};
    const size_t len = got >= 30 ? (size_t)head[26] | (size_t)head[27] << 8 : 0;
    if (len == 0 || 30 + len > got) return MR_FILE_KIND_ZIP;
    const char *name = (const char *)head + 30;
    if (len >= 4 && memcmp(name + len - 4, ".npy", 4) == 0) return MR_FILE_KIND_NPZ;
    for (size_t i = 0; i < sizeof keras / sizeof keras[0]; i++)
        if (strlen(keras[i]) == len && memcmp(name, keras[i], len) == 0) return MR_FILE_KIND_KERAS;
    return MR_FILE_KIND_ZIP;
}

mr_file_kind mr_file_kind_of(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return MR_FILE_KIND_OTHER;
    if (S_ISDIR(sb.st_mode)) {
        char pb[4096];
        snprintf(pb, sizeof pb, "%s/saved_model.pb", path);
        return stat(pb, &sb) == 0 ? MR_FILE_KIND_SAVED_MODEL : MR_FILE_KIND_OTHER;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) return MR_FILE_KIND_OTHER;
    unsigned char head[128];
    const size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) return zip_kind(head, got);
    if (got >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) return MR_FILE_KIND_NPY;
    if (got >= 8 && memcmp(head, HDF5_SIGNATURE, 8) == 0) return MR_FILE_KIND_HDF5;
    return MR_FILE_KIND_OTHER;
}

const char *mr_file_kind_name(mr_file_kind kind) {
    switch (kind) {
    case MR_FILE_KIND_KERAS:
        return "a Keras model archive (zip)";
    case MR_FILE_KIND_NPZ:
        return "a NumPy .npz archive";
    case MR_FILE_KIND_ZIP:
        return "a zip archive";
    case MR_FILE_KIND_NPY:
        return "a NumPy .npy array";
    case MR_FILE_KIND_HDF5:
        return "an HDF5 file";
    case MR_FILE_KIND_SAVED_MODEL:
        return "a TensorFlow SavedModel folder";
    case MR_FILE_KIND_OTHER:
        break;
    }
    return "";
}

/* What to do with a model (.keras, SavedModel) where data or a .cfg was expected. */
static const char *model_advice(mr_file_kind kind, mr_file_want want) {
    if (want == MR_FILE_WANT_CFG)
        return "mirrored_train reads a .cfg: write the model as a .cfg (docs/keras.md)";
    if (want == MR_FILE_WANT_CHECKPOINT && kind == MR_FILE_KIND_KERAS)
        return "not a mirrored checkpoint: name its architecture with --cfg MODEL.cfg "
               "(docs/keras.md)";
    if (want == MR_FILE_WANT_CHECKPOINT)
        return "mirrored reads Keras's .keras and .h5 files: save the model with "
               "model.save(\"x.keras\") and give that file (docs/keras.md)";
    return "a model, not data: give the images as IDX, .npy or file.h5:/dataset "
           "(docs/usage.md)";
}

/* The advice for `kind` where `want` was expected, or NULL where the kind fits. */
static const char *advice(mr_file_kind kind, mr_file_want want) {
    switch (kind) {
    case MR_FILE_KIND_OTHER:
        return NULL;
    case MR_FILE_KIND_KERAS:
    case MR_FILE_KIND_SAVED_MODEL:
        return model_advice(kind, want);
    case MR_FILE_KIND_ZIP:
        if (want == MR_FILE_WANT_CFG || want == MR_FILE_WANT_CHECKPOINT)
            return "neither a .cfg, an HDF5 checkpoint nor a Keras 3 .keras file (its first "
                   "member is none of metadata.json, config.json, model.weights.h5): give the "
                   ".keras that Keras's model.save wrote (docs/keras.md)";
        return "unzip it: the data files are IDX, .npy or HDF5 (docs/usage.md)";
    case MR_FILE_KIND_NPZ:
        if (want == MR_FILE_WANT_CFG || want == MR_FILE_WANT_CHECKPOINT) return "data, not a model";
        return "name it FILE.npz, or one array in it FILE.npz:NAME (docs/usage.md)";
    case MR_FILE_KIND_NPY:
        if (want == MR_FILE_WANT_NPY) return NULL;
        if (want == MR_FILE_WANT_CFG || want == MR_FILE_WANT_CHECKPOINT) return "data, not a model";
        return "name it with .npy, the extension the reader goes by (docs/usage.md)";
    case MR_FILE_KIND_HDF5:
        if (want == MR_FILE_WANT_HDF5 || want == MR_FILE_WANT_CHECKPOINT) return NULL;
        if (want == MR_FILE_WANT_CFG)
            return "not a Keras model mirrored can read (no readable model_config): "
                   "mirrored_train takes a .cfg or a Keras .keras or .h5 model, a checkpoint "
                   "goes to --resume or mirrored_eval (docs/usage.md)";
        return "name a dataset in it as FILE.h5:/dataset (docs/usage.md)";
    }
    return NULL;
}

mr_status mr_file_check(const char *path, mr_file_want want, mr_error *err) {
    const mr_file_kind kind = mr_file_kind_of(path);
    const char *todo = advice(kind, want);
    if (todo == NULL) return MR_OK;
    return mr_error_set(err, MR_ERR_DATA, "%s: %s; %s", path, mr_file_kind_name(kind), todo);
}
