/* frame.c - encode and decode the hello and the frame header (frame.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/net/frame.h"
#include "shm/arena.h"

/* Hello layout (bytes):
 *   0 magic u32   4 version u16   6 role u16   8 nnodes u32   12 node u32
 *  16 nproc u32  20 rank u32     24 token_len u32   28 reserved u32 (0)
 *  32 token[64] (NUL-padded)     96 addr[48] (NUL-padded)   144 reserved[16] (0) */
#define H_TOKEN 32
#define H_ADDR  96
#define H_RSVD  (H_ADDR + SHMCOLL_ADDR_MAX)

/* Frame header layout: 0 magic u32, 4 version u16, 6 type u16, 8 seq u32,
 * 12 node u16, 14 reserved u16 (0), 16 call u64, 24 len u64. */

_Static_assert(H_RSVD + 16 == SHMCOLL_HELLO_BYTES, "hello layout");
_Static_assert(H_TOKEN + SHMCOLL_TOKEN_MAX == H_ADDR, "hello layout");

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t whylen, const char *fmt,
                                                        ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

static int token_char(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '_' || ch == '-';
}

int shmcoll__token_valid(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	for (n = 0; s[n]; n++)
		if (n >= SHMCOLL_TOKEN_MAX || !token_char(s[n]))
			return 0;
	return n > 0;
}

