/* demo.c - a guided tour of every shmcoll collective. Run it as
 *     shmcoll-run -n 4 build/examples/demo
 * (run alone it is a job of one rank). Each rank shows what it gave and what it
 * got back; every result is checked, and any failure ends the job non-zero. */
#include <shmcoll.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line of output per rank and section; the lines travel to rank 0 with
 * shmcoll_gather as fixed-size byte records, so the demo's own printing is a
 * gather too and the ranks' lines come out in rank order. */
#define LINE_LEN 160
/* Values shown per array before "..." (every value is still checked). */
#define SHOW_MAX 8
/* Above this many ranks, only the first and last few lines are printed. */
#define SHOW_RANKS 8

struct demo {
	shmcoll_comm *comm;
	int rank;
	int size;
	char line[LINE_LEN]; /* this rank's line of the current section */
	char *lines;         /* rank 0: size * LINE_LEN bytes */
	int checks;          /* results checked so far, on this rank */
};

static void die(const struct demo *d, const char *what, int rc)
{
	fprintf(stderr, "demo: rank %d: %s failed: %s (%s)\n", d->rank, what, shmcoll_strerror(rc),
	        d->comm ? shmcoll_last_error(d->comm) : "");
	exit(EXIT_FAILURE);
}

static void call(const struct demo *d, const char *what, int rc)
{
	if (rc != 0)
		die(d, what, rc);
}

static void wrong(const struct demo *d, const char *what, size_t i, const char *got,
                  const char *want)
{
	fprintf(stderr, "demo: rank %d: %s gave a wrong result: element %zu is %s, expected %s\n",
	        d->rank, what, i, got, want);
	exit(EXIT_FAILURE);
}

static void check_i32(struct demo *d, const char *what, const int32_t *got, const int32_t *want,
                      size_t n)
{
	char g[32], w[32];

	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i]) {
			snprintf(g, sizeof(g), "%" PRId32, got[i]);
			snprintf(w, sizeof(w), "%" PRId32, want[i]);
			wrong(d, what, i, g, w);
		}
	}
	d->checks++;
}

/* Appends printf-style text to d->line; a line that would overflow is cut. */
static void add(struct demo *d, const char *fmt, ...)
{
	size_t used = strlen(d->line);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->line + used, sizeof(d->line) - used, fmt, ap);
	va_end(ap);
}

static void add_i32(struct demo *d, const int32_t *v, size_t n)
{
	add(d, "[");
	for (size_t i = 0; i < n && i < SHOW_MAX; i++)
		add(d, i ? " %" PRId32 : "%" PRId32, v[i]);
	if (n > SHOW_MAX)
		add(d, " ... (%zu values)", n);
	add(d, "]");
}

/* Starts a section: rank 0 prints its title and what the collective does. */
static void section(struct demo *d, const char *title, const char *what)
{
	if (d->rank == 0)
		printf("\n== %s: %s\n", title, what);
	snprintf(d->line, sizeof(d->line), "  rank %d: ", d->rank);
}

/* Ends a section: gathers every rank's line to rank 0, which prints them. */
static void finish(struct demo *d)
{
	call(d, "gather of the output lines",
	     shmcoll_gather(d->line, d->lines, LINE_LEN, SHMCOLL_UINT8, 0, d->comm));
	if (d->rank != 0)
		return;
	for (int r = 0; r < d->size; r++) {
		/* Many ranks: the first SHOW_RANKS - 2 lines and the last 2. */
		if (d->size > SHOW_RANKS && r >= SHOW_RANKS - 2 && r < d->size - 2) {
			if (r == SHOW_RANKS - 2)
				printf("  ... (ranks %d to %d not shown)\n", r, d->size - 3);
			continue;
		}
		char *l = d->lines + (size_t)r * LINE_LEN;
		l[LINE_LEN - 1] = '\0';
		printf("%s\n", l);
	}
}

static void demo_barrier(struct demo *d)
{
	section(d, "barrier", "no rank leaves until every rank has arrived");
	call(d, "barrier", shmcoll_barrier(d->comm));
	add(d, "arrived, and left once all %d ranks were there", d->size);
	finish(d);
}

