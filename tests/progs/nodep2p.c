/* nodep2p.c - point-to-point on the communicator shmcoll_init() makes: in the multi-node
 * tests, one whose ranks span several nodes (node-major: rank = node * nproc + local rank).
 * Without arguments every rank runs the phases below, each followed by a checked allreduce
 * (a collective between point-to-point phases), and prints "ok p2p rank R of S" if every
 * check passed:
 *   sizes      every ordered pair (self, same node, across nodes) swaps messages of 0 B to
 *              3 MiB (far more than a socket's default buffer) through shmcoll_sendrecv
 *   tags       two tags from one remote sender received in the other order
 *   order      100 messages of one tag from a remote sender arrive in order (received one by
 *              one, and into receives posted in advance)
 *   any        SHMCOLL_ANY_SOURCE (and SHMCOLL_ANY_TAG) receives take one message of every rank
 *   probe      probe and iprobe see a remote message without taking it
 *   truncate   a longer message into less room: -EMSGSIZE, the room filled, the sender fine
 *   windows    64 isends and 64 irecvs outstanding at once; waitany, test and testall
 *   mixed      requests outstanding across a barrier and collectives
 * Every received byte is checked against a reference the receiver computes on its own from
 * (sender, receiver, size, index), every status field against what the message must be,
 * and the bytes past a message against the poison they held. A failed check prints a
 * "FAIL" line saying what, and where; the rank then aborts the communicator, so that the
 * others fail at once instead of waiting for a message that will not come, and exits 1.
 * Rank 0 also prints its leader's transport and the time of each phase.
 *
 * With "kill VICTIM" or "abort VICTIM" (a rank on another node than rank 0's), the fault
 * tests: the victim sends rank 0 one message, and once rank 0 has it, dies by SIGKILL (kill)
 * or aborts the communicator (abort) while rank 0 waits in shmcoll_recv for another. Every
 * other rank waits in a barrier the victim never enters. The communicator's timeout
 * (SHMCOLL_TIMEOUT_MS) is only the backstop: rank 0's receive must end within half of it,
 * so that neither its own timeout nor the wave of a bystander's counts as the fault seen.
 * A rank exits 0 when what it saw is right, else:
 *   20 rank 0's first message from the victim failed   21 its reply to the victim failed
 *   22 the blocked receive returned 0    23 it returned -ETIMEDOUT, or came after half the
 *      timeout (a timeout, not the fault, ended it)   24 it returned another error than
 *      -EOWNERDEAD or -ECANCELED   25 a call after the failure did not return -ECANCELED
 *   26 the barrier of a bystander returned 0, or (abort) -ETIMEDOUT: an abort reaches every
 *      rank   30 the victim's own calls failed   1 shmcoll_init failed   2 bad arguments
 * Usage: nodep2p [kill|abort VICTIM] */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shmcoll.h"

#define MIB        ((size_t)1 << 20)
#define BIG        (3 * MIB) /* the largest message: far more than a socket's default buffer */
#define SLACK      16        /* room a receive has beyond the message it waits for */
#define GUARD      64        /* poisoned bytes after every receive buffer's room */
#define POISON     0xa5
#define SLAB_BYTES (8 * MIB) /* buffers of requests outstanding together */
#define NREQ       256
#define MAX_LINES  12 /* FAIL lines per rank: the first ones tell */
/* A test or iprobe loop that long has lost its message. The loops yield: the ranks
 * oversubscribe the cores, and the peer must run for the message to come. */
#define POLL_CAP_S 20.0

/* Phases, for the keys of their messages. */
enum {
	PH_SIZES = 1,
	PH_TAGS,
	PH_ORDER,
	PH_ORDER2,
	PH_ANY,
	PH_PROBE,
	PH_TRUNC,
	PH_WIN,
	PH_MIX,
	PH_FAULT
};

static shmcoll_comm *comm;
static int rank, size, nproc, nnodes;
static const char *phase = "setup";
static int errors, lines;

/* Every request of a phase lives here, and its buffers in the slab (or the big buffers) until
 * the end: after a failure the requests still outstanding are completed (by the abort) before
 * anything is freed. */
