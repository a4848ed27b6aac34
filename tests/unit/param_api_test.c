/*
 * NCCL 2.30's parameter API (ncclParamBind, the typed getters, ncclParamGetStr, ncclParamGet,
 * ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll) against values this
 * program sets before its first zinc call: in the environment (under ZINC_ and NCCL_ names)
 * and in a config file. Every other parameter is unset first, so the defaults are known.
 */
#include "nccl.h"
#include "util/param.h"
#include "zt.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char conf_path[] = "/tmp/zinc-param-conf-XXXXXX";
static char log_path[] = "/tmp/zinc-param-log-XXXXXX";

static ncclParamHandle_t bind(const char *key)
{
    ncclParamHandle_t h = NULL;
    if (ncclParamBind(&h, key) != ncclSuccess) return NULL;
    return h;
}

static int last_error_has(const char *a, const char *b, const char *c)
{
    const char *e = ncclGetLastError(NULL);
    return strstr(e, a) && (!b || strstr(e, b)) && (!c || strstr(e, c));
}

/* Every getter, on each kind of parameter. */
ZT_TEST(typed_values)
{
    ncclParamHandle_t slots = bind("ZINC_NET_SLOTS"), chunk = bind("ZINC_NET_CHUNK");
    ncclParamHandle_t shm = bind("ZINC_SHM_DISABLE"), tc = bind("ZINC_IB_TC");
    ncclParamHandle_t spin = bind("ZINC_SPIN"), timeout = bind("ZINC_TIMEOUT");
    ncclParamHandle_t hostid = bind("ZINC_HOSTID"), mixing = bind("ZINC_GRAPH_MIXING_SUPPORT");
    ZT_ASSERT(slots && chunk && shm && tc && spin && timeout && hostid && mixing);
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    /* INT from the environment: ZINC_NET_SLOTS=7. */
    ZT_EQ_INT(ncclParamGetI8(slots, &i8), ncclSuccess);
    ZT_EQ_INT(i8, 7);
    ZT_EQ_INT(ncclParamGetI16(slots, &i16), ncclSuccess);
    ZT_EQ_INT(i16, 7);
    ZT_EQ_INT(ncclParamGetI32(slots, &i32), ncclSuccess);
    ZT_EQ_INT(i32, 7);
    ZT_EQ_INT(ncclParamGetI64(slots, &i64), ncclSuccess);
    ZT_EQ_INT(i64, 7);
    ZT_EQ_INT(ncclParamGetU8(slots, &u8), ncclSuccess);
    ZT_EQ_INT(u8, 7);
    ZT_EQ_INT(ncclParamGetU16(slots, &u16), ncclSuccess);
    ZT_EQ_INT(u16, 7);
    ZT_EQ_INT(ncclParamGetU32(slots, &u32), ncclSuccess);
    ZT_EQ_INT(u32, 7);
    ZT_EQ_INT(ncclParamGetU64(slots, &u64), ncclSuccess);
    ZT_EQ_INT(u64, 7);
    /* SIZE with a suffix reads as bytes: ZINC_NET_CHUNK=2M. */
    ZT_EQ_INT(ncclParamGetI64(chunk, &i64), ncclSuccess);
    ZT_EQ_INT(i64, 2 << 20);
    ZT_EQ_INT(ncclParamGetU32(chunk, &u32), ncclSuccess);
    ZT_EQ_INT(u32, 2 << 20);
    /* BOOL set as "yes" under its NCCL_ name reads as 1. */
    ZT_EQ_INT(ncclParamGetU8(shm, &u8), ncclSuccess);
    ZT_EQ_INT(u8, 1);
    /* 200 fits uint8_t, 255 of it; -5 fits the signed types. */
    ZT_EQ_INT(ncclParamGetU8(tc, &u8), ncclSuccess);
    ZT_EQ_INT(u8, 200);
    ZT_EQ_INT(ncclParamGetI8(spin, &i8), ncclSuccess);
    ZT_EQ_INT(i8, -5);
    ZT_EQ_INT(ncclParamGetI64(spin, &i64), ncclSuccess);
    ZT_EQ_INT(i64, -5);
    /* 2^31 fits uint32_t and int64_t, not int32_t. */
    ZT_EQ_INT(ncclParamGetU32(timeout, &u32), ncclSuccess);
    ZT_EQ_INT(u32, 2147483648u);
    ZT_EQ_INT(ncclParamGetU64(timeout, &u64), ncclSuccess);
    ZT_EQ_INT(u64, 2147483648u);
    /* A STR whose text is an integer ("0x12c") reads as that integer. */
    ZT_EQ_INT(ncclParamGetI16(hostid, &i16), ncclSuccess);
    ZT_EQ_INT(i16, 300);
    /* An unset INT override reads as INT_MIN. */
    ZT_EQ_INT(ncclParamGetI32(mixing, &i32), ncclSuccess);
    ZT_EQ_INT(i32, INT_MIN);
    /* A default, as the table writes it. */
    size_t n;
    const struct zn_param_desc *t = zn_param_table(&n);
    int pv = zn_param_index("ZINC_NET_PLUGIN_VERSION");
    ZT_ASSERT(pv >= 0);
    ZT_EQ_INT(ncclParamGetU16(bind("ZINC_NET_PLUGIN_VERSION"), &u16), ncclSuccess);
    ZT_EQ_INT(u16, strtol(t[pv].def, NULL, 10));
    ZT_ASSERT(u16 >= 6);
}

