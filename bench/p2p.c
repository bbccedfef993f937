/* p2p.c - the point-to-point mode of shmcoll-bench: osu_latency, osu_bw and osu_bibw between
 * ranks 0 and 1, timed exactly the way bench/mpi/mpi-bench.c times MPI's (sizes, iteration
 * counts, warm-up, validation, reported figures and CSV: osu.c), so the two CSVs join row by
 * row. Ranks beyond the first two wait in a barrier at the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/osu.h"

struct p2p {
	shmcoll_comm *comm;
	int rank, size, peer;
	const struct bench_osu_opts *o;
	uint8_t *sbuf, *rbuf;
	uint8_t ack[64], sync_s[64], sync_r[64];
	shmcoll_request *req[2 * OSU_WINDOW];
	shmcoll_status st[2 * OSU_WINDOW];
};

void bench_p2p_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " p2p [OPTIONS]\n"
	    "      Point-to-point between ranks 0 and 1 in OSU's conventions (the other ranks\n"
	    "      wait); run it under the launcher: shmcoll-run -n 2 " PROG " p2p\n"
	    "        latency: ping-pong with shmcoll_send/shmcoll_recv; half the round trip\n"
	    "                 (osu_latency)\n"
	    "        bw:      rank 0 posts %d shmcoll_isend, rank 1 %d shmcoll_irecv, both\n"
	    "                 shmcoll_waitall, rank 1 acks with a %d-byte message; bandwidth =\n"
	    "                 window x bytes / time (osu_bw)\n"
	    "        bibw:    both ranks post %d shmcoll_irecv and %d shmcoll_isend, then\n"
	    "                 shmcoll_waitall (osu_bibw); bandwidth counts both directions\n"
	    "      Each size is checked first (one message, or one window, of a known pattern\n"
	    "      compared byte by byte by its receiver), then warmed up and timed on rank 0.\n"
	    "      Iterations as OSU's: latency 10000 (1000 above 8 KiB), bw and bibw 100\n"
	    "      windows (20), capped at 8 GiB moved per size.\n",
	    OSU_WINDOW, OSU_WINDOW, OSU_ACK_BYTES, OSU_WINDOW, OSU_WINDOW);
	bench_osu_usage(f, 0, "      ", "shmcoll",
	                "buffers from shmcoll_malloc; the arena is sized to fit");
	fprintf(f,
	        "      Prints impl,test,ranks,bytes,lat_us,bw_GBps (rank 0): lat_us is half the\n"
	        "      round trip (latency) or the time per message slot of the window (bw,\n"
	        "      bibw); bw_GBps is 1e9 bytes/s (bibw: both directions).\n");
}

__attribute__((cold)) static _Noreturn void call_failed(const struct p2p *p, const char *what,
                                                        size_t bytes, int rc)
{
	fprintf(stderr, PROG ": rank %d: %s (bytes %zu) failed: %d (%s): %s\n", p->rank, what,
	        bytes, rc, shmcoll_strerror(rc), shmcoll_last_error(p->comm));
	shmcoll_comm_abort(p->comm);
	exit(EXIT_FAIL);
}

/* A wrong message: said here, by its receiver; the pair then stops together (pair_sync).
 * Returns 1. */
__attribute__((cold)) static int wrong(const struct p2p *p, int test, size_t bytes,
                                       const char *what)
{
	fprintf(stderr, "VALIDATION FAILED rank %d p2p %s bytes %zu: %s\n", p->rank,
	        bench_osu_tests[test], bytes, what);
	return 1;
}

/* The receiver's checks: the status of a receive, and the data that arrived in rbuf. */
static int check_status(const struct p2p *p, int test, size_t bytes, const shmcoll_status *st)
{
	char msg[160];

	if (st->source != p->peer || st->tag != OSU_TAG_DATA || st->bytes != bytes ||
	    st->total != bytes || st->error != 0) {
		snprintf(msg, sizeof(msg),
		         "status says source %d tag %d, %zu of %zu bytes, error %d", st->source,
		         st->tag, st->bytes, st->total, st->error);
		return wrong(p, test, bytes, msg);
	}
	return 0;
}

static int check_data(const struct p2p *p, int test, size_t bytes)
{
	unsigned got, want;
	size_t idx;
	char msg[160];

	if (bytes && bench_osu_fault("p2p"))
		p->rbuf[bytes / 2] ^= 0x40;
	if (bench_osu_check(p->rbuf, bytes, p->peer, &idx, &got, &want)) {
		snprintf(msg, sizeof(msg), "byte %zu is 0x%02x, want 0x%02x", idx, got, want);
		return wrong(p, test, bytes, msg);
	}
	return 0;
}