static shmcoll_request *reqs[NREQ];
static shmcoll_status sts[NREQ];
static unsigned char *sbig, *rbig, *ref, *slab;
static size_t slab_used;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void failf(const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	errors++;
	if (++lines > MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("FAIL p2p rank %d of %d (node %d), %s: %s\n", rank, size, rank / nproc, phase, msg);
	fflush(stdout);
}

/* A call that must return 0. Anything else ends the phase: its peers may be waiting for a
 * message this rank would not send, so going on could only add a timeout to the report. */
#define CALL(expr)                                                                                 \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_ != 0) {                                                                    \
			failf("line %d: %s returned %d (%s): %s", __LINE__, #expr, rc_,            \
			      shmcoll_strerror(rc_), shmcoll_last_error(comm));                    \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* The same for a call that must return want (a truncated receive's -EMSGSIZE). */
#define CALL_RC(want, expr)                                                                        \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_ != (want)) {                                                               \
			failf("line %d: %s returned %d (%s), want %d: %s", __LINE__, #expr, rc_,   \
			      shmcoll_strerror(rc_), (int)(want), shmcoll_last_error(comm));       \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* ---- what every rank derives on its own ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The key of message idx of phase ph from src to dst, n bytes long: its every byte follows. */
static uint64_t key_of(int ph, int src, int dst, size_t n, uint64_t idx)
{
	uint64_t k = mix(((uint64_t)ph << 40) ^ ((uint64_t)(unsigned)src << 20) ^ (unsigned)dst);

	return mix(mix(k ^ n) + idx);
}

/* Byte i of message key is byte i % 8 of mix(key + i / 8), little-endian: the same on
 * every rank, whatever its byte order. */
static void fill(unsigned char *p, size_t n, uint64_t key)
{
	size_t i;
	uint64_t w = 0;

	for (i = 0; i < n; i++) {
		if (i % 8 == 0)
			w = mix(key + i / 8);
		p[i] = (unsigned char)(w >> (8 * (i % 8)));
	}
}

static int node_of(int r)
{
	return r / nproc;
}

/* The rank of the same local rank on the next node (the cross-node ring), and the one it
 * receives from. */
static int next_node(void)
{
	return (rank + nproc) % size;
}

static int prev_node(void)
{
	return (rank - nproc + size) % size;
}

/* Message j of the windows goes to a rank on another node: node + 1 + j % (nnodes - 1),
 * local rank + j / (nnodes - 1) (both modulo): for each j a permutation of the ranks, so
 * every rank receives one message j, from win_src(j). */
static int win_dst(int j)
{
	int spread = nnodes > 1 ? nnodes - 1 : 1, node = node_of(rank), l = rank % nproc;
	int dn = (node + 1 + j % spread) % nnodes, m = (j / spread) % nproc;

	return dn * nproc + (l + m) % nproc;
}

static int win_src(int j)
{
	int spread = nnodes > 1 ? nnodes - 1 : 1, node = node_of(rank), l = rank % nproc;
	int sn = ((node - 1 - j % spread) % nnodes + nnodes) % nnodes, m = (j / spread) % nproc;

	return sn * nproc + (l - m + nproc) % nproc;
}

/* n bytes of the slab, or NULL (a FAIL) when the phase asks for more than it has. */
static unsigned char *carve(size_t n)
{
	unsigned char *p;

	n = (n + 63) & ~(size_t)63;
	if (slab_used + n > SLAB_BYTES) {
		failf("the test's slab is too small (%zu + %zu bytes)", slab_used, n);
		return NULL;
	}
	p = slab + slab_used;
	slab_used += n;
	return p;
}

/* A receive buffer of room bytes and the GUARD after them, poisoned. */
static unsigned char *rbuf_new(size_t room)
{
	unsigned char *p = carve(room + GUARD);

	if (p)
		memset(p, POISON, room + GUARD);
	return p;
}

/* n bytes received at buf, whose room is room bytes (then GUARD): the reference of key, and
 * the poison after them. */
static void check_data(const char *what, const unsigned char *buf, size_t n, size_t room,
                       uint64_t key)
{
	size_t i;

	fill(ref, n, key);
	if (memcmp(buf, ref, n)) {
		for (i = 0; buf[i] == ref[i]; i++)
			;
		failf("%s: byte %zu of the %zu received is %#x, want %#x", what, i, n, buf[i],
		      ref[i]);
		return;
	}
	for (i = n; i < room + GUARD; i++)
		if (buf[i] != POISON) {
			failf("%s: byte %zu was written, past the %zu received (room %zu)", what, i,
			      n, room);
			return;
		}
}

static void check_status(const char *what, const shmcoll_status *st, int src, int tag, size_t count,
                         size_t bytes, size_t total, int error)
{
	if (st->source != src || st->tag != tag || st->count != count || st->bytes != bytes ||
	    st->total != total || st->error != error)
		failf("%s: status {source %d, tag %d, count %zu, bytes %zu, total %zu, error %d}, "
		      "want {%d, %d, %zu, %zu, %zu, %d}",
		      what, st->source, st->tag, st->count, st->bytes, st->total, st->error, src,
		      tag, count, bytes, total, error);
}

static void st_poison(shmcoll_status *st)
{
	memset(st, 0xa5, sizeof(*st));
}

/* Checked allreduces, between the phases: one word, and one over several of the leaders'
 * chunks. */
#define AR_N 20000
static int coll_check(const char *when)
{
	static int32_t in[AR_N], out[AR_N];
	int64_t v = rank + 1, sum = -1, S = size;
	int i;

	CALL(shmcoll_allreduce(&v, &sum, 1, SHMCOLL_INT64, SHMCOLL_SUM, comm));
	if (sum != S * (S + 1) / 2)
		failf("allreduce %s: %lld, want %lld", when, (long long)sum,
		      (long long)(S * (S + 1) / 2));
	for (i = 0; i < AR_N; i++) {
		in[i] = rank * 3 + i % 1000;
		out[i] = -1;
	}
	CALL(shmcoll_allreduce(in, out, AR_N, SHMCOLL_INT32, SHMCOLL_SUM, comm));
	for (i = 0; i < AR_N; i++)
		if (out[i] != (int32_t)(3 * S * (S - 1) / 2 + S * (i % 1000))) {
			failf("allreduce of %d int32 %s: element %d is %d, want %d", AR_N, when, i,
			      out[i], (int32_t)(3 * S * (S - 1) / 2 + S * (i % 1000)));
			break;
		}
	return errors ? -1 : 0;
}

/* ---- a. every size between every ordered pair ---- */

static const size_t sizes[] = {0, 1, 8, 4096, 65536, BIG};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Shift k: send to rank + k, receive from rank - k; every rank in the same shift at once,
 * so each send has its receive (k = 0 is to self). Odd shifts receive as uint32 where the
 * size allows, for the status's count in elements. */
static int phase_sizes(void)
{
	shmcoll_dtype rdt;
	char what[160];
	shmcoll_status st;
	size_t si, n, room, rcap;
	int k, dst, src, tag, wide;

	for (si = 0; si < NSIZES; si++) {
		n = sizes[si];
		room = n + SLACK;
		for (k = 0; k < size; k++) {
			dst = (rank + k) % size;
			src = (rank - k + size) % size;
			tag = 100 + (int)si * 32 + k;
			wide = k % 2 && n % 4 == 0;
			rdt = wide ? SHMCOLL_UINT32 : SHMCOLL_UINT8;
			rcap = wide ? room / 4 : room;
			snprintf(what, sizeof(what),
			         "%zu bytes from rank %d (node %d) to rank %d (node %d)", n, src,
			         node_of(src), rank, node_of(rank));
			fill(sbig, n, key_of(PH_SIZES, rank, dst, n, (uint64_t)k));
			memset(rbig, POISON, room + GUARD);
			st_poison(&st);
			CALL(shmcoll_sendrecv(sbig, n, SHMCOLL_UINT8, dst, tag, rbig, rcap, rdt,
			                      src, tag, comm, &st));
			check_status(what, &st, src, tag, wide ? n / 4 : n, n, n, 0);
			check_data(what, rbig, n, room,
			           key_of(PH_SIZES, src, rank, n, (uint64_t)k));
			/* The send buffer is the caller's: left as it was. */
			fill(ref, n, key_of(PH_SIZES, rank, dst, n, (uint64_t)k));
			if (memcmp(sbig, ref, n))
				failf("%s: the send buffer changed", what);
			if (errors)
				return -1;
		}
	}
	return 0;
}

/* ---- b. tags are independent streams ---- */

/* Tag 1 then tag 2 to the next node, received there tag 2 first: the tag-1 message waits
 * aside (eager or rendezvous) while the other passes it. */
static int phase_tags(void)
{
	static const size_t ns[][2] = {{100, 200}, {70000, 300}, {300, 70000}, {0, 5000}};
	int a = prev_node(), b = next_node(), round, t;
	char what[160];
	shmcoll_status st;

	for (round = 0; round < (int)(sizeof(ns) / sizeof(ns[0])); round++) {
		unsigned char *s[2], *r[2];

		slab_used = 0;
		for (t = 0; t < 2; t++) {
			s[t] = carve(ns[round][t]);
			r[t] = rbuf_new(ns[round][t] + SLACK);
			if (!s[t] || !r[t])
				return -1;
			fill(s[t], ns[round][t],
			     key_of(PH_TAGS, rank, b, ns[round][t], (uint64_t)(round * 2 + t)));
		}
		CALL(shmcoll_isend(s[0], ns[round][0], SHMCOLL_UINT8, b, 1, comm, &reqs[0]));
		CALL(shmcoll_isend(s[1], ns[round][1], SHMCOLL_UINT8, b, 2, comm, &reqs[1]));
		for (t = 1; t >= 0; t--) {
			size_t n = ns[round][t];

			snprintf(what, sizeof(what), "round %d: tag %d (%zu bytes) from rank %d",
			         round, t + 1, n, a);
			st_poison(&st);
			CALL(shmcoll_recv(r[t], n + SLACK, SHMCOLL_UINT8, a, t + 1, comm, &st));
			check_status(what, &st, a, t + 1, n, n, n, 0);
			check_data(what, r[t], n, n + SLACK,
			           key_of(PH_TAGS, a, rank, n, (uint64_t)(round * 2 + t)));
		}
		CALL(shmcoll_waitall(2, reqs, NULL));
		if (errors)
			return -1;
	}
	return 0;
}

/* ---- c. non-overtaking ---- */

#define ORD_N   100
#define ORD_MAX 20000

/* Small messages, and every tenth past the eager size: an order kept by one path alone
 * would not do. */
static size_t ord_size(int i)
{
	return i % 10 == 9 ? ORD_MAX - (size_t)i : 8 + (size_t)(i % 7);
}

/* Message i of ph from src came where message i was due: its size and bytes. If another
 * came instead, names it. */
static void check_ord(int ph, int src, int i, const unsigned char *buf, const shmcoll_status *st,
                      int tag)
{
	size_t n = ord_size(i);
	char what[160];
	int j;

	snprintf(what, sizeof(what), "message %d of %d with tag %d from rank %d", i, ORD_N, tag,
	         src);
	if (st->count != n && st->error == 0)
		for (j = 0; j < ORD_N; j++)
			if (ord_size(j) == st->count && j != i) {
				fill(ref, ord_size(j),
				     key_of(ph, src, rank, ord_size(j), (uint64_t)j));
				if (!memcmp(buf, ref, ord_size(j))) {
					failf("%s: message %d came in its place (overtaken)", what,
					      j);
					return;
				}
			}
	check_status(what, st, src, tag, n, n, n, 0);
	check_data(what, buf, n, ORD_MAX + SLACK, key_of(ph, src, rank, n, (uint64_t)i));
}

/* ORD_N messages of one tag to the next node, all sent outstanding: received one at a
 * time, then again into receives posted before the messages were sent (a barrier between),
 * matched in the order posted. */
static int phase_order(void)
{
	int a = prev_node(), b = next_node(), i;
	unsigned char *s[ORD_N], *r[ORD_N];
	shmcoll_status st;

	slab_used = 0;
	for (i = 0; i < ORD_N; i++) {
		s[i] = carve(ord_size(i));
		r[i] = rbuf_new(ORD_MAX + SLACK);
		if (!s[i] || !r[i])
			return -1;
		fill(s[i], ord_size(i), key_of(PH_ORDER, rank, b, ord_size(i), (uint64_t)i));
	}
	for (i = 0; i < ORD_N; i++)
		CALL(shmcoll_isend(s[i], ord_size(i), SHMCOLL_UINT8, b, 40, comm, &reqs[i]));
	for (i = 0; i < ORD_N; i++) {
		st_poison(&st);
		CALL(shmcoll_recv(r[i], ORD_MAX + SLACK, SHMCOLL_UINT8, a, 40, comm, &st));
		check_ord(PH_ORDER, a, i, r[i], &st, 40);
		if (errors)
			return -1;
	}
	CALL(shmcoll_waitall(ORD_N, reqs, NULL));

	/* Posted first: the messages find their receives waiting. */
	slab_used = 0;
	for (i = 0; i < ORD_N; i++) {
		s[i] = carve(ord_size(i));
		r[i] = rbuf_new(ORD_MAX + SLACK);
		if (!s[i] || !r[i])
			return -1;
		fill(s[i], ord_size(i), key_of(PH_ORDER2, rank, b, ord_size(i), (uint64_t)i));
	}
	for (i = 0; i < ORD_N; i++)
		CALL(shmcoll_irecv(r[i], ORD_MAX + SLACK, SHMCOLL_UINT8, a, 41, comm, &reqs[i]));
	CALL(shmcoll_barrier(comm));
	for (i = 0; i < ORD_N; i++) {
		shmcoll_request **req = &reqs[ORD_N + i];

		CALL(shmcoll_isend(s[i], ord_size(i), SHMCOLL_UINT8, b, 41, comm, req));
	}
	for (i = 0; i < 2 * ORD_N; i++)
		st_poison(&sts[i]);
	CALL(shmcoll_waitall(2 * ORD_N, reqs, sts));
	for (i = 0; i < 2 * ORD_N; i++)
		if (reqs[i])
			failf("waitall left request %d set", i);
	for (i = 0; i < ORD_N; i++)
		check_ord(PH_ORDER2, a, i, r[i], &sts[i], 41);
	for (i = ORD_N; i < 2 * ORD_N; i++)
		if (sts[i].error != 0)
			failf("send %d: waitall's status says error %d", i - ORD_N, sts[i].error);
	return errors ? -1 : 0;
}

/* ---- d. SHMCOLL_ANY_SOURCE ---- */

/* The size of src's message to the first (to == 0) or the second receiver: each source's
 * own, eager and rendezvous mixed. */
static size_t any_size(int src, int to)
{
	return 16 + (size_t)src * 37 + (size_t)to * 5 + ((src + to) % 2 ? 30000 : 0);
}

#define ANY_TAG0 7
#define ANY_TAG1 50 /* + the source's rank */

/* Every rank sends one message to rank 0 (tag ANY_TAG0) and one to the last rank (on the last
 * node; tag ANY_TAG1 + its rank). Rank 0 takes size messages with SHMCOLL_ANY_SOURCE, the last
 * rank with SHMCOLL_ANY_SOURCE and SHMCOLL_ANY_TAG: every source once, its own message. */
static int phase_any(void)
{
	int last = size - 1, to, src, i, seen[1024];
	unsigned char *s[2], *r;
	size_t room = any_size(size, 1) + 30000 + SLACK;
	char what[160];
	shmcoll_status st;

	slab_used = 0;
	r = rbuf_new(room);
	for (to = 0; to < 2; to++) {
		int dst = to ? last : 0;

		s[to] = carve(any_size(rank, to));
		if (!s[to])
			return -1;
		fill(s[to], any_size(rank, to), key_of(PH_ANY, rank, dst, any_size(rank, to), 0));
	}
	if (!r)
		return -1;
	CALL(shmcoll_isend(s[0], any_size(rank, 0), SHMCOLL_UINT8, 0, ANY_TAG0, comm, &reqs[0]));
	CALL(shmcoll_isend(s[1], any_size(rank, 1), SHMCOLL_UINT8, last, ANY_TAG1 + rank, comm,
	                   &reqs[1]));
	for (to = 0; to < 2; to++) {
		if (rank != (to ? last : 0) || (to && last == 0))
			continue;
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < size; i++) {
			memset(r, POISON, room + GUARD);
			st_poison(&st);
			CALL(shmcoll_recv(r, room, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE,
			                  to ? SHMCOLL_ANY_TAG : ANY_TAG0, comm, &st));
			src = st.source;
			snprintf(what, sizeof(what), "message %d of %d taken with ANY_SOURCE%s", i,
			         size, to ? " and ANY_TAG" : "");
			if (src < 0 || src >= size) {
				failf("%s: status source %d is no rank", what, src);
				return -1;
			}
			if (seen[src]++) {
				failf("%s: a second message from rank %d", what, src);
				return -1;
			}
			snprintf(what, sizeof(what),
			         "message %d of %d taken with ANY_SOURCE%s (rank %d)", i, size,
			         to ? " and ANY_TAG" : "", src);
			check_status(what, &st, src, to ? ANY_TAG1 + src : ANY_TAG0,
			             any_size(src, to), any_size(src, to), any_size(src, to), 0);
			check_data(what, r, any_size(src, to), room,
			           key_of(PH_ANY, src, rank, any_size(src, to), 0));
		}
	}
	CALL(shmcoll_waitall(2, reqs, NULL));
	return errors ? -1 : 0;
}

/* ---- e. probe and iprobe ---- */

#define PR_SMALL 5000
#define PR_LARGE 100000

/* From the previous node, tag 9 (PR_SMALL bytes) then tag 10 (PR_LARGE, rendezvous): probes
 * by source and by wildcard see each with its size, without taking it; the receives then
 * get both. */
static int phase_probe(void)
{
	int a = prev_node(), b = next_node(), flag = -1;
	unsigned char *s9, *s10, *r9, *r10;
	shmcoll_status st;
	double t0;

	slab_used = 0;
	s9 = carve(PR_SMALL);
	s10 = carve(PR_LARGE);
	r9 = rbuf_new(PR_SMALL + SLACK);
	r10 = rbuf_new(PR_LARGE + SLACK);
	if (!s9 || !s10 || !r9 || !r10)
		return -1;
	fill(s9, PR_SMALL, key_of(PH_PROBE, rank, b, PR_SMALL, 9));
	fill(s10, PR_LARGE, key_of(PH_PROBE, rank, b, PR_LARGE, 10));
	/* Nobody sends tag 11. */
	CALL(shmcoll_iprobe(a, 11, SHMCOLL_UINT8, comm, &flag, &st));
	if (flag != 0)
		failf("iprobe of tag 11, which nobody sends: flag %d", flag);
	CALL(shmcoll_isend(s9, PR_SMALL, SHMCOLL_UINT8, b, 9, comm, &reqs[0]));
	CALL(shmcoll_isend(s10, PR_LARGE, SHMCOLL_UINT8, b, 10, comm, &reqs[1]));

	st_poison(&st);
	CALL(shmcoll_probe(a, 9, SHMCOLL_UINT8, comm, &st));
	check_status("probe of tag 9 from the previous node", &st, a, 9, PR_SMALL, PR_SMALL,
	             PR_SMALL, 0);
	for (t0 = now_s(), flag = 0; !flag && now_s() - t0 < POLL_CAP_S; sched_yield()) {
		st_poison(&st);
		CALL(shmcoll_iprobe(SHMCOLL_ANY_SOURCE, 10, SHMCOLL_INT32, comm, &flag, &st));
	}
	if (!flag) {
		failf("iprobe(ANY_SOURCE, tag 10) did not see rank %d's message in %.0f s", a,
		      POLL_CAP_S);
		return -1;
	}
	check_status("iprobe(ANY_SOURCE, tag 10) as int32", &st, a, 10, PR_LARGE / 4, PR_LARGE,
	             PR_LARGE, 0);
	/* Both there: a wildcard sees the earlier one. */
	st_poison(&st);
	CALL(shmcoll_probe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_UINT8, comm, &st));
	check_status("probe(ANY_SOURCE, ANY_TAG) with tags 9 and 10 there", &st, a, 9, PR_SMALL,
	             PR_SMALL, PR_SMALL, 0);
	flag = 0;
	CALL(shmcoll_iprobe(a, 9, SHMCOLL_UINT8, comm, &flag, NULL));
	if (flag != 1)
		failf("iprobe of tag 9 after two probes: flag %d (a probe took it?)", flag);

	st_poison(&st);
	CALL(shmcoll_recv(r9, PR_SMALL + SLACK, SHMCOLL_UINT8, a, 9, comm, &st));
	check_status("recv of the probed tag 9", &st, a, 9, PR_SMALL, PR_SMALL, PR_SMALL, 0);
	check_data("recv of the probed tag 9", r9, PR_SMALL, PR_SMALL + SLACK,
	           key_of(PH_PROBE, a, rank, PR_SMALL, 9));
	st_poison(&st);
	CALL(shmcoll_recv(r10, (PR_LARGE + SLACK) / 4, SHMCOLL_INT32, SHMCOLL_ANY_SOURCE, 10, comm,
	                  &st));
	check_status("recv of the probed tag 10", &st, a, 10, PR_LARGE / 4, PR_LARGE, PR_LARGE, 0);
	check_data("recv of the probed tag 10", r10, PR_LARGE, PR_LARGE + SLACK,
	           key_of(PH_PROBE, a, rank, PR_LARGE, 10));
	/* Taken: nothing is left (no rank sends more before the allreduce after this phase). */
	flag = -1;
	CALL(shmcoll_iprobe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_UINT8, comm, &flag, &st));
	if (flag != 0)
		failf("iprobe after both receives: flag %d (source %d, tag %d)", flag, st.source,
		      st.tag);
	CALL(shmcoll_waitall(2, reqs, NULL));
	return errors ? -1 : 0;
}