/* Values outside the type's range, and STR values that are no number, fail with a message
 * naming key, value and type; the output is left alone. */
ZT_TEST(range_errors)
{
    int8_t i8 = 42;
    int16_t i16 = 42;
    int32_t i32 = 42;
    uint8_t u8 = 42;
    uint16_t u16 = 42;
    uint32_t u32 = 42;
    uint64_t u64 = 42;
    ZT_EQ_INT(ncclParamGetI8(bind("ZINC_IB_TC"), &i8), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_IB_TC", "200", "int8_t"));
    ZT_EQ_INT(i8, 42);
    ZT_EQ_INT(ncclParamGetU8(bind("ZINC_HOSTID"), &u8), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_HOSTID", "300", "uint8_t"));
    ZT_EQ_INT(ncclParamGetI8(bind("ZINC_NET_CHUNK"), &i8), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_NET_CHUNK", "2097152", "int8_t"));
    ZT_EQ_INT(ncclParamGetU16(bind("ZINC_NET_CHUNK"), &u16), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetI32(bind("ZINC_TIMEOUT"), &i32), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_TIMEOUT", "2147483648", "int32_t"));
    ZT_EQ_INT(ncclParamGetU32(bind("ZINC_SPIN"), &u32), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_SPIN", "-5", "uint32_t"));
    ZT_EQ_INT(ncclParamGetU64(bind("ZINC_SPIN"), &u64), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetI16(bind("ZINC_GRAPH_MIXING_SUPPORT"), &i16), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_GRAPH_MIXING_SUPPORT", "unset", "int16_t"));
    ZT_EQ_INT(ncclParamGetI32(bind("NCCL_SOCKET_IFNAME"), &i32), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("ZINC_SOCKET_IFNAME", "\"eth0\"", "not an integer"));
    /* An empty STR is no number either. */
    ZT_EQ_INT(ncclParamGetI64(bind("ZINC_ALGO"), (int64_t *)&u64), ncclInvalidArgument);
    ZT_EQ_INT(i8, 42);
    ZT_EQ_INT(i16, 42);
    ZT_EQ_INT(i32, 42);
    ZT_EQ_INT(u8, 42);
    ZT_EQ_INT(u16, 42);
    ZT_EQ_INT(u32, 42);
    ZT_EQ_INT(u64, 42);
    /* No handle, a pointer that is no handle, no output. */
    int x = 0;
    ZT_EQ_INT(ncclParamGetI32(NULL, &i32), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetI32((ncclParamHandle_t)(void *)&x, &i32), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("not a handle", NULL, NULL));
    ZT_EQ_INT(ncclParamGetI32(bind("ZINC_NET_SLOTS"), NULL), ncclInvalidArgument);
}

/* Both names of a parameter reach it; an unknown key does not. */
ZT_TEST(keys)
{
    ncclParamHandle_t a = bind("NCCL_DEBUG"), b = bind("ZINC_DEBUG");
    ZT_ASSERT(a && a == b);
    const char *s;
    ZT_EQ_INT(ncclParamGetStr(a, &s), ncclSuccess);
    ZT_EQ_STR(s, "WARN");
    ZT_ASSERT(bind("NCCL_SHM_DISABLE") == bind("ZINC_SHM_DISABLE"));
    ZT_ASSERT(bind("NCCL_SHM_DISABLE") != bind("ZINC_NET_SLOTS"));
    ncclParamHandle_t h = (ncclParamHandle_t)(void *)&h;
    ZT_EQ_INT(ncclParamBind(&h, "NCCL_NO_SUCH_PARAM"), ncclInvalidArgument);
    ZT_ASSERT(last_error_has("\"NCCL_NO_SUCH_PARAM\"", NULL, NULL));
    ZT_ASSERT(h == (ncclParamHandle_t)(void *)&h);
    /* Names match exactly. */
    ZT_EQ_INT(ncclParamBind(&h, "zinc_debug"), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamBind(&h, "ZINC_DEBUG "), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamBind(&h, NULL), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamBind(NULL, "ZINC_DEBUG"), ncclInvalidArgument);
    const char *v = "x";
    int len = 99;
    ZT_EQ_INT(ncclParamGetParameter("NCCL_NO_SUCH_PARAM", &v, &len), ncclInvalidArgument);
    ZT_ASSERT(v == NULL);
    ZT_EQ_INT(len, 0);
    ZT_ASSERT(last_error_has("ncclParamGetParameter", "\"NCCL_NO_SUCH_PARAM\"", NULL));
    ZT_EQ_INT(ncclParamGetParameter(NULL, &v, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetParameter("ZINC_DEBUG", NULL, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetParameter("ZINC_DEBUG", &v, NULL), ncclInvalidArgument);
}

/* Text: STR as it is, numbers in decimal whatever the user wrote. */
ZT_TEST(text_values)
{
    static const struct {
        const char *key, *text;
    } want[] = {
        { "ZINC_NET_SLOTS", "7" },    { "ZINC_NET_CHUNK", "2097152" },
        { "NCCL_SHM_DISABLE", "1" },  { "ZINC_SOCKET_IFNAME", "eth0" },
        { "ZINC_HOSTID", "0x12c" },   { "ZINC_GRAPH_MIXING_SUPPORT", "" },
        { "ZINC_SPIN", "-5" },        { "ZINC_TIMEOUT", "2147483648" },
        { "ZINC_GPU_CHUNK", "8192" }, { "NCCL_IB_SL", "5" },
        { "ZINC_TRANSPORT", "auto" }, { "ZINC_SHM_SLOT_SIZE", "1048576" },
        { "ZINC_P2P_DISABLE", "0" },  { "NCCL_DEBUG", "WARN" },
    };
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        const char *s = NULL, *v = NULL;
        int len = -1;
        ZT_EQ_INT(ncclParamGetStr(bind(want[k].key), &s), ncclSuccess);
        ZT_EQ_STR(s, want[k].text);
        ZT_EQ_INT(ncclParamGetParameter(want[k].key, &v, &len), ncclSuccess);
        ZT_EQ_STR(v, want[k].text);
        ZT_EQ_INT(len, strlen(want[k].text));
    }
    /* The two functions keep separate results: one does not overwrite the other's. */
    const char *s, *v;
    int len;
    ZT_EQ_INT(ncclParamGetStr(bind("ZINC_SOCKET_IFNAME"), &s), ncclSuccess);
    ZT_EQ_INT(ncclParamGetParameter("ZINC_TRANSPORT", &v, &len), ncclSuccess);
    ZT_EQ_STR(s, "eth0");
    ZT_EQ_STR(v, "auto");
    ZT_EQ_INT(ncclParamGetStr(NULL, &s), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetStr(bind("ZINC_DEBUG"), NULL), ncclInvalidArgument);
}

struct thread_result {
    const char **main_keys; /* the calling thread's key table */
    const char *str, *value, **keys;
    int ok;
};

static void *other_thread(void *arg)
{
    struct thread_result *r = arg;
    int len, n;
    r->ok = ncclParamGetStr(bind("ZINC_TRANSPORT"), &r->str) == ncclSuccess &&
            ncclParamGetParameter("ZINC_NET_SLOTS", &r->value, &len) == ncclSuccess &&
            ncclParamGetAllParameterKeys(&r->keys, &n) == ncclSuccess && !strcmp(r->str, "auto") &&
            !strcmp(r->value, "7") && r->keys != r->main_keys;
    return NULL;
}

/* Results are per thread: another thread's calls leave this thread's strings as they were. */
ZT_TEST(thread_local_results)
{
    const char *s, *v, **keys;
    int len, n;
    ZT_EQ_INT(ncclParamGetStr(bind("ZINC_SOCKET_IFNAME"), &s), ncclSuccess);
    ZT_EQ_INT(ncclParamGetParameter("ZINC_DEBUG", &v, &len), ncclSuccess);
    ZT_EQ_INT(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
    struct thread_result r = { .main_keys = keys };
    pthread_t t;
    ZT_EQ_INT(pthread_create(&t, NULL, other_thread, &r), 0);
    ZT_EQ_INT(pthread_join(t, NULL), 0);
    ZT_ASSERT(r.ok);
    ZT_EQ_STR(s, "eth0");
    ZT_EQ_STR(v, "WARN");
    ZT_EQ_STR(keys[0], "ZINC_DEBUG");
}

/* ncclParamGet: an int64_t for numbers, the text and its NUL for STR; too small a buffer
 * fails, copies nothing and says how many bytes it needs. */
ZT_TEST(raw_bytes)
{
    char buf[64];
    int len = -1;
    int64_t v;
    memset(buf, 'z', sizeof(buf));
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), buf, sizeof(buf), &len), ncclSuccess);
    ZT_EQ_INT(len, 8);
    memcpy(&v, buf, 8);
    ZT_EQ_INT(v, 7);
    ZT_EQ_INT(buf[8], 'z');
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_CHUNK"), buf, 8, &len), ncclSuccess);
    memcpy(&v, buf, 8);
    ZT_EQ_INT(v, 2 << 20);
    ZT_EQ_INT(ncclParamGet(bind("NCCL_SHM_DISABLE"), buf, 8, &len), ncclSuccess);
    memcpy(&v, buf, 8);
    ZT_EQ_INT(v, 1);
    ZT_EQ_INT(ncclParamGet(bind("ZINC_GRAPH_MIXING_SUPPORT"), buf, 8, &len), ncclSuccess);
    memcpy(&v, buf, 8);
    ZT_EQ_INT(v, INT_MIN);
    memset(buf, 'z', sizeof(buf));
    ZT_EQ_INT(ncclParamGet(bind("ZINC_SOCKET_IFNAME"), buf, sizeof(buf), &len), ncclSuccess);
    ZT_EQ_INT(len, 5);
    ZT_EQ_STR(buf, "eth0");
    ZT_EQ_INT(buf[5], 'z');
    /* Exactly the size fits. */
    memset(buf, 'z', sizeof(buf));
    ZT_EQ_INT(ncclParamGet(bind("ZINC_SOCKET_IFNAME"), buf, 5, &len), ncclSuccess);
    ZT_EQ_STR(buf, "eth0");
    /* One byte less does not, nor does 7 for an integer. */
    memset(buf, 'z', sizeof(buf));
    len = -1;
    ZT_EQ_INT(ncclParamGet(bind("ZINC_SOCKET_IFNAME"), buf, 4, &len), ncclInvalidArgument);
    ZT_EQ_INT(len, 5);
    ZT_EQ_INT(buf[0], 'z');
    ZT_ASSERT(last_error_has("maxLen 4", "5 bytes", "ZINC_SOCKET_IFNAME"));
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), buf, 7, &len), ncclInvalidArgument);
    ZT_EQ_INT(len, 8);
    ZT_EQ_INT(buf[0], 'z');
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), buf, 0, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), buf, -1, &len), ncclInvalidArgument);
    /* An empty STR is its NUL alone. */
    ZT_EQ_INT(ncclParamGet(bind("ZINC_ALGO"), buf, 1, &len), ncclSuccess);
    ZT_EQ_INT(len, 1);
    ZT_EQ_INT(buf[0], 0);
    ZT_EQ_INT(ncclParamGet(NULL, buf, 8, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), NULL, 8, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGet(bind("ZINC_NET_SLOTS"), buf, 8, NULL), ncclInvalidArgument);
}

