/* embed.c - communicators a host library makes: from its own out-of-band
 * allgather over any group of its ranks on this machine, and by splitting or
 * duplicating a communicator. Each new communicator is an ordinary one with
 * an arena of its own (shmcoll_comm_create), so any number live side by side
 * without touching each other; all this file adds is how the ranks agree on
 * the new job's name and their places in it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/api/api.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"

/* What each rank hands the host's allgather: the group as it sees it, its
 * machine and user (ranks elsewhere cannot share an arena), and a job name
 * (rank 0's is the one used). */
#define OOB_MAGIC   0x53434f42u /* "SCOB" */
#define OOB_VERSION 1u
struct oob_rec {
	uint32_t magic, version;
	int32_t rank, size;
	uint32_t uid;
	char boot[40]; /* /proc/sys/kernel/random/boot_id, "" if unreadable */
	char job[64];
	uint8_t pad[4];
};
_Static_assert(sizeof(struct oob_rec) == 128, "the record's size is part of the exchange");

/* The kernel's boot id: the same for every process of one machine (one
 * kernel), different elsewhere. "" if it cannot be read. */
static void boot_id(char *buf, size_t len)
{
	ssize_t n = -1;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* A job name no other group on this machine uses: this process, a counter
 * for the groups it makes, and 64 random bits. */
static void fresh_job(char *buf, size_t len)
{
	static _Atomic unsigned counter;
	uint64_t nonce = 0;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint64_t)shmcoll__now_ns();
	snprintf(buf, len, "oob%d-%u-%016llx", (int)getpid(), atomic_fetch_add(&counter, 1),
	         (unsigned long long)nonce);
}

/* Checks rank r's record against this rank's view. 0 or -EINVAL with a
 * message in err. */
static int check_rec(const struct oob_rec *all, int r, const struct oob_rec *me, char *err,
                     size_t errlen)
{
	const struct oob_rec *x = &all[r];

	if (x->magic != OOB_MAGIC || x->version != OOB_VERSION) {
		snprintf(err, errlen,
		         "entry %d of the allgather is not a shmcoll record of this version (the "
		         "host's allgather misplaced it, or ranks run different shmcoll versions)",
		         r);
		return -EINVAL;
	}
	if (x->rank != r || x->size != me->size) {
		snprintf(err, errlen,
		         "entry %d of the allgather is from rank %d of a group of %d, this rank "
		         "is %d of %d: the ranks disagree on the group",
		         r, (int)x->rank, (int)x->size, (int)me->rank, (int)me->size);
		return -EINVAL;
	}
	if (x->uid != me->uid || strncmp(x->boot, me->boot, sizeof(x->boot)) != 0 ||
	    memchr(x->job, '\0', sizeof(x->job)) == NULL) {
		snprintf(err, errlen,
		         "rank %d runs on another machine or as another user: shmcoll "
		         "communicators join processes of one machine and user",
		         r);
		return -EINVAL;
	}
	return 0;
}

int shmcoll_comm_create_oob(const shmcoll_oob *oob, shmcoll_comm **out)
{
	struct oob_rec me = {.magic = OOB_MAGIC, .version = OOB_VERSION}, *all;
	shmcoll_config cfg = {0};
	char err[SHMCOLL_ERR_LEN - 64];
	int r, rc;

	api__create_fail(0, "%s", "");
	if (!out)
		return api__create_fail(-EINVAL,
		                        "shmcoll_comm_create_oob: comm (the out pointer) is NULL");
	*out = NULL;
	if (!oob || !oob->allgather)
		return api__create_fail(-EINVAL,
		                        "shmcoll_comm_create_oob: oob or its allgather is NULL");
	if (oob->size < 1 || oob->size > SHMCOLL_MAX_RANKS || oob->rank < 0 ||
	    oob->rank >= oob->size)
		return api__create_fail(-EINVAL,
		                        "shmcoll_comm_create_oob: rank %d of %d is out of range "
		                        "(1 to %d ranks)",
		                        oob->rank, oob->size, SHMCOLL_MAX_RANKS);
	me.rank = oob->rank;
	me.size = oob->size;
	me.uid = (uint32_t)getuid();
	boot_id(me.boot, sizeof(me.boot));
	fresh_job(me.job, sizeof(me.job));
	all = malloc(sizeof(*all) * (size_t)oob->size);
	if (!all)
		return api__create_fail(-ENOMEM, "shmcoll_comm_create_oob: out of memory");
	rc = oob->allgather(&me, all, sizeof(me), oob->ctx);
	if (rc != 0) {
		free(all);
		return api__create_fail(-EIO,
		                        "shmcoll_comm_create_oob: the host's allgather failed "
		                        "(returned %d)",
		                        rc);
	}
	for (r = 0; r < oob->size; r++) {
		rc = check_rec(all, r, &me, err, sizeof(err));
		if (rc < 0) {
			free(all);
			return api__create_fail(rc, "shmcoll_comm_create_oob: %s", err);
		}
	}
	cfg.rank = oob->rank;
	cfg.size = oob->size;
	cfg.job = all[0].job;
	cfg.arena_bytes = oob->arena_bytes;
	cfg.timeout_ms = oob->timeout_ms;
	rc = api__create(&cfg, out);
	free(all);
	return rc;
}