/* ---- f. truncation ---- */

/* A message longer than the receive's room: -EMSGSIZE, the room filled with its first bytes
 * and nothing past it, the status telling what arrived; the sender's call returns 0. Node 0
 * sends to node 1 with blocking calls (eager, then rendezvous); then every rank to the next
 * node with requests, received as int32. Then a whole message each way shows the
 * communicator usable. */
static int phase_truncate(void)
{
	static const struct {
		size_t msg, room;
	} cases[] = {{1000, 100}, {100000, 100}};
	int a = prev_node(), b = next_node(), k;
	unsigned char *s, *r;
	char what[160];
	shmcoll_status st;

	slab_used = 0;
	s = carve(200000);
	r = rbuf_new(8192);
	if (!s || !r)
		return -1;
	for (k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
		size_t n = cases[k].msg, room = cases[k].room;

		snprintf(what, sizeof(what), "%zu bytes from rank %d into %zu", n, rank - nproc,
		         room);
		if (nnodes < 2)
			break;
		if (node_of(rank) == 0) {
			fill(s, n, key_of(PH_TRUNC, rank, rank + nproc, n, (uint64_t)k));
			CALL(shmcoll_send(s, n, SHMCOLL_UINT8, rank + nproc, 20 + k, comm));
		} else if (node_of(rank) == 1) {
			memset(r, POISON, room + GUARD);
			st_poison(&st);
			CALL_RC(-EMSGSIZE, shmcoll_recv(r, room, SHMCOLL_UINT8, rank - nproc,
			                                20 + k, comm, &st));
			check_status(what, &st, rank - nproc, 20 + k, room, room, n, -EMSGSIZE);
			check_data(what, r, room, room,
			           key_of(PH_TRUNC, rank - nproc, rank, n, (uint64_t)k));
		}
	}

	/* 200000 bytes into 1000 int32. */
	snprintf(what, sizeof(what), "200000 bytes from rank %d into 1000 int32 (irecv)", a);
	fill(s, 200000, key_of(PH_TRUNC, rank, b, 200000, 2));
	memset(r, POISON, 4000 + GUARD);
	CALL(shmcoll_irecv(r, 1000, SHMCOLL_INT32, a, 22, comm, &reqs[0]));
	CALL(shmcoll_isend(s, 200000, SHMCOLL_UINT8, b, 22, comm, &reqs[1]));
	st_poison(&st);
	CALL_RC(-EMSGSIZE, shmcoll_wait(&reqs[0], &st));
	CALL(shmcoll_wait(&reqs[1], NULL));
	check_status(what, &st, a, 22, 1000, 4000, 200000, -EMSGSIZE);
	check_data(what, r, 4000, 4000, key_of(PH_TRUNC, a, rank, 200000, 2));
	if (errors)
		return -1;

	/* Usable: a collective, then whole messages both ways round the nodes. */
	if (coll_check("after the truncations"))
		return -1;
	fill(s, 6000, key_of(PH_TRUNC, rank, b, 6000, 3));
	memset(r, POISON, 8192 + GUARD);
	st_poison(&st);
	CALL(shmcoll_sendrecv(s, 6000, SHMCOLL_UINT8, b, 23, r, 8192, SHMCOLL_UINT8, a, 23, comm,
	                      &st));
	check_status("sendrecv after the truncations", &st, a, 23, 6000, 6000, 6000, 0);
	check_data("sendrecv after the truncations", r, 6000, 8192,
	           key_of(PH_TRUNC, a, rank, 6000, 3));
	fill(s, 700, key_of(PH_TRUNC, rank, a, 700, 4));
	memset(r, POISON, 8192 + GUARD);
	st_poison(&st);
	CALL(shmcoll_sendrecv(s, 700, SHMCOLL_UINT8, a, 24, r, 8192, SHMCOLL_UINT8, b, 24, comm,
	                      &st));
	check_status("sendrecv back after the truncations", &st, b, 24, 700, 700, 700, 0);
	check_data("sendrecv back after the truncations", r, 700, 8192,
	           key_of(PH_TRUNC, b, rank, 700, 4));
	return errors ? -1 : 0;
}

