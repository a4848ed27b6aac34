/*
 * zinc-info's CUDA section: driver and runtime, each GPU, which pairs reach each other and how,
 * and the path a communicator over all of them would take. Gathering (through util/cuda.h) is
 * kept apart from printing so that a host test can print made-up machines.
 */
#ifndef ZINC_TOOLS_INFO_CUDA_H
#define ZINC_TOOLS_INFO_CUDA_H

#include "util/cuda.h"

#include <stdio.h>

#define ZI_MAX_GPUS 16 /* GPUs described; more are counted */

struct zi_cuda_facts {
    struct zn_cuda_system sys;
    const char *archs;   /* device code architectures of this build ("90", "80;90"), or "" */
    const char *visible; /* CUDA_VISIBLE_DEVICES, or NULL */
    int ngpu;            /* GPUs described: min(sys.ndev, ZI_MAX_GPUS) */
    int gpu_ok[ZI_MAX_GPUS];
    char gpu_error[ZI_MAX_GPUS][128]; /* why a GPU could not be queried */
    struct zn_cuda_gpu gpu[ZI_MAX_GPUS];
    struct zn_cuda_link link[ZI_MAX_GPUS][ZI_MAX_GPUS]; /* [a][b]: how a reaches b */
};

/* Query this machine (device and driver queries only: no memory, no kernels). */
void zi_cuda_gather(struct zi_cuda_facts *f, const char *archs);
void zi_cuda_print(FILE *out, const struct zi_cuda_facts *f);

#endif
