/* moe_alltoallv.c - mixture-of-experts routing: every rank holds a batch of tokens and is
 * also one expert; a router sends each token to one expert, unevenly (some experts are
 * popular, one gets nothing), the experts transform what they got, and the results come
 * back to where their tokens started. Run it as
 *     shmcoll-run -n 4 build/examples/moe_alltoallv [TOKENS] [HIDDEN]
 *
 *   1. Route: each token picks an expert; count the tokens per expert.
 *   2. Exchange the counts: shmcoll_alltoall of one count per peer tells every expert how
 *      many tokens each rank will send it.
 *   3. Dispatch: sort the tokens by expert and send them with shmcoll_alltoallv (counts in
 *      elements: tokens x hidden).
 *   4. Each expert applies its function (here y = (e + 1) * x + e, exact in float32 for
 *      these values).
 *   5. Combine: shmcoll_alltoallv with the counts swapped brings every token back, and the
 *      rank puts it back at its place in the batch.
 * Every output element is checked against the expert function applied to the rank's own
 * token; any difference ends the job with status 1. */
#include <shmcoll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static shmcoll_comm *comm;

static void check(int rc, const char *what)
{
	if (rc == 0)
		return;
	fprintf(stderr, "moe_alltoallv: rank %d: %s: %s (%s)\n", rank, what, shmcoll_strerror(rc),
	        shmcoll_last_error(comm));
	shmcoll_comm_abort(comm);
	exit(1);
}

static void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	if (!p) {
		fprintf(stderr, "moe_alltoallv: rank %d: out of memory\n", rank);
		shmcoll_comm_abort(comm);
		exit(1);
	}
	return p;
}

/* A skewed router: experts 0 and 1 are popular, the rest share what is left, and from four
 * ranks on the last expert gets no token at all. */
static int route(int r, size_t t)
{
	uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull + t * 0xbf58476d1ce4e5b9ull;

	h ^= h >> 31;
	h %= 100;
	if (size <= 2)
		return (int)(h % (uint64_t)size);
	if (h < 40)
		return 0;
	if (h < 60)
		return 1;
	return 2 + (int)(h % (uint64_t)(size - 2 > 1 ? size - 3 : 1));
}

static float token_value(int r, size_t t, size_t j)
{
	return (float)((r * 131 + (int)t * 7 + (int)j) % 256) - 128.0f;
}

static float expert(int e, float x)
{
	return (float)(e + 1) * x + (float)e;
}