static void demo_bcast(struct demo *d)
{
	const int root = 0;
	const int32_t want[3] = {7, 11, 13};
	int32_t buf[3] = {0, 0, 0};

	section(d, "bcast", "the root's buffer is copied into every rank's buffer (root = rank 0)");
	if (d->rank == root)
		memcpy(buf, want, sizeof(buf));
	add(d, "had ");
	add_i32(d, buf, 3);
	call(d, "bcast", shmcoll_bcast(buf, 3, SHMCOLL_INT32, root, d->comm));
	add(d, " -> has ");
	add_i32(d, buf, 3);
	if (d->rank == root)
		add(d, "  (root)");
	check_i32(d, "bcast", buf, want, 3);
	finish(d);
}

static void demo_reduce(struct demo *d)
{
	const int root = d->size - 1;
	const int32_t s = d->size * (d->size + 1) / 2; /* 1 + 2 + ... + size */
	const int32_t want[3] = {s, 10 * s, 100 * s};
	int32_t mine[3] = {d->rank + 1, 10 * (d->rank + 1), 100 * (d->rank + 1)};
	int32_t sum[3] = {0, 0, 0};

	section(d, "reduce",
	        "element-wise SUM of all ranks' buffers, to the root only (root = last rank)");
	add(d, "gave ");
	add_i32(d, mine, 3);
	/* recvbuf matters on the root only; the others may pass NULL. */
	call(d, "reduce",
	     shmcoll_reduce(mine, d->rank == root ? sum : NULL, 3, SHMCOLL_INT32, SHMCOLL_SUM, root,
	                    d->comm));
	if (d->rank == root) {
		add(d, " -> root got the sum ");
		add_i32(d, sum, 3);
		check_i32(d, "reduce", sum, want, 3);
	}
	finish(d);
}

static void demo_allreduce(struct demo *d)
{
	const int32_t p = d->size;
	const int32_t want[3] = {p * (p - 1) / 2, (p - 1) * p * (2 * p - 1) / 6, p};
	int32_t mine[3] = {d->rank, d->rank * d->rank, 1};
	int32_t sum[3];

	section(d, "allreduce",
	        "like reduce, but every rank gets the sum (the last element counts ranks)");
	add(d, "gave ");
	add_i32(d, mine, 3);
	call(d, "allreduce", shmcoll_allreduce(mine, sum, 3, SHMCOLL_INT32, SHMCOLL_SUM, d->comm));
	add(d, " -> got ");
	add_i32(d, sum, 3);
	check_i32(d, "allreduce", sum, want, 3);
	finish(d);
}

static void demo_allgather(struct demo *d)
{
	const size_t n = 2, total = n * (size_t)d->size;
	int32_t mine[2] = {10 * d->rank, 10 * d->rank + 1};
	int32_t *all = malloc(total * sizeof(*all));
	int32_t *want = malloc(total * sizeof(*want));

	if (!all || !want)
		die(d, "malloc", -ENOMEM);
	for (size_t i = 0; i < total; i++)
		want[i] = (int32_t)(10 * (i / n) + i % n);
	section(d, "allgather",
	        "every rank gets all ranks' buffers, one after another in rank order");
	add(d, "gave ");
	add_i32(d, mine, n);
	call(d, "allgather", shmcoll_allgather(mine, all, n, SHMCOLL_INT32, d->comm));
	add(d, " -> got ");
	add_i32(d, all, total);
	check_i32(d, "allgather", all, want, total);
	free(want);
	free(all);
	finish(d);
}

static void demo_reduce_scatter(struct demo *d)
{
	const size_t n = 2, total = n * (size_t)d->size;
	const int32_t s = d->size * (d->size + 1) / 2;
	int32_t *mine = malloc(total * sizeof(*mine));
	int32_t got[2], want[2];

	if (!mine)
		die(d, "malloc", -ENOMEM);
	/* Element j of rank r is (r+1)(j+1), so the sum at j is (j+1)s. */
	for (size_t j = 0; j < total; j++)
		mine[j] = (int32_t)((d->rank + 1) * (j + 1));
	for (size_t j = 0; j < n; j++)
		want[j] = (int32_t)(((size_t)d->rank * n + j + 1) * (size_t)s);
	section(d, "reduce_scatter",
	        "element-wise SUM of all buffers; rank r keeps the r-th slice of it");
	add(d, "gave ");
	add_i32(d, mine, total);
	call(d, "reduce_scatter",
	     shmcoll_reduce_scatter(mine, got, n, SHMCOLL_INT32, SHMCOLL_SUM, d->comm));
	add(d, " -> got ");
	add_i32(d, got, n);
	check_i32(d, "reduce_scatter", got, want, n);
	free(mine);
	finish(d);
}

