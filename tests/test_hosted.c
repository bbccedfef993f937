/* test_hosted.c - shmcoll_comm_create_hosted: a communicator over several nodes whose leaders
 * move their data through a transport the host supplies. The ranks are threads of this
 * process, each node's a node communicator of its own; the host's transport is a mailbox per
 * ordered pair of leaders, so what crosses between nodes goes through the host's functions
 * only, and they record any call from another thread than the leader's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/net/net.h"
#include "shmcoll.h"

#define MAXN       2
#define TIMEOUT_MS 60000

struct msg {
	struct msg *next;
	size_t len;
	unsigned char data[];
};

struct hub {
	pthread_mutex_t mu;
	struct msg *head[MAXN][MAXN], *tail[MAXN][MAXN]; /* [from][to] */
	int fail; /* > 0: every start fails with -EIO; < 0: the failure test, which sets it */
	pthread_barrier_t bar; /* every rank of the test */
};

struct leader {
	struct hub *hub;
	int me;
	pthread_t owner; /* the leader's thread */
	void *rbuf[2 * MAXN];
	size_t rlen[2 * MAXN];
	int pending[2 * MAXN];
	int calls, foreign; /* calls of the host's functions; of them, off the leader's thread */
};

static void note(struct leader *l)
{
	l->calls++;
	l->foreign += !pthread_equal(pthread_self(), l->owner);
}

static int h_start(void *ctx, int slot, int peer, int send, void *buf, size_t len)
{
	struct leader *l = ctx;
	struct msg *m;

	note(l);
	if (l->hub->fail > 0)
		return -EIO;
	if (slot != 2 * peer + !send || peer == l->me || peer < 0 || peer >= MAXN)
		return -EINVAL;
	if (!send) {
		l->rbuf[slot] = buf;
		l->rlen[slot] = len;
		l->pending[slot] = 1;
		return 0;
	}
	m = malloc(sizeof(*m) + len);
	if (!m)
		return -ENOMEM;
	m->next = NULL;
	m->len = len;
	if (len) /* an empty transfer may come with no buffer */
		memcpy(m->data, buf, len);
	pthread_mutex_lock(&l->hub->mu);
	if (l->hub->tail[l->me][peer])
		l->hub->tail[l->me][peer]->next = m;
	else
		l->hub->head[l->me][peer] = m;
	l->hub->tail[l->me][peer] = m;
	pthread_mutex_unlock(&l->hub->mu);
	return 0;
}

static int h_test(void *ctx, int slot)
{
	struct leader *l = ctx;
	int peer = slot / 2;
	struct msg *m;

	note(l);
	if (!(slot & 1) || !l->pending[slot])
		return 1; /* a send is complete once started */
	pthread_mutex_lock(&l->hub->mu);
	m = l->hub->head[peer][l->me];
	if (m) {
		l->hub->head[peer][l->me] = m->next;
		if (!m->next)
			l->hub->tail[peer][l->me] = NULL;
	}
	pthread_mutex_unlock(&l->hub->mu);
	if (!m)
		return 0;
	l->pending[slot] = 0;
	if (m->len != l->rlen[slot]) {
		free(m);
		return -EPROTO;
	}
	if (m->len)
		memcpy(l->rbuf[slot], m->data, m->len);
	free(m);
	return 1;
}

static int h_wait(void *ctx, int slot)
{
	int rc;

	while ((rc = h_test(ctx, slot)) == 0)
		sched_yield();
	return rc < 0 ? rc : 0;
}

static void h_cancel(void *ctx, int slot)
{
	struct leader *l = ctx;

	note(l);
	l->pending[slot] = 0;
}

struct rank {
	struct hub *hub;
	struct leader *leaders; /* per node */
	int nodes[MAXN];        /* ranks per node */
	int node, lrank, rank;
	int rc;        /* 0, or the number of the first failed check */
	int create_rc; /* shmcoll_comm_create_hosted's */
	int broken;    /* the collective after the host's failure failed */
	char job[MAXN][64];
};

static int64_t value(int rank, size_t i)
{
	return (int64_t)rank * 1000003 + (int64_t)i;
}

