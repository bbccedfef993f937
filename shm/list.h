/* list.h - the one list of the library: intrusive, doubly linked, with a head and a tail.
 * An element embeds a struct shmcoll_link and is on at most one list at a time; the list
 * owns nothing (no allocation: pushing and removing cannot fail). Every queue of lib/ is one:
 * the tasks of a communicator (lib/core/queue.h), the point-to-point operations by state and
 * the messages that arrived unmatched (lib/core/p2p.c, and across nodes lib/net/wire.c), a
 * communicator's kept requests (lib/api/request.c). It sits in the substrate so that every
 * layer may use it. */
#ifndef SHMCOLL_SHM_LIST_H
#define SHMCOLL_SHM_LIST_H

#include <stddef.h>

struct shmcoll_link {
	struct shmcoll_link *next, *prev;
};

struct shmcoll_list {
	struct shmcoll_link *head, *tail; /* NULL, NULL: empty */
};

/* The structure of type type whose member is at link (a non-NULL struct shmcoll_link *). */
#define shmcoll__entry(link, type, member) ((type *)(void *)((char *)(link)-offsetof(type, member)))

static inline int shmcoll__list_empty(const struct shmcoll_list *l)
{
	return l->head == NULL;
}

/* e joins the end of l. */
static inline void shmcoll__list_push(struct shmcoll_list *l, struct shmcoll_link *e)
{
	e->next = NULL;
	e->prev = l->tail;
	if (l->tail)
		l->tail->next = e;
	else
		l->head = e;
	l->tail = e;
}

/* e joins the front of l. */
static inline void shmcoll__list_push_front(struct shmcoll_list *l, struct shmcoll_link *e)
{
	e->prev = NULL;
	e->next = l->head;
	if (l->head)
		l->head->prev = e;
	else
		l->tail = e;
	l->head = e;
}

/* e, which is on l, leaves it. */
static inline void shmcoll__list_remove(struct shmcoll_list *l, struct shmcoll_link *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->next = e->prev = NULL;
}

/* The first element of l, taken off it; NULL when l is empty. */
static inline struct shmcoll_link *shmcoll__list_pop(struct shmcoll_list *l)
{
	struct shmcoll_link *e = l->head;

	if (e)
		shmcoll__list_remove(l, e);
	return e;
}

#endif
