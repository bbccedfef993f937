/* vcases.h - the cases of the variable-count collectives and prefix reductions
 * (shmcoll_allgatherv, _gatherv, _scatterv, _alltoallv, _reduce_scatterv, _scan, _exscan) and
 * their checks, shared by tests/test_vcoll.c (ranks of one node, under the harness) and
 * tests/progs/nodevcoll.c (ranks across nodes, under shmcoll_init). A case (struct vc) is
 * the same on every rank; from it alone every rank derives every rank's counts,
 * displacements and data, computes what its buffers must hold (every byte of them and of
 * guards around them), runs the call and compares. No Criterion here. */
#ifndef SHMCOLL_TESTS_VCASES_H
#define SHMCOLL_TESTS_VCASES_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

#define VMAXP 16 /* the most ranks a case runs on */

/* Codes the checks return (the messages say more); a program adds its own beyond these. */
#define E_NOMEM 1
#define E_CALL  10 /* the blocking form returned an error */
#define E_OUT   11 /* a buffer (or the bytes around it) holds other bytes than it must */
#define E_START 20 /* a start failed or gave no request */
#define E_DONE  21 /* a completion returned an error */
#define E_REQ   22 /* a completion left the request set, or a status wrong */

enum vkind {
	VK_ALLGATHERV,
	VK_GATHERV,
	VK_SCATTERV,
	VK_ALLTOALLV,
	VK_REDUCE_SCATTERV,
	VK_SCAN,
	VK_EXSCAN,
	VK_COUNT
};

/* The calls' names ("allgatherv", ...), by enum vkind. */
extern const char *const vk_name[VK_COUNT];

/* Block sizes: at most 32 bytes (the first line of a message), 33..232 bytes, within two
 * elements of SHMCOLL_INLINE_MAX bytes, tens of KiB, about vc_env.huge_bytes a call. */
enum { SZ_TINY, SZ_SMALL, SZ_KIB, SZ_LARGE, SZ_HUGE, SZ_COUNT };

/* Counts: different per rank with zeros among them; all zero; the same everywhere; exactly
 * what fits a call's inline message; one element more. */
enum { CN_VARIED, CN_ZERO, CN_EQUAL, CN_EDGE, CN_EDGE1, CN_COUNT };

/* Displacements: rank order, packed; reverse rank order with gaps (and zero-count blocks
 * pointing anywhere); as LY_GAPS, with send blocks that overlap each other. */
enum { LY_PACKED, LY_GAPS, LY_SENDOVL, LY_COUNT };

/* One call: the same on every rank. */
struct vc {
	int kind;
	shmcoll_dtype dt;
	shmcoll_op op;
	int root;
	int sz, cn, ly;
	int inplace;
	int nulls; /* NULL for every buffer or array the rank does not read or has no bytes in */
	uint64_t salt;
};

/* A buffer of bytes data bytes between two guards (of 64 bytes, checked too). */
struct vc_area {
	unsigned char *p;    /* guard + bytes + guard */
	unsigned char *want; /* what p must hold after the call */
	unsigned char *snap; /* p before the call */
	size_t bytes;
	const size_t *bd, *bc; /* its blocks (displacements, counts: nb of them), for messages */
	int nb;
};

/* One rank's side of one call. */
struct vc_run {
	struct vc c;
	int P, me;
	size_t es;
	size_t
	    cnt[VMAXP * VMAXP];   /* alltoallv: cnt[p * P + q], p to q; else cnt[p]; scan: cnt[0] */
	size_t sd[VMAXP * VMAXP]; /* alltoallv: row p is p's sdispls; scatterv: the root's */
	size_t rd[VMAXP];         /* this rank's receive displacements */
	size_t col[VMAXP];        /* alltoallv: this rank's recvcounts */
	size_t bogus[VMAXP];      /* passed for arrays the call must not read on this rank */
	struct vc_area A, B;      /* A: sendbuf (in place: the one buffer); B: recvbuf */
	const void *sp;
	void *rp;
	size_t n; /* sendcount (allgatherv, gatherv), recvcount (scatterv), count (scan) */
	const size_t *sc, *sdp, *rc, *rdp;
};

/* What the program that runs the cases supplies: it defines vc_env. */
struct vc_env {
	size_t huge_bytes; /* the data of an SZ_HUGE call (a reduction's: half of it) */
	/* Prints a failed check of rank me: what describes the case (empty when there is
	 * none), msg says what failed. */
	void (*report)(int me, const char *what, const char *msg);
};

extern const struct vc_env vc_env;

/* Reports a failure of rank me (through vc_env.report, with c described, if not NULL);
 * returns code. */
int vc_failf(int code, const struct vc *c, int me, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Leaves c and form as this rank's breadcrumb (th_breadcrumb: nothing outside the harness's
 * runs). */
void vc_crumb(const struct vc *c, const char *form);

/* This rank's (me of P) buffers, arguments and wanted bytes for c, in r (any memory; free it
 * with vc_run_free, whatever the result). 0 or E_NOMEM. */
int vc_setup(struct vc_run *r, const struct vc *c, int P, int me);

void vc_run_free(struct vc_run *r);

/* Compares r's buffers and their guards with what they must hold after the call: 0, or
 * E_OUT after a message naming form and the first byte wrong. */
int vc_run_check(const struct vc_run *r, const char *form);

/* The blocking call of r, and its start without blocking: the call's result. */
int vc_call_blocking(const struct vc_run *r, shmcoll_comm *comm);
int vc_call_start(const struct vc_run *r, shmcoll_comm *comm, shmcoll_request **q);

/* Forms of a case: the blocking call; the non-blocking one, completed by wait, a test loop,
 * waitall, a testall loop or waitany (method % 5); both, one after the other on the same
 * buffers restored. */
enum { F_BLOCKING = 1, F_NONBLOCKING = 2, F_BOTH = 3 };

/* Runs case c on rank me of P in the forms asked for (F_*), each checked, the non-blocking
 * one completed by method. 0, or a code (E_*) after a message saying what failed. */
int vc_run_case(shmcoll_comm *comm, const struct vc *c, int P, int me, int forms, int method);

#endif