/* ---- g. windows of requests ---- */

#define WIN_N 64

static size_t win_size(int j)
{
	static const size_t base[] = {0, 24, 4096, 40000};

	return base[j % 4] + (j % 4 ? (size_t)j : 0);
}

/* Checks receive j of a window (tag base + j) and its status. */
static void check_win(int base, int j, const unsigned char *buf, const shmcoll_status *st)
{
	size_t n = win_size(j);
	int src = win_src(j);
	char what[160];

	snprintf(what, sizeof(what), "window receive %d (tag %d) from rank %d (node %d)", j,
	         base + j, src, node_of(src));
	check_status(what, st, src, base + j, n, n, n, 0);
	check_data(what, buf, n, n + SLACK, key_of(PH_WIN, src, rank, n, (uint64_t)(base + j)));
}

/* nr receives (slots 0 .. nr - 1) and nr sends (slots nr ..) of window `base`: the even
 * receives posted before the sends, the odd ones after (their messages may be there
 * already). */
static int win_post(int base, int nr, unsigned char **r)
{
	unsigned char *s;
	int j, odd;

	for (j = 0; j < nr; j++) {
		r[j] = rbuf_new(win_size(j) + SLACK);
		if (!r[j])
			return -1;
	}
	for (j = 0; j < nr; j += 2)
		CALL(shmcoll_irecv(r[j], win_size(j) + SLACK, SHMCOLL_UINT8, win_src(j), base + j,
		                   comm, &reqs[j]));
	for (j = 0; j < nr; j++) {
		s = carve(win_size(j));
		if (!s)
			return -1;
		fill(s, win_size(j),
		     key_of(PH_WIN, rank, win_dst(j), win_size(j), (uint64_t)(base + j)));
		CALL(shmcoll_isend(s, win_size(j), SHMCOLL_UINT8, win_dst(j), base + j, comm,
		                   &reqs[nr + j]));
	}
	for (odd = 1; odd < nr; odd += 2)
		CALL(shmcoll_irecv(r[odd], win_size(odd) + SLACK, SHMCOLL_UINT8, win_src(odd),
		                   base + odd, comm, &reqs[odd]));
	return 0;
}

