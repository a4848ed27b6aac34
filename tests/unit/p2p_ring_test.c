/* Unit tests of the GPU ring search (transport/gpu_peer.h): which GPUs of a host a cuda
 * communicator puts on a ring when not every pair can map each other's memory. */
#include "transport/gpu_peer.h"
#include "zt.h"

#include <string.h>

/* reach matrix of n GPUs from a list of links "a-b" (both ways) plus the diagonal. */
static void links(uint8_t *reach, int n, const int (*ab)[2], int nlinks)
{
    memset(reach, 0, (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) reach[i * n + i] = 1;
    for (int k = 0; k < nlinks; k++) {
        reach[ab[k][0] * n + ab[k][1]] = 1;
        reach[ab[k][1] * n + ab[k][0]] = 1;
    }
}

/* order is a cycle through all n ranks, each once, whose neighbours reach each other. */
static int valid_ring(const uint8_t *reach, int n, const int *order)
{
    int seen = 0;
    for (int p = 0; p < n; p++) {
        int a = order[p], b = order[(p + 1) % n];
        if (a < 0 || a >= n || (seen >> a) & 1) return 0;
        seen |= 1 << a;
        if (!reach[a * n + b] || !reach[b * n + a]) return 0;
    }
    return seen == (1 << n) - 1;
}

ZT_TEST(ring_full)
{
    uint8_t reach[64];
    int order[8];
    for (int n = 1; n <= 8; n++) {
        memset(reach, 1, sizeof(reach));
        ZT_ASSERT(zn_p2p_find_ring(reach, n, order));
        for (int p = 0; p < n; p++) ZT_EQ_INT(order[p], p); /* rank order when it works */
    }
}

ZT_TEST(ring_reordered)
{
    /* 4 GPUs linked 0-1, 1-3, 3-2, 2-0 (no 0-3, no 1-2): the ring is 0 1 3 2. */
    static const int ab[][2] = { { 0, 1 }, { 1, 3 }, { 3, 2 }, { 2, 0 } };
    uint8_t reach[16];
    int order[4];
    links(reach, 4, ab, 4);
    ZT_ASSERT(zn_p2p_find_ring(reach, 4, order));
    ZT_ASSERT(valid_ring(reach, 4, order));
    ZT_EQ_INT(order[0], 0);
    ZT_EQ_INT(order[1], 1);
    ZT_EQ_INT(order[2], 3);
    ZT_EQ_INT(order[3], 2);
}

ZT_TEST(ring_two_islands_of_nvlink)
{
    /* 8 GPUs as two fully connected quads joined by two links (3-4 and 7-0). */
    uint8_t reach[64];
    int ab[32][2], nl = 0, order[8];
    for (int q = 0; q < 2; q++)
        for (int a = 0; a < 4; a++)
            for (int b = a + 1; b < 4; b++) {
                ab[nl][0] = 4 * q + a;
                ab[nl][1] = 4 * q + b;
                nl++;
            }
    ab[nl][0] = 3, ab[nl][1] = 4, nl++;
    ab[nl][0] = 7, ab[nl][1] = 0, nl++;
    links(reach, 8, (const int(*)[2])ab, nl);
    ZT_ASSERT(zn_p2p_find_ring(reach, 8, order));
    ZT_ASSERT(valid_ring(reach, 8, order));
}

ZT_TEST(ring_none)
{
    uint8_t reach[64];
    int order[8];
    /* A star (everyone reaches 0 only) has no ring for n > 2; a missing link splits 2 GPUs. */
    static const int star[][2] = { { 0, 1 }, { 0, 2 }, { 0, 3 } };
    links(reach, 4, star, 3);
    ZT_ASSERT(!zn_p2p_find_ring(reach, 4, order));
    links(reach, 2, NULL, 0);
    ZT_ASSERT(!zn_p2p_find_ring(reach, 2, order));
    /* One direction only does not count. */
    links(reach, 3, NULL, 0);
    reach[0 * 3 + 1] = reach[1 * 3 + 2] = reach[2 * 3 + 0] = 1;
    ZT_ASSERT(!zn_p2p_find_ring(reach, 3, order));
    /* Two GPUs that reach each other form a ring; more than 8 GPUs are refused. */
    links(reach, 2, (const int[][2]){ { 0, 1 } }, 1);
    ZT_ASSERT(zn_p2p_find_ring(reach, 2, order));
    ZT_ASSERT(valid_ring(reach, 2, order));
    ZT_ASSERT(!zn_p2p_find_ring(reach, 9, order));
    /* One rank with the transport off (zn_p2p_reach zeroes even the diagonal): no ring. */
    reach[0] = 0;
    ZT_ASSERT(!zn_p2p_find_ring(reach, 1, order));
}

ZT_MAIN(ZT_CASE(ring_full), ZT_CASE(ring_reordered), ZT_CASE(ring_two_islands_of_nvlink),
        ZT_CASE(ring_none))
