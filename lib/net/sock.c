/* sock.c - whole messages over a stream socket by a deadline (sock.h). */
#include "lib/net/sock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>

#include "shm/wait.h"

int shmcoll__poll_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - shmcoll__now_ns();
	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > INT_MAX ? INT_MAX : (int)left;
}

/* Waits until fd is ready for events or the deadline passes: 0, -ETIMEDOUT,
 * or poll's error. */
static int await(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	if (deadline >= 0 && shmcoll__now_ns() >= deadline)
		return -ETIMEDOUT;
	if (poll(&p, 1, shmcoll__poll_ms(deadline)) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int shmcoll__send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	ssize_t r;
	int rc;

	while (len) {
		r = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		rc = await(fd, POLLOUT, deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
	uint8_t *p = buf;
	ssize_t r;
	int rc;

	while (len) {
		r = recv(fd, p, len, MSG_DONTWAIT);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -EPIPE;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		rc = await(fd, POLLIN, deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}