/* The node communicator a split's groups are made from: comm's own, or, for a communicator
 * over several nodes, this rank's node's. */
static const struct shmcoll_node *base_of(const shmcoll_comm *c)
{
	return c->local;
}

/* A communicator's wait bound as shmcoll_config gives it. */
static int timeout_ms_of(const shmcoll_comm *c)
{
	int64_t ns = base_of(c)->waiter.timeout_ns;

	if (ns < 0)
		return -1;
	return ns / 1000000 > 0 ? (int)(ns / 1000000) : 1;
}

/* (key, rank) order within a color: what the new ranks follow. */
static int before(const int32_t *all, int a, int b)
{
	return all[2 * a + 1] != all[2 * b + 1] ? all[2 * a + 1] < all[2 * b + 1] : a < b;
}

static int split(shmcoll_comm *c, const char *fn, int color, int key, shmcoll_comm **newcomm)
{
	int32_t mine[2] = {color, key}, *all;
	shmcoll_config cfg = {0};
	char job[SHMCOLL_NAME_MAX + 64];
	int r, rc, nproc, first_node = -1, other_node = -1, bad_color = 0;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	if (!newcomm)
		return api__fail(c, -EINVAL, "%s: newcomm (the out pointer) is NULL", fn);
	*newcomm = NULL;
	if (color < 0 && color != SHMCOLL_UNDEFINED)
		return api__fail(c, -EINVAL, "%s: color %d is negative and not SHMCOLL_UNDEFINED",
		                 fn, color);
	all = malloc(sizeof(*all) * 2 * (size_t)c->size);
	if (!all)
		return api__fail(c, -ENOMEM, "%s: out of memory", fn);
	rc = api__enter(c, fn);
	if (rc == 0) {
		rc = c->ops->allgather(c, mine, all, 2, SHMCOLL_INT32);
		if (rc < 0) {
			/* Its message names the allgather: say whose. */
			char why[SHMCOLL_ERR_LEN];

			snprintf(why, sizeof(why), "%s", c->err);
			api__fail(c, rc, "%s: %s", fn, why);
		}
	}
	if (rc < 0) {
		free(all);
		return rc;
	}
	/* Every rank counts every split, so every rank derives the same names. */
	c->splits++;
	/* Across nodes a group must stay on one node: it gets that node's
	 * shared memory and nothing else. Every rank sees every color, so
	 * they all fail alike. */
	nproc = c->nproc;
	for (r = 0; r < c->size && nproc < c->size; r++) {
		int s;

		for (s = r + 1; s < c->size && all[2 * r] >= 0; s++)
			if (all[2 * s] == all[2 * r] && s / nproc != r / nproc) {
				bad_color = all[2 * r];
				first_node = r / nproc;
				other_node = s / nproc;
				break;
			}
		if (first_node >= 0)
			break;
	}
	if (first_node >= 0) {
		free(all);
		return api__fail(c, -ENOTSUP,
		                 "%s: color %d has ranks on nodes %d and %d; a communicator "
		                 "over several nodes splits only into groups within a node",
		                 fn, bad_color, first_node, other_node);
	}
	if (color == SHMCOLL_UNDEFINED) {
		free(all);
		return 0;
	}
	cfg.size = 0;
	cfg.rank = 0;
	for (r = 0; r < c->size; r++) {
		if (all[2 * r] != color)
			continue;
		cfg.size++;
		cfg.rank += before(all, r, c->rank);
	}
	free(all);
	/* The parent's arena name is unique to its job (and node): with the
	 * split's number and the color, so is this. */
	snprintf(job, sizeof(job), "%s|split%u|color%d", base_of(c)->arena.name, c->splits, color);
	cfg.job = job;
	cfg.timeout_ms = timeout_ms_of(c);
	rc = api__create(&cfg, newcomm);
	if (rc < 0)
		return api__fail(c, rc, "%s: %s", fn, shmcoll_last_error(NULL));
	return 0;
}

int shmcoll_comm_dup(shmcoll_comm *c, shmcoll_comm **newcomm)
{
	if (!c)
		return -EINVAL;
	return split(c, "shmcoll_comm_dup", 0, c->rank, newcomm);
}

int shmcoll_comm_split(shmcoll_comm *c, int color, int key, shmcoll_comm **newcomm)
{
	return split(c, "shmcoll_comm_split", color, key, newcomm);
}
