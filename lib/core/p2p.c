/* p2p.c - point-to-point messages of a node communicator (p2p.h).
 *
 * Rings. Every ordered pair (s, r) has a ring of `cap` bytes in the arena (shm/arena.h): s
 * writes frames into it, r reads them and hands the room back with tails[s] of its control
 * block. Positions only grow (cap a power of two); s checks r's tail (one beyond what s
 * wrote, or behind what it saw before, is -EPROTO) and r checks every frame's header (one
 * that does not parse is -EPROTO): never a read or write outside the ring.
 *
 * Stamps. A frame is published by its first 8 bytes, written last (release): its stamp,
 * the pair's salt XOR its 64-bit position. The receiver polls the stamp where the next
 * frame will start, so a message costs it one cache-line transfer, the frame's own (with a
 * head counter to poll first, it cost two). Nothing older can pass for the stamp: an older
 * frame's stamp names another position, and what else can lie there (payload bytes of an
 * earlier lap, zeros) would have to equal a salted 64-bit value (its top bit set). s still
 * stores heads[r] (relaxed: no one polls it) so that counters can carry on from it.
 *
 * Frames. The stamp, a 32-byte header (kind, context, tag, source, payload length, message
 * bytes, the sender's message id), its payload right after it, the whole padded to 64 bytes
 * (a message of up to 24 bytes travels in one line):
 *   EAGER  a whole message of at most eager_max bytes, in the payload
 *   RTS    a request to send a larger one: where its data is (address, or heap offset)
 *   CTS    clear to send: the receiver will take limit bytes of message id as data frames
 *   DATA   the next piece of a streamed message
 *   FIN    the receiver has read message id itself: the send is complete
 *
 * Matching follows MPI. A receive takes the earliest matching message: first among those
 * that arrived unmatched (the unexpected queue, in arrival order), then from the rings,
 * which are read in order; an arriving message goes to the earliest posted receive that
 * matches it. So messages of one sender and one tag arrive in the order they were sent, and
 * a wildcard receive takes, among one sender's matching messages, the earliest.
 *
 * Rendezvous. A message above eager_max is announced by an RTS and read by the receiver
 * once matched, in one copy where it can: from the sender's symmetric heap (memcpy from the
 * arena), from a sender that is a thread of this process (memcpy), or with process_vm_readv
 * from cma_min bytes on where single copies are allowed (cma.c); it then sends a FIN. Else
 * it sends a CTS and the sender streams the data through the ring in chunk-sized frames,
 * which the receiver copies out as they come: two copies, pipelined on two CPUs.
 *
 * Waking. A rank that sleeps waiting for point-to-point progress counts itself in its
 * `sleepers` word and sleeps on its `bell`; whoever publishes frames to it, or hands back
 * room it waits for, rings the bell when it sees a sleeper (a seq_cst store of the counter,
 * then a seq_cst load of sleepers, against the sleeper's seq_cst increment and fence before
 * it looks again: one of the two sees the other). */
#include "lib/core/p2p.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/cma.h"
#include "lib/kernels/copy.h"
#include "lib/core/env.h"
#include "lib/core/heap.h"
#include "lib/core/live.h"
#include "lib/core/state.h"
#include "lib/core/task.h"
#include "lib/core/progress.h"

enum { F_EAGER = 1, F_RTS, F_CTS, F_DATA, F_FIN, F_KINDS };

struct p2p_frame {
	uint8_t kind;
	uint8_t zero;
	uint16_t ctx;
	int32_t tag;
	int32_t src;    /* the rank that sent the message */
	uint32_t len;   /* payload bytes after this header */
	uint64_t total; /* EAGER, RTS: the message's bytes; CTS: bytes the receiver takes */
	uint64_t id;    /* the sender's id of the message */
};
static_assert(sizeof(struct p2p_frame) == 32, "a frame header is half a 64-byte line");

#define FRAME_ALIGN 64
#define STAMP_BYTES 8                                        /* before the header */
#define FRAME_HDR   (STAMP_BYTES + sizeof(struct p2p_frame)) /* before the payload */

/* The payload of an RTS: where the receiver reads the message. */
struct p2p_rts {
	uint64_t addr;     /* its address in the sender's memory */
	uint64_t heap_off; /* its offset in the sender's symmetric heap, or NO_OFF */
};

/* A control frame owed to a peer; op, if any, completes once it is written. */
struct p2p_ctl {
	uint8_t kind;
	uint64_t id, total;
	struct shmcoll_p2p_op *op;
};

/* A message that arrived before any receive matched it. */
struct p2p_unexp {
	struct shmcoll_link link; /* on the node's uq */
	int kind, src, tag;
	uint16_t ctx;
	uint64_t total, id;
	struct p2p_rts rts;
	struct shmcoll_p2p_op *sync; /* a synchronous send to this rank it completes, or NULL */
	uint8_t data[];              /* EAGER: the message */
};

/* Eager messages up to this size by default (measured: docs/BENCHMARKS.md,
 * "Point-to-point"); never more than a quarter of a ring, so four are in flight. */
#define EAGER_DEFAULT 16384
/* Spins before the first yield of a wait when every rank has a CPU (as shm/wait.c; how long
 * it yields is shm/wait.c's shmcoll__pace_yield). */
#define SPIN_ITERS 4096
/* Longest sleep on the bell: 50 ms, as shm/wait.c; 1 ms while collectives are outstanding,
 * or other communicators of the process have work, whose peers wake sleepers on their own
 * words, not on this rank's bell. */
#define SLEEP_SLICE_NS     50000000
#define SLEEP_SLICE_MIX_NS 1000000

/* ---- lists ---- */

/* The operations and unmatched messages on the lists of lib/core/list.h. */
static struct shmcoll_p2p_op *op_at(struct shmcoll_link *e)
{
	return e ? shmcoll__entry(e, struct shmcoll_p2p_op, head.link) : NULL;
}

static struct p2p_unexp *unexp_at(struct shmcoll_link *e)
{
	return e ? shmcoll__entry(e, struct p2p_unexp, link) : NULL;
}

static void list_push(struct shmcoll_list *l, struct shmcoll_p2p_op *op)
{
	shmcoll__list_push(l, &op->head.link);
}

static void list_remove(struct shmcoll_list *l, struct shmcoll_p2p_op *op)
{
	shmcoll__list_remove(l, &op->head.link);
}

static void complete(struct shmcoll_node *n, struct shmcoll_p2p_op *op, int rc)
{
	op->state = ST_DONE;
	op->head.rc = rc;
	op->head.done = 1;
	n->p2p.active--;
}

/* ---- failure ---- */

