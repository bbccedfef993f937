/* sock.h - whole messages over a stream socket by a deadline: what the
 * launchers' rendezvous and the leaders' handshake both need before a
 * connection carries frames through the transport proper; and a listener on
 * any port, the one every rank's wire (wire.h) takes messages on. */
#ifndef SHMCOLL_SOCK_H
#define SHMCOLL_SOCK_H

#include <stddef.h>
#include <stdint.h>

/* Sends / receives exactly len bytes on fd (blocking or not), by deadline
 * (CLOCK_MONOTONIC ns, shmcoll__now_ns; < 0: none). Return 0, -ETIMEDOUT,
 * -EPIPE when the peer closed first (a receive's EOF, or a send's EPIPE), or
 * another negative errno (-ECONNRESET for a reset). Sends never raise
 * SIGPIPE. */
int shmcoll__send_all(int fd, const void *buf, size_t len, int64_t deadline);
int shmcoll__recv_all(int fd, void *buf, size_t len, int64_t deadline);

/* ms of poll() timeout left until deadline (< 0: none, -1 returned),
 * rounded up so a poll never returns just before the deadline and spins. */
int shmcoll__poll_ms(int64_t deadline);

/* A non-blocking listener on host (a name or numeric address), on a port the
 * kernel picks: its fd, with its "host:port" (numeric; IPv6 in brackets) in
 * addr. A negative errno: -EADDRNOTAVAIL (host does not resolve or bind),
 * -ENAMETOOLONG (addr too short), -ENOMEM, or socket's error. */
int shmcoll__listen_any(const char *host, char *addr, size_t len);

#endif
