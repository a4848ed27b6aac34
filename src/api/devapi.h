/*
 * The host-side types of NCCL 2.28's device API (the headers under nccl_device/ in NCCL), as far as
 * zinc's stubs need them. zinc does not implement that API (its one-sided connections in zinc.h are
 * the alternative), but a drop-in libnccl.so.2 must export its host functions with the same
 * ABI, so that programs linked against NCCL load and get a clear error instead of a missing
 * symbol.
 *
 * What the ABI depends on:
 *   - a team is three ints {nRanks, rank, stride} (12 bytes, 4-byte aligned), passed and
 *     returned by value: on x86-64 and aarch64 it travels in two integer registers, which a C
 *     struct of the same three ints reproduces exactly;
 *   - every other type crosses the boundary only through a pointer (requirements, handles,
 *     the device communicator), so incomplete types are enough: zinc never reads or writes
 *     through those pointers.
 */
#ifndef ZN_API_DEVAPI_H
#define ZN_API_DEVAPI_H

#include "nccl.h"

#include <stdint.h>

/* NCCL's ncclTeam_t. */
struct zn_dev_team {
    int nranks;
    int rank;
    int stride;
};
_Static_assert(sizeof(struct zn_dev_team) == 12, "ncclTeam_t is three ints");
_Static_assert(_Alignof(struct zn_dev_team) == 4, "ncclTeam_t is 4-byte aligned");

/* Opaque to zinc: only pointers to them are passed. */
struct zn_dev_comm;      /* ncclDevComm_t */
struct zn_dev_comm_reqs; /* ncclDevCommRequirements_t */
struct zn_dev_res_reqs;  /* ncclDevResourceRequirements_t */
struct zn_dev_lsa_barrier_handle;
struct zn_dev_gin_barrier_handle;
struct zn_dev_lla2a_handle;

#endif