/* Ranks 0 and 1 meet (the others are not involved: OSU's barrier before each size), each
 * bringing a flag; returns whether either raised it. */
static int pair_sync(struct p2p *p, size_t bytes, int flag)
{
	int rc;

	p->sync_s[0] = (uint8_t)flag;
	rc = shmcoll_sendrecv(p->sync_s, 1, SHMCOLL_UINT8, p->peer, OSU_TAG_SYNC, p->sync_r, 1,
	                      SHMCOLL_UINT8, p->peer, OSU_TAG_SYNC, p->comm, NULL);
	if (rc != 0)
		call_failed(p, "shmcoll_sendrecv (the pair's sync)", bytes, rc);
	return flag || p->sync_r[0];
}

/* One ping-pong: rank 0 sends and receives, rank 1 receives and sends. */
static inline void ping_pong(struct p2p *p, size_t bytes, shmcoll_status *st)
{
	int rc;

	if (p->rank == 0) {
		rc = shmcoll_send(p->sbuf, bytes, SHMCOLL_UINT8, 1, OSU_TAG_DATA, p->comm);
		if (rc != 0)
			call_failed(p, "shmcoll_send", bytes, rc);
		rc = shmcoll_recv(p->rbuf, bytes, SHMCOLL_UINT8, 1, OSU_TAG_DATA, p->comm, st);
		if (rc != 0)
			call_failed(p, "shmcoll_recv", bytes, rc);
	} else {
		rc = shmcoll_recv(p->rbuf, bytes, SHMCOLL_UINT8, 0, OSU_TAG_DATA, p->comm, st);
		if (rc != 0)
			call_failed(p, "shmcoll_recv", bytes, rc);
		rc = shmcoll_send(p->sbuf, bytes, SHMCOLL_UINT8, 0, OSU_TAG_DATA, p->comm);
		if (rc != 0)
			call_failed(p, "shmcoll_send", bytes, rc);
	}
}

/* One window of osu_bw: rank 0 sends OSU_WINDOW messages, rank 1 receives them (all into rbuf,
 * as OSU does) and acks. */
static inline void bw_window(struct p2p *p, size_t bytes)
{
	int j, rc;

	for (j = 0; j < OSU_WINDOW; j++) {
		if (p->rank == 0)
			rc = shmcoll_isend(p->sbuf, bytes, SHMCOLL_UINT8, 1, OSU_TAG_DATA, p->comm,
			                   &p->req[j]);
		else
			rc = shmcoll_irecv(p->rbuf, bytes, SHMCOLL_UINT8, 0, OSU_TAG_DATA, p->comm,
			                   &p->req[j]);
		if (rc != 0)
			call_failed(p, p->rank == 0 ? "shmcoll_isend" : "shmcoll_irecv", bytes, rc);
	}
	rc = shmcoll_waitall(OSU_WINDOW, p->req, p->st);
	if (rc != 0)
		call_failed(p, "shmcoll_waitall", bytes, rc);
	if (p->rank == 0)
		rc = shmcoll_recv(p->ack, OSU_ACK_BYTES, SHMCOLL_UINT8, 1, OSU_TAG_ACK, p->comm,
		                  NULL);
	else
		rc = shmcoll_send(p->ack, OSU_ACK_BYTES, SHMCOLL_UINT8, 0, OSU_TAG_ACK, p->comm);
	if (rc != 0)
		call_failed(p, p->rank == 0 ? "shmcoll_recv of the ack" : "shmcoll_send of the ack",
		            bytes, rc);
}

/* One window of osu_bibw: each rank posts OSU_WINDOW receives, then OSU_WINDOW sends. */
static inline void bibw_window(struct p2p *p, size_t bytes)
{
	int j, rc;

	for (j = 0; j < OSU_WINDOW; j++) {
		rc = shmcoll_irecv(p->rbuf, bytes, SHMCOLL_UINT8, p->peer, OSU_TAG_DATA, p->comm,
		                   &p->req[j]);
		if (rc != 0)
			call_failed(p, "shmcoll_irecv", bytes, rc);
	}
	for (j = 0; j < OSU_WINDOW; j++) {
		rc = shmcoll_isend(p->sbuf, bytes, SHMCOLL_UINT8, p->peer, OSU_TAG_DATA, p->comm,
		                   &p->req[OSU_WINDOW + j]);
		if (rc != 0)
			call_failed(p, "shmcoll_isend", bytes, rc);
	}
	rc = shmcoll_waitall(2 * OSU_WINDOW, p->req, p->st);
	if (rc != 0)
		call_failed(p, "shmcoll_waitall", bytes, rc);
}

