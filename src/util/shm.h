/*
 * POSIX shared-memory segments for ranks on one host.
 *
 * Layout of a segment (the first page belongs to this layer):
 *
 *   0      +---------------------------------------------+
 *          | magic | version | user size | ready | mapped |  expected mappers
 *   4096   +---------------------------------------------+
 *          | user area (size bytes)                       |
 *          +---------------------------------------------+
 *
 * The creator fills the header last and sets ready; each process that maps the segment bumps
 * mapped, and the one that brings it to the expected count unlinks the name, so nothing is
 * left in /dev/shm once the job is set up, even if it is later killed. Segments are mode 0600.
 */
#ifndef ZN_UTIL_SHM_H
#define ZN_UTIL_SHM_H

#include "nccl.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct zn_shm_seg {
    void *base;  /* user area */
    size_t size; /* user size */
    void *map;
    size_t map_size;
    int owner;
    char name[96];
};

/* Create and map a segment of size bytes that nmappers processes (creator included) will map.
 * Logs its own errors; a /dev/shm too small is reported with its free space. */
ncclResult_t zn_shm_create(const char *name, size_t size, int nmappers, struct zn_shm_seg *seg);

/* Map a segment another process creates, waiting for it until deadline. Returns 0 or a
 * negative errno (-ETIMEDOUT, -ECANCELED, -EPROTO for a segment of the wrong size or magic);
 * the caller names the peer in its message. */
int zn_shm_attach(const char *name, size_t size, int64_t deadline, const atomic_int *abort_flag,
                  struct zn_shm_seg *seg);

/* Unmap; the creator also unlinks the name if it is still there. */
void zn_shm_detach(struct zn_shm_seg *seg);

#endif
