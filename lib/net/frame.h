/* frame.h - the wire format between nodes: the hello every connection opens
 * with and the fixed header of every frame after it. Pure functions (no I/O),
 * shared by the launcher's rendezvous and the leaders' transport (net.c), and
 * fuzzed on their own (tests/fuzz/fuzz_frame.c).
 *
 * Every integer is little-endian on the wire, whatever the host. Nothing a
 * peer sent is trusted: decode checks magic, version, every field's range and
 * the reserved bytes before anyone looks at the values. */
#ifndef SHMCOLL_FRAME_H
#define SHMCOLL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define SHMCOLL_WIRE_VERSION 1
#define SHMCOLL_HELLO_MAGIC  0x4f4c4c48u /* "HLLO" */
#define SHMCOLL_FRAME_MAGIC  0x4d524653u /* "SFRM" */
#define SHMCOLL_TOKEN_MAX    64          /* bytes of a job token: [0-9A-Za-z_-] */
#define SHMCOLL_ADDR_MAX     48          /* "host:port" text, NUL included */
#define SHMCOLL_NODES_MAX    1024

/* Who opens a connection. */
enum shmcoll_role {
	ROLE_LAUNCHER = 1, /* a node's launcher, to node 0's rendezvous */
	ROLE_LEADER = 2,   /* a node's leader rank, to a lower node's leader */
	ROLE_PEER = 3,     /* any rank, to a rank on another node: its point-to-point messages */
};

/* The hello: the first bytes on every connection, in both directions (the
 * acceptor answers with its own once it has checked the peer's). */
#define SHMCOLL_HELLO_BYTES 160
struct shmcoll_hello {
	uint16_t version; /* SHMCOLL_WIRE_VERSION */
	uint16_t role;    /* enum shmcoll_role */
	uint32_t nnodes;  /* nodes in the job, 1..SHMCOLL_NODES_MAX */
	uint32_t node;    /* the sender's node, < nnodes */
	uint32_t nproc;   /* ranks per node, 1..SHMCOLL_MAX_RANKS */
	uint32_t rank;    /* the sender's global rank (a launcher: its node's first) */
	char token[SHMCOLL_TOKEN_MAX + 1]; /* NUL-terminated */
	char addr[SHMCOLL_ADDR_MAX];       /* a launcher's: its leader's listener; else "" */
};

/* Frame types. */
enum shmcoll_ftype {
	FRAME_DATA = 1,   /* a collective's payload between leaders */
	FRAME_TABLE = 2,  /* rendezvous -> launcher: every node's leader address */
	FRAME_STATUS = 3, /* launcher -> rendezvous: its job ended with status `call` */
	FRAME_FINAL = 4,  /* rendezvous -> launcher: the job's exit status `call`, or stop now */
	FRAME_P2P = 5,    /* a point-to-point message: `call` is its context << 32 | its tag */
	FRAME_BYE = 6,    /* a rank's last frame on a connection: it destroyed its communicator */
	FRAME_TYPE_MAX = FRAME_BYE,
};

/* The header in front of every frame's payload. */
#define SHMCOLL_FRAME_BYTES 32
struct shmcoll_frame {
	uint16_t type; /* enum shmcoll_ftype */
	uint16_t node; /* the sender's node */
	uint32_t seq;  /* frames on this connection in this direction, from 1 */
	uint64_t call; /* DATA: the call word both sides must agree on; else per type */
	uint64_t len;  /* payload bytes that follow */
};

/* The largest payload a frame may announce: a receiver checks the length
 * against the buffer it posted anyway; this bounds what a decoder accepts. */
#define SHMCOLL_FRAME_MAX_LEN (UINT64_C(1) << 40)

/* Fills out (SHMCOLL_HELLO_BYTES) from h. Returns 0, or -EINVAL if h holds
 * something decode would refuse. */
int shmcoll__hello_encode(uint8_t *out, const struct shmcoll_hello *h);

/* Parses in (SHMCOLL_HELLO_BYTES). Returns 0 or -EPROTO with why (a phrase,
 * "bad magic", "wire version 7, this side speaks 1", ...) in why. */
int shmcoll__hello_decode(const uint8_t *in, struct shmcoll_hello *h, char *why, size_t whylen);

/* Whether token a equals b, in time that depends only on their lengths. */
int shmcoll__token_equal(const char *a, const char *b);

/* Whether s is a valid token (1..SHMCOLL_TOKEN_MAX of [0-9A-Za-z_-]). */
int shmcoll__token_valid(const char *s);

void shmcoll__frame_encode(uint8_t *out, const struct shmcoll_frame *f);

/* Parses in (SHMCOLL_FRAME_BYTES). Returns 0 or -EPROTO with why. */
int shmcoll__frame_decode(const uint8_t *in, struct shmcoll_frame *f, char *why, size_t whylen);

/* Splits "host:port" (host: an IPv4 address or a name; "[v6]:port" too)
 * into host (hostlen bytes) and port. Returns 0 or -EINVAL. */
int shmcoll__addr_split(const char *s, char *host, size_t hostlen, uint16_t *port);

#endif