/* Known data one way (latency: both ways), checked by its receiver, status included. Returns
 * 1 if anything was wrong (said on stderr). */
static int validate(struct p2p *p, int test, size_t bytes)
{
	shmcoll_status st;
	int j, rc, bad = 0;

	bench_osu_fill(p->sbuf, bytes, p->rank);
	bench_osu_spoil(p->rbuf, bytes, p->peer);
	switch (test) {
	case OSU_LATENCY:
		if (p->rank == 0) {
			ping_pong(p, bytes, &st);
			bad = check_status(p, test, bytes, &st) || check_data(p, test, bytes);
		} else {
			rc = shmcoll_recv(p->rbuf, bytes, SHMCOLL_UINT8, 0, OSU_TAG_DATA, p->comm,
			                  &st);
			if (rc != 0)
				call_failed(p, "shmcoll_recv", bytes, rc);
			bad = check_status(p, test, bytes, &st) || check_data(p, test, bytes);
			rc = shmcoll_send(p->sbuf, bytes, SHMCOLL_UINT8, 0, OSU_TAG_DATA, p->comm);
			if (rc != 0)
				call_failed(p, "shmcoll_send", bytes, rc);
		}
		break;
	case OSU_BW:
		bw_window(p, bytes);
		for (j = 0; p->rank == 1 && j < OSU_WINDOW && !bad; j++)
			bad = check_status(p, test, bytes, &p->st[j]);
		if (p->rank == 1 && !bad)
			bad = check_data(p, test, bytes);
		break;
	default:
		bibw_window(p, bytes);
		for (j = 0; j < OSU_WINDOW && !bad; j++)
			bad = check_status(p, test, bytes, &p->st[j]);
		if (!bad)
			bad = check_data(p, test, bytes);
		break;
	}
	return bad;
}

/* Warm-up and the timed iterations (the pair has met just before); rank 0's time in
 * seconds. */
static double time_size(struct p2p *p, int test, size_t bytes, long *iters)
{
	long warm, i;
	double t0 = 0.0;

	*iters = bench_osu_iters(test, bytes, p->o->iscale, &warm);
	for (i = 0; i < warm + *iters; i++) {
		if (i == warm)
			t0 = bench_now();
		if (test == OSU_LATENCY)
			ping_pong(p, bytes, NULL);
		else if (test == OSU_BW)
			bw_window(p, bytes);
		else
			bibw_window(p, bytes);
	}
	return bench_now() - t0;
}

/* Every size of a test. 0, or EXIT_INVALID when a message was wrong (the pair stops together,
 * so that both exit with that status). */
static int run_test(struct p2p *p, struct bench_out *out, struct bench_osu_rows *rows, int test)
{
	const struct bench_osu_opts *o = p->o;
	size_t bytes;
	long iters;
	double t, lat, bw;

	for (bytes = o->minb; bytes <= o->maxb; bytes = bench_osu_next(bytes)) {
		if (pair_sync(p, bytes, validate(p, test, bytes)))
			return EXIT_INVALID;
		t = time_size(p, test, bytes, &iters);
		if (p->rank != 0)
			continue;
		if (test == OSU_LATENCY) {
			lat = t * 1e6 / (2.0 * (double)iters);
			bw = lat > 0 ? (double)bytes / (lat * 1e-6) / 1e9 : 0.0;
		} else {
			lat = t * 1e6 / ((double)iters * OSU_WINDOW);
			bw = (double)bytes * (test == OSU_BIBW ? 2.0 : 1.0) * OSU_WINDOW *
			     (double)iters / t / 1e9;
		}
		if (bench_osu_p2p_row(out, rows, o->impl, test, p->size, bytes, lat, bw) < 0) {
			shmcoll_comm_abort(p->comm);
			exit(EXIT_FAIL);
		}
	}
	return 0;
}

