/* test_sched.c - the schedules of lib/sched checked apart from any transport, for every
 * size from 1 to SHMCOLL_SCHED_MAX (1024) and every root: the k-nomial tree, the
 * topology-aware tree on synthetic machines, segments and slices, recursive doubling, the ring and
 * the dissemination barrier. Each test runs in milliseconds: structures are checked whole where
 * that is cheap (sizes up to 64 with every root; every size with root 0), and by the identities
 * that tie the rest to them elsewhere. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sched/sched.h"

#define MAXP SHMCOLL_SCHED_MAX

/* ceil(log_k(P)) */
static int log_ceil(int P, int k)
{
	int d = 0;
	long m = 1;

	while (m < P) {
		m *= k;
		d++;
	}
	return d;
}

/* Only the root lacks a parent, and no rank has more children than the room for them. 0, or
 * 1 or 2 with the message in why. */
static int check_ranks(const struct shmcoll_tree *t, int P, int root, char *why, size_t len)
{
	int r;

	for (r = 0; r < P; r++) {
		if ((r == root) != (t[r].parent == -1)) {
			snprintf(why, len, "P=%d root=%d: rank %d has parent %d", P, root, r,
			         t[r].parent);
			return 1;
		}
		if (t[r].nchildren > SHMCOLL_TREE_MAX_CHILDREN) {
			snprintf(why, len, "P=%d: rank %d has %d children", P, r, t[r].nchildren);
			return 2;
		}
	}
	return 0;
}

/* Every rank of the tree t of P ranks reached once from root, none deeper than maxd. 0, or 4
 * (reached twice), 5 (too deep), 6 (not all reached) with the message in why. */
static int reach_all(const struct shmcoll_tree *t, int P, int root, int maxd, char *why, size_t len)
{
	static int depth[MAXP], queue[MAXP];
	int r, i, head = 0, tail = 0;

	for (r = 0; r < P; r++)
		depth[r] = -1;
	depth[root] = 0;
	queue[tail++] = root;
	while (head < tail) {
		r = queue[head++];
		for (i = 0; i < t[r].nchildren; i++) {
			int ch = t[r].children[i];

			if (depth[ch] >= 0) {
				snprintf(why, len, "P=%d root=%d: %d reached twice", P, root, ch);
				return 4;
			}
			depth[ch] = depth[r] + 1;
			if (depth[ch] > maxd) {
				snprintf(why, len, "P=%d root=%d: %d at depth %d > %d", P, root, ch,
				         depth[ch], maxd);
				return 5;
			}
			queue[tail++] = ch;
		}
	}
	if (tail != P) {
		snprintf(why, len, "P=%d root=%d: %d of %d ranks reached", P, root, tail, P);
		return 6;
	}
	return 0;
}

/* The whole tree of P ranks rooted at root: parents and children agree, every rank but the
 * root has one parent, all are reached from the root, and no path is longer than
 * ceil(log4 P). Returns 0 or a code for the message. */
static int check_tree(int P, int root, char *why, size_t len)
{
	static struct shmcoll_tree t[MAXP];
	int r, i, maxd = log_ceil(P, SHMCOLL_TREE_RADIX);

	for (r = 0; r < P; r++)
		shmcoll__tree(r, P, root, &t[r]);
	if ((i = check_ranks(t, P, root, why, len)))
		return i;
	for (r = 0; r < P; r++)
		for (i = 0; i < t[r].nchildren; i++) {
			int ch = t[r].children[i];

			if (ch < 0 || ch >= P || t[ch].parent != r) {
				snprintf(why, len,
				         "P=%d root=%d: %d lists child %d whose parent is %d", P,
				         root, r, ch, ch >= 0 && ch < P ? t[ch].parent : -2);
				return 3;
			}
		}
	return reach_all(t, P, root, maxd, why, len);
}

Test(sched, tree_whole_for_every_size_and_small_roots)
{
	char why[160];
	int P, root;

	for (P = 1; P <= MAXP; P++)
		cr_assert(check_tree(P, 0, why, sizeof(why)) == 0, "%s", why);
	for (P = 1; P <= 64; P++)
		for (root = 0; root < P; root++)
			cr_assert(check_tree(P, root, why, sizeof(why)) == 0, "%s", why);
	for (root = 0; root < MAXP; root += 37)
		cr_assert(check_tree(MAXP, root, why, sizeof(why)) == 0, "%s", why);
}

/* Any root's tree is root 0's with every rank shifted by root: checked for every size and
 * every root at the root itself, its neighbours and a rank across the ring. */
