/* The C++ collector over zinc's header (ZA_HEADER, an absolute path). Built twice: with the
 * CUDA include directory, and with -DZINC_NO_CUDA_HEADERS and no CUDA at all. */
#include ZA_HEADER

#include "facts_cxx.h"
