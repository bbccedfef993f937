/* tree.c - the k-nomial tree (sched.h has the shape). */
#include "lib/sched/sched.h"

void shmcoll__tree(int rank, int size, int root, struct shmcoll_tree *t)
{
	const int k = SHMCOLL_TREE_RADIX;
	int v = (rank - root + size) % size;
	long m, top = 1;

	t->parent = -1;
	t->nchildren = 0;
	/* top: the weight of v's lowest non-zero digit (size, or more, at the root). */
	while (top < size && v % (top * k) == 0)
		top *= k;
	if (v)
		t->parent = (int)((v - v % (top * k) + root) % size);
	for (m = 1; m < top && m < size; m *= k) {
		int j;

		for (j = 1; j < k && v + j * m < size; j++)
			t->children[t->nchildren++] = (int)((v + j * m + root) % size);
	}
}