int main(int argc, char **argv)
{
	size_t tokens = argc > 1 ? strtoull(argv[1], NULL, 0) : 4096;
	size_t hidden = argc > 2 ? strtoull(argv[2], NULL, 0) : 64;
	size_t *scount, *rcount, *sdispl, *rdispl, *fill, t, j, p, total_in = 0, bad = 0;
	uint64_t *ntok_out, *ntok_in, *per_expert, all_bad, got_tokens;
	float *x, *sendbuf, *recvbuf, *out;
	int *where;

	check(shmcoll_init(&comm), "shmcoll_init");
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	ntok_out = xmalloc((size_t)size * sizeof(*ntok_out));
	ntok_in = xmalloc((size_t)size * sizeof(*ntok_in));
	scount = xmalloc((size_t)size * sizeof(*scount));
	rcount = xmalloc((size_t)size * sizeof(*rcount));
	sdispl = xmalloc((size_t)size * sizeof(*sdispl));
	rdispl = xmalloc((size_t)size * sizeof(*rdispl));
	fill = xmalloc((size_t)size * sizeof(*fill));
	x = xmalloc(tokens * hidden * sizeof(*x));
	sendbuf = xmalloc(tokens * hidden * sizeof(*sendbuf));
	out = xmalloc(tokens * hidden * sizeof(*out));
	where = xmalloc(tokens * sizeof(*where));

	/* 1. Route. */
	memset(ntok_out, 0, (size_t)size * sizeof(*ntok_out));
	for (t = 0; t < tokens; t++) {
		where[t] = route(rank, t);
		ntok_out[where[t]]++;
		for (j = 0; j < hidden; j++)
			x[t * hidden + j] = token_value(rank, t, j);
	}
	/* 2. Exchange the counts (one per peer). */
	check(shmcoll_alltoall(ntok_out, ntok_in, 1, SHMCOLL_UINT64, comm), "alltoall of counts");
	for (p = 0; p < (size_t)size; p++) {
		scount[p] = (size_t)ntok_out[p] * hidden;
		rcount[p] = (size_t)ntok_in[p] * hidden;
		sdispl[p] = p ? sdispl[p - 1] + scount[p - 1] : 0;
		rdispl[p] = p ? rdispl[p - 1] + rcount[p - 1] : 0;
		total_in += rcount[p];
	}
	recvbuf = xmalloc(total_in * sizeof(*recvbuf));
	/* 3. Dispatch: tokens sorted by expert. */
	memcpy(fill, sdispl, (size_t)size * sizeof(*fill));
	for (t = 0; t < tokens; t++) {
		memcpy(sendbuf + fill[where[t]], x + t * hidden, hidden * sizeof(*x));
		fill[where[t]] += hidden;
	}
	check(shmcoll_alltoallv(sendbuf, scount, sdispl, recvbuf, rcount, rdispl, SHMCOLL_FLOAT32,
	                        comm),
	      "dispatch alltoallv");
	/* 4. The expert (this rank) transforms every token it got. */
	for (j = 0; j < total_in; j++)
		recvbuf[j] = expert(rank, recvbuf[j]);
	/* 5. Combine: the same blocks travel back. */
	check(shmcoll_alltoallv(recvbuf, rcount, rdispl, sendbuf, scount, sdispl, SHMCOLL_FLOAT32,
	                        comm),
	      "combine alltoallv");
	memcpy(fill, sdispl, (size_t)size * sizeof(*fill));
	for (t = 0; t < tokens; t++) {
		memcpy(out + t * hidden, sendbuf + fill[where[t]], hidden * sizeof(*out));
		fill[where[t]] += hidden;
	}
	for (t = 0; t < tokens; t++)
		for (j = 0; j < hidden; j++)
			if (out[t * hidden + j] != expert(where[t], x[t * hidden + j]) && !bad++)
				fprintf(stderr,
				        "moe_alltoallv: rank %d: token %zu element %zu is %g, want "
				        "%g\n",
				        rank, t, j, (double)out[t * hidden + j],
				        (double)expert(where[t], x[t * hidden + j]));

	got_tokens = total_in / (hidden ? hidden : 1);
	all_bad = bad;
	check(shmcoll_allreduce(&all_bad, &all_bad, 1, SHMCOLL_UINT64, SHMCOLL_SUM, comm),
	      "verdict");
	per_expert = xmalloc((size_t)size * sizeof(*per_expert));
	check(shmcoll_gather(&got_tokens, per_expert, 1, SHMCOLL_UINT64, 0, comm), "token counts");
	if (rank == 0) {
		printf("moe_alltoallv: %d ranks x %zu tokens of %zu floats, tokens per expert:",
		       size, tokens, hidden);
		for (p = 0; p < (size_t)size; p++)
			printf(" %llu", (unsigned long long)per_expert[p]);
		printf("; dispatched and combined back: %s\n",
		       all_bad ? "MISMATCH" : "every token correct");
	}
	free(per_expert);
	free(ntok_out);
	free(ntok_in);
	free(scount);
	free(rcount);
	free(sdispl);
	free(rdispl);
	free(fill);
	free(x);
	free(sendbuf);
	free(recvbuf);
	free(out);
	free(where);
	check(shmcoll_comm_destroy(comm), "shmcoll_comm_destroy");
	return all_bad ? 1 : 0;
}