int shmcoll__token_equal(const char *a, const char *b)
{
	size_t na = strnlen(a, SHMCOLL_TOKEN_MAX + 1), nb = strnlen(b, SHMCOLL_TOKEN_MAX + 1);
	unsigned diff = na != nb;

	/* Every byte of the shorter length is compared: no early exit tells a
	 * guesser how much of a token was right. */
	for (size_t i = 0; i < na && i < nb; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
	return diff == 0;
}

/* Whether the n bytes at p are all zero. */
static int zeros(const uint8_t *p, size_t n)
{
	uint8_t acc = 0;

	while (n--)
		acc |= *p++;
	return acc == 0;
}

static int addr_char(char ch)
{
	return token_char(ch) || ch == '.' || ch == ':' || ch == '[' || ch == ']';
}

int shmcoll__hello_encode(uint8_t *out, const struct shmcoll_hello *h)
{
	size_t tl = strnlen(h->token, sizeof(h->token));
	size_t al = strnlen(h->addr, sizeof(h->addr));

	if (!shmcoll__token_valid(h->token) || al >= sizeof(h->addr) || h->nnodes < 1 ||
	    h->nnodes > SHMCOLL_NODES_MAX || h->node >= h->nnodes || h->nproc < 1 ||
	    h->nproc > SHMCOLL_MAX_RANKS || (h->role < ROLE_LAUNCHER || h->role > ROLE_PEER))
		return -EINVAL;
	memset(out, 0, SHMCOLL_HELLO_BYTES);
	put32(out, SHMCOLL_HELLO_MAGIC);
	put16(out + 4, h->version);
	put16(out + 6, h->role);
	put32(out + 8, h->nnodes);
	put32(out + 12, h->node);
	put32(out + 16, h->nproc);
	put32(out + 20, h->rank);
	put32(out + 24, (uint32_t)tl);
	memcpy(out + H_TOKEN, h->token, tl);
	memcpy(out + H_ADDR, h->addr, al);
	return 0;
}

int shmcoll__hello_decode(const uint8_t *in, struct shmcoll_hello *h, char *why, size_t whylen)
{
	uint32_t tl, i;

	memset(h, 0, sizeof(*h));
	if (get32(in) != SHMCOLL_HELLO_MAGIC)
		return refuse(why, whylen, "not a shmcoll hello (magic %08x)", get32(in));
	h->version = get16(in + 4);
	if (h->version != SHMCOLL_WIRE_VERSION)
		return refuse(why, whylen, "wire version %u, this side speaks %u", h->version,
		              SHMCOLL_WIRE_VERSION);
	h->role = get16(in + 6);
	h->nnodes = get32(in + 8);
	h->node = get32(in + 12);
	h->nproc = get32(in + 16);
	h->rank = get32(in + 20);
	tl = get32(in + 24);
	if (h->role < ROLE_LAUNCHER || h->role > ROLE_PEER)
		return refuse(why, whylen, "unknown role %u", h->role);
	if (h->nnodes < 1 || h->nnodes > SHMCOLL_NODES_MAX || h->node >= h->nnodes)
		return refuse(why, whylen, "node %u of %u out of range", h->node, h->nnodes);
	if (h->nproc < 1 || h->nproc > SHMCOLL_MAX_RANKS)
		return refuse(why, whylen, "%u ranks per node out of range", h->nproc);
	if ((uint64_t)h->nnodes * h->nproc > INT32_MAX || h->rank >= (uint64_t)h->nnodes * h->nproc)
		return refuse(why, whylen, "rank %u out of range", h->rank);
	if (tl < 1 || tl > SHMCOLL_TOKEN_MAX || get32(in + 28) != 0)
		return refuse(why, whylen, "token length %u out of range", tl);
	if (!zeros(in + H_TOKEN + tl, SHMCOLL_TOKEN_MAX - tl) ||
	    !zeros(in + H_RSVD, SHMCOLL_HELLO_BYTES - H_RSVD) ||
	    in[H_ADDR + SHMCOLL_ADDR_MAX - 1] != 0)
		return refuse(why, whylen, "padding is not zero");
	memcpy(h->token, in + H_TOKEN, tl);
	/* A NUL inside the announced length would make two encodings of one
	 * token (and the length field a lie). */
	if (strlen(h->token) != tl || !shmcoll__token_valid(h->token))
		return refuse(why, whylen, "token has characters outside [0-9A-Za-z_-]");
	memcpy(h->addr, in + H_ADDR, SHMCOLL_ADDR_MAX);
	for (i = 0; h->addr[i]; i++)
		if (!addr_char(h->addr[i]))
			return refuse(why, whylen,
			              "address has a character outside [0-9A-Za-z_.:[]-]");
	if (!zeros((const uint8_t *)h->addr + i, SHMCOLL_ADDR_MAX - i))
		return refuse(why, whylen, "address padding is not zero");
	return 0;
}

void shmcoll__frame_encode(uint8_t *out, const struct shmcoll_frame *f)
{
	put32(out, SHMCOLL_FRAME_MAGIC);
	put16(out + 4, SHMCOLL_WIRE_VERSION);
	put16(out + 6, f->type);
	put32(out + 8, f->seq);
	put16(out + 12, f->node);
	put16(out + 14, 0);
	put64(out + 16, f->call);
	put64(out + 24, f->len);
}

int shmcoll__frame_decode(const uint8_t *in, struct shmcoll_frame *f, char *why, size_t whylen)
{
	uint16_t version;

	memset(f, 0, sizeof(*f));
	if (get32(in) != SHMCOLL_FRAME_MAGIC)
		return refuse(why, whylen, "not a shmcoll frame (magic %08x)", get32(in));
	version = get16(in + 4);
	if (version != SHMCOLL_WIRE_VERSION)
		return refuse(why, whylen, "frame of wire version %u, this side speaks %u", version,
		              SHMCOLL_WIRE_VERSION);
	f->type = get16(in + 6);
	f->seq = get32(in + 8);
	f->node = get16(in + 12);
	f->call = get64(in + 16);
	f->len = get64(in + 24);
	if (f->type < FRAME_DATA || f->type > FRAME_TYPE_MAX)
		return refuse(why, whylen, "unknown frame type %u", f->type);
	if (get16(in + 14) != 0)
		return refuse(why, whylen, "reserved frame bytes are not zero");
	if (f->node >= SHMCOLL_NODES_MAX)
		return refuse(why, whylen, "frame from node %u out of range", f->node);
	if (f->len > SHMCOLL_FRAME_MAX_LEN)
		return refuse(why, whylen, "frame length %llu out of range",
		              (unsigned long long)f->len);
	return 0;
}

int shmcoll__addr_split(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon, *h = s;
	size_t hl;
	char *end;
	long p;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= hostlen)
		return -EINVAL;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}
