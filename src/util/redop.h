/* The reduction kinds every layer speaks of (the kernels that apply them are in exec/reduce.c).
 * ncclAvg and PreMulSum are mapped onto these by the api layer. */
#ifndef ZN_UTIL_REDOP_H
#define ZN_UTIL_REDOP_H

enum zn_red { ZN_RED_SUM = 0, ZN_RED_PROD, ZN_RED_MAX, ZN_RED_MIN, ZN_RED_COUNT };

#endif