static int alloc_buffers(struct p2p *p, size_t bytes)
{
	if (p->o->symmetric) {
		p->sbuf = shmcoll_malloc(p->comm, bytes);
		p->rbuf = p->sbuf ? shmcoll_malloc(p->comm, bytes) : NULL;
		if (!p->rbuf) {
			fprintf(stderr, PROG ": rank %d: shmcoll_malloc(%zu) failed: %s\n", p->rank,
			        bytes, shmcoll_last_error(p->comm));
			return -1;
		}
	} else {
		void *sb = NULL, *rb = NULL;

		if (posix_memalign(&sb, 4096, bytes) != 0 ||
		    posix_memalign(&rb, 4096, bytes) != 0) {
			fprintf(stderr, PROG ": rank %d: out of memory for two %zu-byte buffers\n",
			        p->rank, bytes);
			free(sb);
			return -1;
		}
		p->sbuf = sb;
		p->rbuf = rb;
	}
	memset(p->sbuf, 0, bytes);
	memset(p->rbuf, 0, bytes);
	return 0;
}

static int free_buffers(struct p2p *p)
{
	int rc = 0;

	if (!p->o->symmetric) {
		free(p->sbuf);
		free(p->rbuf);
	} else {
		if (p->rbuf)
			rc = shmcoll_free(p->comm, p->rbuf);
		if (rc == 0 && p->sbuf)
			rc = shmcoll_free(p->comm, p->sbuf);
		if (rc != 0)
			fprintf(stderr, PROG ": rank %d: shmcoll_free failed: %d (%s): %s\n",
			        p->rank, rc, shmcoll_strerror(rc), shmcoll_last_error(p->comm));
	}
	p->sbuf = p->rbuf = NULL;
	return rc;
}

int bench_p2p_main(int argc, char **argv)
{
	struct bench_osu_opts o;
	struct bench_osu_rows rows = {0};
	struct bench_out out;
	struct p2p p = {0};
	const char *env = getenv("SHMCOLL_SIZE");
	char err[256];
	size_t cap;
	int rc, test, status = 0;

	rc = bench_osu_parse(0, argc, argv, "shmcoll", &o, err, sizeof(err));
	if (rc < 0) {
		if (bench_is_rank0())
			bench_usage(stdout);
		return 0;
	}
	if (rc != 0)
		return bench_usage_exit(bench_usage_error("%s", err));
	if (!env || atoi(env) < 2)
		return bench_usage_exit(bench_usage_error(
		    "p2p: needs at least 2 ranks (shmcoll-run -n 2 " PROG " p2p ...)"));
	/* Page-rounded, at least a page: room for the 4-byte ack and the pattern of any size. */
	cap = (o.maxb + 4095) / 4096 * 4096;
	if (cap == 0)
		cap = 4096;
	if (o.symmetric && bench_fit_arena("--symmetric", 2 * cap) < 0)
		return bench_usage_exit(EXIT_FAIL);
	if (bench_out_open(&out, o.csv, bench_is_rank0()) < 0)
		return bench_usage_exit(EXIT_FAIL);

	rc = shmcoll_init(&p.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": shmcoll_init failed: %d (%s): %s\n", rc,
		        shmcoll_strerror(rc), shmcoll_last_error(NULL));
		bench_out_close(&out);
		return EXIT_FAIL;
	}
	p.o = &o;
	p.rank = shmcoll_comm_rank(p.comm);
	p.size = shmcoll_comm_size(p.comm);
	p.peer = p.rank == 0 ? 1 : 0;
	out.print = p.rank == 0;
	if (alloc_buffers(&p, cap) < 0) {
		shmcoll_comm_abort(p.comm);
		exit(EXIT_FAIL);
	}

	if (o.header)
		bench_osu_header(&out, 0);
	for (test = 0; p.rank < 2 && test < OSU_NTESTS && !status; test++)
		if (o.test < 0 || o.test == test)
			status = run_test(&p, &out, &rows, test);
	rc = shmcoll_barrier(p.comm);
	if (rc != 0)
		call_failed(&p, "shmcoll_barrier at the end", 0, rc);

	if (free_buffers(&p) != 0 && !status)
		status = EXIT_FAIL;
	rc = shmcoll_comm_destroy(p.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %d: shmcoll_comm_destroy failed: %d (%s)\n", p.rank,
		        rc, shmcoll_strerror(rc));
		status = status ? status : EXIT_FAIL;
	}
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (p.rank == 0 && o.plot && !status &&
	    bench_osu_plot(o.plot, 0, o.impl, p.size, &rows, 0) < 0)
		status = EXIT_FAIL;
	bench_osu_rows_free(&rows);
	return status;
}