static int phase_windows(void)
{
	unsigned char *r[WIN_N];
	int i, j, done, left, seen[16];
	size_t idx;
	shmcoll_status st;
	double t0;

	/* WIN_N of each outstanding, to and from ranks on other nodes: waitall. */
	slab_used = 0;
	if (win_post(1000, WIN_N, r))
		return -1;
	for (i = 0; i < 2 * WIN_N; i++)
		st_poison(&sts[i]);
	CALL(shmcoll_waitall(2 * WIN_N, reqs, sts));
	for (i = 0; i < 2 * WIN_N; i++)
		if (reqs[i])
			failf("waitall left request %d set", i);
	for (j = 0; j < WIN_N; j++)
		check_win(1000, j, r[j], &sts[j]);
	for (j = 0; j < WIN_N; j++)
		if (sts[WIN_N + j].error != 0)
			failf("window send %d: waitall's status says error %d", j,
			      sts[WIN_N + j].error);
	if (errors)
		return -1;

	/* 8 and 8 completed one at a time by waitany. */
	slab_used = 0;
	if (win_post(2000, 8, r))
		return -1;
	memset(seen, 0, sizeof(seen));
	for (i = 0;; i++) {
		st_poison(&st);
		idx = 12345;
		CALL(shmcoll_waitany(16, reqs, &idx, &st));
		if (idx == SIZE_MAX)
			break;
		if (idx >= 16 || seen[idx]++ || reqs[idx] || i >= 16) {
			failf("waitany %d: index %zu (seen before, out of range or left set)", i,
			      idx);
			return -1;
		}
		if (idx < 8)
			check_win(2000, (int)idx, r[idx], &st);
	}
	if (i != 16)
		failf("waitany completed %d requests, want 16", i);
	if (errors)
		return -1;

	/* Then polled with shmcoll_test, each until it completes. */
	slab_used = 0;
	if (win_post(3000, 8, r))
		return -1;
	for (left = 16, t0 = now_s(); left && now_s() - t0 < POLL_CAP_S; sched_yield())
		for (i = 0; i < 16; i++) {
			if (!reqs[i])
				continue;
			st_poison(&st);
			done = -1;
			CALL(shmcoll_test(&reqs[i], &done, &st));
			if (done != 0 && done != 1) {
				failf("test of request %d: done = %d", i, done);
				return -1;
			}
			if (!done)
				continue;
			left--;
			if (reqs[i])
				failf("test of request %d: done, but the request is left set", i);
			if (i < 8)
				check_win(3000, i, r[i], &st);
		}
	if (left) {
		failf("%d of 16 requests still pending after %.0f s of shmcoll_test", left,
		      POLL_CAP_S);
		return -1;
	}

	/* And with shmcoll_testall. */
	slab_used = 0;
	if (win_post(4000, 8, r))
		return -1;
	for (i = 0; i < 16; i++)
		st_poison(&sts[i]);
	for (done = 0, t0 = now_s(); !done && now_s() - t0 < POLL_CAP_S; sched_yield())
		CALL(shmcoll_testall(16, reqs, &done, sts));
	if (!done) {
		failf("testall: not done after %.0f s", POLL_CAP_S);
		return -1;
	}
	for (j = 0; j < 8; j++)
		check_win(4000, j, r[j], &sts[j]);
	return errors ? -1 : 0;
}

