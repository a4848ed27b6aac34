/*
 * API misuse on one process, one rank: what a careless program does to a communicator must come
 * back as ncclInvalidArgument with a message, never as a crash or a write into freed memory.
 * Run in the sanitizer build too (label san), where a read of freed memory fails the test.
 *
 *   misuse_check            double destroy, calls after destroy (with a new communicator made
 *                           in between), bad values printed as passed
 *   misuse_check groupend   ncclGroupEnd as the process's first call: its log line carries
 *                           the host name like every other
 */
#include "nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank;
static long failures;
#include "../unit/expect.h"

#define NCCLCHECK(call)                                                              \
    do {                                                                             \
        ncclResult_t r_ = (call);                                                    \
        if (r_ != ncclSuccess) {                                                     \
            fprintf(stderr, "%s:%d %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                 \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

/* The call returned ncclInvalidArgument and the last error contains want. */
#define EXPECT_REFUSED(call, want)                            \
    do {                                                      \
        ncclResult_t r_ = (call);                             \
        const char *e_ = ncclGetLastError(NULL);              \
        EXPECT(r_ == ncclInvalidArgument && strstr(e_, want), \
               "%s returned %d (%s), expected "               \
               "ncclInvalidArgument saying \"%s\"",           \
               #call, (int)r_, e_, want);                     \
    } while (0)

static ncclComm_t one_rank(void)
{
    ncclComm_t c;
    NCCLCHECK(ncclCommInitAll(&c, 1, NULL));
    return c;
}

static void after_destroy(void)
{
    float buf[4] = { 1, 2, 3, 4 }, out[4] = { 0 };
    ncclComm_t a = one_rank();
    NCCLCHECK(ncclAllReduce(buf, out, 4, ncclFloat, ncclSum, a, NULL));
    EXPECT(out[3] == 4, "allreduce on one rank gave %g", out[3]);
    NCCLCHECK(ncclCommDestroy(a));

    /* Every kind of call on the destroyed handle. */
    EXPECT_REFUSED(ncclCommDestroy(a), "not a communicator");
    memset(out, 0, sizeof(out));
    EXPECT_REFUSED(ncclAllReduce(buf, out, 4, ncclFloat, ncclSum, a, NULL), "not a communicator");
    EXPECT(out[0] == 0 && out[3] == 0, "the refused allreduce wrote its output");
    EXPECT_REFUSED(ncclSend(buf, 4, ncclFloat, 0, a, NULL), "not a communicator");
    int n = -1;
    EXPECT_REFUSED(ncclCommCount(a, &n), "not a communicator");
    EXPECT(n == -1, "ncclCommCount on a destroyed comm wrote %d", n);
    EXPECT_REFUSED(ncclCommFinalize(a), "not a communicator");
    EXPECT_REFUSED(ncclCommAbort(a), "not a communicator");

    /* A destroy, other communicators made and used, the same destroy again: the second is
     * refused, and the live communicators are untouched. */
    ncclComm_t b = one_rank();
    NCCLCHECK(ncclCommDestroy(b));
    ncclComm_t live[4];
    for (int i = 0; i < 4; i++) live[i] = one_rank();
    EXPECT_REFUSED(ncclCommDestroy(b), "not a communicator");
    for (int i = 0; i < 4; i++) {
        memset(out, 0, sizeof(out));
        NCCLCHECK(ncclAllReduce(buf, out, 4, ncclFloat, ncclSum, live[i], NULL));
        EXPECT(out[2] == 3, "communicator %d after a refused destroy: %g", i, out[2]);
        NCCLCHECK(ncclCommCount(live[i], &n));
        EXPECT(n == 1, "communicator %d has %d ranks", i, n);
    }
    for (int i = 0; i < 4; i++) NCCLCHECK(ncclCommDestroy(live[i]));
}

static void bad_values(void)
{
    float buf[4] = { 0 };
    ncclComm_t c = one_rank();
    EXPECT_REFUSED(ncclAllReduce(buf, buf, 4, (ncclDataType_t)-1, ncclSum, c, NULL),
                   "invalid datatype -1");
    EXPECT_REFUSED(ncclSend(buf, 4, (ncclDataType_t)-1, 0, c, NULL), "invalid datatype -1");
    EXPECT_REFUSED(ncclAllReduce(buf, buf, SIZE_MAX, ncclFloat, ncclSum, c, NULL),
                   "invalid count 18446744073709551615");
    EXPECT_REFUSED(ncclRecv(buf, SIZE_MAX, ncclFloat, 0, c, NULL),
                   "invalid count 18446744073709551615");
    /* The communicator stays usable. */
    NCCLCHECK(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, c, NULL));
    NCCLCHECK(ncclCommDestroy(c));
}

/* ncclGroupEnd first, in a child whose stderr comes back here: the line starts "host:pid:". */
static void groupend_first(const char *self)
{
    int p[2];
    if (pipe(p) != 0) exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        execl(self, self, "groupend", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[4096] = "";
    size_t have = 0;
    ssize_t k;
    while (have + 1 < sizeof(out) && (k = read(p[0], out + have, sizeof(out) - 1 - have)) > 0)
        have += (size_t)k;
    out[have] = 0;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    char host[64] = "", want[96];
    gethostname(host, sizeof(host) - 1);
    char *dot = strchr(host, '.');
    if (dot) *dot = 0;
    snprintf(want, sizeof(want), "%s:%d:", host, (int)pid);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the groupend child failed: %s", out);
    EXPECT(strncmp(out, want, strlen(want)) == 0 && strstr(out, "without a matching"),
           "the log line does not start with \"%s\": %s", want, out);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "groupend")) {
        ncclResult_t r = ncclGroupEnd();
        return r == ncclInvalidUsage ? 0 : 1;
    }
    setenv("ZINC_DEVICE", "host", 1);
    after_destroy();
    bad_values();
    groupend_first(argv[0]);
    if (failures)
        fprintf(stderr, "misuse_check: %ld failures\n", failures);
    else
        printf("misuse_check: ok\n");
    return failures ? 1 : 0;
}