/* Before this rank's sends complete with an error (and their caller may free the buffers): a
 * peer that reads one of them in place now (pull) finishes first. The peer names us in its
 * pulling word before it looks at the abort word, and every failure follows a store to that
 * word or a load that saw it (seq_cst both), so a peer either sees the abort and does not
 * read or is seen here. Bounded by the peer's death and a second, for a peer stopped
 * mid-copy. */
static void await_readers(struct shmcoll_node *n)
{
	int64_t until = 0;
	int p;

	for (p = 0; p < n->size; p++) {
		_Atomic uint32_t *w = &shmcoll__ctrl(&n->arena, (uint32_t)p)->pulling;

		while (p != n->rank && atomic_load(w) == (uint32_t)n->rank + 1) {
			if (!until)
				until = shmcoll__now_ns() + 1000000000;
			if (shmcoll__live_dead(n, p) || shmcoll__now_ns() > until)
				break;
			sched_yield();
		}
	}
}

void shmcoll__p2p_fail_all(struct shmcoll_node *n, int rc)
{
	struct shmcoll_p2p *q = &n->p2p;
	struct shmcoll_list *lists[] = {&q->posted, &q->rdv, &q->pulls};
	struct shmcoll_p2p_op *op;
	struct p2p_unexp *u;
	unsigned i, k;
	int p;

	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		while ((op = op_at(lists[i]->head)) != NULL) {
			list_remove(lists[i], op);
			complete(n, op, rc);
		}
	for (u = unexp_at(q->uq.head); u; u = unexp_at(u->link.next))
		if (u->sync) {
			complete(n, u->sync,
			         rc); /* a synchronous send to this rank, never matched */
			u->sync = NULL;
		}
	for (p = 0; p < n->size; p++) {
		struct p2p_peer *pr = &q->peers[p];

		while ((op = op_at(pr->out.head)) != NULL) {
			list_remove(&pr->out, op);
			complete(n, op, rc);
		}
		for (k = 0; k < pr->nctl; k++)
			if (pr->ctl[k].op)
				complete(n, pr->ctl[k].op, rc);
		pr->nctl = 0;
		pr->busy = 0;
	}
	q->nbusy = 0;
	await_readers(n);
}

/* The communicator broke (found by anyone): every operation fails with what broke it. */
static int broken(struct shmcoll_node *n, const char *fn)
{
	int rc = shmcoll__node_enter(n, fn);

	if (rc == 0)
		rc = -ECANCELED;
	shmcoll__p2p_fail_all(n, rc);
	return rc;
}

/* Rank p wrote ring state that cannot be: nothing it says can be trusted. */
static int corrupt(struct shmcoll_node *n, const char *fn, int p, const char *what)
{
	shmcoll__node_break(n, EPROTO);
	shmcoll__node_fail(n, -EPROTO, "%s: rank %d wrote a malformed point-to-point frame (%s)",
	                   fn, p, what);
	shmcoll__p2p_fail_all(n, -EPROTO);
	return -EPROTO;
}

static int out_of_memory(struct shmcoll_node *n, const char *fn, size_t bytes)
{
	shmcoll__node_break(n, ENOMEM);
	shmcoll__node_fail(n, -ENOMEM, "%s: out of memory for %zu bytes of point-to-point state",
	                   fn, bytes);
	shmcoll__p2p_fail_all(n, -ENOMEM);
	return -ENOMEM;
}

/* ---- rings ---- */

static uint32_t frame_bytes(size_t len)
{
	return (uint32_t)((FRAME_HDR + len + FRAME_ALIGN - 1) & ~(size_t)(FRAME_ALIGN - 1));
}

static void ring_write(uint8_t *ring, uint32_t cap, uint32_t pos, const void *src, size_t len)
{
	uint32_t at = pos & (cap - 1);
	size_t first = len < cap - at ? len : cap - at;

	memcpy(ring + at, src, first);
	if (len > first)
		memcpy(ring, (const uint8_t *)src + first, len - first);
}

/* len <= 24 bytes from s to d with fixed-size moves (overlapping ones where len is not a
 * multiple): a library memcpy call costs more than such a message's copy. */
static inline void copy_small(uint8_t *d, const uint8_t *s, size_t len)
{
	if (len >= 8) {
		memcpy(d, s, 8);
		if (len > 16)
			memcpy(d + 8, s + 8, 8);
		memcpy(d + len - 8, s + len - 8, 8);
	} else if (len >= 4) {
		memcpy(d, s, 4);
		memcpy(d + len - 4, s + len - 4, 4);
	} else {
		for (size_t i = 0; i < len; i++)
			d[i] = s[i];
	}
}

/* The payload bytes a frame carries in its first line, after the stamp and header. */
#define LINE_PAYLOAD (FRAME_ALIGN - FRAME_HDR)
static_assert(FRAME_ALIGN - FRAME_HDR == 24, "copy_small() moves at most 24 bytes");

static void ring_read(const uint8_t *ring, uint32_t cap, uint32_t pos, void *dst, size_t len)
{
	uint32_t at = pos & (cap - 1);
	size_t first = len < cap - at ? len : cap - at;

	shmcoll__copy_out(dst, ring + at, first);
	if (len > first)
		shmcoll__copy_out((uint8_t *)dst + first, ring, len - first);
}

/* The stamp of the frame at position pos of a ring whose pair has this salt. */
static uint64_t stamp_of(uint64_t salt, uint64_t pos)
{
	return salt ^ pos;
}

static _Atomic uint64_t *stamp_at(uint8_t *ring, uint32_t cap, uint32_t pos)
{
	return (_Atomic uint64_t *)(void *)(ring + (pos & (cap - 1)));
}

static void ring_bell(struct shmcoll_node *n, int p)
{
	_Atomic uint32_t *bell = shmcoll__p2p_bell(&n->arena, (uint32_t)p);

	fetch_add_seqcst(bell, 1);
	shmcoll__wake_all(bell);
}

/* Whether the ring to p has need bytes free: 1, 0, or -EPROTO (p's tail cannot be). */
static int room(struct shmcoll_node *n, const char *fn, int p, uint32_t need)
{
	struct p2p_peer *pr = &n->p2p.peers[p];
	uint32_t t;

	if (n->p2p.cap - (pr->head - pr->tail_seen) >= need)
		return 1;
	/* Acquire: pairs with the release of the tail in drain(): p has read what it
	 * handed back before we overwrite it. */
	t = load_acquire(shmcoll__ring_tail(&n->arena, (uint32_t)n->rank, (uint32_t)p));
	if ((uint32_t)(pr->head - t) > n->p2p.cap || (int32_t)(t - pr->tail_seen) < 0)
		return corrupt(n, fn, p, "its tail is outside the ring");
	pr->tail_seen = t;
	return n->p2p.cap - (pr->head - t) >= need;
}

