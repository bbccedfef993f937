/* proc.c - process identity from /proc: pid, start time, pid namespace. */
#include "shm/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The command name (field 2) may hold spaces and parentheses, so the fields after it are
 * parsed from its last ')'. */
int shmcoll__proc_stat(int32_t pid, struct shmcoll_proc_stat *st)
{
	char path[40], buf[1024], *open_p, *p, *end;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	open_p = strchr(buf, '(');
	p = strrchr(buf, ')');
	if (!open_p || !p || p < open_p || p[1] != ' ' || !p[2])
		return -EIO;
	snprintf(st->comm, sizeof(st->comm), "%.*s", (int)(p - open_p - 1), open_p + 1);
	st->state = p[2];
	/* p + 2 is field 3 (state), then field 4 (ppid); field 22 is starttime. */
	p += 2;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
		if (field == 3)
			st->ppid = (int32_t)strtol(p, NULL, 10);
	}
	errno = 0;
	st->start = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EIO;
	return 0;
}

static uint64_t pidns_self(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int shmcoll__proc_self(struct shmcoll_proc_id *id)
{
	struct shmcoll_proc_stat st;
	int rc;

	memset(id, 0, sizeof(*id));
	id->pid = (int32_t)getpid();
	id->pidns = pidns_self();
	rc = shmcoll__proc_stat(id->pid, &st);
	if (rc == 0)
		id->start = st.start;
	return rc;
}

enum shmcoll_proc_state shmcoll__proc_state(const struct shmcoll_proc_id *id)
{
	uint64_t ns = pidns_self();
	struct shmcoll_proc_stat st;
	int rc;

	if (id->pid <= 0 || !id->start || !ns || id->pidns != ns)
		return SHMCOLL_PROC_UNKNOWN;
	rc = shmcoll__proc_stat(id->pid, &st);
	if (rc == -ENOENT || rc == -ESRCH)
		return SHMCOLL_PROC_DEAD;
	if (rc < 0)
		return SHMCOLL_PROC_UNKNOWN;
	if (st.start != id->start || st.state == 'Z' || st.state == 'X' || st.state == 'x')
		return SHMCOLL_PROC_DEAD;
	return SHMCOLL_PROC_ALIVE;
}
