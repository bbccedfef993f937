/* topo.c - the topology-aware tree and the pretend machines of SHMCOLL_TOPOLOGY (sched.h has
 * the shape). Pure: the places come from the caller (lib/core/topo.c reads them). */
#include <stdint.h>

#include "lib/sched/sched.h"

static int same_pkg(const struct shmcoll_place *pl, int a, int b)
{
	return pl[a].pkg == pl[b].pkg;
}

static int same_dom(const struct shmcoll_place *pl, int a, int b)
{
	return pl[a].pkg == pl[b].pkg && pl[a].l3 == pl[b].l3;
}

/* One level: the k-nomial tree over the n ranks of list (list[0] its root) at rank's index
 * in it; the parent, if any, is rank's, and its children follow those of the levels above. */
static void add_level(const int16_t *list, int n, int rank, struct shmcoll_tree *t)
{
	struct shmcoll_tree sub;
	int i, me = 0;

	while (list[me] != rank)
		me++;
	shmcoll__tree(me, n, 0, &sub);
	if (sub.parent >= 0)
		t->parent = list[sub.parent];
	for (i = 0; i < sub.nchildren; i++)
		t->children[t->nchildren++] = list[sub.children[i]];
}

void shmcoll__tree_topo(int rank, int size, int root, const struct shmcoll_place *pl,
                        struct shmcoll_tree *t)
{
	/* low[r]: the lowest rank of r's domain; dom[0..ndom): each domain's lowest rank, in
	 * rank order; list: the members of one level. int16_t: SHMCOLL_SCHED_MAX ranks. */
	int16_t low[SHMCOLL_SCHED_MAX], dom[SHMCOLL_SCHED_MAX], list[SHMCOLL_SCHED_MAX];
	int r, d, n, ndom = 0, lead, plead;

	for (r = 0; r < size; r++) {
		if (pl[r].pkg < 0 || pl[r].l3 < 0)
			break;
		for (d = 0; d < ndom && !same_dom(pl, r, dom[d]); d++)
			;
		if (d == ndom)
			dom[ndom++] = (int16_t)r;
		low[r] = dom[d];
	}
	if (r < size || ndom < 2) {
		shmcoll__tree(rank, size, root, t);
		return;
	}
	t->parent = -1;
	t->nchildren = 0;
	/* Leaders: of rank's domain, and of its package. */
	lead = same_dom(pl, rank, root) ? root : low[rank];
	if (same_pkg(pl, rank, root)) {
		plead = root;
	} else {
		for (d = 0; !same_pkg(pl, rank, dom[d]); d++)
			;
		plead = dom[d];
	}
	/* Across packages: root first, then each other package's lowest rank (the lowest rank
	 * of the first of its domains). */
	if (rank == plead) {
		n = 0;
		list[n++] = (int16_t)root;
		for (d = 0; d < ndom; d++) {
			int first = 1, e;

			for (e = 0; e < d && first; e++)
				first = !same_pkg(pl, dom[e], dom[d]);
			if (first && !same_pkg(pl, dom[d], root))
				list[n++] = dom[d];
		}
		add_level(list, n, rank, t);
	}
	/* The domain leaders of rank's package, its leader first. */
	if (rank == lead) {
		n = 0;
		list[n++] = (int16_t)plead;
		for (d = 0; d < ndom; d++) {
			int l = same_dom(pl, dom[d], root) ? root : dom[d];

			if (same_pkg(pl, dom[d], rank) && l != plead)
				list[n++] = (int16_t)l;
		}
		add_level(list, n, rank, t);
	}
	/* Rank's domain, its leader first. */
	n = 0;
	list[n++] = (int16_t)lead;
	for (r = low[rank]; r < size; r++)
		if (r != lead && low[r] == low[rank])
			list[n++] = (int16_t)r;
	add_level(list, n, rank, t);
}

/* One whole number in 1..SHMCOLL_SCHED_MAX at *s, which is left after it. */
static int dim(const char **s)
{
	long v = 0;

	if (**s < '0' || **s > '9')
		return -1;
	while (**s >= '0' && **s <= '9') {
		v = v * 10 + (**s - '0');
		if (v > SHMCOLL_SCHED_MAX)
			return -1;
		(*s)++;
	}
	return v >= 1 ? (int)v : -1;
}

int shmcoll__topo_parse(const char *spec, int dims[3])
{
	int i;

	for (i = 0; i < 3; i++) {
		if (i && *spec++ != 'x')
			return -1;
		dims[i] = dim(&spec);
		if (dims[i] < 0)
			return -1;
	}
	return *spec ? -1 : 0;
}

struct shmcoll_place shmcoll__topo_place(const int dims[3], int rank)
{
	long i = rank % ((long)dims[0] * dims[1] * dims[2]), d = i / dims[2];

	return (struct shmcoll_place){.pkg = (int)(d / dims[1]), .l3 = (int)d};
}