static void put_frame(struct shmcoll_node *n, int p, const struct p2p_frame *h, const void *payload)
{
	struct p2p_peer *pr = &n->p2p.peers[p];
	uint8_t *ring = shmcoll__ring(&n->arena, (uint32_t)n->rank, (uint32_t)p);
	uint32_t fb = frame_bytes(h->len);

	uint8_t *line = ring + (pr->head & (n->p2p.cap - 1));

	/* A frame starts a line, so its stamp and header never wrap, nor a payload that fits
	 * in the line with them. */
	memcpy(line + STAMP_BYTES, h, sizeof(*h));
	if (h->len <= LINE_PAYLOAD)
		copy_small(line + FRAME_HDR, payload, h->len);
	else
		ring_write(ring, n->p2p.cap, pr->head + (uint32_t)FRAME_HDR, payload, h->len);
	/* Release: the header and payload are written before the stamp says so. */
	store_release(stamp_at(ring, n->p2p.cap, pr->head), stamp_of(pr->salt, pr->pos));
	pr->head += fb;
	pr->pos += fb;
}

void shmcoll__p2p_nudge(struct shmcoll_node *n)
{
	/* The store half of the bell's pattern, as publish(): what ready() reads was written
	 * before this looks at the sleepers. */
	atomic_thread_fence(memory_order_seq_cst);
	if (load_relaxed(shmcoll__p2p_sleepers(&n->arena, (uint32_t)n->rank)))
		ring_bell(n, n->rank);
}

/* After frames were stamped for p: wakes p if it sleeps. */
static void publish(struct shmcoll_node *n, int p)
{
	store_relaxed(shmcoll__ring_head(&n->arena, (uint32_t)n->rank, (uint32_t)p),
	              n->p2p.peers[p].head);
	/* The store half of the bell's store-buffer pattern (against the sleeper's
	 * increment in wait_until()): the stamps, then a look at the sleepers. */
	atomic_thread_fence(memory_order_seq_cst);
	if (load_relaxed(shmcoll__p2p_sleepers(&n->arena, (uint32_t)p)))
		ring_bell(n, p);
}

static void frame_of(struct p2p_frame *h, int kind, const struct shmcoll_p2p_op *op, int src,
                     uint32_t len, uint64_t total)
{
	memset(h, 0, sizeof(*h));
	h->kind = (uint8_t)kind;
	h->ctx = op ? op->ctx : 0;
	h->tag = op ? op->tag : 0;
	h->src = src;
	h->len = len;
	h->total = total;
	h->id = op ? op->id : 0;
}

static void mark_busy(struct shmcoll_node *n, int p)
{
	struct p2p_peer *pr = &n->p2p.peers[p];

	if (!pr->busy) {
		pr->busy = 1;
		n->p2p.busy[n->p2p.nbusy++] = p;
	}
}

static int queue_ctl(struct shmcoll_node *n, const char *fn, int p, int kind, uint64_t id,
                     uint64_t total, struct shmcoll_p2p_op *op)
{
	struct p2p_peer *pr = &n->p2p.peers[p];

	if (pr->nctl == pr->capctl) {
		unsigned cap = pr->capctl ? 2 * pr->capctl : 8;
		struct p2p_ctl *c = realloc(pr->ctl, cap * sizeof(*c));

		if (!c)
			return out_of_memory(n, fn, cap * sizeof(*c));
		pr->ctl = c;
		pr->capctl = cap;
	}
	pr->ctl[pr->nctl++] =
	    (struct p2p_ctl){.kind = (uint8_t)kind, .id = id, .total = total, .op = op};
	mark_busy(n, p);
	return 0;
}

/* The first frame of a send, which is on no list: the whole message (EAGER) or its
 * announcement (RTS). 1 once written, 0 without room, or an error (op failed). */
static int send_first(struct shmcoll_node *n, const char *fn, struct shmcoll_p2p_op *op)
{
	struct p2p_frame h;
	struct p2p_rts rts;
	int eager = op->bytes <= n->p2p.eager_max && !op->sync, rc;

	rc = room(n, fn, op->peer, frame_bytes(eager ? op->bytes : sizeof(rts)));
	if (rc < 0)
		complete(n, op, rc); /* on no list: the others failed in room() */
	if (rc <= 0)
		return rc;
	if (eager) {
		frame_of(&h, F_EAGER, op, n->rank, (uint32_t)op->bytes, op->bytes);
		put_frame(n, op->peer, &h, op->buf);
		complete(n, op, 0);
		return 1;
	}
	rts.addr = (uint64_t)(uintptr_t)op->buf;
	rts.heap_off = shmcoll__heap_off(n, op->buf, op->bytes);
	frame_of(&h, F_RTS, op, n->rank, sizeof(rts), op->bytes);
	put_frame(n, op->peer, &h, &rts);
	op->state = ST_RDV;
	list_push(&n->p2p.rdv, op);
	return 1;
}

/* Writes what waits for p while there is room: control frames first (they free the peer),
 * then sends in order. Returns 0 or an error. */
static int flush(struct shmcoll_node *n, const char *fn, int p)
{
	struct shmcoll_p2p *q = &n->p2p;
	struct p2p_peer *pr = &q->peers[p];
	struct shmcoll_p2p_op *op;
	struct p2p_frame h;
	uint32_t start = pr->head, len, fit;
	unsigned k = 0;
	int rc = 0;

	for (; k < pr->nctl; k++) {
		struct p2p_ctl *c = &pr->ctl[k];

		rc = room(n, fn, p, frame_bytes(0));
		if (rc <= 0)
			break;
		frame_of(&h, c->kind, NULL, n->rank, 0, c->total);
		h.id = c->id;
		put_frame(n, p, &h, NULL);
		if (c->op)
			complete(n, c->op, c->op->total > c->op->bytes ? -EMSGSIZE : 0);
	}
	if (rc < 0)
		return rc;
	if (k) {
		memmove(pr->ctl, pr->ctl + k, (pr->nctl - k) * sizeof(*pr->ctl));
		pr->nctl -= k;
	}
	while (pr->nctl == 0 && (op = op_at(pr->out.head)) != NULL) {
		if (op->state == ST_QUEUED) {
			list_remove(&pr->out, op);
			rc = send_first(n, fn, op);
			if (rc <= 0) {
				/* Back at the head: nothing was written. */
				shmcoll__list_push_front(&pr->out, &op->head.link);
				break;
			}
			continue;
		}
		/* ST_STREAM: the next chunk, or as much of it as fits once a good share of
		 * the ring is free. */
		while (op->off < op->limit) {
			len = (uint32_t)(op->limit - op->off < q->chunk ? op->limit - op->off
			                                                : q->chunk);
			rc = room(n, fn, p, frame_bytes(len));
			if (rc < 0)
				return rc;
			if (rc == 0) {
				fit = q->cap - (pr->head - pr->tail_seen);
				fit = fit > FRAME_HDR ? (fit - (uint32_t)FRAME_HDR) &
				                            ~(uint32_t)(FRAME_ALIGN - 1)
				                      : 0;
				if (fit < len && fit < q->cap / 8)
					break;
				len = fit < len ? fit : len;
			}
			frame_of(&h, F_DATA, op, n->rank, len, op->limit);
			put_frame(n, p, &h, op->buf + op->off);
			op->off += len;
			/* A large frame goes out at once: the receiver copies it out while we
			 * write the next. */
			if (frame_bytes(len) >= q->cap / 8) {
				publish(n, p);
				start = pr->head;
			}
		}
		if (op->off < op->limit)
			break;
		list_remove(&pr->out, op);
		complete(n, op, 0);
	}
	if (pr->head != start)
		publish(n, p);
	return rc < 0 ? rc : 0;
}

