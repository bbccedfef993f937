/* launcher_env.h - shmcoll_init under a launcher other than shmcoll-run: torchrun, Open MPI,
 * MPICH (Hydra) and Slurm, read from the environment they give each rank. Private to lib/api. */
#ifndef SHMCOLL_API_LAUNCHER_ENV_H
#define SHMCOLL_API_LAUNCHER_ENV_H

/* A job of a foreign launcher, as one of its ranks sees it. */
struct api_launch {
	const char *launcher; /* "torchrun", "Open MPI", "MPICH", "Slurm": for messages */
	int rank, size;       /* 0 <= rank < size <= SHMCOLL_MAX_RANKS */
	char job[64];         /* "<tag>-<16 hex>": the same on every rank of one job only */
};

/* Reads the first foreign launcher present, in the order torchrun, Open MPI, MPICH, Slurm
 * (shmcoll-run's own variables are the caller's, checked before). 1: one is, *l is filled;
 * 0: none is (a plain run); or, with the message recorded by api__create_fail, -EINVAL (a
 * variable is missing, not a number, out of range or disagrees with another) or -ENOTSUP
 * (the job spans several nodes). */
int api__launcher_env(struct api_launch *l);

#endif
