/*
 * rd: recursive doubling allreduce, the latency algorithm over point-to-point connections.
 *
 * Ranks are numbered by their ring position, so the first exchanges (mask 1, 2, ...) stay
 * inside a host when hosts are contiguous in the ring. With pof2 the largest power of two
 * <= n and rem = n - pof2, the standard fold handles any n: among the first 2*rem positions,
 * each even one ("extra") hands its vector to the odd one after it and later gets the result
 * back; the pof2 remaining ranks run log2(pof2) full-duplex exchanges of the whole vector,
 * each followed by a reduction (recvbuf = mine op theirs).
 *
 * Both partners of an exchange reduce the same two operands and zn_reduce2 is commutative bit
 * for bit, so after every step the partners hold identical vectors and every rank ends with
 * bit-identical results.
 *
 * The vector is processed in pieces of at most chunk_size bytes, so scratch stays one piece even
 * if ZINC_ALGO forces rd onto a large message; for the small messages the cost model gives it
 * that is one piece, the whole vector per step. Between pieces, returning piece c to an extra
 * rank shares a round with receiving piece c+1 from it.
 */
#include "msg_util.h"

#include <string.h>

enum {
    ST_SINGLE, /* zn_msg_next_single's flag (n == 1) */
    ST_C,      /* piece */
    ST_M,      /* within a piece: 0 = fold round, m = exchange with mask 1 << (m-1) */
    ST_K,      /* pieces */
    ST_CE,     /* elements per piece */
    ST_ROLE,
    ST_L,       /* log2(pof2): exchanges per piece */
    ST_NEWRANK, /* rank among the pof2 participants */
    ST_REM,
};

enum { ROLE_PLAIN, ROLE_FOLDER, ROLE_EXTRA };

/* Its rounds (exchanges of the whole vector) are allreduce's alone. */
static int rd_supports(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    return a->coll == ZN_COLL_ALLREDUCE;
}

static int floor_log2(int n)
{
    int l = 0;
    while ((2 << l) <= n) l++;
    return l;
}

static double rd_cost(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1) return zn_msg_cost_single(a);
    size_t ce = zn_msg_chunk_elems(ctx, a->esize);
    double k = (double)zn_msg_npieces(a->count, ce);
    size_t piece = zn_msg_min(ce, a->count) * a->esize;
    double msg = zn_cost_msg(ctx, piece), red = 2.0 * (double)piece / zn_cost.reduce_bw;
    int l = floor_log2(n), rem = n - (1 << l);
    double c = k * l * (msg + red);
    if (rem) c += (k + 1) * msg + k * red;
    return c;
}

static int role_of(int vp, int rem)
{
    if (vp >= 2 * rem) return ROLE_PLAIN;
    return vp % 2 ? ROLE_FOLDER : ROLE_EXTRA;
}

static size_t rd_scratch(const struct zn_algo_ctx *ctx, const struct zn_coll_args *a)
{
    int n = ctx->nranks;
    if (n == 1) return 0;
    int rem = n - (1 << floor_log2(n));
    if (role_of(ctx->ring_pos, rem) == ROLE_EXTRA) return 0;
    return zn_msg_min(zn_msg_chunk_elems(ctx, a->esize), a->count) * a->esize;
}

static void rd_start(struct zn_plan *p)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    int n = ctx->nranks, vp = ctx->ring_pos;
    memset(p->st, 0, sizeof(p->st));
    p->st[ST_CE] = (int64_t)zn_msg_chunk_elems(ctx, p->a.esize);
    p->st[ST_K] = (int64_t)zn_msg_npieces(p->a.count, (size_t)p->st[ST_CE]);
    int l = floor_log2(n), rem = n - (1 << l);
    p->st[ST_L] = l;
    p->st[ST_REM] = rem;
    p->st[ST_ROLE] = role_of(vp, rem);
    p->st[ST_NEWRANK] = vp < 2 * rem ? vp / 2 : vp - rem;
}

/* Ring position of participant newrank nr. */
static int participant_pos(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

/* One round of an extra rank: hand over piece j, take back the result of piece j-1. */
static int extra_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_coll_args *a = &p->a;
    size_t j = (size_t)p->st[ST_C], k = (size_t)p->st[ST_K], ce = (size_t)p->st[ST_CE];
    size_t es = a->esize;
    if (j > k) return 0;
    int partner = p->ctx->ring[p->ctx->ring_pos + 1];
    zn_msg_send(r, partner, zn_msg_at(a->sendbuf, j * ce, es),
                zn_msg_piece_len(a->count, j, ce) * es);
    if (j >= 1)
        zn_msg_recv(r, partner, zn_msg_at(a->recvbuf, (j - 1) * ce, es),
                    zn_msg_piece_len(a->count, j - 1, ce) * es);
    p->st[ST_C]++;
    return 1;
}

static int participant_round(struct zn_plan *p, struct zn_round *r)
{
    const struct zn_algo_ctx *ctx = p->ctx;
    const struct zn_coll_args *a = &p->a;
    size_t c = (size_t)p->st[ST_C], k = (size_t)p->st[ST_K], ce = (size_t)p->st[ST_CE];
    size_t es = a->esize, len = zn_msg_piece_len(a->count, c, ce);
    int m = (int)p->st[ST_M], l = (int)p->st[ST_L], rem = (int)p->st[ST_REM];
    int folder = p->st[ST_ROLE] == ROLE_FOLDER;
    if (c > k) return 0;
    char *out = zn_msg_at(a->recvbuf, c * ce, es);
    if (m == 0) {
        /* Fold: the folder takes piece c from its extra rank and returns piece c-1. */
        if (folder) {
            int extra = ctx->ring[ctx->ring_pos - 1];
            if (c >= 1)
                zn_msg_send(r, extra, zn_msg_at(a->recvbuf, (c - 1) * ce, es),
                            zn_msg_piece_len(a->count, c - 1, ce) * es);
            if (c < k) {
                zn_msg_recv(r, extra, p->scratch, len * es);
                zn_round_reduce2(r, out, zn_msg_at(a->sendbuf, c * ce, es), p->scratch, len);
            }
        }
        if (c == k) { /* after the last piece: only its return to the extra rank */
            p->st[ST_C]++;
            return 1;
        }
    } else {
        int nr = (int)p->st[ST_NEWRANK] ^ (1 << (m - 1));
        int peer = ctx->ring[participant_pos(nr, rem)];
        /* Until this rank has reduced something, its partial result is its own input. */
        const void *mine = m == 1 && !folder ? zn_msg_at(a->sendbuf, c * ce, es) : out;
        zn_msg_send(r, peer, mine, len * es);
        zn_msg_recv(r, peer, p->scratch, len * es);
        zn_round_reduce2(r, out, mine, p->scratch, len);
    }
    if (++p->st[ST_M] > l) {
        p->st[ST_M] = 0;
        p->st[ST_C]++;
    }
    return 1;
}

static int rd_next(struct zn_plan *p, struct zn_round *r)
{
    if (p->ctx->nranks == 1) return zn_msg_next_single(p, r);
    int (*round)(struct zn_plan *, struct zn_round *) =
        p->st[ST_ROLE] == ROLE_EXTRA ? extra_round : participant_round;
    return zn_algo_next_nonempty(p, r, round);
}

const struct zn_algo zn_algo_rd = {
    .name = "rd",
    .doc = "recursive doubling allreduce over point-to-point connections (fold for non-powers of "
           "two); log2(n) steps of the whole vector, best for small messages",
    .supports = rd_supports,
    .cost = rd_cost,
    .scratch = rd_scratch,
    .start = rd_start,
    .next = rd_next,
};