static int flush_all(struct shmcoll_node *n, const char *fn)
{
	struct shmcoll_p2p *q = &n->p2p;
	int i, p, rc;

	for (i = 0; i < q->nbusy;) {
		p = q->busy[i];
		rc = flush(n, fn, p);
		if (rc < 0)
			return rc;
		if (q->peers[p].nctl || q->peers[p].out.head) {
			i++;
			continue;
		}
		q->peers[p].busy = 0;
		q->busy[i] = q->busy[--q->nbusy];
	}
	return 0;
}

/* ---- receiving ---- */

static int matches(const struct shmcoll_p2p_op *op, int src, int tag, int ctx)
{
	return op->ctx == ctx && (op->peer == P2P_ANY || op->peer == src) &&
	       (op->tag == P2P_ANY || op->tag == tag);
}

static struct shmcoll_p2p_op *match_posted(struct shmcoll_node *n, int src, int tag, int ctx)
{
	struct shmcoll_p2p_op *op;

	for (op = op_at(n->p2p.posted.head); op; op = op_at(op->head.link.next))
		if (matches(op, src, tag, ctx)) {
			list_remove(&n->p2p.posted, op);
			return op;
		}
	return NULL;
}

static struct shmcoll_p2p_op *find_id(struct shmcoll_list *l, int peer, uint64_t id)
{
	struct shmcoll_p2p_op *op;

	for (op = op_at(l->head); op; op = op_at(op->head.link.next))
		if (op->id == id && (op->kind == P2P_SEND ? op->peer : op->src) == peer)
			return op;
	return NULL;
}

static void matched(struct shmcoll_p2p_op *op, int src, int tag, uint64_t total, uint64_t id)
{
	op->src = src;
	op->rtag = tag;
	op->total = total;
	op->id = id;
	op->limit = total < op->bytes ? total : op->bytes;
}

/* Whether rank p is a thread of this process: its buffers are ours to read. */
static int same_process(const struct shmcoll_node *n, int p)
{
	const struct shmcoll_proc_id *a = &shmcoll__ctrl(&n->arena, (uint32_t)p)->proc;

	return a->pid == n->st.me->proc.pid && a->pidns == n->st.me->proc.pidns;
}

/* A receive matched an RTS from src: read the data in one copy where it can (then owe a
 * FIN), or ask for it to be streamed (a CTS). */
static int pull(struct shmcoll_node *n, const char *fn, struct shmcoll_p2p_op *op,
                const struct p2p_rts *rts)
{
	const uint8_t *from;
	int src = op->src, rc, heap = op->limit && rts->heap_off != NO_OFF;
	int mine = op->limit && !heap && same_process(n, src);
	int cma = op->limit && !heap && !mine && n->cma.ok && n->p2p.cma_min &&
	          op->limit >= n->p2p.cma_min;

	if (heap || mine || cma) {
		/* Reading the sender's buffer where it is: say so first (await_readers). */
		atomic_store(&n->st.me->pulling, (uint32_t)src + 1);
		if (atomic_load(&n->arena.hdr->aborted)) {
			atomic_store_explicit(&n->st.me->pulling, 0, memory_order_release);
			return broken(n, fn);
		}
	}
	if (heap) {
		from = shmcoll__heap_peer(n, src, rts->heap_off, op->limit);
		rc = from ? 0 : corrupt(n, fn, src, "a heap buffer outside its heap");
		if (from)
			memcpy(op->buf, from, op->limit);
	} else if (mine) {
		memcpy(op->buf, (const void *)(uintptr_t)rts->addr, op->limit);
		rc = 0;
	} else if (cma) {
		rc = shmcoll__cma_read(n, fn, src, op->buf, rts->addr, op->limit);
	} else if (op->limit) {
		op->state = ST_STREAM;
		op->off = 0;
		list_push(&n->p2p.pulls, op);
		return queue_ctl(n, fn, src, F_CTS, op->id, op->limit, NULL);
	}
	if (heap || mine || cma) {
		atomic_store_explicit(&n->st.me->pulling, 0, memory_order_release);
		if (rc < 0) {
			if (cma)
				shmcoll__p2p_fail_all(n, rc);
			return rc;
		}
	}
	op->got = op->limit;
	op->state = ST_FIN;
	return queue_ctl(n, fn, src, F_FIN, op->id, 0, op);
}

/* pull(), and on failure the receive (on no list now) fails with everything else. */
static int start_pull(struct shmcoll_node *n, const char *fn, struct shmcoll_p2p_op *op,
                      const struct p2p_rts *rts)
{
	int rc = pull(n, fn, op, rts);

	if (rc < 0 && !op->head.done)
		complete(n, op, rc);
	return rc;
}

/* A matched eager message is in: complete the receive (truncated where it was longer). */
static void delivered(struct shmcoll_node *n, struct shmcoll_p2p_op *op)
{
	op->got = op->limit;
	complete(n, op, op->total > op->bytes ? -EMSGSIZE : 0);
}

/* An eager message kept in memory (unexpected, or to oneself) into its receive. */
static void deliver_kept(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const uint8_t *data)
{
	if (op->limit)
		memcpy(op->buf, data, op->limit);
	delivered(n, op);
}