/* ---- h. beside collectives ---- */

#define MIX_BIG 70000

/* Requests posted before a barrier and completed after it, across an allreduce and an
 * iallreduce: a receive waiting for a message sent after the barrier, and a rendezvous and
 * an eager send the receiver takes only after it. */
static int phase_mixed(void)
{
	int a = prev_node(), b = next_node(), i;
	unsigned char *s30, *s31, *s32, *r30, *r31, *r32;
	int64_t x = rank + 1, y = -1, S = size;
	shmcoll_status st;

	slab_used = 0;
	s30 = carve(MIX_BIG);
	s31 = carve(64);
	s32 = carve(24);
	r30 = rbuf_new(MIX_BIG + SLACK);
	r31 = rbuf_new(64 + SLACK);
	r32 = rbuf_new(24 + SLACK);
	if (!s30 || !s31 || !s32 || !r30 || !r31 || !r32)
		return -1;
	fill(s30, MIX_BIG, key_of(PH_MIX, rank, b, MIX_BIG, 30));
	fill(s31, 64, key_of(PH_MIX, rank, b, 64, 31));
	fill(s32, 24, key_of(PH_MIX, rank, b, 24, 32));
	for (i = 0; i < 4; i++)
		st_poison(&sts[i]);
	CALL(shmcoll_irecv(r31, 64 + SLACK, SHMCOLL_UINT8, a, 31, comm, &reqs[0]));
	CALL(shmcoll_isend(s30, MIX_BIG, SHMCOLL_UINT8, b, 30, comm, &reqs[1]));
	CALL(shmcoll_isend(s32, 24, SHMCOLL_UINT8, b, 32, comm, &reqs[2]));
	CALL(shmcoll_barrier(comm));
	if (coll_check("with requests outstanding"))
		return -1;
	CALL(shmcoll_iallreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, comm, &reqs[3]));

	st_poison(&st);
	CALL(shmcoll_recv(r30, MIX_BIG + SLACK, SHMCOLL_UINT8, a, 30, comm, &st));
	check_status("recv after the barrier of a rendezvous sent before it", &st, a, 30, MIX_BIG,
	             MIX_BIG, MIX_BIG, 0);
	check_data("recv after the barrier of a rendezvous sent before it", r30, MIX_BIG,
	           MIX_BIG + SLACK, key_of(PH_MIX, a, rank, MIX_BIG, 30));
	CALL(shmcoll_send(s31, 64, SHMCOLL_UINT8, b, 31, comm));
	st_poison(&st);
	CALL(shmcoll_recv(r32, 24 + SLACK, SHMCOLL_UINT8, a, 32, comm, &st));
	check_status("recv after the barrier of a message sent before it", &st, a, 32, 24, 24, 24,
	             0);
	check_data("recv after the barrier of a message sent before it", r32, 24, 24 + SLACK,
	           key_of(PH_MIX, a, rank, 24, 32));
	CALL(shmcoll_waitall(4, reqs, sts));
	check_status("irecv posted before the barrier", &sts[0], a, 31, 64, 64, 64, 0);
	check_data("irecv posted before the barrier", r31, 64, 64 + SLACK,
	           key_of(PH_MIX, a, rank, 64, 31));
	if (y != S * (S + 1) / 2)
		failf("iallreduce beside point-to-point: %lld, want %lld", (long long)y,
		      (long long)(S * (S + 1) / 2));
	return errors ? -1 : 0;
}

