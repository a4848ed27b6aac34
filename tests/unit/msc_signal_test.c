/* Unit tests of the count a libmscclpp signal trigger names (mscclpp/msc.h): rebuilt from the
 * low ZINC_SIGNAL_BITS bits the kernel puts in the trigger and the count stored last. */
#include "mscclpp/msc.h"
#include "zt.h"

#define WRAP (1ull << ZINC_SIGNAL_BITS)

ZT_TEST(next_count)
{
    ZT_EQ_INT(zn_msc_signal_count(0, 1), 1);
    ZT_EQ_INT(zn_msc_signal_count(5, 6), 6);
    /* signalDirect stores in between: the count jumped by more than one. */
    ZT_EQ_INT(zn_msc_signal_count(5, 9), 9);
    ZT_EQ_INT(zn_msc_signal_count(5, 4), 4 + WRAP);
    /* Across the wrap of the low bits. */
    ZT_EQ_INT(zn_msc_signal_count(WRAP - 1, 0), WRAP);
    ZT_EQ_INT(zn_msc_signal_count(WRAP - 2, 3), WRAP + 3);
    ZT_EQ_INT(zn_msc_signal_count(7 * WRAP + 3, 4), 7 * WRAP + 4);
    /* The same low bits again: a whole wrap of direct signals later. */
    ZT_EQ_INT(zn_msc_signal_count(10, 10), 10 + WRAP);
}

/* A trigger without a count (bits zero where the next count's are not) is told apart. */
ZT_TEST(countless_trigger)
{
    ZT_EQ_INT(zn_msc_signal_count(0, 0), 0);
    ZT_EQ_INT(zn_msc_signal_count(7, 0), 0);
    ZT_EQ_INT(zn_msc_signal_count(3 * WRAP + 1, 0), 0);
}

ZT_MAIN(ZT_CASE(next_count), ZT_CASE(countless_trigger))