static void demo_gather(struct demo *d)
{
	const int root = 0;
	int32_t mine = 100 + d->rank;
	int32_t *all = NULL, *want = NULL;

	section(d, "gather",
	        "the root collects every rank's buffer, in rank order (root = rank 0)");
	if (d->rank == root) {
		all = malloc((size_t)d->size * sizeof(*all));
		want = malloc((size_t)d->size * sizeof(*want));
		if (!all || !want)
			die(d, "malloc", -ENOMEM);
		for (int r = 0; r < d->size; r++)
			want[r] = 100 + r;
	}
	add(d, "gave ");
	add_i32(d, &mine, 1);
	/* recvbuf matters on the root only. */
	call(d, "gather", shmcoll_gather(&mine, all, 1, SHMCOLL_INT32, root, d->comm));
	if (d->rank == root) {
		add(d, " -> root got ");
		add_i32(d, all, (size_t)d->size);
		check_i32(d, "gather", all, want, (size_t)d->size);
	}
	free(want);
	free(all);
	finish(d);
}

static void demo_scatter(struct demo *d)
{
	const int root = d->size - 1;
	const size_t n = 2, total = n * (size_t)d->size;
	int32_t *all = NULL;
	int32_t got[2] = {-1, -1};
	const int32_t want[2] = {10 * d->rank, 10 * d->rank + 1};

	section(d, "scatter",
	        "the root hands rank r the r-th slice of its buffer (root = last rank)");
	if (d->rank == root) {
		all = malloc(total * sizeof(*all));
		if (!all)
			die(d, "malloc", -ENOMEM);
		for (size_t i = 0; i < total; i++)
			all[i] = (int32_t)(10 * (i / n) + i % n);
		add(d, "root gave ");
		add_i32(d, all, total);
		add(d, ", ");
	}
	/* sendbuf matters on the root only. */
	call(d, "scatter", shmcoll_scatter(all, got, n, SHMCOLL_INT32, root, d->comm));
	add(d, "got ");
	add_i32(d, got, n);
	check_i32(d, "scatter", got, want, n);
	free(all);
	finish(d);
}

static void demo_alltoall(struct demo *d)
{
	const size_t p = (size_t)d->size;
	int32_t *out = malloc(p * sizeof(*out));
	int32_t *in = malloc(p * sizeof(*in));
	int32_t *want = malloc(p * sizeof(*want));

	if (!out || !in || !want)
		die(d, "malloc", -ENOMEM);
	/* Element q of rank r goes to rank q; its value is 10r + q. */
	for (size_t q = 0; q < p; q++) {
		out[q] = (int32_t)(10 * (size_t)d->rank + q);
		want[q] = (int32_t)(10 * q + (size_t)d->rank);
	}
	section(d, "alltoall",
	        "element q of rank r goes to rank q (value 10r+q here): a transpose");
	add(d, "sent ");
	add_i32(d, out, p);
	call(d, "alltoall", shmcoll_alltoall(out, in, 1, SHMCOLL_INT32, d->comm));
	add(d, " -> got ");
	add_i32(d, in, p);
	check_i32(d, "alltoall", in, want, p);
	free(want);
	free(in);
	free(out);
	finish(d);
}

/* Allreduce on memory from shmcoll_malloc: the send buffer already lives in
 * the shared arena, so peers read it where it is, without a staging copy.
 * (In place, sendbuf == recvbuf, the library stages anyway: a rank overwrites
 * its buffer while peers would still be reading it.) */
static void demo_symmetric(struct demo *d)
{
	const size_t n = 1 << 16;
	const int64_t s = (int64_t)d->size * (d->size + 1) / 2;
	int64_t *in = shmcoll_malloc(d->comm, n * sizeof(*in));
	int64_t *out = shmcoll_malloc(d->comm, n * sizeof(*out));
	char g[32], w[32];

	section(d, "allreduce on symmetric memory",
	        "shmcoll_malloc buffers, which peers read in place, with no staging copy");
	if (!in || !out) {
		fprintf(stderr, "demo: rank %d: shmcoll_malloc of %zu bytes failed: %s\n", d->rank,
		        n * sizeof(*in), shmcoll_last_error(d->comm));
		exit(EXIT_FAILURE);
	}
	for (size_t i = 0; i < n; i++)
		in[i] = (int64_t)i * (d->rank + 1);
	add(d, "gave %zu int64 [0 %d %d ...]", n, d->rank + 1, 2 * (d->rank + 1));
	call(d, "allreduce on symmetric memory",
	     shmcoll_allreduce(in, out, n, SHMCOLL_INT64, SHMCOLL_SUM, d->comm));
	add(d, " -> got [%" PRId64 " %" PRId64 " %" PRId64 " ... %" PRId64 "]", out[0], out[1],
	    out[2], out[n - 1]);
	for (size_t i = 0; i < n; i++) {
		if (out[i] != (int64_t)i * s) {
			snprintf(g, sizeof(g), "%" PRId64, out[i]);
			snprintf(w, sizeof(w), "%" PRId64, (int64_t)i * s);
			wrong(d, "allreduce on symmetric memory", i, g, w);
		}
	}
	d->checks++;
	call(d, "shmcoll_free", shmcoll_free(d->comm, out));
	call(d, "shmcoll_free", shmcoll_free(d->comm, in));
	finish(d);
}