/* An eager message at pos of ring into its receive. */
static void deliver_ring(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const uint8_t *ring,
                         uint32_t pos)
{
	if (op->limit)
		ring_read(ring, n->p2p.cap, pos, op->buf, op->limit);
	delivered(n, op);
}

/* One frame from p, its payload at pos of ring. 0 when handled, 1 to leave it in the ring
 * for now (no memory for an unmatched message), or an error. */
static int handle(struct shmcoll_node *n, const char *fn, int p, const struct p2p_frame *h,
                  const uint8_t *ring, uint32_t pos)
{
	struct shmcoll_p2p_op *op;
	struct p2p_unexp *u;
	struct p2p_rts rts;
	uint64_t take;

	switch (h->kind) {
	case F_EAGER:
	case F_RTS:
		if (h->tag < 0 || h->src != p)
			return corrupt(n, fn, p, "a bad tag or source");
		if (h->kind == F_EAGER ? h->total != h->len : h->len != sizeof(rts))
			return corrupt(n, fn, p, "a length that does not fit its kind");
		if (h->kind == F_RTS)
			ring_read(ring, n->p2p.cap, pos, &rts, sizeof(rts));
		op = match_posted(n, h->src, h->tag, h->ctx);
		if (op) {
			matched(op, h->src, h->tag, h->total, h->id);
			if (h->kind == F_EAGER) {
				deliver_ring(n, op, ring, pos);
				return 0;
			}
			return start_pull(n, fn, op, &rts);
		}
		u = malloc(sizeof(*u) + (h->kind == F_EAGER ? h->len : 0));
		if (!u)
			return 1;
		u->sync = NULL; /* a peer's synchronous send completes by its FIN */
		u->kind = h->kind;
		u->src = h->src;
		u->tag = h->tag;
		u->ctx = h->ctx;
		u->total = h->total;
		u->id = h->id;
		if (h->kind == F_EAGER)
			ring_read(ring, n->p2p.cap, pos, u->data, h->len);
		else
			u->rts = rts;
		shmcoll__list_push(&n->p2p.uq, &u->link);
		return 0;
	case F_CTS:
		op = find_id(&n->p2p.rdv, p, h->id);
		if (!op || h->len)
			return corrupt(n, fn, p, "a clear-to-send for no message of ours");
		list_remove(&n->p2p.rdv, op);
		op->limit = h->total < op->bytes ? h->total : op->bytes;
		op->off = 0;
		op->state = ST_STREAM;
		list_push(&n->p2p.peers[p].out, op);
		mark_busy(n, p);
		return 0;
	case F_FIN:
		op = find_id(&n->p2p.rdv, p, h->id);
		if (!op || h->len)
			return corrupt(n, fn, p, "a finish for no message of ours");
		list_remove(&n->p2p.rdv, op);
		complete(n, op, 0);
		return 0;
	case F_DATA:
		op = find_id(&n->p2p.pulls, p, h->id);
		if (!op || !h->len || h->len > op->limit - op->off)
			return corrupt(n, fn, p, "data for no message we read, or past its end");
		take = h->len;
		ring_read(ring, n->p2p.cap, pos, op->buf + op->off, take);
		op->off += take;
		if (op->off == op->limit) {
			list_remove(&n->p2p.pulls, op);
			op->got = op->limit;
			complete(n, op, op->total > op->bytes ? -EMSGSIZE : 0);
		}
		return 0;
	default:
		return corrupt(n, fn, p, "an unknown kind");
	}
}

/* Hands the ring from p back up to our tail, and wakes p if it sleeps (for room). */
static void give_back(struct shmcoll_node *n, int p)
{
	struct p2p_peer *pr = &n->p2p.peers[p];

	pr->given = pr->tail;
	/* seq_cst: the release of the room (we are done reading it), and the store half of the
	 * bell's pattern for a sender waiting for room. */
	store_seqcst(shmcoll__ring_tail(&n->arena, (uint32_t)p, (uint32_t)n->rank), pr->given);
	if (load_seqcst(shmcoll__p2p_sleepers(&n->arena, (uint32_t)p)))
		ring_bell(n, p);
}

/* A frame of fb bytes from p read: past it, and the room handed back as drain() says. */
static void consume(struct shmcoll_node *n, int p, uint32_t fb)
{
	struct p2p_peer *pr = &n->p2p.peers[p];

	pr->tail += fb;
	pr->pos_in += fb;
	if (fb >= n->p2p.cap / 8 || pr->tail - pr->given >= n->p2p.cap / 4)
		give_back(n, p);
}

/* Reads every frame p has published to us. Room is handed back after every large frame (then
 * the sender refills that room while we copy the next frame out, so a streamed message's two copies
 * overlap instead of taking turns) and else a quarter ring at a time: a sender never waits for the
 * room held back, since a frame takes at most a quarter ring and some, and handing back
 * after every message cost a fenced store on the way to its receiver. Returns 0 or an
 * error. */
static int drain(struct shmcoll_node *n, const char *fn, int p)
{
	struct p2p_peer *pr = &n->p2p.peers[p];
	const uint8_t *ring = shmcoll__ring(&n->arena, (uint32_t)p, (uint32_t)n->rank);
	uint32_t cap = n->p2p.cap, fb;
	struct p2p_frame h;
	int rc = 0;

	/* Acquire: pairs with the release in put_frame(): the frame is written. */
	while (load_acquire(stamp_at((uint8_t *)(uintptr_t)ring, cap, pr->tail)) ==
	       stamp_of(pr->salt_in, pr->pos_in)) {
		ring_read(ring, cap, pr->tail + STAMP_BYTES, &h, sizeof(h));
		if (h.kind == 0 || h.kind >= F_KINDS || h.zero || h.ctx >= P2P_CTX_COUNT ||
		    h.len > cap - FRAME_HDR)
			return corrupt(n, fn, p, "a header that does not parse");
		fb = frame_bytes(h.len);
		rc = handle(n, fn, p, &h, ring, pr->tail + (uint32_t)FRAME_HDR);
		if (rc < 0)
			return rc;
		if (rc > 0)
			break;
		consume(n, p, fb);
	}
	return 0;
}

static int p2p_progress(struct shmcoll_node *n, const char *fn)
{
	int p, rc;

	if (load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted)) {
		if (n->p2p.active)
			return broken(n, fn);
		return 0;
	}
	for (p = 0; p < n->size; p++) {
		if (p == n->rank)
			continue;
		rc = drain(n, fn, p);
		if (rc < 0)
			return rc;
	}
	return n->p2p.nbusy ? flush_all(n, fn) : 0;
}

/* Whether point-to-point is in use on this communicator, by this rank or any peer (whose
 * messages to this rank must be read even if it never receives: the ring would fill and
 * stop its sender). */