/* The key list is the table's ZINC_ names, in table order, each once; every one binds. */
ZT_TEST(key_list)
{
    size_t n;
    const struct zn_param_desc *t = zn_param_table(&n);
    const char **keys = NULL;
    int len = -1;
    ZT_EQ_INT(ncclParamGetAllParameterKeys(&keys, &len), ncclSuccess);
    ZT_EQ_INT(len, n);
    for (size_t i = 0; i < n; i++) {
        ZT_EQ_STR(keys[i], t[i].name);
        ZT_ASSERT(bind(keys[i]) != NULL);
        if (t[i].alt_name) ZT_ASSERT(bind(t[i].alt_name) == bind(keys[i]));
    }
    ZT_ASSERT(keys[n] == NULL);
    /* A caller that wrote into the array gets it whole again. */
    keys[0] = "scribbled";
    const char **again;
    ZT_EQ_INT(ncclParamGetAllParameterKeys(&again, &len), ncclSuccess);
    ZT_EQ_STR(again[0], "ZINC_DEBUG");
    ZT_EQ_INT(ncclParamGetAllParameterKeys(NULL, &len), ncclInvalidArgument);
    ZT_EQ_INT(ncclParamGetAllParameterKeys(&again, NULL), ncclInvalidArgument);
}

/* Parameters from the config file: ZINC_GPU_CHUNK=8K, and NCCL_IB_SL=5 under the NCCL_ name. */
ZT_TEST(config_file)
{
    int64_t v;
    uint8_t sl;
    ZT_EQ_INT(ncclParamGetI64(bind("ZINC_GPU_CHUNK"), &v), ncclSuccess);
    ZT_EQ_INT(v, 8192);
    ZT_EQ_INT(ncclParamGetU8(bind("ZINC_IB_SL"), &sl), ncclSuccess);
    ZT_EQ_INT(sl, 5);
    /* The environment wins over the file (which says ZINC_NET_SLOTS=9). */
    ZT_EQ_INT(ncclParamGetI64(bind("ZINC_NET_SLOTS"), &v), ncclSuccess);
    ZT_EQ_INT(v, 7);
}

