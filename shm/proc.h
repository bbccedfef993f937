/* proc.h - who a process is, in a form that outlives pid reuse: its pid, its
 * start time and its pid namespace. Ranks record theirs in the arena; peers
 * and the stale-segment sweep use them to tell a dead owner from a live one. */
#ifndef SHMCOLL_SHM_PROC_H
#define SHMCOLL_SHM_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The identity of a process: start is the kernel's start time (clock ticks
 * since boot, /proc/PID/stat field 22), pidns the inode of its pid
 * namespace. A pid alone can name another process after the first exits. */
struct shmcoll_proc_id {
	int32_t pid;
	uint32_t pad;
	uint64_t start;
	uint64_t pidns;
};

/* Fills id for the calling process. Returns 0, or -errno when /proc is not
 * mounted (start and pidns are then 0: unknown). */
int shmcoll__proc_self(struct shmcoll_proc_id *id);

/* What /proc/PID/stat says of a process. */
struct shmcoll_proc_stat {
	char comm[16];  /* its command name, as the kernel keeps it (at most 15 bytes) */
	char state;     /* field 3: R, S, D, Z, ... */
	int32_t ppid;   /* field 4: its parent */
	uint64_t start; /* field 22: start time, clock ticks since boot */
};

/* Reads /proc/PID/stat into st. 0, or -errno (-EIO when it cannot be parsed). */
int shmcoll__proc_stat(int32_t pid, struct shmcoll_proc_stat *st);

/* What is known of the process id names, as seen from this process. */
enum shmcoll_proc_state {
	SHMCOLL_PROC_ALIVE,   /* running (or stopped) */
	SHMCOLL_PROC_DEAD,    /* gone, a zombie, or its pid now names another process */
	SHMCOLL_PROC_UNKNOWN, /* another pid namespace, or /proc unreadable */
};

/* Looks id up in /proc. For a process in another pid namespace than ours the
 * pid means nothing here: UNKNOWN. */
enum shmcoll_proc_state shmcoll__proc_state(const struct shmcoll_proc_id *id);

#endif
