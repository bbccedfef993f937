/* plan.c - segments, slices, recursive doubling, the ring and the dissemination barrier
 * (sched.h has each one's shape). */
#include "lib/sched/sched.h"

void shmcoll__segment(size_t m, int n, int k, size_t *lo, size_t *len)
{
	*lo = m * (size_t)k / (size_t)n;
	*len = m * (size_t)(k + 1) / (size_t)n - *lo;
}

void shmcoll__slice(size_t count, size_t cn, size_t P, size_t i, size_t q, size_t *off, size_t *len)
{
	size_t base = i * cn, n = min_size(cn, count - base), se = (n + P - 1) / P;
	size_t lo = min_size(q * se, n);

	*off = base + lo;
	*len = min_size(lo + se, n) - lo;
}

void shmcoll__rd_plan(int me, int n, struct shmcoll_rd *rd)
{
	int p2 = 1, rounds = 0;

	while (p2 * 2 <= n) {
		p2 *= 2;
		rounds++;
	}
	rd->p2 = p2;
	rd->is_extra = me >= p2;
	rd->rounds = rd->is_extra ? 0 : rounds;
	if (rd->is_extra)
		rd->extra = me - p2;
	else
		rd->extra = me + p2 < n ? me + p2 : -1;
}

void shmcoll__ring_rs(int me, int n, int s, struct shmcoll_ring_step *st)
{
	st->to = (me + 1) % n;
	st->from = (me + n - 1) % n;
	st->send = ((me - s - 1) % n + n) % n;
	st->recv = ((me - s - 2) % n + n) % n;
}

void shmcoll__ring_ag(int me, int n, int s, struct shmcoll_ring_step *st)
{
	st->to = (me + 1) % n;
	st->from = (me + n - 1) % n;
	st->send = ((me - s) % n + n) % n;
	st->recv = ((me - s - 1) % n + n) % n;
}

int shmcoll__dissem_rounds(int n)
{
	int r = 0;

	while ((1 << r) < n)
		r++;
	return r;
}

void shmcoll__dissem_peers(int me, int n, int r, int *to, int *from)
{
	int k = (1 << r) % n;

	*to = (me + k) % n;
	*from = (me - k + n) % n;
}
