/* topo.c - each rank's place on the machine, published at create, and the trees over
 * everyone's (topo.h). */
#include "lib/core/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/env.h"

#define SYS_CPU "/sys/devices/system/cpu/cpu"

/* The text of a small file, NUL-terminated; 0 or -1 (missing, unreadable, empty). */
static int read_text(const char *path, char *buf, size_t len)
{
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	got = read(fd, buf, len - 1);
	close(fd);
	if (got <= 0)
		return -1;
	buf[got] = '\0';
	return 0;
}

/* The whole number a sysfs file holds (a trailing newline allowed), or -1. */
static int read_int(const char *path)
{
	char buf[32], *end;
	long v;

	if (read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v < 0 || v > 0x7fffffff)
		return -1;
	return (int)v;
}

/* A CPU list as sysfs writes it ("0-3,8,10-11\n") into set; 0 or -1. */
static int parse_cpus(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s || a < 0)
			return -1;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				return -1;
		}
		for (; a <= b && a < CPU_SETSIZE; a++)
			CPU_SET((int)a, set);
		s = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end && *end != '\n')
			return -1;
	}
	return 0;
}

/* The place of the CPUs this thread may run on: the package and L3 of the first of them, if
 * that L3 holds them all (a rank pinned to one CPU, or to one L3 domain); else unknown, and
 * the topology-aware tree gives way to the plain one. */
static struct shmcoll_place sysfs_place(void)
{
	struct shmcoll_place p = {-1, -1};
	char path[128], text[4096];
	cpu_set_t mine, l3;
	int cpu, i, pkg, id = -1;

	if (sched_getaffinity(0, sizeof(mine), &mine) < 0)
		return p;
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine); cpu++)
		;
	if (cpu == CPU_SETSIZE)
		return p;
	snprintf(path, sizeof(path), SYS_CPU "%d/topology/physical_package_id", cpu);
	pkg = read_int(path);
	if (pkg < 0)
		return p;
	/* The cache index of level 3 is not the same on every machine: look for it. */
	for (i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), SYS_CPU "%d/cache/index%d/level", cpu, i);
		if (read_int(path) == 3)
			break;
	}
	if (i == 16)
		return p;
	snprintf(path, sizeof(path), SYS_CPU "%d/cache/index%d/shared_cpu_list", cpu, i);
	if (read_text(path, text, sizeof(text)) < 0 || parse_cpus(text, &l3) < 0)
		return p;
	CPU_AND(&l3, &l3, &mine);
	if (!CPU_EQUAL(&l3, &mine))
		return p;
	/* Kernels before 5.x have no id file: the L3's lowest CPU names it as well. */
	snprintf(path, sizeof(path), SYS_CPU "%d/cache/index%d/id", cpu, i);
	id = read_int(path);
	if (id < 0) {
		parse_cpus(text, &l3);
		for (id = 0; !CPU_ISSET(id, &l3); id++)
			;
	}
	p.pkg = pkg;
	p.l3 = id;
	return p;
}

int shmcoll__topo_read(struct shmcoll_node *n, char *err, size_t errlen)
{
	const char *spec = getenv("SHMCOLL_TOPOLOGY");
	int dims[3];

	n->topo.root[0] = n->topo.root[1] = -1;
	n->topo.me = (struct shmcoll_place){-1, -1};
	if (!shmcoll__env_set("SHMCOLL_TOPOLOGY")) {
		/* Only a communicator that may run the topology-aware tree (SHMCOLL_ALGO=...:topo,
		 * which every rank must set alike) reads sysfs: some twenty files a create would
		 * read for nothing, since the default tree needs no place. */
		if (n->tune.algo[KIND_BARRIER] == ALGO_TOPO ||
		    n->tune.algo[KIND_BCAST] == ALGO_TOPO)
			n->topo.me = sysfs_place();
		return 0;
	}
	if (shmcoll__topo_parse(spec, dims) < 0) {
		snprintf(err, errlen,
		         "SHMCOLL_TOPOLOGY \"%.40s\" is not <packages>x<L3 domains per "
		         "package>x<ranks per domain> (as 2x2x4, each 1..%d)",
		         spec, SHMCOLL_SCHED_MAX);
		return -EINVAL;
	}
	n->topo.me = shmcoll__topo_place(dims, n->rank);
	return 0;
}

void shmcoll__topo_publish(struct shmcoll_node *n)
{
	n->st.me->place_pkg = n->topo.me.pkg;
	n->st.me->place_l3 = n->topo.me.l3;
}

/* Every rank's place, as its control block says: written before it counted itself attached,
 * so read after the attach wait, never rewritten. The same on every rank. */
static void read_places(const struct shmcoll_node *n, struct shmcoll_place *pl)
{
	int r;

	for (r = 0; r < n->size; r++) {
		const struct shmcoll_ctrl *c = shmcoll__ctrl(&n->arena, (uint32_t)r);

		pl[r].pkg = c->place_pkg;
		pl[r].l3 = c->place_l3;
	}
}

void shmcoll__node_tree(struct shmcoll_node *n, int root, int topo, struct shmcoll_tree *t)
{
	struct shmcoll_topo *tp = &n->topo;
	struct shmcoll_place pl[SHMCOLL_MAX_RANKS];
	int r, k = root != 0;

	if (!topo || tp->hier == 1) {
		shmcoll__tree(n->rank, n->size, root, t);
		return;
	}
	if (tp->root[k] == root) {
		*t = tp->tree[k];
		return;
	}
	read_places(n, pl);
	if (!tp->hier) {
		/* Topology-aware only where every place is known and they differ: otherwise
		 * shmcoll__tree_topo gives the plain tree, which needs no place and no copy. */
		int known = 1, differ = 0;

		for (r = 0; r < n->size; r++) {
			known &= pl[r].pkg >= 0 && pl[r].l3 >= 0;
			differ |= pl[r].pkg != pl[0].pkg || pl[r].l3 != pl[0].l3;
		}
		tp->hier = known && differ ? 2 : 1;
		if (tp->hier == 1) {
			shmcoll__tree(n->rank, n->size, root, t);
			return;
		}
	}
	shmcoll__tree_topo(n->rank, n->size, root, pl, &tp->tree[k]);
	tp->root[k] = root;
	*t = tp->tree[k];
}
