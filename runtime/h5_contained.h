/* h5_contained.h: an HDF5 file that holds its own data, checked before
 * anything in it is read.
 *
 * HDF5 follows external links into other files, reads a dataset's raw
 * data from external files (external storage), and assembles virtual
 * datasets from others: a crafted checkpoint, Keras file or data file
 * could read /etc/passwd into the weights (and save() would write it back
 * out), or block on a FIFO beyond Ctrl-C. Nothing Keras or mirrored
 * writes uses them, so a file that does is refused, naming the object. */
#ifndef MR_H5_CONTAINED_H
#define MR_H5_CONTAINED_H

#include <hdf5.h>

#include "runtime/error.h"

MR_C_BEGIN

/* MR_OK when no link in file (an open HDF5 file) is external or
 * user-defined and no dataset has external storage or a virtual layout;
 * else MR_ERR_DATA "PATH: /obj is an external link ...: refused". */
mr_status mr_h5_check_contained(hid_t file, const char *path, mr_error *err);

MR_C_END

#endif
