/* check_sync.h: a fingerprint of a model's weights.
 *
 * FNV-1a (runtime/hash.h) over the bytes of the parameters, then the state
 * (BN moving statistics), read through the model's host access (in place on
 * the CPU, copied from a GPU): two models hold bitwise the same weights iff
 * their hashes are equal (up to FNV's collisions), whatever their device.
 * mirrored_train's JSON summary reports it as params_hash, so runs on other
 * replica counts, processes or devices can be compared bit for bit.
 * --check-sync itself (check_sync.c) hashes each weight separately, inside
 * the strategy. */
#ifndef MR_CHECK_SYNC_H
#define MR_CHECK_SYNC_H

#include <stdint.h>

#include "models/model.h"

/* *h = FNV-1a of m's parameters followed by its state. */
mr_status mr_params_hash(const mr_model *m, uint64_t *h, mr_error *err);

#endif
