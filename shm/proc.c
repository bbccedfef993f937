/* proc.c - process identity from /proc: pid, start time, pid namespace. */
#include "shm/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads /proc/PID/stat: state letter and start time. 0, or -errno. The
 * command name (field 2) may hold spaces and parentheses, so parsing starts
 * after its last ')'. */
static int read_stat(int32_t pid, char *state, uint64_t *start)
{
	char path[40], buf[1024], *p, *end;
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
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	*state = p[2];
	/* p + 2 is field 3 (state); field 22 is starttime. */
	p += 2;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	errno = 0;
	*start = strtoull(p, &end, 10);
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
	char state;
	int rc;

	memset(id, 0, sizeof(*id));
	id->pid = (int32_t)getpid();
	id->pidns = pidns_self();
	rc = read_stat(id->pid, &state, &id->start);
	if (rc < 0)
		id->start = 0;
	return rc;
}

enum shmcoll_proc_state shmcoll__proc_state(const struct shmcoll_proc_id *id)
{
	uint64_t start, ns = pidns_self();
	char state;
	int rc;

	if (id->pid <= 0 || !id->start || !ns || id->pidns != ns)
		return SHMCOLL_PROC_UNKNOWN;
	rc = read_stat(id->pid, &state, &start);
	if (rc == -ENOENT || rc == -ESRCH)
		return SHMCOLL_PROC_DEAD;
	if (rc < 0)
		return SHMCOLL_PROC_UNKNOWN;
	if (start != id->start || state == 'Z' || state == 'X' || state == 'x')
		return SHMCOLL_PROC_DEAD;
	return SHMCOLL_PROC_ALIVE;
}