static int p2p_in_use(struct shmcoll_node *n)
{
	if (n->p2p.used)
		return 1;
	if (!load_relaxed(&n->arena.hdr->p2p_used))
		return 0;
	n->p2p.used = 1;
	return 1;
}

static void use(struct shmcoll_node *n)
{
	if (n->p2p.used)
		return;
	n->p2p.used = 1;
	if (!load_relaxed(&n->arena.hdr->p2p_used))
		store_relaxed(&n->arena.hdr->p2p_used, 1);
}

/* The waiter's poll hook: collectives' waits progress point-to-point too, and on their slow
 * path every other communicator of the process (progress.h). */
static int poll_hook(void *ctx, int slow)
{
	struct shmcoll_node *n = ctx;
	int more = slow && shmcoll__progress_all();

	if (!p2p_in_use(n))
		return more;
	p2p_progress(n, "shmcoll (progress)");
	return 1;
}

void shmcoll__node_progress(struct shmcoll_node *n)
{
	if (p2p_in_use(n))
		p2p_progress(n, "shmcoll (progress)");
	if (shmcoll__queue_busy(&n->tasks))
		shmcoll__progress(n);
}

/* ---- starting ---- */

static void op_init(struct shmcoll_node *n, struct shmcoll_p2p_op *op, int kind, const char *fn,
                    const void *buf, size_t bytes, int peer, int tag, int ctx)
{
	memset(op, 0, sizeof(*op));
	op->fn = fn;
	op->kind = kind;
	op->state = ST_NEW;
	op->ctx = (uint16_t)ctx;
	op->peer = peer;
	op->tag = tag;
	op->buf = (uint8_t *)(uintptr_t)buf;
	op->bytes = bytes;
	op->src = -1;
	op->rtag = -1;
	n->p2p.active++;
	use(n);
}

/* A message to ourselves: into a posted receive, else kept (copied) until one comes. */
static void send_self(struct shmcoll_node *n, struct shmcoll_p2p_op *op)
{
	struct shmcoll_p2p_op *r = match_posted(n, n->rank, op->tag, op->ctx);
	struct p2p_unexp *u;

	if (r) {
		matched(r, n->rank, op->tag, op->bytes, 0);
		deliver_kept(n, r, op->buf);
		complete(n, op, 0);
		return;
	}
	u = malloc(sizeof(*u) + op->bytes);
	if (!u) {
		shmcoll__node_fail(n, -ENOMEM, "%s: out of memory for a %zu-byte message to itself",
		                   op->fn, op->bytes);
		complete(n, op, -ENOMEM);
		return;
	}
	memset(u, 0, sizeof(*u));
	u->kind = F_EAGER;
	u->src = n->rank;
	u->tag = op->tag;
	u->ctx = op->ctx;
	u->total = op->bytes;
	if (op->bytes)
		memcpy(u->data, op->buf, op->bytes);
	shmcoll__list_push(&n->p2p.uq, &u->link);
	if (op->sync)
		u->sync = op; /* complete when a receive takes it */
	else
		complete(n, op, 0);
}

static void start_send(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                       const void *buf, size_t bytes, int dest, int tag, int ctx, int sync)
{
	struct p2p_peer *pr;
	int rc;

	op_init(n, op, P2P_SEND, fn, buf, bytes, dest, tag, ctx);
	op->sync = sync;
	if (load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted)) {
		complete(n, op, shmcoll__node_enter(n, fn));
		return;
	}
	if (dest == n->rank) {
		send_self(n, op);
		return;
	}
	op->id = ++n->p2p.next_id;
	pr = &n->p2p.peers[dest];
	if (!pr->out.head && !pr->nctl) {
		rc = send_first(n, fn, op);
		if (rc < 0)
			return; /* the communicator broke: op failed with everything else */
		if (rc > 0) {
			publish(n, dest);
			return;
		}
	}
	op->state = ST_QUEUED;
	list_push(&pr->out, op);
	mark_busy(n, dest);
}

void shmcoll__p2p_isend(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                        const void *buf, size_t bytes, int dest, int tag, int ctx)
{
	start_send(n, op, fn, buf, bytes, dest, tag, ctx, 0);
}

void shmcoll__p2p_issend(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag, int ctx)
{
	start_send(n, op, fn, buf, bytes, dest, tag, ctx, 1);
}

/* ---- the blocking calls' short cuts ----
 *
 * A blocking send or receive of a small message pays for the general machinery (an
 * operation made, queued, matched and completed) on the way between two ranks, where a
 * ping-pong's half round trip is a cache line's transfer and the code on either side of
 * it. These take the common case straight, and leave everything else to the general
 * path (return 0), which then sees the same state: nothing was started. */

/* The number of times recv_fast looks at its ring before it hands over to the general wait
 * (which reads every ring, checks for dead peers and sleeps): a few microseconds, where
 * this rank has a CPU of its own (else it looks once). */
#define FAST_POLLS 64

int shmcoll__p2p_send_fast(struct shmcoll_node *n, const void *buf, size_t bytes, int dest, int tag)
{
	struct p2p_peer *pr = &n->p2p.peers[dest];
	struct p2p_frame h;

	if (bytes > n->p2p.eager_max || dest == n->rank || pr->out.head || pr->nctl ||
	    load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted))
		return 0;
	if (room(n, "shmcoll_send", dest, frame_bytes(bytes)) <= 0)
		return 0; /* a full ring, or a broken one: the general path waits or fails */
	use(n);
	memset(&h, 0, sizeof(h));
	h.kind = F_EAGER;
	h.ctx = P2P_CTX_USER;
	h.tag = tag;
	h.src = n->rank;
	h.len = (uint32_t)bytes;
	h.total = bytes;
	h.id = ++n->p2p.next_id;
	put_frame(n, dest, &h, buf);
	publish(n, dest);
	return 1;
}