Test(sched, tree_every_root_is_a_relabelling)
{
	struct shmcoll_tree a, b;
	int P, root, j, i;

	for (P = 1; P <= MAXP; P++)
		for (root = 0; root < P; root++) {
			const int probe[4] = {root, (root + 1) % P, (root + P / 2) % P,
			                      (root + P - 1) % P};

			for (j = 0; j < 4; j++) {
				int r = probe[j], v = (r - root + P) % P;

				shmcoll__tree(r, P, root, &a);
				shmcoll__tree(v, P, 0, &b);
				cr_assert_eq(a.nchildren, b.nchildren, "P=%d root=%d rank %d", P,
				             root, r);
				cr_assert_eq(a.parent, b.parent < 0 ? -1 : (b.parent + root) % P,
				             "P=%d root=%d rank %d", P, root, r);
				for (i = 0; i < a.nchildren; i++)
					cr_assert_eq(a.children[i], (b.children[i] + root) % P,
					             "P=%d root=%d rank %d child %d", P, root, r,
					             i);
			}
		}
}

/* --- the topology-aware tree --- */

/* A synthetic machine: npkg packages of ndom L3 domains each, domain d of (d * 5 + salt) % 4
 * + 1 ranks (uneven), its ranks laid out by pattern: 0 domain by domain, 1 dealt round robin
 * over the domains that still have room (interleaved), 2 in a scrambled order. The L3 ids
 * restart in each package (an id names a domain only with its package). Returns P. */
static int make_machine(int npkg, int ndom, int salt, int pattern, struct shmcoll_place *pl)
{
	int want[16], d, P = 0, r, left;

	for (d = 0; d < npkg * ndom; d++) {
		want[d] = (d * 5 + salt) % 4 + 1;
		P += want[d];
	}
	left = P;
	for (r = 0, d = 0; left; d = (d + 1) % (npkg * ndom)) {
		if (!want[d])
			continue;
		if (pattern == 0)
			while (want[d]) {
				pl[r++] = (struct shmcoll_place){d / ndom, d % ndom};
				want[d]--;
				left--;
			}
		else {
			pl[r++] = (struct shmcoll_place){d / ndom, d % ndom};
			want[d]--;
			left--;
		}
	}
	if (pattern == 2)
		for (r = P - 1; r > 0; r--) {
			int q = (int)((uint64_t)(r * 7919 + salt * 31) % (uint64_t)(r + 1));
			struct shmcoll_place tmp = pl[r];

			pl[r] = pl[q];
			pl[q] = tmp;
		}
	return P;
}

/* 3: across packages, 2: across domains of a package, 1: within a domain. */
static int edge_level(const struct shmcoll_place *pl, int a, int b)
{
	if (pl[a].pkg != pl[b].pkg)
		return 3;
	return pl[a].l3 != pl[b].l3 ? 2 : 1;
}

/* The topology-aware tree of every rank for one machine and root: one root, parents and
 * children agree (each child listed once), all reached, each domain one subtree entered by
 * one edge (none for root's), packages - 1 edges across packages, children from the highest
 * level down, depth within the three levels' k-nomial depths. 0 or a code with why. */