/* The collectives across the two nodes, each against what it must give. 10+: allreduce (a
 * small vector and one of several chunks), 20: bcast from the other node's non-leader,
 * 30: reduce to a non-leader, 40: allgather, 50: gather, 60: alltoall, 70: barrier, 80: the
 * refusals, 90: the node communicator after the hosted one went. */
static int body(shmcoll_comm *c, shmcoll_comm *node, int rank, int size)
{
	size_t big = (size_t)3 << 18, i, n = 1000;
	int64_t *a = calloc(big, sizeof(*a)), *b = calloc(big, sizeof(*b));
	int64_t all[4 * 8], mine[4 * 8];
	shmcoll_request *req;
	int r, k, rc = 0;

	if (!a || !b)
		return 1;
	for (i = 0; i < n; i++)
		a[i] = value(rank, i);
	if (shmcoll_allreduce(a, b, n, SHMCOLL_INT64, SHMCOLL_SUM, c))
		rc = 10;
	for (i = 0; !rc && i < n; i++)
		if (b[i] != value(0, i) + value(1, i) + value(2, i) + value(3, i))
			rc = 11;
	for (i = 0; !rc && i < big; i++)
		a[i] = (int64_t)i * (rank + 1);
	if (!rc && shmcoll_allreduce(a, b, big, SHMCOLL_INT64, SHMCOLL_SUM, c))
		rc = 12;
	for (i = 0; !rc && i < big; i++)
		if (b[i] != (int64_t)i * 10)
			rc = 13;
	for (i = 0; !rc && i < n; i++)
		b[i] = rank == 3 ? value(3, i) : -1;
	if (!rc && shmcoll_bcast(b, n, SHMCOLL_INT64, 3, c))
		rc = 20;
	for (i = 0; !rc && i < n; i++)
		if (b[i] != value(3, i))
			rc = 21;
	for (i = 0; !rc && i < n; i++)
		a[i] = value(rank, i);
	if (!rc && shmcoll_reduce(a, b, n, SHMCOLL_INT64, SHMCOLL_MAX, 1, c))
		rc = 30;
	for (i = 0; !rc && rank == 1 && i < n; i++)
		if (b[i] != value(3, i))
			rc = 31;
	for (k = 0; k < 8; k++)
		mine[k] = value(rank, (size_t)k);
	if (!rc && shmcoll_allgather(mine, all, 8, SHMCOLL_INT64, c))
		rc = 40;
	for (r = 0; !rc && r < size; r++)
		for (k = 0; k < 8; k++)
			if (all[r * 8 + k] != value(r, (size_t)k))
				rc = 41;
	memset(all, 0, sizeof(all));
	if (!rc && shmcoll_gather(mine, all, 8, SHMCOLL_INT64, 2, c))
		rc = 50;
	for (r = 0; !rc && rank == 2 && r < size; r++)
		for (k = 0; k < 8; k++)
			if (all[r * 8 + k] != value(r, (size_t)k))
				rc = 51;
	for (r = 0; r < size; r++)
		for (k = 0; k < 8; k++)
			mine[r * 8 + k] = value(rank, (size_t)(r * 8 + k));
	if (!rc && shmcoll_alltoall(mine, all, 8, SHMCOLL_INT64, c))
		rc = 60;
	for (r = 0; !rc && r < size; r++)
		for (k = 0; k < 8; k++)
			if (all[r * 8 + k] != value(r, (size_t)(rank * 8 + k)))
				rc = 61;
	if (!rc && shmcoll_barrier(c))
		rc = 70;
	if (!rc && shmcoll_iallreduce(a, b, n, SHMCOLL_INT64, SHMCOLL_SUM, c, &req) != -ENOTSUP)
		rc = 80;
	if (!rc && shmcoll_send(a, 1, SHMCOLL_INT64, (rank + 1) % size, 0, c) != -ENOTSUP)
		rc = 81;
	if (!rc && !strstr(shmcoll_last_error(c), "shmcoll_comm_create_hosted"))
		rc = 82;
	if (!rc && shmcoll_comm_destroy(c))
		rc = 90;
	if (!rc && shmcoll_allreduce(mine, all, 8, SHMCOLL_INT64, SHMCOLL_SUM, node))
		rc = 91;
	free(a);
	free(b);
	return rc;
}