int shmcoll__p2p_recv_fast(struct shmcoll_node *n, struct shmcoll_p2p_op *op, void *buf,
                           size_t bytes, int source, int tag)
{
	struct p2p_peer *pr = &n->p2p.peers[source];
	const uint8_t *ring = shmcoll__ring(&n->arena, (uint32_t)source, (uint32_t)n->rank);
	uint32_t cap = n->p2p.cap;
	struct p2p_frame h;
	int i, polls = n->waiter.oversubscribed ? 0 : FAST_POLLS; /* no spinning then */

	/* Only when nothing else needs moving while it waits, and nothing arrived before that
	 * the message could be overtaking. */
	if (source == P2P_ANY || source == n->rank || n->p2p.active ||
	    !shmcoll__list_empty(&n->p2p.uq) || n->p2p.nbusy || shmcoll__queue_busy(&n->tasks) ||
	    load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted))
		return 0;
	use(n);
	for (i = 0;; i++) {
		/* Acquire: pairs with the release in put_frame(). */
		if (load_acquire(stamp_at((uint8_t *)(uintptr_t)ring, cap, pr->tail)) ==
		    stamp_of(pr->salt_in, pr->pos_in))
			break;
		if (i == polls)
			return 0;
		cpu_relax();
	}
	memcpy(&h, ring + (pr->tail & (cap - 1)) + STAMP_BYTES, sizeof(h));
	/* Anything but the message it waits for, whole, goes the general way (which also
	 * checks the header in full). */
	if (h.kind != F_EAGER || h.zero || h.ctx != P2P_CTX_USER || h.src != source || h.tag < 0 ||
	    (tag != P2P_ANY && h.tag != tag) || h.len > bytes || h.len > n->p2p.eager_max ||
	    h.total != h.len)
		return 0;
	if (h.len <= LINE_PAYLOAD)
		copy_small(buf, ring + (pr->tail & (cap - 1)) + FRAME_HDR, h.len);
	else
		ring_read(ring, cap, pr->tail + (uint32_t)FRAME_HDR, buf, h.len);
	consume(n, source, frame_bytes(h.len));
	op->src = source;
	op->rtag = h.tag;
	op->total = h.len;
	op->got = h.len;
	return 1;
}

/* The earliest unexpected message that op matches, taken off the queue. */
static struct p2p_unexp *match_unexp(struct shmcoll_node *n, const struct shmcoll_p2p_op *op)
{
	struct p2p_unexp *u;

	for (u = unexp_at(n->p2p.uq.head); u; u = unexp_at(u->link.next))
		if (matches(op, u->src, u->tag, u->ctx)) {
			shmcoll__list_remove(&n->p2p.uq, &u->link);
			return u;
		}
	return NULL;
}

void shmcoll__p2p_irecv(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                        void *buf, size_t bytes, int source, int tag, int ctx)
{
	struct p2p_unexp *u;

	op_init(n, op, P2P_RECV, fn, buf, bytes, source, tag, ctx);
	if (load_relaxed(&n->broken) || load_relaxed(&n->arena.hdr->aborted)) {
		complete(n, op, shmcoll__node_enter(n, fn));
		return;
	}
	u = match_unexp(n, op);
	if (u) {
		matched(op, u->src, u->tag, u->total, u->id);
		if (u->kind == F_EAGER)
			deliver_kept(n, op, u->data);
		else
			start_pull(n, fn, op, &u->rts);
		if (u->sync)
			complete(n, u->sync, 0); /* a synchronous send to this rank: now matched */
		free(u);
		return;
	}
	op->state = ST_POSTED;
	list_push(&n->p2p.posted, op);
	p2p_progress(n, fn);
}

int shmcoll__p2p_peek(struct shmcoll_node *n, int source, int tag, int ctx, int *src, int *rtag,
                      uint64_t *bytes)
{
	struct shmcoll_p2p_op probe = {.peer = source, .tag = tag, .ctx = (uint16_t)ctx};
	const struct p2p_unexp *u;

	for (u = unexp_at(n->p2p.uq.head); u; u = unexp_at(u->link.next))
		if (matches(&probe, u->src, u->tag, u->ctx)) {
			*src = u->src;
			*rtag = u->tag;
			*bytes = u->total;
			return 1;
		}
	return 0;
}

void shmcoll__p2p_cancel(struct shmcoll_node *n, struct shmcoll_p2p_op *op)
{
	if (op->state != ST_POSTED)
		return;
	list_remove(&n->p2p.posted, op);
	complete(n, op, -ECANCELED);
}

int shmcoll__p2p_coll_tag(struct shmcoll_node *n)
{
	return (int)(n->p2p.coll_seq++ & 0x7fffffff);
}

/* ---- waiting ---- */

static int op_ready(void *arg)
{
	return ((const struct shmcoll_p2p_op *)arg)->head.done;
}

/* What a wait for peer finds when it looks for dead peers (every SHMCOLL_CHECK_NS): 0, or
 * the error with the communicator broken. peer: the rank waited for, else P2P_ANY. */
static int look_for_dead(struct shmcoll_node *n, const char *fn, int peer)
{
	int p = peer;

	if (n->size < 2)
		return 0;
	if (p == P2P_ANY || p == n->rank || !shmcoll__live_dead(n, p)) {
		p = n->live.next;
		n->live.next = (n->live.next + 1) % n->size;
		if (p == n->rank || !shmcoll__live_dead(n, p))
			return 0;
	}
	shmcoll__node_break_by(n, EOWNERDEAD, p);
	shmcoll__node_fail(n, -EOWNERDEAD, "%s: rank %d (pid %d) died", fn, p,
	                   shmcoll__peer_pid(n, p));
	shmcoll__p2p_fail_all(n, -EOWNERDEAD);
	return -EOWNERDEAD;
}

void shmcoll__p2p_test(struct shmcoll_node *n, struct shmcoll_p2p_op *op, int *done)
{
	int64_t now;

	shmcoll__node_progress(n);
	if (!op->head.done && n->waiter.check) {
		now = shmcoll__now_ns();
		if (!n->p2p.checked)
			n->p2p.checked = now;
		if (now - n->p2p.checked >= SHMCOLL_CHECK_NS) {
			n->p2p.checked = now;
			look_for_dead(n, op->fn, op->peer);
		}
	}
	*done = op->head.done;
}