/* ncclParamDumpAll writes a header and one line per parameter to the log, at the default level
 * (WARN) too, each exactly the entry zinc-info prints. */
ZT_TEST(dump_all)
{
    size_t n;
    zn_param_table(&n);
    struct stat st;
    ZT_EQ_INT(stat(log_path, &st), 0);
    off_t before = st.st_size;
    ncclParamDumpAll();
    ZT_EQ_INT(stat(log_path, &st), 0);
    size_t size = (size_t)(st.st_size - before);
    char *text = calloc(1, size + 1);
    ZT_ASSERT(text);
    int fd = open(log_path, O_RDONLY);
    ZT_ASSERT(fd >= 0);
    ZT_EQ_INT(pread(fd, text, size, before), size);
    close(fd);
    size_t lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *msg = strstr(line, " zinc INFO ENV ");
        if (!msg) ZT_FAIL("not an INFO ENV line: %s", line);
        msg += strlen(" zinc INFO ENV ");
        if (lines == 0) {
            char head[64];
            snprintf(head, sizeof(head), "ncclParamDumpAll: %zu parameters", n);
            ZT_ASSERT(!strncmp(msg, head, strlen(head)));
        } else {
            char want[2048];
            zn_param_format(lines - 1, ": ", want, sizeof(want));
            ZT_EQ_STR(msg, want);
        }
        lines++;
    }
    ZT_EQ_INT(lines, n + 1);
    free(text);
    /* The lines carry value, origin and default. */
    char e[2048];
    zn_param_format((size_t)zn_param_index("ZINC_NET_SLOTS"), ": ", e, sizeof(e));
    ZT_ASSERT(strstr(e, "ZINC_NET_SLOTS       = 7          (env; default \"4\"): staging"));
    zn_param_format((size_t)zn_param_index("ZINC_GPU_CHUNK"), ": ", e, sizeof(e));
    ZT_ASSERT(strstr(e, "= 8K         (file; default \"4K\"): "));
    zn_param_format((size_t)zn_param_index("ZINC_SHM_DISABLE"), ": ", e, sizeof(e));
    ZT_ASSERT(strstr(e, "= yes        (env; default \"0\")  also NCCL_SHM_DISABLE: 1: "));
}

