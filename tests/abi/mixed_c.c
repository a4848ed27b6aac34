/* zinc's header with -DZINC_NO_CUDA_HEADERS in a file that also includes the CUDA runtime, in
 * either order (ZA_CUDA_FIRST): its own cudaStream_t typedef must then be a valid C11
 * redeclaration of the runtime's, and name the same type. Only the cudaStream_t facts are
 * reported; abi_check compares them with the reference's. */
#if ZA_CUDA_FIRST
#include <cuda_runtime.h>
#endif
#include ZA_HEADER
#if !ZA_CUDA_FIRST
#include <cuda_runtime.h>
#endif

#define ZA_NO_FACTS_FN
#include "facts_c.h"

void ZA_FACTS_FN(struct za_facts *out)
{
    ZA_TYPE(cudaStream_t)
}
