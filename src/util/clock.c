#include "clock.h"
#include "param.h"

int64_t zn_timeout_ns(void)
{
    int64_t s = zn_params()->timeout;
    if (s <= 0) s = 1; /* a zero or negative timeout would fail every wait at once */
    return s * 1000000000ll;
}

int64_t zn_deadline_from_now(void)
{
    return zn_now_ns() + zn_timeout_ns();
}
