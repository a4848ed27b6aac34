/* The C11 collector over zinc's header (ZA_HEADER, an absolute path), built with -Wall -Wextra
 * -pedantic (-Werror with ZINC_WERROR=ON). Built twice: with the CUDA include directory, and with
 * -DZINC_NO_CUDA_HEADERS and no CUDA at all (the host-only path). */
#include ZA_HEADER

#include "facts_c.h"