int main(void)
{
    /* Known values: every parameter unset, then the ones the tests read. */
    size_t n;
    const struct zn_param_desc *t = zn_param_table(&n);
    for (size_t i = 0; i < n; i++) {
        unsetenv(t[i].name);
        if (t[i].alt_name) unsetenv(t[i].alt_name);
    }
    int cfd = mkstemp(conf_path), lfd = mkstemp(log_path);
    if (cfd < 0 || lfd < 0) return 1;
    const char *conf = "ZINC_GPU_CHUNK=8K\nNCCL_IB_SL=5\nZINC_NET_SLOTS=9\n";
    if (write(cfd, conf, strlen(conf)) != (ssize_t)strlen(conf)) return 1;
    close(cfd);
    close(lfd);
    setenv("ZINC_CONF_FILE", conf_path, 1);
    setenv("ZINC_DEBUG_FILE", log_path, 1);
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("ZINC_NET_SLOTS", "7", 1);
    setenv("ZINC_NET_CHUNK", "2M", 1);
    setenv("NCCL_SHM_DISABLE", "yes", 1);
    setenv("ZINC_IB_TC", "200", 1);
    setenv("ZINC_SPIN", "-5", 1);
    setenv("ZINC_TIMEOUT", "2147483648", 1);
    setenv("ZINC_SOCKET_IFNAME", "eth0", 1);
    setenv("ZINC_HOSTID", "0x12c", 1);
    static const struct zt_case cases[] = {
        ZT_CASE(typed_values), ZT_CASE(range_errors),         ZT_CASE(keys),
        ZT_CASE(text_values),  ZT_CASE(thread_local_results), ZT_CASE(raw_bytes),
        ZT_CASE(key_list),     ZT_CASE(config_file),          ZT_CASE(dump_all),
    };
    int rc = zt_run(cases, (int)(sizeof(cases) / sizeof(cases[0])));
    unlink(conf_path);
    unlink(log_path);
    return rc;
}