/* ---- the fault modes ---- */

#define FAULT_BYTES 256

/* The victim: one message to rank 0, rank 0's reply, then the fault while rank 0 waits for
 * another message. */
static int fault_victim(int kill_it)
{
	unsigned char msg[FAULT_BYTES], go = 0;
	int rc;

	fill(msg, FAULT_BYTES, key_of(PH_FAULT, rank, 0, FAULT_BYTES, 0));
	rc = shmcoll_send(msg, FAULT_BYTES, SHMCOLL_UINT8, 0, 1, comm);
	if (!rc)
		rc = shmcoll_recv(&go, 1, SHMCOLL_UINT8, 0, 2, comm, NULL);
	if (rc) {
		failf("the victim's message or rank 0's reply: %d (%s): %s", rc,
		      shmcoll_strerror(rc), shmcoll_last_error(comm));
		shmcoll_comm_destroy(comm);
		return 30;
	}
	/* Rank 0 goes from its reply straight into the receive: by now it waits there (and
	 * were it not there yet, it would have to fail all the same). */
	usleep(200000);
	printf("rank %d: %s now\n", rank, kill_it ? "dies" : "aborts");
	fflush(stdout);
	if (kill_it)
		raise(SIGKILL);
	rc = shmcoll_comm_abort(comm);
	return shmcoll_comm_destroy(comm) || rc ? 30 : 0;
}

