/* fuzz_frame.c - libFuzzer target for the wire format (lib/frame.c): the
 * hello, the frame header and "host:port". Whatever decodes must encode
 * back to exactly the same bytes (one message, one encoding: a peer cannot
 * smuggle anything in bytes the decoder ignores), and a refusal must leave a
 * terminated reason that fits its buffer.
 *
 * Input: a selector byte (low 2 bits: 0 hello, 1 frame, 2 address, 3 all
 * three on the same bytes), the reason buffer's length - 1 (1 byte), then the
 * bytes (hello and frame: zero-padded to their size; address: a string). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/net/frame.h"
#include "tests/fuzz/fuzz.h"

static void hello(const uint8_t *data, size_t size, size_t whylen)
{
	struct fuzz_in in = {data, size};
	uint8_t buf[SHMCOLL_HELLO_BYTES], out[SHMCOLL_HELLO_BYTES];
	struct shmcoll_hello h, h2;
	char *why = fuzz_errbuf(whylen);
	int rc;

	fuzz_take(&in, buf, sizeof(buf));
	rc = shmcoll__hello_decode(buf, &h, why, whylen);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO, "hello_decode returned %d", rc);
	if (rc < 0) {
		FUZZ_CHECK(fuzz_terminated(why, whylen), "reason not terminated in %zu", whylen);
		goto out;
	}
	FUZZ_CHECK(shmcoll__token_valid(h.token), "accepted token \"%s\"", h.token);
	rc = shmcoll__hello_encode(out, &h);
	FUZZ_CHECK(rc == 0, "a decoded hello does not encode: %d", rc);
	FUZZ_CHECK(!memcmp(out, buf, sizeof(buf)), "hello re-encodes differently (token \"%s\")",
	           h.token);
	rc = shmcoll__hello_decode(out, &h2, NULL, 0);
	FUZZ_CHECK(rc == 0 && !memcmp(&h, &h2, sizeof(h)), "hello decodes differently twice");
out:
	free(why);
}

static void frame(const uint8_t *data, size_t size, size_t whylen)
{
	struct fuzz_in in = {data, size};
	uint8_t buf[SHMCOLL_FRAME_BYTES], out[SHMCOLL_FRAME_BYTES];
	struct shmcoll_frame f;
	char *why = fuzz_errbuf(whylen);
	int rc;

	fuzz_take(&in, buf, sizeof(buf));
	rc = shmcoll__frame_decode(buf, &f, why, whylen);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO, "frame_decode returned %d", rc);
	if (rc < 0) {
		FUZZ_CHECK(fuzz_terminated(why, whylen), "reason not terminated in %zu", whylen);
		goto out;
	}
	FUZZ_CHECK(f.len <= SHMCOLL_FRAME_MAX_LEN && f.type >= FRAME_DATA &&
	               f.type <= FRAME_TYPE_MAX && f.node < SHMCOLL_NODES_MAX,
	           "accepted type %u node %u len %llu", f.type, f.node, (unsigned long long)f.len);
	shmcoll__frame_encode(out, &f);
	FUZZ_CHECK(!memcmp(out, buf, sizeof(buf)), "frame re-encodes differently");
out:
	free(why);
}

static void address(const uint8_t *data, size_t size, size_t hostlen)
{
	struct fuzz_in in = {data, size};
	char *s = fuzz_string(&in), *host = fuzz_errbuf(hostlen), again[256 + 16], host2[256 + 16];
	uint16_t port = 0, port2 = 0;
	int rc;

	rc = shmcoll__addr_split(s, host, hostlen, &port);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL, "addr_split returned %d", rc);
	if (rc < 0)
		goto out;
	FUZZ_CHECK(fuzz_terminated(host, hostlen) && host[0], "host empty or not terminated");
	/* The canonical spelling of what was understood means the same. A
	 * host with brackets of its own has none (the splitter takes any
	 * host text; the resolver refuses such names later). */
	if (strpbrk(host, "[]"))
		goto out;
	snprintf(again, sizeof(again), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	rc = shmcoll__addr_split(again, host2, sizeof(host2), &port2);
	FUZZ_CHECK(rc == 0 && !strcmp(host, host2) && port == port2,
	           "\"%s\" -> %s port %u -> \"%s\" -> %d", s, host, port, again, rc);
out:
	free(host);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t sel, len1;

	if (size < 2)
		return 0;
	sel = data[0] & 3;
	len1 = data[1];
	data += 2;
	size -= 2;
	if (sel == 0 || sel == 3)
		hello(data, size, (size_t)len1 + 1);
	if (sel == 1 || sel == 3)
		frame(data, size, (size_t)len1 + 1);
	if (sel == 2 || sel == 3)
		address(data, size, (size_t)len1 + 1);
	return 0;
}