static int check_topo_tree(int P, const struct shmcoll_place *pl, int npkg, int root, char *why,
                           size_t len)
{
	static struct shmcoll_tree t[MAXP];
	static int entered[MAXP], dsize[MAXP];
	int r, i, cross = 0, maxdom = 0, maxlead = 0, maxd;

	/* Domain sizes and the domain leaders per package, for the depth bound. */
	for (r = 0; r < P; r++) {
		int q, same = 0, leads = 0;

		for (q = 0; q < P; q++)
			same += edge_level(pl, r, q) == 1;
		maxdom = same > maxdom ? same : maxdom;
		for (q = 0; q < P; q++) {
			int first = 1, x;

			if (pl[q].pkg != pl[r].pkg)
				continue;
			for (x = 0; x < q && first; x++)
				first = edge_level(pl, x, q) != 1;
			leads += first;
		}
		maxlead = leads > maxlead ? leads : maxlead;
		entered[r] = 0;
		dsize[r] = same;
	}
	maxd = log_ceil(npkg, SHMCOLL_TREE_RADIX) + log_ceil(maxlead, SHMCOLL_TREE_RADIX) +
	       log_ceil(maxdom, SHMCOLL_TREE_RADIX);
	for (r = 0; r < P; r++)
		shmcoll__tree_topo(r, P, root, pl, &t[r]);
	if ((i = check_ranks(t, P, root, why, len)))
		return i;
	for (r = 0; r < P; r++)
		for (i = 0; i < t[r].nchildren; i++) {
			int ch = t[r].children[i], lv = edge_level(pl, r, ch);

			if (ch < 0 || ch >= P || t[ch].parent != r) {
				snprintf(why, len,
				         "P=%d root=%d: %d lists child %d whose parent is %d", P,
				         root, r, ch, ch >= 0 && ch < P ? t[ch].parent : -2);
				return 3;
			}
			if (i && lv > edge_level(pl, r, t[r].children[i - 1])) {
				snprintf(why, len,
				         "P=%d root=%d: %d lists a level %d child after a lower", P,
				         root, r, lv);
				return 7;
			}
			cross += lv == 3;
			/* Counted at the domain's lowest rank. */
			if (lv > 1) {
				int q = 0;

				while (edge_level(pl, q, ch) != 1)
					q++;
				entered[q]++;
			}
		}
	for (r = 0; r < P; r++) {
		int q = 0, in_root = edge_level(pl, r, root) == 1;

		while (edge_level(pl, q, r) != 1)
			q++;
		if (q == r && entered[r] != !in_root) {
			snprintf(why, len,
			         "P=%d root=%d: the domain of %d (%d ranks) is entered %d times", P,
			         root, r, dsize[r], entered[r]);
			return 8;
		}
	}
	if (cross != npkg - 1) {
		snprintf(why, len, "P=%d root=%d: %d edges across %d packages", P, root, cross,
		         npkg);
		return 9;
	}
	return reach_all(t, P, root, maxd, why, len);
}

Test(sched, topo_tree_on_synthetic_machines)
{
	static struct shmcoll_place pl[MAXP];
	char why[200];
	int npkg, ndom, salt, pattern, P, root;

	for (npkg = 1; npkg <= 4; npkg++)
		for (ndom = 1; ndom <= 4; ndom++)
			for (salt = 0; salt < 4; salt++)
				for (pattern = 0; pattern < 3; pattern++) {
					P = make_machine(npkg, ndom, salt, pattern, pl);
					for (root = 0; root < P; root++)
						cr_assert(check_topo_tree(P, pl, npkg, root, why,
						                          sizeof(why)) == 0,
						          "%d x %d, salt %d, pattern %d: %s", npkg,
						          ndom, salt, pattern, why);
				}
}

/* The pretend machines of SHMCOLL_TOPOLOGY, wrapped and cut short, 2x4x8 at 64 ranks as the
 * topo suite runs it, and one as large as a schedule gets. */
Test(sched, topo_tree_on_pretend_machines)
{
	static struct shmcoll_place pl[MAXP];
	static const struct {
		int dims[3], P;
	} m[] = {{{2, 2, 4}, 16},   {{2, 2, 4}, 13}, {{2, 2, 4}, 21}, {{2, 4, 8}, 64},
	         {{3, 1, 5}, 15},   {{3, 2, 3}, 40}, {{4, 4, 4}, 64}, {{2, 8, 16}, 256},
	         {{2, 6, 12}, 144}, {{1, 4, 4}, 16}};
	char why[200];
	size_t i;
	int r, root, npkg;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		for (r = 0; r < m[i].P; r++)
			pl[r] = shmcoll__topo_place(m[i].dims, r);
		/* A layout cut short has fewer packages. */
		npkg = (m[i].P + m[i].dims[1] * m[i].dims[2] - 1) / (m[i].dims[1] * m[i].dims[2]);
		npkg = npkg < m[i].dims[0] ? npkg : m[i].dims[0];
		for (root = 0; root<m[i].P; root += m[i].P> 64 ? 7 : 1)
			cr_assert(check_topo_tree(m[i].P, pl, npkg, root, why, sizeof(why)) == 0,
			          "%dx%dx%d at P=%d: %s", m[i].dims[0], m[i].dims[1], m[i].dims[2],
			          m[i].P, why);
	}
}

/* A root leads at all three levels: 5 packages of 13 domains of 15 ranks gives it 4 + 6 + 6
 * children, the most any machine of SHMCOLL_SCHED_MAX ranks found here gives, within the
 * bound sched.h reserves room for. */