int shmcoll__node_wait_until(struct shmcoll_node *n, const char *fn, int (*ready)(void *),
                             void *arg, int peer)
{
	_Atomic uint32_t *bell = shmcoll__p2p_bell(&n->arena, (uint32_t)n->rank);
	_Atomic uint32_t *sleepers = shmcoll__p2p_sleepers(&n->arena, (uint32_t)n->rank);
	const struct shmcoll_waiter *w = &n->waiter;
	int64_t start, now, checked, slice;
	uint32_t b;
	int i, rc, others, spins = w->oversubscribed ? 1 : SPIN_ITERS; /* one look, then */
	int look = spins > 1 && peer >= 0 && peer != n->rank ? shmcoll__pace_look() : -1;

	for (i = 0; i < spins; i++) {
		shmcoll__node_progress(n);
		if (ready(arg))
			return 0;
		if (i == look) {
			struct shmcoll_cpus cpus = shmcoll__cpus_with(n, peer);

			if (shmcoll__pace_peer_here(&cpus))
				break;
		}
		cpu_relax();
	}
	start = checked = shmcoll__now_ns();
	for (;;) {
		/* Every other communicator of the process first (MPI's progress rule). */
		others = shmcoll__progress_all();
		shmcoll__node_progress(n);
		if (ready(arg))
			return 0;
		if (load_relaxed(&n->broken) || load_relaxed(w->abort_word))
			return broken(n, fn);
		now = shmcoll__now_ns();
		if (w->check && now - checked >= SHMCOLL_CHECK_NS) {
			checked = now;
			rc = look_for_dead(n, fn, peer);
			if (rc < 0)
				return rc;
			/* A peer that destroyed its communicator sends nothing more: what it
			 * sent is in its ring, read just above. */
			if (peer >= 0 && peer != n->rank &&
			    load_acquire(&shmcoll__ctrl(&n->arena, (uint32_t)peer)->left)) {
				shmcoll__node_progress(n);
				if (ready(arg))
					return 0;
				/* It broke the communicator before leaving (the acquire of left
				 * orders that before this load): report the break. */
				if (load_relaxed(w->abort_word))
					return broken(n, fn);
				shmcoll__node_break(n, EPROTO);
				shmcoll__node_fail(
				    n, -EPROTO,
				    "%s: rank %d destroyed its communicator while this "
				    "rank waits for it",
				    fn, peer);
				shmcoll__p2p_fail_all(n, -EPROTO);
				return -EPROTO;
			}
		}
		if (w->timeout_ns >= 0 && now - start >= w->timeout_ns) {
			shmcoll__node_break(n, ETIMEDOUT);
			if (peer >= 0)
				shmcoll__node_fail(
				    n, -ETIMEDOUT,
				    "%s: timed out after %lld ms waiting for rank %d", fn,
				    (long long)(w->timeout_ns / 1000000), peer);
			else
				shmcoll__node_fail(n, -ETIMEDOUT, "%s: timed out after %lld ms", fn,
				                   (long long)(w->timeout_ns / 1000000));
			shmcoll__p2p_fail_all(n, -ETIMEDOUT);
			return -ETIMEDOUT;
		}
		if (shmcoll__pace_yield(now - start, now))
			continue;
		slice =
		    shmcoll__queue_busy(&n->tasks) || others ? SLEEP_SLICE_MIX_NS : SLEEP_SLICE_NS;
		if (w->timeout_ns >= 0 && w->timeout_ns - (now - start) < slice)
			slice = w->timeout_ns - (now - start);
		/* The sleeper's half of the bell's pattern (publish(), drain()): count
		 * ourselves, then look again; whoever changes something after our look sees
		 * the count and rings. */
		fetch_add_seqcst(sleepers, 1);
		atomic_thread_fence(memory_order_seq_cst);
		b = load_seqcst(bell);
		shmcoll__node_progress(n);
		if (!ready(arg))
			shmcoll__futex_wait(bell, b, slice);
		fetch_sub_seqcst(sleepers, 1);
	}
}

int shmcoll__p2p_wait(struct shmcoll_node *n, struct shmcoll_p2p_op *op)
{
	int rc;

	if (op->head.done)
		return op->head.rc;
	rc = shmcoll__node_wait_until(n, op->fn, op_ready, op, op->peer);
	return op->head.done ? op->head.rc : rc;
}

/* ---- life cycle ---- */

/* The salt of the ring from s to r: the arena's creator (pid, start time) and the pair,
 * mixed (splitmix64's finalizer), the top bit set so that no stamp is 0. */
static uint64_t pair_salt(const struct shmcoll_node *n, int s, int r)
{
	const struct shmcoll_proc_id *c = &n->arena.hdr->creator;
	uint64_t x = (uint64_t)(uint32_t)c->pid * 0x9e3779b97f4a7c15ull ^ c->start ^
	             ((uint64_t)(uint32_t)s << 32 | (uint32_t)r) * 0xd1b54a32d192ed03ull;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x | 1ull << 63;
}

int shmcoll__p2p_init(struct shmcoll_node *n, char *err, size_t errlen)
{
	struct shmcoll_p2p *q = &n->p2p;
	long long v;
	int rc;

	memset(q, 0, sizeof(*q));
	q->cap = (uint32_t)n->arena.lay.ring_bytes;
	q->chunk = q->cap / 4;
	q->eager_max = q->cap / 4 - FRAME_HDR;
	if (q->eager_max > EAGER_DEFAULT)
		q->eager_max = EAGER_DEFAULT;
	rc = shmcoll__env_long("SHMCOLL_P2P_EAGER", 0, LLONG_MAX, &v);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_P2P_EAGER is not a byte count");
		return -EINVAL;
	}
	if (rc > 0 && (size_t)v < q->eager_max)
		q->eager_max = (size_t)v;
	rc = shmcoll__env_long("SHMCOLL_P2P_CMA_MIN", 0, LLONG_MAX, &v);
	if (rc < 0) {
		snprintf(err, errlen, "SHMCOLL_P2P_CMA_MIN is not a byte count");
		return -EINVAL;
	}
	q->cma_min = rc > 0 ? (size_t)v : 0;
	q->peers = calloc((size_t)n->size, sizeof(*q->peers));
	q->busy = calloc((size_t)n->size, sizeof(*q->busy));
	if (!q->peers || !q->busy) {
		free(q->peers);
		free(q->busy);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Counters carry on from what the ring words say (0 in a new arena). */
	for (int p = 0; p < n->size; p++) {
		struct p2p_peer *pr = &q->peers[p];

		pr->head = pr->tail_seen =
		    load_relaxed(shmcoll__ring_head(&n->arena, (uint32_t)n->rank, (uint32_t)p));
		pr->tail =
		    load_relaxed(shmcoll__ring_tail(&n->arena, (uint32_t)p, (uint32_t)n->rank));
		pr->pos = pr->head;
		pr->pos_in = pr->tail;
		pr->salt = pair_salt(n, n->rank, p);
		pr->salt_in = pair_salt(n, p, n->rank);
	}
	n->waiter.poll = poll_hook;
	n->waiter.poll_ctx = n;
	return 0;
}

void shmcoll__p2p_fini(struct shmcoll_node *n)
{
	struct shmcoll_p2p *q = &n->p2p;
	struct p2p_unexp *u;
	int p;

	while ((u = unexp_at(shmcoll__list_pop(&q->uq))) != NULL)
		free(u);
	if (q->peers)
		for (p = 0; p < n->size; p++)
			free(q->peers[p].ctl);
	free(q->peers);
	free(q->busy);
	q->peers = NULL;
	q->busy = NULL;
}
