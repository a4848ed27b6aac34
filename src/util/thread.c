#include "thread.h"

#include <pthread.h>

int zn_thread_start_detached(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err) return err;
    err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (!err) err = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return err;
}