Test(sched, topo_tree_children_fit)
{
	static struct shmcoll_place pl[MAXP];
	const int dims[3] = {5, 13, 15};
	struct shmcoll_tree t, l[3];
	int r;

	for (r = 0; r < 975; r++)
		pl[r] = shmcoll__topo_place(dims, r);
	shmcoll__tree_topo(0, 975, 0, pl, &t);
	for (r = 0; r < 3; r++)
		shmcoll__tree(0, dims[r], 0, &l[r]);
	cr_assert_eq(t.nchildren, l[0].nchildren + l[1].nchildren + l[2].nchildren);
	cr_assert_eq(t.nchildren, 16);
	cr_assert_leq(t.nchildren, SHMCOLL_TREE_MAX_CHILDREN);
}

/* With any place unknown, or all ranks in one domain, it is the plain k-nomial tree. */
Test(sched, topo_tree_plain_without_topology)
{
	static struct shmcoll_place pl[MAXP];
	struct shmcoll_tree a, b;
	int P, root, r, i, c;

	for (P = 1; P <= 70; P++)
		for (c = 0; c < 3; c++) {
			for (r = 0; r < P; r++)
				pl[r] = c == 0 ? (struct shmcoll_place){3, 7}
				               : (struct shmcoll_place){r % 2, r % 3};
			if (c == 1)
				pl[P / 2].l3 = -1;
			if (c == 2)
				pl[P - 1].pkg = -1;
			for (root = 0; root < P; root++)
				for (r = 0; r < P; r++) {
					shmcoll__tree_topo(r, P, root, pl, &a);
					shmcoll__tree(r, P, root, &b);
					cr_assert_eq(a.parent, b.parent, "P=%d case %d", P, c);
					cr_assert_eq(a.nchildren, b.nchildren, "P=%d case %d", P,
					             c);
					for (i = 0; i < a.nchildren; i++)
						cr_assert_eq(a.children[i], b.children[i]);
				}
		}
}

Test(sched, topology_spec)
{
	static const char *const bad[] = {
	    "",        "2",      "2x2",      "2x2x4x",
	    "2x2x4x1", "0x1x1",  "1x0x1",    "1x1x0",
	    "x2x4",    "2x2x4 ", " 2x2x4",   "2X2X4",
	    "-1x2x2",  "2x+2x4", "1025x1x1", "2x2x99999999999999999999",
	    "2,2,4",   "2x2x4\n"};
	int dims[3];
	size_t i;
	struct shmcoll_place p;

	cr_assert_eq(shmcoll__topo_parse("2x2x4", dims), 0);
	cr_assert(dims[0] == 2 && dims[1] == 2 && dims[2] == 4);
	cr_assert_eq(shmcoll__topo_parse("1x1x1024", dims), 0);
	cr_assert_eq(dims[2], 1024);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(shmcoll__topo_parse(bad[i], dims), -1, "\"%s\" taken", bad[i]);
	cr_assert_eq(shmcoll__topo_parse("2x2x4", dims), 0);
	p = shmcoll__topo_place(dims, 5);
	cr_assert(p.pkg == 0 && p.l3 == 1, "rank 5 of 2x2x4: %d %d", p.pkg, p.l3);
	p = shmcoll__topo_place(dims, 9);
	cr_assert(p.pkg == 1 && p.l3 == 2, "rank 9 of 2x2x4: %d %d", p.pkg, p.l3);
	p = shmcoll__topo_place(dims, 16 + 13);
	cr_assert(p.pkg == 1 && p.l3 == 3, "rank 29 of 2x2x4 wraps: %d %d", p.pkg, p.l3);
}

Test(sched, segments_tile_evenly)
{
	static const size_t ms[] = {0, 1, 2, 3, 7, 64, 1000, 4097, 65536, 1000003};
	size_t lo, len, next, k;
	int n;

	for (k = 0; k < sizeof(ms) / sizeof(ms[0]); k++)
		for (n = 1; n <= MAXP; n++) {
			size_t least = ms[k] / (size_t)n;

			next = 0;
			for (int s = 0; s < n; s++) {
				shmcoll__segment(ms[k], n, s, &lo, &len);
				cr_assert_eq(lo, next, "m=%zu n=%d segment %d", ms[k], n, s);
				cr_assert(len == least || len == least + 1,
				          "m=%zu n=%d segment %d: %zu", ms[k], n, s, len);
				next = lo + len;
			}
			cr_assert_eq(next, ms[k], "m=%zu n=%d", ms[k], n);
		}
}

