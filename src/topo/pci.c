#include "pci.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PCI_MAX_DEPTH 32

/* The components of a device's sysfs path from its host bridge ("pci0000:00") down: the host
 * bridge, then every PCI address (bridges, then the device). */
struct pci_path {
    const char *hb;
    size_t hb_len;
    const char *comp[PCI_MAX_DEPTH];
    size_t len[PCI_MAX_DEPTH];
    int n;
};

/* "dddd:bb:dd.f" in hex. */
static int is_pci_addr(const char *s, size_t n)
{
    static const char shape[] = "xxxx:xx:xx.x";
    if (n != sizeof(shape) - 1) return 0;
    for (size_t i = 0; i < n; i++) {
        int hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
                  (s[i] >= 'A' && s[i] <= 'F');
        if (shape[i] == 'x' ? !hex : s[i] != shape[i]) return 0;
    }
    return 1;
}

static int parse_path(const char *p, struct pci_path *out)
{
    memset(out, 0, sizeof(*out));
    if (!p) return -1;
    while (*p) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - p);
        if (!out->hb && n > 3 && strncmp(p, "pci", 3) == 0) {
            out->hb = p;
            out->hb_len = n;
        } else if (out->hb && is_pci_addr(p, n)) {
            if (out->n == PCI_MAX_DEPTH) return -1;
            out->comp[out->n] = p;
            out->len[out->n++] = n;
        } else if (out->hb && n) {
            break; /* below the device (a class directory, a virtual function's name) */
        }
        p = e;
    }
    return out->hb && out->n ? 0 : -1;
}

static int same(const char *a, size_t la, const char *b, size_t lb)
{
    return la == lb && strncasecmp(a, b, la) == 0;
}

enum zn_pci_dist zn_pci_distance(const char *a, int numa_a, const char *b, int numa_b)
{
    struct pci_path pa, pb;
    if (parse_path(a, &pa) != 0 || parse_path(b, &pb) != 0) return ZN_PCI_SYS;
    if (!same(pa.hb, pa.hb_len, pb.hb, pb.hb_len))
        return numa_a >= 0 && numa_a == numa_b ? ZN_PCI_PHB : ZN_PCI_SYS;
    int common = 0;
    while (common < pa.n && common < pb.n &&
           same(pa.comp[common], pa.len[common], pb.comp[common], pb.len[common]))
        common++;
    if (common == pa.n && common == pb.n) return ZN_PCI_LOC;
    if (common == 0) return ZN_PCI_PHB; /* different root ports: through the host bridge */
    /* Bridges below the last common one on each side, the devices themselves not counted: one
     * switch's downstream ports (siblings under its upstream port) leave one on each side. */
    int below_a = pa.n - common - 1, below_b = pb.n - common - 1;
    return below_a <= 1 && below_b <= 1 ? ZN_PCI_PIX : ZN_PCI_PXB;
}

const char *zn_pci_dist_name(enum zn_pci_dist d)
{
    static const char *names[] = { "LOC", "PIX", "PXB", "PHB", "SYS" };
    return d >= ZN_PCI_LOC && d <= ZN_PCI_SYS ? names[d] : "?";
}

int zn_pci_parse_level(const char *s)
{
    if (!s || !*s) return -1;
    for (int d = ZN_PCI_LOC; d <= ZN_PCI_SYS; d++)
        if (strcasecmp(s, zn_pci_dist_name((enum zn_pci_dist)d)) == 0) return d;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0) return -1;
    return v > ZN_PCI_SYS ? ZN_PCI_SYS : (int)v;
}

int zn_pci_numa_node(const char *path)
{
    char f[PATH_MAX + 16];
    snprintf(f, sizeof(f), "%s/numa_node", path);
    FILE *fp = fopen(f, "r");
    if (!fp) return -1;
    int node = -1;
    if (fscanf(fp, "%d", &node) != 1) node = -1;
    fclose(fp);
    return node;
}

int zn_pci_sysfs_path(const char *bus_id, char *path, size_t len, int *numa)
{
    unsigned dom, bus, dev, fn;
    if (numa) *numa = -1;
    if (len) path[0] = 0;
    if (!bus_id || sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return -1;
    char link[96], real[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", dom & 0xffff, bus, dev,
             fn);
    if (!realpath(link, real) || strlen(real) >= len) return -1;
    snprintf(path, len, "%s", real);
    if (numa) *numa = zn_pci_numa_node(real);
    return 0;
}
