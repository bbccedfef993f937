/* sock.c - whole messages over a stream socket by a deadline, and a listener on any port
 * (sock.h). */
#include "lib/net/sock.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

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

int shmcoll__listen_any(const char *host, char *addr, size_t len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[NI_MAXHOST], p[NI_MAXSERV];
	int fd, rc, one = 1;

	rc = getaddrinfo(host, "0", &hints, &ai);
	if (rc)
		return rc == EAI_MEMORY ? -ENOMEM : -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), p, sizeof(p),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		rc = -EADDRNOTAVAIL;
		close(fd);
		goto out;
	}
	rc = snprintf(addr, len, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p) >= (int)len
	         ? -ENAMETOOLONG
	         : fd;
	if (rc < 0)
		close(fd);
out:
	freeaddrinfo(ai);
	return rc;
}