Test(sched, slices_tile_every_chunk)
{
	static const size_t counts[] = {1, 2, 5, 63, 64, 65, 1000, 4099};
	size_t off, len, next, c, P, cn, i, q;

	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (P = 1; P <= 64; P++)
			for (cn = P; cn <= 4 * P; cn += P) {
				size_t nchunks = shmcoll__nchunks(counts[c], cn);

				next = 0;
				for (i = 0; i < nchunks; i++)
					for (q = 0; q < P; q++) {
						shmcoll__slice(counts[c], cn, P, i, q, &off, &len);
						cr_assert_eq(
						    off, next,
						    "count=%zu P=%zu cn=%zu chunk %zu slice %zu",
						    counts[c], P, cn, i, q);
						cr_assert(len <= (cn + P - 1) / P);
						next = off + len;
					}
				cr_assert_eq(next, counts[c], "count=%zu P=%zu cn=%zu", counts[c],
				             P, cn);
			}
}

/* A value of the simulations: how many members were folded in, and a hash that depends on
 * the order of the folds, so two members agree only if they folded alike. */
struct val {
	uint32_t count;
	uint64_t h;
};

static struct val fold(struct val a, struct val b)
{
	struct val r = {a.count + b.count,
	                (a.h * 0x9e3779b97f4a7c15ull) ^ (b.h + 0x632be59bd9b4e019ull)};

	r.h ^= r.h >> 29;
	return r;
}

/* Recursive doubling as lib/hier/lead.c runs it, every member at once: every member ends
 * with all n values folded, and the same bits everywhere. */
Test(sched, recursive_doubling_for_every_size)
{
	static struct val cur[MAXP], in[MAXP];
	static struct shmcoll_rd rd[MAXP];
	int n, me, r, rounds;

	for (n = 1; n <= MAXP; n++) {
		for (me = 0; me < n; me++) {
			shmcoll__rd_plan(me, n, &rd[me]);
			cur[me] = (struct val){1, (uint64_t)me * 0x2545f4914f6cdd1dull + 1};
		}
		rounds = rd[0].rounds;
		cr_assert_eq(1 << rounds, rd[0].p2, "n=%d", n);
		cr_assert(rd[0].p2 <= n && 2 * rd[0].p2 > n, "n=%d: p2 %d", n, rd[0].p2);
		for (me = 0; me < n; me++) {
			cr_assert_eq(rd[me].p2, rd[0].p2);
			cr_assert_eq(rd[me].is_extra, me >= rd[0].p2, "n=%d member %d", n, me);
			if (rd[me].is_extra)
				cr_assert_eq(rd[rd[me].extra].extra, me, "n=%d: extra %d's partner",
				             n, me);
			else if (rd[me].extra >= 0)
				cr_assert(rd[rd[me].extra].is_extra &&
				          rd[rd[me].extra].extra == me);
		}
		/* The extras fold into their partners: the partner's value first. */
		for (me = 0; me < rd[0].p2; me++)
			if (rd[me].extra >= 0)
				cur[me] = fold(cur[me], cur[rd[me].extra]);
		for (r = 0; r < rounds; r++) {
			for (me = 0; me < rd[0].p2; me++) {
				int peer = shmcoll__rd_peer(me, r);

				cr_assert(peer < rd[0].p2 && shmcoll__rd_peer(peer, r) == me);
				in[me] = cur[peer];
			}
			for (me = 0; me < rd[0].p2; me++) {
				int peer = shmcoll__rd_peer(me, r);

				cur[me] = me < peer ? fold(cur[me], in[me]) : fold(in[me], cur[me]);
			}
		}
		for (me = rd[0].p2; me < n; me++)
			cur[me] = cur[rd[me].extra];
		for (me = 0; me < n; me++) {
			cr_assert_eq(cur[me].count, (uint32_t)n, "n=%d: member %d folded %u", n, me,
			             cur[me].count);
			cr_assert_eq(cur[me].h, cur[0].h, "n=%d: member %d folded differently", n,
			             me);
		}
	}
}

/* The ring of n members, simulated whole: every step, what a member receives is what its
 * neighbour sends; after the reduce-scatter member me holds block me folded over all; after
 * the allgather every member holds every block. */
