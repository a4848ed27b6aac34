/*
 * The net conformance suite: what any ncclNet_t (v11 view) must do, driven only through its
 * table. conf_socket_test.c runs it on zinc's socket net from the registry, conf_plugin_test.c on
 * nets loaded from plugins (libnccl-net-zinc.so, and the counting plugin in count_plugin.c).
 */
#ifndef ZN_TESTS_NET_CONFORMANCE_H
#define ZN_TESTS_NET_CONFORMANCE_H

#include "net/nccl_net.h"

/* Calls the suite made through the table (in this process), so that a wrapping plugin's own
 * counts can be checked against them. */
struct nt_tally {
    long listen, connect, accept, isend, irecv, test, close_send, close_recv, close_listen;
};

extern struct nt_tally nt_tally;

/* Run every case on net (already init'ed into ctx, device 0). Returns the number of failed
 * cases. last_error, when not NULL, returns the text of the net's last error for the cases
 * that check what an error message names (NULL: those checks are skipped, e.g. for a plugin,
 * whose errors are recorded in its own copy of zinc). */
int nt_run_suite(const ncclNet_t *net, void *ctx, const char *(*last_error)(void));

#endif