/* Rank 0: the victim's message, the reply, then a receive the fault must end. */
static int fault_rank0(int victim)
{
	const char *tmo = getenv("SHMCOLL_TIMEOUT_MS");
	double bound_s = (tmo ? atof(tmo) : 300000) / 2000, t0, took;
	unsigned char buf[FAULT_BYTES + GUARD], go = 1;
	shmcoll_status st;
	int rc, code = 0;

	memset(buf, POISON, sizeof(buf));
	st_poison(&st);
	rc = shmcoll_recv(buf, FAULT_BYTES, SHMCOLL_UINT8, victim, 1, comm, &st);
	if (rc) {
		failf("the victim's first message: %d (%s): %s", rc, shmcoll_strerror(rc),
		      shmcoll_last_error(comm));
	} else {
		check_status("the victim's first message", &st, victim, 1, FAULT_BYTES, FAULT_BYTES,
		             FAULT_BYTES, 0);
		check_data("the victim's first message", buf, FAULT_BYTES, FAULT_BYTES,
		           key_of(PH_FAULT, victim, 0, FAULT_BYTES, 0));
	}
	if (errors) {
		shmcoll_comm_destroy(comm);
		return 20;
	}
	rc = shmcoll_send(&go, 1, SHMCOLL_UINT8, victim, 2, comm);
	if (rc) {
		failf("the reply to the victim: %d (%s): %s", rc, shmcoll_strerror(rc),
		      shmcoll_last_error(comm));
		shmcoll_comm_destroy(comm);
		return 21;
	}
	t0 = now_s();
	rc = shmcoll_recv(buf, FAULT_BYTES, SHMCOLL_UINT8, victim, 3, comm, &st);
	took = now_s() - t0;
	printf("rank 0: the receive from rank %d returned %d (%s) after %.2f s: %s\n", victim, rc,
	       shmcoll_strerror(rc), took, shmcoll_last_error(comm));
	if (rc == 0) {
		failf("the receive from rank %d returned 0, but it sent nothing", victim);
		code = 22;
	} else if (rc == -ETIMEDOUT || took > bound_s) {
		failf("the receive from rank %d ended after %.2f s (bound %.2f s), with %d (%s): "
		      "a timeout ended it, not the fault",
		      victim, took, bound_s, rc, shmcoll_strerror(rc));
		code = 23;
	} else if (rc != -EOWNERDEAD && rc != -ECANCELED) {
		failf("the receive from rank %d returned %d (%s), not -EOWNERDEAD or -ECANCELED",
		      victim, rc, shmcoll_strerror(rc));
		code = 24;
	} else {
		/* Broken from now on, for point-to-point and collectives alike. */
		rc = shmcoll_recv(buf, FAULT_BYTES, SHMCOLL_UINT8, victim, 3, comm, &st);
		if (rc != -ECANCELED) {
			failf("the next receive returned %d (%s), not -ECANCELED", rc,
			      shmcoll_strerror(rc));
			code = 25;
		}
		rc = shmcoll_barrier(comm);
		if (rc != -ECANCELED) {
			failf("the next barrier returned %d (%s), not -ECANCELED", rc,
			      shmcoll_strerror(rc));
			code = 25;
		}
	}
	shmcoll_comm_destroy(comm);
	return code;
}

static int run_fault(const char *how, int victim)
{
	int kill_it = !strcmp(how, "kill"), rc;

	phase = how;
	if ((!kill_it && strcmp(how, "abort")) || victim < 0 || victim >= size ||
	    node_of(victim) == 0) {
		fprintf(stderr, "nodep2p: %s %d: want kill|abort and a rank off node 0\n", how,
		        victim);
		shmcoll_comm_destroy(comm);
		return 2;
	}
	if (rank == victim)
		return fault_victim(kill_it);
	if (rank == 0)
		return fault_rank0(victim);
	/* A bystander: the barrier cannot complete without the victim, and must not hang. */
	rc = shmcoll_barrier(comm);
	printf("rank %d: the barrier returned %d (%s): %s\n", rank, rc, shmcoll_strerror(rc),
	       shmcoll_last_error(comm));
	if (rc == 0 || (!kill_it && rc == -ETIMEDOUT))
		failf("the barrier returned %d (%s) though rank %d %s", rc, shmcoll_strerror(rc),
		      victim, kill_it ? "never entered it" : "aborted the communicator");
	shmcoll_comm_destroy(comm);
	return rc == 0 || (!kill_it && rc == -ETIMEDOUT) ? 26 : 0;
}

static const struct {
	const char *name;
	int (*run)(void);
} phases[] = {
    {"sizes", phase_sizes},     {"tags", phase_tags},   {"order", phase_order},
    {"any", phase_any},         {"probe", phase_probe}, {"truncate", phase_truncate},
    {"windows", phase_windows}, {"mixed", phase_mixed},
};

/* Every phase, each followed by the checked allreduces, then destroys the communicator:
 * 0 if every check passed. */
static int run_phases(void)
{
	const char *net = shmcoll__probe_transport(comm);
	int failed = 0, rc, p;
	double t0;

	if (net && rank == 0)
		printf("transport %s\n", net);
	for (p = 0; !failed && p < (int)(sizeof(phases) / sizeof(phases[0])); p++) {
		t0 = now_s();
		phase = phases[p].name;
		errors = 0;
		rc = phases[p].run();
		if (!rc && !errors)
			rc = coll_check("after the phase");
		failed = rc || errors;
		if (rank == 0)
			printf("phase %s: %.2f s\n", phase, now_s() - t0);
	}
	if (failed) {
		/* The others may wait for this rank: break the communicator for all, which also
		 * completes this rank's outstanding requests before their buffers go. */
		shmcoll_comm_abort(comm);
		shmcoll_waitall(NREQ, reqs, NULL);
	}
	rc = shmcoll_comm_destroy(comm);
	if (rc) {
		printf("FAIL p2p rank %d: shmcoll_comm_destroy returned %d (%s)\n", rank, rc,
		       shmcoll_strerror(rc));
		failed = 1;
	}
	if (!failed)
		printf("ok p2p rank %d of %d\n", rank, size);
	return failed;
}

int main(int argc, char **argv)
{
	const char *ls = getenv("SHMCOLL_LOCAL_SIZE");
	int rc;

	if (shmcoll_init(&comm)) {
		fprintf(stderr, "nodep2p: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	nproc = ls ? atoi(ls) : size;
	nnodes = nproc > 0 ? size / nproc : 0;
	sbig = malloc(BIG);
	rbig = malloc(BIG + SLACK + GUARD);
	ref = malloc(BIG + SLACK + GUARD);
	slab = malloc(SLAB_BYTES);
	if (nproc < 1 || size % nproc || size > 1024 || (argc != 1 && argc != 3)) {
		fprintf(stderr,
		        "usage: nodep2p [kill|abort VICTIM], as %d ranks in nodes of "
		        "SHMCOLL_LOCAL_SIZE=%s\n",
		        size, ls ? ls : "(unset)");
		shmcoll_comm_abort(comm);
		shmcoll_comm_destroy(comm);
		rc = 2;
	} else if (!sbig || !rbig || !ref || !slab) {
		failf("out of memory");
		shmcoll_comm_abort(comm);
		shmcoll_comm_destroy(comm);
		rc = 1;
	} else {
		rc = argc == 3 ? run_fault(argv[1], atoi(argv[2])) : run_phases();
	}
	fflush(stdout);
	free(sbig);
	free(rbig);
	free(ref);
	free(slab);
	return rc;
}
