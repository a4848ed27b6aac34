/*
 * A fabric of ibemu for one test run, removed from /dev/shm whatever the test did.
 *
 * ibemu keeps its fabric in POSIX shared memory (/dev/shm/zinc-ibemu-<fabric>*, README.md). A
 * test that removes it at its end leaves it behind when a check fails (exit) or the process
 * crashes, and CI machines then collect segments. ibemu_test_run runs the test body in a child
 * process of its own process group, with ZINC_IBEMU_FABRIC naming a fabric of this run; the
 * parent, which never touches the fabric, then kills what is left of that group (peers the
 * body forked) and removes the fabric's segments. Only a SIGKILL of the parent itself (a ctest
 * timeout) can leave segments; ibemu reclaims the QP segments of dead processes when a fabric
 * of the same name is opened again.
 */
#ifndef ZN_TESTS_IBEMU_TEST_FABRIC_H
#define ZN_TESTS_IBEMU_TEST_FABRIC_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run child(fd) in a forked process connected to the caller by a socket pair; *fd is the
 * caller's end. Exits 2 if the pair or the process cannot be made. */
static inline pid_t ibemu_test_spawn(void (*child)(int), int *fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        exit(2);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        close(sv[0]);
        child(sv[1]);
        exit(0);
    }
    close(sv[1]);
    *fd = sv[0];
    return pid;
}

/* Unlink the fabric's directory segment and every QP segment of it. */
static inline void ibemu_test_remove_fabric(const char *fabric)
{
    char prefix[96];
    int n = snprintf(prefix, sizeof(prefix), "zinc-ibemu-%s", fabric);
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, (size_t)n) != 0) continue;
        if (e->d_name[n] != 0 && e->d_name[n] != '-') continue; /* another fabric's prefix */
        char name[300];
        snprintf(name, sizeof(name), "/%s", e->d_name);
        shm_unlink(name);
    }
    if (d) closedir(d);
}

/* Run body(arg) in a child with ZINC_IBEMU_FABRIC=<tag>-<pid>; returns an exit status for
 * main (the body's, or 128 + the signal that ended it), after removing the fabric. */
static inline int ibemu_test_run(const char *tag, int (*body)(void *), void *arg)
{
    char fabric[80];
    snprintf(fabric, sizeof(fabric), "%s-%d", tag, (int)getpid());
    setenv("ZINC_IBEMU_FABRIC", fabric, 1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        int rc = body(arg);
        fflush(NULL);
        _exit(rc);
    }
    setpgid(pid, pid); /* also here: no window where the child is still in our group */
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            perror("waitpid");
            return 1;
        }
    }
    kill(-pid, SIGKILL); /* peers the body left behind (none when it passed) */
    ibemu_test_remove_fabric(fabric);
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "%s: the test process died of signal %d\n", tag, WTERMSIG(st));
        return 128 + WTERMSIG(st);
    }
    return WEXITSTATUS(st);
}

#endif
