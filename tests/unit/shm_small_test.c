/* A /dev/shm too small for a segment gives a clear error naming /dev/shm and its free space,
 * and leaves nothing behind. Run by shm_small.sh inside a private mount namespace whose
 * /dev/shm is a 1 MB tmpfs. */
#include "util/err.h"
#include "util/shm.h"
#include "zt.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

ZT_TEST(shm_too_small)
{
    struct statvfs vfs;
    ZT_OK(statvfs("/dev/shm", &vfs));
    ZT_ASSERT((double)vfs.f_blocks * vfs.f_frsize < 4.0 * (1 << 20)); /* really the small one */
    struct zn_shm_seg a;
    ZT_EQ_INT(zn_shm_create("/zn-test-big", 8 << 20, 1, &a), ncclSystemError);
    const char *msg = zn_last_error();
    ZT_ASSERT(strstr(msg, "/dev/shm is too small") != NULL);
    ZT_ASSERT(strstr(msg, "bytes are free") != NULL);
    ZT_ASSERT(strstr(msg, "ZINC_SHM_DISABLE") != NULL);
    struct stat st;
    ZT_ASSERT(stat("/dev/shm/zn-test-big", &st) != 0);
    /* A segment that fits still works. */
    ZT_EQ_INT(zn_shm_create("/zn-test-small", 100000, 1, &a), ncclSuccess);
    zn_shm_detach(&a);
}

ZT_MAIN(ZT_CASE(shm_too_small))
