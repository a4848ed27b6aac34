#include "clock.h"
#include "param.h"

#include <stdatomic.h>

/* Set by zn_set_timeout_s (libmscclpp's mscclppSetBootstrapConnTimeout); 0: ZINC_TIMEOUT. */
static _Atomic int64_t timeout_override_s;

void zn_set_timeout_s(int64_t seconds)
{
    atomic_store_explicit(&timeout_override_s, seconds > 0 ? seconds : 0, memory_order_relaxed);
}

int64_t zn_timeout_ns(void)
{
    int64_t s = atomic_load_explicit(&timeout_override_s, memory_order_relaxed);
    if (s == 0) s = zn_params()->timeout;
    if (s <= 0) s = 1; /* a zero or negative timeout would fail every wait at once */
    return s * 1000000000ll;
}

int64_t zn_deadline_from_now(void)
{
    return zn_now_ns() + zn_timeout_ns();
}