static void demo_avg(struct demo *d)
{
	const float p = (float)d->size;
	const float want[3] = {p / 2.0f, 5.0f * (p - 1.0f), 1.0f};
	float mine[3] = {(float)d->rank + 0.5f, 10.0f * (float)d->rank, 1.0f};
	float avg[3];
	char g[32], w[32];

	section(d, "allreduce AVG on float32", "the element-wise mean over the ranks");
	add(d, "gave [%.2f %.2f %.2f]", mine[0], mine[1], mine[2]);
	call(d, "allreduce AVG",
	     shmcoll_allreduce(mine, avg, 3, SHMCOLL_FLOAT32, SHMCOLL_AVG, d->comm));
	add(d, " -> got [%.2f %.2f %.2f]", avg[0], avg[1], avg[2]);
	for (size_t i = 0; i < 3; i++) {
		float err = avg[i] > want[i] ? avg[i] - want[i] : want[i] - avg[i];
		float tol = want[i] > 1.0f ? 1e-5f * want[i] : 1e-5f;

		if (!(err <= tol)) {
			snprintf(g, sizeof(g), "%.9g", avg[i]);
			snprintf(w, sizeof(w), "%.9g", want[i]);
			wrong(d, "allreduce AVG", i, g, w);
		}
	}
	d->checks++;
	finish(d);
}

int main(void)
{
	struct demo d = {0};
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = shmcoll_init(&d.comm);
	if (rc != 0) {
		fprintf(stderr, "demo: shmcoll_init failed: %s (%s)\n", shmcoll_strerror(rc),
		        shmcoll_last_error(NULL));
		return EXIT_FAILURE;
	}
	d.rank = shmcoll_comm_rank(d.comm);
	d.size = shmcoll_comm_size(d.comm);
	if (d.rank == 0) {
		d.lines = calloc((size_t)d.size, LINE_LEN);
		if (!d.lines)
			die(&d, "malloc", -ENOMEM);
		/* shmcoll-run --nnodes sets SHMCOLL_NNODES for a job over nodes. */
		const char *nn = getenv("SHMCOLL_NNODES");
		int nodes = nn ? atoi(nn) : 1;

		if (nodes > 1)
			printf("shmcoll demo: %d ranks on %d nodes, shared memory inside each node "
			       "and one leader per node talking to the others over TCP.\n",
			       d.size, nodes);
		else
			printf("shmcoll demo: %d rank%s on this node, meeting in one shared-memory "
			       "arena.\n",
			       d.size, d.size == 1 ? "" : "s");
		printf(
		    "Each rank reports what it gave and what it got; every result is checked.\n"
		    "The lines reach rank 0 through shmcoll_gather, so they come in rank order.\n");
	}

	demo_barrier(&d);
	demo_bcast(&d);
	demo_reduce(&d);
	demo_allreduce(&d);
	demo_allgather(&d);
	demo_reduce_scatter(&d);
	demo_gather(&d);
	demo_scatter(&d);
	demo_alltoall(&d);
	demo_symmetric(&d);
	demo_avg(&d);

	/* Every rank checked its own results; sum the counts as a last allreduce. */
	int32_t checks = d.checks, total = 0;
	call(&d, "allreduce of the check counts",
	     shmcoll_allreduce(&checks, &total, 1, SHMCOLL_INT32, SHMCOLL_SUM, d.comm));
	if (d.rank == 0)
		printf("\nAll %" PRId32 " checks passed on %d rank%s.\n", total, d.size,
		       d.size == 1 ? "" : "s");
	free(d.lines);
	call(&d, "shmcoll_comm_destroy", shmcoll_comm_destroy(d.comm));
	return EXIT_SUCCESS;
}
