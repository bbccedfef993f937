/* xfer.h - one message of a transport call (net.h), the unit both the transport's interface
 * and its backends (net_impl.h) are written in: here, below both, so that the backends need
 * nothing of net.h and the files of lib/net read in one order. */
#ifndef SHMCOLL_NET_XFER_H
#define SHMCOLL_NET_XFER_H

#include <stddef.h>
#include <stdint.h>

enum { XFER_SEND, XFER_RECV };

/* One message to or from one peer node. */
struct shmcoll_xfer {
	int peer;      /* node, != this one */
	int dir;       /* XFER_SEND or XFER_RECV */
	void *buf;     /* the payload (a send only reads it) */
	size_t len;    /* its bytes; a receive fails unless the frame has exactly these */
	uint64_t call; /* sent in the header, or what the received header must carry */
	uint64_t got;  /* out, receive: the call word the peer sent */
};

#endif