static void *rank_main(void *p)
{
	struct rank *a = p;
	struct leader *l = &a->leaders[a->node];
	shmcoll_transport t = {
	    .ctx = l, .start = h_start, .test = h_test, .wait = h_wait, .cancel = h_cancel};
	shmcoll_config cfg = {.rank = a->lrank,
	                      .size = a->nodes[a->node],
	                      .job = a->job[a->node],
	                      .timeout_ms = TIMEOUT_MS};
	shmcoll_comm *node, *c = NULL;
	int64_t x = 1, y = 0;

	if (a->lrank == 0)
		l->owner = pthread_self();
	a->rc = shmcoll_comm_create(&cfg, &node);
	if (a->rc)
		return NULL;
	a->create_rc = shmcoll_comm_create_hosted(node, MAXN, a->node, &t, &c);
	if (a->create_rc == 0 &&
	    (shmcoll_comm_rank(c) != a->rank || shmcoll_comm_size(c) != a->nodes[0] + a->nodes[1]))
		a->rc = 2;
	else if (a->create_rc == 0 && a->hub->fail < 0) {
		/* The host's failure test: every leader's next transfer fails. */
		pthread_barrier_wait(&a->hub->bar);
		if (a->rank == 0)
			a->hub->fail = 1;
		pthread_barrier_wait(&a->hub->bar);
		a->broken = shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, c) < 0;
		if (shmcoll_comm_destroy(c))
			a->rc = 3;
	} else if (a->create_rc == 0) {
		a->rc = body(c, node, a->rank, shmcoll_comm_size(c));
	}
	if (shmcoll_comm_destroy(node))
		a->rc = a->rc ? a->rc : 4;
	return NULL;
}

/* Runs nodes[0] + nodes[1] ranks as threads, node-major. */
static void run(struct rank *a, struct hub *hub, struct leader *leaders, const int nodes[MAXN])
{
	pthread_t t[8];
	int i, n, total = nodes[0] + nodes[1];

	cr_assert_eq(pthread_mutex_init(&hub->mu, NULL), 0);
	cr_assert_eq(pthread_barrier_init(&hub->bar, NULL, (unsigned)total), 0);
	for (n = 0; n < MAXN; n++)
		leaders[n] = (struct leader){.hub = hub, .me = n};
	for (i = 0; i < total; i++) {
		a[i] = (struct rank){.hub = hub, .leaders = leaders, .rc = -1, .create_rc = -1};
		memcpy(a[i].nodes, nodes, sizeof(a[i].nodes));
		a[i].rank = i;
		a[i].node = i < nodes[0] ? 0 : 1;
		a[i].lrank = i - (a[i].node ? nodes[0] : 0);
		for (n = 0; n < MAXN; n++)
			snprintf(a[i].job[n], sizeof(a[i].job[n]), "hosted-%d-%d", (int)getpid(),
			         n);
	}
	for (i = 0; i < total; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, rank_main, &a[i]), 0);
	for (i = 0; i < total; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&hub->bar);
	for (n = 0; n < MAXN; n++)
		cr_expect_eq(leaders[n].foreign, 0,
		             "node %d's transport was called off its leader's thread %d times", n,
		             leaders[n].foreign);
}

Test(hosted, collectives_across_two_nodes, .timeout = 120)
{
	static struct hub hub;
	struct leader leaders[MAXN];
	struct rank a[4];
	const int nodes[MAXN] = {2, 2};
	int i;

	run(a, &hub, leaders, nodes);
	for (i = 0; i < 4; i++) {
		cr_expect_eq(a[i].create_rc, 0, "rank %d: create: %d", i, a[i].create_rc);
		cr_expect_eq(a[i].rc, 0, "rank %d failed check %d", i, a[i].rc);
	}
	for (i = 0; i < MAXN; i++)
		cr_expect_gt(leaders[i].calls, 0, "node %d's leader never used the host", i);
}

