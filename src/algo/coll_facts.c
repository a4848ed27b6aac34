/* The table of collective facts (coll_facts.h), expanded from the collective list
 * (abi/coll_list.h). */
#include "coll_facts.h"

/* Every row: its columns as the facts say them. The kernels take the same enum as the host
 * (dev_coll), except the point-to-point rows, which the send/recv kernel runs. */
static const struct zn_coll_facts facts[ZN_NCOLL_FACTS] = {
#define ZN_X(id, name_, api_, bench, red, root, send_, recv_, kernel_, ring_, sr, zc_, bus) \
    [ZN_COLL_##id] = { .name = #name_,                                                      \
                       .api = #api_,                                                        \
                       .reduces = red,                                                      \
                       .rooted = root,                                                      \
                       .p2p = ZN_KERN_##kernel_ == ZN_KERN_P2P,                             \
                       .send = ZN_EXT_##send_,                                              \
                       .recv = ZN_EXT_##recv_,                                              \
                       .kernel = ZN_KERN_##kernel_,                                         \
                       .ring = ring_,                                                       \
                       .sendrecv = sr,                                                      \
                       .zc = ZN_ZC_##zc_,                                                   \
                       .dev_coll = ZN_KERN_##kernel_ == ZN_KERN_P2P ? -1 : ZN_COLL_##id },
    ZN_COLL_LIST(ZN_X)
#undef ZN_X
};

/* The point-to-point rows come after the collectives (ZN_NCOLLS counts the rows before them):
 * algorithms index their tables of collectives by enum zn_coll below ZN_NCOLLS. */
#define ZN_X(id, name_, api_, bench, red, root, send_, recv_, kernel_, ...)                     \
    _Static_assert((ZN_KERN_##kernel_ == ZN_KERN_P2P) == ((int)ZN_COLL_##id >= (int)ZN_NCOLLS), \
                   "the point-to-point rows of ZN_COLL_LIST come last: " #id);
ZN_COLL_LIST(ZN_X)
#undef ZN_X

static const struct zn_coll_facts unknown = {
    .name = "?", .api = "?", .send = ZN_EXT_NONE, .recv = ZN_EXT_NONE, .dev_coll = -1
};

const struct zn_coll_facts *zn_coll_facts(enum zn_coll c)
{
    return (unsigned)c < ZN_NCOLL_FACTS ? &facts[c] : &unknown;
}

const char *zn_coll_name(enum zn_coll c)
{
    return zn_coll_facts(c)->name;
}