static void ring_whole(int n)
{
	static uint32_t have[64][64]; /* reduce-scatter: how many members a block holds */
	static int got[64][64];       /* allgather: whether a member has a block */
	struct shmcoll_ring_step st, nb;
	int me, s, b;

	for (me = 0; me < n; me++)
		for (b = 0; b < n; b++) {
			have[me][b] = 1;
			got[me][b] = b == me;
		}
	for (s = 0; s < n - 1; s++) {
		uint32_t sent[64];

		for (me = 0; me < n; me++) {
			shmcoll__ring_rs(me, n, s, &st);
			sent[me] = have[me][st.send];
		}
		for (me = 0; me < n; me++) {
			shmcoll__ring_rs(me, n, s, &st);
			shmcoll__ring_rs(st.from, n, s, &nb);
			cr_assert_eq(nb.to, me);
			cr_assert_eq(nb.send, st.recv,
			             "rs n=%d step %d: %d sends block %d, %d waits for %d", n, s,
			             st.from, nb.send, me, st.recv);
			have[me][st.recv] += sent[st.from];
		}
	}
	for (me = 0; me < n; me++)
		cr_assert_eq(have[me][me], (uint32_t)n, "rs n=%d: member %d holds %u", n, me,
		             have[me][me]);
	for (s = 0; s < n - 1; s++) {
		for (me = 0; me < n; me++) {
			shmcoll__ring_ag(me, n, s, &st);
			shmcoll__ring_ag(st.from, n, s, &nb);
			cr_assert_eq(nb.send, st.recv);
			cr_assert(got[st.from][nb.send],
			          "ag n=%d step %d: %d sends block %d it lacks", n, s, st.from,
			          nb.send);
		}
		/* Every member sends before it receives within a step. */
		for (me = 0; me < n; me++) {
			shmcoll__ring_ag(me, n, s, &st);
			got[me][st.recv] = 1;
		}
	}
	for (me = 0; me < n; me++)
		for (b = 0; b < n; b++)
			cr_assert(got[me][b], "ag n=%d: member %d lacks block %d", n, me, b);
}

Test(sched, ring_for_every_size)
{
	struct shmcoll_ring_step st, nb;
	int n, me, j;

	for (n = 1; n <= 64; n++)
		ring_whole(n);
	/* Larger rings: neighbours agree at the first, middle and last steps. */
	for (n = 65; n <= MAXP; n++)
		for (me = 0; me < n; me++) {
			const int steps[3] = {0, (n - 2) / 2, n - 2};

			for (j = 0; j < 3; j++) {
				shmcoll__ring_rs(me, n, steps[j], &st);
				shmcoll__ring_rs(st.from, n, steps[j], &nb);
				cr_assert(nb.to == me && nb.send == st.recv, "rs n=%d member %d", n,
				          me);
				shmcoll__ring_ag(me, n, steps[j], &st);
				shmcoll__ring_ag(st.from, n, steps[j], &nb);
				cr_assert(nb.to == me && nb.send == st.recv, "ag n=%d member %d", n,
				          me);
			}
			shmcoll__ring_rs(me, n, n - 2, &st);
			cr_assert_eq(st.recv, me, "rs n=%d: the last fold is block me", n);
		}
}

/* After the dissemination rounds every member has heard from every other, directly or
 * through members that had. */
Test(sched, dissemination_for_every_size)
{
	static uint64_t heard[MAXP][MAXP / 64], next[MAXP][MAXP / 64];
	int n, me, r, w, to, from, words, all;

	for (n = 1; n <= MAXP; n++) {
		int rounds = shmcoll__dissem_rounds(n), full = n <= 256 || n % 97 == 0 || n == MAXP;

		cr_assert((1 << rounds) >= n && (rounds == 0 || (1 << (rounds - 1)) < n));
		for (me = 0; me < n; me++)
			for (r = 0; r < rounds; r++) {
				int to2, from2;

				shmcoll__dissem_peers(me, n, r, &to, &from);
				shmcoll__dissem_peers(to, n, r, &to2, &from2);
				cr_assert_eq(from2, me, "n=%d round %d member %d", n, r, me);
			}
		if (!full)
			continue;
		words = (n + 63) / 64;
		for (me = 0; me < n; me++) {
			memset(heard[me], 0, sizeof(heard[me]));
			heard[me][me / 64] |= 1ull << (me % 64);
		}
		for (r = 0; r < rounds; r++) {
			for (me = 0; me < n; me++) {
				shmcoll__dissem_peers(me, n, r, &to, &from);
				for (w = 0; w < words; w++)
					next[me][w] = heard[me][w] | heard[from][w];
			}
			memcpy(heard, next, (size_t)n * sizeof(heard[0]));
		}
		for (me = 0; me < n; me++) {
			all = 0;
			for (w = 0; w < words; w++)
				all += __builtin_popcountll(heard[me][w]);
			cr_assert_eq(all, n, "n=%d: member %d heard from %d", n, me, all);
		}
	}
}
