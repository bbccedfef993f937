/* tree.c - the k-nomial tree the tree protocols run on.
 *
 * Ranks are renumbered relative to the root, v = (rank - root) mod P. The
 * parent of v > 0 clears v's lowest non-zero base-k digit; v's children add
 * one non-zero digit below that one: v + j * k^l for j = 1..k-1 and every
 * k^l under v's lowest non-zero digit, while below P. With k = 2 this is the
 * binomial tree; its depth is ceil(log_k P). */
#include "lib/internal.h"

void shmcoll__tree(const shmcoll_comm *c, int root, struct shmcoll_tree *t)
{
	int P = c->size, v = (c->rank - root + P) % P, k = SHMCOLL_TREE_RADIX;
	long m, top = 1;

	t->parent = -1;
	t->nchildren = 0;
	while (top < P && v % (top * k) == 0)
		top *= k;
	if (v)
		t->parent = (int)((v - v % (top * k) + root) % P);
	for (m = 1; m < top && m < P; m *= k) {
		int j;

		for (j = 1; j < k && v + j * m < P; j++)
			t->children[t->nchildren++] = (int)((v + j * m + root) % P);
	}
}
