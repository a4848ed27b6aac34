#include "dump.h"
#include "log.h"
#include "param.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_PROVIDERS 16

struct provider {
    void (*fn)(void *);
    void *arg;
    int refs;
};

static struct {
    /* ctl: starting and stopping the thread (held across the join); lock: the providers,
     * taken by the thread while it prints. Order: ctl, then lock. */
    pthread_mutex_t ctl, lock;
    struct provider prov[MAX_PROVIDERS];
    int nprov;
    int refs; /* all providers' references */
    int running;
    pthread_t thread;
    pid_t owner; /* the process that started the thread (a forked child has none) */
    int sig;
    struct sigaction old_sa;
} dump = { .ctl = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER };

/* The pipe from the handler to the thread, made once and kept for the life of the process:
 * closing it could leave a handler already running with a descriptor number that is reused
 * for something else by the time it writes. */
static int pipe_fd[2] = { -1, -1 };
static atomic_int quit;

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    char b = 'd';
    if (pipe_fd[1] >= 0 && write(pipe_fd[1], &b, 1) < 0) { /* a full pipe: a dump is due */
    }
    errno = saved;
}

static void *dump_main(void *arg)
{
    (void)arg;
    for (;;) {
        char b[64];
        ssize_t n = read(pipe_fd[0], b, sizeof(b));
        if (atomic_load(&quit)) break;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        pthread_mutex_lock(&dump.lock);
        zn_warn(ZN_INIT, "state dump: pid %d, signal %d", (int)getpid(), dump.sig);
        for (int i = 0; i < dump.nprov; i++) dump.prov[i].fn(dump.prov[i].arg);
        zn_warn(ZN_INIT, "state dump: end");
        pthread_mutex_unlock(&dump.lock);
    }
    return NULL;
}

/* Install the handler and start the thread; under dump.ctl. */
static void start_locked(void)
{
    int sig = (int)zn_params()->proxy_dump_signal;
    if (sig <= 0) return;
    if (sig >= NSIG || sig == SIGKILL || sig == SIGSTOP) {
        zn_warn(ZN_INIT, "ZINC_PROXY_DUMP_SIGNAL=%d is not a signal that can be caught", sig);
        return;
    }
    if (pipe_fd[0] < 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) {
            zn_warn(ZN_INIT, "state dump: pipe failed (%s); no dump on signal %d", strerror(errno),
                    sig);
            return;
        }
        /* The handler's end never blocks: a dump already pending is enough. */
        fcntl(p[1], F_SETFL, O_NONBLOCK);
        pipe_fd[0] = p[0];
        pipe_fd[1] = p[1];
    }
    atomic_store(&quit, 0);
    if (pthread_create(&dump.thread, NULL, dump_main, NULL) != 0) {
        zn_warn(ZN_INIT, "state dump: cannot start its thread; no dump on signal %d", sig);
        return;
    }
    struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
    sigemptyset(&sa.sa_mask);
    pthread_mutex_lock(&dump.lock);
    if (sigaction(sig, &sa, &dump.old_sa) == 0) dump.sig = sig;
    pthread_mutex_unlock(&dump.lock);
    dump.owner = getpid();
    dump.running = 1;
}

/* Put the old disposition back and stop the thread; under dump.ctl. */
static void stop_locked(void)
{
    pthread_mutex_lock(&dump.lock);
    if (dump.sig) sigaction(dump.sig, &dump.old_sa, NULL);
    dump.sig = 0;
    pthread_mutex_unlock(&dump.lock);
    dump.running = 0;
    if (dump.owner != getpid()) return; /* a forked child: the thread stayed in the parent */
    atomic_store(&quit, 1);
    char b = 'q';
    /* A full pipe wakes the thread as well. */
    if (write(pipe_fd[1], &b, 1) < 0) {
    }
    pthread_join(dump.thread, NULL);
    /* What the thread did not read belongs to no one now (the read end blocks: poll first). */
    struct pollfd p = { .fd = pipe_fd[0], .events = POLLIN };
    while (poll(&p, 1, 0) == 1 && read(pipe_fd[0], &b, 1) == 1) {
    }
}

void zn_dump_add(void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&dump.ctl);
    pthread_mutex_lock(&dump.lock);
    int i = 0;
    while (i < dump.nprov && !(dump.prov[i].fn == fn && dump.prov[i].arg == arg)) i++;
    int ok = i < dump.nprov || dump.nprov < MAX_PROVIDERS;
    if (ok && i == dump.nprov) dump.prov[dump.nprov++] = (struct provider){ .fn = fn, .arg = arg };
    if (ok) dump.prov[i].refs++;
    pthread_mutex_unlock(&dump.lock);
    if (!ok) { /* a fixed set of kinds registers: not expected */
        zn_warn(ZN_INIT, "state dump: more than %d providers; one is left out", MAX_PROVIDERS);
    } else {
        if (dump.running && dump.owner != getpid()) dump.running = 0; /* forked: none here */
        if (dump.refs++ == 0 && !dump.running) start_locked();
    }
    pthread_mutex_unlock(&dump.ctl);
}

void zn_dump_remove(void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&dump.ctl);
    pthread_mutex_lock(&dump.lock);
    int i = 0;
    while (i < dump.nprov && !(dump.prov[i].fn == fn && dump.prov[i].arg == arg)) i++;
    int found = i < dump.nprov;
    if (found && --dump.prov[i].refs == 0) {
        for (int k = i; k + 1 < dump.nprov; k++) dump.prov[k] = dump.prov[k + 1];
        dump.nprov--;
    }
    pthread_mutex_unlock(&dump.lock);
    if (found && --dump.refs == 0 && dump.running) stop_locked();
    pthread_mutex_unlock(&dump.ctl);
}

int zn_dump_signal(void)
{
    pthread_mutex_lock(&dump.lock);
    int s = dump.sig;
    pthread_mutex_unlock(&dump.lock);
    return s;
}
