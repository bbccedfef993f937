/* errors.h - the error codes of shmcoll and their texts, in one table (errors.c). */
#ifndef SHMCOLL_CORE_ERRORS_H
#define SHMCOLL_CORE_ERRORS_H

/* The fixed text of err (negative or positive errno; "unknown error" for others). */
const char *shmcoll__strerror(int err);

#endif
