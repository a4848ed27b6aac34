/* The C11 collector over the reference NCCL header (ZA_HEADER, an absolute path). */
#include ZA_HEADER

#include "facts_c.h"