Test(hosted, nodes_of_different_sizes_refused_everywhere, .timeout = 120)
{
	static struct hub hub;
	struct leader leaders[MAXN];
	struct rank a[3];
	const int nodes[MAXN] = {2, 1};
	int i;

	run(a, &hub, leaders, nodes);
	for (i = 0; i < 3; i++) {
		cr_expect_eq(a[i].create_rc, -EINVAL, "rank %d: create: %d", i, a[i].create_rc);
		cr_expect_eq(a[i].rc, 0, "rank %d failed check %d", i, a[i].rc);
	}
}

Test(hosted, a_failed_transfer_fails_every_rank, .timeout = 120)
{
	static struct hub hub = {.fail = -1};
	struct leader leaders[MAXN];
	struct rank a[4];
	const int nodes[MAXN] = {2, 2};
	int i;

	run(a, &hub, leaders, nodes);
	for (i = 0; i < 4; i++) {
		cr_expect_eq(a[i].create_rc, 0, "rank %d: create: %d", i, a[i].create_rc);
		cr_expect_eq(a[i].rc, 0, "rank %d failed check %d", i, a[i].rc);
		cr_expect(a[i].broken, "rank %d's allreduce succeeded", i);
	}
}

Test(hosted, bad_arguments)
{
	shmcoll_transport t = {0};
	shmcoll_comm *c = (shmcoll_comm *)&t;

	cr_expect_eq(shmcoll_comm_create_hosted(NULL, 2, 0, &t, &c), -EINVAL, "%s",
	             shmcoll_last_error(NULL));
	cr_expect_null(c, "newcomm was not cleared");
	cr_expect_eq(shmcoll_comm_create_hosted(NULL, 2, 0, &t, NULL), -EINVAL, "%s",
	             shmcoll_last_error(NULL));
	cr_expect(strstr(shmcoll_last_error(NULL), "newcomm"), "%s", shmcoll_last_error(NULL));
}

/* The transport alone (lib/net/net_host.c), both leaders' nets on this thread: a receive that
 * gets another length fails with -EPROTO and breaks the net, and a receive whose message
 * never comes fails at the deadline with its transfer cancelled in the host's hands. */
static struct shmcoll_net *host_net(struct leader *l, int64_t timeout_ns)
{
	shmcoll_transport t = {
	    .ctx = l, .start = h_start, .test = h_test, .wait = h_wait, .cancel = h_cancel};
	struct shmcoll_net *n = NULL;
	char err[200];

	l->owner = pthread_self();
	cr_assert_eq(shmcoll__net_open_host(MAXN, l->me, &t, timeout_ns, &n, err, sizeof(err)), 0,
	             "%s", err);
	return n;
}

Test(hosted, transport_length_mismatch_and_deadline, .timeout = 60)
{
	static struct hub hub;
	struct leader l[MAXN];
	struct shmcoll_net *a, *b;
	uint64_t out[2] = {1, 2}, in[2];
	struct shmcoll_xfer xs = {.peer = 1, .dir = XFER_SEND, .buf = out, .len = 8};
	struct shmcoll_xfer xr = {.peer = 0, .dir = XFER_RECV, .buf = in, .len = 16};
	char err[200] = "";

	cr_assert_eq(pthread_mutex_init(&hub.mu, NULL), 0);
	l[0] = (struct leader){.hub = &hub, .me = 0};
	l[1] = (struct leader){.hub = &hub, .me = 1};
	a = host_net(&l[0], -1);
	b = host_net(&l[1], 1000000);
	cr_expect_eq(shmcoll__net_run(a, &xs, 1, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(shmcoll__net_run(b, &xr, 1, err, sizeof(err)), -EPROTO, "%s", err);
	cr_expect_eq(shmcoll__net_run(b, &xr, 1, err, sizeof(err)), -ECANCELED, "%s", err);
	shmcoll__net_close(b);
	/* Nothing is sent to this one: its deadline (1 ms) passes. */
	b = host_net(&l[1], 1000000);
	xr.len = 8;
	cr_expect_eq(shmcoll__net_run(b, &xr, 1, err, sizeof(err)), -ETIMEDOUT, "%s", err);
	cr_expect_eq(l[1].pending[1], 0, "the receive was left in the host's hands");
	shmcoll__net_close(a);
	shmcoll__net_close(b);
	cr_expect_eq(l[0].foreign + l[1].foreign, 0, "a host function ran off its thread");
}
